"""Flags several commands share: the workload (rate, callers, warm-up, seed, provider) and the inputs fed.

One definition, so ``ortop MODEL``, ``compare``, ``tune`` and ``doctor`` spell and apply them alike: a flag
overrides the profile's value; input maps (dims, shapes, values, files) are merged into the profile's own.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ortop.errors import UsageError


def add_workload_args(p: argparse.ArgumentParser, *, session: bool = False) -> None:
    """The workload and input flags; ``session`` adds the quick session knobs (threads, spinning)."""
    p.add_argument("--provider", metavar="NAME", help="execution provider: cpu, cuda, or any name ORT knows")
    if session:
        p.add_argument("--threads", type=int, metavar="N", help="intra-op threads (0 = ORT's default)")
        p.add_argument("--inter-threads", type=int, metavar="N", help="inter-op threads")
        p.add_argument("--no-spinning", action="store_true", help="turn the thread pool's spin-wait off")
    w = p.add_argument_group("workload")
    w.add_argument("--rate", type=float, metavar="HZ", help="paced loop at HZ runs per second (0 = closed loop)")
    w.add_argument("--concurrency", type=int, metavar="K", help="K concurrent callers")
    w.add_argument("--replicas", type=int, metavar="N",
                   help="serve N sessions of the model at once in one worker, each with its own callers")
    w.add_argument("--pin-replicas", action="store_true", default=None,
                   help="give each replica its own share of the cores (pool threads and callers pinned there)")
    w.add_argument("--shared-arena", action="store_true", default=None,
                   help="one CPU arena shared by the sessions (ORT's environment allocator)")
    w.add_argument("--arrival", choices=("closed", "fixed", "poisson", "trace"),
                   help="how requests come: closed loop, or open arrivals at --rate (fixed spacing or Poisson) or "
                   "from --trace, waiting in a FIFO queue; default: fixed with --rate, else closed")
    w.add_argument("--max-queue", type=int, metavar="N",
                   help="open arrivals: shed requests beyond N waiting (default: one second of requests)")
    w.add_argument("--trace", metavar="FILE.jsonl",
                   help="replay requests from a JSON-lines trace ({\"t\": s, \"dims\"|\"shapes\"|\"inputs\": …})")
    w.add_argument("--trace-speed", type=float, metavar="X", help="replay the trace X times faster than recorded")
    w.add_argument("--warmup", type=int, metavar="N", help="warm-up runs after each build, excluded from figures")
    w.add_argument("--seed", type=int, metavar="S", help="seed for the synthetic inputs")
    g = p.add_argument_group("inputs")
    g.add_argument("--dim", action="append", default=[], metavar="SYMBOL=N",
                   help="set a free (symbolic) dimension, e.g. --dim batch=8; or a mix drawn per request: "
                   "--dim seq=16..512 (a range), --dim seq=32:5,128:3,512:1 (sizes with weights)")
    g.add_argument("--shape", action="append", default=[], metavar="INPUT=1x3x224x224",
                   help="set an input's whole shape; or a mix drawn per request: --shape x=1x3x48x160,1x3x48x320")
    g.add_argument("--value", action="append", default=[], metavar="INPUT=NUMBER",
                   help="fill an input with a constant, e.g. a sample rate")
    g.add_argument("--input", action="append", default=[], metavar="INPUT=FILE.npy", dest="input_file",
                   help="feed an input from a .npy file")
    g.add_argument("--batch", type=int, metavar="N", help="set the leading free dimension of every input")


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
    for flag, key in (("provider", "provider.name"), ("rate", "workload.rate_hz"),
                      ("concurrency", "workload.concurrency"), ("warmup", "workload.warmup_runs"),
                      ("replicas", "workload.replicas"), ("pin_replicas", "workload.pin_replicas"),
                      ("shared_arena", "session.use_env_allocators"),
                      ("seed", "workload.seed"), ("batch", "workload.batch"),
                      ("arrival", "workload.arrival"), ("max_queue", "workload.max_queue"),
                      ("trace_speed", "workload.trace_speed"),
                      ("threads", "session.intra_op_num_threads"), ("inter_threads", "session.inter_op_num_threads")):
        value = getattr(args, flag, None)
        if value is not None:
            ch[key] = value
    threads = getattr(args, "threads", None)
    if (threads is not None and prof.session.intra_op_thread_affinities is not None
            and threads != prof.session.intra_op_num_threads):
        ch["session.intra_op_thread_affinities"] = None  # the profile's pinning was for another thread count
    if getattr(args, "no_spinning", False):
        ch["session.allow_spinning"] = False
    trace = getattr(args, "trace", None)
    if trace is not None:
        ch["workload.trace"] = os.path.abspath(trace)
        if getattr(args, "arrival", None) is None:
            ch["workload.arrival"] = "trace"
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
