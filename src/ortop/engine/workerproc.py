"""One worker process seen from the parent: spawn it with its environment, send it commands, hand its messages
to a callback on a receiver thread, and notice when it exits.

:func:`worker_env` is the one place a profile's environment becomes a child's (``LD_PRELOAD = "mimalloc"`` found or
left out with a warning, a preload that is not a shared library left out); :func:`launch` starts a worker with it.
The monitor, compare, the tuner's racer, the capacity search and the per-operator probe all start children
through them, so each runs with the allocator its profile asks for."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

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


def worker_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """A profile's ``[env]`` as the child's: ``LD_PRELOAD``'s ``mimalloc`` replaced by the library's path on this
    host, entries ld.so could not load left out; with the warnings to say for what was left out."""
    from ortop.collectors.memory import resolve_allocator

    return resolve_allocator(env)


def launch(model_path: str, env: Mapping[str, str], on_message: Callable[[Any], None],
           on_exit: Callable[[WorkerProc], None] | None = None, *, name: str = "ortop-worker",
           warn: Callable[[str], None] | None = None, start: bool = True) -> WorkerProc:
    """Start an inference worker for a profile's environment ``env`` (see :func:`worker_env`); each warning about
    the environment goes to ``warn``. With ``start=False`` the worker is made but not started: a caller whose
    message handler is not ready yet calls ``start()`` itself, so no early message (a preload the worker could not
    load, ORT's import log) arrives before it can be taken."""
    child_env, said = worker_env(env)
    for text in said:
        if warn is not None:
            warn(text)
    w = WorkerProc(model_path, child_env, on_message, on_exit, name=name)
    if start:
        w.start()
    return w


class WorkerProc:
    """``on_message(msg)`` runs on the receiver thread for every message; ``on_exit(self)`` once, after EOF."""

    def __init__(self, model_path: str, env: Mapping[str, str], on_message: Callable[[Any], None],
                 on_exit: Callable[[WorkerProc], None] | None = None, name: str = "ortop-worker"):
        self.model_path = model_path
        self.env = dict(env)
        self.on_message = on_message
        self.on_exit = on_exit
        self.name = name
        self.proc: Any = None   # multiprocessing SpawnProcess
        self.conn: Any = None   # multiprocessing Connection
        self._receiver: threading.Thread | None = None
        self._send_lock = threading.Lock()

    def start(self) -> None:
        from ortop.runtime.worker import worker_main

        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = spawn_with_env(ctx, worker_main, (child, self.model_path), self.env, self.name)
        child.close()
        self.proc, self.conn = proc, parent
        self._receiver = threading.Thread(target=self._receive, name=f"{self.name}-receiver", daemon=True)
        self._receiver.start()

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
        if self.on_exit is not None:
            self.on_exit(self)
