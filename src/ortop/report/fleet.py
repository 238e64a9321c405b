"""The fleet's page (``ortop fleet … --report FILE``): per node and per type, from the fleet's ``--json`` alone.

Like every page here it renders only the dict the command prints, so it can never disagree with the JSON: each
node's facts and answer, each type's pooled capacity with its interval and the nodes flagged out of it, the cost
ranking, the sizing of a peak, and the nodes lost or not measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ortop.present import cell
from ortop.report.html import esc, facts, notes_section, page, table


def _capacity(p: Mapping[str, Any]) -> str:
    iv = p.get("interval") or [None, None]
    if not p.get("met"):
        return "undecided" if p.get("result") == "undecided" else "0 (SLO not met)"
    return f"{cell(p.get('capacity_per_s'))}/s ({cell(iv[0])}–{cell(iv[1])}/s)"


def _answer(command: str, e: Mapping[str, Any]) -> str:
    if e["status"] != "done":
        return str(e.get("line") or "")
    result = e.get("result") or {}
    if command == "capacity":
        return "; ".join(f"{p.get('profile')}: {_capacity(p)}" for p in result.get("profiles") or [])
    return f"exit {e.get('exit_code')}"


def _noise(e: Mapping[str, Any]) -> str:
    n = (e.get("result") or {}).get("host_noise") or {}
    if not n:
        return ""
    return f"steal {cell(n.get('steal_pct'), 1)} %, CPU pressure {cell(n.get('cpu_pressure_pct'), 1)} %"


def nodes_section(data: Mapping[str, Any]) -> str:
    command = data["fleet"]["command"]
    rows, classes = [], []
    for e in data["nodes"]:
        node = e["node"]
        f = node.get("facts") or {}
        rows.append([node["id"][:12], node["type"], node["address"], f.get("cpu_model") or "",
                     f.get("usable_cpus"), ", ".join(f.get("gpus") or []) or "none", e["status"],
                     _answer(command, e), _noise(e)])
        classes.append("" if e["status"] == "done" else "bad")
    return "<h2>Nodes</h2>" + table(["node", "type", "address", "CPU", "usable cores", "GPUs", "status", "answer",
                                     "host noise"], rows, numeric=[4], classes=classes)


def types_section(data: Mapping[str, Any]) -> str:
    rows = []
    notes: list[str] = []
    for t in data["types"]:
        for p in t["profiles"]:
            iv = p["interval"]
            rows.append([t["type"], p["profile"], f"{len(p['pooled'])}/{len(t['nodes'])}",
                         cell(p["capacity_per_s"]), f"{cell(iv[0])}–{cell(iv[1])}",
                         cell(t.get("price_per_hour")), cell(p.get("usd_per_million"), 4)])
            notes += [f"{t['type']}: node {f['id'][:12]} flagged: {f['why']}" for f in p["flagged"]]
            if p.get("note"):
                notes.append(f"{t['type']}: {p['note']}")
    if not rows:
        return ""
    return ("<h2>Per type</h2><p>A node whose interval leaves out its siblings' median capacity is not pooled; the "
            "type's interval runs from its pooled nodes' lowest low end to their highest high end.</p>"
            + table(["type", "profile", "pooled", "capacity /s", "interval /s", "USD per hour", "USD per million"],
                    rows, numeric=[3, 5, 6]) + notes_section(notes, "Flags"))


def sizing_section(data: Mapping[str, Any]) -> str:
    rows = []
    for t in data["types"]:
        s = t.get("sizing")
        if not s or "hosts" not in s:
            continue
        sim = s["simulated"]
        rows.append([t["type"], cell(s["per_host_per_s"]), s["hosts"], s["hosts_with_spare"],
                     cell(sim["random"]["at_n"]), cell(sim["random"]["at_n_minus_1"]),
                     cell(sim["least_outstanding"]["at_n"]), cell(sim["least_outstanding"]["at_n_minus_1"]),
                     s["verdict"]])
    if not rows:
        return ""
    f = data["fleet"]
    slo = f.get("slo") or {}
    return (f"<h2>Sizing a peak of {esc(cell(f.get('peak_per_s')))}/s</h2><p>N hosts at each type's interval low end; "
            f"the {esc(slo.get('metric'))} (ms) simulated from the service times its nodes measured, behind a random "
            "split and behind least outstanding requests, at N and N−1.</p>"
            + table(["type", "per host /s", "N", "N+1", "random at N", "random at N−1", "LOR at N", "LOR at N−1",
                     "verdict"], rows, numeric=[1, 2, 3, 4, 5, 6, 7]))


def fleet_page(data: Mapping[str, Any]) -> str:
    """The whole page from the fleet's JSON."""
    f = data["fleet"]
    ranking = data.get("ranking") or []
    body = [facts([("command", f"ortop {f['command']} {' '.join(f.get('args') or [])}"), ("model", f["model"]),
                   ("sha256", f.get("sha256")), ("cluster", f.get("cluster")), ("elapsed", f"{f['elapsed_s']} s"),
                   ("exit code", data.get("exit_code"))]),
            nodes_section(data), types_section(data)]
    if ranking:
        body.append("<h2>Cost per million requests</h2>" + table(
            ["rank", "type", "profile", "per host /s (low end)", "USD per million"],
            [[i + 1, r["type"], r["profile"], cell(r["per_host_per_s"]), cell(r["usd_per_million"], 4)]
             for i, r in enumerate(ranking)], numeric=[0, 3, 4]))
    body.append(sizing_section(data))
    body.append(notes_section(data.get("lost") or [], "Lost nodes"))
    body.append(notes_section([f"{s['node']['id'][:12]}: {s['why']}" for s in data.get("not_measured") or []],
                              "Not measured"))
    return page(f"ortop fleet {f['command']}", f"{len(data['nodes'])} node(s) of {len(data['types'])} type(s)", body)
