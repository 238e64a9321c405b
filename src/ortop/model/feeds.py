"""Synthetic feeds: inputs made so a model runs without the user preparing data.

Random but seeded (so two runs of a configuration see the same data), never all zeros (zeros make some kernels take
fast paths), integer ids kept inside the embedding tables they index (out-of-range ids make Gather fail), and masks
filled with ones. Free dimensions default to 1 with a note saying which flag overrides them; where 1 is implausible
(a spatial axis of an image-like input to a convolutional model) the note is a warning (:func:`note_level`) and
starts with the flag that fixes it, so a line cut at the screen's edge still shows it.
"""

from __future__ import annotations

import difflib
import os
import zlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from ortop.model.inspect import (
    INT_NAMES,
    MASK_RE,
    NON_TENSOR,
    ModelError,
    ModelInfo,
    TensorInfo,
    first_line,
    format_shape,
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})

# Ops that slide a window over the spatial axes (2 and up) of their input: a model with one of them and a float
# input of rank 3 to 5 takes images (or spectrograms, volumes), where a free spatial axis left at 1 is not a size
# anyone runs. ModelInfo holds the op histogram, not the graph, so "feeds a Conv" is read as "the model convolves".
_SPATIAL_OPS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv"})
_FLOAT_NAMES = frozenset({"float32", "float16", "bfloat16", "float64"})
WARNING_MARK = "--"  # a note that starts with a flag is a warning: the flag is the fix


def note_level(note: str) -> str:
    """``"warning"`` for a note :func:`make_feeds` flags as implausible (it starts with the fixing flag), else
    ``"info"``. The notes travel as plain strings from the worker, so the level is read from the text."""
    return "warning" if note.startswith(WARNING_MARK) else "info"


def _spatial_axis(info: ModelInfo, t: TensorInfo, axis: int) -> bool:
    """Whether ``axis`` of input ``t`` is a spatial axis of a convolution's input, where a size of 1 is implausible."""
    rank = len(t.shape) if t.shape is not None else 0
    return (axis >= 2 and 3 <= rank <= 5 and t.dtype in _FLOAT_NAMES
            and any(op in _SPATIAL_OPS for op in info.op_histogram))


def _free_dim_note(info: ModelInfo, t: TensorInfo, axis: int, flag: str, plain: str) -> str:
    """The note for a free dim left at 1: ``plain``, or a warning naming ``flag`` first when 1 is implausible."""
    if _spatial_axis(info, t, axis):
        return (f"{flag}: input '{t.name}' axis {axis} is left at 1, too small for a spatial axis of a "
                "convolution's input")
    return plain


