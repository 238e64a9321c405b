"""Workarounds for the Textual version ortop pins (textual >= 8, < 9), kept in one place so they can go when
Textual no longer needs them."""

from __future__ import annotations

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
