"""ortop: a top for ONNX Runtime."""

__version__ = "0.1.0"
