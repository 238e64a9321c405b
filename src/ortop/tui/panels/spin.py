"""The spin panel: CPU per inference, CPU the worker burns between runs, and its busiest threads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rich.text import Text

from ortop.measure.stats import spark
from ortop.present import DASH, cores_text, finite, ms_text, pct_text
from ortop.tui.panels._format import WORKER_STYLE, bar, clip_words, fit, join_lines, load_style, wrap_terms


def average_threads(samples: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
    """Per-thread CPU % averaged over several samples (a thread missing from one counts as idle there), busiest
    first; each keeps the core it ran on last. Threads that ended before the last sample are dropped."""
    if not samples:
        return ()
    last = {t.tid: t for t in samples[-1]}
    total: dict[int, float] = {}
    for threads in samples:
        for t in threads:
            if t.tid in last and finite(t.cpu_percent):
                total[t.tid] = total.get(t.tid, 0.0) + t.cpu_percent
    out = [replace(t, cpu_percent=round(total.get(tid, 0.0) / len(samples), 1)) for tid, t in last.items()]
    out.sort(key=lambda t: (-t.cpu_percent, t.tid))
    return tuple(out)


def spin_split(cost: Any) -> tuple[float, float, float]:
    """(in runs, between runs, total) CPU ms per second of wall time, from an engine.CpuCost.

    ``process_cpu_percent`` × 10 is the worker's total CPU ms/s; what it burned while no Run() was in flight is
    ``cpu_ms_between_runs_per_s`` (the pool spinning, on a paced loop); the rest is inference.
    """
    total = cost.process_cpu_percent * 10.0 if finite(cost.process_cpu_percent) else math.nan
    between = cost.cpu_ms_between_runs_per_s
    if not (finite(total) and finite(between)):
        return math.nan, between if finite(between) else math.nan, total
    between = min(between, total)
    return total - between, between, total


def gaps_lines(gaps: Sequence[Any], width: int) -> list[Text]:
    """Open arrivals: service p99 by the idle gap before a run, where waking a pool that went to sleep shows (the
    10–100 ms bucket, after spinning is turned off). Every bucket is shown (``—`` where no run followed such a gap),
    wrapped over two lines rather than cut."""
    if not any(g.runs for g in gaps):
        return []
    terms = [f"{g.label.replace(' ms', '')}: {ms_text(g.p99_ms) if g.runs else DASH}" for g in gaps]
    for lead in ("p99 after an idle gap of (ms): ", "p99 after idle (ms): ", "p99 by idle ms: "):
        parts = wrap_terms(terms, width, lead, max_lines=2)
        if "… +" not in parts[-1]:
            break
    out = []
    for i, part in enumerate(parts):
        line = Text(no_wrap=True, end="")
        if i == 0:
            line.append(lead, style="dim")
            part = part[len(lead):]
        line.append(part)
        out.append(line)
    return out


def gaps_line(gaps: Sequence[Any], width: int) -> Text | None:
    """:func:`gaps_lines` as one Text (None without open arrivals)."""
    lines = gaps_lines(gaps, width)
    return join_lines(lines) if lines else None


SPIN_MIN_RUNS = 20  # a new session's CPU split is shown from this many runs on: before, it is mostly its first gap


def spin_panel(cost: Any, threads: Sequence[Any], width: int, height: int,
               process_history: Sequence[float] = (), gaps: Sequence[Any] = (), runs: int = SPIN_MIN_RUNS) -> Text:
    """CPU per inference, CPU burned between runs, the share of time inside Run(), and the threads with their cores.

    The split bar (``█`` in runs, ``▒`` between runs) is the point of the panel: on a paced loop with spinning on,
    most of it is ``▒``, turning spinning off shrinks it. ``process_history`` (the worker's CPU, one value per
    refresh) draws the same story over time: the line drops the moment spinning goes off. With open arrivals
    ``gaps`` (engine.traffic.GapRow) give service p99 by the idle gap before a run. The worker's CPU is in
    cores (``0.29 cores``: averaged over this configuration; the sparkline's figure is the latest); percentages are
    shares (of the wall time, of the worker's CPU, of one core for a thread).

    ``runs``: the running configuration's runs. Below SPIN_MIN_RUNS the figures of the new session are not shown
    (they would rest on its first few runs, and the gap before its first run): the panel says it is measuring.
    """
    lines: list[Text] = []
    if runs < SPIN_MIN_RUNS:
        wait = f"this session: {runs} of {SPIN_MIN_RUNS} runs"
        lines.append(fit([f"CPU/run, between runs: measuring… ({wait})", f"CPU/run: measuring… ({wait})",
                          f"measuring… ({runs}/{SPIN_MIN_RUNS} runs)"], width))
    else:
        lines.extend(_cost_lines(cost, width))
        lines.extend(gaps_lines(gaps, width))
    _history_and_threads(lines, threads, width, height, process_history)
    return join_lines(lines, height)


def _cost_lines(cost: Any, width: int) -> list[Text]:
    """CPU per run, the worker's cores, the share inside Run(), CPU between runs and the split bar."""
    lines: list[Text] = []
    line = Text(no_wrap=True, end="")
    line.append("CPU/run ", style="dim")
    line.append(f"{ms_text(cost.cpu_ms_per_run)} ms", style="bold")
    line.append(" · ", style="dim")
    line.append(cores_text(cost.process_cpu_percent), style=WORKER_STYLE)
    line.append(" avg", style="dim")
    for label, tail in ((" · in Run() ", " of the time"), (" · in Run ", ""), (" · busy ", "")):
        if len(line.plain) + len(label) + len(pct_text(cost.busy_percent)) + len(tail) <= width:
            line.append(label, style="dim")
            line.append(pct_text(cost.busy_percent))
            line.append(tail, style="dim")
            break
    lines.append(line)

    inside, between, total = spin_split(cost)
    if finite(between):
        share = between / total if finite(total) and total > 0 else math.nan
        forms = []
        for head, tail in (("between runs ", " = {}% of its CPU"), ("between runs ", " = {}% of CPU"),
                           ("between ", " = {}%")):
            line = Text(no_wrap=True, end="")
            line.append(head, style="dim")
            line.append(f"{between:.0f} ms/s", style="bold magenta" if finite(share) and share > 0.3 else "bold")
            if finite(share):
                line.append(tail.format(f"{share * 100:.0f}"), style="dim")
            forms.append(line)
        lines.append(fit(forms, width))
    else:
        lines.append(fit(["between runs " + (f"{DASH} (n/a with concurrent callers)" if finite(total) else DASH),
                          "between runs " + DASH], width))

    if finite(total) and total > 0 and finite(inside):
        bw = max(4, width - 11)
        n_in = int(round(inside / total * bw))
        line = Text(no_wrap=True, end="")
        line.append("in ", style="dim")
        line.append("█" * n_in, style="green")
        line.append("▒" * (bw - n_in), style="magenta")
        line.append(" between", style="dim")
        lines.append(line)
    elif finite(total) and total > 0:  # measuring, but runs overlap: no one split of the process CPU
        lines.append(fit([Text("in runs / between runs: n/a with concurrent callers", style="dim", end=""),
                          Text("in / between runs: n/a, concurrent callers", style="dim", end=""),
                          Text("split n/a: concurrent callers", style="dim", end="")], width))
    else:
        lines.append(fit([Text("in runs / between runs: waiting for runs…", style="dim", end=""),
                          Text("waiting for runs…", style="dim", end="")], width))
    return lines


def _history_and_threads(lines: list[Text], threads: Sequence[Any], width: int, height: int,
                         process_history: Sequence[float]) -> None:
    """The worker's CPU sparkline and the thread table, in the room ``lines`` leave of ``height``."""
    if process_history and height - len(lines) >= 3:
        vals = list(process_history)
        now = vals[-1]
        line = Text(no_wrap=True, end="")
        line.append("worker ", style="dim")
        value = cores_text(now)
        sw = max(1, width - 7 - len(value) - 1)
        hi = max([100.0] + [v for v in vals[-sw:] if finite(v)])
        line.append(spark(vals, sw, 0.0, hi).rjust(sw), style=WORKER_STYLE)
        line.append(" " + value, style="bold")
        lines.append(line)

    busy = [t for t in threads if finite(t.cpu_percent)]
    room = height - len(lines)
    if room >= 2 and busy:
        lines.append(Text("thread      core   % of a core", style="dim", end=""))
        room -= 1
        tid_w = max(len(str(t.tid)) for t in busy)
        bw = max(3, min(12, width - tid_w - 22))
        shown = busy[:room] if len(busy) <= room else busy[: room - 1]
        for t in shown:
            line = Text(no_wrap=True, end="")
            line.append(str(t.tid).rjust(tid_w) + " ", style="dim")
            line.append(f"{'?' if t.core is None else t.core:>4} ", style=WORKER_STYLE)
            line.append(bar(t.cpu_percent / 100.0, bw), style=load_style(t.cpu_percent))
            line.append(f"{t.cpu_percent:5.0f}% ")
            # what the thread does, where the worker named it (caller, main, reader; the rest is ORT's pool)
            role = getattr(t, "role", "")
            line.append(clip_words(role or t.name, max(0, width - tid_w - bw - 13)),
                        style="bold" if role.startswith("caller") else "dim")
            lines.append(line)
        if len(shown) < len(busy):
            idle = sum(1 for t in busy[len(shown):] if t.cpu_percent < 1)
            lines.append(Text(f"+{len(busy) - len(shown)} more ({idle} idle)", style="dim", end=""))
