"""A built session (feeds, the way one run is made) and the timed caller loop that drives it.

Imported by the worker process only after it has redirected fd 2: onnxruntime is imported inside the functions,
so this module stays cheap and ORT's first words land in the captured pipe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.config.providers import CUDA, TENSORRT
from ortop.errors import one_line
from ortop.model import mixes
from ortop.model.mixes import Variant
from ortop.runtime import iobind
from ortop.runtime.child import preload_cuda_libraries
from ortop.runtime.serve import Server


class ShapeRefused(Exception):
    """A distinct input shape of a mix or trace that the model refuses (a bad input, exit 2 for the user)."""


def describe(feeds: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {'x'.join(map(str, v.shape))}" for k, v in feeds.items())


class Session:
    """A built session with its feeds and the way one run is made (plain run or IO binding)."""

    def __init__(self, profile: Profile, model_info: Any, variants: Sequence[Variant] = (), *,
                 share: tuple[int, ...] | None = None, tag: str = "") -> None:
        import onnxruntime as ort

        from ortop import model as model_mod
        from ortop.runtime import options as ortopts

        self.profile = profile
        w = profile.workload
        self.variants = list(variants) if variants else [Variant()]
        self.feed_sets: list[dict[str, Any]] = []
        self.notes: list[str] = []
        for v in self.variants:  # one feed per distinct shape, made before measuring, never on the hot path
            feeds, notes = model_mod.make_feeds(
                model_info, dims={**w.dims, **v.dims}, shapes={**w.shapes, **v.shapes}, values=w.values,
                inputs={**w.inputs, **v.inputs}, batch=w.batch, seed=w.seed)
            self.feed_sets.append(feeds)
            self.notes.extend(n for n in notes if n not in self.notes)
        self.feeds = self.feed_sets[0]
        self.shape_weights = mixes.weights(self.variants)
        self.trace: Any = None  # a runtime.trace.Trace when the workload replays one (set by the worker)
        if profile.cuda_graph() and w.concurrency > 1:
            raise ValueError(f"enable_cuda_graph with workload.concurrency = {w.concurrency}: ORT runs a graph-enabled "
                             "session from one thread at a time; set concurrency = 1 (replicas serve in parallel)")
        if profile.provider_name() in (CUDA, TENSORRT):
            preload_cuda_libraries()  # before the provider's library loads; warns once per process when it fails
        so = ortopts.session_options(profile)
        t0 = time.perf_counter_ns()
        self.sess = ort.InferenceSession(profile.model, sess_options=so, providers=ortopts.provider_list(profile))
        self.create_ns = time.perf_counter_ns() - t0
        self.providers_active = list(self.sess.get_providers())
        self.output_names = [o.name for o in self.sess.get_outputs()]
        self.io_binding = profile.provider.io_binding
        # CUDA and TensorRT bind on the GPU (as the exporters do); a provider that fell back binds on the CPU.
        self.device = "cuda" if iobind.gpu_device(profile.provider_name(), self.providers_active) else "cpu"
        self.device_id = int(profile.provider.options.get("device_id", 0) or 0)
        self.graphs = self.io_binding and profile.cuda_graph() and self.device == "cuda"
        self._bound: dict[tuple[int, int], iobind.Bound] = {}  # (caller, shape) -> its binding, made on that thread
        self.warm_mean_ms = float("nan")  # mean of the warm-up runs, once warm() has run
        self.warmup_cut = False           # warm-up stopped at WARMUP_LIMIT_NS before warmup_runs
        self.members: tuple[Session, ...] = (self,)   # what a Loop drives: this session alone
        self.shares: tuple[tuple[int, ...] | None, ...] = (share,)
        # The callers: server threads that live as long as the session. They warm it up themselves and serve every
        # loop (live and each block of an alternation), so per-thread state (IO bindings, ORT's per-thread CUDA
        # context and graphs) is made once, on the thread that uses it.
        many = bool(tag)
        self.servers = tuple(
            Server(f"ortop-{tag}c{i}" if many else f"ortop-caller-{i}", share)  # ≤ 15 chars: the OS's limit
            for i in range(w.concurrency))

    def close(self) -> None:
        """End the server threads (the session is being dropped)."""
        for s in self.servers:
            s.close()

    def warm(self) -> tuple[int, float]:
        """The first run (timed apart: it pays for lazy initialisation) and the profile's other warm-up runs.

        Runs on the session's first server thread; every other server then makes one run of its own, and each
        distinct input shape of a mix is run once, so a shape the model refuses fails the build, named. With CUDA
        graphs the first run of each shape captures its graph here, on the thread that goes on to serve it.
        Returns (first run ns, mean ms of the other warm-up runs, nan when there were none).
        """
        out = self.servers[0].call(self._warm)
        for i, server in enumerate(self.servers[1:], start=1):
            server.call(self._one_run(i))
        return out

    def _one_run(self, caller: int) -> Callable[[], Any]:
        return lambda: self.runner(caller)()

    def _warm(self) -> tuple[int, float]:
        for k in range(1, len(self.variants)):
            try:
                self.runner(0, k)()
            except Exception as exc:
                raise ShapeRefused(f"input shape {self.variants[k].label()} ({describe(self.feed_sets[k])}): "
                                   f"{mixes.SHAPE_REFUSED}: {one_line(exc)}") from exc
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

    def bound(self, caller: int, shape: int = 0) -> iobind.Bound:
        """The binding of one caller and input shape, made once, on the calling thread (the caller's server).

        Without CUDA graphs: inputs copied to the device once, outputs left there by ORT. With them: outputs
        allocated up front too, and the first run captures the shape's own graph (``gpu_graph_id`` = shape + 1),
        which only this thread replays.
        """
        b = self._bound.get((caller, shape))
        if b is None:
            b = iobind.Bound(self.sess, self.feed_sets[shape], self.device, self.device_id,
                             graph_id=shape + 1 if self.graphs else None)
            self._bound[(caller, shape)] = b
        return b

    def binding(self, caller: int, shape: int = 0) -> Any:
        """ORT's IOBinding of one caller and input shape (see :meth:`bound`)."""
        return self.bound(caller, shape).binding

    def runner(self, caller: int = 0, shape: int = 0) -> Callable[[], Any]:
        """A zero-argument callable that makes one inference of input shape ``shape``: what the loop calls."""
        feeds = self.feed_sets[shape]
        if self.io_binding:
            b = self.bound(caller, shape)
            b.check_thread()
            return b.runner()
        if any(a.dtype.kind not in "biufcOUS" for a in feeds.values()):
            # run() cannot take ml_dtypes arrays (bfloat16, float8): they go in as OrtValues of their raw bits.
            import onnxruntime as ort

            values = {}
            for name, arr in feeds.items():
                if arr.dtype.kind not in "biufcOUS":
                    values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                        iobind.raw(arr), iobind.numpy_element_type(arr.dtype))
                else:
                    values[name] = ort.OrtValue.ortvalue_from_numpy(arr)
            run_ov = self.sess.run_with_ort_values
            return lambda: run_ov(None, values)
        run = self.sess.run
        return lambda: run(None, feeds)


