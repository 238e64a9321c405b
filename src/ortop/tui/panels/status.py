"""The status header: ortop, the model, the state with its elapsed time, and the running configuration."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text

from ortop.tui.panels._format import clip, short_label, state_text


def status_line(snap: Any, width: int) -> Text:
    """The top line: ortop, model, state with elapsed time, and the running configuration's changes."""
    t = Text(no_wrap=True, end="")
    t.append(" ortop ", style="bold reverse")
    t.append(" " + os.path.basename(snap.model_path) + " ", style="bold")
    t.append_text(state_text(snap.state, snap.state_elapsed))
    v = getattr(snap, "verifying", None)
    if v is not None:
        t.append(f" ⇄ verifying #{v.config_id} vs #{v.against_id} {v.phase} "
                 f"{v.elapsed_s:.0f}/{v.budget_s:.0f} s ", style="bold black on yellow")
    if snap.config_id >= 0:
        label = next((h.label for h in snap.history if h.config_id == snap.config_id), "")
        t.append(f" #{snap.config_id} ", style="dim")
        t.append(clip(short_label(label), max(0, width - len(t.plain))))
    return t
