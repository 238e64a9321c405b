"""The events panel: the monitor's newest events, with a count for grouped repeats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.tui.panels._format import clip, join_lines

LEVEL_STYLE = {"error": "bold red", "warning": "yellow", "info": "", "debug": "dim"}
LEVEL_ICON = {"error": "✗", "warning": "!", "info": "·", "debug": " "}


def events_panel(events: Sequence[Any], width: int, height: int) -> Text:
    """The newest ``height`` events, newest last, with ``×N`` for grouped repeats."""
    if height <= 0:
        return Text("", end="")
    if not events:
        return Text("no events yet", style="dim", end="")
    lines = []
    for e in list(events)[-height:]:
        line = Text(no_wrap=True, end="")
        line.append(f"{e.t:7.1f} ", style="dim")
        line.append(LEVEL_ICON.get(e.level, "·") + " ", style=LEVEL_STYLE.get(e.level, ""))
        count = f" ×{e.count}" if e.count > 1 else ""
        line.append(clip(e.text, max(1, width - 10 - len(count))), style=LEVEL_STYLE.get(e.level, ""))
        if count:
            line.append(count, style="bold")
        lines.append(line)
    return join_lines(lines, height)
