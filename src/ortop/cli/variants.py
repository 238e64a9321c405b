"""``ortop variants MODEL``: the model's variants made with onnxruntime's own tools, each compared with it.

    ortop variants MODEL [--out DIR] [--budget SECONDS] [--profile PROFILE] [--calibrate DIR] [--fp16]
                         [--ort-python PATH] [--atol X] [--rtol X] [--cosine X] [--objective M] [--json]
                         [--report FILE]

Made (in a child process, into ``--out``, by default ``<model folder>/<stem>-variants``): the graph ORT optimized
offline at ``extended`` and ``all`` (tied to this onnxruntime and host), dynamic int8 (``quantize_dynamic`` after
``quant_pre_process`` where it applies), static int8 with ``--calibrate DIR`` (``.npy`` files: one per input,
named after it, one sample or samples stacked on a new first axis; a one-input model may have any names), and fp16
(``keep_io_types``) for CUDA or with ``--fp16``. A variant that fails to build is one line and the rest go on; one
whose session fails to build is left out of the comparison, said why.

Then every variant runs interleaved with the original (``ortop compare``'s blocks and paired intervals), fed the
same inputs, and its outputs of one run are compared with the original's: a variant beyond the tolerance is
flagged whatever its speed. The result names the fastest variant within the tolerance, or says none beats the
original. ``--ort-python PATH`` adds the original under that interpreter's onnxruntime (one worker of its own).

Exit 0 whatever the verdict; 2 for bad input (one ``ortop: error:`` line); 1 when nothing could be made or run;
4 when a worker died again right after its restart (the comparison so far is printed, its ``fault`` says why).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
from dataclasses import replace
from typing import Any

from ortop.cli.argtypes import add_ort_python_arg, with_ort_python
from ortop.cli.stopping import stop_on_signals
from ortop.errors import EXIT_WORKER_LOST, RuntimeFailure, UsageError
from ortop.measure.compare import METRICS
from ortop.present import cell, ms_text, signed, signed_pct, size_text

EXAMPLES = """examples:
  ortop variants model.onnx                          optimized, int8 (and fp16 for CUDA), compared for 30 s
  ortop variants model.onnx --fp16 --budget 60 --objective throughput
  ortop variants model.onnx --calibrate calib/ --out variants/ --atol 0.05
  ortop variants model.onnx --ort-python /path/to/other-venv/bin/python --json
"""

ORIGINAL = "original"


def add_tolerance_args(p: argparse.ArgumentParser) -> None:
    """The output agreement's bounds, spelled as ``ortop compare`` spells them: a variant past any is flagged."""
    from ortop.cli.argtypes import bound, cosine
    from ortop.cli.compare import DEFAULT_TOLERANCE

    g = p.add_argument_group("output agreement", "each variant's outputs against the original's on the same inputs; "
                             "one beyond any bound is flagged ('off' leaves a bound out)")
    g.add_argument("--atol", type=bound, default=None, metavar="X",
                   help="the largest max abs error allowed on any output (default off)")
    g.add_argument("--rtol", type=bound, default=DEFAULT_TOLERANCE.rtol, metavar="X",
                   help=f"the largest mean relative error allowed on any output (default {DEFAULT_TOLERANCE.rtol:g})")
    g.add_argument("--cosine", type=cosine, default=DEFAULT_TOLERANCE.cosine, metavar="X",
                   help=f"the lowest cosine similarity allowed on any output (default {DEFAULT_TOLERANCE.cosine:g})")


def tolerance_of(args: argparse.Namespace) -> Any:
    from ortop.measure.agreement import Tolerance

    return Tolerance(args.atol, args.rtol, args.cosine)


def prepare_parser(p: argparse.ArgumentParser) -> None:
    from ortop.cli.argtypes import seconds
    from ortop.cli.flags import BUDGET_MEASURING, add_budget_arg, add_json
    from ortop.cli.ops import add_profile_args

    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    p.add_argument("--out", metavar="DIR", help="write the variants into the folder DIR (default: <model "
                                                "folder>/<stem>-variants, or a temporary folder where that cannot "
                                                "be written)")
    add_budget_arg(p, 30.0, BUDGET_MEASURING, ", all variants together: the comparison stops sooner once every "
                   "verdict on the objective is settled", kind=seconds)
    p.add_argument("--objective", choices=METRICS, default="p50", help="the metric the fastest is named by")
    p.add_argument("--calibrate", metavar="DIR", help="calibration inputs for static int8: .npy files, one per "
                                                      "input named after it (samples stacked on a new first axis)")
    p.add_argument("--fp16", action="store_true", help="make the fp16 variant on CPU too (made for CUDA anyway)")
    add_ort_python_arg(p, "also run the original under this Python's onnxruntime (a venv with numpy and "
                          "onnxruntime), in a worker of its own")
    add_json(p)
    p.add_argument("--report", metavar="FILE", help="also write the comparison as a self-contained HTML page to "
                                                    "FILE")
    add_tolerance_args(p)
    add_profile_args(p)


