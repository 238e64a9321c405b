"""``ortop fleet tune|capacity|compare|doctor MODEL … --cluster ADDRESS``: the single-host command on every node of a
Ray cluster, in parallel, one measurement per node at a time, gathered per node and per node type.

Each node runs ``ortop COMMAND MODEL … --json`` itself (the model shipped to it through Ray and checked by hash):
its answer is exactly that command's JSON, with the node's id, address, type and host facts beside it. A node's
type is its Ray resource ``ortop-type:NAME``, else its host facts. For capacity, per type: the pooled capacity and
its interval (a node whose interval leaves out its siblings' median is flagged and left out), with ``--price`` the
cost per million requests from the interval's low end, with ``--peak`` the hosts that serve the peak (N+1),
checked by simulation. Every argument besides the fleet's own is the single-host command's, checked by its parser
here before anything starts on the cluster.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ortop.cli.stopping import stop_on_signals
from ortop.errors import (
    EXIT_USAGE,
    UsageError,
)

COMMANDS = ("tune", "capacity", "compare", "doctor")
SERVICE_S = 3.0  # with --peak: the headless run per node whose service times the sizing simulates from

# The fleet's own flags (each with the count of values it takes): taken out of what the nodes are given.
OWN = {"--cluster": 1, "--per-type": 1, "--price": 1, "--peak": 1, "--json": 0, "--report": 1, "--debug": 0}
# Flags that would write a file on each node: a fleet's answer is its JSON and its report.
WRITES_ON_NODE = ("--save", "--save-fixed", "--fix-model", "--summary-md")
# What the headless service run (with --peak) must not be given: its own output and duration, or a second profile.
NOT_FOR_SERVICE = ("--json", "--summary", "--jsonl", "--duration", "--headless", "--demo", "--resume", "--slo")


EXAMPLES = """examples:
  ortop fleet capacity model.onnx --slo p99=50ms --budget 60 --cluster auto
  ortop fleet capacity model.onnx --slo p99=20ms --cluster 10.0.0.5:6379 --per-type 2 --json
  ortop fleet capacity model.onnx --slo p99=20ms --price c6i-2xl=0.34 --price g5-xl=1.01 --peak 2000
  ortop fleet capacity model.onnx --slo p99=8ms --provider cuda --report fleet.html
  ortop fleet tune model.onnx --objective p99 --budget 120 --cluster auto --json
  ortop fleet doctor model.onnx --cluster auto
"""


class FleetParser(argparse.ArgumentParser):
    """A fleet sub-command's parser: a bad flag is one line (as every parser of ortop's), and the words it parsed are
    kept (``fleet_argv``) so the nodes are given the single-host command's arguments exactly as typed."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        ns.fleet_argv = list(args or [])
        return ns, rest


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate in requests/s, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a rate > 0 requests/s, got {text}")
    return value


def _price(text: str) -> tuple[str, float]:
    name, sep, usd = text.rpartition("=")
    try:
        value = float(usd)
    except ValueError:
        value = math.nan
    if not sep or not name.strip() or not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected TYPE=USD_PER_HOUR with a price > 0, e.g. c6i-2xl=0.34, got "
                                         f"{text!r}")
    return name.strip(), value


def add_fleet_args(p: argparse.ArgumentParser) -> None:
    """The fleet's own flags on a sub-command's parser (``--json`` and ``--report`` mean the fleet's answer)."""
    g = p.add_argument_group("fleet")
    g.add_argument("--cluster", default="auto", metavar="ADDRESS",
                   help="the Ray cluster: HOST:PORT of its head, ray://HOST:PORT, or auto (RAY_ADDRESS, else a "
                        "cluster running on this machine, else a new one-node cluster here)")
    g.add_argument("--per-type", type=_positive_int, metavar="K",
                   help="measure K nodes of each node type (default: every node)")
    g.add_argument("--price", action="append", default=[], type=_price, metavar="TYPE=USD_PER_HOUR",
                   help="a node type's price per hour (repeat per type): the types are ranked by cost per million "
                        "requests from their capacity interval's low end (capacity)")
    g.add_argument("--peak", type=_rate, metavar="RATE",
                   help="capacity: the hosts of each type that serve RATE requests/s within the SLO, with one spare "
                        "(N+1), checked by simulating the service times each node measured")
    own = {"--json": "print the fleet's answer as one JSON object (every node's own JSON inside)",
           "--report": "also write the fleet's answer as a self-contained HTML page to FILE"}
    for flag, text in own.items():
        action = p._option_string_actions.get(flag)
        if action is not None:
            action.help = text
        elif flag == "--json":
            g.add_argument(flag, action="store_true", help=text)
        else:
            g.add_argument(flag, metavar="FILE", help=text)
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def prepare_parser(p: argparse.ArgumentParser) -> None:
    from ortop.cli.commands import COMMANDS as ALL

    sub = p.add_subparsers(dest="fleet_command", metavar="COMMAND", parser_class=FleetParser, required=True)
    for cmd in ALL:
        if cmd.name not in COMMANDS:
            continue
        module = importlib.import_module(cmd.module)
        sp = sub.add_parser(cmd.name, help=f"ortop {cmd.name} on every node: {cmd.help}", allow_abbrev=False,
                            description=f"ortop {cmd.name} on every node of the cluster; its own arguments as "
                                        f"ortop {cmd.name} takes them, and the fleet's.")
        getattr(module, cmd.prepare)(sp)
        add_fleet_args(sp)


