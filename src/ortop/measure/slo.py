"""A latency objective (an SLO): its metric of response times and its limit, read from the text a user writes.

Pure numbers, like the rest of this room: the capacity search (:mod:`ortop.engine.answers.capacity`) judges its points
by it, and the headless runner's summary judges a run.

An SLO's metric read from a sample carries its interval (:func:`metric_figure`): for a percentile the
distribution-free interval of order statistics (the number of runs below the true percentile is binomial, whatever
the latency distribution), for a mean the normal one. A percentile is read from no fewer than :func:`runs_needed`
runs (p99: 100; below, it is the slowest run under another name), and its interval says how far that goes: at 100
runs a p99's lower end is the 97th run but it has no upper end (the slowest of 100 runs is above the p99 only with
probability 1 − 0.99¹⁰⁰ = 63 %); it gets one from 368 runs on at 95 %.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortop.errors import UsageError
from ortop.measure.stats import QUANTILE, json_num
from ortop.measure.stats import runs_needed as _percentile_runs

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

    def runs_needed(self) -> int:
        """The fewest requests this SLO's metric is read from (:func:`runs_needed`)."""
        return runs_needed(self.metric)

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


# ---- the metric read from a sample, with its interval -------------------------------------------------------------
FIGURE_CONFIDENCE = 0.95   # the interval of a metric read from a sample (two-sided)
MEAN_RUNS = 10             # the fewest runs a mean is read from: enough for its normal interval to mean something
EXACT_MAX = 200_000        # above this many runs the binomial's ranks come from its normal approximation


def runs_needed(metric: str) -> int:
    """The fewest runs ``metric`` is read from: a percentile at least one run beyond it (p99: 100, p90: 10,
    :func:`ortop.measure.stats.runs_needed`); a mean MEAN_RUNS."""
    return _percentile_runs(metric) if metric in QUANTILE else MEAN_RUNS


def _binomial_cdf(n: int, q: float) -> np.ndarray:
    """``P[Binom(n, q) ≤ k]`` for k = 0 … n, from the log-pmf (its coefficients as a cumulative sum of logs)."""
    k = np.arange(n + 1, dtype=float)
    log_c = np.concatenate(([0.0], np.cumsum(np.log(n - k[:-1]) - np.log(k[1:]))))
    log_pmf = log_c + k * math.log(q) + (n - k) * math.log1p(-q)
    pmf = np.exp(log_pmf - log_pmf.max())
    cdf = np.cumsum(pmf)
    return cdf / cdf[-1]


def quantile_ranks(n: int, q: float, confidence: float = FIGURE_CONFIDENCE) -> tuple[int, int]:
    """The ranks (1-based) ``l, u`` of the order statistics that hold the ``q`` quantile of the population with
    probability at least ``confidence``: ``x(l) ≤ ξ_q ≤ x(u)``. The count ``B`` of runs at or below ``ξ_q`` is
    Binom(n, q); ``l`` is the largest rank with ``P[B < l] ≤ α/2``, ``u`` the smallest with ``P[B < u] ≥ 1 − α/2``.
    0 for ``l``: no lower end; ``n + 1`` for ``u``: no upper end (too few runs beyond the quantile)."""
    if not 0 < q < 1:
        raise ValueError(f"q must be a fraction in (0, 1); got {q!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be a fraction in (0, 1); got {confidence!r}")
    if n <= 0:
        return 0, 1
    half = (1 - confidence) / 2
    if n > EXACT_MAX:  # the binomial's normal approximation, with a continuity margin of one rank each side
        from statistics import NormalDist

        z = NormalDist().inv_cdf(1 - half)
        sd = math.sqrt(n * q * (1 - q))
        return max(0, math.floor(n * q - z * sd)), min(n + 1, math.ceil(n * q + z * sd) + 1)
    cdf = _binomial_cdf(n, q)                       # cdf[k] = P[B ≤ k]; P[B < l] = cdf[l − 1]
    lo = int(np.count_nonzero(cdf[:n] <= half))     # cdf rises: the ranks l − 1 = 0 … with cdf ≤ α/2, counted
    hi = int(np.argmax(cdf >= 1 - half)) + 1        # the first k with cdf ≥ 1 − α/2, as a rank
    return lo, hi


@dataclass(frozen=True)
class MetricFigure:
    """An SLO's metric read from ``runs`` runs, with its interval at ``confidence`` (``lo`` −inf: no lower end,
    ``hi`` inf: no upper end) and the runs it needs (:func:`runs_needed`)."""

    metric: str
    ms: float
    lo: float
    hi: float
    runs: int
    needed: int
    confidence: float = FIGURE_CONFIDENCE

    @property
    def enough(self) -> bool:
        """Read from at least the runs its metric needs."""
        return self.runs >= self.needed

    def above(self, slo: Slo) -> bool:
        """The whole interval lies above the SLO's limit: the metric misses it, at this confidence."""
        return self.lo > slo.ms

    def below(self, slo: Slo) -> bool:
        """The whole interval lies at or below the SLO's limit."""
        return self.hi <= slo.ms

    def straddles(self, slo: Slo) -> bool:
        """The interval holds the SLO's limit: the sample cannot tell which side the metric is on."""
        return not (self.above(slo) or self.below(slo))

    def interval_text(self) -> str:
        """``95 % interval 80–90 ms`` (``–∞`` without an upper end, ``0–`` without a lower one)."""
        lo = f"{self.lo:.3g}" if math.isfinite(self.lo) else "0"
        hi = f"{self.hi:.3g}" if math.isfinite(self.hi) else "∞"
        return f"{self.confidence * 100:g} % interval {lo}–{hi} ms"

    def text(self) -> str:
        """``83 ms (95 % interval 80–∞ ms, 120 runs)``; a figure read from too few runs says so."""
        short = "" if self.enough else f" of the {self.needed} a {self.metric} needs"
        return f"{self.ms:.3g} ms ({self.interval_text()}, {self.runs:,} runs{short})"

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "ms": json_num(self.ms), "interval": [json_num(self.lo), json_num(self.hi)],
                "confidence": self.confidence, "runs": self.runs, "runs_needed": self.needed,
                "enough": self.enough}


def metric_figure(slo: Slo, sample_ms: np.ndarray, confidence: float = FIGURE_CONFIDENCE) -> MetricFigure:
    """``slo``'s metric of ``sample_ms`` with its interval: a percentile's distribution-free order-statistic
    interval (:func:`quantile_ranks`), a mean's normal one (mean ± z · sd / √n). Without runs: nan, unbounded."""
    a = np.sort(np.asarray(sample_ms, dtype=np.float64).ravel())
    n = int(a.size)
    needed = runs_needed(slo.metric)
    if n == 0:
        return MetricFigure(slo.metric, math.nan, -math.inf, math.inf, 0, needed, confidence)
    q = slo.quantile
    if q is None:
        from statistics import NormalDist

        mean = float(a.mean())
        if n < 2:
            return MetricFigure(slo.metric, mean, -math.inf, math.inf, n, needed, confidence)
        half = NormalDist().inv_cdf((1 + confidence) / 2) * float(a.std(ddof=1)) / math.sqrt(n)
        return MetricFigure(slo.metric, mean, mean - half, mean + half, n, needed, confidence)
    lo_rank, hi_rank = quantile_ranks(n, q, confidence)
    lo = float(a[lo_rank - 1]) if lo_rank >= 1 else -math.inf
    hi = float(a[hi_rank - 1]) if hi_rank <= n else math.inf
    return MetricFigure(slo.metric, slo.of(a), lo, hi, n, needed, confidence)
