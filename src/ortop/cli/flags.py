"""Flags several commands share: every knob's flag (the workload's, the provider, the quick session knobs) and the
inputs fed.

A knob's flag is declared with the knob (``Knob.flag``; every single-valued workload knob gets one by default), so
``ortop MODEL``, ``compare``, ``tune``, ``doctor`` and ``ops`` spell and apply them alike and a new knob needs no
edit here: a flag overrides the profile's value; input maps (dims, shapes, values, files) are merged into the
profile's own.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ortop.config import knobs
from ortop.config.knobs import Flag, Knob
from ortop.errors import UsageError


def _flag_knobs(*, session: bool) -> list[tuple[Knob, Flag]]:
    """The knobs with a command-line flag (declared or derived), in declaration order; the quick session ones only
    with ``session``."""
    out = []
    for knob in knobs.registry():
        flag = knob.cli_flag
        if flag is not None and (session or not flag.session):
            out.append((knob, flag))
    return out


def add_flag(p: Any, knob: Knob, flag: Flag) -> None:
    """One knob's flag on a parser or group: a bool stores True (False for ``--no-…``), anything else is read as
    the knob's type (one of its choices, when it has them)."""
    help_ = flag.help or knob.help
    if knob.type is bool:
        p.add_argument(flag.name, dest=flag.dest, action="store_const", const=not flag.name.startswith("--no-"),
                       default=None, help=help_)
    elif knob.choices:
        p.add_argument(flag.name, dest=flag.dest, choices=knob.choices, help=help_)
    else:
        kind = knob.type if knob.type in (int, float) else str
        metavar = flag.metavar or {int: "N", float: "X"}.get(kind, "VALUE")
        p.add_argument(flag.name, dest=flag.dest, type=kind, metavar=metavar, help=help_)


# What ``--budget SECONDS`` counts: one of two clocks, said the same way by every command that takes it.
BUDGET_WALL = "wall-clock seconds from the command's start to its result, session builds included"
BUDGET_MEASURING = "seconds of measuring, session builds not counted"

# Knob flags a command has no use for: refused with one line naming the reason (and left out of its help).
NO_TRAFFIC = ("ops traces runs one after another on one session: no arrivals, callers or replicas",
              ("--rate", "--concurrency", "--replicas", "--pin-replicas", "--arrival", "--max-queue", "--trace",
               "--trace-speed", "--trace-loop"))
OWN_ARRIVALS = ("capacity offers Poisson arrivals at the rates it searches (use ortop run --rate or --trace for a "
                "rate or a trace of your own)", ("--rate", "--arrival", "--trace", "--trace-speed", "--trace-loop"))


def add_budget_arg(p: Any, default: float, counts: str, more: str = "",
                   kind: Callable[[str], float] = float) -> None:
    """``--budget SECONDS``: ``counts`` is :data:`BUDGET_WALL` or :data:`BUDGET_MEASURING`; ``more`` what else it
    does in this command; ``kind`` the argparse type that refuses a bad budget while parsing
    (:func:`ortop.cli.argtypes.seconds`, or ``seconds_or_zero`` where 0 skips the measuring)."""
    p.add_argument("--budget", type=kind, default=default, metavar="SECONDS",
                   help=f"{counts}{more} (default {default:g})")


class Refused(argparse.Action):
    """A flag this command does not take: using it is one ``ortop: error:`` line saying why (exit 2)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, why: str = "", **kw: Any) -> None:
        self.why = why
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, default=None, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        raise UsageError(f"{option_string} is not taken by {parser.prog}: {self.why}")


def refused(p: argparse.ArgumentParser) -> dict[str, str]:
    """The flags ``p`` refuses, each with its reason."""
    return {a.option_strings[0]: a.why for a in p._actions if isinstance(a, Refused)}


def add_json(p: Any, what: str = "print one JSON object") -> None:
    """``--json``: the command's answer as one JSON object on stdout, its notes still on stderr."""
    p.add_argument("--json", action="store_true", help=what)


def add_strict_providers(p: argparse.ArgumentParser) -> None:
    """``--strict-providers``: for the commands that build one session per profile and say when a provider fell
    back (``run``, ``capacity``)."""
    p.add_argument("--strict-providers", action="store_true",
                   help="fail instead of warning when a requested provider is not active (silent CPU fallback)")


