"""The latency panel: p50, p99 and throughput sparklines with rebuild markers, then the current figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.measure.stats import WINDOW_MIN_RUNS, Bucket, LatencyStats, resolved, spark
from ortop.present import finite, ms_text, rate_text
from ortop.tui.panels._format import fit, join_lines


def series_columns(series: Sequence[Bucket], width: int, bucket_s: float) -> list[Bucket | None]:
    """The last ``width`` bucket slots in time order, None where no run landed (a pause or a rebuild shows as a gap)."""
    if width <= 0 or not series:
        return []
    series = series[-width:]  # buckets are one per slot, in time order: older ones cannot reach the last width slots
    idx = [int(round(b.t / bucket_s)) for b in series]
    last = idx[-1]
    first = max(idx[0], last - width + 1)
    slots: list[Bucket | None] = [None] * (last - first + 1)
    for i, b in zip(idx, series):
        if i >= first:
            slots[i - first] = b
    return slots




def span_text(span_s: float) -> str:
    """The window's span as the panel names it: ``5 s``, ``30 s``."""
    return f"{span_s:.0f} s" if finite(span_s) else "—"


def split_line(traffic: Any, width: int = 200) -> Text | None:
    """Open arrivals: response split into the wait in the queue and the service (inside Run()), p50 and p99 over
    all runs of the configuration, in the longest wording that fits ``width``."""
    if traffic is None or not getattr(traffic, "open", False):
        return None
    q = f"{ms_text(traffic.queue.p50)}/{ms_text(traffic.queue.p99)}"
    sv = f"{ms_text(traffic.service.p50)}/{ms_text(traffic.service.p99)}"
    shed = f" {traffic.dropped} shed" if traffic.dropped else ""

    def form(head: str, queue: str, service: str, unit: str) -> Text:
        t = Text(no_wrap=True, end="")
        if head:
            t.append(head, style="bold")
        t.append(queue, style="dim")
        t.append(q + " ", style="magenta")
        t.append(service, style="dim")
        t.append(sv + " ", style="green")
        t.append(unit, style="dim")
        if shed:
            t.append(shed, style="bold red")
        return t

    return fit((form(*words) for words in ((f"{traffic.mode} ", "queue ", "+ service ", "ms p50/p99"),
                                           ("", "queue ", "+ service ", "ms p50/p99"),
                                           ("", "queue ", "+ svc ", "ms p50/p99"),
                                           ("", "q ", "svc ", "ms p50/p99"))), width)  # built until one fits


def latency_panel(series: Sequence[Bucket], window: LatencyStats, latency: LatencyStats, runs: int,
                  throughput: float, bucket_s: float, width: int, height: int, window_s: float = 5.0,
                  traffic: Any = None, window_rate: float = math.nan, paused: bool = False) -> Text:
    """Sparklines of p50, p99 and throughput per bucket, a ``▼`` over each rebuild, then the figures, each line
    naming the span it covers.

    The figures right of the sparklines are over the recent window (``window``, its span ``window_s``, headed
    ``last 5 s`` over the column; ``window_rate`` the runs per second served in it), never over one bucket: at a
    few runs a second a bucket's p99 is one run. Fewer than WINDOW_MIN_RUNS runs in it and the header says how
    many. Paused, ``thr`` says so. The last line is every run of the configuration (``all N runs``).

    p50 and p99 each scale on their own range, so the shape of p99 is visible even when it sits far above p50.
    Throughput scales from 0: on its own range 94 against 100 runs/s would look like a crash. With open arrivals
    the sparklines are response time (from each request's arrival), and a line splits it into queue and service.
    """
    span = span_text(window_s)
    marker, spark_rows = _sparklines(series, window, bucket_s, width, span,
                                     "paused" if paused else rate_text(window_rate))
    now = _window_line(window, span, width)
    total = _total_line(latency, runs, throughput, width)
    split = split_line(traffic, width)
    if split is not None and height >= 5:  # the split is worth more than the totals
        lines = [marker, *spark_rows, split]
        if height >= 6:
            lines.append(total)
        if height >= 7:
            lines.insert(-1, now)
    elif height >= 6:
        lines = [marker, *spark_rows, now, total]
    elif height == 5:
        lines = [marker, *spark_rows, now]
    elif height == 4:
        lines = [marker, *spark_rows[:2], now]
    else:
        lines = [marker, *spark_rows][: max(0, height)]
    if height > len(lines):
        lines.append(fit(["▼ rebuild  p50, p99: own scale · thr: from 0", "▼ rebuild · thr from 0"], width))
    return join_lines(lines, height)


