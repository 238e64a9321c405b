"""What the :class:`~ortop.engine.live.monitor.Monitor` shows, a part of it kept in a module of its own: each history
row's record (percentiles, throughput, CPU cost, memory and the verdict against the row before), cached while its
runs have not changed, and the frozen :class:`Snapshot` a view reads.

:class:`Readout` is a mixin: it reads the monitor's stores, state and events under the monitor's lock; they are
declared here for the type checker and set by the monitor. It writes nothing but its own record cache, and lets
a replaced configuration's ring give back the room it no longer needs (:meth:`ConfigStore.settle`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine import traffic as T
from ortop.engine.live.events import seconds_text
from ortop.engine.live.memory import MemoryInfo, host_memory
from ortop.engine.live.monitor_state import MonitorState
from ortop.engine.live.snapshot import ConfigRecord, CpuCost, RowVerdict, Snapshot, State, VerifyProgress
from ortop.engine.live.store import ConfigStore
from ortop.engine.live.verdicts import MIN_VERDICT_RUNS, sequential_verdict
from ortop.measure import stats
from ortop.measure.stats import WINDOW_MAX_S, WINDOW_MIN_RUNS
from ortop.model.inspect import ModelInfo

RECORD_REFRESH_S = 1.0       # the running configuration's record (percentiles over up to CONFIG_RING runs) is
                             # recomputed at most this often; finished configurations are computed once
STALE_SHARE = 0.05           # …and, once its ring holds many runs, only when this share of them is new (or the
STALE_MAX_S = 30.0           # figures are this old): their cost per second then follows the rate, not the ring's
                             # fill. At 20 runs a second the ring fills over 40 minutes; recomputed every second,
                             # the snapshots' own CPU grew with it (1.3 % of a core over minutes 5–15, 3.4 % with
                             # 50 000 runs kept; 0.5 and 0.4 % at a 1 % share). At 1 %, recomputing the traffic and
                             # latency figures over a ring of ~50 000 runs was still a fifth of the UI's CPU (0.4 of
                             # its 2.05 % at minute 30 of an open-arrival soak): a percentile over tens of thousands
                             # of runs does not move when one in twenty of them is new. The counters (throughput,
                             # offered, served, shed, the queue) and the recent window are read at every snapshot.


class Readout:
    """The monitor's figures (see the module docstring)."""

    # What of the monitor this part reads (``st``, made in Monitor.__init__); it writes only the record cache (and
    # settles replaced configurations' rings).
    model_path: str
    info: ModelInfo
    start_profile: Profile
    window_s: float
    st: MonitorState

    # The monitor's methods this part calls.
    now: Callable[[], float]
    worker_pid: Callable[[], int | None]
    _progress: Callable[[], VerifyProgress | None]

    def _row_verdict(self, c: ConfigStore, prev: ConfigStore | None, rows: np.ndarray) -> RowVerdict | str:
        v = self.st.verify
        if v is not None and v.config_id == c.config_id:
            il = v.interleaving
            measuring = il is not None and il.phase == "measuring"
            done = f" {il.elapsed():.0f}/{seconds_text(v.seconds)}" if il is not None and measuring else ""
            return RowVerdict("verifying", f"verifying…{done}",
                              f"interleaving #{c.config_id} with #{v.against_id}{done}", (), "", v.against_id)
        if c.verdict is not None:
            return c.verdict
        if prev is None:
            return ""
        verdict = sequential_verdict(prev.config_id, prev.profile, prev.ring.kept()[:, T.RESPONSE], c.profile,
                                     rows[:, T.RESPONSE])
        if verdict.kind == "measuring" and c is not self.st.current:
            # it will get no more runs: the row settles, saying why there is no verdict
            few = c if len(rows) < MIN_VERDICT_RUNS else prev
            whose = "this configuration" if few is c else f"#{prev.config_id}"
            return RowVerdict("undecided", "too few runs",
                              f"{whose} ran {few.runs} runs before it was replaced: a verdict needs "
                              f"{MIN_VERDICT_RUNS}", (), verdict.metric, prev.config_id)
        return verdict

    def _record(self, c: ConfigStore, prev: ConfigStore | None, earlier: ConfigRecord | None = None) -> ConfigRecord:
        """A configuration's record; with ``earlier`` (its record computed before) the figures over its kept runs
        (percentiles, verdict, CPU between runs) are taken from it and only the counters are read again."""
        if earlier is None:
            rows = c.ring.kept()  # percentiles and medians: the buffer's order will do, and no copy of the ring
            lat, verdict, between = stats.latency_stats(rows[:, T.RESPONSE]), self._row_verdict(c, prev, rows), None
        else:
            lat, verdict, between = earlier.latency, earlier.verdict, earlier.cpu.cpu_ms_between_runs_per_s
        delta = None
        if prev is not None and c.rss_peak is not None and prev.rss_peak is not None:
            delta = c.rss_peak - prev.rss_peak
        return ConfigRecord(c.config_id, c.label, c.profile, c.started, c.info.get("create_ms", math.nan),
                            c.info.get("first_run_ms", math.nan), tuple(c.info.get("providers_active", ())), lat,
                            c.throughput(), c.cost(between), verdict, False, c.changes, c.rss_peak, delta)

    def _record_cached(self, c: ConfigStore, prev: ConfigStore | None, now: float) -> ConfigRecord:
        """A configuration's record, recomputed only when its runs (or its predecessor's) changed, and for the
        running configuration at most every RECORD_REFRESH_S once it has most of its runs, and once its ring holds
        many only when a share of them is new (see STALE_SHARE): percentiles and the verdict over CONFIG_RING runs
        cost milliseconds each, and the UI asks for a snapshot several times a second. In between, the counters
        (throughput, CPU per run) are read again into the record kept."""
        v = self.st.verify
        il = v.interleaving if v is not None and v.config_id == c.config_id else None
        key = (c.runs, c.wall_ns, prev.config_id if prev else None, prev.runs if prev else None, c.verdict_gen,
               int(il.elapsed()) if il is not None else None, c is self.st.current)
        hit = self.st.record_cache.get(c.config_id)
        if hit is not None and hit[0] == key:
            return hit[2]
        if hit is not None and c is self.st.current and hit[0][4:] == key[4:] and (
                (now - hit[1] < RECORD_REFRESH_S and hit[2].latency.runs >= 0.9 * len(c.ring))  # < 1 s, < 10 %
                or (hit[0][2:4] == key[2:4] and fresh_enough(c.runs - hit[0][0], len(c.ring), now - hit[1]))):
            rec = self._record(c, prev, earlier=hit[2])  # the counters read again, the figures over the runs kept
            self.st.record_cache[c.config_id] = (hit[0], hit[1], rec)
            return rec
        if c.row and self.st.current is not None and c is not self.st.current:
            c.settle()  # replaced: it gets no more runs
        rec = self._record(c, prev)
        self.st.record_cache[c.config_id] = (key, now, rec)
        return rec

    def _memory(self, cur: ConfigStore | None, host: tuple[int | None, int | None]) -> MemoryInfo:
        if cur is None:
            return MemoryInfo(host_total=host[0], host_available=host[1])
        built = cur.info.get("rss_after", -1)
        wm = self.st.worker_mem
        return MemoryInfo(rss=cur.rss_last, rss_peak=cur.rss_peak, rss_built=built if built >= 0 else None,
                          host_total=host[0], host_available=host[1], series=tuple(cur.rss[-120:]), leak=cur.leak,
                          rss_start=wm.start, rss_low=wm.low, rebuild=wm.growth)

    def snapshot(self) -> Snapshot:
        host = host_memory()  # /proc/meminfo: read outside the lock
        with self.st.lock:
            now = self.now()
            history = []
            prev = None
            for c in self.st.stores.values():
                if not c.row:
                    continue
                history.append(self._record_cached(c, prev, now))
                prev = c
            # ★ needs rows whose figures all read: a row shows its p99 beside its p50, and a p99 of fewer runs than
            # it needs is the row's slowest run (a 5 Hz row of 24 runs was starred above rows of thousands)
            measured = [h for h in history if h.latency.runs >= max(MIN_VERDICT_RUNS, stats.runs_needed("p99"))]
            if measured:
                best = min(measured, key=lambda h: h.latency.p50)
                history = [replace(h, best=h is best) for h in history]
            cur = self.st.current
            rec = next((h for h in history if cur is not None and h.config_id == cur.config_id), None)
            window, span, rate = stats.LatencyStats(), float(self.window_s), math.nan
            if cur is not None:
                # the rate is over the time the loop has run since it last started (a build, a pause, a verification)
                since = max(cur.started, self.st.state_since if self.st.state == State.MEASURING else cur.started)
                window, span, rate = recent_window(recent_rows(cur.ring, now), now, self.window_s, now - since)
            info = cur.info if cur is not None else {}
            requested = tuple(info.get("providers_requested", (self.st.good or self.start_profile).providers()))
            active = tuple(info.get("providers_active", ()))
            return Snapshot(
                t=now, state=self.st.state, state_elapsed=now - self.st.state_since, model_path=self.model_path,
                model=self.info, profile=self.st.good or self.start_profile,
                pending=self.st.pending.profile if self.st.pending else None,
                config_id=cur.config_id if cur else -1, runs=cur.runs if cur else 0, feeds=tuple(info.get("feeds", ())),
                notes=tuple(info.get("notes", ())), providers_requested=requested, providers_active=active,
                fallback=bool(active) and any(p not in active for p in requested),
                create_ms=info.get("create_ms", math.nan), first_run_ms=info.get("first_run_ms", math.nan),
                latency=rec.latency if rec else stats.LatencyStats(), window=window,
                throughput_per_s=rec.throughput_per_s if rec else math.nan, cpu=rec.cpu if rec else CpuCost(),
                series=self.st.series.buckets(now), events=self.st.events.items(), history=tuple(history),
                worker_pid=self.worker_pid(), restarts=self.st.restarts, verifying=self._progress(),
                memory=self._memory(cur, host),
                replicas=(self._live_cached("replicas", cur, now, cur.replicas, cur.replicas_now)
                          if cur is not None else ()),
                traffic=(self._live_cached("traffic", cur, now, cur.traffic, cur.traffic_now)
                         if cur is not None else None),
                window_span_s=span, window_rate_per_s=rate,
            )

    def _live_cached(self, what: str, c: ConfigStore, now: float, compute: Callable[[], Any],
                     refresh: Callable[[Any], Any]) -> Any:
        """The running configuration's ``what`` (its traffic figures, its replicas' figures: percentiles over every
        kept run), recomputed when its runs changed, at most every RECORD_REFRESH_S, and once the ring holds many
        runs only when a share of them is new (see STALE_SHARE): in between, ``refresh`` reads the counters into
        the figures kept. Computed on every snapshot, their cost grew with the ring (7 ms a snapshot at 50 000 runs
        with open arrivals, several a second): the UI's CPU rose from 3.8 % to 7 % of a core as the ring filled."""
        cache = self.st.live_cache
        hit = cache.get((what, c.config_id))
        if hit is not None and (hit[0] == c.runs or now - hit[1] < RECORD_REFRESH_S
                                or fresh_enough(c.runs - hit[0], len(c.ring), now - hit[1])):
            value = refresh(hit[2])
            cache[(what, c.config_id)] = (hit[0], hit[1], value)
            return value
        value = compute()
        cache[(what, c.config_id)] = (c.runs, now, value)
        if len(cache) > 8:  # configurations no longer running
            for key in [k for k in cache if k[1] != c.config_id]:
                del cache[key]
        return value


