"""The one live widget: a bordered panel that draws Rich ``Text`` line by line and repaints only changed lines.

Over ~460 lines: the panel and the small widgets beside it (a choice, the footer that fits its keys, the key bar)
share the line-by-line drawing (``line_segments``, ``stacked_lines``, ``runs``) that keeps a repaint to the lines
that changed; apart, each would carry its own copy of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Click, Resize
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from ortop.tui.keymap import MAIN_KEYS, Key, bar_display

Draw = Callable[[int, int], Text]
PALETTE_W = 12  # the command palette's key on the footer's right: "▏^p palette "


def stacked_lines(text: Text) -> list[Text]:
    """The lines of a drawing: those :func:`~ortop.tui.panels._format.join_lines` kept, else ``text`` split.

    A split line without spans is drawn without the text's style, as Rich's ``render`` draws it (a panel that
    wants a style on such a line stacks it with ``join_lines``, which keeps each line's own)."""
    kept = getattr(text, "lines", None)
    if kept is not None:
        return list(kept)
    lines = list(text.split("\n", allow_blank=True)) if text.plain else []
    for line in lines:
        if not line.spans:
            line.style = ""
    return lines


def same_line(a: Text, b: Text) -> bool:
    """Whether two lines draw the same: text, spans and the line's own style (Text's ``==`` ignores the last)."""
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


def runs(ys: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as runs of consecutive ones, ``(first, last + 1)``: one dirty region per run."""
    out: list[tuple[int, int]] = []
    for y in ys:
        if out and out[-1][1] == y:
            out[-1] = (out[-1][0], y + 1)
        else:
            out.append((y, y + 1))
    return out


_STYLES: dict[tuple[object, object], Style] = {}  # (line style, span style) -> the style the segment draws with
_STYLES_MAX = 4096  # a bound: styles are a few dozen names in practice


def _style(console: Console, base: str | Style, span: str | Style | None) -> Style:
    key = (base, span)
    hit = _STYLES.get(key)
    if hit is None:
        get = console.get_style
        hit = get(base, default=Style.null())
        if span is not None:
            hit = Style.combine((hit, get(span, default=Style.null())))
        if len(_STYLES) >= _STYLES_MAX:
            _STYLES.clear()
        _STYLES[key] = hit
    return hit


def line_segments(line: Text, console: Console) -> list[Segment]:
    """One line as Rich renders it (the line's style under each span's), in one pass over its spans.

    A panel's lines are built by appending, so their spans come in order and do not overlap; for those the styles
    are looked up once per (line style, span style) instead of stacked and combined per span on every repaint,
    which was most of the cost of a repainted line. Any other line goes through Rich's own ``render``. Unlike
    ``render``, a line with a style and no spans keeps its style (as it does once split out of a stacked text).
    """
    text, spans, base = line.plain, line.spans, line.style
    if not spans and not base:
        return [Segment(text)]
    at = 0
    for span in spans:
        if span.start < at or span.end < span.start:
            return list(line.render(console))
        at = span.end
    out: list[Segment] = []
    at = 0
    for start, end, style in spans:
        if start > at:
            out.append(Segment(text[at:start], _style(console, base, None)))
        if end > start:
            out.append(Segment(text[start:end], _style(console, base, style)))
        at = max(at, end)
    if at < len(text):
        out.append(Segment(text[at:], _style(console, base, None)))
    return out


class Panel(Widget):
    """A thin widget over a pure drawing function.

    The app hands it ``draw(width, height) -> Text`` on each refresh tick; the panel calls it with its own content
    size, compares each line with what it shows, and marks only the changed lines dirty. Textual then renders just
    those lines (through :meth:`render_line`, Textual's line API), not the whole panel and the containers behind it:
    on a 2-core host that shares the CPU with the model, a repaint of two changed lines instead of forty is most of
    the UI's budget. The panel's size comes from the stylesheet, never from its text, so no repaint needs a layout.
    """

    def __init__(self, title: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        if title:
            self.border_title = title
        self._text = Text("", end="")
        self._lines: list[Text] = []
        self._strips: dict[int, tuple[int, Style, Strip]] = {}  # y -> (width, base style, rendered line)
        self._final: dict[int, Strip] = {}  # y (with the border) -> the finished line, for render_lines
        self._final_span: tuple[int, int] = (-1, -1)  # the crop's (x, width) those lines were cut to
        self._draw: Draw | None = None
        self._key: object = object()  # what the current text was drawn from (see show)
        self._base: Style | None = None  # this widget's rich style, kept until the styles change
        self.repaints = 0      # times the text changed (tests and the overhead bench read it)
        self.lines_painted = 0
        self.on_size: Callable[[], None] | None = None  # told after a resize, e.g. to re-fit neighbours

    @property
    def text(self) -> Text:
        """What the panel shows now (tests read its ``plain``)."""
        return self._text

    def show(self, draw: Draw, key: object = None) -> bool:
        """Draw with the current size; repaint the lines that differ. Returns whether any did.

        ``key`` names what the drawing depends on (a sample, a figure): when it equals the last one and the size
        is unchanged, the draw is skipped altogether.
        """
        self._draw = draw
        size = self.size
        if size.width <= 0 or size.height <= 0:
            return False
        if key is not None and key == self._key and size == getattr(self, "_key_size", None):
            return False
        self._key, self._key_size = key, size
        return self.set_text(draw(size.width, size.height))

    def set_text(self, text: Text) -> bool:
        """Show ``text``, marking dirty only the lines that differ (their text, spans or style).

        A drawing stacked by :func:`ortop.tui.panels._format.join_lines` carries its lines, so they are compared
        as drawn, without splitting the stacked text again; a run of changed lines is marked dirty as one region.
        """
        new = stacked_lines(text)
        old = self._lines
        self._text = text
        changed = [y for y in range(max(len(new), len(old)))
                   if y >= len(new) or y >= len(old) or not same_line(new[y], old[y])]
        self._lines = new
        if not changed:
            return False
        self.repaints += 1
        for y in changed:
            self._strips.pop(y, None)
        width = max(1, self.size.width)
        self.refresh(*[Region(0, top, width, bottom - top) for top, bottom in runs(changed)])
        return True

    def render_line(self, y: int) -> Strip:
        """One content line, from the cache unless its text, the width or the base style changed."""
        width = self.size.width
        style = self._base
        if style is None:
            style = self._base = self.rich_style
        hit = self._strips.get(y)
        if hit is not None and hit[0] == width and hit[1] is style:
            return hit[2]
        self.lines_painted += 1
        if y < len(self._lines):
            line = self._lines[y]
            strip = Strip(line_segments(line, self.app.console), line.cell_len).crop_extend(0, width, style)
            strip = strip.apply_style(style)
        else:
            strip = Strip.blank(width, style)
        self._strips[y] = (width, style, strip)
        return strip

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of ``crop``, with border and filters, from a cache that only dirty lines leave.

        Textual renders every widget under the bounding box of all dirty regions: a frame that changes a line at the
        top left and one at the bottom right re-renders all panels, each through the styles cache (borders, padding,
        filters), though nearly all their lines are unchanged. Here the unchanged ones cost a dict lookup.
        """
        span = (crop.x, crop.width)
        if span != self._final_span:
            self._final.clear()
            self._final_span = span
        final = self._final
        ys = crop.line_range
        missing = [y for y in ys if y not in final]
        if missing:
            lo, hi = missing[0], missing[-1] + 1
            for y, strip in zip(range(lo, hi), super().render_lines(Region(crop.x, lo, crop.width, hi - lo))):
                final[y] = strip
        return [final[y] for y in ys]

    def _set_dirty(self, *regions: Region) -> None:
        # Textual 8's one path for "repaint this" (refresh, style resets): what it marks dirty leaves the line cache.
        super()._set_dirty(*regions)
        if not regions:
            self._final.clear()
            return
        top = self.content_offset.y
        for region in regions:
            for y in range(region.y + top, region.bottom + top):
                self._final.pop(y, None)

    def notify_style_update(self) -> None:
        self._base = None
        self._strips.clear()
        self._final.clear()
        super().notify_style_update()

    def on_resize(self, event: Resize) -> None:
        self._strips.clear()
        self._final.clear()
        self._key = object()
        if self.on_size is not None:
            self.on_size()
        if self._draw is not None:
            self.show(self._draw)
        self.refresh()


class Choice(Widget, can_focus=True):
    """One of a few values on one line (``◂ off ▸``); ←/→ or space cycle, a click steps forward, enter submits.

    A Select is six widgets and an overlay; a form with fifteen of them restyles all of that on every focus change.
    This is one widget with one line of text. It has no list to open, so enter does what it does in an Input: it
    posts :class:`Submitted` (the settings form applies on it).
    """

    BINDINGS = [
        Binding("left", "step(-1)", "previous", show=False),
        Binding("right,space", "step(1)", "next", show=False),
        Binding("enter", "submit", "submit", show=False),
    ]

    value: reactive[str] = reactive("", layout=False)

    class _Said(Message):
        """What a Choice says: itself (the message's control) and its value."""

        def __init__(self, choice: Choice, value: str) -> None:
            super().__init__()
            self.choice = choice
            self.value = value

        @property
        def control(self) -> Choice:
            return self.choice

    class Changed(_Said):
        """The value changed (by a key, a click or code)."""

    class Submitted(_Said):
        """Enter was pressed on the choice, as Input.Submitted is on an input."""

    def __init__(self, choices: Sequence[tuple[str, str]], value: str, *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.choices = tuple(choices)
        values = [v for _, v in self.choices]
        self.set_reactive(Choice.value, value if value in values else values[0])

    def render(self) -> Text:
        label = next((lab for lab, v in self.choices if v == self.value), self.value)
        t = Text(no_wrap=True, end="")
        t.append("◂ ", style="dim")
        t.append(label, style="bold" if self.has_focus else "")
        t.append(" ▸", style="dim")
        return t

    def watch_value(self, value: str) -> None:
        self.post_message(self.Changed(self, value))

    def action_step(self, delta: int) -> None:
        values = [v for _, v in self.choices]
        i = values.index(self.value) if self.value in values else 0
        self.value = values[(i + delta) % len(values)]

    def action_submit(self) -> None:
        self.post_message(self.Submitted(self, self.value))

    def on_click(self, event: Click) -> None:
        self.action_step(1)


class FitFooter(Footer):
    """Textual's footer for the other screens, fitted to the width: every key with its label and the palette's key
    when they fit; else every key without the palette's; else the first keys that fit beside ``^p more`` (the
    command palette lists the keys left out). Textual's own draws them all and the terminal cuts the last mid-word.
    """

    MORE = "more"
    PAD = 3  # " key label " and a column between keys

    def __init__(self) -> None:
        super().__init__()
        self._fitted: tuple | None = None

    def _shown(self) -> list[tuple[Binding, bool, str]]:
        out: dict[str, tuple[Binding, bool, str]] = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                out.setdefault(binding.action, (binding, enabled, tooltip))
        return list(out.values())

    def _cost(self, binding: Binding, label: str | None = None) -> int:
        text = binding.description if label is None else label
        return len(self.app.get_key_display(binding)) + len(text) + self.PAD

    def fit(self, width: int) -> tuple[list[tuple[Binding, bool, str]], str | None]:
        """The keys shown at ``width``, and the palette key's label (None: not shown)."""
        keys = self._shown()
        palette = self._palette()
        need = sum(self._cost(b) for b, _, _ in keys)
        if palette is None:
            return keys, None
        if need + self._cost(palette) <= width:
            return keys, palette.description
        if need <= width:
            return keys, None
        room, kept = width - self._cost(palette, self.MORE), []
        for entry in keys:
            room -= self._cost(entry[0])
            if room < 0:
                break
            kept.append(entry)
        return kept, self.MORE

    def _palette(self) -> Binding | None:
        if not (self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE):
            return None
        hit = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        return hit[1] if hit is not None else None

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        keys, palette_label = self.fit(self.app.size.width)
        for binding, enabled, tooltip in keys:
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        palette = self._palette()
        if palette_label is not None and palette is not None:
            left = [b.description for b, _, _ in self._shown() if all(b is not k[0] for k in keys)]
            yield FooterKey(palette.key, self.app.get_key_display(palette), palette_label, palette.action,
                            classes="-command-palette",
                            tooltip=("every key by name, and " + ", ".join(left)) if left else palette.description
                            ).data_bind(compact=Footer.compact)

    def on_resize(self, event: Resize) -> None:
        keys, palette = self.fit(self.app.size.width)
        shown = (tuple(b.action for b, _, _ in keys), palette)
        if shown != self._fitted:
            self._fitted = shown
            if self._bindings_ready:
                self.call_after_refresh(self.recompose)


class KeyBar(Footer):
    """The live view's footer, in the order and with the labels of :data:`ortop.tui.keymap.MAIN_KEYS`.

    Textual's footer shows every binding at full length, so at 80 columns the keys of the demo fell off its right
    end, and at 120 the last ones did. This one takes the first form that fits the width: every key with its label
    and the palette's key; every key, compact; every key with its short label; then the keys of the lowest
    ``rank`` (most important first) that fit beside ``^p more``, the command palette, which lists every key left
    out (none is dropped silently).
    """

    MORE = "more"  # the palette key's label when keys are left out

    def __init__(self) -> None:
        super().__init__(id="keybar")
        self._tier: tuple | None = None

    @staticmethod
    def entries(tier: int) -> list[tuple[Key, str, str]]:
        """(key, as shown, label) per footer key in form ``tier`` (0 full, 1 compact, 2 and 3 short)."""
        return [(k, bar_display(k), (k.short or k.label) if tier >= 2 else k.label) for k in MAIN_KEYS if k.footer]

    @staticmethod
    def _need(entries: list[tuple[Key, str, str]], pad: int) -> int:
        return sum(len(shown) + len(label) + pad for _, shown, label in entries)

    @classmethod
    def fit_keys(cls, width: int) -> tuple[int, list[tuple[Key, str, str]], bool]:
        """(form, the entries shown in keymap order, whether ``^p more`` stands for keys left out) at ``width``."""
        for tier in (0, 1, 2):
            pad = 3 if tier == 0 else 2  # " key label" (+1 around the key when not compact), +1 margin
            entries = cls.entries(tier)
            if cls._need(entries, pad) + (PALETTE_W if tier == 0 else 0) <= width:
                return tier, entries, False
        entries = cls.entries(3)
        room = width - (len("^p") + len(cls.MORE) + 2)
        kept: set[str] = set()
        used = 0
        for k, shown, label in sorted(entries, key=lambda e: e[0].rank):
            cost = len(shown) + len(label) + 2
            if used + cost <= room:
                kept.add(k.action)
                used += cost
        return 3, [e for e in entries if e[0].action in kept], True

    @classmethod
    def tier_for(cls, width: int) -> int:
        """The first form that fits ``width`` columns."""
        return cls.fit_keys(width)[0]

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        tier, entries, more = self.fit_keys(self.app.size.width)
        by_action: dict[str, tuple[Binding, bool]] = {}
        for _, binding, enabled, _tooltip in self.screen.active_bindings.values():
            by_action.setdefault(binding.action, (binding, enabled))
        for k, shown, label in entries:
            hit = by_action.get(f"app.{k.action}")
            if hit is None:
                continue
            binding, enabled = hit
            yield FooterKey(binding.key, shown, label, binding.action, disabled=not enabled,
                            tooltip=k.help).data_bind(compact=Footer.compact)
        if (tier == 0 or more) and self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = self.screen.active_bindings[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                return
            left = [k.label for k in MAIN_KEYS if k.footer and all(k is not e[0] for e in entries)]
            yield FooterKey(binding.key, self.app.get_key_display(binding), self.MORE if more else
                            binding.description, binding.action, classes="-command-palette", disabled=not enabled,
                            tooltip=("every key by name, and " + ", ".join(left)) if more else
                            (binding.tooltip or binding.description)).data_bind(compact=Footer.compact)

    def on_resize(self, event: Resize) -> None:
        tier, entries, more = self.fit_keys(self.app.size.width)
        key = (tier, tuple(e[0].action for e in entries), more)
        if key != self._tier:
            self._tier = key
            self.compact = tier > 0
            if self._bindings_ready:
                self.call_after_refresh(self.recompose)
