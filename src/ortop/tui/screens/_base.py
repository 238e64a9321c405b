"""What the screens share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

from rich.text import Text
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable

from ortop.config.profile import Profile
from ortop.tui._compat import apply_breakpoints
from ortop.tui.panels._format import Cell, fit_columns


class Responsive:
    """Screens that take the app's size classes as soon as they mount (see _compat.apply_breakpoints)."""

    def on_mount(self) -> None:
        apply_breakpoints(cast(Screen, self))  # a no-op when the classes were given at construction


class Rows:
    """Screens of one table whose highlighted row is shown in full below it (their ``show_message``) and whose row
    enter applies (their ``action_apply``). Handlers by Textual's naming, so a plain mixin holds them."""

    def on_data_table_row_highlighted(self) -> None:
        self.show_message()

    def on_data_table_row_selected(self) -> None:
        self.action_apply()

    def show_message(self, message: Text | None = None) -> None:
        """The highlighted row in full, then ``message`` (the outcome of an action) under it."""
        raise NotImplementedError

    def action_apply(self) -> None:
        raise NotImplementedError


T = TypeVar("T")
S = TypeVar("S")


def under_cursor(table: DataTable, rows: Sequence[T]) -> T | None:
    """The item of ``rows`` (one per table row, in order) under the table's cursor, or None."""
    if not rows or not 0 <= table.cursor_row < len(rows):
        return None
    return rows[table.cursor_row]


SCROLLBAR = 2  # cells a DataTable's vertical scrollbar takes (Textual's default size)


def table_room(table: DataTable, rows: int) -> int:
    """Cells a table's columns may take: its width (the app's before the first layout), less the scrollbar when its
    ``rows`` and the header do not all show (or it is not laid out yet)."""
    width = table.size.width or table.app.size.width
    height = table.size.height
    return width - (SCROLLBAR if not height or rows + 1 > height else 0)


def fill_table(table: DataTable, headers: Sequence[Cell], rows: Sequence[Sequence[Cell]], keys: Sequence[str], *,
               flex: int, flex_min: int = 12, order: Sequence[int] = ()) -> None:
    """Refill ``table`` with columns fitted to its width by the one rule (``_format.fit_columns``): every cell whole
    or cut after a whole word, never wider than the screen (which would cut it anywhere); column ``flex`` takes what
    the others leave (``flex_min`` cells at least, while ``order`` says which give up first), and one fitted to
    nothing is left out. The columns are keyed ``c0``, ``c1``… (by their place among all), the rows by ``keys``."""
    widths, shown_headers, shown_rows = fit_columns(table_room(table, len(rows)), headers, rows, flex,
                                                    pad=2 * table.cell_padding, flex_min=flex_min, order=order)
    shown = [i for i, w in enumerate(widths) if w > 0]  # a column fitted to nothing is left out
    table.clear(columns=True)
    for i in shown:
        table.add_column(shown_headers[i], key=f"c{i}", width=widths[i])
    for key, cells in zip(keys, shown_rows):
        table.add_row(*(cells[i] for i in shown), key=key)


def post_from_thread(target: Any, message: Message) -> None:
    """Post from a search's own thread: safe there, and it never waits. Dropped once the target is closed, or when
    the app and its event loop are gone (a quit while the search ran)."""
    try:
        target.post_message(message)
    except RuntimeError:
        pass


class FromScreen(Message, Generic[S]):
    """A screen's request to the app, naming the screen, which the app answers (a search's screens: start, finished)."""

    def __init__(self, screen: S) -> None:
        super().__init__()
        self.screen = screen


class Offered(FromScreen[S]):
    """A profile a screen offers the app to apply or save, and what the screen calls it."""

    def __init__(self, screen: S, profile: Profile, label: str) -> None:
        super().__init__(screen)
        self.profile = profile
        self.label = label
