"""Every block-length policy in one place: how long the blocks of an interleaving are, and their settling.

``plan_blocks`` sizes a comparison's blocks (compare, verify, variants, the doctor) for a model's latency and a
budget, ``period_ms`` gives a paced workload's period, ``verify_seconds`` a verification's length; ``race_blocks``
a tuning race's (shorter, so that many candidates fit); ``capacity_blocks`` and ``CEILING_BLOCKS`` a capacity
search's points and closed-loop ceilings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

BLOCK_S = 0.3          # a block's recorded length: short enough to follow drift, long enough for many runs
MIN_BLOCK_RUNS = 5     # ... but never fewer runs than this
SETTLE_S = 0.05        # unrecorded runs at a block's start: the other session's pool may still be spinning
SETTLE_RUNS = 3
BUDGET_MIN_BLOCKS = 24  # a budget this short shrinks blocks so that this many fit (12 pairs of two configurations)


def plan_blocks(latency_ms: float, budget_s: float | None = None, n_configs: int = 2,
                period_ms: float = 0.0) -> tuple[float, float]:
    """(block_s, settle_s) for a model whose runs take about ``latency_ms``, called every ``period_ms`` when paced.

    About BLOCK_S per block, at least MIN_BLOCK_RUNS runs (at a paced rate, runs come one per period, so a block
    spans at least MIN_BLOCK_RUNS periods); a short budget shrinks blocks so BUDGET_MIN_BLOCKS fit (per two
    configurations) but never below MIN_BLOCK_RUNS runs. Settle: SETTLE_S or SETTLE_RUNS runs, the longer (the
    settle waits out the other session's spinning pool, a matter of run time, not of the pace).
    """
    run_s = latency_ms / 1e3 if math.isfinite(latency_ms) and latency_ms > 0 else 0.001
    per_run_s = max(run_s, period_ms / 1e3 if math.isfinite(period_ms) and period_ms > 0 else 0.0)
    block = BLOCK_S
    if budget_s is not None and budget_s > 0:
        settle_guess = max(SETTLE_S, SETTLE_RUNS * run_s)
        fit = budget_s / (BUDGET_MIN_BLOCKS * max(2, n_configs) / 2) - settle_guess
        block = min(block, max(fit, 0.05))
    block = max(block, MIN_BLOCK_RUNS * per_run_s)
    settle = max(SETTLE_S, SETTLE_RUNS * run_s)
    return block, settle


def period_ms(profiles: Sequence[Any]) -> float:
    """The longest pacing period of ``profiles`` (ms between one caller's runs; 0 for closed loops)."""
    out = 0.0
    for p in profiles:
        w = p.workload
        if w.rate_hz > 0:
            out = max(out, 1e3 * w.concurrency / w.rate_hz)
    return out


VERIFY_PAIRS = 8  # a verification plans for this many pairs: a few more than the rank interval's minimum of six


def verify_seconds(latency_ms: float, period: float, base_s: float = 6.0) -> float:
    """How long a live verification measures: ``base_s``, or longer when blocks are long (a slow or paced model)
    so that about VERIFY_PAIRS pairs fit."""
    block, _ = plan_blocks(latency_ms, None, 2, period)
    # the comparison estimates a paced run's time from its pace, so its settle can be SETTLE_RUNS periods: plan
    # for that, the longer case
    per_run_s = max(latency_ms if math.isfinite(latency_ms) else 0.0, period) / 1e3
    settle = max(SETTLE_S, SETTLE_RUNS * per_run_s)
    return max(base_s, 2 * VERIFY_PAIRS * (block + settle))


# ---- a tuning race ----------------------------------------------------------------------------------------------
BLOCK_TARGET_S = 0.15   # blocks of a tuning run: shorter than a comparison's, so that many candidates fit


def block_target_for(budget_s: float) -> float:
    """A race's block length for a tuning budget: about 1/400 of it, between 0.05 and 0.3 s."""
    return min(0.3, max(0.05, budget_s / 400))


def race_blocks(run_s: float, target_s: float = BLOCK_TARGET_S) -> tuple[float, float]:
    """(block_s, settle_s) of a race whose slowest run (or pacing period) takes ``run_s``: the target, but at
    least MIN_BLOCK_RUNS runs; settle SETTLE_S or SETTLE_RUNS runs, the longer."""
    return max(target_s, MIN_BLOCK_RUNS * run_s), max(SETTLE_S, SETTLE_RUNS * run_s)


# ---- a capacity search ------------------------------------------------------------------------------------------
CEILING_BLOCKS = (2, 0.5, 0.2)  # the closed-loop ceilings: rounds, block_s, settle_s


def capacity_blocks(rate: float) -> tuple[float, float]:
    """A capacity point's block and the settling before it (s): ~300 requests a block, 0.5 … 1.5 s; the queue let
    reach its working level for 0.2 … 0.6 s first."""
    return max(0.5, min(1.5, 300.0 / rate)), max(0.2, min(0.6, 50.0 / rate))


def capacity_round_s(rate: float, profiles: int) -> float:
    """One round of a point at ``rate``: a block (with its settling) per profile."""
    return sum(capacity_blocks(rate)) * profiles
