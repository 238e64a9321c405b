"""The capacity screen: how much traffic the running profile and one alternative serve within a latency SLO,
``ortop capacity``'s search run from the live view, its latency–load curve drawn as each point is measured.

Before the start, l cycles the SLO, L types one, b the budget and a the alternative sized beside the running profile
(two pinned replicas, spinning the other way, twice or half the threads); g starts. The SLO presets fit the model in
front of them: 1.5, 2 and 4 times the p99 the live session measured for the running settings in a closed loop, or
until one has run their service p99 under the running open arrivals (:mod:`ortop.tui.noload`), rounded up to
readable values, the middle one first; 5 … 100 ms, said as such, until either is measured. What was chosen (the SLO,
the budget, the alternative) is kept for the next opening in the same run (:class:`Choices`, held by the app). The
search runs worker
processes of its own, so the screen asks the app to pause the live session first and to resume it once those
workers are gone, whatever ended the search. Once it has ended, enter applies the highlighted profile to the live
session and ctrl+s saves it, through the app (the job screen's messages); the screen holds no monitor.

After a search, C certifies 0.9 × the highlighted profile's capacity as ``ortop capacity --certify`` does (MLPerf
Server's early-stopping rule, :mod:`ortop.engine.answers.certify`): a job of its own on the same thread and hold on the
live session, its requests, overs and the requests needed shown as it runs, its verdict line under the search's.

The search calls back on its own thread after each point. The screen copies what the search knows there (the
search is between two points, so the copy is whole) and posts it, never waiting for the UI; a timer between points
moves the clock and shows the ceilings once measured. Drawing is in :mod:`ortop.tui.panels.capacity`.

The states and the search's thread are the job screen's (:mod:`ortop.tui.screens.job`), shared with the tune
screen.

Over ~600 lines: the search and the certification share this screen's table, curve and progress; the parts
shared with the tune screen are in :mod:`ortop.tui.screens.job`, the drawing in :mod:`ortop.tui.panels.capacity`.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from ortop.config.profile import Profile
from ortop.engine import CapacityResult, CertifyResult
from ortop.errors import OrtopError, UsageError
from ortop.measure.slo import Slo, parse_slo
from ortop.tui import actions
from ortop.tui._compat import relabel_binding
from ortop.tui.noload import NoLoad, slo_presets
from ortop.tui.panels import capacity as panel
from ortop.tui.panels._format import Cell
from ortop.tui.screens._base import fill_table, post_from_thread
from ortop.tui.screens.job import JobScreen, job_bindings

SLO_MS = (5.0, 10.0, 20.0, 50.0, 100.0)    # p99 limits l cycles through while nothing is measured at no load
SLO_FACTORS = (1.5, 2.0, 4.0)              # otherwise: these times the p99 at no load, rounded up
CERTIFY_MIN_DURATION_S = 60.0   # C's certification: ortop capacity --certify's default minimum …
CERTIFY_BUDGET_S = 180.0        # … and its budget (the session's build included)
BUDGETS_S = (30.0, 60.0, 120.0)
DEFAULT_SLO_MS = 20.0
DEFAULT_BUDGET_S = 60.0
RUNNING_NAME = "running"
HEADER_FORMS = {panel.COLUMNS[1]: (panel.COLUMNS[1], "capacity"),  # the capacity drops its interval on a narrow screen
                panel.RESOLUTION: (panel.RESOLUTION, "resolution /s", "resolution"), "points": ("points", "n")}
HEADERS: tuple[Cell, ...] = tuple(HEADER_FORMS.get(name, (name,)) for name in panel.COLUMNS)


@dataclass
class Choices:
    """What the user chose on the screen, kept by the app for the next opening: each None until chosen."""

    slo: Slo | None = None
    budget_s: float | None = None
    alternative: str | None = None   # the alternative's label


def read_slo(text: str) -> Slo:
    """A typed SLO: a limit in ms for p99 (``30``, ``30ms``, ``0.5``), or ``METRIC=LIMIT`` (``p95=30ms``)."""
    t = text.strip().replace(" ", "")
    if not t:
        raise UsageError("type a limit in ms (30) or METRIC=LIMIT (p95=30ms)")
    plain = t.lower().removesuffix("ms")
    try:
        ms = float(plain)
    except ValueError:
        return parse_slo(t)
    return parse_slo(f"p99={ms:g}ms")


class SloPrompt(ModalScreen[Slo | None]):
    """L: type an SLO; enter takes it, esc leaves the SLO as it was."""

    BINDINGS = [Binding("escape", "close", "cancel")]

    def __init__(self, current: Slo, hint: str) -> None:
        super().__init__()
        self.current = current
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text.assemble(("SLO", "bold"), ("  a limit in ms (p99), or METRIC=LIMIT: p95=30ms · enter "
                                                          "takes it · esc cancels", "dim")))
            yield Input(f"{self.current.ms:g}", id="slo-value", placeholder="ms")
            yield Static(Text(self.hint, style="dim"), id="slo-hint")
            yield Static("", id="slo-message")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            slo = read_slo(event.value)
        except OrtopError as exc:
            self.query_one("#slo-message", Static).update(Text(str(exc), style="bold red"))
            return
        self.dismiss(slo)

    def action_close(self) -> None:
        self.dismiss(None)


class Search(Protocol):
    """What the screen uses of a search (:class:`ortop.engine.CapacitySearch`)."""

    def run(self) -> CapacityResult: ...

    def result(self) -> CapacityResult: ...


class SearchFactory(Protocol):
    """Builds the search (the real one: :func:`real_search`; the tests give a fake one)."""

    def __call__(self, model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
                 names: Sequence[str], stop: threading.Event,
                 on_point: Callable[[Any, Any], None]) -> Search: ...


def real_search(model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
                names: Sequence[str], stop: threading.Event, on_point: Callable[[Any, Any], None]) -> Search:
    """``ortop capacity``'s search, after the checks it makes (a profile the model cannot take: one line)."""
    from ortop.engine import CapacitySearch, check_profile
    from ortop.model import load_model

    info = load_model(model_path)
    for p in profiles:
        check_profile(info, p)
    return CapacitySearch(model_path, profiles, slo, budget_s=budget_s, names=names, stop=stop, on_point=on_point)


