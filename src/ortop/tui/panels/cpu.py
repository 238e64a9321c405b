"""The CPU panel: one meter per core (a heat grid when there are too many), then worker / host / UI load.

Each meter shows the core's whole load and, in cyan, the worker's share of it (summed from the worker's threads by
the core each last ran on), so a busy neighbour process is told apart from the model's own threads. When the running
configuration pins its replicas (``workload.pin_replicas``), each meter is tagged with the replica that owns the
core (``3 r1▕███``), so disjoint shares, or shares that overlap, are seen where the load lands; the heat grid says
the same in one line under it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.text import Text

from ortop.config.replicas import describe_share
from ortop.present import cores_text, finite, pct_text
from ortop.tui.panels._format import IDLE, LEVELS, WORKER_STYLE, bar, fit, join_lines, load_style
from ortop.tui.panels.replicas import owners_label, replica_style

MIN_BAR = 4
GOOD_BAR = 10
TITLE = "CPU · per core: worker / all %"


def worker_share(per_core: Sequence[float], threads: Iterable[Any]) -> list[float]:
    """Per core, the worker's share (% of that core): its threads' load summed by the core each last ran on,
    never above the core's measured total (the two are read a moment apart)."""
    share = [0.0] * len(per_core)
    for t in threads:
        core, pct = getattr(t, "core", None), getattr(t, "cpu_percent", None)
        if core is not None and 0 <= core < len(share) and pct is not None and finite(pct):
            share[core] += float(pct)
    return [min(s, float(per_core[i]) if finite(per_core[i]) else 0.0) for i, s in enumerate(share)]


def _meter_layout(n: int, width: int, height: int, num_w: int = 3,
                  good: int = GOOD_BAR, tag_w: int = 0) -> tuple[int, int, int] | None:
    """(columns, rows, bar width) for ``n`` meters in ``width``×``height``; None when even 4-cell bars do not fit.

    Takes as many columns as keep bars at least ``good`` cells (fewer rows leave room for the other panels),
    else the fewest columns that fit the height at all. ``tag_w`` cells after each core's number are its replica's.
    """
    label = len(str(max(0, n - 1))) + tag_w
    best = None
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        cell = (width - (cols - 1)) // cols
        bw = cell - label - 2 - num_w  # label, "▕", bar, "▏", the figure
        if bw < MIN_BAR:
            break
        if rows > height:
            continue
        if bw >= good:
            best = (cols, rows, bw)
            continue
        return best or (cols, rows, bw)
    return best


def tag_width(owners: Mapping[int, Sequence[int]] | None) -> int:
    """Cells the replica tags take after a core's number (`` r12+``), 0 without pinned replicas."""
    if not owners:
        return 0
    widest = max(len(owners_label(owners, c)) for c in owners)
    return 1 + widest


def core_meters(per_core: Sequence[float], worker_cores: Iterable[int], width: int, height: int = 8,
                share: Sequence[float] | None = None, owners: Mapping[int, Sequence[int]] | None = None) -> Text:
    """One meter per logical core (``3▕████▌   ▏ 57``), in columns, cores numbered from 0 as htop does.

    The worker's cores have their number drawn in reverse cyan, so where the pool runs (and spins) is visible at a
    glance. With ``share`` (the worker's % of each core, see :func:`worker_share`) the bar's first cells are the
    worker's, in cyan, and the figure reads ``worker/all`` (`` 40/57``) where the meters have room for it. With
    ``owners`` (core -> the pinned replicas holding it) each number is followed by its replica (``3 r1▕``, ``r1+``
    where replicas share the core). When the meters cannot fit ``width``×``height`` (many cores), the heat grid is
    drawn instead.
    """
    n = len(per_core)
    if n == 0:
        return Text("no per-core figures", style="dim", end="")
    tag_w = tag_width(owners)
    layout = None
    num_w = 3
    if share is not None:  # the worker/all figure costs four cells of bar: a shorter bar is still worth it
        layout = _meter_layout(n, width, height, 7, GOOD_BAR - 4, tag_w)
        num_w = 7 if layout is not None and layout[2] >= MIN_BAR + 2 else 3
    if num_w == 3:
        layout = _meter_layout(n, width, height, tag_w=tag_w)
    if layout is None:
        return heat_grid(per_core, worker_cores, width, height)
    cols, rows, bw = layout
    label_w = len(str(n - 1))
    mine = set(worker_cores)
    lines = []
    for r in range(rows):
        line = Text(no_wrap=True, end="")
        for c in range(cols):
            i = c * rows + r
            if i >= n:
                break
            if c:
                line.append(" ")
            pct = float(per_core[i]) if finite(per_core[i]) else 0.0
            line.append(str(i).rjust(label_w), style="reverse " + WORKER_STYLE if i in mine else "dim")
            if tag_w:
                tag = owners_label(owners or {}, i)
                line.append(" " + tag.ljust(tag_w - 1), style=replica_style((owners or {})[i][0]) if tag else "")
            line.append("▕", style="dim")
            cells = bar(pct / 100.0, bw)
            mine_cells = 0
            if share is not None:
                mine_cells = min(len(cells.rstrip()), int(round(share[i] / 100.0 * bw)))
            if mine_cells:
                line.append(cells[:mine_cells], style=WORKER_STYLE)
            line.append(cells[mine_cells:], style=load_style(pct))
            line.append("▏", style="dim")
            if num_w == 7 and share is not None:
                line.append(f"{share[i]:3.0f}", style=WORKER_STYLE if share[i] >= 0.5 else "dim")
                line.append(f"/{pct:<3.0f}")
            else:
                line.append(f"{pct:3.0f}", style=WORKER_STYLE if i in mine else "")
        lines.append(line)
    return join_lines(lines)


