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


def test_closed_buckets_keep_their_figures_and_free_their_runs() -> None:
    # A fast model sends ~100 000 runs a second: the series must not hold them all for its whole length (a 10-minute
    # soak on an 8 µs model grew the monitor from 62 to 290 MB before this).
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 60, 200_000))
    lat = rng.lognormal(0, 0.3, t.size)
    s = Series(width_s=0.5)
    for chunk in np.array_split(np.arange(t.size), 600):  # a batch every 100 ms
        s.add(t[chunk], lat[chunk])
    held = sum(a.size for chunks in s._chunks.values() for a in chunks)
    assert held < 200_000 * 6 / 120  # only the last few buckets' runs are kept raw
    got = {round(b.t / 0.5): (b.runs, b.p50, b.p99) for b in s.buckets(now_s=100)}
    ref = _reference(t, lat, 0.5)
    assert got.keys() == ref.keys()
    for i in ref:
        assert got[i][0] == ref[i][0]
        assert got[i][1] == pytest.approx(ref[i][1]) and got[i][2] == pytest.approx(ref[i][2])
    # A straggler for a closed bucket is counted.
    s.add(np.array([0.1]), np.array([1.0]))
    assert s.buckets(now_s=100)[0].runs == ref[0][0] + 1
