"""What every panel shares: bars, clipping and wrapping, line stacking, the compact form of a configuration, the
paced-rate check and the state badge. Numbers are written by :mod:`ortop.present.units`, which the panels import
directly.

One convention for CPU: a process's CPU time is counted in cores (``1.10 cores``: htop's 110 %), a share of
something (a core, the host, the wall time) in per cent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from ortop.config.diff import change_terms, diff
from ortop.measure.pace import MIN_ARRIVALS, SETTLE_S, Pace, servers_of, settled
from ortop.present import finite, rate_text, secs_text

EIGHTHS = " ▏▎▍▌▋▊▉█"
LEVELS = "▁▂▃▄▅▆▇█"
IDLE = "·"
WORKER_STYLE = "bold cyan"
BUSY_STATES = ("building", "warming", "starting")  # a rebuild under way: the wait is the point
STATE_STYLE = {
    "starting": "bold yellow",
    "building": "bold black on yellow",
    "verifying": "bold black on yellow",
    "warming": "bold black on yellow",
    "measuring": "bold green",
    "paused": "bold black on white",
    "failed": "bold white on red",
    "stopped": "dim",
}
STATE_ICON = {"starting": "…", "building": "⟳", "warming": "⟳", "verifying": "⇄", "measuring": "●", "paused": "‖",
              "failed": "✗", "stopped": "■"}


def load_style(pct: float) -> str:
    """htop's three bands: green below 50 %, yellow below 80 %, red above."""
    if pct < 50:
        return "green"
    if pct < 80:
        return "yellow"
    return "red"


def bar(fraction: float, width: int) -> str:
    """A left-to-right bar in eighth-cell steps, exactly ``width`` cells."""
    if width <= 0:
        return ""
    f = 0.0 if not finite(fraction) else min(1.0, max(0.0, fraction))
    eighths = int(round(f * width * 8))
    full, part = divmod(eighths, 8)
    s = "█" * full + (EIGHTHS[part] if part and full < width else "")
    return s.ljust(width)


