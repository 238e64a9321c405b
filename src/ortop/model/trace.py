"""Trace replay: requests read from a JSON-lines file, one per line, replayed at their recorded times.

A line is ``{"t": seconds since the first request}`` with at most one of ``"dims": {symbol: size}``,
``"shapes": {input: [dims]}`` or ``"inputs": {input: "file.npy"}`` (paths relative to the trace). Strict like
profiles: an unknown key, ``t`` going backwards, a value of the wrong type or a name the model does not have is
one error naming the file and line (exit 2).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortop.model.inspect import ModelError
from ortop.model.mixes import Variant

KEYS = ("t", "dims", "shapes", "inputs")
MAX_LINES = 10_000_000


@dataclass(frozen=True)
class Trace:
    """The requests of a trace: arrival times (s, from 0), each request's shape index, the distinct shapes."""

    path: str
    times: np.ndarray
    ids: np.ndarray
    variants: tuple[Variant, ...]
    loop: bool = False
    counts: dict[int, int] = field(default_factory=dict)

    @property
    def rate_hz(self) -> float:
        """The trace's mean rate as recorded (requests per second)."""
        span = float(self.times[-1] - self.times[0]) if len(self.times) else 0.0
        return (len(self.times) - 1) / span if span > 0 else float(len(self.times))

    @property
    def duration_s(self) -> float:
        return float(self.times[-1]) if len(self.times) else 0.0

    def shape_chunks(self) -> Iterator[np.ndarray]:
        """The shape index of each request, in order (repeated when the trace loops)."""
        while True:
            yield self.ids
            if not self.loop:
                return

    def looped(self) -> Trace:
        return Trace(self.path, self.times, self.ids, self.variants, True, self.counts)


def _fail(path: str, line: int, why: str) -> ModelError:
    return ModelError(f"{path}:{line}: {why}")


def _names(kind: str, value: Any, path: str, line: int, known: list[str]) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise _fail(path, line, f"{kind!r} must be a non-empty object")
    for name in value:
        if name not in known:
            raise _fail(path, line, f"{kind}: {name!r} is not one of the model's "
                        f"{'free dims' if kind == 'dims' else 'inputs'} ({', '.join(known) or 'none'})")
    return value


def _positive_int(v: Any, path: str, line: int, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _fail(path, line, f"{what}: {v!r} must be a whole number >= 1")
    return v


def load(path: str, info: Any) -> Trace:
    """Read and check a trace against the model (``info``: its ModelInfo); ModelError naming the line if bad."""
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    base = os.path.dirname(os.path.abspath(path))
    inputs = [t.name for t in info.inputs]
    free = list(info.free_dims)
    times: list[float] = []
    ids: list[int] = []
    index: dict[tuple, int] = {}
    variants: list[Variant] = []
    with fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            if len(times) >= MAX_LINES:
                raise _fail(path, n, f"more than {MAX_LINES} requests")
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise _fail(path, n, f"not JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise _fail(path, n, "a line must be a JSON object")
            unknown = [k for k in obj if k not in KEYS]
            if unknown:
                raise _fail(path, n, f"unknown key {unknown[0]!r} (keys: {', '.join(KEYS)})")
            t = obj.get("t")
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
                raise _fail(path, n, "'t' (seconds since the first request) must be a number >= 0")
            if times and t < times[-1]:
                raise _fail(path, n, f"'t' goes backwards ({t} after {times[-1]})")
            given = [k for k in ("dims", "shapes", "inputs") if k in obj]
            if len(given) > 1:
                raise _fail(path, n, f"give one of dims, shapes or inputs, not {' and '.join(given)}")
            dims: dict[str, int] = {}
            shapes: dict[str, tuple[int, ...]] = {}
            files: dict[str, str] = {}
            if "dims" in obj:
                for k, v in _names("dims", obj["dims"], path, n, free).items():
                    dims[k] = _positive_int(v, path, n, f"dims {k}")
            elif "shapes" in obj:
                for k, v in _names("shapes", obj["shapes"], path, n, inputs).items():
                    if not isinstance(v, list) or not v:
                        raise _fail(path, n, f"shapes {k}: a list of dims, e.g. [1, 3, 224, 224]")
                    shapes[k] = tuple(_positive_int(d, path, n, f"shapes {k}") for d in v)
            elif "inputs" in obj:
                for k, v in _names("inputs", obj["inputs"], path, n, inputs).items():
                    if not isinstance(v, str):
                        raise _fail(path, n, f"inputs {k}: a .npy path")
                    full = v if os.path.isabs(v) else os.path.join(base, v)
                    if not os.path.isfile(full):
                        raise _fail(path, n, f"inputs {k}: no such file {full}")
                    files[k] = full
            key = (tuple(sorted(dims.items())), tuple(sorted(shapes.items())), tuple(sorted(files.items())))
            if key not in index:
                index[key] = len(variants)
                variants.append(Variant(dims, shapes, 1.0, files))
            times.append(float(t))
            ids.append(index[key])
    if not times:
        raise ModelError(f"{path}: the trace has no requests")
    arr = np.asarray(ids, dtype=np.int64)
    counts = {int(k): int(c) for k, c in zip(*np.unique(arr, return_counts=True))}
    return Trace(os.path.abspath(path), np.asarray(times, dtype=np.float64), arr, tuple(variants), False, counts)