# ---- feeds ---------------------------------------------------------------------------------------------------------
def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype for an ortop dtype name ("string" -> object; bfloat16 and float8 types via ml_dtypes)."""
    if dtype == "string":
        return np.dtype(object)
    try:
        return np.dtype(dtype)
    except TypeError:
        pass
    try:
        import ml_dtypes

        name = {"float8e4m3fn": "float8_e4m3fn", "float8e4m3fnuz": "float8_e4m3fnuz", "float8e5m2": "float8_e5m2",
                "float8e5m2fnuz": "float8_e5m2fnuz", "float8e8m0": "float8_e8m0fnu",
                "float4e2m1": "float4_e2m1fn"}.get(dtype, dtype)
        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError, TypeError):
        raise ModelError(f"ortop can't make {dtype} data (numpy has no such type; install ml_dtypes)") from None


def _unknown(kind: str, flag: str, key: str, valid: Sequence[str], extra: str = "") -> ModelError:
    by_lower = {v.lower(): v for v in valid}  # case slips ("N" for "n") are the commonest typo
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1)
    hint = f"; did you mean '{by_lower[close[0]]}'?" if close else ""
    listed = ", ".join(valid) if valid else "none"
    return ModelError(f"{flag}: unknown {kind} '{key}'{hint} ({kind}s: {listed}){extra}")


def make_feeds(
    info: ModelInfo,
    *,
    dims: Mapping[str, int] = _EMPTY,
    shapes: Mapping[str, Sequence[int]] = _EMPTY,
    values: Mapping[str, float] = _EMPTY,
    inputs: Mapping[str, str] = _EMPTY,
    batch: int = 0,
    seed: int = 0,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """The arrays to feed every input, and notes on the choices made for the user (free dims set to 1, ...).

    Precedence per input: a .npy file (``inputs``), a constant (``values``), then synthesized data. Shapes come
    from ``shapes`` (the whole shape) or per dim: fixed, ``dims[symbol]``, ``batch`` on a free axis 0, else 1.
    Random data is seeded by ``seed`` and the input's name, so adding an override for one input leaves the data
    of the others unchanged.
    """
    names = [t.name for t in info.inputs]
    init_note = ""
    if info.initializer_inputs:
        init_note = f"; {', '.join(info.initializer_inputs)} are initializers, not fed"
    for mapping, flag in ((shapes, "--shape"), (values, "--value"), (inputs, "--input")):
        for key in mapping:
            if key not in names:
                raise _unknown("input", flag, key, names, init_note)
    for key in dims:
        if key not in info.free_dims:
            raise _unknown("free dim", "--dim", key, info.free_dims)
    for key, n in dims.items():
        if int(n) < 1:
            raise ModelError(f"--dim {key}={n}: a dimension must be >= 1")
    if batch < 0:
        raise ModelError(f"--batch {batch}: must be >= 0 (0 = the model's own)")

    notes: list[str] = []
    symbols = _resolve_symbols(info, dims, shapes, inputs, batch, notes)
    feeds: dict[str, np.ndarray] = {}
    for t in info.inputs:
        if t.dtype in NON_TENSOR:
            raise ModelError(f"input '{t.name}' is a {t.dtype} type; ortop can only feed tensors")
        if t.name in inputs:
            feeds[t.name] = _load_npy(t, inputs[t.name], shapes.get(t.name), notes)
            continue
        shape = _resolve_shape(info, t, shapes.get(t.name), dims, symbols, batch, notes)
        _check_size(t, shape, sum(a.nbytes for a in feeds.values()))
        if t.name in values:
            feeds[t.name] = _constant(t, shape, values[t.name])
        elif t.dtype in INT_NAMES and MASK_RE.search(t.name):
            feeds[t.name] = np.ones(shape, dtype=numpy_dtype(t.dtype))
            notes.append(f"input '{t.name}' filled with 1s (a mask; override with --value/--input)")
        else:
            rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(t.name.encode())])
            feeds[t.name] = _random(t, shape, rng, info.gather_bounds.get(t.name), notes)
    return feeds, notes


def _resolve_symbols(info: ModelInfo, dims: Mapping[str, int], shapes: Mapping[str, Sequence[int]],
                     inputs: Mapping[str, str], batch: int, notes: list[str]) -> dict[str, int]:
    """One value per symbolic dim name, shared by every input that uses it (they must agree at run time)."""
    values: dict[str, int] = {}
    uses: dict[str, list[tuple[TensorInfo, int]]] = {}
    for t in info.inputs:
        if t.name in shapes or t.name in inputs or t.shape is None:
            continue
        for axis, d in enumerate(t.shape):
            if not isinstance(d, str):
                continue
            uses.setdefault(d, []).append((t, axis))
            if d in dims:
                values[d] = int(dims[d])
            elif axis == 0 and batch > 0:
                values[d] = batch
    for d, where in uses.items():
        if d not in values:
            values[d] = 1
            # the use that makes 1 implausible is the one to name, if any
            t, axis = next(((t, a) for t, a in where if _spatial_axis(info, t, a)), where[0])
            notes.append(_free_dim_note(info, t, axis, f"--dim {d}=VALUE",
                                        f"free dim '{d}' of input '{where[0][0].name}' set to 1 (override with "
                                        f"--dim {d}=VALUE)"))
    return values


def _resolve_shape(info: ModelInfo, t: TensorInfo, explicit: Sequence[int] | None, dims: Mapping[str, int],
                   symbols: Mapping[str, int], batch: int, notes: list[str]) -> tuple[int, ...]:
    if explicit is not None:
        shape = tuple(int(n) for n in explicit)
        _check_shape(t, shape, "--shape")
        return shape
    if t.shape is None:
        raise ModelError(f"input '{t.name}' has no declared shape; give one with --shape {t.name}=...")
    out: list[int] = []
    for axis, d in enumerate(t.shape):
        if isinstance(d, int):
            if axis == 0 and batch > 0 and d != batch:
                notes.append(f"input '{t.name}' has a fixed batch of {d}; --batch ignored for it")
            out.append(d)
        elif isinstance(d, str):
            out.append(symbols[d])
        else:
            key = f"{t.name}[{axis}]"
            if key in dims:
                out.append(int(dims[key]))
            elif axis == 0 and batch > 0:
                out.append(batch)
            else:
                out.append(1)
                notes.append(_free_dim_note(info, t, axis, f"--shape {t.name}=...",
                                            f"input '{t.name}' axis {axis} is unnamed; set to 1 (override with "
                                            f"--shape {t.name}=...)"))
    return tuple(out)


def _check_shape(t: TensorInfo, shape: tuple[int, ...], flag: str) -> None:
    """An explicit shape must fit the model's declaration: same rank, the fixed dims equal, nothing negative."""
    text = format_shape(shape)
    if any(n < 0 for n in shape):
        raise ModelError(f"{flag} {t.name}={text}: dimensions must be >= 0")
    if t.shape is None:
        return
    if len(shape) != len(t.shape):
        raise ModelError(f"{flag} {t.name}={text}: input '{t.name}' has rank {len(t.shape)} "
                         f"({format_shape(t.shape)}), not {len(shape)}")
    for axis, (want, got) in enumerate(zip(t.shape, shape)):
        if isinstance(want, int) and want != got:
            raise ModelError(f"{flag} {t.name}={text}: axis {axis} of input '{t.name}' is fixed to {want} "
                             f"({format_shape(t.shape)})")