def fresh_enough(new_runs: int, kept: int, age_s: float) -> bool:
    """Whether figures over a ring of ``kept`` runs, computed ``age_s`` ago with ``new_runs`` fewer runs, still
    stand: fewer than STALE_SHARE of the ring is new and they are younger than STALE_MAX_S (a reset, which takes
    the runs back, never)."""
    return 0 <= new_runs < STALE_SHARE * kept and age_s < STALE_MAX_S


def recent_rows(ring: stats.Ring, now: float, margin: int = 1000) -> np.ndarray:
    """The ring's rows that :func:`recent_window` reads: those of the last WINDOW_MAX_S seconds and ``margin`` rows
    before them (batches of concurrent callers interleave), taken from the newest back, never a copy of the whole
    ring: the live view asks for it on every refresh, and a full ring is 50 000 rows."""
    n = len(ring)
    k = min(n, 2 * margin)
    while True:
        rows = ring.tail(k)
        start = int(np.searchsorted(rows[:, T.T_S], now - WINDOW_MAX_S, side="left"))
        if start >= margin or k >= n:
            return rows[max(0, start - margin):]
        k = min(n, 2 * k)


def recent_window(rows: np.ndarray, now: float, window_s: float,
                  age_s: float = math.inf) -> tuple[stats.LatencyStats, float, float]:
    """(latency, span s, runs per second) over the runs that started in the last ``window_s`` seconds; widened in
    whole seconds, up to WINDOW_MAX_S, until it holds WINDOW_MIN_RUNS runs (at a few runs a second, five seconds
    is a handful of runs and their p99 is the slowest one). ``age_s``: how long the loop has run since it
    last started (a build, a pause, a verification): the rate counts the runs of no more than that span."""
    span = float(window_s)
    if not len(rows):
        return stats.LatencyStats(), span, 0.0 if age_s > 0 else math.nan
    # the runs come in time order (by batch): search the tail instead of testing every kept run, with a margin
    # for batches of concurrent callers that interleave
    start = max(0, int(np.searchsorted(rows[:, T.T_S], now - WINDOW_MAX_S, side="left")) - 1000)
    rows = rows[start:]
    t = rows[:, T.T_S]
    recent = t >= now - span
    if int(recent.sum()) < WINDOW_MIN_RUNS and span < WINDOW_MAX_S:
        oldest = float(t[-min(len(t), WINDOW_MIN_RUNS)])
        span = min(WINDOW_MAX_S, max(span, float(math.ceil(now - oldest))))
        recent = t >= now - span
    over = min(span, age_s) if age_s > 0 else span
    n = int((t >= now - over).sum())
    return stats.latency_stats(rows[recent, T.RESPONSE]), span, n / over if over > 0 else math.nan
