"""The settings form as data: which knobs it edits, how a profile fills it, and how typed text becomes changes.

The fields come from the knob registry (:mod:`ortop.config.knobs`): every knob with a form section is a field, its
kind follows from its declaration, so a newly declared knob shows up in the form with no edit here. Kept apart
from the screen so the conversions (tri-states, optional numbers, the 0-based affinity syntax, the ``cores: 0-3``
helper) are tested as plain functions, and the screen stays a thin layout over :data:`FIELDS`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ortop.config import knobs
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile, ProfileError
from ortop.config.providers import short_name

TRI = (("default", "default"), ("on", "on"), ("off", "off"))
BOOL = (("on", "on"), ("off", "off"))

# Form sections in the order the form shows them; a section a knob names that is not here comes after these.
SECTION_ORDER = ("Threads", "Spinning", "Graph and memory", "Global thread pools", "Logging", "Provider",
                 "CUDA (provider cuda)", "Environment", "Workload")


@dataclass(frozen=True)
class Field:
    """One knob in the form. ``key`` is the profile's dotted key (what ``profile.merge`` and ``err.key`` use)."""

    key: str
    label: str
    kind: str  # int | opt_int | float | opt_float | choice | tri | bool | text | opt_text | affinity | env
    choices: tuple[tuple[str, str], ...] = ()
    hint: str = ""
    section: str = ""


def _choices(values: tuple[str, ...], default: bool = False) -> tuple[tuple[str, str], ...]:
    """Choice pairs for a cycle control; ``default`` first when the knob may be left to ORT."""
    out = tuple((v, v) for v in values)
    return ((("default", "default"),) + out) if default else out


def kind_of(knob: knobs.Knob) -> str:
    """The form control a knob needs. Map entries (provider options, env variables) may always be left unset."""
    optional = knob.optional or knobs.is_entry(knob)
    if knob.target == knobs.ENV:
        return "env"
    if knob.type is tuple:
        return "affinity"
    if knob.choices:
        return "choice"
    if knob.type is bool:
        return "tri" if optional else "bool"
    if knob.type is int:
        return "opt_int" if optional else "int"
    if knob.type is float:
        return "opt_float" if optional else "float"
    return "opt_text" if optional else "text"


def field_of(knob: knobs.Knob) -> Field:
    """The form field for one knob, from its declaration."""
    kind = kind_of(knob)
    choices: tuple[tuple[str, str], ...] = ()
    if kind == "choice":
        choices = _choices(knob.choices, default=knob.optional or knobs.is_entry(knob))
    elif kind in ("tri", "bool"):
        choices = TRI if kind == "tri" else BOOL
    return Field(knob.key, knob.label or knob.name, kind, choices, knob.hint, knob.section)


_cache: tuple[tuple[knobs.Knob, ...], tuple[Field, ...], dict[str, Field]] | None = None


def fields() -> tuple[Field, ...]:
    """Every knob with a form section, grouped by section (in :data:`SECTION_ORDER`), in declaration order within."""
    global _cache
    reg = knobs.registry()
    if _cache is None or _cache[0] is not reg:
        shown = [k for k in reg if k.section]
        order = list(SECTION_ORDER) + [k.section for k in shown if k.section not in SECTION_ORDER]
        rank = {section: i for i, section in reversed(list(enumerate(order)))}
        made = tuple(field_of(k) for k in sorted(shown, key=lambda k: rank[k.section]))
        _cache = (reg, made, {f.key: f for f in made})
    return _cache[1]


def field_by_key() -> dict[str, Field]:
    """The form's fields by dotted key."""
    fields()
    assert _cache is not None
    return _cache[2]


if TYPE_CHECKING:  # pragma: no cover - typing only; at run time they are computed from the registry on access
    FIELDS: tuple[Field, ...]
    FIELD_BY_KEY: dict[str, Field]


def __getattr__(name: str) -> Any:
    """``FIELDS`` and ``FIELD_BY_KEY`` always reflect the current registry (the screen reads them by name)."""
    if name == "FIELDS":
        return fields()
    if name == "FIELD_BY_KEY":
        return field_by_key()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PLACEHOLDER = {"int": "default", "float": "default", "text": "default", "opt_int": "default",
               "opt_float": "default", "opt_text": "unset", "env": "unset", "affinity": "e.g. cores: 0-3"}
