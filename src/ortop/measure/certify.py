"""Certifying that a rate meets a latency percentile: MLPerf Inference's Server early-stopping rule, with stalls
that come in clumps counted as the evidence they are.

The question
    A run at a scheduled rate sent ``n`` requests; ``t`` of them took longer than the latency bound. The SLO is a
    percentile ``p`` (p99: at most a share ``1 − p`` = 1 % of requests may be over the bound). Is the true
    overshoot share at most ``1 − p``? The run's own share ``t / n`` is one draw: a system exactly at the target
    shows fewer than 1 % over in about half its runs, so "t / n ≤ 1 %" certifies a borderline system half the time.

The rule (MLPerf Inference, Server scenario; values in ``loadgen/mlperf.conf``, rules in
``mlcommons/inference_policies``)
    Treat each request as a coin that lands "over" with the true share ``q``. A system exactly at the target
    (``q = 1 − p``) shows ``t`` or fewer overs in ``n`` requests with probability ``P[Binom(n, 1 − p) ≤ t]``. If
    that is at most ``1 − C`` (C = 0.99, MLPerf's confidence), so few overs would be a rare accident at the target,
    and rarer still for any worse system, so the run certifies: a one-sided binomial test at level ``1 − C`` with
    MLPerf's tolerance d = 0 (the target share itself is the null, no margin below it). For fixed ``t`` the
    probability falls as ``n`` grows, so there is a smallest ``n`` that certifies ``t`` overs
    (:func:`min_queries`); a run with fewer requests needs ``needed − n`` more, if no further request goes over.

    * Worked: t = 0 at p99, C = 0.99: ``0.99^n ≤ 0.01`` ⇔ ``n ≥ ln 0.01 / ln 0.99 = 458.2``, so 459 requests
      without a single one over is the shortest run that can certify p99. At p90: ``0.9^n ≤ 0.01`` ⇔ n ≥ 43.7, 44.
    * Each over raises the bar by about ``1 / (1 − p)`` requests plus the widening of the binomial's spread: at
      p99 one over needs 662 requests, ten need 2,010 (0.50 % over); with 1 % over no run length
      ever certifies, and a system worse than the target never becomes valid.

    The opposite test says when waiting is pointless: ``P[Binom(n, 1 − p) ≥ t] ≤ 1 − C`` means so many overs
    would be a rare accident at the target, so the share is above ``1 − p`` at confidence C: ``violated``. Between
    the two the run is ``undecided``. Neither test is a verdict on the latency; both are on the share over the bound.

Why clumps need a correction, and which one (:func:`clump_factor`)
    The binomial treats requests as independent coins. On a shared host they are not: a stall (a noisy
    neighbour, a page-fault storm, the hypervisor taking the core) delays the request it hits and every request
    queued behind it, so overs come in runs of consecutive requests. Ten overs from one stall are one event, not
    ten: a second stall would double them. Counting them as ten independent coins overstates the evidence, and a
    host whose stalls put it above the target gets certified far more often than ``1 − C`` (simulated in
    ``tests/test_certify.py``: a 1.2 % share in clumps of 20 at p99 over 20,000 requests is certified in about
    one run in six uncorrected, and in none of 300 corrected). The price is paid by good hosts with clumpy
    stalls: 0.5 % over in clumps of 20 certifies p99 in most runs of 20,000 requests uncorrected, and corrected
    needs about 100,000 (90 % of runs that long certify): its evidence is a few dozen stalls, not hundreds of
    overs.

    The correction divides ``n`` and ``t`` by the clump factor ``f`` before the test, the design effect of survey
    sampling: if overs arrive as clumps of lengths ``L_i`` (clumps roughly independent of each other), the count
    ``t = Σ L_i`` has variance ``≈ μ · E[L²]`` for ``μ`` clumps expected, against a mean ``μ · E[L]``; an
    independent count with the same mean has variance equal to its mean. The variance is inflated by
    ``f = E[L²] / E[L]``, estimated as ``Σ L_i² / Σ L_i`` over the runs of consecutive overs seen (the size of the
    clump an average over belongs to). Dividing both counts by ``f`` keeps the share ``t / n`` and gives the
    binomial test the relative spread the clumped count really has.

    * Scattered overs (every run of length 1): ``f = 1``, the plain rule. Independent overs at q = 1 % form
      chance runs of 2 about once per hundred overs: ``f ≈ 1.02``.
    * Clumps all of length ``k``: ``f = k`` exactly: a clump of k consecutive requests carries the evidence of
      one independent over, and ``t / f`` is the number of clumps.
    * Mixed lengths weigh the long ones: one stall of 500 among 100 scattered overs gives ``f ≈ 417``, not the
      ``600 / 101 ≈ 5.9`` of overs per clump. Rightly: the share then rests on whether a second such stall
      comes, and one stall seen says little about how often they come.

    Alternatives not taken: the ratio of overs to clumps (the mean clump length) understates the spread whenever
    clump lengths vary, as the example shows; the variance inflation ``(1 + r) / (1 − r)`` from the lag-1
    autocorrelation ``r`` of the 0/1 series assumes geometric clump lengths (a two-state Markov chain) and gives
    ``2k − 1`` for clumps all of length k; batch means over blocks need blocks much longer than a stall and
    many of them, which a certification run of a few thousand requests at p99 does not have.

    ``t / f`` is rarely a whole number: the test for certifying rounds it up and the test for violation rounds it
    down, so the rounding never helps either verdict. ``n / f`` stays real: the binomial's lower tail
    ``Σ_{k ≤ t} C(n, k) q^k (1 − q)^(n − k)`` is the regularized incomplete beta ``I_{1−q}(n − t, t + 1)``, which
    is defined, and falls, for real ``n`` (checked against ``scipy.special.betainc``).

    The flags must be in the order the requests were scheduled: the factor reads adjacency, and a sorted or
    shuffled series shows no clumps.

The arithmetic (:func:`_lower_tail`)
    The probabilities involved are far below a float's range at real sizes (``0.99^100000 ≈ 10^−437``), so the
    tail is summed in logarithms: ``log C(n, k)`` by the recurrence ``C(n, k + 1) = C(n, k) · (n − k) / (k + 1)``
    as a cumulative sum, then a log-sum-exp. It sums ``t + 1`` terms; :func:`min_queries` bisects ``n`` over it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ortop.measure.stats import json_num as _num

CONFIDENCE = 0.99  # MLPerf's default for the Server scenario's early stopping
RULE = "binomial early stopping (MLPerf Server, one-sided, tolerance 0), clumped overs counted once per clump"

Status = Literal["certified", "violated", "undecided"]


def _check(p: float, confidence: float) -> float:
    """The tolerated overshoot share ``1 − p``, after checking both levels are fractions."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"percentile must be a fraction in (0, 1), e.g. 0.99 for p99; got {p!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a fraction in (0, 1), e.g. 0.99; got {confidence!r}")
    return 1.0 - p


def _log_terms(n: float, k_max: int, q: float) -> np.ndarray:
    """``log[C(n, k) q^k (1 − q)^(n − k)]`` for k = 0 … ``k_max`` (``k_max < n + 1``), the binomial coefficient by
    the recurrence ``C(n, k + 1) = C(n, k) · (n − k) / (k + 1)`` as a cumulative sum of logarithms."""
    k = np.arange(k_max + 1, dtype=float)
    log_binom = np.concatenate(([0.0], np.cumsum(np.log(n - k[:-1]) - np.log(k[1:]))))
    return log_binom + k * math.log(q) + (n - k) * math.log1p(-q)


def _log_sum(log_terms: np.ndarray) -> float:
    top = float(log_terms.max())
    return top + math.log(float(np.exp(log_terms - top).sum()))


def _lower_tail(n: float, t: int, q: float) -> float:
    """``P[Binom(n, q) ≤ t]`` for integer ``t ≥ 0`` and real ``n``: the incomplete beta ``I_{1−q}(n − t, t + 1)``
    as its finite sum, in logarithms (see the module docstring). 1 when ``t ≥ n`` (no test possible)."""
    if t < 0:
        return 0.0
    if t >= n:
        return 1.0
    return min(1.0, math.exp(_log_sum(_log_terms(n, t, q))))


def _upper_tail(n: float, t: int, q: float) -> float:
    """``P[Binom(n, q) ≥ t]``. Below the middle of the distribution, 1 − P[≤ t − 1]; above it, where that
    subtraction would leave only rounding (1 − 0.999999999 keeps 7 digits), the terms from ``t`` up, summed until
    they are negligible: past the mean they fall geometrically, so ``50 σ`` of them is far more than enough. (For a
    real ``n`` the sum stops at ``⌊n⌋``; what lies beyond is negligible wherever the tail is small.)"""
    if t <= 0:
        return 1.0
    lower = _lower_tail(n, t - 1, q)
    if lower < 0.5 or t > n:
        return max(0.0, 1.0 - lower)
    k_max = min(math.floor(n), t + int(50 * math.sqrt(n * q * (1 - q))) + 50)
    return min(1.0, math.exp(_log_sum(_log_terms(n, k_max, q)[t:])))


def _needed(t_eff: int, q: float, alpha: float, clump: float) -> int:
    """The fewest requests ``N`` (whole requests) with ``P[Binom(N / clump, q) ≤ t_eff] ≤ alpha``: bisection, the
    tail falling in ``N``."""
    lo = math.floor(t_eff * clump)  # cannot certify: t_eff ≥ N / clump (the tail is 1)
    hi = max(2 * lo, 16)
    while _lower_tail(hi / clump, t_eff, q) > alpha:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # invariant: lo fails, hi certifies
        mid = (lo + hi) // 2
        if _lower_tail(mid / clump, t_eff, q) <= alpha:
            hi = mid
        else:
            lo = mid
    return hi


def min_queries(p: float, confidence: float = CONFIDENCE, overshoot: int = 0) -> int:
    """The fewest requests that can certify percentile ``p`` at ``confidence`` with ``overshoot`` of them over the
    bound: the smallest n with ``P[Binom(n, 1 − p) ≤ overshoot] ≤ 1 − confidence`` (459 for p99, C = 0.99, none over).
    """
    q = _check(p, confidence)
    if overshoot < 0:
        raise ValueError(f"overshoot must be a count ≥ 0; got {overshoot!r}")
    return _needed(int(overshoot), q, 1.0 - confidence, 1.0)


@dataclass(frozen=True)
class Verdict:
    """Where the early-stopping rule stands after ``requests`` requests with ``over`` of them over the bound."""

    status: Status
    requests: int         # n: requests scheduled and answered in the run
    over: int             # t: those over the latency bound
    needed: int           # total requests at which ``over`` overs would certify (at the same clump factor)
    p: float              # the percentile certified, as a fraction (0.99 for p99)
    confidence: float
    clump: float = 1.0    # the clump factor n and t were divided by (1 = independent requests)
    p_certify: float = 1.0   # P[Binom(n/f, 1 − p) ≤ ⌈t/f⌉]: certified when ≤ 1 − confidence
    p_violate: float = 1.0   # P[Binom(n/f, 1 − p) ≥ ⌊t/f⌋]: violated when ≤ 1 − confidence

    @property
    def certified(self) -> bool:
        return self.status == "certified"

    @property
    def violated(self) -> bool:
        return self.status == "violated"

    @property
    def more(self) -> int:
        """Requests still needed to certify if none of them goes over (0 once certified)."""
        return max(0, self.needed - self.requests)


def early_stopping(n: int, t: int, p: float = 0.99, confidence: float = CONFIDENCE, *,
                   clump: float = 1.0) -> Verdict:
    """The rule on ``n`` requests with ``t`` over the bound, at percentile ``p`` and ``confidence``, after dividing
    both counts by ``clump`` (see :func:`clump_factor`): certified, violated, or undecided with the total needed."""
    q = _check(p, confidence)
    if n < 0 or t < 0 or t > n:
        raise ValueError(f"need 0 ≤ t ≤ n; got n={n!r}, t={t!r}")
    if not clump >= 1.0:
        raise ValueError(f"clump factor must be ≥ 1; got {clump!r}")
    alpha = 1.0 - confidence
    t_up = math.ceil(t / clump - 1e-9)    # rounding never helps a verdict: up for certifying…
    t_down = math.floor(t / clump + 1e-9)  # …down for a violation
    p_certify = _lower_tail(n / clump, t_up, q) if n else 1.0
    p_violate = _upper_tail(n / clump, t_down, q) if n and t_down > 0 else 1.0
    status: Status = "certified" if p_certify <= alpha else "violated" if p_violate <= alpha else "undecided"
    return Verdict(status=status, requests=n, over=t, needed=_needed(t_up, q, alpha, clump), p=p,
                   confidence=confidence, clump=clump, p_certify=p_certify, p_violate=p_violate)


def clump_factor(over_flags: Sequence[bool] | np.ndarray) -> float:
    """How many requests' worth of overs one independent over stands for: ``Σ L² / Σ L`` over the runs of
    consecutive overs (lengths ``L``) in scheduled order; 1 when overs are scattered or absent, ``k`` when every
    clump is ``k`` long. See the module docstring for why this estimator."""
    x = np.asarray(over_flags, dtype=bool).astype(np.int8)
    if not x.any():
        return 1.0
    edges = np.diff(np.concatenate(([0], x, [0])))
    lengths = (np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).astype(float)
    return float((lengths ** 2).sum() / lengths.sum())


@dataclass(frozen=True)
class Certification:
    """A certification attempt at one scheduled rate: the rule's verdict with the run it was taken on."""

    rate_per_s: float     # the scheduled arrival rate certified
    duration_s: float     # how long the run lasted
    verdict: Verdict
    rule: str = RULE

    def as_dict(self) -> dict:
        """JSON-ready."""
        v = self.verdict
        return {
            "rate_per_s": _num(self.rate_per_s, 3),
            "requests": v.requests,
            "over_slo": v.over,
            "needed": v.needed,
            "duration_s": _num(self.duration_s, 3),
            "rule": self.rule,
            "verdict": v.status,
            "clump_factor": _num(v.clump, 3),
            "confidence": v.confidence,
            "percentile": v.p,
        }


def certify(over_flags: Sequence[bool] | np.ndarray, *, rate_per_s: float, duration_s: float, p: float = 0.99,
            confidence: float = CONFIDENCE) -> Certification:
    """The rule on one run's over-the-bound flags (one per request, in scheduled order), the clump factor read
    from the same flags."""
    x = np.asarray(over_flags, dtype=bool)
    verdict = early_stopping(int(x.size), int(x.sum()), p, confidence, clump=clump_factor(x))
    return Certification(rate_per_s=rate_per_s, duration_s=duration_s, verdict=verdict)
