"""One fleet answer from the nodes' results: per node, per type, the sick-host flag, the cost ranking, the exit code.

Pure dictionaries in and out (no Ray here), so the answer can be built and tested from recorded node results. A
node's result is the single-host command's JSON (``result``) with the node beside it (``node``: id, address, type,
host facts), its ``status`` (done, lost, refused, failed, interrupted) and its own times on the node.

A type's figures pool its nodes' figures, save a node whose capacity interval leaves out its siblings' median
capacity: that node measured something its type does not share (a busy or sick host, a noisy neighbour), and
pooling it would move the type's answer by what one host suffered. Two siblings are needed to tell which host is
the odd one: with one, a disagreement is said and both are pooled. The type's interval runs from the lowest low
end to the highest high end of its pooled nodes: where a rerun on any host of the type is expected to land, which
is what sizing a fleet of that type must rest on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ortop.errors import (
    EXIT_GATE_FAILED,
    EXIT_GATE_UNDECIDED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_WORKER_LOST,
)

DONE, LOST, REFUSED, FAILED, INTERRUPTED = "done", "lost", "refused", "failed", "interrupted"

# A fleet's exit code is the gravest of its nodes': a lost node first (as a lost worker is for one host), then a
# failure, a check that said no, one that could not tell; findings and success last.
SEVERITY = (EXIT_WORKER_LOST, EXIT_RUNTIME, EXIT_GATE_FAILED, EXIT_GATE_UNDECIDED, 3, EXIT_OK)
HOURS_PER_MILLION = 1e6 / 3600.0  # a rate of r requests/s serves a million requests in 1e6 / (3600 r) hours


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def capacity_rows(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A capacity node's figures per profile: capacity, its interval, whether it met the SLO."""
    result = node.get("result") or {}
    rows = []
    for i, p in enumerate(result.get("profiles") or []):
        iv = p.get("interval") or [None, None]
        rows.append({"profile": p.get("profile") or str(i), "capacity_per_s": _num(p.get("capacity_per_s")),
                     "lo": _num(iv[0]), "hi": _num(iv[1]), "met": bool(p.get("met"))})
    return rows


def sick_flags(rows: Sequence[tuple[str, float, float, float]]) -> dict[str, str]:
    """``rows``: (node id, capacity, interval low, interval high) of one type and profile. The nodes whose interval
    leaves out the median of their siblings' capacities, each with the reason in words."""
    flags = {}
    for node_id, _, lo, hi in rows:
        siblings = [c for other, c, _, _ in rows if other != node_id and math.isfinite(c)]
        if len(siblings) < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        median = statistics.median(siblings)
        if not lo <= median <= hi:
            side = "below" if hi < median else "above"
            flags[node_id] = (f"its interval {lo:.4g}–{hi:.4g}/s lies {side} its siblings' median {median:.4g}/s: "
                              "a busy or sick host, not pooled into its type")
    return flags


def disagreement(rows: Sequence[tuple[str, float, float, float]]) -> str | None:
    """With exactly two nodes of a type whose intervals each leave out the other's capacity: a line saying so."""
    if len(rows) != 2:
        return None
    (a, ca, la, ha), (b, cb, lb, hb) = rows
    if all(math.isfinite(x) for x in (ca, cb, la, ha, lb, hb)) and not la <= cb <= ha and not lb <= ca <= hb:
        return (f"nodes {a[:8]} and {b[:8]} disagree (each interval leaves out the other's capacity); with two nodes "
                "the odd one cannot be told, both are pooled")
    return None


def usd_per_million(usd_per_hour: float, rate_per_s: float) -> float:
    """What a million requests cost on a host that costs ``usd_per_hour`` and serves ``rate_per_s``."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        return math.inf
    return usd_per_hour * HOURS_PER_MILLION / rate_per_s


def per_type(nodes: Sequence[Mapping[str, Any]], prices: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Each node type's answer: its nodes, and for capacity per profile its pooled capacity and interval, the
    flagged nodes, and with a price the cost per million requests from the interval's low end."""
    prices = prices or {}
    types: dict[str, list[Mapping[str, Any]]] = {}
    for n in nodes:
        types.setdefault(n["node"]["type"], []).append(n)
    out = []
    for name in sorted(types):
        members = types[name]
        done = [n for n in members if n["status"] == DONE]
        entry: dict[str, Any] = {"type": name, "nodes": [n["node"]["id"] for n in members],
                                 "answered": [n["node"]["id"] for n in done], "price_per_hour": prices.get(name),
                                 "profiles": []}
        by_profile: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for n in done:
            for row in capacity_rows(n):
                by_profile.setdefault(row["profile"], []).append((n["node"]["id"], row))
        for profile, rows in by_profile.items():
            figures = [(nid, r["capacity_per_s"], r["lo"], r["hi"]) for nid, r in rows]
            flags = sick_flags(figures)
            pooled = [(nid, r) for nid, r in rows if nid not in flags and math.isfinite(r["capacity_per_s"])]
            caps = [r["capacity_per_s"] for _, r in pooled]
            los = [r["lo"] for _, r in pooled if math.isfinite(r["lo"])]
            his = [r["hi"] for _, r in pooled if math.isfinite(r["hi"])]
            lo = min(los) if los else math.nan
            row_out: dict[str, Any] = {
                "profile": profile, "pooled": [nid for nid, _ in pooled],
                "flagged": [{"id": nid, "why": why} for nid, why in flags.items()],
                "capacity_per_s": statistics.median(caps) if caps else None,
                "interval": [lo if los else None, max(his) if his else None],
                "note": disagreement(figures)}
            price = prices.get(name)
            if price is not None:
                cost = usd_per_million(price, lo)
                row_out["usd_per_million"] = cost if math.isfinite(cost) else None
            entry["profiles"].append(row_out)
        out.append(entry)
    return out


def ranking(types: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """(type, profile) pairs with a price, cheapest per million requests first (from the interval's low end)."""
    rows = [{"type": t["type"], "profile": p["profile"], "usd_per_million": p["usd_per_million"],
             "per_host_per_s": p["interval"][0]}
            for t in types for p in t["profiles"] if p.get("usd_per_million") is not None]
    return sorted(rows, key=lambda r: r["usd_per_million"])


def exit_code(nodes: Sequence[Mapping[str, Any]], *, interrupted: bool = False) -> int:
    """The fleet's exit code: 130 on ctrl-C; else the gravest of its nodes' (a lost node is 4); 1 when no node
    gave a result."""
    if interrupted:
        return EXIT_INTERRUPTED
    codes = []
    for n in nodes:
        if n["status"] == LOST:
            codes.append(EXIT_WORKER_LOST)
        elif n["status"] == FAILED:
            codes.append(EXIT_RUNTIME)
        elif n["status"] == DONE:
            codes.append(int(n.get("exit_code") or 0))
    if not any(n["status"] == DONE for n in nodes) and not any(c == EXIT_WORKER_LOST for c in codes):
        return EXIT_RUNTIME
    for code in SEVERITY:
        if code in codes:
            return code
    return max(codes, default=EXIT_OK)


def lost_lines(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per lost node: which, of what type, and what it had done when it went."""
    out = []
    for n in nodes:
        if n["status"] == LOST:
            node = n["node"]
            out.append(f"node {node['id'][:12]} ({node['type']}, {node['address']}) lost: {n.get('line') or ''}")
    return out
