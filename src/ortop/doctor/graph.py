"""What the doctor reads from the graph itself, beyond :class:`ortop.model.ModelInfo`: Transpose chains, and a
corrected copy of a model whose initializers are listed as graph inputs (``ortop doctor MODEL --fix-model OUT``).

Models converted from TensorFlow (tf2onnx, NHWC) often wrap every convolution in NHWC→NCHW and NCHW→NHWC
Transposes. ORT's transpose optimizer cancels many of them, but not across every op; those left cost a full copy of
the tensor each. A *chain* here is a Transpose whose output reaches another Transpose through nothing but
elementwise ops (a layout boundary crossed twice).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ortop.errors import UsageError

# Ops a layout change passes through unchanged (elementwise, one output): a Transpose on either side of them
# could cancel with another.
_ELEMENTWISE = frozenset({
    "Abs", "Add", "Cast", "Clip", "Div", "Elu", "Erf", "Exp", "HardSigmoid", "HardSwish", "Identity", "LeakyRelu",
    "Log", "Max", "Min", "Mul", "Neg", "Pow", "PRelu", "QuantizeLinear", "DequantizeLinear", "Reciprocal", "Relu",
    "Selu", "Sigmoid", "Softplus", "Sqrt", "Sub", "Tanh",
})
_CHAIN_DEPTH = 3  # elementwise ops allowed between the two Transposes


@dataclass(frozen=True)
class GraphFacts:
    """Transposes in the model file, before ORT optimizes anything."""

    transposes: int = 0                              # Transpose nodes in all graphs
    layout_transposes: tuple[str, ...] = ()          # those moving channels first↔last (NHWC↔NCHW and kin)
    chains: tuple[tuple[str, str], ...] = ()         # (first, second): the first's output reaches the second
    cancelling: int = 0                              # chains whose two permutations undo each other


def _perm(node: Any) -> tuple[int, ...] | None:
    for a in node.attribute:
        if a.name == "perm":
            return tuple(int(i) for i in a.ints)
    return None


def is_layout_perm(perm: Sequence[int] | None) -> bool:
    """Channels last (``0 2 3 … 1``) or channels first (``0 r-1 1 2 …``) for a rank of 3 or more."""
    if perm is None or len(perm) < 3:
        return False
    r = len(perm)
    last = (0, *range(2, r), 1)
    first = (0, r - 1, *range(1, r - 1))
    return tuple(perm) in (last, first)


def _composes_to_identity(a: Sequence[int] | None, b: Sequence[int] | None) -> bool:
    if a is None or b is None or len(a) != len(b):
        return a is None and b is None  # two default (reversing) perms cancel
    return all(a[b[i]] == i for i in range(len(a)))


def scan_graph(path: str) -> GraphFacts | None:
    """The Transposes of the model at ``path`` (weights not loaded); None when the file cannot be read."""
    import onnx

    from ortop.model.inspect import walk_graphs

    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    total = 0
    layout: list[str] = []
    chains: list[tuple[str, str]] = []
    cancelling = 0
    for g in walk_graphs(proto.graph):
        consumers: dict[str, list[Any]] = {}
        for n in g.node:
            for name in n.input:
                if name:
                    consumers.setdefault(name, []).append(n)
        for i, n in enumerate(g.node):
            if n.op_type != "Transpose" or n.domain not in ("", "ai.onnx"):
                continue
            total += 1
            label = n.name or f"Transpose#{i}"
            perm = _perm(n)
            if is_layout_perm(perm):
                layout.append(label)
            for other in _reached_transposes(n, consumers):
                chains.append((label, other.name or "Transpose"))
                cancelling += _composes_to_identity(perm, _perm(other))
    return GraphFacts(total, tuple(layout), tuple(chains), cancelling)


def _reached_transposes(start: Any, consumers: dict[str, list[Any]]) -> list[Any]:
    """Transposes fed by ``start``'s output through at most _CHAIN_DEPTH elementwise ops."""
    found: list[Any] = []
    frontier, seen = [(start, 0)], {id(start)}
    while frontier:
        node, depth = frontier.pop()
        for out in node.output:
            for c in consumers.get(out, ()):
                if id(c) in seen:
                    continue
                seen.add(id(c))
                if c.op_type == "Transpose":
                    found.append(c)
                elif c.op_type in _ELEMENTWISE and depth < _CHAIN_DEPTH:
                    frontier.append((c, depth + 1))
    return found


def write_without_initializer_inputs(src: str, dst: str) -> int:
    """Write a copy of ``src`` to ``dst`` whose graph inputs no longer list its initializers; return how many left.

    Only the input list changes; the weights stay. A model keeping its weights in external files is written next to
    them (its references are relative to its own folder).

    Raises:
        UsageError: ``dst`` cannot be written (or is the model itself), or would lose the external weights.
    """
    import onnx

    from ortop.fsutil import check_writable, replace_file

    real = check_writable(dst, protect=[src], what="fixed model")
    try:
        proto = onnx.load(src, load_external_data=False)
    except Exception as exc:
        raise UsageError(f"cannot read the model {src}: {exc}") from None
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
    if external and os.path.dirname(os.path.abspath(src)) != os.path.dirname(real):
        raise UsageError(f"{src} keeps its weights in external files beside it: write the fixed copy into the same "
                         f"folder ({os.path.dirname(os.path.abspath(src))})")
    inits = {t.name for t in proto.graph.initializer}
    kept = [v for v in proto.graph.input if v.name not in inits]
    removed = len(proto.graph.input) - len(kept)
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    data = proto.SerializeToString()
    try:
        if os.path.exists(real) and not os.path.isfile(real):  # a device or a pipe: written through
            with open(real, "wb") as fh:
                fh.write(data)
        else:
            replace_file(real, data)
    except OSError as exc:
        raise UsageError(f"cannot write the fixed model {dst}: {exc.strerror or exc}") from None
    return removed