# ---- from the words typed to what each node is given -------------------------------------------------------------
def _flag(word: str) -> str:
    return word.split("=", 1)[0] if word.startswith("--") else word


def forwarded(words: Sequence[str], model: str) -> list[str]:
    """The words the nodes are given: those typed, less the fleet's own flags and the model."""
    out: list[str] = []
    skip = 0
    model_left = True
    for w in words:
        if skip:
            skip -= 1
            continue
        flag = _flag(w)
        if flag in OWN:
            skip = OWN[flag] if "=" not in w else 0
            continue
        if model_left and w == model:
            model_left = False
            continue
        out.append(w)
    return out


def shipped(words: Sequence[str], model: str) -> tuple[list[str], dict[str, bytes]]:
    """The words with every local file they name (a profile, an input ``NAME=FILE.npy``) replaced by its place in
    the node's temporary folder, and those files' bytes, which travel with the model."""
    from ortop.fleet.tasks import DIR_MARK

    files: dict[str, bytes] = {}
    out = []
    for w in words:
        head, eq, tail = w.rpartition("=") if not w.startswith("-") and "=" in w else ("", "", w)
        path = tail
        if not w.startswith("-") and os.path.isfile(path) and os.path.abspath(path) != os.path.abspath(model):
            name = f"{len(files)}-{os.path.basename(path)}"
            with open(path, "rb") as f:
                files[name] = f.read()
            out.append(f"{head}{eq}{DIR_MARK}/{name}")
        else:
            out.append(w)
    return out, files


def service_args(words: Sequence[str]) -> list[str]:
    """Of the nodes' words, those ``ortop run --headless`` takes (the first profile's, the inputs, the session and
    workload flags), for the service-time run sizing simulates from."""
    from ortop.cli.main import build_parser

    top = build_parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    run_parser = subs.choices["run"]
    out: list[str] = []
    take = 0
    profiles = 0
    i = 0
    while i < len(words):
        w = words[i]
        flag = _flag(w)
        action = run_parser._option_string_actions.get(flag) if w.startswith("-") else None
        if action is None or flag in NOT_FOR_SERVICE or action.help is argparse.SUPPRESS:
            i += 1
            continue
        take = 0 if ("=" in w or action.nargs == 0) else 1
        if flag == "--profile":
            profiles += 1
        if flag != "--profile" or profiles == 1:
            out += list(words[i:i + 1 + take])
        i += 1 + take
    return out


def _provider(args: argparse.Namespace) -> str | None:
    from ortop.config import knobs

    for knob in knobs.registry():
        flag = knob.cli_flag
        if flag is not None and flag.name == "--provider":
            return getattr(args, flag.dest, None)
    return None


def run(args: argparse.Namespace) -> int:
    from ortop import fleet

    command = args.fleet_command
    model = getattr(args, "model", None) or (getattr(args, "items", None) or [None])[0]
    if not model or not os.path.isfile(model):
        raise UsageError(f"{model}: no such model file on this host" if model else "a MODEL is needed")
    for flag in WRITES_ON_NODE:
        if getattr(args, flag[2:].replace("-", "_"), None):
            raise UsageError(f"{flag} is not taken by ortop fleet: it would write a file on each node (the fleet's "
                             "answer is its --json and --report)")
    if args.peak is not None and command != "capacity":
        raise UsageError("--peak is taken by ortop fleet capacity only (it sizes from capacity intervals)")
    if args.price and command != "capacity":
        raise UsageError("--price is taken by ortop fleet capacity only (it prices capacity)")
    if args.report:
        from ortop.report import check_report

        check_report(args.report, protect=(model,))
    if not fleet.available():
        print(f"ortop: error: {fleet.INSTALL}", file=sys.stderr)
        return EXIT_USAGE
    from ortop.fleet.run import FleetRequest, run_fleet
    from ortop.measure.slo import parse_slo

    words = forwarded(args.fleet_argv, model)
    words, files = shipped(words, model)
    prices: dict[str, float] = {}
    for name, usd in args.price:
        prices[name] = usd
    slo = parse_slo(args.slo) if getattr(args, "slo", None) else None
    if args.peak is not None and slo is None:
        raise UsageError("--peak needs --slo: the hosts are sized to serve the peak within it")
    req = FleetRequest(command=command, model=model, args=words, cluster=args.cluster, files=files,
                       per_type=args.per_type, prices=prices, peak=args.peak, slo=slo, provider=_provider(args),
                       service_s=SERVICE_S if args.peak is not None else 0.0,
                       run_args=service_args(words) if args.peak is not None else [])

    def say(line: str) -> None:
        print(f"fleet: {line}", file=sys.stderr, flush=True)

    with stop_on_signals(second_aborts=True) as stop:  # ctrl-C: every node prints what it has; a second aborts
        data = run_fleet(req, say=say, stopping=stop.event.is_set)
    if args.json:
        print(json.dumps(data), flush=True)
    else:
        print(format_fleet(data), flush=True)
    if args.report:
        from ortop.report import write_report
        from ortop.report.fleet import fleet_page

        write_report(args.report, fleet_page(data), protect=(model,))
    return int(data["exit_code"])


