"""The capacity screen driven as a user would (Pilot), over the fake monitor and a fake search; one integration test
runs the real search (worker processes) on a small model. The drawing is tested as strings.

The fake search bisects as the real one does, on the engine's own Search and Point objects and their decisions, over
a latency curve per profile instead of workers (``floor / (1 − rate / ceiling)``): the screen's logic is the real
one, and its points arrive on a thread of their own, as the real search's do. The fake measures ``free`` points,
then waits until the test allows more or the search is stopped, so the screen can be watched while it searches.
"""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.answers.capacity import BY_MEASURED, BY_MODEL, CapacityResult, Point, Search, Slo, grid
from ortop.engine.answers.capacity_search import idle_miss
from ortop.errors import RuntimeFailure, UsageError
from ortop.measure.ratio import capacity_ratio, ratio_text
from ortop.present import rate_text
from ortop.report import curve as report_curve
from ortop.tui.app import OrtopApp, make_app
from ortop.tui.panels import capacity as panel
from ortop.tui.screens import HelpScreen, SaveScreen
from ortop.tui.screens import capacity as screen_mod
from ortop.tui.screens.capacity import CapacityScreen
from tests.fakes import FakeMonitor, StepClock
from tests.poll import until
from tests.test_capacity import decided_result, mm1
from tests.test_tui_tune import _children, resource_tracker, spy_pause_resume  # noqa: F401  (a fixture)

SIZE = (120, 40)
HOST = (8, 4)  # logical, physical cores the alternatives are offered for


class FakeSearch:
    """Bisection over ``floor_ms / (1 − rate / ceiling)`` per profile; four blocks a point, each of 200 requests at
    that latency over at least 0.5 s, decided by the engine's own rule; 2 s of (fake) time a point."""

    def __init__(self, model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
                 names: Sequence[str], stop: threading.Event, on_point: Callable[[Any, Any], None],
                 ceilings: Sequence[float], floor_ms: float, free: Callable[[], int | None]) -> None:
        self.model_path, self.slo, self.budget_s, self.stop, self.on_point = model_path, slo, budget_s, stop, on_point
        self.searches = [Search(i, n, p) for i, (n, p) in enumerate(zip(names, profiles))]
        self.ceilings, self.floor_ms, self.free = ceilings, floor_ms, free
        self.measured = 0
        self.waits: list[str] = []   # how each wait for the test ended: "free" (allowed more) or "stop"

    def latency(self, i: int, rate: float) -> float:
        return self.floor_ms / max(0.01, 1.0 - rate / self.ceilings[i])

    def result(self) -> CapacityResult:
        return CapacityResult(self.model_path, self.slo, list(self.searches), 2.0 * self.measured, self.budget_s,
                              self.stop.is_set(), [f"{s.name}: {s.note}" for s in self.searches if s.note])

    def _allowed(self) -> bool:
        free = self.free()
        return free is None or self.measured < free

    def _wait(self) -> None:
        if not self._allowed():
            while not (self._allowed() or self.stop.is_set()):
                time.sleep(0.01)
            self.waits.append("stop" if self.stop.is_set() else "free")

    def run(self) -> CapacityResult:
        for s in self.searches:
            s.ceiling_per_s, s.floor_ms = self.ceilings[s.index], self.floor_ms
            s.hi = grid(s.ceiling_per_s)
            if self.floor_ms >= self.slo.ms:  # as the real search: an idle server that misses the SLO ends it
                s.note = idle_miss(self.slo, self.floor_ms)
        while not self.stop.is_set() and self.measured < 40:
            todo = [s for s in self.searches if not s.done()]
            if not todo:
                break
            for s in todo:
                self._wait()
                if self.stop.is_set():
                    break
                rate = s.next_rate()
                p = s.points.setdefault(rate, Point(rate))
                served = min(rate, self.ceilings[s.index])
                for _ in range(4):  # at least half a second each: the 2 s a point needs before it may meet the SLO
                    p.add(np.full(200, self.latency(s.index, rate)), max(0.5, 200 / served), 200, 0, self.slo)
                if p.decide(self.slo) == "met":
                    s.lo = max(s.lo, rate)
                else:
                    s.hi = min(s.hi, rate)
                self.measured += 1
                self.on_point(s, p)
        return self.result()


class Factory:
    """A search factory for the screen: every call recorded, each search kept."""

    def __init__(self, ceilings: Sequence[float] = (400.0, 800.0), floor_ms: float = 5.0,
                 free: int | None = None) -> None:
        self.ceilings, self.floor_ms, self.free = ceilings, floor_ms, free  # free: points before it waits; None: all
        self.calls: list[dict[str, Any]] = []
        self.searches: list[FakeSearch] = []

    def __call__(self, model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
                 names: Sequence[str], stop: threading.Event, on_point: Callable[[Any, Any], None]) -> FakeSearch:
        self.calls.append({"model_path": model_path, "profiles": list(profiles), "slo": slo, "budget_s": budget_s,
                           "names": list(names), "stop": stop})
        search = FakeSearch(model_path, profiles, slo, budget_s=budget_s, names=names, stop=stop, on_point=on_point,
                            ceilings=self.ceilings, floor_ms=self.floor_ms, free=lambda: self.free)
        self.searches.append(search)
        return search


@pytest.fixture(autouse=True)
def pinned_host(monkeypatch) -> None:
    """The alternatives are offered for a fixed host (8 logical, 4 physical cores), the same on any machine."""
    monkeypatch.setattr(screen_mod, "_host", lambda: HOST)


