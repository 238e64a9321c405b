"""The status header: ortop, the model, the state with its elapsed time, and the running configuration."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text

from ortop.tui.panels._format import (
    clip_words,
    compact_changes,
    compact_text,
    lead_forms,
    pace_shortfall,
    state_text,
)


def start_profile(snap: Any) -> Any:
    """The profile the session started with (the history's first row), or None before any row."""
    return snap.history[0].profile if snap.history else None


def config_text(snap: Any) -> str:
    """The running configuration in compact form, as changes from the start: ``2 thr · spin off · 100 Hz``."""
    start = start_profile(snap)
    if start is None or snap.config_id == (snap.history[0].config_id if snap.history else -1):
        return "start"
    return compact_text(compact_changes(start, snap.profile), "start settings")


def status_line(snap: Any, width: int) -> Text:
    """The top line: ortop, model, state with elapsed time, and the running configuration's changes (cut at a
    word, never mid-word); a paced rate the model cannot keep is said here too."""
    t = Text(no_wrap=True, end="")
    t.append(" ortop ", style="bold reverse")
    t.append(" " + os.path.basename(snap.model_path) + " ", style="bold")
    t.append_text(state_text(snap.state, snap.state_elapsed))
    v = getattr(snap, "verifying", None)
    if v is not None:  # the longest wording that fits, the rest of the line after it
        done = f"{v.elapsed_s:.0f}/{v.budget_s:.0f} s"
        for badge in (f" ⇄ verifying #{v.config_id} vs #{v.against_id} {v.phase} {done} ",
                      f" ⇄ #{v.config_id} vs #{v.against_id} {done} "):
            if len(t.plain) + len(badge) <= width:
                t.append(badge, style="bold black on yellow")
                break
    short = pace_shortfall(snap.profile, snap.throughput_per_s, snap.runs, getattr(snap, "traffic", None))
    # the shortfall in the room there is (at 80 columns the whole one did not fit and none was shown)
    paces = [f" ! {lead} " for lead in lead_forms(short)] if short else [""]
    pace = next((f for f in paces if len(t.plain) + len(f" #{snap.config_id} ") + len(f) <= width), paces[-1])
    if snap.config_id >= 0 and len(t.plain) + len(f" #{snap.config_id} ") <= width:
        t.append(f" #{snap.config_id} ", style="dim")
        room = max(0, width - len(t.plain) - len(pace))
        t.append(clip_words(config_text(snap), room))
    if pace and len(t.plain) + len(pace) <= width:
        t.append(pace, style="bold black on yellow")
    return t
