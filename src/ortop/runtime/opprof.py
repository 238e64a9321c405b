"""One session in a child process, asked what only it knows: per-operator times (ORT's profiler) and node placement.

``ortop ops`` and ``ortop doctor`` need a session, and only the runtime room imports onnxruntime, so
:mod:`ortop.engine.answers.ops` spawns :func:`child_main` in a fresh process (like the worker) and gets back plain
dicts. The child points its fd 1 and 2 at a log file in the request's folder before importing onnxruntime: ORT's log (a
provider library that failed to load, a silent fallback) is kept for the doctor instead of scribbling on the terminal,
and survives a crash of the child. The profiler's trace goes into the same folder, which the parent removes afterwards.

The trace is ORT's Chrome-trace JSON: events with ``cat`` "Node" and names ending ``_kernel_time`` carry ``dur``
(µs) and ``args`` ``op_name`` and ``provider``; "Session" events named ``model_run`` mark each ``Run()``.
:func:`parse_trace` and :func:`op_table` are pure functions over it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KERNEL_SUFFIX = "_kernel_time"
LOG_NAME = "ort.log"
TRACE_PREFIX = "ortop-ops"


@dataclass(frozen=True)
class Request:
    """What the child does: build ``profile`` (``Profile.to_dict(full=True)``) on ``model_path``, run it
    ``warmup`` + ``runs`` times, and report; files go to ``workdir``."""

    model_path: str
    profile: dict
    workdir: str
    runs: int = 0
    warmup: int = 0
    trace: bool = False       # ORT's profiler on: per-node times of the runs after the warm-up
    placement: bool = True    # which provider runs each node


# ---- the trace ---------------------------------------------------------------------------------------------------
def parse_trace(events: Iterable[Mapping[str, Any]], warmup: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Per-node kernel time from a trace, leaving out the first ``warmup`` runs.

    Returns (nodes, runs): one dict per node (``name``, ``op_type``, ``provider``, ``calls``, ``total_us``) and
    the number of runs they cover. Without ``model_run`` events (a trimmed trace) every node event counts and
    runs is 0.
    """
    events = list(events)
    run_spans = sorted((int(e.get("ts", 0)), int(e.get("dur", 0))) for e in events
                       if e.get("cat") == "Session" and e.get("name") == "model_run")
    cutoff = 0
    if 0 < warmup < len(run_spans):
        ts, dur = run_spans[warmup - 1]
        cutoff = ts + dur
    elif warmup and run_spans:
        cutoff = run_spans[-1][0] + run_spans[-1][1] + 1  # every run was a warm-up
    runs = sum(1 for ts, _ in run_spans if ts >= cutoff)
    acc: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX) or int(e.get("ts", 0)) < cutoff:
            continue
        args = e.get("args") or {}
        key = (name[: -len(KERNEL_SUFFIX)], str(args.get("op_name", "?")), str(args.get("provider", "?")))
        a = acc[key]
        a[0] += 1
        a[1] += int(e.get("dur", 0))
    nodes = [{"name": k[0], "op_type": k[1], "provider": k[2], "calls": v[0], "total_us": v[1]}
             for k, v in acc.items()]
    return nodes, runs


def op_table(nodes: Iterable[Mapping[str, Any]], runs: int) -> dict[str, Any]:
    """Nodes and op types (per provider) by kernel time: total ms, share of all kernel time %, mean ms per run.

    Rows are sorted by time, largest first; the shares of either list add up to 100 %.
    """
    nodes = list(nodes)
    total = sum(int(n["total_us"]) for n in nodes)
    per_run = max(runs, 1)

    def row(name: str, op_type: str, provider: str, calls: int, us: int, **extra: Any) -> dict[str, Any]:
        return {"name": name, "op_type": op_type, "provider": provider, "calls": calls,
                "total_ms": round(us / 1e3, 4), "share_pct": round(100.0 * us / total, 3) if total else 0.0,
                "mean_ms": round(us / 1e3 / per_run, 5), **extra}

    node_rows = [row(n["name"], n["op_type"], n["provider"], int(n["calls"]), int(n["total_us"])) for n in nodes]
    node_rows.sort(key=lambda r: (-r["total_ms"], r["name"]))
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for n in nodes:
        groups[(n["op_type"], n["provider"])].append(n)
    type_rows = [row(op, op, prov, sum(int(n["calls"]) for n in ns), sum(int(n["total_us"]) for n in ns),
                     nodes=len(ns)) for (op, prov), ns in groups.items()]
    type_rows.sort(key=lambda r: (-r["total_ms"], r["op_type"]))
    for r in type_rows:
        del r["name"]
    return {"runs": runs, "kernel_ms_per_run": round(total / 1e3 / per_run, 5), "nodes": node_rows,
            "op_types": type_rows}


