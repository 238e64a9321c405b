"""The capacity search's driver: one worker per restart group (:mod:`ortop.engine.bench.pool`), the profiles'
sessions built once, and points measured as alternations that offer a rate of their own, every profile's blocks
alternated with every other's across workers too (:mod:`ortop.engine.bench.interleave`; see
:mod:`ortop.engine.capacity` for the method). A worker that dies is restarted with its sessions and the search goes
on; one that cannot be restarted ends the search as a stop does, with everything measured before it."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.bench.deciders import Budget, PointRule
from ortop.engine.bench.interleave import BlockRun, Faults, WorkerLost, alternate
from ortop.engine.bench.plan import CEILING_BLOCKS, capacity_blocks, capacity_round_s
from ortop.engine.bench.pool import Pool
from ortop.engine.capacity import POOL_MIN_S, CapacityResult, Point, Search
from ortop.engine.traffic import KEEP_RATIO
from ortop.errors import RuntimeFailure
from ortop.measure import rows as R
from ortop.measure.bracket import grid
from ortop.measure.noise import HostNoise, slow_share
from ortop.measure.queue import predict_knee, server_times, work_ms
from ortop.measure.slo import Slo
from ortop.model.feeds import note_level


def applied(profile: Profile) -> str:
    """What a profile changes from ORT's defaults, in short terms (``threads 1``); "" for nothing."""
    from ortop.config.diff import change_terms, diff

    return ", ".join(change_terms(diff(Profile(), profile, settings_only=True)))


def idle_miss(slo: Slo, floor_ms: float) -> str:
    """What a search says when the SLO metric of the bare service time (no load, back to back) is at or over the
    SLO: a queue only adds to it, so no rate meets it, and the search stops there instead of stepping down."""
    return (f"the model's own {slo.metric} at no load is {floor_ms:.3g} ms: no rate meets {slo.text()} "
            f"(capacity 0)")


IDLE_SHARE = 0.1  # a point offered at most this share of its ceiling finds its server idle nine times in ten


