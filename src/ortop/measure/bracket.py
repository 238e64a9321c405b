"""A capacity's bracket: the rates a search measured around the knee (the highest that met the SLO, the lowest that
did not), on the geometric grid the profiles' points share, and what two brackets tell apart.

Pure numbers: the capacity search (:mod:`ortop.engine.answers.capacity`) keeps its brackets with these rules, and the
CLI, the TUI and the reports say the verdict in the words of :data:`NOT_APART`.
"""

from __future__ import annotations

import math

GRID = 1.02             # rates are rounded to this geometric grid, so profiles can share a point
NARROW = 0.10           # stop narrowing a bracket when hi − lo ≤ 10 % of hi (the knee then known to within 10 %)
# why the one ahead is not shown to serve more
NOT_APART = f"their rerun intervals or their brackets overlap (or lie within {NARROW * 100:g} %)"


def grid(rate: float) -> float:
    """The rate on the 2 % geometric grid (points of different profiles meet there)."""
    if rate <= 0:
        return 0.0
    return float(GRID ** round(math.log(rate) / math.log(GRID)))


def narrow(lo: float, hi: float) -> bool:
    """Whether the bracket ``lo``…``hi`` is closed and within NARROW of its upper end: the knee known well enough."""
    return math.isfinite(hi) and hi - lo <= NARROW * hi


def apart(best_lo: float, best_met: float, hi: float, missed: float) -> bool:
    """Whether a profile is shown to serve less than the best one: it missed the SLO (a decided point, lowest at
    ``missed``; inf for none) at or below a rate where the best met it (highest at ``best_met``; 0 for none), or
    its bracket's upper end ``hi`` lies at least NARROW below the best's lower end ``best_lo``. Otherwise the
    brackets overlap or lie within NARROW of each other (:data:`NOT_APART`): neither is shown to serve more."""
    return (0 < best_met and missed <= best_met) or (math.isfinite(hi) and hi * (1 + NARROW) <= best_lo)


def knee(lo: float, hi: float, at_lo: float, at_hi: float, limit: float) -> float:
    """Where the SLO metric crosses ``limit`` between the rates ``lo`` and ``hi`` that bound it, from the metric at
    each (``at_lo``, ``at_hi``), linear in 1 / metric — a queue's response time grows like 1 / (capacity − rate)
    near its ceiling, so its reciprocal is near linear in the rate. ``lo`` when the two do not straddle the limit."""
    if not (0 < at_lo <= limit < at_hi) or math.isnan(at_hi):
        return lo
    share = (1 / at_lo - 1 / limit) / (1 / at_lo - (1 / at_hi if math.isfinite(at_hi) else 0.0))
    return lo + min(1.0, max(0.0, share)) * (hi - lo)
