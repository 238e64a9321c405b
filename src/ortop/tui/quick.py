"""What each quick key of the live view changes, as pure functions: a profile in, dotted-key changes out.

The app applies the changes to the profile being built (or the running one), so two quick presses stack.
"""

from __future__ import annotations

import os
from typing import Any

from ortop.config.profile import Profile

RATE_CYCLE = (0.0, 100.0, 10.0)  # closed loop → 100 Hz → 10 Hz → closed loop
BLOCK_BASE = 4

Changes = dict[str, Any]


def threads(profile: Profile, step: int) -> tuple[Changes, str | None]:
    """Intra-op threads one up or down (0 = ORT's default counts as the physical cores), between 1 and the logical
    cores; a thread affinity, set for the old count, is cleared. Returns the changes and a note for the event log."""
    n = profile.session.intra_op_num_threads
    if not n:
        from ortop.collectors.cpu import physical_cores

        n = physical_cores()
    n = min(os.cpu_count() or 1, n + 1) if step > 0 else max(1, n - 1)
    changes: Changes = {"session.intra_op_num_threads": n}
    if profile.session.intra_op_thread_affinities is None:
        return changes, None
    changes["session.intra_op_thread_affinities"] = None  # pinned for another thread count
    return changes, "thread affinity cleared: it was set for another thread count"


def spinning(profile: Profile) -> Changes:
    """The intra-op pool's spinning off, or back to ORT's default."""
    return {"session.allow_spinning": None if profile.session.allow_spinning is False else False}


def rate(profile: Profile) -> Changes:
    """The next paced rate in RATE_CYCLE; a rate outside it goes to a closed loop."""
    r = profile.workload.rate_hz
    nxt = RATE_CYCLE[(RATE_CYCLE.index(r) + 1) % len(RATE_CYCLE)] if r in RATE_CYCLE else 0.0
    return {"workload.rate_hz": nxt}


def block_base(profile: Profile) -> Changes:
    """dynamic_block_base between unset and BLOCK_BASE."""
    return {"session.dynamic_block_base": None if profile.session.dynamic_block_base else BLOCK_BASE}
