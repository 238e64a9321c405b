"""The settings form: every profile knob, validated as it is typed and again before anything changes."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import DescendantFocus
from textual.screen import ModalScreen
from textual.visual import VisualType
from textual.widgets import Button, Input, Label, Static

from ortop.config import knobs
from ortop.config.profile import Profile, ProfileError
from ortop.tui import form
from ortop.tui._compat import breakpoint_classes
from ortop.tui.panels._format import fit, lead_forms
from ortop.tui.screens._base import Responsive
from ortop.tui.widgets import Choice


def fid(key: str) -> str:
    """A dotted profile key as a widget id (ids cannot hold dots)."""
    return key.replace(".", "--")


class Hint(Static):
    """A field's hint beside it. On a narrow screen (one line a hint) it is fitted by the one rule: whole, a lead of
    it (``0 = ORT's default (physical cores)`` → ``0 = ORT's default``), or cut after a whole word, never mid-word
    as the terminal's ellipsis cut it ("physical cor…"). An error wraps whole; the line under the form says the
    focused field's hint in full."""

    def __init__(self, content: Text, **kw: Any) -> None:
        super().__init__(content, **kw)
        self._line = content
        self._reveal = False

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        self._line = content if isinstance(content, Text) else Text(str(content))
        self._reveal = False
        super().update(content, layout=layout)

    def reveal(self) -> None:
        """Scroll the form so all of this hint shows, once it is laid out at its new height: an error on the form's
        bottom row showed only its first line, the rest below the fold."""
        self._reveal = True
        self.call_after_refresh(self._scroll_into_view)

    def on_resize(self) -> None:
        self._scroll_into_view()  # the height an error asked for arrives with the next layout

    def _scroll_into_view(self) -> None:
        if self._reveal and self.is_mounted:
            self.scroll_visible(animate=False)

    def render(self) -> RenderResult:
        width = self.content_size.width
        if (self.has_class("-error") or not self.screen.has_class("-narrow") or width <= 0
                or self._line.cell_len <= width):
            return super().render()
        return fit([Text(f, style=self._line.style) for f in lead_forms(self._line.plain)], width)


