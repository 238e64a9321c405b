"""Two capacities' ratio judged by their rerun intervals (ortop.measure.ratio), as ``ortop capacity`` prints it."""

from __future__ import annotations

import math

import pytest

from ortop.measure.ratio import capacity_ratio, ratio_text
from ortop.measure.rerun import RerunInterval, rerun_interval
from ortop.measure.slo import Slo
from tests.test_capacity import decided_result


def _iv(estimate: float, sd: float) -> RerunInterval:
    """A capacity whose 90 % interval is ``estimate × exp(± 1.645 · sd)``."""
    return rerun_interval(estimate, tail=sd, drift=math.nan, bracket=math.nan)


def test_apart_intervals_give_the_ratio_with_an_interval_from_both():
    a, b = _iv(500.0, 0.1), _iv(250.0, 0.2)
    assert a.hi < 600 and b.hi < a.lo  # 424–590 against 180–347: apart
    r = capacity_ratio(a, b)
    assert r is not None and not r.overlapping and r.confidence == 0.9
    half = 1.6449 * math.hypot(0.1, 0.2)  # the two sds of log combined as independent errors
    assert r.estimate == 2.0
    assert r.lo == pytest.approx(2.0 * math.exp(-half), rel=1e-4) and r.hi == pytest.approx(2.0 * math.exp(half),
                                                                                            rel=1e-4)
    assert 1 < r.lo < 2 < r.hi
    assert ratio_text(a, b) == f"×2.00 (90 % interval ×{r.lo:.2f}–×{r.hi:.2f})" == "×2.00 (90 % interval ×1.38–×2.89)"
    back = capacity_ratio(b, a)  # the other way round: the reciprocal, its interval too
    assert back is not None and back.estimate == 0.5 and back.lo == pytest.approx(1 / r.hi)


def test_overlapping_intervals_give_no_ratio_only_that_no_difference_is_detectable():
    a, b = _iv(300.0, 0.1), _iv(250.0, 0.1)  # 254–354 against 212–295
    r = capacity_ratio(a, b)
    assert r is not None and r.overlapping
    assert ratio_text(a, b) == "overlapping 90 % intervals: no detectable difference"
    assert "×" not in ratio_text(a, b)
    touching = _iv(300.0, 0.0), _iv(300.0, 0.0)  # two points at one rate: the same capacity
    assert ratio_text(*touching) == "overlapping 90 % intervals: no detectable difference"


def test_no_ratio_without_both_intervals():
    a = _iv(300.0, 0.1)
    assert capacity_ratio(a, None) is None and capacity_ratio(None, a) is None
    assert capacity_ratio(a, _iv(math.nan, 0.1)) is None  # an estimate with no interval
    assert ratio_text(None, a) == "no ratio: a capacity without its interval"


def test_the_cli_says_the_ratio_in_the_same_words():
    from ortop.cli.capacity import format_result

    slo = Slo("p99", 20.0)
    apart = decided_result({0: {200.0: 8.0, 300.0: 30.0}, 1: {400.0: 10.0, 600.0: 40.0}}, slo)
    said = format_result(apart, plot=False)
    a, b = apart.searches[1].interval(slo), apart.searches[0].interval(slo)
    assert f"\n  p1 / p0: {ratio_text(a, b)}\n" in said
    assert "\n  p1 / p0: ×1.89 (90 % interval ×1.44–×2.48)\n" in said
    close = decided_result({0: {200.0: 8.0, 400.0: 30.0}, 1: {300.0: 10.0, 600.0: 40.0}}, slo)
    said = format_result(close, plot=False)
    assert "\n  p1 / p0: overlapping 90 % intervals: no detectable difference\n" in said
    assert "by the brackets" not in said
