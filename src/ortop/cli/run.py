"""``ortop [run] MODEL``: the live view, or with ``--headless`` a measurement printed as a table or JSON.

The start profile is the last session's (``--resume``: the model's, or with no MODEL the latest of any model) or
``--profile``'s, with each flag on top (flags win).
Either mode can serve Prometheus metrics (``--metrics-port``) and stream live figures as JSON lines (``--jsonl``);
both are bound or opened before any session is built, so a port in use is bad input, not a late failure. The
endpoint names its host and node type (``--node-type``, else ``ORTOP_NODE_TYPE``, else the type the fleet makes of
the host's facts), so many hosts' endpoints can be grouped by type in Prometheus itself.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from ortop.cli.argtypes import label_value
from ortop.cli.flags import add_json, add_strict_providers, add_workload_args, apply_flags
from ortop.errors import RuntimeFailure, UsageError
from ortop.present import DASH, cell, ms_text, pct_text, size_text

NODE_TYPE_VAR = "ORTOP_NODE_TYPE"  # the node type when --node-type is absent (set once per host, by its image)

EXAMPLES = """examples:
  ortop model.onnx                                    the live view (ortop run model.onnx)
  ortop model.onnx --threads 2 --no-spinning          start from two threads without spinning
  ortop model.onnx --profile serving.toml --rate 100  a profile, paced at 100 runs per second
  ortop model.onnx --headless --duration 30 --json    measure 30 s, print the summary as JSON
  ortop model.onnx --headless --rate 500 --arrival poisson --slo p99=20ms
  ortop model.onnx --headless --duration 0 --metrics-port 9811 --summary last.json
  ortop model.onnx --headless --duration 0 --metrics-port 9811 --node-type c6i-2xl
  ortop --demo                                        the built-in demo model
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", metavar="MODEL", help="the .onnx model to run (default: the model the "
                   "start profile names, else the built-in demo model)")
    p.add_argument("--demo", action="store_true", help="run the built-in demo model")
    p.add_argument("--profile", metavar="PROFILE", help="start from this profile (a TOML path or a profile name)")
    p.add_argument("--resume", action="store_true",
                   help="start from MODEL's last session's settings (with no MODEL: the latest session of any model, "
                        "named on stderr)")
    add_workload_args(p, session=True)
    add_strict_providers(p)
    h = p.add_argument_group("headless")
    h.add_argument("--headless", action="store_true", help="no UI: measure for --duration and print a summary")
    h.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="headless measuring time after warm-up (default 10, or a --trace's own length; 0 or inf: "
                        "until SIGTERM/SIGINT, then the summary; longer than a trace: it loops)")
    add_json(h, "headless: print the summary as one JSON object")
    h.add_argument("--summary", metavar="FILE", help="write the JSON summary to FILE at exit (headless)")
    h.add_argument("--slo", metavar="METRIC=LIMIT",
                   help="headless: judge the measured requests against a latency objective (p99=50ms, p95=20ms, "
                        "mean=10ms): the metric, the share of requests over the limit and met or not")
    m = p.add_argument_group("metrics and streams")
    m.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus metrics at http://ADDR:PORT/metrics (0: any free port; the address is "
                        "printed on stderr)")
    m.add_argument("--metrics-addr", default="127.0.0.1", metavar="ADDR",
                   help="address the metrics endpoint listens on (default 127.0.0.1; 0.0.0.0: every interface)")
    m.add_argument("--node-type", type=label_value, metavar="NAME",
                   help=f"the node type ortop_host_info names (default: ${NODE_TYPE_VAR}, else as ortop fleet names "
                        "a node from its host facts: the GPU model, else the CPU model and usable CPUs)")
    m.add_argument("--jsonl", metavar="FILE",
                   help="write one JSON object of live figures per interval to FILE (- for stdout; a FIFO works)")
    m.add_argument("--jsonl-interval", type=float, default=1.0, metavar="SECONDS",
                   help="seconds per --jsonl line (default 1)")
    t = p.add_argument_group("live view")
    t.add_argument("--refresh", type=float, default=2.0, metavar="HZ",
                   help="how often per second the live view looks for a change of state; its figures are redrawn at "
                        "half that (default 2: once a second)")
    t.add_argument("--profile-dir", metavar="DIR", default="profiles",
                   help="where ctrl+s saves profiles (default ./profiles)")