# ---- the run ---------------------------------------------------------------------------------------------------------
def _say(line: str) -> None:
    if sys.stderr.isatty():
        print(f"ortop variants: {line} …", file=sys.stderr, flush=True)


def _compare_left(model: str, profiles: list[Any], names: list[str], args: argparse.Namespace, tol: Any,
                  stop: threading.Event, dropped: dict[str, str]) -> Any:
    """Compare what builds: a variant whose session fails to build is left out (its reason kept) and the
    comparison starts again without it."""
    from ortop.engine import compare

    while len(profiles) >= 2:
        try:
            return compare(model, profiles, budget_s=args.budget, names=names, stop=stop, decide_on=args.objective,
                           tolerance=tol)
        except RuntimeFailure as exc:
            text = str(exc)
            who = next((i for i, n in enumerate(names) if i > 0 and text.startswith(f"{n}: ")), None)
            if who is None or "failed to build" not in text:
                raise
            dropped[names[who]] = text[len(names[who]) + 2:].removeprefix("the session failed to build: ")
            del profiles[who], names[who]
    return None


def best_variant(result: Any, objective: str) -> tuple[str | None, str]:
    """The fastest variant on ``objective`` among those decided faster and within the tolerance, and the line
    that says it (or that none beats the original)."""
    if result is None:
        return None, "nothing to compare: no variant could be run"
    good = []
    for c in result.comparisons:
        fig = result.configs[c.other]
        if c.metric == objective and c.verdict == "faster" and not fig.differs:
            good.append((c, fig))
    if not good:
        flagged = [result.configs[c.other].name for c in result.comparisons
                   if c.metric == objective and c.verdict == "faster" and result.configs[c.other].differs]
        extra = f" ({', '.join(flagged)} faster, but outputs beyond the tolerance)" if flagged else ""
        return None, f"none beats the original on {objective} within the tolerance{extra}"
    better_up = objective == "throughput"
    c, fig = sorted(good, key=lambda t: -t[0].change_pct if better_up else t[0].change_pct)[0]
    return fig.name, f"fastest within the tolerance: {fig.name}: {c.text()}"




def format_text(model: str, out_dir: str, made: Any, skipped: list[str], dropped: dict[str, str], result: Any,
                objective: str, line: str, extra: list[str]) -> str:

    lines = [f"model     {model}", f"variants  {out_dir}"]
    lines += [f"          onnxruntime {made.ort_version}: the optimized graphs are tied to it and to this host"]
    by_kind = {v.kind: v for v in made.variants}
    for v in made.variants:
        if not v.ok:
            lines.append(f"failed    {v.kind}: {v.error}")
    for s in skipped:
        lines.append(f"not made  {s}")
    for name, why in dropped.items():
        lines.append(f"not run   {name}: its session failed to build: {why}")
    if result is None:
        return "\n".join(lines + ["", line])
    comps = {(c.other, c.metric): c for c in result.comparisons}
    took = "decided after" if result.stopped_early else "measured"
    lines += ["", f"{took} {result.elapsed_s:.1f} s in {len(result.blocks)} blocks of {result.block_s * 1e3:.0f} ms"
              + (f", {result.workers} workers taking turns" if result.workers > 1 else ""), ""]
    width = max(12, *(len(c.name) for c in result.configs))
    lines.append(f"  {'variant':<{width}}  {'size':>9}  {'make s':>6}  {'create ms':>9}  {'RSS MiB':>7}  "
                 f"{'+RSS':>6}  {'p50 ms':>8}  {'runs/s':>8}  {objective + ' vs original':<34}  outputs")
    for i, c in enumerate(result.configs):
        v = by_kind.get(c.name)
        vs = "—"
        comp = comps.get((i, objective))
        if comp is not None:
            ci = (f"({signed_pct(comp.ci_low_pct)}…{signed_pct(comp.ci_high_pct)})" if math.isfinite(comp.ci_low_pct)
                  and math.isfinite(comp.ci_high_pct) else "(too few pairs)")
            vs = f"{signed_pct(comp.change_pct)} % {ci} {comp.verdict}"
        agree = "—" if i == 0 else (c.agreement_text() or "—")
        if c.differs:
            agree = f"DIFFER: {'; '.join(c.differs)}"
        growth = signed(c.rss_growth_mib)
        make = f"{v.make_s:.2f}" if v is not None and v.make_s is not None else "—"
        lines.append(f"  {c.name:<{width}}  {size_text(c.model_bytes):>9}  {make:>6}  {ms_text(c.create_ms):>9}  "
                     f"{cell(c.rss_mib, 1):>7}  {growth:>6}  {ms_text(c.p50_ms):>8}  {cell(c.throughput_per_s, 1):>8}  "
                     f"{vs:<34}  {agree}")
    others = [c for c in result.configs if c.ort_version and c.ort_version != made.ort_version]
    if others:
        lines.append("")
        lines += [f"  {c.name}: onnxruntime {c.ort_version} (the others {made.ort_version})" for c in others]
    lines += ["", line]
    for v in made.variants:
        for n in v.notes:
            lines.append(f"note      {v.kind}: {n}")
    for w in [*extra, *result.warnings]:
        lines.append(f"warning   {w}")
    return "\n".join(lines)


