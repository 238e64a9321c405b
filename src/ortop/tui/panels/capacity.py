"""The capacity screen's drawing: the latency–load curve with each profile's knee marked, the table of capacities,
the verdict and a profile's detail, from a :class:`~ortop.engine.CapacityResult`; and the alternatives the screen
offers to size beside the running profile.

The curve is the reports' own (:func:`ortop.report.curve.text_curve`, the one ``ortop capacity`` prints), coloured here
one colour per profile, with a dotted column and an arrow under the axis at each profile's capacity: the knee, where
the SLO is crossed between the rates found to meet it and to miss it; under that, the legend of the marks (a point
decided by what it measured, or by the queue model's long-run estimate). The search moves on in its own thread
while the screen draws, so the screen holds a copy of what it knew at each point (:func:`copy_result`).

One interval speaks for a capacity: the one where a rerun is expected to land (:mod:`ortop.measure.rerun`), in the
table and the verdict; two profiles' ratio is judged by their two intervals, in ``ortop capacity``'s words
(:func:`ortop.measure.ratio.ratio_text`). The bracket, the last rates measured to meet and to miss the SLO, is shown
only as the search's resolution. Nothing here imports Textual.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile, ProfileError
from ortop.engine import CapacityResult
from ortop.measure.bracket import NOT_APART
from ortop.measure.noise import STALLS_MOVE
from ortop.measure.ratio import ratio_text
from ortop.measure.rerun import CONFIDENCE
from ortop.present import DASH, ms_text, rate_text
from ortop.report.curve import FAMILIES, MARKS, legend_forms, text_curve
from ortop.tui.panels._format import compact_changes, compact_text, fit

STYLES = ("cyan", "magenta", "yellow", "green")     # one per profile, in the order of the search
PREFIX = 9                                          # text_curve's y labels before the plot ("   12.1 ┤")
RIGHT = 8                                           # room after the plot for " SLO 100"
INTERVAL = f"{CONFIDENCE * 100:g} % interval"       # the capacity's: where a rerun is expected to land
RESOLUTION = "search resolution /s"                 # the bracket, named for what it is
COLUMNS = ("profile", f"capacity ({INTERVAL})", RESOLUTION, "ceiling", "points", "state")


# ---- what to size beside the running profile ---------------------------------------------------------------------
@dataclass(frozen=True)
class Alternative:
    """A profile to size beside the running one, and what the screen calls it."""

    label: str
    profile: Profile


def alternatives(running: Profile, *, logical: int, physical: int) -> tuple[Alternative, ...]:
    """What the ``a`` key cycles through: two pinned replicas (with two cores at least; or one, from several),
    spinning the other way, twice and half the intra-op threads; each only where it changes the running profile and
    is valid on this host.

    The thread count counts ORT's default (0) as the physical cores, as the quick keys do; a changed count drops a
    thread affinity (it lists one core group per pool thread)."""
    w, s = running.workload, running.session
    n = s.intra_op_num_threads or physical
    offers: list[tuple[str, dict[str, Any]]] = []
    if w.replicas > 1:
        offers.append(("1 replica", {"workload.replicas": 1, "workload.pin_replicas": False}))
    elif logical >= 2:  # on one core pinned replicas would share it: nothing to learn
        offers.append(("2 replicas pinned", {"workload.replicas": 2, "workload.pin_replicas": True}))
    offers.append(("spinning on", {"session.allow_spinning": None}) if s.allow_spinning is False
                  else ("spinning off", {"session.allow_spinning": False}))
    for label, threads in (("threads ×2", min(logical, 2 * n)), ("threads ÷2", max(1, n // 2))):
        if threads != n:
            offers.append((f"{label} ({threads})", {"session.intra_op_num_threads": threads,
                                                    "session.intra_op_thread_affinities": None}))
    out = []
    for label, changes in offers:
        try:
            p = profile_mod.merge(running, **changes)
            profile_mod.validate(p, host_cpus=logical)
        except ProfileError:
            continue  # not on this host (two pinned replicas on one core): not offered
        if p != running:
            out.append(Alternative(label, p))
    return tuple(out)


# ---- a copy the screen can hold ----------------------------------------------------------------------------------
def copy_result(result: CapacityResult) -> CapacityResult:
    """What the search knows now, in objects it will not touch again: each search and point copied, their lists and
    dicts too (the arrays in them are only ever appended, never changed). Cheap: a few dozen points at most."""
    searches = []
    for s in result.searches:
        c = copy.copy(s)
        points = {}
        for rate, p in dict(s.points).items():
            q = copy.copy(p)
            q.blocks, q.response, q.busy = list(p.blocks), list(p.response), list(p.busy)
            points[rate] = q
        c.points = points
        searches.append(c)
    out = copy.copy(result)
    out.searches = searches
    out.warnings = list(result.warnings)
    return out


# ---- the curve ---------------------------------------------------------------------------------------------------
def _x_top(result: CapacityResult) -> float:
    """The right end of text_curve's rate axis (its highest measured rate, plus 5 %)."""
    rates = [r for s in result.searches for r, p in s.points.items() if math.isfinite(p.value(result.slo))]
    return max(rates) * 1.05 if rates else math.nan


