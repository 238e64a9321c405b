"""The inference worker: a child process that owns the InferenceSession and runs the measured loop.

Why a process: its CPU time is the model's (inference plus the thread pool's spinning) and nothing else; ORT's
writes to fd 2 are caught here instead of scribbling over a terminal UI; environment knobs that ORT reads at load
time need a fresh process; and a crash or CUDA OOM kills only this process.

Protocol (multiprocessing Connection, pickled tuples). Parent → worker:
  ("apply", config_id, profile_dict)   build a new session; on failure keep the old one running
  ("pause",) / ("resume",)             stop or restart the callers (the session stays)
  ("stop",)                            exit
Worker → parent:
  ("state", name, config_id)           "building" | "warming" | "measuring" | "paused"
  ("built", config_id, info)           session ready: create/first-run times, providers, feeds
  ("build_failed", config_id, message) the new profile failed; the previous session (if any) keeps running
  ("samples", config_id, rows, window) rows: int64 [start_ns, latency_ns, cpu_in_ns, cpu_between_ns] per run
                                       (cpu columns -1 with concurrent callers); window: (wall_ns, cpu_ns)
  ("run_error", config_id, message)    Run() raised: the loop stops until the next apply
  ("log", line)                        a line ORT (or Python) wrote to stderr, ANSI colour stripped
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import Any

FLUSH_NS = 100_000_000  # samples reach the parent in batches every ~100 ms (the UI draws at 2 Hz)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _capture_stderr(send) -> None:
    """Point fd 2 at a pipe read by a thread that forwards each line to the parent.

    Must run before onnxruntime is imported: ORT's logger writes to fd 2 directly. A pipe fd handed to a spawned
    child is not inherited, so the redirect happens here, inside the child.
    """
    r, w = os.pipe()
    os.dup2(w, 2)
    os.dup2(w, 1)  # stdout too: onnxruntime's Python layer print()s its provider-fallback banner there
    os.close(w)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)

    def reader() -> None:
        with os.fdopen(r, "rb", buffering=0) as fh:
            buf = b""
            while True:
                chunk = fh.read(4096)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    text = ANSI.sub("", line.decode("utf-8", "replace")).rstrip()
                    if text:
                        try:
                            send(("log", text))
                        except (OSError, ValueError):
                            return

    threading.Thread(target=reader, name="ortop-stderr", daemon=True).start()


def _die_with_parent() -> None:
    """Second guard besides EOF on the command pipe: the kernel kills us when the parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(0)
    except OSError:
        pass


class _Sender:
    """Connection.send from several threads (callers, stderr reader) needs one lock."""

    def __init__(self, conn):
        self.conn = conn
        self.lock = threading.Lock()

    def __call__(self, msg: tuple) -> None:
        with self.lock:
            self.conn.send(msg)


class _Session:
    """A built session with its feeds and the way one run is made (plain run or IO binding)."""

    def __init__(self, profile, model_info, send):
        import numpy as np  # noqa: F401  (imported here so the module stays cheap for the parent)
        import onnxruntime as ort

        from ortop import model as model_mod
        from ortop.runtime import options as ortopts

        self.profile = profile
        w = profile.workload
        self.feeds, self.notes = model_mod.make_feeds(
            model_info, dims=w.dims, shapes=w.shapes, values=w.values, inputs=w.inputs, batch=w.batch, seed=w.seed
        )
        so = ortopts.session_options(profile)
        t0 = time.perf_counter_ns()
        self.sess = ort.InferenceSession(profile.model, sess_options=so, providers=ortopts.provider_list(profile))
        self.create_ns = time.perf_counter_ns() - t0
        self.providers_active = list(self.sess.get_providers())
        self.output_names = [o.name for o in self.sess.get_outputs()]
        self.io_binding = profile.provider.io_binding
        self.device = "cpu"
        self.device_id = int(profile.provider.options.get("device_id", 0) or 0)
        if profile.provider_name() == "CUDAExecutionProvider" and "CUDAExecutionProvider" in self.providers_active:
            self.device = "cuda"
        self._bound: dict[int, Any] = {}

    def binding_for_thread(self):
        """One IOBinding per caller thread: inputs copied to the device once, outputs left on the device."""
        import onnxruntime as ort

        key = threading.get_ident()
        b = self._bound.get(key)
        if b is None:
            b = self.sess.io_binding()
            for name, arr in self.feeds.items():
                b.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr, self.device, self.device_id))
            if self.profile.cuda_graph():
                # CUDA graph replay needs outputs at fixed addresses: preallocate them from the first plain run.
                outs = self.sess.run(None, self.feeds)
                for name, arr in zip(self.output_names, outs):
                    b.bind_ortvalue_output(
                        name, ort.OrtValue.ortvalue_from_shape_and_type(arr.shape, arr.dtype, self.device, self.device_id)
                    )
            else:
                for name in self.output_names:
                    b.bind_output(name, self.device, self.device_id)
            self._bound[key] = b
        return b

    def runner(self):
        """A zero-argument callable that makes one inference: what the timed loop calls."""
        if self.io_binding:
            b = self.binding_for_thread()
            run = self.sess.run_with_iobinding
            return lambda: run(b)
        if any(a.dtype.name == "bfloat16" for a in self.feeds.values()):
            # run() cannot take ml_dtypes arrays: bfloat16 goes in as an OrtValue of its raw bits.
            from onnx import TensorProto
            import onnxruntime as ort

            values = {}
            for name, arr in self.feeds.items():
                if arr.dtype.name == "bfloat16":
                    values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                        arr.view("uint16"), TensorProto.BFLOAT16)
                else:
                    values[name] = ort.OrtValue.ortvalue_from_numpy(arr)
            run_ov = self.sess.run_with_ort_values
            return lambda: run_ov(None, values)
        run, feeds = self.sess.run, self.feeds
        return lambda: run(None, feeds)


