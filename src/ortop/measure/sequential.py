"""Stopping a comparison once it is decided, without letting the repeated looks raise its error rate.

Why not just look after every pair
    A comparison that checks its 95 % interval after every new pair and stops at the first verdict gets a 5 %
    chance of a wrong claim at every look, and the looks add up: on the simulated A/A comparisons of the tests
    (42 pairs, looks at 8, 12, 16, 24 and 32 pairs and at the end, no margin) about 16 % claim a difference, not 5 %;
    looked at after every single pair a null comparison wanders out of any fixed-level interval sooner or later. So
    the comparison may only stop at looks fixed in advance, each taken at a stricter level.

The rule: a fixed schedule of looks, α spent by a Bonferroni split (``Looks``)
    * Looks come after 8, 12, 16, 24, 32, 48, 64, … pairs (``look_pairs``: doubling, with a point half-way), and
      one more, the last, when the budget is spent. A decision waits at most about half again as long as it had
      to, and the looks stay few enough for each to keep a usable share of α.
    * Look k (from 0) takes its interval at level 1 − α_k with α_k = α/5 · 2^−k: 1 %, 0.5 %, 0.25 %, … The
      looks before the last spend less than 2α/5 however long the budget is; the last spends what is left (at
      least 3 %: on a 20 s budget its interval is at 96.9 % instead of 95 %, about 10 % wider). A look passed
      over (more pairs arrived at once than the next look needed) counts as spent.
    * Union bound: the chance that any of the intervals misses the true change is at most Σα_k ≤ α, whatever the
      dependence between looks (they share their pairs, so they are strongly dependent; the bound ignores that
      and is conservative for it). So the interval at whichever look the comparison stops covers the true change
      with at least 95 %, and both errors it can make are held: a false "faster/slower" and a false "no
      difference" each need the interval to miss the truth. The interval reported is the one of the look the
      rule stopped at (or of the last look), never a fresh, narrower 95 % one on the same pairs; it is labelled
      "95 % CI" because that is its coverage under the rule, and ``Comparison.look_confidence`` gives the look's
      own level.
    * The interval at each look is the exact signed-rank interval of :mod:`ortop.measure.compare`, at the look's
      level: the exact null distribution makes the order statistics for a small α exact too.

Why the first look at 8 pairs, not 6
    At n pairs the smallest two-sided p-value of the signed-rank statistic is 2 / 2^n: 3.1 % at 6 pairs, so a look
    there would have to spend well over half of α and leave every later look weaker. At 8 pairs it is 0.78 %,
    under the first look's 1 %: its interval is then the range of the Walsh averages (the smallest to the largest
    pair's ratio), which clears the margin for any effect all of whose pairs agree — one intra-op thread against
    two is decided there, about 8 pairs of 0.35 s blocks: under 6 s.

Why the split halves
    A large effect is decided at the first look that can decide it, and needs little α there. A small one, and a
    "no difference", need many pairs: what matters for them is that the last look keeps most of α. Halving
    spends the early looks' α where the large effects are, and caps what they take from the last one. Simulated
    (``tests/test_compare_stats.py``): 2000 A/A comparisons of 42 pairs with no margin claim a difference in
    in 4.7 % with the rule and in 16 % looking at the plain 95 % interval at the same looks.

Alternatives not taken
    Anytime-valid confidence sequences (valid after every pair) need a bound on the ratios' tails or variance
    that the rank interval does not, and at tens of pairs they are wider than a Bonferroni split over a handful of
    looks. Group-sequential boundaries computed from the looks' joint distribution (Pocock, O'Brien–Fleming)
    waste less α, but assume normal increments; the union bound assumes nothing.

Several comparisons (three profiles or more) stop together: a look is due when the fewest pairs any of them has
reached the next look's count, and the comparison stops when every verdict on the objective metric is settled at
that same look. The other metrics are reported at the same look's level: they ride on the same union bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortop.measure.compare import DECIDED, MARGIN_PCT, Block, Comparison, Judgement, compare, judge, usable_pairs

FIRST_LOOK = 8      # pairs: the first look whose share of α allows an interval (see the module docstring)
FIRST_SHARE = 0.2   # the first look spends α/5; each later look half of the one before


def look_pairs(k: int) -> int:
    """The pairs at look ``k`` (from 0): 8, 12, 16, 24, 32, 48, 64, …"""
    return FIRST_LOOK * 2 ** (k // 2) * (3 if k % 2 else 2) // 2


def look_alpha(k: int, alpha: float = 0.05) -> float:
    """The share of ``alpha`` look ``k`` spends: α/5 · 2^−k."""
    return alpha * FIRST_SHARE * 0.5 ** k


@dataclass
class Looks:
    """The looks one comparison run has taken, and the level each next one is taken at.

    ``corrected=False`` takes the plain ``confidence`` at every look: what looking without a correction would
    claim, for contrast in the tests, never for a verdict.
    """

    confidence: float = 0.95
    corrected: bool = True
    taken: int = 0
    start: int = 0  # the schedule's looks already behind this run's pairs (a continued comparison, :func:`resumed`)

    @property
    def alpha(self) -> float:
        return 1 - self.confidence

    def due(self, pairs: int) -> float | None:
        """The level of the look due with ``pairs`` pairs (and it is taken); None when no new look is due.

        When ``pairs`` passed several looks at once only the newest is taken; those passed over count as spent.
        """
        k = self.start + self.taken
        while look_pairs(k) <= pairs:
            k += 1
        if k == self.start + self.taken:
            return None
        self.taken = k - self.start
        return 1 - look_alpha(self.taken - 1, self.alpha) if self.corrected else self.confidence

    def spent(self) -> float:
        """The α the looks taken so far have spent."""
        return sum(look_alpha(k, self.alpha) for k in range(self.taken)) if self.corrected else 0.0

    def last(self) -> float:
        """The level of the last look, when the budget is spent: what is left of α."""
        return 1 - (self.alpha - self.spent()) if self.corrected else self.confidence


RESUME_SHARE = 0.5  # a comparison resumed for the j-th time (from 0) spends α · RESUME_SHARE^(j+1)


def resumed(pairs_before: int, times: int, confidence: float = 0.95) -> Looks:
    """The looks of a comparison taken up again on the pairs it already has (the live view's ``v`` pressed again
    for the same two rows), for the ``times``-th time (0: its first run).

    Each run of it spends its own share of α, half of what is left (2.5 %, 1.25 %, … of a 5 % α), with the usual
    looks inside that share: the union bound then holds over every interval any run reports, however often it is
    taken up again, and each run's pairs add to the ones before instead of starting over. Its looks continue the
    schedule: the first is due at the first scheduled count above ``pairs_before``."""
    alpha = (1 - confidence) * RESUME_SHARE ** (times + 1)
    start = 0
    while look_pairs(start) <= pairs_before:
        start += 1
    return Looks(confidence=1 - alpha, start=start)


def look(blocks: Sequence[Block], n_configs: int, metric: str, looks: Looks,
         **kw: Any) -> tuple[float, list[Comparison]] | None:
    """After a round of blocks: the level of the look now due and each other configuration against configuration 0
    on ``metric`` at that level, or None when no look is due. ``kw`` goes to :func:`ortop.measure.compare.compare`.
    """
    fewest = min(len(usable_pairs(blocks, 0, other, metric)) for other in range(1, n_configs))
    level = looks.due(fewest)
    if level is None:
        return None
    return level, [compare(blocks, 0, other, metric, level=level, **kw) for other in range(1, n_configs)]


def settled(comparisons: Sequence[Comparison]) -> bool:
    """Every verdict is faster, slower or no difference: nothing left to measure for."""
    return bool(comparisons) and all(c.verdict in DECIDED for c in comparisons)


@dataclass(frozen=True)
class Outcome:
    """Where the rule ended over a stream of pairs."""

    judgement: Judgement
    pairs: int            # pairs it used
    early: bool           # stopped at a look before the last
    level: float          # the level of the look it ended at


def run_on_ratios(d: np.ndarray, *, margin_pct: float = MARGIN_PCT, higher_is_better: bool = False,
                  looks: Looks | None = None) -> Outcome:
    """The rule over per-pair log ratios arriving one pair at a time, ``d`` holding every pair the budget allows:
    what the interleaving does with blocks, on bare numbers, for simulations."""
    looks = looks or Looks()
    for n in range(1, d.size + 1):
        level = looks.due(n)
        if level is not None:
            j = judge(d[:n], level, margin_pct, higher_is_better)
            if j.verdict in DECIDED:
                return Outcome(j, n, n < d.size, level)
    level = looks.last()
    return Outcome(judge(d, level, margin_pct, higher_is_better), int(d.size), False, level)
