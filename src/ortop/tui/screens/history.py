"""The history screen: one row per configuration tried, updated live while it is open."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ortop.tui.panels.history import (
    HISTORY_COLUMNS,
    columns,
    history_detail,
    history_rows,
    label_width,
    title_text,
)
from ortop.tui.screens._base import FromScreen, Responsive, Rows
from ortop.tui.widgets import FitFooter


class _RowMessage(FromScreen["HistoryScreen"]):
    """A request about one history row (an ``engine.monitor.ConfigRecord``)."""

    def __init__(self, screen: HistoryScreen, record: Any) -> None:
        super().__init__(screen)
        self.record = record

    @property
    def control(self) -> HistoryScreen:
        return self.screen


class HistoryScreen(Responsive, Rows, Screen[None]):
    """One row per configuration tried, updated live; the best p50 is starred and each row has a verdict.

    Enter re-applies a row's profile, ctrl+s saves it, e exports it: the table is where a tuning session ends. Each
    of those is a message of this screen's to the app (:class:`ApplyRow`…); the app feeds the table with
    :meth:`refresh_data` on its tick and answers a re-apply with :meth:`show_message`.
    """

    class ApplyRow(_RowMessage):
        """Re-apply the row's profile; the app answers with :meth:`HistoryScreen.show_message`."""

    class VerifyRow(_RowMessage):
        """Verify the row against the one before it by interleaving them (the app starts it, the monitor runs it)."""

    class SaveRow(_RowMessage):
        """Save the row's profile (the app opens the save modal)."""

    class ExportRow(_RowMessage):
        """Export the row's profile (the app opens the export modal)."""

    BINDINGS = [
        Binding("h,escape", "close", "back"),
        Binding("enter", "apply", "re-apply"),
        Binding("v", "verify_row", "verify"),
        Binding("ctrl+s", "save_row", "save row"),
        Binding("e", "export_row", "export row"),
    ]

    def __init__(self, snap: Any = None) -> None:
        super().__init__()
        self._first = snap
        self._cells: dict[int, tuple[Text, ...]] = {}
        self._records: dict[int, Any] = {}
        self._filled = False
        self._columns: tuple[int, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static(title_text(self.app.size.width), id="history-title")  # names the columns a narrow one drops
        table: DataTable[Text] = DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="history-detail")
        yield FitFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._columns = columns(self.app.size.width)
        for i in self._columns:
            name = HISTORY_COLUMNS[i]
            table.add_column("change" if i == 2 and len(self._columns) < len(HISTORY_COLUMNS) else name, key=f"c{i}")
        if self._first is not None:
            self.refresh_data(self._first)
            self._first = None
        table.focus()

    def refresh_data(self, snap: Any) -> None:
        """Add new rows and rewrite only the cells that changed (the table is live while measuring)."""
        table = self.query_one(DataTable)
        rows = history_rows(snap.history, label_width=label_width(self.app.size.width), current_id=snap.config_id)
        for rec, all_cells in zip(snap.history, rows):
            cid = rec.config_id
            self._records[cid] = rec
            cells = tuple(all_cells[i] for i in self._columns)
            old = self._cells.get(cid)
            if old is None:
                table.add_row(*cells, key=str(cid))
            else:
                for i, a, b in zip(self._columns, old, cells):
                    if a != b:
                        table.update_cell(str(cid), f"c{i}", b)
            self._cells[cid] = cells
        if not self._filled and rows:
            self._filled = True
            table.move_cursor(row=len(rows) - 1)
        self.show_message()

    def selected(self) -> Any:
        """The ConfigRecord under the cursor, or None."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None
        return self._records.get(int(key)) if key is not None else None

    def _before(self, rec: Any) -> Any:
        """The row above ``rec`` (what its change is counted from), or None for the first."""
        ids = list(self._records)
        i = ids.index(rec.config_id) if rec.config_id in ids else 0
        return self._records[ids[i - 1]] if i > 0 else None

    def show_message(self, message: Text | None = None) -> None:
        """The selected row's detail, then ``message`` (the outcome of a re-apply) under it."""
        rec = self.selected()
        detail = history_detail(rec, self._before(rec)) if rec is not None else Text(no_wrap=False)
        if message is not None:
            detail.append("\n")
            detail.append_text(message)
        self.query_one("#history-detail", Static).update(detail)

    def _post(self, kind: type[_RowMessage]) -> None:
        rec = self.selected()
        if rec is not None:
            self.post_message(kind(self, rec))

    def action_apply(self) -> None:
        self._post(self.ApplyRow)

    def action_verify_row(self) -> None:
        self._post(self.VerifyRow)

    def action_save_row(self) -> None:
        self._post(self.SaveRow)

    def action_export_row(self) -> None:
        self._post(self.ExportRow)

    def action_close(self) -> None:
        self.dismiss(None)
