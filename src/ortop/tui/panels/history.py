"""The history table's cells: one row per configuration tried, the best p50 starred, each row with its verdict.

A verdict comes either as text (``"37.5% faster"``, ``"no real change (+3.0%, within noise)"``, ``"measuring…"``)
or as an object with ``kind`` (one of :data:`VERDICT_KINDS`), ``short`` (the cell) and ``text`` (the detail line).
:func:`verdict_cell` and :func:`verdict_text` take either, so the table does not care which the engine sends;
only text has to be read back into a kind, and that happens in one place, :func:`verdict_parts`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.present import DASH, ms_text, rate_text
from ortop.tui.panels._format import clip_words, compact_changes, compact_text, short_label

HISTORY_COLUMNS = ("", "#", "change from the row before", "runs", "p50 ms", "p99 ms", "thr", "CPU/run", "verdict")
CHANGE = 2       # the change column: it takes the room the others leave, at least MIN_CHANGE cells
MIN_CHANGE = 16
# cells each other column is given (its widest cell and padding): the change column gets the rest
RESERVED = {0: 3, 1: 3, 3: 8, 4: 8, 5: 8, 6: 9, 7: 9, 8: 24}
DROP_ORDER = (3, 7, 6, 5, 4)  # what a narrow table leaves out first: runs, CPU/run, then thr, p99 and p50 (the
#                               detail line has them all); the verdict stays
NARROW_COLUMNS = (0, 1, 2, 4, 5, 6, 8)  # at 80 columns: runs and CPU/run go, p99 and throughput stay


def columns(width: int) -> tuple[int, ...]:
    """Which of HISTORY_COLUMNS a table ``width`` cells wide shows: all that fit beside a change column of
    MIN_CHANGE cells, the lowest-ranked left out first (DROP_ORDER)."""
    shown = set(range(len(HISTORY_COLUMNS)))
    for i in DROP_ORDER:
        if 2 + MIN_CHANGE + sum(RESERVED[c] for c in shown if c != CHANGE) <= width:
            break
        shown.discard(i)
    return tuple(sorted(shown))


def label_width(width: int) -> int:
    """Cells left for the change column in a table ``width`` cells wide (the other columns shown and cell padding
    take the rest)."""
    return max(MIN_CHANGE, width - 2 - sum(RESERVED[c] for c in columns(width) if c != CHANGE))


def hidden(width: int) -> tuple[str, ...]:
    """The columns a table ``width`` cells wide leaves out, by name (their figures are in the detail line)."""
    shown = columns(width)
    return tuple(HISTORY_COLUMNS[i] for i in range(len(HISTORY_COLUMNS)) if i not in shown)


def title_text(width: int) -> Text:
    """The history's title, with a hint of the columns a narrow table leaves out: ``more (runs, CPU/run) below``."""
    more = hidden(width)
    hint = f"more ({', '.join(more)}) below" if more else "the selected one in full below"
    return Text.assemble(("History", "bold"), (f"  what each configuration changed · {hint}", "dim"))

VERDICT_KINDS = ("measuring", "unverified", "verifying", "faster", "slower", "no difference", "undecided",
                 "not comparable")
METRIC_NAMES = {"p50": "p50", "p99": "p99", "throughput": "runs/s", "cpu": "CPU/run"}  # as the columns say them
NAMED_KINDS = ("unverified", "faster", "slower", "no difference", "undecided")  # a verdict on one metric
VERDICT_STYLE = {
    "faster": "bold green",       # a real speed-up
    "slower": "bold red",         # a real slow-down
    "no difference": "",          # shown to be the same: a plain answer
    "unverified": "yellow",       # a change seen, not confirmed yet: worth a look, not a result
    "measuring": "dim",
    "verifying": "dim",
    "undecided": "dim",           # within noise: neither way
    "not comparable": "dim",
}


