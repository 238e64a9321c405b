"""Variants of a model made with onnxruntime's own tools, in a child process (``ortop variants``).

Only the runtime room imports onnxruntime, so :mod:`ortop.engine.answers.variants` spawns :func:`child_main` (like the
per-operator probe) and gets back one plain dict per variant. The child points fd 1 and 2 at a log file before
importing onnxruntime: the quantizer's and ORT's own lines (a hardware-specific optimized graph, a pre-processing
step that failed) are kept as each variant's notes instead of reaching the terminal.

What it makes, each into the output folder, named ``<stem>.<variant>.onnx``:

- ``opt-extended`` and ``opt-all``: the graph ORT optimized offline (``SessionOptions.optimized_model_filepath`` at
  ``graph_optimization_level`` extended / all), with the profile's providers. Such a file is tied to this
  onnxruntime and this host: at ``all`` ORT may write layout ops for this CPU (its log says so), and ops of a
  newer ORT's contrib domain may not load in an older one.
- ``int8-dynamic``: ``onnxruntime.quantization.quantize_dynamic`` (int8 weights, activations quantized per run),
  after ``quant_pre_process`` (shape inference and ORT's basic optimizations) where it applies; when the step is
  skipped or fails, the note says why and the original is quantized.
- ``int8-static``: ``quantize_static`` (QDQ, MinMax calibration) over the calibration inputs, when a folder of them
  is given (see :func:`calibration_feeds` for its layout).
- ``fp16``: ``onnxruntime.transformers.float16.convert_float_to_float16`` with ``keep_io_types=True`` (the inputs
  and outputs stay float32, so it takes the same feeds); for CUDA, where fp16 kernels pay; on CPU it is usually
  slower, so it is made there only when asked.

A variant that fails to build is one line in its dict (``error``); the others go on.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ortop.errors import one_line

LOG_NAME = "ort-variants.log"
OPT_EXTENDED, OPT_ALL, INT8_DYNAMIC, INT8_STATIC, FP16 = "opt-extended", "opt-all", "int8-dynamic", "int8-static", \
    "fp16"
KINDS = (OPT_EXTENDED, OPT_ALL, INT8_DYNAMIC, INT8_STATIC, FP16)
TWO_GB = 2 << 30                     # protobuf's limit: a model this large keeps its weights in external data
TIED_NOTE = "tied to onnxruntime {version} on this host: remake it after an upgrade or on another machine"


@dataclass(frozen=True)
class Request:
    """Make ``kinds`` of ``model_path`` into ``out_dir``; ``profile`` (``Profile.to_dict(full=True)``) gives the
    providers and session options the optimized graphs are made with; ``calibrate_dir`` feeds ``int8-static``."""

    model_path: str
    out_dir: str
    log_dir: str
    profile: dict
    kinds: tuple[str, ...] = (OPT_EXTENDED, OPT_ALL, INT8_DYNAMIC)
    calibrate_dir: str | None = None
    stem: str = ""


@dataclass
class Made:
    """One variant: where it went, how big, how long it took, and what to know about it (or why it failed)."""

    kind: str
    path: str
    bytes: int | None = None
    make_s: float | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"variant": self.kind, "path": self.path, "bytes": self.bytes,
                "make_s": None if self.make_s is None else round(self.make_s, 3), "error": self.error,
                "notes": list(self.notes)}


# ---- calibration inputs ----------------------------------------------------------------------------------------------
def _file_name(input_name: str) -> str:
    """The file an input's calibration arrays are read from: its name, with what a file name cannot hold as ``_``."""
    return "".join("_" if c in "/\\\0" else c for c in input_name) + ".npy"


