"""``ortop doctor MODEL``: what is wrong with how this model runs here, what to do, and the profile change that does it.

    ortop doctor MODEL [--profile PROFILE] [--provider NAME] [--threads N] [--rate HZ] [--concurrency K] [input flags]
                       [--budget SECONDS] [--json] [--save-fixed FILE]
    ortop doctor MODEL --fix-model FILE

The session is built once in a child process (providers, ORT's log, node placement, what ORT's optimizer leaves),
the static checks read that with the model, the profile and the host, and the measured checks run the model for
``--budget`` seconds (0 skips them). Findings print most severe first; ``--save-fixed`` writes the start profile
with every finding's patch applied. ``--fix-model`` writes a copy of the model whose initializers are no longer
listed as graph inputs, and does nothing else.

Exit codes: 0 when nothing is above info, 3 when a finding is (1 was its code before; 1 now means only that the
profiling process died or the model could not run), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ortop.errors import EXIT_OK, UsageError

EXAMPLES = """examples:
  ortop doctor model.onnx                          static and measured checks (about 15 s of measuring)
  ortop doctor model.onnx --rate 100 --threads 4   as a paced service with four threads would run it
  ortop doctor model.onnx --provider cuda --budget 0 --json
  ortop doctor model.onnx --save-fixed fixed.toml  then: ortop model.onnx --profile fixed.toml
  ortop doctor model.onnx --fix-model fixed.onnx   initializers out of the graph inputs
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    from ortop.cli.argtypes import seconds_or_zero
    from ortop.cli.flags import BUDGET_MEASURING, add_budget_arg, add_json
    from ortop.cli.ops import add_profile_args

    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    add_budget_arg(p, 15.0, BUDGET_MEASURING, ": the measured checks' time; 0 skips them", kind=seconds_or_zero)
    add_json(p)
    p.add_argument("--save-fixed", metavar="FILE", help="write the start profile with every patch applied to FILE "
                                                        "(TOML)")
    p.add_argument("--fix-model", metavar="FILE",
                   help="write a copy of the model without its initializers in the graph inputs to FILE, and stop")
    add_profile_args(p)


def _fix_model(model_path: str, out: str) -> int:
    from ortop.doctor import write_without_initializer_inputs
    from ortop.model import load_model

    info = load_model(model_path)
    if not info.initializer_inputs:
        print(f"nothing to fix: no initializer of {model_path} is listed as a graph input")
        return EXIT_OK
    if info.ir_version < 4:
        raise UsageError(f"{model_path} has IR version {info.ir_version}: below IR 4 initializers must be listed "
                         "as inputs, and ORT treats them as constants anyway")
    removed = write_without_initializer_inputs(model_path, out)
    print(f"wrote {out}: {removed} initializer{'s' if removed != 1 else ''} no longer listed as graph inputs")
    return EXIT_OK


def _fixed_profile_text(d: Any, fixed: Any, notes: list[str]) -> str:
    from ortop.doctor import patch_text

    header = [f"ortop doctor's fixes for {os.path.basename(d.model_path)}:"]
    header += [f"  {f.check}: {patch_text(f.profile_patch)}" for f in d.findings if f.profile_patch]
    header += [f"  not applied: {n}" for n in notes]
    header.append("Run it: ortop MODEL --profile THIS.toml (or ortop compare MODEL START.toml THIS.toml).")
    return fixed.to_toml("\n".join(header))


def run(args: argparse.Namespace) -> int:
    """``ortop doctor``: the checks, then the report (or JSON); the exit code says whether anything is above info."""
    from ortop import fsutil
    from ortop.cli.ops import start_profile
    from ortop.cli.stopping import stop_on_signals
    from ortop.doctor import apply_patches, diagnose_model, format_report
    from ortop.engine import check_profile
    from ortop.model import load_model

    if args.fix_model:
        return _fix_model(args.model, args.fix_model)
    info = load_model(args.model)
    profile = start_profile(args, args.model)
    check_profile(info, profile)
    if args.save_fixed:
        fsutil.check_writable(args.save_fixed, protect=[args.model], what="profile")

    def progress(line: str) -> None:
        if sys.stderr.isatty():
            print(f"ortop doctor: {line} …", file=sys.stderr, flush=True)

    with stop_on_signals() as stopping:  # Ctrl-C or SIGTERM: finish with what was measured
        d = diagnose_model(args.model, profile, budget_s=args.budget, stop=stopping.event, on_progress=progress)
    saved: str | None = None
    notes: list[str] = []
    if args.save_fixed:
        fixed, notes = apply_patches(d.profile, d.findings)
        fixed = replace(fixed, model=os.path.abspath(args.model))
        fsutil.write_text(args.save_fixed, _fixed_profile_text(d, fixed, notes), protect=[args.model],
                          what="profile")
        saved = args.save_fixed
    if args.json:
        out = d.as_dict()
        out["fixed_profile"] = saved
        out["fixed_notes"] = notes
        print(json.dumps(out))
    else:
        print(format_report(d))
        if saved:
            print(f"wrote {saved}" + (f" ({len(notes)} patch{'es' if len(notes) != 1 else ''} left out: "
                                     f"{'; '.join(notes)})" if notes else ""))
    return d.exit_code


def doctor_main(argv: Sequence[str]) -> int:
    """Entry point of ``ortop doctor``; returns the exit code (0 nothing above info, 3 findings, 1 a failure, 2 bad
    input)."""
    from ortop.cli.main import main

    return main(["doctor", *argv])
