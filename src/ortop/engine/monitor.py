"""The Monitor: owns the worker process, turns its samples into figures, and applies new profiles live.

The TUI and the headless CLI both drive this one class; it never imports textual. Everything it shows is read
from an immutable :class:`Snapshot`, built on demand, so a UI thread never races the receiver thread.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from ortop import model as model_mod
from ortop.config import profile as profile_mod
from ortop.measure import stats
from ortop.config.profile import Profile, ProfileError

RESTART_LIMIT = 3            # worker deaths within RESTART_WINDOW_S before giving up on automatic restarts
RESTART_WINDOW_S = 60.0
CONFIG_RING = 50_000         # runs kept per configuration for its percentiles and verdicts
SERIES_LEN = 600             # buckets kept for the live series
RECORD_REFRESH_S = 1.0       # the running configuration's record (percentiles over up to CONFIG_RING runs) is
                             # recomputed at most this often; finished configurations are computed once
ORT_LOG = re.compile(r"^\S+ \S+ \[([VIWEF]):onnxruntime:[^\]]*\]\s*(.*)$")
LEVELS = {"V": "debug", "I": "info", "W": "warning", "E": "error", "F": "error"}


@dataclass(frozen=True)
class Event:
    t: float          # seconds since the monitor started
    level: str        # "info" | "warning" | "error"
    text: str
    count: int = 1    # repeats of the same text are grouped


@dataclass(frozen=True)
class CpuCost:
    """What the worker's CPU time says: per run, between runs (spinning), and as a share of one core."""

    cpu_ms_per_run: float = math.nan
    cpu_ms_between_runs_per_s: float = math.nan
    process_cpu_percent: float = math.nan
    busy_percent: float = math.nan  # share of wall time spent inside Run()