def capacity_app(tmp_path: Path, factory: Any = None, monitor: FakeMonitor | None = None) -> OrtopApp:
    app = make_app(monitor or FakeMonitor(n_configs=1), cpu=FakeCpuCollector(8, seed=3),
                   gpu=FakeGpuCollector(seed=3), refresh_hz=0, profile_dir=tmp_path / "profiles", clock=StepClock())
    app.capacity_factory = factory
    return app



def text_of(screen: CapacityScreen, wid: str) -> str:
    return str(screen.query_one(f"#{wid}").render())


def cells(screen: CapacityScreen) -> list[list[str]]:
    table = screen.query_one("#cap-table")
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def drawn_table(screen: CapacityScreen) -> str:
    """The profiles' table as its lines are drawn on the screen."""
    table = screen.query_one(DataTable)
    return "\n".join("".join(seg.text for seg in table.render_line(y)) for y in range(table.size.height))


async def opened(pilot: Any, app: OrtopApp) -> CapacityScreen:
    """c pressed on the live view: the capacity screen it opens."""
    await pilot.press("c")
    screen = app.screen
    assert isinstance(screen, CapacityScreen)
    return screen


def footer_label(screen: CapacityScreen, key: str) -> str:
    return screen.active_bindings[key].binding.description



# ---- the drawing, as strings --------------------------------------------------------------------------------------
SLO20 = Slo("p99", 20.0)


def _result(points: dict[int, dict[float, float]], slo: Slo = SLO20) -> CapacityResult:
    return decided_result(points, slo, ("running", "2 replicas pinned"))


def test_the_curve_marks_each_knee_where_the_slo_is_crossed_between_its_brackets_points():
    res = _result({0: {200.0: 8.0, 300.0: 30.0, 250.0: 15.0}, 1: {400.0: 10.0, 600.0: 40.0}})
    width, height = 80, 18
    text = panel.curve(res, width, height).plain
    lines = text.split("\n")
    # 250/s met at 15 ms, 300/s missed at 30: 1/latency linear in the rate crosses 20 ms at 275/s; 400…600 at 533
    assert "SLO 20" in text and "↑275/s" in text and "↑533/s" in text
    axis = next(line for line in lines if "└" in line)
    knees = [x for x, ch in enumerate(axis) if ch == "┴"]
    assert len(knees) == 2
    # each knee's column lies between the columns of its bracket's two points, on text_curve's own axis
    for (lo_mark, hi_mark), col in ((("●", "○"), knees[0]), (("▲", "△"), knees[1])):
        lo_col = max(line.rfind(lo_mark) for line in lines[1:-4])
        hi_col = max(line.find(hi_mark) for line in lines[1:-4])
        assert lo_col < col < hi_col, (lo_col, col, hi_col)
    knee_line = lines[-2]  # under the axis's labels; the marks' legend last
    assert lines[-1].strip().startswith("● ○ ▲ △ measured  • ◦ ▴ ▵ ")
    assert knee_line.index("↑275/s") == knees[0] and knee_line.index("↑533/s") == knees[1]
    # the knee's dotted column runs from under the SLO line down to the axis
    slo_row = next(i for i, line in enumerate(lines) if "┄" in line)
    below = [lines[k][knees[0]] for k in range(slo_row + 1, lines.index(axis))]
    assert set(below) == {"┊"}


def test_the_curve_before_any_point_and_without_a_knee():
    assert panel.curve(None, 80, 18).plain == "the curve is drawn here as each point is measured"
    res = _result({0: {300.0: 30.0}})
    assert panel.curve(res, 80, 18).plain.split("\n")[-2].strip() == "knee  none yet: no point has met the SLO"


def _judged_by_the_long_run() -> CapacityResult:
    """One profile's points decided by the engine's own rule, their blocks carrying what each request cost its server
    (M/M/1, 4 ms a request; p99 ≤ 50 ms): at 100/s one block's clump of requests over the SLO (p99 measured 80 ms)
    in a queue whose long run is 28 ms, met; at 150/s requests over it in every block, missed as measured; at 200/s
    a calm stretch (12 ms measured) of a queue whose long run is 79 ms, missed."""
    slo = Slo("p99", 50.0)
    rng = np.random.default_rng(2)
    s = Search(0, "running", Profile(), ceiling_per_s=250.0, floor_ms=4.0, hi=250.0)
    blocks = {100.0: [np.r_[np.full(270, 9.0), np.full(30, 80.0)], *[np.full(300, 9.0)] * 3],
              150.0: [np.r_[np.full(240, 9.0), np.full(60, 90.0)]] * 4,
              200.0: [np.full(300, 12.0)] * 4}
    for rate, responses in blocks.items():
        p = s.points.setdefault(rate, Point(rate))
        for r in responses:
            p.add(r, 0.6, 300, 0, slo, busy=mm1(rng))
        p.decide(slo)
    s.lo, s.hi = 100.0, 150.0
    return CapacityResult("/models/m.onnx", slo, [s], 10.0, 60.0)


