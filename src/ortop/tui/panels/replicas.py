"""The replicas panel: each replica of the running configuration side by side (its cores, runs/s, p50, p99), then
the whole worker (total runs/s and the one process's RSS), and which replica owns which core for the CPU panel.

Replicas (``workload.replicas``) are sessions of one model served at once in one worker; pinned
(``workload.pin_replicas``) each has its own share of the cores. The panel is for telling them apart: a replica
slower than its neighbours, or two replicas whose shares overlap, is the point. It takes the first form that fits
its box, so 2 replicas get a table and 64 still get one cell each:

- a table, one row per replica under a header;
- a grid of cells (``r3 4-5 812/s 1.23 4.56``), several per line under a one-line legend;
- a grid of short cells (``r3 812/s``), the last line saying how many did not fit when even that is too many.

The layout depends only on the replica count, their cores and the box, never on the figures, so the panel's
height (see :func:`replicas_rows`) changes only when the configuration or the terminal does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from ortop.config.replicas import describe_share
from ortop.present import DASH, ms_text, rate_text
from ortop.tui.panels._format import WORKER_STYLE, clip, join_lines

TITLE = "Replicas · per session"
REPLICA_STYLES = ("bold magenta", "bold blue")  # neighbours alternate, so adjacent shares read apart
RATE_W = 7   # rate_text's widest, "10.0k/s"
MS_W = 6     # ms_text is at most five cells below 100 s ("12345"); one more keeps the columns apart
GAP = 2      # between two grid cells
TABLE, GRID, SHORT = "table", "grid", "short"


def replica_style(index: int) -> str:
    """The style a replica's name has here and on its cores in the CPU panel."""
    return REPLICA_STYLES[index % len(REPLICA_STYLES)]


def core_owners(replicas: Sequence[Any]) -> dict[int, tuple[int, ...]]:
    """Per core, the pinned replicas whose share holds it (more than one when there are more replicas than
    cores); empty when no replica is pinned."""
    owners: dict[int, list[int]] = {}
    for r in replicas:
        for core in r.cores or ():
            owners.setdefault(int(core), []).append(int(r.index))
    return {c: tuple(rs) for c, rs in owners.items()}


def _cores_short(cores: tuple[int, ...] | None) -> str:
    """A share without its noun, for a grid cell: ``0-3``, ``2``, ``all``."""
    text = describe_share(cores)
    for noun in ("cores ", "core "):
        if text.startswith(noun):
            return text[len(noun):]
    return "all"


def _name_w(n: int) -> int:
    return len(f"r{max(0, n - 1)}")


def _table_w(n: int, core_w: int) -> int:
    return _name_w(n) + 2 + core_w + 1 + RATE_W + 1 + MS_W + 1 + MS_W


def _cell_w(n: int, core_w: int, short: bool) -> int:
    if short:
        return _name_w(n) + 1 + RATE_W
    return _name_w(n) + 1 + core_w + 1 + RATE_W + 1 + MS_W + 1 + MS_W


