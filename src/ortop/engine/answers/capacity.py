"""``ortop capacity``: the most traffic a profile serves within a latency SLO, found fast, with its curve.

The search per profile:

1. What is cheap to know first: a closed loop gives the ceiling (no offered rate above what back-to-back runs
   serve can be kept) and the service time at no load (the floor), measured until the SLO's metric of it rests on
   the runs it needs (a p99 100, :func:`ortop.measure.slo.runs_needed`), with its order-statistic interval
   (:class:`ortop.measure.slo.MetricFigure`). When that whole interval lies above the SLO the capacity is 0, said
   plainly as the search's result; an interval that straddles the SLO is said, and the search goes on.
2. A prediction, also cheap: the closed loop's service times replayed through a simulated FIFO queue fed by
   Poisson arrivals (:func:`predict_knee`, milliseconds of arithmetic) give the rate where the SLO metric would
   cross the SLO if service under load were what it is back to back. It is only where the search looks first:
   under open load runs follow idle gaps, caches go cold and pools stop spinning, so the real knee is measured.
3. From the prediction, steps up (while points meet the SLO) or down (while they do not) until a rate that meets
   it and one that does not are known, then bisection between them until they are 10 % apart (each point more
   costs seconds); the capacity reported is where the SLO is crossed inside that bracket (:meth:`Search.capacity`).
   A step goes toward the prediction made again from the last point's own service times — service under that
   load, not back to back — with the simulated curve scaled to pass through what the point measured, and is at
   least 10 % and at most a factor of two. Each point is Poisson arrivals, measured in blocks until it is decided
   or its time is up; a point still undecided then lies where the interval straddles the SLO — at the knee, within
   what more time would tell — and moves the bracket by its estimate, marked undecided.
4. A point is decided by *batch means* over its blocks. Each block is an independent replication: the worker
   starts the arrival sequence afresh (from the same seed for every profile: common random numbers), lets the
   queue settle, then records. For a percentile SLO (p99 ≤ 50 ms) the block statistic is the share of requests
   over the SLO (shed requests count as over); the point fails the SLO when the lower end of the 95 % t-interval
   of that share is above 1 − q (1 % for p99). A mean SLO uses the blocks' mean response times against the SLO.
   Requests within one block are correlated (they share a queue), so an interval over requests would be far too
   narrow; blocks are not. But the blocks cannot show that a rate meets a percentile SLO: the requests over it
   come in the clumps of a queue's rare long busy periods, so a few seconds of blocks mostly hold none, and their
   interval is narrow exactly when it should not be (a rapid classifier's point read p99 29 ms from 1 000
   requests where its queue's long run is 41). So each point also measures its server — every request's service
   and the gap before it, a wake-up after idle or the loop's work between runs (:func:`server_times`) — and
   :func:`queue_model` replays those, with what the search's other points measured (the host's slow spells are
   the host's, not one rate's, and a point's few seconds mostly miss them) but for points whose server fell
   behind their rate (a backlog's costs: :meth:`Search.pooled`), through a simulated queue for tens of
   thousands of arrivals: the SLO metric in the long run, with an interval.
   The point meets the SLO when that interval lies below the SLO and at least 2 s were recorded; it fails when
   the interval lies above it or the blocks say so; an undecided point moves the bracket by the model's estimate.
   No point is decided before it holds the requests the SLO's metric needs (a p99 is not read from 20 requests:
   it would be their slowest); one that ends short is not judged and moves no end of the bracket (:meth:`Point.thin`).
   A point that meets it goes on measuring, while it has time, until its search has recorded POOL_MIN_S (6 s) in
   all: a search that met its first points from a few seconds of record had mostly seen no stall of the host, and
   read high (bench/capacity.py, runs 6–9: all 8 searches that took under 9 s read 1.02–1.37 × the knee).
5. Points of profiles whose brackets share a rate (rates are rounded to a 2 % grid) are measured together,
   interleaved block by block on the same arrival sequence, so drift cannot pick the winner.

The budget is wall time, builds included; a stop (ctrl-C) returns what is known.

Each capacity carries an interval where a rerun of the same search on this host is expected to land: the tail's
sampling, the host's drift over the search and the bracket's resolution, combined (:mod:`ortop.measure.rerun`;
:meth:`Search.interval`). The bracket stays what it is: the search's resolution, not a confidence interval.

The numbers are the measure room's: the SLO (:mod:`ortop.measure.slo`), the simulated queue, the knee's prediction
and the queue model (:mod:`ortop.measure.queue`), the bracket's rules (:mod:`ortop.measure.bracket`). Here: the
points, the searches and their result, each with its ``as_dict``; the driver is
:mod:`ortop.engine.answers.capacity_search`.

Over ~525 lines, a tenth of them this note: a point's decision, a search's bracket and interval and the result's
JSON change together (a new figure is a field, the rule that reads it and its key).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.measure.bracket import apart, grid, knee, narrow
from ortop.measure.noise import HostNoise
from ortop.measure.pace import kept as pace_kept
from ortop.measure.queue import capacity_spread, cost_pools, past_ceiling, queue_model, stall_sd, work_ms
from ortop.measure.ratio import overlapping
from ortop.measure.rerun import (
    CONFIDENCE,
    PaceBlock,
    RerunInterval,
    between_searches,
    bracket_sd,
    local_slope,
    pace_drift,
    rerun_interval,
    stall_movement,
    tail_sd,
)
from ortop.measure.slo import MetricFigure, Slo
from ortop.measure.stats import json_num, t95

# What decided a point, in words: its blocks' share of requests over the SLO (or their mean, for a mean SLO), the
# queue model's long-run estimate, or requests shed.
BY_MEASURED = "measured"
BY_MODEL = "long-run estimate"
BY_SHED = "requests shed"

STEP = 1.1              # from the prediction, steps of 10 % until the knee is bracketed
POINT_MIN_BLOCKS = 4          # blocks before a point may be decided (t-interval on 3 degrees of freedom at least)
MET_MIN_S = 2.0         # recorded seconds before a point may meet the SLO: enough busy times to hold the host's
                        # slow spells, which come every second or so
POOL_MIN_S = 6.0        # recorded seconds, all of a search's points together, before a point stops at "met" while
                        # it still has time: the queue model replays the search's whole record, and the stalls that
                        # put the last 1 % of requests over an SLO are rarer than one a second (see capacity_search)


def applied(profile: Profile) -> str:
    """What a profile changes from ORT's defaults, in short terms (``threads 1``); "" for nothing."""
    from ortop.config.diff import change_terms, diff

    return ", ".join(change_terms(diff(Profile(), profile, settings_only=True)))


