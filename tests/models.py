"""Small ONNX models built with ``onnx.helper`` for tests, each written to a path and returning that path.

Import them as ``from tests.models import make_matmul_model``. ``tests/`` is a package (it has an empty
``__init__.py``), so pytest's default import mode puts the repository root on ``sys.path`` and ``tests.models``
resolves the same way under ``pytest`` and ``python -m pytest``, from any working directory.

Every model is saved with ``ir_version=IR_VERSION`` (10): onnx 1.23 stamps IR 14 by default, which onnxruntime
1.31 refuses ("max supported IR version: 13"). Dimensions in ``shape`` arguments are ints (fixed), strs
(symbolic names) or None (a dim with neither value nor name).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10
OPSET = 17

# numpy-style dtype name (as ortop.model reports them) -> ONNX element type
DTYPES: dict[str, int] = {
    "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
    "float64": TensorProto.DOUBLE, "int8": TensorProto.INT8, "int16": TensorProto.INT16,
    "int32": TensorProto.INT32, "int64": TensorProto.INT64, "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL, "string": TensorProto.STRING,
}

Dim = int | str | None


def _vi(name: str, dtype: str | int, shape: Sequence[Dim] | None) -> onnx.ValueInfoProto:
    elem = DTYPES[dtype] if isinstance(dtype, str) else dtype
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def save(model: onnx.ModelProto, path: str | os.PathLike) -> str:
    """Write ``model`` to ``path`` (no checker: some test models are deliberately odd) and return the path."""
    path = os.fspath(path)
    onnx.save(model, path)
    return path


def model_of(nodes: Sequence[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
             outputs: Sequence[onnx.ValueInfoProto], initializers: Sequence[onnx.TensorProto] = (), *,
             ir_version: int = IR_VERSION, opset: int = OPSET, extra_opsets: dict[str, int] | None = None,
             name: str = "test") -> onnx.ModelProto:
    """A ModelProto around one graph, stamped with a version onnxruntime reads."""
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version, producer_name="ortop-tests",
                             producer_version="1")


def make_identity_model(path: str | os.PathLike, dtype: str = "float32",
                        shape: Sequence[Dim] | None = ("N", 3)) -> str:
    """x -> Identity -> y, both of ``dtype`` and ``shape``: checks a feed of that type is accepted as is."""
    node = helper.make_node("Identity", ["x"], ["y"])
    return save(model_of([node], [_vi("x", dtype, shape)], [_vi("y", dtype, shape)]), path)


def make_cast_model(path: str | os.PathLike, dtype: str, to: str = "float32",
                    shape: Sequence[Dim] = ("N", 3)) -> str:
    """x (``dtype``) -> Cast(to) -> y: for types onnxruntime takes as inputs but can't pass through Identity."""
    node = helper.make_node("Cast", ["x"], ["y"], to=DTYPES[to])
    return save(model_of([node], [_vi("x", dtype, shape)], [_vi("y", to, shape)]), path)


