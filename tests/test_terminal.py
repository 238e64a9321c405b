"""``ortop MODEL`` in a real pseudo-terminal, as over SSH: it quits cleanly, and a dropped connection ends it too.

The terminal's hang-up is the SSH case: the kernel sends SIGHUP and then SIGCONT to the foreground process group.
Whatever the order of ``q`` and the hang-up, the process must end (not linger with a thread spinning on the dead
terminal), keep the settings for `--resume` and take its worker with it.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import psutil
import pytest

from tests.models import make_matmul_model

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="needs a POSIX pty")]

START_S = 60.0   # bound on the first frame (a cold import of onnxruntime and textual on a busy CI host)
EXIT_S = 20.0    # bound on the exit after q or a hang-up


class Tty:
    """ortop running in a pty of 120×40; ``out`` is everything it wrote."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        pid, fd = os.forkpty()
        if pid == 0:  # the child: exec ortop, never return into pytest
            try:
                os.execve(sys.executable, [sys.executable, "-m", "ortop.cli", *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.out = b""
        self.status: int | None = None
        self.children: list[psutil.Process] = []

    def read(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while self.fd >= 0 and time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return  # EIO: the child closed its side
            if not chunk:
                return
            self.out += chunk

    def wait_for(self, text: bytes, timeout: float) -> None:
        end = time.monotonic() + timeout
        while text not in self.out and time.monotonic() < end and self.poll() is None:
            self.read(0.2)
            try:
                self.children = psutil.Process(self.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        assert text in self.out, f"{text!r} never appeared; the last output: {self.out[-400:]!r}"

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def hang_up(self) -> None:
        os.close(self.fd)
        self.fd = -1

    def poll(self) -> int | None:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait_exit(self, timeout: float = EXIT_S) -> int:
        end = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < end:
            if self.fd >= 0:
                self.read(0.1)
            else:
                time.sleep(0.05)
        if self.status is None:
            cpu = psutil.Process(self.pid).cpu_percent(0.5)
            stacks = self.stacks()
            self.kill()
            pytest.fail(f"ortop was still running {timeout:.0f} s later, at {cpu:.0f}% CPU; its threads:\n{stacks}")
        return self.status

    def stacks(self) -> str:
        """Every thread's stack, from faulthandler (PYTHONFAULTHANDLER) on SIGABRT: where a hung exit waits."""
        seen = len(self.out)
        try:
            os.kill(self.pid, signal.SIGABRT)
        except ProcessLookupError:
            return "(gone)"
        if self.fd >= 0:
            self.read(2.0)
        text = self.out[seen:].decode(errors="replace")
        return text[text.find("Thread 0x"):] if "Thread 0x" in text else text[-2000:]

    def kill(self) -> None:
        for p in [psutil.Process(self.pid), *self.children]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        if self.status is None:
            os.waitpid(self.pid, 0)
            self.status = -9
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@pytest.fixture
def run_tty(tmp_path):
    started: list[Tty] = []
    env = dict(os.environ, TERM="xterm-256color", XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="120", LINES="40", PYTHONFAULTHANDLER="1")
    env.pop("PYTHONWARNINGS", None)
    model = make_matmul_model(tmp_path / "mm.onnx", n=64)

    def start(*extra: str) -> Tty:
        t = Tty([model, "--profile-dir", str(tmp_path / "profiles"), *extra], env)
        started.append(t)
        t.wait_for("● measuring".encode(), START_S)  # the status line: a session is up, so there are settings to keep
        return t

    yield start
    for t in started:
        if t.status is None:
            t.kill()


def last_session(tmp_path: Path) -> Path:
    """Where the fixture's ortop keeps its model's last session (the store's name for it, under this state dir)."""
    from ortop.config.files import last_session_path, state_dir

    name = last_session_path(tmp_path / "mm.onnx").relative_to(state_dir())
    return tmp_path / "state" / "ortop" / name


def assert_gone(procs: list[psutil.Process]) -> None:
    """The worker (and anything else ortop started) ended with it."""
    end = time.monotonic() + 10
    alive = procs
    while alive and time.monotonic() < end:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    assert not alive, f"still running after ortop ended: {[p.pid for p in alive]}"


def test_q_quits_and_restores_the_terminal(run_tty, tmp_path):
    t = run_tty()
    t.send(b"q")
    assert t.wait_exit() == 0
    t.read(0.5)
    tail = t.out[-200:]
    assert b"\x1b[?1049l" in tail and b"\x1b[?25h" in tail, tail  # main screen back, cursor shown
    assert last_session(tmp_path).exists()
    assert_gone(t.children)


def test_a_dropped_connection_ends_ortop_and_keeps_the_settings(run_tty, tmp_path):
    t = run_tty()
    t.hang_up()  # the SSH link drops: SIGHUP, then SIGCONT
    assert t.wait_exit() == 0
    assert last_session(tmp_path).exists()
    assert_gone(t.children)


def test_q_then_the_terminal_closing_at_once_still_ends_ortop(run_tty, tmp_path):
    """``q`` and then the window closed while ortop is still shutting down (tmux kill-session after the summary)."""
    summary = tmp_path / "summary.json"
    t = run_tty("--summary", str(summary))
    t.send(b"q")
    end = time.monotonic() + EXIT_S
    while not summary.exists() and time.monotonic() < end:
        t.read(0.02)
    assert summary.exists(), "no summary after q"
    t.hang_up()
    assert t.wait_exit() == 0
    assert_gone(t.children)


def test_sigterm_ends_ortop_like_q(run_tty, tmp_path):
    t = run_tty()
    os.kill(t.pid, signal.SIGTERM)
    assert t.wait_exit() == 0
    assert last_session(tmp_path).exists()
    assert_gone(t.children)


def test_sigcont_while_quitting_does_not_bring_the_input_back(run_tty, tmp_path):
    """The kernel follows every hang-up with SIGCONT. Textual's handler for it restarts the terminal input thread;
    arriving while ortop shuts down, that thread used to spin on the dead terminal and keep the process alive at
    100 % CPU. Here SIGCONT arrives every 10 ms from ``q`` to the end."""
    t = run_tty()
    t.send(b"q")
    end = time.monotonic() + EXIT_S
    while t.poll() is None and time.monotonic() < end:
        try:
            os.kill(t.pid, signal.SIGCONT)
        except ProcessLookupError:
            break
        t.read(0.01)
    assert t.wait_exit() == 0
    assert last_session(tmp_path).exists()
    assert_gone(t.children)
