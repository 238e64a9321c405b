"""The settings form as data: which knobs it edits, how a profile fills it, and how typed text becomes changes.

Kept apart from the screen so the conversions (tri-states, optional numbers, the 0-based affinity syntax, the
``cores: 0-3`` helper) are tested as plain functions, and the screen stays a thin layout over :data:`FIELDS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile, ProfileError

TRI = (("default", "default"), ("on", "on"), ("off", "off"))
BOOL = (("on", "on"), ("off", "off"))


@dataclass(frozen=True)
class Field:
    """One knob in the form. ``key`` is the profile's dotted key (what ``profile.merge`` and ``err.key`` use)."""

    key: str
    label: str
    kind: str                  # int | opt_int | float | choice | tri | bool | text | affinity | env
    choices: tuple[tuple[str, str], ...] = ()
    hint: str = ""
    section: str = ""


def _choices(values: tuple[str, ...], default: bool = False) -> tuple[tuple[str, str], ...]:
    out = tuple((v, v) for v in values)
    return ((("default", "default"),) + out) if default else out


FIELDS: tuple[Field, ...] = (
    Field("session.intra_op_num_threads", "intra-op threads", "int", hint="0 = ORT's default (physical cores)",
          section="Threads"),
    Field("session.inter_op_num_threads", "inter-op threads", "int", hint="0 = default; used in parallel mode",
          section="Threads"),
    Field("session.execution_mode", "execution mode", "choice", _choices(profile_mod.EXECUTION_MODES),
          section="Threads"),
    Field("session.intra_op_thread_affinities", "thread affinity", "affinity",
          hint="0-based cores per pool thread: 1;2,3 — or cores: 0-3 to spread one per thread", section="Threads"),
    Field("session.allow_spinning", "allow spinning", "tri", TRI, hint="intra-op pool spin-waits between work",
          section="Spinning"),
    Field("session.inter_op_allow_spinning", "inter-op spinning", "tri", TRI, section="Spinning"),
    Field("session.spin_duration_us", "spin duration µs", "opt_int", hint="blank = ORT's default",
          section="Spinning"),
    Field("session.spin_backoff_max", "spin backoff max", "opt_int", hint="blank = ORT's default",
          section="Spinning"),
    Field("session.dynamic_block_base", "dynamic_block_base", "opt_int", hint="blank = off; 4 often tightens p99",
          section="Spinning"),
    Field("session.graph_optimization_level", "optimization", "choice", _choices(profile_mod.OPT_LEVELS),
          section="Graph and memory"),
    Field("session.enable_cpu_mem_arena", "CPU memory arena", "bool", BOOL, section="Graph and memory"),
    Field("session.enable_mem_pattern", "memory pattern", "bool", BOOL, section="Graph and memory"),
    Field("provider.name", "provider", "text", hint="cpu, cuda, tensorrt, openvino… (any name ORT knows)",
          section="Provider"),
    Field("provider.io_binding", "IO binding", "bool", BOOL, hint="inputs and outputs bound on the device",
          section="Provider"),
    Field("provider.options.device_id", "device_id", "opt_int", section="CUDA (provider cuda)"),
    Field("provider.options.gpu_mem_limit", "gpu_mem_limit", "opt_int", hint="bytes; blank = no limit",
          section="CUDA (provider cuda)"),
    Field("provider.options.arena_extend_strategy", "arena_extend_strategy", "choice",
          _choices(profile_mod.ARENA_STRATEGIES, default=True), section="CUDA (provider cuda)"),
    Field("provider.options.cudnn_conv_algo_search", "cudnn_conv_algo_search", "choice",
          _choices(profile_mod.CONV_ALGO_SEARCH, default=True), section="CUDA (provider cuda)"),
    Field("provider.options.cudnn_conv_use_max_workspace", "cudnn_conv_use_max_workspace", "tri", TRI,
          section="CUDA (provider cuda)"),
    Field("provider.options.cudnn_conv1d_pad_to_nc1d", "cudnn_conv1d_pad_to_nc1d", "tri", TRI,
          section="CUDA (provider cuda)"),
    Field("provider.options.enable_cuda_graph", "enable_cuda_graph", "tri", TRI,
          hint="needs IO binding and sequential mode", section="CUDA (provider cuda)"),
    Field("env.OMP_NUM_THREADS", "OMP_NUM_THREADS", "env", hint="blank = unset", section="Environment"),
    Field("env.OMP_WAIT_POLICY", "OMP_WAIT_POLICY", "env", hint="PASSIVE or ACTIVE", section="Environment"),
    Field("env.LD_PRELOAD", "LD_PRELOAD", "env", hint="e.g. a mimalloc .so", section="Environment"),
    Field("env.CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "env", section="Environment"),
    Field("workload.rate_hz", "rate Hz", "float", hint="0 = closed loop; 100 shows the cost of spinning",
          section="Workload"),
    Field("workload.concurrency", "concurrency", "int", hint="concurrent callers", section="Workload"),
    Field("workload.warmup_runs", "warm-up runs", "int", section="Workload"),
    Field("workload.batch", "batch", "int", hint="0 = the model's own", section="Workload"),
)
FIELD_BY_KEY = {f.key: f for f in FIELDS}
PLACEHOLDER = {"opt_int": "default", "env": "unset", "affinity": "e.g. cores: 0-3"}
ENV_NOTE = "changing the environment restarts the worker process (ORT reads it at load time)"


class FieldError(ProfileError):
    """Text that cannot become a value for one field (a word where a number goes)."""


def _get(profile: Profile, key: str) -> Any:
    """The profile's value at a dotted key; maps (env, provider.options) read their entry or None."""
    parts = key.split(".")
    if parts[0] == "env":
        return profile.env.get(parts[1])
    if parts[:2] == ["provider", "options"]:
        return profile.provider.options.get(parts[2])
    node: Any = profile
    for p in parts:
        node = getattr(node, p)
    return node


def _tri_text(v: Any) -> str:
    if v is None:
        return "default"
    if isinstance(v, str):
        return "on" if v.strip().lower() in ("1", "true", "on", "yes") else "off"
    return "on" if v else "off"


def cores_text(aff: tuple[tuple[int, ...], ...] | None) -> str:
    """0-based affinity as the form shows it: ``1;2,3`` (one group per pool thread)."""
    if not aff:
        return ""
    return ";".join(",".join(str(c) for c in t) for t in aff)


def form_values(profile: Profile) -> dict[str, str]:
    """The text each field shows for ``profile``."""
    out = {}
    for f in FIELDS:
        v = _get(profile, f.key)
        if f.kind in ("tri",):
            out[f.key] = _tri_text(v)
        elif f.kind == "bool":
            out[f.key] = "on" if v else "off"
        elif f.kind == "choice":
            out[f.key] = "default" if v is None else str(v)
        elif f.kind == "affinity":
            out[f.key] = cores_text(v)
        elif f.kind == "float":
            out[f.key] = f"{v:g}"
        else:
            out[f.key] = "" if v is None else str(v)
    return out


def spread(cores: tuple[int, ...], pool_threads: int) -> tuple[tuple[int, ...], ...]:
    """One core per pool thread. With one core more than threads, the first is left to the calling thread.

    ORT pins only the pool's ``intra_op_num_threads - 1`` threads; the thread calling Run() stays unpinned, so
    ``cores: 0-3`` with 4 threads puts the pool on 1, 2, 3 and leaves 0 for the caller. Fewer cores than threads
    wrap around (threads share cores).
    """
    if pool_threads <= 0 or not cores:
        return ()
    if len(cores) == pool_threads + 1:
        cores = cores[1:]
    return tuple((cores[i % len(cores)],) for i in range(pool_threads))


def parse_affinity(text: str, intra_threads: int) -> tuple[tuple[int, ...], ...] | None:
    """Form text → 0-based affinity: blank = none, ``cores: 0-3`` spreads, else ``;``-separated core lists."""
    key = "session.intra_op_thread_affinities"
    text = text.strip()
    if not text:
        return None
    if text.lower().startswith("cores"):
        spec = text.split(":", 1)[1] if ":" in text else text[5:]
        try:
            cores = profile_mod.parse_core_list(spec)
        except ProfileError as exc:
            raise FieldError(exc.message, key=key) from None
        if intra_threads < 2:
            raise FieldError("set intra-op threads to 2 or more first: the helper pins one core per pool thread "
                             "(threads − 1)", key=key)
        if not cores:
            raise FieldError("cores: needs at least one core, e.g. cores: 0-3", key=key)
        return spread(cores, intra_threads - 1)
    groups = []
    for part in text.split(";"):
        try:
            groups.append(profile_mod.parse_core_list(part))
        except ProfileError as exc:
            raise FieldError(exc.message, key=key) from None
    return tuple(groups)


def affinity_preview(text: str, intra_threads: int) -> str:
    """What ORT will be given, shown beside the field: its 1-based string, or why it cannot be built."""
    try:
        aff = parse_affinity(text, intra_threads)
    except ProfileError as exc:
        return f"✗ {exc.message}"
    if aff is None:
        return "not pinned"
    return f"ORT: \"{profile_mod.affinity_string(aff)}\" (1-based)"


def _parse_int(text: str, key: str, optional: bool) -> int | None:
    t = text.strip()
    if not t and optional:
        return None
    try:
        return int(t)
    except ValueError:
        raise FieldError(f"{t!r} is not a whole number", key=key) from None


def _parse_float(text: str, key: str) -> float:
    try:
        v = float(text.strip())
    except ValueError:
        raise FieldError(f"{text.strip()!r} is not a number", key=key) from None
    if not math.isfinite(v):
        raise FieldError(f"{text.strip()!r} is not a finite number", key=key)
    return v


def _value(f: Field, text: str, intra: int) -> Any:
    if f.kind == "int":
        return _parse_int(text, f.key, optional=False)
    if f.kind == "opt_int":
        return _parse_int(text, f.key, optional=True)
    if f.kind == "float":
        return _parse_float(text, f.key)
    if f.kind == "tri":
        return None if text == "default" else text == "on"
    if f.kind == "bool":
        return text == "on"
    if f.kind == "choice":
        return None if text == "default" else text
    if f.kind == "affinity":
        return parse_affinity(text, intra)
    if f.kind == "env":
        return text.strip() or None
    t = text.strip()
    if not t:
        raise FieldError(f"{f.label} must not be empty", key=f.key)
    return t


def changes(profile: Profile, values: dict[str, str]) -> dict[str, Any]:
    """The dotted-key changes the form asks for against ``profile`` (only knobs whose value differs).

    Raises FieldError for text that is not a value, or ProfileErrors with one entry per bad field, each carrying
    its ``key`` so the screen can put the message beside it.
    """
    errors: list[ProfileError] = []
    out: dict[str, Any] = {}
    intra_text = values.get("session.intra_op_num_threads", str(profile.session.intra_op_num_threads))
    try:
        intra = int(intra_text.strip())
    except ValueError:
        intra = profile.session.intra_op_num_threads
    for f in FIELDS:
        if f.key not in values:
            continue
        try:
            v = _value(f, values[f.key], intra)
        except ProfileError as exc:
            errors.append(exc)
            continue
        cur = _get(profile, f.key)
        if f.kind == "tri" and isinstance(cur, str):
            cur = _tri_text(cur) == "on"
        if v != cur:
            out[f.key] = v
    provider = out.get("provider.name", profile.provider.name)
    if str(provider).lower() != "cuda":
        for k, v in list(out.items()):
            if k.startswith("provider.options.") and v is not None:
                errors.append(FieldError(f"{FIELD_BY_KEY[k].label} is a CUDA option: set provider to cuda first",
                                         key=k))
    if errors:
        raise errors[0] if len(errors) == 1 else profile_mod.ProfileErrors(errors)
    return out


def build(profile: Profile, values: dict[str, str]) -> Profile:
    """The profile the form describes: ``profile.merge(current, **changes)`` (validated like a file)."""
    ch = changes(profile, values)
    return profile_mod.merge(profile, **ch) if ch else profile


def error_keys(err: BaseException) -> list[tuple[str | None, str]]:
    """(dotted key or None, message) for each error inside ``err`` (ProfileErrors holds several)."""
    errs = getattr(err, "errors", None)
    if errs:
        return [(getattr(e, "key", None), getattr(e, "message", str(e))) for e in errs]
    return [(getattr(err, "key", None), getattr(err, "message", None) or str(err))]


def field_for(key: str | None) -> str | None:
    """The form field an error key belongs to: ``provider.options.x`` and ``env.X`` map to their own row."""
    if key is None:
        return None
    if key in FIELD_BY_KEY:
        return key
    for f in FIELDS:
        if key.startswith(f.key + "."):
            return f.key
    return None