def run(args: argparse.Namespace) -> int:
    model_path = _resolve_model(args)
    protect = [model_path] + ([args.profile] if args.profile else [])
    if args.summary:  # an unwritable summary is found now, not after the whole measurement
        from ortop.fsutil import check_writable

        check_writable(args.summary, protect=protect, what="summary")
    if args.headless and args.duration is not None:
        _check_duration(args.duration)
    node_type(args)  # a bad ORTOP_NODE_TYPE, or --node-type with no endpoint, is found before anything starts
    if args.slo is not None:
        if not args.headless:
            raise UsageError("--slo judges a headless run: add --headless (the capacity screen, c, sizes traffic "
                             "against an SLO in the live view)")
        from ortop.measure.slo import parse_slo

        parse_slo(args.slo)
    outputs = open_outputs(args, protect)
    try:
        if args.headless:
            return run_headless(args, model_path, outputs)
        return run_tui(args, model_path, outputs)
    finally:
        outputs.close()


def _check_duration(duration: float) -> float:
    """Seconds to measure: 0 and inf mean until stopped (math.inf)."""
    if duration == 0 or duration == math.inf:
        return math.inf
    if not (duration > 0 and math.isfinite(duration)):
        raise UsageError(f"--duration must be > 0 seconds (or 0/inf: until stopped), got {duration}")
    return duration


class Outputs:
    """What a run serves or streams besides its own output: the metrics endpoint and the --jsonl writer.

    Bound and opened before any session is built; :meth:`attach` hands them the monitor once it exists;
    :meth:`close` (idempotent) ends them, before the summary is printed so a stream on stdout ends first.
    """

    def __init__(self) -> None:
        self.items: list[Any] = []

    def attach(self, monitor: Any) -> None:
        for item in self.items:
            item.attach(monitor)

    def close(self) -> None:
        items, self.items = self.items, []
        for item in reversed(items):
            item.close()


def _profile_name(args: argparse.Namespace) -> str:
    if args.resume:
        return "last-session"
    if args.profile:
        from pathlib import Path

        return Path(args.profile).stem if args.profile.endswith(".toml") else args.profile
    return "default"


def node_type(args: argparse.Namespace) -> str | None:
    """The node type the metrics endpoint names: ``--node-type``, else ``ORTOP_NODE_TYPE`` (checked as the flag is;
    empty counts as unset), else None (the endpoint names the type from the host's facts). ``--node-type`` without
    ``--metrics-port`` labels nothing: a UsageError, as any flag that would be silently ignored; the variable, set
    for every command a host runs, is only read when there is an endpoint."""
    if args.metrics_port is None:
        if args.node_type is not None:
            raise UsageError("--node-type labels the metrics endpoint: add --metrics-port")
        return None
    if args.node_type is not None:
        return str(args.node_type)
    env = os.environ.get(NODE_TYPE_VAR, "")
    if not env:
        return None
    try:
        return label_value(env)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{NODE_TYPE_VAR}: {exc}") from None


def open_outputs(args: argparse.Namespace, protect: list[str]) -> Outputs:
    """Bind --metrics-port and open --jsonl now (UsageError for a port in use or an unwritable path)."""
    out = Outputs()
    try:
        if args.jsonl:
            from ortop.metrics.jsonl import open_jsonl

            out.items.append(open_jsonl(args.jsonl, interval_s=args.jsonl_interval, protect=protect,
                                        tty_is_busy=not args.headless))
        if args.metrics_port is not None:
            from ortop.metrics.prometheus import start_metrics_server

            server = start_metrics_server(None, args.metrics_addr, args.metrics_port,
                                          profile_name=_profile_name(args), node_type=node_type(args))
            out.items.append(server)
            print(f"ortop: metrics on {server.url}", file=sys.stderr, flush=True)
    except BaseException:
        out.close()
        raise
    return out


def effective_profile(args: argparse.Namespace, model_path: str) -> Any:
    """The start profile: last session or --profile, then each flag on top (flags win)."""
    from ortop.config import profile as P
    from ortop.config.files import resolve_profile

    if args.resume:
        prof = _resumed(model_path, named=args.model or model_path).profile
    elif args.profile:
        prof = P.load(resolve_profile(args.profile))
    else:
        prof = P.Profile()
    return apply_flags(prof, args, model_path)


