"""One worker process seen from the parent: spawn it with its environment, send it commands, hand its messages
to a callback on a receiver thread, and notice when it exits.

:func:`worker_env` is the one place a profile's environment becomes a child's (``LD_PRELOAD = "mimalloc"`` found or
left out with a warning, a preload that is not a shared library left out); :func:`launch` starts a worker with it.
The monitor, compare, the tuner's racer, the capacity search and the per-operator probe all start children
through them, so each runs with the allocator its profile asks for.

Another onnxruntime: a profile whose ``[env]`` names ``ORTOP_PYTHON`` (``--ort-python PATH``) gets its worker
under that interpreter (a venv with another onnxruntime and numpy, nothing else). multiprocessing's spawn cannot
start it (the child would take this interpreter's ``sys.path``, and so this venv's onnxruntime): it is started
with ``subprocess`` running :mod:`ortop.runtime.foreign`, its command connection one end of a socket pair, ortop's
package on its ``PYTHONPATH`` through a folder that holds only a link to it. :func:`check_python` asks the
interpreter for its onnxruntime and numpy first: a missing interpreter, or one without them, is one line (exit 2).
Being part of the environment, the interpreter also puts a profile in a worker of its own wherever profiles share
one by their environment (compare, the tuner)."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ortop.errors import UsageError

PYTHON_VAR = "ORTOP_PYTHON"   # in a profile's [env]: the interpreter its worker runs under
MIN_PYTHON = (3, 10)          # ortop's own floor (pyproject's requires-python): the worker's modules need it
CHECK_TIMEOUT_S = 60.0        # importing onnxruntime the first time on a cold disk takes seconds

_spawn_lock = threading.Lock()  # os.environ is process-wide: one spawn at a time sets it


def spawn_with_env(ctx: Any, target: Any, args: tuple, env: Mapping[str, str], name: str) -> Any:
    """Start ``target(*args)`` in a spawned child whose environment carries ``env`` on top of this one's.

    Environment knobs (LD_PRELOAD, OMP_*) must be in place when the child starts, and spawn copies os.environ at
    start(): they are set around start() only, under a lock, and this process's environment is restored.
    """
    with _spawn_lock:
        backup = {k: os.environ.get(k) for k in env}
        try:
            os.environ.update(env)
            proc = ctx.Process(target=target, args=args, daemon=True, name=name)
            proc.start()
        finally:
            for k, v in backup.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return proc


def run_child(target: Any, request: Any, env: Mapping[str, str], name: str, timeout_s: float | None,
              stop: threading.Event | None) -> tuple[dict[str, Any] | None, str]:
    """Run ``target(conn, request)`` once in a spawned child with ``env`` (see :func:`spawn_with_env`) and return
    the one message it sends, or (None, why not): it died, was stopped, or did not finish in ``timeout_s``. The
    child is killed if it is still alive when this returns (the short-lived probes: operators, variants)."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = spawn_with_env(ctx, target, (send, request), env, name)
    send.close()
    try:
        return _one_message(proc, recv, timeout_s, stop)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        recv.close()


def _one_message(proc: Any, conn: Any, timeout_s: float | None,
                 stop: threading.Event | None) -> tuple[dict[str, Any] | None, str]:
    """The child's one message, or (None, why not)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            if conn.poll(0.1):
                return conn.recv(), ""
        except (EOFError, OSError):  # it closed the pipe without a word: it is dying
            proc.join(5)
        if not proc.is_alive():
            code = proc.exitcode
            return None, f"died ({f'signal {-code}' if code is not None and code < 0 else f'exit code {code}'})"
        if stop is not None and stop.is_set():
            return None, "was stopped"
        if deadline is not None and time.monotonic() > deadline:
            return None, f"did not finish in {timeout_s:g} s"


def worker_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """A profile's ``[env]`` as the child's: ``LD_PRELOAD``'s ``mimalloc`` replaced by the library's path on this
    host, entries ld.so could not load left out; with the warnings to say for what was left out."""
    from ortop.collectors.allocator import resolve_allocator

    return resolve_allocator(env)


@dataclass(frozen=True)
class Interpreter:
    """Another Python interpreter a worker may run under, as it answered :func:`check_python`."""

    path: str
    python: str
    ort_version: str
    numpy_version: str

    def text(self) -> str:
        return f"onnxruntime {self.ort_version} under {self.path} (Python {self.python}, numpy {self.numpy_version})"


_CHECK = """\
import json, sys
out = {"python": "%d.%d.%d" % sys.version_info[:3]}
for name in ("numpy", "onnxruntime"):
    try:
        out[name] = __import__(name).__version__
    except Exception as exc:
        out[name + "_error"] = "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:200])
