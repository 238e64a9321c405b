"""``ortop capacity``: the most traffic a profile serves within a latency SLO, found fast, with its curve.

The search per profile:

1. What is cheap to know first: a closed loop gives the ceiling (no offered rate above what back-to-back runs
   serve can be kept) and the service time at no load (the floor: when the SLO metric of the bare service time is
   already over the SLO, the capacity is 0, said plainly).
2. Then bisection between a rate known to meet the SLO (0) and one known not to (the ceiling): Poisson arrivals at
   the middle rate, each point measured in blocks until it is decided or its time is up.
3. A point is decided by *batch means* over its blocks. Each block is an independent replication: the worker
   starts the arrival sequence afresh (from the same seed for every profile: common random numbers), lets the
   queue settle, then records. For a percentile SLO (p99 ≤ 50 ms) the block statistic is the share of requests
   over the SLO (shed requests count as over); the point meets the SLO when the upper end of the 95 % t-interval
   of that share is below 1 − q (1 % for p99), fails it when the lower end is above, and is undecided otherwise.
   A mean SLO uses the blocks' mean response times against the SLO. Requests within one block are correlated
   (they share a queue), so an interval over requests would be far too narrow; blocks are not.
4. Points of profiles whose brackets share a rate (rates are rounded to a 2 % grid) are measured together,
   interleaved block by block on the same arrival sequence, so drift cannot pick the winner.

The budget is wall time, builds included; a stop (ctrl-C) returns what is known.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.errors import RuntimeFailure, UsageError

SLO_METRICS = ("p50", "p90", "p95", "p99", "p999", "mean")
QUANTILE = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}
GRID = 1.02             # rates are rounded to this geometric grid, so profiles can share a point
NARROW = 0.03           # stop narrowing a bracket when hi − lo ≤ 3 % of hi
MIN_BLOCKS = 4          # blocks before a point may be decided (t-interval on 3 degrees of freedom at least)
T95 = {3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131,
       20: 2.086, 30: 2.042}


@dataclass(frozen=True)
class Slo:
    """A latency objective: ``metric`` (p50 … p999, or mean) of response time at most ``ms``."""

    metric: str
    ms: float

    @property
    def quantile(self) -> float | None:
        return QUANTILE.get(self.metric)

    def text(self) -> str:
        return f"{self.metric} ≤ {self.ms:g} ms"

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "ms": self.ms}


def parse_slo(text: str) -> Slo:
    """``p99=50ms``, ``p95=20``, ``mean=10ms``, ``p99=0.05s`` → Slo; UsageError (exit 2) naming what is wrong."""
    m = re.fullmatch(r"\s*([a-z0-9.]+)\s*=\s*([0-9.]+(?:e-?\d+)?)\s*(ms|s|us|µs)?\s*", text.lower())
    if not m:
        raise UsageError(f"--slo {text!r}: expected METRIC=VALUE, e.g. p99=50ms, p95=20ms or mean=10ms")
    metric = m.group(1).replace("p99.9", "p999")
    if metric not in SLO_METRICS:
        raise UsageError(f"--slo {text!r}: the metric is one of {', '.join(SLO_METRICS)}")
    try:
        value = float(m.group(2))
    except ValueError:
        raise UsageError(f"--slo {text!r}: {m.group(2)!r} is not a number") from None
    scale = {"ms": 1.0, None: 1.0, "s": 1e3, "us": 1e-3, "µs": 1e-3}[m.group(3)]
    ms = value * scale
    if not ms > 0 or not math.isfinite(ms):
        raise UsageError(f"--slo {text!r}: the limit must be a positive time")
    return Slo(metric, ms)


def t95(df: int) -> float:
    """Student's t for a two-sided 95 % interval (df ≥ 1); 1.96 beyond the table."""
    if df <= 2:
        return {1: 12.706, 2: 4.303}.get(df, 12.706)
    keys = [k for k in sorted(T95) if k <= df]
    return T95[keys[-1]] if df <= 30 else 1.96