@pytest.mark.slow
def test_the_curve_marks_the_points_the_queue_models_long_run_decided_and_its_legend_says_so():
    """A point is drawn at what it measured; one the queue model's estimate decided is drawn small, so a met point
    over the SLO's line (or a missed one under it) says why. The same marks in ``ortop capacity``'s curve."""
    res = _judged_by_the_long_run()
    pts = res.searches[0].points
    assert [(pts[r].decision, pts[r].decided_by, pts[r].value(res.slo)) for r in (100.0, 150.0, 200.0)] == [
        ("met", BY_MODEL, 80.0), ("not met", BY_MEASURED, 90.0), ("not met", BY_MODEL, 12.0)]
    assert report_curve.BY_ESTIMATE == BY_MODEL  # the report's curve reads the engine's word from the dict
    text = panel.curve(res, 120, 18)
    lines = text.plain.split("\n")
    slo_row = next(i for i, line in enumerate(lines) if "┄" in line)
    plot = lines[1:lines.index(next(line for line in lines if "└" in line))]
    row_of = {mark: next(i for i, line in enumerate(plot, 1) if mark in line) for mark in "•○◦"}
    assert row_of["•"] < slo_row and row_of["○"] < slo_row < row_of["◦"]  # met over the line, missed under it
    assert not any("●" in line for line in plot)  # no point met the SLO by what it measured
    assert lines[-1] == (" " * panel.PREFIX + "● ○ measured  • ◦ the queue model's long-run estimate (too few "
                         "requests to measure its p99)")
    # the small marks in the profile's colour, as its others
    line = text.split("\n")[row_of["•"]]
    at = line.plain.index("•")
    assert any(sp.start <= at < sp.end and "cyan" in str(sp.style) for sp in line.spans), line.spans
    # narrower, the legend shortens its reason before it cuts a mark
    assert panel.curve(res, 80, 18).plain.split("\n")[-1] == ("● ○ measured  • ◦ queue-model estimate (too few "
                                                             "requests to measure its p99)")
    assert panel.curve(res, 60, 18).plain.split("\n")[-1].strip() == "● ○ measured  • ◦ queue-model estimate"

    plain = report_curve.text_curve(res.as_dict(), 64, 12).split("\n")
    labels = next(i for i, line in enumerate(plain) if "offered requests/s" in line)
    assert plain[labels + 1].strip() == report_curve.legend_forms(1, "p99")[0]
    assert "├" in plain[labels + 2]  # then the capacity in its interval
    for mark in "•○◦":
        assert sum(line.count(mark) for line in plain[1:labels - 1]) == 1, mark


def test_rows_and_verdict_name_the_profile_that_serves_more_and_by_how_much_or_that_the_brackets_overlap():
    res = _result({0: {200.0: 8.0, 300.0: 30.0}, 1: {400.0: 10.0, 600.0: 40.0}})
    profiles = [Profile(), profile_mod.merge(Profile(), **{"workload.replicas": 2, "workload.pin_replicas": True})]
    rows = panel.rows(["running", "2 replicas pinned"], profiles, res, done=True)
    # the capacity is where 1/latency, linear in the rate, crosses the SLO between the bracket's points
    # with its interval (here the bracket's term alone: the points carry no server times to model or to drift)
    assert [r.cells for r in rows] == [("● running", "282/s (232–342)", "200…300", "1.0k/s", "2", "out of time"),
                                       ("▲ 2 replicas pinned", "533/s (440–647)", "400…600", "1.0k/s", "2",
                                        "serves more")]
    assert rows[1].style == "bold green" and rows[1].profile is profiles[1]
    # the ratio judged by the two rerun intervals (apart here): ×1.89 × exp(± 1.645 · √(0.117² + 0.117²)), each
    # interval's sd of log here its bracket's term alone, ln(1.5) / √12
    assert panel.verdict(res, True).plain == ("serves more  2 replicas pinned: 533/s within p99 ≤ 20 ms (90 % interval "
                                               "440–647/s: where a rerun is expected to land) · 2 replicas pinned / "
                                               "running: ×1.89 (90 % interval ×1.44–×2.48)")
    assert panel.verdict(res, False).plain.startswith("so far  2 replicas pinned: 533/s")
    detail = panel.detail(rows[1], res, profiles[0]).plain
    assert detail.startswith("2 replicas pinned  changes replicas 2 · pin replicas on\n"
                             "ceiling 1.0k/s back to back · p99 4.00 ms at no load\n")
    assert "     400/s →" in detail and "p99   10.0 ms  met" in detail and "p99   40.0 ms  not met" in detail
    before = panel.rows(["running", "spinning off"], profiles, None)
    assert [r.cells for r in before] == [("● running", "", "", "", "", "not started"),
                                         ("▲ spinning off", "", "", "", "", "not started")]
    close = _result({0: {200.0: 8.0, 400.0: 30.0}, 1: {300.0: 10.0, 600.0: 40.0}})  # 200…400 against 300…600
    assert not close.separated(1) and res.separated(1)
    assert panel.rows(["running", "2 replicas pinned"], profiles, close, done=True)[1].cells[5] == "ahead"
    assert panel.verdict(close, True).plain == (  # 262–505 against 360–695: overlapping, so no ratio is said
        "ahead  2 replicas pinned: 500/s within p99 ≤ 20 ms (90 % interval 360–695/s: where a rerun is expected to "
        "land) · 2 replicas pinned / running: overlapping 90 % intervals: no detectable difference\n"
        "their rerun intervals or their brackets overlap (or lie within 10 %) (the search resolution column), so "
        "neither is shown to serve more: a longer budget (b) gives points time to decide")
    none = _result({0: {300.0: 30.0}, 1: {600.0: 40.0}})
    assert panel.verdict(none, True).plain == "neither profile met p99 ≤ 20 ms at any rate measured"


def _undecided(rates: dict[float, float], index: int, name: str) -> Search:
    """A search whose points all ran out of time undecided, its bracket moved by their estimates (as the real
    search moves it): ``rates[r]`` the estimate at ``r``, under the SLO (20 ms) or over it."""
    s = Search(index, name, Profile(), ceiling_per_s=22.0, floor_ms=14.0, hi=22.0)
    for rate, ms in rates.items():
        p = s.points.setdefault(rate, Point(rate))
        p.add(np.full(30, ms), 1.0, 30, 0, SLO20)
        assert p.decision == "undecided"
        if ms <= SLO20.ms:
            s.lo = max(s.lo, rate)
        else:
            s.hi = min(s.hi, rate)
    return s