class _Loop:
    """K caller threads driving one session, closed loop or paced; each appends per-run rows to its own list."""

    def __init__(self, session: _Session, config_id: int, send, on_error):
        self.session = session
        self.config_id = config_id
        self.send = send
        self.on_error = on_error
        self.stop = threading.Event()
        w = session.profile.workload
        self.k = w.concurrency
        self.period_ns = int(1e9 * self.k / w.rate_hz) if w.rate_hz > 0 else 0
        self.rows: list[list[tuple]] = [[] for _ in range(self.k)]
        self.threads = [
            threading.Thread(target=self._caller, args=(i,), name=f"ortop-caller-{i}", daemon=True)
            for i in range(self.k)
        ]
        self.last_flush = time.perf_counter_ns()
        self.last_cpu = time.process_time_ns()

    def start(self) -> None:
        self.last_flush = time.perf_counter_ns()
        self.last_cpu = time.process_time_ns()
        for t in self.threads:
            t.start()

    def _caller(self, i: int) -> None:
        run = self.session.runner()
        out = self.rows[i]
        append = out.append
        perf, cpu = time.perf_counter_ns, time.process_time_ns
        stop = self.stop
        track_cpu = self.k == 1
        period = self.period_ns
        next_at = perf() + (period * i) // max(1, self.k)
        prev_end_cpu = cpu()
        try:
            while not stop.is_set():
                if period:
                    wait = next_at - perf()
                    if wait > 0:
                        if stop.wait(wait / 1e9):
                            break
                    next_at += period
                    now = perf()
                    if next_at < now - period:  # fell behind: do not burst to catch up
                        next_at = now
                if track_cpu:
                    c0 = cpu()
                    t0 = perf()
                    run()
                    t1 = perf()
                    c1 = cpu()
                    append((t0, t1 - t0, c1 - c0, c0 - prev_end_cpu))
                    prev_end_cpu = c1
                else:
                    t0 = perf()
                    run()
                    append((t0, perf() - t0, -1, -1))
        except Exception as exc:  # a Run() failure is reported, never raised into the void
            self.on_error(self.config_id, f"{type(exc).__name__}: {_one_line(exc)}")

    def flush(self, force: bool = False) -> None:
        import numpy as np

        now = time.perf_counter_ns()
        if not force and now - self.last_flush < FLUSH_NS:
            return
        batch: list[tuple] = []
        for lst in self.rows:
            n = len(lst)
            if n:
                batch.extend(lst[:n])
                del lst[:n]
        cpu_now = time.process_time_ns()
        window = (now - self.last_flush, cpu_now - self.last_cpu)
        self.last_flush, self.last_cpu = now, cpu_now
        rows = np.array(batch, dtype=np.int64).reshape(-1, 4)
        self.send(("samples", self.config_id, rows, window))

    def halt(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        self.flush(force=True)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500] if text else type(exc).__name__


def worker_main(conn, model_path: str) -> None:
    """Entry point of the worker process (spawned)."""
    send = _Sender(conn)
    _capture_stderr(send)
    _die_with_parent()

    from ortop import model as model_mod
    from ortop.config import profile as profile_mod

    info = model_mod.load_model(model_path)
    session: _Session | None = None
    loop: _Loop | None = None
    paused = False
    errors: list[tuple[int, str]] = []

    def on_error(config_id: int, message: str) -> None:
        errors.append((config_id, message))

    def start_loop() -> None:
        nonlocal loop
        if session is not None and not paused and not errors:
            loop = _Loop(session, current_id, send, on_error)
            loop.start()
            send(("state", "measuring", current_id))
        elif session is not None and paused:
            send(("state", "paused", current_id))  # rebuilt while paused: still paused, not "warming"

    current_id = -1
    while True:
        try:
            timeout = 0.02 if loop is not None else None
            msg = conn.recv() if (timeout is None or conn.poll(timeout)) else None
        except (EOFError, OSError):
            break  # parent gone
        if loop is not None:
            loop.flush()
            if errors:
                loop.halt()
                loop = None
                cid, message = errors.pop(0)
                errors.clear()
                send(("run_error", cid, message))
        if msg is None:
            continue
        cmd = msg[0]
        if cmd == "stop":
            break
        if cmd == "pause":
            paused = True
            if loop is not None:
                loop.halt()
                loop = None
            send(("state", "paused", current_id))
        elif cmd == "resume":
            paused = False
            errors.clear()
            if loop is None:
                start_loop()
        elif cmd == "apply":
            _, config_id, data = msg
            if loop is not None:
                loop.halt()
                loop = None
            send(("state", "building", config_id))
            try:
                prof = profile_mod.from_dict(data)
                new = _Session(prof, info, send)
                send(("state", "warming", config_id))
                run = new.runner()
                t0 = time.perf_counter_ns()
                run()
                first_ns = time.perf_counter_ns() - t0
                for _ in range(max(0, prof.workload.warmup_runs - 1)):
                    run()
            except Exception as exc:
                send(("build_failed", config_id, f"{type(exc).__name__}: {_one_line(exc)}"))
                errors.clear()
                start_loop()  # the previous session, if any, keeps running
                continue
            session, current_id = new, config_id
            errors.clear()
            send(("built", config_id, {
                "create_ms": new.create_ns / 1e6,
                "first_run_ms": first_ns / 1e6,
                "providers_active": new.providers_active,
                "providers_requested": prof.providers(),
                "feeds": model_mod.describe_feeds(new.feeds),
                "notes": list(new.notes),
                "pid": os.getpid(),
            }))
            start_loop()
    if loop is not None:
        loop.halt()
    conn.close()
