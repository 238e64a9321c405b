"""The inference worker: a child process that holds built sessions by configuration id and runs them, measured.

Why a process: its CPU time is the model's (inference plus the thread pool's spinning) and nothing else; ORT's
writes to fd 2 are caught here instead of scribbling over a terminal UI; environment knobs that ORT reads at load
time need a fresh process; and a crash or CUDA OOM kills only this process.

Protocol: the typed messages of :mod:`ortop.runtime.protocol`, pickled over a multiprocessing Connection.
The worker keeps several sessions (``Build``/``Drop``) and either runs one continuously (``RunLive``; its runs go
to the parent every ~250 ms as ``Samples(block=-1)``) or alternates several in blocks (``Alternate``: per block a
settle period whose runs are not recorded, then the recorded block, sent as ``Samples(block=seq)`` followed by
``BlockDone``). ``Pause``/``Resume`` stop and restart the callers of whichever of the two is set up; ``Stop``
(or EOF on the connection: the parent is gone) ends the process.

The session and its timed loop are in :mod:`ortop.runtime.session`; the process's housekeeping (stderr capture,
parent death, thread names, memory) in :mod:`ortop.runtime.child`.

Over ~500 lines: one process's whole command loop (build, drop, live, alternate, pause, stop) reads best in
one place.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any

from ortop.measure import rows as R
from ortop.runtime import protocol as proto
from ortop.runtime.child import (
    Sender,
    capture_stderr,
    check_preload,
    die_with_parent,
    name_library_threads,
    process_rss,
    release_memory,
    rss_now,
    set_os_thread_name,
    set_warning_sink,
)

FLUSH_NS = 250_000_000  # live samples reach the parent in batches every ~250 ms (the UI draws once a second)
DRAIN_MAX_NS = 2_000_000_000  # an open block serves its window's arrivals for at most this long after the window
DRAIN_POLL_NS = 1_000_000



class _Block:
    """One block of an alternation in progress: a loop that settles, then records until its end.

    With open arrivals the block records the requests that *arrive* in its window, each to its response, so after
    the window it goes on serving (arrivals still coming, the queue as it was) until every request that arrived in
    the window has started, for at most ``DRAIN_MAX_NS``; those still waiting then are counted as shed. Cut at the
    window's end instead, a block would leave out the requests a burst left queued — the slowest ones — and a short
    block would read a percentile too low: the shorter the block, the larger that bias.
    """

    def __init__(self, loop, seq: int, settle_ns: int, block_ns: int):
        self.loop = loop
        self.seq = seq
        self.block_ns = block_ns
        self.recording = False
        self.traffic: tuple[int, int, int, int] | None = None
        self.t_start = 0
        self.cpu_start = 0
        self.deadline = time.perf_counter_ns() + settle_ns
        self.rec_end = 0           # open arrivals: the window's end, once draining
        self.cpu_end = 0
        self.drain_until = 0
        self.window_traffic: tuple[int, int, int, int] | None = None

    def begin_recording(self) -> None:
        self.loop.take()  # settle runs: not recorded
        self.loop.traffic()
        self.t_start = self.loop.watch_window(self.block_ns)  # open arrivals: the window's sheds, counted as they come
        self.cpu_start = time.process_time_ns()
        self.recording = True
        self.deadline = self.t_start + self.block_ns

    def drained(self, now: int) -> bool:
        """At or after the deadline: True when the block may end (a closed loop at once; open arrivals once the
        window's requests have all started, or the drain's time is up), else the next look is scheduled."""
        if not self.loop.queues:
            return True
        if not self.rec_end:
            self.rec_end = self.deadline
            self.cpu_end = time.process_time_ns()
            self.window_traffic = self.loop.traffic()
            self.drain_until = now + DRAIN_MAX_NS
        if self.loop.waiting_before(self.rec_end) == 0 or now >= self.drain_until:
            return True
        self.deadline = now + DRAIN_POLL_NS
        return False


class _Alternation:
    """The sessions to alternate and where in the schedule the next block is."""

    def __init__(self, msg: proto.Alternate):
        self.ids = tuple(msg.config_ids)
        self.block_ns = int(msg.block_s * 1e9)
        self.settle_ns = int(msg.settle_s * 1e9)
        self.rounds = msg.rounds
        self.rate_hz = getattr(msg, "rate_hz", None)
        self.arrival = getattr(msg, "arrival", None)
        self.first_round = int(getattr(msg, "first_round", 0))
        self.order_seed = getattr(msg, "order_seed", None)
        self.pos = 0                   # schedule position of the next (or current) block
        self.block: _Block | None = None
        self._order: list[int] = []

    def total(self) -> int | None:
        return None if self.rounds is None else self.rounds * len(self.ids)

    def config_at(self, pos: int) -> int:
        from ortop.measure.compare import schedule

        if pos >= len(self._order):  # the schedule's prefix does not depend on its length: extend it as needed
            rounds = max(2, 2 * (pos // len(self.ids) + 1))
            if self.rounds is not None:
                rounds = self.rounds
            self._order = schedule(len(self.ids), rounds, self.order_seed)
        return self.ids[self._order[pos]]


class Worker:
    """The worker's state: sessions by id, the live choice, an alternation, pause and failed sessions."""

    def __init__(self, conn, send, model_path: str):
        self.conn = conn
        self.send = send
        self.model_path = model_path
        self._infos: dict[str, Any] = {}     # model path -> ModelInfo: a session may run another model than ours
        self.info = self._model_info(model_path)
        self.sessions: dict[int, Any] = {}
        self.live_id: int | None = None
        self.loop: Any = None                # the live loop (session.Loop)
        self.last_flush = 0
        self.last_cpu = 0
        self.alt: _Alternation | None = None
        self.paused = False
        self.failed: set[int] = set()        # sessions whose Run() raised: not run again until told to
        self.trace_said = False              # the live loop's finite schedule was said to have ended
        self.errors: list[tuple[int, str]] = []  # appended by caller threads
        self._said: proto.State | None = None

    def _model_info(self, path: str) -> Any:
        """The model's info, read once per path (the sessions of a comparison may each run their own model)."""
        from ortop import model as model_mod

        key = os.path.abspath(path)
        info = self._infos.get(key)
        if info is None:
            info = self._infos[key] = model_mod.load_model(path)
        return info

    def _state(self, name: str, config_id: int | None) -> None:
        st = proto.State(name, -1 if config_id is None else config_id)
        if st != self._said or name in ("building", "warming"):
            self._said = st
            self.send(st)

    # ---- the main loop ---------------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                timeout = self._timeout()
                msg = self.conn.recv() if (timeout is None or self.conn.poll(timeout)) else None
            except (EOFError, OSError):
                break  # parent gone
            self.tick()
            if msg is None:
                continue
            if isinstance(msg, proto.Stop):
                break
            self.handle(msg)
        self._halt_live()
        self._abort_block()

    def _timeout(self) -> float | None:
        if self.alt is not None and self.alt.block is not None:
            return max(0.0, (self.alt.block.deadline - time.perf_counter_ns()) / 1e9)
        if self.loop is not None:
            return 0.02
        return None

    def tick(self) -> None:
        """Between commands: flush the live loop, report run errors, move an alternation on."""
        if self.errors:
            self._on_errors()
        if self.loop is not None:
            self._flush_live()
        alt = self.alt
        now = time.perf_counter_ns()
        while alt is not None and alt.block is not None and now >= alt.block.deadline:
            b = alt.block
            if not b.recording:
                b.begin_recording()
            elif b.drained(now):
                self._finish_block()
                if self.errors:
                    self._on_errors()
                elif self.alt is not None:
                    self._run()  # the next block
            alt = self.alt
            now = time.perf_counter_ns()

    def handle(self, msg: Any) -> None:
        if isinstance(msg, proto.Build):
            self._build(msg.config_id, msg.profile, getattr(msg, "shares", None), getattr(msg, "feed_model", ""),
                        getattr(msg, "outputs", False))
        elif isinstance(msg, proto.Drop):
            self._drop(msg.config_id)
        elif isinstance(msg, proto.RunLive):
            self._end_alternation(completed=False)
            if self.loop is not None and self.loop.config_id != msg.config_id:
                self._halt_live()
            self.live_id = msg.config_id
            self.failed.discard(msg.config_id)
            self._run()
        elif isinstance(msg, proto.Alternate):
            missing = [c for c in msg.config_ids if c not in self.sessions]
            if missing or not msg.config_ids or msg.block_s <= 0 or (msg.rounds is not None and msg.rounds < 1):
                why = f"no session for configuration {missing[0]}" if missing else "nothing to run"
                self.send(proto.Log(f"ortop worker: cannot alternate: {why}"))
                self.send(proto.AlternationDone(False))
                return
            self._end_alternation(completed=False)
            self._halt_live()
            self.failed.difference_update(msg.config_ids)
            self.alt = _Alternation(msg)
            self._run()
        elif isinstance(msg, proto.Pause):
            self.paused = True
            self._halt_live()
            self._abort_block()
            self._run()
        elif isinstance(msg, proto.Resume):
            self.paused = False
            self.errors.clear()
            self.failed.clear()
            self._run()

    # ---- what runs -------------------------------------------------------------------------------------------
    def _run(self) -> None:
        """Start whatever should run now (if it is not running yet) and say so."""
        alt = self.alt
        if self.paused:
            self._state("paused", self.live_id)
            return
        if alt is not None:
            if alt.block is None:
                cid = alt.config_at(alt.pos)
                if cid in self.failed:
                    return
                from ortop.runtime.serve import Loop

                # Each round of the schedule draws fresh arrivals (independent replications), the same for every
                # session in the round (common random numbers).
                loop = Loop(self.sessions[cid], cid, self._on_error, loop_trace=True, rate_hz=alt.rate_hz,
                            arrival=alt.arrival, stream=alt.first_round + alt.pos // len(alt.ids))
                alt.block = _Block(loop, alt.pos, alt.settle_ns, alt.block_ns)
                loop.start()
                self._state("alternating", -1)
            return
        live = self.live_id
        if live is None or live not in self.sessions or live in self.failed:
            self._state("idle", live)
            return
        if self.loop is None:
            from ortop.runtime.serve import Loop

            self.loop = Loop(self.sessions[live], live, self._on_error)
            self.trace_said = False
            self.loop.start()
            self.last_flush, self.last_cpu = self.loop.started_ns, time.process_time_ns()
        self._state("measuring", live)

    def _on_error(self, config_id: int, message: str) -> None:
        self.errors.append((config_id, message))

    def _on_errors(self) -> None:
        cid, message = self.errors[0]
        self.errors.clear()
        self.failed.add(cid)
        if self.loop is not None and self.loop.config_id == cid:
            self._halt_live()  # the runs before the failure are sent
        alt = self.alt
        if alt is not None and cid in alt.ids:
            self._abort_block()
            self.alt = None
            self.send(proto.RunError(cid, message))
            self.send(proto.AlternationDone(False))
            self._run()
            return
        self.send(proto.RunError(cid, message))

    def _flush_live(self, force: bool = False) -> None:
        loop = self.loop
        now = time.perf_counter_ns()
        # a replayed schedule's end is said at once (its last runs with it), not at the next batch: a headless
        # replay stops on it, and its offered rate counts the time until then
        ended = loop is not None and loop.ended.is_set() and not self.trace_said
        if loop is None or (not force and not ended and now - self.last_flush < FLUSH_NS):
            return
        rows = loop.take()
        cpu_now = time.process_time_ns()
        wall, cpu = now - self.last_flush, cpu_now - self.last_cpu
        self.last_flush, self.last_cpu = now, cpu_now
        self.send(proto.Samples(loop.config_id, rows, wall, cpu, proto.LIVE, rss_now(), loop.traffic()))
        if loop.ended.is_set() and not self.trace_said:
            self.trace_said = True
            self.send(proto.ScheduleEnded(loop.config_id))

    def _halt_live(self) -> None:
        if self.loop is not None:
            self.loop.halt()
            self._flush_live(force=True)
            self.loop = None

    def _abort_block(self) -> None:
        """Stop the block in progress without recording it: it runs again, whole, when the alternation goes on."""
        alt = self.alt
        if alt is not None and alt.block is not None:
            alt.block.loop.halt()
            alt.block = None

    def _finish_block(self) -> None:
        alt = self.alt
        assert alt is not None and alt.block is not None
        b = alt.block
        unserved = b.loop.waiting_before(b.rec_end, b.t_start) if b.rec_end else 0
        shed = b.loop.window_shed() if b.rec_end else 0
        b.loop.halt()
        t_end = time.perf_counter_ns()
        cpu_end = time.process_time_ns()
        b.traffic = b.loop.traffic()
        alt.block = None
        if self.errors:
            return  # reported by the caller of this; the block is not recorded
        rows = b.loop.take()
        if b.rec_end:  # open arrivals: the requests that arrived in the window, each to its response
            arrival = R.arrival_ns(rows)
            rows = rows[(arrival >= b.t_start) & (arrival < b.rec_end)]
            t_end, cpu_end = b.rec_end, b.cpu_end
            _, _, qlen, qmax = b.window_traffic or (0, 0, 0, 0)
            qmax = max(qmax, b.traffic[3]) if b.traffic else qmax
            # arrived in the window: served, shed, or still waiting after the drain (as good as shed), each by its
            # arrival time. Not the queues' counters read once the window had closed: on a busy host that read
            # comes late, and counted arrivals after the window's end as offered within it (offered read 26 % over
            # the rate asked), and their sheds as the window's.
            arrived = len(rows) + shed + unserved
            b.traffic = (arrived, shed + unserved, qlen, qmax)
        else:
            rows = rows[rows[:, R.Col.START] >= b.t_start]
        cid = b.loop.config_id
        between = int(rows[:, R.Col.CPU_BETWEEN].sum()) if b.loop.tracks_cpu else -1
        self.send(proto.Samples(cid, rows, t_end - b.t_start, cpu_end - b.cpu_start, b.seq, rss_now(), b.traffic))
        self.send(proto.BlockDone(cid, b.seq, b.t_start, t_end, cpu_end - b.cpu_start, between, len(rows)))
        alt.pos += 1
        total = alt.total()
        if total is not None and alt.pos >= total:
            self.alt = None
            self.send(proto.AlternationDone(True))
            self._run()  # back to the live session, if any

    def _end_alternation(self, completed: bool) -> None:
        if self.alt is not None:
            self._abort_block()
            self.alt = None
            self.send(proto.AlternationDone(completed))

    # ---- sessions ----------------------------------------------------------------------------------------------
    def _build(self, config_id: int, data: dict, shares: Any = None, feed_model: str = "",
               outputs: bool = False) -> None:
        """Build and warm the profile's session of its own model (the worker's when it names none), fed from
        ``feed_model``'s inputs when given (a comparison's first model), else from its own model's."""
        from ortop import model as model_mod
        from ortop.config import profile as profile_mod
        from ortop.config.replicas import split_cores
        from ortop.errors import one_line
        from ortop.runtime.session import WARMUP_LIMIT_NS, build

        self._halt_live()
        self._abort_block()
        self._state("building", config_id)
        rss_before = process_rss()
        stage = ""
        new = None
        try:
            prof = profile_mod.from_dict(data)
            if prof.workload.pin_replicas and not shares:  # not placed by the parent: split the cores we may use
                shares = split_cores(sorted(os.sched_getaffinity(0)), prof.workload.replicas)
            if not prof.workload.pin_replicas:
                shares = None
            if not prof.model:
                prof = replace(prof, model=self.model_path)
            info = self._model_info(feed_model or prof.model)  # loading a model is part of building it
            trace, variants = workload_shapes(prof, info)
            new = build(prof, info, shares, variants)
            new.trace = trace
            self._state("warming", config_id)
            stage = "the first run failed: "  # the session was built; the model failed running it
            first_ns, warm_ms = new.warm()
            extra: dict[str, Any] = {}
            if outputs:  # one more run, its outputs compared with another model's on the same inputs
                from ortop.runtime.outputs import compact_outputs, feeds_digest

                stage = "the run for its outputs failed: "
                extra = {"outputs": compact_outputs(new), "feeds_digest": feeds_digest(new.feeds)}
        except Exception as exc:
            if new is not None:
                new.close()  # its server threads end with it
            self.send(proto.BuildFailed(config_id, f"{stage}{type(exc).__name__}: {one_line(exc)}"))
            self._run()  # whatever ran before keeps running
            return
        old = self.sessions.pop(config_id, None)
        if old is not None:
            old.close()
            del old
            release_memory()
        self.sessions[config_id] = new
        self.send(proto.Built(config_id, {
            "create_ms": new.create_ns / 1e6,
            "first_run_ms": first_ns / 1e6,
            "warmup_ms": warm_ms,
            "providers_active": new.providers_active,
            "providers_requested": prof.providers(),
            "feeds": model_mod.describe_feeds(new.feeds),
            "shapes": [{k: list(v.shape) for k, v in f.items()} for f in new.feed_sets],
            "shape_labels": [v.label() for v in new.variants],
            "notes": list(new.notes) + ([f"warm-up stopped after {WARMUP_LIMIT_NS // 10**9} s, before its "
                                         f"{prof.workload.warmup_runs} runs"] if new.warmup_cut else []),
            "replicas": len(new.members),
            "shares": [list(x) if x else None for x in new.shares],
            "pid": os.getpid(),
            "rss_before": rss_before,
            "rss_after": process_rss(),
            "model": prof.model,
            "ort_version": getattr(sys.modules.get("onnxruntime"), "__version__", None),
            **extra,
        }))
        self._run()

    def _drop(self, config_id: int) -> None:
        if self.loop is not None and self.loop.config_id == config_id:
            self._halt_live()
        if self.alt is not None and config_id in self.alt.ids:
            self._end_alternation(completed=False)
        if self.live_id == config_id:
            self.live_id = None
        self.failed.discard(config_id)
        old = self.sessions.pop(config_id, None)
        if old is not None:
            old.close()
            del old
            release_memory()


def workload_shapes(prof: Any, info: Any) -> tuple[Any, list[Any]]:
    """The trace a profile replays (or None) and the distinct input shapes its requests use (a mix's, a trace's)."""
    from ortop.measure.arrivals import TRACE, mode_of
    from ortop.model import mixes
    from ortop.model import trace as trace_mod

    w = prof.workload
    if mode_of(w) == TRACE:
        trace = trace_mod.load(w.trace, info)
        if w.trace_loop:
            trace = trace.looped()
        return trace, list(trace.variants)
    return None, mixes.variants(info, w.dim_mix, w.shape_mix)


def worker_main(conn, model_path: str) -> None:
    """Entry point of the worker process (spawned)."""
    import signal

    # Ctrl-C at a terminal reaches the whole process group: the parent decides what an interrupt means (finish
    # with what was measured) and stops this worker itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send = Sender(conn)
    capture_stderr(send)
    die_with_parent()
    check_preload(send)
    # A CUDA or TensorRT build preloads the CUDA libraries first (runtime.session); a failure is one warning here.
    set_warning_sink(lambda text: send(proto.Log(text, "warning")))
    set_os_thread_name("ortop-worker")  # the main thread: builds sessions and serves the parent's commands
    try:
        import onnxruntime  # noqa: F401  (loaded once, up front: a build's memory figure is then the session's own)
    except Exception as exc:  # reported by the first Build
        send(proto.Log(f"cannot import onnxruntime: {exc}"))
    name_library_threads()  # before any session: the threads started later are ORT's pools
    worker = Worker(conn, send, model_path)
    try:
        worker.serve()
    finally:
        conn.close()