DEFAULTS = "defaults"  # the name of ORT's defaults when no profile is given


def label(name: str, applied_terms: str) -> str:
    """A profile as tables and results name it: ORT's defaults plus flags by what the flags applied (``threads
    1``), never "defaults" for settings a user set; any other profile by its name."""
    return applied_terms if name == DEFAULTS and applied_terms else name


@dataclass
class Point:
    """One offered rate, measured for one profile over its blocks."""

    rate_per_s: float
    blocks: list[dict[str, Any]] = field(default_factory=list)  # per block: runs, over, arrived, dropped, wall, …
    response: list[np.ndarray] = field(default_factory=list)
    busy: list[np.ndarray] = field(default_factory=list)      # what the same requests cost their server (server_times)
    pace: list[PaceBlock] = field(default_factory=list)       # per block: its start, each run's service and shape
    servers: int = 1                                          # callers per queue, and queues (replicas): the
    queues: int = 1                                           # queue model's shape
    decision: str = "undecided"
    order: int = 0                                            # when its search measured it: 0 first, 1 next, …
    interval: tuple[float, float] = (math.nan, math.nan)      # of the decision statistic
    model: tuple[float, float, float] = (math.nan, math.nan, math.nan)  # queue_model's estimate, low, high
    decided_by: str = ""                                      # the figure that decided it (DECIDED_BY)

    def add(self, response_ms: np.ndarray, wall_s: float, arrived: int, dropped: int, slo: Slo,
            busy: np.ndarray | None = None, window_s: float | None = None, pace: np.ndarray | None = None,
            start_ns: float = math.nan) -> None:
        """One block: the responses of the requests that arrived in its window (``window_s``, their arrivals'
        span; ``wall_s`` by default), ``wall_s`` from the window's start to the last of them served, ``arrived``
        in the window and ``dropped`` of those (shed, or still waiting when the block ended). ``pace``: each run's
        service ms and input shape's index (n × 2), with the block's ``start_ns``, for the interval's drift term
        (:func:`ortop.measure.rerun.pace_drift`)."""
        self.response.append(response_ms)
        if busy is not None:
            self.busy.append(busy)
        if pace is not None and len(pace):
            self.pace.append(PaceBlock(start_ns, pace[:, 0], pace[:, 1].astype(np.int64)))
        over = int(np.count_nonzero(response_ms > slo.ms))
        self.blocks.append({"runs": int(response_ms.size), "over": over, "wall_s": wall_s,
                            "window_s": wall_s if window_s is None else window_s, "arrived": arrived,
                            "dropped": dropped, "mean": float(response_ms.mean()) if response_ms.size else math.nan})

    def all(self) -> np.ndarray:
        return np.concatenate(self.response) if self.response else np.zeros(0)

    @property
    def runs(self) -> int:
        return sum(b["runs"] for b in self.blocks)

    @property
    def dropped(self) -> int:
        return sum(b["dropped"] for b in self.blocks)

    @property
    def arrived(self) -> int:
        return sum(b["arrived"] for b in self.blocks)

    def offered_per_s(self) -> float:
        """What arrived, over the windows its requests arrived in: the rate the Poisson draw actually offered
        (``rate_per_s`` is what it was asked for; a few dozen arrivals land ±20 % from it)."""
        window = float(sum(b["window_s"] for b in self.blocks))
        return self.arrived / window if window > 0 else math.nan

    def served_per_s(self) -> float:
        """The same requests served (every arrival but the shed), over the time from each window's start to the
        last of them served: never above :meth:`offered_per_s` — the count is at most the arrivals and the time
        at least their windows."""
        wall = self.recorded_s()
        return self.runs / wall if wall > 0 else math.nan

    def kept(self) -> bool:
        """Its server kept up with what arrived (:func:`ortop.measure.pace.kept`): nothing shed, and what arrived
        (:meth:`offered_per_s`) at what its requests cost their server on average (:func:`work_ms`: a queue is
        stable only when arrivals times the mean cost stay under its callers' time) adds up to less work than its
        callers have, with the rule's margin. Not served against offered: the last requests of a window are served
        up to a response time after it, which on a model of a hundred milliseconds a run is a tenth of a block, so
        a paced point would read as one that fell behind. Without what its requests cost (none recorded), the
        arrivals over the time they were served in (:meth:`recorded_s`) against those served."""
        work = [work_ms(b) for b in self.busy if len(b)]
        if work:
            cost = float(np.mean(np.concatenate(work)))
            return pace_kept(self.arrived, self.runs, self.dropped, float(sum(b["window_s"] for b in self.blocks)),
                             cost, max(1, self.servers) * max(1, self.queues))
        span = self.recorded_s()
        return pace_kept(self.offered_per_s() * span, self.runs, self.dropped, span)

    def enough(self, slo: Slo) -> bool:
        """Whether the point holds the requests its SLO metric is read from (:meth:`Slo.runs_needed`: p99 100,
        p90 10), shed ones counted (each is a request over the SLO)."""
        return self.runs + self.dropped >= slo.runs_needed()

    def thin(self, slo: Slo) -> bool:
        """Ended with fewer requests than its SLO metric needs and no request shed: not judged (the search's
        bracket does not move by it), and marked so."""
        return not self.enough(slo) and self.dropped == 0

    def goodput_per_s(self) -> float:
        """Requests served within the SLO's bound per second (a shed request is not served; one over the bound is
        served late): never above :meth:`served_per_s`."""
        wall = self.recorded_s()
        within = sum(b["runs"] - b["over"] for b in self.blocks)
        return within / wall if wall > 0 else math.nan

    def value(self, slo: Slo) -> float:
        """The SLO metric over every recorded request of the point (ms)."""
        return slo.of(self.all())

    def estimate(self, slo: Slo) -> float:
        """The SLO metric the point is judged by: the queue model's long-run estimate, or, without busy times to
        model, what was measured (:meth:`value`)."""
        return self.model[0] if not math.isnan(self.model[0]) else self.value(slo)

    def recorded_s(self) -> float:
        """Seconds recorded over the point's blocks (settling excluded)."""
        return float(sum(b["wall_s"] for b in self.blocks))

    def overloaded(self) -> bool:
        """Its server did not keep up with its rate at its typical speed: what its queued requests cost their
        server, at the median, adds up to more than its callers' time (:func:`past_ceiling`). Its costs are then a
        backlog's. The median, not the mean, and shed requests not counted: a point whose server kept its pace but
        for a stall of the host has seen one of the host's slow spells, which the search's other points need."""
        pools = cost_pools(self.busy)
        return pools is not None and past_ceiling(float(np.median(pools[0])), self.rate_per_s / max(1, self.queues),
                                                  self.servers)

    def decide(self, slo: Slo, others: Sequence[np.ndarray] = ()) -> str:
        """met / not met / undecided from the blocks so far (see the module docstring), judged afresh at every
        look; ``others``: what requests of the search's other points cost their server (:func:`server_times`),
        modelled with this point's own. Until the point holds the requests its SLO metric needs (:meth:`enough`)
        it stays undecided whatever its figures say (a p99 of 20 requests is their slowest); a shed request alone
        decides at once (the queue overflowed)."""
        n = len(self.blocks)
        if self.dropped > 0:
            self.decision = "not met"  # shed requests: the queue overflowed, whatever the percentile says
            self.decided_by = BY_SHED
            return self.decision
        if n < 2:
            return self.decision
        if self.busy:
            self.model = queue_model([*self.busy, *others], slo, self.rate_per_s, self.servers, self.queues, seed=n)
        if slo.quantile is None:
            stat = np.array([b["mean"] for b in self.blocks if b["runs"]])
            limit = slo.ms
        else:
            stat = np.array([(b["over"] + b["dropped"]) / max(1, b["runs"] + b["dropped"]) for b in self.blocks])
            limit = 1.0 - slo.quantile
        if stat.size < 2:
            return self.decision
        mean = float(stat.mean())
        half = t95(stat.size - 1) * float(stat.std(ddof=1)) / math.sqrt(stat.size)
        self.interval = (mean - half, mean + half)
        recorded = self.recorded_s()
        _, model_lo, model_hi = self.model
        modelled = not math.isnan(model_lo)
        # Over the SLO is believed from either side: requests seen over it in numbers, or the model's whole
        # interval. Under it only from the model when there is one (blocks that saw no clump prove little).
        # The model's interval needs no minimum of blocks (its replicates are its sample); the blocks' t-interval
        # needs POINT_MIN_BLOCKS.
        below = (model_hi < slo.ms) if modelled else (n >= POINT_MIN_BLOCKS and mean + half < limit)
        if n >= POINT_MIN_BLOCKS and mean - half > limit:
            self.decision, self.decided_by = "not met", BY_MEASURED
        elif modelled and model_lo > slo.ms:
            self.decision, self.decided_by = "not met", BY_MODEL
        elif below and recorded >= MET_MIN_S:
            self.decision, self.decided_by = "met", BY_MODEL if modelled else BY_MEASURED
        else:  # an undecided point moves the bracket by its estimate: the model's when there is one
            self.decision, self.decided_by = "undecided", BY_MODEL if modelled else BY_MEASURED
        if not self.enough(slo):  # too few requests to read the metric from: nothing is decided yet
            self.decision, self.decided_by = "undecided", ""
        return self.decision

    def decision_text(self, slo: Slo) -> str:
        """The decision as the points table says it: ``met by long-run estimate``; a thin point ``not judged: 37 of
        the 100 requests a p99 needs``."""
        if self.thin(slo) and self.blocks:
            return (f"not judged: {self.runs} of the {slo.runs_needed()} requests a {slo.metric} needs")
        return self.decision + (f" by {self.decided_by}" if self.decided_by else "")

    def as_dict(self, slo: Slo) -> dict[str, Any]:
        a = self.all()
        p50, p99 = (float(x) for x in np.percentile(a, (50, 99))) if a.size else (math.nan, math.nan)
        return {"rate_per_s": json_num(self.rate_per_s), "offered_per_s": json_num(self.offered_per_s()),
                "served_per_s": json_num(self.served_per_s()), "goodput_per_s": json_num(self.goodput_per_s()),
                "dropped": self.dropped, "runs": self.runs, "arrived": self.arrived,
                "requests_needed": slo.runs_needed(), "enough": self.enough(slo), "blocks": len(self.blocks),
                "recorded_s": round(self.recorded_s(), 2), "p50_ms": json_num(p50),
                "p99_ms": json_num(p99), "slo_ms": json_num(self.value(slo)),
                "model_ms": [json_num(x) for x in self.model] if not math.isnan(self.model[0]) else None,
                "decision": self.decision, "decided_by": self.decided_by or None, "order": self.order}

