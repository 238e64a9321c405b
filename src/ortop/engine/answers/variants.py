"""Variants of a model, made in a child process and compared with it (``ortop variants``).

Making them imports onnxruntime and its quantization tools, which only the runtime room may do: the child
(:func:`ortop.runtime.variants.child_main`) is spawned like the per-operator probe, with the profile's environment,
makes each variant into the output folder, answers with one plain dict and exits. Its fd 1 and 2 go to a log in a
temporary folder, removed afterwards; a child that dies (a segfault in the quantizer's session) is reported with
the log's last lines.

:func:`plan_kinds` decides what to make (fp16 only for CUDA, or when asked; static int8 only with calibration
inputs); :func:`default_out_dir` where, when the caller names no folder.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass, replace
from typing import Any

from ortop.config.profile import Profile
from ortop.errors import RuntimeFailure, UsageError

OPTIMIZED = ("opt-extended", "opt-all")
MAKE_TIMEOUT_S = 1800.0   # quantizing a large model takes minutes; a child past this is stuck


class VariantsError(RuntimeFailure):
    """The child that makes the variants died, timed out, or could not import onnxruntime's tools (exit 1)."""


@dataclass(frozen=True)
class Variant:
    """One variant as made: ``error`` says why it could not be (then ``path`` does not exist)."""

    kind: str
    path: str
    bytes: int | None
    make_s: float | None
    error: str | None
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        return {"variant": self.kind, "path": self.path, "bytes": self.bytes, "make_s": self.make_s,
                "error": self.error, "notes": list(self.notes)}


@dataclass(frozen=True)
class Made:
    variants: tuple[Variant, ...]
    out_dir: str
    ort_version: str


def plan_kinds(profile: Profile, *, calibrate: str | None = None, fp16: bool = False) -> tuple[list[str], list[str]]:
    """The variants to make for ``profile`` and, for each left out, why (a line to show)."""
    kinds = [*OPTIMIZED, "int8-dynamic"]
    skipped = []
    if calibrate:
        kinds.append("int8-static")
    else:
        skipped.append("int8-static: no calibration inputs (--calibrate DIR of .npy)")
    if fp16 or profile.provider_name() == "CUDAExecutionProvider":
        kinds.append("fp16")
    else:
        skipped.append("fp16: made for CUDA (--provider cuda), where fp16 kernels pay; on CPU it is usually slower "
                       "(--fp16 makes it anyway)")
    return kinds, skipped


def default_out_dir(model_path: str) -> str:
    """``<model folder>/<stem>-variants`` when that folder is writable, else a new temporary folder.

    A folder whose mode has no write bit counts as read-only even where this process could write it anyway (root
    ignores the bits): someone kept it read-only on purpose."""
    import stat

    folder = os.path.dirname(os.path.abspath(model_path))
    stem = os.path.splitext(os.path.basename(model_path))[0]
    try:
        marked = bool(os.stat(folder).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    except OSError:
        marked = False
    if marked and os.access(folder, os.W_OK):
        return os.path.join(folder, f"{stem}-variants")
    return tempfile.mkdtemp(prefix=f"ortop-{stem}-variants-")


def check_out_dir(out_dir: str, model_path: str) -> str:
    """Make ``out_dir`` (and its parents) if needed and return its absolute path.

    Raises:
        UsageError: it exists and is not a folder, cannot be made or written, or is where the model is (the
            variants' names would not collide, but the model's folder is not ours to fill unasked).
    """
    out = os.path.abspath(out_dir)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out_dir} exists and is not a folder")
    if out == os.path.dirname(os.path.abspath(model_path)):
        raise UsageError(f"--out {out_dir} is the model's own folder: give the variants a folder of their own")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make the folder {out_dir}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK):
        raise UsageError(f"cannot write into the folder {out_dir}")
    return out


def make_variants(model_path: str, profile: Profile, out_dir: str, kinds: list[str], *,
                  calibrate: str | None = None, timeout_s: float = MAKE_TIMEOUT_S,
                  stop: threading.Event | None = None) -> Made:
    """Make ``kinds`` of ``model_path`` into ``out_dir`` (which must exist) in a child process.

    Raises:
        VariantsError: the child died, timed out, was stopped, or could not import onnxruntime's tools.
    """
    from ortop.engine.workerproc import run_child, worker_env
    from ortop.runtime import variants as rv

    profile = replace(profile, model=model_path)
    with tempfile.TemporaryDirectory(prefix="ortop-variants-") as logdir:
        req = rv.Request(os.path.abspath(model_path), out_dir, logdir, profile.to_dict(full=True), tuple(kinds),
                         os.path.abspath(calibrate) if calibrate else None)
        env, _said = worker_env(profile.env)
        result, why = run_child(rv.child_main, req, env, "ortop-variants", timeout_s, stop)
        if result is None:
            log = rv.read_log(os.path.join(logdir, rv.LOG_NAME))
            tail = f"; its last log line: {log[-1]}" if log else ""
            raise VariantsError(f"the process making the variants {why}{tail}")
    if "error" in result:
        raise VariantsError(f"cannot make variants: {result['error']}")
    made = tuple(Variant(d["variant"], d["path"], d["bytes"], d["make_s"], d["error"], tuple(d["notes"]))
                 for d in result["variants"])
    return Made(made, out_dir, str(result.get("ort_version", "?")))
