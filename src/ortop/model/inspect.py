"""What ortop knows about a model before running it: its inputs and outputs, ops, size, and the feeds to drive it.

Everything here reads the ONNX protobuf (``onnx.load(..., load_external_data=False)``), never an onnxruntime
session: the parent process and ``ortop info`` stay fast even for multi-GB models, and a bad file is reported as one
clear line (:class:`ModelError`) instead of an onnxruntime traceback from inside the worker. onnxruntime is imported
lazily, and only to ask it which IR version it reads when its version is not one measured here.

Feeds are synthesized so that a model runs without the user preparing data: random but seeded (so two runs of a
configuration see the same data), never all zeros (zeros make some kernels take fast paths), integer ids kept inside
the embedding tables they index (out-of-range ids make Gather fail), and masks filled with ones.

Over ~500 lines: reading a model (graph walk, tensor sizes, gather bounds, IR/opset limits) is one concern;
the feeds are in :mod:`ortop.model.feeds`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from ortop.errors import OrtopError
from ortop.present import size_text

_EMPTY: Mapping[str, Any] = MappingProxyType({})

# ONNX TensorProto element type -> the numpy-style name ortop shows and accepts. Types outside this table (new
# low-precision formats) get their TensorProto name lower-cased.
_ELEM_NAMES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128", 16: "bfloat16",
}
# Bits per element, for initializer sizes that are not stored as raw bytes (sub-byte types pack).
_ELEM_BITS: dict[int, int] = {
    1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64, 15: 128, 16: 16,
    17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8, 25: 2, 26: 2, 27: 6, 28: 6,
}
INT_NAMES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int4", "uint4", "int2",
              "uint2"}
_FLOAT_NAMES = {"float16", "float32", "float64", "bfloat16"}
NON_TENSOR = {"sequence", "map", "optional", "sparse_tensor", "opaque", "undefined"}

# Ops whose output holds the same integer values as their data input (input 0), so ids flow through them unchanged.
_PASSTHROUGH = {"Cast", "Unsqueeze", "Reshape", "Squeeze", "Identity", "Flatten"}
_GATHERS = {"Gather", "GatherElements", "GatherND"}
_CONTROL_FLOW = {"If", "Loop", "Scan"}
MASK_RE = re.compile(r"mask", re.IGNORECASE)

# onnxruntime (major, minor) -> the highest model IR version it loads, measured by loading models of each IR
# version (onnxruntime-gpu 1.31.1 loads IR 13 and refuses 14 with "max supported IR version: 13"). Versions not
# listed are asked at run time (:func:`_probe_max_ir`); a newer onnxruntime reads at least what an older one does.
_MEASURED_MAX_IR: dict[tuple[int, int], int] = {(1, 31): 13}
# onnxruntime (major, minor) -> the highest ai.onnx opset it builds a session for, measured the same way (1.31.1
# runs opset 26 and refuses 27 "Current official support for domain ai.onnx is till opset 26"). Versions not
# listed are not checked here: their build error reaches the user from the worker.
_MEASURED_MAX_OPSET: dict[tuple[int, int], int] = {(1, 31): 26}
_ORT_DISTRIBUTIONS = ("onnxruntime-gpu", "onnxruntime", "onnxruntime-directml", "onnxruntime-openvino",
                      "onnxruntime-qnn", "onnxruntime-training", "ort-nightly-gpu", "ort-nightly")


class ModelError(OrtopError):
    """A problem with the model or the requested feeds, as one user-facing line (no traceback needed)."""


@dataclass(frozen=True)
class TensorInfo:
    """One graph input or output as declared in the model.

    ``dtype`` is numpy-style ("float32", "int64", "bool", "string", ...), or for a non-tensor value one of
    "sequence", "map", "optional", "sparse_tensor". ``shape`` entries are ints (fixed), strs (symbolic names) or
    None (unnamed); ``shape`` itself is None when the model does not declare the rank at all.
    """

    name: str
    dtype: str
    shape: tuple | None


@dataclass(frozen=True)
class ModelInfo:
    """A summary of one .onnx file; see :func:`load_model`."""

    path: str
    ir_version: int
    opsets: dict[str, int]
    producer: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    initializer_inputs: tuple[str, ...]
    op_histogram: dict[str, int]
    control_flow: tuple[str, ...]
    num_nodes: int
    num_initializers: int
    param_bytes: int                  # initializers plus Constant-node tensors
    free_dims: tuple[str, ...]
    gather_bounds: dict[str, int]


# ---- loading ---------------------------------------------------------------------------------------------------
def load_model(path: str | os.PathLike) -> ModelInfo:
    """Read ``path`` and summarize it, or raise :class:`ModelError` with one line saying what is wrong.

    External data is not loaded (only checked to exist), and onnx.checker is not run: it is slow on big models and
    stricter than onnxruntime, so it would refuse models that run fine.
    """
    import stat

    import onnx
    from google.protobuf.message import DecodeError

    path = os.fspath(path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # onnxruntime takes paths as UTF-8 strings: such a name fails deep in its bindings
        raise ModelError(f"the model's file name {path.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8, "
                         "which onnxruntime cannot open: rename the file") from None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelError(f"model file not found: {path}") from None
    except OSError as exc:  # a symlink loop, a name too long, no permission on a folder
        raise ModelError(f"cannot read the model {path}: {exc.strerror or first_line(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ModelError(f"{path} is a directory, not an .onnx file")
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block open() forever; a device never ends
        raise ModelError(f"{path} is not a regular file (a pipe or a device?); give ortop an .onnx file")
    try:
        size = os.path.getsize(path)
        proto = onnx.load(path, format="protobuf", load_external_data=False)
    except DecodeError as exc:
        raise ModelError(f"{path} is not a valid ONNX model ({first_line(exc) or 'protobuf decode error'})") from None
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or first_line(exc)}") from None
    except Exception as exc:  # protobuf size limits, odd encodings: never a traceback
        raise ModelError(f"{path} is not a valid ONNX model ({type(exc).__name__}: {first_line(exc)})") from None
    if size == 0:
        raise ModelError(f"{path} is not a valid ONNX model (empty file)")
    if not proto.HasField("graph"):
        raise ModelError(f"{path} is not a valid ONNX model (no graph in it; truncated or not an ONNX file?)")
    if proto.ir_version <= 0:
        raise ModelError(f"{path} is not a valid ONNX model (no IR version; truncated or not an ONNX file?)")
    try:
        info = _summarize(path, proto)
        missing = _missing_external_data(path, proto.graph)
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"{path}: could not read the model's graph ({type(exc).__name__}: {first_line(exc)})") \
            from None
    if missing:
        raise ModelError(f"{path} keeps weights in an external data file that is missing: {missing}")
    check_ir_supported(info)
    return info


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _summarize(path: str, proto: Any) -> ModelInfo:
    graph = proto.graph
    graphs = list(walk_graphs(graph))
    nodes = [n for g in graphs for n in g.node]
    init_names = {t.name for t in graph.initializer}

    inputs = tuple(_tensor_info(v) for v in graph.input if v.name not in init_names)
    init_inputs = tuple(v.name for v in graph.input if v.name in init_names)
    outputs = tuple(_tensor_info(v) for v in graph.output)

    hist = Counter(n.op_type for n in nodes)
    op_histogram = dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))
    control_flow = tuple(sorted(op for op in hist if op in _CONTROL_FLOW))

    initializers = [t for g in graphs for t in g.initializer]
    sparse = [s for g in graphs for s in g.sparse_initializer]
    param_bytes = sum(_tensor_bytes(t) for t in initializers)
    param_bytes += sum(_tensor_bytes(s.values) + _tensor_bytes(s.indices) for s in sparse)
    # Some exporters (paddle2onnx, older tf2onnx) keep every weight in a Constant node, not an initializer; those
    # bytes are the model's parameters all the same.
    param_bytes += sum(_tensor_bytes(a.t) for n in nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx")
                       for a in n.attribute if a.name == "value" and a.HasField("t"))

    free: set[str] = set()
    for t in inputs:
        for axis, d in enumerate(t.shape or ()):
            if isinstance(d, str):
                free.add(d)
            elif d is None:
                free.add(f"{t.name}[{axis}]")

    opsets = {(o.domain or "ai.onnx"): int(o.version) for o in proto.opset_import}
    producer = f"{proto.producer_name} {proto.producer_version}".strip()
    return ModelInfo(
        path=path,
        ir_version=int(proto.ir_version),
        opsets=opsets,
        producer=producer,
        inputs=inputs,
        outputs=outputs,
        initializer_inputs=init_inputs,
        op_histogram=op_histogram,
        control_flow=control_flow,
        num_nodes=len(nodes),
        num_initializers=len(initializers) + len(sparse),
        param_bytes=int(param_bytes),
        free_dims=tuple(sorted(free)),
        gather_bounds=_gather_bounds(inputs, graphs, nodes),
    )


def walk_graphs(graph: Any) -> Iterator[Any]:
    """The graph and every subgraph (If branches, Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from walk_graphs(attr.g)
            for sub in attr.graphs:
                yield from walk_graphs(sub)


def _tensor_info(value_info: Any) -> TensorInfo:
    t = value_info.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        names = {"sequence_type": "sequence", "map_type": "map", "optional_type": "optional",
                 "sparse_tensor_type": "sparse_tensor", "opaque_type": "opaque"}
        return TensorInfo(value_info.name, names.get(kind or "", "undefined"), ())
    tt = t.tensor_type
    if not tt.HasField("shape"):
        shape: tuple | None = None
    else:
        dims: list[int | str | None] = []
        for d in tt.shape.dim:
            which = d.WhichOneof("value")
            if which == "dim_value" and d.dim_value >= 0:
                dims.append(int(d.dim_value))
            elif which == "dim_param" and d.dim_param.strip() not in ("", "?"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        shape = tuple(dims)
    return TensorInfo(value_info.name, _elem_name(tt.elem_type), shape)


def _elem_name(elem_type: int) -> str:
    if elem_type in _ELEM_NAMES:
        return _ELEM_NAMES[elem_type]
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return "undefined"


def _tensor_bytes(t: Any) -> int:
    """Bytes one initializer takes: its raw bytes, its external length, or dims x element size."""
    if t.raw_data:
        return len(t.raw_data)
    if t.data_location == 1:  # EXTERNAL
        for entry in t.external_data:
            if entry.key == "length" and entry.value.isdigit():
                return int(entry.value)
    if t.data_type == 8:  # STRING
        return sum(len(s) for s in t.string_data)
    n = 1
    for d in t.dims:
        n *= int(d)
    return (n * _ELEM_BITS.get(t.data_type, 8) + 7) // 8


def _missing_external_data(path: str, graph: Any) -> str:
    """The first external data file the model names that does not exist next to it ("" when all are there)."""
    base = os.path.dirname(os.path.abspath(path))
    seen: set[str] = set()
    for g in walk_graphs(graph):
        for t in g.initializer:
            if t.data_location != 1:
                continue
            for entry in t.external_data:
                if entry.key == "location" and entry.value not in seen:
                    seen.add(entry.value)
                    if not os.path.isfile(os.path.join(base, entry.value)):
                        return entry.value
    return ""


# ---- which integer inputs index a table ---------------------------------------------------------------------------
def _gather_bounds(inputs: Sequence[TensorInfo], graphs: Sequence[Any], nodes: Sequence[Any]) -> dict[str, int]:
    """Integer inputs used as Gather indices into a constant table -> the table's size on the gathered axis.

    Ids follow Cast/Unsqueeze/Reshape/Squeeze/Identity/Flatten chains; with several tables the smallest wins, so
    the generated ids are valid for every one of them. Subgraph nodes count (they see the outer inputs).
    """
    from onnx import helper

    tables: dict[str, tuple[int, ...]] = {}
    for g in graphs:
        for t in g.initializer:
            tables[t.name] = tuple(int(d) for d in t.dims)
    for n in nodes:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output:
            for a in n.attribute:
                if a.name == "value" and a.HasField("t"):
                    tables[n.output[0]] = tuple(int(d) for d in a.t.dims)
                elif a.name in ("value_ints", "value_floats"):
                    tables[n.output[0]] = (len(helper.get_attribute_value(a)),)

    consumers: dict[str, list[tuple[Any, int]]] = {}
    for n in nodes:
        for i, name in enumerate(n.input):
            if name:
                consumers.setdefault(name, []).append((n, i))

    def attr(node: Any, name: str, default: int) -> int:
        for a in node.attribute:
            if a.name == name:
                return int(a.i)
        return default

    def bound_of(node: Any, index: int) -> int | None:
        op = node.op_type
        if op in _GATHERS and index == 1 and node.domain in ("", "ai.onnx"):
            dims = tables.get(node.input[0])
            if not dims:
                return None
            if op == "GatherND":  # each index column addresses one of the dims after batch_dims
                rest = dims[attr(node, "batch_dims", 0):]
                return min(rest) if rest else None
            axis = attr(node, "axis", 0)
            axis = axis + len(dims) if axis < 0 else axis
            return dims[axis] if 0 <= axis < len(dims) else None
        if op == "EmbedLayerNormalization" and node.domain == "com.microsoft":
            # input_ids -> word_embedding, segment_ids -> segment_embedding, position_ids -> position_embedding
            table_of = {0: 2, 1: 4, 8: 3}
            if index in table_of and len(node.input) > table_of[index]:
                dims = tables.get(node.input[table_of[index]])
                return dims[0] if dims else None
        return None

    bounds: dict[str, int] = {}
    for t in inputs:
        if t.dtype not in INT_NAMES:
            continue
        found: list[int] = []
        todo, seen = [t.name], {t.name}
        while todo:
            name = todo.pop()
            for node, index in consumers.get(name, ()):
                b = bound_of(node, index)
                if b is not None:
                    found.append(b)
                elif node.op_type in _PASSTHROUGH and index == 0 and node.output and node.output[0] not in seen:
                    seen.add(node.output[0])
                    todo.append(node.output[0])
        if found:
            bounds[t.name] = min(found)
    return bounds


# ---- IR version support --------------------------------------------------------------------------------------------
def _ort_version() -> str | None:
    """The installed onnxruntime's version, from package metadata (importing onnxruntime takes a while)."""
    from importlib import metadata

    for dist in _ORT_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _version_tuple(version: str) -> tuple[int, int]:
    parts = re.findall(r"\d+", version)
    return (int(parts[0]) if parts else 0, int(parts[1]) if len(parts) > 1 else 0)


@lru_cache(maxsize=1)
def _probe_max_ir() -> int | None:
    """Ask onnxruntime, in a child interpreter, which IR version it reads; None when it can't tell.

    The question needs an onnxruntime session, and only the runtime room imports onnxruntime: a child process
    (``python -m ortop.runtime.probe``) keeps this module free of it and costs nothing unless the installed version
    is not in :data:`_MEASURED_MAX_IR`.
    """
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, "-m", "ortop.runtime.probe", "max-ir"], capture_output=True,
                             text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return int(text) if out.returncode == 0 and text.isdigit() else None


def _max_ir(version: str, model_ir: int) -> int | None:
    """The highest IR the installed onnxruntime reads, without importing it when the measured table answers."""
    key = _version_tuple(version)
    if key in _MEASURED_MAX_IR:
        return _MEASURED_MAX_IR[key]
    known_floor = max((ir for v, ir in _MEASURED_MAX_IR.items() if v <= key), default=0)
    if model_ir <= known_floor:
        return known_floor
    return _probe_max_ir()


def check_ir_supported(info: ModelInfo) -> None:
    """Raise :class:`ModelError` when the installed onnxruntime can't read the model's IR version.

    Saving with a recent onnx stamps its newest IR version on the file even when the graph uses nothing new, and
    onnxruntime then refuses it with an error that doesn't say what to do; this says it up front.
    """
    version = _ort_version()
    if version is None:
        return
    name = os.path.basename(info.path) or info.path
    opset = info.opsets.get("ai.onnx")
    max_opset = _MEASURED_MAX_OPSET.get(_version_tuple(version))
    if opset is not None and max_opset is not None and opset > max_opset:
        raise ModelError(
            f"{name} uses opset {opset} of ai.onnx but the installed onnxruntime {version} runs up to opset "
            f"{max_opset}: upgrade onnxruntime, or convert the model to opset {max_opset} "
            f"(onnx.version_converter.convert_version(model, {max_opset}))"
        )
    max_ir = _max_ir(version, info.ir_version)
    if max_ir is None or info.ir_version <= max_ir:
        return
    raise ModelError(
        f"{name} has IR version {info.ir_version} but the installed onnxruntime {version} reads up to IR {max_ir}: "
        f"upgrade onnxruntime, or re-save the model with an older IR version "
        f"(model.ir_version = {max_ir}; onnx.save(model, path))"
    )


# ---- text ----------------------------------------------------------------------------------------------------------
def parse_shape(text: str) -> tuple[int, ...]:
    """"1x3x224x224", "1,3,224,224" or "[1, 3, 224, 224]" -> (1, 3, 224, 224); every dim a positive integer."""
    body = text.strip().strip("[]()").strip()
    parts = [p.strip() for p in re.split(r"[xX,]", body)] if body else []
    if not parts or not all(re.fullmatch(r"\+?\d+", p) for p in parts):
        raise ModelError(f"bad shape {text!r}: expected dims like 1x3x224x224 or 1,3,224,224")
    shape = tuple(int(p) for p in parts)
    if any(n <= 0 for n in shape):
        raise ModelError(f"bad shape {text!r}: every dimension must be >= 1")
    return shape


def format_shape(shape: Sequence[int | str | None] | None) -> str:
    """A declared or concrete shape as text: ``1x3xNx?``; "?" for an unnamed dim, "[]" for a scalar."""
    if shape is None:
        return "(unknown rank)"
    if len(shape) == 0:
        return "[]"
    return "x".join("?" if d is None else str(d) for d in shape)




def format_info(info: ModelInfo) -> str:
    """The human-readable ``ortop info`` report."""
    def tensor(t: TensorInfo) -> str:
        if t.dtype in NON_TENSOR:
            return f"  {t.name}: {t.dtype}"
        return f"  {t.name}: {t.dtype}[{'' if t.shape == () else format_shape(t.shape)}]"

    lines = [
        f"model       {info.path}",
        f"format      IR {info.ir_version}, opsets " + ", ".join(f"{d} {v}" for d, v in info.opsets.items()),
    ]
    if info.producer:
        lines.append(f"producer    {info.producer}")
    lines.append(f"params      {info.num_initializers} initializers, {size_text(info.param_bytes)}")
    lines.append(f"inputs      {len(info.inputs)}")
    for t in info.inputs:
        bound = info.gather_bounds.get(t.name)
        lines.append(tensor(t) + (f"  (ids < {bound})" if bound is not None else ""))
    if info.initializer_inputs:
        lines.append(f"  (also listed as inputs, fed from initializers: {', '.join(info.initializer_inputs)})")
    lines.append(f"outputs     {len(info.outputs)}")
    lines.extend(tensor(t) for t in info.outputs)
    if info.free_dims:
        lines.append(f"free dims   {', '.join(info.free_dims)}")
    lines.append(f"nodes       {info.num_nodes}" + (f" (control flow: {', '.join(info.control_flow)})"
                                                    if info.control_flow else ""))
    top = list(info.op_histogram.items())
    shown = ", ".join(f"{op} {n}" for op, n in top[:12]) + (f", +{len(top) - 12} more" if len(top) > 12 else "")
    lines.append(f"ops         {shown}")
    return "\n".join(lines)
