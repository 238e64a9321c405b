"""The capacity search's driver: one worker per restart group (:mod:`ortop.engine.bench.pool`), the profiles'
sessions built once, and points measured as alternations that offer a rate of their own, every profile's blocks
alternated with every other's across workers too (:mod:`ortop.engine.bench.interleave`; see
:mod:`ortop.engine.answers.capacity` for the method). A worker that dies is restarted with its sessions and the search
goes on; one that cannot be restarted ends the search as a stop does, with everything measured before it.

What it counts on is sized by the SLO's metric, not by the clock: a model that runs ten times a second fills a
second-long block with ten runs. The closed loop goes on until its SLO metric rests on the runs it needs
(:func:`ortop.measure.slo.runs_needed`: a p99 100, a p90 10), within NO_LOAD_SHARE of the budget, and that metric
carries its order-statistic interval (:func:`ortop.measure.slo.metric_figure`): "no rate meets the SLO" is said only
when that interval lies wholly above the SLO; one that straddles it is said, and the search goes on. Each point
lasts until it holds the requests its metric needs (its blocks lengthened so that a few hold them); one the budget
cut short is not judged and says so (:meth:`ortop.engine.answers.capacity.Point.thin`), and a point is started only when
the budget left can give it those requests — fewer, sufficient points rather than many thin ones.

Over ~505 lines: the search's phases (building, the closed-loop ceilings, where the first point goes, the points)
spend one budget through one pool of workers and read one another's figures; the sizing of a point in requests
(``point_blocks`` … ``one_shot_rate``) is the arithmetic they share.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.answers.capacity import POOL_MIN_S, CapacityResult, Point, Search, applied
from ortop.engine.answers.stall_record import add_shares, past_shares, record_key
from ortop.engine.bench.deciders import Budget, PointRule
from ortop.engine.bench.interleave import BlockRun, Faults, WorkerLost, alternate
from ortop.engine.bench.plan import CEILING_BLOCKS, capacity_blocks
from ortop.engine.bench.pool import Pool
from ortop.errors import RuntimeFailure
from ortop.measure import rows as R
from ortop.measure.bracket import grid
from ortop.measure.noise import HostNoise, slow_share
from ortop.measure.queue import predict_knee, server_times, work_ms
from ortop.measure.slo import MetricFigure, Slo, metric_figure
from ortop.model.feeds import note_level

__all__ = ["CapacitySearch", "applied", "find_capacity", "idle_miss", "nearly_idle_miss", "straddle_text"]

ONE_SHOT = 0.5          # a budget of one point aims it at this share of the predicted capacity (_aim_first): at
#                         ~11 runs/s, 60 s, SLO twice the closed-loop p99, points at 0.6 of it met twice (3.28/s) and
#                         missed once (3.6/s, p99 409 ms against 320), at 0.5 met (2.97/s); at the prediction one
#                         missed by 1.9x (4.2/s)
SHARE_FIRST = 1.5       # profiles predicted within this factor of the lowest start at its rate (_aim_first): further
#                         apart, the faster one's first point would gather its requests slowly, far under its capacity
NO_LOAD_SHARE = 0.5      # the closed loop may take up to this share of the budget left to reach its runs
NO_LOAD_BLOCK_S = (0.5, 10.0)  # its further blocks' length, between these (s): a few blocks hold the runs needed
POINT_BLOCKS = 6         # a point's blocks are lengthened so that about this many hold the requests it needs
POINT_BLOCK_MAX_S = 6.0  # ... but never beyond this long a block (s)
DRAIN_S = 0.1            # what a block's drain after its window adds, on average, when planning (s)


def idle_miss(slo: Slo, floor_ms: float, figure: MetricFigure | None = None) -> str:
    """What a search says when the SLO metric of the bare service time (no load, back to back) misses the SLO:
    a queue only adds to it, so no rate meets it, and the search stops there instead of stepping down. With its
    ``figure``, the interval and the runs it rests on (it is said only when that interval lies above the SLO)."""
    said = figure.text() if figure is not None else f"{floor_ms:.3g} ms"
    return f"the model's own {slo.metric} at no load is {said}: no rate meets {slo.text()} (capacity 0)"


def straddle_text(slo: Slo, figure: MetricFigure) -> str:
    """What a search says when the no-load metric's interval holds the SLO's limit: it cannot tell whether an idle
    server meets it, so it searches anyway."""
    side, other = ("at or over", "under") if figure.ms >= slo.ms else ("under", "over")
    return (f"the model's own {slo.metric} at no load, {figure.text()}, is {side} {slo.text()}, but its interval "
            f"reaches {other} it: searching anyway")


IDLE_SHARE = 0.1  # a point offered at most this share of its ceiling finds its server idle nine times in ten


def nearly_idle_miss(s: Search, p: Point, slo: Slo) -> str:
    """What a search says when a point with its server nearly idle (offered at most IDLE_SHARE of the closed loop's
    ceiling) was decided not to meet the SLO before any rate met it: under open load runs follow idle gaps (caches
    cold, pools asleep), and a lower rate leaves the server no idler, so stepping down further finds nothing; ""
    otherwise. A recognizer at p99 ≤ 100 ms stepped down to 0.4/s over 22 points before saying so.

    The figures are the ones the table prints for that point and for the profile's no-load column, in the same
    words: what it measured over how many requests, its long-run estimate when it has one, what decided it, and the
    closed loop's figure beside it (a point decided only once it holds the requests its metric needs)."""
    if p.decision != "not met" or s.lo > 0 or not (s.ceiling_per_s > 0):
        return ""
    share = p.rate_per_s / s.ceiling_per_s
    if share > IDLE_SHARE:
        return ""
    est = p.model[0]
    long_run = f", {est:.3g} ms in the long run" if math.isfinite(est) else ""
    closed = (f"; {s.no_load.text()} at no load in a closed loop (back to back): runs after idle gaps are slower"
              if s.no_load is not None else "")
    return (f"the model's own {slo.metric} with its server nearly idle ({p.rate_per_s:.3g}/s, {share * 100:.0f} % "
            f"of its ceiling) is {p.value(slo):.3g} ms over {p.runs:,} requests{long_run} ({p.decision_text(slo)})"
            f"{closed}: no rate meets {slo.text()} (capacity 0)")


