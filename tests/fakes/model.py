"""A fixed ModelInfo, as ``ortop.model.load_model`` would report a small convolutional model."""

from __future__ import annotations

from ortop.model import ModelInfo, TensorInfo


def fake_model_info(path: str = "/models/resnet-ish.onnx") -> ModelInfo:
    return ModelInfo(
        path=path, ir_version=10, opsets={"": 17}, producer="ortop-tests",
        inputs=(TensorInfo("image", "float32", ("batch", 16, 64, 64)),),
        outputs=(TensorInfo("logits", "float32", ("batch", 10)),),
        initializer_inputs=(), op_histogram={"Conv": 2, "Relu": 4, "MatMul": 3, "MaxPool": 2, "Flatten": 1},
        control_flow=(), num_nodes=12, num_initializers=7, param_bytes=9_600_000, free_dims=("batch",),
        gather_bounds={},
    )