def level_glyph(pct: float) -> str:
    """One cell for one core's load: ``·`` idle, then ▁ … █."""
    if not finite(pct) or pct < 3:
        return IDLE
    return LEVELS[min(len(LEVELS) - 1, int(pct / 100.0 * len(LEVELS)))]


def heat_grid(per_core: Sequence[float], worker_cores: Iterable[int], width: int, height: int | None = None) -> Text:
    """One cell per core (block height = load, colour = band; the worker's cores cyan), rows labelled by first core.

    Fits 64 cores in a quarter of an 80×24 screen and 256 in a 40-column panel: groups of 8 cells are spaced
    apart when there is room, then the spacing goes, then the row labels.
    """
    n = len(per_core)
    if n == 0 or width <= 0:
        return Text("", end="")
    mine = set(worker_cores)
    label_w = len(str(n - 1))
    limit = height if height is not None and height > 0 else None

    def plan() -> tuple[int, bool, bool]:
        # (cells per row, gaps between groups of 8, row labels), most readable that fits the height
        options = []
        avail = width - label_w - 1
        groups = (avail + 1) // 9
        if groups >= 1:
            options.append((groups * 8, True, True))
        if avail >= 1:
            options.append((avail, False, True))
        options.append((width, False, False))
        for per, gaps, labels in options:
            if limit is None or math.ceil(n / per) <= limit:
                return per, gaps, labels
        return options[-1]

    per, gaps, labels = plan()
    lines: list[Text] = []
    for start in range(0, n, per):
        line = Text(no_wrap=True, end="")
        if labels:
            line.append(str(start).rjust(label_w) + " ", style="dim")
        for i in range(start, min(n, start + per)):
            if gaps and i > start and (i - start) % 8 == 0:
                line.append(" ")
            pct = float(per_core[i]) if finite(per_core[i]) else 0.0
            line.append(level_glyph(pct), style=WORKER_STYLE if i in mine else load_style(pct))
        lines.append(line)
    if limit is not None and len(lines) > limit:
        lines = lines[:limit]
        last = lines[-1]
        lines[-1] = Text(no_wrap=True, end="").append_text(last[: max(0, len(last) - 1)]).append("…", style="dim")
    return join_lines(lines)


def replica_map(owners: Mapping[int, Sequence[int]], width: int) -> Text:
    """``r0 0-15 · r1 16-31 · …``: which replica owns which cores, one line, for the heat grid (too small to tag)."""
    shares: dict[int, list[int]] = {}
    for core, rs in sorted(owners.items()):
        for r in rs:
            shares.setdefault(r, []).append(core)
    line = Text(no_wrap=True, end="")
    for k, (r, cores) in enumerate(sorted(shares.items())):
        term = f"r{r} " + describe_share(tuple(cores)).split(" ", 1)[-1]
        sep = " · " if k else ""
        more = 2 if k < len(shares) - 1 else 0  # room for " …" while more replicas follow
        if len(line.plain) + len(sep) + len(term) + more > width:
            if len(line.plain) + 2 <= width:
                line.append(" …", style="dim")
            break
        line.append(sep, style="dim")
        line.append(term, style=replica_style(r))
    return line


def cpu_panel(sample: Any, width: int, height: int, owners: Mapping[int, Sequence[int]] | None = None) -> Text:
    """The CPU panel: core meters (or the heat grid), then worker / system / UI load on the last line.

    ``sample`` is a collectors.cpu.CpuSample, or None before the first one; ``owners`` maps each core to the
    pinned replicas that hold it (:func:`ortop.tui.panels.replicas.core_owners`), empty or None without them.
    """
    if sample is None:
        return Text("waiting for the first CPU sample…", style="dim", end="")
    n = len(sample.per_core)
    cores_h = max(1, height - 1)
    owners = {c: rs for c, rs in (owners or {}).items() if 0 <= c < n and rs}
    grid = _meter_layout(n, width, cores_h, tag_w=tag_width(owners)) is None
    share = worker_share(sample.per_core, sample.threads) if sample.process_percent is not None else None
    below: list[Text] = []  # lines under the heat grid: which replica owns which cores, then the legend
    if grid and owners and height > 2:
        below.append(replica_map(owners, width))
    if grid and height > 3 + len(below):
        legend = Text("▁…█ load  ", style="dim", end="")
        legend.append("cyan", style=WORKER_STYLE)
        legend.append(" = the worker's cores", style="dim")
        below.append(legend)
    body = core_meters(sample.per_core, sample.worker_cores, width, max(1, cores_h - len(below)), share, owners)
    host = (pct_text(sample.system_percent), load_style(sample.system_percent))
    worker = (cores_text(sample.process_percent, unit=False), WORKER_STYLE)
    ui = (cores_text(sample.self_percent, unit=False), "")
    dim = "dim"
    # the UI's own cost whole, with its unit, or not at all (a figure cut short, or without its unit, misleads)
    summary = fit([
        Text.assemble(("worker ", dim), worker, (" cores · host ", dim), host, (" · ui ", dim), ui, (" cores", dim),
                      no_wrap=True, end=""),
        Text.assemble(("cores: worker ", dim), worker, (" · ui ", dim), ui, (" · host ", dim), host,
                      no_wrap=True, end=""),
        Text.assemble(("worker ", dim), worker, (" cores · host ", dim), host, no_wrap=True, end=""),
    ], width)
    lines = list(body.split("\n") if body.plain else [body])
    if below:
        lines = lines[: max(0, cores_h - len(below))] + below
    return join_lines(lines[: max(0, height - 1)] + [summary], height)
