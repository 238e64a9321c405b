"""Stop on ctrl-C: the long commands (run, compare, doctor, capacity, tune, fleet) end with what was measured.

A signal sets the command's stop event, which its engine polls between blocks, so the result so far is printed
(and the command exits 130 where it says so). With ``second_aborts`` a second signal raises KeyboardInterrupt: the
user who presses ctrl-C twice wants out now, not the figures. The handlers are the command's only while it measures:
the previous ones come back on the way out, whatever ends it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Stopping:
    """What :func:`stop_on_signals` yields: the event the engine polls, and the first signal that set it."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None  # None: no signal asked to stop (the event may still have been set by the engine)

    @property
    def signalled(self) -> bool:
        """Whether a signal asked to stop (a command's exit 130), not only the engine's own stop."""
        return self.signum is not None


@contextlib.contextmanager
def stop_on_signals(event: threading.Event | None = None, *, signals: tuple[int, ...] = STOP_SIGNALS,
                    second_aborts: bool = False, on_stop: Callable[[], None] | None = None) -> Iterator[Stopping]:
    """Within the block, each of ``signals`` sets ``event`` (a new one when None) instead of ending the process.

    Args:
        event: the stop event the engine already holds, when it was made before the block.
        signals: the signals that stop; SIGINT and SIGTERM unless a command leaves SIGTERM its default.
        second_aborts: a signal arriving once the event is set raises KeyboardInterrupt (abort, nothing printed).
        on_stop: called after a signal set the event, e.g. to say on stderr that the result so far follows.

    Off the main thread nothing is installed (Python takes signal handlers only there): the event is still
    yielded, for the engine and the caller to share.
    """
    stopping = Stopping(event if event is not None else threading.Event())
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return

    def on_signal(signum: int, frame: object) -> None:
        if second_aborts and stopping.event.is_set():
            raise KeyboardInterrupt
        if stopping.signum is None:
            stopping.signum = signum
        stopping.event.set()
        if on_stop is not None:
            on_stop()

    old = {s: signal.signal(s, on_signal) for s in signals}
    try:
        yield stopping
    finally:
        for s, h in old.items():
            signal.signal(s, h)