@dataclass(frozen=True)
class ConfigRecord:
    """One applied configuration: a row of the history table."""

    config_id: int
    label: str                  # its changes from the start profile, or "start"
    profile: Profile
    started: float              # seconds since monitor start
    create_ms: float
    first_run_ms: float
    providers_active: tuple[str, ...]
    latency: stats.LatencyStats
    throughput_per_s: float
    cpu: CpuCost
    verdict: str = ""           # against the previous configuration
    best: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Everything a view needs, frozen at one instant."""

    t: float
    state: str                  # starting | building | warming | measuring | paused | failed | stopped
    state_elapsed: float
    model_path: str
    model: model_mod.ModelInfo | None
    profile: Profile            # the profile of the running session (last good)
    pending: Profile | None     # a profile being built
    config_id: int
    runs: int                   # measured runs of the running configuration (warm-up excluded)
    feeds: tuple[str, ...]
    notes: tuple[str, ...]
    providers_requested: tuple[str, ...]
    providers_active: tuple[str, ...]
    fallback: bool              # a requested provider is not active
    create_ms: float
    first_run_ms: float
    latency: stats.LatencyStats   # the running configuration, all runs since it was built (capped)
    window: stats.LatencyStats    # the last few seconds
    throughput_per_s: float
    cpu: CpuCost
    series: tuple[stats.Bucket, ...]
    events: tuple[Event, ...]
    history: tuple[ConfigRecord, ...]
    worker_pid: int | None
    restarts: int


class _Config:
    """Per-configuration accumulators (receiver thread writes, snapshot reads under the monitor's lock)."""

    def __init__(self, config_id: int, profile: Profile, label: str, started: float):
        self.config_id = config_id
        self.profile = profile
        self.label = label
        self.started = started
        self.ring = stats.Ring(CONFIG_RING, 4)  # latency_ms, cpu_in_ms, cpu_between_ms, start_s
        self.runs = 0
        self.wall_ns = 0
        self.cpu_ns = 0
        self.busy_ns = 0
        self.info: dict[str, Any] = {}
        self.first_start_ns: int | None = None
        self.offset_s = 0.0


class Monitor:
    """Runs the worker and measures it. Thread-safe; callbacks-free: views poll :meth:`snapshot`.

    ``clock`` (seconds, monotonic) is injectable so tests and snapshot apps can fake time.
    """

    def __init__(self, model_path: str, profile: Profile, *, strict_providers: bool = False,
                 clock: Callable[[], float] = time.monotonic, bucket_s: float = 0.5, window_s: float = 5.0):
        self.model_path = model_path
        self.info = model_mod.load_model(model_path)
        profile = replace(profile, model=model_path)
        self._check(profile)
        self.start_profile = profile
        self.strict_providers = strict_providers
        self.clock = clock
        self.bucket_s = bucket_s
        self.window_s = window_s
        self._t0 = clock()
        self._lock = threading.RLock()
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self._receiver: threading.Thread | None = None
        self._configs: OrderedDict[int, _Config] = OrderedDict()
        self._next_id = 0
        self._current: _Config | None = None
        self._pending: _Config | None = None
        self._good: Profile | None = None
        self._state = "starting"
        self._state_since = 0.0
        self._events: list[Event] = []
        self._buckets: OrderedDict[int, list] = OrderedDict()  # index -> [latency arrays]
        self._bucket_cache: dict[int, tuple[int, stats.Bucket]] = {}  # index -> (arrays seen, bucket figures)
        self._record_cache: dict[int, tuple[tuple, float, ConfigRecord]] = {}  # config id -> (key, when, record)
        self._marker_buckets: set[int] = set()
        self._deaths: list[float] = []
        self._restarts = 0
        self._stopping = False
        self._fatal: str | None = None
        self._worker_has_session = False
        self._ready = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._generation = 0

    @property
    def generation(self) -> int:
        """A counter that moves with every change except new runs: state, a rebuild asked for or done, an event.

        A view polls it to skip a snapshot when nothing but the figures could have changed.
        """
        return self._generation

    # ---- public API ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the worker and build the start profile (asynchronously; see :meth:`wait_ready`)."""
        self._spawn(self.start_profile)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the first session is measuring, or has failed (then :attr:`fatal` says why)."""
        return self._ready.wait(timeout)

    @property
    def fatal(self) -> str | None:
        """Why the monitor cannot measure at all (first build failed, or a run error), or None."""
        return self._fatal

    def now(self) -> float:
        return self.clock() - self._t0

    def apply(self, profile: Profile) -> int:
        """Validate, then rebuild the session with ``profile`` (restarting the worker if an env knob changed).

        Raises ProfileError / ModelError synchronously when the profile or its inputs are invalid; the running
        session is untouched. A build failure later is reported as an error event and the old session keeps
        running. Returns the new configuration's id.
        """
        profile = replace(profile, model=self.model_path)
        self._check(profile)
        with self._lock:
            self._generation += 1
            current = self._good or self.start_profile
            if profile.restart_key() != current.restart_key():
                self._event("info", "environment or global thread pool changed: restarting the worker")
                self._kill_worker()
                return self._spawn(profile)
            return self._send_apply(profile)

    def pause(self) -> None:
        self._send(("pause",))

    def resume(self) -> None:
        self._send(("resume",))

    def reset_stats(self) -> None:
        """Forget the running configuration's runs and the live series (history rows are kept)."""
        with self._lock:
            if self._current is not None:
                c = self._current
                c.ring.clear()
                c.runs = c.wall_ns = c.cpu_ns = c.busy_ns = 0
                self._record_cache.pop(c.config_id, None)
            self._buckets.clear()
            self._bucket_cache.clear()
            self._event("info", "statistics reset")

    def stop(self) -> None:
        """Stop the worker and wait for it (idempotent)."""
        with self._lock:
            self._stopping = True
            self._set_state("stopped")
        self._kill_worker(graceful=True)

    def add_event(self, level: str, text: str) -> None:
        """Views log their own actions (saves, exports) in the same event list."""
        with self._lock:
            self._event(level, text)

    def worker_pid(self) -> int | None:
        p = self._proc
        return p.pid if p is not None and p.is_alive() else None

    def config_runs(self, config_id: int) -> np.ndarray:
        """Latencies (ms) of one configuration's kept runs."""
        with self._lock:
            c = self._configs.get(config_id)
            return c.ring.view()[:, 0] if c is not None else np.zeros(0)

    # ---- internals: worker lifecycle -----------------------------------------------------------------------
    def _check(self, profile: Profile) -> None:
        profile_mod.validate(profile, host_cpus=os.cpu_count())
        w = profile.workload
        model_mod.make_feeds(self.info, dims=w.dims, shapes=w.shapes, values=w.values, inputs=w.inputs,
                             batch=w.batch, seed=w.seed)

    def _spawn(self, profile: Profile) -> int:
        from ortop.runtime.worker import worker_main

        parent, child = self._ctx.Pipe()
        env_backup = {k: os.environ.get(k) for k in profile.env}
        with self._lock:
            # Env knobs (LD_PRELOAD, OMP_*) must be in place when the child process starts; spawn copies
            # os.environ at start, so set them around start() only.
            try:
                os.environ.update(profile.env)
                proc = self._ctx.Process(target=worker_main, args=(child, self.model_path), daemon=True,
                                         name="ortop-worker")
                proc.start()
            finally:
                for k, v in env_backup.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            child.close()
            self._proc, self._conn = proc, parent
            self._worker_has_session = False
            self._set_state("building")
            self._receiver = threading.Thread(target=self._receive, args=(parent, proc), name="ortop-receiver",
                                              daemon=True)
            self._receiver.start()
            return self._send_apply(profile)

    def _send_apply(self, profile: Profile) -> int:
        with self._lock:
            cid = self._next_id
            self._next_id += 1
            base = self.start_profile
            changes = profile.changes_from(base)
            label = "; ".join(changes) if changes else "start"
            self._pending = _Config(cid, profile, label, self.now())
        self._send(("apply", cid, profile.to_dict(full=True)))
        return cid

    def _send(self, msg: tuple) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            conn.send(msg)
        except (OSError, ValueError, BrokenPipeError):
            pass  # the receiver sees the death and reports it

    def _kill_worker(self, graceful: bool = False) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        if graceful and conn is not None:
            try:
                conn.send(("stop",))
            except (OSError, ValueError):
                pass
            proc.join(3)
        if proc.is_alive():
            proc.kill()
            proc.join(3)
        if conn is not None:
            conn.close()

    def _receive(self, conn, proc) -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError, ValueError):
                break
            try:
                self._handle(msg)
            except Exception as exc:  # a bad message must not kill the receiver silently
                with self._lock:
                    self._event("error", f"internal: cannot handle worker message {msg[0]!r}: {exc}")
        proc.join(1)
        with self._lock:
            if self._stopping or proc is not self._proc and self._proc is not None:
                return  # stopped on purpose, or replaced by a restart
            code = proc.exitcode
            why = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            self._event("error", f"worker process died ({why})")
            self._proc = self._conn = None
            now = self.now()
            self._deaths = [d for d in self._deaths if now - d < RESTART_WINDOW_S] + [now]
            good = self._good
            if good is None or len(self._deaths) > RESTART_LIMIT:
                self._fail(f"the worker died ({why}) and was not restarted")
                return
            self._restarts += 1
            self._event("info", "restarting the worker with the last good profile")
            self._spawn(good)

    def _handle(self, msg: tuple) -> None:
        kind = msg[0]
        with self._lock:
            if kind != "samples":
                self._generation += 1
            if kind == "samples":
                _, cid, rows, window = msg
                self._add_samples(cid, rows, window)
            elif kind == "state":
                # Failed stays failed until a build succeeds: the worker's "measuring" right after "built" (before
                # a --strict-providers pause reaches it) and its "paused" must not hide the failure.
                if not (self._fatal is not None and msg[1] in ("measuring", "paused")):
                    self._set_state(msg[1])
            elif kind == "built":
                _, cid, info = msg
                self._built(cid, info)
            elif kind == "build_failed":
                _, cid, message = msg
                pending = self._pending
                self._pending = None
                if self._current is None:
                    self._event("error", f"session failed to build: {message}")
                    self._fail(f"cannot build a session: {message}")
                elif not self._worker_has_session and self._good is not None:
                    # A fresh worker (environment change) has nothing to fall back on: bring back the last good.
                    self._event("error", f"rebuild failed: {message}; restarting with the previous settings")
                    self._kill_worker()
                    self._spawn(self._good)
                else:
                    self._event("error", f"rebuild failed, previous session kept: {message}")
                    self._set_state("measuring")
                del pending
            elif kind == "run_error":
                _, cid, message = msg
                self._event("error", f"Run() failed: {message}")
                self._fail(f"the model failed at run time: {message}")
            elif kind == "log":
                self._log(msg[1])
            self._changed.notify_all()

    def _fail(self, message: str) -> None:
        self._fatal = message
        self._set_state("failed")
        self._ready.set()

    def _built(self, cid: int, info: dict) -> None:
        pending = self._pending
        if pending is None or pending.config_id != cid:
            return
        self._pending = None
        self._worker_has_session = True
        pending.info = info
        pending.started = self.now()
        prev = self._current
        self._current = pending
        self._configs[cid] = pending
        self._good = pending.profile
        self._fatal = None
        self._marker_buckets.add(int(self.now() // self.bucket_s))
        requested = [p for p in info["providers_requested"] if p != "CPUExecutionProvider"]
        missing = [p for p in requested if p not in info["providers_active"]]
        if missing:
            text = (f"{', '.join(missing)} requested but not active: running on "
                    f"{', '.join(info['providers_active'])} (silent fallback)")
            if self.strict_providers:
                self._event("error", text)
                self._fail(text + " — refused by --strict-providers")
                self._send(("pause",))
                return
            self._event("warning", text)
        verb = "session built" if prev is None else "rebuilt"
        self._event("info", f"{verb} in {info['create_ms']:.0f} ms, first run {info['first_run_ms']:.1f} ms"
                    + (f": {pending.label}" if pending.label != "start" else ""))
        for note in info.get("notes", []):
            self._event("info", note)
        self._ready.set()

    def _add_samples(self, cid: int, rows: np.ndarray, window: tuple[int, int]) -> None:
        c = self._configs.get(cid)
        if c is None or c is not self._current:
            return
        c.wall_ns += window[0]
        c.cpu_ns += window[1]
        if len(rows) == 0:
            return
        lat_ms = rows[:, 1] / 1e6
        c.busy_ns += int(rows[:, 1].sum())
        start_s = rows[:, 0] / 1e9
        if c.first_start_ns is None:
            c.first_start_ns = int(rows[0, 0])
            # Map the worker's perf_counter to the monitor clock once per configuration.
            c.offset_s = self.now() - (window[0] / 1e9) - start_s[0]
        t = start_s + c.offset_s
        block = np.column_stack([lat_ms, rows[:, 2] / 1e6, rows[:, 3] / 1e6, t])
        c.ring.extend(block)
        c.runs += len(rows)
        idx = np.floor(t / self.bucket_s).astype(np.int64)
        for i in np.unique(idx):
            self._buckets.setdefault(int(i), []).append(lat_ms[idx == i])
        while len(self._buckets) > SERIES_LEN:
            old, _ = self._buckets.popitem(last=False)
            self._bucket_cache.pop(old, None)

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self._state_since = self.now()
            self._generation += 1

    def _log(self, line: str) -> None:
        m = ORT_LOG.match(line)
        if m:
            self._event(LEVELS.get(m.group(1), "info"), "ORT: " + m.group(2))
        else:
            self._event("warning" if "warn" in line.lower() else "info", "worker: " + line)

    def _event(self, level: str, text: str) -> None:
        # Group repeats (ORT logs one warning per initializer listed as input, say) into one counted event.
        self._generation += 1
        for i in range(len(self._events) - 1, max(-1, len(self._events) - 50), -1):
            e = self._events[i]
            if e.text == text and e.level == level:
                self._events[i] = replace(e, count=e.count + 1, t=self.now())
                return
        self._events.append(Event(self.now(), level, text))
        if len(self._events) > 500:
            del self._events[:100]

    # ---- figures ------------------------------------------------------------------------------------------
    @staticmethod
    def _cost(c: _Config, rows: np.ndarray) -> CpuCost:
        if c.runs == 0 or c.wall_ns == 0:
            return CpuCost()
        wall_s = c.wall_ns / 1e9
        per_run = c.cpu_ns / 1e6 / c.runs
        between = math.nan
        if c.profile.workload.concurrency == 1 and len(rows):
            # Spin: CPU the process burned while no Run() was in flight, per second of wall time.
            between = float(rows[:, 2].sum()) / (float(rows[-1, 3] - rows[0, 3]) or wall_s)
        return CpuCost(per_run, between, c.cpu_ns / c.wall_ns * 100, c.busy_ns / c.wall_ns * 100)

    def _record(self, c: _Config, prev: _Config | None) -> ConfigRecord:
        rows = c.ring.view()
        lat = stats.latency_stats(rows[:, 0])
        thr = c.runs / (c.wall_ns / 1e9) if c.wall_ns else math.nan
        verdict = ""
        if prev is not None:
            v = stats.verdict(prev.ring.view()[:, 0], rows[:, 0])
            verdict = v.text if v else "measuring…"
        return ConfigRecord(c.config_id, c.label, c.profile, c.started, c.info.get("create_ms", math.nan),
                            c.info.get("first_run_ms", math.nan), tuple(c.info.get("providers_active", ())), lat,
                            thr, self._cost(c, rows), verdict)

    def _record_cached(self, c: _Config, prev: _Config | None, now: float) -> ConfigRecord:
        """A configuration's record, recomputed only when its runs (or its predecessor's) changed, and for the
        running configuration at most every RECORD_REFRESH_S once it has most of its runs: percentiles and the
        verdict over CONFIG_RING runs cost milliseconds each, and the UI asks for a snapshot several times a
        second."""
        key = (c.runs, c.wall_ns, prev.config_id if prev else None, prev.runs if prev else None)
        hit = self._record_cache.get(c.config_id)
        if hit is not None and (hit[0] == key or (
                c is self._current and now - hit[1] < RECORD_REFRESH_S
                and hit[2].latency.runs >= 0.9 * len(c.ring))):  # stale by < 1 s and < 10 % of the runs
            return hit[2]
        rec = self._record(c, prev)
        self._record_cache[c.config_id] = (key, now, rec)
        return rec

    def snapshot(self) -> Snapshot:
        with self._lock:
            now = self.now()
            history = []
            prev = None
            for c in self._configs.values():
                history.append(self._record_cached(c, prev, now))
                prev = c
            measured = [h for h in history if h.latency.runs >= 20]
            if measured:
                best = min(measured, key=lambda h: h.latency.p50)
                history = [replace(h, best=h is best) for h in history]
            cur = self._current
            rec = next((h for h in history if cur is not None and h.config_id == cur.config_id), None)
            window = stats.LatencyStats()
            if cur is not None:
                rows = cur.ring.view()
                recent = rows[rows[:, 3] >= now - self.window_s, 0] if len(rows) else rows[:, 0]
                window = stats.latency_stats(recent)
            series = []
            last_full = int(now // self.bucket_s)
            for i, chunks in self._buckets.items():
                if i >= last_full:
                    continue  # a bucket still filling would read as a throughput dip
                hit = self._bucket_cache.get(i)
                if hit is None or hit[0] != len(chunks):  # finished buckets are computed once, not per snapshot
                    lat = np.concatenate(chunks)
                    p50, p99 = np.percentile(lat, (50, 99)) if lat.size else (math.nan, math.nan)
                    hit = (len(chunks), stats.Bucket(i * self.bucket_s, int(lat.size), float(p50), float(p99)))
                    self._bucket_cache[i] = hit
                b = hit[1]
                series.append(replace(b, marker=True) if i in self._marker_buckets else b)
            info = cur.info if cur is not None else {}
            requested = tuple(info.get("providers_requested", (self._good or self.start_profile).providers()))
            active = tuple(info.get("providers_active", ()))
            return Snapshot(
                t=now, state=self._state, state_elapsed=now - self._state_since, model_path=self.model_path,
                model=self.info, profile=self._good or self.start_profile,
                pending=self._pending.profile if self._pending else None,
                config_id=cur.config_id if cur else -1, runs=cur.runs if cur else 0, feeds=tuple(info.get("feeds", ())),
                notes=tuple(info.get("notes", ())), providers_requested=requested, providers_active=active,
                fallback=bool(active) and any(p not in active for p in requested),
                create_ms=info.get("create_ms", math.nan), first_run_ms=info.get("first_run_ms", math.nan),
                latency=rec.latency if rec else stats.LatencyStats(), window=window,
                throughput_per_s=rec.throughput_per_s if rec else math.nan, cpu=rec.cpu if rec else CpuCost(),
                series=tuple(series), events=tuple(self._events), history=tuple(history),
                worker_pid=self.worker_pid(), restarts=self._restarts,
            )


def summary(snap: Snapshot, *, duration_s: float, gpu: Any = None, extra: dict | None = None) -> dict[str, Any]:
    """The JSON object ``--json`` prints and ``--summary FILE`` writes."""
    def num(x: float) -> float | None:
        return None if x is None or not math.isfinite(x) else round(float(x), 4)

    warmup = snap.profile.workload.warmup_runs
    out: dict[str, Any] = {
        "model": snap.model_path,
        "profile": snap.profile.to_dict(full=True),
        "providers_requested": list(snap.providers_requested),
        "providers_active": list(snap.providers_active),
        "warnings": [e.text + (f" (x{e.count})" if e.count > 1 else "") for e in snap.events
                     if e.level in ("warning", "error")],
        "runs": snap.runs,
        "warmup_runs": warmup,
        "duration_s": round(duration_s, 3),
        "latency_ms": snap.latency.as_dict(),
        "throughput_per_s": num(snap.throughput_per_s),
        "cpu": {
            "cpu_ms_per_run": num(snap.cpu.cpu_ms_per_run),
            "cpu_ms_between_runs_per_s": num(snap.cpu.cpu_ms_between_runs_per_s),
            "process_cpu_percent": num(snap.cpu.process_cpu_percent),
        },
        "session": {"create_ms": num(snap.create_ms), "first_run_ms": num(snap.first_run_ms)},
        "inputs": list(snap.feeds),
        "gpu": gpu,
    }
    if extra:
        out.update(extra)
    return out
