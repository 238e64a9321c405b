"""Refuse settings ORT would reject or silently ignore, before any session is built.

Two kinds of checks: each knob's own domain (ranges, choices, map values), generated from its declaration in
:mod:`ortop.config.knobs` so a new knob is checked with no edit here; and the rules between knobs (affinity count
against threads, CUDA graphs against IO binding and the executor, ...) written out in :data:`RULES`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Any

from ortop.config import knobs
from ortop.config.errors import ProfileError, raise_if_any
from ortop.config.keys import Report, line_of, suggest
from ortop.config.providers import CPU, name_error, short_name
from ortop.config.tree import Profile
from ortop.config.values import ort_str

Rule = Callable[[Profile, Report, "int | None"], None]


def validate(profile: Profile, *, path: str | None = None, text: str | None = None,
             host_cpus: int | None = None) -> None:
    """Raise ProfileError (one) or ProfileErrors (several) for everything wrong with ``profile``.

    ``host_cpus`` adds the checks that depend on the machine (affinity cores that exist).
    """
    errors: list[ProfileError] = []

    def err(msg: str, key: str) -> None:
        errors.append(ProfileError(msg, path=path, line=line_of(text, key), key=key))

    for knob in knobs.registry():
        if not knobs.is_entry(knob):
            check_value(knob, knob.read(profile), err)
    for rule in RULES:
        rule(profile, err, host_cpus)
    raise_if_any(errors)


# ---- per knob, from the declarations ----------------------------------------------------------------------------

def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _bounds(knob: knobs.Knob, value: float | None = None) -> str:
    """The allowed range as an error states it: ``0..4``, ``>= 0 (0 = ORT's default)``, or for a value past one
    side of a wide range, that side (``<= 4096``)."""
    lo, hi = knob.minimum, knob.maximum
    low = f">= {_n(lo)}" + (f" ({knob.note})" if knob.note else "") if lo is not None else ""
    if lo is not None and hi is not None and value is not None and math.isfinite(value) and hi - lo > 100:
        return low if value < lo else f"<= {_n(hi)}"
    if lo is not None and hi is not None:
        return f"{_n(lo)}..{_n(hi)}"
    if lo is not None:
        return low
    return f"<= {_n(hi)}" if hi is not None else "valid"


def _out_of_range(knob: knobs.Knob, value: float) -> bool:
    """Outside the declared bounds; infinities and NaN never pass (a paced rate of inf is no rate)."""
    if isinstance(value, float) and not math.isfinite(value):
        return True
    return (knob.minimum is not None and value < knob.minimum) or (knob.maximum is not None and value > knob.maximum)


def check_value(knob: knobs.Knob, value: Any, err: Report) -> None:
    """The knob's own domain: choices, numeric bounds, and for maps each value's bounds and carriability."""
    if knob.is_map:
        _check_map(knob, value, err)
        return
    if value is None:
        return
    if knob.choices and value not in knob.choices:
        close = difflib.get_close_matches(str(value), knob.choices, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        err(f"{knob.name} must be one of {', '.join(knob.choices)}, got {value!r}{hint}", knob.key)
    elif knob.type in (int, float) and (knob.minimum is not None or knob.maximum is not None):
        if _out_of_range(knob, value):
            err(f"{knob.name} must be {_bounds(knob, value)}, got {value}", knob.key)


def _check_map(knob: knobs.Knob, mapping: Any, err: Report) -> None:
    """Each value of a map knob: its bounds, shapes without negative dimensions, no NUL where ORT or the
    environment would cut the string short."""
    for k, v in mapping.items():
        dotted = f"{knob.key}.{k}"
        if knob.values is knobs.SHAPE:
            if any(d < 0 for d in v):
                err(f"{knob.name}.{k} has a negative dimension: {list(v)}", dotted)
        elif knob.values in (int, float) and knob.minimum is not None and _out_of_range(knob, v):
            err(f"{knob.name}.{k} must be {_bounds(knob, v)}, got {v}", dotted)
        if knob.target in (knobs.CONFIG_ENTRY, knobs.PROVIDER_OPTION, knobs.ENV) and (
                "\0" in str(k) or "\0" in str(v)):
            err(f"{dotted} contains a NUL character, which ORT and the environment cannot carry", dotted)


# ONNX Runtime's provider-option parsers (core/common/parse_string.h, TryParseStringWithClassicLocale): a bool is
# exactly one of these six strings; an integer is std::from_chars over the whole string (no blanks, no '+', a '-'
# only for signed types, "0x…" hex only for unsigned ones such as size_t); an enum is its name, case and all
# (EnumNameMapping). The CUDA provider parses its options with them (cuda_execution_provider_info.cc,
# CUDAExecutionProviderInfo::FromProviderOptions, through ProviderOptionsParser, which refuses unknown names).
ORT_BOOLS = ("0", "1", "true", "false", "True", "False")
_SIGNED = re.compile(r"-?[0-9]+")
_UNSIGNED = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]+")

# Options the CUDA provider parses that hold a pointer into a running process (a CUDA stream, an allocator's
# functions): a profile written down cannot carry one.
CUDA_PROCESS_POINTERS = ("user_compute_stream", "has_user_compute_stream", "gpu_external_alloc", "gpu_external_free",
                         "gpu_external_empty_cache")


def _unsigned(knob: knobs.Knob) -> bool:
    """A size_t option (``gpu_mem_limit``): declared with a bound past what a C int holds."""
    return knob.maximum is not None and knob.maximum > knobs.INT32_MAX


def option_int(value: Any) -> int:
    """An integer provider option as ORT reads it: a number, or its string (decimal, or ``0x…`` hex as ORT takes for
    size_t options). Raises ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    text = ort_str(value)
    if _SIGNED.fullmatch(text):
        return int(text)
    if _UNSIGNED.fullmatch(text):
        return int(text, 16)
    raise ValueError(f"{value!r} is not an integer")


def entry_error(knob: knobs.Knob, value: Any) -> str | None:
    """Why ``value`` cannot be this provider option, or None: the string ortop hands ORT (``values.ort_str``: bools
    as "1"/"0") must pass the parser ORT reads the option with, whichever way the profile typed it."""
    if isinstance(value, (list, tuple, dict)):
        return f"{knob.name} must be a single value, got {value!r}"
    text = ort_str(value)
    if knob.choices:
        if text not in knob.choices:
            close = difflib.get_close_matches(text, knob.choices, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"{knob.name} must be one of {', '.join(knob.choices)}, got {value!r}{hint}"
    elif knob.type is bool:
        if text not in ORT_BOOLS:
            return (f"{knob.name} must be true or false, got {value!r} (ORT's CUDA provider takes only "
                    f"{', '.join(ORT_BOOLS)})")
    elif knob.type is int:
        pattern = _UNSIGNED if _unsigned(knob) else _SIGNED
        what = "a non-negative integer" if knob.minimum == 0 else "an integer"
        if isinstance(value, bool) or not pattern.fullmatch(text):
            return f"{knob.name} must be {what}, got {value!r}"
        number = option_int(text)
        if _out_of_range(knob, number):
            return f"{knob.name} must be {_bounds(knob, number)}, got {value!r}"
    return None


# ---- between knobs ----------------------------------------------------------------------------------------------

def _affinity(profile: Profile, err: Report, host_cpus: int | None) -> None:
    """ORT pins only the pool's extra threads: one core list per intra-op thread beyond the caller's."""
    s = profile.session
    aff = s.intra_op_thread_affinities
    if aff is None:
        return
    key = "session.intra_op_thread_affinities"
    if s.intra_op_num_threads < 2:
        err("intra_op_thread_affinities needs intra_op_num_threads >= 2 (ORT pins the pool's extra threads: "
            "one list per thread beyond the caller's)", key)
    elif len(aff) != s.intra_op_num_threads - 1:
        err(f"intra_op_thread_affinities has {len(aff)} entries but intra_op_num_threads = "
            f"{s.intra_op_num_threads} needs {s.intra_op_num_threads - 1} (one per pool thread; the calling "
            "thread is not pinned)", key)
    for thread in aff:
        if not thread:
            err("intra_op_thread_affinities has an empty core list", key)
        for core in thread:
            if core < 0:
                err(f"core {core} in intra_op_thread_affinities is negative: cores count from 0", key)
            elif host_cpus is not None and core >= host_cpus:
                err(f"core {core} in intra_op_thread_affinities does not exist on this host "
                    f"(cores 0-{host_cpus - 1})", key)


def _config_shadowing(profile: Profile, err: Report, host_cpus: int | None) -> None:
    """A raw [session.config] key that a knob owns would let two places disagree: point at the knob."""
    owners = {k.ort_name: k for k in knobs.settings(knobs.CONFIG_ENTRY)}
    for k in profile.session.config:
        if k in owners:
            err(f"[session.config] {k!r} has a field of its own: set {owners[k].key} instead", f"session.config.{k}")


def _provider(profile: Profile, err: Report, host_cpus: int | None) -> None:
    """A provider to run on must remain: a name ortop can hand ORT, and CPU fallback not disabled when CPU is the
    provider."""
    message = name_error(profile.provider.name)
    if message:
        err(message, "provider.name")
    if profile.session.disable_cpu_ep_fallback and profile.provider_name() == CPU:
        err("disable_cpu_ep_fallback with provider cpu leaves no provider to run on: ORT refuses the session",
            "session.disable_cpu_ep_fallback")


def _provider_options(profile: Profile, err: Report, host_cpus: int | None) -> None:
    """Providers with declared options (CUDA) take only those, whichever way the provider is named; others take their
    options verbatim."""
    provider = short_name(profile.provider.name)
    declared = {k.name: k for k in knobs.entries("provider.options", provider)}
    if not declared:
        return
    for k, v in profile.provider.options.items():
        dotted = f"provider.options.{k}"
        if provider == "cuda" and k in CUDA_PROCESS_POINTERS:
            err(f"{k} holds a pointer into a running process (a CUDA stream or allocator), which a profile cannot "
                "carry", dotted)
            continue
        if k not in declared:
            err(f"unknown {provider.upper()} provider option {k!r}{suggest(k, list(declared))}", dotted)
            continue
        message = entry_error(declared[k], v)
        if message:
            err(message, dotted)


def _cuda_graph(profile: Profile, err: Report, host_cpus: int | None) -> None:
    """CUDA graphs replay fixed device addresses with one executor, from one caller: refused by ORT otherwise, so
    refused here.

    ORT keeps a session's captured graph for the thread that runs it and captures in the CUDA global capture mode,
    and its CUDA provider documentation says ``Run()`` may not be called on one graph-enabled session from several
    threads: ``workload.concurrency`` above 1 is refused. Replicas are separate sessions, each with its own graph
    and one caller, and stay allowed.
    """
    if not profile.cuda_graph():
        return
    callers = profile.workload.concurrency
    if callers > 1:
        err(f"enable_cuda_graph takes one caller per session, but workload.concurrency = {callers}: ORT does not "
            "support Run() on one graph-enabled session from several threads (serve more with workload.replicas, "
            "one session and graph each)", "workload.concurrency")
    if not profile.provider.io_binding:
        err("enable_cuda_graph needs provider.io_binding = true (CUDA graphs replay fixed device addresses)",
            "provider.options.enable_cuda_graph")
    if profile.session.execution_mode != "sequential":
        err("enable_cuda_graph needs execution_mode = \"sequential\" (ORT refuses graphs with the parallel "
            "executor)", "provider.options.enable_cuda_graph")


def _env_names(profile: Profile, err: Report, host_cpus: int | None) -> None:
    """Names a shell and the worker's environment can hold."""
    for k in profile.env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            err(f"env key {k!r} is not a valid environment variable name", f"env.{k}")


def host_thread_limit(host_cpus: int) -> int:
    """The most threads per pool (or callers) accepted on a host: 8× its logical CPUs, at least 64. Above the CPUs
    is allowed (an experiment may want it; the doctor warns), far above only hangs ORT's pool set-up or the host."""
    return max(64, 8 * host_cpus)


def _host_threads(profile: Profile, err: Report, host_cpus: int | None) -> None:
    if host_cpus is None:
        return
    limit = host_thread_limit(host_cpus)
    s, w = profile.session, profile.workload
    for key, value in (("session.intra_op_num_threads", s.intra_op_num_threads),
                       ("session.inter_op_num_threads", s.inter_op_num_threads),
                       ("session.global_intra_op_num_threads", s.global_intra_op_num_threads),
                       ("session.global_inter_op_num_threads", s.global_inter_op_num_threads),
                       ("workload.concurrency", w.concurrency)):
        if value > limit:
            err(f"{key.split('.')[-1]} = {value} is far above this host's {host_cpus} logical CPUs (at most "
                f"{limit} here)", key)


RULES: tuple[Rule, ...] = (_affinity, _config_shadowing, _provider, _provider_options, _cuda_graph, _env_names,
                           _host_threads)
