"""Honest A-versus-B verdicts from interleaved blocks of runs: pure functions over numbers, numpy only.

Why blocks, and why pairs
    A shared host drifts 10–20 % over tens of seconds, and two back-to-back runs of the same session differ by
    ±10 %. Measuring A for ten seconds and then B for ten seconds reports that drift as an
    effect, with a narrow interval, because it treats thousands of runs as independent when they all share one
    host state. So configurations run alternately in short blocks (``schedule``), and each block is compared only
    with its neighbour of the other configuration (``pairs``): the per-pair log ratio ``log(other / baseline)``
    cancels any multiplicative host slowdown the two neighbouring blocks share, and the spread of those ratios
    across pairs is an honest measure of what remains. The unit of evidence is the pair, never the run.

Why ABBA, and why drawn at random (``schedule``)
    Within a pair one block runs first. If the first block always belonged to A, a steady drift would add the
    same bias to every pair and never cancel. A B B A … alternates who goes first, so a linear drift adds
    +d to one pair and −d to the next: it cancels in the centre and only widens the interval. The order also
    gives each configuration as many blocks that follow itself as blocks that follow the other (warm caches, a
    thread pool still spinning from the previous block), so carry-over effects are balanced too. For more than
    two configurations each round visits every configuration once; rounds come in mirrored pairs (0 1 2, 2 1 0)
    so every configuration's mean position in time is the same within each pair of rounds.
    A fixed order has one weakness: a load that comes and goes in step with the blocks. Two comparisons of the
    same budget on one host plan the same block lengths, so one's A B B A can keep in step with the other's, and
    the other's busier configuration then always lands on the same one of ours: an A/A comparison run beside
    another one was seen to claim "+34 %, 95 % CI +6…+61 %". So each alternation draws each round's order at
    random (A B or B A), and no outside rhythm can side with one configuration. Each round, not each pair of
    rounds: a rhythm of four blocks would give both pairs of an A B B A the same sign, and the signed-rank
    interval, which takes its pairs as independent, would be too narrow (78 of 100 seeds covered zero in the
    test's simulation, against 95 with a draw per round). A drift then enters each pair with a random sign instead
    of an alternating one: still no bias, only noise, which the interval counts; the carry-over balance and the
    equal mean positions hold on average rather than exactly.

The interval: Hodges–Lehmann estimate with the exact Wilcoxon signed-rank interval
    The point estimate of the change is the Hodges–Lehmann estimate (the median of the Walsh averages
    ``(d_i + d_j) / 2``, i ≤ j) of the per-pair log ratios ``d``; the confidence interval is the matching
    distribution-free signed-rank interval, with critical values from the exact null distribution up to
    ``_EXACT_MAX`` pairs (a normal approximation with continuity correction above). Why this one:

    * It is exact at small n. The interval is never narrower than the data allow: below 6 pairs no 95 %
      signed-rank interval exists at all (the smallest two-sided p-value is 2 / 2^n), so a 5-pair comparison
      simply stays undecided. A bootstrap over 5 pairs would report a narrow, over-confident interval.
    * It is robust. Block values carry hiccups (a page fault storm, a noisy neighbour's burst, a GC in the host
      process) that make one pair's ratio wild. A t-interval widens and shifts with every such pair; the rank
      interval barely moves, and it keeps about 95 % of the t-interval's efficiency when the ratios are normal.
    * Its one assumption, ratios symmetric about the effect, is what the ABBA order provides: drift enters pairs
      with alternating signs, and host noise hits either block of a pair alike.

    Discreteness makes the exact interval slightly conservative (coverage at or just above nominal); on the
    simulated drifting host of the tests (+20 % linear drift, AR(1) wander, hiccup blocks, 33 pairs) it covers
    the true change in about 95 % of seeds, and covers zero in about 95 % of A/A seeds. Above
    ``_WALSH_MAX`` pairs (20 minutes of 0.3 s blocks) the Walsh averages would be too many,
    and the interval falls back to the mean ± z · s / √n, where the normal approximation is excellent.

The margin: 2 % (``MARGIN_PCT``)
    "Faster"/"slower" needs the whole interval beyond ±margin on one side; "no difference" needs it wholly inside
    ±margin; anything else is "undecided". A margin of zero would make the verdict purely statistical, and the
    A/A target (the same configuration against itself, ten 20 s runs, at most one claims a difference in p50 or
    throughput) would then be missed: two metrics at 5 % each already use most of one-in-ten by chance alone,
    and two sessions of one configuration are not identical — separate memory placement, thread pools and code
    alignment can differ systematically by a percent or two, which no interleaving removes and no amount of
    measuring makes go away. 2 % covers that, and makes a chance claim need the interval to miss zero by 2 % as well. It
    also leaves "no difference" within reach of a normal run: with ±10 % run-to-run noise and ~100 runs a block,
    block medians carry a couple of percent of noise, and the ~30 pairs of a 20 s comparison bring the interval's
    half-width to the order of 1–2 %. And it sits far below the effects ortop exists to show (thread counts,
    spinning, execution providers: tens of percent, or several-fold on CPU per run). On a shared VM a difference
    under 2 % is not one to act on. Callers wanting the purely statistical verdict pass ``margin_pct=0``.

How long until it decides (``seconds_more``)
    An undecided comparison estimates how long it needs: the interval's width shrinks as 1/√n, so the pairs
    needed to bring its side facing the margin (length h) down to the distance h* between the estimate and the
    margin are ``n · (h / h*)²``, and pairs arrive at ``elapsed / n`` seconds each. It assumes the estimate stays
    where it is, so it is an "about": on simulated data the estimated time decides roughly three times in four.
    When the estimate sits on the margin no amount of time decides it, so the answer is capped at
    ``SECONDS_MORE_CAP``.

Pooling neighbouring pairs (``pooled_pairs``)
    A block's p99 is a percentile of its own runs: a block of three runs has none, only its slowest run under
    another name. Where a metric needs more runs than a block holds (:func:`ortop.measure.stats.runs_needed`: 100
    for a p99), consecutive pairs are pooled whole — the baseline's blocks of pairs k … k+m against the other's
    blocks of the same pairs — until each side holds enough runs, and the pooled pairs go through the same
    interval. The CI gates judge on them (:mod:`ortop.measure.gate`).

Stopping once decided (:mod:`ortop.measure.sequential`)
    ``ortop compare`` and the live view's verification stop as soon as every verdict on their metric is settled.
    They may only stop at looks fixed in advance, each at a stricter level (``compare(level=…)``), so that the
    interval they report keeps its 95 % coverage however early they stop; ``Comparison.look_confidence`` names
    the look's own level.

A percentile is judged only on blocks that hold it
    :func:`compare` itself pools where blocks are too short for the metric (a block's p99 of six runs is its
    slowest run; two sessions' slowest runs differ by chance and by which block follows a switch, and on an A/A
    they read tens of percent apart with a narrow interval). Pooled pairs too few for an interval leave the
    comparison undecided, which is what the data can say; the gates judge on the same pairs.

Over ~600 lines because of this docstring: the method's justification lives with the code it justifies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Any

import numpy as np

from ortop.measure.stats import QUANTILE, LatencyStats, json_num, latency_stats, runs_needed
from ortop.present import figures_alike, pct_decimals, signed_pct

METRICS = ("p50", "p99", "throughput", "cpu")  # cpu = CPU ms per run; lower is better for all but throughput
HIGHER_IS_BETTER = frozenset({"throughput"})
MARGIN_PCT = 2.0          # see the module docstring
MIN_PAIRS = 6             # fewer pairs are undecided: no 95 % signed-rank interval exists below 6
SECONDS_MORE_CAP = 300.0  # an estimate sitting on the margin would need forever; say "about 5 minutes" at most

_EXACT_MAX = 300   # exact signed-rank null distribution up to this many pairs, normal approximation above
_WALSH_MAX = 2000  # above this many pairs, a z-interval on the mean instead of the n(n+1)/2 Walsh averages

_FIELD = {"p50": "p50_ms", "p99": "p99_ms", "throughput": "throughput_per_s", "cpu": "cpu_ms_per_run"}
_LABEL = {"p50": ("p50", " ms"), "p99": ("p99", " ms"), "throughput": ("runs/s", ""), "cpu": ("CPU/run", " ms")}


def _check_metric(metric: str) -> None:
    if metric not in _FIELD:
        raise ValueError(f"unknown metric {metric!r}: expected one of {', '.join(METRICS)}")


@dataclass(frozen=True)
class Block:
    """One block of consecutive runs of one configuration."""

    config: int              # index of the configuration in the comparison (0 = baseline)
    seq: int                 # position of the block in the schedule (0, 1, 2, …)
    t_start: float           # seconds (any monotonic origin)
    t_end: float
    runs: int
    p50_ms: float
    p99_ms: float
    throughput_per_s: float  # runs / block wall time
    cpu_ms_per_run: float    # process CPU during the block / runs (nan when unknown)
    cpu_ms_between_per_s: float = math.nan  # CPU burned between runs per second (spin), nan when n/a
    latency_ms: np.ndarray | None = field(default=None, compare=False, repr=False)  # its runs (block_from_runs)
    arrived: int = -1        # open arrivals: requests that arrived in its window (-1: a closed loop, or not counted)
    shed: int = 0            # ... and those shed
    window_s: float = math.nan  # its arrival window (its wall time runs on to its last response)

    def value(self, metric: str) -> float:
        """The block's figure for one of ``METRICS``."""
        _check_metric(metric)
        return float(getattr(self, _FIELD[metric]))


