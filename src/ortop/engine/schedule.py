"""Who runs now: data the monitor turns into worker commands.

``Live(id)`` runs one configuration continuously; ``Alternate(ids, block_s, settle_s)`` interleaves several in
blocks (the A/B comparison); ``Trials`` runs configurations one after another for set times (a tuner's plan).
``plan_blocks`` sizes blocks for a model's latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ortop.runtime import protocol as P

BLOCK_S = 0.3          # a block's recorded length: short enough to follow drift, long enough for many runs
MIN_BLOCK_RUNS = 5     # ... but never fewer runs than this
SETTLE_S = 0.05        # unrecorded runs at a block's start: the other session's pool may still be spinning
SETTLE_RUNS = 3
MIN_BLOCKS = 24        # a budget this short shrinks blocks so that this many fit (12 pairs of two configurations)


@dataclass(frozen=True)
class Live:
    config_id: int

    def messages(self) -> list:
        return [P.RunLive(self.config_id)]


@dataclass(frozen=True)
class Alternate:
    config_ids: tuple[int, ...]
    block_s: float = BLOCK_S
    settle_s: float = SETTLE_S
    rounds: int | None = None

    def messages(self) -> list:
        return [P.Alternate(tuple(self.config_ids), self.block_s, self.settle_s, self.rounds)]


@dataclass(frozen=True)
class Trial:
    config_id: int
    seconds: float


@dataclass(frozen=True)
class Trials:
    """Configurations run live one after another, each for its seconds (the monitor steps through them)."""

    trials: tuple[Trial, ...]

    def messages(self) -> list:
        return [P.RunLive(self.trials[0].config_id)] if self.trials else []


Schedule = Live | Alternate | Trials


def plan_blocks(latency_ms: float, budget_s: float | None = None, n_configs: int = 2) -> tuple[float, float]:
    """(block_s, settle_s) for a model whose runs take about ``latency_ms``.

    About BLOCK_S per block, at least MIN_BLOCK_RUNS runs; a short budget shrinks blocks so MIN_BLOCKS fit (per
    two configurations) but never below MIN_BLOCK_RUNS runs. Settle: SETTLE_S or SETTLE_RUNS runs, the longer.
    """
    run_s = latency_ms / 1e3 if math.isfinite(latency_ms) and latency_ms > 0 else 0.001
    block = BLOCK_S
    if budget_s is not None and budget_s > 0:
        settle_guess = max(SETTLE_S, SETTLE_RUNS * run_s)
        fit = budget_s / (MIN_BLOCKS * max(2, n_configs) / 2) - settle_guess
        block = min(block, max(fit, 0.05))
    block = max(block, MIN_BLOCK_RUNS * run_s)
    settle = max(SETTLE_S, SETTLE_RUNS * run_s)
    return block, settle