class SettingsScreen(Responsive, ModalScreen[Profile | None]):
    """Every profile knob in one form. Apply validates first; errors stay beside their field and nothing changes.

    Apply dismisses the screen with the new profile (None when nothing changed or on close); the app hands it to the
    monitor. Should the monitor refuse it, the app puts the errors beside their fields (:meth:`show_errors`) and
    shows this same screen again, with what the user typed. The rebuild itself runs in the worker while the live
    view shows building / warming, and a failed build becomes an error event with the old session kept.

    The form is a three-column grid (label, control, hint) of plain widgets and :class:`Choice` cycles rather than
    Selects: every widget costs a restyle on each focus change, and on a 2-core host busy with the model a form
    of Selects took seconds to open and lagged behind typing.

    Each change is checked at once: the field's error appears, or its old one goes, as the user types (an error
    the monitor gave, such as a core this host lacks, stays until that field changes). ctrl+↓/↑ (or page down/up)
    jump between sections, and the focused row's label is highlighted.

    What is typed is held to this host: a thread count to its usable cores × :data:`form.THREADS_PER_CORE`, a
    paced rate to 0 or at least :data:`form.MIN_RATE_HZ`; a value past its bound is refused beside the field, with
    the reason. ``cores`` stands for the host's (tests).
    """

    BINDINGS = [
        Binding("escape", "cancel", "close"),
        Binding("ctrl+s", "apply", "apply", priority=True),
        Binding("ctrl+down,pagedown", "section(1)", "next section", priority=True),
        Binding("ctrl+up,pageup", "section(-1)", "previous section", priority=True),
    ]

    def __init__(self, profile: Profile, cores: form.HostCores | None = None) -> None:
        super().__init__(classes=" ".join(breakpoint_classes()))
        self.base = profile
        self.initial = form.form_values(profile)
        self.set_keys: set[str] = set()  # fields given a value through set_value since the form was last loaded
        # the cores the worker may use, which bound the thread counts typed here (read again on each opening)
        self._given_cores = cores
        self.cores = cores or form.host_cores()
        # fields whose error came from the monitor, with the text it refused: kept while the field holds that text
        self._remote: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="settings-box"):
            yield Static(Text.assemble(("Settings", "bold"), ("  enter applies · esc closes · ctrl+↓/↑ sections · "
                                                               f"{form.BLANK_RULE}", "dim")),
                         id="settings-title")
            with VerticalScroll(id="settings-form"):
                section = ""
                n = 0
                for f in form.FIELDS:
                    if f.section != section:
                        section = f.section
                        yield Static(section, classes="section", id=f"section-{n}")
                        n += 1
                        if section == "Environment":
                            yield Static(form.ENV_NOTE, classes="note")
                    yield Label(f.label, classes="flabel", id=f"label-{fid(f.key)}")
                    value = self.initial[f.key]
                    if f.choices:
                        yield Choice(f.choices, value, id=f"f-{fid(f.key)}", classes="fcontrol")
                    else:
                        yield Input(value, compact=True, id=f"f-{fid(f.key)}", classes="fcontrol",
                                    select_on_focus=False, placeholder=form.PLACEHOLDER.get(f.kind, ""))
                    yield Hint(self._hint(f.key, value), classes="fhint", id=f"hint-{fid(f.key)}")
            yield Static("", id="settings-focus")
            yield Static("", id="settings-error")
            with Horizontal(id="settings-buttons"):
                yield Button("Apply", id="apply", variant="primary", compact=True)
                yield Button("Close", id="cancel", compact=True)
        # No Footer: it recomposes on every focus change (the bindings change), a large share of a tab press here;
        # the title line names the keys instead.

    def on_mount(self) -> None:
        self.query_one(f"#f-{fid('session.intra_op_num_threads')}", Input).focus()

    @staticmethod
    def sections() -> list[str]:
        """The form's sections in order (each has a heading ``#section-N``)."""
        out: list[str] = []
        for f in form.FIELDS:
            if f.section not in out:
                out.append(f.section)
        return out

    NOTHING_KEPT: frozenset[str] = frozenset()

    def load(self, profile: Profile, keep: frozenset[str] | set[str] = NOTHING_KEPT) -> None:
        """Show ``profile`` in an already-built form: the app keeps one SettingsScreen and reopens it, because
        building the form costs about half a second of CPU and reopening costs nothing. Fields in ``keep`` (given a
        value through :meth:`set_value` meanwhile) keep theirs."""
        self.base = profile
        self.initial = form.form_values(profile)
        self.cores = self._given_cores or form.host_cores()
        if not self.is_mounted:
            return
        now = self.values() if keep is not self.NOTHING_KEPT else {}
        if now and all(f.key in keep or now[f.key] == self.initial[f.key] for f in form.FIELDS):
            self.set_keys = set()  # shown again once drawn, and nothing strayed in: errors and focus stay as they are
            return
        self.clear_errors()
        for f in form.FIELDS:
            if f.key in keep:
                continue
            self._put(f.key, self.initial[f.key])
            self.query_one(f"#hint-{fid(f.key)}", Static).update(self._hint(f.key, self.initial[f.key]))
        self.set_keys = set()
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
        """Type into a field (tests and the quick-fill helpers use it): the value stays when the form shows the
        running profile again once drawn (:meth:`load` with ``keep``)."""
        self.set_keys.add(key)
        self._put(key, value)

    def _put(self, key: str, value: str) -> None:
        w = self.query_one(f"#f-{fid(key)}")
        if isinstance(w, (Choice, Input)):
            w.value = value

    def _intra(self, vals: dict[str, str]) -> int:
        try:
            return int(vals["session.intra_op_num_threads"].strip() or 0)
        except ValueError:
            return 0

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        self._edited((event.input.id or "")[2:].replace("--", "."))

    @on(Choice.Changed)
    def _choice_changed(self, event: Choice.Changed) -> None:
        self._edited((event.choice.id or "")[2:].replace("--", "."))

    def _edited(self, key: str) -> None:
        """Check the form as it stands now that ``key`` changed: that field's error appears or goes at once (its
        old error never stays stale until enter), and so do the errors of fields checked against it (the affinity
        against the thread count). Errors the monitor gave stay on their own fields until those change."""
        if not self.is_mounted or key not in form.FIELD_BY_KEY:
            return
        vals = self.values()
        aff = "session.intra_op_thread_affinities"
        pair = (aff, "session.intra_op_num_threads")  # the affinity's preview follows both
        if (vals[key] == self.initial.get(key) and key not in pair and key not in self._remote
                and not self.query(".fhint.-error")):
            return  # the profile's own value (the form filling itself): nothing to check
        self._remote = {k: v for k, v in self._remote.items() if vals.get(k) == v}
        try:
            form.build(self.base, vals, self.cores)
            errors: list[tuple[str | None, str]] = []
        except ProfileError as exc:
            errors = form.error_keys(exc)
        placed: dict[str, list[str]] = {}
        loose: list[str] = []
        for k, message in errors:
            target = form.field_for(k)
            if target is None:
                loose.append(message)
            else:
                placed.setdefault(target, []).append(message)
        related = {key} | (set(pair) if key in pair else set())
        shown = {(h.id or "")[5:].replace("--", ".") for h in self.query(".fhint.-error")}
        for k in (related | shown | set(placed)) - set(self._remote):
            if k in placed:
                self._set_error(k, placed[k])
            elif k in shown or k in related:
                self._clear_error(k, vals)
        self.query_one("#settings-error", Static).update(
            Text("✗ " + "; ".join(loose), style="bold red") if loose else "")

    # ---- errors ----
    def _set_error(self, key: str, messages: list[str]) -> None:
        """The error in place of the field's hint, wrapped whole (never cut to its first line); when the field is
        the focused one, its lines are scrolled into view once laid out."""
        hint = self.query_one(f"#hint-{fid(key)}", Hint)
        hint.update(Text("✗ " + "; ".join(messages), style="bold red"))
        hint.add_class("-error")
        self.query_one(f"#label-{fid(key)}").add_class("-error")
        focused = self.focused
        if focused is not None and focused.id == f"f-{fid(key)}":
            hint.reveal()

    def _clear_error(self, key: str, values: dict[str, str]) -> None:
        hint = self.query_one(f"#hint-{fid(key)}", Static)
        hint.remove_class("-error")
        hint.update(self._hint(key, values.get(key, ""), self._intra(values)))
        self.query_one(f"#label-{fid(key)}").remove_class("-error")

    def clear_errors(self) -> None:
        values = self.values()
        for hint in self.query(".fhint.-error"):
            self._clear_error((hint.id or "")[5:].replace("--", "."), values)
        self._remote.clear()
        self.query_one("#settings-error", Static).update("")

    def show_errors(self, err: BaseException, remote: bool = True) -> list[str]:
        """Put each message in place of its field's hint (by the error's dotted key); the rest under the form.

        ``remote``: the errors come from the monitor (the app calls this after a refusal), which checks what the
        form cannot (the host's cores): they stay until their field changes."""
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
            self._set_error(key, messages)
            if remote:
                self._remote[key] = self.values().get(key, "")
            first = first or key
        if loose:
            self.query_one("#settings-error", Static).update(Text("✗ " + "; ".join(loose), style="bold red"))
        if first is not None:
            control = self.query_one(f"#f-{fid(first)}")
            control.focus()
            self.query_one("#settings-form", VerticalScroll).scroll_to_widget(control, animate=False)
            self.query_one(f"#hint-{fid(first)}", Hint).reveal()
        return list(placed)

    # ---- moving around ----
    def action_section(self, step: int) -> None:
        """Focus the first field of the next (``step`` 1) or previous (-1) section, wrapping around."""
        names = self.sections()
        focused = self.focused
        key = (focused.id or "")[2:].replace("--", ".") if focused is not None else ""
        cur = form.FIELD_BY_KEY[key].section if key in form.FIELD_BY_KEY else names[0]
        target = names[(names.index(cur) + step) % len(names)] if cur in names else names[0]
        first = next(f for f in form.FIELDS if f.section == target)
        control = self.query_one(f"#f-{fid(first.key)}")
        control.focus()
        heading = self.query_one(f"#section-{names.index(target)}")
        self.query_one("#settings-form", VerticalScroll).scroll_to_widget(heading, animate=False, top=True)

    @on(DescendantFocus)
    def _focus_moved(self, event: DescendantFocus) -> None:
        """Highlight the focused row's label (a compact input alone shows focus too faintly), and say under the
        form what the field is, in full: a narrow screen cuts the hints beside the fields."""
        for label in self.query(".flabel.-focus"):
            label.remove_class("-focus")
        wid = event.widget.id or ""
        key = wid[2:].replace("--", ".")
        line = Text()
        if wid.startswith("f-") and key in form.FIELD_BY_KEY:
            self.query_one(f"#label-{wid[2:]}").add_class("-focus")
            f = form.FIELD_BY_KEY[key]
            line.append(f"{f.section} › {f.label}", style="bold")
            knob_help = knobs.get(key).help
            if knob_help:
                line.append(f": {knob_help}")
            blank = {"affinity": "blank = not pinned", "env": "blank = unset", "opt_text": "blank = unset"}
            line.append("  ←/→ or space changes it" if f.choices else f"  ({blank.get(f.kind, form.BLANK_RULE)})",
                        style="dim")
        self.query_one("#settings-focus", Static).update(line)

    # ---- actions ----
    def action_apply(self) -> None:
        self.clear_errors()
        try:
            new = form.build(self.base, self.values(), self.cores)
        except ProfileError as exc:
            self.show_errors(exc, remote=False)
            return
        self.dismiss(None if new == self.base else new)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Choice.Submitted)
    def _submitted(self) -> None:
        """Enter in any field applies the whole form, a text field or a choice alike. Not a screen binding: the
        Apply and Close buttons keep enter for themselves (enter on Close closes)."""
        self.action_apply()

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)