def point_blocks(rate: float, needed: int) -> tuple[float, float]:
    """A point's block and settling (s) at ``rate``: the plan's (:func:`capacity_blocks`: ~300 requests, 0.5 …
    1.5 s), lengthened at slow rates so that about POINT_BLOCKS blocks hold the ``needed`` requests (at most
    POINT_BLOCK_MAX_S a block): 100 requests at 5/s are four 3.3 s blocks and their settling, not fourteen 1.5 s
    ones."""
    block, settle = capacity_blocks(rate)
    if rate > 0:
        block = max(block, min(POINT_BLOCK_MAX_S, needed / rate / POINT_BLOCKS))
    return block, settle


def round_s(rate: float, profiles: int, needed: int) -> float:
    """One round of a point at ``rate``: a block (with its settling) per profile."""
    return sum(point_blocks(rate, needed)) * profiles


def needed_blocks(rate: float, needed: int, have: int = 0) -> int:
    """About how many blocks a point at ``rate`` takes to hold ``needed`` requests, ``have`` of them already (at
    least two: the first look)."""
    block, _ = point_blocks(rate, needed)
    return max(2, math.ceil(max(0, needed - have) / max(rate * block, 1e-9)))


def needed_s(rate: float, profiles: int, needed: int, have: int = 0) -> float:
    """About how long a point at ``rate`` takes to hold ``needed`` requests (:func:`needed_blocks`)."""
    block, settle = point_blocks(rate, needed)
    return needed_blocks(rate, needed, have) * (block + settle + DRAIN_S) * profiles


def one_shot_rate(pred: float, left_s: float, profiles: int, needed: int) -> float | None:
    """Where a first point goes when ``left_s`` holds fewer than two points at the predicted capacity ``pred``:
    the lowest rate from ONE_SHOT × pred up whose ``needed`` requests fit with the point's margin of 1.2 (a Poisson
    count of about 100 falls short of its mean one time in two); None where two points fit (the first goes at the
    prediction), or where not even one at the prediction does (it goes there, and is said thin)."""

    def fits(rate: float, points: int = 1) -> bool:
        return points * 1.2 * needed_s(rate, profiles, needed) <= left_s

    if not (math.isfinite(pred) and pred > 0) or fits(pred, 2) or not fits(pred):
        return None
    # needed_s steps with its blocks' count, so the lowest that fits is looked for on a 1 % grid, not bisected
    lo = next(r for r in np.linspace(pred * ONE_SHOT, pred, 41) if fits(float(r)))
    return float(lo) if lo < 0.98 * pred else None


