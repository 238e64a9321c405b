"""A stand-in for engine.Monitor with seeded, fixed-clock Snapshots, for the UI's snapshot tests.

It fits :class:`ortop.engine.MonitorView`, what the app may use of a monitor (snapshot, apply, pause, resume,
reset_stats, add_event, verify, fatal, generation, model_path, bucket_s, window_s), plus stop, worker_pid and
start_profile, and nothing else, so the app cannot lean on internals. It keeps no generation (None): the app reads
a snapshot on every tick, which the snapshot tests' manual ticks rely on.
Everything behind the UI that matters (rebuilds, validation, files) is tested with the real Monitor elsewhere.
"""

from __future__ import annotations

import math
import random
from concurrent.futures import Future
from dataclasses import replace

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.config.replicas import split_cores
from ortop.engine.live.memory import MemoryInfo
from ortop.engine.live.monitor import ConfigRecord, CpuCost, Event, Snapshot
from ortop.engine.live.snapshot import ReplicaFigures, RowVerdict, VerifyProgress
from ortop.engine.traffic import Traffic
from ortop.measure.arrivals import CLOSED, mode_of
from ortop.measure.stats import Bucket, LatencyStats
from tests.fakes.model import fake_model_info

T_NOW = 95.0  # the fake clock: seconds since the monitor started


def _latency(rng: random.Random, p50: float, runs: int) -> LatencyStats:
    return LatencyStats(runs=runs, mean=p50 * 1.04, p50=p50, p90=p50 * 1.12, p95=p50 * 1.2,
                        p99=p50 * (1.5 + rng.random() * 0.3), p999=p50 * 2.4, min=p50 * 0.9, max=p50 * 3.1)


