"""The screens over the live view: settings, history, help, and the small save / open / export / confirm modals.

Each reaches the session only through the app (``self.app``): the monitor it drives and the helpers that save and
export, so every path that changes a session or writes a file goes through one place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, OptionList, Static, Tab, Tabs
from textual.widgets.option_list import Option

from ortop.config.profile import Profile, ProfileError
from ortop.tui import form
from ortop.tui._compat import apply_breakpoints, breakpoint_classes
from ortop.tui.keymap import HISTORY_KEYS, MAIN_KEYS, SETTINGS_KEYS
from ortop.tui.render import HISTORY_COLUMNS, history_rows, short_label
from ortop.tui.widgets import Choice

if TYPE_CHECKING:
    from ortop.tui.app import OrtopApp


def fid(key: str) -> str:
    """A dotted profile key as a widget id (ids cannot hold dots)."""
    return key.replace(".", "--")


class _Responsive:
    """Screens that take the app's size classes as soon as they mount (see _compat.apply_breakpoints)."""

    def on_mount(self) -> None:
        apply_breakpoints(cast(Screen, self))  # a no-op when the classes were given at construction


class _AppScreen(_Responsive):
    """Typed access to the ortop app from a screen."""

    @property
    def ortop(self) -> OrtopApp:
        return cast("OrtopApp", cast(Any, self).app)