# ---- the terminal's answer ---------------------------------------------------------------------------------------
def _r(x: Any) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "?"
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def _capacity(p: dict[str, Any]) -> str:
    iv = p.get("interval") or [None, None]
    cap = p.get("capacity_per_s")
    if not p.get("met"):
        return "0" if p.get("result") != "undecided" else "undecided"
    return f"{_r(cap)}/s ({_r(iv[0])}–{_r(iv[1])}/s)"


def _noise(n: dict[str, Any] | None) -> str:
    if not n:
        return ""
    steal, pressure = n.get("steal_pct"), n.get("cpu_pressure_pct")
    return (f"steal {'?' if steal is None else f'{steal:.1f} %'}, CPU pressure "
            f"{'?' if pressure is None else f'{pressure:.0f} %'}")


def node_rows(data: dict[str, Any]) -> list[str]:
    lines = [f"  {'node':<12}  {'type':<24}  {'address':<15}  {'cpus':>4}  {'status':<11}  answer"]
    for e in data["nodes"]:
        node = e["node"]
        facts = node.get("facts") or {}
        result = e.get("result") or {}
        if e["status"] == "done" and data["fleet"]["command"] == "capacity":
            answer = "; ".join(f"{p.get('profile')}: {_capacity(p)}" for p in result.get("profiles") or [])
            noise = _noise(result.get("host_noise"))
            answer += f"  [{noise}]" if noise else ""
        elif e["status"] == "done":
            answer = f"exit {e.get('exit_code')}"
        else:
            answer = e.get("line") or ""
        lines.append(f"  {node['id'][:12]:<12}  {node['type'][:24]:<24}  {node['address'][:15]:<15}  "
                     f"{facts.get('usable_cpus', '?')!s:>4}  {e['status']:<11}  {answer}")
    return lines


def type_rows(data: dict[str, Any]) -> list[str]:
    lines = []
    for t in data["types"]:
        for p in t["profiles"]:
            iv = p["interval"]
            cost = p.get("usd_per_million")
            lines.append(f"  {t['type'][:24]:<24}  {p['profile'][:16]:<16}  {len(p['pooled'])}/{len(t['nodes'])} "
                         f"pooled  {_r(p['capacity_per_s'])}/s ({_r(iv[0])}–{_r(iv[1])}/s)"
                         + (f"  ${t['price_per_hour']:g}/h → ${cost:.4g} per million" if cost is not None else ""))
            for f in p["flagged"]:
                lines.append(f"      flagged {f['id'][:12]}: {f['why']}")
            if p.get("note"):
                lines.append(f"      {p['note']}")
        sizing = t.get("sizing")
        if sizing and "hosts" in sizing:
            sim = sizing["simulated"]
            m = sizing["slo"]["metric"]
            lines.append(f"      peak {sizing['peak_per_s']:g}/s: {sizing['hosts']} hosts at "
                         f"{_r(sizing['per_host_per_s'])}/s each, {sizing['hosts_with_spare']} with the spare; "
                         f"simulated {m}: random split "
                         f"{_r(sim['random']['at_n'])} ms at N, {_r(sim['random']['at_n_minus_1'])} ms at N−1; "
                         f"least outstanding {_r(sim['least_outstanding']['at_n'])} ms at N, "
                         f"{_r(sim['least_outstanding']['at_n_minus_1'])} ms at N−1")
            lines.append(f"      {sizing['verdict']}")
        elif sizing:
            lines.append(f"      peak: {sizing.get('note')}")
    return lines


def format_fleet(data: dict[str, Any]) -> str:
    f = data["fleet"]
    lines = [f"fleet    ortop {f['command']} {f['model']} on {len(data['nodes'])} node(s), cluster {f['cluster']}, "
             f"{f['elapsed_s']:.0f} s" + ("  (stopped)" if f["stopped"] else ""), "", *node_rows(data)]
    for s in data["not_measured"]:
        lines.append(f"  {s['node']['id'][:12]:<12}  not measured: {s['why']}")
    if f["command"] == "capacity" and data["types"]:
        lines += ["", "per type (a node whose interval leaves out its siblings' median is not pooled):",
                  *type_rows(data)]
    if data["ranking"]:
        lines += ["", "cheapest per million requests within the SLO (from the interval's low end):"]
        lines += [f"  {i + 1}. {r['type']} ({r['profile']}): ${r['usd_per_million']:.4g}"
                  for i, r in enumerate(data["ranking"])]
    for line in data["lost"]:
        lines.append(f"lost     {line}")
    return "\n".join(lines)
