"""The built-in demo model: small, deterministic, and heavy enough in Conv and MatMul that threads, spinning and
dynamic_block_base visibly move its numbers. Built with onnx.helper on first use and cached.
"""

from __future__ import annotations

import os
from pathlib import Path

DEMO_VERSION = 1  # bump when the graph changes, so stale caches are rebuilt


def demo_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the demo model lives: the user cache dir (``platformdirs``), or ``cache_dir``."""
    if cache_dir is None:
        import platformdirs

        cache_dir = platformdirs.user_cache_dir("ortop")
    return Path(cache_dir) / f"ortop-demo-v{DEMO_VERSION}.onnx"


def build_demo(path: str | os.PathLike) -> Path:
    """Write the demo model: image [1,16,64,64] → 2×(Conv 3×3 + Relu) → pool → 2×MatMul → logits [1,10].

    About 3–5 ms per run on one core of a current x86 server; the convolutions split well over threads, and the
    short MatMuls at the end give the pool's spin-wait something to show between small parallel sections.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1234)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        data = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        return numpy_helper.from_array(data, name)

    inits = [
        w("conv1_w", 48, 16, 3, 3), w("conv1_b", 48),
        w("conv2_w", 64, 48, 3, 3), w("conv2_b", 64),
        w("fc1_w", 64 * 8 * 8, 512), w("fc2_w", 512, 512), w("fc3_w", 512, 10),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[4, 4], strides=[4, 4], name="pool2"),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1, name="flatten"),
        helper.make_node("MatMul", ["f", "fc1_w"], ["m1"], name="fc1"),
        helper.make_node("Relu", ["m1"], ["a1"], name="relu3"),
        helper.make_node("MatMul", ["a1", "fc2_w"], ["m2"], name="fc2"),
        helper.make_node("Relu", ["m2"], ["a2"], name="relu4"),
        helper.make_node("MatMul", ["a2", "fc3_w"], ["logits"], name="fc3"),
    ]
    graph = helper.make_graph(
        nodes, "ortop_demo",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 16, 64, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, producer_name="ortop", opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=10)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(f".{os.getpid()}.tmp")
    onnx.save(model, str(tmp))
    os.replace(tmp, p)  # two ortop processes starting at once never see a half-written model
    return p


def ensure_demo(cache_dir: str | os.PathLike | None = None) -> Path:
    """The demo model's path, building it first if it is not cached yet."""
    p = demo_path(cache_dir)
    if not p.exists():
        build_demo(p)
    return p