def knee_columns(result: CapacityResult, width: int) -> dict[int, int]:
    """Profile index → the plot column of its capacity, on text_curve's rate axis; profiles that met the SLO at no
    rate have no knee."""
    top = _x_top(result)
    if not math.isfinite(top):
        return {}
    return {s.index: min(width - 1, int(round(s.capacity(result.slo) / top * (width - 1)))) for s in result.searches
            if decided(s)}


def curve(result: CapacityResult | None, width: int, height: int) -> Text:
    """The curve in ``width`` × ``height`` cells: text_curve's plot, each profile's marks in its colour, the SLO
    line in yellow, each knee marked (a dotted column under the SLO line, an arrow and the rate below the axis),
    and under it the legend of the marks: measured, or the queue model's long-run estimate. A short note until the
    first point is measured."""
    plot_w, plot_h = max(8, width - PREFIX - RIGHT), max(4, height - 5)
    plain = (text_curve(result.as_dict(), plot_w, plot_h, intervals=False, legend=False) if result is not None
             else "")
    if result is None or not plain:
        return Text("the curve is drawn here as each point is measured", style="dim")
    lines = plain.split("\n")
    slo_line = next(i for i, line in enumerate(lines[1:], 1) if "┄" in line)
    knees = knee_columns(result, plot_w)
    grid = [list(line) for line in lines]
    for col in knees.values():
        x = PREFIX + col
        for row in grid[slo_line + 1: plot_h + 1]:
            if x < len(row) and row[x] == " ":
                row[x] = "┊"
        axis = grid[plot_h + 1]
        if x < len(axis):
            axis[x] = "┴"
    out = Text(no_wrap=True, overflow="crop", end="")  # wrapped, a line would lose its leading spaces: the y labels'
    for k, row in enumerate(grid):
        line = Text("".join(row))
        if k == 0:
            line.stylize("bold")
        elif k == slo_line:
            line.stylize("yellow", PREFIX)
        for x, ch in enumerate(row):
            for marks in FAMILIES:
                if ch in marks:
                    line.stylize(STYLES[marks.index(ch) % len(STYLES)], x, x + 1)
            if ch == "┊":
                idx = next((i for i, c in knees.items() if PREFIX + c == x), 0)
                line.stylize(f"dim {STYLES[idx % len(STYLES)]}", x, x + 1)
        out.append_text(_legend(line, result.slo.metric, width) if k == 0 else line)
        out.append("\n")
    out.append_text(_knee_line(result, knees))
    out.append("\n")
    out.append_text(_marks_legend(len(result.searches), result.slo.metric, width))
    return out


def _marks_legend(n: int, metric: str, width: int) -> Text:
    """The marks' legend (:func:`ortop.report.curve.legend_forms`) fitted to ``width``, each mark in its profile's
    colour, the words dim: under the plot where it fits there, else from the left edge, before a shorter wording."""
    forms = []
    for plain in (f"{indent}{form}" for form in legend_forms(n, metric) for indent in (" " * PREFIX, "")):
        t = Text(plain, style="dim")
        for x, ch in enumerate(t.plain):
            for marks in FAMILIES:
                if ch in marks:
                    t.stylize(f"not dim {STYLES[marks.index(ch) % len(STYLES)]}", x, x + 1)
        forms.append(t)
    return fit(forms, width)


def _legend(line: Text, metric: str, width: int) -> Text:
    """The curve's title and legend line fitted to ``width`` by the one rule: the title shortens before a profile's
    mark and name is cut (``p99 ms against offered rate (filled: meets the SLO)  ● running  ▲ threads ×2 (8)`` →
    ``p99 ms against offered rate  ● running  ▲ …`` → ``p99 ms  ● running  ▲ …`` → ``● running  ▲ …``)."""
    title = f"{metric} ms against offered rate (filled: meets the SLO)  "
    plain = line.plain
    if not plain.startswith(title):
        return fit([line], width)
    legend = line[len(title):]
    forms = [line]
    for short in (f"{metric} ms against offered rate  ", f"{metric} ms  ", ""):
        form = Text(short, style="bold")
        form.append_text(legend)
        forms.append(form)
    return fit(forms, width)


