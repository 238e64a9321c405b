"""Per-configuration stores, keyed by configuration id: every run the worker sends lands in its own store.

A store keeps a ring of recent runs (latency, CPU in and between runs, start time), the wall/CPU/busy totals the
throughput and CPU figures come from, and the blocks of alternations. Nothing filters by "the current one": a
worker that alternates two sessions fills both stores.

Not thread-safe by itself: the monitor calls it under its lock.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine import traffic as T
from ortop.engine.live.snapshot import Change, CpuCost, ReplicaFigures, RowVerdict
from ortop.measure import rows as R
from ortop.measure import stats
from ortop.measure.compare import Block, block_from_runs

CONFIG_RING = 50_000  # runs kept per configuration for its percentiles and verdicts
RSS_KEEP = 900        # RSS values kept per configuration (one a second at most: 15 minutes)
RSS_EVERY_S = 1.0
SETTLE_SPARE = 1024   # rows of room a replaced configuration's ring keeps, for a batch sent before the switch


class ConfigStore:
    """One configuration's runs and totals (columns of the ring: :mod:`ortop.engine.traffic`'s — response ms,
    cpu in and between ms, t_s, replica, service ms, queue ms, shape, idle gap ms)."""

    def __init__(self, config_id: int, profile: Profile, *, label: str = "start", changes: tuple[Change, ...] = (),
                 started: float = 0.0, row: bool = True, capacity: int = CONFIG_RING):
        self.config_id = config_id
        self.profile = profile
        self.label = label
        self.changes = changes
        self.started = started
        self.row = row                      # a history row (False: a session built for a comparison only)
        self.ring = stats.Ring(capacity, T.WIDTH)
        self.counters = T.Counters()        # the open loop's queue: arrived, shed, its length
        self.runs = 0
        self.replica_runs: dict[int, int] = {}  # runs per replica (workload.replicas), over the same wall time
        self.wall_ns = 0
        self.cpu_ns = 0
        self.busy_ns = 0
        self.info: dict[str, Any] = {}
        self.blocks: list[Block] = []       # blocks of alternations, config = this id, seq per alternation
        self._block_rows: dict[int, np.ndarray] = {}  # latency ms of a block whose BlockDone has not come yet
        self.verdict: RowVerdict | None = None        # set by a verification; else the row's verdict is computed
        self.verdict_gen = 0                          # moves with every change of the verification state
        self.rss_last: int | None = None              # the worker's RSS at its latest flush of this configuration
        self.rss_peak: int | None = None              # its highest, after the build and warm-up
        self.rss_t: list[float] = []                  # the RSS series, about one value a second (monitor clock)
        self.rss: list[float] = []
        self.leak: Any = None                         # an engine.memory.Leak, once logged for this configuration
        self.leak_checked = 0.0                       # when the leak check last ran (monitor clock)

    def add_rss(self, t_s: float, rss: int) -> None:
        """The worker's RSS (bytes) at a flush of this configuration's runs: the peak, and the series (thinned to
        one value per RSS_EVERY_S, the highest of them, so the series keeps the peaks)."""
        if rss < 0:
            return
        self.rss_last = rss
        self.rss_peak = rss if self.rss_peak is None else max(self.rss_peak, rss)
        if self.rss_t and t_s - self.rss_t[-1] < RSS_EVERY_S:
            self.rss[-1] = max(self.rss[-1], float(rss))
            return
        self.rss_t.append(t_s)
        self.rss.append(float(rss))
        if len(self.rss_t) > RSS_KEEP:
            del self.rss_t[: len(self.rss_t) - RSS_KEEP]
            del self.rss[: len(self.rss) - RSS_KEEP]

    def settle(self) -> None:
        """This configuration was replaced: its ring keeps its runs and gives back the room for more but a few
        (a batch sent before the switch may still come), so a session of many rebuilds does not hold a full ring's
        memory for each."""
        self.ring.shrink(spare=SETTLE_SPARE)

    def clear(self) -> None:
        self.ring.clear()
        self.runs = self.wall_ns = self.cpu_ns = self.busy_ns = 0
        self.replica_runs.clear()
        self.counters = T.Counters()

    def add(self, rows: np.ndarray, wall_ns: int, cpu_ns: int, t_s: np.ndarray, block: int = -1,
            traffic: tuple[int, int, int, int] | None = None) -> None:
        """A batch of runs (the protocol's int64 rows) started at ``t_s`` (seconds, the monitor's clock), with the
        open loop's queue counters over the batch."""
        self.wall_ns += int(wall_ns)
        self.cpu_ns += int(cpu_ns)
        self.counters.add(traffic)
        if len(rows) == 0:
            if block >= 0:
                self._block_rows[block] = np.zeros(0)
            return
        self.busy_ns += int(rows[:, R.Col.SERVICE].sum())  # inside Run(): the duty cycle
        replica = R.replica(rows)
        ring = T.ring_rows(rows, t_s)
        lat_ms = ring[:, T.RESPONSE]
        self.ring.extend(ring)
        self.runs += len(rows)
        for r, n in zip(*np.unique(replica, return_counts=True)):
            self.replica_runs[int(r)] = self.replica_runs.get(int(r), 0) + int(n)
        if block >= 0:
            self._block_rows[block] = lat_ms

    def block_done(self, seq: int, t_start_ns: int, t_end_ns: int, cpu_ns: int, cpu_between_ns: int) -> Block:
        """Close block ``seq`` (its runs came just before): its figures, kept in ``blocks`` and returned."""
        lat = self._block_rows.pop(seq, np.zeros(0))
        between = cpu_between_ns / 1e6 if cpu_between_ns >= 0 else math.nan
        b = block_from_runs(self.config_id, seq, lat, t_start=t_start_ns / 1e9, t_end=t_end_ns / 1e9,
                            cpu_ms=cpu_ns / 1e6, cpu_between_ms=between)
        self.blocks.append(b)
        return b

    def latency_ms(self) -> np.ndarray:
        """The kept runs' response times (ms) in arrival order."""
        return self.ring.column(T.RESPONSE)

    def replicas(self) -> tuple[ReplicaFigures, ...]:
        """Each replica's throughput and latency (the ring's runs of it), when the configuration serves several."""
        shares = self.info.get("shares") or []
        if len(shares) < 2 and self.profile.workload.replicas < 2:
            return ()
        rows = self.ring.kept()  # masks and percentiles: the buffer's order will do, and no copy of the ring
        wall_s = self.wall_ns / 1e9
        out = []
        for r in range(max(len(shares), self.profile.workload.replicas)):
            lat = rows[rows[:, T.REPLICA] == r, T.RESPONSE] if len(rows) else rows[:, T.RESPONSE]
            n = self.replica_runs.get(r, 0)
            share = shares[r] if r < len(shares) else None
            out.append(ReplicaFigures(r, tuple(share) if share else None, n, n / wall_s if wall_s else math.nan,
                                      stats.latency_stats(lat)))
        return tuple(out)

    def traffic(self) -> T.Traffic:
        """The workload's figures: offered against served, the queue, service and queue times, gaps, shapes."""
        from ortop.measure.arrivals import mode_of
        from ortop.measure.pace import servers_of

        w = self.profile.workload
        return T.figures(mode_of(w), float(w.rate_hz), self.ring.kept(), self.counters, self.wall_ns / 1e9,
                         self.runs, self.info.get("shapes"), self.info.get("shape_labels"), servers=servers_of(w))

    def traffic_now(self, t: T.Traffic) -> T.Traffic:
        """``t``, figures over the kept runs computed a little earlier, with what the counters say now: offered,
        served, shed and the queue (cheap, and the first to move when the host falls behind)."""
        offered, served = T.rates(t.mode, self.counters, self.wall_ns / 1e9, self.runs)
        c = self.counters
        return replace(t, offered_per_s=offered, served_per_s=served, dropped=c.dropped, queue_max=c.queue_max,
                       queue_len=c.queue_len, window_s=self.wall_ns / 1e9)

    def replicas_now(self, figures: tuple[ReplicaFigures, ...]) -> tuple[ReplicaFigures, ...]:
        """``figures`` (each replica's latency over the kept runs, computed a little earlier) with their runs and
        throughput as they are now."""
        wall_s = self.wall_ns / 1e9
        return tuple(replace(f, runs=self.replica_runs.get(f.index, 0),
                             throughput_per_s=self.replica_runs.get(f.index, 0) / wall_s if wall_s else math.nan)
                     for f in figures)

    def throughput(self) -> float:
        return self.runs / (self.wall_ns / 1e9) if self.wall_ns else math.nan

    def cost(self, between: float | None = None) -> CpuCost:
        """CPU per run, between runs (see :meth:`spin`; ``between`` given: that figure, computed earlier) and as a
        share of a core."""
        if self.runs == 0 or self.wall_ns == 0:
            return CpuCost()
        per_run = self.cpu_ns / 1e6 / self.runs
        between = self.spin() if between is None else between
        return CpuCost(per_run, between, self.cpu_ns / self.wall_ns * 100, self.busy_ns / self.wall_ns * 100)

    def spin(self) -> float:
        """CPU the process burned while no Run() was in flight, ms per second of wall time, over the kept runs (nan
        with concurrent callers). The first kept run's share is the gap before it (after the build, the warm-up, a
        pause): not in the span."""
        rows = self.ring.kept()
        if self.profile.workload.concurrency != 1 or not len(rows) or not self.wall_ns:
            return math.nan
        between = rows[:, T.CPU_BETWEEN]
        if not bool((between >= 0).all()):
            return math.nan
        first, last = self.ring.at(0), self.ring.at(-1)
        span = float(last[T.T_S] - first[T.T_S])
        total = float(between.sum())
        return (total - float(first[T.CPU_BETWEEN])) / span if span > 0 else total / (self.wall_ns / 1e9)

    def session_bytes(self) -> int | None:
        """What building this configuration's session added to the worker's resident memory, if measured."""
        before, after = self.info.get("rss_before", -1), self.info.get("rss_after", -1)
        return after - before if before >= 0 and after >= 0 else None
