"""``ortop capacity MODEL [--profile PROFILE …] --slo p99=50ms``: the most traffic each profile serves within the SLO.

Poisson arrivals (common to every profile), searched from the closed-loop ceiling down; each point decided by
batch means over interleaved blocks (:mod:`ortop.engine.capacity`). Prints the capacities with the interval a rerun
is expected to land in and the bracket each was found in, the host's noise over the search, the curve in the
terminal, the best profile and its ratio to the first; ``--json`` one object.

A worker that dies is restarted with its sessions and the search goes on (``restarts`` says so). One that dies
again before finishing a block ends the search as ctrl-C does: what was measured is printed (``fault`` says why),
and the command exits 4 (``exit_code`` in the JSON; ctrl-C 130, a search that ran its course 0).
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import threading
from typing import Any

from ortop.cli.flags import BUDGET_WALL, OWN_ARRIVALS, add_budget_arg, add_workload_args, apply_flags
from ortop.errors import EXIT_WORKER_LOST, UsageError

EXAMPLES = """examples:
  ortop capacity model.onnx --slo p99=50ms
  ortop capacity model.onnx --profile one-thread.toml --profile two-replicas.toml --slo p95=20ms --budget 120
  ortop capacity model.onnx --slo mean=10ms --dim seq=16..256 --json
  ortop capacity model.onnx --provider cuda --strict-providers --slo p99=8ms
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    p.add_argument("--profile", action="append", default=[], metavar="PROFILE",
                   help="a profile to size (repeat for several, compared side by side); default: ORT's defaults")
    p.add_argument("--slo", required=True, metavar="METRIC=LIMIT",
                   help="the latency objective on response time: p50, p90, p95, p99, p999 or mean, e.g. p99=50ms")
    add_budget_arg(p, 120.0, BUDGET_WALL)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--no-plot", action="store_true", help="leave the terminal curve out")
    p.add_argument("--report", metavar="FILE",
                   help="also write a self-contained HTML page to FILE: the curves, the table, the SLO, the host "
                        "and the profiles")
    p.add_argument("--strict-providers", action="store_true",
                   help="fail instead of warning when a requested provider is not active (silent CPU fallback)")
    add_workload_args(p, session=True, refuse=OWN_ARRIVALS, helps={
        "--max-queue": "at each rate offered, shed requests beyond N waiting (default: one second of requests at "
                       "that rate, at least 64); the shed are counted in each point"})


def run(args: argparse.Namespace) -> int:
    from ortop.cli.profiles import resolve_profile
    from ortop.config import profile as P
    from ortop.engine import find_capacity
    from ortop.measure.slo import parse_slo
    from ortop.model import load_model

    slo = parse_slo(args.slo)
    if not (args.budget > 0 and math.isfinite(args.budget)):
        raise UsageError(f"--budget must be > 0 seconds, got {args.budget:g}")
    load_model(args.model)
    names = list(args.profile) or ["defaults"]
    paths = [resolve_profile(n) for n in args.profile]
    if args.report:  # an unwritable report is found now, not after the search
        from ortop.report import check_report

        check_report(args.report, protect=(args.model, *paths))
    bases = [P.load(p) for p in paths] or [P.Profile()]
    profiles = [apply_flags(b, args, args.model) for b in bases]
    stop = threading.Event()
    interrupted = []

    def on_signal(signum: int, frame: Any) -> None:  # ctrl-C: print what is known; a second one aborts
        if stop.is_set():
            raise KeyboardInterrupt
        interrupted.append(signum)
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = find_capacity(args.model, profiles, slo, budget_s=args.budget, names=names, stop=stop,
                               strict_providers=args.strict_providers)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    # ctrl-C exits 130; a worker lost for good (it died again right after a restart) 3; both print what is known
    code = EXIT_WORKER_LOST if result.fault else 130 if interrupted else 0
    data = {**result.as_dict(), "exit_code": code}
    if args.json:
        print(json.dumps(data), flush=True)
    else:
        print(format_result(result, plot=not args.no_plot), flush=True)
    if args.report:  # after the result is printed: a report that fails to write loses nothing
        from ortop.collectors.host import read_host
        from ortop.report import capacity_page, write_report

        page = capacity_page(data, host=read_host().as_dict(),
                             profiles=[(n, p.to_toml()) for n, p in zip(names, profiles)])
        write_report(args.report, page, protect=(args.model, *paths))
    return code