def to_json(args: argparse.Namespace, out_dir: str, made: Any, skipped: list[str], dropped: dict[str, str],
            result: Any, tol: Any, best: str | None, line: str) -> dict[str, Any]:
    from ortop.cli.compare import to_json as compare_json

    return {"model": args.model, "out_dir": out_dir, "ort_version": made.ort_version,
            "variants": [v.as_dict() for v in made.variants], "not_made": skipped,
            "not_run": dict(dropped), "tolerance": tol.as_dict(),
            "comparison": None if result is None else compare_json(args.model, args.budget, args.objective, result,
                                                                   tol),
            "best": best, "verdict": line}


def run(args: argparse.Namespace) -> int:
    from ortop.cli.ops import start_profile
    from ortop.engine import check_out_dir, check_profile, default_out_dir, make_variants, plan_kinds
    from ortop.model import load_model

    tol = tolerance_of(args)
    info = load_model(args.model)  # a missing or broken model is bad input: said before anything starts
    profile = start_profile(args, os.path.abspath(args.model))
    check_profile(info, profile)
    if args.calibrate and not os.path.isdir(args.calibrate):
        raise UsageError(f"--calibrate {args.calibrate}: not a folder")
    other = with_ort_python(profile, ORIGINAL, args.ort_python) if args.ort_python else None
    out_dir = check_out_dir(args.out, args.model) if args.out else check_out_dir(default_out_dir(args.model),
                                                                                args.model)
    if args.report:
        from ortop.report import check_report

        check_report(args.report, protect=(args.model,))
    kinds, skipped = plan_kinds(profile, calibrate=args.calibrate, fp16=args.fp16)
    with stop_on_signals() as stopping:  # Ctrl-C or SIGTERM: finish with what was measured
        stop = stopping.event
        _say(f"making {', '.join(kinds)} in {out_dir}")
        made = make_variants(args.model, profile, out_dir, kinds, calibrate=args.calibrate, stop=stop)
        ok = [v for v in made.variants if v.ok]
        profiles = [profile] + [replace(profile, model=v.path) for v in ok]
        names = [ORIGINAL] + [v.kind for v in ok]
        if other is not None:
            profiles.append(other[0])
            names.append(other[1])
        dropped: dict[str, str] = {}
        result = None
        if len(profiles) >= 2 and not stop.is_set():
            _say(f"comparing {len(profiles) - 1} variant{'s' if len(profiles) > 2 else ''} with the original for at "
                 f"most {args.budget:g} s")
            result = _compare_left(args.model, profiles, names, args, tol, stop, dropped)
    best, line = best_variant(result, args.objective)
    if args.json:
        print(json.dumps(to_json(args, out_dir, made, skipped, dropped, result, tol, best, line)), flush=True)
    else:
        print(format_text(args.model, out_dir, made, skipped, dropped, result, args.objective, line, []),
              flush=True)
    if args.report and result is not None:
        from ortop.cli.compare import to_json as compare_json
        from ortop.collectors.host import read_host
        from ortop.report import compare_page, write_report

        page = compare_page(compare_json(args.model, args.budget, args.objective, result, tol),
                            host=read_host().as_dict(), profiles=[("start profile", profile.to_toml())])
        write_report(args.report, page, protect=(args.model,))
    if result is not None and result.fault:  # a worker lost for good: what was measured is printed
        return EXIT_WORKER_LOST
    return 0 if result is not None else 1


def variants_main(argv: list[str]) -> int:
    """``ortop variants …``; returns the exit code (bad input 2, a run-time failure 1)."""
    from ortop.cli.main import main

    return main(["variants", *argv])
