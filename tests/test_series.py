"""The live series: the bucketing the monitor uses, against a direct computation on the same runs."""

from __future__ import annotations

import numpy as np
import pytest

from ortop.measure.series import Series


def _reference(t: np.ndarray, lat: np.ndarray, width: float) -> dict[int, tuple[int, float, float]]:
    out = {}
    for i in sorted(set(np.floor(t / width).astype(int))):
        sel = lat[np.floor(t / width).astype(int) == i]
        out[i] = (sel.size, float(np.percentile(sel, 50)), float(np.percentile(sel, 99)))
    return out


def test_batches_give_the_same_buckets_as_all_runs_at_once() -> None:
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 10, 5000))
    lat = rng.lognormal(0, 0.3, t.size)
    s = Series(width_s=0.5)
    for chunk in np.array_split(np.arange(t.size), 37):  # batches that straddle bucket edges
        s.add(t[chunk], lat[chunk])
    got = {round(b.t / 0.5): (b.runs, b.p50, b.p99) for b in s.buckets(now_s=100)}
    ref = _reference(t, lat, 0.5)
    assert got.keys() == ref.keys()
    for i in ref:
        assert got[i][0] == ref[i][0]
        assert got[i][1:] == pytest.approx(ref[i][1:])


def test_the_filling_bucket_is_left_out_and_cache_follows_new_runs() -> None:
    s = Series(width_s=1.0)
    s.add(np.array([0.1, 0.2, 1.5]), np.array([1.0, 3.0, 7.0]))
    b = s.buckets(now_s=1.6)
    assert [(x.t, x.runs) for x in b] == [(0.0, 2)]  # bucket 1 is still filling
    s.add(np.array([0.9]), np.array([100.0]))  # a late batch into a bucket already computed
    b = s.buckets(now_s=2.5)
    assert [(x.t, x.runs) for x in b] == [(0.0, 3), (1.0, 1)]
    assert b[0].p99 > 90


def test_markers_capacity_and_clear() -> None:
    s = Series(width_s=1.0, capacity=3)
    s.mark(2.5)
    for i in range(5):
        s.add(np.array([i + 0.5]), np.array([float(i)]))
    b = s.buckets(now_s=10)
    assert [x.t for x in b] == [2.0, 3.0, 4.0]
    assert [x.marker for x in b] == [True, False, False]
    s.clear()
    assert s.buckets(now_s=10) == ()
    with pytest.raises(ValueError):
        Series(width_s=0)
