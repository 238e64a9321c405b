"""Drawing as pure functions: figures in, Rich ``Text`` out, sized to the cells a panel has.

Nothing here imports Textual or reads a clock, so every panel can be tested as a plain string, and the refresh
tick can skip a repaint by comparing two ``Text`` objects. Styles are named ANSI colours (``red``, ``cyan``…)
and attributes only: they survive a 256-colour or 16-colour SSH terminal where truecolor gradients would not.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rich.text import Text

from ortop.measure.stats import Bucket, LatencyStats, spark

# ---- numbers ---------------------------------------------------------------------------------------------------
DASH = "—"
EIGHTHS = " ▏▎▍▌▋▊▉█"
LEVELS = "▁▂▃▄▅▆▇█"
IDLE = "·"
WORKER_STYLE = "bold cyan"
STATE_STYLE = {
    "starting": "bold yellow",
    "building": "bold black on yellow",
    "warming": "bold black on yellow",
    "measuring": "bold green",
    "paused": "bold black on white",
    "failed": "bold white on red",
    "stopped": "dim",
}
STATE_ICON = {"starting": "…", "building": "⟳", "warming": "⟳", "measuring": "●", "paused": "‖", "failed": "✗",
              "stopped": "■"}
LEVEL_STYLE = {"error": "bold red", "warning": "yellow", "info": "", "debug": "dim"}
LEVEL_ICON = {"error": "✗", "warning": "!", "info": "·", "debug": " "}


def finite(x: float | None) -> bool:
    """True for a real number (not None, NaN or ±inf)."""
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def fmt_ms(x: float | None) -> str:
    """Milliseconds with three significant figures: 0.123, 1.23, 12.3, 123."""
    if not finite(x):
        return DASH
    assert x is not None
    a = abs(x)
    if a < 0.9995:  # thresholds where rounding would add a digit: 0.9996 shows as 1.00, not 1.000
        return f"{x:.3f}"
    if a < 9.995:
        return f"{x:.2f}"
    if a < 99.95:
        return f"{x:.1f}"
    return f"{x:.0f}"


def fmt_pct(x: float | None, width: int = 0) -> str:
    """A percentage without decimals (``45%``), right-aligned to ``width``."""
    s = DASH if not finite(x) else f"{x:.0f}%"
    return s.rjust(width)


def fmt_rate(x: float | None) -> str:
    """Runs per second: 812/s, 12.3k/s."""
    if not finite(x):
        return DASH
    assert x is not None
    if x >= 10_000:
        return f"{x / 1000:.0f}k/s"
    if x >= 1000:
        return f"{x / 1000:.1f}k/s"
    if x >= 10:
        return f"{x:.0f}/s"
    return f"{x:.1f}/s"


def fmt_bytes(n: float | None) -> str:
    """Bytes as GiB above 1 GiB, else MiB."""
    if not finite(n):
        return DASH
    assert n is not None
    if n >= 2 ** 30:
        return f"{n / 2 ** 30:.1f} GiB"
    return f"{n / 2 ** 20:.0f} MiB"


def fmt_secs(x: float | None) -> str:
    """Elapsed seconds: 0.4 s, 12.3 s, 3m05s."""
    if not finite(x):
        return DASH
    assert x is not None
    if x < 60:
        return f"{x:.1f} s"
    m, s = divmod(int(x), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


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


def join_lines(lines: Sequence[Text], height: int | None = None) -> Text:
    """Stack lines into one Text; with ``height``, cut to it (a panel never grows its own box)."""
    if height is not None:
        lines = list(lines)[: max(0, height)]
    out = Text(no_wrap=True, overflow="crop", end="")
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        out.append_text(line)
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


# ---- CPU -------------------------------------------------------------------------------------------------------
MIN_BAR = 4
GOOD_BAR = 10


def _meter_layout(n: int, width: int, height: int) -> tuple[int, int, int] | None:
    """(columns, rows, bar width) for ``n`` meters in ``width``×``height``; None when even 4-cell bars do not fit.

    Takes as many columns as keep bars at least ``GOOD_BAR`` cells (fewer rows leave room for the other panels),
    else the fewest columns that fit the height at all.
    """
    label = len(str(max(0, n - 1)))
    best = None
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        cell = (width - (cols - 1)) // cols
        bw = cell - label - 5  # label, "▕", bar, "▏", "nnn"
        if bw < MIN_BAR:
            break
        if rows > height:
            continue
        if bw >= GOOD_BAR:
            best = (cols, rows, bw)
            continue
        return best or (cols, rows, bw)
    return best


def core_meters(per_core: Sequence[float], worker_cores: Iterable[int], width: int, height: int = 8) -> Text:
    """One meter per logical core (``3▕████▌   ▏ 57``), in columns, cores numbered from 0 as htop does.

    The worker's cores have their number drawn in reverse cyan, so where the pool runs (and spins) is visible at a
    glance. When the meters cannot fit ``width``×``height`` (many cores), the heat grid is drawn instead.
    """
    n = len(per_core)
    if n == 0:
        return Text("no per-core figures", style="dim", end="")
    layout = _meter_layout(n, width, height)
    if layout is None:
        return heat_grid(per_core, worker_cores, width, height)
    cols, rows, bw = layout
    label_w = len(str(n - 1))
    mine = set(worker_cores)
    lines = []
    for r in range(rows):
        line = Text(no_wrap=True, end="")
        for c in range(cols):
            i = c * rows + r
            if i >= n:
                break
            if c:
                line.append(" ")
            pct = float(per_core[i]) if finite(per_core[i]) else 0.0
            line.append(str(i).rjust(label_w), style="reverse " + WORKER_STYLE if i in mine else "dim")
            line.append("▕", style="dim")
            line.append(bar(pct / 100.0, bw), style=load_style(pct))
            line.append("▏", style="dim")
            line.append(f"{pct:3.0f}", style=WORKER_STYLE if i in mine else "")
        lines.append(line)
    return join_lines(lines)


def level_glyph(pct: float) -> str:
    """One cell for one core's load: ``·`` idle, then ▁ … █."""
    if not finite(pct) or pct < 3:
        return IDLE
    return LEVELS[min(len(LEVELS) - 1, int(pct / 100.0 * len(LEVELS)))]