def grid(rate: float) -> float:
    """The rate on the 2 % geometric grid (points of different profiles meet there)."""
    if rate <= 0:
        return 0.0
    return float(GRID ** round(math.log(rate) / math.log(GRID)))


@dataclass
class Point:
    """One offered rate, measured for one profile over its blocks."""

    rate_per_s: float
    blocks: list[dict[str, Any]] = field(default_factory=list)  # per block: runs, over, arrived, dropped, wall, …
    response: list[np.ndarray] = field(default_factory=list)
    decision: str = "undecided"
    interval: tuple[float, float] = (math.nan, math.nan)      # of the decision statistic

    def add(self, response_ms: np.ndarray, wall_s: float, arrived: int, dropped: int, slo: Slo) -> None:
        self.response.append(response_ms)
        over = int(np.count_nonzero(response_ms > slo.ms))
        self.blocks.append({"runs": int(response_ms.size), "over": over, "wall_s": wall_s, "arrived": arrived,
                            "dropped": dropped, "mean": float(response_ms.mean()) if response_ms.size else math.nan})

    def all(self) -> np.ndarray:
        return np.concatenate(self.response) if self.response else np.zeros(0)

    @property
    def runs(self) -> int:
        return sum(b["runs"] for b in self.blocks)

    @property
    def dropped(self) -> int:
        return sum(b["dropped"] for b in self.blocks)

    def served_per_s(self) -> float:
        wall = sum(b["wall_s"] for b in self.blocks)
        return self.runs / wall if wall > 0 else math.nan

    def value(self, slo: Slo) -> float:
        """The SLO metric over every recorded request of the point (ms)."""
        a = self.all()
        if not a.size:
            return math.nan
        return float(a.mean()) if slo.quantile is None else float(np.percentile(a, 100 * slo.quantile))

    def decide(self, slo: Slo, final: bool = False) -> str:
        """met / not met / undecided from the blocks so far (see the module docstring)."""
        n = len(self.blocks)
        if self.dropped > 0:
            self.decision = "not met"  # shed requests: the queue overflowed, whatever the percentile says
            return self.decision
        if n < 2:
            return self.decision
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
        if n >= MIN_BLOCKS and mean + half < limit:
            self.decision = "met"
        elif n >= MIN_BLOCKS and mean - half > limit:
            self.decision = "not met"
        elif final:
            self.decision = "undecided"
        return self.decision

    def as_dict(self, slo: Slo) -> dict[str, Any]:
        a = self.all()
        p50, p99 = (float(x) for x in np.percentile(a, (50, 99))) if a.size else (math.nan, math.nan)
        return {"rate_per_s": _num(self.rate_per_s), "served_per_s": _num(self.served_per_s()),
                "dropped": self.dropped, "runs": self.runs, "blocks": len(self.blocks), "p50_ms": _num(p50),
                "p99_ms": _num(p99), "slo_ms": _num(self.value(slo)), "decision": self.decision}


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 4)


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
    points: dict[float, Point] = field(default_factory=dict)
    note: str = ""
    failed: str = ""

    def done(self) -> bool:
        return bool(self.failed or self.note) or (math.isfinite(self.hi) and self.hi - self.lo <= NARROW * self.hi)

    def next_rate(self) -> float:
        return grid((self.lo + self.hi) / 2)

    @property
    def met(self) -> bool:
        return self.lo > 0

    def as_dict(self, slo: Slo) -> dict[str, Any]:
        return {"profile": self.name, "capacity_per_s": _num(self.lo), "bracket": [_num(self.lo), _num(self.hi)],
                "met": self.met, "ceiling_per_s": _num(self.ceiling_per_s), "floor_ms": _num(self.floor_ms),
                "note": self.note or self.failed or None,
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

    def best(self) -> int | None:
        ok = [s for s in self.searches if not s.failed and s.lo > 0]
        return max(ok, key=lambda s: s.lo).index if ok else None

    def ratio(self, i: int, base: int = 0) -> tuple[float, float, float]:
        """Capacity of profile ``i`` over ``base``: the estimate and the interval its brackets allow."""
        a, b = self.searches[i], self.searches[base]
        if not (a.lo > 0 and b.lo > 0):
            return (math.nan, math.nan, math.nan)
        hi_a = a.hi if math.isfinite(a.hi) else a.lo
        hi_b = b.hi if math.isfinite(b.hi) else b.lo
        return (a.lo / b.lo, a.lo / hi_b, hi_a / b.lo)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "slo": self.slo.as_dict(), "arrival": "poisson",
                "profiles": [s.as_dict(self.slo) for s in self.searches], "best": self.best(),
                "elapsed_s": round(self.elapsed_s, 2), "budget_s": self.budget_s, "stopped": self.stopped,
                "warnings": list(self.warnings)}


