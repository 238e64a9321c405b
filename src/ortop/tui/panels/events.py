"""The events panel: the monitor's newest events, with a count for grouped repeats, wrapped at words."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.tui.panels._format import join_lines, wrap_words

LEVEL_STYLE = {"error": "bold red", "warning": "yellow", "info": "", "debug": "dim"}
LEVEL_ICON = {"error": "✗", "warning": "!", "info": "·", "debug": " "}
INDENT = 10      # "  1234.5 · "
MAX_LINES = {"error": 3, "warning": 3}  # lines one event may take: problems whole, the rest in two at most
INFO_LINES = 2
_UNIT = re.compile(r"(\d) (ms|s|MB|MiB|GiB|cores)\b")  # a figure and its unit wrap as one word
_SECTION = re.compile(r"(?<![\w.])(?:session|workload|provider\.options|provider)\.(?=\w+: )")


def event_text(text: str) -> str:
    """An event as the panel shows it: a change list without its section prefixes (``intra_op_num_threads: 0 → 2``,
    as the history writes it), so a rebuild's line carries more of what changed."""
    return _SECTION.sub("", text)


def events_panel(events: Sequence[Any], width: int, height: int) -> Text:
    """The newest events that fit ``height`` lines, in time order, newest last, with ``×N`` for grouped repeats
    (a grouped repeat at the time of its latest).

    A long event wraps at words under its text (a warning or an error up to three lines, others two; the newest
    get the room first), so a warning with the flag that fixes it is read whole instead of cut mid-word.
    """
    if height <= 0:
        return Text("", end="")
    if not events:
        return Text("no events yet", style="dim", end="")
    room = max(1, width - INDENT)
    blocks: list[list[Text]] = []
    used = 0
    ordered = sorted(events, key=lambda e: e.t)  # stable: events of one time keep the order they came in
    for e in reversed(ordered[-height:]):
        count = f" ×{e.count}" if e.count > 1 else ""
        style = LEVEL_STYLE.get(e.level, "")
        left = height - used
        parts = [p.replace("\u00a0", " ") for p in wrap_words(_UNIT.sub("\\1\u00a0\\2", event_text(e.text)),
                                                                room, min(MAX_LINES.get(e.level, INFO_LINES), left))]
        if not parts:
            break
        if count and len(parts[-1]) + len(count) > room:
            parts[-1] = parts[-1][: max(0, room - len(count) - 1)] + "…"
        block = []
        for i, part in enumerate(parts):
            line = Text(no_wrap=True, end="")
            if i == 0:
                line.append(f"{e.t:7.1f} ", style="dim")
                line.append(LEVEL_ICON.get(e.level, "·") + " ", style=style)
            else:
                line.append(" " * INDENT)
            line.append(part, style=style)
            if count and i == len(parts) - 1:
                line.append(count, style="bold")
            block.append(line)
        blocks.append(block)
        used += len(block)
        if used >= height:
            break
    lines = [line for block in reversed(blocks) for line in block]
    return join_lines(lines, height)