def add_workload_args(p: argparse.ArgumentParser, *, session: bool = False,
                      refuse: tuple[str, Sequence[str]] | None = None, helps: Mapping[str, str] | None = None
                      ) -> None:
    """Every knob's flag (:attr:`ortop.config.knobs.Knob.cli_flag`, in declaration order within its group) and the
    input flags; ``session`` adds the quick session knobs (threads, spinning). ``refuse`` is ``(why, flags)``: flags
    this command has no use for, refused with ``why``; ``helps`` replaces a flag's help where it means something
    more precise in this command."""
    why, no = refuse or ("", ())
    helps = helps or {}
    groups: dict[str, Any] = {"": p, "workload": p.add_argument_group("workload"),
                              "inputs": p.add_argument_group("inputs")}
    g = groups["inputs"]
    g.add_argument("--dim", action="append", default=[], metavar="SYMBOL=N",
                   help="set a free (symbolic) dimension, e.g. --dim batch=8; or a mix drawn per request: "
                   "--dim seq=16..512 (a range), --dim seq=32:5,128:3,512:1 (sizes with weights)")
    g.add_argument("--shape", action="append", default=[], metavar="INPUT=1x3x224x224",
                   help="set an input's whole shape; or a mix drawn per request: --shape x=1x3x48x160,1x3x48x320")
    g.add_argument("--value", action="append", default=[], metavar="INPUT=NUMBER",
                   help="fill an input with a constant, e.g. a sample rate")
    g.add_argument("--input", action="append", default=[], metavar="INPUT=FILE.npy", dest="input_file",
                   help="feed an input from a .npy file")
    for knob, flag in _flag_knobs(session=session):
        if flag.name in no:
            p.add_argument(flag.name, dest=flag.dest, action=Refused, why=why, nargs=0 if knob.type is bool else None)
            continue
        if flag.name in helps:
            flag = replace(flag, help=helps[flag.name])
        group = flag.group if flag.group is not None else ("workload" if knob.table == "workload" else "")
        if group not in groups:
            groups[group] = p.add_argument_group(group)
        add_flag(groups[group], knob, flag)


def pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` → ``{"a": "1", "b": "2"}``; anything else is a usage error naming the flag."""
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise UsageError(f"{flag} expects NAME=VALUE, got {item!r}")
        out[k] = v
    return out


def number(text: str, flag: str, kind: Any = float) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"{flag} expects a number, got {text!r}") from None


def flag_changes(args: argparse.Namespace, prof: Any) -> dict[str, Any]:
    """The dotted profile changes the flags ask for (absent flags change nothing)."""
    from ortop.model import parse_shape
    from ortop.model.mixes import is_mix

    ch: dict[str, Any] = {}
    for knob, flag in _flag_knobs(session=True):
        value = getattr(args, flag.dest, None)
        if value is not None:
            ch[knob.key] = value
    threads = ch.get("session.intra_op_num_threads")
    if (threads is not None and prof.session.intra_op_thread_affinities is not None
            and threads != prof.session.intra_op_num_threads):
        ch["session.intra_op_thread_affinities"] = None  # the profile's pinning was for another thread count
    if ch.get("workload.trace"):
        ch["workload.trace"] = os.path.abspath(ch["workload.trace"])  # a flag's path is the caller's, not the profile's
        ch.setdefault("workload.arrival", "trace")
    w = prof.workload
    dims, dim_mix = dict(w.dims), dict(w.dim_mix)
    for k, v in pairs(args.dim, "--dim").items():  # one size, or a mix drawn per request
        if is_mix(v):
            dim_mix[k] = v
            dims.pop(k, None)
        else:
            dims[k] = number(v, "--dim", int)
            dim_mix.pop(k, None)
    shapes, shape_mix = {k: list(v) for k, v in w.shapes.items()}, dict(w.shape_mix)
    for k, v in pairs(args.shape, "--shape").items():
        if "," in v or ":" in v:
            shape_mix[k] = v
            shapes.pop(k, None)
        else:
            shapes[k] = list(parse_shape(v))
            shape_mix.pop(k, None)
    ch.update({"workload.dim_mix": dim_mix, "workload.shape_mix": shape_mix})
    values = dict(w.values)
    values.update({k: number(v, "--value") for k, v in pairs(args.value, "--value").items()})
    inputs = dict(w.inputs)
    inputs.update({k: os.path.abspath(v) for k, v in pairs(args.input_file, "--input").items()})
    ch.update({"workload.dims": dims, "workload.shapes": shapes, "workload.values": values,
               "workload.inputs": inputs})
    return ch


def apply_flags(prof: Any, args: argparse.Namespace, model_path: str) -> Any:
    """``prof`` with the flags on top (validated), running ``model_path``."""
    from ortop.config import profile as P

    return replace(P.merge(prof, **flag_changes(args, prof)), model=model_path)