def plan(replicas: Sequence[Any], width: int, height: int) -> tuple[str, int, int]:
    """(form, cells per line, lines of replicas) for ``replicas`` in ``width``×``height``; the total line comes
    under them. The short grid is the last resort: its lines are cut to the height (see :func:`replicas_panel`)."""
    n = len(replicas)
    long_w = max((len(describe_share(r.cores)) for r in replicas), default=0)
    short_w = max((len(_cores_short(r.cores)) for r in replicas), default=0)
    if n + 2 <= height and _table_w(n, long_w) <= width:
        return TABLE, 1, n
    cell = _cell_w(n, short_w, short=False)
    cols = max(1, (width + GAP) // (cell + GAP))
    rows = math.ceil(n / cols)
    if cell <= width and rows + 2 <= height:
        return GRID, cols, rows
    cell = _cell_w(n, 0, short=True)
    cols = max(1, (width + GAP) // (cell + GAP))
    return SHORT, cols, math.ceil(n / cols)


def replicas_rows(replicas: Sequence[Any], width: int, height: int) -> int:
    """Lines the panel wants in ``width`` with at most ``height`` of them (the screen sizes its box to this)."""
    if not replicas:
        return 0
    form, _cols, rows = plan(replicas, width, height)
    want = rows + (2 if form in (TABLE, GRID) else 1)
    return max(1, min(height, want))


def _figures(line: Text, r: Any, short: bool) -> None:
    """A replica's runs/s, then (unless ``short``) its p50 and p99, right-aligned in fixed widths."""
    line.append(rate_text(r.throughput_per_s).rjust(RATE_W), style="bold")
    if short:
        return
    line.append(" " + ms_text(r.latency.p50).rjust(MS_W), style="green")
    line.append(" " + ms_text(r.latency.p99).rjust(MS_W), style="yellow")


def _total(throughput: float, rss: int | None, n: int, width: int) -> Text:
    """``total 1.6k/s · RSS 212 MB · 2 sessions, one worker``: the sum, and the process all replicas share; the
    words go before the figures when the width is short."""
    # MB as the memory panel writes the worker's RSS beside it (2**20 bytes)
    rate, mem = rate_text(throughput), f"{rss / 2 ** 20:.0f} MB" if rss is not None and rss >= 0 else DASH
    for head, sep, tail in (("total ", " · RSS ", f" · {n} sessions, one worker"), ("total ", " · RSS ", ""),
                            ("", " · RSS ", ""), ("", " ", "")):
        if len(head) + len(rate) + len(sep) + len(mem) + len(tail) <= width:
            break
    line = Text(no_wrap=True, end="")
    line.append(head, style="dim")
    line.append(rate, style="bold")
    line.append(sep, style="dim")
    line.append(mem, style=WORKER_STYLE)
    line.append(tail, style="dim")
    line.truncate(width)
    return line


def replicas_panel(replicas: Sequence[Any], throughput: float, rss: int | None, width: int, height: int) -> Text:
    """``replicas``: the snapshot's ReplicaFigures (index, cores or None, runs, throughput_per_s, latency);
    ``throughput``: the whole configuration's runs/s; ``rss``: the worker's RSS (bytes), all replicas' memory."""
    if not replicas:
        return Text("one session: no replicas", style="dim", end="")
    if height <= 0 or width <= 0:
        return Text("", end="")
    n = len(replicas)
    total = _total(throughput, rss, n, width)
    if height == 1:
        return join_lines([total], 1)
    form, cols, rows = plan(replicas, width, height)
    name_w = _name_w(n)
    lines: list[Text] = []
    if form == TABLE:
        core_w = max(len(describe_share(r.cores)) for r in replicas)
        head = " " * (name_w + 2) + "cores".ljust(core_w) + " " + "runs/s".rjust(RATE_W) + " " + \
            "p50".rjust(MS_W) + " " + "p99".rjust(MS_W)
        lines.append(Text(head + " ms" if len(head) + 3 <= width else head, style="dim", no_wrap=True, end=""))
        for r in replicas:
            line = Text(no_wrap=True, end="")
            line.append(f"r{r.index}".ljust(name_w), style=replica_style(r.index))
            line.append("  " + describe_share(r.cores).ljust(core_w) + " ")
            _figures(line, r, short=False)
            lines.append(line)
        lines.append(total)
        return join_lines(lines, height)
    short = form == SHORT
    core_w = 0 if short else max(len(_cores_short(r.cores)) for r in replicas)
    if not short:
        legend = "r# cores runs/s p50 p99 ms" if cols > 1 or width < 40 else "replica · cores · runs/s · p50 · p99 ms"
        lines.append(Text(clip(legend, width), style="dim", no_wrap=True, end=""))
    room = max(1, height - len(lines) - 1)  # the total line stays
    grid: list[list[Text]] = []
    for row in range(min(rows, room)):
        cells = []
        for r in replicas[row * cols:(row + 1) * cols]:
            cell = Text(no_wrap=True, end="")
            cell.append(f"r{r.index}".ljust(name_w), style=replica_style(r.index))
            if not short:
                cell.append(" " + _cores_short(r.cores).ljust(core_w), style="dim")
            cell.append(" ")
            _figures(cell, r, short)
            cells.append(cell)
        grid.append(cells)
    hidden = n - sum(len(cells) for cells in grid)
    if hidden:  # the last line says how many did not fit, in place of whole cells: a panel never grows its box
        last = grid[-1]
        while last and sum(len(c) + GAP for c in last) + len(f"+{hidden} more") > width:
            last.pop()
            hidden += 1
    for i, cells in enumerate(grid):
        line = Text(no_wrap=True, end="")
        for j, cell in enumerate(cells):
            if j:
                line.append(" " * GAP)
            line.append_text(cell)
        if hidden and i == len(grid) - 1:
            line.append((" " * GAP if cells else "") + f"+{hidden} more", style="dim")
        lines.append(line)
    lines.append(total)
    return join_lines(lines, height)


def shares_key(replicas: Sequence[Any]) -> tuple[tuple[int, ...] | None, ...]:
    """What the panel's layout and the CPU panel's labels depend on: each replica's cores."""
    return tuple(r.cores for r in replicas)


def owners_label(owners: Mapping[int, Sequence[int]], core: int) -> str:
    """The CPU panel's tag for ``core``: ``r1``, ``r1+`` when more replicas share it, "" when none holds it."""
    rs = owners.get(core, ())
    if not rs:
        return ""
    return f"r{rs[0]}" + ("+" if len(rs) > 1 else "")
