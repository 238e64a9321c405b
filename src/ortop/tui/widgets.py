"""The one live widget: a bordered panel that draws a Rich ``Text`` and repaints only when the text changed."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.events import Resize
from textual.widget import Widget

Draw = Callable[[int, int], Text]


class Panel(Widget):
    """A thin widget over a pure drawing function.

    The app hands it ``draw(width, height) -> Text`` on each refresh tick; the panel calls it with its own content
    size, compares the result with what it shows, and asks for a repaint (never a layout: its size comes from the
    stylesheet) only when something changed. Most ticks change a few panels, so most ticks repaint little.
    """

    DEFAULT_CSS = """
    Panel { height: auto; }
    """

    def __init__(self, title: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        if title:
            self.border_title = title
        self._text = Text("", end="")
        self._draw: Draw | None = None
        self.repaints = 0
        self.on_size: Callable[[], None] | None = None  # told after a resize, e.g. to re-fit neighbours

    @property
    def text(self) -> Text:
        """What the panel shows now (tests read its ``plain``)."""
        return self._text

    def show(self, draw: Draw) -> bool:
        """Draw with the current size; repaint if the text differs. Returns whether it did."""
        self._draw = draw
        size = self.content_size
        if size.width <= 0 or size.height <= 0:
            return False
        return self.set_text(draw(size.width, size.height))

    def set_text(self, text: Text) -> bool:
        """Show ``text`` if it differs from the current one (Rich compares plain text and spans)."""
        if text == self._text:
            return False
        self._text = text
        self.repaints += 1
        self.refresh()
        return True

    def render(self) -> Text:
        return self._text

    def on_resize(self, event: Resize) -> None:
        if self.on_size is not None:
            self.on_size()
        if self._draw is not None:
            self.show(self._draw)