def calibration_feeds(folder: str, inputs: Sequence[Any]) -> list[dict[str, Any]]:
    """The calibration samples in ``folder`` for a model's ``inputs`` (``ortop.model.TensorInfo``), one feed each.

    Layout: one ``<input name>.npy`` per input (``/`` in a name read as ``_``), holding either one sample, shaped
    like the input, or N samples stacked on a new first axis (rank one more than the input's); every input must
    hold the same N. A model with one input may instead have any ``.npy`` files, each one sample or a stack, read
    in name order. Fixed dims and dtypes must match the model's.

    Raises:
        ValueError: a file is missing, unreadable, or does not fit its input (the message names which and why).
    """
    import numpy as np

    from ortop.model import numpy_dtype

    if not os.path.isdir(folder):
        raise ValueError(f"the calibration folder {folder} does not exist or is not a folder")
    files = sorted(f for f in os.listdir(folder) if f.endswith(".npy"))
    if not files:
        raise ValueError(f"the calibration folder {folder} holds no .npy file")
    by_input: dict[str, list[str]] = {}
    named = {t.name: _file_name(t.name) for t in inputs}
    if all(n in files for n in named.values()):
        by_input = {name: [f] for name, f in named.items()}
    elif len(inputs) == 1:
        by_input = {inputs[0].name: files}
    else:
        missing = [f for f in named.values() if f not in files]
        raise ValueError(f"the calibration folder {folder} has no {', '.join(missing)} (one .npy per input, named "
                         "after it)")
    samples: dict[str, list[Any]] = {}
    for t in inputs:
        out = []
        for f in by_input[t.name]:
            path = os.path.join(folder, f)
            try:
                arr = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ValueError(f"cannot read the calibration file {path}: {exc}") from None
            want = np.dtype(numpy_dtype(t.dtype))
            if arr.dtype != want:
                raise ValueError(f"{f}: dtype {arr.dtype} but input {t.name!r} takes {want}")
            rank = None if t.shape is None else len(t.shape)
            if rank is not None and arr.ndim == rank + 1:
                parts = list(arr)
            elif rank is None or arr.ndim == rank:
                parts = [arr]
            else:
                raise ValueError(f"{f}: shape {list(arr.shape)} does not fit input {t.name!r} of shape "
                                 f"{_shape(t.shape)} (one sample, or samples stacked on a new first axis)")
            for p in parts:
                bad = [i for i, d in enumerate(t.shape or ()) if isinstance(d, int) and d != p.shape[i]]
                if bad:
                    raise ValueError(f"{f}: a sample of shape {list(p.shape)} does not fit input {t.name!r} of "
                                     f"shape {_shape(t.shape)} (dim {bad[0]})")
            out.extend(parts)
        samples[t.name] = out
    counts = {n: len(v) for n, v in samples.items()}
    if len(set(counts.values())) != 1:
        raise ValueError("the calibration inputs hold different numbers of samples: "
                         + ", ".join(f"{n} {c}" for n, c in counts.items()))
    n = next(iter(counts.values()))
    return [{name: samples[name][i] for name in samples} for i in range(n)]


def _shape(shape: Any) -> str:
    return "?" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


class FeedReader:
    """A ``CalibrationDataReader`` over a list of feeds (quantize_static needs ``get_next`` returning a feed, then
    None; it may ask to start over with ``rewind``)."""

    def __init__(self, feeds: Sequence[dict[str, Any]]):
        self.feeds = list(feeds)
        self.pos = 0

    def get_next(self) -> dict[str, Any] | None:
        if self.pos >= len(self.feeds):
            return None
        self.pos += 1
        return self.feeds[self.pos - 1]

    def rewind(self) -> None:
        self.pos = 0

    def __len__(self) -> int:
        return len(self.feeds)


# ---- the makers ------------------------------------------------------------------------------------------------------
def make_optimized(req: Request, level: str, dst: str, made: Made) -> None:
    """Let ORT optimize the graph at ``level`` ("extended" or "all") and save what it would run."""
    from dataclasses import replace

    import onnxruntime as ort

    from ortop.config import profile as profile_mod
    from ortop.runtime import options

    prof = profile_mod.merge(replace(profile_mod.from_dict(req.profile), model=req.model_path),
                             **{"session.graph_optimization_level": level})
    so = options.session_options(prof)
    so.optimized_model_filepath = dst
    if os.path.getsize(req.model_path) >= TWO_GB:  # the optimized graph's weights go beside it
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                    os.path.basename(dst) + ".data")
    sess = ort.InferenceSession(req.model_path, sess_options=so, providers=options.provider_list(prof))
    made.notes.append(f"graph optimized at {level} with {', '.join(sess.get_providers())}; "
                      + TIED_NOTE.format(version=ort.__version__))
    del sess


def preprocess(src: str, dst: str, made: Made) -> str:
    """``quant_pre_process`` where it applies; the model to quantize (``dst``, or ``src`` when it was skipped)."""
    import importlib.util

    from onnxruntime.quantization.shape_inference import quant_pre_process

    if os.path.getsize(src) >= TWO_GB:
        made.notes.append("pre-processing skipped: the model is over 2 GB (its shape inference needs the weights "
                          "in memory)")
        return src
    skip_symbolic = importlib.util.find_spec("sympy") is None
    if skip_symbolic:
        made.notes.append("symbolic shape inference skipped: sympy is not installed (ONNX shape inference and ORT's "
                          "basic optimizations still ran)")
    try:
        quant_pre_process(src, dst, skip_symbolic_shape=skip_symbolic)
    except Exception as exc:
        made.notes.append(f"pre-processing skipped: it failed ({type(exc).__name__}: {one_line(exc, 400)}); the "
                          "original was quantized")
        return src
    return dst


def make_dynamic(req: Request, dst: str, made: Made) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    pre = dst + ".pre.onnx"
    try:
        src = preprocess(req.model_path, pre, made)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8,
                         use_external_data_format=os.path.getsize(src) >= TWO_GB)
    finally:
        _remove(pre)
    made.notes.append("int8 weights (QInt8), activations quantized at run time")


