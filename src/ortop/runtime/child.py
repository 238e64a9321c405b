"""The worker process's own housekeeping, apart from what it measures: catching ORT's writes to fd 2, dying with
its parent, naming threads for the OS, one lock around the parent connection, reading its own memory, checking
LD_PRELOAD took effect, loading the CUDA libraries for a CUDA or TensorRT session and giving freed memory back.

Imports nothing heavy at import time (onnxruntime only inside :func:`preload_cuda_libraries`): the profiler's child
(:mod:`ortop.runtime.opprof`) uses it too.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ortop.runtime import protocol as proto

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def set_os_thread_name(name: str) -> None:
    """Give the calling thread ``name`` in the OS too (Linux: ``/proc/<pid>/task/<tid>/comm``, 15 bytes), so the
    CPU panel, htop and ps tell ortop's threads from ORT's pool (created by the main thread, they inherit
    its name); Python's own thread name stays inside Python."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass  # no libc prctl: the name is only cosmetic


def set_timer_slack(ns: int = 1) -> None:
    """Let this thread's timed waits end within ``ns`` of their deadline (Linux ``PR_SET_TIMERSLACK``).

    The default slack (50 µs) is added to every timed sleep: a server thread waiting for a request's arrival woke
    85 µs late at the median and 500 µs at p99 here; with 1 ns, 30 and 80 µs. The late wake-up is counted as the
    request's queueing, so it matters; the kernel does no extra work for it.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, ctypes.c_ulong(ns), 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass  # no prctl: waits keep the default slack


def one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     line: str | None = None) -> str:
    """A Python warning as one line, ``UserWarning: text (file.py:197)``: Python's own form adds the source line
    (``  warnings.warn(``) on a second line, which the capture would pass on as an event of its own."""
    text = " ".join(str(message).split())
    return f"{category.__name__}: {text} ({os.path.basename(filename)}:{lineno})\n"


def capture_stderr(send) -> None:
    """Point fd 2 (and 1) at a pipe read by a thread that forwards each line to the parent.

    Must run before onnxruntime is imported: ORT's logger writes to fd 2 directly. A pipe fd handed to a spawned
    child is not inherited, so the redirect happens here, inside the child.
    """
    r, w = os.pipe()
    os.dup2(w, 2)
    os.dup2(w, 1)  # stdout too: onnxruntime's Python layer print()s its provider-fallback banner there
    os.close(w)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    warnings.formatwarning = one_line_warning  # each line read below becomes one event

    def reader() -> None:
        set_os_thread_name("ortop-stderr")
        with os.fdopen(r, "rb", buffering=0) as fh:
            buf = b""
            while True:
                chunk = fh.read(4096)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    text = ANSI.sub("", line.decode("utf-8", "replace")).rstrip()
                    if text:
                        try:
                            send(proto.Log(text))
                        except (OSError, ValueError):
                            return

    threading.Thread(target=reader, name="ortop-stderr", daemon=True).start()


LIBRARY_THREAD = "ortop-lib"


def name_library_threads() -> int:
    """Name every thread the worker's libraries started before any session (numpy's BLAS pool, onnxruntime's own
    at import) ``ortop-lib``, so that ORT's intra-op pool, started later by a session, is told from them: its
    threads inherit the main thread's name, and so would these. Linux only (a thread's ``comm`` in /proc);
    returns how many were named."""
    task = f"/proc/{os.getpid()}/task"
    try:
        tids = [int(t) for t in os.listdir(task)]
    except OSError:
        return 0
    try:
        with open(f"{task}/{os.getpid()}/comm") as fh:
            inherited = fh.read().strip()  # what a thread started by a library took from the main thread
    except OSError:
        return 0
    named = 0
    for tid in tids:
        if tid == os.getpid():
            continue
        try:
            with open(f"{task}/{tid}/comm", "r+") as fh:
                name = fh.read().strip()
                if name.startswith("ortop-") and name != inherited:  # one of ortop's own (reader, callers)
                    continue
                fh.seek(0)
                fh.write(LIBRARY_THREAD)
            named += 1
        except OSError:  # gone meanwhile, or a kernel that refuses: the name is only what the CPU panel shows
            continue
    return named


def die_with_parent() -> None:
    """Second guard besides EOF on the command pipe: the kernel kills us when the parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(0)
    except OSError:
        pass