def make_matmul_model(path: str | os.PathLike, n: int = 64, batch: Dim = "batch", seed: int = 0) -> str:
    """x [batch, n] @ W [n, n] + b -> Relu -> y [batch, n]; W, b random initializers. A cheap compute model."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), "W")
    b = numpy_helper.from_array(np.zeros(n, np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
             helper.make_node("Relu", ["z"], ["y"])]
    return save(model_of(nodes, [_vi("x", "float32", [batch, n])], [_vi("y", "float32", [batch, n])], [w, b]), path)


def make_gather_model(path: str | os.PathLike, table_rows: int, dim: int = 4, ids_dtype: str = "int64",
                      ids_shape: Sequence[Dim] = ("batch", "seq"), via: Sequence[str] = ()) -> str:
    """An embedding lookup: Gather(table[table_rows, dim], ids) -> y. Ids outside [0, table_rows) make ORT fail.

    ``via`` inserts ops between the input and the Gather's indices, e.g. ``("Cast", "Identity")``; a Cast goes
    to int64.
    """
    table = numpy_helper.from_array(np.arange(table_rows * dim, dtype=np.float32).reshape(table_rows, dim), "table")
    nodes, cur = [], "ids"
    for i, op in enumerate(via):
        out = f"ids_{i}"
        nodes.append(helper.make_node(op, [cur], [out], **({"to": TensorProto.INT64} if op == "Cast" else {})))
        cur = out
    nodes.append(helper.make_node("Gather", ["table", cur], ["y"], axis=0))
    out_shape = [*ids_shape, dim]
    return save(model_of(nodes, [_vi("ids", ids_dtype, ids_shape)], [_vi("y", "float32", out_shape)], [table]), path)


def make_bert_like_model(path: str | os.PathLike, vocab: int = 30, types: int = 2, hidden: int = 8) -> str:
    """input_ids, token_type_ids (two Gathers, tables of ``vocab`` and ``types`` rows) and an int64
    attention_mask, summed into y [batch, seq, hidden]."""
    rng = np.random.default_rng(0)
    word = numpy_helper.from_array(rng.standard_normal((vocab, hidden)).astype(np.float32), "word")
    tok = numpy_helper.from_array(rng.standard_normal((types, hidden)).astype(np.float32), "tok")
    nodes = [
        helper.make_node("Gather", ["word", "input_ids"], ["we"]),
        helper.make_node("Gather", ["tok", "token_type_ids"], ["te"]),
        helper.make_node("Add", ["we", "te"], ["e"]),
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axis"], ["m3"]),
        helper.make_node("Mul", ["e", "m3"], ["y"]),
    ]
    axis = numpy_helper.from_array(np.array([-1], np.int64), "axis")
    ins = [_vi(n, "int64", ["batch", "seq"]) for n in ("input_ids", "token_type_ids", "attention_mask")]
    return save(model_of(nodes, ins, [_vi("y", "float32", ["batch", "seq", hidden])], [word, tok, axis]), path)


def make_if_model(path: str | os.PathLike) -> str:
    """cond (bool scalar), x [N] float -> If(cond) { Add(x, x) ; Mul(x, x) followed by Neg } -> y.

    The branches hold three nodes, counted in the op histogram besides the If itself.
    """
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [],
                               [_vi("t", "float32", ["N"])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e0"]), helper.make_node("Neg", ["e0"], ["e"])],
                               "else", [], [_vi("e", "float32", ["N"])])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    ins = [_vi("cond", "bool", []), _vi("x", "float32", ["N"])]
    return save(model_of([node], ins, [_vi("y", "float32", ["N"])]), path)


def make_initializer_input_model(path: str | os.PathLike, ir_version: int = IR_VERSION) -> str:
    """x [2, 3] + B -> y, where initializer B [2, 3] is also listed as a graph input (the IR < 4 convention)."""
    b = numpy_helper.from_array(np.ones((2, 3), np.float32), "B")
    node = helper.make_node("Add", ["x", "B"], ["y"])
    ins = [_vi("x", "float32", [2, 3]), _vi("B", "float32", [2, 3])]
    return save(model_of([node], ins, [_vi("y", "float32", [2, 3])], [b], ir_version=ir_version), path)


def make_add_model(path: str | os.PathLike, a_shape: Sequence[Dim] | None, b_shape: Sequence[Dim] | None,
                   dtype: str = "float32") -> str:
    """a + b -> y, with the given (possibly symbolic, unnamed or unknown-rank) input shapes."""
    node = helper.make_node("Add", ["a", "b"], ["y"])
    return save(model_of([node], [_vi("a", dtype, a_shape), _vi("b", dtype, b_shape)], [_vi("y", dtype, None)]),
                path)


def make_conv_model(path: str | os.PathLike, channels: int = 3, out_channels: int = 4,
                    shape: Sequence[Dim] = ("batch", 3, "height", "width")) -> str:
    """x [batch, channels, height, width] -> Conv 3x3 (pads 1) -> Relu -> y: an image model whose spatial dims are
    free, so ortop leaves them at 1 unless told (``--dim height=… --dim width=…``)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((out_channels, channels, 3, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(np.zeros(out_channels, np.float32), "B")
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    out = [shape[0], out_channels, shape[2], shape[3]]
    return save(model_of(nodes, [_vi("x", "float32", shape)], [_vi("y", "float32", out)], [w, b]), path)


def make_chained_activations_model(path: str | os.PathLike, n: int = 6, mb: int = 32) -> str:
    """``n`` elementwise nodes in a chain, each making an activation of ``mb`` MB (float32), each adding the
    input again so no node can work in place on its input: what the CPU arena and the memory pattern are about
    (arena on keeps the activations' memory after a run; the pattern plans them as one block)."""
    elems = mb * 2 ** 20 // 4
    nodes = []
    prev = "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"a{i}"
        nodes.append(helper.make_node("Add" if i % 2 == 0 else "Mul", [prev, "x"], [out], name=f"n{i}"))
        prev = out
    return save(model_of(nodes, [_vi("x", "float32", [elems])], [_vi("y", "float32", [elems])],
                         name="chained"), path)


def make_slow_model(path: str | os.PathLike, batch: int = 512, n: int = 2048) -> str:
    """A model that runs about ten times a second on one thread of this kind of host (x [512, 2048] @ W [2048, 2048],
    ~2 GFLOP a run; 18 runs/s at batch 256 here): the pace of a text-line recognizer on wide lines or a detector at
    full size, where a figure sized in seconds for a fast model holds a handful of runs."""
    return make_matmul_model(path, n=n, batch=batch)
