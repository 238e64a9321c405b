"""The app's custom messages: what a screen asks of the app instead of reaching into it.

Screens post these and bubble them up to :class:`ortop.tui.app.OrtopApp`, which acts (applies a profile, writes a
file) and tells the screen the outcome through the screen's own public methods. A screen therefore never holds
the monitor, never writes a file, and can be driven in a test by catching what it posts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from ortop.tui.screens.export import ExportScreen
    from ortop.tui.screens.history import HistoryScreen


class CatchUp(Message):
    """The live view is on top again (a modal or the history closed): read the monitor now, not at the next tick."""


class _RowMessage(Message):
    """A request about one history row (an ``engine.monitor.ConfigRecord``)."""

    def __init__(self, screen: HistoryScreen, record: Any) -> None:
        super().__init__()
        self.screen = screen
        self.record = record

    @property
    def control(self) -> HistoryScreen:
        return self.screen


class ApplyRow(_RowMessage):
    """Re-apply the row's profile; the app answers with :meth:`HistoryScreen.show_message`."""


class VerifyRow(_RowMessage):
    """Verify the row against the one before it by interleaving them (the app starts it, the monitor runs it)."""


class SaveRow(_RowMessage):
    """Save the row's profile (the app opens the save modal)."""


class ExportRow(_RowMessage):
    """Export the row's profile (the app opens the export modal)."""


class WriteExport(Message):
    """Write the exported ``text`` next to the profiles under a name the user gives (``…-export{ext}`` offered);
    the app asks the name and answers with :meth:`ExportScreen.show_message`."""

    def __init__(self, screen: ExportScreen, text: str, ext: str) -> None:
        super().__init__()
        self.screen = screen
        self.text = text
        self.ext = ext

    @property
    def control(self) -> ExportScreen:
        return self.screen