def heat_grid(per_core: Sequence[float], worker_cores: Iterable[int], width: int, height: int | None = None) -> Text:
    """One cell per core (block height = load, colour = band; the worker's cores cyan), rows labelled by first core.

    Fits 64 cores in a quarter of an 80×24 screen and 256 in a 40-column panel: groups of 8 cells are spaced
    apart when there is room, then the spacing goes, then the row labels.
    """
    n = len(per_core)
    if n == 0 or width <= 0:
        return Text("", end="")
    mine = set(worker_cores)
    label_w = len(str(n - 1))
    limit = height if height is not None and height > 0 else None

    def plan() -> tuple[int, bool, bool]:
        # (cells per row, gaps between groups of 8, row labels), most readable that fits the height
        options = []
        avail = width - label_w - 1
        groups = (avail + 1) // 9
        if groups >= 1:
            options.append((groups * 8, True, True))
        if avail >= 1:
            options.append((avail, False, True))
        options.append((width, False, False))
        for per, gaps, labels in options:
            if limit is None or math.ceil(n / per) <= limit:
                return per, gaps, labels
        return options[-1]

    per, gaps, labels = plan()
    lines: list[Text] = []
    for start in range(0, n, per):
        line = Text(no_wrap=True, end="")
        if labels:
            line.append(str(start).rjust(label_w) + " ", style="dim")
        for i in range(start, min(n, start + per)):
            if gaps and i > start and (i - start) % 8 == 0:
                line.append(" ")
            pct = float(per_core[i]) if finite(per_core[i]) else 0.0
            line.append(level_glyph(pct), style=WORKER_STYLE if i in mine else load_style(pct))
        lines.append(line)
    if limit is not None and len(lines) > limit:
        lines = lines[:limit]
        last = lines[-1]
        lines[-1] = Text(no_wrap=True, end="").append_text(last[: max(0, len(last) - 1)]).append("…", style="dim")
    return join_lines(lines)