def verdict_parts(verdict: Any) -> tuple[str, str, str]:
    """(kind, cell text, full text) for a verdict object or its text form; empty texts where there is none."""
    if verdict is None:
        return "not comparable", "", ""
    if not isinstance(verdict, str):
        kind, short = str(verdict.kind), str(verdict.short or "")
        name = METRIC_NAMES.get(getattr(verdict, "metric", "") or "")
        if short and name and kind in NAMED_KINDS and name not in short:
            short = f"{name} {short}"  # "−40.7 % unverified" beside "CPU/run +318 %": which figure moved?
        return kind, short, str(verdict.text or "")
    if verdict.endswith("faster"):
        return "faster", verdict, verdict
    if verdict.endswith("slower"):
        return "slower", verdict, verdict
    if verdict.startswith("measuring"):
        return "measuring", verdict, verdict
    if not verdict:
        return "not comparable", "", ""  # the first row: nothing before it
    m = re.match(r"no real change \(([+-]?[\d.]+%)", verdict)  # "(+3.0%, within noise)" → "noise (+3.0%)"
    return "undecided", f"noise ({m.group(1)})" if m else verdict, verdict


def verdict_style(verdict: Any) -> str:
    """Green for a real speed-up, red for a real slow-down, yellow for an unconfirmed one, dim for noise or not
    enough runs yet, plain for no difference."""
    return VERDICT_STYLE.get(verdict_parts(verdict)[0], "dim")


def verdict_cell(verdict: Any) -> Text:
    """The verdict column's cell: ``37.5% faster`` in green, ``noise (+3.0%)`` dim, ``—`` for none."""
    kind, short, _ = verdict_parts(verdict)
    return Text(short or DASH, style=VERDICT_STYLE.get(kind, "dim"))


def verdict_text(verdict: Any) -> str:
    """The verdict in full, for the detail line under the table."""
    return verdict_parts(verdict)[2] or DASH


def row_change(history: Sequence[Any], i: int) -> str:
    """What row ``i`` changed from the row before it, compact (``spin off · 100 Hz``): each row reads as the one
    step it took, not as a long list of changes from the start that all begin alike."""
    if i == 0:
        return "start"
    terms = compact_changes(history[i - 1].profile, history[i].profile)
    return compact_text(terms, f"same as #{history[i - 1].config_id}")


def history_rows(history: Sequence[Any], label_width: int = 48,
                 current_id: int | None = None) -> list[tuple[Text, ...]]:
    """One tuple of cells per configuration, in HISTORY_COLUMNS order; the best p50 gets ★, the running one ▶."""
    rows: list[tuple[Text, ...]] = []
    for i, h in enumerate(history):
        mark = "★" if h.best else ""
        if current_id is not None and h.config_id == current_id:
            mark += "▶"
        rows.append((
            Text(mark, style="bold yellow"),
            Text(str(h.config_id), style="dim"),
            Text(clip_words(row_change(history, i), label_width)),
            Text(f"{h.latency.runs:,}", justify="right"),
            Text(ms_text(h.latency.p50), justify="right", style="bold" if h.best else ""),
            Text(ms_text(h.latency.p99), justify="right"),
            Text(rate_text(h.throughput_per_s), justify="right"),
            Text(ms_text(h.cpu.cpu_ms_per_run), justify="right"),
            verdict_cell(h.verdict),
        ))
    return rows


def history_detail(rec: Any, before: Any = None) -> Text:
    """The lines under the table for the selected row: its changes from the start in full, what it changed from
    ``before`` (the row above it, when given), its verdict in full, its providers and its figures (all of them:
    a narrow table leaves some out)."""
    detail = Text(no_wrap=False)
    detail.append(f"#{rec.config_id} ", style="bold")
    detail.append(short_label(rec.label) if rec.label != "start" else "the start profile")
    if before is not None:
        detail.append(f"\nfrom #{before.config_id}: ", style="dim")
        detail.append(compact_text(compact_changes(before.profile, rec.profile), "no change"))
    detail.append(f"\nverdict: {verdict_text(rec.verdict)} · providers {', '.join(rec.providers_active) or '—'}",
                  style="dim")
    lat = rec.latency
    detail.append(f"\n{lat.runs:,} runs · p50 {ms_text(lat.p50)} · p99 {ms_text(lat.p99)} ms · "
                  f"{rate_text(rec.throughput_per_s)} · CPU/run {ms_text(rec.cpu.cpu_ms_per_run)} ms", style="dim")
    return detail
