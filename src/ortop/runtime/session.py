"""A built session (feeds, the way one run is made) and the timed caller loop that drives it.

Imported by the worker process only after it has redirected fd 2: onnxruntime is imported inside the functions,
so this module stays cheap and ORT's first words land in the captured pipe.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.runtime.child import set_os_thread_name


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:500] if text else type(exc).__name__


class Session:
    """A built session with its feeds and the way one run is made (plain run or IO binding)."""

    def __init__(self, profile: Profile, model_info: Any) -> None:
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
        self._bound: dict[int, Any] = {}  # caller index -> IOBinding (one loop at a time drives a session)
        self.warm_mean_ms = float("nan")  # mean of the warm-up runs, once warm() has run
        self.warmup_cut = False           # warm-up stopped at WARMUP_LIMIT_NS before warmup_runs
        self.members: tuple[Session, ...] = (self,)   # what a Loop drives: this session alone
        self.shares: tuple[tuple[int, ...] | None, ...] = (None,)

    def warm(self) -> tuple[int, float]:
        """The first run (timed apart: it pays for lazy initialisation) and the profile's other warm-up runs.

        Returns (first run ns, mean ms of the other warm-up runs, nan when there were none).
        """
        run = self.runner(0)
        t0 = time.perf_counter_ns()
        run()
        first_ns = time.perf_counter_ns() - t0
        n = max(0, self.profile.workload.warmup_runs - 1)
        t1 = time.perf_counter_ns()
        deadline = t1 + WARMUP_LIMIT_NS
        done = 0
        for _ in range(n):  # bounded by time too: a slow model with a large warmup_runs would never start measuring
            run()
            done += 1
            if time.perf_counter_ns() > deadline:
                break
        self.warmup_cut = done < n
        mean_ms = (time.perf_counter_ns() - t1) / 1e6 / done if done else float("nan")
        self.warm_mean_ms = mean_ms
        return first_ns, mean_ms

    def binding(self, caller: int):
        """One IOBinding per caller: inputs copied to the device once, outputs left on the device."""
        import onnxruntime as ort

        b = self._bound.get(caller)
        if b is None:
            b = self.sess.io_binding()
            for name, arr in self.feeds.items():
                b.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr, self.device, self.device_id))
            if self.profile.cuda_graph():
                # CUDA graph replay needs outputs at fixed addresses: preallocate them from the first plain run.
                outs = self.sess.run(None, self.feeds)
                for name, arr in zip(self.output_names, outs):
                    value = ort.OrtValue.ortvalue_from_shape_and_type(arr.shape, arr.dtype, self.device, self.device_id)
                    b.bind_ortvalue_output(name, value)
            else:
                for name in self.output_names:
                    b.bind_output(name, self.device, self.device_id)
            self._bound[caller] = b
        return b

    def runner(self, caller: int = 0) -> Callable[[], Any]:
        """A zero-argument callable that makes one inference: what the timed loop calls."""
        if self.io_binding:
            b = self.binding(caller)
            run = self.sess.run_with_iobinding
            return lambda: run(b)
        if any(a.dtype.name == "bfloat16" for a in self.feeds.values()):
            # run() cannot take ml_dtypes arrays: bfloat16 goes in as an OrtValue of its raw bits.
            import onnxruntime as ort
            from onnx import TensorProto

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


class Replicas:
    """``workload.replicas`` sessions of one model, served at once: each its own session (its own pool, or the
    global pools) and its own callers; with ``shares`` each replica is pinned to its cores
    (:mod:`ortop.config.replicas`). Reads like a :class:`Session` where the worker and the loop need it."""

    def __init__(self, profile: Profile, model_info: Any, shares: Any = None) -> None:
        from ortop.config.replicas import overlap_note, replica_profile

        n = profile.workload.replicas
        self.profile = profile
        self.shares: tuple[tuple[int, ...] | None, ...] = tuple(shares) if shares else (None,) * n
        notes: list[str] = []
        members = []
        for share in self.shares:
            prof, said = replica_profile(profile, share)
            members.append(Session(prof, model_info))
            notes.extend(x for x in said if x not in notes)
        self.members = tuple(members)
        first = self.members[0]
        self.feeds, self.notes = first.feeds, [*first.notes, *notes]
        overlap = overlap_note([x for x in self.shares if x])
        if overlap:
            self.notes.append(overlap)
        self.create_ns = sum(m.create_ns for m in self.members)
        self.providers_active = first.providers_active
        self.warm_mean_ms = float("nan")
        self.warmup_cut = False

    def warm(self) -> tuple[int, float]:
        """Warm every replica; the slowest first run and the mean of the warm-up means."""
        firsts, means = [], []
        for m in self.members:
            first_ns, mean_ms = m.warm()
            firsts.append(first_ns)
            means.append(mean_ms)
        self.warmup_cut = any(m.warmup_cut for m in self.members)
        self.warm_mean_ms = float(np.nanmean(means)) if not all(np.isnan(means)) else float("nan")
        return max(firsts), self.warm_mean_ms


def build(profile: Profile, model_info: Any, shares: Any = None) -> Session | Replicas:
    """One session, or the replicas the profile asks for (a pinned single replica too: it is placed)."""
    if profile.workload.replicas == 1 and not shares:
        return Session(profile, model_info)
    return Replicas(profile, model_info, shares)


WARMUP_LIMIT_NS = 30_000_000_000  # warm-up ends after 30 s whatever warmup_runs says
FAST_RUN_MS = 0.2  # closed-loop runs shorter than this (warm-up mean) skip the per-run process clock


class Loop:
    """K caller threads per replica driving a session (or each of its replicas), closed loop or paced; each caller
    appends per-run rows to its own list.

    A row is (start_ns, latency_ns, cpu_in_ns, cpu_between_ns), and ``take()`` adds the replica's index; the cpu
    columns are -1 with more than one caller, where one process clock cannot be split between overlapping runs.
    Each replica is paced at the profile's rate: N replicas serve N times the rate, like N servers.
    """

    def __init__(self, session: Session | Replicas, config_id: int, on_error: Callable[[int, str], None]):
        self.session = session
        self.config_id = config_id
        self.on_error = on_error
        self.stop = threading.Event()
        w = session.profile.workload
        self.k = w.concurrency
        self.period_ns = int(1e9 * self.k / w.rate_hz) if w.rate_hz > 0 else 0
        # (replica, caller index within it) per caller thread
        self.callers = [(r, i) for r in range(len(session.members)) for i in range(self.k)]
        self.rows: list[list[tuple]] = [[] for _ in self.callers]
        # Per-run CPU needs two process-clock reads per run (a system call each, ~0.5 µs here): on a model of tens
        # of µs in a closed loop that is several percent of its time, and the CPU between runs it measures is nil
        # there anyway. Such loops take the process CPU per window instead (per run = window CPU / runs).
        self.tracks_cpu = len(self.callers) == 1 and not (
            self.period_ns == 0 and session.warm_mean_ms < FAST_RUN_MS)
        many = len(session.members) > 1
        self.threads = [
            threading.Thread(target=self._caller, args=(n,), daemon=True,
                             name=f"ortop-r{r}c{i}" if many else f"ortop-caller-{i}")  # ≤ 15 chars: OS limit
            for n, (r, i) in enumerate(self.callers)
        ]
        self.started_ns = 0

    def start(self) -> None:
        self.started_ns = time.perf_counter_ns()
        for t in self.threads:
            t.start()

    def _caller(self, n: int) -> None:
        set_os_thread_name(threading.current_thread().name)
        r, i = self.callers[n]
        try:
            share = self.session.shares[r]
            if share:
                os.sched_setaffinity(0, share)  # 0: this thread (Linux), the replica's pool thread 0
            run = self.session.members[r].runner(i)
        except Exception as exc:
            self.on_error(self.config_id, f"{type(exc).__name__}: {one_line(exc)}")
            return
        out = self.rows[n]
        append = out.append
        perf, cpu = time.perf_counter_ns, time.process_time_ns
        stop = self.stop
        track_cpu = self.tracks_cpu
        period = self.period_ns
        next_at = perf() + (period * n) // len(self.callers)  # callers (and replicas) spread over the period
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
            self.on_error(self.config_id, f"{type(exc).__name__}: {one_line(exc)}")

    def take(self) -> np.ndarray:
        """The rows appended since the last take, as int64 (n, 5) with the replica last, callers one after the
        other."""
        parts = []
        for (r, _), lst in zip(self.callers, self.rows):
            n = len(lst)
            if n:
                part = np.empty((n, 5), dtype=np.int64)
                part[:, :4] = lst[:n]
                part[:, 4] = r
                parts.append(part)
                del lst[:n]
        return np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)

    def halt(self) -> None:
        """Stop the callers and wait for them (a run in flight finishes first); the rows stay for take()."""
        self.stop.set()
        for t in self.threads:
            t.join()
