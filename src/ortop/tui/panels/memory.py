"""The memory panel: the worker's RSS (now, peak, change since the worker's start, its low point, change since the
build), the host's memory, the worker's GPU memory, a leak or rebuild-growth warning, and each configuration's peak
RSS with its change against the row before it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.measure.stats import spark
from ortop.present import DASH, MIB, mb_text, signed_mb, size_text
from ortop.tui.panels._format import WORKER_STYLE, clip, clip_words, join_lines
from ortop.tui.panels.history import row_change

TITLE = "Memory · worker RSS"
GROWTH_MB = 64          # growth since the worker's start shown in yellow beyond this much and GROWTH_FRACTION of it
GROWTH_FRACTION = 0.25
LOW_AVAILABLE = 0.10     # the host's available memory is red below this share of its total


def memory_panel(mem: Any, history: Sequence[Any], gpu_sample: Any, width: int, height: int) -> Text:
    """``mem``: the snapshot's ``MemoryInfo``; ``history``: its ConfigRecords (peak RSS per configuration);
    ``gpu_sample``: the GPU collector's latest sample (its per-device worker memory), or None."""
    lines: list[Text] = []
    head = Text(no_wrap=True, end="")
    head.append("RSS ", style="dim")
    head.append(mb_text(mem.rss), style=WORKER_STYLE)
    head.append("  peak ", style="dim")
    head.append(mb_text(mem.rss_peak).removesuffix(" MB") if mem.rss is not None else mb_text(mem.rss_peak))
    # The change since the worker's start (its first build) first: a change against the current build alone hides
    # what earlier builds kept. Then the low point and the change since this build, where the width allows.
    since = mem.since_start
    growth = mem.growth
    if since is not None:  # MB, like the figures before it
        head.append("  ")
        grown = since > GROWTH_MB * MIB and since > GROWTH_FRACTION * (mem.rss_start or 0)
        head.append(signed_mb(since).removesuffix(" MB"), style="yellow" if grown else "")
        head.append(" since start", style="dim")
        extra = []
        if mem.rss_low is not None:
            extra.append(("low ", mb_text(mem.rss_low).removesuffix(" MB")))
        if growth is not None:
            extra.append((signed_mb(growth).removesuffix(" MB"), " since build"))
        for a, b in extra:
            if len(head.plain) + 3 + len(a) + len(b) > width:
                break
            head.append(" · ", style="dim")
            head.append(a, style="dim" if a == "low " else "")
            head.append(b, style="" if a == "low " else "dim")
    elif growth is not None:
        head.append("  ")
        head.append(signed_mb(growth).removesuffix(" MB"), style="yellow" if growth > GROWTH_MB * MIB else "")
        head.append(" since build", style="dim")
    lines.append(head)

    host = Text(no_wrap=True, end="")
    host.append("host ", style="dim")
    if mem.host_total is None:
        host.append(DASH)
    else:
        host.append(f"{size_text(mem.host_used)} used")
        host.append(" · ", style="dim")
        avail = mem.host_available or 0
        host.append(f"{size_text(avail)} available", style="red" if avail < LOW_AVAILABLE * mem.host_total else "")
    worker_gpu = _gpu_worker(gpu_sample)
    if worker_gpu is not None and len(host.plain) + 6 + len(size_text(worker_gpu)) <= width:
        host.append("  GPU ", style="dim")
        host.append(size_text(worker_gpu), style=WORKER_STYLE)
    lines.append(host)

    if mem.rebuild is not None:
        lines.append(Text(clip("⚠ " + mem.rebuild.text(), width), style="yellow", no_wrap=True, end=""))
    elif mem.leak is not None:
        lines.append(Text(clip("⚠ " + mem.leak.text(), width), style="yellow", no_wrap=True, end=""))
    elif len(mem.series) >= 2 and width > 10:
        lo, hi = min(mem.series), max(mem.series)
        line = Text(no_wrap=True, end="")
        line.append("RSS ", style="dim")
        line.append(spark(list(mem.series), width - 4, lo - max(1.0, (hi - lo)) * 0.1, hi), style="cyan")
        lines.append(line)

    rows = [h for h in history if getattr(h, "rss_peak", None) is not None]
    room = height - len(lines)
    if rows and room > 0:
        for h in rows[-room:]:
            line = Text(no_wrap=True, end="")
            line.append(f"#{h.config_id} ", style="bold")
            line.append(f"peak {mb_text(h.rss_peak):>7}")
            if h.rss_delta is not None:
                d = h.rss_delta
                line.append(f" {signed_mb(d):>8}", style="green" if d < -MIB else ("yellow" if d > MIB else "dim"))
            else:
                line.append(" " * 9)
            # what this row changed from the one before it, as its delta is against that row
            label = row_change(history, list(history).index(h))
            line.append(" " + clip_words(label, max(0, width - len(line.plain) - 1)), style="dim")
            lines.append(line)
    return join_lines(lines, height)


def _gpu_worker(sample: Any) -> int | None:
    """The worker's GPU memory summed over devices, or None (no GPU, or NVML cannot say per process)."""
    if sample is None or not getattr(sample, "devices", ()):
        return None
    per = [d.process_mem for d in sample.devices if d.process_mem is not None]
    return sum(per) if per else None


def memory_rows(history: Sequence[Any], height_hint: int = 3) -> int:
    """Lines the panel wants: RSS, host, the series or leak line, and up to ``height_hint`` history rows."""
    rows = sum(1 for h in history if getattr(h, "rss_peak", None) is not None)
    return 3 + min(rows, height_hint)
