"""The doctor's checks that read what is known without measuring: the model, the profile, the host, ORT's log, and
(when a session was built) which providers it got and where its nodes went.

Each check is a small pure function of a :class:`Context` returning findings (none when all is well), listed in
:data:`STATIC_CHECKS`; the CLI and the TUI run that one list. A context is built from a probe session by
:mod:`ortop.doctor.diagnose`, or from a live monitor's snapshot in the TUI; tests build one directly.

Over ~660 lines: a flat list of independent checks, each a short function; one file keeps the list readable
beside the registry that runs them.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortop.collectors.cuda import cuda_device
from ortop.collectors.host import HostFacts, format_cpulist
from ortop.collectors.load import HostLoad
from ortop.config.profile import Profile
from ortop.config.validate import option_int
from ortop.doctor.findings import Finding, patch_text
from ortop.doctor.graph import GraphFacts
from ortop.engine.live.events import ORT_LOG
from ortop.measure.pace import Pace, servers_of, settled
from ortop.model import ModelInfo
from ortop.present import size_text

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"

# ORT's words, as its log and its Python layer write them.
LIB_FAILED = re.compile(r"Failed to load library (\S+?) with error: (.+)")
MISSING_SO = re.compile(r"(\S+\.so[\w.]*): cannot open shared object file")
NOT_AVAILABLE = re.compile(r"Specified provider '([^']+)' is not in available provider names")
PROVIDER_WORDS = ("Failed to load library", "Failed to create", "not in available provider names", "EP Error",
                  "Please install", "Falling back to")
INIT_INPUT_WORDS = "appears in graph inputs and will not be treated as constant"
AFFINITY_WORDS = "pthread_setaffinity_np failed"

# Ops ORT's CUDA provider deliberately leaves on CPU when they only compute shapes: not worth a warning alone.
SHAPE_OPS = frozenset({"Shape", "Size", "ConstantOfShape", "Range", "Unsqueeze", "Squeeze", "Concat", "Gather",
                       "Slice", "Cast", "Reshape", "Expand", "Equal", "Where", "NonZero"})
MEMCPY_OPS = ("MemcpyFromHost", "MemcpyToHost")  # the copies ORT inserts where a tensor crosses CPU and CUDA
GRAPH_CAPTURE_WORDS = "cannot use the graph capture feature"  # ORT's refusal (InferenceSession::Initialize)
TRANSPOSE_SHARE_PCT = 5.0   # Transposes left after ORT's optimizer taking this share of kernel time are worth a fix
MAX_LISTED = 12             # names listed in evidence
HOST_BUSY_PCT = 50.0        # other processes using this share of all CPUs make every figure measured here contended
HOST_SATURATED_PCT = 90.0   # ... and from this share on, the host is saturated


@dataclass(frozen=True)
class Context:
    """What the static checks read.

    ``providers_active`` is None when no session was built (then the provider checks stay silent);
    ``placement`` holds ``{"name", "op_type", "domain", "ep"}`` per node and ``ops`` a per-operator table
    (``runtime.opprof.op_table``) when a probe session ran; ``session_error`` says why it could not.
    """

    model: ModelInfo
    profile: Profile
    host: HostFacts
    log: tuple[str, ...] = ()
    providers_active: tuple[str, ...] | None = None
    providers_available: tuple[str, ...] | None = None
    placement: tuple[Mapping[str, str], ...] | None = None
    ops: Mapping[str, Any] | None = None
    session_error: str | None = None
    graph: GraphFacts | None = None
    available_memory: int | None = None
    gpus: tuple[Any, ...] = ()                      # collectors.gpu.GpuDevice
    served_per_s: float | None = None               # live: what the running configuration serves
    traffic: Any = None                             # live: its traffic figures (engine.traffic.Traffic), open loops
    environ: Mapping[str, str] | None = None        # the environment ortop runs in (None: this process's)
    host_load: HostLoad | None = None               # the host's CPUs: others' share while ortop measured
    verified: tuple[Verified, ...] = ()             # live: changes verified by interleaving, newest first


@dataclass(frozen=True)
class Verified:
    """A change the live view verified by interleaving it with the configuration before it: the settings it changed
    (dotted key -> (before, after)), its comparisons by metric (``measure.compare.Comparison``), the history row's
    label."""

    changes: Mapping[str, tuple[Any, Any]]
    comparisons: Mapping[str, Any]
    label: str = ""


Check = Callable[[Context], list[Finding]]


# ---- helpers ------------------------------------------------------------------------------------------------------
def intra_threads(profile: Profile, host: HostFacts) -> tuple[int, str, bool]:
    """(threads the intra-op pool runs, the knob that sets it, whether that is ORT's default count).

    ORT's default (0) is the host's physical cores, whatever a cgroup quota or a cpuset allows.
    """
    s = profile.session
    if s.use_per_session_threads:
        n, key = s.intra_op_num_threads, "session.intra_op_num_threads"
    else:
        n, key = s.global_intra_op_num_threads, "session.global_intra_op_num_threads"
    return (n if n > 0 else max(1, host.physical_cores)), key, n == 0


def free_dims(model: ModelInfo, workload: Any = None, *, inner_only: bool = False) -> list[str]:
    """Free dims of the inputs (by name, ``input[axis]`` when unnamed), without those the workload pins
    (``workload`` given) and, with ``inner_only``, without leading (batch) axes."""
    out: list[str] = []
    for t in model.inputs:
        if workload is not None and t.name in workload.shapes:
            continue
        for axis, d in enumerate(t.shape or ()):
            if isinstance(d, int) or (inner_only and axis == 0):
                continue
            name = d if isinstance(d, str) else f"{t.name}[{axis}]"
            if workload is not None and (name in workload.dims or (axis == 0 and workload.batch > 0)):
                continue
            if name not in out:
                out.append(name)
    return out


def _listed(names: Sequence[str]) -> list[str]:
    names = list(names)
    return names if len(names) <= MAX_LISTED else [*names[:MAX_LISTED], f"… {len(names) - MAX_LISTED} more"]


def _lines(log: Sequence[str], *words: str, limit: int = 6) -> list[str]:
    """ORT's log lines holding any of ``words``, without their timestamp and source location."""
    out = []
    for line in log:
        if any(w in line for w in words):
            m = ORT_LOG.match(line)
            out.append(f"{m.group(1)}: {m.group(2)}" if m else line)
    return out[:limit]


# ---- the session itself --------------------------------------------------------------------------------------------
def check_session(ctx: Context) -> list[Finding]:
    """The probe session could not be built or run: nothing else about the session can be judged."""
    if ctx.session_error is None:
        return []
    errors = _lines(ctx.log, "[E:onnxruntime", "[F:onnxruntime", "rror", limit=len(ctx.log))
    return [Finding("session", "error", f"the session failed: {ctx.session_error}",
                    {"error": ctx.session_error, "log": errors[-6:]},
                    "fix what the error names (an input shape: --shape/--dim; a provider option; a model newer "
                    "than onnxruntime), then run the doctor again")]


def check_providers(ctx: Context) -> list[Finding]:
    """A requested execution provider that is not active: the session silently runs on CPU."""
    requested = ctx.profile.provider_name()
    active = ctx.providers_active
    if requested == CPU or active is None or requested in active:
        return []
    evidence: dict[str, Any] = {"requested": requested, "active": list(active)}
    if ctx.providers_available is not None:
        evidence["available"] = list(ctx.providers_available)
    failed = next((m for line in ctx.log if (m := LIB_FAILED.search(line))), None)
    if failed:
        lib, why = failed.group(1), failed.group(2).strip()
        evidence["library"] = lib
        evidence["load_error"] = why
        missing = MISSING_SO.search(why)
        needs = f"needs {missing.group(1)}, which the loader cannot find" if missing else f"failed: {why}"
        fix = (f"{os.path.basename(lib)} {needs}: install the libraries this onnxruntime was built for "
               "(CUDA and cuDNN: pip install 'onnxruntime-gpu[cuda,cudnn]' and call onnxruntime.preload_dlls() "
               "before the first session, or put their lib folders on LD_LIBRARY_PATH; TensorRT: its libs too). "
               f"`ldd {lib}` lists every library still missing")
    elif (ctx.providers_available is not None and requested not in ctx.providers_available) or any(
            (m := NOT_AVAILABLE.search(line)) and m.group(1) == requested for line in ctx.log):
        fix = (f"this onnxruntime has no {requested} at all: install a build that has it (onnxruntime-gpu for "
               "CUDA and TensorRT, onnxruntime-openvino for OpenVINO, …) in place of the one installed")
    else:
        fix = "ORT's log lines in the evidence say why; session.log_severity_level = 0 makes it say more"
    lines = _lines(ctx.log, *PROVIDER_WORDS)
    if lines:
        evidence["log"] = lines
    return [Finding("providers", "error",
                    f"{requested} was requested but the session runs on {', '.join(active)}: a silent fallback",
                    evidence, fix)]


def check_placement(ctx: Context) -> list[Finding]:
    """Nodes the requested provider did not take (they run on CPU, with copies in and out), grouped by op type."""
    requested = ctx.profile.provider_name()
    if requested == CPU or not ctx.placement or not ctx.providers_active or requested not in ctx.providers_active:
        return []
    off = [n for n in ctx.placement if n["ep"] != requested]
    memcpy = {n["name"] for n in ctx.placement if n["op_type"].startswith("Memcpy")}
    ops_nodes = (ctx.ops or {}).get("nodes", ())
    memcpy |= {n["name"] for n in ops_nodes if str(n["op_type"]).startswith("Memcpy")}
    if not off and not memcpy:
        return []
    by_op = Counter(n["op_type"] for n in off)
    compute = sorted(op for op in by_op if op not in SHAPE_OPS)
    eps = sorted({n["ep"] for n in off}) or [CPU]
    evidence: dict[str, Any] = {"requested": requested, "nodes": len(ctx.placement),
                                "elsewhere_by_op": dict(by_op.most_common()),
                                "elsewhere_nodes": _listed([n["name"] for n in off]), "memcpy_nodes": len(memcpy)}
    if ops_nodes:
        evidence["elsewhere_time_pct"] = round(sum(n["share_pct"] for n in ops_nodes if n["provider"] != requested
                                                   and not str(n["op_type"]).startswith("Memcpy")), 1)
    msg = f"{len(off)} of {len(ctx.placement)} nodes run on {', '.join(eps)} instead of {requested}"
    if memcpy:
        msg += f"; {len(memcpy)} Memcpy nodes copy tensors between the two"
    if compute or memcpy:
        fix = (f"each stretch on another provider costs a copy in and out and a sync: look at the op types listed "
               f"({', '.join(compute[:6]) or 'the copies'}) for types or attributes {requested} has no kernel for, "
               "and change them in the model (another op, float instead of double or int64), or accept the copies")
        severity = "warning"
    else:
        fix = f"only shape computations stay off {requested}, as ORT intends: nothing to do"
        severity = "info"
    return [Finding("placement", severity, msg, evidence, fix)]


# ---- the graph ----------------------------------------------------------------------------------------------------
def check_initializer_inputs(ctx: Context) -> list[Finding]:
    """Initializers listed as graph inputs (IR ≥ 4): ORT must treat them as overridable, so it folds nothing."""
    names = ctx.model.initializer_inputs
    if not names or ctx.model.ir_version < 4:
        return []
    evidence: dict[str, Any] = {"initializer_inputs": len(names), "names": _listed(names),
                                "ir_version": ctx.model.ir_version}
    warned = sum(1 for line in ctx.log if INIT_INPUT_WORDS in line)
    if warned:
        evidence["ort_warnings"] = warned
    model = ctx.model.path
    stem = os.path.splitext(os.path.basename(model))[0]
    return [Finding("initializer-inputs", "warning",
                    f"{len(names)} initializers are also listed as graph inputs: ORT must treat them as inputs a "
                    "caller may override, so it skips constant folding and the fusions that need constant weights",
                    evidence,
                    f"write a copy without them in the input list (the weights stay): ortop doctor {model} "
                    f"--fix-model {stem}-fixed.onnx, then run that copy")]


def check_cuda_graph(ctx: Context) -> list[Finding]:
    """What rules out a CUDA graph the profile asks for: control flow, shapes that change, nodes off CUDA.

    Placement follows ONNX Runtime's own rule (``InferenceSession::Initialize``, ``AreAllComputeNodesAssignedTo…``):
    it refuses the session when a node runs on a provider other than CUDA and CPU, when a Memcpy node copies a
    tensor between CPU and CUDA (a compute node left CUDA), or when no node runs on CUDA; nodes on CPU without a
    copy are the shape computations it forces there, which it allows with a warning (``HasShapeSubgraphNodes``).
    """
    p = ctx.profile
    if not p.cuda_graph():
        return []
    off_patch = {"provider.options.enable_cuda_graph": False}
    out: list[Finding] = []
    if ctx.model.control_flow:
        counts = {op: ctx.model.op_histogram.get(op, 0) for op in ctx.model.control_flow}
        out.append(Finding("cuda-graph", "error",
                           "enable_cuda_graph is on but the model has control flow "
                           f"({', '.join(ctx.model.control_flow)}): a CUDA graph replays one fixed sequence of "
                           "kernels and cannot capture it",
                           {"control_flow": counts},
                           "turn enable_cuda_graph off, or export the model without control flow (loops unrolled, "
                           "branches fixed)", off_patch))
    free = free_dims(ctx.model, p.workload)
    if free:
        out.append(Finding("cuda-graph", "warning",
                           f"enable_cuda_graph is on and the inputs have free dims ({', '.join(free)}): the graph is "
                           "captured for the first shape, and another shape cannot replay it",
                           {"free_dims": free},
                           "feed one shape per session (pin it here with --dim/--shape to measure that one), or "
                           "turn enable_cuda_graph off where shapes change"))
    if ctx.session_error and GRAPH_CAPTURE_WORDS in ctx.session_error and not ctx.model.control_flow:
        out.append(Finding("cuda-graph", "error",
                           "ORT refused the CUDA graph: compute nodes run off CUDA (only shape computations may "
                           "stay on CPU, with no copies between CPU and CUDA)",
                           {"error": ctx.session_error},
                           "turn enable_cuda_graph off, or change the ops CUDA does not take (`ortop ops` with the "
                           "graph off lists where each node runs)", off_patch))
    if ctx.placement and ctx.providers_active and CUDA in ctx.providers_active:
        out += _cuda_graph_placement(ctx, off_patch)
    return out


def _cuda_graph_placement(ctx: Context, off_patch: dict[str, Any]) -> list[Finding]:
    """ORT's placement rule for a CUDA graph over the probe session's nodes (see :func:`check_cuda_graph`)."""
    nodes = ctx.placement or ()
    off = [n for n in nodes if n["ep"] != CUDA]
    if not off:
        return []
    other = [n for n in off if n["ep"] not in (CPU, "")]
    memcpy = {n["name"] for n in nodes if n["op_type"] in MEMCPY_OPS}
    memcpy |= {n["name"] for n in (ctx.ops or {}).get("nodes", ()) if str(n["op_type"]) in MEMCPY_OPS}
    on_cuda = len(nodes) - len(off)
    evidence: dict[str, Any] = {"elsewhere_by_op": dict(Counter(n["op_type"] for n in off).most_common()),
                                "elsewhere_nodes": _listed([n["name"] for n in off]), "memcpy_nodes": len(memcpy),
                                "nodes_on_cuda": on_cuda}
    if other or memcpy or not on_cuda:
        why = (f"{len(other)} run on {', '.join(sorted({n['ep'] for n in other}))}" if other else
               f"{len(memcpy)} Memcpy nodes copy tensors between CPU and CUDA (compute nodes left CUDA)" if memcpy
               else "no node runs on CUDA")
        return [Finding("cuda-graph", "error",
                        f"enable_cuda_graph needs every compute node on CUDA, but {why}: ORT refuses the session",
                        evidence, "turn enable_cuda_graph off, or change the ops that CUDA does not take (see the "
                        "placement finding)", off_patch)]
    ops = sorted({n["op_type"] for n in off})
    return [Finding("cuda-graph", "info",
                    f"{len(off)} shape-computing nodes stay on CPU ({', '.join(ops[:6])}) with no copy to or from "
                    "CUDA: ORT captures the graph anyway and warns that replays are right only while those shapes "
                    "come out as they did for the captured input",
                    evidence, "nothing to do while each session is fed one input shape; pin it with --dim/--shape")]


def check_transposes(ctx: Context) -> list[Finding]:
    """Transpose chains around layout boundaries (NHWC↔NCHW from converted TensorFlow models)."""
    g = ctx.graph
    if g is None or (len(g.chains) < 2 and len(g.layout_transposes) < 4):
        return []
    level = ctx.profile.session.graph_optimization_level
    evidence: dict[str, Any] = {"transposes": g.transposes, "layout_transposes": len(g.layout_transposes),
                                "chains": len(g.chains), "cancelling_pairs": g.cancelling,
                                "first_chains": [f"{a} → {b}" for a, b in g.chains[:6]],
                                "graph_optimization_level": level}
    left = [n for n in (ctx.ops or {}).get("nodes", ()) if n["op_type"] == "Transpose"]
    share = sum(float(n["share_pct"]) for n in left)
    if ctx.ops is not None:
        evidence["left_after_optimizing"] = len(left)
        evidence["left_time_pct"] = round(share, 1)
    head = (f"{g.transposes} Transposes ({len(g.layout_transposes)} moving channels first↔last, {len(g.chains)} "
            "chained through elementwise ops)")
    reexport = ("re-export with channels-first inputs (tf2onnx: --inputs-as-nchw INPUT) so no layout boundary is "
                "crossed")
    if level == "disable":
        return [Finding("transposes", "warning", f"{head} and graph optimizations are off: every one of them runs",
                        evidence, "turn graph optimizations on: ORT's transpose optimizer cancels chained pairs; "
                        f"better still, {reexport}", {"session.graph_optimization_level": "all"})]
    if ctx.ops is None:
        if len(g.chains) < 2:
            return []  # scattered layout Transposes, and nothing measured to say they cost anything
        return [Finding("transposes", "info", f"{head}: ORT's transpose optimizer cancels many of them",
                        evidence, f"`ortop ops {ctx.model.path}` shows how many are left and what they cost; "
                        f"to be rid of them, {reexport}")]
    if share >= TRANSPOSE_SHARE_PCT:
        return [Finding("transposes", "warning",
                        f"{head}; {len(left)} are left after ORT's optimizer and take {share:.0f} % of the kernel "
                        "time", evidence, reexport)]
    return []  # ORT's optimizer dealt with them: nothing worth a line


# ---- threads and the host ------------------------------------------------------------------------------------------
def check_threads(ctx: Context) -> list[Finding]:
    """More intra-op threads than the process can run at once: physical cores, a cpuset, a cgroup quota."""
    host, s = ctx.host, ctx.profile.session
    n, key, default = intra_threads(ctx.profile, host)
    cap = host.thread_cap
    if n <= cap:
        return []
    limits = []
    if host.usable_physical_cores < n:
        limits.append(f"{host.usable_physical_cores} physical cores")
    if host.usable_cpus and len(host.usable_cpus) < n and len(host.usable_cpus) < host.logical_cpus:
        limits.append(f"a cpuset of {len(host.usable_cpus)} CPUs ({format_cpulist(host.usable_cpus)})")
    if host.cpu_quota is not None and host.cpu_quota < n:
        limits.append(f"a cgroup quota of {host.cpu_quota:g} CPUs")
    limit = " and ".join(limits) or f"{cap} usable cores"
    evidence = {"intra_op_num_threads": 0 if default else n, "pool_threads": n,
                "physical_cores": host.physical_cores, "usable_cpus": format_cpulist(host.usable_cpus),
                "cpu_quota": host.cpu_quota, "thread_cap": cap}
    patch: dict[str, Any] = {key: cap}
    if s.intra_op_thread_affinities is not None and key == "session.intra_op_num_threads":
        patch["session.intra_op_thread_affinities"] = None  # pinned for another count
    if default:
        msg = (f"ORT's default pool starts {n} threads (the host's physical cores), but this process may use "
               f"{limit}: the extra threads queue for CPU time and every parallel section waits for the slowest")
        fix = f"set {key} = {cap} explicitly: ORT's default does not look at a container's limits"
    else:
        msg = (f"{n} intra-op threads but {limit}: the extra threads queue for CPU time instead of working, and "
               "every parallel section waits for the slowest")
        fix = f"set {key} = {cap}"
    return [Finding("threads", "warning", msg, evidence, fix, patch)]


def check_replicas(ctx: Context) -> list[Finding]:
    """Replicas whose per-session pools together ask for more threads than the process can run at once.

    ORT's threading guide: sessions served side by side should get separate cores, or their pools fight for the
    same ones (every parallel section then waits for a thread that is off the CPU).
    """
    w, s, host = ctx.profile.workload, ctx.profile.session, ctx.host
    if w.replicas < 2 or w.pin_replicas or not s.use_per_session_threads:
        return []
    n, key, default = intra_threads(ctx.profile, host)
    cap = host.thread_cap
    total = w.replicas * n
    if n < 2 or total <= cap:
        return []
    evidence = {"replicas": w.replicas, "pool_threads_each": n, "pool_threads_in_all": total, "thread_cap": cap,
                "usable_cpus": format_cpulist(host.usable_cpus)}
    return [Finding(
        "replicas", "warning",
        f"{w.replicas} replicas each start a pool of {n} threads{' (ORT default)' if default else ''}: {total} "
        f"threads for {cap} cores, so the replicas' pools preempt each other mid-operator",
        evidence,
        "give each replica its own cores: workload.pin_replicas = true (each pool sized to its share), or share one "
        "pool between them with use_per_session_threads = false",
        {"workload.pin_replicas": True})]


def check_affinity(ctx: Context) -> list[Finding]:
    """Pinned threads on cores the process may not use or across NUMA nodes; pinning that failed in ORT's log."""
    host, s = ctx.host, ctx.profile.session
    aff = s.intra_op_thread_affinities
    out: list[Finding] = []
    usable = set(host.usable_cpus)
    if aff:
        cores = sorted({c for t in aff for c in t})
        outside = [c for c in cores if usable and c not in usable]
        if outside:
            out.append(Finding("affinity", "warning",
                               f"the thread affinity names cores this process may not run on ({format_cpulist(outside)}"
                               f"; it may use {format_cpulist(sorted(usable))}): ORT cannot pin those threads",
                               {"affinity_cores": format_cpulist(cores), "usable_cpus": format_cpulist(sorted(usable))},
                               "pin to usable cores only, or drop the affinity",
                               {"session.intra_op_thread_affinities": None}))
        nodes = sorted(n for n, cpus in host.numa_nodes.items() if set(cpus) & set(cores))
        if len(nodes) > 1:
            best = max(host.usable_numa_nodes.items(), key=lambda kv: len(kv[1]), default=None)
            patch: dict[str, Any] | None = None
            if best is not None and len(best[1]) >= len(aff):
                patch = {"session.intra_op_thread_affinities": [[c] for c in best[1][:len(aff)]]}
            out.append(Finding("affinity", "warning",
                               f"the pinned threads span NUMA nodes {', '.join(map(str, nodes))}: each thread reads "
                               "memory that lives on the other node more slowly, and the pool waits for the slowest",
                               {"affinity_cores": format_cpulist(cores),
                                "numa_nodes": {str(n): format_cpulist(host.numa_nodes[n]) for n in nodes}},
                               "pin every pool thread to one node's cores"
                               + (f" (node {best[0]}: {format_cpulist(best[1])})" if patch and best else ""), patch))
    failed = _lines(ctx.log, AFFINITY_WORDS, limit=3)
    if failed:
        _, key, default = intra_threads(ctx.profile, host)
        unpin: dict[str, Any] | None = None
        if default:
            unpin = {key: host.thread_cap}
            fix = (f"set {key} = {host.thread_cap} explicitly: an explicit count turns ORT's default pinning off, "
                   "and it is the count this process can run")
        elif aff:
            unpin = {"session.intra_op_thread_affinities": None}
            fix = "pin to cores inside this process's cpuset, or drop the affinity"
        else:
            fix = "check the process's cpuset (taskset -p PID): ORT pins to cores it cannot use"
        count = sum(1 for line in ctx.log if AFFINITY_WORDS in line)
        out.append(Finding("affinity", "warning",
                           f"ORT could not pin its pool threads (pthread_setaffinity_np failed {count}×): they run "
                           "unpinned, and the pinning ORT planned assumed cores this process may not use",
                           {"log": failed, "usable_cpus": format_cpulist(host.usable_cpus)}, fix, unpin))
    elif not aff and len(host.usable_numa_nodes) > 1:
        usable_nodes = host.usable_numa_nodes
        out.append(Finding("affinity", "info",
                           f"this process may run on {len(usable_nodes)} NUMA nodes: unpinned pool threads spread over "
                           "them and read each other's memory across nodes",
                           {"numa_nodes": {str(k): format_cpulist(v) for k, v in usable_nodes.items()}},
                           "for steadier latency keep the process on one node: numactl --cpunodebind=0 "
                           "--membind=0 ortop …, or pin the pool with session.intra_op_thread_affinities"))
    return out


# ---- memory -------------------------------------------------------------------------------------------------------
def check_mem_pattern(ctx: Context) -> list[Finding]:
    """The memory pattern with inputs whose shapes can change between calls."""
    if not ctx.profile.session.enable_mem_pattern:
        return []
    free = free_dims(ctx.model)
    if not free:
        return []
    inner = free_dims(ctx.model, inner_only=True)
    what = "sizes (images, sequences)" if inner else "batch sizes"
    return [Finding("mem-pattern", "info",
                    f"the inputs have free dims ({', '.join(free)}) and the memory pattern is on: ORT plans one "
                    "allocation pattern per input shape and keeps each, so calls with changing shapes plan again "
                    "and hold more memory",
                    {"free_dims": free, "inner_free_dims": inner, "enable_mem_pattern": True},
                    f"if your application feeds changing {what}, turn enable_mem_pattern off (the arena still reuses "
                    "memory); with one shape, keep it", {"session.enable_mem_pattern": False})]


def check_memory(ctx: Context) -> list[Finding]:
    """The weights against the host memory available."""
    avail, need = ctx.available_memory, ctx.model.param_bytes
    if avail is None or need <= 0 or 2 * need <= avail:
        return []
    evidence = {"weights_bytes": need, "available_bytes": avail}
    if need > avail:
        return [Finding("memory", "error",
                        f"the weights alone ({size_text(need)}) are more than the memory available "
                        f"({size_text(avail)}): the session will swap or be killed", evidence,
                        "free memory or run on a machine with more; a quantized model (int8) needs a quarter")]
    config = {**ctx.profile.session.config, "session.disable_prepacking": "1"}
    return [Finding("memory", "warning",
                    f"the weights ({size_text(need)}) take more than half the memory available "
                    f"({size_text(avail)}): ORT keeps pre-packed copies of MatMul and Conv weights beside them",
                    evidence, "turn weight pre-packing off ([session.config] session.disable_prepacking = \"1\"; "
                    "kernels run somewhat slower), or free memory", {"session.config": config})]


def check_gpu_memory(ctx: Context) -> list[Finding]:
    """The CUDA arena against the GPU (only with a GPU present and the CUDA provider asked for)."""
    p = ctx.profile
    if p.provider_name() != CUDA or not ctx.gpus:
        return []
    opts = p.provider.options
    device_id = option_int(opts.get("device_id", 0))
    env = {**(os.environ if ctx.environ is None else ctx.environ), **p.env}
    found = cuda_device(ctx.gpus, device_id, env)
    dev = found.device
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if dev is None:
        return [Finding("gpu-memory", "warning", f"device_id {device_id} names no GPU this process can see "
                        f"({found.note})", {"device_id": device_id, "cuda_visible_devices": visible,
                                          "gpus": [g.name for g in ctx.gpus]},
                        "pick a device_id below the number of GPUs CUDA_VISIBLE_DEVICES leaves visible (CUDA "
                        "numbers them from 0 in the order it lists them)")]
    limit = None if opts.get("gpu_mem_limit") is None else option_int(opts["gpu_mem_limit"])
    strategy = opts.get("arena_extend_strategy") or "kNextPowerOfTwo"
    evidence = {"gpu": dev.name, "mem_total_bytes": dev.mem_total, "mem_used_bytes": dev.mem_used,
                "gpu_mem_limit": limit, "arena_extend_strategy": strategy, "weights_bytes": ctx.model.param_bytes,
                "device_id": device_id, "nvml_index": found.gpu.index if found.gpu else None, "uuid": dev.uuid,
                "cuda_visible_devices": visible}
    if found.note:
        evidence["device_note"] = found.note
    if limit is not None and limit < ctx.model.param_bytes:
        return [Finding("gpu-memory", "error",
                        f"gpu_mem_limit ({size_text(limit)}) is less than the weights "
                        f"({size_text(ctx.model.param_bytes)}): the session runs out of GPU memory",
                        evidence, "raise gpu_mem_limit above the weights plus the activations, or remove it",
                        {"provider.options.gpu_mem_limit": None})]
    if limit is not None and limit > dev.mem_total:
        cap = int(dev.mem_total * 0.9)
        return [Finding("gpu-memory", "warning",
                        f"gpu_mem_limit ({size_text(limit)}) is more than the GPU has "
                        f"({size_text(dev.mem_total)}): it limits nothing", evidence,
                        f"set gpu_mem_limit below the GPU's memory ({cap} = 90 %)",
                        {"provider.options.gpu_mem_limit": cap})]
    if limit is None and strategy == "kNextPowerOfTwo":
        return [Finding("gpu-memory", "info",
                        "the CUDA arena grows in powers of two and keeps what it took (NVML shows its high-water "
                        "mark, not the live tensors)", evidence,
                        "cap it with gpu_mem_limit, or let it grow by what is asked: arena_extend_strategy = "
                        "kSameAsRequested", {"provider.options.arena_extend_strategy": "kSameAsRequested"})]
    return []


def check_host_load(ctx: Context) -> list[Finding]:
    """Other processes keep the host's CPUs busy: every figure measured here carries their contention."""
    load = ctx.host_load
    if load is None or load.others_pct < HOST_BUSY_PCT:
        return []
    saturated = load.others_pct >= HOST_SATURATED_PCT
    when = f" over {load.window_s:.0f} s while the doctor ran" if load.window_s == load.window_s else ""
    return [Finding(
        "host-load", "warning" if saturated else "info",
        f"the host itself is {'saturated' if saturated else 'busy'}: other processes use {load.others_pct:.0f} % of "
        f"its {load.cpus} CPUs{when} (ortop {load.ours_pct:.0f} %): measurements here are contended", load.as_dict(),
        "measure where nothing else runs, or trust only what contention cannot fake: interleaved comparisons "
        "(compare, verify, the doctor's measured checks) share the host's state block by block, so their verdicts "
        "hold, while absolute latencies and capacities carry the other processes' load")]


def check_verified_spinning(ctx: Context) -> list[Finding]:
    """Live: turning spinning off was verified in the history (CPU per run down by a share worth having)."""
    from ortop.doctor.findings import SPIN_OFF, SPIN_SAVING_PCT, change_evidence

    key = next(iter(SPIN_OFF))
    for v in ctx.verified:
        if set(v.changes) != {key} or v.changes[key][1] is not False or v.changes[key][0] is False:
            continue  # only a change that turned spinning off, and nothing else
        cpu, p50 = v.comparisons.get("cpu"), v.comparisons.get("p50")
        if cpu is None or cpu.verdict != "faster" or -cpu.change_pct < SPIN_SAVING_PCT:
            continue
        evidence: dict[str, Any] = {
            "measured": f"spinning on vs off, verified in the live view ({v.label}), {cpu.pairs} block pairs",
            "cpu_ms_per_run": change_evidence(cpu)}
        cost = ""
        if p50 is not None:
            evidence["p50_ms"] = change_evidence(p50)
            cost = f"; what it costs in latency here: {p50.text()}"
        if ctx.profile.session.allow_spinning is False:
            return [Finding("spinning", "info", f"spinning is off, and turning it off was verified here: {cpu.text()}",
                            evidence, "nothing needed: keep it off")]
        return [Finding("spinning", "warning",
                        f"the intra-op pool spins while it waits for work: turning spinning off was verified here, "
                        f"{cpu.text()}", evidence,
                        f"set {patch_text(SPIN_OFF)} (the pool's threads then sleep while they wait){cost}",
                        dict(SPIN_OFF))]
    return []


def check_pace(ctx: Context) -> list[Finding]:
    """Live: the requests that arrived were not served at their pace (the configuration's figures include
    queueing). Judged against what arrived (its traffic's counters), never the rate the profile asks for."""
    t = ctx.traffic
    if t is None or not getattr(t, "open", False) or not t.offered_per_s > 0:
        return []
    pace = t.pace(servers_of(ctx.profile.workload))
    if not settled(pace.arrived, t.window_s):  # a fresh build's first seconds: a few requests, some behind cold runs
        return []
    return pace_findings(ctx.profile, pace)


def pace_findings(profile: Profile, pace: Pace | None, measured: str = "") -> list[Finding]:
    """A warning when the requests that arrived were not served at their pace (:func:`ortop.measure.pace.kept`):
    every figure then includes queueing. ``pace``: what arrived, was served and was shed (None: a closed loop, or
    nothing counted); ``measured``: what the figures come from, in words (the live view's running configuration:
    "")."""
    if pace is None or pace.kept():
        return []
    served = pace.served_per_s
    asked = {"asked_per_s": round(pace.asked_per_s, 1)} if math.isfinite(pace.asked_per_s) else {}
    return [Finding("pace", "warning", f"the offered rate is not kept: {pace.text()}",
                    {**({"measured": measured} if measured else {}), "offered_per_s": round(pace.offered_per_s, 1),
                     **asked, "served_per_s": round(served, 1), "shed": pace.shed},
                    f"offer at most about {served * 0.8:.0f}/s here (80 % of what it serves), or serve more: "
                    "more intra-op threads, or replicas on their own cores",
                    {"workload.rate_hz": round(served * 0.8 / max(1, profile.workload.replicas), 1)})]


STATIC_CHECKS: tuple[tuple[str, Check], ...] = (
    ("session", check_session),
    ("providers", check_providers),
    ("placement", check_placement),
    ("initializer-inputs", check_initializer_inputs),
    ("cuda-graph", check_cuda_graph),
    ("transposes", check_transposes),
    ("threads", check_threads),
    ("replicas", check_replicas),
    ("affinity", check_affinity),
    ("mem-pattern", check_mem_pattern),
    ("memory", check_memory),
    ("gpu-memory", check_gpu_memory),
    ("pace", check_pace),
    ("host-load", check_host_load),
    ("spinning", check_verified_spinning),
)


def run_static(ctx: Context, checks: Sequence[tuple[str, Check]] = STATIC_CHECKS) -> list[Finding]:
    """Every check's findings, in the list's order. A check that breaks is itself a finding, not a crash."""
    out: list[Finding] = []
    for name, check in checks:
        try:
            out.extend(check(ctx))
        except Exception as exc:  # one broken check must not hide the others' findings
            out.append(Finding(name, "info", f"the {name} check could not run: {type(exc).__name__}: {exc}"))
    return out