def test_a_capacity_no_point_decided_reads_unknown_and_no_ratio_is_built_on_it():
    """Every point undecided: no "0.9/s", no knee, no "×1.43 (×0.08…×21.96)" built on coin tosses."""
    profiles = [Profile(), Profile()]
    res = CapacityResult("/models/rec.onnx", SLO20, [_undecided({0.9: 18.0, 1.2: 25.0}, 0, "running"),
                                                     _undecided({0.6: 19.0, 4.0: 30.0}, 1, "spinning off")],
                         100.0, 120.0)
    assert [s.lo for s in res.searches] == [0.9, 0.6]  # the bracket did move: the old table read "0.9/s"
    rows = panel.rows(["running", "spinning off"], profiles, res, done=True)
    assert [r.cells[1] for r in rows] == ["—", "—"]
    assert [r.cells[5] for r in rows] == ["out of time", "out of time"]
    assert panel.best(res) is None and panel.knee_columns(res, 60) == {}
    said = panel.verdict(res, True).plain
    assert said.startswith("no rate was decided to meet p99 ≤ 20 ms: the capacity is unknown (—)")
    assert "×" not in said and "0.9" not in said
    assert "↑" not in panel.curve(res, 80, 18).plain
    # one decided, one not: the decided one is named, and no ratio is made with the other
    met = _result({0: {200.0: 8.0, 300.0: 30.0}}).searches[0]
    mixed = CapacityResult("/models/rec.onnx", SLO20, [met, _undecided({0.6: 19.0}, 1, "spinning off")], 60.0, 60.0)
    rows = panel.rows(["running", "spinning off"], profiles, mixed, done=True)
    assert [r.cells[1].split(" (")[0] for r in rows] == ["282/s", "—"]  # the decided one with its interval
    assert "(" in rows[0].cells[1] and "(" not in rows[1].cells[1]
    said = panel.verdict(mixed, True).plain
    assert said.startswith("serves more  running: 282/s within p99 ≤ 20 ms (90 % interval ")
    assert said.endswith(" · spinning off —: no rate decided")
    assert "×" not in panel.verdict(mixed, True).plain
    # a search stopped because the idle server already misses the SLO: its note is the verdict
    idle = Search(0, "running", Profile(), ceiling_per_s=24.0, floor_ms=42.0,
                  note="the model's own p99 at no load is 42 ms: no rate meets p99 ≤ 20 ms (capacity 0)")
    noted = CapacityResult("/models/rec.onnx", SLO20, [idle], 3.0, 60.0)
    assert panel.verdict(noted, True).plain == idle.note
    assert panel.rows(["running"], profiles[:1], noted, done=True)[0].cells[1] == "0"


def test_alternatives_change_the_running_profile_and_fit_the_host():
    offers = panel.alternatives(Profile(), logical=8, physical=4)
    assert [o.label for o in offers] == ["2 replicas pinned", "spinning off", "threads ×2 (8)", "threads ÷2 (2)"]
    assert offers[0].profile.workload.replicas == 2 and offers[0].profile.workload.pin_replicas
    assert offers[1].profile.session.allow_spinning is False
    assert [o.profile.session.intra_op_num_threads for o in offers[2:]] == [8, 2]
    one = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1, "session.allow_spinning": False,
                                          "workload.replicas": 2})
    offers = panel.alternatives(one, logical=8, physical=4)
    assert [o.label for o in offers] == ["1 replica", "spinning on", "threads ×2 (2)"]  # ÷2 of 1 is 1: not offered
    assert offers[1].profile.session.allow_spinning is None
    # on one core two pinned replicas would share it, and twice the threads is the same count: neither is offered
    assert [o.label for o in panel.alternatives(Profile(), logical=1, physical=1)] == ["spinning off"]


def test_a_copy_of_the_result_does_not_move_when_the_search_does():
    res = _result({0: {200.0: 8.0}})
    copy = panel.copy_result(res)
    s = res.searches[0]
    s.points[300.0] = Point(300.0)
    s.points[200.0].add(np.full(10, 50.0), 0.1, 10, 0, res.slo)
    s.lo = 300.0
    c = copy.searches[0]
    assert sorted(c.points) == [200.0] and c.lo == 200.0 and len(c.points[200.0].blocks) == 4


# ---- before the start ---------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_c_opens_the_screen_and_l_b_a_cycle_the_slo_budget_and_alternative(tmp_path: Path) -> None:
    monitor = FakeMonitor(n_configs=1)  # ORT's defaults, closed loop: p99 7.38 ms at no load
    factory = Factory()
    app = capacity_app(tmp_path, factory, monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        assert screen.presets == (15.0, 20.0, 30.0)  # 1.5, 2 and 4 × 7.38 ms, rounded up
        assert screen.slo_ms == 20.0 and screen.budget_s == 60.0
        title = text_of(screen, "cap-title")
        assert "p99 ≤ 20 ms · running vs 2 replicas pinned · budget 60 s" in title
        assert [r[0] for r in cells(screen)] == ["● running", "▲ 2 replicas pinned"]
        assert footer_label(screen, "a") == "vs 2 replicas pinned"
        slos = []
        for _ in range(3):
            await pilot.press("l")
            slos.append(screen.slo_ms)
        assert slos == [30.0, 15.0, 20.0]
        budgets = []
        for _ in range(3):
            await pilot.press("b")
            budgets.append(screen.budget_s)
        assert budgets == [120.0, 30.0, 60.0]
        chosen = []
        for _ in range(4):
            await pilot.press("a")
            chosen.append((screen.alternative.label, footer_label(screen, "a"), cells(screen)[1][0]))
        assert chosen == [("spinning off", "vs spinning off", "▲ spinning off"),
                          ("threads ×2 (8)", "vs threads ×2 (8)", "▲ threads ×2 (8)"),
                          ("threads ÷2 (2)", "vs threads ÷2 (2)", "▲ threads ÷2 (2)"),
                          ("2 replicas pinned", "vs 2 replicas pinned", "▲ 2 replicas pinned")]
        await pilot.press("l", "b", "a")
        assert "p99 ≤ 30 ms · running vs spinning off · budget 120 s" in text_of(screen, "cap-title")
        await pilot.press("escape")
        assert not isinstance(app.screen, CapacityScreen)
        assert factory.calls == [] and monitor.state == "measuring"  # nothing ran, nothing paused

        await pilot.press("c", "q")  # q closes it too
        assert not isinstance(app.screen, CapacityScreen) and not app.finished
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=200, file=io.StringIO(), record=True)
        console.print(app.screen.query_one("#help-text", Static).content)
        help_text = console.export_text()
        assert "the most traffic the running profile and one alternative serve within a latency SLO" in help_text
        assert "cycle the SLO (p99 ≤ 1.5, 2, 4 × the p99 measured at no load, rounded" in help_text
        assert "capacity (c)" in [c.title for c in app.get_system_commands(app.screen)]


