"""Memory figures: the worker's resident memory (now, per configuration's peak, growth), the host's, and the slow
leak check over a configuration's RSS series.

The worker reads its own RSS from ``/proc/self/statm`` at every flush of samples (~250 ms) and sends it with the
samples: a configuration's peak is then followed even in a headless run that takes a single snapshot at its end
(a sampler in this process, reading at snapshot time, would see two RSS values a second in the TUI and one in a
whole headless run). The host's figures are read at snapshot time (``/proc/meminfo`` through psutil).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ortop.present import MIB

# The leak check: a series of at least LEAK_MIN_S seconds, cut into LEAK_SEGMENTS; a leak is RSS rising from
# segment to segment in most steps (not a step up and a plateau, as an arena growing to its working set does),
# by at least LEAK_MIN_MB overall and LEAK_MIN_FRACTION of the starting RSS.
LEAK_MIN_S = 20.0
LEAK_SEGMENTS = 8
LEAK_RISING_STEPS = 0.75
LEAK_MIN_MB = 4.0
LEAK_MIN_FRACTION = 0.01


@dataclass(frozen=True)
class Leak:
    """RSS rising steadily: ``rise_mb`` over ``span_s`` seconds."""

    rise_mb: float
    span_s: float
    start_mb: float

    @property
    def mb_per_min(self) -> float:
        return self.rise_mb / self.span_s * 60 if self.span_s > 0 else math.nan

    def text(self) -> str:
        return (f"RSS rising steadily: +{self.rise_mb:.1f} MB over {self.span_s:.0f} s "
                f"({self.mb_per_min:.1f} MB/min, from {self.start_mb:.0f} MB) — a slow leak?")


def leak_check(t_s: Sequence[float], rss_bytes: Sequence[float]) -> Leak | None:
    """A slow leak in an RSS series (times in seconds, RSS in bytes), or None.

    The series is cut into equal time segments; each segment's median stands for it. A leak rises in at least
    three quarters of the steps between segments and by at least 4 MB and 1 % overall; a one-off step (an arena
    growing, a cache filling) followed by a plateau rises in one step only, and noise rises in about half.
    """
    n = min(len(t_s), len(rss_bytes))
    if n < 2 * LEAK_SEGMENTS:
        return None
    t0, t1 = float(t_s[0]), float(t_s[n - 1])
    span = t1 - t0
    if span < LEAK_MIN_S:
        return None
    buckets: list[list[float]] = [[] for _ in range(LEAK_SEGMENTS)]
    for i in range(n):
        k = min(LEAK_SEGMENTS - 1, int((float(t_s[i]) - t0) / span * LEAK_SEGMENTS))
        buckets[k].append(float(rss_bytes[i]))
    meds = [sorted(b)[len(b) // 2] for b in buckets if b]
    if len(meds) < LEAK_SEGMENTS - 1:
        return None
    rising = sum(1 for a, b in zip(meds, meds[1:]) if b > a)
    falling = sum(1 for a, b in zip(meds, meds[1:]) if b < a)
    rise = meds[-1] - meds[0]
    steps = len(meds) - 1
    if rising < LEAK_RISING_STEPS * steps or falling > 1:
        return None
    if rise < LEAK_MIN_MB * MIB or rise < LEAK_MIN_FRACTION * meds[0]:
        return None
    return Leak(rise / MIB, span, meds[0] / MIB)


# Growth across rebuilds: the worker's RSS right after building the same settings again, against the first time
# it built them. An arena or a cache fills once; a session that is never freed adds its whole footprint on every
# build. REBUILD_MIN_MB and REBUILD_MIN_FRACTION keep allocator slack (a few MB a build) out.
REBUILD_MIN_MB = 64.0
REBUILD_MIN_FRACTION = 0.25


@dataclass(frozen=True)
class RebuildGrowth:
    """The worker holds more after building the same settings again: ``first_mb`` after their first build,
    ``now_mb`` after their latest, ``builds`` of them in this worker, ``rebuilds`` builds of any settings."""

    first_mb: float
    now_mb: float
    builds: int
    rebuilds: int

    def text(self) -> str:
        return (f"RSS after building the same settings again: {self.first_mb:.0f} → {self.now_mb:.0f} MB "
                f"(+{self.now_mb - self.first_mb:.0f} MB over {self.rebuilds} rebuilds, {self.builds} of these "
                "settings) — rebuilds are not freeing what they built")


def rebuild_growth(builds: Sequence[tuple[str, int]]) -> RebuildGrowth | None:
    """Growth across rebuilds in one worker, from (settings key, RSS right after the build) in build order, or
    None. Each settings' latest build is compared with its first; the largest rise that passes both floors counts."""
    first: dict[str, tuple[int, int]] = {}  # key -> (index, rss) of its first build
    found: RebuildGrowth | None = None
    counts: dict[str, int] = {}
    for i, (key, rss) in enumerate(builds):
        counts[key] = counts.get(key, 0) + 1
        if key not in first:
            first[key] = (i, rss)
            continue
        rise = rss - first[key][1]
        if rise >= REBUILD_MIN_MB * MIB and rise >= REBUILD_MIN_FRACTION * first[key][1]:
            if found is None or rise > (found.now_mb - found.first_mb) * MIB:
                found = RebuildGrowth(first[key][1] / MIB, rss / MIB, counts[key], i - first[key][0])
    return found