def cpu_panel(sample: Any, width: int, height: int) -> Text:
    """The CPU panel: core meters (or the heat grid), then worker / system / UI load on the last line.

    ``sample`` is a collectors.cpu.CpuSample, or None before the first one.
    """
    if sample is None:
        return Text("waiting for the first CPU sample…", style="dim", end="")
    n = len(sample.per_core)
    cores_h = max(1, height - 1)
    grid = _meter_layout(n, width, cores_h) is None
    body = core_meters(sample.per_core, sample.worker_cores, width, cores_h - (1 if grid and height > 3 else 0))
    summary = Text(no_wrap=True, end="")
    summary.append("worker ", style="dim")
    proc = sample.process_percent
    summary.append(fmt_pct(proc), style=WORKER_STYLE)
    summary.append(" · system ", style="dim")
    summary.append(fmt_pct(sample.system_percent), style=load_style(sample.system_percent))
    summary.append(" · ui ", style="dim")
    summary.append(f"{sample.self_percent:.1f}%" if finite(sample.self_percent) else DASH)
    lines = body.split("\n") if body.plain else [body]
    if grid and height > 3:
        legend = Text("▁…█ load  ", style="dim", end="")
        legend.append("cyan", style=WORKER_STYLE)
        legend.append(" = the worker's cores", style="dim")
        lines = list(lines)[: cores_h - 1] + [legend]
    return join_lines(list(lines)[: max(0, height - 1)] + [summary], height)


# ---- spin ------------------------------------------------------------------------------------------------------
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


def spin_panel(cost: Any, threads: Sequence[Any], width: int, height: int,
               process_history: Sequence[float] = ()) -> Text:
    """CPU per inference, CPU burned between runs, busy duty cycle, and the pool's threads with their cores.

    The split bar (``█`` in runs, ``▒`` between runs) is the point of the panel: on a paced loop with spinning on,
    most of it is ``▒``, turning spinning off shrinks it. ``process_history`` (the worker's CPU %, one value per
    refresh) draws the same story over time: the line drops the moment spinning goes off.
    """
    lines: list[Text] = []
    line = Text(no_wrap=True, end="")
    line.append("CPU/run ", style="dim")
    line.append(f"{fmt_ms(cost.cpu_ms_per_run)} ms", style="bold")
    line.append(" · busy ", style="dim")
    line.append(fmt_pct(cost.busy_percent))
    line.append(" · process " if width >= 42 else " · proc ", style="dim")
    line.append(fmt_pct(cost.process_cpu_percent), style=WORKER_STYLE)
    lines.append(line)

    inside, between, total = spin_split(cost)
    line = Text(no_wrap=True, end="")
    line.append("between runs ", style="dim")
    if finite(between):
        share = between / total if finite(total) and total > 0 else math.nan
        line.append(f"{between:.0f} ms/s", style="bold magenta" if finite(share) and share > 0.3 else "bold")
        if finite(share):
            line.append(f" = {share * 100:.0f}% of its CPU", style="dim")
    else:
        line.append(f"{DASH} (n/a with concurrent callers)" if finite(total) else DASH, style="dim")
    lines.append(line)

    if finite(total) and total > 0 and finite(inside):
        bw = max(4, width - 11)
        n_in = int(round(inside / total * bw))
        line = Text(no_wrap=True, end="")
        line.append("in ", style="dim")
        line.append("█" * n_in, style="green")
        line.append("▒" * (bw - n_in), style="magenta")
        line.append(" between", style="dim")
        lines.append(line)
    else:
        lines.append(Text("in runs / between runs: waiting for runs…", style="dim", end=""))

    if process_history and height - len(lines) >= 3:
        vals = list(process_history)
        now = vals[-1]
        line = Text(no_wrap=True, end="")
        line.append("worker ", style="dim")
        sw = max(1, width - 7 - 6)
        hi = max([100.0] + [v for v in vals[-sw:] if finite(v)])
        line.append(spark(vals, sw, 0.0, hi).rjust(sw), style=WORKER_STYLE)
        line.append(fmt_pct(now, 6), style="bold")
        lines.append(line)

    busy = [t for t in threads if finite(t.cpu_percent)]
    room = height - len(lines)
    if room >= 2 and busy:
        lines.append(Text("thread      core   CPU", style="dim", end=""))
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
            line.append(clip(t.name, max(0, width - tid_w - bw - 13)), style="dim")
            lines.append(line)
        if len(shown) < len(busy):
            idle = sum(1 for t in busy[len(shown):] if t.cpu_percent < 1)
            lines.append(Text(f"+{len(busy) - len(shown)} more ({idle} idle)", style="dim", end=""))
    return join_lines(lines, height)


