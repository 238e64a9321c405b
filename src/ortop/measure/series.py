"""The live series: runs grouped into fixed time buckets, each with its run count, p50 and p99.

The one bucketing ortop has: the monitor feeds it every batch of runs and the views draw what it returns. Runs
arrive in batches (every ~100 ms), so a bucket fills over several batches; its figures are computed once it is
finished and cached, so a snapshot several times a second costs little however long the series is.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Bucket:
    """One time bucket of the live series."""

    t: float            # bucket start, seconds since the monitor started
    runs: int
    p50: float
    p99: float
    marker: bool = False  # a rebuild happened in this bucket


class Series:
    """Buckets of ``width_s`` seconds, the newest ``capacity`` kept; rebuild markers by time.

    Not thread-safe by itself: the monitor calls it under its lock.
    """

    def __init__(self, width_s: float = 0.5, capacity: int = 600):
        if width_s <= 0:
            raise ValueError(f"bucket width must be > 0, got {width_s}")
        self.width_s = width_s
        self.capacity = capacity
        self._chunks: OrderedDict[int, list[np.ndarray]] = OrderedDict()
        self._cache: dict[int, tuple[int, Bucket]] = {}  # index -> (chunks seen, figures)
        self._markers: set[int] = set()

    def add(self, t_s: np.ndarray, latency_ms: np.ndarray) -> None:
        """Add runs that started at ``t_s`` (seconds, the monitor's clock) and took ``latency_ms``."""
        t = np.asarray(t_s, dtype=np.float64)
        lat = np.asarray(latency_ms, dtype=np.float64)
        if t.size == 0:
            return
        idx = np.floor(t / self.width_s).astype(np.int64)
        for i in np.unique(idx):
            self._chunks.setdefault(int(i), []).append(lat[idx == i])
        if len(self._chunks) > self.capacity:
            for old in sorted(self._chunks)[: len(self._chunks) - self.capacity]:
                del self._chunks[old]
                self._cache.pop(old, None)
                self._markers.discard(old)

    def mark(self, t_s: float) -> None:
        """A rebuild at ``t_s``: its bucket is drawn with a marker."""
        self._markers.add(int(t_s // self.width_s))

    def clear(self) -> None:
        """Forget the runs (markers too)."""
        self._chunks.clear()
        self._cache.clear()
        self._markers.clear()

    def buckets(self, now_s: float) -> tuple[Bucket, ...]:
        """The finished buckets in time order; the one still filling at ``now_s`` is left out, since it would
        read as a throughput dip."""
        last_full = int(now_s // self.width_s)
        out = []
        for i in sorted(self._chunks):
            if i >= last_full:
                continue
            chunks = self._chunks[i]
            hit = self._cache.get(i)
            if hit is None or hit[0] != len(chunks):
                lat = np.concatenate(chunks)
                p50, p99 = np.percentile(lat, (50, 99)) if lat.size else (math.nan, math.nan)
                hit = (len(chunks), Bucket(i * self.width_s, int(lat.size), float(p50), float(p99)))
                self._cache[i] = hit
            out.append(replace(hit[1], marker=True) if i in self._markers else hit[1])
        return tuple(out)
