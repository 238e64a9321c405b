"""A capacity's bracket as plain numbers (ortop.measure.bracket), and the curve drawn from a result's dict
(ortop.report.curve)."""

from __future__ import annotations

import math

import pytest

from ortop.measure.bracket import GRID, NARROW, NOT_APART, apart, grid, knee, narrow
from ortop.report.curve import HOLLOW, MARKS, text_curve


def test_rates_meet_on_the_geometric_grid():
    assert grid(0) == grid(-3) == 0.0
    assert grid(100.0) == pytest.approx(100.0, rel=GRID - 1)
    assert grid(100.0) == grid(100.5)  # within a step: one point
    assert grid(100.0) < grid(100.0 * GRID * GRID)


def test_a_bracket_is_narrow_once_within_ten_percent_of_its_upper_end():
    assert not narrow(100.0, math.nan) and not narrow(100.0, math.inf)
    assert not narrow(80.0, 100.0)
    assert narrow(90.0, 100.0) and narrow(95.0, 100.0)
    assert NARROW == 0.10 and NOT_APART == "their rerun intervals or their brackets overlap (or lie within 10 %)"


@pytest.mark.parametrize("best_lo, best_met, hi, missed, shown", [
    (100.0, 100.0, 95.0, math.inf, False),    # the other's bracket overlaps the best's
    (100.0, 100.0, 92.0, math.inf, False),    # below it, but within 10 %
    (100.0, 100.0, 90.0, math.inf, True),     # 10 % below: apart
    (100.0, 100.0, math.nan, 100.0, True),    # it missed the SLO (decided) where the best met it
    (100.0, 100.0, math.nan, 101.0, False),   # it missed it only above where the best met it
    (100.0, 0.0, math.nan, 50.0, False),      # the best met it at no decided rate: a miss proves nothing
])
def test_another_profile_is_shown_to_serve_less_only_by_a_decided_miss_or_ten_percent(best_lo, best_met, hi, missed,
                                                                                     shown):
    assert apart(best_lo, best_met, hi, missed) is shown


def test_the_knee_is_where_the_reciprocal_of_the_metric_crosses_the_slo():
    # 1 / metric: 1/10 at 100/s, 1/40 at 200/s; the SLO's 1/20 lies two thirds of the way from one to the other.
    assert knee(100.0, 200.0, 10.0, 40.0, 20.0) == pytest.approx(100.0 + 200.0 / 3)
    assert knee(100.0, 200.0, 10.0, math.inf, 20.0) == pytest.approx(150.0)  # unbounded at the upper end
    assert knee(100.0, 200.0, 25.0, 40.0, 20.0) == 100.0   # both over the SLO: the lower end
    assert knee(100.0, 200.0, 10.0, 15.0, 20.0) == 100.0   # both under it
    assert knee(100.0, 200.0, 10.0, math.nan, 20.0) == 100.0


def _data(points: list[list[tuple[float, float | None, str]]]) -> dict:
    return {"slo": {"metric": "p99", "ms": 20.0},
            "profiles": [{"profile": f"p{i}", "points": [{"rate_per_s": r, "slo_ms": v, "decision": d}
                                                         for r, v, d in pts]} for i, pts in enumerate(points)]}


def test_the_text_curve_marks_each_point_filled_when_it_met_the_slo():
    text = text_curve(_data([[(100.0, 10.0, "met"), (200.0, 40.0, "not met")], [(150.0, None, "undecided")]]),
                      width=40, height=9)
    lines = text.split("\n")
    assert lines[0].startswith("p99 ms against offered rate") and f"{MARKS[0]} p0" in lines[0]
    assert f"{MARKS[1]} p1" in lines[0]
    plot = lines[1:10]
    assert sum(line.count(MARKS[0]) for line in plot) == 1 and sum(line.count(HOLLOW[0]) for line in plot) == 1
    assert not any(MARKS[1] in line or HOLLOW[1] in line for line in plot)  # a point with no value is not drawn
    (slo,) = [line for line in plot if "┄" in line]
    assert slo.startswith("     20 ┤") and slo.endswith(" SLO 20")
    met = next(i for i, line in enumerate(plot) if MARKS[0] in line)
    over = next(i for i, line in enumerate(plot) if HOLLOW[0] in line)
    assert over < plot.index(slo) < met  # the unmet point above the SLO's line, the met one below it
    assert plot[met].index(MARKS[0]) < plot[over].index(HOLLOW[0])  # and at the lower rate
    assert lines[-2].rstrip().endswith(f"{200.0 * 1.05:.0f}")  # the axis's labels; the marks' legend under them


def test_no_curve_before_a_point_has_a_value():
    assert text_curve(_data([[], [(100.0, None, "undecided")]])) == ""
