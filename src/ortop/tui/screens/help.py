"""The help screen: every key, from the same tables the bindings are built from, and how the figures read."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ortop.tui.keymap import CAPACITY_KEYS, HISTORY_KEYS, MAIN_KEYS, SETTINGS_KEYS, TUNE_KEYS, key_display
from ortop.tui.screens._base import Responsive

UNITS: tuple[tuple[str, str], ...] = (
    ("cores", "a process's CPU time: 1.10 cores is htop's 110 % (the worker's, the UI's)"),
    ("w/all %", "a core meter: the worker's share of that core / the core's whole load (other processes too)"),
    ("%", "a share: of the host (host), of the wall time (in Run()), of one core (a thread)"),
)


def key_table(rows: Iterable[tuple[str, str]]) -> Table:
    """Keys and what they do in two columns: a long line wraps under its own text, not under the key."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(ratio=1)
    for key, text in rows:
        table.add_row(key, text)
    return table


class HelpScreen(Responsive, ModalScreen[None]):
    """Every key, from the same table the bindings are built from."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "close")]

    def compose(self) -> ComposeResult:
        parts: list[RenderableType] = [
            Text.assemble(("ortop — a top for ONNX Runtime", "bold"), ("   esc / ? / F1 closes", "dim")),
            Text("\nLive view", style="bold underline"),
            key_table((key_display(k), k.help) for k in MAIN_KEYS),
            Text("\nHistory", style="bold underline"),
            key_table(HISTORY_KEYS),
            Text("\nTune", style="bold underline"),
            key_table(TUNE_KEYS),
            Text("\nCapacity", style="bold underline"),
            key_table(CAPACITY_KEYS),
            Text("\nSettings", style="bold underline"),
            key_table(SETTINGS_KEYS),
            Text("\nHow the figures read", style="bold underline"),
            key_table(UNITS),
            Text("\nctrl+p opens the command palette: every action by name", style="dim"),
        ]
        with VerticalScroll(id="help-box"):
            yield Static(Group(*parts), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
