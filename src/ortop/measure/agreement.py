"""How far a model's outputs are from another's on the same inputs: max abs error, mean relative error, cosine
similarity and, where an output has a class axis, top-1 agreement. Pure numpy.

The outputs travel from the workers as :func:`compact` copies: an output of up to ``SAMPLE_CAP`` elements whole
(fewer each when a model has many outputs: :func:`output_cap`), a larger one as every k-th element of its flat view,
with the arg-max of each row when it has a class axis, computed in the worker over the whole output. Two samples of
one shape taken with different strides are compared on the elements both hold (every lcm-th).

The figures, for a reference ``a`` and an output ``b`` of the same shape, over the elements finite in both:

- ``max_abs``: max |b − a|;
- ``mean_rel``: mean |b − a| / mean |a| (the mean error relative to the reference's mean magnitude; an
  element-wise |b − a| / |a| would be dominated by the reference's values near zero);
- ``cosine``: a·b / (|a| |b|) over the flattened outputs (1 when both are all zeros, 0 when only one is);
- ``top1``: the share of rows whose arg-max over the class axis is the same. An output has a class axis when it is
  a float tensor of rank 2 or 3 whose last axis is longer than 1 (``[batch, classes]`` logits or scores, or
  ``[batch, tokens, vocabulary]``); a feature map ``[N, C, H, W]`` (rank 4) has none here.

:class:`Tolerance` says when a variant's outputs differ: each bound applies to one figure as printed (``atol`` to
max_abs, ``rtol`` to mean_rel, ``cosine`` a floor), and values finite in one output but not the other always differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

SAMPLE_CAP = 1 << 18        # elements of one output kept whole; above it, a strided sample of about this many
TOTAL_CAP = 1 << 21         # ... and of all a model's outputs together (a decoder's many key/value outputs)
MIN_CAP = 1 << 12
OTHER = "other"             # a compact output that is not a numeric tensor (a sequence, a map, strings)
TENSOR = "tensor"


def as_numeric(value: Any) -> np.ndarray | None:
    """``value`` as a numeric numpy array (bool, int, float; bfloat16 and float8 as float32), or None."""
    if not isinstance(value, np.ndarray):
        return None
    if value.dtype.kind in "biuf":
        return value
    if value.dtype.name.startswith(("bfloat", "float")):  # ml_dtypes' low-precision floats
        try:
            return value.astype(np.float32)
        except (TypeError, ValueError):
            return None
    return None


def has_class_axis(dtype: Any, shape: tuple[int, ...] | list[int]) -> bool:
    """A float output of rank 2 or 3 whose last axis is longer than 1 (see the module's docstring)."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    return name.startswith(("float", "bfloat")) and len(shape) in (2, 3) and int(shape[-1]) > 1


def _stride(n: int, cap: int) -> int:
    return max(1, math.ceil(n / cap))


def output_cap(outputs: int) -> int:
    """The elements each of a model's ``outputs`` outputs keeps: ``SAMPLE_CAP``, less when they are many."""
    return max(MIN_CAP, min(SAMPLE_CAP, TOTAL_CAP // max(1, outputs)))


def compact(value: Any, cap: int = SAMPLE_CAP) -> dict[str, Any]:
    """A copy of one output small enough to send to the parent (a plain dict of numpy arrays and numbers): its
    elements whole up to ``cap``, else every k-th."""
    arr = as_numeric(value)
    if arr is None:
        return {"kind": OTHER, "type": type(value).__name__ if not isinstance(value, np.ndarray)
                else f"{value.dtype.name} tensor"}
    dtype = value.dtype.name
    shape = [int(d) for d in arr.shape]
    flat = arr.reshape(-1)
    stride = _stride(flat.size, cap)
    out: dict[str, Any] = {"kind": TENSOR, "dtype": dtype, "shape": shape, "size": int(flat.size),
                           "stride": stride, "values": np.array(flat[::stride]), "argmax": None, "argmax_stride": 1}
    if has_class_axis(dtype, shape) and flat.size:
        rows = arr.reshape(-1, shape[-1])
        rs = _stride(rows.shape[0], cap)
        out["argmax"] = np.argmax(rows[::rs], axis=1).astype(np.int64)
        out["argmax_stride"] = rs
    return out


@dataclass(frozen=True)
class Agreement:
    """One output of a model against the reference's, on the same inputs (see the module's docstring)."""

    max_abs: float
    mean_rel: float
    cosine: float
    top1: float | None      # None: no class axis
    elements: int           # elements compared
    sampled: bool           # every k-th element of a large output, not all of it
    nonfinite: int = 0      # elements finite in one output and not in the other (NaN or inf unlike the reference)

    def exact(self) -> bool:
        return self.max_abs == 0 and self.nonfinite == 0

    def text(self) -> str:
        parts = [f"max abs {error_text(self.max_abs)}", f"mean rel {error_text(self.mean_rel)}",
                 f"cosine {cosine_text(self.cosine)}"]
        if self.top1 is not None:
            parts.append(f"top-1 {self.top1:.3f}")
        if self.nonfinite:
            parts.append(f"{self.nonfinite} non-finite unlike the reference")
        if self.sampled:
            parts.append(f"(a sample of {self.elements})")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"max_abs": _sig(self.max_abs), "mean_rel": _sig(self.mean_rel), "cosine": _sig(self.cosine, 9),
                "top1": None if self.top1 is None else _sig(self.top1), "elements": self.elements,
                "sampled": self.sampled, "nonfinite": self.nonfinite}


def _sig(x: float, digits: int = 6) -> float | None:
    if x is None or math.isnan(x):
        return None
    if math.isinf(x):
        return None
    return float(f"{x:.{digits}g}")


def error_text(x: float) -> str:
    """An error figure with three significant digits (0 when there is none)."""
    return "0" if x == 0 else f"{x:.3g}"


def cosine_text(x: float, floor: float | None = None) -> str:
    """A cosine near 1 with enough digits to see how near: never shown as 1 when it is not, nor as at or above
    ``floor`` when it is under it."""
    if x == 1 or math.isnan(x):
        return "1" if x == 1 else "nan"
    digits = 4
    while digits < 15 and (float(f"{x:.{digits}f}") >= 1 or (floor is not None and float(f"{x:.{digits}f}") >= floor)):
        digits += 1
    return f"{x:.{digits}f}"


def figures(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, int, int]:
    """(max_abs, mean_rel, cosine, elements compared, elements non-finite unlike) for two arrays of one shape."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    fa, fb = np.isfinite(a), np.isfinite(b)
    both = fa & fb
    # NaN against NaN, or the same infinity, is what the reference computed too
    same_nonfinite = ~fa & ~fb & ((np.isnan(a) & np.isnan(b)) | (a == b))
    nonfinite = int(np.count_nonzero(~both & ~same_nonfinite))
    a, b = a[both], b[both]
    if a.size == 0:
        return 0.0, 0.0, 1.0, 0, nonfinite
    diff = np.abs(b - a)
    max_abs = float(diff.max())
    scale = float(np.abs(a).mean())
    mean_rel = float(diff.mean()) / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if max_abs == 0:  # the same values: a·a / |a|² rounds to 1 − 2⁻⁵³ for about half of all arrays
        cosine = 1.0
    elif na == 0 or nb == 0:
        cosine = 1.0 if na == nb else 0.0
    else:
        cosine = float(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))
    return max_abs, mean_rel, cosine, int(a.size), nonfinite


def agree(ref: Mapping[str, Any], other: Mapping[str, Any]) -> Agreement | str:
    """One output (:func:`compact`) against the reference's: the figures, or why they cannot be had (words)."""
    if ref.get("kind") != TENSOR or other.get("kind") != TENSOR:
        what = ref if ref.get("kind") != TENSOR else other
        return f"not compared: a {what.get('type', 'non-tensor')} output"
    if list(ref["shape"]) != list(other["shape"]):
        return (f"not compared: shape {'x'.join(map(str, other['shape'])) or 'scalar'} against "
                f"{'x'.join(map(str, ref['shape'])) or 'scalar'}")
    va, vb = _common(ref["values"], int(ref.get("stride", 1)), other["values"], int(other.get("stride", 1)))
    max_abs, mean_rel, cosine, n, nonfinite = figures(va, vb)
    top1 = None
    ta, tb = ref.get("argmax"), other.get("argmax")
    if ta is not None and tb is not None:
        ta, tb = _common(ta, int(ref.get("argmax_stride", 1)), tb, int(other.get("argmax_stride", 1)))
        if len(ta):
            top1 = float(np.mean(np.asarray(ta) == np.asarray(tb)))
    sampled = max(int(ref.get("stride", 1)), int(other.get("stride", 1))) > 1
    return Agreement(max_abs, mean_rel, cosine, top1, n, sampled, nonfinite)


def _common(a: Any, sa: int, b: Any, sb: int) -> tuple[np.ndarray, np.ndarray]:
    """Two strided samples (from index 0) of one array's elements, cut to the elements both hold."""
    a, b = np.asarray(a), np.asarray(b)
    if sa == sb:
        n = min(len(a), len(b))
        return a[:n], b[:n]
    step = math.lcm(sa, sb)
    a, b = a[::step // sa], b[::step // sb]
    n = min(len(a), len(b))
    return a[:n], b[:n]


def agreement(ref: Mapping[str, Mapping[str, Any]],
              other: Mapping[str, Mapping[str, Any]]) -> dict[str, Agreement | str]:
    """Every output of the reference (name -> :func:`compact`) against the other model's of the same name (by
    position when the two share no name but have as many outputs): figures, or why not."""
    pairs: list[tuple[str, Mapping[str, Any] | None]] = []
    if not set(ref) & set(other) and len(ref) == len(other):
        pairs = list(zip(ref, other.values()))
    else:
        pairs = [(name, other.get(name)) for name in ref]
    out: dict[str, Agreement | str] = {}
    for name, theirs in pairs:
        out[name] = "not compared: no such output" if theirs is None else agree(ref[name], theirs)
    return out


@dataclass(frozen=True)
class Tolerance:
    """When outputs differ: max_abs over ``atol``, mean_rel over ``rtol``, cosine under ``cosine`` (a bound of
    None is not checked), or values non-finite unlike the reference's.

    The defaults (1 % mean relative error, cosine 0.999, no max abs bound: an absolute bound depends on the
    outputs' scale, so it is the user's to give) pass a copy whose outputs moved by rounding alone (an optimized
    graph, a session option) and flag one that moved more, a dynamic int8 copy usually among them: whether that is
    acceptable is for its accuracy on real data to say, and ``--rtol`` to record."""

    atol: float | None = None
    rtol: float | None = 0.01
    cosine: float | None = 0.999

    def breaches(self, agreements: Mapping[str, Agreement | str]) -> list[str]:
        """Why these outputs differ beyond the tolerance, one phrase per breach (empty: they agree)."""
        out = []
        for name, ag in agreements.items():
            if not isinstance(ag, Agreement):
                continue
            if self.atol is not None and ag.max_abs > self.atol:
                out.append(f"{name} max abs {error_text(ag.max_abs)} > atol {self.atol:g}")
            if self.rtol is not None and ag.mean_rel > self.rtol:
                out.append(f"{name} mean rel {error_text(ag.mean_rel)} > rtol {self.rtol:g}")
            if self.cosine is not None and ag.cosine < self.cosine:
                out.append(f"{name} cosine {cosine_text(ag.cosine, self.cosine)} < {self.cosine:g}")
            if ag.nonfinite:
                out.append(f"{name} has {ag.nonfinite} non-finite values unlike the reference")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"atol": self.atol, "rtol": self.rtol, "cosine": self.cosine}