BLANK_RULE = "blank = default"  # one rule for every field: see _value
ENV_NOTE = "changing the environment restarts the worker process (ORT reads it at load time)"


class FieldError(ProfileError):
    """Text that cannot become a value for one field (a word where a number goes)."""


# ---- bounds for this host ----------------------------------------------------------------------------------------
# The form refuses what a profile or the command line may still ask for: a profile is portable, and a thread count
# made for a bigger host is legitimate there. What the form is typed on is the host the worker runs on, so here a
# count past a few threads per usable core is refused with its reason.

# Threads per usable core the form accepts in one pool. Past a few threads per core a run measures the scheduler's
# contention (threads queued for a core, spinning pool threads stealing each other's time slices), not the session;
# 4 still leaves room for the oversubscription worth measuring (2 threads per core, an inter-op pool beside the
# intra-op one).
THREADS_PER_CORE = 4
THREAD_KEYS = ("session.intra_op_num_threads", "session.inter_op_num_threads",
               "session.global_intra_op_num_threads", "session.global_inter_op_num_threads")

# The lowest paced rate the form accepts (0 stays the closed loop). A measurement rests on a few hundred runs
# (RATE_FLOOR_RUNS: what a p99 needs to be more than the slowest run or two), and at 0.1 Hz those alone take 50
# minutes; below it they take hours (300 runs at 0.01 Hz: 8.3 h).
MIN_RATE_HZ = 0.1
RATE_FLOOR_RUNS = 300


@dataclass(frozen=True)
class HostCores:
    """The cores the worker may use (it inherits the editing process's CPU affinity and cgroup), and how that reads."""

    cores: int
    why: str  # "2 usable cores", "2 usable cores (cgroup quota 1.5 CPUs)"

    @property
    def thread_limit(self) -> int:
        return self.cores * THREADS_PER_CORE


def host_cores() -> HostCores:
    """The CPUs this process may run on (``os.sched_getaffinity``: a cpuset or ``taskset``), bounded by the cgroup
    CPU quota rounded up (``collectors.host.read_cpu_quota``)."""
    from ortop.collectors.host import read_cpu_quota

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    cpus = max(1, cpus)
    quota = read_cpu_quota()
    if quota is not None and math.ceil(quota - 1e-9) < cpus:
        n = max(1, math.ceil(quota - 1e-9))
        return HostCores(n, f"{n} usable {'core' if n == 1 else 'cores'} (cgroup quota {quota:g} CPUs)")
    return HostCores(cpus, f"{cpus} usable {'core' if cpus == 1 else 'cores'}")


def _duration(seconds: float) -> str:
    """``50 min``, ``8.3 h``, ``3.5 days``: how long a span is, in the unit that reads."""
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.2g} h"
    if seconds < 100 * 86400:
        return f"{seconds / 86400:.2g} days"
    return "over 100 days"


def rate_floor_error(rate_hz: float) -> str | None:
    """Why a paced rate is too slow to measure with (None when it is 0, the closed loop, or at least the floor)."""
    if not 0 < rate_hz < MIN_RATE_HZ:
        return None
    return (f"rate_hz must be 0 (closed loop) or >= {MIN_RATE_HZ:g}, got {rate_hz:g}: {RATE_FLOOR_RUNS} runs "
            f"(a p99 worth reading) would take {_duration(RATE_FLOOR_RUNS / rate_hz)}")


def thread_bound_error(key: str, value: int, cores: HostCores) -> str | None:
    """Why a pool of ``value`` threads is refused on this host (None within ``cores × THREADS_PER_CORE``)."""
    limit = cores.thread_limit
    if value <= limit:
        return None
    return (f"{key.rpartition('.')[2]} must be <= {limit} on this host, got {value}: {cores.why} × "
            f"{THREADS_PER_CORE} (more threads only measure contention)")


