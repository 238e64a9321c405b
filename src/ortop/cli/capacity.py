"""``ortop capacity MODEL [--profile PROFILE …] --slo p99=50ms``: the most traffic each profile serves within the SLO.

Poisson arrivals (common to every profile), searched from the closed-loop ceiling down; each point decided by
batch means over interleaved blocks (:mod:`ortop.engine.answers.capacity`). Prints the capacities with the interval a
rerun is expected to land in and the bracket each was found in (the search's resolution), the host's noise over the
search, the curve in the terminal, the best profile and its ratio to the others, judged by their intervals
(:mod:`ortop.measure.ratio`); ``--json`` one object.

A worker that dies is restarted with its sessions and the search goes on (``restarts`` says so). One that dies
again before finishing a block ends the search as ctrl-C does: what was measured is printed (``fault`` says why),
and the command exits 4 (``exit_code`` in the JSON; ctrl-C 130, a search that ran its course 0).

``--certify RATE`` certifies one rate instead (:mod:`ortop.engine.answers.certify`, MLPerf Server's early-stopping
rule): exit 0 certified, 5 violated, 6 undecided; without RATE the search runs first and 0.9 × its capacity is
certified.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from ortop.cli.argtypes import rate as rate_arg
from ortop.cli.argtypes import seconds
from ortop.cli.flags import BUDGET_WALL, OWN_ARRIVALS, add_json, add_strict_providers, add_workload_args, apply_flags
from ortop.cli.stopping import stop_on_signals
from ortop.errors import EXIT_OK, EXIT_UNDECIDED, EXIT_VIOLATED, EXIT_WORKER_LOST, UsageError
from ortop.measure.noise import STALLS_MOVE
from ortop.measure.rerun import drift_gain
from ortop.present import pct_unit, rate_figure

SEARCH_BUDGET_S = 120.0
CERTIFY_BUDGET_S = 300.0   # ortop.engine.answers.certify.BUDGET_S (not imported here: the parser stays light)
# --certify with no RATE: search first, certify 0.9 × the capacity found. A rate the parser refuses (never one
# given), and not a str: argparse would parse a str const as a RATE.
CERTIFY_SEARCHED = math.inf

EXAMPLES = """examples:
  ortop capacity model.onnx --slo p99=50ms
  ortop capacity model.onnx --profile one-thread.toml --profile two-replicas.toml --slo p95=20ms --budget 120
  ortop capacity model.onnx --slo mean=10ms --dim seq=16..256 --json
  ortop capacity model.onnx --provider cuda --strict-providers --slo p99=8ms
  ortop capacity model.onnx --slo p99=20ms --certify 150 --min-duration 600 --budget 900
  ortop capacity model.onnx --slo p99=20ms --certify --json
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    p.add_argument("--profile", action="append", default=[], metavar="PROFILE",
                   help="a profile to size (repeat for several, compared side by side); default: ORT's defaults")
    p.add_argument("--slo", required=True, metavar="METRIC=LIMIT",
                   help="the latency objective on response time: p50, p90, p95, p99, p999 or mean, e.g. p99=50ms")
    p.add_argument("--budget", type=seconds, default=None, metavar="SECONDS",
                   help=f"{BUDGET_WALL} (default {SEARCH_BUDGET_S:g}; {CERTIFY_BUDGET_S:g} with --certify, of which "
                        f"a search before the certification takes up to half, at most {SEARCH_BUDGET_S:g})")
    add_certify_args(p)
    add_json(p, "print the result as one JSON object")
    p.add_argument("--no-plot", action="store_true", help="leave the terminal curve out")
    p.add_argument("--report", metavar="FILE",
                   help="also write a self-contained HTML page to FILE: the curves, the table, the SLO, the host "
                        "and the profiles")
    add_strict_providers(p)
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
    if args.certify is not None:
        return run_certify(args, slo)
    if args.min_duration is not None:  # a search has no minimum duration: taken in silence it would be ignored
        raise UsageError("--min-duration is a certification's: it needs --certify [RATE]")
    if args.budget is None:
        args.budget = SEARCH_BUDGET_S
    load_model(args.model)
    names = list(args.profile) or ["defaults"]
    paths = [resolve_profile(n) for n in args.profile]
    if args.report:  # an unwritable report is found now, not after the search
        from ortop.report import check_report

        check_report(args.report, protect=(args.model, *paths))
    bases = [P.load(p) for p in paths] or [P.Profile()]
    profiles = [apply_flags(b, args, args.model) for b in bases]
    with stop_on_signals(second_aborts=True) as stopping:  # ctrl-C: print what is known; a second one aborts
        result = find_capacity(args.model, profiles, slo, budget_s=args.budget, names=names, stop=stopping.event,
                               strict_providers=args.strict_providers)
    # ctrl-C exits 130; a worker lost for good (it died again right after a restart) 3; both print what is known
    code = EXIT_WORKER_LOST if result.fault else 130 if stopping.signalled else 0
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




