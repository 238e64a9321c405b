"""IO binding made once per caller thread and input shape, and the CUDA-graph path through it.

What ONNX Runtime does, and what this module does about it (ORT 1.31's source):

- With ``enable_cuda_graph`` the first ``Run()`` of a session captures: ``InferenceSession::Run``
  (core/session/inference_session.cc) runs itself again after each regular run until the provider reports a graph
  ("Start another run for necessary memory allocation or graph capture"), and the CUDA provider begins the capture
  in ``OnRunStart`` once ``min_num_runs_before_cuda_graph_capture_`` regular runs are behind it
  (core/providers/cuda/cuda_execution_provider.cc). A first run through plain ``run()`` would capture ORT's own
  copies of numpy inputs (not allowed while a stream captures) and its own output buffers. So the capture is made by
  ``run_with_iobinding`` on buffers bound for good: inputs and outputs allocated on the device, bound once, inputs
  filled with ``OrtValue.update_inplace`` (ORT's own test does the same:
  onnxruntime/test/python/onnxruntime_test_python_cudagraph.py, ``CudaGraphHelper``).
- Output buffers are allocated before the capture from the model's static output shapes or, when an output's shape
  is not fixed, from one run with the run-config entry ``gpu_graph_id = -1``
  (``kOrtRunOptionsConfigCudaGraphAnnotation``; -1 skips capture and replay for that run:
  ``CUDAGraphManager::IsGraphCaptureAllowedOnRun``).
- The graph lives in the provider's ``PerThreadContext``: it is replayed only by the thread that captured it. A
  binding records its thread, and the session's runner refuses a graph binding on any other.
- Each input shape of a mix gets its own graph: ``gpu_graph_id`` = shape index + 1 (0 is ORT's own default id).
- ORT's capture uses the global capture mode (``CUDAGraph::CaptureBegin``): another thread's allocation during a
  capture fails it. :data:`CAPTURE_LOCK` keeps this process's captures, and the device allocations of graph
  bindings, one at a time (replicas, each its own session, bind and capture in turn).

bfloat16 and the float8 types have no numpy type of their own (ml_dtypes provides them); ORT takes them as an
OrtValue of the ONNX element type filled from the raw bits (``update_inplace`` of an unsigned view of the same size).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

GRAPH_ID_KEY = "gpu_graph_id"   # kOrtRunOptionsConfigCudaGraphAnnotation (onnxruntime_run_options_config_keys.h)
SKIP_CAPTURE = -1               # kCudaGraphAnnotationSkip: no capture, no replay in that run

CAPTURE_LOCK = threading.Lock()  # one capture at a time in the process (ORT captures in the global mode)

_NATIVE_KINDS = "biufc"  # numpy kinds ORT maps itself; anything else (ml_dtypes' 'V') goes in by its ONNX type


class GraphBindingError(RuntimeError):
    """A CUDA-graph binding used in a way ORT does not support (another thread, a non-tensor output...)."""


def onnx_element_type(ort_type: str) -> int:
    """The ONNX element type (``TensorProto``) of an ORT type string such as ``tensor(float)``."""
    from onnx import TensorProto

    if not (ort_type.startswith("tensor(") and ort_type.endswith(")")):
        raise GraphBindingError(f"a CUDA graph needs tensor outputs, not {ort_type}")
    name = ort_type[len("tensor("):-1].upper()
    try:
        return int(TensorProto.DataType.Value(name))
    except ValueError:
        raise GraphBindingError(f"no ONNX element type for {ort_type}") from None


def numpy_element_type(dtype: np.dtype) -> Any:
    """What ``OrtValue.ortvalue_from_shape_and_type`` takes for ``dtype``: the numpy type when ORT knows it, else the
    ONNX element type (bfloat16, float8...)."""
    if dtype.kind in _NATIVE_KINDS:
        return dtype.type
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(dtype))


def raw(arr: np.ndarray) -> np.ndarray:
    """``arr`` as ORT's ``update_inplace`` takes it: itself for numpy's own types, else an unsigned view of the same
    item size (ORT copies the bytes into a value of the right ONNX type)."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind in _NATIVE_KINDS:
        return arr
    return arr.view(np.dtype(f"u{arr.dtype.itemsize}"))


def device_value(arr: np.ndarray, device: str, device_id: int) -> Any:
    """An OrtValue of ``arr``'s shape and type allocated on ``device`` and filled in place from ``arr``."""
    import onnxruntime as ort

    if arr.dtype == object:  # strings: only on the CPU, and only from numpy
        return ort.OrtValue.ortvalue_from_numpy(arr, device, device_id)
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), numpy_element_type(arr.dtype), device,
                                                      device_id)
    value.update_inplace(raw(arr))
    return value


def graph_options(graph_id: int) -> Any:
    """RunOptions naming the CUDA graph a run captures or replays (``gpu_graph_id``; -1: neither)."""
    import onnxruntime as ort

    ro = ort.RunOptions()
    ro.add_run_config_entry(GRAPH_ID_KEY, str(int(graph_id)))
    return ro


def _static_shape(shape: Any) -> list[int] | None:
    if shape is None:
        return None
    dims = list(shape)
    return dims if all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims) else None


