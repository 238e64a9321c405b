"""The collectors' side of the refresh loop: the latest CPU and GPU samples and the short histories drawn from them.

The app samples on frame ticks and closes an averaging period every ``SLOW_S``; the live view draws from the frozen
:class:`Meters` this hands out. Nothing here imports Textual.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortop.tui.panels.spin import average_threads

HISTORY = 240  # samples kept for the GPU and worker-CPU sparklines
# an ortop worker's threads that serve every session (collectors.cpu.thread_role)
WORKER_WIDE = ("main", "reader", "library")


@dataclass(frozen=True)
class Meters:
    """What the collectors showed, for one drawing: the latest CPU and GPU samples, per-thread load and the
    worker's CPU % averaged per slow period, the GPU series, and the frame and slow-period counters the moving
    figures are redrawn on."""

    cpu: Any = None
    gpu: Any = None
    threads: tuple[Any, ...] = ()
    process_history: Sequence[float] = ()
    gpu_history: Mapping[int, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)
    frame: int = -1
    slow: int = -1


class MeterState:
    """The CPU and GPU collectors (either may be None) and what they reported so far."""

    def __init__(self, cpu: Any = None, gpu: Any = None) -> None:
        self.cpu = cpu
        self.gpu = gpu
        self.cpu_sample: Any = None
        self.gpu_sample: Any = None
        self.gpu_history: dict[int, tuple[deque[float], deque[float]]] = {}
        self.process_history: deque[float] = deque(maxlen=HISTORY)  # worker CPU %, one value per slow period
        self.threads_avg: tuple[Any, ...] = ()
        self._window: list[Any] = []  # CPU samples since the last slow period
        self._watched: int | None = None
        # The live session's threads only: a thread that was there before the running configuration's build began
        # (or appeared during a verification, which builds sessions of its own) belongs to another session; the
        # worker's own threads (main, reader) stay.
        self._tids: frozenset[int] = frozenset()   # the threads of the latest sample
        self._stale: set[int] = set()
        self._building = False
        self._verify_base: frozenset[int] | None = None

    def watch(self, pid: int | None) -> None:
        """Point the collectors at the worker process (again after a restart)."""
        if pid != self._watched:
            self._watched = pid
            self._tids, self._stale, self._verify_base = frozenset(), set(), None
            for c in (self.cpu, self.gpu):
                if c is not None:
                    c.watch(pid)

    def follow(self, *, building: bool, verifying: bool) -> None:
        """What the worker is doing, from the snapshot read before the sample: a build under way (its threads are
        new, every thread before it belongs to the sessions it replaces) or a verification (the threads it starts
        go with its sessions)."""
        if building and not self._building:
            self._stale |= self._tids
        self._building = building
        if verifying and self._verify_base is None:
            self._verify_base = self._tids
        elif not verifying and self._verify_base is not None:
            self._stale |= self._tids - self._verify_base
            self._verify_base = None

    def live_threads(self, threads: Sequence[Any]) -> tuple[Any, ...]:
        """``threads`` less those of sessions other than the live one (see :meth:`follow`)."""
        return tuple(t for t in threads if t.tid not in self._stale or getattr(t, "role", "") in WORKER_WIDE)

    def intra_op_threads(self) -> int | None:
        """The intra-op threads the live session runs, counted: its pool's threads plus the caller that runs with
        them (ORT's pool holds intra_op_num_threads − 1); None before a sample of an ortop worker."""
        if self.cpu_sample is None:
            return None
        live = self.live_threads(self.cpu_sample.threads)
        if not any(getattr(t, "role", "").startswith("caller") for t in live):
            return None
        return 1 + sum(1 for t in live if getattr(t, "role", "") == "pool")

    def sample(self) -> None:
        """One CPU and one GPU sample (each covers the time since the previous one)."""
        if self.cpu is not None:
            self.cpu_sample = self.cpu.sample()
            self._window.append(self.cpu_sample)
            self._tids = frozenset(t.tid for t in self.cpu_sample.threads)
            self._stale &= self._tids  # threads that ended need no more hiding
        if self.gpu is not None:
            self.gpu_sample = self.gpu.sample()
            for d in self.gpu_sample.devices:
                mem, util = self.gpu_history.setdefault(d.index, (deque(maxlen=HISTORY), deque(maxlen=HISTORY)))
                mem.append(float(d.mem_used))
                util.append(math.nan if d.util_percent is None else float(d.util_percent))

    def close_period(self) -> None:
        """Average per-thread load and the worker's CPU % over the samples since the last period."""
        if self._window:
            self.threads_avg = average_threads([c.threads for c in self._window])
            procs = [c.process_percent for c in self._window if c.process_percent is not None]
            self.process_history.append(sum(procs) / len(procs) if procs else math.nan)
        self._window = []

    def view(self, frame: int, slow: int) -> Meters:
        """A frozen view for drawing."""
        return Meters(self.cpu_sample, self.gpu_sample, self.live_threads(self.threads_avg),
                      tuple(self.process_history),
                      self.gpu_history, frame, slow)