def _resolve_model(args: argparse.Namespace) -> str:
    """The model on the command line, else the one the start profile names (``--profile``, or the last session's
    with ``--resume``), else the built-in demo model."""
    if args.demo:
        return _demo()
    if args.model:
        return str(args.model)
    named = _profile_model(args)
    return named if named else _demo()


def _demo() -> str:
    from ortop.model.demo import ensure_demo

    return str(ensure_demo())


def _profile_model(args: argparse.Namespace) -> str:
    from ortop.config import profile as P
    from ortop.config.files import resolve_profile

    if args.resume:
        s = _resumed(None)
        print(f"ortop: resuming the last session of {s.model} (saved {s.when()})", file=sys.stderr, flush=True)
        return str(s.model)
    if args.profile:
        return P.load(resolve_profile(args.profile)).model
    return ""


def _resumed(model: str | None, named: str = "") -> Any:
    """The saved session ``--resume`` starts from: ``model``'s, or with None the latest of any model. None saved
    is a UsageError; so is none for ``model`` (``named``: the model as typed), which names the latest instead of
    falling back to it, since another model's settings are rarely what was meant."""
    from ortop.config.errors import ProfileError
    from ortop.config.files import last_session, sessions_dir

    found = last_session(model)
    if found is not None:
        return found
    try:
        latest = last_session() if model is not None else None
    except ProfileError:  # a broken file of another model: the hint is left out, the error below stands
        latest = None
    if latest is None:
        raise UsageError(f"--resume: no last session saved yet ({sessions_dir()})")
    raise UsageError(f"--resume: no last session for {named or model}; `ortop --resume` alone resumes the latest "
                     f"(of {latest.model}, saved {latest.when()})")


def run_headless(args: argparse.Namespace, model_path: str, outputs: Outputs | None = None) -> int:
    from ortop.cli.stopping import stop_on_signals
    from ortop.collectors.gpu import make_gpu_collector
    from ortop.config import profile as P
    from ortop.engine import measure
    from ortop.measure.arrivals import TRACE, mode_of
    from ortop.measure.slo import parse_slo
    from ortop.model.mixes import SHAPE_REFUSED

    prof = effective_profile(args, model_path)
    if mode_of(prof.workload) == TRACE:
        # The run is the trace, whole, unless --duration asks for a length of its own (then it loops).
        duration = math.inf if args.duration is None else _check_duration(args.duration)
        if args.duration is not None:
            prof = P.merge(prof, **{"workload.trace_loop": True})
    else:
        duration = _check_duration(10.0 if args.duration is None else args.duration)
    outputs = outputs or Outputs()
    gpu = make_gpu_collector()
    with stop_on_signals() as stopping:  # Ctrl-C or SIGTERM: finish with what was measured
        try:
            res = measure(model_path, prof, duration_s=duration, strict_providers=args.strict_providers,
                          stop=stopping.event, gpu=gpu, on_monitor=outputs.attach,
                          slo=parse_slo(args.slo) if args.slo else None)
        finally:
            gpu.close()
            outputs.close()  # the stream's last line comes before the summary
    # What was measured reaches stdout first: a summary file that fails to write must not lose it.
    if args.json:
        print(json.dumps(res.summary), flush=True)
    elif res.measured:
        print(format_summary(res.summary), flush=True)
    _write_summary(args, res.summary)
    if res.fatal:
        if SHAPE_REFUSED in res.fatal:  # a shape of the mix or trace that the model refuses: bad input
            raise UsageError(res.fatal)
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




def _figure(key: str, value: float, runs: int) -> str:
    """A percentile of ``runs`` runs as the table writes it: "—" where they are too few for it (a p99 of 24 runs is
    their slowest under another name; :func:`ortop.measure.stats.resolved`)."""
    from ortop.measure.stats import resolved

    return ms_text(value) if resolved(key, runs) else DASH


