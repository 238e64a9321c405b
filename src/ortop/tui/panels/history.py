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

from ortop.tui.panels._format import DASH, clip, fmt_ms, fmt_rate, short_label

HISTORY_COLUMNS = ("", "#", "changes from start", "runs", "p50 ms", "p99 ms", "thr", "CPU/run", "verdict")

VERDICT_KINDS = ("measuring", "unverified", "verifying", "faster", "slower", "no difference", "undecided",
                 "not comparable")
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
        return str(verdict.kind), str(verdict.short or ""), str(verdict.text or "")
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


def history_rows(history: Sequence[Any], label_width: int = 48,
                 current_id: int | None = None) -> list[tuple[Text, ...]]:
    """One tuple of cells per configuration, in HISTORY_COLUMNS order; the best p50 gets ★, the running one ▶."""
    rows: list[tuple[Text, ...]] = []
    for h in history:
        mark = "★" if h.best else ""
        if current_id is not None and h.config_id == current_id:
            mark += "▶"
        rows.append((
            Text(mark, style="bold yellow"),
            Text(str(h.config_id), style="dim"),
            Text(clip(short_label(h.label), label_width)),
            Text(f"{h.latency.runs:,}", justify="right"),
            Text(fmt_ms(h.latency.p50), justify="right", style="bold" if h.best else ""),
            Text(fmt_ms(h.latency.p99), justify="right"),
            Text(fmt_rate(h.throughput_per_s), justify="right"),
            Text(fmt_ms(h.cpu.cpu_ms_per_run), justify="right"),
            verdict_cell(h.verdict),
        ))
    return rows


def history_detail(rec: Any) -> Text:
    """The two lines under the table for the selected row: what it changed, its verdict in full, its providers."""
    detail = Text(no_wrap=False)
    detail.append(f"#{rec.config_id} ", style="bold")
    detail.append(short_label(rec.label) if rec.label != "start" else "the start profile")
    detail.append(f"\nverdict: {verdict_text(rec.verdict)} · providers {', '.join(rec.providers_active) or '—'}",
                  style="dim")
    return detail