@dataclass
class Search:
    """One profile's search: its ceiling and floor, its points, the bracket the capacity lies in."""

    index: int
    name: str
    profile: Profile
    ceiling_per_s: float = math.nan
    floor_ms: float = math.nan
    lo: float = 0.0            # highest rate known to meet the SLO
    hi: float = math.nan       # lowest rate known not to
    predicted_per_s: float = math.nan  # where the last service times measured, queued, would cross the SLO
    first_per_s: float = math.nan  # where the first point goes when not at the prediction (a budget of one point)
    points: dict[float, Point] = field(default_factory=dict)
    note: str = ""             # why the search ended without a capacity (no rate meets the SLO)
    failed: str = ""
    applied: str = ""          # what was applied to ORT's defaults, in short terms ("threads 1"); "" for none
    no_load: MetricFigure | None = None  # the SLO metric of the closed loop (floor_ms) with its interval and runs
    remarks: list[str] = field(default_factory=list)  # what the answer rests on, said under its row and in warnings
    notes: list[str] = field(default_factory=list)  # the session's notes on its inputs (model.feeds), as built
    stall_past: tuple[float, ...] = ()  # the stalls' shares of this profile's earlier searches here (stall_record)
    # the interval's tail and stall terms (key, tail, stall, its dof, the share's movement and where it was read),
    # kept until the search measures more
    _tail: tuple[Any, float, float, float, float, str] | None = field(default=None, repr=False, compare=False)

    def pooled(self, besides: float | None = None) -> list[Point]:
        """The points whose server times model the search's other points: every one (but the one at ``besides``)
        whose server kept up with its rate (:meth:`Point.overloaded`). An overloaded point's costs are a
        backlog's, in a state the rates below it are not in. On a GPU host (the classifier, p99 ≤ 8 ms), a point
        offered 0.74 × the closed loop's ceiling fell behind (p50 94 ms); with its costs in the pool, the model
        read 11–70 ms at the seven points from 0.28 to 0.5 × its rate and judged them over the SLO, while they
        measured p99 2.8–7.7 ms."""
        return [p for r, p in self.points.items() if r != besides and not p.overloaded()]

    def server_times(self, besides: float | None = None) -> list[np.ndarray]:
        """What the requests of the pooled points (:meth:`pooled`) cost their server."""
        return [b for p in self.pooled(besides) for b in p.busy]

    def recorded_s(self) -> float:
        """Seconds recorded over the pooled points (:meth:`pooled`): how much of the host the queue model has
        seen."""
        return sum(p.recorded_s() for p in self.pooled())

    def done(self) -> bool:
        return bool(self.failed or self.note) or narrow(self.lo, self.hi)

    def next_rate(self) -> float:
        """The prediction first; then, until both ends of the bracket are measured, a step toward the prediction
        made from the last point's service times (at least 10 %, at most a factor of 2); then halves."""
        mid = (self.lo + self.hi) / 2
        pred = self.predicted_per_s
        if not self.points and 0 < pred:
            first = self.first_per_s if 0 < self.first_per_s < pred else pred
            return grid(min(first, self.hi / STEP)) if math.isfinite(self.hi) else grid(first)
        hi_measured = any(r >= self.hi for r in self.points)
        if self.lo > 0 and not hi_measured:
            up = self.lo * STEP
            if math.isfinite(pred) and pred > up:
                up = min(pred, 2 * self.lo)
            return grid(min(up, mid))
        if self.lo <= 0 and hi_measured:
            down = self.hi / STEP
            if math.isfinite(pred) and 0 < pred < down:
                down = max(pred, self.hi / 2)
            return grid(max(down, mid))
        return grid(mid)

    @property
    def met(self) -> bool:
        return self.lo > 0

    def capacity(self, slo: Slo) -> float:
        """The knee's estimate inside the bracket: where the SLO metric crosses the SLO between the two rates that
        bound it, by their long-run estimates (or what they measured), linear in 1 / metric — a queue's response
        time grows like 1 / (capacity − rate) near its ceiling, so its reciprocal is near linear in the rate. The
        lower end when the bracket is not closed or its ends do not straddle the SLO; 0 when nothing met it."""
        if self.lo <= 0:
            return 0.0
        a, b = self.points.get(self.lo), self.points.get(self.hi) if math.isfinite(self.hi) else None
        if a is None or b is None:
            return self.lo
        return knee(self.lo, self.hi, a.estimate(slo), b.estimate(slo), slo.ms)

    def interval(self, slo: Slo, confidence: float = CONFIDENCE) -> RerunInterval | None:
        """Where a rerun of this search on this host is expected to land (:mod:`ortop.measure.rerun`); None when
        nothing met the SLO. The tail term resamples the record (about a second of numbers): it is kept until the
        search measures more."""
        cap = self.capacity(slo)
        if not (self.lo > 0 and cap > 0):
            return None
        key = (self.lo, self.hi, sum(len(p.blocks) for p in self.points.values()), slo)
        blocks = [b for p in self.points.values() for b in p.pace]
        if self._tail is None or self._tail[0] != key:
            ends = [(r, [*p.busy, *self.server_times(besides=r)]) for r in (self.lo, self.hi)
                    if math.isfinite(r) and (p := self.points.get(r)) is not None]
            pooled = self.pooled()
            servers = max((p.servers for p in pooled), default=1)
            queues = max((p.queues for p in pooled), default=1)
            rel, moved_dof, where = self.stall_moves()
            self._tail = (key, tail_sd(capacity_spread(ends, slo, servers, queues)),
                          stall_sd(ends, slo, rel, servers, queues), float(moved_dof), rel, where)
        drift, dof = pace_drift(blocks)
        a, b = self.points.get(self.lo), self.points.get(self.hi) if math.isfinite(self.hi) else None
        slope = local_slope(self.lo, self.hi, a.estimate(slo), b.estimate(slo)) if a and b else math.nan
        _, tail, stall, stall_dof, moves, where = self._tail
        return rerun_interval(cap, tail=tail, drift=drift, bracket=bracket_sd(self.lo, self.hi), stall=stall,
                              confidence=confidence, slope=slope, drift_dof=dof, stall_dof=stall_dof,
                              stall_moves=moves, stall_moves_from=where)

    def stall_share(self) -> float:
        """The share of this search's runs its host stalled (nan before two blocks)."""
        return stall_movement([b for p in self.points.values() for b in p.pace])[0]

    def stall_moves(self) -> tuple[float, int, str]:
        """How far the stalls' share moves from this search to a rerun, relative to it, with its degrees of freedom
        and where it was read: the search's own blocks, or its earlier searches here where they say more
        (:func:`ortop.measure.rerun.between_searches`)."""
        _, rel, dof = stall_movement([b for p in self.points.values() for b in p.pace])
        past, past_dof = between_searches(self.stall_past)
        if math.isfinite(past) and not past <= rel:
            return past, past_dof, f"{len(self.stall_past)} earlier searches"
        return rel, dof, "this search"

    def label(self) -> str:
        """The profile as the tables name it: its name, and what was applied when it is ORT's defaults plus flags."""
        return label(self.name, self.applied)

    def outcome(self, slo: Slo) -> str:
        """The search's answer in a word or three: ``capacity`` (a rate met the SLO), ``no rate meets`` (the
        no-load metric's interval lies above the SLO, or a point with its server nearly idle missed it: a result,
        not a failure), ``none met`` (the points measured all missed), ``undecided`` (no point was judged: too few
        requests in the budget), ``failed``."""
        if self.failed:
            return "failed"
        if self.note:
            return "no rate meets"
        if self.met:
            return "capacity"
        judged = [p for p in self.points.values() if not p.thin(slo)]
        return "none met" if judged else "undecided"

    def as_dict(self, slo: Slo) -> dict[str, Any]:
        iv = self.interval(slo)
        outcome = self.outcome(slo)
        return {"profile": self.label(), "result": outcome, "capacity_per_s": json_num(self.capacity(slo)),
                # every rate measured missed: the capacity lies below the lowest (not a zero)
                "below_per_s": json_num(min(self.points)) if outcome == "none met" and self.points else None,
                "interval": [json_num(iv.lo), json_num(iv.hi)] if iv is not None else None,
                "interval_confidence": iv.confidence if iv is not None else CONFIDENCE,
                "interval_terms": iv.as_dict() if iv is not None else None,
                "applied": self.applied or None, "input_notes": list(self.notes),
                "bracket": [json_num(self.lo), json_num(self.hi)],
                "met": self.met, "ceiling_per_s": json_num(self.ceiling_per_s), "floor_ms": json_num(self.floor_ms),
                "no_load": self.no_load.as_dict() if self.no_load is not None else None,
                "predicted_per_s": json_num(self.predicted_per_s),
                "note": self.note or self.failed or None, "remarks": list(self.remarks),
                "points": [p.as_dict(slo) for _, p in sorted(self.points.items())]}