class WorkerMemory:
    """One worker's memory across its builds: its RSS after the first build, its low point since, and the RSS
    after each build by settings (bounded: a working day of rebuilds keeps the last MAX_BUILDS)."""

    MAX_BUILDS = 256

    def __init__(self) -> None:
        self.start: int | None = None
        self.low: int | None = None
        self.builds: list[tuple[str, int]] = []
        self.growth: RebuildGrowth | None = None

    def sample(self, rss: int) -> None:
        if rss >= 0 and self.start is not None:
            self.low = rss if self.low is None else min(self.low, rss)

    def built(self, key: str, rss: int) -> RebuildGrowth | None:
        """Record a build; the growth across rebuilds when it is found now for the first time (to log once)."""
        if rss < 0:
            return None
        if self.start is None:
            self.start = rss
        self.sample(rss)
        self.builds.append((key, rss))
        del self.builds[:-self.MAX_BUILDS]
        if self.growth is not None:
            return None
        self.growth = rebuild_growth(self.builds)
        return self.growth


@dataclass(frozen=True)
class MemoryInfo:
    """The memory figures of a snapshot (bytes; None where unknown)."""

    rss: int | None = None               # the worker's RSS at its latest flush
    rss_peak: int | None = None          # the running configuration's peak since it was built (warm-up done)
    rss_built: int | None = None         # the worker's RSS right after the session was built and warmed
    host_total: int | None = None
    host_available: int | None = None
    series: tuple[float, ...] = ()       # the running configuration's RSS (bytes), about one value a second
    leak: Leak | None = None
    rss_start: int | None = None         # the worker's RSS after its first build (its start, warm)
    rss_low: int | None = None           # the worker's lowest RSS since then
    rebuild: RebuildGrowth | None = None  # growth across rebuilds of the same settings, once found

    @property
    def since_start(self) -> int | None:
        """RSS now against the worker's start: what every build and run since has kept."""
        if self.rss is None or self.rss_start is None:
            return None
        return self.rss - self.rss_start

    @property
    def growth(self) -> int | None:
        """RSS now against right after the build: what running has added (arena growth, caches, a leak)."""
        if self.rss is None or self.rss_built is None:
            return None
        return self.rss - self.rss_built

    @property
    def host_used(self) -> int | None:
        if self.host_total is None or self.host_available is None:
            return None
        return self.host_total - self.host_available


def host_memory() -> tuple[int | None, int | None]:
    """(total, available) bytes of host memory; (None, None) when it cannot be read."""
    try:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available)
    except Exception:  # psutil missing or refused: the figure is optional
        pass
    try:
        fields: dict[str, int] = {}
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                fields[key] = int(rest.split()[0]) * 1024
        return fields.get("MemTotal"), fields.get("MemAvailable")
    except (OSError, ValueError, IndexError):
        return None, None
