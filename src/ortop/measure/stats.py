"""Pure statistics over run samples: ring buffers, percentiles, the median's interval and time buckets.

Nothing here touches a process, a clock or a screen, so every figure ortop shows can be tested on plain arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortop.measure.series import Bucket

__all__ = ["Bucket", "LatencyStats", "Ring", "json_num", "latency_stats", "median_ci", "num_or_nan", "spark",
           "t95"]

PERCENTILES = (50, 90, 95, 99, 99.9)
T95 = {3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131,
       20: 2.086, 30: 2.042}


class Ring:
    """A fixed-size ring of float64 rows (one column per field) that grows by whole batches.

    Appending is a numpy slice copy, so a batch of thousands of runs costs microseconds. The buffer's memory is
    taken whole at the start: np.zeros maps its pages as rows land in them, and a ring filled at 20 runs a second
    (50 000 rows in 40 minutes) read as a process growing for 40 minutes.
    """

    def __init__(self, capacity: int, width: int):
        self.capacity = capacity
        self._buf = np.full((capacity, width), 0.0)  # written, so resident now (see the class docstring)
        self._n = 0  # rows appended (set back to capacity when one batch fills the whole ring)

    def __len__(self) -> int:
        return min(self._n, self.capacity)

    def clear(self) -> None:
        self._n = 0

    def extend(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self._buf.shape[1]:
            raise ValueError(f"expected rows of width {self._buf.shape[1]}, got shape {rows.shape}")
        if len(rows) >= self.capacity:
            self._buf[:] = rows[-self.capacity:]
            self._n = self.capacity  # the oldest kept row now sits at index 0
            return
        start = self._n % self.capacity
        end = start + len(rows)
        if end <= self.capacity:
            self._buf[start:end] = rows
        else:
            k = self.capacity - start
            self._buf[start:] = rows[:k]
            self._buf[: end - self.capacity] = rows[k:]
        self._n += len(rows)

    def view(self) -> np.ndarray:
        """The rows in arrival order (a copy)."""
        n = len(self)
        if self._n <= self.capacity:
            return self._buf[:n].copy()
        start = self._n % self.capacity
        return np.concatenate([self._buf[start:], self._buf[:start]])

    def shrink(self, spare: int = 0) -> None:
        """Keep the rows, in arrival order, and give back the room for more but ``spare`` rows: a ring that will
        get few more runs need not hold a full ring's memory."""
        rows = self.view()
        capacity = max(1, len(rows) + max(0, int(spare)))
        if capacity >= self.capacity:
            return
        self._buf = np.zeros((capacity, self._buf.shape[1]), dtype=np.float64)
        self._buf[: len(rows)] = rows
        self.capacity = capacity
        self._n = len(rows)

    def kept(self) -> np.ndarray:
        """The rows in the buffer's order, which is not arrival order once the ring has turned over: a read-only
        view, no copy. For figures that do not depend on order (percentiles, means, counts by a column): a copy of
        a full ring is megabytes, and the live view reads the figures every second."""
        v = self._buf[: len(self)]
        v.flags.writeable = False
        return v

    def tail(self, n: int) -> np.ndarray:
        """The newest ``n`` rows (every row when fewer are kept) in arrival order: a copy of those rows only."""
        k = min(max(int(n), 0), len(self))
        end = (self._n - 1) % self.capacity + 1 if self._n else 0  # one past the newest row
        if end >= k:
            return self._buf[end - k:end].copy()
        return np.concatenate([self._buf[self.capacity - (k - end):], self._buf[:end]])

    def column(self, k: int) -> np.ndarray:
        """Column ``k`` of the rows in arrival order: a copy of that column only."""
        n = len(self)
        if self._n <= self.capacity:
            return self._buf[:n, k].copy()
        start = self._n % self.capacity
        return np.concatenate([self._buf[start:, k], self._buf[:start, k]])

    def at(self, i: int) -> np.ndarray:
        """Row ``i`` in arrival order (negative: from the newest), a copy; IndexError past the kept rows."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} of {n}")
        oldest = self._n % self.capacity if self._n > self.capacity else 0
        return self._buf[(oldest + i % n) % self.capacity].copy()


@dataclass(frozen=True)
class LatencyStats:
    """Latency figures over a window, in milliseconds."""

    runs: int = 0
    mean: float = math.nan
    p50: float = math.nan
    p90: float = math.nan
    p95: float = math.nan
    p99: float = math.nan
    p999: float = math.nan
    min: float = math.nan
    max: float = math.nan

    def as_dict(self, std: float | None = None) -> dict[str, float | None]:
        """The one JSON shape of a latency's figures (ms): mean, p50, p90, p95, p99, p999, min, max, and ``std``
        after the mean when it is given (the summary's service and queue times)."""
        out = {"mean": json_num(self.mean)}
        if std is not None:
            out["std"] = json_num(std)
        return out | {k: json_num(getattr(self, k)) for k in ("p50", "p90", "p95", "p99", "p999", "min", "max")}


QUANTILE = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}  # each percentile's share of runs

