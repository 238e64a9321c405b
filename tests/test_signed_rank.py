"""The paired comparison's interval and estimate (:mod:`ortop.measure.compare`) against references built apart from
it: scipy's Wilcoxon signed-rank test and null distribution, every sign vector enumerated, and every Walsh average
formed one by one.

What the hand-written code claims: the estimate is the Hodges–Lehmann estimate, the median of the Walsh averages
``(d_i + d_j) / 2`` (i ≤ j); the interval runs from the k-th smallest to the k-th largest Walsh average, with k the
largest value for which P(T+ ≤ k − 1) ≤ α/2 under the signed-rank null (exact up to ``_EXACT_MAX`` pairs, the normal
approximation with continuity correction above); that interval is the set of shifts θ that the two-sided signed-rank
test of ``d − θ`` does not reject at α. Above ``_WALSH_MAX`` pairs it is mean ± z·s/√n.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from scipy import stats

from ortop.measure import compare as compare_mod
from ortop.measure.compare import _interval, _signed_rank_k, compare
from tests.test_compare_stats import _pairs_of

CONFIDENCES = (0.90, 0.95, 0.99)


def _with_t_plus(t: int, n: int) -> np.ndarray:
    """Data whose absolute values have the ranks 1…n, signed so that the positive ranks add up to ``t``."""
    positive, left = set(), t
    for r in range(n, 0, -1):  # greedy from the largest rank: every 0 ≤ t ≤ n(n+1)/2 is reached
        if r <= left:
            positive.add(r)
            left -= r
    assert left == 0
    return np.array([r if r in positive else -r for r in range(1, n + 1)], dtype=float)


def scipy_cdf(t: int, n: int) -> float:
    """P(T+ ≤ t) under the null, from scipy's one-sided test of data with T+ = t: exact where ortop is exact, the
    normal approximation with continuity correction above."""
    exact = n <= compare_mod._EXACT_MAX
    res = stats.wilcoxon(_with_t_plus(t, n), alternative="less", method="exact" if exact else "asymptotic",
                         correction=not exact)
    assert res.statistic == t
    return float(res.pvalue)


def reference_k(n: int, confidence: float, cdf=scipy_cdf) -> int:
    """The largest k with P(T+ ≤ k − 1) ≤ α/2 (0 when none), by bisection on the null's CDF (scipy's by default)."""
    if cdf is scipy_cdf:
        return _scipy_k(n, confidence)
    return _bisect_k(n, confidence, cdf)


@cache
def _scipy_k(n: int, confidence: float) -> int:
    return _bisect_k(n, confidence, scipy_cdf)


def _bisect_k(n: int, confidence: float, cdf) -> int:
    alpha_half = (1 - confidence) / 2
    tol = alpha_half * 1e-9
    if cdf(0, n) > alpha_half + tol:
        return 0
    lo, hi = 0, n * (n + 1) // 2  # cdf(lo) ≤ α/2; cdf(M) = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cdf(mid, n) <= alpha_half + tol else (lo, mid)
    return lo + 1


def enumerated_cdf(n: int) -> np.ndarray:
    """P(T+ ≤ t) for t = 0…n(n+1)/2 from all 2^n equally likely sign vectors."""
    signs = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1
    t_plus = signs @ np.arange(1, n + 1)
    return np.cumsum(np.bincount(t_plus, minlength=n * (n + 1) // 2 + 1)) / 2 ** n


def walsh_averages(d: np.ndarray) -> list[float]:
    """Every (d_i + d_j) / 2 with i ≤ j, formed one at a time, sorted."""
    values = [float(x) for x in d]
    return sorted((values[i] + values[j]) / 2 for i in range(len(values)) for j in range(i, len(values)))


def data(n: int, seed: int, ties: bool) -> np.ndarray:
    """Log ratios as pairs of blocks give them: a shift, noise, a wild pair now and then; with ``ties`` rounded to
    0.01 (repeated values, zeros among them)."""
    rng = np.random.default_rng(seed)
    d = rng.normal(0.03, 0.05, n) + np.where(rng.random(n) < 0.1, rng.normal(0, 0.3, n), 0.0)
    return np.round(d, 2) if ties else d


# ---- the critical value ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_the_critical_value_matches_every_sign_vector_enumerated(confidence: float) -> None:
    for n in range(1, 17):
        table = enumerated_cdf(n)
        assert _signed_rank_k(n, confidence) == reference_k(n, confidence, lambda t, _n, c=table: c[t]), n


@pytest.mark.slow
@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_the_critical_value_matches_scipys_null_distribution(confidence: float) -> None:
    sizes = [*range(1, 31), 57, 150, 300,      # exact
             301, 512, 2000]                  # the normal approximation
    for n in sizes:
        assert _signed_rank_k(n, confidence) == reference_k(n, confidence), n


# ---- the estimate and the interval -----------------------------------------------------------------------------
@pytest.mark.parametrize("ties", [False, True], ids=["continuous", "ties"])
@pytest.mark.parametrize("n", [1, 3, 5, 6, 7, 9, 14, 25, 50, 120, 300, 301, 420])
def test_estimate_and_interval_are_the_median_and_order_statistics_of_the_walsh_averages(n: int, ties: bool) -> None:
    for seed in range(3):
        d = data(n, seed, ties)
        walsh = walsh_averages(d)
        for confidence in CONFIDENCES:
            est, lo, hi = _interval(d, confidence)
            assert est == pytest.approx(float(np.median(walsh)), abs=1e-15)
            k = reference_k(n, confidence)
            if k == 0:
                assert (lo, hi) == (-math.inf, math.inf)
            else:
                assert (lo, hi) == (walsh[k - 1], walsh[len(walsh) - k])
                assert lo <= est <= hi


@pytest.mark.parametrize("n", [6, 7, 8, 11, 20, 33, 48])
def test_the_interval_is_the_shifts_the_two_sided_test_does_not_reject(n: int) -> None:
    """Just inside each end, scipy's exact two-sided test of d − θ keeps θ; just outside, it rejects it."""
    for seed in range(4):
        d = data(n, 100 + seed, ties=False)
        walsh = walsh_averages(d)
        for confidence in CONFIDENCES:
            alpha = 1 - confidence
            _, lo, hi = _interval(d, confidence)
            if not math.isfinite(lo):
                continue
            a, b = walsh.index(lo), walsh.index(hi)
            inside = ((walsh[a] + walsh[a + 1]) / 2, (walsh[b - 1] + walsh[b]) / 2)
            outside = ([(walsh[a - 1] + walsh[a]) / 2] if a > 0 else [walsh[0] - 1.0]) + \
                      ([(walsh[b] + walsh[b + 1]) / 2] if b + 1 < len(walsh) else [walsh[-1] + 1.0])

            def p(theta: float, d: np.ndarray = d) -> float:
                return float(stats.wilcoxon(d - theta, method="exact").pvalue)

            assert all(p(theta) > alpha for theta in inside), (seed, confidence)
            assert all(p(theta) <= alpha * (1 + 1e-9) for theta in outside), (seed, confidence)


