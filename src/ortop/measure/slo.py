"""A latency objective (an SLO): its metric of response times and its limit, read from the text a user writes.

Pure numbers, like the rest of this room: the capacity search (:mod:`ortop.engine.capacity`) judges its points by it,
and the headless runner's summary judges a run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortop.errors import UsageError
from ortop.measure.stats import QUANTILE

SLO_METRICS = ("p50", "p90", "p95", "p99", "p999", "mean")


@dataclass(frozen=True)
class Slo:
    """A latency objective: ``metric`` (p50 … p999, or mean) of response time at most ``ms``."""

    metric: str
    ms: float

    @property
    def quantile(self) -> float | None:
        return QUANTILE.get(self.metric)

    def of(self, response_ms: np.ndarray) -> float:
        """This SLO's metric of some response times (ms): their mean or their percentile; nan when there are none."""
        if not np.size(response_ms):
            return math.nan
        q = self.quantile
        return float(np.mean(response_ms)) if q is None else float(np.quantile(response_ms, q))

    def text(self) -> str:
        return f"{self.metric} ≤ {self.ms:g} ms"

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "ms": self.ms}


def parse_slo(text: str) -> Slo:
    """``p99=50ms``, ``p95=20``, ``mean=10ms``, ``p99=0.05s`` → Slo; UsageError (exit 2) naming what is wrong."""
    m = re.fullmatch(r"\s*([a-z0-9.]+)\s*=\s*([0-9.]+(?:e-?\d+)?)\s*(ms|s|us|µs)?\s*", text.lower())
    if not m:
        raise UsageError(f"--slo {text!r}: expected METRIC=VALUE, e.g. p99=50ms, p95=20ms or mean=10ms")
    metric = m.group(1).replace("p99.9", "p999")
    if metric not in SLO_METRICS:
        raise UsageError(f"--slo {text!r}: the metric is one of {', '.join(SLO_METRICS)}")
    try:
        value = float(m.group(2))
    except ValueError:
        raise UsageError(f"--slo {text!r}: {m.group(2)!r} is not a number") from None
    scale = {"ms": 1.0, None: 1.0, "s": 1e3, "us": 1e-3, "µs": 1e-3}[m.group(3)]
    ms = value * scale
    if not ms > 0 or not math.isfinite(ms):
        raise UsageError(f"--slo {text!r}: the limit must be a positive time")
    return Slo(metric, ms)
