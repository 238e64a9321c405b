"""``ortop compare MODEL A.toml B.toml [C.toml …]``: which profile is faster, measured so that drift cannot decide.

The profiles' sessions are built side by side and run in alternating blocks of about 0.3 s (A B B A …) for at
most the budget; neighbouring blocks are paired and each metric gets a confidence interval from the pairs. Each
profile is compared with the first. The verdict is "faster" or "slower" only when the whole interval clears ±2 %;
"no difference" when it lies inside; else "undecided" (with about how much longer would decide it). The comparison
stops as soon as every verdict on the objective is settled, at looks fixed in advance whose intervals keep 95 %
coverage under that stopping (:mod:`ortop.measure.sequential`); the output says when it stopped early.

Exit 0 whatever the verdict; 2 for bad input (one ``ortop: error:`` line); 1 when the model fails at run time.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import threading
from dataclasses import replace
from typing import Any

from ortop.cli.flags import add_workload_args, apply_flags
from ortop.errors import UsageError
from ortop.measure.compare import METRICS, decided_after

OBJECTIVE_LABEL = {"p50": "p50", "p99": "p99", "throughput": "runs/s", "cpu": "CPU/run"}


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="the .onnx model")
    p.add_argument("profiles", nargs="+", metavar="PROFILE",
                   help="two or more profiles: a TOML path, or a name from ./profiles or the shipped ones")
    p.add_argument("--budget", type=float, default=30.0, metavar="SECONDS",
                   help="the most measuring time, all profiles together, builds not counted (default 30): it stops "
                        "sooner once every verdict on the objective is settled")
    p.add_argument("--objective", choices=METRICS, default="p50",
                   help="the metric listed first in the verdicts, and whose verdicts end the comparison once "
                        "settled (default p50)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--report", metavar="FILE.html",
                   help="also write a self-contained HTML page: the figures, a forest plot of the changes, the host "
                        "and the profiles")
    add_workload_args(p)


def _ordered(comps, objective: str):
    return sorted(comps, key=lambda c: (c.other, c.metric != objective, METRICS.index(c.metric)))


def _with_decision(c: Any, blocks: Any) -> dict[str, Any]:
    d = c.as_dict()
    took = decided_after(blocks, c.baseline, c.other, c.metric, level=c.look_confidence)
    d["decided_after_s"] = None if took is None else round(took, 2)
    return d


def to_json(model_path: str, budget_s: float, objective: str, result) -> dict[str, Any]:
    return {
        "model": model_path,
        "budget_s": budget_s,
        "objective": objective,
        "configs": [c.as_dict() for c in result.configs],
        "comparisons": [_with_decision(c, result.blocks) for c in _ordered(result.comparisons, objective)],
        "elapsed_s": round(result.elapsed_s, 3),
        "decided_s": None if result.decided_s is None else round(result.decided_s, 3),
        "stopped_early": result.stopped_early,
        "block_s": round(result.block_s, 4),
        "settle_s": round(result.settle_s, 4),
        "blocks": len(result.blocks),
        "workers": result.workers,
        "memory": result.memory.as_dict(),
        "stopped": result.stopped,
        "warnings": list(result.warnings),
    }


def format_result(model_path: str, budget_s: float, objective: str, result) -> str:
    from ortop.report.html import num  # the reports' figure format: one spelling of a table cell

    names = [c.name for c in result.configs]
    width = max(8, *(len(n) for n in names))
    workers = f", {result.workers} workers taking turns" if result.workers > 1 else ""
    took = "decided after" if result.stopped_early else "measured"
    lines = [
        f"model    {model_path}",
        f"{took} {result.elapsed_s:.1f} s of {budget_s:g} s in {len(result.blocks)} blocks of "
        f"{result.block_s * 1e3:.0f} ms (+{result.settle_s * 1e3:.0f} ms settle each){workers}"
        + ("  (stopped early)" if result.stopped else ""),
        "",
        f"  #  {'profile':<{width}}  {'runs':>8}  {'p50 ms':>8}  {'p99 ms':>8}  {'runs/s':>8}  {'CPU/run ms':>10}",
    ]
    for c in result.configs:
        kept = "" if c.kept() else f"  ← rate not kept: offered {c.offered_per_s:.0f}/s"
        lines.append(f"  {c.index}  {c.name:<{width}}  {c.runs:>8}  {num(c.p50_ms):>8}  {num(c.p99_ms):>8}  "
                     f"{num(c.throughput_per_s, 1):>8}  {num(c.cpu_ms_per_run):>10}{kept}")
    other = None
    for comp in _ordered(result.comparisons, objective):
        if comp.other != other:
            other = comp.other
            unpaced = [result.configs[i].name for i in (comp.baseline, other) if not result.configs[i].kept()]
            lines += ["", f"{names[other]} vs {names[comp.baseline]} ({comp.pairs} pairs of blocks):"
                      + (f"  [not a paced answer: {', '.join(unpaced)} did not keep the rate]" if unpaced else "")]
        word = ""
        if comp.verdict in ("faster", "slower"):
            word = f"  → {comp.verdict}" if comp.metric != "cpu" else \
                f"  → {'less' if comp.verdict == 'faster' else 'more'} CPU per run"
        mark = "*" if comp.metric == objective else " "
        lines.append(f" {mark}{comp.text()}{word}")
    lines += ["", result.memory.text()]
    for w in result.warnings:
        lines.append(f"warning  {w}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ortop.cli.profiles import resolve_profile
    from ortop.config import profile as P
    from ortop.engine import compare, workload_difference

    if len(args.profiles) < 2:
        raise UsageError(f"compare needs at least two profiles, got {len(args.profiles)}")
    if not (args.budget > 0 and math.isfinite(args.budget)):
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget:g}")
    from ortop.model import load_model

    load_model(args.model)  # a missing or broken model is bad input: say so before anything starts
    paths = [resolve_profile(name) for name in args.profiles]
    profiles = [apply_flags(P.load(path), args, args.model) for path in paths]
    if args.report:  # an unwritable report is found now, not after the measuring
        from ortop.report import check_report

        check_report(args.report, protect=(args.model, *paths))
    warnings = []
    for name, prof in zip(args.profiles[1:], profiles[1:]):
        diff = workload_difference(profiles[0], prof)
        if diff:
            warnings.append(f"{name} runs a different workload than {args.profiles[0]} ({', '.join(diff)}): "
                            "its figures measure different work")
    stop = threading.Event()

    def on_signal(signum, frame):  # Ctrl-C or SIGTERM: finish with what was measured
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = compare(args.model, profiles, budget_s=args.budget, names=list(args.profiles), stop=stop,
                         decide_on=args.objective)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if warnings:
        result = replace(result, warnings=tuple(warnings) + result.warnings)
    if args.json:
        print(json.dumps(to_json(args.model, args.budget, args.objective, result)), flush=True)
    else:
        print(format_result(args.model, args.budget, args.objective, result), flush=True)
    if args.report:  # after the result is printed: a report that fails to write loses nothing
        _write_report(args, to_json(args.model, args.budget, args.objective, result), profiles, paths)
    return 0


def _write_report(args: argparse.Namespace, data: dict[str, Any], profiles: list[Any], paths: list[Any]) -> None:
    from ortop.collectors.host import read_host
    from ortop.report import compare_page, write_report

    page = compare_page(data, host=read_host().as_dict(),
                        profiles=[(name, prof.to_toml()) for name, prof in zip(args.profiles, profiles)])
    write_report(args.report, page, protect=(args.model, *paths))


def compare_main(argv: list[str]) -> int:
    """``ortop compare …``; returns the exit code (bad input 2, a run-time failure 1)."""
    from ortop.cli.main import main

    return main(["compare", *argv])