class FakeMonitor:
    """Seeded Snapshots: a few configurations already measured, a rebuild marker, grouped ORT warnings."""

    bucket_s = 0.5
    window_s = 5.0
    generation: int | None = None

    def __init__(self, model_path: str = "/models/resnet-ish.onnx", profile: Profile | None = None, *,
                 seed: int = 0, state: str = "measuring", n_configs: int = 3, fatal: str | None = None,
                 providers_active: tuple[str, ...] = ("CPUExecutionProvider",), replicas: int = 1,
                 pin_replicas: bool = False, host_cores: int = 8, p50_ms: float = 4.21) -> None:
        self.model_path = model_path
        self.info = fake_model_info(model_path)
        self.start_profile = replace(profile or Profile(), model=model_path)
        self.fatal = fatal
        self.rng = random.Random(seed)
        self.state = state
        self.stopped = False
        self.applied: list[Profile] = []
        self.verified: list[tuple[int, int]] = []
        self.verify_metrics: list[str | None] = []  # the metric each verification was asked to judge
        self.verifying: VerifyProgress | None = None
        self.pending: Profile | None = None
        self.traffic = None  # an engine.traffic.Traffic the snapshots carry (open arrivals, a shape mix)
        # set (and traffic None): the snapshots carry the running configuration's traffic figures as its arrivals
        # make them, its service time at this p50 (ms) under open arrivals (see _traffic)
        self.service_p50_ms: float | None = None
        self.providers_active = providers_active
        self.replica_figures = self._replicas(replicas, pin_replicas, host_cores)  # seeded; the tests may swap them
        self.events: list[Event] = [
            Event(0.4, "info", "session built in 48 ms, first run 6.2 ms"),
            Event(0.5, "warning", "ORT: Initializer fc1_w appears in graph inputs and will not be treated as "
                                  "constant value/weight.", 269),
            Event(31.0, "info", "rebuilt: intra_op_num_threads: 0 → 2 (in 41 ms, first run 5.8 ms)"),
            Event(62.5, "info", "rebuilt: allow_spinning: default → off (in 44 ms, first run 3.9 ms)"),
            Event(70.1, "error", "rebuild failed, previous session kept: thread affinity core 9 does not exist"),
        ]
        self.history: list[ConfigRecord] = []
        profiles = [self.start_profile,
                    profile_mod.merge(self.start_profile, **{"session.intra_op_num_threads": 2}),
                    profile_mod.merge(self.start_profile, **{"session.intra_op_num_threads": 2,
                                                             "session.allow_spinning": False,
                                                             "workload.rate_hz": 100.0})]
        p50s = [p50_ms, 2.63, 2.71]  # p50_ms: the start configuration's (a 1 ms model, a 40 ms one)
        verdicts: list[RowVerdict | str] = [
            "",  # the first row has nothing to compare with
            RowVerdict("faster", "−37 % p50", "p50 4.21 → 2.63 ms, −37 % (95 % CI −40…−34 %)", metric="p50", against=0),
            RowVerdict("unverified", "−8.0 % unverified", "CPU/run 5.3 → 2.9 ms, measured one after the other: "
                       "not verified (v verifies it)", metric="cpu", against=1),
        ]
        cpu = [CpuCost(8.4, math.nan, 200.0, 98.0), CpuCost(5.3, math.nan, 199.0, 99.0),
               CpuCost(2.9, 21.0, 29.0, 27.0)]
        for i in range(min(n_configs, len(profiles))):
            self._add_record(profiles[i], p50s[i], verdicts[i], cpu[i], started=i * 31.0, runs=6000 - i * 900)
        self._mark_best()

    # ---- Monitor surface ----
    def snapshot(self) -> Snapshot:
        cur = self.history[-1] if self.history else None
        prof = cur.profile if cur is not None else self.start_profile
        series = self._series()
        return Snapshot(
            t=T_NOW, state=self.state, state_elapsed=12.5 if self.state == "measuring" else 1.7,
            model_path=self.model_path, model=self.info, profile=prof, pending=self.pending,
            config_id=cur.config_id if cur else -1, runs=cur.latency.runs if cur else 0,
            feeds=("image: float32[1x16x64x64]",), notes=("free dim batch set to 1",),
            providers_requested=tuple(prof.providers()), providers_active=self.providers_active,
            fallback=any(p not in self.providers_active for p in prof.providers()),
            create_ms=44.2, first_run_ms=3.9,
            latency=cur.latency if cur else LatencyStats(),
            window=replace(cur.latency, runs=400) if cur else LatencyStats(),
            throughput_per_s=cur.throughput_per_s if cur else math.nan, cpu=cur.cpu if cur else CpuCost(),
            series=series, events=tuple(self.events), history=tuple(self.history), worker_pid=self.worker_pid(),
            restarts=0, verifying=self.verifying, memory=self._memory(cur), replicas=self.replica_figures,
            window_span_s=self.window_s, window_rate_per_s=80.0 if cur else math.nan, traffic=self._traffic(cur),
        )

    def _traffic(self, cur: ConfigRecord | None) -> Traffic | None:
        """``traffic`` when set; else, with ``service_p50_ms``, the running configuration's figures under its open
        arrivals (none in a closed loop): served at the offered rate, every run's service time at that p50, a few
        ms of queue."""
        if self.traffic is not None or self.service_p50_ms is None or cur is None:
            return self.traffic
        w = cur.profile.workload
        mode = mode_of(w)
        if mode == CLOSED:
            return None
        runs = cur.latency.runs
        service = _latency(random.Random(cur.config_id), self.service_p50_ms, runs) if runs else LatencyStats()
        queue = _latency(random.Random(cur.config_id + 1), 3.0, runs) if runs else LatencyStats()
        rate = float(w.rate_hz) * int(w.replicas)
        return Traffic(mode=mode, offered_per_s=rate, asked_per_s=float(w.rate_hz), served_per_s=rate, dropped=0,
                       queue_max=4, queue_len=0, service=service, queue=queue)

    @staticmethod
    def _replicas(n: int, pinned: bool, host_cores: int) -> tuple[ReplicaFigures, ...]:
        """Seeded per-replica figures, as the monitor gives them when a configuration serves n > 1 sessions (none
        for one); pinned, each on its share of ``host_cores``."""
        if n < 2:
            return ()
        rng = random.Random(n)
        shares = split_cores(range(host_cores), n) if pinned else [None] * n
        out = []
        for i, share in enumerate(shares):
            p50 = round(2.6 + rng.uniform(0.0, 0.6), 2)
            out.append(ReplicaFigures(i, share, 3000 - 40 * i, 1000.0 / p50 * 0.97, _latency(rng, p50, 3000 - 40 * i)))
        return tuple(out)

    def _memory(self, cur: ConfigRecord | None) -> MemoryInfo:
        mib = 2 ** 20
        peak = cur.rss_peak if cur is not None and cur.rss_peak is not None else 180 * mib
        series = tuple(float(peak - max(0, 30 - i) * mib // 3) for i in range(60))  # a settling arena
        return MemoryInfo(rss=peak - 2 * mib, rss_peak=peak, rss_built=peak - 14 * mib, host_total=16 * 2 ** 30,
                          host_available=9 * 2 ** 30, series=series)

    def apply(self, profile: Profile) -> int:
        profile = replace(profile, model=self.model_path)
        profile_mod.validate(profile, host_cpus=8)
        self.applied.append(profile)
        p50 = round(self.rng.uniform(2.0, 4.5), 2)
        self._add_record(profile, p50, RowVerdict("measuring", "measuring…", "measuring…"),
                         CpuCost(4.0, math.nan, 150.0, 90.0),
                         started=T_NOW, runs=0)
        self._mark_best()
        return self.history[-1].config_id

    def pause(self) -> None:
        self.state = "paused"

    def resume(self) -> None:
        self.state = "measuring"

    def verify(self, config_id: int, against_id: int | None = None, seconds: float | None = None,
               metric: str | None = None) -> Future:
        ids = [h.config_id for h in self.history]
        if config_id not in ids or ids.index(config_id) == 0:
            raise ValueError(f"configuration #{config_id} is the first: nothing to verify it against")
        against = ids[ids.index(config_id) - 1] if against_id is None else against_id
        self.verifying = VerifyProgress(config_id, against, "measuring", 2.0, seconds or 6.0, 6)
        self.verified.append((config_id, against))
        self.verify_metrics.append(metric)
        return Future()

    def reset_stats(self) -> None:
        self.add_event("info", "statistics reset")

    def add_event(self, level: str, text: str) -> None:
        self.events.append(Event(T_NOW, level, text))

    def stop(self) -> None:
        self.stopped = True
        self.state = "stopped"

    def worker_pid(self) -> int | None:
        return None if self.stopped else 4242

    # ---- seeded figures ----
    def _add_record(self, profile: Profile, p50: float, verdict: RowVerdict | str, cpu: CpuCost, started: float,
                    runs: int) -> None:
        changes = profile.changes_from(self.start_profile)
        cid = len(self.history)
        rng = random.Random(cid)
        rss_peak = (212 - 9 * cid) * 2 ** 20 if runs else None  # MB that the configuration's arena settles at
        prev = self.history[-1].rss_peak if self.history else None
        self.history.append(ConfigRecord(
            cid, "; ".join(changes) if changes else "start", profile, started, 44.0 + cid, 4.0 + cid,
            ("CPUExecutionProvider",), _latency(rng, p50, runs), 1000.0 / p50 * 0.97 if runs else math.nan, cpu,
            verdict, rss_peak=rss_peak,
            rss_delta=rss_peak - prev if rss_peak is not None and prev is not None else None))

    def _mark_best(self) -> None:
        measured = [h for h in self.history if h.latency.runs >= 20]
        best = min(measured, key=lambda h: h.latency.p50) if measured else None
        self.history = [replace(h, best=h is best) for h in self.history]

    def _series(self) -> tuple[Bucket, ...]:
        rng = random.Random(7)
        out = []
        for i in range(int(T_NOW / self.bucket_s)):
            t = i * self.bucket_s
            if 80.0 <= t < 81.5:
                continue  # a rebuild: no runs for a moment
            base = 4.2 if t < 70 else (2.6 if t < 80 else 2.7)
            p50 = base * (1 + rng.uniform(-0.04, 0.04))
            p99 = p50 * (1.4 + rng.uniform(0.0, 0.5)) * (1.6 if i % 37 == 0 else 1.0)
            runs = int(self.bucket_s * 1000 / p50) if t < 80 else 50
            out.append(Bucket(t, runs, p50, p99, marker=i in (140, 163)))
        return tuple(out)