# ---- the child -------------------------------------------------------------------------------------------------------
def probe(req: Request, out: dict[str, Any]) -> None:
    """Build the session, run it, and fill ``out`` with what ORT did as it goes, so that a build or run failure
    (raised) leaves what was learnt before it: ``stage`` says how far it got."""
    from dataclasses import replace

    from ortop import model as model_mod
    from ortop.config import profile as profile_mod
    from ortop.config.providers import CUDA, TENSORRT
    from ortop.runtime import iobind, options, placement
    from ortop.runtime.child import preload_cuda_libraries

    prof = replace(profile_mod.from_dict(req.profile), model=req.model_path)
    said: list[str] = []
    if prof.provider_name() in (CUDA, TENSORRT):
        preload_cuda_libraries(said.append)  # before the provider's library loads; the problem goes in the notes
    import onnxruntime as ort

    info = model_mod.load_model(req.model_path)
    w = prof.workload
    feeds, notes = model_mod.make_feeds(info, dims=w.dims, shapes=w.shapes, values=w.values, inputs=w.inputs,
                                        batch=w.batch, seed=w.seed)
    so = options.session_options(prof)
    if req.placement:
        placement.record(so)
    if req.trace:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(req.workdir, TRACE_PREFIX)
    out.update({"stage": "build", "providers_requested": prof.providers(),
                "providers_available": list(ort.get_available_providers()),
                "feeds": model_mod.describe_feeds(feeds), "notes": [*notes, *said]})
    t0 = time.perf_counter_ns()
    sess = ort.InferenceSession(prof.model, sess_options=so, providers=options.provider_list(prof))
    out["create_ms"] = (time.perf_counter_ns() - t0) / 1e6
    out["providers_active"] = list(sess.get_providers())
    out["placement"] = placement.assignment(sess) if req.placement else None
    out["stage"] = "run"
    run = _runner(prof, sess, feeds, out["notes"], iobind)
    for _ in range(req.warmup):
        run()
    t1 = time.perf_counter_ns()
    for _ in range(req.runs):
        run()
    out["runs"] = req.runs
    out["warmup"] = req.warmup
    out["wall_ms_per_run"] = (time.perf_counter_ns() - t1) / 1e6 / req.runs if req.runs else None
    if req.trace:
        path = sess.end_profiling()
        with open(path, encoding="utf-8") as fh:
            nodes, runs = parse_trace(json.load(fh), warmup=req.warmup)
        out["ops"] = op_table(nodes, runs)
    out["stage"] = "done"


def _runner(prof: Any, sess: Any, feeds: dict[str, Any], notes: list[str], iobind: Any) -> Any:
    """One run as the profile makes it: through an IO binding made once (on the device the worker binds on) or
    plain ``run()``. A CUDA-graph profile runs with capture skipped (``gpu_graph_id = -1``): a replay launches the
    captured kernels with no per-node events, and a capture through plain ``run()`` would record numpy copies."""
    graphs = prof.cuda_graph()
    if graphs:
        notes.append("enable_cuda_graph: the runs here skip capture (gpu_graph_id = -1) so that every kernel runs "
                     "and is timed; a graph replay's total is lower than the sum of its kernels launched one by one")
    if prof.provider.io_binding:
        device = "cuda" if iobind.gpu_device(prof.provider_name(), sess.get_providers()) else "cpu"
        device_id = int(prof.provider.options.get("device_id", 0) or 0)
        bound = iobind.Bound(sess, feeds, device, device_id, graph_id=iobind.SKIP_CAPTURE if graphs else None)
        return bound.runner()
    outputs = [o.name for o in sess.get_outputs()]
    ro = iobind.graph_options(iobind.SKIP_CAPTURE) if graphs else None
    if any(a.dtype.kind not in "biufcOUS" for a in feeds.values()):  # bfloat16, float8: OrtValues of their bits
        import onnxruntime as ort

        values = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(iobind.raw(a), iobind.numpy_element_type(a.dtype))
                  if a.dtype.kind not in "biufcOUS" else ort.OrtValue.ortvalue_from_numpy(a) for k, a in feeds.items()}
        return lambda: sess.run_with_ort_values(outputs, values, ro)
    return lambda: sess.run(outputs, feeds, ro)


def read_log(path: str, limit: int = 2000) -> list[str]:
    """The child's captured log, one entry per line, ANSI colours stripped, blank lines dropped."""
    from ortop.runtime.child import ANSI

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = [ANSI.sub("", line).rstrip() for line in fh]
    except OSError:
        return []
    return [line for line in lines if line][:limit]


def child_main(conn: Any, req: Request) -> None:
    """Entry point of the spawned child: capture fd 1 and 2, probe, send one dict, exit."""
    from ortop.errors import one_line
    from ortop.runtime.child import die_with_parent

    fd = os.open(os.path.join(req.workdir, LOG_NAME), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    die_with_parent()
    result: dict[str, Any] = {"stage": "load"}
    try:
        probe(req, result)
    except Exception as exc:  # a build or run failure is the answer, with the log that explains it
        result["error"] = f"{type(exc).__name__}: {one_line(exc)}"
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    result["log"] = read_log(os.path.join(req.workdir, LOG_NAME))
    try:
        conn.send(result)
    finally:
        conn.close()
