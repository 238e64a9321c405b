"""A yes/no modal: nothing is overwritten without one."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ortop.tui.screens._base import Responsive


class ConfirmScreen(Responsive, ModalScreen[bool]):
    """A yes/no question; dismissed with the answer."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question, style="bold"))
            yield Static(Text("y = yes · n / esc = no", style="dim"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
