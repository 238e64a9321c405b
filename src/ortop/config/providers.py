"""Execution provider names: one reading of ``[provider] name`` for every place that needs it.

A profile may name its provider short (``cuda``), in full (``CUDAExecutionProvider``) and in any case. ONNX Runtime
takes only the full name; the knob registry files a provider's options under the short one (``Knob.provider``).
Reading the name here, once, is what lets a full name validate, edit, tune and export exactly like its short
alias: the checks, the settings form, the tuner's space and the exporters all ask :func:`resolve`.

A full name ortop does not know (a custom or newer provider) passes through as written, for ORT to judge; a short
name ortop does not know is a slip, and :func:`name_error` says so with the nearest known name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

SUFFIX = "ExecutionProvider"
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"

# ORT's providers by full name: onnxruntime.get_all_providers() of 1.31, and ROCm and SNPE from earlier builds.
KNOWN: tuple[str, ...] = (
    "NvTensorRTRTXExecutionProvider", TENSORRT, CUDA, "MIGraphXExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
    "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider", "ACLExecutionProvider",
    "DmlExecutionProvider", "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider",
    "XnnpackExecutionProvider", "CANNExecutionProvider", "AzureExecutionProvider", CPU,
    "ROCMExecutionProvider", "SNPEExecutionProvider",
)


def _short(full: str) -> str:
    """A full name less ``ExecutionProvider``, lower-cased: ``CUDAExecutionProvider`` → ``cuda``."""
    return full[: -len(SUFFIX)].lower() if full.lower().endswith(SUFFIX.lower()) else full.lower()


# Short names: each known provider's own (cuda, openvino, nvtensorrtrtx, ...), and a few more people write.
ALIASES: dict[str, str] = {**{_short(n): n for n in KNOWN}, "trt": TENSORRT}
_FULL_BY_LOWER = {n.lower(): n for n in KNOWN}


@dataclass(frozen=True)
class ProviderName:
    """A provider name as read: ``ort`` the name InferenceSession takes, ``short`` the name the knob registry files
    its options under, ``known`` whether ortop knows the provider (a custom one is passed through as written)."""

    ort: str
    short: str
    known: bool


def resolve(name: str) -> ProviderName:
    """Read a profile's provider name: a short alias or a full name, in any case, surrounding blanks ignored."""
    text = name.strip()
    full = ALIASES.get(text.lower()) or _FULL_BY_LOWER.get(text.lower())
    if full is not None:
        return ProviderName(full, _short(full), True)
    return ProviderName(text, _short(text), False)


def ort_name(name: str) -> str:
    """The name ORT takes (``CUDAExecutionProvider``) for any spelling of ``name``."""
    return resolve(name).ort


def short_name(name: str) -> str:
    """The registry's name (``cuda``) for any spelling of ``name``: what ``Knob.provider`` is compared with."""
    return resolve(name).short


def name_error(name: str) -> str | None:
    """Why ``name`` names no provider, or None: it is empty, or a short name ortop does not know.

    A full name (``...ExecutionProvider``) ortop does not know passes: ORT knows providers ortop has not heard of,
    and a run reports the fallback when ORT does not know it either. A short name can only be one of ortop's
    aliases, so any other is a slip that would quietly measure the CPU provider instead.
    """
    if not name.strip():
        return "provider.name must not be empty"
    read = resolve(name)
    if read.known or read.ort.lower().endswith(SUFFIX.lower()):
        return None
    words = [*ALIASES, *KNOWN]
    close = difflib.get_close_matches(read.ort.lower(), [w.lower() for w in words], n=1, cutoff=0.6)
    hint = f" (did you mean {next(w for w in words if w.lower() == close[0])!r}?)" if close else ""
    return (f"provider.name {name!r} is not a provider ortop knows{hint}: use a short name (cpu, cuda, tensorrt, "
            f"openvino, ...) or ORT's full name, ending in {SUFFIX}")
