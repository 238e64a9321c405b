"""The app's own messages, which no one screen owns.

A screen's requests to the app are that screen's own message classes (``HistoryScreen.ApplyRow``,
``ExportScreen.WriteExport``, ``TuneScreen.Start``…, on :class:`ortop.tui.screens._base.FromScreen`): they bubble up
to :class:`ortop.tui.app.OrtopApp`, which acts (applies a profile, writes a file) and tells the screen the outcome
through the screen's own public methods. A screen therefore never holds the monitor, never writes a file, and can
be driven in a test by catching what it posts.
"""

from __future__ import annotations

from textual.message import Message


class CatchUp(Message):
    """The live view is on top again (a modal or the history closed): read the monitor now, not at the next tick."""