def output_shapes(sess: Any, binding: Any, device: str, device_id: int) -> dict[str, list[int]]:
    """Each output's shape for this binding's inputs: the model's own when fixed, else from one run that skips
    capture (``gpu_graph_id = -1``), its outputs left to ORT on ``device``; the binding's outputs are cleared after."""
    outs = sess.get_outputs()
    fixed = {o.name: _static_shape(o.shape) for o in outs}
    if all(s is not None for s in fixed.values()):
        return {k: list(v or []) for k, v in fixed.items()}
    for o in outs:
        binding.bind_output(o.name, device, device_id)
    sess.run_with_iobinding(binding, graph_options(SKIP_CAPTURE))
    shapes = {o.name: list(v.shape()) for o, v in zip(outs, binding.get_outputs())}
    binding.clear_binding_outputs()
    return shapes


class Bound:
    """One IO binding of ``sess`` for one caller thread and one input shape, made once on that thread.

    ``graph_id`` None: inputs copied to the device once, outputs left to ORT on the device (IO binding without
    graphs). ``graph_id`` >= 1: outputs allocated up front and bound too; the allocations and the first
    :meth:`run`, which captures, hold :data:`CAPTURE_LOCK`; every later run replays on the same buffers.
    ``graph_id`` = -1 (:data:`SKIP_CAPTURE`): as without graphs, each run asking ORT to skip capture (a
    graph-enabled session whose kernels must run one by one, as the profiler needs them).
    """

    def __init__(self, sess: Any, feeds: Mapping[str, np.ndarray], device: str, device_id: int,
                 graph_id: int | None = None) -> None:
        if graph_id is not None and graph_id != SKIP_CAPTURE and graph_id < 1:
            raise ValueError(f"gpu_graph_id {graph_id}: ids from 1 (0 is ORT's own default)")
        self.sess = sess
        self.device = device
        self.device_id = device_id
        self.graph_id = graph_id
        self.thread = threading.get_ident()
        self.binding: Any = None
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self.run_options: Any = None
        self.captured = True  # nothing to capture without a graph
        if graph_id is None or graph_id == SKIP_CAPTURE:
            self._bind(feeds)
            if graph_id == SKIP_CAPTURE:
                self.run_options = graph_options(SKIP_CAPTURE)
            return
        with CAPTURE_LOCK:  # device allocations: none while another session captures
            self._bind(feeds, preallocate=True)
        self.run_options = graph_options(graph_id)
        self.captured = False

    def _bind(self, feeds: Mapping[str, np.ndarray], preallocate: bool = False) -> None:
        import onnxruntime as ort

        sess, device, device_id = self.sess, self.device, self.device_id
        self.binding = sess.io_binding()
        for name, arr in feeds.items():
            value = device_value(arr, device, device_id)
            self.binding.bind_ortvalue_input(name, value)
            self.inputs[name] = value
        if not preallocate:
            for o in sess.get_outputs():
                self.binding.bind_output(o.name, device, device_id)
            return
        shapes = output_shapes(sess, self.binding, device, device_id)
        for o in sess.get_outputs():
            value = ort.OrtValue.ortvalue_from_shape_and_type(shapes[o.name], onnx_element_type(o.type), device,
                                                              device_id)
            self.binding.bind_ortvalue_output(o.name, value)
            self.outputs[o.name] = value

    def run(self) -> None:
        """One run: the first of a graph binding captures, one capture in the process at a time."""
        if self.captured:
            self.sess.run_with_iobinding(self.binding, self.run_options)
            return
        with CAPTURE_LOCK:
            self.sess.run_with_iobinding(self.binding, self.run_options)
        self.captured = True

    def runner(self) -> Callable[[], Any]:
        """The zero-argument callable a loop calls: ``run_with_iobinding`` itself once nothing is left to capture."""
        if not self.captured:
            return self.run
        run, b, ro = self.sess.run_with_iobinding, self.binding, self.run_options
        if ro is None:
            return lambda: run(b)
        return lambda: run(b, ro)

    def check_thread(self) -> None:
        """Refuse a graph binding on a thread other than its own: ORT keeps the graph per thread."""
        if self.graph_id is not None and self.graph_id >= 1 and threading.get_ident() != self.thread:
            raise GraphBindingError("a CUDA graph replays only on the thread that captured it; this binding was "
                                    "made on another thread")

    def refresh(self, feeds: Mapping[str, np.ndarray]) -> None:
        """New input data, copied into the bound buffers in place (same shapes: a graph replays fixed addresses)."""
        for name, arr in feeds.items():
            value = self.inputs[name]
            if list(arr.shape) != list(value.shape()):
                raise ValueError(f"input {name}: shape {list(arr.shape)} differs from the bound {value.shape()} "
                                 "(a bound buffer keeps its shape)")
            value.update_inplace(raw(arr))

    def output_values(self) -> list[Any]:
        """The outputs of the last run, as ORT's OrtValues (on the device)."""
        return list(self.binding.get_outputs())


def gpu_device(provider: str, active: Iterable[str]) -> bool:
    """Whether runs of ``provider`` bind on the GPU: CUDA and TensorRT, when ORT has the provider active."""
    from ortop.config.providers import CUDA, TENSORRT

    return provider in (CUDA, TENSORRT) and provider in list(active)