def _knee_line(result: CapacityResult, knees: dict[int, int]) -> Text:
    """``   knee  ↑294/s      ↑530/s`` under each knee's column, in the profile's colour (shifted right where two
    would overlap)."""
    t = Text(f"{'knee':>7}  ", style="dim")
    at = 0
    for i, col in sorted(knees.items(), key=lambda kv: kv[1]):
        label = f"↑{rate_text(result.searches[i].capacity(result.slo))} "
        if col > at:
            t.append(" " * (col - at))
            at = col
        t.append(label, style=f"bold {STYLES[i % len(STYLES)]}")
        at += len(label)
    if not knees:
        t.append("none yet: no point has met the SLO", style="dim")
    return t


# ---- the table, the verdict, the detail --------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One profile's row in the table."""

    index: int
    name: str
    cells: tuple[str, ...]
    style: str
    profile: Profile


def decided(s: Any) -> bool:
    """Whether a search's capacity rests on a point decided to meet the SLO. The bracket's lower end also moves by
    an undecided point's estimate (a coin toss at the knee); a capacity, a knee or a ratio built on those alone
    would read as found ("0.9/s", "×1.43") when no rate was shown to meet the SLO: it is unknown (—)."""
    return s.lo > 0 and not s.failed and any(p.decision == "met" for p in s.points.values())


def best(result: CapacityResult) -> int | None:
    """The profile whose decided capacity is highest (:func:`decided`); None when no capacity is decided."""
    ok = [s for s in result.searches if decided(s)]
    return max(ok, key=lambda s: s.capacity(result.slo)).index if ok else None


def measured(s: Any) -> list[tuple[float, Any]]:
    """A search's points that have blocks, by rate (the search adds a point as it starts measuring it)."""
    return [(r, p) for r, p in sorted(s.points.items()) if p.blocks]


def _resolution(s: Any) -> str:
    """The search's resolution: the highest rate measured to meet the SLO and the lowest measured not to (``lo…hi``,
    never written as the capacity's interval is)."""
    if not math.isfinite(s.hi):
        return DASH
    return f"{rate_text(s.lo).removesuffix('/s') if s.lo > 0 else '0'}…{rate_text(s.hi).removesuffix('/s')}"


def interval_text(s: Any, slo: Any) -> str:
    """A decided capacity's 90 % interval, where a rerun is expected to land (``232–342``); "" without one."""
    iv = s.interval(slo) if decided(s) else None
    if iv is None or not math.isfinite(iv.lo):
        return ""
    return f"{rate_text(iv.lo).removesuffix('/s')}–{rate_text(iv.hi).removesuffix('/s')}"


def rows(names: Sequence[str], profiles: Sequence[Profile], result: CapacityResult | None,
         done: bool = False) -> tuple[Row, ...]:
    """A row per profile (its mark on the curve, its name): its capacity (where the SLO is crossed) with its 90 %
    interval once the search has ended, the search's resolution (the rates measured to meet and to miss the SLO),
    the closed-loop ceiling, the points measured and where its search stands."""
    top = best(result) if result is not None and done else None
    out = []
    for i, (name, profile) in enumerate(zip(names, profiles)):
        label = f"{MARKS[i % len(MARKS)]} {name}"
        if result is None or i >= len(result.searches):
            out.append(Row(i, name, (label, "", "", "", "", "not started" if not done else ""),
                           STYLES[i % len(STYLES)], profile))
            continue
        s = result.searches[i]
        if s.failed:
            state, style = "failed", "red"
        elif s.note:
            state, style = "capacity 0", "yellow"
        elif i == top and len(result.searches) > 1:
            state, style = ("serves more", "bold green") if result.separated(i) else ("ahead", "bold yellow")
        elif s.done():
            state, style = "done", ""
        elif done:
            state, style = "stopped" if result.stopped else "out of time", "yellow"
        else:
            state, style = "searching", ""
        # no rate decided to meet it: unknown
        cap = rate_text(s.capacity(result.slo)) if decided(s) else ("0" if s.note else DASH)
        if done and (iv := interval_text(s, result.slo)):
            cap += f" ({iv})"
        out.append(Row(i, name, (label, cap, _resolution(s), rate_text(s.ceiling_per_s), str(len(measured(s))),
                                 state), style, profile))
    return tuple(out)


