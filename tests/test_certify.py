"""The early-stopping rule against scipy's binomial, its worked numbers, and simulated hosts whose overs are
scattered or clumped."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from ortop.measure.certify import (
    CONFIDENCE,
    RULE,
    Certification,
    _lower_tail,
    _upper_tail,
    certify,
    clump_factor,
    early_stopping,
    min_queries,
)

PS = (0.5, 0.9, 0.95, 0.99, 0.999)


def _scipy_status(n: int, t: int, p: float, c: float) -> str:
    q, alpha = 1 - p, 1 - c
    if stats.binom.cdf(t, n, q) <= alpha:
        return "certified"
    if stats.binom.sf(t - 1, n, q) <= alpha:
        return "violated"
    return "undecided"


def test_t0_minimum_at_p99_is_459() -> None:
    # 0.99^n ≤ 0.01  ⇔  n ≥ ln 0.01 / ln 0.99 = 458.2
    assert math.log(0.01) / math.log(0.99) == pytest.approx(458.21, abs=0.01)
    assert min_queries(0.99, 0.99, 0) == 459
    assert min_queries(0.9, 0.99, 0) == 44  # 0.9^n ≤ 0.01 ⇔ n ≥ 43.7
    assert min_queries(0.5, 0.5, 0) == 1    # 0.5^1 ≤ 0.5: a single request can certify a median at 50 %
    assert early_stopping(459, 0).certified
    assert early_stopping(458, 0).status == "undecided"
    assert early_stopping(458, 0).needed == 459 and early_stopping(458, 0).more == 1


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("c", (0.9, 0.95, 0.99))
def test_min_queries_is_scipys_smallest_n(p: float, c: float) -> None:
    for t in (0, 1, 2, 3, 7, 20, 55, 150):
        n = min_queries(p, c, t)
        assert stats.binom.cdf(t, n, 1 - p) <= 1 - c
        assert stats.binom.cdf(t, n - 1, 1 - p) > 1 - c


def test_worked_numbers_in_the_docstring() -> None:
    assert min_queries(0.99, CONFIDENCE, 1) == 662
    assert min_queries(0.99, CONFIDENCE, 10) == 2010


@pytest.mark.slow
def test_status_matches_scipy_on_a_grid() -> None:
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(600):
        p = float(rng.choice(PS))
        c = float(rng.choice((0.9, 0.95, 0.99, 0.999)))
        n = int(rng.integers(1, 30000))
        share = (1 - p) * float(rng.uniform(0.0, 2.5))
        t = min(n, int(rng.binomial(n, min(share, 1.0))))
        v = early_stopping(n, t, p, c)
        seen.add(v.status)
        assert v.status == _scipy_status(n, t, p, c), (n, t, p, c)
        assert v.p_certify == pytest.approx(stats.binom.cdf(t, n, 1 - p), rel=1e-9, abs=1e-300)
        assert v.p_violate == pytest.approx(stats.binom.sf(t - 1, n, 1 - p), rel=1e-6, abs=1e-13)
        assert v.needed == min_queries(p, c, t)
    assert seen == {"certified", "violated", "undecided"}


def test_lower_tail_for_real_n_is_the_incomplete_beta() -> None:
    for n, t, q in ((1234.5, 7, 0.01), (50.25, 0, 0.1), (99999.9, 800, 0.01), (40.7, 30, 0.5), (12.2, 12, 0.3)):
        assert _lower_tail(n, t, q) == pytest.approx(special.betainc(n - t, t + 1, 1 - q), rel=1e-9)
    # and it falls with n
    xs = [_lower_tail(n, 5, 0.01) for n in np.linspace(6, 3000, 200)]
    assert all(a > b for a, b in zip(xs, xs[1:]))


def test_tails_at_sizes_far_below_a_floats_range() -> None:
    # 0.99^200000 ≈ 1e-873: a sum started from the first term in plain floats would be 0 throughout
    assert 0.99 ** 200000 == 0.0
    assert _lower_tail(200000, 1700, 0.01) == pytest.approx(stats.binom.cdf(1700, 200000, 0.01), rel=1e-8)
    assert _upper_tail(200000, 2400, 0.01) == pytest.approx(stats.binom.sf(2399, 200000, 0.01), rel=1e-8)
    assert 0 < _lower_tail(200000, 1700, 0.01) < 1e-10 and 0 < _upper_tail(200000, 2400, 0.01) < 1e-10
    assert _upper_tail(100, 0, 0.01) == 1.0
    assert _lower_tail(10, 10, 0.5) == 1.0


@pytest.mark.slow
def test_more_overs_never_certify_sooner() -> None:
    for p in PS:
        needs = [min_queries(p, 0.99, t) for t in range(0, 60)]
        assert all(a < b for a, b in zip(needs, needs[1:]))
    for n in (500, 3000, 20000):
        status = [early_stopping(n, t).status for t in range(0, min(n, 400))]
        # certified for t up to some point, never again after the first refusal; violated from some point on
        first_not = status.index("undecided") if "undecided" in status else len(status)
        assert all(s == "certified" for s in status[:first_not])
        assert "certified" not in status[first_not:]
        if "violated" in status:
            first_v = status.index("violated")
            assert all(s == "violated" for s in status[first_v:])


def test_a_system_at_one_percent_never_certifies_p99() -> None:
    for n in (1000, 10000, 100000, 1000000):
        assert early_stopping(n, n // 100).status != "certified"


def test_refusals() -> None:
    with pytest.raises(ValueError, match="fraction in \\(0, 1\\), e.g. 0.99 for p99"):
        min_queries(99)
    with pytest.raises(ValueError, match="confidence"):
        early_stopping(100, 0, 0.99, 1.0)
    with pytest.raises(ValueError, match="0 ≤ t ≤ n"):
        early_stopping(10, 11)
    with pytest.raises(ValueError, match="clump factor"):
        early_stopping(10, 1, clump=0.5)
    with pytest.raises(ValueError, match="overshoot"):
        min_queries(0.99, 0.99, -1)


def test_clump_factor() -> None:
    assert clump_factor([]) == 1.0
    assert clump_factor([False] * 50) == 1.0
    scattered = np.zeros(1000, bool)
    scattered[::37] = True
    assert clump_factor(scattered) == 1.0
    for k in (2, 5, 20):
        x = np.zeros(5000, bool)
        for start in range(10, 4900, 200):
            x[start:start + k] = True
        assert clump_factor(x) == pytest.approx(k)
    # runs at the very start and end of the series count too
    assert clump_factor([True, True, True, False, True, True, True]) == pytest.approx(3.0)
    # mixed lengths weigh the long clump: one of 500 and 100 singles → (500² + 100) / 600
    mixed = [True] * 500 + [False, True] * 100
    assert clump_factor(mixed) == pytest.approx((500 ** 2 + 100) / 600)
    # independent overs at 1 % form only chance runs: the factor stays near 1
    x = np.random.default_rng(3).random(200000) < 0.01
    assert 1.0 <= clump_factor(x) < 1.05


def test_clumps_divide_n_and_t() -> None:
    # 20 overs in 2 clumps of 10 among 4000: the test sees 400 requests with 2 overs
    v = early_stopping(4000, 20, clump=10.0)
    assert v.p_certify == pytest.approx(stats.binom.cdf(2, 400, 0.01))
    assert v.status == _scipy_status(400, 2, 0.99, 0.99) == "undecided"
    assert _lower_tail(v.needed / 10, 2, 0.01) <= 0.01 < _lower_tail((v.needed - 1) / 10, 2, 0.01)
    assert 10 * (min_queries(0.99, 0.99, 2) - 1) < v.needed <= 10 * min_queries(0.99, 0.99, 2)
    assert early_stopping(4000, 20).certified  # the same counts read as independent certify
    # a fractional t/f rounds against either verdict
    w = early_stopping(10000, 25, clump=2.0)  # 12.5 overs: certify with 13, violate with 12
    assert w.p_certify == pytest.approx(_lower_tail(5000, 13, 0.01))
    assert w.p_violate == pytest.approx(_upper_tail(5000, 12, 0.01))


def _clumped_overs(rng: np.random.Generator, n: int, share: float, k: int) -> np.ndarray:
    """Stalls starting at rate share/k per request, each putting k consecutive requests over."""
    x = np.zeros(n, bool)
    for s in np.flatnonzero(rng.random(n) < share / k):
        x[s:s + k] = True
    return x


def _tally(statuses: list[str]) -> dict[str, float]:
    return {s: statuses.count(s) / len(statuses) for s in ("certified", "violated", "undecided")}


def test_simulated_independent_overs() -> None:
    rng = np.random.default_rng(20240501)
    good = _tally([certify(rng.random(10000) < 0.005, rate_per_s=100, duration_s=100).verdict.status
                   for _ in range(200)])
    bad = _tally([certify(rng.random(10000) < 0.02, rate_per_s=100, duration_s=100).verdict.status
                  for _ in range(200)])
    assert good["certified"] >= 0.9 and good["violated"] == 0
    assert bad["violated"] >= 0.9 and bad["certified"] == 0


@pytest.mark.slow
def test_a_system_exactly_at_the_target_errs_at_most_one_minus_c() -> None:
    rng = np.random.default_rng(11)
    at = _tally([early_stopping(5000, int(rng.binomial(5000, 0.01))).status for _ in range(3000)])
    assert at["certified"] <= 0.015 and at["violated"] <= 0.015


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_clumped_overs_above_the_target_are_not_certified() -> None:
    # a host whose stalls put 1.2 % over (clumps of 20) is worse than p99: the plain rule certifies it in a
    # sizeable share of runs; corrected for clumps, about never
    rng = np.random.default_rng(5)
    runs = [_clumped_overs(rng, 20000, 0.012, 20) for _ in range(300)]
    plain = _tally([early_stopping(x.size, int(x.sum())).status for x in runs])
    corrected = _tally([certify(x, rate_per_s=1, duration_s=1).verdict.status for x in runs])
    assert plain["certified"] >= 0.05
    assert corrected["certified"] <= 0.01


def test_clumped_overs_below_the_target_still_certify_given_time() -> None:
    rng = np.random.default_rng(9)
    long = _tally([certify(_clumped_overs(rng, 100000, 0.005, 20), rate_per_s=1, duration_s=1).verdict.status
                   for _ in range(60)])
    assert long["certified"] >= 0.8 and long["violated"] == 0


def test_certification_as_dict() -> None:
    x = np.zeros(4000, bool)
    x[100:105] = True
    c = certify(x, rate_per_s=250.0, duration_s=12.0, p=0.99)
    assert isinstance(c, Certification)
    d = c.as_dict()
    assert set(d) == {"rate_per_s", "requests", "over_slo", "needed", "duration_s", "rule", "verdict",
                      "clump_factor", "confidence", "percentile"}
    assert d["requests"] == 4000 and d["over_slo"] == 5 and d["clump_factor"] == 5.0
    # one clump of 5 in 4000 requests: one over in 800, where one over needs 662
    assert d["verdict"] == "certified"
    assert 5 * 661 < d["needed"] <= 5 * 662
    shorter = certify(x[:3000], rate_per_s=250.0, duration_s=9.0).as_dict()
    assert shorter["verdict"] == "undecided" and shorter["needed"] == d["needed"]  # 600 < 662
    assert d["rule"] == RULE and d["percentile"] == 0.99 and d["confidence"] == 0.99 and d["rate_per_s"] == 250.0
