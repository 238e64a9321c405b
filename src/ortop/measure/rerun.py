"""Where a rerun of the same capacity search on the same host is expected to land: the capacity's interval.

What the interval is for
    A capacity is read once and acted on later: a second search minutes after the first is what anyone holding
    the figure would get. On this kind of host two exhaustive curves a minute apart agree within ±10 % in only 6 of
    12 models (the sd of their log ratio about 18 %), and two searches minutes apart differ with an sd of about
    14.5 % (``docs/benchmarks/history-capacity.md``). An interval that held only the counts' noise would claim a
    precision no second reading shows. So the interval is of a *rerun*: at ``CONFIDENCE`` (90 %), a search run
    again here lands inside it.

Four sources, each a standard deviation of the capacity's log (capacity is a rate: its errors are relative)
    (a) The tail's sampling (:func:`tail_sd`). The capacity is where the queue model's long-run estimate of the
        SLO metric crosses the SLO between the bracket's two rates; each estimate comes from the requests the
        search recorded (:func:`ortop.measure.queue.queue_model`), a finite sample of the server. How far that
        sample moves the capacity is read by resampling it (:func:`ortop.measure.queue.capacity_spread`): each
        end's record redrawn from itself in runs (the stalls' clumps kept together), both rates judged again with
        the same simulated arrivals, the crossing read again; the sd of its log over the resamples. Nothing is
        mapped through a slope: the resampled crossing is the capacity itself. The search's own estimate and a
        rerun's each carry it: √2. A longer ``--budget`` records more requests: this term narrows.
    (b) The host's drift (:func:`pace_drift`). Capacity scales about as 1 / service time, so the host's pace moves
        it one for one in log terms. A search's capacity rests on the host's pace over the whole search (its points'
        server times are pooled into one queue model, and its bracket's ends are measured seconds to a minute
        apart), a rerun's on the pace over its own; what moves one from the other is how far such an average
        strays. So the term is the standard error of the search's mean pace, √2 × it: the search's own mean and a
        rerun's each carry it. The pace swings from one block to the next, but a rerun does not rest on one block:
        one block's spread is the wrong timescale, √n times the mean's over n blocks where the swings are
        independent.
        Each run's pace is its log service time less the median log service of its input shape's runs over the
        whole search: on a shape mix a block's service is mostly which shapes it drew (a block at a low rate holds
        a few dozen runs), not the host. A shape of fewer than 5 runs has no median to read against; its runs are
        left out. Not centred per rate: a search measures each rate in one stretch of time, so a rate's own centre
        would take the host's pace over that stretch with it, the very drift this term is for. A rate's own effect
        on service (idle gaps before runs, cold caches, a pool woken inside the run) stays in, and can only widen
        the term. A block's pace is the median over its runs (a stall's few long runs are the tail's and term
        (a)'s); a block of fewer than 3 runs has none.
        The blocks in the order they ran (every point of the search together: one host over time) are a series
        whose mean's standard error is read by batch means, the standard method for a correlated series: the
        series cut into K contiguous batches (K = 8, fewer for under 16 blocks, at least 2 blocks a batch), the
        variance of the batch means over K. A batch takes in the pace's correlation from one block to the next,
        which a sum of independent blocks would not. With 2 to 5 blocks (under 3 batches) the blocks are taken as
        independent (sd / √n); with fewer the term is not had.
        The reading assumes the host's pace stationary over minutes, with a correlation shorter than a batch (a
        longer one makes neighbouring batches alike, and the term reads narrow). A host that moves more between
        searches than within one (another tenant arriving, a clock throttled) is beyond what one search can see,
        and the interval does not claim it.
        One for one holds where the SLO metric climbs steeply with the rate, at a queue's knee. A pace f times
        slower scales the whole curve, metric(rate) → f · metric(f · rate), so where the metric's local slope
        in log–log is k the capacity moves (1 + 1/k) times as far as the pace (:func:`drift_gain`). A flat curve
        (a tail set by stalls or wake-ups, not by queueing: k well under 1) turns a small change of pace into a
        large one of capacity; k is read from the bracket's two ends.
    (c) The search's resolution (:func:`bracket_sd`). The capacity is interpolated inside a bracket the search
        narrows to 10 %; a rerun's bisection puts its own bracket elsewhere on the grid. The capacity's position
        inside the bracket is taken as uniform over it in log: sd = ln(hi / lo) / √12.

    (d) The stalls' share (:func:`stall_movement`, mapped by :func:`ortop.measure.queue.stall_sd`). Where the
        host's stalls (runs over 3× their shape's median: :func:`ortop.measure.noise.slow_share`) reach the SLO's
        percentile, the capacity follows how often the host stalls, and that share moves from one search to the next
        (0.14–3 % between searches minutes apart on one 2-core VM, the capacity falling as it rose: Spearman −0.68
        where the stalls decide, near 0 where the queue does). Term (a) resamples the record the search has, with
        its share; term (b) reads each block's median, which a stall does not move. Neither follows the share.
        The share's movement is read as the pace's is: per block, its runs against their shape's median over the
        whole search (a mix's slow shape is not a stall), the blocks in the order they ran cut into the same
        batches (:func:`mean_se`), each batch's share its stalled runs over its runs; √2 × the standard error of
        the search's share, relative to it. A share steady over the search gives what its clumps' count leaves
        (about 1 / √clumps); one that moves within it (a neighbour arriving half way) gives more.
        It is mapped into capacity by the queue model itself: both ends of the bracket judged again with the runs
        that hold a stall drawn (1 ± the movement) times as often as the others (thinned and thickened, their
        clumps kept whole), with the same arrivals for both, and the crossing read again; the term is half the
        distance between the two crossings in log. Where the queue decides (an SLO far above the stalls), the
        crossings barely move and the term is small, whatever the share does.
        Its overlap with term (a): a steady share's clump count is sampling, which (a) also resamples, so where the
        stalls decide the interval counts some of it twice (wider, never narrower).
        What no search can see from inside is a host whose stall rate moves between searches while holding still
        within each: on one 2-core VM the share went from 0.2 to 1.6 % over four minutes of searches of one
        profile, each search steady within itself (its own reading ±25–45 %), and the capacity halved with it. So
        each search's share is kept (:mod:`ortop.engine.answers.stall_record`: per host, model and profile, the
        last day's), and where RECORD_MIN earlier ones exist, the share's movement is the larger of the search's
        own reading and their spread (:func:`between_searches`); ``interval_terms.stall_moves_from`` says which.
        A first search on a host has only its own reading, and says so.
Combined in log space, as independent errors (a sum of variances), the interval is
``capacity × exp(± z · √(a² + b² + c² + d²))`` with z the normal quantile of the confidence (1.645 for 90 %), or
Student's t where term (b) or (d) dominates: each is read from a handful of batches, and an sd read from eight
values is itself uncertain (Welch–Satterthwaite's degrees of freedom for the sum, :func:`effective_dof`; up to 1.89
at 90 % with eight batches). It always contains the estimate. A term that cannot be had (a bracket not closed, a
point without a queue model, fewer than two blocks) counts zero and :class:`RerunInterval` names it in
``missing``: the interval is then narrower than it should be, and says why.

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

from ortop.measure.noise import SLOW_K
from ortop.measure.stats import json_num

CONFIDENCE = 0.90       # a rerun lands inside the interval this often


@dataclass(frozen=True)
class RerunInterval:
    """A capacity with the interval a rerun is expected to land in, and the four terms behind it (sd of log)."""

    estimate: float
    lo: float
    hi: float
    confidence: float = CONFIDENCE
    tail_sd: float = 0.0
    drift_sd: float = 0.0
    bracket_sd: float = 0.0
    missing: tuple[str, ...] = field(default=())
    slope: float = math.nan  # the SLO metric's log–log slope at the crossing, which scaled the drift term
    stall_sd: float = 0.0    # term (d): the stalls' share moving between searches
    stall_moves: float = math.nan  # how far that share moves to a rerun, relative to it
    stall_moves_from: str = ""     # where that was read: this search's blocks, or its earlier searches here

    @property
    def flat(self) -> bool:
        """The metric barely climbs with the rate where it crosses the SLO: reruns can land far apart."""
        return math.isfinite(self.slope) and self.slope < FLAT_SLOPE

    @property
    def sd(self) -> float:
        return math.sqrt(self.tail_sd ** 2 + self.drift_sd ** 2 + self.bracket_sd ** 2 + self.stall_sd ** 2)

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def as_dict(self) -> dict[str, Any]:
        return {"tail_sd": json_num(self.tail_sd, 4), "drift_sd": json_num(self.drift_sd, 4),
                "bracket_sd": json_num(self.bracket_sd, 4), "stall_sd": json_num(self.stall_sd, 4),
                "stall_moves": json_num(self.stall_moves, 3), "stall_moves_from": self.stall_moves_from or None,
                "missing": list(self.missing),
                "slope": json_num(self.slope, 3), "flat": self.flat}


def tail_sd(spread: float) -> float:
    """Term (a): √2 × the capacity's own sd of log from its record's sampling (``spread``, from
    :func:`ortop.measure.queue.capacity_spread`): the search's estimate and a rerun's each carry it. nan stays
    nan (not had)."""
    return math.sqrt(2) * spread if spread >= 0 else math.nan


@dataclass(frozen=True)
class PaceBlock:
    """One block's runs as term (b) reads them: when the block began (any clock the search's blocks share: only the
    order counts), and per run its service (ms) and the index of the input shape it ran."""

    start: float
    service_ms: np.ndarray
    shape: np.ndarray


SHAPE_MIN_RUNS = 5    # runs of a shape before its median is read against (fewer: its runs are left out)
BLOCK_MIN_RUNS = 3    # runs of a block before its median is its pace
MAX_BATCHES = 8       # batch means: at most 8 batches, at least 2 blocks each, at least 3 batches


def _residuals(blocks: Sequence[PaceBlock]) -> list[np.ndarray]:
    """Per block with runs, in the order the blocks ran (a block without a start, nan, last): each run's log
    service less its shape's median log service over all ``blocks``; nan for a run whose shape has too few runs
    (``SHAPE_MIN_RUNS``) or whose service is not a positive number."""
    kept = [b for b in blocks if len(b.service_ms)]
    if not kept:
        return []
    service = np.concatenate([np.asarray(b.service_ms, dtype=float) for b in kept])
    shape = np.concatenate([np.broadcast_to(np.asarray(b.shape), len(b.service_ms)) for b in kept]).astype(np.int64)
    usable = (service > 0) & np.isfinite(service)
    log_ms = np.log(np.where(usable, service, 1.0))
    residual = np.full(service.size, np.nan)
    for s in np.unique(shape[usable]):
        mine = usable & (shape == s)
        if np.count_nonzero(mine) >= SHAPE_MIN_RUNS:
            residual[mine] = log_ms[mine] - np.median(log_ms[mine])
    per_block = np.split(residual, np.cumsum([len(b.service_ms) for b in kept])[:-1])
    return [per_block[i] for i in np.argsort([b.start for b in kept], kind="stable")]


def block_paces(blocks: Sequence[PaceBlock]) -> np.ndarray:
    """Each block's pace in the order the blocks ran: the median over its runs of log service less its shape's
    median log service over all ``blocks`` (see term (b)); blocks left with too few runs are left out."""
    paces = []
    for residual in _residuals(blocks):
        r = residual[np.isfinite(residual)]
        if r.size >= BLOCK_MIN_RUNS:
            paces.append(float(np.median(r)))
    return np.asarray(paces, dtype=float)


def mean_se(series: np.ndarray) -> tuple[float, int]:
    """The standard error of a correlated series' mean by batch means (see term (b)), with its degrees of freedom
    (batches − 1); with under 3 batches' worth (2 to 5 values) the values taken as independent (n − 1); (nan, 0)
    under 2."""
    n = series.size
    if n < 2:
        return math.nan, 0
    k = min(MAX_BATCHES, n // 2)
    if k < 3:
        return float(np.std(series, ddof=1)) / math.sqrt(n), n - 1
    means = np.asarray([c.mean() for c in np.array_split(series, k)])
    return math.sqrt(float(np.var(means, ddof=1)) / k), k - 1


def pace_drift(blocks: Sequence[PaceBlock]) -> tuple[float, int]:
    """Term (b) with its degrees of freedom: √2 × the standard error of the search's mean pace over ``blocks``
    (all its points', any order), the search's own mean and a rerun's each carrying it. (nan, 0) with fewer than
    two blocks of pace."""
    se, dof = mean_se(block_paces(blocks))
    return math.sqrt(2) * se, dof


def block_stalls(blocks: Sequence[PaceBlock], k: float = SLOW_K) -> tuple[np.ndarray, np.ndarray]:
    """Per block in the order the blocks ran: its runs read against their shape, and how many of them stalled
    (slower than ``k`` × their shape's median over all ``blocks``, as :func:`ortop.measure.noise.slow_share`
    counts them); see term (d)."""
    runs, slow = [], []
    for residual in _residuals(blocks):
        r = residual[np.isfinite(residual)]
        runs.append(r.size)
        slow.append(int(np.count_nonzero(r > math.log(k))))
    return np.asarray(runs, dtype=np.int64), np.asarray(slow, dtype=np.int64)


def stall_movement(blocks: Sequence[PaceBlock]) -> tuple[float, float, int]:
    """Term (d)'s reading of the share: (the search's stalled share, √2 × its standard error relative to it, the
    degrees of freedom). The share per batch of contiguous blocks (batch means as for the pace, :func:`mean_se`,
    each batch's share its stalled runs over its runs); with under 3 batches' worth each block a batch. (nan, nan,
    0) with under two blocks of runs; (0, 0, n − 1) where nothing stalled: no share to move."""
    runs, slow = block_stalls(blocks)
    keep = runs > 0
    runs, slow = runs[keep], slow[keep]
    n = runs.size
    if n < 2:
        return math.nan, math.nan, 0
    share = float(slow.sum() / runs.sum())
    if share <= 0:
        return 0.0, 0.0, n - 1
    k = min(MAX_BATCHES, n // 2)
    k = n if k < 3 else k
    cuts = np.array_split(np.arange(n), k)
    shares = np.asarray([slow[c].sum() / runs[c].sum() for c in cuts])
    se = math.sqrt(float(np.var(shares, ddof=1)) / k)
    return share, math.sqrt(2) * se / share, k - 1


RECORD_MIN = 3     # earlier searches' shares before their spread is read (fewer: the search's own reading alone)


def between_searches(shares: Sequence[float]) -> tuple[float, int]:
    """Term (d)'s second reading: how far the stalls' share moved between earlier searches of the same profile on
    this host (``shares``, one a search): √2 × the sd of their log, this search's share and a rerun's each one
    draw of the host's; with its degrees of freedom. (nan, 0) with fewer than RECORD_MIN shares above 0."""
    logs = np.log([s for s in shares if s > 0 and math.isfinite(s)])
    if logs.size < RECORD_MIN:
        return math.nan, 0
    return math.sqrt(2) * float(np.std(logs, ddof=1)), int(logs.size - 1)


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile at ``p`` for ``dof`` degrees of freedom (the normal's for infinite), by the
    Cornish–Fisher expansion: within 1 % of the exact value for 90 % and 95 % two-sided intervals from 3 degrees of
    freedom, for 99 % from 5 (no statistics library at run time for one number)."""
    z = NormalDist().inv_cdf(p)
    if not math.isfinite(dof):
        return z
    v = max(dof, 1.0)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3))


def effective_dof(drift: float, drift_dof: float, others: float, stall: float = 0.0,
                  stall_dof: float = math.inf) -> float:
    """Welch–Satterthwaite's degrees of freedom of a variance ``drift² + stall² + others²`` where the drift and
    stall terms are each estimated from few values (``drift_dof``, ``stall_dof``) and the others are taken as
    known: where an estimated term dominates, the interval takes Student's t for its batches rather than the
    normal's quantile (with 7 degrees of freedom, 1.89 against 1.645 at 90 %), and where they are small, the
    normal's."""
    total = drift * drift + stall * stall + others * others
    denom = 0.0
    for v, dof in ((drift, drift_dof), (stall, stall_dof)):
        if v > 0 and math.isfinite(dof) and dof > 0:
            denom += v ** 4 / dof
    return total * total / denom if denom > 0 else math.inf


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


def rerun_interval(estimate: float, *, tail: float, drift: float, bracket: float, stall: float = 0.0,
                   confidence: float = CONFIDENCE, slope: float = math.nan,
                   drift_dof: float = math.inf, stall_dof: float = math.inf,
                   stall_moves: float = math.nan, stall_moves_from: str = "") -> RerunInterval:
    """The interval from the four terms (nan: not had, counted zero and named in ``missing``), the drift term
    scaled by :func:`drift_gain` at ``slope``; the quantile is Student's t at :func:`effective_dof` when the drift
    or stall term rests on few degrees of freedom (the normal's with infinitely many). ``stall_moves`` and
    ``stall_moves_from``: the share's own movement behind the stall term and where it was read, kept for the
    JSON."""
    drift = drift * drift_gain(slope) if math.isfinite(drift) else drift
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be a fraction in (0, 1); got {confidence!r}")
    terms = {"tail": tail, "drift": drift, "bracket": bracket, "stalls": stall}
    missing = tuple(k for k, v in terms.items() if not math.isfinite(v))
    a, b, c, d = (v if math.isfinite(v) else 0.0 for v in terms.values())
    z = t_quantile((1 + confidence) / 2, effective_dof(b, drift_dof, math.hypot(a, c), d, stall_dof))
    sd = math.sqrt(a * a + b * b + c * c + d * d)
    if not (estimate > 0 and math.isfinite(estimate)):
        return RerunInterval(estimate, math.nan, math.nan, confidence, a, b, c, missing, slope, d, stall_moves,
                             stall_moves_from)
    return RerunInterval(estimate, estimate * math.exp(-z * sd), estimate * math.exp(z * sd), confidence,
                         a, b, c, missing, slope, d, stall_moves, stall_moves_from)