@pytest.mark.parametrize(("p50_ms", "presets", "p99"), [
    (40.0, (150.0, 200.0, 300.0), "70.1"),  # a slow model: 40 ms a run, p99 70 ms back to back
    (1.0, (3.0, 4.0, 8.0), "1.75"),         # a fast one: 1 ms a run
])
@pytest.mark.slow
async def test_the_slo_presets_fit_the_model_in_front_of_them(tmp_path: Path, p50_ms: float, presets: tuple,
                                                              p99: str) -> None:
    monitor = FakeMonitor(n_configs=1, p50_ms=p50_ms)
    factory = Factory()
    app = capacity_app(tmp_path, factory, monitor)
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot, app)
        assert screen.presets == presets and screen.slo_ms == presets[1]  # the middle one first
        assert f"p99 ≤ {presets[1]:g} ms · running vs" in text_of(screen, "cap-title")
        shown = " · ".join(f"{x:g}" for x in presets)
        assert (f"SLO presets p99 ≤ {shown} ms: 1.5×, 2×, 4× the p99 at no load, {p99} ms (closed loop, 6000 runs"
                in text_of(screen, "cap-detail"))
        seen = []
        for _ in range(3):
            await pilot.press("l")
            seen.append(screen.slo_ms)
        assert seen == [presets[2], presets[0], presets[1]]
        await pilot.press("g")
        await until(pilot, lambda: bool(factory.calls), "the search started")
        assert factory.calls[0]["slo"] == Slo("p99", presets[1])


@pytest.mark.slow
async def test_without_a_measured_closed_loop_the_presets_say_so_and_fall_back(tmp_path: Path) -> None:
    monitor = FakeMonitor(n_configs=1)
    monitor.history[0] = replace(monitor.history[0], latency=replace(monitor.history[0].latency, runs=12))
    app = capacity_app(tmp_path, Factory(), monitor)
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot, app)
        assert screen.presets == screen_mod.SLO_MS and screen.slo_ms == 20.0
        assert ("SLO presets p99 ≤ 5 · 10 · 20 · 50 · 100 ms: the running settings are not measured yet"
                in text_of(screen, "cap-detail"))


@pytest.mark.slow
async def test_under_open_arrivals_the_presets_come_from_the_service_time(tmp_path: Path) -> None:
    """The production workload (Poisson at 15 Hz, service p99 about 96 ms) gave presets of 5 … 100 ms and a default
    of 20 ms until R left it for a closed loop. Its service time stands in for the p99 at no load, said as such."""
    poisson = profile_mod.merge(Profile(), **{"workload.rate_hz": 15.0, "workload.arrival": "poisson"})
    monitor = FakeMonitor(profile=poisson, n_configs=1, p50_ms=150.0)  # response: queue + service
    monitor.service_p50_ms = 55.0
    service = monitor.snapshot().traffic.service
    assert 90.0 < service.p99 < 100.0
    app = capacity_app(tmp_path, Factory(), monitor)
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot, app)
        assert screen.presets == (150.0, 200.0, 400.0) and screen.slo_ms == 200.0
        assert (f"SLO presets p99 ≤ 150 · 200 · 400 ms: 1.5×, 2×, 4× the service p99 under the running Poisson "
                f"arrivals, {service.p99:.3g} ms (at 15 Hz, 6000 runs: the service time leaves the queue out"
                in text_of(screen, "cap-detail"))
        await pilot.press("L", "ctrl+u", *"80", "enter")
        await pilot.pause()
        assert (f"the model's own service p99 under the running Poisson arrivals is {service.p99:.3g} ms: no rate "
                "meets p99 ≤ 80 ms" in text_of(screen, "cap-detail"))


@pytest.mark.slow
async def test_the_choices_are_kept_for_the_next_opening(tmp_path: Path) -> None:
    factory = Factory()
    app = capacity_app(tmp_path, factory, FakeMonitor(n_configs=1, p50_ms=40.0))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "l", "b", "a", "escape")  # 300 ms, 120 s, spinning off
        screen = await opened(pilot, app)
        assert (screen.slo_ms, screen.budget_s, screen.alternative.label) == (300.0, 120.0, "spinning off")
        assert "p99 ≤ 300 ms · running vs spinning off · budget 120 s" in text_of(screen, "cap-title")
        assert footer_label(screen, "a") == "vs spinning off"
        await pilot.press("g")
        await until(pilot, lambda: bool(factory.calls), "the search started")
        call = factory.calls[0]
        assert call["slo"] == Slo("p99", 300.0) and call["budget_s"] == 120.0
        assert call["names"] == ["running", "spinning off"]


