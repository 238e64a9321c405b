"""Command line: ``ortop MODEL`` (TUI), ``ortop MODEL --headless``, ``ortop info``, ``ortop profiles``, ``ortop export``.

Bad input never shows a traceback: one ``ortop: error: ...`` line on stderr and exit code 2 (1 when the model
fails at run time). ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ortop import __version__

EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 1


class UsageError(Exception):
    """Bad input from the user: exit 2 with one line."""


class RuntimeFailure(Exception):
    """The model failed at run time: exit 1 with one line."""


def _add_override_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inputs")
    g.add_argument("--dim", action="append", default=[], metavar="SYMBOL=N",
                   help="set a free (symbolic) dimension, e.g. --dim batch=8")
    g.add_argument("--shape", action="append", default=[], metavar="INPUT=1x3x224x224",
                   help="set an input's whole shape")
    g.add_argument("--value", action="append", default=[], metavar="INPUT=NUMBER",
                   help="fill an input with a constant, e.g. a sample rate")
    g.add_argument("--input", action="append", default=[], metavar="INPUT=FILE.npy", dest="input_file",
                   help="feed an input from a .npy file")
    g.add_argument("--batch", type=int, metavar="N", help="set the leading free dimension of every input")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ortop",
        description="A top for ONNX Runtime: run a model in a measured loop and tune its session live.",
        epilog="Other commands: 'ortop info MODEL', 'ortop profiles list|show|diff|validate', "
               "'ortop export PROFILE --to FORMAT'. With no MODEL (or --demo) ortop runs its built-in demo model.",
    )
    p.add_argument("model", nargs="?", help="the .onnx model to run (default: the built-in demo model)")
    p.add_argument("--demo", action="store_true", help="run the built-in demo model")
    p.add_argument("--version", action="version", version=f"ortop {__version__}")
    p.add_argument("--profile", metavar="FILE", help="start from this profile (TOML)")
    p.add_argument("--resume", action="store_true", help="start from the last session's settings")
    p.add_argument("--provider", metavar="NAME", help="execution provider: cpu, cuda, or any name ORT knows")
    p.add_argument("--threads", type=int, metavar="N", help="intra-op threads (0 = ORT's default)")
    p.add_argument("--inter-threads", type=int, metavar="N", help="inter-op threads")
    p.add_argument("--no-spinning", action="store_true", help="turn the thread pool's spin-wait off")
    p.add_argument("--rate", type=float, metavar="HZ", help="paced loop at HZ runs per second (0 = closed loop)")
    p.add_argument("--concurrency", type=int, metavar="K", help="K concurrent callers")
    p.add_argument("--warmup", type=int, metavar="N", help="warm-up runs excluded from the statistics")
    p.add_argument("--seed", type=int, metavar="S", help="seed for the synthetic inputs")
    _add_override_args(p)
    p.add_argument("--strict-providers", action="store_true",
                   help="fail instead of warning when a requested provider is not active (silent CPU fallback)")
    p.add_argument("--headless", action="store_true", help="no UI: measure for --duration and print a summary")
    p.add_argument("--duration", type=float, default=10.0, metavar="SECONDS",
                   help="headless measuring time after warm-up (default 10)")
    p.add_argument("--json", action="store_true", help="headless: print the summary as one JSON object")
    p.add_argument("--summary", metavar="FILE", help="write the JSON summary to FILE at exit")
    p.add_argument("--refresh", type=float, default=4.0, metavar="HZ", help="TUI refresh rate (default 4)")
    p.add_argument("--profile-dir", metavar="DIR", default="profiles",
                   help="where ctrl+s saves profiles (default ./profiles)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"{flag} expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        if not k:
            raise UsageError(f"{flag} expects NAME=VALUE, got {item!r}")
        out[k] = v
    return out


def _number(text: str, flag: str, kind=float) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"{flag} expects a number, got {text!r}") from None


def effective_profile(args: argparse.Namespace, model_path: str):
    """The start profile: last session or --profile, then each flag on top (flags win)."""
    from ortop.config import profile as P
    from ortop.config.store import last_session_path
    from ortop.model import parse_shape

    if args.resume:
        path = last_session_path()
        if not path.exists():
            raise UsageError(f"--resume: no last session saved yet ({path})")
        prof = P.load(path)
    elif args.profile:
        prof = P.load(args.profile)
    else:
        prof = P.Profile()
    ch: dict[str, Any] = {}
    if args.provider is not None:
        ch["provider.name"] = args.provider
    if args.threads is not None:
        ch["session.intra_op_num_threads"] = args.threads
        if prof.session.intra_op_thread_affinities is not None and args.threads != prof.session.intra_op_num_threads:
            ch["session.intra_op_thread_affinities"] = None  # the profile's pinning was for another thread count
    if args.inter_threads is not None:
        ch["session.inter_op_num_threads"] = args.inter_threads
    if args.no_spinning:
        ch["session.allow_spinning"] = False
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
    ch.update({"workload.dims": dims, "workload.shapes": shapes, "workload.values": values,
               "workload.inputs": inputs})
    prof = P.merge(prof, **ch)
    return replace(prof, model=model_path)


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
    _write_summary(args, res.summary)
    if res.fatal and not res.measured:
        raise RuntimeFailure(res.fatal)
    if args.json:
        print(json.dumps(res.summary))
    elif not res.fatal:
        print(format_summary(res.summary))
    if res.fatal:
        raise RuntimeFailure(res.fatal)
    return 0


def _write_summary(args, data: dict) -> None:
    if args.summary:
        _write_json(args.summary, data)


def _write_json(path: str, data: dict) -> None:
    from ortop.fsutil import atomic_write_text

    try:
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write summary {path}: {exc.strerror or exc}") from None


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


def run_info(argv: Sequence[str]) -> int:
    from ortop.model import load_model

    p = argparse.ArgumentParser(prog="ortop info", description="Inspect a model: inputs, outputs, ops.")
    p.add_argument("model")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    info = load_model(a.model)
    if a.json:
        from dataclasses import asdict

        print(json.dumps(asdict(info), default=str, indent=2))
        return 0
    from ortop.model import format_info

    print(format_info(info))
    return 0


def run_tui(args: argparse.Namespace, model_path: str) -> int:
    from ortop.tui.app import run_app

    prof = effective_profile(args, model_path)
    return run_app(model_path, prof, args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        if argv and argv[0] == "info":
            return run_info(argv[1:])
        if argv and argv[0] == "compare":
            from ortop.cli.compare import compare_main
            return compare_main(argv[1:])
        if argv and argv[0] in ("profiles", "export"):
            from ortop.cli import profiles as profiles_cli

            fn = profiles_cli.profiles_main if argv[0] == "profiles" else profiles_cli.export_main
            return fn(argv[1:])
        args = build_parser().parse_args(argv)
        model_path = _resolve_model(args)
        if args.headless:
            return run_headless(args, model_path)
        return run_tui(args, model_path)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `ortop ... | head`: the reader left; stay quiet like other Unix tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if debug:
            raise
        from ortop.config.profile import ProfileError
        from ortop.model import ModelError

        if isinstance(exc, (UsageError, ModelError, ProfileError)):
            print(f"ortop: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if isinstance(exc, RuntimeFailure):
            print(f"ortop: error: {exc}", file=sys.stderr)
            return EXIT_RUNTIME
        print(f"ortop: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_RUNTIME


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
