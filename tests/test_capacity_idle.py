"""A capacity search whose idle server already misses the SLO stops once the closed loop has measured the floor,
and says so in its result (the note, a warning in the JSON): stepping down rate after rate could only find the
same answer, at the cost of the whole budget."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ortop.cli.capacity import format_result
from ortop.config.profile import Profile, merge
from ortop.engine.answers.capacity import CapacityResult, Point, Search
from ortop.engine.answers.capacity_search import CapacitySearch, idle_miss, nearly_idle_miss, straddle_text
from ortop.measure.slo import Slo, metric_figure
from tests.models import make_matmul_model


def test_the_idle_miss_names_the_floor_and_the_slo():
    assert idle_miss(Slo("p99", 20.0), 42.0) == ("the model's own p99 at no load is 42 ms: no rate meets "
                                                  "p99 ≤ 20 ms (capacity 0)")


def test_a_no_load_figure_whose_interval_straddles_the_slo_is_said_and_the_search_goes_on():
    """A recognizer's two closed-loop blocks, about twenty runs, read "p99" 155 ms under a 100 ms SLO: their slowest
    run. Its interval reaches down to the runs under the SLO, so no "no rate meets": the search goes on, and says
    why. Only a figure whose whole interval lies above the SLO stops it."""
    slo = Slo("p99", 100.0)
    twenty = metric_figure(slo, np.r_[np.linspace(70.0, 90.0, 19), 155.0])
    assert twenty.ms > slo.ms and twenty.straddles(slo) and not twenty.above(slo)
    assert straddle_text(slo, twenty) == (
        f"the model's own p99 at no load, {twenty.text()}, is at or over p99 ≤ 100 ms, but its interval reaches "
        "under it: searching anyway")
    assert "20 runs of the 100 a p99 needs" in twenty.text()
    hundred = metric_figure(slo, np.r_[np.linspace(120.0, 150.0, 97), 155.0, 160.0, 170.0])
    assert hundred.above(slo) and hundred.lo == 150.0
    assert idle_miss(slo, hundred.ms, hundred) == (f"the model's own p99 at no load is {hundred.text()}: no rate "
                                                   "meets p99 ≤ 100 ms (capacity 0)")
    under = metric_figure(Slo("p99", 400.0), np.linspace(60.0, 70.0, 116))
    assert under.straddles(Slo("p99", 400.0)) and under.hi == np.inf  # 116 runs bound a p99 from below only
    assert straddle_text(Slo("p99", 400.0), under).endswith("is under p99 ≤ 400 ms, but its interval reaches over "
                                                            "it: searching anyway")


def _point(rate: float, ms: float, slo: Slo) -> Point:
    p = Point(rate)
    for _ in range(4):
        p.add(np.full(50, ms), 1.0, 50, 0, slo)
    p.decide(slo)
    return p


def test_a_point_missed_with_the_server_nearly_idle_ends_the_search_before_it_steps_lower():
    """Open load can be slower than back to back (runs after idle gaps: caches cold, pools asleep): a 40 ms model
    read p99 60 ms in its closed loop, under a 100 ms SLO, and 150 ms at 2/s. No lower rate leaves its server idler.
    The warning names the figures the table prints — the point's over its requests and what decided it, the closed
    loop's with its interval and runs — so the two never seem to disagree."""
    slo = Slo("p99", 100.0)
    closed = np.r_[np.full(150, 40.0), np.full(3, 60.0)]
    s = Search(0, "running", Profile(), ceiling_per_s=24.0, floor_ms=60.0, hi=24.0,
               no_load=metric_figure(slo, closed))
    idle = _point(2.0, 150.0, slo)
    assert idle.decision == "not met"
    said = nearly_idle_miss(s, idle, slo)
    assert said == ("the model's own p99 with its server nearly idle (2/s, 8 % of its ceiling) is 150 ms over 200 "
                    "requests (not met by measured); 60 ms (95 % interval 40–∞ ms, 153 runs) at no load in a closed "
                    "loop (back to back): runs after idle gaps are slower: no rate meets p99 ≤ 100 ms (capacity 0)")
    s.points[2.0] = idle
    table = format_result(CapacityResult("m.onnx", slo, [s], 10.0, 60.0), plot=False)
    row = next(line for line in table.splitlines() if line.startswith("  0  "))
    assert row.endswith(s.no_load.text())  # the no-load column, word for word
    (point,) = [line for line in table.splitlines() if "/s: " in line]
    assert f"{idle.value(slo):>8.3g} ms" in point and "200 req" in point and "not met by measured" in point
    assert nearly_idle_miss(s, _point(12.0, 150.0, slo), slo) == ""  # half its ceiling: a lower rate may meet it
    assert nearly_idle_miss(s, _point(2.0, 50.0, slo), slo) == ""    # met
    thin = Point(2.0)
    for _ in range(4):
        thin.add(np.full(5, 150.0), 1.0, 5, 0, slo)  # 20 requests: their p99 is their slowest run
    assert thin.decide(slo) == "undecided" and thin.thin(slo)
    assert nearly_idle_miss(s, thin, slo) == ""  # a thin point ends no search
    s.lo = 1.0                                                       # a lower rate already met it
    assert nearly_idle_miss(s, idle, slo) == ""


