"""Shape mixes: a free dim or a whole input shape given several values, one drawn per request.

Spellings (the CLI's ``--dim``/``--shape`` and the profile's ``[workload.dim_mix]``/``[workload.shape_mix]``):

- ``16..512``: a uniform range of a dim. Wide ranges become a bounded pool of evenly spaced sizes (at most
  :data:`RANGE_POOL`), so feeds are made before measuring, one per distinct shape, never on the hot path.
- ``32:5,128:3,512:1``: a weighted list of sizes (a bare ``32,128`` weighs each 1).
- ``1x3x48x160,1x3x48x320`` (shapes; ``:W`` after a shape weighs it).

Several mixed dims or inputs are drawn independently: the distinct shapes are their product (at most
:data:`MAX_VARIANTS`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortop.model.inspect import ModelError

RANGE_POOL = 16
MAX_VARIANTS = 256
SHAPE_REFUSED = "the model refuses it"  # in a build failure's message: a shape of a mix or trace (bad input)


@dataclass(frozen=True)
class Variant:
    """One distinct input shape of a mix: the dims and whole shapes it sets over the profile's own, its weight."""

    dims: Mapping[str, int] = field(default_factory=dict)
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    weight: float = 1.0
    inputs: Mapping[str, str] = field(default_factory=dict)  # .npy files (a trace line's own inputs)

    def label(self) -> str:
        parts = [f"{k}={v}" for k, v in self.dims.items()]
        parts += [f"{k}={'x'.join(map(str, v))}" for k, v in self.shapes.items()]
        parts += [f"{k}={v}" for k, v in self.inputs.items()]
        return " ".join(parts) or "the fixed shape"


def is_mix(text: str) -> bool:
    """A value that names several sizes (a range or a list), not one."""
    return ".." in text or "," in text or ":" in text


def _int(text: str, what: str) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        raise ModelError(f"{what}: {text.strip()!r} is not a whole number") from None
    if n < 1:
        raise ModelError(f"{what}: a dimension must be >= 1, got {n}")
    return n


def _weight(text: str, what: str) -> float:
    try:
        w = float(text)
    except ValueError:
        raise ModelError(f"{what}: weight {text!r} is not a number") from None
    if not w > 0 or w != w or w == float("inf"):
        raise ModelError(f"{what}: weight {text!r} must be a positive number")
    return w


def parse_dim_mix(name: str, text: str) -> list[tuple[int, float]]:
    """``16..512`` or ``32:5,128:3`` → [(size, weight), ...] (a range: a pool of evenly spaced sizes)."""
    what = f"--dim {name}={text}"
    text = str(text).strip()
    if ".." in text:
        lo_s, _, hi_s = text.partition("..")
        lo, hi = _int(lo_s, what), _int(hi_s, what)
        if hi < lo:
            raise ModelError(f"{what}: the range goes down ({lo} > {hi})")
        n = min(RANGE_POOL, hi - lo + 1)
        sizes = sorted({int(round(x)) for x in np.linspace(lo, hi, n)})
        return [(s, 1.0) for s in sizes]
    out = []
    for part in text.split(","):
        if not part.strip():
            raise ModelError(f"{what}: an empty entry in the list")
        size, _, w = part.partition(":")
        out.append((_int(size, what), _weight(w, what) if w else 1.0))
    if len({s for s, _ in out}) != len(out):
        raise ModelError(f"{what}: a size is listed twice")
    return out


def parse_shape_mix(name: str, text: str) -> list[tuple[tuple[int, ...], float]]:
    """``1x3x48x160,1x3x48x320:2`` → [(shape, weight), ...]."""
    what = f"--shape {name}={text}"
    out = []
    for part in str(text).split(","):
        shape_s, _, w = part.strip().partition(":")
        if not shape_s:
            raise ModelError(f"{what}: an empty entry in the list")
        dims = tuple(_int(d, what) for d in shape_s.lower().split("x"))
        out.append((dims, _weight(w, what) if w else 1.0))
    return out


def variants(info: Any, dim_mix: Mapping[str, str], shape_mix: Mapping[str, str]) -> list[Variant]:
    """The distinct shapes of the mixes, with their weights; ``[Variant()]`` when there is no mix.

    Refuses (ModelError, exit 2) a dim the model does not have free, an input it does not have, a bad spelling,
    or more than :data:`MAX_VARIANTS` distinct shapes.
    """
    if not dim_mix and not shape_mix:
        return [Variant()]
    names = [t.name for t in info.inputs]
    axes: list[list[tuple[str, str, Any, float]]] = []
    for name, text in dim_mix.items():
        if name not in info.free_dims:
            free = ", ".join(info.free_dims) or "none"
            raise ModelError(f"--dim {name}: the model has no free dim {name!r} (free dims: {free})")
        axes.append([("dim", name, size, w) for size, w in parse_dim_mix(name, text)])
    for name, text in shape_mix.items():
        if name not in names:
            raise ModelError(f"--shape {name}: the model has no input {name!r} (inputs: {', '.join(names)})")
        axes.append([("shape", name, shape, w) for shape, w in parse_shape_mix(name, text)])
    total = int(np.prod([len(a) for a in axes]))
    if total > MAX_VARIANTS:
        raise ModelError(f"the shape mixes make {total} distinct shapes; at most {MAX_VARIANTS} (fewer sizes, or "
                         "a narrower range)")
    out = []
    for combo in itertools.product(*axes):
        dims = {n: v for kind, n, v, _ in combo if kind == "dim"}
        shapes = {n: v for kind, n, v, _ in combo if kind == "shape"}
        out.append(Variant(dims, shapes, float(np.prod([w for *_, w in combo]))))
    return out


def weights(vs: Sequence[Variant]) -> np.ndarray | None:
    """The draw probabilities of the variants (None: a single shape, or all equal)."""
    w = np.array([v.weight for v in vs], dtype=np.float64)
    if len(w) <= 1 or np.all(w == w[0]):
        return None
    return w / w.sum()
