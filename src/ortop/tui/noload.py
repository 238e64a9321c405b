"""What the live session has measured of a configuration with nothing queued: its closed loop's p99 (the service
time back to back, as the capacity search's floor is) and throughput (the ceiling: no paced rate above it is kept).
The capacity screen's SLO presets, the tune screen's p99 limits and the R key's paced rates are set from them, so
that they fit the model in front of them: a 1 ms model and a 40 ms one need SLOs and rates forty times apart.

A configuration's closed loop is found in the live session's history: the latest row that ran the same settings
in a closed loop (the arrivals aside) for at least :data:`MIN_RUNS` runs. Until one has run, a running workload of
open arrivals (fixed, Poisson, a trace) stands in with its **service** time, which leaves the queue out: its service
p99 for the p99 at no load, and servers / mean service (callers × replicas) for the ceiling
(:func:`measured`, what the live view asks). Nothing here imports Textual.
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
ARRIVAL_WORDS = {"fixed": "evenly paced arrivals", "poisson": "Poisson arrivals", "trace": "trace replay"}
NICE_RATES = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0)  # paced rates: within 10 %


@dataclass(frozen=True)
class NoLoad:
    """A configuration's closed loop as the live session measured it; or, with ``arrivals`` set, the service time of
    a running workload of open arrivals standing in for it."""

    p99_ms: float
    ceiling_per_s: float
    runs: int
    arrivals: str = ""         # "": a closed loop's figures; else the open arrival mode whose service time stands in
    rate_hz: float = math.nan  # that workload's rate (per replica; nan for a trace)
    mean_ms: float = math.nan  # its mean service time: the ceiling is servers / mean
    servers: int = 1           # callers × replicas

    @property
    def under_arrivals(self) -> bool:
        """The figures are a running open workload's service time, not a closed loop's."""
        return bool(self.arrivals)

    def p99_words(self) -> str:
        """What the p99 is: ``the p99 at no load`` or ``the service p99 under the running Poisson arrivals``."""
        if not self.under_arrivals:
            return "the p99 at no load"
        arrivals = ARRIVAL_WORDS.get(self.arrivals, self.arrivals + " arrivals")
        return f"the service p99 under the running {arrivals}"

    def source(self) -> str:
        """Where the figures come from, in a few words after the p99: ``97 ms (closed loop, 6000 runs, 24/s)``."""
        if not self.under_arrivals:
            return f"{self.p99_ms:.3g} ms (closed loop, {self.runs} runs, {self.ceiling_per_s:.3g}/s)"
        at = f"at {self.rate_hz:g} Hz, " if math.isfinite(self.rate_hz) and self.rate_hz > 0 else ""
        return (f"{self.p99_ms:.3g} ms ({at}{self.runs} runs: the service time leaves the queue out, so it stands in "
                "for the p99 at no load until a closed loop of these settings has run)")

    def estimate(self) -> str:
        """How the ceiling was estimated, "" when it was measured in a closed loop: ``1 / mean service 62 ms under
        the running Poisson arrivals``."""
        if not self.under_arrivals:
            return ""
        arrivals = ARRIVAL_WORDS.get(self.arrivals, self.arrivals + " arrivals")
        return f"{self.servers} / mean service {self.mean_ms:.3g} ms under the running {arrivals}"


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


def under_arrivals(snap: Any, profile: Profile) -> NoLoad | None:
    """The service time of the running workload (``snap``'s profile and traffic) standing in for ``profile``'s
    closed loop: when it runs ``profile``'s settings (the arrivals aside) under open arrivals and has served
    :data:`MIN_RUNS` runs. None otherwise (a closed loop is in the history: :func:`no_load`)."""
    t = getattr(snap, "traffic", None)
    running = getattr(snap, "profile", None)
    if t is None or not t.open or running is None or _settings(running) != _settings(profile):
        return None
    s = t.service
    if not (s.runs >= MIN_RUNS and math.isfinite(s.p99) and s.p99 > 0 and math.isfinite(s.mean) and s.mean > 0):
        return None
    w = running.workload
    servers = max(1, int(w.concurrency)) * max(1, int(w.replicas))
    rate = float(w.rate_hz) if t.mode != "trace" else math.nan
    return NoLoad(float(s.p99), servers * 1000.0 / float(s.mean), int(s.runs), arrivals=str(t.mode), rate_hz=rate,
                  mean_ms=float(s.mean), servers=servers)


def measured(snap: Any, profile: Profile) -> NoLoad | None:
    """``profile``'s figures at no load from a snapshot: its closed loop in the history when one ran long enough,
    else the running open workload's service time (:func:`under_arrivals`), else None."""
    return no_load(snap.history, profile) or under_arrivals(snap, profile)


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