class CertifyFactory(Protocol):
    """Runs a certification (the real one: :func:`real_certify`; the tests give a fake one)."""

    def __call__(self, model_path: str, profile: Profile, slo: Slo, rate_per_s: float, *, min_duration_s: float,
                 budget_s: float, name: str, stop: threading.Event,
                 on_block: Callable[[CertifyResult], None]) -> CertifyResult: ...


def real_certify(model_path: str, profile: Profile, slo: Slo, rate_per_s: float, *, min_duration_s: float,
                 budget_s: float, name: str, stop: threading.Event,
                 on_block: Callable[[CertifyResult], None]) -> CertifyResult:
    """``ortop capacity --certify``'s run, after the checks it makes."""
    from ortop.engine import certify_rate

    return certify_rate(model_path, profile, slo, rate_per_s, min_duration_s=min_duration_s, budget_s=budget_s,
                        name=name, stop=stop, on_block=on_block)


def _host() -> tuple[int, int]:
    from ortop.collectors.cpu import physical_cores

    return os.cpu_count() or 1, physical_cores()


class Curve(Widget):
    """The latency–load curve, drawn to the widget's size from the result it holds."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.result: CapacityResult | None = None

    def show(self, result: CapacityResult | None) -> None:
        self.result = result
        self.refresh()

    def render(self) -> RenderResult:
        return panel.curve(self.result, self.content_size.width, self.content_size.height)


class CapacityScreen(JobScreen[CapacityResult, panel.Row]):
    """Size the running profile and one alternative under a latency SLO; apply or save the one that serves more."""

    DEFAULT_CSS = """
    CapacityScreen #cap-curve { height: 1fr; min-height: 8; padding: 0 1; text-wrap: nowrap; text-overflow: clip; }
    CapacityScreen #cap-table { height: auto; max-height: 5; }
    CapacityScreen #cap-detail-box { max-height: 30%; }
    """

    BINDINGS = job_bindings("c,escape,q", [Binding("l", "slo", "SLO"), Binding("L", "type_slo", "type SLO",
                                                                               show=False),
                                           Binding("b", "budget", "budget"),
                                           Binding("a", "alternative", "alternative")],
                            Binding("enter", "apply", "apply", show=False), "save",
                            extra=[Binding("w", "report", "report"), Binding("C", "certify", "certify")])
    JOB = "capacity"
    ORIGIN = actions.SIZED
    PREFIX = "cap"
    NOTE_AFTER = "\n"
    COLUMNS = panel.COLUMNS
    SETTINGS = ("slo", "type_slo", "budget", "alternative", "start")
    INTRO = ("l picks the SLO (L types one), b the budget, a the profile sized beside the running one, g starts: the "
             "live session pauses while the search runs")
    STOPPING = "stopping: the point under way ends, and what is known stays"

    class _Reported(Message):
        """The report was written to ``path``, or could not be (``error``), on the writer's thread."""

        def __init__(self, path: str, error: str) -> None:
            super().__init__()
            self.path = path
            self.error = error

    def __init__(self, profile: Profile, *, search_factory: SearchFactory | None = None,
                 host: tuple[int, int] | None = None, no_load: NoLoad | None = None,
                 choices: Choices | None = None, certify_factory: CertifyFactory | None = None) -> None:
        super().__init__()
        self.running_profile = profile
        self.no_load = no_load        # the running settings at no load: a closed loop's, or open arrivals' service
        self.presets = slo_presets(no_load.p99_ms, SLO_FACTORS) if no_load is not None else SLO_MS
        self.choices = choices if choices is not None else Choices()  # the app's: kept for the next opening
        self.slo_metric = "p99"
        self.slo_ms = self.presets[len(self.presets) // 2] if no_load is not None else DEFAULT_SLO_MS
        self.budget_s = DEFAULT_BUDGET_S
        self.host = host or _host()   # (logical, physical) cores: what the alternatives may ask for
        self.offers = panel.alternatives(profile, logical=self.host[0], physical=self.host[1])
        self.choice = 0
        self._recall()
        self._factory: SearchFactory = search_factory or real_search
        self._certify_factory: CertifyFactory = certify_factory or real_certify
        self._search: Search | None = None
        self._t0 = 0.0
        self.model_path = ""          # set when a search starts: the report names it
        self.report_dir = "."         # where w writes the report
        self.certifying: tuple[float, int] | None = None  # (rate, profile index) while C's certification runs
        self.certification: CertifyResult | None = None   # its result so far, then its verdict
        self._search_budget_s = self.budget_s

    # ---- what is sized -----------------------------------------------------------------------------------------
    @property
    def slo(self) -> Slo:
        return parse_slo(f"{self.slo_metric}={self.slo_ms:g}ms")

    def _recall(self) -> None:
        """Take what was chosen at an earlier opening (an alternative this profile no longer offers: the first)."""
        c = self.choices
        if c.slo is not None:
            self.slo_metric, self.slo_ms = c.slo.metric, c.slo.ms
        if c.budget_s is not None:
            self.budget_s = c.budget_s
        labels = [o.label for o in self.offers]
        if c.alternative in labels:
            self.choice = labels.index(c.alternative)

    def _remember(self) -> None:
        self.choices.slo = self.slo
        self.choices.budget_s = self.budget_s
        self.choices.alternative = self.alternative.label if self.alternative is not None else None

    def presets_text(self) -> Text:
        """Where the SLO presets come from, and whether the chosen SLO can be met at all."""
        shown = " · ".join(f"{x:g}" for x in self.presets)
        m = self.no_load
        if m is None:
            return Text(f"SLO presets p99 ≤ {shown} ms: the running settings are not measured yet (a few seconds of "
                        "them, in a closed loop or under open arrivals, give presets that fit the model)",
                        style="yellow")
        factors = ", ".join(f"{f:g}×" for f in SLO_FACTORS)
        t = Text(f"SLO presets p99 ≤ {shown} ms: {factors} {m.p99_words()}, {m.source()}", style="dim")
        if self.slo_metric == "p99" and m.p99_ms >= self.slo_ms:
            t.append(f"\nthe model's own {m.p99_words().removeprefix('the ')} is {m.p99_ms:.3g} ms: no rate meets "
                     f"{self.slo.text()}", style="yellow")
        return t

    @property
    def alternative(self) -> panel.Alternative | None:
        return self.offers[self.choice] if self.offers else None

    def names(self) -> list[str]:
        alt = self.alternative
        return [RUNNING_NAME] + ([alt.label] if alt is not None else [])

    def profiles(self) -> list[Profile]:
        alt = self.alternative
        return [self.running_profile] + ([alt.profile] if alt is not None else [])

    # ---- layout ------------------------------------------------------------------------------------------------
    def _plot(self) -> ComposeResult:
        yield Curve(id="cap-curve")

    def _mounted(self) -> None:
        self._label_alternative()

    # ---- the search --------------------------------------------------------------------------------------------
    def _prepare(self, model_path: str, profile: Profile) -> Callable[[], CapacityResult]:
        if self.certifying is not None:
            return self._certify_job(model_path)
        if profile != self.running_profile:
            label = self.alternative.label if self.alternative is not None else ""
            self.running_profile = profile
            self.offers = panel.alternatives(profile, logical=self.host[0], physical=self.host[1])
            labels = [o.label for o in self.offers]
            self.choice = labels.index(label) if label in labels else 0
        self.model_path = model_path
        self._t0 = time.monotonic()
        profiles, names, slo, budget_s, stop = self.profiles(), self.names(), self.slo, self.budget_s, self._stop

        def search() -> CapacityResult:
            self._search = self._factory(model_path, profiles, slo, budget_s=budget_s, names=names, stop=stop,
                                         on_point=self._measured)
            return self._search.run()

        return search

    def _measured(self, search: Any, point: Any) -> None:
        """The search's callback, on its thread: copy what it knows and hand it over."""
        found = self._search
        if found is not None:
            self._moved_on(panel.copy_result(found.result()))

    def _show_progress(self, shown: CapacityResult | CertifyResult) -> None:
        if isinstance(shown, CertifyResult):
            self.certification = shown
        else:
            self.result = shown

    def _failed(self) -> None:
        self._search = None
        self._certified()

    def _done(self, result: CapacityResult) -> None:
        self._search = None
        if self.certifying is not None:
            self._certified()
            self.refresh_rows()
            self.show_message(Text("C certifies again, g starts a new search, w writes the search's report",
                                   style="dim"))
            return
        self.refresh_rows(select=panel.best(result))
        self.show_message(Text("enter applies the highlighted profile to the live session, ctrl+s saves it, w writes "
                               "the HTML report", style="dim"))

    def report_path(self) -> str:
        """The report's full path: the report folder (the working one unless set), the model and the time."""
        stem = os.path.splitext(os.path.basename(self.model_path))[0] or "model"
        return os.path.abspath(os.path.join(self.report_dir,
                                            f"ortop-capacity-{stem}-{time.strftime('%Y%m%d-%H%M%S')}.html"))

    @work(thread=True, exclusive=True, group="capacity-report")
    def _write_report(self, result: CapacityResult, path: str, profiles: list[tuple[str, str]]) -> None:
        """The same page as ``ortop capacity --report``, drawn off the UI thread (the plotting takes a second)."""
        from ortop.collectors.host import read_host
        from ortop.report import capacity_page, write_report

        error = ""
        try:
            page = capacity_page(result.as_dict(), host=read_host().as_dict(), profiles=profiles)
            write_report(path, page, protect=(self.model_path,))
        except OrtopError as exc:  # a folder that cannot be written, a full disk: one line
            error = str(exc)
        except Exception as exc:  # drawing failed: said, never a traceback over the screen
            error = f"{type(exc).__name__}: {exc}"
        post_from_thread(self, self._Reported(path, error))

    @on(_Reported)
    def _on_reported(self, message: _Reported) -> None:
        if message.error:
            self.show_message(Text(f"✗ the report was not written: {message.error}", style="bold red"))
            self.notify(message.error, title="report not written", severity="error")
        else:
            self.show_message(Text(f"report written: {message.path}", style="green"))
            self.notify(message.path, title="capacity report written")

    def _between(self) -> None:
        """Between two points: the clock, and the ceilings and brackets as the search sets them."""
        search = self._search
        if search is not None and self.state == "running":
            self.result = panel.copy_result(search.result())
            self.refresh_rows()
        else:
            self._draw_title()

    def _elapsed(self) -> float:
        if self.running:
            return time.monotonic() - self._t0
        return self.result.elapsed_s if self.result is not None else 0.0

    # ---- drawing -----------------------------------------------------------------------------------------------
    def _title(self) -> Text:
        if self.certifying is not None and self.running:
            return self._certify_title()
        t = Text.assemble(("Capacity", "bold"), "  ")
        alt = self.alternative
        sized = f"{RUNNING_NAME} vs {alt.label}" if alt is not None else RUNNING_NAME
        goal = f"{self.slo.text()} · {sized}"
        if self.state == "ready":
            t.append(f"{goal} · budget {self.budget_s:g} s", style="bold")
            t.append("  ·  l SLO · L type one · b budget · a alternative · g start · c/esc back", style="dim")
            return t
        phase = {"starting": "starting", "running": "searching", "stopping": "stopping: what is known stays",
                 "done": "stopped" if self.result is not None and self.result.stopped else "done",
                 "failed": "failed"}[self.state]
        t.append(f"{phase} — {min(self._elapsed(), self.budget_s):.0f}/{self.budget_s:g} s", style="bold")
        t.append(f"  ·  {goal}", style="dim")
        t.append("  ·  s stops · c/esc stops and goes back" if self.running else
                 "  ·  enter applies · ^s saves · c/esc back", style="dim")
        return t

    def _verdict(self) -> Text:
        if self.state == "failed":
            return self.failure()
        t = panel.verdict(self.result, self.state == "done")
        if self.certification is not None:
            t.append_text(self._certify_verdict())
        if self.state == "done" and self.result is not None:
            said = {f"{s.name}: {s.note}" for s in self.result.searches if s.note}  # the verdict says them already
            for w in [w for w in self.result.warnings if w not in said][:2]:
                t.append(f"\nwarning: {w}", style="yellow")
        return t

    def refresh_rows(self, select: int | None = None) -> None:
        """Redraw the curve, the table (keeping the highlighted profile), the verdict and the title."""
        table = self.query_one(DataTable)
        current = select if select is not None else table.cursor_row
        self._rows = panel.rows(self.names(), self.profiles(), self.result, self.state == "done")
        # Each column as wide as what it shows now (not the widest cell seen while it ran), set here: a table
        # cleared and filled again in one refresh kept its headers' widths and cut the profiles' names short. A
        # narrow screen drops the capacity's interval before it cuts the state.
        fill_table(table, HEADERS, [self._cells(r) for r in self._rows], [str(r.index) for r in self._rows],
                   flex=len(HEADERS) - 1)
        if 0 <= current < len(self._rows):
            table.move_cursor(row=current)
        self.query_one(Curve).show(self.result)
        self.query_one("#cap-verdict", Static).update(self._verdict())
        self._draw_title()
        self.refresh_bindings()
        self.show_message()

    @staticmethod
    def _cells(row: panel.Row) -> tuple[Cell, ...]:
        """A row's cells in its style; the capacity also without its interval (``300/s``)."""
        forms: list[tuple[str, ...]] = [(c,) for c in row.cells]
        forms[1] = tuple(dict.fromkeys((row.cells[1], row.cells[1].split(" (")[0])))
        return tuple(tuple(Text(f, style=row.style) for f in cell) for cell in forms)

    def _detail(self, row: panel.Row | None) -> Text:
        t = panel.detail(row, self.result, self.running_profile)
        if self.state == "ready":
            t.append("\n")
            t.append_text(self.presets_text())
        return t

    def _label_alternative(self) -> None:
        alt = self.alternative
        relabel_binding(self, "a", f"vs {alt.label}" if alt is not None else "alternative")

    # ---- keys --------------------------------------------------------------------------------------------------
    def _new_search(self) -> None:
        """A setting changed after a search: what is shown was for the old one, so the screen starts over."""
        if self.state in ("done", "failed"):
            self.state, self.result, self.error = "ready", None, ""
        self.refresh_rows()

    def action_slo(self) -> None:
        if not self.running:
            later = [x for x in self.presets if x > self.slo_ms] if self.slo_metric == "p99" else []
            self.slo_metric, self.slo_ms = "p99", later[0] if later else self.presets[0]
            self._remember()
            self._new_search()

    def action_type_slo(self) -> None:
        if self.running:
            return

        def typed(slo: Slo | None) -> None:
            if slo is not None and not self.running:
                self.slo_metric, self.slo_ms = slo.metric, slo.ms
                self._remember()
                self._new_search()

        hint = (f"the p99 at no load is {self.no_load.p99_ms:.3g} ms" if self.no_load is not None else
                "no closed loop of the running settings measured yet")
        self.app.push_screen(SloPrompt(self.slo, hint), typed)

    def action_budget(self) -> None:
        if not self.running:
            later = [b for b in BUDGETS_S if b > self.budget_s]
            self.budget_s = later[0] if later else BUDGETS_S[0]
            self._remember()
            self._new_search()

    def action_alternative(self) -> None:
        if not self.running and self.offers:
            self.choice = (self.choice + 1) % len(self.offers)
            self._label_alternative()
            self._remember()
            self._new_search()

    def action_apply(self) -> None:
        row = self.selected()
        if row is None:
            return
        if self._refused_while_running("a profile"):
            return
        s = self.result.searches[row.index] if self.result is not None else None
        if s is not None and s.failed:
            self.show_message(Text(f"✗ {row.name} failed, so it cannot be applied (see why above)", style="bold red"))
            return
        self.post_message(self.ApplyRow(self, row.profile, row.name))

    def action_save(self) -> None:
        row = self.selected()
        if row is not None:
            self.post_message(self.SaveRow(self, row.profile, row.name))

    def action_report(self) -> None:
        if self.running or self.result is None:
            self.show_message(Text("no finished search yet: g starts one, and w writes its report once it has ended",
                                   style="yellow"))
            return
        names = [s.name for s in self.result.searches]
        profiles = [(n, s.profile.to_toml()) for n, s in zip(names, self.result.searches)]
        path = self.report_path()
        self.show_message(Text(f"writing {path} …", style="dim"))
        self._write_report(self.result, path, profiles)

    # ---- C: certify the chosen rate (ortop capacity --certify) --------------------------------------------------
    def action_start(self) -> None:
        if self.may_set():
            self.certification = None  # a new search: the certification was of the old one's rate
        super().action_start()

    def action_certify(self) -> None:
        if self.running:
            self.show_message(Text("a job is running: stop it (s) or wait for its result before certifying",
                                   style="yellow"))
            return
        result = self.result
        if result is None or self.state != "done":
            self.show_message(Text("no finished search yet: g starts one, and C certifies its rate once it has "
                                   "ended", style="yellow"))
            return
        from ortop.engine import SEARCHED_SHARE

        row = self.selected()
        s = result.searches[row.index if row is not None else 0]
        cap = s.capacity(result.slo) if s.met else math.nan
        if not (math.isfinite(cap) and cap > 0):
            self.show_message(Text(f"✗ {s.name} met {result.slo.text()} at no rate measured: no rate to certify",
                                   style="bold red"))
            return
        self.certifying = (SEARCHED_SHARE * cap, s.index)
        self.certification = None
        self._search_budget_s, self.budget_s = self.budget_s, CERTIFY_BUDGET_S
        self.state, self.error = "starting", ""
        self._stop = threading.Event()
        self._redraw()
        self.post_message(self.Start(self))

    def _certify_job(self, model_path: str) -> Callable[[], CapacityResult]:
        """The certification of ``self.certifying`` on the searched profile; the search's result stays shown."""
        assert self.certifying is not None and self.result is not None
        rate, index = self.certifying
        kept = self.result
        searched = kept.searches[index]
        slo, stop, factory = kept.slo, self._stop, self._certify_factory
        self._t0 = time.monotonic()

        def job() -> CapacityResult:
            got = factory(model_path, searched.profile, slo, rate, min_duration_s=CERTIFY_MIN_DURATION_S,
                          budget_s=CERTIFY_BUDGET_S, name=searched.name, stop=stop, on_block=self._moved_on)
            self._moved_on(got)  # the verdict, handed over before the job's end
            return kept

        return job

    def _certified(self) -> None:
        """The certification ended: the search's budget is the screen's again."""
        if self.certifying is not None:
            self.certifying = None
            self.budget_s = self._search_budget_s

    def _certify_title(self) -> Text:
        assert self.certifying is not None
        rate, index = self.certifying
        name = self.result.searches[index].name if self.result is not None else ""
        t = Text.assemble(("Capacity", "bold"), "  ")
        phase = "stopping: what is known stays" if self.state == "stopping" else "certifying"
        t.append(f"{phase} {rate:.0f}/s for {name} — {min(self._elapsed(), self.budget_s):.0f}/{self.budget_s:g} s",
                 style="bold")
        t.append(f"  ·  MLPerf Server's rule, at least {CERTIFY_MIN_DURATION_S:g} s  ·  s stops", style="dim")
        return t

    def _certify_verdict(self) -> Text:
        got = self.certification
        assert got is not None
        if self.certifying is not None and self.running:
            return Text(f"\n{got.progress()}", style="bold")
        style = {"certified": "bold green", "violated": "bold red"}.get(got.verdict, "yellow")
        return Text(f"\n{got.line()}", style=style)
