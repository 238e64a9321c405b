"""What the exporters share: the error, the model path default, IO-binding devices, global pools, the shared
arena, headers, blocks of code written as text, and the walk over the registry's SessionOptions knobs that each code
exporter spells in its own language.
"""

from __future__ import annotations

import os
import re
import string
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ortop.config import knobs
from ortop.config.profile import Profile
from ortop.config.providers import CUDA, TENSORRT
from ortop.errors import OrtopError
from ortop.export.literals import comment_str

DEFAULT_MODEL = "model.onnx"

# Knob values that need a newer onnxruntime than ortop's floor, by (knob key, value): said beside the setting.
VERSION_NOTES: dict[tuple[str, Any], str] = {
    ("session.graph_optimization_level", "layout"): "ORT_ENABLE_LAYOUT needs onnxruntime >= 1.23.",
}


class ExportError(OrtopError, ValueError):
    """The format is unknown, or the profile holds something the format cannot express."""


def model_path(profile: Profile, model: str | None) -> str:
    """The model path the export names: the caller's, else the profile's, else ``model.onnx``."""
    return model if model is not None else (profile.model or DEFAULT_MODEL)


def device(profile: Profile) -> tuple[str, int]:
    """The device IO binding places tensors on, and its id."""
    name = profile.provider_name()
    where = "cuda" if name in (CUDA, TENSORRT) else "cpu"
    try:
        device_id = int(profile.provider.options.get("device_id", 0))
    except (TypeError, ValueError):
        device_id = 0
    return where, device_id


def global_pools(profile: Profile) -> tuple[int, int] | None:
    """(intra, inter) sizes of the process-wide pools when the profile uses them, else None."""
    s = profile.session
    if s.use_per_session_threads:
        return None
    return s.global_intra_op_num_threads, s.global_inter_op_num_threads


def code_lines(template: str, **values: str) -> list[str]:
    """A block of exported code written as text, its ``$name`` placeholders filled (``string.Template``: the braces
    of C++ and C# stay as they are), as lines."""
    return string.Template(template).substitute(values).splitlines()


def comment_lines(text: str, prefix: str, width: int = 120) -> list[str]:
    """``text`` as comment lines that start with ``prefix`` (indent and comment marker), wrapped at ``width``."""
    return textwrap.wrap(text, width, initial_indent=prefix, subsequent_indent=prefix, break_long_words=False,
                         break_on_hyphens=False)


def shared_arena(profile: Profile) -> bool:
    """Whether the sessions share one CPU arena registered in ORT's environment (``session.use_env_allocators``):
    the config entry alone shares nothing, the allocator must be registered before the first session."""
    return bool(profile.session.use_env_allocators)


