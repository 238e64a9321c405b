"""The capacity curve as text: the SLO metric against offered rate, one mark per measured point, the SLO as a line,
under the rate axis a legend of the marks and each capacity with its interval (where a rerun is expected to land).

A point is drawn at what it measured, but it is not always judged by that: the search decides a point by its
measured share of requests over the SLO, or by the queue model's long-run estimate of the SLO metric, modelled from
what the point's requests cost their server (``decided_by`` in the dict; :mod:`ortop.engine.answers.capacity`). A few
seconds of requests rarely hold the long queues that set a p99, so a point drawn over the SLO's line may meet it in
the long run, and one drawn under it miss it. Each mark says which: the profile's shape full size when the
measurement decided the point, small when the estimate did; filled when it met the SLO, hollow when it did not (or
is undecided). The legend line says so under the axis.

Drawn from ``ortop capacity --json``'s dict (:meth:`ortop.engine.CapacityResult.as_dict`), like the reports' pages,
with the project's own characters: a scatter of a few points needs no plotting library, and reads in any terminal
and in a pasted log. ``ortop capacity`` prints it; the TUI's capacity panel colours it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MARKS = "●▲■◆"  # one per profile (a met point); an unmet point is drawn hollow: ○△□◇
HOLLOW = "○△□◇"
SMALL = "•▴▪⬩"  # the same, decided by the queue model's long-run estimate: small
SMALL_HOLLOW = "◦▵▫⋄"
FAMILIES = (MARKS, HOLLOW, SMALL, SMALL_HOLLOW)  # every mark a point is drawn with, a profile per position
BY_ESTIMATE = "long-run estimate"  # a point's ``decided_by`` when the queue model decided it (engine.capacity.BY_MODEL)


def mark(i: int, met: bool, estimated: bool) -> str:
    """Profile ``i``'s mark for a point: filled when it met the SLO, small when the estimate decided it."""
    family = (SMALL if met else SMALL_HOLLOW) if estimated else (MARKS if met else HOLLOW)
    return family[i % len(family)]


def legend_forms(n: int, metric: str) -> list[str]:
    """The legend of the marks for ``n`` profiles, longest first (the live view fits it to its width): ``● ○
    measured  • ◦ the queue model's long-run estimate (too few requests to measure its p99)``."""
    shapes = range(max(1, min(n, len(MARKS))))
    measured = " ".join(f"{MARKS[i]} {HOLLOW[i]}" for i in shapes)
    estimated = " ".join(f"{SMALL[i]} {SMALL_HOLLOW[i]}" for i in shapes)
    why = f"(too few requests to measure its {metric})"
    return [f"{measured} measured  {estimated} the queue model's long-run estimate {why}",
            f"{measured} measured  {estimated} queue-model estimate {why}",
            f"{measured} measured  {estimated} queue-model estimate"]


def text_curve(data: Mapping[str, Any], width: int = 72, height: int = 16, *, intervals: bool = True,
               legend: bool = True) -> str:
    """The curve of a capacity result's dict in ``width`` × ``height`` cells (filled marks: the point met the SLO;
    small ones: the queue model's estimate decided it, :func:`mark`) above its rate axis, with the profiles' names
    over it and the marks' legend under it (:func:`legend_forms`; ``legend=False`` leaves that line out); "" before
    any point has a value. ``intervals``: a line per profile under the axis, its capacity's mark inside its interval
    (├──●──┤); the rate axis then reaches the intervals' ends too."""
    metric, slo_ms = data["slo"]["metric"], float(data["slo"]["ms"])
    profiles = data["profiles"]
    pts = [(i, float(p["rate_per_s"]), float(p["slo_ms"]), p["decision"] == "met",
            p.get("decided_by") == BY_ESTIMATE) for i, s in enumerate(profiles)
           for p in s["points"] if p.get("slo_ms") is not None]
    pts.sort(key=lambda x: x[3])  # met points drawn last: a filled mark is never hidden under a hollow one
    if not pts:
        return ""
    spans = [(i, s["interval"], s.get("capacity_per_s")) for i, s in enumerate(profiles)
             if intervals and s.get("interval") and None not in s["interval"]]
    x_hi = max([p[1] for p in pts] + [float(iv[1]) for _, iv, _ in spans]) * 1.05
    y_hi = max(max(p[2] for p in pts), slo_ms) * 1.1
    cells = [[" "] * width for _ in range(height)]

    def row(v: float) -> int:
        return min(height - 1, max(0, height - 1 - int(round(v / y_hi * (height - 1)))))

    slo_row = row(slo_ms)
    cells[slo_row] = ["┄"] * width
    for i, r, v, met, estimated in pts:
        col = min(width - 1, int(round(r / x_hi * (width - 1))))
        cells[row(v)][col] = mark(i, met, estimated)
    out = []
    for k, line in enumerate(cells):
        y = y_hi * (height - 1 - k) / (height - 1)
        if k == slo_row:
            y = slo_ms  # the SLO's own value on its row, not the row's rounded one
        tick = f"{y:>7.3g} ┤" if k % 4 == 0 or k == slo_row else "        │"
        out.append(tick + "".join(line) + (f" SLO {slo_ms:g}" if k == slo_row else ""))
    out.append("        └" + "─" * width)
    out.append(f"         0{'offered requests/s':^{width - 12}}{x_hi:>8.0f}")
    if legend:
        out.append(f"         {legend_forms(len(profiles), metric)[0]}")

    def at(r: float) -> int:
        return min(width - 1, max(0, int(round(r / x_hi * (width - 1)))))

    for i, (lo, hi), cap in spans:  # each capacity with the interval a rerun is expected to land in
        line = [" "] * width
        a, b = at(float(lo)), at(float(hi))
        for c in range(a, b + 1):
            line[c] = "─"
        line[a], line[b] = "├", "┤"
        if cap is not None:
            line[at(float(cap))] = MARKS[i % len(MARKS)]
        conf = profiles[i].get("interval_confidence") or 0.9
        out.append("         " + "".join(line) + f" {conf * 100:g} % interval")
    names = "  ".join(f"{MARKS[i % len(MARKS)]} {label(s)}" for i, s in enumerate(profiles))
    return "\n".join([f"{metric} ms against offered rate (filled: meets the SLO)  {names}", *out])


def label(profile: Mapping[str, Any]) -> str:
    """A profile as the tables name it: ORT's defaults plus flags by what was applied (``threads 1``)."""
    if profile.get("profile") == "defaults" and profile.get("applied"):
        return str(profile["applied"])
    return str(profile.get("profile"))
