"""What the terminal UI uses of a monitor: exactly this, so the app is type-checked against it and a fake can stand in.

The app holds its monitor as a :class:`MonitorView`: mypy refuses any use of it that is not a member here, and
:func:`ortop.tui.app.run_app` hands a real :class:`~ortop.engine.live.monitor.Monitor` to the app's factory, so mypy
checks that the Monitor fits too. ``isinstance(fake, MonitorView)`` checks a test fake's names (runtime_checkable).
The monitor's start and stop are not part of the view: only ``run_app``, which built the Monitor, calls them.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from ortop.config.profile import Profile
from ortop.engine.live.snapshot import Snapshot


@runtime_checkable
class MonitorView(Protocol):
    """A live session the UI reads (:meth:`snapshot`) and drives (:meth:`apply`, pause, verify…)."""

    @property
    def model_path(self) -> str: ...

    @property
    def bucket_s(self) -> float:
        """The live series' bucket, in seconds (the sparklines' time axis)."""

    @property
    def window_s(self) -> float:
        """The span of the recent-window figures, in seconds (widened at low rates: ``Snapshot.window_span_s``)."""

    @property
    def fatal(self) -> str | None:
        """Why the model cannot run at all (restarts given up), else None."""

    @property
    def generation(self) -> int | None:
        """A counter that moves with every change but new runs, so a tick can skip a snapshot when it stands still;
        None where the monitor keeps none (the app then reads a snapshot on every tick)."""

    def snapshot(self) -> Snapshot: ...

    def apply(self, profile: Profile) -> int:
        """Validate ``profile`` now (raising ProfileError / ModelError), then build it; its configuration id."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def reset_stats(self) -> None: ...

    def add_event(self, level: str, text: str) -> None: ...

    def verify(self, config_id: int, against_id: int | None = None, seconds: float | None = None,
               metric: str | None = None) -> Future:
        """Interleave a configuration with the one before it (or ``against_id``), judging ``metric`` (None: the
        change's own); ValueError if there is none."""
