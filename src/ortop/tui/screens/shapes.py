"""The shapes screen: every input shape of the running mix, one row each, updated live while it is open.

The model panel has room for a few shapes and sums up the rest on one line (``+13 more (m)``); here each shape has
its runs, its share of the requests, and its queue, service and response p50/p99 (ms), from
:func:`ortop.engine.traffic.shape_rows`. A percentile read from fewer runs than it needs (p99: 100) would be the
slowest run under another name: it reads "—", and the line under the table says how many runs it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ortop.measure.stats import resolved, runs_needed
from ortop.present import DASH, ms_text
from ortop.tui.panels._format import Cell
from ortop.tui.screens._base import Responsive, fill_table, table_room
from ortop.tui.widgets import FitFooter

FIGURES = (("queue", "q"), ("service", "svc"), ("response", "resp"))   # each as a header writes it, then short
FEW = "yellow"   # the runs of a shape whose p99 is not read yet


def _right(*forms: str) -> Cell:
    return tuple(Text(f, justify="right", no_wrap=True, end="") for f in forms)


def headers(dim: str, short: bool) -> tuple[Cell, ...]:
    """The columns' headers: the shape (or the one dim that varies), runs, share, then the six figures, all of
    them in their long words (``queue p50``) or all in their short ones (``q p50``)."""
    return (_right(dim) if dim else ("shape",), _right("runs"), _right("share"),
            *(_right(f"{s if short else name} {p}") for name, s in FIGURES for p in ("p50", "p99")))


def table_width(heads: Sequence[Cell], rows: Sequence[Sequence[Cell]], pad: int) -> int:
    """Cells a table takes with each column as wide as its widest header or cell, ``pad`` more each."""
    return sum(max(f[0].cell_len if isinstance(f[0], Text) else len(f[0]) for f in (h, *(r[c] for r in rows))) + pad
               for c, h in enumerate(heads))


def figure(x: float, key: str, runs: int) -> str:
    """A percentile in ms, "—" when ``runs`` are too few to read it; an exact 0 (no queue) as 0."""
    if not resolved(key, runs):
        return DASH
    return "0" if x == 0 else ms_text(x)


def share_text(share: float) -> str:
    """A shape's share of the requests: ``12.4%``, ``<0.1%``."""
    if not share > 0:
        return "0%"
    return "<0.1%" if share < 0.001 else f"{100 * share:.1f}%"


def one_dim(rows: Sequence[Any]) -> str:
    """The dim every shape's label sets alone (``seq_len`` for ``seq_len=16``, ``seq_len=64``…), else ""."""
    parts = [r.label.split("=", 1) for r in rows]
    names = {p[0] for p in parts}
    return parts[0][0] if parts and all(len(p) == 2 for p in parts) and len(names) == 1 else ""


def shape_cells(row: Any, dim: str = "") -> list[Cell]:
    """One shape's cells, each a figure in its one form; with ``dim`` (one dim varies, named in the header) the
    label is its value alone, so a narrow screen never cuts the part that tells two shapes apart."""
    label = row.label.split("=", 1)[1] if dim else row.label
    cells: list[Cell] = [
        (Text(label, style="bold", justify="right" if dim else "left"),),
        (Text(f"{row.runs:,}", justify="right", style=FEW if not resolved("p99", row.runs) else ""),),
        (Text(share_text(row.share), justify="right"),),
    ]
    for stats in (row.queue, row.service, row.response):
        for key in ("p50", "p99"):
            cells.append((Text(figure(getattr(stats, key), key, row.runs), justify="right"),))
    return cells


def shapes_note(rows: Sequence[Any], open_loop: bool) -> Text:
    """What the table cannot say in its cells: the runs a p99 needs and which shapes lack them; no queue in a
    closed loop."""
    need = runs_needed("p99")
    t = Text(no_wrap=False, end="")
    few = [r for r in rows if not resolved("p99", r.runs)]
    if few:
        least = min(few, key=lambda r: r.runs)
        t.append(f"{DASH} p99 needs {need:,} runs: ", style=FEW)
        t.append(f"{len(few)} of {len(rows)} shapes have fewer (the fewest: {least.label}, {least.runs:,} runs); "
                 "they fill in as the mix runs")
    else:
        t.append(f"every shape has {need:,} runs or more: each p99 is read from its own runs", style="dim")
    if not open_loop:
        t.append("\nclosed loop: no request waits in a queue, so the queue reads 0 and response = service",
                 style="dim")
    return t


class ShapesScreen(Responsive, Screen[None]):
    """Each shape of the running mix with its runs, share, queue, service and response; the app feeds it with
    :meth:`refresh_data` on its tick."""

    DEFAULT_CSS = """
    ShapesScreen #shapes-title { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    ShapesScreen #shapes-table { height: 1fr; }
    ShapesScreen #shapes-note { height: auto; max-height: 4; padding: 0 1; border-top: solid $primary 60%; }
    """

    BINDINGS = [Binding("m,escape", "close", "back")]

    def __init__(self, snap: Any = None) -> None:
        super().__init__()
        self._snap = snap
        self._shown: tuple | None = None   # what was drawn last (rows, width): redrawn only when it changes

    def compose(self) -> ComposeResult:
        yield Static("", id="shapes-title")
        table: DataTable[Text] = DataTable(id="shapes-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="shapes-note")
        yield FitFooter()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(DataTable).focus()
        if self._snap is not None:
            self.refresh_data(self._snap)

    def on_resize(self) -> None:
        if self._snap is not None and self.is_mounted:  # the columns fitted to the new width
            self.refresh_data(self._snap)

    def refresh_data(self, snap: Any) -> None:
        """Draw the running configuration's shapes (the table is refilled only when a figure changed)."""
        self._snap = snap
        traffic = getattr(snap, "traffic", None)
        rows = tuple(traffic.shapes) if traffic is not None else ()
        key = (snap.config_id, self.app.size.width, rows)
        if key == self._shown:
            return
        self._shown = key
        title = Text.assemble(("Shapes", "bold"))
        if rows:
            runs = sum(r.runs for r in rows)
            title.append(f"  {len(rows)} shapes of the running mix (config #{snap.config_id}) over its last "
                         f"{runs:,} runs · ms", style="dim")
        else:
            title.append("  one input shape: no mix to split (a mix: --dim NAME=LO..HI, or a trace)", style="dim")
        self.query_one("#shapes-title", Static).update(title)
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        dim = one_dim(rows)
        cells = [shape_cells(r, dim) for r in rows]
        heads = headers(dim, short=False)
        if table_width(heads, cells, 2 * table.cell_padding) > table_room(table, len(rows)):
            heads = headers(dim, short=True)  # all six short, not some: "queue p50" beside "q p99" reads as two things
        fill_table(table, heads, cells, [str(i) for i in range(len(rows))], flex=0, flex_min=8, order=(2,))
        if rows:
            table.move_cursor(row=min(max(0, cursor), len(rows) - 1))
        note = shapes_note(rows, traffic is not None and traffic.open) if rows else Text("")
        self.query_one("#shapes-note", Static).update(note)

    def action_close(self) -> None:
        self.app.pop_screen()