class _Channel:
    """One worker (one restart group) and what it said."""

    def __init__(self, model_path: str, env: dict[str, str]):
        from ortop.engine.workerproc import WorkerProc

        self.cv = threading.Condition()
        self.built: dict[int, dict] = {}
        self.failed: dict[int, str] = {}
        self.rows: dict[tuple[int, int], Any] = {}      # (config, block seq) -> rows, traffic
        self.done: list[tuple[int, int, float]] = []    # (config, seq, wall_s) of finished blocks
        self.alt_done = 0
        self.error: str | None = None
        self.log: list[str] = []
        self.wp = WorkerProc(model_path, env, self._on_message, self._on_exit, name="ortop-capacity-worker")
        self.wp.start()

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
                 on_point: Callable[[Search, Point], None] | None = None, point_max_s: float = 20.0):
        self.model_path = model_path
        self.profiles = list(profiles)
        self.slo = slo
        self.budget_s = budget_s
        self.names = list(names) if names else [f"#{i}" for i in range(len(profiles))]
        self.stop = stop or threading.Event()
        self.on_point = on_point
        self.point_max_s = point_max_s
        self.searches = [Search(i, self.names[i], p) for i, p in enumerate(self.profiles)]
        self._channels: list[_Channel] = []
        self._where: list[tuple[int, int]] = []  # per profile: (channel index, config id)
        self._t0 = 0.0
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
                for rate, group in sorted(by_rate.items()):
                    if self.stop.is_set() or self.left() <= 0:
                        break
                    self._point(rate, group)
            for ch in self._channels:
                warnings.extend(x for x in ch.log if "warn" in x.lower() and x not in warnings)
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
                rate: float | None, arrival: str) -> dict[int, list[tuple[np.ndarray, float, tuple | None]]]:
        """Alternate the searches' sessions (per worker) for ``rounds`` rounds; each block's response times (ms),
        wall time and queue counters, per search index."""
        from ortop.runtime import protocol as P

        out: dict[int, list[tuple[np.ndarray, float, tuple | None]]] = {s.index: [] for s in searches}
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
                r, traffic = rows.get((cid, seq), (np.zeros((0, 8), dtype=np.int64), None))
                resp = (r[:, 1] + (r[:, 5] if r.shape[1] > 5 else 0)) / 1e6
                out[s.index].append((resp, wall, traffic))
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
            rates = [len(resp) / wall for resp, wall, _ in blocks if wall > 0]
            s.ceiling_per_s = float(np.median(rates)) if rates else math.nan
            svc = np.concatenate([resp for resp, _, _ in blocks])
            q = self.slo.quantile
            s.floor_ms = float(svc.mean()) if q is None else float(np.percentile(svc, 100 * q)) if svc.size else \
                math.nan
            s.hi = grid(s.ceiling_per_s) if math.isfinite(s.ceiling_per_s) else math.nan
            if math.isfinite(s.floor_ms) and s.floor_ms > self.slo.ms:
                s.note = (f"its service time alone is {self.slo.metric} {s.floor_ms:.3g} ms, over the SLO of "
                          f"{self.slo.ms:g} ms: no rate meets it (capacity 0)")

    def _point(self, rate: float, group: list[Search]) -> None:
        """Measure ``rate`` for the searches in ``group`` (interleaved) until each is decided or time is up."""
        block_s = max(0.4, min(2.0, 200.0 / rate))       # ~200 requests a block
        settle_s = max(0.2, min(1.0, 50.0 / rate))       # let the queue reach its working level first
        points = {s.index: s.points.setdefault(rate, Point(rate)) for s in group}
        t_end = time.monotonic() + min(self.point_max_s, max(0.0, self.left()))
        pending = list(group)
        while pending and not self.stop.is_set():
            got = self._blocks(pending, 2, block_s, settle_s, rate, "poisson")
            for s in pending:
                for resp, wall, traffic in got[s.index]:
                    arrived, dropped = (traffic[0], traffic[1]) if traffic else (len(resp), 0)
                    points[s.index].add(resp, wall, arrived, dropped, self.slo)
            final = time.monotonic() >= t_end or self.left() <= 0
            for s in list(pending):
                d = points[s.index].decide(self.slo, final=final)
                if d != "undecided" or final:
                    pending.remove(s)
            if final:
                break
        for s in group:
            p = points[s.index]
            if p.decision == "undecided":
                p.decide(self.slo, final=True)
            # An undecided point (its time ran out) still moves the bracket by its estimate, and says so.
            meets = p.decision == "met" or (p.decision == "undecided" and p.value(self.slo) <= self.slo.ms)
            if meets:
                s.lo = max(s.lo, rate)
            else:
                s.hi = min(s.hi, rate) if math.isfinite(s.hi) else rate
            if self.on_point is not None:
                self.on_point(s, p)