def nearly_idle_miss(s: Search, p: Point, slo: Slo) -> str:
    """What a search says when a point with its server nearly idle (offered at most IDLE_SHARE of the closed loop's
    ceiling) was decided not to meet the SLO before any rate met it: under open load runs follow idle gaps (caches
    cold, pools asleep), and a lower rate leaves the server no idler, so stepping down further finds nothing; ""
    otherwise. A recognizer at p99 ≤ 100 ms stepped down to 0.4/s over 22 points before saying so."""
    if p.decision != "not met" or s.lo > 0 or not (s.ceiling_per_s > 0):
        return ""
    share = p.rate_per_s / s.ceiling_per_s
    if share > IDLE_SHARE:
        return ""
    return (f"the model's own {slo.metric} with its server nearly idle ({p.rate_per_s:.3g}/s, {share * 100:.0f} % "
            f"of its ceiling) is {p.value(slo):.3g} ms: no rate meets {slo.text()} (capacity 0)")


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
        self._said: list[str] = []   # about the workers' environments (an allocator left out)
        self._pool = Pool(model_path, self.profiles, name="ortop-capacity-worker", warn=self._said.append)
        self.faults = Faults()
        self.order: list[dict] = []  # every block measured, in the order it ran: whose, when, at what rate
        self.unpaced: list[str] = []  # points whose offered rate was not served: what they say is a backlog's
        self._budget = Budget(budget_s, self.stop)  # started when run() starts: a view asking early reads 0 s
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
            while not self.stop.is_set() and self.left() > 0 and self.faults.lost is None:
                todo = [s for s in self.searches if not s.done()]
                if not todo:
                    break
                by_rate: dict[float, list[Search]] = {}
                for s in todo:
                    by_rate.setdefault(s.next_rate(), []).append(s)
                measured = False
                for rate, group in sorted(by_rate.items()):
                    if self.stop.is_set():
                        break
                    if self.left() < 2 * capacity_round_s(rate, len(group)):  # its first look would overrun the budget
                        continue
                    self._point(rate, group)
                    measured = True
                if not measured:
                    break
        except WorkerLost:
            pass  # the fault is in self.faults; what was measured before it stands
        finally:
            self._pool.close()
        # a profile whose idle server already misses the SLO ended there (its note): said among the warnings too
        warnings.extend(f"{s.name}: {s.note}" for s in self.searches if s.note)
        noise = self._judged(sampler.stop())
        for s in self.searches:  # what each profile's inputs rest on: the warnings among its notes (model.feeds)
            warnings.extend(f"{s.label()}: {n}" for n in s.notes if note_level(n) == "warning")
        if noise.verdict:
            warnings.append(noise.verdict)
        logged = [x for w in self._pool.workers for x in w.log if "warn" in x.lower()]
        warnings.extend(x for x in [*self._said, *logged] if x not in warnings)
        warnings.extend(self.faults.said + ([self.faults.lost] if self.faults.lost else []))
        warnings.extend(x for x in self.unpaced if x not in warnings)
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
        """Closed loop, interleaved: the ceiling (runs/s) and the SLO metric of the bare service time."""
        live = [s for s in self.searches if not s.failed]
        if not live:
            return
        got = self._blocks(live, *CEILING_BLOCKS, None, "closed")
        for s in live:
            blocks = got[s.index]
            if not blocks:
                s.failed = "no closed-loop block finished"
                continue
            rates = [len(b.rows) / b.served_s for b in blocks if b.served_s > 0]
            s.ceiling_per_s = float(np.median(rates)) if rates else math.nan
            svc = np.concatenate([R.response_ms(b.rows) for b in blocks])
            s.floor_ms = self.slo.of(svc)
            s.hi = grid(s.ceiling_per_s) if math.isfinite(s.ceiling_per_s) else math.nan
            w = s.profile.workload
            s.predicted_per_s = predict_knee(svc, self.slo, servers=max(1, w.concurrency), queues=max(1, w.replicas))
            if math.isfinite(s.floor_ms) and s.floor_ms >= self.slo.ms:  # an idle server already misses it
                s.note = idle_miss(self.slo, s.floor_ms)

    def _point(self, rate: float, group: list[Search]) -> None:
        """Measure ``rate`` for the searches in ``group`` (interleaved) until each is decided or time is up."""
        block_s, settle_s = capacity_blocks(rate)
        for s in group:  # a rate its search measures again keeps the place it was first measured in
            if rate not in s.points:
                s.points[rate] = Point(rate, servers=max(1, s.profile.workload.concurrency),
                                       queues=max(1, s.profile.workload.replicas), order=len(s.points))
        points = {s.index: s.points[rate] for s in group}
        rule = PointRule(time.monotonic() + min(self.point_max_s, max(0.0, self.left())), self._budget, POOL_MIN_S)
        pending = list(group)
        rounds = 2  # the first look needs two blocks (an interval); later ones take what fits before the point's end
        while pending and not self.stop.is_set():
            got = self._blocks(pending, rounds, block_s, settle_s, rate, "poisson")
            for s in pending:
                for b in got[s.index]:
                    arrived, dropped = (b.traffic[0], b.traffic[1]) if b.traffic else (len(b.rows), 0)
                    # served over the time its requests took: a queue that drained past the window counts
                    points[s.index].add(R.response_ms(b.rows), b.served_s, arrived, dropped, self.slo,
                                        server_times(b.rows))
                    if len(b.rows):
                        self._service.append(R.service_ms(b.rows))
                        shape = b.rows[:, R.Col.SHAPE] if b.rows.shape[1] > R.Col.SHAPE else 0
                        self._shapes.append(s.index * 1_000_000 + np.zeros(len(b.rows), np.int64) + shape)
            final = rule.final()
            for s in list(pending):
                d = points[s.index].decide(self.slo, others=s.server_times(besides=rate))
                if rule.done(d, s.recorded_s(), final):
                    pending.remove(s)
            if final or not pending:
                break
            rounds = rule.rounds_next(capacity_round_s(rate, len(pending)))
            if rounds < 1:  # another round would overrun the budget: the point ends as it stands
                break
        for s in group:
            p = points[s.index]
            served = p.served_per_s()
            if p.dropped or served < KEEP_RATIO * rate:
                self.unpaced.append(f"{s.label()} at {rate:.0f}/s: offered {rate:.0f}/s, served {served:.0f}/s"
                                    + (f", {p.dropped} shed" if p.dropped else "") + ": the rate was not kept; the "
                                    "point was measured on a backlog, not a paced answer")
            # An undecided point (its time ran out) still moves the bracket by its estimate, and says so.
            meets = p.decision == "met" or (p.decision == "undecided" and p.estimate(self.slo) <= self.slo.ms)
            if meets:
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
