"""The settings form: every profile knob, validated before anything changes."""

from __future__ import annotations

from typing import cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from ortop.config.profile import Profile, ProfileError
from ortop.tui import form
from ortop.tui._compat import breakpoint_classes
from ortop.tui.screens._base import Responsive
from ortop.tui.widgets import Choice


def fid(key: str) -> str:
    """A dotted profile key as a widget id (ids cannot hold dots)."""
    return key.replace(".", "--")


class SettingsScreen(Responsive, ModalScreen[Profile | None]):
    """Every profile knob in one form. Apply validates first; errors stay beside their field and nothing changes.

    Apply dismisses the screen with the new profile (None when nothing changed or on close); the app hands it to the
    monitor. Should the monitor refuse it, the app puts the errors beside their fields (:meth:`show_errors`) and
    shows this same screen again, with what the user typed. The rebuild itself runs in the worker while the live
    view shows building / warming, and a failed build becomes an error event with the old session kept.

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
        self.clear_errors()
        try:
            new = form.build(self.base, self.values())
        except ProfileError as exc:
            self.show_errors(exc)
            return
        self.dismiss(None if new == self.base else new)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)