# Synthetic feeds above this size are refused before allocating: a typo in --dim (1000000000 for 1000) would
# otherwise end in a MemoryError deep inside numpy, or in swapping. Real inputs above 4 GiB are rare enough to
# ask for a file (--input) instead.
MAX_FEED_BYTES = 4 * 2**30


def _check_size(t: TensorInfo, shape: tuple[int, ...], so_far: int) -> None:
    itemsize = 8 if t.dtype == "string" else numpy_dtype(t.dtype).itemsize
    n = 1
    for d in shape:
        n *= int(d)
    size = n * itemsize
    if size + so_far > MAX_FEED_BYTES:
        raise ModelError(f"input '{t.name}' would be {format_shape(shape)} {t.dtype} = {_gib(size)}, over the "
                         f"{_gib(MAX_FEED_BYTES)} ortop synthesises; check --dim/--shape/--batch, or feed a file "
                         "with --input")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n < 2**40 else f"{n / 2**40:.2f} TiB"


def _load_npy(t: TensorInfo, path: str, explicit: Sequence[int] | None, notes: list[str]) -> np.ndarray:
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelError(f"--input {t.name}: file not found: {path}") from None
    except OSError as exc:
        raise ModelError(f"--input {t.name}: cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelError(f"--input {t.name}: {path} is a directory, not a .npy file")
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(f"--input {t.name}: {path} is not a regular file (a pipe or a device?); save the array "
                         "with np.save")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic.startswith(b"PK"):
        raise ModelError(f"--input {t.name}: {path} holds several arrays (.npz); save one array with np.save")
    if magic != b"\x93NUMPY":
        raise ModelError(f"--input {t.name}: {path} is not a .npy file (save the array with np.save)")
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise ModelError(f"--input {t.name}: cannot read {path} as .npy ({first_line(exc)})") from None
    if not isinstance(arr, np.ndarray):
        raise ModelError(f"--input {t.name}: {path} holds several arrays (.npz); save one array with np.save")
    if explicit is not None and tuple(int(n) for n in explicit) != arr.shape:
        raise ModelError(f"--input {t.name}: {path} has shape {format_shape(arr.shape)}, "
                         f"but --shape says {format_shape(tuple(explicit))}")
    _check_shape(t, arr.shape, "--input")
    want = numpy_dtype(t.dtype)
    if arr.dtype != want:
        try:
            if t.dtype == "string":
                arr = arr.astype(str).astype(object)
            else:
                arr = arr.astype(want)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"--input {t.name}: cannot convert {arr.dtype} data to {t.dtype} "
                             f"({first_line(exc)})") from None
        notes.append(f"input '{t.name}': {os.path.basename(path)} converted to {t.dtype}")
    return np.ascontiguousarray(arr) if t.dtype != "string" else arr