# The live view's recent window (its headline figures): widened in whole seconds, up to WINDOW_MAX_S, until it holds
# WINDOW_MIN_RUNS runs, since a headline p99 over a few runs is one run; a window of fewer says how many it holds.
WINDOW_MIN_RUNS = 20
WINDOW_MAX_S = 30.0


def runs_needed(key: str) -> int:
    """The fewest runs a percentile can be read from: at least one run beyond it (p99: 100, p999: 1,000). Below,
    it is the slowest run under another name."""
    return math.ceil(1 / (1 - QUANTILE[key]) - 1e-9)


def resolved(key: str, runs: int) -> bool:
    """Whether ``runs`` runs are enough for the percentile ``key`` (``mean``, ``min``, ``max``: always)."""
    return key not in QUANTILE or runs >= runs_needed(key)




def latency_stats(latency_ms: np.ndarray) -> LatencyStats:
    """Mean, min, max and the p50…p99.9 percentiles (linear interpolation, as numpy does by default)."""
    a = np.asarray(latency_ms, dtype=np.float64)
    if a.size == 0:
        return LatencyStats()
    p50, p90, p95, p99, p999 = np.percentile(a, PERCENTILES)
    return LatencyStats(int(a.size), float(a.mean()), float(p50), float(p90), float(p95), float(p99), float(p999),
                        float(a.min()), float(a.max()))


def median_ci(a: np.ndarray, z: float = 1.96) -> tuple[float, float]:
    """A distribution-free ~95 % confidence interval for the median from order statistics.

    Ranks n/2 ± z·√n/2 of the sorted sample (the binomial approximation); no assumption about the latency
    distribution, which is skewed and often bimodal.
    """
    s = np.sort(np.asarray(a, dtype=np.float64))
    n = s.size
    if n == 0:
        return (math.nan, math.nan)
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return (float(s[lo]), float(s[hi]))


SPARK_GLYPHS = " ▁▂▃▄▅▆▇█"
_SPARK_ARRAY = np.array(list(SPARK_GLYPHS))


def spark(values: list[float] | np.ndarray, width: int, lo: float | None = None, hi: float | None = None) -> str:
    """Block-character sparkline of the last ``width`` values; NaN shows as a blank.

    Drawing the series as a plain string is several times cheaper per refresh than a Sparkline widget, which
    matters when the UI shares two cores with the model it measures.
    """
    vals = np.asarray(values, dtype=np.float64)[-width:] if width > 0 else np.zeros(0)
    if vals.size == 0:
        return ""
    finite = vals[np.isfinite(vals)]
    if finite.size == 0:
        return " " * vals.size
    lo = float(finite.min()) if lo is None else lo
    hi = float(finite.max()) if hi is None else hi
    span = hi - lo
    top = len(SPARK_GLYPHS) - 1
    if span > 0:
        with np.errstate(invalid="ignore"):
            levels = np.clip(np.round((vals - lo) / span * (top - 1)) + 1, 1, top)
    else:
        levels = np.full(vals.shape, 4.0)
    levels = np.where(np.isfinite(vals), levels, 0).astype(np.int64)
    return "".join(_SPARK_ARRAY[levels])


def t95(df: int) -> float:
    """Student's t for a two-sided 95 % interval (df ≥ 1); 1.96 beyond the table."""
    if df <= 2:
        return {1: 12.706, 2: 4.303}.get(df, 12.706)
    keys = [k for k in sorted(T95) if k <= df]
    return T95[keys[-1]] if df <= 30 else 1.96


def json_num(x: float | None, digits: int = 4) -> float | None:
    """A figure as a result's ``as_dict`` writes it: rounded to ``digits`` decimals, None for a missing, nan or
    infinite one (JSON has no nan)."""
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def num_or_nan(x: Any) -> float:
    """A figure read back from such a dict: nan where it is None."""
    return float(x) if x is not None else math.nan