# ---- GPU -------------------------------------------------------------------------------------------------------
def gpu_panel(sample: Any, history: Mapping[int, tuple[Sequence[float], Sequence[float]]], width: int,
              height: int) -> Text:
    """Per device: memory used/total with the worker's share, utilisation, each with a short sparkline.

    No NVIDIA GPU (or no NVML) is a normal state on a CPU host and reads as such, dim, not as an error.
    ``history`` maps a device index to (memory used bytes, utilisation %) series kept by the app.
    """
    if sample is None:
        return Text("waiting for the first GPU sample…", style="dim", end="")
    if not sample.devices:
        line = Text(sample.status or "no NVIDIA GPU", style="dim", end="")
        if sample.status and sample.status.startswith("NVML error"):
            line.stylize("yellow")
        return line
    lines: list[Text] = []
    per_dev = 2 if height >= 2 * len(sample.devices) + (1 if sample.pid_note else 0) else 1
    for d in sample.devices:
        mem_hist, util_hist = history.get(d.index, ((), ()))
        frac = d.mem_used / d.mem_total if d.mem_total else math.nan
        mem_style = load_style(frac * 100) if finite(frac) else ""
        util = Text(no_wrap=True, end="")
        util.append(" util ", style="dim")
        util.append(fmt_pct(d.util_percent, 4) if d.util_percent is not None else " n/a")
        mem = Text(no_wrap=True, end="")
        mem.append(f"{fmt_bytes(d.mem_used)}/{fmt_bytes(d.mem_total)}", style=mem_style)
        if d.process_mem is not None:
            mem.append(" worker ", style="dim")
            mem.append(fmt_bytes(d.process_mem), style=WORKER_STYLE)
        if per_dev == 2:
            head = Text(no_wrap=True, end="")
            head.append(f"#{d.index} ", style="bold")
            head.append(clip(d.name, max(8, width - 4 - 10 - 12)))
            head.append_text(util)
            _trail_spark(head, util_hist, width, 0.0, 100.0, "green")
            line = Text(no_wrap=True, end="")
            line.append("   mem ", style="dim")
            line.append_text(mem)
            _trail_spark(line, mem_hist, width, 0.0, float(d.mem_total) or None, "cyan")
            lines += [head, line]
        else:
            head = Text(no_wrap=True, end="")
            head.append(f"#{d.index} ", style="bold")
            head.append_text(mem)
            head.append_text(util)
            lines.append(head)
    if sample.pid_note:
        lines.append(Text(sample.pid_note, style="dim", end=""))
    return join_lines(lines, height)


def _trail_spark(line: Text, values: Sequence[float], width: int, lo: float, hi: float | None, style: str) -> None:
    """Fill the rest of ``line`` (up to ``width``) with a sparkline of the newest values, when there is room."""
    room = width - len(line.plain) - 1
    if room >= 4 and len(values):
        line.append(" ")
        line.append(spark(list(values), room, lo, hi), style=style)


def gpu_rows(sample: Any) -> int:
    """Lines the GPU panel wants: two per device (figures and sparklines), plus the pid note; one without a GPU."""
    if sample is None or not sample.devices:
        return 1
    return 2 * len(sample.devices) + (1 if sample.pid_note else 0)


# ---- latency ---------------------------------------------------------------------------------------------------
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


