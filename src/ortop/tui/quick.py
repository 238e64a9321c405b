"""What each quick key of the live view changes, as pure functions: a profile in, a :class:`Quick` out.

The app applies the changes to the profile being built (or the running one), so two quick presses stack. A key
that would change nothing says why and rebuilds nothing (``+`` at the host's logical cores, ``-`` at 1, ``+`` from
ORT's default to the count the default already runs); one that must drop a setting asks first (``+`` while the pool
is pinned: the affinity lists one core group per pool thread, so it cannot stay).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from ortop.config import knobs
from ortop.config.profile import Profile
from ortop.measure.arrivals import CLOSED, FIXED, POISSON, TRACE, mode_of

# The knobs the quick keys turn: the keys' footer labels and notification titles are these knobs' short labels.
THREADS = "session.intra_op_num_threads"
SPIN = "session.allow_spinning"
RATE = "workload.rate_hz"
ARRIVAL = "workload.arrival"
AFFINITY = "session.intra_op_thread_affinities"
BLOCK_BASE_KNOB = "session.dynamic_block_base"
RATE_CYCLE = (0.0, 100.0, 10.0)  # closed loop → 100 Hz → 10 Hz → closed loop, while no ceiling is measured
RATE_SHARES = (0.5, 0.1)         # closed loop → 50 % → 10 % of the measured ceiling → closed loop
POISSON_SHARE = 0.8              # w from a closed loop: Poisson arrivals near capacity, where queueing shows
BLOCK_BASE = 4

Changes = dict[str, Any]


@dataclass(frozen=True)
class Quick:
    """What a quick key does: ``changes`` to apply (empty: nothing to do, ``message`` says why), ``confirm``, a
    question to ask before applying when the change drops a setting the user made, and ``what``, the title of what
    it says (the knob's short label)."""

    changes: Changes = field(default_factory=dict)
    message: str = ""
    confirm: str = ""
    what: str = ""
    info: str = ""   # what the change is, said once applied (an event and a toast): "paced at 50 % of …"

    @property
    def noop(self) -> bool:
        return not self.changes


def label(key: str) -> str:
    """A quick key's knob as the footer and the notifications name it (``threads``, ``spin``, ``dbb``)."""
    return knobs.get(key).short_label


def _physical() -> int:
    from ortop.collectors.cpu import physical_cores

    return physical_cores()


def _logical() -> int:
    return os.cpu_count() or 1


def threads(profile: Profile, step: int, *, logical: int | None = None, physical: int | None = None,
            running: int | None = None) -> Quick:
    """Intra-op threads one up or down, between 1 and the logical cores. From ORT's default (0) the step is from
    the count ORT runs: ``running`` (its pool's threads counted in the worker, plus the caller) where known, else
    the physical cores (ORT's rule). A thread affinity is set for one thread count: changing the count drops it,
    after asking."""
    logical = logical or _logical()
    what = f"{label(THREADS)} {'+' if step > 0 else '-'}"
    cur = profile.session.intra_op_num_threads
    n = cur or running or (physical or _physical())
    new = min(logical, n + 1) if step > 0 else max(1, n - 1)
    if new == n or (new - n) * step < 0:  # at a limit (or past it: a default that runs more than the cores)
        counted = "counted in the worker" if running and not cur else "its count for this host"
        now = (f"ORT's default already runs {n} intra-op threads ({counted})" if not cur
               else f"intra-op threads already at {n}")
        limit = "this host's logical cores" if step > 0 else "the fewest"
        return Quick(message=f"{now}, {limit}: nothing to change", what=what)
    changes: Changes = {THREADS: new}
    aff = profile.session.intra_op_thread_affinities
    if aff is None:
        return Quick(changes, what=what)
    changes["session.intra_op_thread_affinities"] = None
    pinned = ";".join(",".join(str(c) for c in t) for t in aff)
    shown = str(cur) if cur else f"default ({n})"
    return Quick(changes, message=f"thread affinity {pinned} dropped: it pinned {len(aff)} pool threads, and "
                                  f"{new} threads have {new - 1}",
                 confirm=f"Threads {shown} → {new} drops the thread affinity {pinned}: it lists one core group per "
                         f"pool thread of {shown} threads. Change the threads and unpin the pool?", what=what)


def spinning(profile: Profile) -> Quick:
    """The intra-op pool's spinning off, or back to ORT's default."""
    return Quick({SPIN: None if profile.session.allow_spinning is False else False}, what=label(SPIN))


def rate_presets(ceiling_per_s: float) -> tuple[float, ...]:
    """The paced rates R offers for a measured ceiling (closed-loop runs per second): RATE_SHARES of it, each
    rounded to a readable rate."""
    return tuple(_readable_rate(share * ceiling_per_s) for share in RATE_SHARES)


def _readable_rate(hz: float) -> float:
    """A paced rate rounded to a readable one (within 10 %: 1, 1.2, 1.5 … 9 × a power of ten)."""
    from ortop.tui.noload import NICE_RATES, nice

    return nice(hz, steps=NICE_RATES)


def _ceiling_text(ceiling_per_s: float, estimate: str) -> str:
    """``the measured 24/s``, or ``the estimated 16/s (1 / mean service 62 ms under …)``."""
    from ortop.present import rate_text

    said = rate_text(ceiling_per_s)
    return f"the estimated {said} ({estimate})" if estimate else f"the measured {said}"


def rate(profile: Profile, ceiling_per_s: float | None = None, *, arrivals: str = FIXED, estimate: str = "") -> Quick:
    """The next paced rate: closed loop → 50 % → 10 % of ``ceiling_per_s`` (the throughput the live session
    measured for these settings in a closed loop, or, with ``estimate`` saying how, one estimated from the service
    time of the open arrivals running them), rounded, → closed loop. The cycle steps down: a rate outside it goes to
    the next of its rates below it (a production rate stays open, at a rate that fits the model), or to a closed
    loop when none is below. Without a ceiling, RATE_CYCLE's preset rates, said as such, and a rate outside them
    goes to a closed loop, which measures one.

    The arrival mode is kept: from one rate to the next, Poisson stays Poisson and evenly paced stays evenly paced.
    A closed loop has no arrivals, so the mode ends with the rate; from the closed loop, R comes back to
    ``arrivals``, the open mode the live session last ran (the app reads it from the history; fixed when none)."""
    r = profile.workload.rate_hz
    mode = mode_of(profile.workload)
    if mode == TRACE:
        return Quick(message="a trace is replayed: its requests come at the times it gives, not at a rate",
                     what=label(RATE))
    measured = ceiling_per_s is not None and math.isfinite(ceiling_per_s) and ceiling_per_s > 0
    cycle = (0.0, *rate_presets(ceiling_per_s)) if measured and ceiling_per_s else RATE_CYCLE
    # a preset set from a ceiling read a moment earlier (the closed loop's last figures come in after it stops) is
    # still that preset: the shares are five times apart, so a quarter either way names one alone
    tol = 0.25 if measured else 1e-6
    at = next((i for i, x in enumerate(cycle) if math.isclose(x, r, rel_tol=tol, abs_tol=1e-9)), None)
    below = next((x for x in cycle[1:] if x < r), 0.0) if measured else 0.0
    nxt = cycle[(at + 1) % len(cycle)] if at is not None else below
    changes: Changes = {RATE: nxt}
    if nxt == 0.0:
        info = "closed loop: runs back to back"
        if profile.workload.arrival in (FIXED, POISSON):  # set, not implied by a rate alone
            changes[ARRIVAL] = None  # open arrivals need a rate: back to a closed loop is back to no arrival mode
            info += f" (the {mode} arrivals end with the rate; the next R comes back to them)"
        return Quick(changes, what=label(RATE), info=info)
    back = mode == CLOSED  # from a closed loop: the open mode last run comes back
    to = (arrivals if arrivals in (FIXED, POISSON) else FIXED) if back else mode
    if back:
        if to == POISSON:
            changes[ARRIVAL] = POISSON
        elif profile.workload.arrival is not None:
            changes[ARRIVAL] = None  # unset with a rate: evenly paced
    how = "Poisson arrivals" if to == POISSON else "paced"
    if measured and ceiling_per_s:
        share = RATE_SHARES[cycle.index(nxt) - 1]
        info = f"{how} at {share:.0%} of {_ceiling_text(ceiling_per_s, estimate)}: {nxt:g} Hz".replace("%", " %")
    else:
        info = (f"{how} at {nxt:g} Hz, a preset rate: these settings are not measured yet (once a closed loop or "
                "open arrivals of them are, R paces at 50 % and 10 % of the throughput they give)")
    if back and to == POISSON:
        info += " (Poisson, as last run; w paces them evenly)"
    return Quick(changes, what=label(RATE), info=info)


def arrival(profile: Profile, ceiling_per_s: float | None = None, *, estimate: str = "") -> Quick:
    """Arrivals evenly paced ↔ Poisson at the same rate. From a closed loop, Poisson at POISSON_SHARE of
    ``ceiling_per_s`` (the closed loop measured for these settings), rounded: near capacity, where the queue
    shows. Without a measured ceiling a closed loop stays, said why; a replayed trace keeps its own times."""
    what = label(ARRIVAL)
    mode = mode_of(profile.workload)
    r = profile.workload.rate_hz
    if mode == TRACE:
        return Quick(message="a trace is replayed: its requests come at the times it gives", what=what)
    if mode == POISSON:
        return Quick({ARRIVAL: None}, what=what,
                     info=f"arrivals evenly paced at {r:g} Hz (fixed spacing): the queue waits only on slow runs")
    if mode == FIXED:
        return Quick({ARRIVAL: POISSON}, what=what,
                     info=f"Poisson arrivals at {r:g} Hz: bursts queue, and response = queue + service")
    assert mode == CLOSED
    if not (ceiling_per_s is not None and math.isfinite(ceiling_per_s) and ceiling_per_s > 0):
        return Quick(message="a closed loop of these settings is not measured yet: once it is, w offers Poisson "
                             f"arrivals at {POISSON_SHARE:.0%} of its throughput (R paces at a fixed rate now)"
                             .replace("%", " %"), what=what)
    rate_hz = _readable_rate(POISSON_SHARE * ceiling_per_s)
    return Quick({ARRIVAL: POISSON, RATE: rate_hz}, what=what,
                 info=f"Poisson arrivals at {POISSON_SHARE:.0%} of {_ceiling_text(ceiling_per_s, estimate)}: "
                      f"{rate_hz:g} Hz; response = queue + service".replace("%", " %"))


def _one_each(cores: range) -> tuple[tuple[int, ...], ...]:
    return tuple((c,) for c in cores)


def affinity(profile: Profile, *, logical: int | None = None, running: int | None = None,
             physical: int | None = None) -> Quick:
    """Where the intra-op pool runs: unpinned → one pool thread on each of the last cores → on each of the first
    cores → unpinned. ORT pins the pool's threads, not the caller's (intra − 1 of them), and only with an explicit
    thread count: from ORT's default the count it runs (``running``, else the physical cores) is set with the pin.
    A pin of the user's own is dropped after asking."""
    logical = logical or _logical()
    what = label(AFFINITY)
    cur = profile.session.intra_op_num_threads
    n = cur or running or (physical or _physical())
    if n < 2:
        return Quick(message="1 intra-op thread runs on the caller's thread: there is no pool thread to pin "
                             "(+ adds one)", what=what)
    pool = n - 1
    if pool > logical:
        return Quick(message=f"{n} intra-op threads have {pool} pool threads, more than this host's {logical} cores: "
                             "one a core cannot be done (- lowers the threads)", what=what)
    last, first = _one_each(range(logical - pool, logical)), _one_each(range(pool))
    aff = profile.session.intra_op_thread_affinities
    if aff is None:
        nxt, where = last, "the last"
    elif aff == last and last != first:
        nxt, where = first, "the first"
    else:
        nxt, where = None, ""
    changes: Changes = {AFFINITY: nxt}
    if nxt is None:
        info = "the pool is unpinned: the OS places its threads"
    else:
        cores = ", ".join(str(t[0]) for t in nxt)
        s = "s" if pool != 1 else ""
        info = f"pool pinned to core{s} {cores}, {where}, one thread each (cores from 0, as htop counts)"
    if not cur:
        changes[THREADS] = n
        info += f"; threads set to {n}, what ORT's default runs here: a pin needs a count"
    confirm = ""
    if aff is not None and aff not in (last, first):
        pinned = ";".join(",".join(str(c) for c in t) for t in aff)
        confirm = f"Unpin the intra-op pool? It is pinned to {pinned}, set by hand."
    return Quick(changes, what=what, info=info, confirm=confirm)


def block_base(profile: Profile) -> Quick:
    """dynamic_block_base between unset and BLOCK_BASE."""
    return Quick({BLOCK_BASE_KNOB: None if profile.session.dynamic_block_base else BLOCK_BASE},
                 what=label(BLOCK_BASE_KNOB))
