"""What the screens share."""

from __future__ import annotations

from typing import cast

from textual.screen import Screen

from ortop.tui._compat import apply_breakpoints


class Responsive:
    """Screens that take the app's size classes as soon as they mount (see _compat.apply_breakpoints)."""

    def on_mount(self) -> None:
        apply_breakpoints(cast(Screen, self))  # a no-op when the classes were given at construction