def capacity_text(search: Any, slo: Any) -> str:
    """``32/s (90 % interval 27–35/s)``; ``0`` when no rate meets the SLO (decided at no load); ``< 4.2/s`` when
    every rate measured missed it and none lower was measured; ``undecided`` when no point was judged (each ended
    with fewer requests than the SLO's metric needs)."""
    if not search.met:
        outcome = search.outcome(slo)
        if outcome == "none met" and search.points:
            return f"< {rate_figure(min(search.points))}/s"
        return "undecided" if outcome == "undecided" else "0"
    cap = f"{rate_figure(search.capacity(slo))}/s"
    iv = search.interval(slo)
    if iv is None or not math.isfinite(iv.lo):
        return cap
    return f"{cap} ({iv.confidence * 100:g} % interval {rate_figure(iv.lo)}–{rate_figure(iv.hi)}/s)"


def noise_text(noise: Any) -> str:
    """The host's noise over the search in one line."""
    share = "?" if noise.slow_share is None else f"{noise.slow_share * 100:.2g} %"
    return (f"steal {pct_unit(noise.steal_pct)}, CPU pressure {pct_unit(noise.cpu_pressure_pct)}; runs slower than "
            f"{noise.slow_k:g}× their shape's median: {share}")


def host_lines(noise: Any, *, met: bool) -> list[str]:
    """The host's noise under the table: its figures, the verdict, and where the stalls alone reach the SLO's
    percentile and a capacity was found, that a rerun can land outside its interval."""
    lines = [f"host     {noise_text(noise)}"]
    if noise.verdict:
        lines.append(f"         {noise.verdict}")
    if noise.stalls_reach and met:
        lines.append(f"         {STALLS_MOVE}")
    return lines


def format_result(result: Any, *, plot: bool = True) -> str:
    from ortop.report.curve import text_curve

    slo = result.slo
    lines = [f"model    {result.model}",
             f"slo      {slo.text()} of response time, Poisson arrivals; {result.elapsed_s:.0f} s of "
             f"{result.budget_s:g} s" + ("  (stopped early)" if result.stopped else ""), ""]
    width = max(8, *(len(s.label()) for s in result.searches))
    lines.append(f"  #  {'profile':<{width}}  {'capacity (interval)':>30}  {'bracket':>15}  {'ceiling':>8}  "
                 f"{slo.metric} at no load")
    for s in result.searches:
        lines += _search_rows(s, slo, width)
    if any(s.met and not s.failed for s in result.searches):
        lines.append("     the interval: where a rerun here is expected to land (the tail's sampling, the host's drift "
                     "and the bracket); the bracket: the search's resolution")
    noise = getattr(result, "host_noise", None)
    if noise is not None:
        lines += host_lines(noise, met=any(s.met and not s.failed for s in result.searches))
    lines += _answer_lines(result, slo)
    if any(s.points for s in result.searches):
        lines += ["", "points (rate asked: offered → served, both of the requests that arrived in its windows; within "
                      "the SLO; requests; SLO metric measured, in the long run by the queue model; decision by):"]
    for s in result.searches:
        lines += _point_rows(s, slo, width)
    if plot and any(s.points for s in result.searches):
        lines += ["", text_curve(result.as_dict())]
    for w in result.warnings:
        lines.append(f"warning  {w}")
    return "\n".join(lines)


def _search_rows(s: Any, slo: Any, width: int) -> list[str]:
    """One profile's row of the table, then its note, remarks, the flat-crossing warning and its inputs' notes."""
    if s.failed:
        return [f"  {s.index}  {s.label():<{width}}  failed: {s.failed}"]
    bracket = f"{rate_figure(s.lo)}…{rate_figure(s.hi)}/s"
    no_load = s.no_load.text() if s.no_load is not None else f"{s.floor_ms:.3g} ms"
    lines = [f"  {s.index}  {s.label():<{width}}  {capacity_text(s, slo):>30}  {bracket:>15}  "
             f"{rate_figure(s.ceiling_per_s):>6}/s  {no_load}"]
    if s.note:
        lines.append(f"     {s.note}")
    lines += [f"     {r}" for r in s.remarks]
    iv = s.interval(slo) if s.met else None
    if iv is not None and iv.flat:
        lines.append(f"     flat: {slo.metric} barely climbs with the rate where it crosses {slo.ms:g} ms (slope "
                     f"{max(iv.slope, 0):.2f} in log–log): its level is set by stalls or wake-ups more than by "
                     f"queueing. The interval moves with the host's pace ×{drift_gain(iv.slope):.1f}, but a rerun "
                     "that finds the tail's level moved can land outside it")
    lines += [f"     input: {n}" for n in s.notes]
    return lines