def latency_panel(series: Sequence[Bucket], window: LatencyStats, latency: LatencyStats, runs: int,
                  throughput: float, bucket_s: float, width: int, height: int, window_s: float = 5.0) -> Text:
    """Sparklines of p50, p99 and throughput per bucket, a ``▼`` over each rebuild, then the current figures.

    Each row scales on its own range (printed at the right), so the shape of p99 is visible even when it sits far
    above p50.
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
    rows = [
        ("p50", p50, "green", f"{fmt_ms(last_finite(p50))} ms"),
        ("p99", p99, "yellow", f"{fmt_ms(last_finite(p99))} ms"),
        ("thr", thr, "cyan", fmt_rate(last_finite(thr))),
    ]
    spark_rows = []
    for name, vals, style, value in rows:
        line = Text(no_wrap=True, end="")
        line.append(name.ljust(label_w), style="dim")
        line.append(" " * pad + spark(vals, len(vals)) if vals else " " * sw, style=style)
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

    if height >= 6:
        lines = [marker, *spark_rows, now, total]
    elif height == 5:
        lines = [marker, *spark_rows, now]
    elif height == 4:
        lines = [*spark_rows, now]
    else:
        lines = [*spark_rows][: max(0, height)]
    if height > 6:
        lines.append(Text("▼ rebuild  ranges: each row its own scale", style="dim", end=""))
    return join_lines(lines, height)


# ---- model / session -------------------------------------------------------------------------------------------
def settings_line(profile: Any) -> str:
    """The knobs the demo turns, in one line: what is running now."""
    s, w = profile.session, profile.workload

    def tri(v: bool | None) -> str:
        return "default" if v is None else ("on" if v else "off")

    parts = [f"intra {s.intra_op_num_threads or 'default'}"]
    if s.inter_op_num_threads:
        parts.append(f"inter {s.inter_op_num_threads}")
    if s.execution_mode != "sequential":
        parts.append(s.execution_mode)
    parts.append(f"spin {tri(s.allow_spinning)}")
    if s.dynamic_block_base is not None:
        parts.append(f"dbb {s.dynamic_block_base}")
    if s.intra_op_thread_affinities:
        parts.append("pinned " + ";".join(",".join(str(c) for c in t) for t in s.intra_op_thread_affinities))
    parts.append(f"rate {w.rate_hz:g} Hz" if w.rate_hz else "closed loop")
    if w.concurrency > 1:
        parts.append(f"×{w.concurrency} callers")
    if profile.provider.name.lower() != "cpu":
        parts.append(profile.provider.name + (" iobinding" if profile.provider.io_binding else ""))
    if profile.env:
        parts.append("env " + " ".join(f"{k}={v}" for k, v in sorted(profile.env.items())))
    return " · ".join(parts)


def _provider_short(name: str) -> str:
    return name.replace("ExecutionProvider", "")


def state_text(state: str, elapsed: float) -> Text:
    """``● measuring 12 s``, styled by state. Building and warming stand out and count tenths: a rebuild is running
    and the wait is the point; a steady state counts whole seconds (the line then changes once a second)."""
    t = Text(no_wrap=True, end="")
    busy = state in ("building", "warming", "starting")
    when = fmt_secs(elapsed) if busy or not finite(elapsed) or elapsed >= 60 else f"{int(elapsed)} s"
    t.append(f" {STATE_ICON.get(state, '?')} {state} {when} ", style=STATE_STYLE.get(state, "bold"))
    return t


def model_panel(snap: Any, width: int, height: int, fatal: str | None = None) -> Text:
    """Model name and shape, the fed inputs, providers requested vs active, build times, state and settings."""
    lines: list[Text] = []
    st = Text(no_wrap=True, end="")
    busy = snap.state in ("building", "warming", "starting")
    if busy:  # elapsed time matters while a rebuild runs; otherwise the status line has it
        st.append_text(state_text(snap.state, snap.state_elapsed))
    else:
        st.append(f" {STATE_ICON.get(snap.state, '?')} {snap.state} ", style=STATE_STYLE.get(snap.state, "bold"))
    if snap.pending is not None and snap.state in ("building", "warming", "starting"):
        changes = snap.pending.changes_from(snap.profile)
        st.append(" → " + clip(short_label("; ".join(changes)) if changes else "same settings", width), style="yellow")
    elif snap.config_id >= 0:
        st.append(f" config #{snap.config_id}", style="dim")
    lines.append(st)
    if fatal:
        lines.append(Text(clip(fatal, width * 2), style="bold red", end=""))

    info = snap.model
    line = Text(no_wrap=True, end="")
    line.append("model ", style="dim")
    line.append(os.path.basename(snap.model_path), style="bold")
    if info is not None:
        ops = sorted(info.op_histogram.items(), key=lambda kv: -kv[1])[:4]
        line.append(f"  IR {info.ir_version} · {info.num_nodes} nodes · " +
                    " ".join(f"{k}×{v}" for k, v in ops), style="dim")
    lines.append(line)

    feeds = snap.feeds or tuple(f"{t.name} {t.dtype}[{','.join(str(d) for d in (t.shape or ()))}]"
                                for t in (info.inputs if info is not None else ()))
    line = Text(no_wrap=True, end="")
    line.append("inputs ", style="dim")
    line.append("; ".join(feeds) if feeds else DASH)
    lines.append(line)

    line = Text(no_wrap=True, end="")
    line.append("providers ", style="dim")
    if snap.providers_active:
        line.append(", ".join(_provider_short(p) for p in snap.providers_active),
                    style="bold red" if snap.fallback else "bold")
        if snap.fallback:
            missing = [p for p in snap.providers_requested if p not in snap.providers_active]
            line.append(f"  ({', '.join(_provider_short(p) for p in missing)} requested: silent fallback)",
                        style="bold red")
    else:
        line.append(", ".join(_provider_short(p) for p in snap.providers_requested) + " (requested)", style="dim")
    lines.append(line)

    line = Text(no_wrap=True, end="")
    line.append("session ", style="dim")
    line.append(f"create {fmt_ms(snap.create_ms)} ms · first run {fmt_ms(snap.first_run_ms)} ms")
    if snap.restarts:
        line.append(f" · {snap.restarts} restart{'s' if snap.restarts > 1 else ''}", style="yellow")
    if snap.worker_pid:
        line.append(f" · pid {snap.worker_pid}", style="dim")
    lines.append(line)

    line = Text(no_wrap=True, end="")
    line.append("settings ", style="dim")
    line.append(settings_line(snap.profile), style="bold")
    lines.append(line)
    for note in snap.notes:
        lines.append(Text("note " + note, style="dim", end=""))
    return join_lines(lines, height)


# ---- events ----------------------------------------------------------------------------------------------------
def events_panel(events: Sequence[Any], width: int, height: int) -> Text:
    """The newest ``height`` events, newest last, with ``×N`` for grouped repeats."""
    if height <= 0:
        return Text("", end="")
    if not events:
        return Text("no events yet", style="dim", end="")
    lines = []
    for e in list(events)[-height:]:
        line = Text(no_wrap=True, end="")
        line.append(f"{e.t:7.1f} ", style="dim")
        line.append(LEVEL_ICON.get(e.level, "·") + " ", style=LEVEL_STYLE.get(e.level, ""))
        count = f" ×{e.count}" if e.count > 1 else ""
        line.append(clip(e.text, max(1, width - 10 - len(count))), style=LEVEL_STYLE.get(e.level, ""))
        if count:
            line.append(count, style="bold")
        lines.append(line)
    return join_lines(lines, height)


# ---- status line -----------------------------------------------------------------------------------------------
def status_line(snap: Any, width: int) -> Text:
    """The top line: ortop, model, state with elapsed time, and the running configuration's changes."""
    t = Text(no_wrap=True, end="")
    t.append(" ortop ", style="bold reverse")
    t.append(" " + os.path.basename(snap.model_path) + " ", style="bold")
    t.append_text(state_text(snap.state, snap.state_elapsed))
    if snap.config_id >= 0:
        label = next((h.label for h in snap.history if h.config_id == snap.config_id), "")
        t.append(f" #{snap.config_id} ", style="dim")
        t.append(clip(short_label(label), max(0, width - len(t.plain))))
    return t


# ---- history ---------------------------------------------------------------------------------------------------
HISTORY_COLUMNS = ("", "#", "changes from start", "runs", "p50 ms", "p99 ms", "thr", "CPU/run", "verdict")


def verdict_style(verdict: str) -> str:
    """Green for a real speed-up, red for a real slow-down, dim for noise or not enough runs yet."""
    if verdict.endswith("faster"):
        return "bold green"
    if verdict.endswith("slower"):
        return "bold red"
    return "dim"


def verdict_short(verdict: str) -> str:
    """The verdict for a table cell: ``no real change (+3.0%, within noise)`` → ``noise (+3.0%)``."""
    m = re.match(r"no real change \(([+-]?[\d.]+%)", verdict)
    return f"noise ({m.group(1)})" if m else verdict


def history_rows(history: Sequence[Any], label_width: int = 48, current_id: int | None = None) -> list[tuple[Text, ...]]:
    """One tuple of cells per configuration, in HISTORY_COLUMNS order; the best p50 gets ★, the running one ▶."""
    rows = []
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
            Text(verdict_short(h.verdict) or DASH, style=verdict_style(h.verdict)),
        ))
    return rows
