"""The capacity curve as text: the SLO metric against offered rate, one mark per measured point, the SLO as a line,
and under the rate axis each capacity with its interval (where a rerun is expected to land).

Drawn from ``ortop capacity --json``'s dict (:meth:`ortop.engine.CapacityResult.as_dict`), like the reports' pages,
with the project's own characters: a scatter of a few points needs no plotting library, and reads in any terminal
and in a pasted log. ``ortop capacity`` prints it; the TUI's capacity panel colours it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MARKS = "●▲■◆"  # one per profile (a met point); an unmet point is drawn hollow: ○△□◇
HOLLOW = "○△□◇"


def text_curve(data: Mapping[str, Any], width: int = 72, height: int = 16, *, intervals: bool = True) -> str:
    """The curve of a capacity result's dict in ``width`` × ``height`` cells (filled marks: the point met the SLO)
    above its rate axis, with a legend line; "" before any point has a value. ``intervals``: a line per profile
    under the axis, its capacity's mark inside its interval (├──●──┤); the rate axis then reaches the intervals'
    ends too."""
    metric, slo_ms = data["slo"]["metric"], float(data["slo"]["ms"])
    profiles = data["profiles"]
    pts = [(i, float(p["rate_per_s"]), float(p["slo_ms"]), p["decision"] == "met") for i, s in enumerate(profiles)
           for p in s["points"] if p.get("slo_ms") is not None]
    pts.sort(key=lambda x: x[3])  # met points drawn last: a filled mark is never hidden under a hollow one
    if not pts:
        return ""
    spans = [(i, s["interval"], s.get("capacity_per_s")) for i, s in enumerate(profiles)
             if intervals and s.get("interval") and None not in s["interval"]]
    x_hi = max([r for _, r, _, _ in pts] + [float(iv[1]) for _, iv, _ in spans]) * 1.05
    y_hi = max(max(v for _, _, v, _ in pts), slo_ms) * 1.1
    cells = [[" "] * width for _ in range(height)]

    def row(v: float) -> int:
        return min(height - 1, max(0, height - 1 - int(round(v / y_hi * (height - 1)))))

    slo_row = row(slo_ms)
    cells[slo_row] = ["┄"] * width
    for i, r, v, met in pts:
        col = min(width - 1, int(round(r / x_hi * (width - 1))))
        cells[row(v)][col] = (MARKS if met else HOLLOW)[i % len(MARKS)]
    out = []
    for k, line in enumerate(cells):
        y = y_hi * (height - 1 - k) / (height - 1)
        if k == slo_row:
            y = slo_ms  # the SLO's own value on its row, not the row's rounded one
        tick = f"{y:>7.3g} ┤" if k % 4 == 0 or k == slo_row else "        │"
        out.append(tick + "".join(line) + (f" SLO {slo_ms:g}" if k == slo_row else ""))
    out.append("        └" + "─" * width)
    out.append(f"         0{'offered requests/s':^{width - 12}}{x_hi:>8.0f}")

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
    legend = "  ".join(f"{MARKS[i % len(MARKS)]} {label(s)}" for i, s in enumerate(profiles))
    return "\n".join([f"{metric} ms against offered rate (filled: meets the SLO)  {legend}", *out])


def label(profile: Mapping[str, Any]) -> str:
    """A profile as the tables name it: ORT's defaults plus flags by what was applied (``threads 1``)."""
    if profile.get("profile") == "defaults" and profile.get("applied"):
        return str(profile["applied"])
    return str(profile.get("profile"))
