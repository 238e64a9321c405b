"""``ortop ops MODEL``: where a run's time goes, node by node and op type by op type, from ORT's own profiler.

    ortop ops MODEL [--runs N] [--top K] [--json] [--profile PROFILE] [--provider NAME] [--threads N] [input flags]

The session is built in a child process with ``SessionOptions.enable_profiling`` (see :mod:`ortop.engine.answers.ops`);
after the warm-up runs, ``--runs`` runs are traced, and each node's kernel time is summed: total ms, share of all
kernel time, mean ms per run, and the provider that ran it (a node that fell back to CPU shows here).

Exit codes: 0 with a table, 2 for bad input (one ``ortop: error:`` line), 1 when the model fails to build or run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ortop.errors import EXIT_OK, UsageError
from ortop.present import ms_text

NAME_WIDTH = 48  # longer node names (tf2onnx writes whole scopes) keep their tail, where they differ


EXAMPLES = """examples:
  ortop ops model.onnx                         20 traced runs, the 15 slowest op types and nodes
  ortop ops model.onnx --runs 100 --top 0      every node, over 100 runs
  ortop ops model.onnx --provider cuda --json  where each node ran, as JSON
  ortop ops model.onnx --profile serving.toml --threads 4
"""


def add_profile_args(p: argparse.ArgumentParser, refuse: tuple[str, tuple[str, ...]] | None = None) -> None:
    """The start profile's flags: ``--profile``, then the settings and inputs every command spells alike (less the
    ``refuse`` flags: ``(why, flags)``)."""
    from ortop.cli.flags import add_workload_args

    p.add_argument("--profile", metavar="PROFILE", help="start from this profile (a TOML path or a profile name)")
    add_workload_args(p, session=True, refuse=refuse)


def start_profile(args: argparse.Namespace, model_path: str) -> Any:
    """``--profile`` (a path or a name, else the defaults) with the flags on top, running ``model_path``."""
    from ortop.cli.flags import apply_flags
    from ortop.config import profile as profile_mod
    from ortop.config.files import resolve_profile

    prof = profile_mod.load(resolve_profile(args.profile)) if args.profile else profile_mod.Profile()
    return apply_flags(prof, args, model_path)


def prepare_parser(p: argparse.ArgumentParser) -> None:
    from ortop.cli.flags import NO_TRAFFIC, add_json

    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    p.add_argument("--runs", type=int, default=20, metavar="N", help="traced runs after the warm-up (default 20)")
    p.add_argument("--top", type=int, default=15, metavar="K", help="rows of each table (default 15; 0 = all)")
    add_json(p)
    add_profile_args(p, refuse=NO_TRAFFIC)




def _clip(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else "…" + name[-(NAME_WIDTH - 1):]


def format_ops(model_path: str, report: dict[str, Any], top: int) -> str:
    """The readable report: a header, the op types by time, then the nodes by time."""
    ops = report["ops"]
    runs = ops["runs"]
    wall = report.get("wall_ms_per_run")
    lines = [
        f"model     {model_path}",
        f"runs      {runs} traced after {report.get('warmup', 0)} warm-up, on "
        f"{', '.join(report.get('providers_active', []))}",
        f"time      {ops['kernel_ms_per_run']:.3f} ms of kernels per run"
        + (f" ({wall:.3f} ms per Run() with the profiler on)" if wall else ""),
    ]
    lines += [f"warning   {text}" for text in report.get("env_warnings", ())]
    active = report.get("providers_active", [])
    missing = [p for p in report.get("providers_requested", []) if p not in active]
    if missing:
        lines.append(f"warning   {', '.join(missing)} requested but not active: a silent fallback "
                     f"(`ortop doctor {model_path}` says why)")

    def table(title: str, rows: list[dict[str, Any]], name_key: str) -> None:
        shown = rows[:top] if top > 0 else rows
        width = max([len(title)] + [len(_clip(str(r[name_key]))) for r in shown])
        op_width = max([7] + [len(r["op_type"]) for r in shown])
        lines.append("")
        head = f"{title:<{width}}  " + (f"{'op type':<{op_width}}  " if name_key == "name" else "")
        lines.append(f"{head}{'total ms':>10}  {'share':>7}  {'ms/run':>9}  {'calls':>6}  provider")
        for r in shown:
            op = f"{r['op_type']:<{op_width}}  " if name_key == "name" else ""
            lines.append(f"{_clip(str(r[name_key])):<{width}}  {op}{ms_text(r['total_ms']):>10}  "
                         f"{r['share_pct']:>6.1f}%  {r['mean_ms']:>9.4f}  {r['calls']:>6}  {r['provider']}")
        if len(shown) < len(rows):
            rest = rows[len(shown):]
            lines.append(f"… {len(rest)} more ({sum(r['share_pct'] for r in rest):.1f} % of the time)")

    table("op type", ops["op_types"], "op_type")
    table("node", ops["nodes"], "name")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """``ortop ops``: profile the model and print the tables (or JSON)."""
    from ortop.engine import check_profile, profile_ops
    from ortop.model import load_model

    if args.runs < 1:
        raise UsageError(f"--runs must be at least 1, got {args.runs}")
    if args.top < 0:
        raise UsageError(f"--top must be 0 (all) or more, got {args.top}")
    info = load_model(args.model)
    profile = start_profile(args, args.model)
    check_profile(info, profile)
    report = profile_ops(args.model, profile, runs=args.runs)
    if args.json:
        out = {"model": args.model, "runs": report["ops"]["runs"], "warmup": report.get("warmup", 0),
               "providers_requested": report.get("providers_requested", []),
               "providers_active": report.get("providers_active", []),
               "wall_ms_per_run": report.get("wall_ms_per_run"),
               "kernel_ms_per_run": report["ops"]["kernel_ms_per_run"],
               "warnings": list(report.get("env_warnings", ())),
               "op_types": report["ops"]["op_types"], "nodes": report["ops"]["nodes"]}
        print(json.dumps(out))
    else:
        print(format_ops(args.model, report, args.top))
    return EXIT_OK


def ops_main(argv: Sequence[str]) -> int:
    """``ortop ops …``; returns the exit code (bad input 2, a build or run failure 1)."""
    from ortop.cli.main import main

    return main(["ops", *argv])
