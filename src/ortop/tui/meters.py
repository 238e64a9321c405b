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

    def watch(self, pid: int | None) -> None:
        """Point the collectors at the worker process (again after a restart)."""
        if pid != self._watched:
            self._watched = pid
            for c in (self.cpu, self.gpu):
                if c is not None:
                    c.watch(pid)

    def sample(self) -> None:
        """One CPU and one GPU sample (each covers the time since the previous one)."""
        if self.cpu is not None:
            self.cpu_sample = self.cpu.sample()
            self._window.append(self.cpu_sample)
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
        return Meters(self.cpu_sample, self.gpu_sample, self.threads_avg, tuple(self.process_history),
                      self.gpu_history, frame, slow)