def _answer_lines(result: Any, slo: Any) -> list[str]:
    """The answer under the table: the best profile (or one ahead but not apart) with the ratios between profiles,
    or why none has a capacity (undecided, below every rate measured, or none at any rate)."""
    from ortop.measure.bracket import NOT_APART
    from ortop.measure.ratio import ratio_text

    best = result.best()
    if best is not None and len(result.searches) > 1:
        b = result.searches[best]
        if result.separated(best):
            lines = ["", f"best for {slo.text()}: {b.name}, {rate_figure(b.capacity(slo))}/s"]
        else:
            lines = ["", f"ahead for {slo.text()}: {b.name}, {rate_figure(b.capacity(slo))}/s, but {NOT_APART}: not "
                         "shown to serve more (a longer --budget gives points time to decide)"]
        for s in result.searches:
            if s.index != best and s.met:  # judged by the two rerun intervals, never by the brackets
                lines.append(f"  {b.name} / {s.name}: {ratio_text(b.interval(slo), s.interval(slo))}")
        return lines
    if best is not None:
        return []
    live = [s for s in result.searches if not s.failed]
    if live and all(s.outcome(slo) == "undecided" for s in live):  # no point held the requests it needs
        return ["", f"undecided for {slo.text()}: no point held the {slo.runs_needed()} requests a {slo.metric} "
                    "needs within the budget (met: false; a longer --budget gives them)"]
    if live and all(s.outcome(slo) in ("none met", "undecided") for s in live):  # below what was measured
        low = min(r for s in live for r in s.points) if any(s.points for s in live) else math.nan
        pred = [s.predicted_per_s for s in live if s.predicted_per_s > 0]
        guess = (f"; the queue model of their runs puts it near {rate_figure(min(pred))}/s, where a point needs about "
                 f"{slo.runs_needed() / min(pred):.0f} s for its {slo.runs_needed()} requests"
                 if pred else "")
        return ["", f"below {rate_figure(low)}/s for {slo.text()}: every rate measured missed it and none lower was "
                    f"measured in the budget{guess} (met: false; a longer --budget measures lower rates)"]
    return ["", f"no profile meets {slo.text()} at any rate here (met: false)"]


def _point_rows(s: Any, slo: Any, width: int) -> list[str]:
    """One profile's points, lowest rate first: offered → served, within the SLO, requests, the metric measured and
    the queue model's long-run estimate, and what decided it."""
    lines = []
    for rate, p in sorted(s.points.items()):
        v = p.value(slo)
        est, lo, hi = p.model
        model = (f"  long run {est:.3g} ({lo:.3g}…{hi:.3g})" if math.isfinite(hi) else
                 "  long run: unbounded" if est == math.inf else "")
        lines.append(f"  {s.label():<{width}}  {rate:>8.3g}/s: {p.offered_per_s():>8.3g} → "
                     f"{p.served_per_s():>8.3g}/s  {p.goodput_per_s():>8.3g}/s within  {p.runs:>6,} req  "
                     f"{slo.metric} {v:>8.3g} ms{model}  "
                     f"{p.decision_text(slo)}" + (f"  ({p.dropped} shed)" if p.dropped else ""))
    return lines


# ---- --certify RATE: MLPerf Server's early-stopping rule at one rate (ortop.engine.answers.certify) -------------
def add_certify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--certify", nargs="?", type=rate_arg, const=CERTIFY_SEARCHED, default=None, metavar="RATE",
                   help="certify that RATE requests/s (Poisson) meets the SLO's percentile, by MLPerf Inference's "
                        "Server early-stopping rule (99 %% confidence, clumped overs counted once per clump); "
                        "without RATE, search first and certify 0.9 x the capacity found. Exit 0 certified, "
                        "5 violated, 6 undecided")
    p.add_argument("--min-duration", type=seconds, default=None, metavar="SECONDS",
                   help="with --certify: the measured time a certification needs besides the rule's request count "
                        "(default 60; MLPerf asks 600)")


