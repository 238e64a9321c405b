"""Profiles: the one source of truth for every knob ortop can turn.

A profile is a frozen dataclass tree read from strict TOML and written back atomically. It knows how each knob
maps to ONNX Runtime (session options, session config entries, provider options, environment variables), so the
engine, the exporters and the UI all derive their ORT settings from here and can never disagree.

This module imports neither onnxruntime nor textual: profiles can be validated on any host.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import tomli_w

EXECUTION_MODES = ("sequential", "parallel")
OPT_LEVELS = ("disable", "basic", "extended", "layout", "all")
ARENA_STRATEGIES = ("kNextPowerOfTwo", "kSameAsRequested")
CONV_ALGO_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")

# Session config keys that have first-class fields: writing them under [session.config] would let two places
# disagree, so the raw spelling is refused with a pointer to the field.
CONFIG_KEYS = {
    "allow_spinning": "session.intra_op.allow_spinning",
    "inter_op_allow_spinning": "session.inter_op.allow_spinning",
    "spin_duration_us": "session.intra_op.spin_duration_us",
    "spin_backoff_max": "session.intra_op.spin_backoff_max",
    "dynamic_block_base": "session.dynamic_block_base",
    "intra_op_thread_affinities": "session.intra_op_thread_affinities",
    "disable_cpu_ep_fallback": "session.disable_cpu_ep_fallback",
}

# CUDA execution provider options ortop knows by name, with the type each takes. Anything else under
# [provider.options] for provider "cuda" is refused with a suggestion; other providers take options verbatim.
CUDA_OPTIONS: dict[str, type | tuple[str, ...]] = {
    "device_id": int,
    "gpu_mem_limit": int,
    "arena_extend_strategy": ARENA_STRATEGIES,
    "cudnn_conv_algo_search": CONV_ALGO_SEARCH,
    "cudnn_conv_use_max_workspace": bool,
    "cudnn_conv1d_pad_to_nc1d": bool,
    "enable_cuda_graph": bool,
    "do_copy_in_default_stream": bool,
    "use_tf32": bool,
    "prefer_nhwc": bool,
    "enable_skip_layer_norm_strict_mode": bool,
    "use_ep_level_unified_stream": bool,
    "tunable_op_enable": bool,
    "tunable_op_tuning_enable": bool,
    "tunable_op_max_tuning_duration_ms": int,
}

# Environment variables with a known meaning; others are allowed (any valid name) but flagged by `known_env`.
KNOWN_ENV = (
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "LD_PRELOAD",
    "CUDA_VISIBLE_DEVICES",
    "ORT_INTRA_OP_NUM_THREADS",
    "MIMALLOC_OPTIONS",
)

PROVIDER_ALIASES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "dnnl": "DnnlExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "dml": "DmlExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
}


class ProfileError(ValueError):
    """A profile that cannot be used. ``str()`` is one line naming the file, line and key where known."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, key: str | None = None):
        self.message = message
        self.path = path
        self.line = line
        self.key = key
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + message)