LABEL_W, VALUE_W = 4, 12  # the sparklines' label column and figure column


def _sparklines(series: Sequence[Bucket], window: LatencyStats, bucket_s: float, width: int, span: str,
                rate: str) -> tuple[Text, list[Text]]:
    """The marker line (``▼`` over each rebuild, the window's header) and the p50, p99 and throughput lines."""
    sw = max(1, width - LABEL_W - VALUE_W)
    cols = series_columns(series, sw, bucket_s)
    pad = sw - len(cols)
    n = window.runs
    marker = Text(" " * LABEL_W + " " * pad, no_wrap=True, end="")
    marker.append("".join("▼" if b is not None and b.marker else " " for b in cols), style="bold yellow")
    head = f"last {span}" if n >= WINDOW_MIN_RUNS else f"{span}·{n} runs"
    marker.append(head.rjust(VALUE_W), style="dim")
    rows: list[tuple[str, list[float], str, str, float | None]] = [
        ("p50", [b.p50 if b else math.nan for b in cols], "green", f"{ms_text(window.p50)} ms", None),
        ("p99", [b.p99 if b else math.nan for b in cols], "yellow", f"{ms_text(window.p99)} ms", None),
        ("thr", [b.runs / bucket_s if b else math.nan for b in cols], "cyan", rate, 0.0),
    ]
    spark_rows = []
    for name, vals, style, value, lo in rows:
        line = Text(no_wrap=True, end="")
        line.append(name.ljust(LABEL_W), style="dim")
        line.append(" " * pad + spark(vals, len(vals), lo) if vals else " " * sw, style=style)
        line.append(value.rjust(VALUE_W), style="bold")
        spark_rows.append(line)
    return marker, spark_rows


def _window_line(window: LatencyStats, span: str, width: int) -> Text:
    """The recent window's run count, p90 and max, in the longest wording that fits."""
    def form(lead: str, sep: str) -> Text:
        t = Text(no_wrap=True, end="")
        t.append(f"{lead}{window.runs:,} runs", style="dim")
        for k in ("p90", "max"):
            t.append(f"{sep}{k} ", style="dim")
            t.append(ms_text(getattr(window, k)))
        t.append(" ms", style="dim")
        return t

    return fit((form(*words) for words in ((f"last {span}: ", " · "), (f"{span}: ", " "))), width)


def _total_line(latency: LatencyStats, runs: int, throughput: float, width: int) -> Text:
    """Every run of the configuration: its percentiles (those at least one run lies beyond) and its rate."""
    def form(keys: tuple[str, ...], sep: str, lead: str, rate: bool) -> Text:
        t = Text(no_wrap=True, end="")
        t.append(lead, style="bold")
        for i, k in enumerate(keys):
            t.append(("" if i == 0 else sep) + ("p99.9" if k == "p999" else k) + " ", style="dim")
            t.append(ms_text(getattr(latency, k)))
        if keys:
            t.append(" ms", style="dim")
        if rate:
            t.append(" · ", style="dim")
            t.append(rate_text(throughput), style="bold")
        return t

    # a percentile fewer than one run lies beyond is left out: it would be the slowest run under another name
    full = tuple(k for k in ("p50", "p99", "p999") if resolved(k, runs))
    short = tuple(k for k in ("p50", "p99") if resolved(k, runs))
    lead = f"all {runs:,} runs" + (": " if full else "")
    return fit((form(*words) for words in ((full, " · ", lead, True), (full, " ", lead, True),
                                           (short, " ", lead, True),
                                           (short, " ", f"all {runs:,}" + (": " if short else ""), False))),
               width)  # each wording built only if the longer ones did not fit
