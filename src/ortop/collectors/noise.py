"""The host's own contention over a measurement window: hypervisor steal and CPU pressure, read at its start and
its end (what they mean, and what ortop makes of them: :mod:`ortop.measure.noise`).

``/proc/stat``'s first line sums every CPU's time in jiffies: user nice system idle iowait irq softirq steal
(guest and guest_nice follow, already counted in user and nice). Steal over the window is
``Δsteal / Δ(user … steal)``: the share of all CPU time the hypervisor ran someone else while this guest wanted the
CPU. ``/proc/pressure/cpu`` (Linux ≥ 4.20 with PSI enabled) gives ``some … total=µs``: the time at least one
runnable task waited for a CPU; over the window, ``Δtotal / Δwall``. Where PSI is off the file is missing or
reading it fails (EOPNOTSUPP); then the kernel's ``avg10`` is unavailable too, and the figure is None. Nothing
here raises for a host that lacks a file: every reading is None where it cannot be had (macOS, a container
without /proc/pressure, a kernel without steal accounting).

The root directory is a parameter so the tests can point it at a fake ``/proc``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ortop.measure.noise import HostNoise

_STAT_FIELDS = 8  # user nice system idle iowait irq softirq steal


@dataclass(frozen=True)
class _Reading:
    at_s: float                       # monotonic clock
    cpu_jiffies: tuple[int, int] | None  # (steal, total) summed over all CPUs
    pressure_total_us: int | None     # PSI "some" total
    pressure_avg10: float | None      # PSI "some" avg10, %


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def read_cpu_jiffies(root: Path) -> list[int] | None:
    """The first eight fields of ``root/stat``'s ``cpu`` line (every CPU's user nice system idle iowait irq softirq
    steal, in jiffies), as many as there are; None where the file or the line cannot be read."""
    text = _read(root / "stat")
    if text is None:
        return None
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                return [int(v) for v in parts[1:_STAT_FIELDS + 1]]
            except ValueError:
                return None
    return None


def read_steal(root: Path) -> tuple[int, int] | None:
    """(steal, total) jiffies over all CPUs from ``root/stat``; None where missing or without a steal field."""
    values = read_cpu_jiffies(root)
    return (values[7], sum(values)) if values is not None and len(values) == _STAT_FIELDS else None


def read_pressure(root: Path) -> tuple[int | None, float | None]:
    """PSI "some" (total µs, avg10 %) from ``root/pressure/cpu``; None for each that cannot be read."""
    text = _read(root / "pressure" / "cpu")
    if text is None:
        return None, None
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "some":
            fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            total: int | None = None
            avg10: float | None = None
            try:
                total = int(fields["total"])
            except (KeyError, ValueError):
                pass
            try:
                avg10 = float(fields["avg10"])
            except (KeyError, ValueError):
                pass
            return total, avg10
    return None, None


class NoiseSampler:
    """Reads the host's contention at ``start()`` and ``stop()``; ``stop()`` returns the window's
    :class:`~ortop.measure.noise.HostNoise` (steal and CPU pressure; the runs' slow share is added by the caller,
    ``HostNoise.judged``)."""

    def __init__(self, root: str | Path = "/proc", clock: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.clock = clock
        self._start: _Reading | None = None

    def _reading(self) -> _Reading:
        total, avg10 = read_pressure(self.root)
        return _Reading(self.clock(), read_steal(self.root), total, avg10)

    def start(self) -> None:
        self._start = self._reading()

    def stop(self) -> HostNoise:
        if self._start is None:
            raise RuntimeError("NoiseSampler.stop() before start()")
        a, b = self._start, self._reading()
        self._start = None
        return HostNoise(steal_pct=_steal_pct(a, b), cpu_pressure_pct=_pressure_pct(a, b))


def _steal_pct(a: _Reading, b: _Reading) -> float | None:
    if a.cpu_jiffies is None or b.cpu_jiffies is None:
        return None
    steal, total = b.cpu_jiffies[0] - a.cpu_jiffies[0], b.cpu_jiffies[1] - a.cpu_jiffies[1]
    if total <= 0 or steal < 0:  # no tick in the window, or counters reset
        return None
    return 100.0 * steal / total


def _pressure_pct(a: _Reading, b: _Reading) -> float | None:
    """Δtotal / Δwall; the kernel's avg10 at the end where the totals are missing or the window is empty."""
    wall_us = (b.at_s - a.at_s) * 1e6
    if a.pressure_total_us is not None and b.pressure_total_us is not None and wall_us > 0:
        stalled = b.pressure_total_us - a.pressure_total_us
        if stalled >= 0:
            return min(100.0, 100.0 * stalled / wall_us)
    return b.pressure_avg10
