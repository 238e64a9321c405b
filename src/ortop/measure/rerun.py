"""Where a rerun of the same capacity search on the same host is expected to land: the capacity's interval.

What the interval is for
    A capacity is read once and acted on later: a second search minutes after the first is what anyone holding
    the figure would get. On this kind of host two exhaustive curves a minute apart agree within ±10 % in only 6 of
    12 models (the sd of their log ratio about 18 %), and two searches minutes apart differ with an sd of about
    14.5 % (``docs/benchmarks/history-capacity.md``). An interval that held only the counts' noise would claim a
    precision no second reading shows. So the interval is of a *rerun*: at ``CONFIDENCE`` (90 %), a search run
    again here lands inside it.

Three sources, each a standard deviation of the capacity's log (capacity is a rate: its errors are relative)
    (a) The tail's sampling (:func:`tail_sd`). The capacity is where the queue model's long-run estimate of the
        SLO metric crosses the SLO between the bracket's two rates; each estimate comes from the requests the
        search recorded (:func:`ortop.measure.queue.queue_model`), a finite sample of the server. How far that
        sample moves the capacity is read by resampling it (:func:`ortop.measure.queue.capacity_spread`): each
        end's record redrawn from itself in runs (the stalls' clumps kept together), both rates judged again with
        the same simulated arrivals, the crossing read again; the sd of its log over the resamples. Nothing is
        mapped through a slope: the resampled crossing is the capacity itself. The search's own estimate and a
        rerun's each carry it: √2. A longer ``--budget`` records more requests: this term narrows.
    (b) The host's drift (:func:`drift_sd`). Capacity scales about as 1 / service time, so the host's pace moves
        it one for one in log terms. Within the search, every block's median service time (its pace: a stall's few
        long runs, which move a short block's mean by a fifth, are the tail's and term (a)'s) is read against the
        mean of the other blocks at its own rate (rates change service a little: idle gaps, cold caches); their pooled
        sd of log is the host's spread from one block to the next, seconds apart. A rerun lands minutes later,
        beyond the reach of the correlation within a search: the host's state then is a fresh draw, and the
        search's own capacity rests on one such state (a search takes seconds to a minute, within one state of
        this host's slow drift). So both carry the block-to-block spread: √2 × that sd. The extrapolation assumes
        the host's pace is stationary over minutes; a host that moves further over hours than over minutes is
        beyond what one search can see, and the interval does not claim it.
        One for one holds where the SLO metric climbs steeply with the rate, at a queue's knee. A pace f times
        slower scales the whole curve, metric(rate) → f · metric(f · rate), so where the metric's local slope
        in log–log is k the capacity moves (1 + 1/k) times as far as the pace (:func:`drift_gain`). A flat curve
        (a tail set by stalls or wake-ups, not by queueing: k well under 1) turns a small change of pace into a
        large one of capacity; k is read from the bracket's two ends.
    (c) The search's resolution (:func:`bracket_sd`). The capacity is interpolated inside a bracket the search
        narrows to 10 %; a rerun's bisection puts its own bracket elsewhere on the grid. The capacity's position
        inside the bracket is taken as uniform over it in log: sd = ln(hi / lo) / √12.

Combined in log space, as independent errors (a sum of variances), the interval is
``capacity × exp(± z · √(a² + b² + c²))`` with z the normal quantile of the confidence (1.645 for 90 %). It always
contains the estimate. A term that cannot be had (a bracket not closed, a point without a queue model, a single
block) counts zero and :class:`RerunInterval` names it in ``missing``: the interval is then narrower than it
should be, and says why.

Alternatives not taken
    Rerunning the search is the honest answer and costs its whole budget again; the bench (``bench/capacity.py
    --reruns``) does exactly that to check this interval. A bootstrap over blocks of the whole search would need
    the search replayed per replicate, and would still see only the seconds the search ran, not the minutes to a
    rerun.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from ortop.measure.stats import json_num

CONFIDENCE = 0.90       # a rerun lands inside the interval this often


@dataclass(frozen=True)
class RerunInterval:
    """A capacity with the interval a rerun is expected to land in, and the three terms behind it (sd of log)."""

    estimate: float
    lo: float
    hi: float
    confidence: float = CONFIDENCE
    tail_sd: float = 0.0
    drift_sd: float = 0.0
    bracket_sd: float = 0.0
    missing: tuple[str, ...] = field(default=())
    slope: float = math.nan  # the SLO metric's log–log slope at the crossing, which scaled the drift term

    @property
    def flat(self) -> bool:
        """The metric barely climbs with the rate where it crosses the SLO: reruns can land far apart."""
        return math.isfinite(self.slope) and self.slope < FLAT_SLOPE

    @property
    def sd(self) -> float:
        return math.sqrt(self.tail_sd ** 2 + self.drift_sd ** 2 + self.bracket_sd ** 2)

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def as_dict(self) -> dict[str, Any]:
        return {"tail_sd": json_num(self.tail_sd, 4), "drift_sd": json_num(self.drift_sd, 4),
                "bracket_sd": json_num(self.bracket_sd, 4), "missing": list(self.missing),
                "slope": json_num(self.slope, 3), "flat": self.flat}


def tail_sd(spread: float) -> float:
    """Term (a): √2 × the capacity's own sd of log from its record's sampling (``spread``, from
    :func:`ortop.measure.queue.capacity_spread`): the search's estimate and a rerun's each carry it. nan stays
    nan (not had)."""
    return math.sqrt(2) * spread if spread >= 0 else math.nan


def drift_sd(block_means_by_rate: Sequence[Sequence[float]]) -> float:
    """Term (b): √2 × the pooled sd of log service time from block to block, each block against the other blocks
    at its own rate (``block_means_by_rate``: per rate, each block's typical service ms, its median). nan with no
    rate of two blocks."""
    ss, dof = 0.0, 0
    for means in block_means_by_rate:
        x = np.log(np.asarray([m for m in means if m > 0 and math.isfinite(m)], dtype=float))
        if x.size >= 2:
            ss += float(np.sum((x - x.mean()) ** 2))
            dof += x.size - 1
    return math.sqrt(2 * ss / dof) if dof else math.nan


FLAT_SLOPE = 1.0     # below this log–log slope at the crossing, a capacity moves more than the host's pace
SLOPE_FLOOR = 0.1    # the gain is capped at 1 + 1 / SLOPE_FLOOR: a slope read as 0 or below is a flat curve


def local_slope(lo: float, hi: float, metric_lo: float, metric_hi: float) -> float:
    """The SLO metric's slope in log–log between the bracket's ends (its rates and their estimates); nan when
    either is missing."""
    if not (0 < lo < hi and math.isfinite(hi) and metric_lo > 0 and metric_hi > 0
            and math.isfinite(metric_lo) and math.isfinite(metric_hi)):
        return math.nan
    return math.log(metric_hi / metric_lo) / math.log(hi / lo)


def drift_gain(slope: float) -> float:
    """How many times the host's pace a capacity moves: 1 + 1/k at the crossing's slope k (1 without one)."""
    if not math.isfinite(slope):
        return 1.0
    return 1.0 + 1.0 / max(slope, SLOPE_FLOOR)


def bracket_sd(lo: float, hi: float) -> float:
    """Term (c): the sd of log of a point uniform in log over the bracket ``lo``…``hi``; nan when it is not closed."""
    if not (0 < lo <= hi and math.isfinite(hi)):
        return math.nan
    return math.log(hi / lo) / math.sqrt(12)


def rerun_interval(estimate: float, *, tail: float, drift: float, bracket: float,
                   confidence: float = CONFIDENCE, slope: float = math.nan) -> RerunInterval:
    """The interval from the three terms (nan: not had, counted zero and named in ``missing``), the drift term
    scaled by :func:`drift_gain` at ``slope``."""
    drift = drift * drift_gain(slope) if math.isfinite(drift) else drift
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be a fraction in (0, 1); got {confidence!r}")
    terms = {"tail": tail, "drift": drift, "bracket": bracket}
    missing = tuple(k for k, v in terms.items() if not math.isfinite(v))
    a, b, c = (v if math.isfinite(v) else 0.0 for v in terms.values())
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    sd = math.sqrt(a * a + b * b + c * c)
    if not (estimate > 0 and math.isfinite(estimate)):
        return RerunInterval(estimate, math.nan, math.nan, confidence, a, b, c, missing, slope)
    return RerunInterval(estimate, estimate * math.exp(-z * sd), estimate * math.exp(z * sd), confidence,
                         a, b, c, missing, slope)