@pytest.mark.integration
def test_an_slo_below_the_models_own_service_time_stops_at_once_with_the_verdict(tmp_path, monkeypatch):
    for xdg in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(xdg, str(tmp_path / xdg))
    model = make_matmul_model(tmp_path / "mm.onnx", n=256, batch=64)
    seen: list[float] = []
    slo = Slo("p99", 0.01)  # far below what one run of the model takes
    search = CapacitySearch(model, [merge(Profile(), **{"session.intra_op_num_threads": 1})], slo, budget_s=60,
                            on_point=lambda s, p: seen.append(p.rate_per_s))
    result = search.run()
    (s,) = result.searches
    assert s.floor_ms >= slo.ms and s.ceiling_per_s > 0
    assert s.no_load is not None and s.no_load.ms == s.floor_ms and s.no_load.enough and s.no_load.above(slo)
    assert s.note == idle_miss(slo, s.floor_ms, s.no_load)  # the figure with its interval and the runs behind it
    assert f"95 % interval {s.no_load.lo:.3g}–" in s.note and f"{s.no_load.runs:,} runs)" in s.note
    assert s.note.startswith("the model's own p99 at no load is ") and s.note.endswith(
        ": no rate meets p99 ≤ 0.01 ms (capacity 0)")
    assert not s.points and seen == []          # no rate was offered: the search stopped after the closed loop
    assert result.elapsed_s < 30 and not result.stopped  # far from the 60 s budget, and not by a stop
    d = json.loads(json.dumps(result.as_dict()))
    assert d["best"] is None and d["profiles"][0]["met"] is False and d["profiles"][0]["note"] == s.note
    assert f"#0: {s.note}" in d["warnings"]


def test_every_rate_measured_missed_and_none_lower_measured_is_a_bound_not_a_zero():
    """A slow model whose first point (4.2/s, 45 % of its ceiling) missed the SLO and whose budget ended before a
    lower one: the capacity is below 4.2/s, not 0, and "no profile meets it at any rate" would be a claim nothing
    measured. The table and the line under it say the bound, and where the queue model puts the capacity."""
    slo = Slo("p99", 450.0)
    s = Search(0, "running", Profile(), ceiling_per_s=9.4, floor_ms=199.0, hi=4.2, predicted_per_s=1.5,
               no_load=metric_figure(slo, np.r_[np.full(120, 100.0), np.full(6, 200.0)]))
    s.points[4.2] = _point(4.2, 900.0, slo)
    assert s.outcome(slo) == "none met"
    table = format_result(CapacityResult("m.onnx", slo, [s], 54.0, 60.0), plot=False)
    row = next(line for line in table.splitlines() if line.startswith("  0  "))
    assert "< 4.2/s" in row, row
    assert "at any rate here" not in table
    said = next(line for line in table.splitlines() if line.startswith("below 4.2/s for p99 ≤ 450 ms"))
    assert "none lower was measured" in said and "near 1.5/s" in said and "about 67 s for its 100 requests" in said
    d = s.as_dict(slo)
    assert d["result"] == "none met" and d["below_per_s"] == 4.2 and d["capacity_per_s"] == 0