def run_certify(args: argparse.Namespace, slo: Any) -> int:
    """``--certify [RATE]``: certify the rate on the first profile (a search first when no RATE is given); exit 0
    certified, 5 violated, 6 undecided, 4 worker lost, 130 ctrl-C (the certification so far printed, undecided)."""
    from ortop.cli.profiles import resolve_profile
    from ortop.config import profile as P
    from ortop.engine import CERTIFY_MIN_DURATION_S, SEARCHED_SHARE, certify_rate, find_capacity, percentile_of
    from ortop.model import load_model

    percentile_of(slo)
    rate = None if args.certify == CERTIFY_SEARCHED else args.certify
    min_s = CERTIFY_MIN_DURATION_S if args.min_duration is None else args.min_duration
    budget = CERTIFY_BUDGET_S if args.budget is None else args.budget
    if budget < min_s:
        raise UsageError(f"--budget {budget:g} s is shorter than --min-duration {min_s:g} s: the run could never "
                         "certify")
    load_model(args.model)
    names = list(args.profile) or ["defaults"]
    paths = [resolve_profile(n) for n in args.profile]
    if args.report:
        from ortop.report import check_report

        check_report(args.report, protect=(args.model, *paths))
    bases = [P.load(p) for p in paths] or [P.Profile()]
    profiles = [apply_flags(b, args, args.model) for b in bases]
    searched = None
    result = None
    t0 = time.monotonic()
    with stop_on_signals(second_aborts=True) as stopping:  # ctrl-C: the certification so far; a second aborts
        stop = stopping.event
        if rate is None:  # the search takes up to half the budget, and the certification what is left
            searched = find_capacity(args.model, profiles[:1], slo, budget_s=min(SEARCH_BUDGET_S, budget / 2),
                                     names=names[:1], stop=stop, strict_providers=args.strict_providers)
            s = searched.searches[0]
            cap = s.capacity(slo) if s.met else math.nan
            if math.isfinite(cap) and cap > 0 and not searched.fault and not stop.is_set():
                rate = SEARCHED_SHARE * cap
        if rate is not None:
            result = certify_rate(args.model, profiles[0], slo, rate, min_duration_s=min_s,
                                  budget_s=max(1.0, budget - (time.monotonic() - t0)),
                                  name=names[0], stop=stop, strict_providers=args.strict_providers)
    if result is None:  # the search first, and it found nothing to certify
        lost = searched is not None and searched.fault
        code = EXIT_WORKER_LOST if lost else 130 if stopping.signalled else EXIT_UNDECIDED
        data: dict[str, Any] = {"capacity": searched.as_dict() if searched else None, "certification": None,
                                "exit_code": code}
        if args.json:
            print(json.dumps(data), flush=True)
        else:
            if searched is not None:
                print(format_result(searched, plot=not args.no_plot))
            print("undecided: the search found no rate within the SLO to certify", flush=True)
        return code
    if len(profiles) > 1:
        result.warnings.insert(0, f"--certify certifies the first profile, {names[0]}; the others were not run")
    code = certify_exit(result, interrupted=stopping.signalled)
    data = {**result.as_dict(), "exit_code": code}
    if searched is not None:
        data["capacity"] = searched.as_dict()
    if args.json:
        print(json.dumps(data), flush=True)
    else:
        print(format_certification(result, searched), flush=True)
    if args.report:
        from ortop.collectors.host import read_host
        from ortop.report import certify_page, write_report

        page = certify_page(data, host=read_host().as_dict(), profiles=[(names[0], profiles[0].to_toml())])
        write_report(args.report, page, protect=(args.model, *paths))
    return code


def certify_exit(result: Any, *, interrupted: bool = False) -> int:
    """0 certified, 5 violated, 6 undecided; a worker lost 4, ctrl-C 130, whatever the rule says so far."""
    if result.fault:
        return EXIT_WORKER_LOST
    if interrupted:
        return 130
    return {"certified": EXIT_OK, "violated": EXIT_VIOLATED}.get(result.verdict, EXIT_UNDECIDED)


def _count(n: int) -> str:
    return f"{n:,}"


def format_certification(result: Any, searched: Any = None) -> str:
    c = result.certification.as_dict()
    lines = [f"model    {result.model}", f"profile  {result.label()}"]
    if searched is not None:
        s = searched.searches[0]
        lines.append(f"capacity {rate_figure(s.capacity(result.slo))}/s found in {searched.elapsed_s:.0f} s: "
                     "certifying 0.9 x of it")
    lines += [f"rule     {c['rule']}, confidence {c['confidence']:g}, minimum {result.min_duration_s:g} s "
              f"(MLPerf asks 600 s)",
              f"run      {result.elapsed_s:.0f} s of {result.budget_s:.0f} s; {result.ended}"]
    if c["verdict"] != "violated":  # a violation needs no more requests: no count of them certifies it
        lines.append(f"needed   {_count(c['needed'])} requests for {_count(c['over_slo'])} over")
    lines.append("")
    n = result.host_noise
    bits = [f"steal {n.steal_pct:.2g} %" if n.steal_pct is not None else "steal n/a",
            f"cpu pressure {n.cpu_pressure_pct:.2g} %" if n.cpu_pressure_pct is not None else "cpu pressure n/a",
            f"stalled runs {100 * n.slow_share:.2g} %" if n.slow_share is not None else "stalled runs n/a"]
    lines.append(f"host     {', '.join(bits)}")
    if n.verdict:
        lines.append(f"         {n.verdict}")
    lines += ["", result.line()]
    for w in result.warnings:
        lines.append(f"warning  {w}")
    return "\n".join(lines)