def literal(value: Any) -> str:
    """A knob value as a note or comment names it: TOML's spelling (``false``, ``4``, ``parallel``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def session_settings(profile: Profile) -> Iterator[tuple[knobs.Knob, Any]]:
    """Each SessionOptions-attribute knob the profile sets, with its value, in declaration order."""
    for knob in knobs.settings(knobs.SESSION_OPTION):
        value = knob.read(profile)
        if value is not None:
            yield knob, value


def spelled(profile: Profile, setters: dict[str, Callable[[Any], list[str]]],
            unknown: Callable[[knobs.Knob, Any], str]) -> list[str]:
    """Statements setting the profile's SessionOptions knobs in one language.

    ``setters`` spells the knobs that language has an API call for; any other knob set away from its default is
    named by ``unknown`` (a comment), so a newly declared knob shows up in every export without an edit.
    """
    out: list[str] = []
    for knob, value in session_settings(profile):
        setter = setters.get(knob.key)
        if setter is not None:
            out += setter(value)
        elif value != knob.default:
            out.append(unknown(knob, value))
    return out


def comment_header(profile: Profile, api: str) -> list[str]:
    """The ``//`` comment lines C++ and C# exports open with: origin, profile description, env vars to set; the
    values quoted as a comment carries them (:func:`ortop.export.literals.comment_str`: readable, never code)."""
    quote = comment_str
    out = [f"// ONNX Runtime session settings exported from an ortop profile ({api})."]
    if profile.description:
        out.append(f"// profile: {quote(profile.description)}")
    if profile.env:
        out.append("// Environment variables to set before the process starts (LD_PRELOAD is read only then):")
        out += [f"//   {k}={quote(v)}" for k, v in profile.env.items()]
    for said in (workload_text(profile), inputs_text(profile)):
        if said:
            out += comment_lines(said, "// ")
    return out


def workload_text(profile: Profile) -> str:
    """The traffic the profile was measured under, for a comment: arrivals and shape mixes ("" for a closed loop on
    one shape, which needs no word). The settings do not depend on it; their measured effect does."""
    from ortop.measure.arrivals import CLOSED, FIXED, POISSON, mode_of

    w = profile.workload
    mode = mode_of(w)
    parts = []
    if mode in (FIXED, POISSON):
        spacing = "evenly spaced" if mode == FIXED else "Poisson"
        parts.append(f"{spacing} arrivals at {w.rate_hz:g}/s per session into a FIFO queue")
    elif mode != CLOSED:
        parts.append(f"a replayed trace ({os.path.basename(w.trace)}, x{w.trace_speed:g})")
    mixes = [f"{k}={v}" for k, v in w.dim_mix.items()] + [f"{k}={v}" for k, v in w.shape_mix.items()]
    if mixes:
        parts.append("input shapes drawn per request: " + ", ".join(mixes))
    if not parts:
        return ""
    return "Measured under " + "; ".join(parts) + "."


# ---- input shapes ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InputShapes:
    """The input shapes a profile was measured with, as an export builds or names its inputs.

    ``dims`` holds free dimensions by name, an unnamed one as ``input[axis]`` (ortop's spelling, what ``--dim``
    takes); ``shapes`` whole input shapes by input name; ``batch`` the leading free dimension (0: the model's own).
    A shape mix (``dim_mix``, ``shape_mix``) is one shape per request: its typical value (the weighted median) is in
    ``dims``/``shapes`` and the mix itself in ``mixed`` (``seq=16..128``), so an export can say it builds one of
    several shapes.
    """

    dims: dict[str, int]
    shapes: dict[str, list[int]]
    batch: int
    mixed: list[str]

    def text(self) -> str:
        """``x=1x3x224x224, seq=128`` (free dims after whole shapes; "" when the profile fixes none)."""
        parts = [f"{plain_name(k)}={'x'.join(map(str, v))}" for k, v in self.shapes.items()]
        parts += [f"{plain_name(k)}={v}" for k, v in self.dims.items()]
        if self.batch:
            parts.append(f"batch (leading free dim) = {self.batch}")
        return ", ".join(parts)


def weighted_median(values: Sequence[tuple[Any, float]]) -> Any:
    """The value at half the total weight, in the order given: a mix's typical value (a uniform range's middle
    size, a weighted list's heaviest share)."""
    total = sum(w for _, w in values)
    acc = 0.0
    for value, w in values:
        acc += w
        if acc >= total / 2:
            return value
    return values[-1][0]


def input_shapes(profile: Profile) -> InputShapes:
    """The profile's input shapes (:class:`InputShapes`); a mix that does not parse is named, not resolved (the
    profile was validated when measured, and an export must not fail on what it only reports)."""
    from ortop.model.inspect import ModelError
    from ortop.model.mixes import parse_dim_mix, parse_shape_mix

    w = profile.workload
    dims = {k: int(v) for k, v in w.dims.items()}
    shapes = {k: [int(n) for n in v] for k, v in w.shapes.items()}
    mixed: list[str] = []
    mixes: list[tuple[Mapping[str, str], Callable[[str, str], list[Any]], dict[str, Any], Callable[[Any], Any]]] = [
        (w.dim_mix, parse_dim_mix, dims, int), (w.shape_mix, parse_shape_mix, shapes, list)]
    for mix, parse, typical, as_value in mixes:
        for name, text in mix.items():
            mixed.append(f"{plain_name(name)}={plain_name(text)}")
            try:
                typical[name] = as_value(weighted_median(parse(name, text)))
            except ModelError:
                pass
    return InputShapes(dims, shapes, int(w.batch), mixed)


_PLAIN = re.compile(r"[\w.:,\-\[\]]+")


def plain_name(text: str) -> str:
    """An input or dimension name (or a mix's spelling) as a comment of any language names it: as written when it
    is plain (letters, digits, ``_.:,-[]``), else quoted with its line breaks and controls escaped
    (:func:`ortop.export.literals.comment_str`), so it can end no comment."""
    return text if _PLAIN.fullmatch(text) and "??" not in text else comment_str(text)


def unnamed_dim(key: str) -> bool:
    """Whether a ``workload.dims`` key names an unnamed dimension by position (``x[2]``), not a ``dim_param``."""
    return key.endswith("]") and "[" in key


def inputs_text(profile: Profile) -> str:
    """The input shapes the settings were measured with, for a code export's comment ("" when the profile fixes
    none: every free dimension was 1)."""
    ins = input_shapes(profile)
    said = ins.text()
    if not said:
        return ""
    out = f"Measured with inputs {said}: build the input tensors with these shapes"
    if ins.mixed:
        out += (f" (a shape mix, one shape per request: {', '.join(ins.mixed)}; the typical one is named here: an "
                "effect measured with these settings, if any was, is one over the whole mix)")
    return out + "."