def block_from_runs(config: int, seq: int, latency_ms: np.ndarray, *, t_start: float, t_end: float,
                    cpu_ms: float, cpu_between_ms: float = math.nan, arrived: int = -1, shed: int = 0,
                    window_s: float = math.nan) -> Block:
    """Summarise one block's runs. ``cpu_ms`` is the process CPU over the whole block (ms); throughput is runs
    over the block's wall time; ``cpu_between_ms`` (CPU spent between runs, e.g. spinning) becomes ms per s."""
    lat = np.asarray(latency_ms, dtype=np.float64)
    st = latency_stats(lat)
    runs = int(lat.size)
    wall = float(t_end) - float(t_start)
    throughput = runs / wall if wall > 0 else math.nan
    cpu_per_run = float(cpu_ms) / runs if runs > 0 else math.nan
    between = float(cpu_between_ms) / wall if wall > 0 else math.nan
    return Block(config, seq, float(t_start), float(t_end), runs, st.p50, st.p99, throughput, cpu_per_run, between,
                 lat, int(arrived), int(shed), float(window_s))


def pooled(blocks: Sequence[Block]) -> LatencyStats:
    """A configuration's percentiles over its blocks: every run of every block pooled, so a block counts by its
    runs. The one definition ``compare``, ``tune`` and the bench's figures share (the median of the blocks' own p50
    differs from it whenever blocks differ in length or shape). Blocks that carry no runs (summaries made
    elsewhere) fall back to the median of their own percentiles, the only figure they hold."""
    runs = [b.latency_ms for b in blocks if b.latency_ms is not None]
    if runs:
        return latency_stats(np.concatenate(runs))
    p50 = [b.p50_ms for b in blocks if math.isfinite(b.p50_ms)]
    p99 = [b.p99_ms for b in blocks if math.isfinite(b.p99_ms)]
    if not p50:
        return LatencyStats()
    return LatencyStats(sum(b.runs for b in blocks), math.nan, float(np.median(p50)), math.nan, math.nan,
                        float(np.median(p99)) if p99 else math.nan)


