"""The callers: server threads that live as long as their session, and the loop that drives them.

A :class:`Server` is one thread that runs jobs handed to it: the session's warm-up, then each loop (the live one,
or one block of an alternation). Threads are not made afresh per block, so what ORT keeps per thread (IO
bindings, its CUDA context and graphs) is made once, on the thread that measures.

A :class:`Loop` is one measuring period over a session's servers. Closed loop: each server runs back to back.
Open loop (fixed, Poisson, trace): requests arrive on a seeded schedule (:mod:`ortop.measure.arrivals`), wait in
a FIFO queue per replica, and a free server takes the oldest; response time counts from the scheduled arrival.

A row per run (int64): start_ns, service_ns (inside Run()), cpu_in_ns, cpu_between_ns, replica, queue_ns (start
− scheduled arrival; 0 in a closed loop), shape (the input shape's index), idle_ns (how long the server sat idle
before this run). The cpu columns are -1 with more than one caller, where one process clock cannot be split.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ortop.errors import one_line
from ortop.measure import arrivals as A
from ortop.measure.rows import COLUMNS, Col
from ortop.runtime.child import set_os_thread_name, set_timer_slack

FAST_RUN_MS = 0.2  # closed-loop runs shorter than this (warm-up mean) skip the per-run process clock


class Server:
    """One caller thread: runs the jobs it is handed, one at a time, until closed."""

    def __init__(self, name: str, share: tuple[int, ...] | None = None):
        self.name = name
        self.share = share
        self.last_end_ns = 0          # when its last run ended (0: none yet): the idle gap before the next
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        set_os_thread_name(self.name)
        set_timer_slack(1)  # waits for an arrival end on time: a late wake-up would count as queueing
        if self.share:
            try:
                os.sched_setaffinity(0, self.share)  # 0: this thread (Linux); the replica's cores
            except OSError:
                pass  # cores outside this process's set: the build's notes already say how the split fell
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job()
            job = None  # the loop it served holds the session: let a dropped session be freed

    def submit(self, fn: Callable[[], None]) -> threading.Event:
        """Run ``fn`` on this thread; the event is set when it returns (or raises: ``fn`` reports its own errors)."""
        done = threading.Event()

        def job() -> None:
            try:
                fn()
            finally:
                done.set()

        self._jobs.put(job)
        return done

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on this thread and return its result (its exception is raised here)."""
        box: dict[str, Any] = {}

        def job() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed back to the calling thread, raised there
                box["error"] = exc

        self.submit(job).wait()
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def close(self, timeout: float = 5.0) -> None:
        """End the thread and wait for it (a run in flight finishes first), so that nothing of the session it
        served is still referenced when the caller frees the session's memory."""
        self._jobs.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


