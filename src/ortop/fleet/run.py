"""One fleet run: connect, probe, check what only the cluster can check, measure every chosen node at once, gather.

Everything that can be refused is refused before any measurement starts: a price for a type no node has, a
cluster with no node that can measure. Nodes are measured in parallel, each exclusively (:mod:`ortop.fleet.cluster`);
a node that cannot give the provider asked is refused on its own, and a node lost mid-run is named in the answer
while the others finish.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortop.config.providers import ort_name
from ortop.errors import UsageError
from ortop.fleet import cluster as C
from ortop.fleet import gather as G
from ortop.fleet import tasks as T
from ortop.measure.fleet_sizing import size
from ortop.measure.slo import Slo

GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider")


@dataclass
class FleetRequest:
    """What to run where: the single-host command and its arguments (the model and the fleet's own flags left out),
    the cluster, and the fleet's questions (prices, a peak)."""

    command: str
    model: str
    args: list[str]
    cluster: str = "auto"
    files: dict[str, bytes] = field(default_factory=dict)
    per_type: int | None = None
    prices: dict[str, float] = field(default_factory=dict)
    peak: float | None = None
    slo: Slo | None = None
    provider: str | None = None
    service_s: float = 0.0
    run_args: list[str] = field(default_factory=list)


def _priced_types(prices: Mapping[str, float], types: Sequence[str]) -> dict[str, float]:
    """The prices keyed by the types' own names (matched without regard to case); a price for a type no node has
    is one UsageError line naming the types there are."""
    by_lower = {t.lower(): t for t in types}
    out = {}
    for name, usd in prices.items():
        if name.lower() not in by_lower:
            raise UsageError(f"--price {name}={usd:g}: no node of type {name!r} (types here: "
                             f"{', '.join(repr(t) for t in sorted(types)) or 'none'})")
        out[by_lower[name.lower()]] = usd
    return out


def chosen(nodes: Sequence[C.Node], per_type: int | None) -> list[C.Node]:
    """The nodes to measure: every usable one, or the first ``per_type`` of each type (by node id)."""
    usable = sorted((n for n in nodes if not n.problem), key=lambda n: (n.type, n.id))
    if per_type is None:
        return usable
    seen: dict[str, int] = {}
    out = []
    for n in usable:
        seen[n.type] = seen.get(n.type, 0) + 1
        if seen[n.type] <= per_type:
            out.append(n)
    return out


def refusal(node: C.Node, provider: str | None) -> str | None:
    """Why ``node`` cannot give the provider asked, in one line; None when it can."""
    if provider is None:
        return None
    full = ort_name(provider)
    offered = list(node.facts.get("providers") or [])
    if offered and full not in offered:
        return f"--provider {provider}: onnxruntime on this node offers {', '.join(offered)}"
    if full in GPU_PROVIDERS and not (node.facts.get("gpus") and node.gpus > 0):
        return f"--provider {provider}: the node has no GPU (or offers Ray none)"
    return None


def _entry(node: C.Node, value: Mapping[str, Any]) -> dict[str, Any]:
    return {"node": node.as_dict(), **{k: v for k, v in value.items() if k != "pid"}}


def run_fleet(req: FleetRequest, *, say: Callable[[str], None], stopping: Callable[[], bool]) -> dict[str, Any]:
    """The fleet's answer as one dict (the ``--json``): every node, every type, the ranking, the sizing."""
    with open(req.model, "rb") as f:
        model = f.read()
    t0 = time.monotonic()
    address = C.connect(req.cluster)
    try:
        found = C.nodes()
        C.probe(found)
        usable = [n for n in found if not n.problem]
        if not usable:
            why = "; ".join(f"{n.id[:8]}: {n.problem}" for n in found) or "no live node"
            raise UsageError(f"--cluster {req.cluster}: no node can measure ({why})")
        prices = _priced_types(req.prices, sorted({n.type for n in usable}))
        picked = chosen(found, req.per_type)
        entries: list[dict[str, Any]] = []
        spec = {"command": req.command, "model_name": os.path.basename(req.model), "sha256": T.sha256(model),
                "args": list(req.args), "files": dict(req.files), "service_s": req.service_s,
                "run_args": list(req.run_args)}
        refs = {}
        ref = C.put(model)
        flag = C.stop_flag()
        for n in picked:
            refused = refusal(n, req.provider)
            if refused is not None:
                say(f"node {n.id[:12]} ({n.type}) refused: {refused}")
                entries.append(_entry(n, {"status": G.REFUSED, "line": refused}))
                continue
            refs[C.start(n, spec, ref, flag)] = n
        say(f"measuring {len(refs)} node(s) of {len({n.type for n in refs.values()})} type(s) with ortop "
            f"{req.command}; cluster {address}")

        def done(node: C.Node, value: dict[str, Any]) -> None:
            entry = _entry(node, value)
            entries.append(entry)
            status = entry["status"]
            say(f"node {node.id[:12]} ({node.type}): {status}"
                + (f", exit {entry.get('exit_code')}" if status == G.DONE else f": {entry.get('line') or ''}"))

        C.wait_all(refs, done, stopping, flag)
        stopped = stopping()
    finally:
        C.disconnect()
    order = {n.id: i for i, n in enumerate(picked)}
    entries.sort(key=lambda e: order.get(e["node"]["id"], len(order)))
    skipped = [{"node": n.as_dict(), "why": n.problem} for n in found if n.problem]
    types = G.per_type(entries, prices)
    if req.peak is not None and req.slo is not None:
        _size(types, entries, req.peak, req.slo)
    code = G.exit_code(entries, interrupted=stopped)
    return {"fleet": {"command": req.command, "model": req.model, "sha256": spec["sha256"], "args": list(req.args),
                      "cluster": address, "per_type": req.per_type, "peak_per_s": req.peak,
                      "slo": req.slo.as_dict() if req.slo else None, "elapsed_s": round(time.monotonic() - t0, 2),
                      "stopped": stopped},
            "nodes": entries, "not_measured": skipped, "types": types, "ranking": G.ranking(types),
            "lost": G.lost_lines(entries), "exit_code": code}


def _size(types: list[dict[str, Any]], entries: Sequence[Mapping[str, Any]], peak: float, slo: Slo) -> None:
    """Each type's hosts for the peak (its first profile: the one the headless service run measured), in place."""
    service: dict[str, Mapping[str, Any]] = {e["node"]["id"]: e["service"] for e in entries if e.get("service")}
    for t in types:
        if not t["profiles"]:
            continue
        p = t["profiles"][0]
        lo = p["interval"][0]
        sources = [service[i] for i in p["pooled"] if i in service]
        if lo is None or not (lo > 0 and math.isfinite(lo)):
            t["sizing"] = {"note": "no capacity interval to size from"}
        elif not sources:
            t["sizing"] = {"note": "no service times were measured on the type's pooled nodes"}
        else:
            servers = max(int(s.get("replicas") or 1) for s in sources)
            t["sizing"] = size(peak, lo, [s["service_ms"] for s in sources], slo, servers=servers).as_dict()
