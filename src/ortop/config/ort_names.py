"""ONNX Runtime's names for what a profile says, as plain tables: no onnxruntime import.

The runtime room turns them into onnxruntime objects; the exporters spell them in Python, C++, C#, perf_test and
Olive, which must be able to run where onnxruntime is missing.
"""

from __future__ import annotations

from typing import Any

from ortop.config.profile import Profile
from ortop.config.providers import CPU

# Profile spelling -> the ORT enum member name (same in Python, C, C++ and C#).
OPT_LEVEL_NAMES: dict[str, str] = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
# The C enum values behind those names: what onnxruntime_perf_test's -o and Olive's settings take.
# ORT_ENABLE_LAYOUT (3) exists from onnxruntime 1.23 on; ORT_ENABLE_ALL is 99, not 4.
OPT_LEVEL_VALUES: dict[str, int] = {"disable": 0, "basic": 1, "extended": 2, "layout": 3, "all": 99}

EXEC_MODE_NAMES: dict[str, str] = {"sequential": "ORT_SEQUENTIAL", "parallel": "ORT_PARALLEL"}
EXEC_MODE_VALUES: dict[str, int] = {"sequential": 0, "parallel": 1}

# The tables by the ORT enum a choice knob names (Knob.ort_enum), and how an error calls a member of it.
ENUM_NAMES: dict[str, dict[str, str]] = {"ExecutionMode": EXEC_MODE_NAMES, "GraphOptimizationLevel": OPT_LEVEL_NAMES}
ENUM_VALUES: dict[str, dict[str, int]] = {"ExecutionMode": EXEC_MODE_VALUES,
                                          "GraphOptimizationLevel": OPT_LEVEL_VALUES}

def provider_list(profile: Profile) -> list[Any]:
    """Providers as ``InferenceSession(providers=...)`` takes them: the chosen one with its options, then CPU.

    CPU comes last as the fallback for nodes the chosen provider cannot run; when CPU is the chosen provider it
    is the only entry. With ``disable_cpu_ep_fallback`` the CPU entry is left out: ORT refuses a session that
    lists the CPU provider explicitly and disables falling back to it.
    """
    name = profile.provider_name()
    options = profile.provider_options()
    if name == CPU or profile.session.disable_cpu_ep_fallback:
        return [(name, options)]
    return [(name, options), CPU]
