"""How busy the host is with work that is not ortop's: every CPU's busy share over a window, less what ortop's own
processes (this one and the workers it started) used in it.

The doctor reads it to say when its measurements ran on a host that other processes keep busy (a shared VM, a
build beside the service): every figure then carries their contention, and a verdict from interleaved blocks holds
where an absolute latency does not. The live view has the same figure already (its CPU collector's system share, the
worker's and its own, :meth:`HostLoad.from_cpu_sample`); ``ortop doctor`` takes it over its own run with
:class:`LoadSampler`.

``/proc/stat``'s first line sums every CPU's time in jiffies: user nice system idle iowait irq softirq steal. Busy is
everything but idle and iowait. ortop's share is the CPU time of this process and of its children (the live ones
read through psutil, the ones already reaped through this process's own ``children_*`` times, where the kernel adds
a child's time when it is waited for), over the window's wall time times the CPUs. Every reading is None where it
cannot be had (no /proc/stat: macOS); nothing here raises.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortop.collectors.noise import read_cpu_jiffies

_IDLE, _IOWAIT = 3, 4     # in /proc/stat's cpu line: user nice system idle iowait irq softirq steal


@dataclass(frozen=True)
class HostLoad:
    """The host's CPUs over a window: all busy, ortop's share, and so the others' (percent of all CPUs)."""

    cpus: int
    busy_pct: float       # every process, all CPUs together
    ours_pct: float       # ortop's own processes (the monitor or the doctor, and their workers)
    window_s: float

    @property
    def others_pct(self) -> float:
        """What other processes used, as a share of all CPUs (never below 0: the two readings are not taken at
        the same instant)."""
        return max(0.0, min(100.0, self.busy_pct - self.ours_pct))

    @classmethod
    def from_cpu_sample(cls, sample: Any, window_s: float = float("nan")) -> HostLoad | None:
        """From a CPU collector's sample (:class:`ortop.collectors.cpu.CpuSample`): the system share, less the
        watched worker's and the calling process's (each a share of one core). None without a sample."""
        if sample is None or not sample.per_core:
            return None
        n = len(sample.per_core)
        ours = ((sample.process_percent or 0.0) + (sample.self_percent or 0.0)) / n
        return cls(n, float(sample.system_percent), min(100.0, ours), window_s)

    def as_dict(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "busy_pct": round(self.busy_pct, 1), "ortop_pct": round(self.ours_pct, 1),
                "others_pct": round(self.others_pct, 1),
                "window_s": round(self.window_s, 1) if self.window_s == self.window_s else None}


def read_jiffies(root: Path) -> tuple[int, int] | None:
    """(busy, total) jiffies over all CPUs from ``root/stat``; None where it cannot be read."""
    values = read_cpu_jiffies(root)
    if values is None or len(values) < _IOWAIT + 1:
        return None
    total = sum(values)
    return total - values[_IDLE] - values[_IOWAIT], total


def own_cpu_s() -> float:
    """CPU seconds of this process, its reaped children and its live descendants (ortop's workers)."""
    import psutil

    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
        except (psutil.Error, OSError):
            continue  # gone since listed: its time reaches children_* once it is waited for
        total += c.user + c.system
    return total


class LoadSampler:
    """Reads the host's CPUs at ``start()`` and ``stop()``; ``stop()`` returns the window's :class:`HostLoad`, or
    None where /proc/stat cannot be read. ``root``, ``ours`` and ``clock`` are the edges a test replaces."""

    def __init__(self, root: str | Path = "/proc", ours: Callable[[], float] = own_cpu_s,
                 clock: Callable[[], float] = time.monotonic, cpus: int | None = None) -> None:
        self.root = Path(root)
        self.ours = ours
        self.clock = clock
        self.cpus = cpus or os.cpu_count() or 1
        self._start: tuple[float, tuple[int, int] | None, float] | None = None

    def start(self) -> None:
        self._start = (self.clock(), read_jiffies(self.root), self.ours())

    def stop(self) -> HostLoad | None:
        if self._start is None:
            raise RuntimeError("LoadSampler.stop() before start()")
        (t0, j0, o0), self._start = self._start, None
        t1, j1, o1 = self.clock(), read_jiffies(self.root), self.ours()
        wall = t1 - t0
        if j0 is None or j1 is None or wall <= 0 or j1[1] <= j0[1]:
            return None
        busy = 100.0 * (j1[0] - j0[0]) / (j1[1] - j0[1])
        ours = 100.0 * max(0.0, o1 - o0) / (wall * self.cpus)
        return HostLoad(self.cpus, busy, min(100.0, ours), wall)