class Replicas:
    """``workload.replicas`` sessions of one model, served at once: each its own session (its own pool, or the
    global pools) and its own callers; with ``shares`` each replica is pinned to its cores
    (:mod:`ortop.config.replicas`). Reads like a :class:`Session` where the worker and the loop need it."""

    def __init__(self, profile: Profile, model_info: Any, shares: Any = None, variants: Sequence[Variant] = ()) -> None:
        from ortop.config.replicas import overlap_note, replica_profile

        n = profile.workload.replicas
        self.profile = profile
        self.shares: tuple[tuple[int, ...] | None, ...] = tuple(shares) if shares else (None,) * n
        notes: list[str] = []
        members = []
        try:
            for r, share in enumerate(self.shares):
                prof, said = replica_profile(profile, share)
                members.append(Session(prof, model_info, variants, share=share, tag=f"r{r}"))
                notes.extend(x for x in said if x not in notes)
        except Exception:
            for m in members:  # the replicas built before the one that failed: their server threads end
                m.close()
            raise
        self.members = tuple(members)
        first = self.members[0]
        self.feeds, self.notes = first.feeds, [*first.notes, *notes]
        overlap = overlap_note([x for x in self.shares if x])
        if overlap:
            self.notes.append(overlap)
        self.variants, self.feed_sets, self.shape_weights = first.variants, first.feed_sets, first.shape_weights
        self.trace: Any = None
        self.create_ns = sum(m.create_ns for m in self.members)
        self.providers_active = first.providers_active
        self.warm_mean_ms = float("nan")
        self.warmup_cut = False

    def close(self) -> None:
        for m in self.members:
            m.close()

    def warm(self) -> tuple[int, float]:
        """Warm every replica, one after the other (with CUDA graphs each captures under the process's capture lock,
        so no replica allocates while another captures); the slowest first run and the mean of the warm-up means."""
        firsts, means = [], []
        for m in self.members:
            first_ns, mean_ms = m.warm()
            firsts.append(first_ns)
            means.append(mean_ms)
        self.warmup_cut = any(m.warmup_cut for m in self.members)
        self.warm_mean_ms = float(np.nanmean(means)) if not all(np.isnan(means)) else float("nan")
        return max(firsts), self.warm_mean_ms


def build(profile: Profile, model_info: Any, shares: Any = None,
          variants: Sequence[Variant] = ()) -> Session | Replicas:
    """One session, or the replicas the profile asks for (a pinned single replica too: it is placed).

    ``variants``: the distinct input shapes of a mix or a trace (one feed each); none = the profile's one shape.
    """
    if profile.workload.replicas == 1 and not shares:
        return Session(profile, model_info, variants)
    return Replicas(profile, model_info, shares, variants)


WARMUP_LIMIT_NS = 30_000_000_000  # warm-up ends after 30 s whatever warmup_runs says
