"""The screens, one per module: the live view, settings, history, tune, capacity, help, and the save / open / export /
confirm modals. Modal screens return what the user chose through ``dismiss(result)`` to the callback the app passed to
``push_screen``; each screen posts its own messages to the app. None of them holds the monitor or
writes a file: the app acts, through :mod:`ortop.tui.actions` for files.
"""

from ortop.tui.screens.capacity import CapacityScreen
from ortop.tui.screens.confirm import ConfirmScreen
from ortop.tui.screens.export import ExportScreen
from ortop.tui.screens.help import HelpScreen
from ortop.tui.screens.history import HistoryScreen
from ortop.tui.screens.main import MainScreen
from ortop.tui.screens.open import OpenScreen
from ortop.tui.screens.save import SaveAs, SaveScreen
from ortop.tui.screens.settings import SettingsScreen
from ortop.tui.screens.tune import TuneScreen

__all__ = ["CapacityScreen", "ConfirmScreen", "ExportScreen", "HelpScreen", "HistoryScreen", "MainScreen", "OpenScreen",
           "SaveAs", "SaveScreen", "SettingsScreen", "TuneScreen"]
