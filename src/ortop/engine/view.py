"""What the terminal UI uses of a monitor: exactly this, so a test fake can be checked against it.

``isinstance(fake, MonitorView)`` checks the names (runtime_checkable); a type checker checks the signatures.
The app reads ``generation`` only through ``getattr(monitor, "generation", None)`` (an optional hint to skip a
snapshot) and starts/stops the monitor it made itself, so neither is part of the view.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from ortop.config.profile import Profile
from ortop.engine.snapshot import Snapshot


@runtime_checkable
class MonitorView(Protocol):
    model_path: str
    bucket_s: float
    window_s: float

    @property
    def fatal(self) -> str | None: ...

    def snapshot(self) -> Snapshot: ...

    def apply(self, profile: Profile) -> int: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def reset_stats(self) -> None: ...

    def add_event(self, level: str, text: str) -> None: ...

    def verify(self, config_id: int, against_id: int | None = None, seconds: float | None = None) -> Future: ...