def clip(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells with an ellipsis."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def clip_words(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells with an ellipsis: after a whole term of a `` · `` list when one fits, else at a
    word boundary (mid-word only for one long word)."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    cut = text[: max(0, width - 1)]
    term = (cut + " ").rfind(" · ")
    space = cut.rfind(" ")
    if term >= width // 3:
        cut = cut[:term]
    elif text[len(cut)] == " ":  # the cut falls between two words: the last one is whole
        cut = cut.rstrip(" ;,·:→")
    elif space > 0 and cut[:space].strip(" ;,·:→"):
        cut = cut[:space].rstrip(" ;,·:→")
    return cut + "…"


def clip_text(text: Text, width: int) -> Text:
    """:func:`clip_words` for a styled line: the styles kept on what is left, the ellipsis in the last cell."""
    plain = text.plain
    if len(plain) <= width:
        return text
    cut = clip_words(plain, width)
    out = text[: max(0, len(cut) - 1)]
    out.append("…", style="dim")
    out.no_wrap, out.end = True, ""
    return out


def fit(forms: Iterable[Text | str], width: int) -> Text:
    """The one rule for a line that may not fit: the first of ``forms`` (the same line in ever shorter wordings,
    longest first) that fits ``width`` cells whole; when none does, the last one cut after a whole word with an
    ellipsis (:func:`clip_words`). A figure is never cut in half: it is either whole or behind the "…"."""
    last: Text | None = None
    for form in forms:
        last = form if isinstance(form, Text) else Text(form, no_wrap=True, end="")
        if last.cell_len <= width:
            return last
    return clip_text(last, width) if last is not None else Text("", end="")


CLAUSE_ENDS = ("; ", ", ", ": ", " — ")


def _closes_clause(text: str, i: int) -> bool:
    """Whether the bracket opened at ``text[i]`` ends its clause (``… difference (95 % CI …)``), not one word of it
    (``free dims (batch) and …``): what follows its close is the text's end or another clause."""
    depth = 0
    for j in range(i, len(text)):
        depth += text[j] in "([{"
        depth -= text[j] in ")]}"
        if depth == 0:
            rest = text[j + 1:]
            return not rest.strip() or rest.startswith(CLAUSE_ENDS)
    return True  # never closed: the rest is one aside


def lead_forms(text: str) -> list[str]:
    """``text`` and its leads, longest first, for :func:`fit`: ``text`` up to the end of each of its clauses (before
    a ``; ``, ``, ``, ``: `` or `` — `` outside brackets, or a bracketed aside that ends a clause): ``cannot win: p50
    2.31 → 2.34 ms, no detectable difference (…)`` → ``cannot win: p50 2.31 → 2.34 ms, no detectable difference``
    → ``cannot win: p50 2.31 → 2.34 ms`` → ``cannot win``. A lead ends after a whole clause: its figures are whole."""
    leads = {text}
    depth = 0
    for i, ch in enumerate(text):
        if depth <= 0 and i > 0 and (text.startswith(CLAUSE_ENDS, i)
                                     or text.startswith(" (", i) and _closes_clause(text, i + 1)):
            lead = text[:i].rstrip()
            if len(lead) > 3:
                leads.add(lead)
        depth += ch in "([{"
        depth -= ch in ")]}"
    return sorted(leads, key=len, reverse=True)


Cell = Sequence[Text | str]  # one cell of a table, in ever shorter forms


def _cells(form: Text | str) -> int:
    return form.cell_len if isinstance(form, Text) else cell_len(form)


def fit_columns(width: int, headers: Sequence[Cell], rows: Sequence[Sequence[Cell]], flex: int, *,
                pad: int = 2, flex_min: int = 12, order: Sequence[int] = ()
                ) -> tuple[list[int], list[Text], list[list[Text]]]:
    """A table's columns fitted to ``width`` cells by the one rule (:func:`fit`): (widths, headers, rows).

    Each cell (and header) comes in ever shorter forms; ``pad`` cells go to each shown column besides its text.
    Every column but ``flex`` is as wide as its longest form needs; while they leave ``flex`` less than ``flex_min``
    cells (or less than it needs whole), a column steps down to its next shorter forms: the first of ``order`` that
    can, else the one that saves the most. A column whose forms end in "" may so be left out: its width is 0.
    What the steps saved beyond ``flex_min`` goes back to the columns that stepped down; ``flex`` takes what is
    left, its cells cut after a whole word when no form fits. A figure is never cut in half.
    """
    n = len(headers)

    def need(c: int, level: int) -> int:
        """Cells column ``c`` takes with every cell at its ``level``-th form (or its shortest), its padding too."""
        forms = [f for f in (headers[c], *(r[c] for r in rows)) if f]
        text = max((_cells(f[min(level, len(f) - 1)]) for f in forms), default=0)
        return text + pad if text else 0

    def depth(c: int) -> int:
        return max(len(f) for f in [headers[c], *(r[c] for r in rows)] if f) - 1

    level = [0] * n
    room = width - pad
    natural = need(flex, 0) - pad
    while True:
        fixed = sum(need(c, level[c]) for c in range(n) if c != flex)
        if room - fixed >= min(natural, flex_min):
            break
        steps = [(need(c, level[c]) - need(c, level[c] + 1), c) for c in range(n)
                 if c != flex and level[c] < depth(c)]
        steps = [s for s in steps if s[0] > 0]
        if not steps:
            break
        first = [c for c in order if any(c == s[1] for s in steps)]
        level[first[0] if first else max(steps)[1]] += 1
    widths = [max(0, need(c, level[c]) - pad) for c in range(n)]
    # What the steps saved beyond flex_min goes back to the columns that stepped down, the last to give up first:
    # each of their cells then takes the longest form that fits (a name whole where it fits, cut where not).
    spare = room - sum(need(c, level[c]) for c in range(n) if c != flex) - min(natural, flex_min)
    for c in sorted((c for c in range(n) if c != flex and level[c] and widths[c]),
                    key=lambda c: -list(order).index(c) if c in order else 0):
        grow = max(0, min(spare, need(c, 0) - pad - widths[c]))
        widths[c] += grow
        spare -= grow
    widths[flex] = max(1, min(natural, room - sum(w + pad for c, w in enumerate(widths) if c != flex and w)))
    shown_headers = [fit(h, widths[c]) for c, h in enumerate(headers)]
    shown_rows = [[fit(cell, widths[c]) for c, cell in enumerate(r)] for r in rows]
    return widths, shown_headers, shown_rows


def term_forms(text: str) -> list[str]:
    """A name made of terms (``threads 1, inter-op 2, parallel``) and its leads marked as cut: ``threads 1,
    inter-op 2…``, ``threads 1…``; never a lead alone, which would name another thing."""
    return [text, *(lead + "…" for lead in lead_forms(text)[1:])]


def wrap_words(text: str, width: int, max_lines: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces, at most ``max_lines`` of them (the last one
    cut with an ellipsis when more was left)."""
    if width <= 0 or max_lines <= 0:
        return []
    lines: list[str] = []
    rest = text.strip()
    while rest and len(lines) < max_lines:
        if len(rest) <= width:
            lines.append(rest)
            rest = ""
            break
        if len(lines) == max_lines - 1:
            lines.append(clip_words(rest, width))
            rest = ""
            break
        space = rest.rfind(" ", 0, width + 1)
        if space <= 0:
            space = width  # one word longer than the line: break it (nothing else would fit it)
        lines.append(rest[:space].rstrip())
        rest = rest[space:].lstrip()
    return lines


def wrap_terms(terms: Sequence[str], width: int, lead: str = "", sep: str = " · ", max_lines: int = 2) -> list[str]:
    """Whole terms (``< 1: 1.00``, ``MatMul×3``) in lines of at most ``width`` cells, the first after ``lead``, the
    rest indented under it; a term never splits. Past ``max_lines`` the last line ends ``… +N`` (how many more)."""
    indent = " " * min(len(lead), max(0, width // 3))
    lines: list[str] = []
    cur = lead
    fresh = True
    for i, term in enumerate(terms):
        piece = term if fresh else sep + term
        if len(cur) + len(piece) <= width or fresh and len(cur) + len(term) <= width:
            cur += piece
            fresh = False
            continue
        if len(lines) + 1 >= max_lines:
            more = f" … +{len(terms) - i}"
            while len(cur) + len(more) > width and sep in cur[len(indent):]:
                cut = cur.rfind(sep)
                more = f" … +{len(terms) - i + 1}"
                cur, i = cur[:cut], i - 1
            lines.append(clip(cur + more, width))
            return lines
        lines.append(cur)
        cur, fresh = indent + term, False
    if cur.strip():
        lines.append(clip(cur, width))
    return lines


class Stacked(Text):
    """A panel's drawing as :func:`join_lines` stacks it, keeping its lines: the panel compares and repaints them
    one by one without splitting the stacked text again (see :meth:`ortop.tui.widgets.Panel.set_text`)."""

    lines: tuple[Text, ...] = ()


def join_lines(lines: Sequence[Text], height: int | None = None) -> Text:
    """Stack lines into one Text; with ``height``, cut to it (a panel never grows its own box)."""
    if height is not None:
        lines = list(lines)[: max(0, height)]
    out = Stacked(no_wrap=True, overflow="crop", end="")
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        out.append_text(line)
    if out.plain and all("\n" not in line.plain for line in lines):  # else its lines are the split ones
        out.lines = tuple(lines)
    return out


def _short_key(key: str) -> str:
    """``session.intra_op_num_threads`` → ``intra_op_num_threads``: the section is obvious in a label."""
    for prefix in ("session.", "workload.", "provider.options.", "provider."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def short_label(label: str) -> str:
    """A history label without section prefixes: ``intra_op_num_threads: 0 → 4; allow_spinning: default → off``.

    A profile's description and model path are not knobs: they are left out (a shipped profile's long description
    would push the real changes off the line).
    """
    parts = [p for p in label.split("; ") if not p.startswith(("description:", "model:"))]
    return "; ".join(_short_key(part) for part in parts) or ("same settings" if label != "start" else "start")


def compact_changes(before: Any, after: Any) -> list[str]:
    """What ``after`` changes from ``before`` (two profiles), one term per knob as the knob spells it (``threads 2``,
    ``spin off``, ``100 Hz``), the knobs shown at a glance first. The description and the model path are left out."""
    return change_terms(diff(before, after, settings_only=True))


def compact_text(terms: Iterable[str], empty: str = "same settings") -> str:
    """Compact terms joined with `` · ``; ``empty`` when there are none."""
    out = " · ".join(terms)
    return out or empty


def pace_shortfall(profile: Any, throughput: float | None, runs: int, traffic: Any = None, state: str | None = None,
                   state_elapsed: float = math.nan) -> str | None:
    """``offered 2000/s, served 221/s: queueing`` when the requests that arrived are not served at their pace
    (:func:`ortop.measure.pace.kept`: they wait, or are shed), None when they are, in a closed loop, or before it
    can be told: while a build is under way (``state``), before the running configuration has measured SETTLE_S
    (its traffic's window, and ``state_elapsed`` in the measuring state) and before MIN_ARRIVALS arrived. A fresh
    build's first second is a few requests, some of them behind the first cold runs: not a pace."""
    if state is not None and (state in BUSY_STATES or (state == "measuring" and state_elapsed < SETTLE_S)):
        return None
    servers = servers_of(profile.workload)
    if traffic is not None and getattr(traffic, "open", False):
        if not traffic.offered_per_s > 0:
            return None
        pace = traffic.pace(servers)
        window = traffic.window_s
        arrived = traffic.offered_per_s * window if window > 0 else runs
        if not settled(arrived, window) or pace.kept():
            return None
        shed = f", {traffic.dropped} shed" if traffic.dropped else ""
        return f"offered {rate_text(traffic.offered_per_s)}, served {rate_text(traffic.served_per_s)}{shed}: queueing"
    # no traffic figures: what a paced loop asked for over the time its runs took, against those runs
    rate = float(profile.workload.rate_hz or 0) * max(1, int(profile.workload.replicas or 1))
    if not rate > 0 or runs < MIN_ARRIVALS or throughput is None or not throughput > 0:
        return None
    wall = runs / throughput
    if Pace(rate * wall, runs, 0, wall, asked_per_s=rate, counted=False).kept():
        return None
    return f"saturated: {rate_text(throughput)} of {profile.workload.rate_hz:g} Hz"


def state_text(state: str, elapsed: float) -> Text:
    """``● measuring 12 s``, styled by state. Building and warming stand out and count tenths: a rebuild is running
    and the wait is the point; a steady state counts whole seconds (the line then changes once a second)."""
    t = Text(no_wrap=True, end="")
    busy = state in BUSY_STATES
    when = secs_text(elapsed) if busy or not finite(elapsed) or elapsed >= 60 else f"{int(elapsed)} s"
    t.append(f" {STATE_ICON.get(state, '?')} {state} {when} ", style=STATE_STYLE.get(state, "bold"))
    return t