def _constant(t: TensorInfo, shape: tuple[int, ...], value: float) -> np.ndarray:
    dt = numpy_dtype(t.dtype)
    if t.dtype == "string":
        return np.full(shape, f"{value:g}" if isinstance(value, float) else str(value), dtype=object)
    if t.dtype == "bool":
        return np.full(shape, bool(value), dtype=dt)
    if t.dtype in INT_NAMES:
        v = float(value)
        if not np.isfinite(v) or v != int(v):
            raise ModelError(f"--value {t.name}={value}: input '{t.name}' is {t.dtype}; give a whole number")
        info = np.iinfo(dt) if dt.kind in "iu" else None
        if info is not None and not info.min <= int(v) <= info.max:
            raise ModelError(f"--value {t.name}={value}: out of range for {t.dtype} ({info.min}..{info.max})")
        return np.full(shape, int(v), dtype=dt)
    return np.full(shape, value, dtype=np.float64).astype(dt)


def _random(t: TensorInfo, shape: tuple[int, ...], rng: np.random.Generator, bound: int | None,
            notes: list[str]) -> np.ndarray:
    """Seeded data that is never all zeros and, for ids, inside the table they index."""
    dt = numpy_dtype(t.dtype)
    size = int(np.prod(shape, dtype=np.int64))
    if t.dtype == "string":
        words = np.array([f"ortop{i}" for i in rng.integers(0, 1000, size=size)], dtype=object)
        return words.reshape(shape)
    if t.dtype == "bool":
        arr = rng.random(size) < 0.5
        if size:
            arr[0] = True
        return arr.reshape(shape)
    if t.dtype in INT_NAMES:
        lo, hi = 1, 10
        if bound is not None:
            lo, hi = (1, bound) if bound > 1 else (0, max(bound, 1))
            notes.append(f"input '{t.name}' drawn from [{lo}, {hi}) (size of the table it indexes)")
        if dt.kind in "iu":
            info = np.iinfo(dt)
            lo, hi = max(lo, int(info.min)), min(hi, int(info.max) + 1)
            return rng.integers(lo, hi, size=shape, dtype=dt)
        return rng.integers(lo, min(hi, 8), size=shape).astype(dt)  # int4/int2 via ml_dtypes
    if dt.kind == "c":
        return (rng.uniform(-1, 1, size=shape) + 1j * rng.uniform(-1, 1, size=shape)).astype(dt)
    low = 0.5 if "e8m0" in t.dtype else -1.0  # float8e8m0 holds powers of two only, no sign
    arr = rng.uniform(low, 1.0, size=size).astype(np.float32).astype(dt)
    if size and not np.any(arr.astype(np.float32)):
        arr[0] = 0.5
    return arr.reshape(shape)


def _dtype_name(arr: np.ndarray) -> str:
    return "string" if arr.dtype == object or arr.dtype.kind in "US" else str(arr.dtype)


def describe_feeds(feeds: Mapping[str, np.ndarray]) -> list[str]:
    """One line per feed, e.g. ``x: float32[1x3x224x224]`` (``[]`` for a scalar)."""
    return [f"{name}: {_dtype_name(a)}[{'x'.join(str(n) for n in a.shape)}]" for name, a in feeds.items()]