@dataclass
class CapacityResult:
    model: str
    slo: Slo
    searches: list[Search]
    elapsed_s: float
    budget_s: float
    stopped: bool = False
    warnings: list[str] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)  # every block in the order it ran
    restarts: list[str] = field(default_factory=list)          # workers that died and were restarted
    fault: str | None = None                                   # a worker lost for good: the search ended there
    host_noise: HostNoise | None = None                         # the host's own noise over the whole search

    def best(self) -> int | None:
        ok = [s for s in self.searches if not s.failed and s.lo > 0]
        return max(ok, key=lambda s: s.capacity(self.slo)).index if ok else None

    def separated(self, best: int) -> bool:
        """Whether ``best`` is shown to serve more than every other profile. A failed profile, or one whose
        service time alone misses the SLO, serves nothing; any other must have missed the SLO (a decided point) at
        or below a rate where the best met it, or have its bracket end at least NARROW below the best's, and, if it
        met the SLO at some rate, have its rerun interval wholly below the best's (as :mod:`ortop.measure.ratio`
        judges a ratio: "serves more" never stands beside "no detectable difference"), and if it met none, lie
        below the low end of the best's rerun interval (a miss at a rate a rerun of the best might not meet is the
        host's, not the profile's).
        Bracket ends set by undecided points (which straddle the SLO: a coin toss) are known no closer than
        the search narrows them. In 30 A/A runs of one profile against an identical copy (README), comparing
        bracket ends alone said "serves more" 3 times (×1.11, ×1.12, ×1.05), each time on an undecided end
        within 5 % of the other's. Applied to the same runs this test says it in none, nor in 20 A/A runs taken
        after it (where bracket ends alone said it 3 times); of 6 runs of one thread against two (budgets 15 and
        30 s) it says it in 5, the sixth's two-thread search having met no rate."""
        b = self.searches[best]
        met = max((r for r, p in b.points.items() if p.decision == "met"), default=0.0)
        iv_b = b.interval(self.slo)

        def below(s: Search) -> bool:
            if s.index == best or s.failed:
                return True
            missed = min((r for r, p in s.points.items() if p.decision == "not met"), default=math.inf)
            if s.note:  # meets at no rate: by its no-load figure, or by a miss with its server nearly idle
                return not math.isfinite(missed) or iv_b is None or iv_b.lo > missed
            if not apart(b.lo, met, s.hi, missed):
                return False
            # the brackets are the search's resolution; where a rerun lands is the interval: a profile that met
            # the SLO too is served less only when the two rerun intervals are apart (the ratio's own rule), and
            # one that met no rate only when a rerun of the best is expected above the rate it missed at (in A/A
            # runs on a host whose stalls decided the p99, one copy met a rate the other missed: 2 of 10 said "best")
            iv_s = s.interval(self.slo) if s.lo > 0 else None
            if iv_s is None:
                return iv_b is None or iv_b.lo > min(missed, s.hi)
            return iv_b is not None and iv_b.lo > iv_s.lo and not overlapping(iv_b, iv_s)

        return b.lo > 0 and all(below(s) for s in self.searches)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "slo": self.slo.as_dict(), "arrival": "poisson",
                "profiles": [s.as_dict(self.slo) for s in self.searches], "best": self.best(),
                "best_separated": (self.separated(b) if (b := self.best()) is not None else None),
                "elapsed_s": round(self.elapsed_s, 2), "budget_s": self.budget_s, "stopped": self.stopped,
                "warnings": list(self.warnings), "blocks": list(self.blocks), "restarts": list(self.restarts),
                "fault": self.fault,
                "host_noise": self.host_noise.as_dict() if self.host_noise is not None else None}
