"""The GPU panel: per device memory (the worker's share too) and utilisation, each with a sparkline."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from ortop.measure.stats import spark
from ortop.present import finite, pct_text, size_text
from ortop.tui.panels._format import WORKER_STYLE, clip, join_lines, load_style


def gpu_panel(sample: Any, history: Mapping[int, tuple[Sequence[float], Sequence[float]]], width: int,
              height: int) -> Text:
    """Per device: memory used/total with the worker's share, utilisation, each with a short sparkline.

    No NVIDIA GPU (or no NVML) is a normal state on a CPU host and reads as such, dim, not as an error.
    ``history`` maps a device index to (memory used bytes, utilisation %) series kept by the app.
    """
    if sample is None:
        return Text("waiting for the first GPU sample…", style="dim", end="")
    if not sample.devices:
        line = Text(sample.status or "no NVIDIA GPU", style="dim", end="")
        if sample.status and sample.status.startswith("NVML error"):
            line.stylize("yellow")
        return line
    lines: list[Text] = []
    per_dev = 2 if height >= 2 * len(sample.devices) + (1 if sample.pid_note else 0) else 1
    for d in sample.devices:
        mem_hist, util_hist = history.get(d.index, ((), ()))
        frac = d.mem_used / d.mem_total if d.mem_total else math.nan
        mem_style = load_style(frac * 100) if finite(frac) else ""
        util = Text(no_wrap=True, end="")
        util.append(" util ", style="dim")
        util.append(pct_text(d.util_percent, 4) if d.util_percent is not None else " n/a")
        mem = Text(no_wrap=True, end="")
        mem.append(f"{size_text(d.mem_used)}/{size_text(d.mem_total)}", style=mem_style)
        if d.process_mem is not None:
            mem.append(" worker ", style="dim")
            mem.append(size_text(d.process_mem), style=WORKER_STYLE)
        if per_dev == 2:
            head = Text(no_wrap=True, end="")
            head.append(f"#{d.index} ", style="bold")
            head.append(clip(d.name, max(8, width - 4 - 10 - 12)))
            head.append_text(util)
            _trail_spark(head, util_hist, width, 0.0, 100.0, "green")
            line = Text(no_wrap=True, end="")
            line.append("   mem ", style="dim")
            line.append_text(mem)
            _trail_spark(line, mem_hist, width, 0.0, float(d.mem_total) or None, "cyan")
            lines += [head, line]
        else:
            head = Text(no_wrap=True, end="")
            head.append(f"#{d.index} ", style="bold")
            head.append_text(mem)
            head.append_text(util)
            lines.append(head)
    if sample.pid_note:
        lines.append(Text(sample.pid_note, style="dim", end=""))
    return join_lines(lines, height)


def _trail_spark(line: Text, values: Sequence[float], width: int, lo: float, hi: float | None, style: str) -> None:
    """Fill the rest of ``line`` (up to ``width``) with a sparkline of the newest values, when there is room."""
    room = width - len(line.plain) - 1
    if room >= 4 and len(values):
        line.append(" ")
        line.append(spark(list(values), room, lo, hi), style=style)


def gpu_rows(sample: Any) -> int:
    """Lines the GPU panel wants: two per device (figures and sparklines), plus the pid note; one without a GPU."""
    if sample is None or not sample.devices:
        return 1
    return 2 * len(sample.devices) + (1 if sample.pid_note else 0)