def _traffic_lines(d: dict) -> list[str]:
    """Open arrivals: what was offered and served, and response split into queue and service; shapes and gaps. A
    percentile its runs cannot hold reads "—", as on the latency line."""
    arr = d.get("arrivals")
    runs = int(d.get("runs") or 0)
    if not arr or arr["mode"] == "closed":
        lines = []
    else:
        keys = ("mean", "p50", "p99", "max")
        lines = [
            f"arrivals    {arr['mode']}: offered {cell(arr['offered_per_s'], 1)}/s, served "
            f"{cell(arr['served_per_s'], 1)}/s, {arr['dropped']} shed, longest queue {arr['queue_max']}",
            "  service   " + "  ".join(f"{k} {_figure(k, d['service_ms'][k], runs)}" for k in keys),
            "  queue     " + "  ".join(f"{k} {_figure(k, d['queue_ms'][k], runs)}" for k in keys),
        ]
        if d.get("idle_gaps"):
            lines.append("idle gap    " + "  ".join(
                f"{g['gap']}: {g['runs']} runs p50 {_figure('p50', g['service_p50_ms'], g['runs'])} p99 "
                f"{_figure('p99', g['service_p99_ms'], g['runs'])}" for g in d["idle_gaps"] if g["runs"]))
    for row in d.get("shapes", []):
        n = int(row["runs"])
        lines.append(f"shape       {row['label']:<24} {n:>6} runs  service p50 "
                     f"{_figure('p50', row['service_ms']['p50'], n)} p99 {_figure('p99', row['service_ms']['p99'], n)}"
                     f"  response p99 {_figure('p99', row['latency_ms']['p99'], n)}")
    return lines


def _slo_lines(d: dict) -> list[str]:
    s = d.get("slo")
    if not s:
        return []
    share = "" if s["share_over"] is None else f"{100 * s['share_over']:.2f} % "
    return [f"slo         {s['metric']} ≤ {s['ms']:g} ms: {'met' if s['met'] else 'NOT MET'} ({s['metric']} "
            f"{ms_text(s['value_ms'])} ms; {share}of {s['requests']} requests over it)"]


def _latency_line(lat: dict, runs: int) -> str:
    """The latency figures; a percentile that fewer than one run lies beyond (p999 of 559 runs) would be the
    slowest run under another name: it reads "—", and the line says how many runs it needs."""
    from ortop.measure.stats import resolved, runs_needed

    keys = ("mean", "p50", "p90", "p99", "p999", "max")
    cells = [f"{k} {_figure(k, lat[k], runs)}" for k in keys]
    short = [k for k in keys if not resolved(k, runs)]
    note = f"  ({short[0]} needs {runs_needed(short[0]):,} runs)" if short else ""
    return "latency ms  " + "  ".join(cells) + note


def format_summary(d: dict) -> str:
    lat, cpu = d["latency_ms"], d["cpu"]
    lines = [
        f"model       {d['model']}",
        f"inputs      {', '.join(d['inputs'])}",
        f"providers   {', '.join(d['providers_active'])}"
        + ("" if set(d["providers_requested"]) <= set(d["providers_active"])
           else f"  (requested {', '.join(d['providers_requested'])})"),
        f"session     create {ms_text(d['session']['create_ms'])} ms, first run "
        f"{ms_text(d['session']['first_run_ms'])} ms",
        f"runs        {d['runs']} in {d['duration_s']:.1f} s (+{d['warmup_runs']} warm-up), "
        f"{cell(d['throughput_per_s'], 1)} runs/s",
        _latency_line(lat, d["runs"]),
        *_traffic_lines(d),
        *_slo_lines(d),
        f"cpu         {ms_text(cpu['cpu_ms_per_run'])} ms/run, {cell(cpu['cpu_ms_between_runs_per_s'], 1)} ms/s "
        f"between runs (spin), process {pct_text(cpu['process_cpu_percent'])} of a core",
        "gpu         " + ("no NVIDIA GPU" if d["gpu"] is None else ", ".join(
            f"#{g['index']} {size_text(g['mem_used'])}/{size_text(g['mem_total'])}" for g in d["gpu"])),
    ]
    for w in d["warnings"]:
        lines.append(f"warning     {w}")
    return "\n".join(lines)


def run_tui(args: argparse.Namespace, model_path: str, outputs: Outputs | None = None) -> int:
    from ortop.tui.app import run_app

    prof = effective_profile(args, model_path)
    outputs = outputs or Outputs()
    try:
        return run_app(model_path, prof, args, on_monitor=outputs.attach)
    finally:
        outputs.close()