MARKS = "●▲■◆"  # one per profile (a met point); an unmet point is drawn hollow: ○△□◇
HOLLOW = "○△□◇"


def text_curve(result: Any, width: int = 72, height: int = 16) -> str:
    """The SLO metric against offered rate as text: one mark per measured point (filled: met), the SLO as a line.

    Drawn with the project's own characters: a scatter of a few points needs no plotting library, and reads in
    any terminal and in a pasted log."""
    pts = [(s.index, r, p.value(result.slo), p.decision == "met") for s in result.searches
           for r, p in s.points.items() if math.isfinite(p.value(result.slo))]
    if not pts:
        return ""
    x_hi = max(r for _, r, _, _ in pts) * 1.05
    y_hi = max(max(v for _, _, v, _ in pts), result.slo.ms) * 1.1
    grid = [[" "] * width for _ in range(height)]

    def row(v: float) -> int:
        return min(height - 1, max(0, height - 1 - int(round(v / y_hi * (height - 1)))))

    slo_row = row(result.slo.ms)
    grid[slo_row] = ["┄"] * width
    for i, r, v, met in pts:
        col = min(width - 1, int(round(r / x_hi * (width - 1))))
        grid[row(v)][col] = (MARKS if met else HOLLOW)[i % len(MARKS)]
    label = f"{result.slo.metric} ms"
    out = []
    for k, cells in enumerate(grid):
        y = y_hi * (height - 1 - k) / (height - 1)
        tick = f"{y:>7.3g} ┤" if k % 4 == 0 or k == slo_row else "        │"
        out.append(tick + "".join(cells) + (f" SLO {result.slo.ms:g}" if k == slo_row else ""))
    out.append("        └" + "─" * width)
    out.append(f"         0{'offered requests/s':^{width - 12}}{x_hi:>8.0f}")
    legend = "  ".join(f"{MARKS[s.index % len(MARKS)]} {s.name}" for s in result.searches)
    return "\n".join([f"{label} against offered rate (filled: meets the SLO)  {legend}", *out])


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
