"""``ortop compare MODEL [MODEL2 …] [PROFILE …]``: which configuration is faster, measured so that drift cannot
decide, and how far each model's outputs are from the first's.

The configurations are the models crossed with the profiles, model by model: ``compare M A.toml B.toml`` is A and B
on M (as it always was); ``compare a.onnx b.onnx`` the two models with ORT's defaults (which the shipped profile
``defaults`` names where a profile is wanted: ``compare M defaults tuned.toml``); ``compare a.onnx b.onnx
--profile P`` (or ``… P``) P on a, then P on b; ``compare a.onnx b.onnx P Q`` P and Q on a, then on b. With no
model, each profile runs the model it names. An argument is a model when it ends in ``.onnx`` (or is an ONNX file
by its content, whatever its name); anything else is a profile. Every session is fed the same seeded inputs, made
from the first model's; models whose inputs differ (a name, a dtype, a fixed size) are refused before anything is
built.

The sessions are built side by side (one worker per environment, sessions of several models in one) and run in
alternating blocks of about 0.3 s (each round's order drawn at random) for at most the budget; neighbouring
blocks are paired and each metric gets a confidence interval from the pairs. Each configuration is compared with
the first. The verdict is "faster" or "slower" only when the whole interval clears ±2 %; "no difference" when it
lies inside; else "undecided" (with about how much longer would decide it). The comparison stops as soon as every
verdict on the objective is settled, at looks fixed in advance whose intervals keep 95 % coverage under that
stopping (:mod:`ortop.measure.sequential`); the output says when it stopped early.

Each session's outputs of one run after its warm-up are compared with the first's (:mod:`ortop.measure.agreement`);
a configuration whose outputs are further than ``--atol`` (max abs error), ``--rtol`` (mean relative error) or under
``--cosine`` is flagged in its row, whatever its speed.

Gates for CI (``--fail-if p99:+5%``, repeatable; exactly two configurations, BASE then NEW): each gate is a
non-inferiority test on its metric's interval (:mod:`ortop.measure.gate`), and the gates, not the objective, end the
comparison: at each of the looks above it stops once the look's intervals decide them (every gate passes, or one
fails), else at the budget's end. Each gate is judged on blocks that hold its metric (a p99 needs 100 runs a
block): the blocks grow to hold them where the budget allows, neighbouring pairs are pooled where they still fall
short, and a gate even pooling cannot judge is "not judged", said in one warning line. Each gate's line names its
rule beside the comparison's verdict on the same metric (two rules, two answers). Exit 0 when every gate passed, 5
when one failed, 6 when the budget ended before they were decided or a gate was not judged; a lost worker (4) or a
rate not kept makes them undecided, never a pass. ``--summary-md FILE``
writes the gates as a markdown table (a CI job summary).

Without gates, exit 0 whatever the verdict (ctrl-C too: what was measured is printed); 2 for bad input (one
``ortop: error:`` line); 1 when the model fails at run time. A worker that dies is restarted with its sessions and
the comparison goes on (``restarts``); one that dies again before finishing a block ends it as ctrl-C does,
everything measured printed (``fault``), and the command exits 4 (``exit_code`` in the JSON).

Over ~520 lines: the parser, the crossing of models with profiles, the table, the gates and the JSON of one
command, each used only here; splitting them would scatter one command's behaviour over several files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass, replace
from typing import Any

from ortop.cli.argtypes import bound, cosine, seconds
from ortop.cli.flags import BUDGET_MEASURING, add_budget_arg, add_json, add_workload_args, apply_flags
from ortop.cli.stopping import stop_on_signals
from ortop.errors import EXIT_WORKER_LOST, UsageError
from ortop.measure import gate as G
from ortop.measure.agreement import Tolerance
from ortop.measure.compare import METRICS, MIN_PAIRS, decided_after
from ortop.measure.stats import runs_needed
from ortop.present import cell, change_pct, ms_text, size_text

DEFAULT_TOLERANCE = Tolerance()

OBJECTIVE_LABEL = {"p50": "p50", "p99": "p99", "throughput": "runs/s", "cpu": "CPU/run"}


EXAMPLES = """examples:
  ortop compare model.onnx one-thread.toml two-threads.toml
  ortop compare model.onnx model.int8.onnx --threads 1
  ortop compare model.onnx defaults tuned.toml  (ORT's defaults, by name, against a profile)
  ortop compare model.onnx model.int8.onnx --profile serving.toml --atol 0.05
  ortop compare a.toml b.toml                  (each profile on the model it names)
  ortop compare model.onnx a.toml b.toml --budget 60 --objective p99 --report compare.html
  ortop compare base.onnx new.onnx --fail-if p99:+5% --fail-if throughput:-5% --budget 120 --summary-md gate.md
                                               (a CI gate: exit 0 pass, 5 fail, 6 undecided or not judged)
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("items", nargs="+", metavar="MODEL|PROFILE",
                   help="models (.onnx) and profiles (a TOML path, or a name from ./profiles or the shipped ones): "
                        "every profile runs on every model, model by model; with no model each profile runs the "
                        "one it names")
    p.add_argument("--profile", action="append", default=[], metavar="PROFILE",
                   help="a profile to run on every model, as if named after them (repeat for several)")
    add_budget_arg(p, 30.0, BUDGET_MEASURING, ", all configurations together: the comparison stops sooner once "
                   "every verdict on the objective is settled", kind=seconds)
    p.add_argument("--objective", choices=METRICS, default="p50",
                   help="the metric listed first in the verdicts, and whose verdicts end the comparison once "
                        "settled (default p50; with --fail-if the gates end it instead)")
    g = p.add_argument_group("output agreement", "each configuration's outputs against the first's on the same "
                             "inputs; one beyond any bound is flagged ('off' leaves a bound out)")
    g.add_argument("--atol", type=bound, default=None, metavar="X",
                   help="the largest max abs error allowed on any output (default off)")
    g.add_argument("--rtol", type=bound, default=DEFAULT_TOLERANCE.rtol, metavar="X",
                   help=f"the largest mean relative error (mean |b-a| / mean |a|) allowed on any output (default "
                        f"{DEFAULT_TOLERANCE.rtol:g})")
    g.add_argument("--cosine", type=cosine, default=DEFAULT_TOLERANCE.cosine, metavar="X",
                   help=f"the lowest cosine similarity allowed on any output (default {DEFAULT_TOLERANCE.cosine:g})")
    p.add_argument("--ort-python", metavar="PATH",
                   help="also run the first configuration under this Python's onnxruntime (a venv with numpy and "
                        "another onnxruntime), in a worker of its own")
    g = p.add_argument_group("gates for CI", "a non-inferiority test of NEW against BASE (exactly two "
                             "configurations) on each metric named: exit 0 once every interval shows NEW no worse "
                             "than its threshold, 5 once one shows it worse, 6 when the budget ends first")
    g.add_argument("--fail-if", action="append", default=[], metavar="METRIC:\u00b1X%",
                   help=f"fail when NEW is worse than BASE by more than X %% on METRIC (repeat for several): "
                        f"{G.FORMS.replace('%', '%%')}; the comparison ends once every gate is decided")
    g.add_argument("--summary-md", metavar="FILE",
                   help="with --fail-if, also write the gates as a markdown table to FILE (for $GITHUB_STEP_SUMMARY)")
    add_json(p)
    p.add_argument("--report", metavar="FILE",
                   help="also write a self-contained HTML page to FILE: the figures, a forest plot of the changes, "
                        "the host and the profiles")
    add_workload_args(p, session=True)


def _ordered(comps, objective: str):
    return sorted(comps, key=lambda c: (c.other, c.metric != objective, METRICS.index(c.metric)))


def _with_decision(c: Any, result: Any) -> dict[str, Any]:
    d = c.as_dict()
    took = decided_after(result.blocks, c.baseline, c.other, c.metric, level=c.look_confidence)
    d["decided_after_s"] = None if took is None else round(took, 2)
    unpaced = [result.configs[i].name for i in (c.baseline, c.other) if not result.configs[i].kept()]
    d["paced_answer"] = not unpaced  # a configuration that did not keep its offered rate answers another question
    if unpaced:
        d["note"] = f"not a paced answer: {', '.join(unpaced)} did not keep the offered rate"
    return d


def _models(result) -> list[str]:
    """The distinct models of the configurations, in order."""
    out: list[str] = []
    for c in result.configs:
        if c.model and c.model not in out:
            out.append(c.model)
    return out


@dataclass(frozen=True)
class GateOutcome:
    """The gates judged on a finished comparison: each gate, the overall result, why it is undecided when the
    intervals alone do not say, and the looks the rule took."""

    results: tuple[G.GateResult, ...]
    result: G.Result
    note: str
    looks: tuple[Any, ...]
    forced: bool = False   # made undecided whatever the intervals say (a lost worker, a rate not kept, a stop)

    def as_dict(self) -> dict[str, Any]:
        return {"gates": [r.as_dict() for r in self.results], "gate_result": self.result,
                "gate_note": self.note or None, "gate_looks": [look.as_dict() for look in self.looks]}


def judge_gates(result, gates: list[G.Gate]) -> GateOutcome:
    """The gates on the result's blocks at the level of its intervals (those of the look the rule stopped at, or of
    the last look), each on blocks that hold its metric (:func:`ortop.measure.gate.judge_blocks`: pooled where the
    blocks are short, "not judged" where even pooling gives no interval). A worker lost for good, a configuration
    that did not keep its offered rate, or a stop before the gates were decided make every gate undecided, with the
    reason: what was measured then answers another question, or too little of it."""
    comps = [c for c in result.comparisons if c.other == 1]
    level = next((c.look_confidence for c in comps), None)
    judged = G.judge_blocks(gates, result.blocks, level=level, comparisons=comps, elapsed_s=result.elapsed_s or None)
    unpaced = [c.name for c in result.configs[:2] if not c.kept()]
    note = ""
    if result.fault:
        note = f"a worker was lost for good ({result.fault})"
    elif unpaced:
        note = (f"not a paced answer: {', '.join(unpaced)} did not keep the offered rate, so its "
                "latencies include queueing")
    elif result.stopped and not result.stopped_early:
        note = "stopped before the gates were decided"
    if note:
        judged = tuple(replace(r, result="undecided") for r in judged)
        return GateOutcome(judged, "undecided", note, result.gate_looks, forced=True)
    overall = G.overall([r.result for r in judged])
    unjudged = [r.gate.metric for r in judged if r.result == "not judged"]
    if overall == "undecided" and unjudged:
        note = (f"the {', '.join(dict.fromkeys(unjudged))} gate{'s were' if len(unjudged) > 1 else ' was'} not "
                "judged (the blocks could not hold the metric; see its line), and not judged is not a pass")
    elif overall == "undecided":
        note = ("the budget ended with an interval straddling its threshold; a longer --budget, a "
                "quieter host or a wider threshold would decide")
    return GateOutcome(judged, overall, note, result.gate_looks)


def gate_warnings(gates: GateOutcome) -> list[str]:
    """One line for each gate not judged because its blocks, even pooled, could not hold its metric: why, and what
    would judge it. (A gate judged on pooled blocks says so on its own line.)"""
    out = []
    for r in gates.results:
        if r.result == "not judged" and r.basis is not None and r.basis.text() not in out:
            out.append(r.basis.text())
    return out


def exit_code_of(result, gates: GateOutcome | None) -> int:
    """A lost worker's 4 first; then the gates' 0 / 5 / 6; without gates 0, whatever the verdict."""
    if result.fault:
        return EXIT_WORKER_LOST
    return G.exit_code(gates.result) if gates is not None else 0


def to_json(model_path: str, budget_s: float, objective: str, result, tolerance: Tolerance | None = None,
            gates: GateOutcome | None = None) -> dict[str, Any]:
    return {
        "model": model_path,
        "models": _models(result),
        "budget_s": budget_s,
        "objective": objective,
        "tolerance": (tolerance or DEFAULT_TOLERANCE).as_dict(),
        "configs": [c.as_dict() for c in result.configs],
        "comparisons": [_with_decision(c, result) for c in _ordered(result.comparisons, objective)],
        "elapsed_s": round(result.elapsed_s, 3),
        "decided_s": None if result.decided_s is None else round(result.decided_s, 3),
        "stopped_early": result.stopped_early,
        "block_s": round(result.block_s, 4),
        "settle_s": round(result.settle_s, 4),
        "blocks": len(result.blocks),
        # every block in the order it ran: whose, its place in the schedule, when it started (s, the workers' clock)
        "block_order": [{"config": b.config, "seq": b.seq, "t_start_s": round(b.t_start, 4)}
                        for b in sorted(result.blocks, key=lambda b: b.t_start)],
        "workers": result.workers,
        "memory": result.memory.as_dict(),
        "stopped": result.stopped,
        "warnings": list(result.warnings),
        "restarts": list(result.restarts),  # workers that died and were restarted with their sessions
        "fault": result.fault,              # a worker lost for good: measuring ended there
        **(gates.as_dict() if gates is not None else {}),
        "exit_code": exit_code_of(result, gates),
    }




def _model_lines(result) -> list[str]:
    """Each configuration's model: its file, session creation, first run, memory and onnxruntime; then its outputs
    against the first's. Shown when the configurations run more than one model, or when outputs moved."""
    configs = result.configs
    several = len(_models(result)) > 1
    moved = any(c.agreement is not None and c.agreement_text() != "outputs identical" for c in configs)
    if not several and not moved and not any(c.differs for c in configs):
        return []
    lines: list[str] = []
    if several:
        width = max(5, *(len(os.path.basename(c.model)) for c in configs))
        lines += ["", f"  #  {'model':<{width}}  {'size':>9}  {'create ms':>9}  {'first run ms':>12}  "
                      f"{'session MiB':>11}  {'RSS MiB':>8}  onnxruntime"]
        for c in configs:
            lines.append(f"  {c.index}  {os.path.basename(c.model):<{width}}  {size_text(c.model_bytes):>9}  "
                         f"{ms_text(c.create_ms):>9}  {ms_text(c.first_run_ms):>12}  {cell(c.session_mib, 1):>11}  "
                         f"{cell(c.rss_mib, 0):>8}  {c.ort_version or '?'}")
    lines += ["", f"outputs against {configs[0].name} (the same inputs, one run after the warm-up):"]
    for c in configs[1:]:
        lines.append(f"  {c.index}  {c.agreement_text() or 'not compared'}")
    return lines


def gate_lines(gates: GateOutcome, code: int, comparisons: Any = ()) -> list[str]:
    """The "gates" section of the table: each gate under its rule (its threshold, its result with the end of the
    interval that decided it, the change and interval, the blocks it was judged on), then the comparison's own
    verdict on the same metric under its rule (the interval against the ±margin), so that an "undecided" and a
    "pass" for one metric never stand side by side unnamed; then the overall result with its exit code."""
    last = gates.looks[-1] if gates.looks else None
    at = (f"; {len(gates.looks)} look{'s' if len(gates.looks) != 1 else ''}, the last at {last.pairs} pairs"
          if last is not None else "; no look yet")
    lines = ["", f"gates (non-inferiority of NEW against BASE on 95 % intervals{at}):"]
    width = max(len(r.gate.metric) for r in gates.results)
    pad = " " * (width + 4)
    by_metric = {c.metric: c for c in comparisons if c.other == 1}
    for r in gates.results:
        head = f"  {r.gate.metric:<{width}}  {r.rule_text()}: {r.verdict_text()}"
        if r.result == "not judged" and r.basis is not None:
            lines.append(f"{head}: {r.basis.reason()}{r.basis.more()}")
        else:
            # what a percentile was judged on (its blocks' runs, or pooled pairs); a run is enough for the others
            how = f"; {r.basis.text()}" if r.basis is not None and r.basis.need > 1 else ""
            lines.append(f"{head}; change {change_pct(r.change_pct)}, interval {r.interval_text()}{how}")
        comp = by_metric.get(r.gate.metric)
        if comp is not None:
            lines.append(f"{pad}comparison: {_verdict_rule(comp)}")
    lines.append(f"gate result: {gates.result} (exit {code})" + (f": {gates.note}" if gates.note else ""))
    return lines


def _verdict_rule(comp: Any) -> str:
    """The comparison's verdict under its own rule: ``undecided (95 % CI −4.0…+3.1 %, against the ±2 %
    margin)``; ``undecided (3 pairs so far, too few for an interval)``."""
    has = math.isfinite(comp.ci_low_pct) and math.isfinite(comp.ci_high_pct)
    rule = f"against the \u00b1{comp.margin_pct:g} % margin" if has else "too few for an interval"
    return f"{comp.verdict} ({comp.interval_text()}, {rule})"


def _short_blocks_note(comp: Any) -> str:
    """A percentile's comparison on blocks too short to hold it: what it was judged on instead."""
    need = G.runs_for(comp.metric)
    if need <= 1 or not comp.pooled or not comp.pairs:  # no pair at all: the comparison's own text says why
        return ""
    few = "" if comp.pairs >= MIN_PAIRS else ", too few for an interval"
    return (f"  [blocks of ~{comp.block_runs:.0f} runs cannot hold a {comp.metric} (needs {need}): judged on "
            f"{comp.pairs} pooled pair{'s' if comp.pairs != 1 else ''} of \u2265{need} runs a side{few}]")


def format_result(model_path: str, budget_s: float, objective: str, result, gates: GateOutcome | None = None
                  ) -> str:
    names = [c.name for c in result.configs]
    workers = f", {result.workers} workers taking turns" if result.workers > 1 else ""
    took = "decided after" if result.stopped_early else "measured"
    models = _models(result)
    head = "configuration" if len(models) > 1 else "profile"
    width = max(8, len(head), *(len(n) for n in names))
    lines = [
        f"model    {model_path}" if len(models) <= 1 else f"models   {', '.join(models)}",
        f"{took} {result.elapsed_s:.1f} s of {budget_s:g} s in {len(result.blocks)} blocks of "
        f"{result.block_s * 1e3:.0f} ms (+{result.settle_s * 1e3:.0f} ms settle each){workers}"
        + ("  (stopped early)" if result.stopped else ""),
        "",
        f"  #  {head:<{width}}  {'runs':>8}  {'p50 ms':>8}  {'p99 ms':>8}  {'runs/s':>8}  {'CPU/run ms':>10}",
    ]
    p99_needs = runs_needed("p99")
    short = [c for c in result.configs if c.runs < p99_needs]
    for c in result.configs:
        kept = "" if c.kept() else \
            f"  ← rate not kept: offered {c.offered_per_s:.0f}/s, served {c.throughput_per_s:.0f}/s"
        differs = f"  ← outputs differ: {'; '.join(c.differs)}" if c.differs else ""
        p99 = "\u2014" if c.runs < p99_needs else ms_text(c.p99_ms)  # fewer runs: the slowest under another name
        lines.append(f"  {c.index}  {c.name:<{width}}  {c.runs:>8}  {ms_text(c.p50_ms):>8}  {p99:>8}  "
                     f"{cell(c.throughput_per_s, 1):>8}  {ms_text(c.cpu_ms_per_run):>10}{kept}{differs}")
    if short:
        lines.append(f"  p99 \u2014: fewer than the {p99_needs} runs a p99 needs ({min(c.runs for c in short)} "
                     "here): a longer --budget gives them")
    lines += _model_lines(result)
    other = None
    for comp in _ordered(result.comparisons, objective):
        if comp.other != other:
            other = comp.other
            unpaced = [result.configs[i].name for i in (comp.baseline, other) if not result.configs[i].kept()]
            lines += ["", f"{names[other]} vs {names[comp.baseline]} ({comp.pairs} pairs of blocks; each figure its "
                      f"median block's, where the table pools every run):"
                      + (f"  [not a paced answer: {', '.join(unpaced)} did not keep the rate]" if unpaced else "")]
        word = ""
        if comp.verdict in ("faster", "slower"):
            word = f"  → {comp.verdict}" if comp.metric != "cpu" else \
                f"  → {'less' if comp.verdict == 'faster' else 'more'} CPU per run"
        mark = "*" if comp.metric == objective else " "
        lines.append(f" {mark}{comp.text()}{word}{_short_blocks_note(comp)}")
    lines += ["", result.memory.text()]
    for w in result.warnings:
        lines.append(f"warning  {w}")
    for w in result.restarts:
        lines.append(f"restart  {w}")
    if result.fault:
        lines.append(f"fault    {result.fault}")
    if gates is not None:
        lines += gate_lines(gates, exit_code_of(result, gates), result.comparisons)
    return "\n".join(lines)


def _is_model(item: str) -> bool:
    """A model: a name ending in .onnx, or an existing file (not .toml/.json) that reads as an ONNX model."""
    from ortop.model import ModelError, load_model

    low = item.lower()
    if low.endswith(".onnx"):
        return True
    if low.endswith((".toml", ".json")) or not os.path.isfile(item):
        return False
    try:
        load_model(item)
    except ModelError:
        return False
    return True


@dataclass(frozen=True)
class Plan:
    """What to compare: each configuration's profile (running its model), name, and the files it came from."""

    profiles: list[Any]
    names: list[str]
    models: list[str]        # the models given on the command line (none: each profile's own)
    paths: list[Any]         # the profile files


def plan(args: argparse.Namespace) -> Plan:
    """The configurations the command line asks for: its models crossed with its profiles, model by model; with no
    model, each profile on the model it names. Raises UsageError / ProfileError / ModelError (exit 2)."""
    from ortop.cli.profiles import resolve_profile
    from ortop.config import profile as P
    from ortop.model import load_model

    models = [x for x in args.items if _is_model(x)]
    named = [x for x in args.items if x not in models] + list(args.profile)
    n = len(models) * max(1, len(named)) if models else len(named)
    if n < 2 and not args.ort_python:  # --ort-python adds the first configuration under another onnxruntime
        got = (f"{'one model' if len(models) == 1 else 'no model'} and "
               f"{'no profile' if not named else 'one profile' if len(named) == 1 else f'{len(named)} profiles'}")
        raise UsageError(f"compare needs at least two profiles, or two models: MODEL PROFILE PROFILE…, or MODEL "
                         f"MODEL… [--profile PROFILE] (got {got})")
    for m in models:
        load_model(m)  # a missing or broken model is bad input: say so before anything starts
    paths = [resolve_profile(name) for name in named]
    loaded = [P.load(path) for path in paths]
    profiles, names = [], []
    if not models:
        for name, prof in zip(named, loaded):
            if not prof.model:
                raise UsageError(f"{name} names no model: give one first (ortop compare MODEL {name} …)")
            load_model(prof.model)
            profiles.append(apply_flags(prof, args, prof.model))
            names.append(name)
        return Plan(profiles, names, [], paths)
    bases = list(zip(named, loaded)) or [("defaults", P.Profile())]
    for m in models:
        for name, base in bases:
            profiles.append(apply_flags(base, args, m))
            if len(models) == 1:
                names.append(name)
            elif len(bases) == 1:
                names.append(m)
            else:
                names.append(f"{m} + {name}")
    return Plan(profiles, names, models, paths)


def run(args: argparse.Namespace) -> int:
    from ortop.engine import compare, workload_difference

    try:
        gate_specs = [G.parse_gate(spec) for spec in args.fail_if]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.summary_md and not gate_specs:
        raise UsageError("--summary-md writes the gates' summary: give at least one --fail-if METRIC:\u00b1X%")
    todo = plan(args)
    profiles, names = todo.profiles, todo.names
    if args.ort_python:  # the first configuration again, its worker under another interpreter's onnxruntime
        from ortop.cli.argtypes import with_ort_python

        other, name = with_ort_python(profiles[0], names[0], args.ort_python)
        profiles, names = [*profiles, other], [*names, name]
    if gate_specs and len(profiles) != 2:
        raise UsageError(f"--fail-if judges exactly two configurations, BASE then NEW; this command line makes "
                         f"{len(profiles)}: {', '.join(names)}")
    model = profiles[0].model
    tolerance = Tolerance(args.atol, args.rtol, args.cosine)
    protect = (*{p.model for p in profiles}, *todo.paths)
    if args.report:  # an unwritable report is found now, not after the measuring
        from ortop.report import check_report

        check_report(args.report, protect=protect)
    if args.summary_md:  # likewise the gates' summary
        from ortop.fsutil import check_writable

        check_writable(args.summary_md, protect=protect, what="gate summary")
    warnings = []
    for name, prof in zip(names[1:], profiles[1:]):
        diff = workload_difference(profiles[0], prof)
        if diff:
            warnings.append(f"{name} runs a different workload than {names[0]} ({', '.join(diff)}): "
                            "its figures measure different work")
    # with gates, the gates, not the objective, end the comparison
    rule: dict[str, Any] = {"gates": gate_specs} if gate_specs else {"decide_on": args.objective}
    with stop_on_signals() as stopping:  # Ctrl-C or SIGTERM: finish with what was measured
        result = compare(model, profiles, budget_s=args.budget, names=names, stop=stopping.event,
                         tolerance=tolerance, **rule)
    if warnings:
        result = replace(result, warnings=tuple(warnings) + result.warnings)
    gates = judge_gates(result, gate_specs) if gate_specs else None
    if gates is not None:  # a gate whose blocks could not hold its metric says how it was judged, in one line
        said = [w for w in gate_warnings(gates) if w not in result.warnings]
        result = replace(result, warnings=result.warnings + tuple(said))
    data = to_json(model, args.budget, args.objective, result, tolerance, gates)
    if args.json:
        print(json.dumps(data), flush=True)
    else:
        print(format_result(model, args.budget, args.objective, result, gates), flush=True)
    if args.report:  # after the result is printed: a report that fails to write loses nothing
        _write_report(args.report, data, names, profiles, protect)
    if args.summary_md and gates is not None:
        from ortop.fsutil import write_text

        title = f"ortop gates: {names[1]} against {names[0]}"
        md = G.summary_markdown(gates.results, title=title, note=gates.note if gates.forced else "",
                                code=data["exit_code"])
        write_text(args.summary_md, md, protect=protect, what="gate summary")
    return data["exit_code"]


def _write_report(path: str, data: dict[str, Any], names: list[str], profiles: list[Any],
                  protect: tuple[Any, ...]) -> None:
    from ortop.collectors.host import read_host
    from ortop.report import compare_page, write_report

    page = compare_page(data, host=read_host().as_dict(),
                        profiles=[(name, prof.to_toml()) for name, prof in zip(names, profiles)])
    write_report(path, page, protect=protect)


def compare_main(argv: list[str]) -> int:
    """``ortop compare …``; returns the exit code (bad input 2, a run-time failure 1)."""
    from ortop.cli.main import main

    return main(["compare", *argv])
