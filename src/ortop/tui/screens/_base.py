"""What the screens share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, cast

from textual.screen import Screen
from textual.widgets import DataTable

from ortop.tui._compat import apply_breakpoints


class Responsive:
    """Screens that take the app's size classes as soon as they mount (see _compat.apply_breakpoints)."""

    def on_mount(self) -> None:
        apply_breakpoints(cast(Screen, self))  # a no-op when the classes were given at construction


T = TypeVar("T")


def under_cursor(table: DataTable, rows: Sequence[T]) -> T | None:
    """The item of ``rows`` (one per table row, in order) under the table's cursor, or None."""
    if not rows or not 0 <= table.cursor_row < len(rows):
        return None
    return rows[table.cursor_row]