@pytest.mark.slow
async def test_capital_l_types_an_slo_and_one_under_the_no_load_p99_is_called_out(tmp_path: Path) -> None:
    factory = Factory()
    app = capacity_app(tmp_path, factory, FakeMonitor(n_configs=1, p50_ms=40.0))  # p99 70.1 ms at no load
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot, app)
        await pilot.press("L")
        prompt = app.screen
        assert isinstance(prompt, screen_mod.SloPrompt)
        assert "the p99 at no load is 70.1 ms" in str(prompt.query_one("#slo-hint").render())
        await pilot.press("ctrl+u", *"fast", "enter")  # not an SLO: said in the prompt, which stays
        assert app.screen is prompt and "fast" in str(prompt.query_one("#slo-message").render())
        await pilot.press("ctrl+u", *"50", "enter")
        await pilot.pause()
        assert app.screen is screen and (screen.slo_metric, screen.slo_ms) == ("p99", 50.0)
        assert "p99 ≤ 50 ms · running vs" in text_of(screen, "cap-title")
        assert ("the model's own p99 at no load is 70.1 ms: no rate meets p99 ≤ 50 ms"
                in text_of(screen, "cap-detail"))
        await pilot.press("L", "ctrl+u", *"p95=250ms", "enter")
        await pilot.pause()
        assert screen.slo == Slo("p95", 250.0) and "p95 ≤ 250 ms" in text_of(screen, "cap-title")
        await pilot.press("L", "escape")  # esc leaves it as it was
        await pilot.pause()
        assert app.screen is screen and screen.slo == Slo("p95", 250.0)
        await pilot.press("g")
        await until(pilot, lambda: bool(factory.calls), "the search started")
        assert factory.calls[0]["slo"] == Slo("p95", 250.0)


@pytest.mark.slow
async def test_a_search_whose_idle_server_misses_the_slo_says_so_once_and_measures_no_point(tmp_path: Path) -> None:
    factory = Factory(ceilings=(24.0, 30.0), floor_ms=70.0)  # a 40 ms model: p99 70 ms back to back
    app = capacity_app(tmp_path, factory, FakeMonitor(n_configs=1, p50_ms=40.0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot, app)
        await pilot.press("L", "ctrl+u", *"50", "enter", "g")
        await until(pilot, lambda: screen.state == "done", "the search's result")
        assert [len(s.points) for s in screen.result.searches] == [0, 0]
        assert [r[1] for r in cells(screen)] == ["0", "0"] and [r[5] for r in cells(screen)] == ["capacity 0"] * 2
        said = text_of(screen, "cap-verdict")
        assert said.replace("\n", " ") == (
            "running: the model's own p99 at no load is 70 ms: no rate meets p99 ≤ 50 ms (capacity 0) · 2 replicas "
            "pinned: the model's own p99 at no load is 70 ms: no rate meets p99 ≤ 50 ms (capacity 0)")
        assert "warning" not in said  # the result's warnings say the same: not twice


def test_a_typed_slo_reads_a_plain_limit_as_p99():
    assert screen_mod.read_slo(" 30 ") == Slo("p99", 30.0) and screen_mod.read_slo("2.5ms") == Slo("p99", 2.5)
    assert screen_mod.read_slo("p95=20ms") == Slo("p95", 20.0)
    for bad in ("soon", " "):
        with pytest.raises(UsageError):
            screen_mod.read_slo(bad)


# ---- searching, stopping ------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_g_searches_points_redraw_the_curve_and_s_stops_with_what_is_known(tmp_path: Path) -> None:
    factory = Factory(free=3)  # three points are measured, then the search waits for the gate or a stop
    monitor = FakeMonitor(n_configs=1)
    calls = spy_pause_resume(monitor)
    app = capacity_app(tmp_path, factory, monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "l", "g")  # p99 ≤ 30 ms
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await until(pilot, lambda: screen.result is not None and
                    sum(len(s.points) for s in screen.result.searches) == 3, "three points")
        assert calls == ["pause"] and monitor.state == "paused"  # the search's workers have the cores
        call = factory.calls[0]
        assert call["slo"] == Slo("p99", 30.0) and call["budget_s"] == 60.0 and call["model_path"] == monitor.model_path
        assert call["names"] == ["running", "2 replicas pinned"]
        assert call["profiles"][0] == monitor.snapshot().profile and call["profiles"][1].workload.replicas == 2
        assert screen.state == "running" and "searching" in text_of(screen, "cap-title")
        curve = text_of(screen, "cap-curve")
        assert "SLO 30" in curve and "●" in curve and "▲" in curve
        assert [r[4] for r in cells(screen)] == ["2", "1"]  # points per profile
        assert footer_label(screen, "s") == "stop"

        factory.free = 4  # one more point: it redraws the curve
        await until(pilot, lambda: text_of(screen, "cap-curve") != curve, "the curve redrawn with a new point")
        assert [r[4] for r in cells(screen)] == ["2", "2"]
        await pilot.press("s")
        await until(pilot, lambda: screen.state == "done", "the stopped search's result")
        await until(pilot, lambda: calls == ["pause", "resume"], "the live session resumed")
        res = screen.result
        assert res is not None and res.stopped and monitor.state == "measuring"
        assert "stopped" in text_of(screen, "cap-title")
        assert [len(s.points) for s in res.searches] == [2, 2] and [r[4] for r in cells(screen)] == ["2", "2"]
        assert factory.searches[0].waits == ["free", "stop"]
        assert "s" not in {b.binding.key for b in screen.active_bindings.values() if b.enabled}


@pytest.mark.slow
async def test_escape_while_searching_stops_the_search_then_resumes_the_live_session(tmp_path: Path) -> None:
    factory = Factory(free=0)  # the search waits before its first point until stopped
    monitor = FakeMonitor(n_configs=1)
    calls = spy_pause_resume(monitor)
    app = capacity_app(tmp_path, factory, monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "g")
        await until(pilot, lambda: bool(factory.searches), "the search started")
        assert calls == ["pause"]
        await pilot.press("escape")
        assert not isinstance(app.screen, CapacityScreen)
        assert factory.calls[0]["stop"].is_set()
        await until(pilot, lambda: calls == ["pause", "resume"], "the live session resumed")
        assert factory.searches[0].waits == ["stop"] and monitor.state == "measuring"


@pytest.mark.slow
async def test_a_failing_search_shows_one_red_line_and_the_live_session_resumes(tmp_path: Path) -> None:
    def broken(*args: Any, **kw: Any) -> FakeSearch:
        raise RuntimeFailure("cannot read the model (fake)")

    monitor = FakeMonitor(n_configs=1)
    calls = spy_pause_resume(monitor)
    app = capacity_app(tmp_path, broken, monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "g")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await until(pilot, lambda: screen.state == "failed", "the failure")
        assert text_of(screen, "cap-verdict") == "✗ the search failed: cannot read the model (fake)"
        await until(pilot, lambda: calls == ["pause", "resume"], "the live session resumed")
        await pilot.press("l")  # a setting changed: a new search, the old failure gone
        assert screen.state == "ready" and text_of(screen, "cap-verdict") == ""


# ---- the result: apply, save --------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_the_profile_that_serves_more_is_highlighted_and_enter_applies_it(tmp_path: Path) -> None:
    monitor = FakeMonitor(n_configs=1)
    app = capacity_app(tmp_path, Factory(), monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "g")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await until(pilot, lambda: screen.state == "done", "the search's result")
        res = screen.result
        assert res is not None and not res.stopped and res.best() == 1
        running, alt = res.searches
        assert 0.9 * 300 <= running.lo <= 300 < running.hi and 0.9 * 600 <= alt.lo <= 600 < alt.hi  # 10 % below at most
        assert text_of(screen, "cap-verdict").startswith("serves more  2 replicas pinned: ")
        assert cells(screen)[1][5] == "serves more"
        assert screen.selected().name == "2 replicas pinned"
        curve = text_of(screen, "cap-curve")
        assert f"↑{running.lo:.0f}/s" in curve and f"↑{alt.lo:.0f}/s" in curve
        assert "changes replicas 2 · pin replicas on" in text_of(screen, "cap-detail")

        await pilot.press("up", "enter")
        assert monitor.applied == []
        assert "running: the live session already runs this profile, nothing rebuilt" in text_of(screen, "cap-detail")
        await pilot.press("down", "enter")
        assert len(monitor.applied) == 1
        assert monitor.applied[0].workload.replicas == 2 and monitor.applied[0].workload.pin_replicas
        assert "applied 2 replicas pinned: the live session rebuilds with it" in text_of(screen, "cap-detail")
        assert monitor.events[-1].text == "capacity: applied 2 replicas pinned"


@pytest.mark.slow
async def test_the_table_filled_again_shows_every_name_whole(tmp_path: Path) -> None:
    """The table is cleared and filled again after every point and at the end; painted before it measured its new
    rows, it kept its headers' widths and cut the names short ("● runni", "▲ 2 rep", "serve")."""
    app = capacity_app(tmp_path, Factory(), FakeMonitor(n_configs=1))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "g")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await until(pilot, lambda: screen.state == "done", "the search's result")
        await pilot.pause()
        screen.refresh_rows()
        drawn_table(screen)  # a paint before the table has measured its new rows (the terminal's next frame)
        await pilot.pause()
        drawn = drawn_table(screen)
        assert "● running" in drawn and "▲ 2 replicas pinned" in drawn and "serves more" in drawn, drawn


