"""``ortop [run] MODEL``: the live view, or with ``--headless`` a measurement printed as a table or JSON.

The start profile is the last session's (``--resume``) or ``--profile``'s, with each flag on top (flags win).
"""

from __future__ import annotations

import argparse
import json
import math
import signal
from typing import Any

from ortop.cli.flags import add_workload_args, apply_flags
from ortop.errors import RuntimeFailure, UsageError


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="the .onnx model to run (default: the built-in demo model)")
    p.add_argument("--demo", action="store_true", help="run the built-in demo model")
    p.add_argument("--profile", metavar="FILE", help="start from this profile (a TOML path or a profile name)")
    p.add_argument("--resume", action="store_true", help="start from the last session's settings")
    add_workload_args(p, session=True)
    p.add_argument("--strict-providers", action="store_true",
                   help="fail instead of warning when a requested provider is not active (silent CPU fallback)")
    h = p.add_argument_group("headless")
    h.add_argument("--headless", action="store_true", help="no UI: measure for --duration and print a summary")
    h.add_argument("--duration", type=float, default=10.0, metavar="SECONDS",
                   help="headless measuring time after warm-up (default 10)")
    h.add_argument("--json", action="store_true", help="headless: print the summary as one JSON object")
    h.add_argument("--summary", metavar="FILE", help="write the JSON summary to FILE at exit")
    t = p.add_argument_group("live view")
    t.add_argument("--refresh", type=float, default=4.0, metavar="HZ", help="TUI refresh rate (default 4)")
    t.add_argument("--profile-dir", metavar="DIR", default="profiles",
                   help="where ctrl+s saves profiles (default ./profiles)")


def run(args: argparse.Namespace) -> int:
    model_path = _resolve_model(args)
    if args.summary:  # an unwritable summary is found now, not after the whole measurement
        from ortop.fsutil import check_writable

        check_writable(args.summary, protect=[model_path] + ([args.profile] if args.profile else []),
                       what="summary")
    if args.headless:
        return run_headless(args, model_path)
    return run_tui(args, model_path)


def effective_profile(args: argparse.Namespace, model_path: str) -> Any:
    """The start profile: last session or --profile, then each flag on top (flags win)."""
    from ortop.config import profile as P
    from ortop.config.store import last_session_path, resolve_profile

    if args.resume:
        path = last_session_path()
        if not path.exists():
            raise UsageError(f"--resume: no last session saved yet ({path})")
        prof = P.load(path)
    elif args.profile:
        prof = P.load(resolve_profile(args.profile))
    else:
        prof = P.Profile()
    return apply_flags(prof, args, model_path)


def _resolve_model(args: argparse.Namespace) -> str:
    if args.demo or not args.model:
        from ortop.model.demo import ensure_demo

        return str(ensure_demo())
    return args.model


def _gpu_summary(collector) -> Any:
    sample = collector.sample()
    if not sample.devices:
        return None
    return [
        {"index": d.index, "name": d.name, "mem_used": d.mem_used, "mem_total": d.mem_total,
         "util_percent": d.util_percent, "worker_mem": d.process_mem}
        for d in sample.devices
    ]


def run_headless(args: argparse.Namespace, model_path: str) -> int:
    import threading

    from ortop.collectors.gpu import make_gpu_collector
    from ortop.engine import headless

    prof = effective_profile(args, model_path)
    if not (args.duration > 0 and math.isfinite(args.duration)):
        raise UsageError(f"--duration must be > 0, got {args.duration}")
    gpu = make_gpu_collector()
    stop = threading.Event()

    def on_signal(signum, frame):  # Ctrl-C or SIGTERM: finish with what was measured
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = headless.measure(model_path, prof, duration_s=args.duration, strict_providers=args.strict_providers,
                               stop=stop, gpu=gpu)
    finally:
        gpu.close()
        for s, h in old.items():
            signal.signal(s, h)
    # What was measured reaches stdout first: a summary file that fails to write must not lose it.
    if args.json:
        print(json.dumps(res.summary), flush=True)
    elif res.measured:
        print(format_summary(res.summary), flush=True)
    _write_summary(args, res.summary)
    if res.fatal:
        raise RuntimeFailure(res.fatal)
    if res.measured and not res.summary.get("runs"):
        raise RuntimeFailure(f"no run finished in {res.summary.get('duration_s', 0):.1f} s of measuring: the model is "
                             "slower than --duration, or its callers are stuck (try a longer --duration or fewer "
                             "--concurrency/--threads)")
    return 0


def _write_summary(args, data: dict) -> None:
    if args.summary:
        _write_json(args.summary, data)


def _write_json(path: str, data: dict) -> None:
    from ortop.fsutil import write_text

    write_text(path, json.dumps(data, indent=2) + "\n", what="summary")


def _f(x: Any, fmt: str = "{:.3f}") -> str:
    return "—" if x is None else fmt.format(x)


def format_summary(d: dict) -> str:
    lat, cpu = d["latency_ms"], d["cpu"]
    lines = [
        f"model       {d['model']}",
        f"inputs      {', '.join(d['inputs'])}",
        f"providers   {', '.join(d['providers_active'])}"
        + ("" if set(d["providers_requested"]) <= set(d["providers_active"])
           else f"  (requested {', '.join(d['providers_requested'])})"),
        f"session     create {_f(d['session']['create_ms'], '{:.1f}')} ms, first run "
        f"{_f(d['session']['first_run_ms'], '{:.2f}')} ms",
        f"runs        {d['runs']} in {d['duration_s']:.1f} s (+{d['warmup_runs']} warm-up), "
        f"{_f(d['throughput_per_s'], '{:.1f}')} runs/s",
        "latency ms  " + "  ".join(f"{k} {_f(lat[k])}" for k in ("mean", "p50", "p90", "p99", "p999", "max")),
        f"cpu         {_f(cpu['cpu_ms_per_run'])} ms/run, {_f(cpu['cpu_ms_between_runs_per_s'], '{:.1f}')} ms/s "
        f"between runs (spin), process {_f(cpu['process_cpu_percent'], '{:.0f}')}% of a core",
        "gpu         " + ("no NVIDIA GPU" if d["gpu"] is None else ", ".join(
            f"#{g['index']} {g['mem_used'] / 2**20:.0f}/{g['mem_total'] / 2**20:.0f} MiB" for g in d["gpu"])),
    ]
    for w in d["warnings"]:
        lines.append(f"warning     {w}")
    return "\n".join(lines)


def run_tui(args: argparse.Namespace, model_path: str) -> int:
    from ortop.tui.app import run_app

    prof = effective_profile(args, model_path)
    return run_app(model_path, prof, args)


