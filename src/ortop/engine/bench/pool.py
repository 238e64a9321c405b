"""Workers by restart group: launch (environment, preload), build, route messages, restart a dead one.

Profiles that can share a process (the same ``Profile.restart_key()``: environment and global thread pools) live
as sessions in one worker; the others get a worker each. A :class:`Worker` remembers every session it was asked to
build, so when its process dies (a segfault, an abort, an OOM kill, a signal) :meth:`Worker.restart` starts a fresh
one and builds them all again, as the live view restarts its last good profile: what was measured before the
death is kept by the caller, and measuring goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ortop.config.profile import Profile
from ortop.runtime import protocol as proto


def restart_groups(profiles: Sequence[Profile]) -> list[int]:
    """For each profile, the index of the worker it needs: one per distinct ``restart_key()``, in order."""
    keys: list[tuple] = []
    out = []
    for p in profiles:
        k = p.restart_key()
        if k not in keys:
            keys.append(k)
        out.append(keys.index(k))
    return out


def death_text(exitcode: int | None) -> str:
    """Why a worker process ended, in words: ``signal 9``, ``exit code 1``."""
    why = f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit code {exitcode}"
    return f"the worker process died ({why})"


class Worker:
    """One worker process (one restart group) and what it said.

    Every message also goes to ``listener(msg)`` when one is set (an interleaving reading its blocks). ``dead``
    holds why the process ended (None while it runs); ``restarts`` how many times it was started again.
    """

    def __init__(self, model_path: str, env: Mapping[str, str], *, name: str = "ortop-bench-worker",
                 warn: Callable[[str], None] | None = None):
        self.model_path = model_path
        self.env = dict(env)
        self.name = name
        self.warn = warn
        self.cv = threading.Condition()
        self.built: dict[int, dict] = {}
        self.failed: dict[int, str] = {}
        self.run_errors: dict[int, str] = {}
        self.alt_done = 0
        self.dead: str | None = None
        self.restarts = 0
        self.blocks_since_start = 0  # blocks it finished since its process started (a restart that dies at once: 0)
        self.log: list[str] = []
        self.listener: Callable[[Any], None] | None = None
        self.on_death: Callable[[str], None] | None = None  # told why, from the receiver thread, when it dies
        self.builds: dict[int, proto.Build] = {}  # what it holds: sent again to a restarted process
        self._wp: Any = None
        self._closing = False

    # ---- the process ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        from ortop.engine.workerproc import launch

        self._closing = False
        with self.cv:
            self.dead = None
            self.built.clear()
            self.failed.clear()
            self.run_errors.clear()
            self.blocks_since_start = 0
        self._wp = launch(self.model_path, self.env, self._on_message, self._on_exit, name=self.name,
                          warn=self.warn, start=False)
        self._wp.start()

    @property
    def started(self) -> bool:
        """Started, and not dead since."""
        return self._wp is not None and self.dead is None

    @property
    def pid(self) -> int | None:
        return None if self._wp is None else self._wp.pid

    def send(self, msg: Any) -> None:
        if isinstance(msg, proto.Build):
            self.builds[msg.config_id] = msg
        elif isinstance(msg, proto.Drop):
            self.builds.pop(msg.config_id, None)
        if self._wp is not None:
            self._wp.send(msg)

    def restart(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Start a fresh process and build again every session this worker held; True once all are built (False:
        a build failed, the new process died too, ``stop`` was set, or ``timeout_s`` passed)."""
        self.close()
        self.restarts += 1
        self.start()
        for msg in list(self.builds.values()):
            self.send(msg)
        ids = list(self.builds)
        ok = self.wait(lambda: all(self.answered(c) for c in ids), timeout_s, stop)
        return ok and not any(c in self.failed for c in ids)

    def close(self) -> None:
        self._closing = True
        if self._wp is not None:
            self._wp.stop(graceful=True, timeout=2.0)
            self._wp = None

    # ---- what it says ---------------------------------------------------------------------------------------------
    def _on_message(self, msg: Any) -> None:
        with self.cv:
            if isinstance(msg, proto.Built):
                self.built[msg.config_id] = msg.info
            elif isinstance(msg, proto.BuildFailed):
                self.failed[msg.config_id] = msg.message
            elif isinstance(msg, proto.AlternationDone):
                self.alt_done += 1
            elif isinstance(msg, proto.RunError):
                self.run_errors[msg.config_id] = msg.message
            elif isinstance(msg, proto.Log) and len(self.log) < 50:
                self.log.append(msg.line)
            listener = self.listener
            self.cv.notify_all()
        if listener is not None:
            listener(msg)

    def _on_exit(self, wp: Any) -> None:
        if wp is not self._wp:
            return  # a process replaced by a restart
        with self.cv:
            if not self._closing:
                self.dead = death_text(wp.exitcode)
            dead, on_death = self.dead, self.on_death
            self.cv.notify_all()
        if dead is not None and on_death is not None:
            on_death(dead)

    def answered(self, config_id: int) -> bool:
        """Whether a build of ``config_id`` has an answer (built or failed)."""
        return config_id in self.built or config_id in self.failed

    def wait(self, cond: Callable[[], bool], timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Wait (under the lock) until ``cond``; False on timeout, on ``stop``, or when the process died."""
        end = time.monotonic() + timeout_s
        with self.cv:
            while not cond():
                if self.dead is not None or (stop is not None and stop.is_set()):
                    return False
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.1))
            return True


class Pool:
    """One :class:`Worker` per restart group of ``profiles`` (not started: :meth:`start`)."""

    def __init__(self, model_path: str, profiles: Sequence[Profile], *, name: str = "ortop-bench-worker",
                 warn: Callable[[str], None] | None = None):
        self.groups = restart_groups(profiles)
        self.workers: list[Worker] = []
        for g in range(max(self.groups, default=-1) + 1):
            env = next(p.env for p, gg in zip(profiles, self.groups) if gg == g)
            self.workers.append(Worker(model_path, dict(env), name=f"{name}-{g}", warn=warn))

    def of(self, i: int) -> Worker:
        """The worker profile ``i`` runs in."""
        return self.workers[self.groups[i]]

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def close(self) -> None:
        for w in self.workers:
            w.close()

    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)
