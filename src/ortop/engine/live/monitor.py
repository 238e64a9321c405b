"""The Monitor: owns the worker process, turns its samples into figures, and applies new profiles live.

The TUI and the headless runner both drive this one class; it never imports textual. Everything it shows is read
from an immutable :class:`Snapshot`, built on demand (:mod:`ortop.engine.live.readout`), so a UI thread never races the
receiver thread.

A live change is measured sequentially (the new session runs after the old one), which on a drifting host cannot
tell drift from effect: such a history row is "unverified". :meth:`Monitor.verify` settles it by rebuilding both
configurations as sessions in the running worker and interleaving them for a few seconds (see
:mod:`ortop.engine.live.verify`, a part of this class kept in its own module, and ``engine.bench.ab``).

Over ~450 lines: the worker's lifecycle and its messages share one lock and one state machine
(:class:`State`), and are kept together. Everything the monitor holds is one declared object,
:class:`~ortop.engine.live.monitor_state.MonitorState` (``self.st``); the parts that only read it (readout) or borrow
the worker (verify) are mixins in modules of their own that reach the same object; the pieces with no share in it live
beside it (store, snapshot, schedule, verdicts, events, ab).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ortop import model as model_mod
from ortop.config.profile import Profile, ProfileError  # noqa: F401  (re-exported for callers)
from ortop.engine.live.events import built_text, worker_line
from ortop.engine.live.memory import WorkerMemory, leak_check
from ortop.engine.live.monitor_state import MonitorState
from ortop.engine.live.readout import Readout
from ortop.engine.live.snapshot import (
    Change,
    ConfigRecord,
    CpuCost,
    Event,
    RowVerdict,
    Snapshot,
    State,
    VerifyProgress,
    changes_between,
    label_of,
    summary,
)
from ortop.engine.live.store import CONFIG_RING, ConfigStore
from ortop.engine.live.verdicts import primary_metric
from ortop.engine.live.verify import Verification
from ortop.engine.placement import build_message
from ortop.measure import rows as R
from ortop.measure.series import Series
from ortop.model.feeds import note_level
from ortop.runtime import protocol as proto

__all__ = ["Monitor", "summary", "Snapshot", "ConfigRecord", "CpuCost", "Event", "Change", "RowVerdict", "State",
           "VerifyProgress", "RESTART_LIMIT", "RESTART_WINDOW_S", "CONFIG_RING", "SERIES_LEN", "primary_metric"]

RESTART_LIMIT = 3            # worker deaths within RESTART_WINDOW_S before giving up on automatic restarts
RESTART_WINDOW_S = 60.0
SERIES_LEN = 600             # buckets kept for the live series
TEMP_ID_BASE = 1_000_000     # ids of sessions built for a comparison only, apart from the rows' 0, 1, 2…
LEAK_CHECK_S = 5.0           # the running configuration's RSS series is checked for a slow leak this often


class Monitor(Verification, Readout):
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
        self.st = MonitorState(Series(bucket_s, SERIES_LEN))  # all it holds, under st.lock (engine.monitor_state)
        self.schedule_ended = threading.Event()  # the live configuration's finite schedule (a trace) was served

    @property
    def generation(self) -> int:
        """A counter that moves with every change except new runs: state, a rebuild asked for or done, an event.

        A view polls it to skip a snapshot when nothing but the figures could have changed.
        """
        return self.st.generation

    # ---- public API ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the worker and build the start profile (asynchronously; see :meth:`wait_ready`)."""
        self._spawn(self.start_profile)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the first session is measuring, or has failed (then :attr:`fatal` says why)."""
        return self.st.ready.wait(timeout)

    @property
    def fatal(self) -> str | None:
        """Why the monitor cannot measure at all (first build failed, or a run error), or None."""
        return self.st.fatal

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
        self._cancel_verify("a new profile was applied")
        with self.st.lock:
            self.st.generation += 1
            current = self.st.good or self.start_profile
            if profile.restart_key() != current.restart_key():
                self._event("info", "environment or global thread pool changed: restarting the worker")
                self._kill_worker()
                return self._spawn(profile)
            return self._send_build(profile)

    def pause(self) -> None:
        self._cancel_verify("paused")
        self._send(proto.Pause())

    def resume(self) -> None:
        self._send(proto.Resume())

    def reset_stats(self) -> None:
        """Forget the running configuration's runs and the live series (history rows are kept)."""
        with self.st.lock:
            if self.st.current is not None:
                self.st.current.clear()
                self.st.record_cache.pop(self.st.current.config_id, None)
            self.st.series.clear()
            self.st.state_since = self.now()  # "measuring N s" counts from the reset, like the runs
            self._event("info", "statistics reset")

    def stop(self) -> None:
        """Stop the worker and wait for it (idempotent)."""
        self._cancel_verify("stopped", wait=False)
        with self.st.lock:
            self.st.stopping = True
            self._set_state(State.STOPPED)
        self._kill_worker(graceful=True)

    def add_event(self, level: str, text: str) -> None:
        """Views log their own actions (saves, exports) in the same event list."""
        with self.st.lock:
            self._event(level, text)

    def worker_pid(self) -> int | None:
        w = self.st.worker
        return w.pid if w is not None else None

    def config_runs(self, config_id: int) -> np.ndarray:
        """Latencies (ms) of one configuration's kept runs."""
        with self.st.lock:
            c = self.st.stores.get(config_id)
            return c.latency_ms() if c is not None else np.zeros(0)

    def config_tally(self, config_id: int) -> tuple[np.ndarray, int]:
        """One configuration's kept latencies (ms) and how many runs it has recorded since its last reset, read
        together: a reader that polls the ring learns how many went by unseen."""
        with self.st.lock:
            c = self.st.stores.get(config_id)
            return (c.latency_ms(), c.runs) if c is not None else (np.zeros(0), 0)

    # ---- internals: worker lifecycle -----------------------------------------------------------------------
    def _check(self, profile: Profile) -> None:
        from ortop.engine.models import check_profile

        check_profile(self.info, profile)

    def _new_id(self) -> int:
        """An id for a session that is no history row (a verification's): numbered apart, so rows stay dense."""
        self.st.next_temp_id += 1
        return TEMP_ID_BASE + self.st.next_temp_id

    def _new_row_id(self) -> int:
        cid = self.st.next_id
        self.st.next_id += 1
        return cid

    def _spawn(self, profile: Profile) -> int:
        from ortop.engine.workerproc import launch

        with self.st.lock:
            w = launch(self.model_path, profile.env, self._on_message, self._on_exit,
                       warn=lambda text: self._event("warning", text))
            self.st.worker = w
            self.st.worker_key = profile.restart_key()
            self.st.worker_offset = None
            self.st.in_worker = set()
            self.st.in_flight = None
            self.st.worker_mem = WorkerMemory()
            self.st.worker_has_session = False
            self._set_state(State.BUILDING)
            return self._send_build(profile)

    def _send_build(self, profile: Profile) -> int:
        with self.st.lock:
            cid = self._new_row_id()
            changes = changes_between(self.start_profile, profile)
            self.st.pending = ConfigStore(cid, profile, label=label_of(changes), changes=changes, started=self.now())
            if self.st.in_flight is not None:
                return cid  # sent when the build under way is answered (_answered)
            self.st.in_flight = cid
        self._send(build_message(cid, profile))
        return cid

    def _answered(self, cid: int, built: bool) -> None:
        """The worker answered the build of row ``cid``: a superseded one's session is dropped, and the latest
        settings asked for meanwhile are built next."""
        if cid != self.st.in_flight:
            return
        self.st.in_flight = None
        superseded = cid not in self.st.stores and (self.st.pending is None or self.st.pending.config_id != cid)
        if built and superseded:
            self._send(proto.Drop(cid))
            self.st.in_worker.discard(cid)
        pending = self.st.pending
        if pending is not None and pending.config_id != cid:
            self.st.in_flight = pending.config_id
            self._send(build_message(pending.config_id, pending.profile))

    def _send(self, msg: Any) -> None:
        w = self.st.worker
        if w is not None:
            w.send(msg)

    def _kill_worker(self, graceful: bool = False) -> None:
        w = self.st.worker
        self.st.worker = None
        if w is not None:
            w.stop(graceful=graceful)

    def _on_message(self, msg: Any) -> None:
        try:
            self._handle(msg)
        except Exception as exc:  # a bad message must not kill the receiver silently
            with self.st.lock:
                self._event("error", f"internal: cannot handle worker message {type(msg).__name__}: {exc}")

    def _on_exit(self, w) -> None:
        with self.st.lock:
            v = self.st.verify
            if v is not None and v.interleaving is not None and v.temp_ids:
                v.interleaving.abort("the worker process died")
            if self.st.stopping or w is not self.st.worker and self.st.worker is not None:
                return  # stopped on purpose, or replaced by a restart
            if w is not self.st.worker:
                return
            code = w.exitcode
            why = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            self._event("error", f"worker process died ({why})")
            self.st.worker = None
            now = self.now()
            self.st.deaths = [d for d in self.st.deaths if now - d < RESTART_WINDOW_S] + [now]
            good = self.st.good
            if good is None or len(self.st.deaths) > RESTART_LIMIT:
                self._fail(f"the worker died ({why}) and was not restarted")
                return
            self.st.restarts += 1
            self._event("info", "restarting the worker with the last good profile")
            self._spawn(good)

    def _handle(self, msg: Any) -> None:
        v = self.st.verify
        if v is not None and v.interleaving is not None and v.temp_ids:
            if getattr(msg, "config_id", None) in v.temp_ids or isinstance(msg, proto.AlternationDone):
                v.interleaving.deliver(msg, 0)
        with self.st.lock:
            if isinstance(msg, proto.Samples):
                self._add_samples(msg)
                return
            self.st.generation += 1
            if isinstance(msg, proto.State):
                self._worker_state(msg)
            elif isinstance(msg, proto.Built):
                if self.st.pending is not None and self.st.pending.config_id == msg.config_id:
                    self._built(msg.config_id, msg.info)
                elif msg.config_id in self.st.stores:
                    self.st.stores[msg.config_id].info = msg.info
                    self.st.in_worker.add(msg.config_id)
                self._answered(msg.config_id, built=True)
            elif isinstance(msg, proto.BuildFailed):
                superseded = msg.config_id == self.st.in_flight and self.st.pending is not None \
                    and self.st.pending.config_id != msg.config_id
                if self.st.pending is not None and self.st.pending.config_id == msg.config_id:
                    self._build_failed(msg.message)
                elif msg.config_id in self.st.stores:
                    self._event("error", f"session #{msg.config_id} failed to build: {msg.message}")
                elif superseded:
                    self._event("warning", f"superseded settings #{msg.config_id} failed to build: {msg.message}")
                self._answered(msg.config_id, built=False)
            elif isinstance(msg, proto.BlockDone):
                c = self.st.stores.get(msg.config_id)
                if c is not None:
                    c.block_done(msg.seq, msg.t_start_ns, msg.t_end_ns, msg.cpu_ns, msg.cpu_between_ns)
            elif isinstance(msg, proto.ScheduleEnded):
                if self.st.current is not None and msg.config_id == self.st.current.config_id:
                    self.schedule_ended.set()
                    self._event("info", "the trace was replayed whole")
            elif isinstance(msg, proto.RunError):
                if self.st.current is not None and msg.config_id == self.st.current.config_id:
                    self._event("error", f"Run() failed: {msg.message}")
                    self._fail(f"the model failed at run time: {msg.message}")
                else:
                    self._event("error", f"Run() failed in configuration #{msg.config_id}: {msg.message}")
            elif isinstance(msg, proto.Log):
                level = getattr(msg, "level", "")
                if level:
                    self._event(level, msg.line)
                else:
                    self._event(*worker_line(msg.line))
            self.st.changed.notify_all()

    def _worker_state(self, msg: proto.State) -> None:
        name = msg.name
        # Failed stays failed until a build succeeds: the worker's "measuring" right after "built" (before a
        # --strict-providers pause reaches it) and its "paused" must not hide the failure.
        if self.st.fatal is not None and name in ("measuring", "paused", "idle", "alternating"):
            return
        if name == "idle" and (self.st.current is not None or self.st.pending is not None):
            return  # between a build and the RunLive that follows it
        if self.st.verify is not None and not self.st.verify.paused:
            self._set_state(State.VERIFYING)
            return
        mapping = {"building": State.BUILDING, "warming": State.WARMING, "measuring": State.MEASURING,
                   "paused": State.PAUSED, "idle": State.IDLE, "alternating": State.COMPARING}
        if name in mapping:
            self._set_state(mapping[name])

    def _build_failed(self, message: str) -> None:
        if self.st.pending is not None and self.st.pending.config_id == self.st.next_id - 1:
            self.st.next_id -= 1  # no row was made: the next one takes its number
        self.st.pending = None
        if self.st.current is None:
            if message.startswith("the first run failed"):
                self._event("error", message)
                self._fail(message)
            else:
                self._event("error", f"session failed to build: {message}")
                self._fail(f"cannot build a session: {message}")
        elif not self.st.worker_has_session and self.st.good is not None:
            # A fresh worker (environment change) has nothing to fall back on: bring back the last good.
            self._event("error", f"rebuild failed: {message}; restarting with the previous settings")
            self._kill_worker()
            self._spawn(self.st.good)
        else:
            self._event("error", f"rebuild failed, previous session kept: {message}")
            self._set_state(State.MEASURING)

    def _fail(self, message: str) -> None:
        self.st.fatal = message
        self._set_state(State.FAILED)
        self.st.ready.set()

    def _built(self, cid: int, info: dict) -> None:
        pending = self.st.pending
        assert pending is not None
        self.st.pending = None
        fresh_worker = not self.st.worker_has_session
        self.st.worker_has_session = True
        self.st.in_worker.add(cid)
        pending.info = info
        pending.started = self.now()
        prev = self.st.current
        self.st.current = pending
        self.st.stores[cid] = pending
        self.st.good = pending.profile
        growth = self.st.worker_mem.built(repr(pending.profile.to_dict(full=True)), info.get("rss_after", -1))
        if growth is not None:
            self._event("warning", f"memory: {growth.text()}")
        self.st.fatal = None
        self.st.series.mark(self.now())
        requested = [p for p in info["providers_requested"] if p != "CPUExecutionProvider"]
        missing = [p for p in requested if p not in info["providers_active"]]
        strict_fail = False
        if missing:
            text = (f"{', '.join(missing)} requested but not active: running on "
                    f"{', '.join(info['providers_active'])} (silent fallback)")
            if self.strict_providers:
                self._event("error", text)
                self._fail(text + " — refused by --strict-providers")
                self._send(proto.Pause())
                strict_fail = True
            else:
                self._event("warning", text)
        self._send(proto.RunLive(cid))
        if prev is not None and prev.config_id in self.st.in_worker and prev.config_id != cid:
            self._send(proto.Drop(prev.config_id))
            self.st.in_worker.discard(prev.config_id)
        if strict_fail:
            return
        self._event("info", built_text(info, prev.profile if prev is not None else None, pending.profile,
                                       "the worker was restarted" if fresh_worker else ""))
        for note in info.get("notes", []):
            if note not in self.st.noted:  # the same feeds on every rebuild: said once, not ×12
                self.st.noted.add(note)
                self._event(note_level(note), note)
        self.st.ready.set()

    def _add_samples(self, msg: proto.Samples) -> None:
        c = self.st.stores.get(msg.config_id)
        rows = msg.rows
        if self.st.worker_offset is None and len(rows):
            # Map the worker's perf_counter to the monitor clock once per worker.
            self.st.worker_offset = self.now() - msg.wall_ns / 1e9 - rows[0, R.Col.START] / 1e9
        t = rows[:, R.Col.START] / 1e9 + (self.st.worker_offset or 0.0)
        if c is not None:
            c.add(rows, msg.wall_ns, msg.cpu_ns, t, msg.block, getattr(msg, "traffic", None))
            rss = getattr(msg, "rss", -1)
            if rss >= 0:
                self._rss_sample(c, rss)
                self.st.worker_mem.sample(rss)
        if len(rows):  # response time: service plus the time the request waited (open arrivals)
            self.st.series.add(t, R.response_ms(rows))

    def _rss_sample(self, c: ConfigStore, rss: int) -> None:
        """The worker's RSS at a flush: the configuration's peak and series; a steady rise logged once as a leak."""
        now = self.now()
        c.add_rss(now, rss)
        if c.leak is not None or now - c.leak_checked < LEAK_CHECK_S:
            return
        c.leak_checked = now
        leak = leak_check(c.rss_t, c.rss)
        if leak is not None:
            c.leak = leak
            self._event("warning", f"memory: {leak.text()} (configuration #{c.config_id})")

    def _set_state(self, state: State) -> None:
        if state != self.st.state:
            self.st.state = state
            self.st.state_since = self.now()
            self.st.generation += 1

    def _event(self, level: str, text: str) -> None:
        self.st.generation += 1
        self.st.events.add(self.now(), level, text)
