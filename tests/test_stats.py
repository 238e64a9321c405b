"""stats: ring buffers, latency figures, the median's interval, time buckets and sparklines, on plain arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ortop.measure import stats
from ortop.measure.stats import SPARK_GLYPHS, Ring, latency_stats, median_ci, spark

# -- Ring -------------------------------------------------------------------------------------------------


def _rows(start: int, n: int, width: int = 2) -> np.ndarray:
    col = np.arange(start, start + n, dtype=np.float64)
    return np.stack([col * (k + 1) for k in range(width)], axis=1)


def test_ring_fills_then_wraps() -> None:
    r = Ring(5, 2)
    assert len(r) == 0 and r.view().shape == (0, 2)
    r.extend(_rows(0, 3))
    np.testing.assert_array_equal(r.view(), _rows(0, 3))
    r.extend(_rows(3, 4))  # wraps: 7 rows in, the last 5 kept
    assert len(r) == 5
    np.testing.assert_array_equal(r.view(), _rows(2, 5))
    r.extend(_rows(7, 1))
    np.testing.assert_array_equal(r.view(), _rows(3, 5))


@pytest.mark.parametrize("n", [5, 6, 13])
def test_ring_batch_at_least_capacity(n: int) -> None:
    r = Ring(5, 2)
    r.extend(_rows(0, 2))
    r.extend(_rows(100, n))
    np.testing.assert_array_equal(r.view(), _rows(100 + n - 5, 5))
    r.extend(_rows(500, 2))  # and keeps wrapping correctly afterwards
    np.testing.assert_array_equal(r.view(), np.concatenate([_rows(100 + n - 3, 3), _rows(500, 2)]))


def test_ring_matches_reference_on_random_batches() -> None:
    rng = np.random.default_rng(7)
    cap = 17
    r = Ring(cap, 3)
    ref = np.zeros((0, 3))
    for _ in range(300):
        batch = rng.random((int(rng.integers(0, 2 * cap + 2)), 3))
        r.extend(batch)
        ref = np.concatenate([ref, batch])[-cap:]
        assert len(r) == len(ref)
        np.testing.assert_array_equal(r.view(), ref)


def test_ring_view_is_a_copy_and_clear_empties() -> None:
    r = Ring(4, 1)
    r.extend(_rows(0, 6, width=1))
    v = r.view()
    v[:] = -1
    np.testing.assert_array_equal(r.view(), _rows(2, 4, width=1))
    v2 = Ring(4, 1)
    v2.extend(_rows(0, 2, width=1))
    w = v2.view()
    w[:] = -1
    np.testing.assert_array_equal(v2.view(), _rows(0, 2, width=1))
    r.clear()
    assert len(r) == 0 and r.view().shape == (0, 1)
    r.extend(_rows(9, 2, width=1))
    np.testing.assert_array_equal(r.view(), _rows(9, 2, width=1))


def test_ring_rejects_wrong_width() -> None:
    r = Ring(4, 2)
    with pytest.raises(ValueError):
        r.extend(np.zeros((3, 3)))
    with pytest.raises(ValueError):
        r.extend(np.zeros(3))


# -- latency_stats ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("a", [
    np.array([4.0]),
    np.array([1.0, 2.0, 3.0, 4.0, 100.0]),
    np.arange(1, 1001, dtype=np.float64),
    np.random.default_rng(3).lognormal(1.0, 0.5, 4321),
])
def test_latency_stats_matches_numpy(a: np.ndarray) -> None:
    s = latency_stats(a)
    assert s.runs == a.size
    assert s.mean == pytest.approx(a.mean())
    assert s.min == a.min() and s.max == a.max()
    for q, got in zip(stats.PERCENTILES, (s.p50, s.p90, s.p95, s.p99, s.p999)):
        assert got == pytest.approx(np.percentile(a, q))
    assert s.min <= s.p50 <= s.p90 <= s.p95 <= s.p99 <= s.p999 <= s.max


def test_latency_stats_known_values_and_empty() -> None:
    s = latency_stats(np.arange(1, 11, dtype=np.float64))  # 1..10
    assert (s.p50, s.p90, s.mean) == (pytest.approx(5.5), pytest.approx(9.1), pytest.approx(5.5))
    e = latency_stats(np.array([]))
    assert e.runs == 0 and math.isnan(e.p50) and math.isnan(e.mean)
    assert e.as_dict() == dict.fromkeys(("mean", "p50", "p90", "p95", "p99", "p999", "min", "max"))
    d = latency_stats(np.array([1.0 / 3, 2.0])).as_dict()
    assert d["min"] == 0.3333 and d["max"] == 2.0


# -- median_ci ------------------------------------------------------------------------------------------


def test_median_ci_brackets_median_and_edges() -> None:
    a = np.random.default_rng(0).lognormal(0, 0.4, 301)
    lo, hi = median_ci(a)
    assert lo <= np.median(a) <= hi
    assert all(math.isnan(x) for x in median_ci(np.array([])))
    assert median_ci(np.array([2.5])) == (2.5, 2.5)
    assert median_ci(np.array([3.0, 1.0])) == (1.0, 3.0)


@pytest.mark.parametrize("n", [30, 200])
def test_median_ci_coverage(n: int) -> None:
    """The interval holds the true median about 95 % of the time (exponential: median ln 2)."""
    rng = np.random.default_rng(11)
    trials = 1000
    hits = 0
    for _ in range(trials):
        lo, hi = median_ci(rng.exponential(1.0, n))
        hits += lo <= math.log(2) <= hi
    assert 0.92 <= hits / trials <= 0.99


# -- spark ------------------------------------------------------------------------------------------------


def test_spark_width_and_range() -> None:
    vals = list(range(20))
    assert len(spark(vals, 8)) == 8
    assert len(spark(vals, 50)) == 20
    assert spark(vals, 0) == "" and spark([], 10) == ""
    s = spark([0, 1, 2, 3, 4, 5, 6, 7], 8)
    assert s == SPARK_GLYPHS[1:]  # one level per step from the lowest bar to the full block
    assert spark(vals, 3) == spark([17, 18, 19], 3)  # the last `width` values


def test_spark_nan_constant_and_fixed_scale() -> None:
    s = spark([1.0, math.nan, 3.0, float("inf")], 4)
    assert s[1] == " " and s[3] == " " and s[0] == SPARK_GLYPHS[1] and s[2] == SPARK_GLYPHS[-1]
    assert spark([math.nan] * 3, 3) == "   "
    assert spark([5.0] * 4, 4) == SPARK_GLYPHS[4] * 4
    g = SPARK_GLYPHS
    assert spark(np.array([-10.0, 5.0, 99.0]), 3, lo=0.0, hi=10.0) == g[1] + g[5] + g[-1]
    assert " " not in spark([0.0, 1e-9, 1.0], 3)  # finite values never vanish