def test_above_the_walsh_limit_the_interval_is_the_normal_one_on_the_mean() -> None:
    n = compare_mod._WALSH_MAX + 500
    d = data(n, 7, ties=False)
    for confidence in CONFIDENCES:
        est, lo, hi = _interval(d, confidence)
        ref_lo, ref_hi = stats.norm.interval(confidence, loc=d.mean(), scale=stats.sem(d))
        assert est == pytest.approx(d.mean(), rel=1e-12)
        assert (lo, hi) == (pytest.approx(ref_lo, rel=1e-12), pytest.approx(ref_hi, rel=1e-12))


def test_compare_reports_the_reference_interval_as_percentages() -> None:
    """End to end: blocks in, the change and its interval out, from the per-pair log ratios."""
    rng = np.random.default_rng(11)
    ratios = list(np.exp(rng.normal(-0.05, 0.04, 23)))
    c = compare(_pairs_of(ratios), 0, 1, "p50", confidence=0.95)
    walsh = walsh_averages(np.log(np.asarray(ratios)))
    k = reference_k(len(ratios), 0.95)
    assert c.change_pct == pytest.approx(math.expm1(float(np.median(walsh))) * 100, rel=1e-9)
    assert c.ci_low_pct == pytest.approx(math.expm1(walsh[k - 1]) * 100, rel=1e-9)
    assert c.ci_high_pct == pytest.approx(math.expm1(walsh[len(walsh) - k]) * 100, rel=1e-9)
    assert c.verdict == "faster" and c.pairs == 23