def verdict(result: CapacityResult | None, done: bool) -> Text:
    """Which profile serves more within the SLO, with its 90 % interval, and its ratio to each other one judged by
    their two intervals, as ``ortop capacity`` says it (:func:`ortop.measure.ratio.ratio_text`: overlapping
    intervals give no ratio); while the searches have not told them apart (:data:`NOT_APART`), the one ahead is not
    called the one that serves more. The ratios come once the search has ended, with the intervals."""
    t = Text(no_wrap=False)
    if result is None:
        return t
    slo = result.slo.text()
    top = best(result)
    if top is None:
        live = [s for s in result.searches if not s.failed]
        if live and all(s.note for s in live):  # every idle server already misses it: the search stopped there
            t.append(" · ".join(s.note if len(live) == 1 else f"{s.name}: {s.note}" for s in live), style="yellow")
        elif done and any(s.lo > 0 for s in live):
            t.append(f"no rate was decided to meet {slo}: the capacity is unknown (—); a longer budget (b) gives "
                     "points time to decide", style="yellow")
        elif done:
            t.append(f"neither profile met {slo} at any rate measured", style="yellow")
        return t
    b = result.searches[top]
    sure = result.separated(top)
    if not done:
        t.append("so far  ", style="bold")
    elif sure or len(result.searches) == 1:
        t.append("serves more  " if len(result.searches) > 1 else "capacity  ", style="bold")
    else:
        t.append("ahead  ", style="bold yellow")
    t.append(f"{b.name}: {rate_text(b.capacity(result.slo))} within {slo}", style="bold green" if done and sure else "")
    iv = b.interval(result.slo) if done else None
    if iv is not None and math.isfinite(iv.lo):
        t.append(f" ({iv.confidence * 100:g} % interval {rate_text(iv.lo).removesuffix('/s')}–{rate_text(iv.hi)}: "
                 "where a rerun is expected to land)", style="dim")
        if iv.flat:  # the tail's level, not the queue, decides here: a rerun can land outside (measure.rerun)
            t.append(f" · flat: {result.slo.metric} barely climbs with the rate here, a rerun can land outside it",
                     style="yellow")
    for s in result.searches:
        if s.index == top:
            continue
        if decided(s):  # a ratio only between two decided capacities, and only with their intervals
            if done:
                t.append(f" · {b.name} / {s.name}: {ratio_text(iv, s.interval(result.slo))}")
        elif s.lo > 0:
            t.append(f" · {s.name} —: no rate decided")
        elif done:
            t.append(f" · {s.name} met it at no rate measured")
    if done and not sure:  # the brackets: each search's resolution, the table's column of that name
        t.append(f"\n{NOT_APART} (the {RESOLUTION.removesuffix(' /s')} column), so neither is shown to serve more: a "
                 "longer budget (b) gives points time to decide", style="yellow")
    return t


def detail(row: Row | None, result: CapacityResult | None, running: Profile) -> Text:
    """The highlighted profile in full: what it changes from the running one, why its search ended as it did, and
    every point measured (offered → served, the SLO metric, the decision)."""
    t = Text(no_wrap=False)
    if row is None:
        return t
    t.append(f"{row.name}  ", style=f"bold {STYLES[row.index % len(STYLES)]}")
    t.append("the profile the live session runs" if row.index == 0 else
             "changes " + compact_text(compact_changes(running, row.profile)), style="dim")
    if result is None or row.index >= len(result.searches):
        return t
    s = result.searches[row.index]
    if math.isfinite(s.ceiling_per_s):
        t.append(f"\nceiling {rate_text(s.ceiling_per_s)} back to back · {result.slo.metric} "
                 f"{ms_text(s.floor_ms)} ms at no load", style="dim")
    if s.failed or s.note:
        t.append(f"\n{s.failed or s.note}", style="red" if s.failed else "yellow")
    for n in s.notes:
        t.append(f"\ninput: {n}", style="yellow" if n.startswith("--") else "dim")
    noise = result.host_noise
    if noise is not None and noise.verdict:
        t.append(f"\n{noise.verdict}", style="yellow")
    if noise is not None and noise.stalls_reach and s.met:
        t.append(f"\n{STALLS_MOVE}", style="yellow")
    for rate, p in measured(s):
        shed = f"  ({p.dropped} shed)" if p.dropped else ""
        t.append(f"\n  {rate_text(rate):>8} → {rate_text(p.served_per_s()):>8} "
                 f"({rate_text(p.goodput_per_s())} within)  "
                 f"{result.slo.metric} "
                 f"{ms_text(p.value(result.slo)):>6} ms  ")
        if math.isfinite(p.model[0]):  # what the point's busy times give in the long run (the judged figure)
            t.append(f"long run {ms_text(p.model[0])}  ", style="dim")
        t.append(p.decision + shed, style={"met": "green", "not met": "red"}.get(p.decision, "yellow"))
        if p.decided_by:
            t.append(f" by {p.decided_by}", style="dim")
    return t