def _rate(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "?"
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def capacity_text(search: Any, slo: Any) -> str:
    """``32/s (90 % interval 27–35/s)``; ``0`` when nothing met the SLO."""
    if not search.met:
        return "0"
    cap = f"{_rate(search.capacity(slo))}/s"
    iv = search.interval(slo)
    if iv is None or not math.isfinite(iv.lo):
        return cap
    return f"{cap} ({iv.confidence * 100:g} % interval {_rate(iv.lo)}–{_rate(iv.hi)}/s)"


def noise_text(noise: Any) -> str:
    """The host's noise over the search in one line."""
    def pct(x: float | None, digits: int = 1) -> str:
        return "?" if x is None else f"{x:.{digits}f} %"

    share = "?" if noise.slow_share is None else f"{noise.slow_share * 100:.2g} %"
    return (f"steal {pct(noise.steal_pct)}, CPU pressure {pct(noise.cpu_pressure_pct)}; runs slower than "
            f"{noise.slow_k:g}× their shape's median: {share}")


def format_result(result: Any, *, plot: bool = True) -> str:
    from ortop.measure.bracket import NOT_APART
    from ortop.report.curve import text_curve

    slo = result.slo
    lines = [f"model    {result.model}",
             f"slo      {slo.text()} of response time, Poisson arrivals; {result.elapsed_s:.0f} s of "
             f"{result.budget_s:g} s" + ("  (stopped early)" if result.stopped else ""), ""]
    width = max(8, *(len(s.label()) for s in result.searches))
    lines.append(f"  #  {'profile':<{width}}  {'capacity (interval)':>30}  {'bracket':>15}  {'ceiling':>8}  "
                 f"{slo.metric} at no load")
    for s in result.searches:
        if s.failed:
            lines.append(f"  {s.index}  {s.label():<{width}}  failed: {s.failed}")
            continue
        hi = _rate(s.hi)
        bracket = f"{_rate(s.lo)}…{hi}/s"
        lines.append(f"  {s.index}  {s.label():<{width}}  {capacity_text(s, slo):>30}  {bracket:>15}  "
                     f"{_rate(s.ceiling_per_s):>6}/s  {s.floor_ms:.3g} ms")
        if s.note:
            lines.append(f"     {s.note}")
        for n in s.notes:
            lines.append(f"     input: {n}")
    if any(s.met and not s.failed for s in result.searches):
        lines.append("     the interval: where a rerun here is expected to land (the tail's sampling, the host's drift "
                     "and the bracket); the bracket: the search's resolution")
    noise = getattr(result, "host_noise", None)
    if noise is not None:
        lines.append(f"host     {noise_text(noise)}")
        if noise.verdict:
            lines.append(f"         {noise.verdict}")
    best = result.best()
    if best is not None and len(result.searches) > 1:
        b = result.searches[best]
        if result.separated(best):
            lines += ["", f"best for {slo.text()}: {b.name}, {_rate(b.capacity(slo))}/s"]
        else:
            lines += ["", f"ahead for {slo.text()}: {b.name}, {_rate(b.capacity(slo))}/s, but {NOT_APART}: not "
                          "shown to serve more (a longer --budget gives points time to decide)"]
        for s in result.searches:
            if s.index != best and s.met:
                est, lo, hi = result.ratio(best, s.index)
                lines.append(f"  {b.name} / {s.name}: ×{est:.2f} (within ×{lo:.2f}…×{hi:.2f} by the brackets)")
    elif best is None:
        lines += ["", f"no profile meets {slo.text()} at any rate here (met: false)"]
    if any(s.points for s in result.searches):
        lines += ["", "points (offered → served, within the SLO, SLO metric measured, in the long run by the queue "
                      "model, decision by):"]
    for s in result.searches:
        for rate, p in sorted(s.points.items()):
            v = p.value(slo)
            est, lo, hi = p.model
            model = (f"  long run {est:.3g} ({lo:.3g}…{hi:.3g})" if math.isfinite(hi) else
                     "  long run: unbounded" if est == math.inf else "")
            by = f" by {p.decided_by}" if p.decided_by else ""
            lines.append(f"  {s.label():<{width}}  {rate:>8.1f}/s → {p.served_per_s():>8.1f}/s  "
                         f"{p.goodput_per_s():>8.1f}/s within  {slo.metric} {v:>8.3g} ms{model}  {p.decision}{by}"
                         + (f"  ({p.dropped} shed)" if p.dropped else ""))
    if plot and any(s.points for s in result.searches):
        lines += ["", text_curve(result.as_dict())]
    for w in result.warnings:
        lines.append(f"warning  {w}")
    return "\n".join(lines)