def _get(profile: Profile, key: str) -> Any:
    """The profile's value at a dotted key; map entries (env, provider.options) read their entry or None."""
    return knobs.get(key).read(profile)


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
    for f in fields():
        v = _get(profile, f.key)
        if f.kind in ("tri",):
            out[f.key] = _tri_text(v)
        elif f.kind == "bool":
            out[f.key] = "on" if v else "off"
        elif f.kind == "choice":
            out[f.key] = "default" if v is None else str(v)
        elif f.kind == "affinity":
            out[f.key] = cores_text(v)
        elif f.kind in ("float", "opt_float"):
            out[f.key] = "" if v is None else f"{v:g}"
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


def _parse_float(text: str, key: str, optional: bool = False) -> float | None:
    if optional and not text.strip():
        return None
    try:
        v = float(text.strip())
    except ValueError:
        raise FieldError(f"{text.strip()!r} is not a number", key=key) from None
    if not math.isfinite(v):
        raise FieldError(f"{text.strip()!r} is not a finite number", key=key)
    return v


def _value(f: Field, text: str, intra: int) -> Any:
    """The value ``text`` stands for in field ``f``. One rule for every field: blank is the knob's default (ORT's
    own where the knob may be left to it, else the declared default: 0 threads, a closed loop, the cpu provider)."""
    if not text.strip() and f.kind in ("int", "float", "text"):
        return knobs.get(f.key).default
    if f.kind == "int":
        return _parse_int(text, f.key, optional=False)
    if f.kind == "opt_int":
        return _parse_int(text, f.key, optional=True)
    if f.kind in ("float", "opt_float"):
        return _parse_float(text, f.key, optional=f.kind == "opt_float")
    if f.kind == "tri":
        return None if text == "default" else text == "on"
    if f.kind == "bool":
        return text == "on"
    if f.kind == "choice":
        return None if text == "default" else text
    if f.kind == "affinity":
        return parse_affinity(text, intra)
    if f.kind in ("env", "opt_text"):
        return text.strip() or None
    return text.strip()


def changes(profile: Profile, values: dict[str, str], cores: HostCores | None = None) -> dict[str, Any]:
    """The dotted-key changes the form asks for against ``profile`` (only knobs whose value differs).

    Raises FieldError for text that is not a value, or ProfileErrors with one entry per bad field, each carrying
    its ``key`` so the screen can put the message beside it. A changed rate below :data:`MIN_RATE_HZ` is refused,
    and given ``cores`` (this host's), a changed thread count past :data:`THREADS_PER_CORE` per core; values the
    profile already holds are left to it (a profile is portable).
    """
    errors: list[ProfileError] = []
    out: dict[str, Any] = {}
    intra_text = values.get("session.intra_op_num_threads", str(profile.session.intra_op_num_threads))
    try:
        intra = int(intra_text.strip() or 0)
    except ValueError:
        intra = profile.session.intra_op_num_threads
    for f in fields():
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
    bounded = [(k, rate_floor_error(v)) for k, v in out.items() if k == "workload.rate_hz" and isinstance(v, float)]
    if cores is not None:
        bounded += [(k, thread_bound_error(k, v, cores)) for k, v in out.items() if k in THREAD_KEYS and
                    isinstance(v, int)]
    errors += [FieldError(message, key=k) for k, message in bounded if message]
    provider = short_name(str(out.get("provider.name", profile.provider.name)))  # cuda or CUDAExecutionProvider
    for k, v in out.items():
        knob = knobs.find(k)
        if knob is not None and knob.provider and knob.provider != provider and v is not None:
            errors.append(FieldError(f"{field_by_key()[k].label} is a {knob.provider.upper()} option: set provider "
                                     f"to {knob.provider} first", key=k))
    if errors:
        raise errors[0] if len(errors) == 1 else profile_mod.ProfileErrors(errors)
    return out


def build(profile: Profile, values: dict[str, str], cores: HostCores | None = None) -> Profile:
    """The profile the form describes: ``profile.merge(current, **changes)`` (validated like a file)."""
    ch = changes(profile, values, cores)
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
    if key in field_by_key():
        return key
    for f in fields():
        if key.startswith(f.key + "."):
            return f.key
    return None