@pytest.mark.slow
async def test_the_finished_screen_speaks_one_interval_and_the_bracket_only_as_the_search_resolution(
        tmp_path: Path) -> None:
    """Every range drawn as ``lo–hi`` is a capacity's 90 % rerun interval or the ratio built from two of them; the
    bracket is drawn only in the column named the search's resolution, and the curve's legend says its marks."""
    app = capacity_app(tmp_path, Factory())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot, app)
        await pilot.press("g")
        await until(pilot, lambda: screen.state == "done", "the search's result")
        await pilot.pause()
        drawn = "\n".join(strip.text for strip in screen._compositor.render_strips())
        res = screen.result
        assert res is not None and res.separated(1)
        ivs = [s.interval(res.slo) for s in res.searches]
        assert all(iv is not None for iv in ivs)

        def rate(x: float) -> str:
            return rate_text(x).removesuffix("/s")

        ratio = capacity_ratio(ivs[1], ivs[0])
        assert ratio is not None and not ratio.overlapping  # 300/s against 600/s: apart
        ranges = set(re.findall(r"(×?\d[\d.]*k?)–(×?\d[\d.]*k?)", drawn))
        assert ranges == {*((rate(iv.lo), rate(iv.hi)) for iv in ivs if iv is not None),
                          (f"×{ratio.lo:.2f}", f"×{ratio.hi:.2f}")}, drawn
        verdict = text_of(screen, "cap-verdict")
        assert f" · 2 replicas pinned / running: {ratio_text(ivs[1], ivs[0])}" in verdict
        assert "bracket" not in drawn.lower() and "…" not in verdict
        header = drawn_table(screen).split("\n")[0]
        assert "capacity (90 % interval)" in header and "search resolution /s" in header
        for row, s in zip(cells(screen), res.searches):
            assert row[2] == f"{rate(s.lo)}…{rate(s.hi)}"  # the search's last met and missed rates: its resolution
        assert "● ○ ▲ △ measured  • ◦ ▴ ▵ the queue model's long-run estimate (too few requests to measure its p99)" \
            in drawn