def make_static(req: Request, dst: str, made: Made) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    from ortop.model import load_model

    assert req.calibrate_dir is not None
    info = load_model(req.model_path)
    feeds = calibration_feeds(req.calibrate_dir, info.inputs)
    pre = dst + ".pre.onnx"
    try:
        src = preprocess(req.model_path, pre, made)
        quantize_static(src, dst, FeedReader(feeds), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax,
                        use_external_data_format=os.path.getsize(src) >= TWO_GB)
    finally:
        _remove(pre)
    made.notes.append(f"QDQ int8, calibrated (MinMax) on {len(feeds)} sample{'s' if len(feeds) != 1 else ''} from "
                      f"{req.calibrate_dir}")


def make_fp16(req: Request, dst: str, made: Made) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    if os.path.getsize(req.model_path) >= TWO_GB:
        raise ValueError("the model is over 2 GB: convert it with its weights in external data by hand")
    model = onnx.load(req.model_path)
    converted = convert_float_to_float16(model, keep_io_types=True)
    onnx.save(converted, dst)
    made.notes.append("fp16 weights and compute, float32 inputs and outputs (keep_io_types)")


MAKERS: dict[str, Callable[[Request, str, Made], None]] = {
    OPT_EXTENDED: lambda req, dst, made: make_optimized(req, "extended", dst, made),
    OPT_ALL: lambda req, dst, made: make_optimized(req, "all", dst, made),
    INT8_DYNAMIC: make_dynamic,
    INT8_STATIC: make_static,
    FP16: make_fp16,
}


def variant_path(req: Request, kind: str) -> str:
    stem = req.stem or os.path.splitext(os.path.basename(req.model_path))[0]
    return os.path.join(req.out_dir, f"{stem}.{kind}.onnx")


def make_all(req: Request, log_path: str | None = None) -> list[dict[str, Any]]:
    """Make every kind asked for, one after another; a failure is that variant's ``error``, and the rest go on.
    With ``log_path`` (the file fd 2 goes to), ORT's and the quantizer's new lines become the variant's notes."""
    out = []
    for kind in req.kinds:
        dst = variant_path(req, kind)
        made = Made(kind, dst)
        start = _log_size(log_path)
        t0 = time.perf_counter()
        try:
            MAKERS[kind](req, dst, made)
            made.make_s = time.perf_counter() - t0
            made.bytes = _size_with_data(dst)
        except Exception as exc:  # the variant's answer: why it could not be made; the next one goes on
            made.error = f"{type(exc).__name__}: {one_line(exc, 400)}"
            made.make_s = time.perf_counter() - t0
            _remove(dst)
        for line in map(_plain, _log_lines(log_path, start)):
            if _worth_noting(line) and line not in made.notes:
                made.notes.append(line)
        out.append(made.as_dict())
    return out


_ORT_PREFIX = re.compile(r"^\S+ \S+ \[([WEF]):onnxruntime:[^\]]*\] ")  # a date, a time, [W:onnxruntime:, f.cc:1 fn]


def _plain(line: str) -> str:
    """ORT's log line without its timestamp and source location."""
    return _ORT_PREFIX.sub("", line)


def _worth_noting(line: str) -> bool:
    words = ("Serializing optimized model", "Failed", "failed", "error", "Error", "skip", "not quantized")
    return any(w in line for w in words)


def _size_with_data(path: str) -> int:
    size = os.path.getsize(path)
    data = path + ".data"
    return size + (os.path.getsize(data) if os.path.exists(data) else 0)


def _remove(path: str) -> None:
    for p in (path, path + ".data"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _log_size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _log_lines(path: str | None, start: int) -> list[str]:
    if not path:
        return []
    from ortop.runtime.child import ANSI

    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [ANSI.sub("", ln).strip() for ln in text.splitlines() if ln.strip()][:50]


def read_log(path: str) -> list[str]:
    """The child's captured log (see :func:`ortop.runtime.opprof.read_log`)."""
    from ortop.runtime.opprof import read_log as read

    return read(path)


def child_main(conn: Any, req: Request) -> None:
    """Entry point of the spawned child: capture fd 1 and 2, make the variants, send one dict, exit."""
    from ortop.runtime.child import die_with_parent

    log_path = os.path.join(req.log_dir, LOG_NAME)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    die_with_parent()
    result: dict[str, Any] = {}
    try:
        import onnxruntime as ort

        result["ort_version"] = ort.__version__
        result["variants"] = make_all(req, log_path)
    except Exception as exc:  # onnxruntime or its quantization tools could not be imported
        result["error"] = f"{type(exc).__name__}: {one_line(exc, 400)}"
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        conn.send(result)
    finally:
        conn.close()
