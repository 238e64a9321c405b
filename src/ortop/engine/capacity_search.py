"""The capacity search's driver: one worker per restart group, the profiles' sessions built once, and points
measured as alternations that offer a rate of their own (see :mod:`ortop.engine.capacity` for the method)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.capacity import (
    POOL_MIN_S,
    CapacityResult,
    Point,
    Search,
    Slo,
    grid,
    predict_knee,
    server_times,
    work_ms,
)
from ortop.errors import RuntimeFailure
from ortop.measure import rows as R

_Block = tuple[np.ndarray, float, "tuple | None", np.ndarray]  # response ms, wall s, queue counters, server_times


class _Channel:
    """One worker (one restart group) and what it said."""

    def __init__(self, model_path: str, env: dict[str, str]):
        from ortop.engine.workerproc import launch

        self.cv = threading.Condition()
        self.built: dict[int, dict] = {}
        self.failed: dict[int, str] = {}
        self.rows: dict[tuple[int, int], Any] = {}      # (config, block seq) -> rows, traffic
        self.done: list[tuple[int, int, float]] = []    # (config, seq, wall_s) of finished blocks
        self.alt_done = 0
        self.error: str | None = None
        self.log: list[str] = []
        self.said: list[str] = []   # about the worker's environment (an allocator left out)
        self.wp = launch(model_path, env, self._on_message, self._on_exit, name="ortop-capacity-worker",
                         warn=self.said.append)

    def _on_message(self, msg: Any) -> None:
        from ortop.runtime import protocol as P

        with self.cv:
            if isinstance(msg, P.Built):
                self.built[msg.config_id] = msg.info
            elif isinstance(msg, P.BuildFailed):
                self.failed[msg.config_id] = msg.message
            elif isinstance(msg, P.Samples) and msg.block >= 0:
                self.rows[(msg.config_id, msg.block)] = (msg.rows, getattr(msg, "traffic", None))
            elif isinstance(msg, P.BlockDone):
                self.done.append((msg.config_id, msg.seq, (msg.t_end_ns - msg.t_start_ns) / 1e9))
            elif isinstance(msg, P.AlternationDone):
                self.alt_done += 1
            elif isinstance(msg, P.RunError):
                self.error = f"Run() failed: {msg.message}"
            elif isinstance(msg, P.Log) and len(self.log) < 50:
                self.log.append(msg.line)
            self.cv.notify_all()

    def _on_exit(self, wp: Any) -> None:
        with self.cv:
            if self.error is None:
                self.error = f"the worker exited (code {wp.exitcode})"
            self.cv.notify_all()

    def wait(self, cond: Callable[[], bool], timeout: float, stop: threading.Event) -> bool:
        end = time.monotonic() + timeout
        with self.cv:
            while not cond():
                if self.error is not None or stop.is_set():
                    return False
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.1))
            return True

    def close(self) -> None:
        self.wp.stop()


def _settled(c: _Channel, cid: int) -> Callable[[], bool]:
    return lambda: cid in c.built or cid in c.failed


def _alternated(c: _Channel, expect: int) -> Callable[[], bool]:
    return lambda: c.alt_done >= expect


class CapacitySearch:
    """Runs the search for several profiles (see the module docstring); ``on_point(search, point)`` after each
    measured point (the TUI draws the curve from it)."""

    def __init__(self, model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
                 names: Sequence[str] | None = None, stop: threading.Event | None = None,
                 on_point: Callable[[Search, Point], None] | None = None, point_max_s: float | None = None):
        self.model_path = model_path
        self.profiles = list(profiles)
        self.slo = slo
        self.budget_s = budget_s
        self.names = list(names) if names else [f"#{i}" for i in range(len(profiles))]
        self.stop = stop or threading.Event()
        self.on_point = on_point
        # A point still undecided after this long straddles the SLO: it is at the knee, within what more time
        # would tell, and the bracket moves by its estimate (a twelfth of the budget, 4 … 20 s).
        self.point_max_s = point_max_s if point_max_s is not None else max(4.0, min(20.0, budget_s / 12))
        self.searches = [Search(i, self.names[i], p) for i, p in enumerate(self.profiles)]
        self._channels: list[_Channel] = []
        self._where: list[tuple[int, int]] = []  # per profile: (channel index, config id)
        self._t0 = time.monotonic()  # reset when run() starts; set here so a view asking early reads ~0 s
        self._round = 0

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self._t0)

    def result(self) -> CapacityResult:
        """What is known so far (a view may call it from another thread while the search runs)."""
        return CapacityResult(self.model_path, self.slo, list(self.searches), time.monotonic() - self._t0,
                              self.budget_s, self.stop.is_set())

    def run(self) -> CapacityResult:
        self._t0 = time.monotonic()
        warnings: list[str] = []
        try:
            self._build()
            self._ceilings()
            while not self.stop.is_set() and self.left() > 0:
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
                    if self.left() < 2 * _round_s(rate, len(group)):  # its first look would overrun the budget
                        continue
                    self._point(rate, group)
                    measured = True
                if not measured:
                    break
            for ch in self._channels:
                warnings.extend(x for x in [*ch.said, *ch.log] if (x in ch.said or "warn" in x.lower())
                                and x not in warnings)
        finally:
            for ch in self._channels:
                ch.close()
        return CapacityResult(self.model_path, self.slo, self.searches, time.monotonic() - self._t0,
                              self.budget_s, self.stop.is_set(), warnings[:20])

    # ---- sessions -------------------------------------------------------------------------------------------
    def _build(self) -> None:
        from ortop.engine.placement import build_message

        keys: list[tuple] = []
        for i, p in enumerate(self.profiles):
            key = p.restart_key()
            if key not in keys:
                keys.append(key)
                self._channels.append(_Channel(self.model_path, dict(p.env)))
            ch = keys.index(key)
            cid = i + 1
            self._where.append((ch, cid))
            self._channels[ch].wp.send(build_message(cid, p))
        for i, (ch, cid) in enumerate(self._where):
            c = self._channels[ch]
            c.wait(_settled(c, cid), max(1.0, self.left()), self.stop)
            if cid in c.failed:
                self.searches[i].failed = f"the session failed to build: {c.failed[cid]}"
            elif cid not in c.built:
                if self.stop.is_set():
                    self.searches[i].failed = "stopped before its session was built"
                else:
                    raise RuntimeFailure(c.error or f"{self.names[i]}: the session did not build within the budget")

    # ---- measuring --------------------------------------------------------------------------------------------
    def _blocks(self, searches: list[Search], rounds: int, block_s: float, settle_s: float,
                rate: float | None, arrival: str) -> dict[int, list[_Block]]:
        """Alternate the searches' sessions (per worker) for ``rounds`` rounds; each block's response times (ms),
        wall time, queue counters and server times (each request's service, gap before it, idle), per search."""
        from ortop.runtime import protocol as P

        out: dict[int, list[_Block]] = {s.index: [] for s in searches}
        by_channel: dict[int, list[Search]] = {}
        for s in searches:
            by_channel.setdefault(self._where[s.index][0], []).append(s)
        for chi, group in by_channel.items():
            ch = self._channels[chi]
            ids = tuple(self._where[s.index][1] for s in group)
            with ch.cv:
                ch.rows.clear()
                ch.done.clear()
                expect = ch.alt_done + 1
            ch.wp.send(P.Alternate(ids, block_s, settle_s, rounds, rate_hz=rate, arrival=arrival,
                                   first_round=self._round))
            per = (block_s + settle_s) * rounds * len(ids)
            if not ch.wait(_alternated(ch, expect), per * 3 + 30, self.stop):
                if ch.error is not None:
                    raise RuntimeFailure(f"{', '.join(s.name for s in group)}: {ch.error}")
                ch.wp.send(P.RunLive(-1))  # stopped: end the alternation (-1 is no session: the worker idles)
            with ch.cv:
                done = list(ch.done)
                rows = dict(ch.rows)
            for cid, seq, wall in done:
                s = group[ids.index(cid)]
                r, traffic = rows.get((cid, seq), (R.empty(), None))
                resp = R.response_ms(r)
                out[s.index].append((resp, wall, traffic, server_times(r)))
        self._round += rounds  # the next blocks draw fresh arrivals
        return out

    def _ceilings(self) -> None:
        """Closed loop, interleaved: the ceiling (runs/s) and the SLO metric of the bare service time."""
        live = [s for s in self.searches if not s.failed]
        if not live:
            return
        got = self._blocks(live, 2, 0.5, 0.2, None, "closed")
        for s in live:
            blocks = got[s.index]
            if not blocks:
                s.failed = "no closed-loop block finished"
                continue
            rates = [len(resp) / wall for resp, wall, *_ in blocks if wall > 0]
            s.ceiling_per_s = float(np.median(rates)) if rates else math.nan
            svc = np.concatenate([resp for resp, *_ in blocks])
            s.floor_ms = self.slo.of(svc)
            s.hi = grid(s.ceiling_per_s) if math.isfinite(s.ceiling_per_s) else math.nan
            w = s.profile.workload
            s.predicted_per_s = predict_knee(svc, self.slo, servers=max(1, w.concurrency), queues=max(1, w.replicas))
            if math.isfinite(s.floor_ms) and s.floor_ms > self.slo.ms:
                s.note = (f"its service time alone is {self.slo.metric} {s.floor_ms:.3g} ms, over the SLO of "
                          f"{self.slo.ms:g} ms: no rate meets it (capacity 0)")

    def _point(self, rate: float, group: list[Search]) -> None:
        """Measure ``rate`` for the searches in ``group`` (interleaved) until each is decided or time is up."""
        block_s, settle_s = _block_s(rate)
        for s in group:  # a rate its search measures again keeps the place it was first measured in
            if rate not in s.points:
                s.points[rate] = Point(rate, servers=max(1, s.profile.workload.concurrency),
                                       queues=max(1, s.profile.workload.replicas), order=len(s.points))
        points = {s.index: s.points[rate] for s in group}
        t_end = time.monotonic() + min(self.point_max_s, max(0.0, self.left()))
        pending = list(group)
        rounds = 2  # the first look needs two blocks (an interval); later ones take what fits before the point's end
        while pending and not self.stop.is_set():
            got = self._blocks(pending, rounds, block_s, settle_s, rate, "poisson")
            for s in pending:
                for resp, wall, traffic, busy in got[s.index]:
                    arrived, dropped = (traffic[0], traffic[1]) if traffic else (len(resp), 0)
                    points[s.index].add(resp, wall, arrived, dropped, self.slo, busy)
            final = time.monotonic() >= t_end or self.left() <= 0
            for s in list(pending):
                d = points[s.index].decide(self.slo, others=s.server_times(besides=rate))
                short = d == "met" and s.recorded_s() < POOL_MIN_S  # too little of the host seen: keep measuring
                if final or (d != "undecided" and not short):
                    pending.remove(s)
            if final or not pending:
                break
            per_round = _round_s(rate, len(pending))
            in_budget = int(self.left() / per_round)
            if in_budget < 1:  # another round would overrun the budget: the point ends as it stands
                break
            rounds = min(in_budget, max(1, min(2, int((t_end - time.monotonic()) / per_round))))
        for s in group:
            p = points[s.index]
            # An undecided point (its time ran out) still moves the bracket by its estimate, and says so.
            meets = p.decision == "met" or (p.decision == "undecided" and p.estimate(self.slo) <= self.slo.ms)
            if meets:
                s.lo = max(s.lo, rate)
            else:
                s.hi = min(s.hi, rate) if math.isfinite(s.hi) else rate
            if p.busy:  # where the next step heads: the service and gaps measured so far, queued, through this point
                times = s.server_times() or p.busy  # an overloaded point alone: its own costs, all there is
                s.predicted_per_s = predict_knee(work_ms(np.concatenate(times)), self.slo,
                                                 servers=p.servers, queues=p.queues, at=(rate, p.estimate(self.slo)))
            if self.on_point is not None:
                self.on_point(s, p)


def _block_s(rate: float) -> tuple[float, float]:
    """A point's block and the settling before it (s): ~300 requests a block, 0.5 … 1.5 s; the queue let reach
    its working level for 0.2 … 0.6 s first."""
    return max(0.5, min(1.5, 300.0 / rate)), max(0.2, min(0.6, 50.0 / rate))


def _round_s(rate: float, profiles: int) -> float:
    """One round of a point at ``rate``: a block (with its settling) per profile."""
    return sum(_block_s(rate)) * profiles


def find_capacity(model_path: str, profiles: Sequence[Profile], slo: Slo, *, budget_s: float,
             names: Sequence[str] | None = None, stop: threading.Event | None = None,
             on_point: Callable[[Search, Point], None] | None = None) -> CapacityResult:
    """Check the profiles (ProfileError / ModelError for bad input), then search (see :class:`CapacitySearch`)."""
    from ortop.engine.headless import check_profile
    from ortop.model import load_model

    info = load_model(model_path)
    for p in profiles:
        check_profile(info, p)
    return CapacitySearch(model_path, profiles, slo, budget_s=budget_s, names=names, stop=stop,
                          on_point=on_point).run()
