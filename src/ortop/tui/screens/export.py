"""The export modal: the settings as code or config text, one tab per format."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static, Tab, Tabs

from ortop.config.profile import Profile
from ortop.tui.screens._base import FromScreen, Responsive
from ortop.tui.widgets import FitFooter

EXPORT_FORMATS: tuple[tuple[str, str], ...] = (
    ("python", ".py"), ("cpp", ".cpp"), ("csharp", ".cs"), ("perf-test", ".sh"), ("olive", ".olive.json"),
    ("env", ".env"), ("json", ".json"),
)


def export_text(profile: Profile, fmt: str) -> tuple[str, bool]:
    """(text, ok): the export module's rendering, or why there is none."""
    try:
        from ortop import export
    except ImportError:
        return "export is not available in this build of ortop", False
    try:
        return export.render(profile, fmt), True
    except Exception as exc:  # an exporter bug must not take the live view down
        return f"cannot export as {fmt}: {type(exc).__name__}: {exc}", False


class ExportScreen(Responsive, ModalScreen[None]):
    """The settings as code or config text, per format; ``w`` asks the app to write the shown text next to the
    profiles under a name the user gives (:class:`ExportScreen.WriteExport`), and the app answers with
    :meth:`show_message`."""

    class WriteExport(FromScreen["ExportScreen"]):
        """Write the exported ``text`` next to the profiles under a name the user gives (``…-export{ext}`` offered);
        the app asks the name and answers with :meth:`ExportScreen.show_message`."""

        def __init__(self, screen: ExportScreen, text: str, ext: str) -> None:
            super().__init__(screen)
            self.text = text
            self.ext = ext

        @property
        def control(self) -> ExportScreen:
            return self.screen

    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("w", "write", "write to a file…"),
        Binding("left", "tab(-1)", "prev", show=False),
        Binding("right", "tab(1)", "next", show=False),
    ]

    def __init__(self, profile: Profile, fmt: str = "python") -> None:
        super().__init__()
        self.profile = profile
        self.fmt = fmt
        self.text = ""
        self.ok = False

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static(Text.assemble(("Export", "bold"),
                                       ("  ←/→ format · w writes it to a file (asks a name) · esc closes", "dim")))
            yield Tabs(*[Tab(name, id=f"x-{name}") for name, _ in EXPORT_FORMATS], active=f"x-{self.fmt}",
                       id="export-tabs")
            with VerticalScroll(id="export-scroll"):
                yield Static("", id="export-text")
            yield Static("", id="export-message")
        yield FitFooter()

    def on_mount(self) -> None:
        self._show_export()

    def _show_export(self) -> None:
        self.text, self.ok = export_text(self.profile, self.fmt)
        self.query_one("#export-text", Static).update(Text(self.text, style="" if self.ok else "yellow"))

    def show_message(self, message: Text | str) -> None:
        """The line under the text: where a file went, or why it did not."""
        self.query_one("#export-message", Static).update(message)

    @on(Tabs.TabActivated)
    def _tab(self, event: Tabs.TabActivated) -> None:
        self.fmt = (event.tab.id or "x-python")[2:]
        self.show_message("")
        self._show_export()

    def action_tab(self, step: int) -> None:
        names = [n for n, _ in EXPORT_FORMATS]
        i = (names.index(self.fmt) + step) % len(names)
        self.query_one(Tabs).active = f"x-{names[i]}"

    def action_write(self) -> None:
        if self.ok:
            self.post_message(self.WriteExport(self, self.text, dict(EXPORT_FORMATS)[self.fmt]))

    def action_close(self) -> None:
        self.dismiss(None)
