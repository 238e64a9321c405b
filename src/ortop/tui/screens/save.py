"""The save modal: a name for a file (a profile, an export); the app writes it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ortop.tui.actions import profile_path
from ortop.tui.screens._base import Responsive
from ortop.tui.screens.confirm import ConfirmScreen


class SaveAs(NamedTuple):
    """The save modal's answer: the name as typed and the file it names (already confirmed if it existed)."""

    name: str
    path: Path


class SaveScreen(Responsive, ModalScreen[SaveAs | None]):
    """Ask a name; the file goes to the profile folder as NAME.toml (NAME + ``suffix``), and an existing file is only
    replaced on 'y'.

    Dismissed with a :class:`SaveAs` (None on escape); the app writes the file. When the write fails, the app
    asks again with the reason as ``message``.
    """

    BINDINGS = [Binding("escape", "close", "cancel")]

    def __init__(self, profile_dir: str | os.PathLike, default_name: str = "", message: Text | None = None, *,
                 suffix: str = ".toml", title: str = "Save profile") -> None:
        super().__init__()
        self.profile_dir = Path(profile_dir)
        self.default_name = default_name
        self.message = message
        self.suffix = suffix
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text.assemble((self.title_text, "bold"), ("  enter saves · esc cancels", "dim")))
            yield Input(self.default_name, id="save-name", placeholder="name")
            yield Static("", id="save-path")
            yield Static(self.message or "", id="save-message")

    def on_mount(self) -> None:
        self._preview(self.default_name)
        self.query_one(Input).focus()

    def _preview(self, name: str) -> None:
        path = profile_path(self.profile_dir, name, self.suffix)
        self.query_one("#save-path", Static).update(Text(f"→ {path}" if path else "→ (type a name)", style="dim"))

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        self._preview(event.value)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        name = event.value
        path = profile_path(self.profile_dir, name, self.suffix)
        if path is None:
            self.query_one("#save-message", Static).update(Text("type a name (letters, digits, - and _)",
                                                                 style="bold red"))
            return
        if path.exists():
            def answered(yes: bool | None) -> None:
                if yes:
                    self.dismiss(SaveAs(name, path))
                else:
                    self.query_one("#save-message", Static).update(Text("not saved: pick another name",
                                                                         style="yellow"))
            self.app.push_screen(ConfirmScreen(f"{path} exists. Overwrite it?"), answered)
            return
        self.dismiss(SaveAs(name, path))

    def action_close(self) -> None:
        self.dismiss(None)
