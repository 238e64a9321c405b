"""What ``ortop tune`` may try: the knobs of ONNX Runtime's performance-tuning guides, pruned by host and model.

The space is a list of dimensions, searched in order (the ones that move figures most come first). Each dimension
turns the current best profile (the incumbent) into a few candidates that differ from it in that dimension only;
the product of all dimensions (:meth:`Space.grid`) is the exhaustive grid a benchmark can check the search against.

Dimensions and their pruning rules:

``threads``
    intra-op threads: powers of two up to the thread cap, and the cap itself (values from the knob registry), plus
    ORT's default (0) where it means what it says. The cap is the usable physical cores, bounded by the CPUs this
    process may use (cpuset / affinity) and by the cgroup CPU quota rounded up: a container with 1.5 CPUs tries 1
    and 2, never ORT's default, which would start a thread per physical core of the whole host. ORT's default
    races once, as the count it resolves to (:attr:`Space.default_threads`: the host's physical cores, or the
    count the tuner saw the start profile's worker run): where that count is tried anyway (or is the start
    profile's own), the default is not raced beside it. With ``spinning`` in the space too, each count is also
    tried with spinning off: the two interact (spinning costs CPU per pool thread), so they are searched
    together.
``spinning``
    spin-wait of the intra-op pool: off, or on with ``spin_duration_us`` and ``spin_backoff_max`` from the knob
    registry. Pruned when the pool has one thread (nothing to spin).
``dynamic_block_base``
    values from the knob registry (0 = off); pruned with one thread.
``execution_mode``
    the parallel executor with inter-op threads (registry values, bounded by the cap), only when the graph has
    parallel branches: two compute nodes on one topological level (neither depends on the other). Never with a
    CUDA graph.
``affinity``
    the pool's threads pinned to one logical CPU per physical core (only on hosts with SMT, where that differs
    from letting the OS place them) or to the CPUs of one NUMA node (only with two or more nodes). Needs an
    explicit thread count of 2 or more.
``arena``, ``mem_pattern``
    the CPU memory arena and the memory pattern, each flipped.
``optimization``
    graph optimization levels (not in the default space: ``all`` is nearly always right).
``io_binding``, ``cuda_graph``, ``conv_algo``, ``conv_workspace``, ``prefer_nhwc``, ``tf32``
    CUDA only (provider ``cuda``). The CUDA graph only where its constraints hold: no If/Loop/Scan, every input
    shape fixed by the model or the workload, IO binding on, the sequential executor, and one caller per session
    (ORT does not support ``Run()`` on one graph-enabled session from several threads, so a workload with
    ``concurrency`` above 1 never gets one). The cuDNN options only for models with convolutions; TF32 only with
    MatMul, Gemm or Conv.

Imports neither onnxruntime nor textual.

Over ~500 lines: one dimension per function (threads, spinning, affinity, CUDA…), each with its pruning rule;
they are read and changed together.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortop.collectors.host import HostFacts
from ortop.config import profile as profile_mod
from ortop.config.diff import change_terms, diff
from ortop.config.profile import Profile
from ortop.config.providers import CUDA

CPU_DIMENSIONS = ("threads", "spinning", "dynamic_block_base", "execution_mode", "affinity", "arena", "mem_pattern",
                  "optimization")
CUDA_DIMENSIONS = ("io_binding", "cuda_graph", "conv_algo", "conv_workspace", "prefer_nhwc", "tf32")
DIMENSIONS = CUDA_DIMENSIONS[:2] + CPU_DIMENSIONS[:5] + CUDA_DIMENSIONS[2:] + CPU_DIMENSIONS[5:]  # search order
NOT_DEFAULT = frozenset({"optimization"})

# Ops whose cost is bookkeeping: two of them side by side are not parallel work worth an inter-op pool.
_TRIVIAL_OPS = frozenset({"Constant", "ConstantOfShape", "Shape", "Size", "Identity", "Cast", "Reshape", "Unsqueeze",
                          "Squeeze", "Flatten", "Range", "Expand"})
_CONV_OPS = frozenset({"Conv", "ConvTranspose", "FusedConv", "QLinearConv", "ConvInteger"})
_TF32_OPS = _CONV_OPS | {"MatMul", "Gemm", "FusedMatMul", "Attention", "MultiHeadAttention"}

_THREADS = "session.intra_op_num_threads"
_SPIN = "session.allow_spinning"
_AFFINITY = "session.intra_op_thread_affinities"
_DEFAULT_NOTE = "threads default:"


# ---- the model's side ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelFacts:
    """What the space needs to know about the model: parallel branches, control flow, ops, fixed input shapes."""

    parallel_branches: bool = False
    control_flow: tuple[str, ...] = ()
    ops: frozenset[str] = frozenset()
    unfixed_dims: tuple[str, ...] = ()   # input dims neither fixed by the model nor by the workload

    @classmethod
    def from_model(cls, info: Any, profile: Profile, graph: Any = None) -> ModelFacts:
        """From an ``ortop.model.ModelInfo``, the workload that feeds it, and the ONNX graph (loaded when None)."""
        if graph is None:
            import onnx

            graph = onnx.load(info.path, load_external_data=False).graph
        return cls(parallel_branches=has_parallel_branches(graph), control_flow=tuple(info.control_flow),
                   ops=frozenset(info.op_histogram), unfixed_dims=unfixed_dims(info, profile))


def has_parallel_branches(graph: Any) -> bool:
    """Whether two compute nodes of the top-level graph sit on one topological level (so neither needs the other).

    A node's level is one more than the deepest of the nodes producing its inputs (graph inputs and initializers:
    0). Two nodes on one level cannot depend on each other: the graph has branches an inter-op pool could run at
    once. Shape bookkeeping (Shape, Cast, Reshape, …) and nodes fed only by constants are not counted.
    """
    init = {t.name for t in graph.initializer}
    producer: dict[str, int] = {}
    level: list[int] = []
    constant: list[bool] = []
    for i, node in enumerate(graph.node):
        lv, const = 0, True
        for name in node.input:
            if not name:
                continue
            j = producer.get(name)
            if j is not None:
                lv = max(lv, level[j])
                const = const and constant[j]
            elif name not in init:
                const = False
        level.append(lv + 1)
        constant.append(const)
        for out in node.output:
            if out:
                producer[out] = i
    per_level: dict[int, int] = {}
    for i, node in enumerate(graph.node):
        if node.op_type in _TRIVIAL_OPS or constant[i]:
            continue
        per_level[level[i]] = per_level.get(level[i], 0) + 1
        if per_level[level[i]] >= 2:
            return True
    return False


def unfixed_dims(info: Any, profile: Profile) -> tuple[str, ...]:
    """Input dims whose size can change from run to run in production: not fixed by the model, nor by the profile's
    workload (``dims``, ``shapes``, ``inputs``, ``batch`` for the leading dim)."""
    w = profile.workload
    out: list[str] = []
    for t in info.inputs:
        if t.name in w.shapes or t.name in w.inputs:
            continue
        for axis, d in enumerate(t.shape or ()):
            if isinstance(d, int) and not isinstance(d, bool) and d > 0:
                continue
            if isinstance(d, str) and d in w.dims:
                continue
            if axis == 0 and w.batch > 0:
                continue
            out.append(d if isinstance(d, str) else f"{t.name}[{axis}]")
    return tuple(dict.fromkeys(out))


# ---- candidates ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """One profile to try: ``stage`` is the dimension that produced it, ``label`` how it differs from the start."""

    profile: Profile
    label: str
    stage: str

    @property
    def key(self) -> str:
        return profile_key(self.profile)


def profile_key(profile: Profile) -> str:
    """A canonical text of everything a profile sets, for telling profiles apart (the model path left out)."""
    data = profile.to_dict(full=True)
    data.pop("model", None)
    data.pop("description", None)
    return json.dumps(data, sort_keys=True, default=str)


def describe(profile: Profile, against: Profile) -> str:
    """How ``profile`` differs from ``against``, short, as each knob spells it: ``threads 2, spin off`` (``as is``
    when equal)."""
    return ", ".join(change_terms(diff(against, profile, settings_only=True))) or "as is"


def _knob_values(key: str, cap: int, fallback: Sequence[Any]) -> tuple[Any, ...]:
    """The values the knob registry says a tuner may try (``fallback`` where it says none)."""
    try:
        from ortop.config import knobs
    except ImportError:  # pragma: no cover - the registry is part of the package
        return tuple(fallback)
    knob = knobs.find(key)
    values = knob.tune(cap) if knob is not None else ()
    return tuple(values) if values else tuple(fallback)


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


# ---- the space ----------------------------------------------------------------------------------------------------
class Space:
    """The dimensions to search for one model on one host, from the start profile.

    ``dimensions``: names from :data:`DIMENSIONS` (None: every one that applies, ``optimization`` excepted).
    ``pruned`` lists, one line each, what was left out and why.
    """

    def __init__(self, start: Profile, host: HostFacts, model: ModelFacts,
                 dimensions: Iterable[str] | None = None):
        self.start = start
        self.host = host
        self.model = model
        self.cuda = start.provider_name() == CUDA  # cuda, CUDAExecutionProvider, any case
        self.pruned: list[str] = []
        # the intra-op threads ORT's default (0) gives a session here: one per physical core, until a worker is
        # seen running it (:meth:`set_default_threads`)
        self.default_threads = max(1, int(host.physical_cores or 1))
        asked = list(dict.fromkeys(dimensions)) if dimensions is not None else None
        if asked is not None:
            unknown = [d for d in asked if d not in DIMENSIONS]
            if unknown:
                raise ValueError(f"unknown space dimension {unknown[0]!r} (known: {', '.join(DIMENSIONS)})")
        chosen = asked if asked is not None else [d for d in DIMENSIONS if d not in NOT_DEFAULT]
        dims: list[str] = []
        for d in DIMENSIONS:
            if d not in chosen:
                continue
            why = self._static_prune(d)
            if why:
                if asked is not None or d not in CUDA_DIMENSIONS:
                    self.pruned.append(f"{d}: {why}")
                continue
            dims.append(d)
        self.dimensions = tuple(dims)
        self._note_default()

    def set_default_threads(self, n: int, seen: bool = True) -> None:
        """The intra-op threads ORT's default resolves to here (``seen``: counted in a worker running it)."""
        if n >= 1:
            self.default_threads = int(n)
            self._note_default(seen)

    def _note_default(self, seen: bool = False) -> None:
        """Say in :attr:`pruned` when ORT's default is not raced beside the count it resolves to."""
        self.pruned = [n for n in self.pruned if not n.startswith(_DEFAULT_NOTE)]
        if "threads" not in self.dimensions or 0 not in self.thread_values():
            return
        n = self.default_threads
        how = "counted in its worker" if seen else "one per physical core"
        if self.start.session.intra_op_num_threads == 0 and n in self.thread_values():
            self.pruned.append(f"{_DEFAULT_NOTE} the start profile's default resolves to {n} here ({how}): "
                               f"threads {n} is the baseline itself, not raced beside it")
        elif n in self.thread_values():
            self.pruned.append(f"{_DEFAULT_NOTE} ORT's default resolves to {n} here ({how}): raced once, as "
                               f"threads {n}")

    # ---- pruning that does not depend on the incumbent ----
    def _static_prune(self, d: str) -> str:
        m, h = self.model, self.host
        if d in CUDA_DIMENSIONS and not self.cuda:
            return "CUDA only (--provider cuda)"
        if d == "execution_mode" and not m.parallel_branches:
            return "the graph has no parallel branches (nothing for an inter-op pool to run at once)"
        if d == "affinity":
            nodes = h.usable_numa_nodes
            if not h.smt and len(nodes) < 2:
                return "no SMT and one NUMA node: pinning would not differ from the default placement"
        if d == "cuda_graph":
            if m.control_flow:
                return f"the graph has control flow ({', '.join(m.control_flow)}), which CUDA graphs cannot capture"
            if m.unfixed_dims:
                return (f"input dims {', '.join(m.unfixed_dims)} are not fixed (a CUDA graph replays fixed shapes; "
                        "fix them with --dim/--shape/--batch)")
            callers = self.start.workload.concurrency
            if callers > 1:
                return (f"workload.concurrency = {callers}: a CUDA-graph session takes one caller (ORT does not "
                        "support Run() on it from several threads)")
        if d in ("conv_algo", "conv_workspace", "prefer_nhwc") and not (m.ops & _CONV_OPS):
            return "the model has no convolutions"
        if d == "tf32" and not (m.ops & _TF32_OPS):
            return "the model has no MatMul, Gemm or Conv"
        return ""

    # ---- helpers ----
    @property
    def thread_cap(self) -> int:
        return self.host.thread_cap

    def thread_values(self) -> tuple[int, ...]:
        """Intra-op thread counts to try: the registry's values up to the cap, and 0 (ORT's default) when unbounded.

        ORT's default pool has one thread per physical core of the host; under a quota or a cpuset that leaves
        fewer CPUs, it oversubscribes, so 0 is only tried where the cap is the host's whole core count.
        """
        cap = self.thread_cap
        values = [int(v) for v in _knob_values(_THREADS, cap, (1, 2, 4, 8)) if 1 <= int(v) <= cap]
        if cap not in values:
            values.append(cap)
        out = sorted(set(values))
        if not self.host.restricted:
            out = [0, *out]
        return tuple(out)

    def pool_threads(self, p: Profile) -> int:
        """Threads in the intra-op pool a profile gets (0 means ORT's default: :attr:`default_threads`)."""
        return p.session.intra_op_num_threads or self.default_threads

    @staticmethod
    def spinning(p: Profile) -> bool:
        return p.session.allow_spinning is not False  # unset = ORT's default: on

    def _make(self, base: Profile, stage: str, changes: Mapping[str, Any]) -> Candidate | None:
        try:
            prof = profile_mod.merge(base, **changes)
        except profile_mod.ProfileError:
            return None  # a combination the profile rules refuse is not a candidate
        return Candidate(prof, describe(prof, self.start), stage)

    # ---- candidates per stage ----
    def candidates(self, stage: str, incumbent: Profile) -> list[Candidate]:
        """The candidates of one dimension around ``incumbent``, in the order worth trying (none equal to it)."""
        changes = getattr(self, f"_c_{stage}")(incumbent)
        out: list[Candidate] = []
        seen = {profile_key(incumbent)}
        for ch in changes:
            c = self._make(incumbent, stage, ch)
            if c is not None and c.key not in seen:
                seen.add(c.key)
                out.append(c)
        return out

    def _c_threads(self, inc: Profile) -> list[dict[str, Any]]:
        """Thread counts (with spinning flipped too, when spinning is searched), most telling first: the current
        count with spinning flipped, the cap, one thread, then the counts between (largest first), ORT's default
        last. A short budget that races only the first few still sees the ends of the range. A count is tried once,
        however it is spelled: ORT's default is left out where the count it resolves to is tried (or is the
        incumbent's), and that count is left out where the incumbent is ORT's default."""
        cur = inc.session.intra_op_num_threads
        values = self.thread_values()
        explicit = [v for v in values if v]
        cap = max(explicit) if explicit else 1
        middle = sorted((v for v in explicit if v not in (1, cap)), reverse=True)
        resolved: set[int] = set()
        counts: list[int] = []
        for t in [cur, cap, 1, *middle, *(v for v in values if v == 0)]:
            pool = t or self.default_threads
            if pool not in resolved:  # the incumbent first: its own pool size is never raced again
                resolved.add(pool)
                counts.append(t)
        spin_too = "spinning" in self.dimensions
        plain: list[dict[str, Any]] = []
        flipped: list[dict[str, Any]] = []
        for t in counts:
            base: dict[str, Any] = {}
            if t != cur:
                base[_THREADS] = t
                if inc.session.intra_op_thread_affinities is not None:
                    base[_AFFINITY] = None  # pinning was for another thread count
                plain.append(base)
            if spin_too and self.pool_threads(replace_threads(inc, t)) > 1:
                flipped.append({**base, _SPIN: not self.spinning(inc)})
        # interleave: current+flip, cap, 1, cap+flip, next count, its flip, …
        out: list[dict[str, Any]] = []
        if flipped and _THREADS not in flipped[0]:
            out.append(flipped.pop(0))
        out += plain[:2]
        rest_plain = plain[2:]
        while flipped or rest_plain:
            if flipped:
                out.append(flipped.pop(0))
            if rest_plain:
                out.append(rest_plain.pop(0))
        return out

    def _c_spinning(self, inc: Profile) -> list[dict[str, Any]]:
        if self.pool_threads(inc) <= 1:
            return []
        out: list[dict[str, Any]] = []
        if "threads" not in self.dimensions:
            out.append({_SPIN: not self.spinning(inc)})
        if self.spinning(inc):
            s = inc.session
            for d in _knob_values("session.spin_duration_us", self.thread_cap, (1000,)):
                if d != s.spin_duration_us:
                    out.append({_SPIN: True, "session.spin_duration_us": int(d)})
            for b in _knob_values("session.spin_backoff_max", self.thread_cap, (1, 8)):
                if b != s.spin_backoff_max:
                    out.append({_SPIN: True, "session.spin_backoff_max": int(b)})
        return out

    def _c_dynamic_block_base(self, inc: Profile) -> list[dict[str, Any]]:
        if self.pool_threads(inc) <= 1:
            return []
        cur = inc.session.dynamic_block_base or 0
        return [{"session.dynamic_block_base": int(v)}
                for v in _knob_values("session.dynamic_block_base", self.thread_cap, (0, 4)) if int(v) != cur]

    def _c_execution_mode(self, inc: Profile) -> list[dict[str, Any]]:
        if inc.cuda_graph():
            return []
        s = inc.session
        inter = [int(v) for v in _knob_values("session.inter_op_num_threads", self.thread_cap, (0, 2))
                 if int(v) <= self.thread_cap]
        if s.execution_mode == "parallel":
            out: list[dict[str, Any]] = [{"session.execution_mode": "sequential", "session.inter_op_num_threads": 0}]
            out += [{"session.inter_op_num_threads": v} for v in inter if v != s.inter_op_num_threads]
            return out
        return [{"session.execution_mode": "parallel", "session.inter_op_num_threads": v} for v in inter]

    def _c_affinity(self, inc: Profile) -> list[dict[str, Any]]:
        t = self.pool_threads(inc)
        if t < 2:
            return []
        # pinning needs an explicit count of 2 or more: ORT's default is pinned as the count it resolves to
        count: dict[str, Any] = {} if inc.session.intra_op_num_threads else {_THREADS: t}
        h = self.host
        out: list[dict[str, Any]] = []
        if h.smt:
            cores = h.usable_first_siblings
            if len(cores) >= t:
                out.append({**count, _AFFINITY: [[c] for c in cores[1:t]]})
        nodes = h.usable_numa_nodes
        if len(nodes) >= 2:
            node, cpus = max(nodes.items(), key=lambda kv: (len(kv[1]), -kv[0]))
            if len(cpus) >= t:
                out.append({**count, _AFFINITY: [list(cpus)] * (t - 1)})
        if inc.session.intra_op_thread_affinities is not None:
            out.append({_AFFINITY: None})
        return out

    def _c_arena(self, inc: Profile) -> list[dict[str, Any]]:
        return [{"session.enable_cpu_mem_arena": not inc.session.enable_cpu_mem_arena}]

    def _c_mem_pattern(self, inc: Profile) -> list[dict[str, Any]]:
        return [{"session.enable_mem_pattern": not inc.session.enable_mem_pattern}]

    def _c_optimization(self, inc: Profile) -> list[dict[str, Any]]:
        return [{"session.graph_optimization_level": v}
                for v in _knob_values("session.graph_optimization_level", self.thread_cap, ("basic", "extended", "all"))
                if v != inc.session.graph_optimization_level]

    def _opt(self, inc: Profile, name: str) -> Any:
        return inc.provider.options.get(name)

    def _c_io_binding(self, inc: Profile) -> list[dict[str, Any]]:
        if inc.cuda_graph():
            return []  # a CUDA graph needs IO binding
        return [{"provider.io_binding": not inc.provider.io_binding}]

    def _c_cuda_graph(self, inc: Profile) -> list[dict[str, Any]]:
        if inc.cuda_graph() or inc.workload.concurrency > 1:
            return []
        return [{"provider.options.enable_cuda_graph": True, "provider.io_binding": True,
                 "session.execution_mode": "sequential", "session.inter_op_num_threads": 0}]

    def _c_conv_algo(self, inc: Profile) -> list[dict[str, Any]]:
        cur = str(self._opt(inc, "cudnn_conv_algo_search") or "EXHAUSTIVE")  # ORT's CUDA default
        values = _knob_values("provider.options.cudnn_conv_algo_search", self.thread_cap,
                              ("EXHAUSTIVE", "HEURISTIC", "DEFAULT"))
        return [{"provider.options.cudnn_conv_algo_search": v} for v in values if v != cur]

    def _flip(self, inc: Profile, name: str, default: bool) -> list[dict[str, Any]]:
        cur = self._opt(inc, name)
        cur_b = default if cur is None else _truthy(cur)
        return [{f"provider.options.{name}": not cur_b}]

    def _c_conv_workspace(self, inc: Profile) -> list[dict[str, Any]]:
        return self._flip(inc, "cudnn_conv_use_max_workspace", True)

    def _c_prefer_nhwc(self, inc: Profile) -> list[dict[str, Any]]:
        return self._flip(inc, "prefer_nhwc", False)

    def _c_tf32(self, inc: Profile) -> list[dict[str, Any]]:
        return self._flip(inc, "use_tf32", True)

    # ---- the whole grid ----
    def grid(self, limit: int = 100_000) -> list[Candidate]:
        """Every combination of the dimensions' values (each dimension applied to every profile so far), without
        the start profile; ``limit`` guards against a product too large to hold."""
        order: list[Profile] = [self.start]
        seen = {profile_key(self.start)}
        for stage in self.dimensions:
            for p in list(order):
                for c in self.candidates(stage, p):
                    if c.key not in seen:
                        seen.add(c.key)
                        order.append(c.profile)
                        if len(order) > limit:
                            raise ValueError(f"the grid has more than {limit} profiles")
        return [Candidate(p, describe(p, self.start), "grid") for p in order[1:]]


def replace_threads(p: Profile, t: int) -> Profile:
    """``p`` with ``t`` intra-op threads (no validation: only for asking about pool sizes)."""
    from dataclasses import replace

    return replace(p, session=replace(p.session, intra_op_num_threads=t))
