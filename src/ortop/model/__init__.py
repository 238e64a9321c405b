"""The model room: what ortop knows about a model before running it, and the inputs it feeds it.

Reads the ONNX protobuf only; never imports onnxruntime (the runtime room answers the one question that needs it).
"""

from ortop.model.feeds import describe_feeds, make_feeds, numpy_dtype
from ortop.model.inspect import (
    ModelError,
    ModelInfo,
    TensorInfo,
    check_ir_supported,
    format_info,
    format_shape,
    load_model,
    parse_shape,
)

__all__ = [
    "ModelError",
    "TensorInfo",
    "ModelInfo",
    "load_model",
    "check_ir_supported",
    "make_feeds",
    "parse_shape",
    "describe_feeds",
    "format_info",
    "format_shape",
    "numpy_dtype",
]
