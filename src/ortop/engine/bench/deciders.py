"""The stop rules an interleaving consults after each round of blocks: when to end, and what the result keeps.

* :class:`Budget`: the time a measuring may take, and the stop flag (ctrl-C, a screen closed);
* :class:`Looks`: compare's and the live verification's sequential rule: after each complete round the look due
  by :mod:`ortop.measure.sequential` is taken, and once every verdict on its metric is settled the measuring ends,
  keeping the blocks and the level of that look;
* :class:`GateLooks`: the same looks for ``compare --fail-if``: the measuring ends at the first look whose intervals
  decide the gates (:mod:`ortop.measure.gate`) — every gate passes, or one fails;
* :class:`PointRule`: a capacity point's: measure a point until its decision is made (and the search has seen
  enough of the host to believe a "met"), or its own time or the search's budget is spent.

The statistics themselves live in :mod:`ortop.measure` and :mod:`ortop.engine.answers.capacity`; these only say when to
stop asking them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ortop.measure import gate as G
from ortop.measure import sequential
from ortop.measure.compare import Block, Comparison, compare, usable_pairs


class Budget:
    """``budget_s`` of measuring from :meth:`start`; spent early when ``stop`` is set."""

    def __init__(self, budget_s: float, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.budget_s = budget_s
        self.stop = stop or threading.Event()
        self.clock = clock
        self._t0: float | None = None

    def start(self) -> None:
        self._t0 = self.clock()

    def elapsed(self) -> float:
        return 0.0 if self._t0 is None else self.clock() - self._t0

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def spent(self, ahead_s: float = 0.0) -> bool:
        """Stopped, or ``ahead_s`` more would take the measuring past the budget."""
        return self.stop.is_set() or self.elapsed() + ahead_s >= self.budget_s


@dataclass(frozen=True)
class Decision:
    """Where a sequential rule ended: the blocks it used (those with seq below), the look's level, and when."""

    blocks: int
    level: float
    elapsed_s: float


class _Rule:
    """A sequential rule over ``n_configs`` configurations: after each complete round the look due is taken
    (:meth:`_decides`), and the first look that decides ends the measuring."""

    def __init__(self, n_configs: int, looks: sequential.Looks | None = None):
        self.n = n_configs
        self.looks = looks or sequential.Looks()
        self.decision: Decision | None = None
        self._rounds_seen = 0

    def after(self, blocks: Sequence[Block], elapsed_s: float) -> bool:
        """Whenever blocks may have come in: take the look due after the rounds complete so far, if one is; True
        once a look decided (the decision is then kept)."""
        if self.decision is not None:
            return True
        rounds = len(blocks) // self.n
        if rounds <= self._rounds_seen:
            return False
        self._rounds_seen = rounds
        level = self._decides([b for b in blocks if b.seq < rounds * self.n], elapsed_s)
        if level is None:
            return False
        self.decision = Decision(rounds * self.n, level, elapsed_s)
        return True

    def _decides(self, used: Sequence[Block], elapsed_s: float) -> float | None:
        """The look due over the whole rounds ``used``, if one is: its level when it decides, else None."""
        raise NotImplementedError

    def level(self) -> float | None:
        """The level every interval of the result is taken at: the deciding look's, or the last look's."""
        return self.decision.level if self.decision is not None else self.looks.last()

    def settled(self, comparisons: Sequence[Comparison]) -> bool:
        """Whether the result's comparisons (at the last look, the budget spent) settle what this rule waits for."""
        raise NotImplementedError


class Looks(_Rule):
    """The sequential rule on ``metric`` over ``n_configs`` configurations (each against the first): a look
    decides once it settled every verdict on the metric."""

    def __init__(self, metric: str, n_configs: int, looks: sequential.Looks | None = None):
        super().__init__(n_configs, looks)
        self.metric = metric

    def _decides(self, used: Sequence[Block], elapsed_s: float) -> float | None:
        taken = sequential.look(used, self.n, self.metric, self.looks)
        return taken[0] if taken is not None and sequential.settled(taken[1]) else None

    def settled(self, comparisons: Sequence[Comparison]) -> bool:
        return sequential.settled([c for c in comparisons if c.metric == self.metric])


