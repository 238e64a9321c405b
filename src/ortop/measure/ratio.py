"""Two capacities' ratio, judged by their rerun intervals (:mod:`ortop.measure.rerun`), in the words ``ortop
capacity`` and the live view's capacity screen both print.

Each capacity carries the interval where a rerun of its search on this host is expected to land; it is symmetric in
log, ``estimate × exp(± z · sd)``. The ratio of two is ``a / b``, and its interval is the two errors combined as
independent ones: ``(a / b) × exp(± z · √(sd_a² + sd_b²))`` at the intervals' confidence. The two profiles of one
search share the host's drift (their points are measured on the same arrivals, interleaved), so treating the errors
as independent makes this interval wider than the ratio's own spread: it never claims more than the two intervals
do.

When the two intervals overlap, a rerun could rank the two either way: no ratio is said, only that the difference
is not detectable. Apart, they give the ratio with its interval (which then excludes 1: two intervals apart put
the log ratio more than ``z · (sd_a + sd_b) ≥ z · √(sd_a² + sd_b²)`` from 0). A capacity without its interval gives no
ratio at all.

The bracket (the search's last rates measured to meet and to miss the SLO) is the search's resolution, not an
interval of the capacity: no ratio is built on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from ortop.measure.rerun import RerunInterval

OVERLAPPING = "no detectable difference"  # what overlapping intervals say of two capacities


@dataclass(frozen=True)
class Ratio:
    """``a / b`` with its interval at ``confidence``; ``overlapping``: the two capacities' intervals overlap."""

    estimate: float
    lo: float
    hi: float
    confidence: float
    overlapping: bool

    def text(self) -> str:
        """``×1.89 (90 % interval ×1.52–×2.35)``, or ``overlapping 90 % intervals: no detectable difference``."""
        conf = f"{self.confidence * 100:g} %"
        if self.overlapping:
            return f"overlapping {conf} intervals: {OVERLAPPING}"
        return f"×{self.estimate:.2f} ({conf} interval ×{self.lo:.2f}–×{self.hi:.2f})"


def _half_width(iv: RerunInterval) -> float:
    """The interval's half-width in log, at its own confidence: z · sd."""
    return math.log(iv.hi / iv.lo) / 2


def _whole(iv: RerunInterval | None) -> bool:
    return (iv is not None and 0 < iv.lo <= iv.estimate <= iv.hi and math.isfinite(iv.hi)
            and 0 < iv.confidence < 1)


def overlapping(a: RerunInterval, b: RerunInterval) -> bool:
    """Whether two capacities' rerun intervals overlap: a rerun could then rank the two either way."""
    return a.lo <= b.hi and b.lo <= a.hi


def capacity_ratio(a: RerunInterval | None, b: RerunInterval | None) -> Ratio | None:
    """``a / b`` judged by the two rerun intervals (see the module docstring); None when either capacity lacks its
    interval. Two intervals at different confidences are combined at the lower one."""
    if a is None or b is None or not (_whole(a) and _whole(b)):
        return None
    confidence = min(a.confidence, b.confidence)
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    sd = math.hypot(_half_width(a) / NormalDist().inv_cdf((1 + a.confidence) / 2),
                    _half_width(b) / NormalDist().inv_cdf((1 + b.confidence) / 2))
    est = a.estimate / b.estimate
    return Ratio(est, est * math.exp(-z * sd), est * math.exp(z * sd), confidence, overlapping(a, b))


def ratio_text(a: RerunInterval | None, b: RerunInterval | None) -> str:
    """The ratio ``a / b`` in words (:meth:`Ratio.text`); without both intervals, that no ratio is said."""
    r = capacity_ratio(a, b)
    return r.text() if r is not None else "no ratio: a capacity without its interval"
