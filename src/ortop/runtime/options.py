"""The one place where a Profile becomes ONNX Runtime objects.

The engine's worker, the tests and anything else that builds a session call :func:`session_options` and
:func:`provider_list`, so a knob can never mean one thing in the live view and another in a benchmark. The name
tables (:data:`OPT_LEVEL_NAMES`, :data:`EXEC_MODE_NAMES` and their integer values) are shared with the exporters,
which must not import onnxruntime.

onnxruntime is imported inside the functions: importing this module stays cheap and works where ORT is missing.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ortop.config.profile import Profile, ProfileError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import onnxruntime

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

# The process-wide thread pools can be created once per process; remember the sizes they got so a second profile
# asking for other sizes is refused instead of silently running on the first one's pools.
_global_pools: tuple[int, int] | None = None
_global_lock = threading.Lock()


def ensure_global_thread_pools(intra: int, inter: int) -> None:
    """Create ORT's global thread pools with these sizes, once per process (0 = ORT's default size).

    ORT builds them when its environment is created, so this must run before the first session of the process
    (``set_global_thread_pool_sizes`` refuses once they exist). Asking again with the same sizes is a no-op; other
    sizes raise ProfileError, because only a fresh process can change them.
    """
    global _global_pools
    from onnxruntime.capi import _pybind_state as C

    with _global_lock:
        if _global_pools == (intra, inter):
            return
        if _global_pools is not None:
            raise ProfileError(
                f"the global thread pools already exist with intra={_global_pools[0]}, inter={_global_pools[1]}; "
                f"intra={intra}, inter={inter} needs a fresh process"
            )
        try:
            C.set_global_thread_pool_sizes(intra, inter)
        except Exception as exc:  # onnxruntime's Fail: the environment was created with other pools
            raise ProfileError(
                "cannot create ORT's global thread pools in this process (a session was created with global "
                f"pools before, sizes unknown): {exc}"
            ) from None
        _global_pools = (intra, inter)


def set_global_thread_pool(profile: Profile) -> None:
    """Create the global thread pools a profile asks for (``use_per_session_threads = false``); else do nothing.

    Call it before the process's first session: that is the only moment ORT accepts pool sizes.
    """
    s = profile.session
    if not s.use_per_session_threads:
        ensure_global_thread_pools(s.global_intra_op_num_threads, s.global_inter_op_num_threads)


def _enum(ort: Any, enum_name: str, member: str, what: str) -> Any:
    enum = getattr(ort, enum_name)
    try:
        return getattr(enum, member)
    except AttributeError:
        raise ProfileError(
            f"{what} {member} is not available in onnxruntime {getattr(ort, '__version__', '?')}"
            + (" (ORT_ENABLE_LAYOUT needs onnxruntime >= 1.23)" if member == "ORT_ENABLE_LAYOUT" else "")
        ) from None


def session_options(profile: Profile) -> "onnxruntime.SessionOptions":
    """A SessionOptions with every session field of the profile and every config entry it produces.

    With ``use_per_session_threads = false`` this also creates the process's global thread pools (see
    :func:`ensure_global_thread_pools`), since a session without per-session pools fails without them.
    """
    import onnxruntime as ort

    s = profile.session
    set_global_thread_pool(profile)
    so = ort.SessionOptions()
    so.intra_op_num_threads = s.intra_op_num_threads
    so.inter_op_num_threads = s.inter_op_num_threads
    so.execution_mode = _enum(ort, "ExecutionMode", EXEC_MODE_NAMES[s.execution_mode], "execution mode")
    so.graph_optimization_level = _enum(
        ort, "GraphOptimizationLevel", OPT_LEVEL_NAMES[s.graph_optimization_level], "optimization level"
    )
    so.enable_cpu_mem_arena = s.enable_cpu_mem_arena
    so.enable_mem_pattern = s.enable_mem_pattern
    so.enable_mem_reuse = s.enable_mem_reuse
    so.use_per_session_threads = s.use_per_session_threads
    so.log_severity_level = s.log_severity_level
    for key, value in profile.config_entries().items():
        so.add_session_config_entry(key, value)
    return so


def provider_list(profile: Profile) -> list[Any]:
    """Providers as ``InferenceSession(providers=...)`` takes them: the chosen one with its options, then CPU.

    CPU comes last as the fallback for nodes the chosen provider cannot run; when CPU is the chosen provider it
    is the only entry. With ``disable_cpu_ep_fallback`` the CPU entry is left out: ORT refuses a session that
    lists the CPU provider explicitly and disables falling back to it.
    """
    name = profile.provider_name()
    options = profile.provider_options()
    if name == "CPUExecutionProvider" or profile.session.disable_cpu_ep_fallback:
        return [(name, options)]
    return [(name, options), "CPUExecutionProvider"]