# ---- settings --------------------------------------------------------------------------------------------------
class SettingsScreen(_AppScreen, ModalScreen[bool]):
    """Every profile knob in one form. Apply validates first; errors stay beside their field and nothing changes.

    The screen closes only when the monitor accepted the new profile: the rebuild itself runs in the worker while
    the live view shows building / warming, and a failed build becomes an error event with the old session kept.

    The form is a three-column grid (label, control, hint) of plain widgets and :class:`Choice` cycles rather than
    Selects: every widget costs a restyle on each focus change, and on a 2-core host busy with the model a form
    of Selects took seconds to open and lagged behind typing.
    """

    BINDINGS = [
        Binding("escape", "cancel", "close"),
        Binding("ctrl+s", "apply", "apply", priority=True),
    ]

    def __init__(self, profile: Profile) -> None:
        super().__init__(classes=" ".join(breakpoint_classes()))
        self.base = profile
        self.initial = form.form_values(profile)

    def compose(self) -> ComposeResult:
        with Vertical(id="settings-box"):
            yield Static(Text.assemble(("Settings", "bold"), ("  enter or ctrl+s applies · esc closes · ←/→ "
                                                               "changes a choice · the session rebuilds live", "dim")),
                         id="settings-title")
            with VerticalScroll(id="settings-form"):
                section = ""
                for f in form.FIELDS:
                    if f.section != section:
                        section = f.section
                        yield Static(section, classes="section")
                        if section == "Environment":
                            yield Static(form.ENV_NOTE, classes="note")
                    yield Label(f.label, classes="flabel", id=f"label-{fid(f.key)}")
                    value = self.initial[f.key]
                    if f.choices:
                        yield Choice(f.choices, value, id=f"f-{fid(f.key)}", classes="fcontrol")
                    else:
                        yield Input(value, compact=True, id=f"f-{fid(f.key)}", classes="fcontrol",
                                    select_on_focus=False, placeholder=form.PLACEHOLDER.get(f.kind, ""))
                    yield Static(self._hint(f.key, value), classes="fhint", id=f"hint-{fid(f.key)}")
            yield Static("", id="settings-error")
            with Horizontal(id="settings-buttons"):
                yield Button("Apply", id="apply", variant="primary", compact=True)
                yield Button("Close", id="cancel", compact=True)
        # No Footer: it recomposes on every focus change (the bindings change), a large share of a tab press here;
        # the title line names the keys instead.

    def on_mount(self) -> None:
        self.query_one(f"#f-{fid('session.intra_op_num_threads')}", Input).focus()

    def load(self, profile: Profile) -> None:
        """Show ``profile`` in an already-built form: the app keeps one SettingsScreen and reopens it, because
        building the form costs about half a second of CPU and reopening costs nothing."""
        self.base = profile
        self.initial = form.form_values(profile)
        if not self.is_mounted:
            return
        self.clear_errors()
        for f in form.FIELDS:
            self.set_value(f.key, self.initial[f.key])
            self.query_one(f"#hint-{fid(f.key)}", Static).update(self._hint(f.key, self.initial[f.key]))
        self.query_one("#settings-form", VerticalScroll).scroll_home(animate=False)
        self.query_one(f"#f-{fid('session.intra_op_num_threads')}", Input).focus()

    def _hint(self, key: str, value: str, intra: int | None = None) -> Text:
        f = form.FIELD_BY_KEY[key]
        if f.kind == "affinity":
            n = self.base.session.intra_op_num_threads if intra is None else intra
            return Text(form.affinity_preview(value, n))
        return Text(f.hint)

    # ---- values ----
    def values(self) -> dict[str, str]:
        """What the form holds now, as text, per dotted key."""
        out: dict[str, str] = {}
        for f in form.FIELDS:
            w = self.query_one(f"#f-{fid(f.key)}")
            out[f.key] = w.value if isinstance(w, (Choice, Input)) else ""
        return out

    def set_value(self, key: str, value: str) -> None:
        """Type into a field (tests and the quick-fill helpers use it)."""
        w = self.query_one(f"#f-{fid(key)}")
        if isinstance(w, (Choice, Input)):
            w.value = value

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        key = (event.input.id or "")[2:].replace("--", ".")
        if key in ("session.intra_op_thread_affinities", "session.intra_op_num_threads"):
            vals = self.values()
            try:
                intra = int(vals["session.intra_op_num_threads"].strip() or 0)
            except ValueError:
                intra = 0
            aff = "session.intra_op_thread_affinities"
            hint = self.query_one(f"#hint-{fid(aff)}", Static)
            if not hint.has_class("-error"):
                hint.update(self._hint(aff, vals[aff], intra))

    # ---- errors ----
    def clear_errors(self) -> None:
        values = self.values()
        for hint in self.query(".fhint.-error"):
            key = (hint.id or "")[5:].replace("--", ".")
            hint.remove_class("-error")
            cast(Static, hint).update(self._hint(key, values.get(key, "")))
        for label in self.query(".flabel.-error"):
            label.remove_class("-error")
        self.query_one("#settings-error", Static).update("")

    def show_errors(self, err: BaseException) -> list[str]:
        """Put each message in place of its field's hint (by the error's dotted key); the rest under the form."""
        placed: dict[str, list[str]] = {}
        loose: list[str] = []
        for key, message in form.error_keys(err):
            target = form.field_for(key)
            if target is None:
                loose.append(message)
            else:
                placed.setdefault(target, []).append(message)
        first = None
        for key, messages in placed.items():
            hint = self.query_one(f"#hint-{fid(key)}", Static)
            hint.update(Text("✗ " + "; ".join(messages), style="bold red"))
            hint.add_class("-error")
            self.query_one(f"#label-{fid(key)}").add_class("-error")
            first = first or key
        if loose:
            self.query_one("#settings-error", Static).update(Text("✗ " + "; ".join(loose), style="bold red"))
        if first is not None:
            control = self.query_one(f"#f-{fid(first)}")
            control.focus()
            self.query_one("#settings-form", VerticalScroll).scroll_to_widget(control, animate=False)
        return list(placed)

    # ---- actions ----
    def action_apply(self) -> None:
        from ortop.model import ModelError

        self.clear_errors()
        try:
            new = form.build(self.base, self.values())
        except ProfileError as exc:
            self.show_errors(exc)
            return
        if new == self.base:
            self.dismiss(False)
            return
        try:
            self.ortop.apply_profile(new)
        except (ProfileError, ModelError) as exc:
            self.show_errors(exc)
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(False)