@dataclass(frozen=True)
class GateLook:
    """One look of :class:`GateLooks`: its pairs (the fewest of any gate's metric), level, and each gate judged."""

    pairs: int
    level: float
    elapsed_s: float
    results: tuple[G.GateResult, ...]

    @property
    def result(self) -> G.Result:
        return G.overall([r.result for r in self.results])

    def as_dict(self) -> dict:
        return {"pairs": self.pairs, "level": round(self.level, 6), "elapsed_s": round(self.elapsed_s, 3),
                "gate_result": self.result, "results": [r.result for r in self.results]}


class GateLooks(_Rule):
    """The sequential rule on CI gates over two configurations (BASE, NEW): the looks of
    :mod:`ortop.measure.sequential` at the fewest pairs any gate's metric has, each gate judged on its metric's
    interval at that look's level, and the measuring ends at the first look where the gates are decided — every
    one passes, or one fails (a failed gate fails the build whatever the others would become).

    The intervals judged are the ones the look computes, at the look's stricter level: the α the looks spend is what
    keeps a repeated look honest, so nothing is judged on a fresh, narrower interval. The result the interleaving
    returns is then computed on the same blocks at the same level, so the gates judged on it are the look's.
    """

    def __init__(self, gates: Sequence[G.Gate], n_configs: int = 2):
        if n_configs != 2:
            raise ValueError("gates judge exactly two configurations: BASE and NEW")
        if not gates:
            raise ValueError("no gates to decide")
        super().__init__(n_configs)
        self.gates = tuple(gates)
        self.metrics = tuple(dict.fromkeys(g.metric for g in self.gates))
        self.taken: list[GateLook] = []

    def judge(self, comparisons: Sequence[Comparison]) -> tuple[G.GateResult, ...]:
        """Each gate on its metric's comparison of NEW against BASE (undecided where there is none)."""
        return G.evaluate_all(self.gates, [c for c in comparisons if c.other == 1])

    def _decides(self, used: Sequence[Block], elapsed_s: float) -> float | None:
        fewest = min(len(usable_pairs(used, 0, 1, m)) for m in self.metrics)
        level = self.looks.due(fewest)
        if level is None:
            return None
        look = GateLook(fewest, level, elapsed_s, self.judge([compare(used, 0, 1, m, level=level)
                                                                for m in self.metrics]))
        self.taken.append(look)
        return None if look.result == "undecided" else level

    def settled(self, comparisons: Sequence[Comparison]) -> bool:
        """Whether the result's comparisons (at the last look, the budget spent) decide the gates."""
        return G.overall([r.result for r in self.judge(comparisons)]) != "undecided"


class PointRule:
    """When a capacity point's measuring ends: ``t_end`` (its own time), the search's budget, or its decision.

    A "met" is believed only once the search has recorded ``min_recorded_s`` of the host (its stalls come in
    clumps: a point met from a couple of seconds had mostly seen none of them)."""

    def __init__(self, t_end: float, budget: Budget, min_recorded_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self.t_end = t_end
        self.budget = budget
        self.min_recorded_s = min_recorded_s
        self.clock = clock

    def final(self) -> bool:
        """The point's time or the search's budget is spent: this look is its last."""
        return self.clock() >= self.t_end or self.budget.left() <= 0

    def done(self, decision: str, recorded_s: float, final: bool) -> bool:
        """Whether a search's point needs no more blocks after a look that gave ``decision``."""
        short = decision == "met" and recorded_s < self.min_recorded_s  # too little of the host seen
        return final or (decision != "undecided" and not short)

    def rounds_next(self, per_round_s: float) -> int:
        """How many rounds the next measuring of the point takes (0: none fits in the budget): up to two, as many
        as fit before the point's own end, at least one."""
        in_budget = int(self.budget.left() / per_round_s)
        if in_budget < 1:
            return 0
        return min(in_budget, max(1, min(2, int((self.t_end - self.clock()) / per_round_s))))