class ProfileErrors(ProfileError):
    """Several validation errors at once; ``errors`` holds each, ``str()`` joins them with '; '."""

    def __init__(self, errors: list[ProfileError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


@dataclass(frozen=True)
class SessionSettings:
    """ORT SessionOptions and session config entries. ``None`` means 'leave ORT's default'."""

    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0
    execution_mode: str = "sequential"
    graph_optimization_level: str = "all"
    enable_cpu_mem_arena: bool = True
    enable_mem_pattern: bool = True
    enable_mem_reuse: bool = True
    use_per_session_threads: bool = True
    global_intra_op_num_threads: int = 0
    global_inter_op_num_threads: int = 0
    allow_spinning: bool | None = None
    inter_op_allow_spinning: bool | None = None
    spin_duration_us: int | None = None
    spin_backoff_max: int | None = None
    dynamic_block_base: int | None = None
    intra_op_thread_affinities: tuple[tuple[int, ...], ...] | None = None
    disable_cpu_ep_fallback: bool | None = None
    log_severity_level: int = 2
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderSettings:
    """The execution provider, its options as given to ORT, and whether inputs/outputs go through IO binding."""

    name: str = "cpu"
    io_binding: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """How the model is driven: closed loop or paced, concurrent callers, warm-up, and the inputs fed."""

    rate_hz: float = 0.0
    concurrency: int = 1
    warmup_runs: int = 10
    seed: int = 0
    batch: int = 0
    dims: Mapping[str, int] = field(default_factory=dict)
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    values: Mapping[str, float] = field(default_factory=dict)
    inputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """Everything needed to reproduce one configuration. ``model`` may be empty: one profile, many models."""

    model: str = ""
    description: str = ""
    session: SessionSettings = field(default_factory=SessionSettings)
    provider: ProviderSettings = field(default_factory=ProviderSettings)
    env: Mapping[str, str] = field(default_factory=dict)
    workload: Workload = field(default_factory=Workload)

    # ---- derived ORT settings -------------------------------------------------------------------------------
    def provider_name(self) -> str:
        """The ORT provider name (``CUDAExecutionProvider``) for the profile's short or full name."""
        return PROVIDER_ALIASES.get(self.provider.name.lower(), self.provider.name)

    def providers(self) -> list[str]:
        """Providers in the order given to InferenceSession: the chosen one, with CPU as fallback."""
        name = self.provider_name()
        if name == "CPUExecutionProvider" or self.session.disable_cpu_ep_fallback:
            return [name]  # ORT refuses an explicit CPU entry when CPU fallback is disabled
        return [name, "CPUExecutionProvider"]

    def provider_options(self) -> dict[str, str]:
        """Provider options as the strings ORT's provider-option maps take (bools as "1"/"0")."""
        return {k: _ort_str(v) for k, v in self.provider.options.items()}

    def config_entries(self) -> dict[str, str]:
        """Every session config entry the profile sets, first-class fields and [session.config] alike."""
        s = self.session
        out: dict[str, str] = {}
        for attr, key in CONFIG_KEYS.items():
            value = getattr(s, attr)
            if value is None:
                continue
            if attr == "intra_op_thread_affinities":
                out[key] = affinity_string(value)
            else:
                out[key] = _ort_str(value)
        out.update({k: str(v) for k, v in s.config.items()})
        return out

    def cuda_graph(self) -> bool:
        return _truthy(self.provider.options.get("enable_cuda_graph", False))

    def restart_key(self) -> tuple:
        """What can only change with a fresh worker process: environment and the global thread pool."""
        s = self.session
        glob = (s.global_intra_op_num_threads, s.global_inter_op_num_threads) if not s.use_per_session_threads else ()
        return (tuple(sorted(self.env.items())), s.use_per_session_threads, glob)

    # ---- conversion -----------------------------------------------------------------------------------------
    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        """A TOML-ready dict. Without ``full``, values equal to the defaults are left out."""
        return _to_dict(self, Profile() if not full else None)

    def to_toml(self, header: str = "") -> str:
        body = tomli_w.dumps(self.to_dict())
        if header:
            lines = "".join(f"# {ln}".rstrip() + "\n" for ln in header.splitlines())
            return lines + "\n" + body
        return body

    def changes_from(self, other: Profile) -> list[str]:
        """Human one-liners (``session.intra_op_num_threads: 1 → 4``) for every knob that differs from ``other``."""
        a, b = flatten(other.to_dict(full=True)), flatten(self.to_dict(full=True))
        out = []
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{key}: {_fmt(a.get(key))} → {_fmt(b.get(key))}")
        return out


def _fmt(v: Any) -> str:
    if v is None:
        return "default"
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _ort_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def affinity_string(cores: tuple[tuple[int, ...], ...]) -> str:
    """ORT's ``session.intra_op_thread_affinities`` text for 0-based cores: 1-based ids, ',' within a thread, ';' between.

    ORT counts logical processors from 1 (it subtracts one), while htop and psutil count from 0.
    """
    return ";".join(",".join(str(c + 1) for c in thread) for thread in cores)


def parse_affinity_string(text: str) -> tuple[tuple[int, ...], ...]:
    """The inverse of :func:`affinity_string`; accepts ORT's ranges (``1-3``) too. Returns 0-based cores."""
    threads = []
    for part in text.split(";"):
        cores: list[int] = []
        for item in part.split(","):
            item = item.strip()
            if not item:
                continue
            if "-" in item:
                lo, hi = item.split("-", 1)
                cores.extend(range(int(lo) - 1, int(hi)))
            else:
                cores.append(int(item) - 1)
        threads.append(tuple(cores))
    return tuple(threads)


def parse_core_list(text: str) -> tuple[int, ...]:
    """``"0-3,6"`` → ``(0, 1, 2, 3, 6)``: 0-based cores as a user types them."""
    out: list[int] = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            if "-" in item:
                lo, hi = (int(x) for x in item.split("-", 1))
                if hi < lo:
                    raise ValueError
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(item))
        except ValueError:
            raise ProfileError(f"bad core list {text!r}: use 0-based numbers and ranges like 0-3,6") from None
    return tuple(out)


# ---- reading ------------------------------------------------------------------------------------------------

_SECTIONS: dict[str, type] = {"session": SessionSettings, "provider": ProviderSettings, "workload": Workload}
_MAP_FIELDS = {"session.config", "provider.options", "env", "workload.dims", "workload.shapes", "workload.values",
               "workload.inputs"}


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (valid: {', '.join(sorted(valid))})"


def _line_of(text: str | None, dotted: str) -> int | None:
    """Best-effort line number of a dotted key in TOML text: the key's line inside its table."""
    if not text:
        return None
    parts = dotted.split(".")
    table, key = parts[:-1], parts[-1]
    current: list[str] = []
    key_re = re.compile(r'^\s*(?:"([^"]+)"|\'([^\']+)\'|([A-Za-z0-9_\-]+))\s*=')
    table_re = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
    for no, line in enumerate(text.splitlines(), 1):
        m = table_re.match(line)
        if m:
            current = [p.strip().strip('"') for p in m.group(1).split(".")]
            if current == parts:
                return no
            continue
        m = key_re.match(line)
        if m:
            k = next(g for g in m.groups() if g is not None)
            if k == key and current == table:
                return no
    return None


def loads(text: str, path: str | None = None) -> Profile:
    """Parse and validate profile TOML text. Raises ProfileError (or ProfileErrors) with file and line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ProfileError(f"not valid TOML: {exc}", path=path, line=int(m.group(1)) if m else None) from None
    profile = from_dict(data, path=path, text=text)
    if path and profile.model and not os.path.isabs(profile.model):
        # A model path inside a profile is relative to the profile file, so profiles travel with their models.
        profile = replace(profile, model=os.path.normpath(os.path.join(os.path.dirname(path), profile.model)))
    return profile


def load(path: str | os.PathLike) -> Profile:
    p = Path(path)
    if not p.exists():
        raise ProfileError(f"profile not found: {p}")
    if p.is_dir():
        raise ProfileError(f"{p} is a directory, not a profile .toml file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read profile: {exc}", path=str(p)) from None
    return loads(text, path=str(p))


def from_dict(data: Mapping[str, Any], *, path: str | None = None, text: str | None = None) -> Profile:
    """Build and validate a Profile from plain data (parsed TOML or JSON)."""
    errors: list[ProfileError] = []

    def err(msg: str, key: str) -> None:
        errors.append(ProfileError(msg, path=path, line=_line_of(text, key), key=key))

    top_valid = ["model", "description", "session", "provider", "env", "workload"]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in top_valid:
            err(f"unknown key {key!r}{_suggest(key, top_valid)}", key)
        elif key in ("model", "description"):
            if not isinstance(value, str):
                err(f"{key} must be a string, got {type(value).__name__}", key)
            else:
                kwargs[key] = value
        elif key == "env":
            kwargs["env"] = _read_map(value, "env", str, err)
        else:
            kwargs[key] = _read_section(key, value, err)
    if errors:
        raise errors[0] if len(errors) == 1 else ProfileErrors(errors)
    profile = Profile(**kwargs)
    validate(profile, path=path, text=text)
    return profile


def _type_name(t: Any) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(t, str(t))


def _coerce(value: Any, t: Any, key: str, err) -> Any:
    """Check one scalar against its declared type; TOML ints are accepted where floats are expected."""
    if t is bool:
        if isinstance(value, bool):
            return value
    elif t is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif t is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif t is str:
        if isinstance(value, str):
            return value
    err(f"{key} must be {_type_name(t)}, got {value!r}", key)
    return None


def _read_map(value: Any, key: str, vtype: Any, err) -> dict:
    if not isinstance(value, dict):
        err(f"[{key}] must be a table", key)
        return {}
    out = {}
    for k, v in value.items():
        if vtype is str and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)  # env values and config entries are strings to ORT; numbers are a convenience
        if vtype is Any:
            if isinstance(v, (dict, list)):
                err(f"{key}.{k} must be a plain value", f"{key}.{k}")
                continue
            out[k] = v
            continue
        cv = _coerce(v, vtype, f"{key}.{k}", err)
        if cv is not None:
            out[k] = cv
    return out


def _field_type(cls: type, name: str) -> Any:
    hints = {
        "intra_op_thread_affinities": "affinity",
        "rate_hz": float,
    }
    if name in hints:
        return hints[name]
    default = next(f for f in fields(cls) if f.name == name)
    ann = str(default.type)
    if "bool" in ann:
        return bool
    if "int" in ann:
        return int
    if "float" in ann:
        return float
    return str


def _read_section(section: str, value: Any, err) -> Any:
    cls = _SECTIONS[section]
    if not isinstance(value, dict):
        err(f"[{section}] must be a table", section)
        return cls()
    valid = [f.name for f in fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, v in value.items():
        dotted = f"{section}.{key}"
        if key not in valid:
            hint = ""
            if section == "session" and key in CONFIG_KEYS.values():
                attr = next(a for a, k in CONFIG_KEYS.items() if k == key)
                hint = f" (use session.{attr})"
            err(f"unknown key {dotted!r}{hint or _suggest(key, valid)}", dotted)
            continue
        if dotted in _MAP_FIELDS:
            if dotted == "session.config":
                kwargs[key] = _read_map(v, dotted, str, err)
            elif dotted == "provider.options":
                kwargs[key] = _read_map(v, dotted, Any, err)
            elif dotted == "workload.dims":
                kwargs[key] = _read_map(v, dotted, int, err)
            elif dotted == "workload.values":
                kwargs[key] = _read_map(v, dotted, float, err)
            elif dotted == "workload.inputs":
                kwargs[key] = _read_map(v, dotted, str, err)
            elif dotted == "workload.shapes":
                shapes = {}
                if not isinstance(v, dict):
                    err(f"[{dotted}] must be a table", dotted)
                else:
                    for name, shape in v.items():
                        if not isinstance(shape, list) or not all(
                            isinstance(d, int) and not isinstance(d, bool) for d in shape
                        ):
                            err(f"{dotted}.{name} must be a list of integers, got {shape!r}", f"{dotted}.{name}")
                        else:
                            shapes[name] = tuple(shape)
                kwargs[key] = shapes
            continue
        t = _field_type(cls, key)
        if t == "affinity":
            if not isinstance(v, list) or not all(
                isinstance(t_, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in t_) for t_ in v
            ):
                err(f"{dotted} must be a list of lists of 0-based core numbers, e.g. [[1], [2, 3]]", dotted)
                continue
            kwargs[key] = tuple(tuple(t_) for t_ in v)
            continue
        cv = _coerce(v, t, dotted, err)
        if cv is not None:
            kwargs[key] = cv
    return cls(**kwargs)


# ---- validation ---------------------------------------------------------------------------------------------

def validate(profile: Profile, *, path: str | None = None, text: str | None = None, host_cpus: int | None = None) -> None:
    """Refuse settings ORT would reject or silently ignore, before any session is built.

    ``host_cpus`` adds the checks that depend on the machine (affinity cores that exist).
    """
    errors: list[ProfileError] = []

    def err(msg: str, key: str) -> None:
        errors.append(ProfileError(msg, path=path, line=_line_of(text, key), key=key))

    s, p, w = profile.session, profile.provider, profile.workload
    for name in ("intra_op_num_threads", "inter_op_num_threads", "global_intra_op_num_threads",
                 "global_inter_op_num_threads"):
        if getattr(s, name) < 0:
            err(f"{name} must be >= 0 (0 = ORT's default), got {getattr(s, name)}", f"session.{name}")
    if s.execution_mode not in EXECUTION_MODES:
        err(f"execution_mode must be one of {', '.join(EXECUTION_MODES)}, got {s.execution_mode!r}"
            f"{_suggest(s.execution_mode, list(EXECUTION_MODES))}", "session.execution_mode")
    if s.graph_optimization_level not in OPT_LEVELS:
        err(f"graph_optimization_level must be one of {', '.join(OPT_LEVELS)}, got {s.graph_optimization_level!r}",
            "session.graph_optimization_level")
    if s.spin_duration_us is not None and s.spin_duration_us < 0:
        err(f"spin_duration_us must be >= 0, got {s.spin_duration_us}", "session.spin_duration_us")
    if s.spin_backoff_max is not None and s.spin_backoff_max < 1:
        err(f"spin_backoff_max must be >= 1, got {s.spin_backoff_max}", "session.spin_backoff_max")
    if s.dynamic_block_base is not None and s.dynamic_block_base < 0:
        err(f"dynamic_block_base must be >= 0 (0 = off), got {s.dynamic_block_base}", "session.dynamic_block_base")
    if not 0 <= s.log_severity_level <= 4:
        err(f"log_severity_level must be 0..4, got {s.log_severity_level}", "session.log_severity_level")
    if s.intra_op_thread_affinities is not None:
        aff = s.intra_op_thread_affinities
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
    for k in s.config:
        attr = next((a for a, ck in CONFIG_KEYS.items() if ck == k), None)
        if attr:
            err(f"[session.config] {k!r} has a field of its own: set session.{attr} instead", f"session.config.{k}")
    if not p.name:
        err("provider.name must not be empty", "provider.name")
    if s.disable_cpu_ep_fallback and profile.provider_name() == "CPUExecutionProvider":
        err("disable_cpu_ep_fallback with provider cpu leaves no provider to run on: ORT refuses the session",
            "session.disable_cpu_ep_fallback")
    for where, mapping in (("session.config", s.config), ("provider.options", p.options), ("env", profile.env)):
        for k, v in mapping.items():
            if "\0" in str(k) or "\0" in str(v):
                err(f"{where}.{k} contains a NUL character, which ORT and the environment cannot carry",
                    f"{where}.{k}")
    if p.name.lower() == "cuda":
        for k, v in p.options.items():
            dotted = f"provider.options.{k}"
            if k not in CUDA_OPTIONS:
                err(f"unknown CUDA provider option {k!r}{_suggest(k, list(CUDA_OPTIONS))}", dotted)
                continue
            t = CUDA_OPTIONS[k]
            if isinstance(t, tuple):
                if str(v) not in t:
                    err(f"{k} must be one of {', '.join(t)}, got {v!r}", dotted)
            elif t is bool:
                if not isinstance(v, bool) and str(v) not in ("0", "1"):
                    err(f"{k} must be true or false, got {v!r}", dotted)
            elif t is int:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    err(f"{k} must be a non-negative integer, got {v!r}", dotted)
    if profile.cuda_graph():
        if not p.io_binding:
            err("enable_cuda_graph needs provider.io_binding = true (CUDA graphs replay fixed device addresses)",
                "provider.options.enable_cuda_graph")
        if s.execution_mode != "sequential":
            err("enable_cuda_graph needs execution_mode = \"sequential\" (ORT refuses graphs with the parallel "
                "executor)", "provider.options.enable_cuda_graph")
    for k, v in profile.env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            err(f"env key {k!r} is not a valid environment variable name", f"env.{k}")
    if not (w.rate_hz >= 0 and math.isfinite(w.rate_hz)):
        err(f"rate_hz must be >= 0 (0 = closed loop), got {w.rate_hz}", "workload.rate_hz")
    if w.concurrency < 1:
        err(f"concurrency must be >= 1, got {w.concurrency}", "workload.concurrency")
    if w.warmup_runs < 0:
        err(f"warmup_runs must be >= 0, got {w.warmup_runs}", "workload.warmup_runs")
    if w.batch < 0:
        err(f"batch must be >= 0 (0 = the model's own), got {w.batch}", "workload.batch")
    for k, v in w.dims.items():
        if v < 1:
            err(f"dims.{k} must be >= 1, got {v}", f"workload.dims.{k}")
    for k, shape in w.shapes.items():
        if any(d < 0 for d in shape):
            err(f"shapes.{k} has a negative dimension: {list(shape)}", f"workload.shapes.{k}")
    if errors:
        raise errors[0] if len(errors) == 1 else ProfileErrors(errors)


# ---- writing ------------------------------------------------------------------------------------------------

def _to_plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_to_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _to_plain(x) for k, x in v.items()}
    return v


def _to_dict(obj: Any, default: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        dval = getattr(default, f.name) if default is not None else dataclasses.MISSING
        if dataclasses.is_dataclass(value):
            sub = _to_dict(value, dval if default is not None else None)
            if sub or default is None:
                out[f.name] = sub
            continue
        if value is None:
            continue  # TOML has no null: an absent key means ORT's default
        if default is not None and value == dval:
            continue
        out[f.name] = _to_plain(value)
    return out


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"session": {"x": 1}}`` → ``{"session.x": 1}``; maps like [session.config] flatten too."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def save(profile: Profile, path: str | os.PathLike, header: str = "") -> Path:
    """Write the profile atomically, so a crash mid-write never leaves a half-written profile where a good one was."""
    from ortop.fsutil import atomic_write_text

    return atomic_write_text(path, profile.to_toml(header))


def merge(profile: Profile, **changes: Any) -> Profile:
    """Return a copy with dotted-key changes applied, e.g. ``merge(p, **{"session.intra_op_num_threads": 4})``.

    Validated like a loaded profile, so the UI and CLI flags go through the same checks as a file.
    """
    data = profile.to_dict(full=True)
    for dotted, value in changes.items():
        node = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = _to_plain(value)
    return from_dict(data)
