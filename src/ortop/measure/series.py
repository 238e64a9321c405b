"""The live series: runs grouped into fixed time buckets, each with its run count, p50 and p99.

The one bucketing ortop has: the monitor feeds it every batch of runs and the views draw what it returns. Runs
arrive in batches (every ~250 ms), so a bucket fills over several batches; its figures are computed once it is
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


CLOSE_AFTER = 4  # a bucket this many buckets older than the newest run's is closed (batches come every ~250 ms)


class Series:
    """Buckets of ``width_s`` seconds, the newest ``capacity`` kept; rebuild markers by time.

    Not thread-safe by itself: the monitor calls it under its lock.
    """

    def __init__(self, width_s: float = 0.5, capacity: int = 600):
        if width_s <= 0:
            raise ValueError(f"bucket width must be > 0, got {width_s}")
        self.width_s = width_s
        self.capacity = capacity
        self._chunks: OrderedDict[int, list[np.ndarray]] = OrderedDict()  # buckets still filling: raw latencies
        self._cache: dict[int, tuple[int, Bucket]] = {}  # index -> (chunks seen, figures)
        self._done: dict[int, Bucket] = {}  # closed buckets: their figures only (raw latencies freed)
        self._newest = -(2**62)
        self._markers: set[int] = set()

    def add(self, t_s: np.ndarray, latency_ms: np.ndarray) -> None:
        """Add runs that started at ``t_s`` (seconds, the monitor's clock) and took ``latency_ms``."""
        t = np.asarray(t_s, dtype=np.float64)
        lat = np.asarray(latency_ms, dtype=np.float64)
        if t.size == 0:
            return
        idx = np.floor(t / self.width_s).astype(np.int64)
        for i in np.unique(idx):
            i = int(i)
            part = lat[idx == i]
            done = self._done.get(i)
            if done is not None:  # a straggler for a closed bucket: counted, its percentiles stay as they were
                self._done[i] = replace(done, runs=done.runs + int(part.size))
                continue
            self._chunks.setdefault(i, []).append(part)
        self._newest = max(self._newest, int(idx.max()))
        self._close(self._newest - CLOSE_AFTER)
        excess = len(self._chunks) + len(self._done) - self.capacity  # disjoint: a closed bucket leaves _chunks
        if excess <= 0:
            return
        for old in sorted({*self._chunks, *self._done})[:excess]:
            self._chunks.pop(old, None)
            self._done.pop(old, None)
            self._cache.pop(old, None)
            self._markers.discard(old)

    def _close(self, through: int) -> None:
        """Buckets up to index ``through`` get no more runs: keep their figures and free their latencies (a fast
        model sends ~100 000 runs a second: kept raw for the whole series, that is hundreds of MB)."""
        for i in [i for i in self._chunks if i <= through]:
            self._done[i] = self._figures(i)
            del self._chunks[i]
            self._cache.pop(i, None)

    def _figures(self, i: int) -> Bucket:
        chunks = self._chunks[i]
        hit = self._cache.get(i)
        if hit is None or hit[0] != len(chunks):
            lat = np.concatenate(chunks)
            p50, p99 = np.percentile(lat, (50, 99)) if lat.size else (math.nan, math.nan)
            hit = (len(chunks), Bucket(i * self.width_s, int(lat.size), float(p50), float(p99)))
            self._cache[i] = hit
        return hit[1]

    def mark(self, t_s: float) -> None:
        """A rebuild at ``t_s``: its bucket is drawn with a marker."""
        self._markers.add(int(t_s // self.width_s))

    def clear(self) -> None:
        """Forget the runs (markers too)."""
        self._chunks.clear()
        self._cache.clear()
        self._done.clear()
        self._newest = -(2**62)
        self._markers.clear()

    def buckets(self, now_s: float) -> tuple[Bucket, ...]:
        """The finished buckets in time order; the one still filling at ``now_s`` is left out, since it would
        read as a throughput dip."""
        last_full = int(now_s // self.width_s)
        out = []
        for i in sorted({*self._chunks, *self._done}):
            if i >= last_full:
                continue
            b = self._done[i] if i in self._done else self._figures(i)
            out.append(replace(b, marker=True) if i in self._markers else b)
        return tuple(out)
