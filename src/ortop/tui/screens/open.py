"""The open modal: pick a saved or shipped profile; the app loads and applies it."""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ortop.tui.screens._base import Responsive


class OpenScreen(Responsive, ModalScreen[Path | None]):
    """Profiles in the profile folder and the shipped ones; Enter picks the highlighted one.

    Dismissed with the chosen path (None on escape). The app loads and applies it; when that fails, it opens the
    list again with the reason as ``message`` and the same profile highlighted.
    """

    BINDINGS = [Binding("escape", "close", "cancel")]

    def __init__(self, paths: list[Path], profile_dir: str | os.PathLike, *, message: Text | None = None,
                 highlight: Path | None = None) -> None:
        super().__init__()
        self.paths = paths
        self.profile_dir = Path(profile_dir)
        self.message = message
        self.highlight = highlight

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="open-box"):
            yield Static(Text.assemble(("Open profile", "bold"), ("  enter applies · esc cancels", "dim")))
            options = [Option(Text.assemble((p.stem, "bold"), (f"  {p.parent}", "dim")), id=str(i))
                       for i, p in enumerate(self.paths)]
            yield OptionList(*options, id="open-list")
            if self.message is not None:
                yield Static(self.message, id="open-message")
            else:
                yield Static("" if self.paths else Text(
                    f"no profiles yet: ctrl+s saves one to {self.profile_dir}", style="dim"), id="open-message")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.highlight in self.paths:
            options.highlighted = self.paths.index(self.highlight)
        options.focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.paths[int(event.option.id or 0)])

    def action_close(self) -> None:
        self.dismiss(None)
