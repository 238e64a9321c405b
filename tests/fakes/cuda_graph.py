"""A GPU that is not there: ONNX Runtime's CUDA-graph rules played by a fake session, its IO binding and OrtValues.

The arithmetic is real (a CPU ``InferenceSession`` of the same model computes every output); what is faked is the
device and what ORT 1.31 refuses or gets wrong on it with ``enable_cuda_graph``:

- the first ``run_with_iobinding`` of a graph id on a thread captures (ORT keeps the graph in the CUDA provider's
  per-thread context), a later one on that thread replays; another thread captures its own;
- a capture refuses outputs left to ORT (the graph would write into ORT's arena, not the bound buffers) and buffers
  on the host (copies are not allowed while a stream captures);
- a replay refuses a binding whose buffers changed since the capture (it would read and write the old ones);
- a plain ``run()`` of a graph-enabled session refuses (it would capture ORT's own copies: ORT issue #15002,
  "operation not permitted when stream is capturing"), unless the run skips capture (``gpu_graph_id = -1``);
- captures use the global capture mode: a second capture, or an allocation on another thread, while one is under
  way fails.

Install it with :func:`install` (a pytest ``monkeypatch`` and a :class:`World` that records what happened).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnxruntime as _ort
from onnx import helper

_REAL_SESSION = _ort.InferenceSession
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"


class CaptureError(RuntimeError):
    """What the fake GPU refuses, in ORT's words where ORT has some."""


@dataclass
class World:
    """What the fake GPU saw. ``events``: (kind, thread id, graph id, start, end, session id) with kind one of
    capture, replay, skip (a run with capture skipped), plain (a run of a session without graphs)."""

    capture_s: float = 0.05              # how long a capture takes: long enough for an overlap to show
    events: list[tuple] = field(default_factory=list)
    plain_runs: list[int] = field(default_factory=list)        # threads that called run()
    allocations: list[tuple] = field(default_factory=list)     # (shape, device, thread) of ortvalue_from_shape_and_type
    updates: list[tuple] = field(default_factory=list)         # (shape, device, thread) of update_inplace
    bindings: int = 0                                          # io_binding() calls
    sessions: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    capturing: int | None = None                               # thread id of the capture under way

    def of(self, kind: str) -> list[tuple]:
        return [e for e in self.events if e[0] == kind]


_world: World | None = None


def _w() -> World:
    assert _world is not None, "install() the fake first"
    return _world


def _dtype(element_type: Any) -> np.dtype:
    if isinstance(element_type, int):
        return np.dtype(helper.tensor_dtype_to_np_dtype(element_type))
    return np.dtype(element_type)


class FakeOrtValue:
    """A tensor "on" a device: a numpy array and a device name."""

    def __init__(self, data: np.ndarray, device: str, device_id: int = 0):
        self.data = data
        self.device = device
        self.device_id = device_id

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0, vendor_id=-1):
        w = _w()
        me = threading.get_ident()
        with w.lock:
            if w.capturing is not None and w.capturing != me and device_type == "cuda":
                raise CaptureError("operation not permitted when stream is capturing (cudaMalloc on another thread "
                                   "during a capture in the global mode)")
            w.allocations.append((list(shape), device_type, me))
        return cls(np.zeros(list(shape), _dtype(element_type)), device_type, device_id)

    @classmethod
    def ortvalue_from_numpy(cls, arr, device_type="cpu", device_id=0, vendor_id=-1):
        if arr.dtype.kind not in "biufcO":
            raise RuntimeError("Creation of OrtValues is currently only supported from non-string numpy arrays")
        return cls(np.array(arr, copy=True), device_type, device_id)

    def update_inplace(self, arr) -> None:
        arr = np.asarray(arr)
        if arr.dtype.itemsize != self.data.dtype.itemsize or arr.size != self.data.size:
            raise RuntimeError("update_inplace: size mismatch")
        self.data[...] = arr.reshape(self.data.shape).view(self.data.dtype)
        _w().updates.append((list(arr.shape), self.device, threading.get_ident()))

    def shape(self) -> list[int]:
        return list(self.data.shape)

    def numpy(self) -> np.ndarray:
        return self.data.copy()

    def device_name(self) -> str:
        return self.device


class FakeIOBinding:
    def __init__(self, session: FakeGraphSession):
        self.session = session
        self.inputs: dict[str, FakeOrtValue] = {}
        self.outputs: dict[str, FakeOrtValue | tuple[str, int]] = {}  # a tuple: left to ORT on that device

    def bind_ortvalue_input(self, name: str, value: FakeOrtValue) -> None:
        self.inputs[name] = value

    def bind_ortvalue_output(self, name: str, value: FakeOrtValue) -> None:
        self.outputs[name] = value

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, *rest: Any) -> None:
        self.outputs[name] = (device_type, device_id)

    def clear_binding_outputs(self) -> None:
        self.outputs.clear()

    def get_outputs(self) -> list[FakeOrtValue]:
        out = []
        for v in self.outputs.values():
            if not isinstance(v, FakeOrtValue):
                raise RuntimeError("no run has filled the outputs ORT allocates")
            out.append(v)
        return out

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.get_outputs()]

    def signature(self) -> tuple:
        return (tuple((k, id(v)) for k, v in self.inputs.items()), tuple((k, id(v)) for k, v in self.outputs.items()))


