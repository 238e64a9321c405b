"""``ortop compare MODEL A.toml B.toml [C.toml …]``: which profile is faster, measured so that drift cannot decide.

The profiles' sessions are built side by side and run in alternating blocks of about 0.3 s (A B B A …) for the
budget; neighbouring blocks are paired and each metric gets a confidence interval from the pairs. Each profile is
compared with the first. The verdict is "faster" or "slower" only when the whole interval clears ±2 %; "no
difference" when it lies inside; else "undecided" (with about how much longer would decide it).

Exit 0 whatever the verdict; 2 for bad input (one ``ortop: error:`` line); 1 when the model fails at run time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn

from ortop.measure.compare import METRICS

OBJECTIVE_LABEL = {"p50": "p50", "p99": "p99", "throughput": "runs/s", "cpu": "CPU/run"}


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Usage(message)


def build_parser() -> argparse.ArgumentParser:
    from ortop.cli.main import _add_override_args

    p = _Parser(prog="ortop compare",
                description="Compare profiles on a model by interleaving them in short blocks; each against the "
                            "first.")
    p.add_argument("model", help="the .onnx model")
    p.add_argument("profiles", nargs="+", metavar="PROFILE",
                   help="two or more profiles: a TOML path, or a name from ./profiles or the shipped ones")
    p.add_argument("--budget", type=float, default=30.0, metavar="SECONDS",
                   help="measuring time, all profiles together, builds not counted (default 30)")
    p.add_argument("--objective", choices=METRICS, default="p50",
                   help="the metric listed first in the verdicts (default p50)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--provider", metavar="NAME", help="execution provider for every profile")
    p.add_argument("--rate", type=float, metavar="HZ", help="paced loop at HZ runs per second (0 = closed loop)")
    p.add_argument("--concurrency", type=int, metavar="K", help="K concurrent callers")
    p.add_argument("--warmup", type=int, metavar="N", help="warm-up runs per session")
    p.add_argument("--seed", type=int, metavar="S", help="seed for the synthetic inputs")
    _add_override_args(p)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted changes every profile gets from the flags (inputs are merged into each profile's own maps)."""
    ch: dict[str, Any] = {}
    if args.provider is not None:
        ch["provider.name"] = args.provider
    if args.rate is not None:
        ch["workload.rate_hz"] = args.rate
    if args.concurrency is not None:
        ch["workload.concurrency"] = args.concurrency
    if args.warmup is not None:
        ch["workload.warmup_runs"] = args.warmup
    if args.seed is not None:
        ch["workload.seed"] = args.seed
    if args.batch is not None:
        ch["workload.batch"] = args.batch
    return ch


def _apply_flags(prof, args: argparse.Namespace, model_path: str):
    from ortop.cli.main import UsageError, _number, _pairs
    from ortop.config import profile as P
    from ortop.model import parse_shape

    try:
        w = prof.workload
        dims = dict(w.dims)
        dims.update({k: _number(v, "--dim", int) for k, v in _pairs(args.dim, "--dim").items()})
        shapes = {k: list(v) for k, v in w.shapes.items()}
        for k, v in _pairs(args.shape, "--shape").items():
            shapes[k] = list(parse_shape(v))
        values = dict(w.values)
        values.update({k: _number(v, "--value") for k, v in _pairs(args.value, "--value").items()})
        inputs = dict(w.inputs)
        inputs.update({k: os.path.abspath(v) for k, v in _pairs(args.input_file, "--input").items()})
    except UsageError as exc:
        raise _Usage(str(exc)) from None
    ch = _overrides(args)
    ch.update({"workload.dims": dims, "workload.shapes": shapes, "workload.values": values,
               "workload.inputs": inputs})
    return replace(P.merge(prof, **ch), model=model_path)


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def _ordered(comps, objective: str):
    return sorted(comps, key=lambda c: (c.other, c.metric != objective, METRICS.index(c.metric)))


def to_json(model_path: str, budget_s: float, objective: str, result) -> dict[str, Any]:
    return {
        "model": model_path,
        "budget_s": budget_s,
        "objective": objective,
        "configs": [c.as_dict() for c in result.configs],
        "comparisons": [c.as_dict() for c in _ordered(result.comparisons, objective)],
        "elapsed_s": round(result.elapsed_s, 3),
        "block_s": round(result.block_s, 4),
        "settle_s": round(result.settle_s, 4),
        "blocks": len(result.blocks),
        "workers": result.workers,
        "memory": result.memory.as_dict(),
        "stopped": result.stopped,
        "warnings": list(result.warnings),
    }


def format_result(model_path: str, budget_s: float, objective: str, result) -> str:
    names = [c.name for c in result.configs]
    width = max(8, *(len(n) for n in names))
    workers = f", {result.workers} workers taking turns" if result.workers > 1 else ""
    lines = [
        f"model    {model_path}",
        f"measured {result.elapsed_s:.1f} s of {budget_s:g} s in {len(result.blocks)} blocks of "
        f"{result.block_s * 1e3:.0f} ms (+{result.settle_s * 1e3:.0f} ms settle each){workers}"
        + ("  (stopped early)" if result.stopped else ""),
        "",
        f"  #  {'profile':<{width}}  {'runs':>8}  {'p50 ms':>8}  {'p99 ms':>8}  {'runs/s':>8}  {'CPU/run ms':>10}",
    ]
    for c in result.configs:
        lines.append(f"  {c.index}  {c.name:<{width}}  {c.runs:>8}  {_fmt(c.p50_ms):>8}  {_fmt(c.p99_ms):>8}  "
                     f"{_fmt(c.throughput_per_s, 1):>8}  {_fmt(c.cpu_ms_per_run):>10}")
    other = None
    for comp in _ordered(result.comparisons, objective):
        if comp.other != other:
            other = comp.other
            lines += ["", f"{names[other]} vs {names[comp.baseline]} ({comp.pairs} pairs of blocks):"]
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


def _run(argv: Sequence[str]) -> int:
    from ortop.cli.profiles import resolve_profile
    from ortop.config import profile as P
    from ortop.engine import ab, headless
    from ortop.engine.snapshot import workload_difference

    args = build_parser().parse_args(argv)
    if len(args.profiles) < 2:
        raise _Usage(f"compare needs at least two profiles, got {len(args.profiles)}")
    if not (args.budget > 0 and math.isfinite(args.budget)):
        raise _Usage(f"--budget must be > 0 seconds, got {args.budget:g}")
    from ortop.model import load_model

    load_model(args.model)  # a missing or broken model is bad input: say so before anything starts
    profiles = [_apply_flags(P.load(resolve_profile(name)), args, args.model) for name in args.profiles]
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
        result = headless.compare(args.model, profiles, budget_s=args.budget, names=list(args.profiles), stop=stop)
    except ab.NotEnoughMemory as exc:
        raise _Usage(str(exc)) from None
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if warnings:
        result = replace(result, warnings=tuple(warnings) + result.warnings)
    if args.json:
        print(json.dumps(to_json(args.model, args.budget, args.objective, result)))
    else:
        print(format_result(args.model, args.budget, args.objective, result))
    return 0


def compare_main(argv: list[str]) -> int:
    """Entry point of ``ortop compare``; returns the exit code (bad input 2, a run-time failure 1)."""
    debug = "--debug" in argv
    try:
        return _run(argv)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            raise
        from ortop.config.profile import ProfileError
        from ortop.engine.ab import AbError
        from ortop.model import ModelError

        if isinstance(exc, (_Usage, ModelError, ProfileError)):
            print(f"ortop: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        if isinstance(exc, AbError):
            print(f"ortop: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        print(f"ortop: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1
