"""What the live session has measured of a configuration with nothing queued: its closed loop's p99 (the service
time back to back, as the capacity search's floor is) and throughput (the ceiling: no paced rate above it is kept).
The capacity screen's SLO presets and the R key's paced rates are set from them, so that they fit the model in
front of them: a 1 ms model and a 40 ms one need SLOs and rates forty times apart.

A configuration's closed loop is found in the live session's history: the latest row that ran the same settings
in a closed loop (the arrivals aside) for at least :data:`MIN_RUNS` runs. Nothing here imports Textual.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ortop.config.profile import Profile

MIN_RUNS = 50    # runs of a closed loop before its p99 and throughput are taken as the configuration's
ARRIVAL_KNOBS = ("arrival", "max_queue", "trace", "trace_speed", "trace_loop")  # how requests come, not what runs
NICE = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)  # readable values per decade: SLO limits
NICE_RATES = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0)  # paced rates: within 10 %


@dataclass(frozen=True)
class NoLoad:
    """A configuration's closed loop as the live session measured it."""

    p99_ms: float
    ceiling_per_s: float
    runs: int


def _settings(profile: Profile) -> Profile:
    """The profile without how requests arrive (rate, arrival mode, queue, trace), its model or description."""
    w = profile.workload
    extra = {k: v for k, v in w.extra.items() if k not in ARRIVAL_KNOBS}
    return replace(profile, model="", description="", workload=replace(w, rate_hz=0.0, extra=extra))


def _closed(profile: Profile) -> bool:
    from ortop.measure.arrivals import mode_of

    return mode_of(profile.workload) == "closed"


def no_load(history: Iterable[Any], profile: Profile) -> NoLoad | None:
    """The closed loop of ``profile``'s settings in ``history`` (the snapshot's rows), latest first; None when
    none has run long enough (:data:`MIN_RUNS`)."""
    want = _settings(profile)
    for rec in reversed(tuple(history)):
        lat = rec.latency
        if (lat.runs >= MIN_RUNS and _closed(rec.profile) and math.isfinite(lat.p99) and lat.p99 > 0
                and math.isfinite(rec.throughput_per_s) and rec.throughput_per_s > 0
                and _settings(rec.profile) == want):
            return NoLoad(float(lat.p99), float(rec.throughput_per_s), int(lat.runs))
    return None


def nice(x: float, *, up: bool = False, steps: Sequence[float] = NICE) -> float:
    """``x`` as a readable value (``steps`` times a power of ten: 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8): the nearest one,
    or with ``up`` the smallest one not below ``x``."""
    if not (math.isfinite(x) and x > 0):
        return x
    decade = 10.0 ** math.floor(math.log10(x))
    values: list[float] = [round(m * decade, 12) for m in (*steps, 10.0)]
    if up:
        return next(v for v in values if v >= x * (1 - 1e-9))
    return min(values, key=lambda v: abs(v - x))


def next_nice(x: float) -> float:
    """The readable value after ``x``."""
    return nice(x * 1.0001, up=True)


def slo_presets(p99_ms: float, factors: Sequence[float] = (1.5, 2.0, 4.0)) -> tuple[float, ...]:
    """SLO limits (ms) at ``factors`` × the no-load p99, each rounded up to a readable value and each above the one
    before."""
    out: list[float] = []
    for f in factors:
        v = nice(f * p99_ms, up=True)
        while out and v <= out[-1]:
            v = next_nice(v)
        out.append(v)
    return tuple(out)


def fmt_value(x: float) -> str:
    """A readable value as a number: 300, 2.5, 0.15."""
    return f"{x:.3g}"
