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

from ortop.config import knobs
from ortop.config.ort_names import (  # noqa: F401  (re-exported: the runtime's public face)
    ENUM_NAMES,
    ENUM_VALUES,
    EXEC_MODE_NAMES,
    EXEC_MODE_VALUES,
    OPT_LEVEL_NAMES,
    OPT_LEVEL_VALUES,
    provider_list,
)
from ortop.config.profile import Profile, ProfileError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import onnxruntime

_ENUM_WHAT: dict[str, str] = {"ExecutionMode": "execution mode", "GraphOptimizationLevel": "optimization level"}

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


_env_allocator = False


def ensure_env_allocator() -> None:
    """Register one CPU arena in ORT's environment, once per process: the sessions whose profile sets
    ``session.use_env_allocators`` then allocate from it instead of an arena each (ORT's shared allocator)."""
    global _env_allocator
    import onnxruntime as ort

    with _global_lock:
        if _env_allocator:
            return
        info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, -1, -1, -1))  # -1: ORT's defaults
        _env_allocator = True


def _enum(ort: Any, enum_name: str, member: str, what: str) -> Any:
    enum = getattr(ort, enum_name)
    try:
        return getattr(enum, member)
    except AttributeError:
        raise ProfileError(
            f"{what} {member} is not available in onnxruntime {getattr(ort, '__version__', '?')}"
            + (" (ORT_ENABLE_LAYOUT needs onnxruntime >= 1.23)" if member == "ORT_ENABLE_LAYOUT" else "")
        ) from None


def session_options(profile: Profile) -> onnxruntime.SessionOptions:
    """A SessionOptions with every SessionOptions-attribute knob of the profile and every config entry it produces.

    The attributes come from the knob registry (``Knob.ort_name``; choices through their ORT enum), so a knob
    declared there is applied here with no edit. With ``use_per_session_threads = false`` this also creates the
    process's global thread pools (see :func:`ensure_global_thread_pools`), since a session without per-session
    pools fails without them, and with ``use_env_allocators`` the shared CPU arena (:func:`ensure_env_allocator`).
    """
    import onnxruntime as ort

    set_global_thread_pool(profile)
    if profile.session.use_env_allocators:
        ensure_env_allocator()
    so = ort.SessionOptions()
    for knob in knobs.settings(knobs.SESSION_OPTION):
        value = knob.read(profile)
        if value is None:
            continue
        if not hasattr(so, knob.ort_name):  # an older onnxruntime (a worker under --ort-python) lacks the option
            if value == knob.default:
                continue  # what it does without the option is that default
            raise ProfileError(f"{knob.key} = {value!r}: onnxruntime {ort.__version__} has no SessionOptions."
                               f"{knob.ort_name}")
        if knob.ort_enum:
            member = ENUM_NAMES[knob.ort_enum][value]
            value = _enum(ort, knob.ort_enum, member, _ENUM_WHAT.get(knob.ort_enum, knob.name))
        setattr(so, knob.ort_name, value)
    for key, value in profile.config_entries().items():
        so.add_session_config_entry(key, value)
    return so

