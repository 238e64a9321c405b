"""Workarounds for the Textual version ortop pins (textual >= 8, < 9), kept in one place so they can go when
Textual no longer needs them."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

from textual.screen import Screen


def breakpoint_classes(size: tuple[int, int] | None = None) -> list[str]:
    """The app's breakpoint classes for a terminal size (the running app's by default): pass them to a screen's
    constructor so it is styled for the real size from its first layout, not restyled after it."""
    from textual._context import active_app

    app = active_app.get()
    width, height = size or app.size
    out = []
    for value, points in ((width, app.HORIZONTAL_BREAKPOINTS or []), (height, app.VERTICAL_BREAKPOINTS or [])):
        for threshold, name in sorted(points, reverse=True):
            if value >= threshold:
                out.append(name)
                break
    return out


def apply_breakpoints(screen: Screen) -> None:
    """Set a screen's breakpoint classes (``-narrow``, ``-short``…) from the terminal size now.

    Textual 8 sets them only when the screen receives a Resize event. A modal pushed onto a running app in a real
    terminal may not get one until the terminal is resized, and then lays out with the wide styles on an 80×24
    terminal (seen in tmux; the headless test driver happens to send one, so tests alone would not show it).
    """
    app = screen.app
    width, height = app.size
    horizontal = (screen.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is not None
                  else app.HORIZONTAL_BREAKPOINTS) or []
    vertical = (screen.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is not None
                else app.VERTICAL_BREAKPOINTS) or []
    wanted: dict[str, bool] = {name: False for _, name in [*horizontal, *vertical]}
    for size, points in ((width, horizontal), (height, vertical)):
        for threshold, name in sorted(points, reverse=True):
            if size >= threshold:
                wanted[name] = True
                break
    for name, on in wanted.items():
        screen.set_class(on, name)


def install_hangup_handlers(handle: Callable[[int], None]) -> None:
    """Call ``handle(signum)`` on the running event loop for SIGTERM and SIGHUP.

    A plain ``signal.signal`` handler rather than the event loop's: when a terminal hangs up, the kernel sends
    SIGHUP and then SIGCONT, and Textual's SIGCONT handler restarts its input thread on the dead terminal, where it
    spins at 100 % of a core and keeps the process alive after the app has ended. Python runs the handlers of
    pending signals in signal-number order, so this one (SIGHUP is 1) drops the SIGCONT and SIGTSTP handlers
    before SIGCONT's is looked at.
    """
    loop = asyncio.get_running_loop()

    def on_signal(signum: int, frame: Any) -> None:
        if signum == signal.SIGHUP:
            release_job_control_signals()
        try:
            loop.call_soon_threadsafe(handle, signum)
        except RuntimeError:
            pass  # the loop has closed: the app is already on its way out

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, on_signal)
        except (ValueError, OSError):
            pass  # not on the main thread, or a platform without the signal


def release_job_control_signals() -> None:
    """Back to the default SIGCONT / SIGTSTP handling, which Textual's driver takes over for ctrl+z and never gives
    back; a SIGCONT after the app has stopped must not start its input thread again."""
    for sig in ("SIGCONT", "SIGTSTP"):
        if hasattr(signal, sig):
            try:
                signal.signal(getattr(signal, sig), signal.SIG_DFL)
            except (ValueError, OSError):
                pass  # not the main thread


def resume_only_after_suspend(driver: Any) -> None:
    """Let ``driver``'s SIGCONT handler resume the terminal only after its own SIGTSTP suspended it (ctrl+z).

    Textual's handler starts the application mode again on every SIGCONT, suspended or not. A SIGCONT while the
    app runs (the kernel sends one after every hang-up; ``kill -CONT`` does too) starts a second input thread and
    output thread beside the first. The two input threads then wait on the one terminal: one of them blocks in a
    read that never returns, and, not being a daemon thread, keeps the process from exiting (0 % CPU).
    """
    handler = getattr(driver, "_sigcont_application", None)
    if handler is None or not hasattr(signal, "SIGCONT"):
        return

    def on_sigcont(signum: int, frame: Any) -> None:
        if getattr(driver, "_must_signal_resume", False):  # set by the driver's SIGTSTP handler, cleared on resume
            handler(signum, frame)

    try:
        signal.signal(signal.SIGCONT, on_sigcont)
    except (ValueError, OSError):
        pass  # not the main thread


def release_before_stop(driver: Any) -> None:
    """Drop the SIGCONT / SIGTSTP handlers as the first step of ``driver``'s shutdown, whatever ends the app.

    Textual's SIGCONT handler starts the application mode again, which writes escape sequences into the output
    thread's bounded queue. A SIGCONT that arrives once that thread has stopped (a hang-up while quitting) makes
    the handler block on the full queue forever, at 0 % CPU: the process never exits.
    """
    stop = getattr(driver, "stop_application_mode", None)
    if stop is None:
        return

    def stop_application_mode() -> None:
        release_job_control_signals()
        stop()

    driver.stop_application_mode = stop_application_mode


def stop_input_thread(driver: Any) -> None:
    """Make sure no input thread of ``driver`` outlives the app (it would keep the process alive)."""
    event = getattr(driver, "exit_event", None)
    if event is not None:
        event.set()


def relabel_binding(node: Any, key: str, description: str) -> None:
    """Give ``node``'s binding of ``key`` another footer label (the capacity screen's ``a`` names the profile it
    sizes). Textual declares bindings per class and offers no public way to relabel one; each node holds its own
    copy of them, and this rewrites that copy."""
    from dataclasses import replace

    table = node._bindings.key_to_bindings
    table[key] = [replace(b, description=description) for b in table.get(key, [])]
    node.refresh_bindings()