def _graph_id(run_options: Any) -> int:
    if run_options is None:
        return 0
    try:
        return int(run_options.get_run_config_entry("gpu_graph_id"))
    except RuntimeError:  # no such entry: ORT's default id
        return 0


class FakeGraphSession:
    """Stands in for ``onnxruntime.InferenceSession`` with the CUDA or TensorRT provider "active"."""

    def __init__(self, path: str, sess_options: Any = None, providers: Any = None, **_: Any):
        w = _w()
        self.real = _REAL_SESSION(path, sess_options=sess_options, providers=["CPUExecutionProvider"])
        first = (providers or ["CPUExecutionProvider"])[0]
        name, options = (first if isinstance(first, tuple) else (first, {}))
        self.provider = name
        self.graphs = str(options.get("enable_cuda_graph", "0")).lower() in ("1", "true")
        self.captured: dict[tuple[int, int], tuple] = {}
        w.sessions.append(self)

    def get_providers(self) -> list[str]:
        if self.provider == TENSORRT:
            return [TENSORRT, CUDA, "CPUExecutionProvider"]
        if self.provider == CUDA:
            return [CUDA, "CPUExecutionProvider"]
        return ["CPUExecutionProvider"]

    def get_inputs(self):
        return self.real.get_inputs()

    def get_outputs(self):
        return self.real.get_outputs()

    def io_binding(self) -> FakeIOBinding:
        _w().bindings += 1
        return FakeIOBinding(self)

    def run(self, output_names, feeds, run_options=None):
        w = _w()
        w.plain_runs.append(threading.get_ident())
        if self.graphs and _graph_id(run_options) != -1:
            raise CaptureError("operation not permitted when stream is capturing: run() of a graph-enabled session "
                               "captures with ORT's own copies of numpy inputs")
        return self.real.run(output_names, feeds)

    def _compute(self, b: FakeIOBinding) -> None:
        outs = self.real.run(None, {k: v.data for k, v in b.inputs.items()})
        for o, arr in zip(self.real.get_outputs(), outs):
            target = b.outputs.get(o.name)
            if isinstance(target, FakeOrtValue):
                if target.data.shape != arr.shape:
                    raise RuntimeError(f"output {o.name}: bound shape {target.shape()} but the run makes "
                                       f"{list(arr.shape)}")
                target.data[...] = arr
            elif target is not None:
                b.outputs[o.name] = FakeOrtValue(arr, target[0], target[1])

    def run_with_iobinding(self, b: FakeIOBinding, run_options: Any = None) -> None:
        w = _w()
        me = threading.get_ident()
        gid = _graph_id(run_options)
        t0 = time.perf_counter()
        if not self.graphs or gid == -1:
            self._compute(b)
            w.events.append(("skip" if self.graphs else "plain", me, gid, t0, time.perf_counter(), id(self)))
            return
        key = (me, gid)
        sig = b.signature()
        if key in self.captured:
            if self.captured[key] != sig:
                raise CaptureError("the binding's buffers changed after the capture: the replay would use the "
                                   "captured ones")
            self._compute(b)
            w.events.append(("replay", me, gid, t0, time.perf_counter(), id(self)))
            return
        for name, v in b.outputs.items():
            if not isinstance(v, FakeOrtValue):
                raise CaptureError(f"output {name} is left to ORT: the captured graph would write into ORT's arena, "
                                   "not a bound buffer")
        for name, v in [*b.inputs.items(), *b.outputs.items()]:
            if v.device != "cuda":  # type: ignore[union-attr]
                raise CaptureError(f"{name} is on the host: copies are not allowed while a stream captures")
        with w.lock:
            if w.capturing is not None:
                raise CaptureError("operation not permitted when stream is capturing (another capture under way)")
            w.capturing = me
        try:
            time.sleep(w.capture_s)
            self._compute(b)
        finally:
            with w.lock:
                w.capturing = None
        self.captured[key] = sig
        w.events.append(("capture", me, gid, t0, time.perf_counter(), id(self)))


def install(monkeypatch: Any, world: World | None = None) -> World:
    """Put the fake in place of ``onnxruntime.InferenceSession`` and ``onnxruntime.OrtValue`` for one test."""
    global _world
    w = world or World()
    _world = w
    monkeypatch.setattr(_ort, "InferenceSession", FakeGraphSession)
    monkeypatch.setattr(_ort, "OrtValue", FakeOrtValue)
    return w
