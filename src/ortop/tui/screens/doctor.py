"""The doctor screen: the doctor's checks run against the live session, one row per finding, the selected one's
evidence, fix and profile change below; enter (or f) applies that change, m runs the measured checks.

The screen holds no monitor: it reads the snapshot it was given, runs the static checks in a thread, and asks the
app for everything that touches the session (:class:`DoctorScreen.ApplyPatch`, :class:`DoctorScreen.Measure`,
:class:`DoctorScreen.Measured`); the app answers through :meth:`show_message` and :meth:`run_measured`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ortop.doctor import Finding, by_severity, counts, evidence_text, patch_text
from ortop.tui.panels._format import Cell, lead_forms
from ortop.tui.screens._base import Responsive, Rows, fill_table, under_cursor
from ortop.tui.widgets import FitFooter

STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}
SEVERITY_FORMS = {"error": ("error", "err"), "warning": ("warning", "warn"), "info": ("info",)}
HEADERS: tuple[Cell, ...] = (("severity", "sev"), ("check",), ("finding",))
MEASURED_BUDGET_S = 15.0


class DoctorScreen(Responsive, Rows, Screen[None]):
    """Findings about the live session, most severe first; enter or f applies the selected one's patch."""

    DEFAULT_CSS = """
    DoctorScreen #doctor-title { height: auto; padding: 0 1; }
    DoctorScreen #doctor-table { height: 1fr; }
    DoctorScreen #doctor-detail-box { height: auto; max-height: 60%; border-top: solid $primary 60%; }
    DoctorScreen #doctor-detail { height: auto; padding: 0 1; }
    """

    BINDINGS = [
        Binding("d,escape", "close", "back"),
        Binding("f", "apply", "apply fix"),
        Binding("m", "measure", "measured checks"),
    ]

    class ApplyPatch(Message):
        """Apply ``finding.profile_patch`` to the running profile; the app answers with :meth:`show_message`."""

        def __init__(self, screen: DoctorScreen, finding: Finding) -> None:
            super().__init__()
            self.screen = screen
            self.finding = finding

    class Measure(Message):
        """Pause the live session and call :meth:`run_measured` (the measured checks run workers of their own)."""

        def __init__(self, screen: DoctorScreen) -> None:
            super().__init__()
            self.screen = screen

    class Measured(Message):
        """The measured checks are done: the live session may run again."""

        def __init__(self, screen: DoctorScreen) -> None:
            super().__init__()
            self.screen = screen

    def __init__(self, snap: Any, *, host: Any = None, gpus: Sequence[Any] = (), cpu: Any = None,
                 budget_s: float = MEASURED_BUDGET_S) -> None:
        super().__init__()
        self.snap = snap
        self.host = host
        self.gpus = tuple(gpus)
        self.cpu = cpu  # the CPU collector's latest sample: how busy other processes keep the host
        self.budget_s = budget_s
        self.static: list[Finding] | None = None
        self.measured: list[Finding] = []
        self.measuring = False
        self._stop = threading.Event()
        self._rows: list[Finding] = []
        self._applied: set[int] = set()  # ids of the findings whose patch the app applied
        self._note: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="doctor-title")
        table: DataTable[Text] = DataTable(id="doctor-table", cursor_type="row", zebra_stripes=True)
        yield table
        with VerticalScroll(id="doctor-detail-box"):  # long evidence (ORT's log lines) scrolls
            yield Static("", id="doctor-detail")
        yield FitFooter()

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        fill_table(table, HEADERS, [], [], flex=2)
        table.focus()
        self.show_message(Text("running the checks…", style="dim"))
        self._run_static()

    # ---- the checks ------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="doctor-static")
    def _run_static(self) -> None:
        from ortop.doctor import context_from_snapshot, run_static

        try:
            findings = run_static(context_from_snapshot(self.snap, self.host, self.gpus, self.cpu))
        except Exception as exc:  # an unreadable model file: say so on the screen
            findings = [Finding("doctor", "error", f"the checks could not run: {type(exc).__name__}: {exc}")]
        self.app.call_from_thread(self._static_done, findings)

    def _static_done(self, findings: list[Finding]) -> None:
        self.static = findings
        self._note = None
        if self.is_mounted:
            self.refresh_rows()

    def run_measured(self, model_path: str, profile: Any) -> None:
        """Run the measured checks on ``profile`` in a thread (the app has paused the live session)."""
        self.measuring = True
        self.show_message(Text(f"measuring for {self.budget_s:g} s (the live session is paused)…", style="yellow"))
        self.query_one("#doctor-title", Static).update(self._title())
        self._measure(model_path, profile)

    @work(thread=True, exclusive=True, group="doctor-measured")
    def _measure(self, model_path: str, profile: Any) -> None:
        from ortop.collectors.host import read_host
        from ortop.doctor import run_measured

        try:
            res = run_measured(model_path, profile, self.host or read_host(), budget_s=self.budget_s,
                               stop=self._stop)
            findings, note = list(res.findings), Text(res.summary(), style="green")
        except Exception as exc:  # bad input or a failed worker: shown, the live session resumes
            findings, note = [], Text(f"✗ the measured checks failed: {exc}", style="bold red")
        self.app.call_from_thread(self._measured_done, findings, note)

    def _measured_done(self, findings: list[Finding], note: Text) -> None:
        self.measuring = False
        self.measured = findings
        self.app.post_message(self.Measured(self))  # to the app itself: this screen may be closed by now
        if self.is_mounted:
            self.refresh_rows()
            self.show_message(note)

    # ---- drawing ---------------------------------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        """Every finding so far, most severe first."""
        return by_severity([*(self.static or []), *self.measured])

    def _title(self) -> Text:
        t = Text.assemble(("Doctor", "bold"))
        if self.static is None:
            t.append("  running the checks…", style="dim")
        else:
            c = counts(self.findings())
            parts = [f"{n} {k}" for k, n in c.items() if n] or ["nothing found"]
            t.append("  " + ", ".join(parts), style="bold")
        t.append("  ·  enter/f applies the selected fix · m runs the measured checks"
                 + (" (running)" if self.measuring else f" (~{self.budget_s:g} s)") + " · d/esc back", style="dim")
        return t

    def refresh_rows(self) -> None:
        """Rebuild the table from the findings (a few dozen rows at most), keeping the cursor where it was; its
        columns fit the screen's width, a finding said whole, by its headline, or cut after a whole word."""
        table = self.query_one(DataTable)
        row = table.cursor_row
        self._rows = self.findings()
        rows = [self._cells(f) for f in self._rows]
        fill_table(table, HEADERS, rows, [str(i) for i in range(len(rows))], flex=2)
        if self._rows:
            table.move_cursor(row=min(row, len(self._rows) - 1))
        self.query_one("#doctor-title", Static).update(self._title())
        self.show_message()

    def _cells(self, f: Finding) -> tuple[Cell, ...]:
        """A finding's cells, each in ever shorter forms: its severity (or "applied"), its check, its message."""
        severity: tuple[Text, ...]
        if id(f) in self._applied:
            severity = (Text("applied", style="green"), Text("done", style="green"))
        else:
            severity = tuple(Text(w, style=STYLE[f.severity]) for w in SEVERITY_FORMS[f.severity])
        return severity, (Text(f.check),), tuple(Text(m) for m in lead_forms(f.message))

    def on_resize(self) -> None:
        if self.static is not None:
            self.call_after_refresh(self.refresh_rows)  # once the table has its new width

    def selected(self) -> Finding | None:
        """The finding under the cursor, or None."""
        return under_cursor(self.query_one(DataTable), self._rows)

    def show_message(self, message: Text | None = None) -> None:
        """The selected finding in full, then ``message`` (the outcome of an apply, the measuring state)."""
        if message is not None:
            self._note = message
        f = self.selected()
        t = Text(no_wrap=False)
        if f is not None:
            t.append(f"{f.severity} · {f.check}\n", style=STYLE[f.severity])
            t.append(f.message + "\n")
            for k, v in f.evidence.items():
                t.append(f"  {k}: ", style="dim")
                t.append(evidence_text(v) + "\n")
            if f.fix:
                t.append("fix  ", style="bold")
                t.append(f.fix + "\n")
            if f.profile_patch:
                t.append("patch  ", style="bold")
                t.append(patch_text(f.profile_patch), style="green")
                t.append("  (enter or f applies it)\n", style="dim")
        elif self.static is not None:
            t.append("nothing found: the checks see no problem with this session\n", style="green")
        if self._note is not None:
            t.append_text(self._note)
        self.query_one("#doctor-detail", Static).update(t)

    def patch_applied(self, finding: Finding, ok: bool) -> None:
        """The app's answer to :class:`ApplyPatch`: the row is marked, or the refusal shown (the app notifies why)."""
        if ok:
            self._applied.add(id(finding))
            self.refresh_rows()
            self.show_message(Text(f"applied {patch_text(finding.profile_patch)}: the session rebuilds; the checks "
                                   "saw the session before it (d twice runs them again)", style="green"))
        else:
            self.show_message(Text("✗ refused: see the notification", style="bold red"))

    # ---- keys ------------------------------------------------------------------------------------------------
    def action_apply(self) -> None:
        f = self.selected()
        if f is None:
            return
        if not f.profile_patch:
            self.show_message(Text("no profile change fixes this one: see the fix above", style="yellow"))
            return
        self.post_message(self.ApplyPatch(self, f))

    def action_measure(self) -> None:
        if not self.measuring:
            self.post_message(self.Measure(self))

    def action_close(self) -> None:
        self._stop.set()  # measured checks under way finish with what they have, and the live session resumes
        self.dismiss(None)