def schedule(n_configs: int, n_rounds: int, seed: int | None = None) -> list[int]:
    """The order of blocks: ``n_rounds`` rounds, each visiting every configuration once.

    ``seed=None``: the fixed order. Two configurations: A B, B A, A B, B A, … (A B B A A B B A). More: mirrored pairs
    of rounds whose starting configuration rotates, e.g. 0 1 2 2 1 0 1 2 0 0 2 1 …. With a ``seed`` each round's
    order is drawn at random, the rounds in turn from one stream, so a longer schedule of the same seed starts with
    the shorter one. See the module docstring for why.
    """
    if n_configs < 1 or n_rounds < 0:
        raise ValueError("schedule needs at least one configuration and a non-negative number of rounds")
    if seed is not None:  # a row of uniforms per round, drawn in order (so a prefix is the shorter schedule's)
        draws = np.random.default_rng(seed).random((n_rounds, n_configs))
        return [int(k) for k in np.argsort(draws, axis=1, kind="stable").ravel()]
    out: list[int] = []
    for r in range(n_rounds):
        shift = (r // 2) % n_configs if n_configs > 2 else 0
        order = [(shift + k) % n_configs for k in range(n_configs)]
        out.extend(reversed(order) if r % 2 else order)
    return out


def order_seed() -> int:
    """A fresh seed for :func:`schedule`: each alternation draws its own order."""
    return int(np.random.SeedSequence().generate_state(1)[0])


def pairs(blocks: Sequence[Block], baseline: int, other: int) -> list[tuple[Block, Block]]:
    """Neighbouring blocks of the two configurations, as (baseline block, other block), in schedule order.

    Blocks of the two are walked in ``seq`` order (others' blocks in between are skipped); two successive ones of
    different configurations form a pair and are both used up, a block followed by one of its own configuration
    is left unpaired. With ABBA this pairs (A B) (B A) (A B) …, each pair as close in time as the schedule allows.
    """
    if baseline == other:
        raise ValueError("a configuration cannot be paired with itself")
    seq = sorted((b for b in blocks if b.config in (baseline, other)), key=lambda b: b.seq)
    out: list[tuple[Block, Block]] = []
    i = 0
    while i + 1 < len(seq):
        x, y = seq[i], seq[i + 1]
        if x.config != y.config:
            out.append((x, y) if x.config == baseline else (y, x))
            i += 2
        else:
            i += 1
    return out


# -- pooling neighbouring pairs: a percentile needs runs ------------------------------------------------------


def pool_groups(runs: Sequence[tuple[int, int]], need: int) -> list[range]:
    """Consecutive pairs grouped so that every group holds at least ``need`` runs of each configuration.

    ``runs[k]`` is pair k's (baseline runs, other runs), in schedule order. Greedy: a group closes as soon as both
    sides reach ``need``; the pairs after the last group that closes join it (too few for a group of their own).
    Every pair holding ``need`` on both sides is a group of its own (nothing pooled); ``[]`` when all the pairs
    together do not reach ``need`` on some side. A group pools pairs k … k+m whole: the baseline's blocks of those
    pairs against the other's blocks of the same pairs, so the pairing, and the drift it cancels, stays."""
    if need < 1:
        raise ValueError(f"need must be at least one run, got {need}")
    groups: list[range] = []
    start, a, b = 0, 0, 0
    for k, (ra, rb) in enumerate(runs):
        a, b = a + int(ra), b + int(rb)
        if a >= need and b >= need:
            groups.append(range(start, k + 1))
            start, a, b = k + 1, 0, 0
    if groups and start < len(runs):
        groups[-1] = range(groups[-1].start, len(runs))
    return groups


def merge_blocks(blocks: Sequence[Block], seq: int) -> Block:
    """One block of one configuration standing for ``blocks`` (which must carry their runs): the percentiles of
    every run pooled, throughput as runs over the blocks' own wall time (not the time between them), CPU per run
    weighted by runs. ``seq`` is its place in the pooled schedule."""
    if not blocks:
        raise ValueError("nothing to merge")
    if any(b.latency_ms is None for b in blocks) or len({b.config for b in blocks}) != 1:
        raise ValueError("blocks merge only with their runs, and only within one configuration")
    lat = np.concatenate([np.asarray(b.latency_ms, dtype=np.float64) for b in blocks])
    st = latency_stats(lat)
    runs = int(lat.size)
    wall = sum(b.t_end - b.t_start for b in blocks)
    cpu = [b for b in blocks if math.isfinite(b.cpu_ms_per_run) and b.runs > 0]
    cpu_per_run = sum(b.cpu_ms_per_run * b.runs for b in cpu) / sum(b.runs for b in cpu) if cpu else math.nan
    spin = [b for b in blocks if math.isfinite(b.cpu_ms_between_per_s) and b.t_end > b.t_start]
    between = (sum(b.cpu_ms_between_per_s * (b.t_end - b.t_start) for b in spin)
               / sum(b.t_end - b.t_start for b in spin)) if spin else math.nan
    counted = all(b.arrived >= 0 for b in blocks)
    return Block(blocks[0].config, seq, min(b.t_start for b in blocks), max(b.t_end for b in blocks), runs,
                 st.p50, st.p99, runs / wall if wall > 0 else math.nan, cpu_per_run, between, lat,
                 sum(b.arrived for b in blocks) if counted else -1, sum(b.shed for b in blocks),
                 sum(b.window_s for b in blocks))


def pooled_pairs(paired: Sequence[tuple[Block, Block]], need: int) -> list[tuple[Block, Block]]:
    """``paired`` (baseline block, other block) pooled by :func:`pool_groups` into pairs of merged blocks that hold
    ``need`` runs a side, in order (seq 2g for group g's baseline, 2g + 1 for its other); the pairs themselves when
    each already holds them. Raises ValueError when a block to pool carries no runs."""
    groups = pool_groups([(a.runs, b.runs) for a, b in paired], need)
    if all(len(g) == 1 for g in groups) and len(groups) == len(paired):
        return list(paired)
    return [(merge_blocks([paired[k][0] for k in g], 2 * i), merge_blocks([paired[k][1] for k in g], 2 * i + 1))
            for i, g in enumerate(groups)]


# -- the interval ---------------------------------------------------------------------------------------------


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


@lru_cache(maxsize=512)
def _signed_rank_k(n: int, confidence: float) -> int:
    """The largest k with P(T+ ≤ k − 1) ≤ α/2 under the signed-rank null, for n pairs; 0 when none exists.

    The interval is then the k-th smallest to the k-th largest Walsh average (1-based), with coverage
    1 − 2·P(T+ ≤ k − 1) ≥ confidence.
    """
    alpha_half = (1 - confidence) / 2
    m = n * (n + 1) // 2
    if n <= _EXACT_MAX:
        p = np.zeros(m + 1)
        p[0] = 1.0
        for r in range(1, n + 1):  # T+ = sum of the ranks whose sign is +, each in with probability 1/2
            shifted = np.zeros_like(p)
            shifted[r:] = p[: m + 1 - r]
            p = 0.5 * (p + shifted)
        cdf = np.cumsum(p)
        # P(T+ ≤ k − 1) ≤ α/2  ⇔  k − 1 ≤ the last index where the cdf is within α/2 (small tolerance for rounding)
        ok = np.flatnonzero(cdf <= alpha_half * (1 + 1e-9))
        return int(ok[-1]) + 1 if ok.size else 0
    mu = n * (n + 1) / 4
    sigma = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(0, int(math.floor(mu - _z(confidence) * sigma + 0.5)))


def _interval(d: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(estimate, low, high) of the centre of the log ratios ``d``; low/high are ∓inf when no interval exists."""
    n = d.size
    if n > _WALSH_MAX:
        mean, half = float(d.mean()), _z(confidence) * float(d.std(ddof=1)) / math.sqrt(n)
        return mean, mean - half, mean + half
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    est = float(np.median(walsh))
    k = _signed_rank_k(n, confidence)
    if k <= 0:
        return est, -math.inf, math.inf
    return est, float(walsh[k - 1]), float(walsh[walsh.size - k])


# -- the comparison -------------------------------------------------------------------------------------------


def _pct(log_ratio: float) -> float:
    if math.isnan(log_ratio):
        return math.nan
    return math.expm1(log_ratio) * 100 if math.isfinite(log_ratio) else (math.inf if log_ratio > 0 else -100.0)







@dataclass(frozen=True)
class Comparison:
    """How configuration ``other`` compares with ``baseline`` on one metric."""

    baseline: int
    other: int
    metric: str
    before: float        # the baseline's typical value: median over its paired blocks
    after: float         # the other's typical value
    change_pct: float    # Hodges–Lehmann estimate of the relative change other vs baseline, %
    ci_low_pct: float    # confidence interval of the change, % (nan when too few pairs)
    ci_high_pct: float
    significant: bool    # the interval excludes 0 by more than the margin
    verdict: str         # "faster" | "slower" | "no difference" | "undecided"
    pairs: int
    seconds_more: float | None  # when undecided: about how much more measuring would decide it; else None
    confidence: float = 0.95
    margin_pct: float = MARGIN_PCT
    look_confidence: float | None = None  # a comparison that stops once decided: the level of the look its
    #                                       interval was taken at (≥ confidence; see measure.sequential)
    block_runs: float = math.nan  # a typical pair's runs a side as the blocks ran (the fewer side's median)
    pooled: bool = False          # the blocks held too few runs for the metric: ``pairs`` are pooled pairs

    def interval_text(self) -> str:
        """``95 % CI −4.0…+3.1 %``, or ``3 pairs so far`` while there is no interval."""
        return self._ci_text()

    def _ci_text(self) -> str:
        conf = f"{self.confidence * 100:.0f}"
        if not (math.isfinite(self.ci_low_pct) and math.isfinite(self.ci_high_pct)):
            return f"{self.pairs} pair{'s' if self.pairs != 1 else ''} so far"
        dec = pct_decimals(self.ci_low_pct, self.ci_high_pct)
        return f"{conf} % CI {signed_pct(self.ci_low_pct, dec)}\u2026{signed_pct(self.ci_high_pct, dec)} %"

    def text(self) -> str:
        """E.g. ``p50 2.10 → 1.70 ms, −19 % (95 % CI −22…−16 %)``; ``runs/s 480 → 610, +27 % (…)``;
        ``CPU/run 36.6 → 5.2 ms, −86 % (…)``; ``p50 2.10 → 2.09 ms, no detectable difference (95 % CI −1.2…+0.9 %)``;
        ``p50 1.00 → 1.01 ms, under the 2 % margin (95 % CI +0.5…+1.6 %)`` (shown, but too small to count);
        ``p50 2.10 → 2.14 ms, undecided (95 % CI −3.1…+4.0 %): about 20 s more would decide``."""
        label, unit = _LABEL[self.metric]
        if self.pooled and not self.pairs:  # not one pair of blocks holds the runs the metric needs
            need = runs_needed(self.metric) if self.metric in QUANTILE else 1
            more = (f": about {self.seconds_more:.0f} s more would give it {MIN_PAIRS} pairs"
                    if self.seconds_more is not None and self.seconds_more < SECONDS_MORE_CAP else "")
            return (f"{label} not judged yet: blocks of ~{self.block_runs:.0f} runs cannot hold a {label} (needs "
                    f"{need}), and together they make no pair of {need} runs a side{more}")
        before, after = figures_alike(self.before, self.after)
        head = f"{label} {before} \u2192 {after}{unit}"
        if self.verdict == "no difference":
            lo, hi = self.ci_low_pct, self.ci_high_pct
            if lo > 0 or hi < 0:  # a difference the interval shows, but smaller than the margin: say which
                return f"{head}, under the {self.margin_pct:g} % margin ({self._ci_text()})"
            return f"{head}, no detectable difference ({self._ci_text()})"
        if self.verdict == "undecided":
            more = ""
            if self.seconds_more is not None and self.seconds_more >= SECONDS_MORE_CAP:
                more = f": more than {SECONDS_MORE_CAP:.0f} s more would be needed to decide"
            elif self.seconds_more is not None:
                more = f": about {self.seconds_more:.0f} s more would decide"
            return f"{head}, undecided ({self._ci_text()}){more}"
        change = signed_pct(self.change_pct, pct_decimals(self.change_pct, self.ci_low_pct, self.ci_high_pct))
        return f"{head}, {change} % ({self._ci_text()})"

    def as_dict(self) -> dict:
        """JSON-ready: numbers rounded, nan and inf as None."""
        return {
            "baseline": self.baseline,
            "other": self.other,
            "metric": self.metric,
            "before": json_num(self.before, 4),
            "after": json_num(self.after, 4),
            "change_pct": json_num(self.change_pct, 2),
            "ci_low_pct": json_num(self.ci_low_pct, 2),
            "ci_high_pct": json_num(self.ci_high_pct, 2),
            "significant": self.significant,
            "verdict": self.verdict,
            "pairs": self.pairs,
            "seconds_more": json_num(self.seconds_more, 1) if self.seconds_more is not None else None,
            "look_confidence": None if self.look_confidence is None else round(self.look_confidence, 6),
            "text": self.text(),
        }


def _decide(lo_pct: float, hi_pct: float, margin_pct: float, higher_is_better: bool) -> tuple[bool, str]:
    if not (math.isfinite(lo_pct) and math.isfinite(hi_pct)):
        return False, "undecided"
    if lo_pct > margin_pct or hi_pct < -margin_pct:
        up = lo_pct > margin_pct
        return True, "faster" if up == higher_is_better else "slower"
    if -margin_pct <= lo_pct and hi_pct <= margin_pct:
        return False, "no difference"
    return False, "undecided"


def _seconds_more(d: np.ndarray, est: float, lo: float, hi: float, margin_pct: float, confidence: float,
                  seconds_per_pair: float | None) -> float | None:
    """About how many seconds more until the interval clears the margin (one way or the other), capped.

    The side of the interval that must move is the one facing the margin: below it for an estimate beyond the
    margin (to become "slower"/"faster"), both for one inside (to become "no difference"). Its length shrinks as
    1/√n; without an interval yet (too few pairs) it is z·s/√n from the pairs so far.
    """
    n = d.size
    if seconds_per_pair is None or not math.isfinite(seconds_per_pair) or seconds_per_pair <= 0 or n == 0:
        return None
    if n < 2:
        return min(SECONDS_MORE_CAP, (MIN_PAIRS - n) * seconds_per_pair)
    margin = math.log1p(margin_pct / 100)
    if n >= MIN_PAIRS and math.isfinite(lo) and math.isfinite(hi):
        if abs(est) > margin:
            side = est - lo if est > 0 else hi - est
        else:
            side = max(hi - est, est - lo)
    else:
        side = _z(confidence) * float(d.std(ddof=1)) / math.sqrt(n)
    target = abs(abs(est) - margin)
    if target <= 0:
        return SECONDS_MORE_CAP
    needed = n * (side / target) ** 2
    more_pairs = max(needed - n, MIN_PAIRS - n, 1.0)
    return float(min(SECONDS_MORE_CAP, more_pairs * seconds_per_pair))


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else math.nan


def usable_pairs(blocks: Sequence[Block], baseline: int, other: int, metric: str) -> list[tuple[Block, Block]]:
    """The neighbour pairs a comparison on ``metric`` uses: both blocks with a positive, finite value for it."""
    _check_metric(metric)
    return [(a, b) for a, b in pairs(blocks, baseline, other)
            if all(math.isfinite(v) and v > 0 for v in (a.value(metric), b.value(metric)))]


@dataclass(frozen=True)
class Judgement:
    """What per-pair log ratios say at one confidence: the estimate and interval (log ratios) and the verdict."""

    estimate: float
    low: float           # −inf / +inf when no interval exists (too few pairs for the level)
    high: float
    significant: bool
    verdict: str


def judge(d: np.ndarray, confidence: float, margin_pct: float = MARGIN_PCT,
          higher_is_better: bool = False) -> Judgement:
    """The verdict on per-pair log ratios ``d`` at one confidence: the rule :func:`compare` applies to blocks and
    the simulations of :mod:`ortop.measure.sequential` apply to bare numbers."""
    n = int(d.size)
    est, lo, hi = _interval(d, confidence) if n else (math.nan, -math.inf, math.inf)
    if n < MIN_PAIRS or not (math.isfinite(lo) and math.isfinite(hi)):
        return Judgement(est, lo, hi, False, "undecided")
    significant, verdict = _decide(_pct(lo), _pct(hi), margin_pct, higher_is_better)
    return Judgement(est, lo, hi, significant, verdict)


def compare(blocks: Sequence[Block], baseline: int, other: int, metric: str, *, confidence: float = 0.95,
            margin_pct: float = MARGIN_PCT, seed: int = 0, elapsed_s: float | None = None,
            level: float | None = None) -> Comparison:
    """Compare ``other`` with ``baseline`` on ``metric`` over neighbouring block pairs (see the module docstring).

    Pairs where either block lacks a positive, finite value for the metric are left out. ``elapsed_s`` is the
    measuring time so far (all configurations together), for ``seconds_more``; by default the span of the blocks.
    ``level``: the confidence the interval is taken at when it differs from ``confidence``, the coverage it
    stands for — a look of a comparison that stops once decided (:mod:`ortop.measure.sequential`).
    ``seed`` is accepted for interface stability: the rank interval is exact, so nothing is random.
    """
    del seed
    at = confidence if level is None else level
    if not (0 < confidence < 1 and 0 < at < 1):
        raise ValueError("confidence must lie strictly between 0 and 1")
    used = usable_pairs(blocks, baseline, other, metric)
    fewer = [min(a.runs, b.runs) for a, b in used]
    block_runs = float(np.median(fewer)) if fewer else math.nan
    need = runs_needed(metric) if metric in QUANTILE else 1
    pooled_now = False
    runs_a_side = min(sum(a.runs for a, _ in used), sum(b.runs for _, b in used)) if used else 0
    if any(n < need for n in fewer):
        try:
            used, pooled_now = pooled_pairs(used, need), True
        except ValueError:  # blocks summarised elsewhere, without their runs: only their own figures exist
            pass
    base_vals = [a.value(metric) for a, _ in used]
    other_vals = [b.value(metric) for _, b in used]
    d = np.log(np.asarray(other_vals, dtype=np.float64) / np.asarray(base_vals, dtype=np.float64))
    n = int(d.size)
    j = judge(d, at, margin_pct, metric in HIGHER_IS_BETTER)
    has_interval = n >= MIN_PAIRS and math.isfinite(j.low) and math.isfinite(j.high)
    lo_pct, hi_pct = (_pct(j.low), _pct(j.high)) if has_interval else (math.nan, math.nan)
    seconds_more = None
    if j.verdict == "undecided":
        if elapsed_s is None and blocks:  # all configurations' time counts: they take turns
            elapsed_s = max(b.t_end for b in blocks) - min(b.t_start for b in blocks)
        per_pair = elapsed_s / n if elapsed_s is not None and n else None
        if pooled_now and n < MIN_PAIRS and elapsed_s and runs_a_side > 0 and block_runs > 0:
            # pooled pairs arrive as runs do: MIN_PAIRS of them need that many pooled blocks of whole blocks a side
            share = math.ceil(need / block_runs) * block_runs / runs_a_side  # of the time so far, per pooled pair
            seconds_more = float(min(SECONDS_MORE_CAP, elapsed_s * max(MIN_PAIRS * share - 1, share)))
        else:
            seconds_more = _seconds_more(d, j.estimate, j.low, j.high, margin_pct, at, per_pair)
    return Comparison(baseline, other, metric, _median(base_vals), _median(other_vals), _pct(j.estimate), lo_pct,
                      hi_pct, j.significant, j.verdict, n, seconds_more, confidence, margin_pct, level,
                      block_runs, pooled_now)


def compare_all(blocks: Sequence[Block], n_configs: int, metrics: Sequence[str] = METRICS,
                **kw: Any) -> list[Comparison]:
    """Every other configuration against configuration 0, on every metric (configuration-major order)."""
    return [compare(blocks, 0, other, metric, **kw)
            for other in range(1, n_configs) for metric in metrics]


DECIDED = ("faster", "slower", "no difference")


def decided_after(blocks: Sequence[Block], baseline: int, other: int, metric: str, **kw: Any) -> float | None:
    """Seconds of measuring after which the verdict was reached and never changed again; None if undecided.

    The comparison is repeated on every prefix of the schedule (blocks in ``seq`` order); the answer is the span,
    from the first block's start, of the shortest prefix from which every longer prefix gives the final verdict.
    It says how long a comparison like this one needs, which a budget should exceed.
    """
    ordered = sorted(blocks, key=lambda b: b.seq)
    if not ordered:
        return None
    final = compare(ordered, baseline, other, metric, **kw).verdict
    if final not in DECIDED:
        return None
    t0 = ordered[0].t_start
    since: float | None = None
    for n in range(1, len(ordered) + 1):
        if compare(ordered[:n], baseline, other, metric, **kw).verdict == final:
            if since is None:
                since = ordered[n - 1].t_end - t0
        else:
            since = None
    return since