class Loop:
    """One measuring period of a session (or its replicas): every server of every member serves it.

    ``take()`` returns the rows appended since the last take (see the module's columns); ``traffic()`` the open
    loop's queue counters since the last call. ``ended`` is set when a finite schedule (a trace) is served whole.
    Each replica has its own queue offered the profile's rate: N replicas serve N times the rate, like N servers.
    """

    def __init__(self, session: Any, config_id: int, on_error: Callable[[int, str], None], *,
                 loop_trace: bool = False, rate_hz: float | None = None, arrival: str | None = None,
                 stream: int = 0):
        self.session = session
        self.loop_trace = loop_trace  # a block of an alternation replays a trace end to end for as long as it lasts
        self.stream = stream          # which draw of the seeded arrivals and shapes (a round of an alternation)
        self.config_id = config_id
        self.on_error = on_error
        self.stop = threading.Event()
        self.ended = threading.Event()
        w = session.profile.workload
        # A rate given here (a capacity search's point) overrides the profile's: the session is not rebuilt.
        # A capacity point's rate is the total offered to the configuration: its replicas share it.
        self.rate_hz = float(w.rate_hz) if rate_hz is None else float(rate_hz) / max(1, len(session.members))
        self.mode = A.mode_of(w) if rate_hz is None and arrival is None else (arrival or A.POISSON)
        self.callers = [(r, i) for r, m in enumerate(session.members) for i in range(len(m.servers))]
        self.rows: list[list[tuple]] = [[] for _ in self.callers]
        # Per-run CPU needs two process-clock reads per run (a system call each, ~0.5 µs here): on a model of tens
        # of µs in a closed loop that is several percent of its time, and the CPU between runs it measures is nil
        # there anyway. Such loops take the process CPU per window instead (per run = window CPU / runs).
        self.tracks_cpu = len(self.callers) == 1 and not (
            self.mode == A.CLOSED and session.warm_mean_ms < FAST_RUN_MS)
        self.n_shapes = len(session.feed_sets)
        self.weights = getattr(session, "shape_weights", None)
        self.started_ns = 0
        self._done: list[threading.Event] = []
        self.queues: list[A.Dispatcher] = []
        self.locks: list[threading.Lock] = []
        self._said = (0, 0)  # (arrived, dropped) already reported by traffic()
        self._last_end: dict[int, int] = {}  # per caller: the end of the last lean row taken

    def _dispatcher(self, r: int, start_ns: int) -> A.Dispatcher:
        w = self.session.profile.workload
        trace = getattr(self.session, "trace", None)
        # Replicas get their own arrivals, and so does each round of an alternation; configurations the same ones
        # (common random numbers).
        seed = int(w.seed) + 7919 * r + 104729 * self.stream
        if self.mode == A.TRACE:
            if trace is None:
                raise ValueError("arrival = 'trace' needs a trace (workload.trace, --trace)")
            if self.loop_trace and not trace.loop:
                trace = trace.looped()
            times = A.offsets(A.TRACE, 0.0, seed, trace.times, float(w.trace_speed), loop=trace.loop)
            shapes = trace.shape_chunks()
            limit = None if trace.loop else len(trace.times)
        else:
            times = A.offsets(self.mode, self.rate_hz, seed)
            shapes = A.shape_ids(self.n_shapes, self.weights, seed)
            limit = None
        rate = trace.rate_hz * float(w.trace_speed) if trace is not None and self.mode == A.TRACE else self.rate_hz
        max_queue = int(w.max_queue) or A.default_max_queue(rate)
        return A.Dispatcher(times, shapes, start_ns, max_queue, limit)

    def start(self) -> None:
        self.started_ns = time.perf_counter_ns()
        if self.mode != A.CLOSED:
            # The first arrival a moment after every server is handed its job; replicas' fixed schedules are
            # spread over one period (N clients out of phase), as Poisson ones are by their own seeds.
            start = self.started_ns + 1_000_000
            n = len(self.session.members)
            rate = self.rate_hz
            phase = int(1e9 / rate / n) if self.mode == A.FIXED and rate > 0 else 0
            self.queues = [self._dispatcher(r, start + r * phase) for r in range(n)]
            self.locks = [threading.Lock() for _ in self.queues]
        for n, (r, i) in enumerate(self.callers):
            server = self.session.members[r].servers[i]
            self._done.append(server.submit(lambda n=n, server=server: self._serve(n, server)))

    def _serve(self, n: int, server: Server) -> None:
        r, i = self.callers[n]
        try:
            member = self.session.members[r]
            runs = [member.runner(i, k) for k in range(self.n_shapes)]
            if self.mode == A.CLOSED:
                self._closed(n, server, runs)
            else:
                self._open(n, server, runs, self.queues[r], self.locks[r])
        except Exception as exc:  # a Run() failure is reported, never raised into the void
            self.on_error(self.config_id, f"{type(exc).__name__}: {one_line(exc)}")

    def _caller(self, n: int, server: Server) -> tuple[int, Callable[[tuple], None], threading.Event, bool, int, int]:
        """What caller ``n``'s loop keeps in locals (a local costs less than an attribute, per run): its replica,
        its rows' append, the stop flag, whether CPU is tracked per run, and when its server's last run ended
        (now, for a first run) with the CPU clock now."""
        prev_end = server.last_end_ns or time.perf_counter_ns()
        return (self.callers[n][0], self.rows[n].append, self.stop, self.tracks_cpu, prev_end, time.process_time_ns())

    def _closed(self, n: int, server: Server, runs: list[Callable[[], Any]]) -> None:
        r, append, stop, track_cpu, prev_end, prev_end_cpu = self._caller(n, server)
        perf, cpu = time.perf_counter_ns, time.process_time_ns
        shapes = A.shape_ids(self.n_shapes, self.weights,
                             int(self.session.profile.workload.seed) + 7919 * r + n + 104729 * self.stream)
        ids: list[int] = next(shapes).tolist()  # Python ints: indexing a list costs less than a numpy scalar
        k, n_ids = 0, len(ids)
        if not track_cpu and self.n_shapes == 1:
            # The leanest loop, for runs of a few µs where every Python operation per run shows in the duty cycle:
            # (start, service) alone; take() fills in the other columns.
            run = runs[0]
            try:
                while not stop.is_set():
                    t0 = perf()
                    run()
                    append((t0, perf() - t0))
            finally:
                try:  # take() may empty the list meanwhile (the worker's flush runs on its own thread)
                    last = self.rows[n][-1]
                    end = last[0] + last[1]
                except IndexError:
                    end = self._last_end.get(n, prev_end)
                server.last_end_ns = max(end, prev_end)
            return
        try:
            while not stop.is_set():
                if k == n_ids:
                    ids, k = next(shapes).tolist(), 0
                s = ids[k]
                k += 1
                run = runs[s]
                if track_cpu:
                    c0 = cpu()
                    t0 = perf()
                    run()
                    t1 = perf()
                    c1 = cpu()
                    append((t0, t1 - t0, c1 - c0, c0 - prev_end_cpu, r, 0, s, t0 - prev_end))
                    prev_end_cpu = c1
                else:
                    t0 = perf()
                    run()
                    t1 = perf()
                    append((t0, t1 - t0, -1, -1, r, 0, s, t0 - prev_end))
                prev_end = t1
        finally:
            server.last_end_ns = prev_end

    def _open(self, n: int, server: Server, runs: list[Callable[[], Any]], disp: A.Dispatcher,
              lock: threading.Lock) -> None:
        r, append, stop, track_cpu, prev_end, prev_end_cpu = self._caller(n, server)
        perf, cpu = time.perf_counter_ns, time.process_time_ns
        try:
            while not stop.is_set():
                with lock:
                    req = disp.claim(perf())
                if req is None:  # a finite schedule (a trace) is served whole
                    if all(q.ended() for q in self.queues):
                        self.ended.set()
                    return
                left = req.arrival_ns - perf()
                if left > 0 and stop.wait(left / 1e9):
                    return
                run = runs[req.shape]
                c0 = cpu() if track_cpu else -1
                t0 = perf()
                run()
                t1 = perf()
                if track_cpu:
                    c1 = cpu()
                    append((t0, t1 - t0, c1 - c0, c0 - prev_end_cpu, r, max(0, t0 - req.arrival_ns), req.shape,
                            t0 - prev_end))
                    prev_end_cpu = c1
                else:
                    append((t0, t1 - t0, -1, -1, r, max(0, t0 - req.arrival_ns), req.shape, t0 - prev_end))
                prev_end = t1
        finally:
            server.last_end_ns = prev_end

    def take(self) -> np.ndarray:
        """The rows appended since the last take, as int64 (n, COLUMNS), callers one after the other."""
        parts = []
        for c, lst in enumerate(self.rows):
            n = len(lst)
            if n:
                part = np.array(lst[:n], dtype=np.int64)
                del lst[:n]
                if part.shape[1] == 2:  # the lean closed loop's (start, service): one shape, no per-run CPU
                    part = self._widen(c, part)
                parts.append(part)
        return np.concatenate(parts) if parts else np.zeros((0, COLUMNS), dtype=np.int64)

    def _widen(self, caller: int, part: np.ndarray) -> np.ndarray:
        """(start, service) rows as full rows: no per-run CPU, shape 0, no queue, the idle gap from the run before
        (the first of a batch from the previous batch's last)."""
        out = np.zeros((len(part), COLUMNS), dtype=np.int64)
        out[:, Col.START] = part[:, 0]
        out[:, Col.SERVICE] = part[:, 1]
        out[:, Col.CPU_IN] = out[:, Col.CPU_BETWEEN] = -1
        out[:, Col.REPLICA] = self.callers[caller][0]
        ends = part[:, 0] + part[:, 1]
        prev = self._last_end.get(caller, part[0, 0])
        out[0, Col.IDLE] = max(0, part[0, 0] - prev)
        out[1:, Col.IDLE] = part[1:, 0] - ends[:-1]
        self._last_end[caller] = int(ends[-1])
        return out

    def traffic(self) -> tuple[int, int, int, int] | None:
        """The open loop's queues since the last call: (arrived, dropped, queue length now, longest queue since
        the start); None in a closed loop."""
        if not self.queues:
            return None
        arrived = dropped = qlen = qmax = 0
        for q, lock in zip(self.queues, self.locks):
            with lock:
                arrived += q.arrived
                dropped += q.dropped
                qlen += q.queue_len
                qmax = max(qmax, q.queue_max)
        d_arr, d_drop = arrived - self._said[0], dropped - self._said[1]
        self._said = (arrived, dropped)
        return d_arr, d_drop, qlen, qmax

    def waiting_before(self, t_ns: int, since_ns: int = 0) -> int:
        """Open arrivals: requests that arrived before ``t_ns`` (at or after ``since_ns``) and have not started yet,
        over every queue."""
        n = 0
        for q, lock in zip(self.queues, self.locks):
            with lock:
                n += q.waiting_before(t_ns, since_ns)
        return n

    def watch_window(self, length_ns: int) -> int:
        """A measuring window starts now and lasts ``length_ns``: every queue counts the sheds of the arrivals
        inside it (read by :meth:`window_shed`). Returns its start, read with every queue held, so that no arrival
        after it was taken in (or shed) before the count began."""
        with contextlib.ExitStack() as held:
            for lock in self.locks:
                held.enter_context(lock)
            start = time.perf_counter_ns()
            for q in self.queues:
                q.watch_window(start, start + length_ns)
        return start

    def window_shed(self) -> int:
        """The requests shed of those that arrived in the window :meth:`watch_window` set, over every queue."""
        n = 0
        for q, lock in zip(self.queues, self.locks):
            with lock:
                n += q.window_dropped
        return n

    def halt(self) -> None:
        """Stop the servers' work and wait for it (a run in flight finishes first); the rows stay for take()."""
        self.stop.set()
        for done in self._done:
            done.wait()