class Sender:
    """Connection.send from several threads (the main loop, the stderr reader) needs one lock."""

    def __init__(self, conn):
        self.conn = conn
        self.lock = threading.Lock()

    def __call__(self, msg: Any) -> None:
        with self.lock:
            self.conn.send(msg)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_now() -> int:
    """The worker's resident memory in bytes, from ``/proc/self/statm`` (a few µs: cheap enough for every flush);
    psutil where there is no /proc; -1 when neither answers."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return process_rss()


def preload_missing(preload: str, maps: str) -> list[str]:
    """The entries of an ``LD_PRELOAD`` value that are not mapped in the process (``maps``: /proc/self/maps).

    ld.so skips a library it cannot load with one line on stderr, and that line is written at exec time, before
    the worker can catch its stderr: what is mapped is the only reliable answer. Entries are matched by path, or
    by file name for bare names ld.so looked up itself.
    """
    mapped = {line.split(None, 5)[5].strip() for line in maps.splitlines() if len(line.split(None, 5)) == 6}
    names = {os.path.basename(m) for m in mapped}
    real = {os.path.realpath(m) for m in mapped if m.startswith("/")}
    missing = []
    for entry in preload.replace(":", " ").split():
        if entry.startswith("/"):
            if entry not in mapped and os.path.realpath(entry) not in real:
                missing.append(entry)
        elif entry not in names:
            missing.append(entry)
    return missing


def check_preload(send) -> None:
    """Say, as a warning, when LD_PRELOAD asked for a library that is not loaded (a wrong path, not a library)."""
    preload = os.environ.get("LD_PRELOAD", "")
    if not preload.strip() or not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            maps = fh.read()
    except OSError:
        return
    for entry in preload_missing(preload, maps):
        send(proto.Log(f"LD_PRELOAD {entry} is not loaded in the worker (missing, or not a shared library): the "
                   "allocator is not in effect", "warning"))


# ---- the CUDA libraries ------------------------------------------------------------------------------------------
# onnxruntime-gpu's CUDA provider library carries no RUNPATH to the CUDA and cuDNN libraries the nvidia-* wheels
# install (pip install 'onnxruntime-gpu[cuda,cudnn]'): without onnxruntime.preload_dlls() (onnxruntime 1.21 and
# later) ORT fails to load the provider and runs on the CPU. preload_dlls() print()s each library it could not load
# and returns nothing; those lines become one warning here.
_preload: dict[str, str | None] = {}          # "done" -> the problem said, once per process
_warning_sink: list[Callable[[str], None]] = []  # where a child's warnings go (the worker: a Log message)


def set_warning_sink(fn: Callable[[str], None] | None) -> None:
    """Send this process's one-line warnings to ``fn`` (the worker sends them to its parent as Log messages)."""
    _warning_sink[:] = [fn] if fn is not None else []


def warn(text: str) -> None:
    """One warning line: to the sink when one is set, else to stderr (captured by the worker or the probe's log)."""
    if _warning_sink:
        _warning_sink[0](text)
    else:
        print(f"ortop: warning: {text}", file=sys.stderr, flush=True)


def preload_problem() -> str | None:
    """Call ``onnxruntime.preload_dlls()`` and say in one line what went wrong (None: nothing). Never raises."""
    import contextlib
    import io

    try:
        import onnxruntime as ort
    except Exception as exc:  # the build that follows reports the import itself
        return f"cannot import onnxruntime to preload the CUDA libraries: {' '.join(str(exc).split())[:300]}"
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return (f"onnxruntime {getattr(ort, '__version__', '?')} has no preload_dlls() (1.21 and later have it): the "
                "CUDA and cuDNN libraries must be on the loader's path, or CUDA falls back to the CPU")
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):
            preload()
    except Exception as exc:
        return (f"onnxruntime.preload_dlls() failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}; "
                "CUDA may fall back to the CPU")
    missing = []
    for m in re.finditer(r"Failed to load (\S+?): ", said.getvalue()):
        name = os.path.basename(m.group(1))
        if name not in missing:
            missing.append(name)
    if missing:
        return (f"onnxruntime.preload_dlls() could not load {', '.join(missing)}: CUDA may fall back to the CPU "
                "(pip install 'onnxruntime-gpu[cuda,cudnn]' installs them)")
    return None


def preload_cuda_libraries(warn_to: Callable[[str], None] | None = None) -> str | None:
    """Preload the CUDA libraries once per process, before the first CUDA or TensorRT session; a problem is warned
    once (to ``warn_to``, else :func:`warn`) and returned, never raised."""
    if "done" in _preload:
        return _preload["done"]
    problem = _preload["done"] = preload_problem()
    if problem:
        (warn_to or warn)(problem)
    return problem


def process_rss() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # a worker under another interpreter may have no psutil: /proc answers the same
        try:
            with open("/proc/self/statm", "rb") as fh:
                return int(fh.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return -1
    except Exception:  # psutil refused: the figure is optional
        return -1


def release_memory() -> None:
    """Give a dropped session's memory back to the system now: collect it, then ask glibc to return its free
    heap (freed blocks otherwise stay in the process: a 16 MB initializer freed reads as no change in RSS)."""
    import gc

    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
