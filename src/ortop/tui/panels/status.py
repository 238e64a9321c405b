"""The status header: ortop, the model, the state with its elapsed time, the running configuration, and how
requests arrive (``15 Hz poisson``, ``closed loop``), which every width keeps."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text

from ortop.config.diff import change_terms, diff
from ortop.measure.arrivals import CLOSED, TRACE, mode_of
from ortop.tui.panels._format import (
    clip_words,
    compact_text,
    lead_forms,
    pace_shortfall,
    state_text,
)


def start_profile(snap: Any) -> Any:
    """The profile the session started with (the history's first row), or None before any row."""
    return snap.history[0].profile if snap.history else None


WORKLOAD_KEYS = ("workload.rate_hz", "workload.arrival")  # said by workload_text, always: not among the changes
MIN_CHANGES = 10  # cells the changes need to say anything ("threads 2…"); with fewer they are left out


def config_text(snap: Any) -> str:
    """The running configuration in compact form, as changes from the start (``2 thr · spin off``), the rate and
    the arrival mode aside: :func:`workload_text` says them."""
    start = start_profile(snap)
    if start is None or snap.config_id == (snap.history[0].config_id if snap.history else -1):
        return "start"
    terms = change_terms(c for c in diff(start, snap.profile, settings_only=True) if c.key not in WORKLOAD_KEYS)
    return compact_text(terms, "start settings")


def workload_text(profile: Any) -> str:
    """How requests arrive: ``closed loop``, ``100 Hz fixed``, ``15 Hz poisson``, ``trace`` (``trace ×2`` sped up)."""
    w = profile.workload
    mode = mode_of(w)
    if mode == CLOSED:
        return "closed loop"
    if mode == TRACE:
        speed = float(getattr(w, "trace_speed", 1.0) or 1.0)
        return "trace" if speed == 1.0 else f"trace ×{speed:g}"
    return f"{w.rate_hz:g} Hz {mode}"


def status_line(snap: Any, width: int) -> Text:
    """The top line: ortop, model, state with elapsed time, the running configuration's changes (cut at a word,
    never mid-word) and how requests arrive, which is kept when the changes are cut; a paced rate the model cannot
    keep is said here too."""
    arrivals = workload_text(snap.profile)
    short = pace_shortfall(snap.profile, snap.throughput_per_s, snap.runs, getattr(snap, "traffic", None),
                           snap.state, snap.state_elapsed)  # nothing said in a fresh build's first seconds
    state = state_text(snap.state, snap.state_elapsed)
    name = " " + os.path.basename(snap.model_path) + " "
    # A rate not kept says what was offered and what was served: both figures before the model's name, which the
    # title of every panel and the model panel say too.
    forms = [f for f in lead_forms(short) if "," in f] if short else []
    need = len(" ortop ") + len(name) + state.cell_len + len(f" #{snap.config_id} ") + len(arrivals)
    if forms and need + len(f" ! {forms[-1]} ") > width:
        name = " "
    t = Text(no_wrap=True, end="")
    t.append(" ortop ", style="bold reverse")
    t.append(name, style="bold")
    t.append_text(state)
    v = getattr(snap, "verifying", None)
    if v is not None:  # the longest wording that fits with how requests arrive, the rest of the line after it
        done = f"{v.elapsed_s:.0f}/{v.budget_s:.0f} s"
        badges = (f" ⇄ verifying #{v.config_id} vs #{v.against_id} {v.phase} {done} ",
                  f" ⇄ #{v.config_id} vs #{v.against_id} {done} ")
        for badge in badges:
            if len(t.plain) + len(badge) + (1 + len(arrivals) if badge != badges[-1] else 0) <= width:
                t.append(badge, style="bold black on yellow")
                break
    # the shortfall in the room there is (at 80 columns the whole one did not fit and none was shown)
    paces = [f" ! {lead} " for lead in lead_forms(short)] if short else [""]
    used = len(t.plain) + len(f" #{snap.config_id} ") + len(arrivals)
    pace = next((f for f in paces if used + len(f) <= width), paces[-1])
    # how requests arrive is kept before the changes: cut, they leave room for it
    if snap.config_id >= 0 and len(t.plain) + len(f" #{snap.config_id} ") + len(arrivals) <= width:
        t.append(f" #{snap.config_id} ", style="dim")
        room = width - len(t.plain) - len(" · ") - len(arrivals) - len(pace)
        changes = clip_words(config_text(snap), room) if room >= MIN_CHANGES else ""
        if changes:
            t.append(changes)
            t.append(" · ", style="dim")
        t.append(arrivals, style="bold cyan")
    elif len(t.plain) + 1 + len(arrivals) <= width:
        t.append(" " + arrivals, style="bold cyan")
    if pace and len(t.plain) + len(pace) <= width:
        t.append(pace, style="bold black on yellow")
    return t
