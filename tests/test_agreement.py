"""Output agreement figures (ortop.measure.agreement) against hand computations and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial import distance

from ortop.measure.agreement import (
    SAMPLE_CAP,
    Agreement,
    Tolerance,
    agree,
    agreement,
    compact,
    figures,
    has_class_axis,
)


def test_figures_by_hand():
    a = np.array([1.0, -2.0, 3.0, 0.0], np.float32)
    b = np.array([1.5, -2.0, 2.0, 0.5], np.float32)
    max_abs, mean_rel, cosine, n, nonfinite = figures(a, b)
    assert max_abs == 1.0
    # mean |b - a| = (0.5 + 0 + 1 + 0.5) / 4 = 0.5; mean |a| = 6 / 4 = 1.5
    assert mean_rel == pytest.approx(0.5 / 1.5, rel=1e-12)
    # a.b = 1.5 + 4 + 6 + 0 = 11.5; |a| = sqrt(14); |b| = sqrt(2.25 + 4 + 4 + 0.25) = sqrt(10.5)
    assert cosine == pytest.approx(11.5 / math.sqrt(14 * 10.5), rel=1e-12)
    assert (n, nonfinite) == (4, 0)


def test_cosine_matches_scipy_on_random_outputs():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 10)).astype(np.float32)
    b = a + 0.05 * rng.standard_normal((16, 10)).astype(np.float32)
    _, _, cosine, _, _ = figures(a, b)
    assert cosine == pytest.approx(1 - distance.cosine(a.ravel().astype(np.float64), b.ravel().astype(np.float64)),
                                   abs=1e-12)
    assert 0.99 < cosine < 1


def test_identical_outputs_are_exact_and_a_scaled_one_is_caught_by_mean_rel_not_cosine():
    a = np.linspace(-1, 1, 50, dtype=np.float32).reshape(5, 10)
    same = agree(compact(a), compact(a.copy()))
    assert isinstance(same, Agreement) and same.exact()
    assert (same.max_abs, same.mean_rel, same.cosine, same.top1) == (0.0, 0.0, 1.0, 1.0)
    assert Tolerance(atol=0.0, rtol=0.0, cosine=1.0).breaches({"y": same}) == []
    # exactly 1 for any identical pair: a·a / |a|² rounds below 1 for about half of random arrays
    rounding = [np.random.default_rng(k).normal(size=256) for k in range(20)]
    assert any(float(x @ x) / float(np.linalg.norm(x)) ** 2 != 1.0 for x in rounding)
    assert all(figures(x, x.copy())[2] == 1.0 for x in rounding)
    scaled = agree(compact(a), compact(a * np.float32(1.1)))
    assert isinstance(scaled, Agreement)
    assert scaled.cosine == pytest.approx(1.0, abs=1e-12)  # a scale leaves the direction alone
    assert scaled.mean_rel == pytest.approx(0.1, rel=1e-5)
    assert scaled.max_abs == pytest.approx(0.1, rel=1e-5)  # the largest |a| is 1
    assert Tolerance().breaches({"y": scaled}) == ["y mean rel 0.1 > rtol 0.01"]
    assert Tolerance(atol=0.05, rtol=None).breaches({"y": scaled}) == ["y max abs 0.1 > atol 0.05"]


def test_top1_counts_rows_whose_argmax_agrees():
    a = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.4, 0.35, 0.25]], np.float32)
    b = a.copy()
    b[3] = [0.3, 0.45, 0.25]  # its arg-max moves from 0 to 1
    ag = agree(compact(a), compact(b))
    assert isinstance(ag, Agreement) and ag.top1 == 0.75


def test_the_class_axis_rule():
    assert has_class_axis("float32", (1, 1000))          # [batch, classes]
    assert has_class_axis("float16", (2, 7, 32000))      # [batch, tokens, vocabulary]
    assert not has_class_axis("float32", (1, 3, 224, 224))  # a feature map
    assert not has_class_axis("float32", (8, 1))         # one score per row
    assert not has_class_axis("int64", (1, 10))          # labels, not scores
    assert not has_class_axis("float32", (10,))
    ints = compact(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert ints["argmax"] is None
    ag = agree(ints, compact(np.arange(6, dtype=np.int64).reshape(2, 3) * 2))
    assert isinstance(ag, Agreement) and ag.top1 is None and ag.max_abs == 5.0


def test_a_large_output_is_sampled_the_same_way_on_both_sides():
    n = 3 * SAMPLE_CAP + 5
    a = np.arange(n, dtype=np.float32)
    b = a.copy()
    b[1] += 100.0  # not in the sample (every 4th element from 0)
    b[8] += 2.0    # in it
    ca, cb = compact(a), compact(b)
    assert ca["stride"] == 4 and ca["values"].size == math.ceil(n / 4) <= SAMPLE_CAP + 1
    ag = agree(ca, cb)
    assert isinstance(ag, Agreement) and ag.sampled and ag.max_abs == 2.0 and ag.elements == ca["values"].size


def test_non_finite_values_unlike_the_reference_always_differ():
    a = np.array([1.0, np.nan, np.inf, 2.0], np.float32)
    same = agree(compact(a), compact(a.copy()))
    assert isinstance(same, Agreement) and same.exact() and same.elements == 2
    b = np.array([1.0, np.nan, 3.0, np.inf], np.float32)
    ag = agree(compact(a), compact(b))
    assert isinstance(ag, Agreement) and ag.nonfinite == 2 and ag.elements == 1
    assert Tolerance(rtol=None, cosine=None).breaches({"y": ag}) == [
        "y has 2 non-finite values unlike the reference"]


def test_outputs_pair_by_name_else_by_position_and_say_why_not():
    x = np.ones((2, 3), np.float32)
    ref = {"logits": compact(x), "extra": compact(x)}
    out = agreement(ref, {"logits": compact(x)})
    assert isinstance(out["logits"], Agreement) and out["extra"] == "not compared: no such output"
    by_pos = agreement({"a": compact(x)}, {"b": compact(2 * x)})
    assert isinstance(by_pos["a"], Agreement) and by_pos["a"].max_abs == 1.0
    shapes = agreement({"y": compact(x)}, {"y": compact(np.ones((2, 4), np.float32))})
    assert shapes["y"] == "not compared: shape 2x4 against 2x3"
    seq = agreement({"y": compact([{"a": 1.0}])}, {"y": compact([{"a": 1.0}])})
    assert seq["y"] == "not compared: a list output"


def test_zero_outputs_have_a_defined_cosine_and_relative_error():
    z = np.zeros(4, np.float32)
    assert figures(z, z)[:3] == (0.0, 0.0, 1.0)
    max_abs, mean_rel, cosine, _, _ = figures(z, np.array([0, 1, 0, 0], np.float32))
    assert (max_abs, mean_rel, cosine) == (1.0, math.inf, 0.0)
    assert Agreement(1.0, math.inf, 0.0, None, 4, False).as_dict()["mean_rel"] is None


def test_a_cosine_is_shown_under_its_floor_and_never_as_one():
    from ortop.measure.agreement import cosine_text

    assert cosine_text(0.99897, 0.999) == "0.99897"       # 0.9990 would read as meeting the floor
    assert cosine_text(0.9999999) == "0.9999999"           # not 1.0000
    assert cosine_text(0.5) == "0.5000" and cosine_text(1.0) == "1"
    breach = Tolerance(rtol=None).breaches({"y": Agreement(0.1, 0.01, 0.99897, None, 10, False)})
    assert breach == ["y cosine 0.99897 < 0.999"]


def test_samples_of_one_shape_taken_with_different_strides_meet_on_the_elements_both_hold():
    from ortop.measure.agreement import MIN_CAP, TOTAL_CAP, output_cap

    assert output_cap(1) == SAMPLE_CAP and output_cap(64) == TOTAL_CAP // 64 and output_cap(10**6) == MIN_CAP
    n = 12 * 1000
    a = np.arange(n, dtype=np.float32).reshape(1000, 12)
    b = a.copy()
    b[0, 6] += 1.0    # flat index 6: in the stride-2 and stride-3 samples, so in the common one (every 6th)
    b[0, 4] += 50.0   # flat index 4: in the stride-2 sample only
    ca, cb = compact(a, cap=n // 2), compact(b, cap=n // 3)
    assert (ca["stride"], cb["stride"]) == (2, 3) and (ca["argmax_stride"], cb["argmax_stride"]) == (1, 1)
    ag = agree(ca, cb)
    assert isinstance(ag, Agreement) and ag.sampled and ag.elements == n // 6 and ag.max_abs == 1.0
    # the arg-max is taken over the whole output in the worker: row 0's moved to column 4 (54 > 11), sampled or not
    assert ag.top1 == 999 / 1000
