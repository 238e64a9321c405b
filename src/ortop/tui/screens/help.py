"""The help screen: every key, from the same tables the bindings are built from."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ortop.tui.keymap import HISTORY_KEYS, MAIN_KEYS, SETTINGS_KEYS
from ortop.tui.screens._base import Responsive


class HelpScreen(Responsive, ModalScreen[None]):
    """Every key, from the same table the bindings are built from."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "close")]

    def compose(self) -> ComposeResult:
        t = Text(no_wrap=False)
        t.append("ortop — a top for ONNX Runtime\n\n", style="bold")
        t.append("Live view\n", style="bold underline")
        for k in MAIN_KEYS:
            t.append(f"  {k.display or k.keys.split(',')[0]:<8}", style="bold cyan")
            t.append(f" {k.help}\n")
        t.append("\nHistory\n", style="bold underline")
        for key, text in HISTORY_KEYS:
            t.append(f"  {key:<8}", style="bold cyan")
            t.append(f" {text}\n")
        t.append("\nSettings\n", style="bold underline")
        for key, text in SETTINGS_KEYS:
            t.append(f"  {key:<16}", style="bold cyan")
            t.append(f" {text}\n")
        t.append("\n  ctrl+p   the command palette (every action by name)\n", style="dim")
        with VerticalScroll(id="help-box"):
            yield Static(t, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