@pytest.mark.slow
async def test_apply_waits_for_the_end_of_the_search(tmp_path: Path) -> None:
    factory = Factory(free=1)
    monitor = FakeMonitor(n_configs=1)
    app = capacity_app(tmp_path, factory, monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "g")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await until(pilot, lambda: screen.result is not None and screen.result.searches[0].points, "a point")
        await pilot.press("enter")
        assert monitor.applied == []
        assert "the search is running: stop it (s)" in text_of(screen, "cap-detail")
        await pilot.press("down", "enter")
        assert monitor.applied == []
        await pilot.press("s")
        await until(pilot, lambda: screen.state == "done", "the stopped search")
        assert screen.selected().name == "running"  # the only one that met the SLO at a point: highlighted
        await pilot.press("down", "enter")
        assert monitor.applied[-1].workload.replicas == 2


@pytest.mark.slow
async def test_ctrl_s_saves_the_highlighted_profile_and_it_loads(tmp_path: Path) -> None:
    app = capacity_app(tmp_path, Factory())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "a", "a")  # threads ×2
        screen = app.screen
        assert isinstance(screen, CapacityScreen) and screen.alternative.label == "threads ×2 (8)"
        await pilot.press("g")
        await until(pilot, lambda: screen.state == "done", "the search's result")
        assert screen.selected().name == "threads ×2 (8)"
        await pilot.press("ctrl+s")
        save = app.screen
        assert isinstance(save, SaveScreen) and save.default_name == "resnet-ish-capacity-threads-x2-8"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        saved = profile_mod.load(tmp_path / "profiles" / "resnet-ish-capacity-threads-x2-8.toml")
        assert saved.session.intra_op_num_threads == 8
        assert saved.workload == screen.running_profile.workload
        assert saved.description.endswith(", sized by the capacity search on resnet-ish.onnx")  # not "tuned"


@pytest.mark.slow
async def test_w_writes_the_html_report_of_the_finished_search(tmp_path: Path) -> None:
    app = capacity_app(tmp_path, Factory())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        screen.report_dir = str(tmp_path / "out")
        await pilot.press("w")  # nothing measured yet: said, nothing written
        assert "no finished search yet" in text_of(screen, "cap-detail")
        assert not (tmp_path / "out").exists()
        await pilot.press("g")
        await until(pilot, lambda: screen.state == "done", "the search's result")
        await pilot.press("w")
        await until(pilot, lambda: "report written" in text_of(screen, "cap-detail")
                    or "not written" in text_of(screen, "cap-detail"), "the report", timeout=30)
        assert "not written" in text_of(screen, "cap-detail")  # the folder is missing: one red line, no traceback
        (tmp_path / "out").mkdir()
        await pilot.press("w")
        await until(pilot, lambda: "report written" in text_of(screen, "cap-detail"), "the report", timeout=30)
        pages = list((tmp_path / "out").glob("ortop-capacity-*.html"))
        assert len(pages) == 1
        full = str(pages[0].resolve())  # where it went, in full, on the screen and in a toast
        assert f"report written: {full}" in text_of(screen, "cap-detail").replace("\n", "")
        assert full in [n.message for n in app._notifications]
        html = pages[0].read_text()
        assert "<svg" in html and "2 replicas pinned" in html and "p99 ≤ 20 ms" in html
        assert "http://" not in html.replace("http://www.w3.org", "")  # nothing fetched from the network


# ---- the real search ----------------------------------------------------------------------------------------------
@pytest.mark.integration
async def test_a_real_search_draws_its_points_and_leaves_no_worker(matmul_model: str, tmp_path: Path,
                                                                   resource_tracker: None) -> None:  # noqa: F811
    before = _children()
    monitor = FakeMonitor(model_path=matmul_model, n_configs=1)
    app = capacity_app(tmp_path, None, monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await pilot.press("a")  # spinning off: one worker for both, no pinning on a small host
        screen.budget_s = 10.0
        await pilot.press("g")
        await until(pilot, lambda: _children() - before, "the search's worker process", timeout=10)
        assert screen.state == "running"  # its worker is up: the screen says so (on a slow host it may end soon after)
        await until(pilot, lambda: "SLO 20" in text_of(screen, "cap-curve"), "the first point drawn", timeout=30)
        await until(pilot, lambda: screen.state in ("done", "failed"), "the search's result", timeout=60)
        assert screen.state == "done", text_of(screen, "cap-verdict")
        res = screen.result
        assert res is not None and res.elapsed_s <= 10.0 * 1.5 + 5
        for s in res.searches:
            assert not s.failed and s.ceiling_per_s > 0 and s.points
        assert [r[0] for r in cells(screen)] == ["● running", "▲ spinning off"]
        await until(pilot, lambda: monitor.state == "measuring", "the live session measuring again")  # resumed
        await pilot.press("escape")
    end = time.monotonic() + 10
    while _children() - before and time.monotonic() < end:
        time.sleep(0.1)
    assert not _children() - before


def test_a_flat_crossing_says_a_rerun_can_land_outside_its_interval():
    """18 ms at 200/s, 21 ms at 300/s: the p99 barely climbs where it crosses 20 ms (slope 0.38 in log–log)."""
    flat = decided_result({0: {200.0: 18.0, 300.0: 21.0}}, SLO20, ("running",))
    said = panel.verdict(flat, True).plain
    assert "where a rerun is expected to land) · flat: p99 barely climbs with the rate here" in said, said
    steep = decided_result({0: {200.0: 8.0, 300.0: 30.0}}, SLO20, ("running",))
    assert "flat" not in panel.verdict(steep, True).plain