def test_a_budget_of_one_point_aims_it_low_enough_to_give_a_floor_and_still_fit():
    """~10 runs/s, the queue model's capacity 4.2/s, a p99 (100 requests): with 200 s left two points fit and the
    first goes at the prediction; with 45–55 s only one does, and it goes lower, at no less than ONE_SHOT of the
    prediction, where its requests still fit with the point's margin; with 20 s not even one fits at the
    prediction (it goes there, and is said thin)."""
    from ortop.engine.answers.capacity_search import ONE_SHOT, needed_s, one_shot_rate

    assert one_shot_rate(4.2, 200.0, 1, 100) is None
    assert one_shot_rate(4.2, 20.0, 1, 100) is None
    assert one_shot_rate(float("nan"), 50.0, 1, 100) is None
    got = [one_shot_rate(4.2, left, 1, 100) for left in (45.0, 50.0, 55.0)]
    for left, rate in zip((45.0, 50.0, 55.0), got):
        assert rate is not None and ONE_SHOT * 4.2 <= rate < 4.2 and 1.2 * needed_s(rate, 1, 100) <= left
    assert got[0] >= got[1] >= got[2]  # more time left, a lower first point
    assert one_shot_rate(4.2, 45.0, 2, 100) is None  # two profiles take turns: not even one point fits


def test_profiles_predicted_close_together_start_at_one_rate_and_one_far_faster_at_its_own(tmp_path):
    """Two copies of one profile read 0.89–1.26 × each other's capacity from their closed loops: both start at the
    lower prediction (one point, their rounds shared), so the copy read high does not aim above its capacity; a
    profile predicted over SHARE_FIRST × faster starts at its own prediction; a budget of one point still aims
    every first point lower."""
    from ortop.engine.answers.capacity_search import SHARE_FIRST, needed_s
    from ortop.measure.bracket import grid
    from ortop.measure.slo import parse_slo

    model = str(make_matmul_model(tmp_path / "m.onnx"))
    search = CapacitySearch(model, [Profile(), Profile(), Profile()], parse_slo("p99=20ms"), budget_s=600,
                            names=["a", "b", "fast"])
    for s, pred in zip(search.searches, (230.0, 200.0, 200.0 * SHARE_FIRST * 1.1)):
        s.predicted_per_s, s.ceiling_per_s = pred, 1.5 * pred
    search._budget.start()
    search._aim_first()
    a, b, fast = (s.next_rate() for s in search.searches)
    assert a == b == grid(200.0) and fast > SHARE_FIRST * a
    for s in search.searches:
        assert not s.remarks  # nothing to say: a budget of several points

    slo = parse_slo("p99=20ms")
    one_point = 1.8 * needed_s(200.0, 2, slo.runs_needed())  # one point's requests fit at 200/s, two do not
    tight = CapacitySearch(model, [Profile(), Profile()], slo, budget_s=one_point, names=["a", "b"])
    for s, pred in zip(tight.searches, (230.0, 200.0)):
        s.predicted_per_s, s.ceiling_per_s = pred, 1.5 * pred
    tight._budget.start()
    tight._aim_first()
    first = [s.next_rate() for s in tight.searches]
    assert first[0] == first[1] < grid(200.0) and all("about one point" in s.remarks[0] for s in tight.searches)