def _r(x: float) -> str:
    """A rate as the warnings say it: whole numbers from 10/s, three figures below."""
    return f"{x:.0f}" if x >= 10 else f"{x:.3g}"


def _closed_rate(blocks: Sequence[BlockRun]) -> float:
    """Runs per second over closed-loop blocks."""
    wall = sum(b.served_s for b in blocks)
    return sum(len(b.rows) for b in blocks) / wall if wall > 0 else 0.0


class CapacitySearch:
    """Runs the search for several profiles (see the module docstring); ``on_point(search, point)`` after each
    measured point (the TUI draws the curve from it)."""

    def __init__(self, model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
                 names: Sequence[str] | None = None, stop: threading.Event | None = None,
                 on_point: Callable[[Search, Point], None] | None = None, point_max_s: float | None = None,
                 strict_providers: bool = False, noise_root: str = "/proc"):
        self.model_path = model_path
        self.noise_root = noise_root      # where the host's steal and CPU pressure are read (a fake one in tests)
        self._service: list[np.ndarray] = []  # every open-load block's service times and shape ids (profile-wise):
        self._shapes: list[np.ndarray] = []   # the runs' slow share against their own shape's median
        self.strict_providers = strict_providers  # a requested provider not active fails the search, not a warning
        self._fallbacks: list[str] = []           # without it: what fell back, said in the result's warnings
        self.profiles = list(profiles)
        self.slo = slo
        self.budget_s = budget_s
        self.names = list(names) if names else [f"#{i}" for i in range(len(profiles))]
        self.stop = stop or threading.Event()
        self.on_point = on_point
        # A point still undecided after this long straddles the SLO: it is at the knee, within what more time
        # would tell, and the bracket moves by its estimate (a twelfth of the budget, 4 … 20 s).
        self.point_max_s = point_max_s if point_max_s is not None else max(4.0, min(20.0, budget_s / 12))
        self.searches = [Search(i, self.names[i], p, applied=applied(p)) for i, p in enumerate(self.profiles)]
        # each profile's stalls as earlier searches here saw them (stall_record), and kept for the next
        self._record_keys = [record_key(model_path, p) for p in self.profiles]
        for s, k in zip(self.searches, self._record_keys):
            s.stall_past = tuple(past_shares(k))
        self._said: list[str] = []   # about the workers' environments (an allocator left out)
        self._pool = Pool(model_path, self.profiles, name="ortop-capacity-worker", warn=self._said.append)
        self.faults = Faults()
        self.order: list[dict] = []  # every block measured, in the order it ran: whose, when, at what rate
        self.unpaced: list[str] = []  # points whose offered rate was not served: what they say is a backlog's
        self._budget = Budget(budget_s, self.stop)  # started when run() starts: a view asking early reads 0 s
        self.unstarted: list[Search] = []  # searches whose next point the budget left could not give its requests
        self._round = 0

    def left(self) -> float:
        return self._budget.left()

    def result(self) -> CapacityResult:
        """What is known so far (a view may call it from another thread while the search runs)."""
        return CapacityResult(self.model_path, self.slo, list(self.searches), self._budget.elapsed(),
                              self.budget_s, self.stop.is_set(), blocks=list(self.order),
                              restarts=list(self.faults.said), fault=self.faults.lost)

    def run(self) -> CapacityResult:
        from ortop.collectors.noise import NoiseSampler

        self._budget.start()
        warnings: list[str] = []
        sampler = NoiseSampler(self.noise_root)
        sampler.start()
        try:
            self._build()
            warnings.extend(self._fallbacks)
            self._ceilings()
            self._aim_first()
            while not self.stop.is_set() and self.left() > 0 and self.faults.lost is None:
                todo = [s for s in self.searches if not s.done()]
                if not todo:
                    break
                by_rate: dict[float, list[Search]] = {}
                for s in todo:
                    by_rate.setdefault(s.next_rate(), []).append(s)
                measured = False
                needed = self.slo.runs_needed()
                for rate, group in sorted(by_rate.items()):
                    if self.stop.is_set():
                        break
                    if self.left() < 2 * round_s(rate, len(group), needed):  # its first look would overrun the budget
                        continue
                    # Fewer, sufficient points: one the budget left cannot give the requests it needs is not
                    # started, unless its search has nothing judged yet (then it is measured, and marked if thin).
                    have = min((s.points[rate].runs if rate in s.points else 0) for s in group)
                    if (needed_blocks(rate, needed, have) > 2 and self.left() < needed_s(rate, len(group), needed, have)
                            and all(any(not p.thin(self.slo) for p in s.points.values()) for s in group)):
                        self.unstarted.extend(s for s in group if s not in self.unstarted)
                        continue
                    self._point(rate, group)
                    measured = True
                if not measured:
                    break
        except WorkerLost:
            pass  # the fault is in self.faults; what was measured before it stands
        finally:
            self._pool.close()
        # a profile whose idle server already misses the SLO ended there (its note): said among the warnings too,
        # and so is a no-load figure at or over the SLO whose interval straddles it (the search went on all the same;
        # one under the SLO is said under its row)
        warnings.extend(f"{s.label()}: {s.note}" for s in self.searches if s.note)
        warnings.extend(f"{s.label()}: {r}" for s in self.searches for r in s.remarks
                        if s.no_load is not None and s.no_load.ms >= self.slo.ms)
        noise = self._judged(sampler.stop())
        unwritten = add_shares([(k, s.stall_share()) for s, k in zip(self.searches, self._record_keys)])
        if unwritten:
            warnings.append(unwritten)
        for s in self.searches:  # what each profile's inputs rest on: the warnings among its notes (model.feeds)
            warnings.extend(f"{s.label()}: {n}" for n in s.notes if note_level(n) == "warning")
        if noise.verdict:
            warnings.append(noise.verdict)
        logged = [x for w in self._pool.workers for x in w.log if "warn" in x.lower()]
        warnings.extend(x for x in [*self._said, *logged] if x not in warnings)
        warnings.extend(self.faults.said + ([self.faults.lost] if self.faults.lost else []))
        warnings.extend(x for x in self.unpaced if x not in warnings)
        needed = self.slo.runs_needed()
        for s in self.searches:  # points cut short by the budget, and points the budget left could not hold
            thin = [p for p in s.points.values() if p.thin(self.slo) and p.blocks]
            if thin:
                warnings.append(f"{s.label()}: " + ", ".join(f"{p.rate_per_s:.3g}/s" for p in thin)
                                + f": fewer than the {needed} requests a {self.slo.metric} needs when the budget ran "
                                  "out: not judged (a longer --budget gives them)")
            if s in self.unstarted and not s.done() and not self.stop.is_set():
                warnings.append(f"{s.label()}: the budget left could not give another point the {needed} requests a "
                                f"{self.slo.metric} needs: the search ended with the bracket as it is")
        return CapacityResult(self.model_path, self.slo, self.searches, self._budget.elapsed(),
                              self.budget_s, self.stop.is_set() or self.faults.lost is not None, warnings[:20],
                              blocks=list(self.order), restarts=list(self.faults.said), fault=self.faults.lost,
                              host_noise=noise)

    def _judged(self, noise: HostNoise) -> HostNoise:
        """The sampler's reading with the runs' slow share over every open-load block and, for a percentile SLO,
        the verdict."""
        if not self._service:
            return noise
        svc, ids = np.concatenate(self._service), np.concatenate(self._shapes)
        if self.slo.quantile is not None and 0 < self.slo.quantile < 1:
            return noise.judged(svc, ids, self.slo.quantile)
        return replace(noise, slow_share=slow_share(svc, ids))

    # ---- sessions -------------------------------------------------------------------------------------------
    def _build(self) -> None:
        from ortop.engine.placement import build_message

        self._pool.start()
        for i, p in enumerate(self.profiles):
            self._pool.of(i).send(build_message(i + 1, p))
        for i in range(len(self.profiles)):
            w, cid = self._pool.of(i), i + 1
            w.wait(partial(w.answered, cid), max(1.0, self.left()), self.stop)
            if cid in w.failed:
                self.searches[i].failed = f"the session failed to build: {w.failed[cid]}"
                w.builds.pop(cid, None)  # not built again on a restart
            elif cid not in w.built:
                if self.stop.is_set():
                    self.searches[i].failed = "stopped before its session was built"
                else:
                    raise RuntimeFailure(f"{self.names[i]}: {w.dead or 'the session did not build within the budget'}")
            else:
                self._check_providers(i, w.built[cid])
                self.searches[i].notes = [str(n) for n in w.built[cid].get("notes", ())]

    def _check_providers(self, i: int, info: dict) -> None:
        """A requested provider that is not active (ORT fell back silently): a warning, or with
        ``strict_providers`` a failure (exit 1), as ``ortop run --strict-providers`` has it."""
        requested = [x for x in info.get("providers_requested", ()) if x != "CPUExecutionProvider"]
        missing = [x for x in requested if x not in info.get("providers_active", ())]
        if not missing:
            return
        text = (f"{self.names[i]}: {', '.join(missing)} requested but not active: running on "
                f"{', '.join(info.get('providers_active', ())) or 'nothing'} (silent fallback)")
        if self.strict_providers:
            raise RuntimeFailure(text + " — refused by --strict-providers")
        self._fallbacks.append(text)

    # ---- measuring --------------------------------------------------------------------------------------------
    def _blocks(self, searches: list[Search], rounds: int, block_s: float, settle_s: float,
                rate: float | None, arrival: str) -> dict[int, list[BlockRun]]:
        """Alternate the searches' sessions block by block (across workers too) for ``rounds`` rounds; each
        search's blocks. A worker that died and could not be restarted raises WorkerLost after the blocks measured
        before it are recorded."""
        out: dict[int, list[BlockRun]] = {s.index: [] for s in searches}

        def record(got: list[BlockRun]) -> None:
            for b in sorted(got, key=lambda b: b.t_start_ns):
                s = searches[b.config]
                out[s.index].append(b)
                self.order.append({"profile": s.index, "rate_per_s": rate,
                                   "round": self._round + b.seq // len(searches),
                                   "t_start_s": round(b.t_start_ns / 1e9, 4)})

        try:
            got = alternate([self._pool.of(s.index) for s in searches], [s.index + 1 for s in searches], rounds,
                            block_s, settle_s, rate_hz=rate, arrival=arrival, first_round=self._round,
                            stop=self.stop, faults=self.faults, names=[s.name for s in searches])
        except WorkerLost as lost:
            record(lost.blocks)
            raise
        record(got)
        self._round += rounds  # the next blocks draw fresh arrivals
        return out

    def _ceilings(self) -> None:
        """Closed loop, interleaved: the ceiling (runs/s) and the SLO metric of the bare service time, measured on
        until that metric rests on the runs it needs (within NO_LOAD_SHARE of the budget left), with its interval.
        No rate meets the SLO only when that interval lies wholly above it; one that straddles it is said."""
        live = [s for s in self.searches if not s.failed]
        if not live:
            return
        got = self._blocks(live, *CEILING_BLOCKS, None, "closed")
        blocks = {s.index: list(got[s.index]) for s in live}
        needed = self.slo.runs_needed()
        until = self._budget.elapsed() + NO_LOAD_SHARE * max(0.0, self.left())
        settle = CEILING_BLOCKS[2]
        while not self.stop.is_set():
            short = [s for s in live if blocks[s.index] and sum(len(b.rows) for b in blocks[s.index]) < needed]
            if not short:
                break
            # the longest any of them still needs, at the pace its blocks so far ran
            want = max((needed - sum(len(b.rows) for b in blocks[s.index]))
                       / max(_closed_rate(blocks[s.index]), 1e-3) for s in short)
            lo, hi = NO_LOAD_BLOCK_S
            block_s = min(hi, max(lo, 1.1 * want / 2))        # two more blocks each, about
            rounds = max(1, math.ceil(1.1 * want / block_s))
            room = until - self._budget.elapsed()
            per_round = (block_s + settle) * len(short)
            if room < per_round:  # not even one round fits: the figure stays as it is, short of runs (said)
                block_s = room / len(short) - settle
                if block_s < lo:
                    break
                per_round, rounds = (block_s + settle) * len(short), 1
            rounds = max(1, min(rounds, int(room / per_round)))
            more = self._blocks(short, rounds, block_s, settle, None, "closed")
            for s in short:
                blocks[s.index].extend(more[s.index])
        for s in live:
            mine = blocks[s.index]
            if not mine:
                s.failed = "no closed-loop block finished"
                continue
            rates = [len(b.rows) / b.served_s for b in mine if b.served_s > 0]
            s.ceiling_per_s = float(np.median(rates)) if rates else math.nan
            svc = np.concatenate([R.response_ms(b.rows) for b in mine])
            s.no_load = metric_figure(self.slo, svc)
            s.floor_ms = s.no_load.ms
            s.hi = grid(s.ceiling_per_s) if math.isfinite(s.ceiling_per_s) else math.nan
            w = s.profile.workload
            s.predicted_per_s = predict_knee(svc, self.slo, servers=max(1, w.concurrency), queues=max(1, w.replicas))
            if s.no_load.above(self.slo):  # an idle server already misses it, its whole interval over the SLO
                s.note = idle_miss(self.slo, s.floor_ms, s.no_load)
            elif s.no_load.straddles(self.slo):
                s.remarks.append(straddle_text(self.slo, s.no_load))

    def _aim_first(self) -> None:
        """Where each search's first point goes. Profiles whose predicted capacities lie within SHARE_FIRST of one
        another start at one rate, the lowest of theirs: their first points share their rounds (interleaved, half
        the time of one after the other) and one whose closed loop read it fast does not aim above its capacity.
        Two copies of one profile predicted 0.89-1.26 x each other from run to run; the copy read high aimed its first
        points above its capacity and, with half of a 30 s budget, ended "below N/s" in 5 runs of 10.

        When the budget left holds about one point at the predicted rate, lower still: at ONE_SHOT of it or the
        lowest rate whose requests still fit, whichever is higher. With one point, one that meets the SLO is a floor
        the plan can use (capacity at least that), one that misses only a bound (below that); and the prediction,
        from the closed loop's service times, runs high where service under open arrivals is slower than back to
        back. At ~10 runs/s with a 60 s budget and an SLO of twice the closed-loop p99, the first point at the
        prediction (4.2/s) missed (p99 857 ms against 450) and no second one fitted."""
        needed = self.slo.runs_needed()
        live = [s for s in self.searches if not s.done() and not s.points]
        preds = [s.predicted_per_s for s in live if math.isfinite(s.predicted_per_s) and s.predicted_per_s > 0]
        if not preds:
            return
        low = min(preds)
        for s in live:
            if low < s.predicted_per_s <= SHARE_FIRST * low:
                s.first_per_s = low
        # one rate for all: profiles whose first points share a rate share their rounds (interleaved), and a
        # budget of one point has no room for a point each
        first = one_shot_rate(low, self.left(), len(live), needed)
        if first is None:
            return
        for s in live:
            pred = s.predicted_per_s
            if math.isfinite(pred) and pred > first:
                s.first_per_s = first
                s.remarks.append(f"the budget held about one point: the first was placed at {_r(first)}/s, "
                                 f"{first / pred * 100:.0f} % of where the queue model put the capacity "
                                 f"({_r(pred)}/s), so that a met SLO gives a floor")

    def _point(self, rate: float, group: list[Search]) -> None:
        """Measure ``rate`` for the searches in ``group`` (interleaved) until each is decided or time is up."""
        needed = self.slo.runs_needed()
        block_s, settle_s = point_blocks(rate, needed)
        for s in group:  # a rate its search measures again keeps the place it was first measured in
            if rate not in s.points:
                s.points[rate] = Point(rate, servers=max(1, s.profile.workload.concurrency),
                                       queues=max(1, s.profile.workload.replicas), order=len(s.points))
        points = {s.index: s.points[rate] for s in group}
        # its own time: point_max_s, or longer when that holds too few requests for its metric (within the budget)
        have = min(p.runs for p in points.values())
        own_s = max(self.point_max_s, 1.2 * needed_s(rate, len(group), needed, have))
        rule = PointRule(time.monotonic() + min(own_s, max(0.0, self.left())), self._budget, POOL_MIN_S)
        pending = list(group)
        rounds = 2  # the first look needs two blocks (an interval); later ones take what fits before the point's end
        while pending and not self.stop.is_set():
            got = self._blocks(pending, rounds, block_s, settle_s, rate, "poisson")
            for s in pending:
                for b in got[s.index]:
                    arrived, dropped = (b.traffic[0], b.traffic[1]) if b.traffic else (len(b.rows), 0)
                    service = R.service_ms(b.rows)
                    shape = b.rows[:, R.Col.SHAPE] if b.rows.shape[1] > R.Col.SHAPE else np.zeros(len(b.rows))
                    start = float(b.rows[:, R.Col.START].min()) if len(b.rows) else math.nan
                    # the same requests both ways: offered = those that arrived in the window, over the window;
                    # served = those of them served, over the time they took (a queue that drained past the window
                    # counts), so served is never above offered
                    points[s.index].add(R.response_ms(b.rows), b.served_s, arrived, dropped, self.slo,
                                        server_times(b.rows), window_s=b.window_s,
                                        pace=np.column_stack([service, shape]), start_ns=start)
                    if len(b.rows):
                        self._service.append(service)
                        self._shapes.append(s.index * 1_000_000 + shape.astype(np.int64))
            # its own time ends a point only once it holds the requests its metric needs; the budget ends any
            final = rule.final() and (self.left() <= 0 or all(points[s.index].enough(self.slo) for s in pending))
            for s in list(pending):
                d = points[s.index].decide(self.slo, others=s.server_times(besides=rate))
                if rule.done(d, s.recorded_s(), final):
                    pending.remove(s)
            if final or not pending:
                break
            rounds = rule.rounds_next(round_s(rate, len(pending), needed))
            if rounds < 1:  # another round would overrun the budget: the point ends as it stands
                break
        for s in group:
            p = points[s.index]
            served, offered = p.served_per_s(), p.offered_per_s()
            if not p.kept():  # against what arrived, not what was asked
                self.unpaced.append(f"{s.label()} at {_r(rate)}/s: offered {_r(offered)}/s, served {_r(served)}/s"
                                    + (f", {p.dropped} shed" if p.dropped else "") + ": the rate was not kept; the "
                                    "point was measured on a backlog, not a paced answer")
            # An undecided point (its time ran out) still moves the bracket by its estimate, and says so; a thin one
            # (too few requests for its metric when the budget ran out) is not judged: the bracket stays.
            meets = p.decision == "met" or (p.decision == "undecided" and p.estimate(self.slo) <= self.slo.ms)
            if p.thin(self.slo):
                pass
            elif meets:
                s.lo = max(s.lo, rate)
            else:
                s.hi = min(s.hi, rate) if math.isfinite(s.hi) else rate
                s.note = s.note or nearly_idle_miss(s, p, self.slo)
            if p.busy:  # where the next step heads: the service and gaps measured so far, queued, through this point
                times = s.server_times() or p.busy  # an overloaded point alone: its own costs, all there is
                s.predicted_per_s = predict_knee(work_ms(np.concatenate(times)), self.slo,
                                                 servers=p.servers, queues=p.queues, at=(rate, p.estimate(self.slo)))
            if self.on_point is not None:
                self.on_point(s, p)


def find_capacity(model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
             names: Sequence[str] | None = None, stop: threading.Event | None = None,
             on_point: Callable[[Search, Point], None] | None = None,
             strict_providers: bool = False, noise_root: str = "/proc") -> CapacityResult:
    """Check the profiles (ProfileError / ModelError for bad input), then search (see :class:`CapacitySearch`)."""
    from ortop.engine.models import check_profile
    from ortop.model import load_model

    info = load_model(model_path)
    for p in profiles:
        check_profile(info, p)
    return CapacitySearch(model_path, profiles, slo, budget_s=budget_s, names=names, stop=stop,
                          on_point=on_point, strict_providers=strict_providers, noise_root=noise_root).run()
