"""The profile tree: the frozen dataclasses holding every knob ortop can turn, and the ORT settings derived from
them.

What each knob is, and where it goes in ONNX Runtime, is declared once in :mod:`ortop.config.knobs`. This module
holds the values: typed dataclass fields for the knobs code reads by name, plus each section's ``extra`` map for
knobs declared only in the registry (they read as attributes all the same). It is the bottom of the profile
modules: reading (:mod:`ortop.config.io`) and checking (:mod:`ortop.config.validate`) import it, never the other
way; :mod:`ortop.config.profile` is the face the other rooms import.

This module imports neither onnxruntime nor textual: profiles can be validated on any host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import tomli_w

from ortop.config import knobs
from ortop.config.diff import diff
from ortop.config.providers import CPU, ort_name
from ortop.config.values import ort_str, truthy


class _Section:
    """What a profile section adds to its dataclass: the knobs declared only in the registry.

    They are stored in ``extra`` (only values that differ from the default, so equal profiles compare equal) and
    read as attributes like the typed fields, so a knob needs no field here to work everywhere.
    """

    TABLE: ClassVar[str] = ""
    extra: Mapping[str, Any]

    def __post_init__(self) -> None:
        typed = {f.name for f in fields(self)}  # type: ignore[arg-type]  # always a dataclass
        kept: dict[str, Any] = {}
        for name, value in self.extra.items():
            knob = knobs.find(f"{self.TABLE}.{name}")
            if knob is None or name in typed:
                raise TypeError(f"{type(self).__name__}: {name!r} is not a knob kept in extra")
            if value != knob.default:
                kept[name] = value
        object.__setattr__(self, "extra", kept)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "extra":
            raise AttributeError(name)
        knob = knobs.find(f"{self.TABLE}.{name}")
        if knob is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.extra.get(name, knob.default)


@dataclass(frozen=True)
class SessionSettings(_Section):
    """ORT SessionOptions and session config entries. ``None`` means 'leave ORT's default'."""

    TABLE: ClassVar[str] = "session"
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
    use_env_allocators: bool | None = None
    log_severity_level: int = 2
    config: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderSettings(_Section):
    """The execution provider, its options as given to ORT, and whether inputs/outputs go through IO binding."""

    TABLE: ClassVar[str] = "provider"
    name: str = "cpu"
    io_binding: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload(_Section):
    """How the model is driven: closed loop or paced, concurrent callers, warm-up, and the inputs fed."""

    TABLE: ClassVar[str] = "workload"
    rate_hz: float = 0.0
    concurrency: int = 1
    replicas: int = 1
    pin_replicas: bool = False
    warmup_runs: int = 10
    seed: int = 0
    batch: int = 0
    dims: Mapping[str, int] = field(default_factory=dict)
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    values: Mapping[str, float] = field(default_factory=dict)
    inputs: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


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
        """The ORT provider name (``CUDAExecutionProvider``) for the profile's short or full name, in any case
        (:func:`ortop.config.providers.resolve`)."""
        return ort_name(self.provider.name)

    def providers(self) -> list[str]:
        """Providers in the order given to InferenceSession: the chosen one, with CPU as fallback."""
        name = self.provider_name()
        if name == CPU or self.session.disable_cpu_ep_fallback:
            return [name]  # ORT refuses an explicit CPU entry when CPU fallback is disabled
        return [name, CPU]

    def provider_options(self) -> dict[str, str]:
        """Provider options as the strings ORT's provider-option maps take (bools as "1"/"0")."""
        return {k: ort_str(v) for k, v in self.provider.options.items()}

    def config_entries(self) -> dict[str, str]:
        """Every session config entry the profile sets: config-entry knobs in declaration order, then
        [session.config] verbatim."""
        out: dict[str, str] = {}
        for knob in knobs.settings(knobs.CONFIG_ENTRY):
            value = knob.read(self)
            if value is not None:
                out[knob.ort_name] = knob.ort_value(value)
        out.update({k: str(v) for k, v in self.session.config.items()})
        return out

    def cuda_graph(self) -> bool:
        """Whether the CUDA provider is asked to capture a graph: it changes how runs must be bound."""
        return truthy(self.provider.options.get("enable_cuda_graph", False))

    def restart_key(self) -> tuple[tuple[str, Any], ...]:
        """What can only change with a fresh worker process: every knob declared ``restarts`` (environment,
        per-session threads), the global pool sizes only while the global pools are in use."""
        out = []
        for knob in knobs.registry():
            if not knob.restarts or knobs.is_entry(knob):
                continue
            if knob.target == knobs.GLOBAL_POOL and self.session.use_per_session_threads:
                continue
            value = knob.read(self)
            out.append((knob.key, tuple(sorted(value.items())) if isinstance(value, Mapping) else value))
        return tuple(out)

    # ---- conversion -----------------------------------------------------------------------------------------
    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        """A TOML-ready dict. Without ``full``, values equal to the defaults are left out."""
        return to_dict(self, full=full)

    def to_toml(self, header: str = "") -> str:
        """The profile as TOML; ``header`` lines become leading ``#`` comments (what the profile is for)."""
        body = tomli_w.dumps(self.to_dict())
        if header:
            lines = "".join(f"# {ln}".rstrip() + "\n" for ln in header.splitlines())
            return lines + "\n" + body
        return body

    def changes_from(self, other: Profile) -> list[str]:
        """Human one-liners (``session.intra_op_num_threads: 1 → 4``) for every knob that differs from ``other``
        (:func:`ortop.config.diff.diff`)."""
        return [c.text for c in diff(other, self)]


# The profile's sections by TOML table name, for the reader.
SECTIONS: dict[str, type[_Section]] = {f.name: f.default_factory for f in fields(Profile)  # type: ignore[misc]
                                       if isinstance(f.default_factory, type) and issubclass(f.default_factory,
                                                                                              _Section)}


# ---- writing ------------------------------------------------------------------------------------------------

def to_plain(v: Any) -> Any:
    """Tuples and mappings as the lists and dicts TOML and JSON writers take."""
    if isinstance(v, tuple):
        return [to_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: to_plain(x) for k, x in v.items()}
    return v


def to_dict(profile: Profile, *, full: bool = False) -> dict[str, Any]:
    """A TOML-ready dict in declaration order. Without ``full``, values equal to the defaults are left out."""
    out: dict[str, Any] = {}
    for knob in knobs.registry():
        if knobs.is_entry(knob):
            continue
        node = out.setdefault(knob.table, {}) if knob.table else out
        value = knob.read(profile)
        if value is None:
            continue  # TOML has no null: an absent key means ORT's default
        if not full and value == knob.default:
            continue
        node[knob.name] = to_plain(value)
    if not full:
        out = {k: v for k, v in out.items() if not (k in knobs.sections() and not v)}
    return out