# ---- history ---------------------------------------------------------------------------------------------------
class HistoryScreen(_AppScreen, Screen[None]):
    """One row per configuration tried, updated live; the best p50 is starred and each row has a verdict.

    Enter re-applies a row's profile, ctrl+s saves it, e exports it: the table is where a tuning session ends.
    """

    BINDINGS = [
        Binding("h,escape", "close", "back"),
        Binding("enter", "apply_row", "re-apply"),
        Binding("ctrl+s", "save_row", "save row"),
        Binding("e", "export_row", "export row"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._cells: dict[int, tuple[Text, ...]] = {}
        self._records: dict[int, Any] = {}
        self._filled = False

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("History", "bold"), ("  enter re-applies a row · ctrl+s saves it · e exports it"
                                                          " · verdicts compare each row with the one before", "dim")),
                     id="history-title")
        table: DataTable[Text] = DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="history-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for i, name in enumerate(HISTORY_COLUMNS):
            table.add_column(name, key=f"c{i}")
        snap = self.ortop.snap
        if snap is not None:
            self.refresh_data(snap)
        table.focus()

    def refresh_data(self, snap: Any) -> None:
        """Add new rows and rewrite only the cells that changed (the table is live while measuring)."""
        table = self.query_one(DataTable)
        label_width = max(10, self.size.width - 68)  # the other columns and cell padding take about 66 cells
        rows = history_rows(snap.history, label_width=label_width, current_id=snap.config_id)
        for rec, cells in zip(snap.history, rows):
            cid = rec.config_id
            self._records[cid] = rec
            old = self._cells.get(cid)
            if old is None:
                table.add_row(*cells, key=str(cid))
            else:
                for i, (a, b) in enumerate(zip(old, cells)):
                    if a != b:
                        table.update_cell(str(cid), f"c{i}", b)
            self._cells[cid] = cells
        if not self._filled and rows:
            self._filled = True
            table.move_cursor(row=len(rows) - 1)
        self._show_detail()

    def selected(self) -> Any:
        """The ConfigRecord under the cursor, or None."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None
        return self._records.get(int(key)) if key is not None else None

    def _show_detail(self, message: Text | None = None) -> None:
        rec = self.selected()
        detail = Text(no_wrap=False)
        if rec is not None:
            detail.append(f"#{rec.config_id} ", style="bold")
            detail.append(short_label(rec.label) if rec.label != "start" else "the start profile")
            detail.append(f"\nverdict: {rec.verdict or '—'} · providers {', '.join(rec.providers_active) or '—'}",
                          style="dim")
        if message is not None:
            detail.append("\n")
            detail.append_text(message)
        self.query_one("#history-detail", Static).update(detail)

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._show_detail()

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_apply_row()

    def action_apply_row(self) -> None:
        from ortop.model import ModelError

        rec = self.selected()
        if rec is None:
            return
        try:
            self.ortop.apply_profile(rec.profile)
        except (ProfileError, ModelError) as exc:
            self._show_detail(Text(f"✗ {exc}", style="bold red"))
            return
        self._show_detail(Text(f"re-applying #{rec.config_id}: the session rebuilds", style="green"))

    def action_save_row(self) -> None:
        rec = self.selected()
        if rec is not None:
            self.ortop.ask_save(rec.profile, default_name=f"config-{rec.config_id}")

    def action_export_row(self) -> None:
        rec = self.selected()
        if rec is not None:
            self.ortop.push_screen(ExportScreen(rec.profile))

    def action_close(self) -> None:
        self.dismiss(None)


# ---- help ------------------------------------------------------------------------------------------------------
class HelpScreen(_Responsive, ModalScreen[None]):
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


# ---- confirm / save / open / export ----------------------------------------------------------------------------
class ConfirmScreen(_Responsive, ModalScreen[bool]):
    """A yes/no question; nothing is overwritten without one."""

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


class SaveScreen(_AppScreen, ModalScreen[None]):
    """Ask a name; the file goes to the profile folder as NAME.toml, and an existing file is only replaced on 'y'."""

    BINDINGS = [Binding("escape", "close", "cancel")]

    def __init__(self, profile: Profile, default_name: str = "") -> None:
        super().__init__()
        self.profile = profile
        self.default_name = default_name

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text.assemble(("Save profile", "bold"), ("  enter saves · esc cancels", "dim")))
            yield Input(self.default_name, id="save-name", placeholder="name")
            yield Static("", id="save-path")
            yield Static("", id="save-message")

    def on_mount(self) -> None:
        self._preview(self.default_name)
        self.query_one(Input).focus()

    def _preview(self, name: str) -> None:
        path = self.ortop.profile_path(name)
        self.query_one("#save-path", Static).update(Text(f"→ {path}" if path else "→ (type a name)", style="dim"))

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        self._preview(event.value)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        path = self.ortop.profile_path(event.value)
        if path is None:
            self.query_one("#save-message", Static).update(Text("type a name (letters, digits, - and _)",
                                                                 style="bold red"))
            return
        if path.exists():
            def answered(yes: bool | None) -> None:
                if yes:
                    self._write(path)
                else:
                    self.query_one("#save-message", Static).update(Text("not saved: pick another name",
                                                                         style="yellow"))
            self.app.push_screen(ConfirmScreen(f"{path} exists. Overwrite it?"), answered)
            return
        self._write(path)

    def _write(self, path: Path) -> None:
        try:
            self.ortop.save_profile_to(self.profile, path)
        except OSError as exc:
            self.query_one("#save-message", Static).update(Text(f"✗ cannot write {path}: {exc.strerror or exc}",
                                                                 style="bold red"))
            return
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class OpenScreen(_AppScreen, ModalScreen[None]):
    """Profiles in the profile folder and the shipped ones; Enter applies the highlighted one."""

    BINDINGS = [Binding("escape", "close", "cancel")]

    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self.paths = paths

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="open-box"):
            yield Static(Text.assemble(("Open profile", "bold"), ("  enter applies · esc cancels", "dim")))
            options = [Option(Text.assemble((p.stem, "bold"), (f"  {p.parent}", "dim")), id=str(i))
                       for i, p in enumerate(self.paths)]
            yield OptionList(*options, id="open-list")
            yield Static("" if self.paths else Text(
                f"no profiles yet: ctrl+s saves one to {self.ortop.profile_dir}", style="dim"), id="open-message")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        from ortop.config import profile as profile_mod
        from ortop.model import ModelError

        path = self.paths[int(event.option.id or 0)]
        try:
            prof = profile_mod.load(path)
            self.ortop.apply_profile(prof)
        except (ProfileError, ModelError) as exc:
            self.query_one("#open-message", Static).update(Text(f"✗ {exc}", style="bold red"))
            return
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


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


class ExportScreen(_AppScreen, ModalScreen[None]):
    """The settings as code or config text, per format; ``w`` writes the shown text next to the profiles."""

    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("w", "write", "write file"),
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
            yield Static(Text.assemble(("Export", "bold"), ("  ←/→ format · w writes a file · esc closes", "dim")))
            yield Tabs(*[Tab(name, id=f"x-{name}") for name, _ in EXPORT_FORMATS], active=f"x-{self.fmt}",
                       id="export-tabs")
            with VerticalScroll(id="export-scroll"):
                yield Static("", id="export-text")
            yield Static("", id="export-message")
        yield Footer()

    def on_mount(self) -> None:
        self._show_export()

    def _show_export(self) -> None:
        self.text, self.ok = export_text(self.profile, self.fmt)
        self.query_one("#export-text", Static).update(Text(self.text, style="" if self.ok else "yellow"))

    @on(Tabs.TabActivated)
    def _tab(self, event: Tabs.TabActivated) -> None:
        self.fmt = (event.tab.id or "x-python")[2:]
        self.query_one("#export-message", Static).update("")
        self._show_export()

    def action_tab(self, step: int) -> None:
        names = [n for n, _ in EXPORT_FORMATS]
        i = (names.index(self.fmt) + step) % len(names)
        self.query_one(Tabs).active = f"x-{names[i]}"

    def action_write(self) -> None:
        if not self.ok:
            return
        ext = dict(EXPORT_FORMATS)[self.fmt]
        try:
            path = self.ortop.write_export(self.text, ext)
        except OSError as exc:
            self.query_one("#export-message", Static).update(Text(f"✗ {exc.strerror or exc}", style="bold red"))
            return
        self.query_one("#export-message", Static).update(Text(f"written to {path}", style="green"))

    def action_close(self) -> None:
        self.dismiss(None)


def list_profiles(profile_dir: str | os.PathLike) -> list[Path]:
    """``*.toml`` in the user's profile folder, then the shipped profiles (when this build ships any)."""
    dirs = [Path(profile_dir)]
    try:
        from ortop.cli.profiles import shipped_profiles_dir

        shipped = shipped_profiles_dir()
        if shipped is not None:
            dirs.append(Path(shipped))
    except (ImportError, AttributeError, OSError):
        pass
    out: list[Path] = []
    seen: set[Path] = set()
    for d in dirs:
        try:
            files = sorted(d.glob("*.toml"))
        except OSError:
            continue
        for p in files:
            rp = p.resolve()
            if rp not in seen:
                seen.add(rp)
                out.append(p)
    return out
