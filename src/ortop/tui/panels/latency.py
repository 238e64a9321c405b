"""The latency panel: p50, p99 and throughput sparklines with rebuild markers, then the current figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.measure.stats import Bucket, LatencyStats, spark
from ortop.tui.panels._format import finite, fmt_ms, fmt_rate, join_lines


def series_columns(series: Sequence[Bucket], width: int, bucket_s: float) -> list[Bucket | None]:
    """The last ``width`` bucket slots in time order, None where no run landed (a pause or a rebuild shows as a gap)."""
    if width <= 0 or not series:
        return []
    idx = [int(round(b.t / bucket_s)) for b in series]
    last = idx[-1]
    first = max(idx[0], last - width + 1)
    slots: list[Bucket | None] = [None] * (last - first + 1)
    for i, b in zip(idx, series):
        if i >= first:
            slots[i - first] = b
    return slots


def split_line(traffic: Any) -> Text | None:
    """Open arrivals: response split into the wait in the queue and the service (inside Run()), p50 and p99."""
    if traffic is None or not getattr(traffic, "open", False):
        return None
    t = Text(no_wrap=True, end="")
    t.append(f"{traffic.mode} ", style="bold")
    t.append("queue ", style="dim")
    t.append(f"{fmt_ms(traffic.queue.p50)}/{fmt_ms(traffic.queue.p99)} ", style="magenta")
    t.append("+ service ", style="dim")
    t.append(f"{fmt_ms(traffic.service.p50)}/{fmt_ms(traffic.service.p99)} ", style="green")
    t.append("ms p50/p99", style="dim")
    if traffic.dropped:
        t.append(f" {traffic.dropped} shed", style="bold red")
    return t


def latency_panel(series: Sequence[Bucket], window: LatencyStats, latency: LatencyStats, runs: int,
                  throughput: float, bucket_s: float, width: int, height: int, window_s: float = 5.0,
                  traffic: Any = None) -> Text:
    """Sparklines of p50, p99 and throughput per bucket, a ``▼`` over each rebuild, then the current figures.

    p50 and p99 each scale on their own range, so the shape of p99 is visible even when it sits far above p50.
    Throughput scales from 0: on its own range 94 against 100 runs/s would look like a crash. With open arrivals
    the sparklines are response time (from each request's arrival), and a line splits it into queue and service.
    """
    label_w, value_w = 4, 11
    sw = max(1, width - label_w - value_w)
    cols = series_columns(series, sw, bucket_s)
    pad = sw - len(cols)
    p50 = [b.p50 if b else math.nan for b in cols]
    p99 = [b.p99 if b else math.nan for b in cols]
    thr = [b.runs / bucket_s if b else math.nan for b in cols]

    def last_finite(vals: list[float]) -> float:
        for v in reversed(vals):
            if finite(v):
                return v
        return math.nan

    lines: list[Text] = []
    marker = Text(" " * label_w + " " * pad, no_wrap=True, end="")
    marker.append("".join("▼" if b is not None and b.marker else " " for b in cols), style="bold yellow")
    rows: list[tuple[str, list[float], str, str, float | None]] = [
        ("p50", p50, "green", f"{fmt_ms(last_finite(p50))} ms", None),
        ("p99", p99, "yellow", f"{fmt_ms(last_finite(p99))} ms", None),
        ("thr", thr, "cyan", fmt_rate(last_finite(thr)), 0.0),
    ]
    spark_rows = []
    for name, vals, style, value, lo in rows:
        line = Text(no_wrap=True, end="")
        line.append(name.ljust(label_w), style="dim")
        line.append(" " * pad + spark(vals, len(vals), lo) if vals else " " * sw, style=style)
        line.append(value.rjust(value_w), style="bold")
        spark_rows.append(line)
    now = Text(no_wrap=True, end="")
    wide = width >= 48
    now.append(f"last {window_s:.0f} s " if wide else f"{window_s:.0f}s ", style="dim")
    for k in ("p50", "p90", "p99", "max"):
        now.append(f"{k} ", style="dim")
        now.append(f"{fmt_ms(getattr(window, k))} ")
    if wide:
        now.append("ms", style="dim")
    total = Text(no_wrap=True, end="")
    total.append(f"{runs:,} runs ", style="bold")
    total.append("p50 ", style="dim")
    total.append(fmt_ms(latency.p50) + " ")
    total.append("p99 ", style="dim")
    total.append(fmt_ms(latency.p99) + " ")
    total.append("p99.9 ", style="dim")
    total.append(fmt_ms(latency.p999) + " ")
    total.append(fmt_rate(throughput), style="bold")

    split = split_line(traffic)
    if split is not None and height >= 5:  # the split is worth more than the rebuild markers
        lines = [*spark_rows, split, total] if height == 5 else [marker, *spark_rows, split, total]
        if height >= 7:
            lines.insert(-1, now)
    elif height >= 6:
        lines = [marker, *spark_rows, now, total]
    elif height == 5:
        lines = [marker, *spark_rows, now]
    elif height == 4:
        lines = [*spark_rows, now]
    else:
        lines = [*spark_rows][: max(0, height)]
    if height > len(lines):
        lines.append(Text("▼ rebuild  p50, p99: own scale · thr: from 0", style="dim", end=""))
    return join_lines(lines, height)
