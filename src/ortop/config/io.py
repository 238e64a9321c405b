"""Profiles in and out: strict TOML/JSON reading, dotted-key changes, atomic saving (the plain dict a profile
writes is :func:`ortop.config.tree.to_dict`).

Reading is strict because a typo in a tuning profile silently measures something else: an unknown key is an
error with its file, line and the nearest valid key. What is valid comes from the knob registry, so a declared
knob is readable and writable with no edit here.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ortop.config import knobs
from ortop.config.errors import ProfileError, raise_if_any
from ortop.config.keys import Report, line_of, suggest
from ortop.config.tree import SECTIONS, Profile, to_plain
from ortop.config.validate import validate
from ortop.fsutil import atomic_write_text

# ---- reading ------------------------------------------------------------------------------------------------

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
    trace = profile.workload.trace
    if path and trace and not os.path.isabs(trace):  # a trace too travels with its profile
        profile = replace(profile, workload=replace(
            profile.workload, extra={**profile.workload.extra,
                                     "trace": os.path.normpath(os.path.join(os.path.dirname(path), trace))}))
    return profile


def load(path: str | os.PathLike[str]) -> Profile:
    """Read and validate a profile file; a missing file or a directory is a ProfileError, not a traceback."""
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
    """Build and validate a Profile from plain data (parsed TOML or JSON). Every profile passes here once."""
    errors: list[ProfileError] = []

    def err(msg: str, key: str) -> None:
        errors.append(ProfileError(msg, path=path, line=line_of(text, key), key=key))

    top = {k.name: k for k in knobs.in_table("")}
    sections = knobs.sections()
    valid = [k.key.split(".")[0] for k in knobs.registry() if not knobs.is_entry(k)]
    valid = list(dict.fromkeys(valid))
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in sections:
            kwargs[key] = _read_section(SECTIONS[key], key, value, err)
        elif key in top:
            read = _read_value(top[key], value, key, err)
            if read is not None:
                kwargs[key] = read
        else:
            err(f"unknown key {key!r}{suggest(key, valid)}", key)
    raise_if_any(errors)
    profile = Profile(**kwargs)
    validate(profile, path=path, text=text)
    return profile


def _type_name(t: Any) -> str:
    """How an error names a type to someone writing TOML."""
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(t, str(t))


def _coerce(value: Any, t: Any, key: str, err: Report) -> Any:
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


def _read_map(value: Any, key: str, vtype: Any, err: Report) -> dict[str, Any]:
    """A map knob's table, each value checked against the map's value type (see ``Knob.values``)."""
    if not isinstance(value, dict):
        err(f"[{key}] must be a table", key)
        return {}
    out: dict[str, Any] = {}
    for k, v in value.items():
        dotted = f"{key}.{k}"
        if vtype is knobs.SHAPE:
            if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
                err(f"{dotted} must be a list of integers, got {v!r}", dotted)
            else:
                out[k] = tuple(v)
            continue
        if vtype is knobs.SCALAR:
            if isinstance(v, (dict, list)):
                err(f"{dotted} must be a plain value", dotted)
            else:
                out[k] = v
            continue
        if vtype is str and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)  # env values and config entries are strings to ORT; numbers are a convenience
        cv = _coerce(v, vtype, dotted, err)
        if cv is not None:
            out[k] = cv
    return out


def _read_value(knob: knobs.Knob, value: Any, dotted: str, err: Report) -> Any:
    """One knob's value from plain data, type-checked (domains are validation's job)."""
    if knob.is_map:
        return _read_map(value, dotted, knob.values, err)
    if knob.type is tuple:  # a thread affinity: one list of cores per pool thread
        if not isinstance(value, list) or not all(
            isinstance(t, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in t) for t in value
        ):
            err(f"{dotted} must be a list of lists of 0-based core numbers, e.g. [[1], [2, 3]]", dotted)
            return None
        return tuple(tuple(t) for t in value)
    return _coerce(value, knob.type, dotted, err)


def _read_section(cls: type, section: str, value: Any, err: Report) -> Any:
    """One [section] table: typed fields to the dataclass, knobs declared only in the registry to ``extra``.

    A raw ORT config key written where its knob belongs is pointed at the knob, the commonest slip.
    """
    if not isinstance(value, dict):
        err(f"[{section}] must be a table", section)
        return cls()
    declared = {k.name: k for k in knobs.in_table(section)}
    typed = {f.name for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, v in value.items():
        dotted = f"{section}.{key}"
        knob = declared.get(key)
        if knob is None:
            owner = next((k for k in declared.values() if k.target == knobs.CONFIG_ENTRY and k.ort_name == key), None)
            hint = f" (use {owner.key})" if owner else suggest(key, list(declared))
            err(f"unknown key {dotted!r}{hint}", dotted)
            continue
        read = _read_value(knob, v, dotted, err)
        if read is not None:
            (kwargs if key in typed else extra)[key] = read
    return cls(**kwargs, extra=extra)


# ---- writing ------------------------------------------------------------------------------------------------

def save(profile: Profile, path: str | os.PathLike[str], header: str = "") -> Path:
    """Write the profile atomically, so a crash mid-write never leaves a half-written profile where a good one was."""
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
            node[parts[-1]] = to_plain(value)
    return from_dict(data)