print(json.dumps(out))
"""
_checked: dict[str, Interpreter] = {}
_checked_lock = threading.Lock()


def check_python(path: str, timeout_s: float = CHECK_TIMEOUT_S) -> Interpreter:
    """Ask the interpreter at ``path`` for its Python, numpy and onnxruntime versions (once per path and process).

    Raises:
        UsageError: it is missing, not executable, not a Python that runs, older than ortop needs, or without
            numpy or onnxruntime (one line naming which, exit 2).
    """
    import json
    import subprocess

    with _checked_lock:
        if path in _checked:
            return _checked[path]
    what = f"--ort-python {path}"
    if not os.path.exists(path):
        raise UsageError(f"{what}: no such file")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise UsageError(f"{what}: not an executable file (give the venv's bin/python)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run([path, "-c", _CHECK], capture_output=True, text=True, timeout=timeout_s, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{what}: did not answer in {timeout_s:g} s") from None
    except OSError as exc:
        raise UsageError(f"{what}: cannot run it ({exc.strerror or exc})") from None
    lines = done.stdout.strip().splitlines()
    try:
        info = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        info = None
    if not isinstance(info, dict) or "python" not in info:
        said = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UsageError(f"{what}: not a Python interpreter that runs ({said[:200]})")
    version = tuple(int(x) for x in str(info["python"]).split("."))
    if version < MIN_PYTHON:
        raise UsageError(f"{what}: runs Python {info['python']}; ortop's worker needs "
                         f"{'.'.join(map(str, MIN_PYTHON))} or newer")
    for name in ("onnxruntime", "numpy"):
        if name not in info:
            raise UsageError(f"{what}: cannot import {name} ({info.get(name + '_error', '?')}): install it in that "
                             f"environment ({path} -m pip install {name})")
    found = Interpreter(path, str(info["python"]), str(info["onnxruntime"]), str(info["numpy"]))
    with _checked_lock:
        _checked[path] = found
    return found


_package_dir: str | None = None


def package_dir() -> str:
    """A folder holding only a link to ortop's package: the ``PYTHONPATH`` of a worker under another interpreter,
    which must see ortop and nothing else of this environment (its site-packages would bring this onnxruntime)."""
    global _package_dir
    import atexit
    import shutil
    import tempfile

    import ortop

    with _checked_lock:
        if _package_dir is None or not os.path.isdir(_package_dir):
            folder = tempfile.mkdtemp(prefix="ortop-pkg-")
            os.symlink(os.path.dirname(os.path.abspath(ortop.__file__)), os.path.join(folder, "ortop"))
            atexit.register(shutil.rmtree, folder, True)
            _package_dir = folder
        return _package_dir


def launch(model_path: str, env: Mapping[str, str], on_message: Callable[[Any], None],
           on_exit: Callable[[WorkerProc], None] | None = None, *, name: str = "ortop-worker",
           warn: Callable[[str], None] | None = None, start: bool = True) -> WorkerProc:
    """Start an inference worker for a profile's environment ``env`` (see :func:`worker_env`); each warning about
    the environment goes to ``warn``. With ``start=False`` the worker is made but not started: a caller whose
    message handler is not ready yet calls ``start()`` itself, so no early message (a preload the worker could not
    load, ORT's import log) arrives before it can be taken.

    Raises:
        UsageError: the environment names an interpreter (``ORTOP_PYTHON``) that cannot run the worker."""
    python = env.get(PYTHON_VAR) or None
    if python is not None:
        check_python(python)
    child_env, said = worker_env(env)
    for text in said:
        if warn is not None:
            warn(text)
    w = WorkerProc(model_path, child_env, on_message, on_exit, name=name, python=python)
    if start:
        w.start()
    return w


class WorkerProc:
    """``on_message(msg)`` runs on the receiver thread for every message; ``on_exit(self)`` once, after EOF."""

    def __init__(self, model_path: str, env: Mapping[str, str], on_message: Callable[[Any], None],
                 on_exit: Callable[[WorkerProc], None] | None = None, name: str = "ortop-worker",
                 python: str | None = None):
        self.model_path = model_path
        self.python = python     # another interpreter (see check_python), or None for this one
        self.env = dict(env)
        self.on_message = on_message
        self.on_exit = on_exit
        self.name = name
        self.proc: Any = None   # multiprocessing SpawnProcess
        self.conn: Any = None   # multiprocessing Connection
        self._receiver: threading.Thread | None = None
        self._send_lock = threading.Lock()
        self._models_sent: set[str] = set()

    def start(self) -> None:
        if self.python is not None:
            self._start_foreign(self.python)
            return
        from ortop.runtime.worker import worker_main

        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = spawn_with_env(ctx, worker_main, (child, self.model_path), self.env, self.name)
        child.close()
        self.proc, self.conn = proc, parent
        self._receiver = threading.Thread(target=self._receive, name=f"{self.name}-receiver", daemon=True)
        self._receiver.start()

    def _start_foreign(self, python: str) -> None:
        """Start :mod:`ortop.runtime.foreign` under ``python`` and send it the model's summary."""
        import socket
        import subprocess
        import tempfile
        from multiprocessing.connection import Connection

        from ortop.runtime.foreign import MODULE

        mine, theirs = socket.socketpair()
        env = {**os.environ, **self.env, "PYTHONPATH": package_dir()}
        env.pop("PYTHONHOME", None)
        log = tempfile.TemporaryFile()  # what the interpreter says before the worker catches its fd 2
        try:
            popen = subprocess.Popen([python, "-m", MODULE, str(theirs.fileno()), self.model_path],
                                     pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log)
        except OSError as exc:
            mine.close()
            log.close()
            raise UsageError(f"--ort-python {python}: cannot start it ({exc.strerror or exc})") from None
        finally:
            theirs.close()
        self.proc, self.conn = _Child(popen, log), Connection(mine.detach())
        try:
            self._send_models([self.model_path])
        except OSError:  # it died at once: the receiver sees the end and says why
            pass
        self._receiver = threading.Thread(target=self._receive, name=f"{self.name}-receiver", daemon=True)
        self._receiver.start()

    def _send_models(self, paths: list[str]) -> None:
        """A worker under another interpreter reads no model itself (it may have no onnx): send it the summary of
        each model it has not been sent yet, ahead of the message that names it."""
        from ortop.model import load_model
        from ortop.runtime.foreign import Models

        todo = {os.path.abspath(p) for p in paths if p} - self._models_sent
        if not todo or self.conn is None:
            return
        infos = {}
        for p in todo:
            try:
                infos[p] = load_model(p)
            except Exception:  # the worker's own build reports a model it cannot read
                continue
        self.conn.send(Models(infos))
        self._models_sent |= set(infos)

    @property
    def pid(self) -> int | None:
        p = self.proc
        return p.pid if p is not None and p.is_alive() else None

    @property
    def exitcode(self) -> int | None:
        return self.proc.exitcode if self.proc is not None else None

    def send(self, msg: Any) -> bool:
        conn = self.conn
        if conn is None:
            return False
        try:
            with self._send_lock:
                if self.python is not None:
                    from ortop.runtime.protocol import Build

                    if isinstance(msg, Build):
                        self._send_models([str(msg.profile.get("model") or ""), getattr(msg, "feed_model", "")])
                conn.send(msg)
            return True
        except (OSError, ValueError, BrokenPipeError):
            return False  # the receiver sees the death and reports it

    def stop(self, graceful: bool = True, timeout: float = 3.0) -> None:
        """Ask the worker to exit (graceful), then kill it if it is still there; idempotent."""
        from ortop.runtime.protocol import Stop

        proc, conn = self.proc, self.conn
        if proc is None:
            return
        if graceful and conn is not None and proc.is_alive():
            self.send(Stop())
            proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout)
        self.conn = None
        if conn is not None:
            conn.close()

    def _receive(self) -> None:
        conn, proc = self.conn, self.proc
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError, ValueError, TypeError):
                break
            self.on_message(msg)
        proc.join(1)
        if isinstance(proc, _Child) and proc.exitcode:  # died before or without its words reaching the pipe
            from ortop.runtime.protocol import Log

            for line in proc.last_words():
                self.on_message(Log(f"{self.python}: {line}"))
        if self.on_exit is not None:
            self.on_exit(self)


class _Child:
    """A worker started by ``subprocess`` seen as multiprocessing's Process is (pid, is_alive, exitcode, join,
    kill; a negative exit code is the signal that ended it)."""

    def __init__(self, popen: Any, log: Any):
        self.popen = popen
        self.log = log
        self.pid = popen.pid

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def join(self, timeout: float | None = None) -> None:
        import subprocess

        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()

    def last_words(self, n: int = 3) -> list[str]:
        """The last lines the interpreter wrote to its stderr before the worker caught it (an import error)."""
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return []
        return [ln.strip() for ln in text.splitlines() if ln.strip()][-n:]
