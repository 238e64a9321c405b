"""compare: interleaved blocks, neighbour pairs and the verdicts over them, on synthetic drifting hosts.

Two simulators, both deterministic by seed: ``_runs`` draws every run (for the drift-versus-sequential contrast),
``_blocks`` draws block figures directly (cheap enough for hundreds of seeds in the calibration tests). Both
model the same noisy host: a linear slowdown across the measurement, a slow AR(1) wander, per-block jitter,
per-run noise and occasional hiccup blocks.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from ortop.measure import compare as compare_mod
from ortop.measure.compare import (
    MARGIN_PCT,
    METRICS,
    MIN_PAIRS,
    SECONDS_MORE_CAP,
    Block,
    Comparison,
    block_from_runs,
    compare,
    compare_all,
    pairs,
    schedule,
)

BLOCK_S = 0.3
BASE_MS = 2.0


def _host(rng: np.random.Generator, n: int, drift: float, ar_sigma: float = 0.03, ar_rho: float = 0.9,
          jitter: float = 0.01) -> np.ndarray:
    """The host's slowdown factor at each of n equal blocks: linear drift × slow AR(1) wander × block jitter."""
    innov = rng.normal(0, ar_sigma * math.sqrt(1 - ar_rho**2), n)
    ar = np.empty(n)
    acc = rng.normal(0, ar_sigma)
    for i in range(n):
        acc = ar_rho * acc + innov[i]
        ar[i] = acc
    return (1 + drift * np.arange(n) / n) * np.exp(ar + rng.normal(0, jitter, n))


def _runs(order: list[int], effects: tuple[float, ...], seed: int, drift: float = 0.20,
          cpu_per_ms: tuple[float, ...] | None = None) -> tuple[list[Block], dict[int, np.ndarray]]:
    """Every run of every block (~0.3 s each, lognormal ±10 % per run, 5 % of blocks with a hiccup)."""
    rng = np.random.default_rng(seed)
    host = _host(rng, len(order), drift)
    t, blocks, runs = 0.0, [], {}
    for seq, c in enumerate(order):
        mean = BASE_MS * effects[c] * host[seq]
        n = int(BLOCK_S * 1000 / mean * 1.5) + 5
        lat = mean * rng.lognormal(0, 0.10, n)
        if rng.random() < 0.05:
            lat[rng.random(n) < 0.2] *= 1.5
        lat = lat[: int(np.searchsorted(np.cumsum(lat), BLOCK_S * 1000)) + 1]
        wall = float(lat.sum()) / 1000
        cpu = float(lat.sum()) * (1.0 if cpu_per_ms is None else cpu_per_ms[c])
        blocks.append(block_from_runs(c, seq, lat, t_start=t, t_end=t + wall, cpu_ms=cpu))
        runs.setdefault(c, []).append(lat)
        t += wall
    return blocks, {c: np.concatenate(v) for c, v in runs.items()}


def _blocks(order: list[int], effects: tuple[float, ...], seed: int, drift: float = 0.20,
            noise: float = 0.015, hiccups: float = 0.05) -> list[Block]:
    """Block figures drawn directly: the block median carries ~1.5 % of sampling noise on top of the host."""
    rng = np.random.default_rng(seed)
    n = len(order)
    host = _host(rng, n, drift)
    eff = np.asarray(effects)[np.asarray(order)]
    hit = np.where(rng.random(n) < hiccups, np.exp(np.abs(rng.normal(0, 0.08, n))), 1.0)
    p50 = BASE_MS * eff * host * np.exp(rng.normal(0, noise, n)) * hit
    mean = p50 * np.exp(rng.normal(0.005, noise / 2, n)) * hit  # hiccups hit the mean (and so throughput) too
    p99 = p50 * 1.3 * np.exp(rng.normal(0, 3 * noise, n)) * hit
    runs = np.maximum(1, np.round(BLOCK_S * 1000 / mean)).astype(int)
    wall = runs * mean / 1000
    t = np.concatenate([[0.0], np.cumsum(wall)])
    return [Block(int(order[i]), i, float(t[i]), float(t[i + 1]), int(runs[i]), float(p50[i]), float(p99[i]),
                  float(runs[i] / wall[i]), float(mean[i]), math.nan) for i in range(n)]


# -- the schedule and the pairs -------------------------------------------------------------------------------


def test_two_configs_alternate_abba() -> None:
    assert schedule(2, 8) == [0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0]


@pytest.mark.parametrize("n", [3, 4, 5])
def test_more_configs_are_balanced(n: int) -> None:
    rounds = 2 * n
    order = schedule(n, rounds)
    assert len(order) == n * rounds
    for r in range(rounds):  # each round visits every configuration once
        assert sorted(order[r * n:(r + 1) * n]) == list(range(n))
    pos = np.zeros((n, n), int)  # config × position in its round
    for i, c in enumerate(order):
        pos[c, i % n] += 1
    assert (pos == 2).all()  # every configuration in every position equally often: none always first or last
    mean_t = [np.mean([i for i, c in enumerate(order) if c == k]) for k in range(n)]
    assert max(mean_t) - min(mean_t) < 1e-9  # and at the same mean time: a linear drift hits all alike
    blocks = [Block(c, i, i, i + 1, 1, 1.0, 1.0, 1.0, 1.0) for i, c in enumerate(order)]
    for other in range(1, n):  # neighbour pairs of 0 and each other: who goes first is balanced
        ps = pairs(blocks, 0, other)
        first = sum(a.seq < b.seq for a, b in ps)
        assert len(ps) >= rounds - 1 and abs(2 * first - len(ps)) <= 1


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_seeded_schedule_draws_each_round_and_extends_its_own_prefix(n: int) -> None:
    rounds = 40
    order = schedule(n, rounds, seed=7)
    rows = [tuple(order[r * n:(r + 1) * n]) for r in range(rounds)]
    assert all(sorted(row) == list(range(n)) for row in rows)  # every configuration once a round
    assert schedule(n, 2 * rounds, seed=7)[:len(order)] == order  # a longer schedule starts with the shorter one
    assert len(set(rows)) > 1 and schedule(n, rounds, seed=8) != order and schedule(n, rounds, seed=7) == order
    firsts = [row[0] for row in rows]  # who goes first: every configuration, about equally often
    assert min(firsts.count(k) for k in range(n)) >= rounds / n / 3


def test_a_load_in_step_with_a_fixed_order_sides_with_one_configuration_but_not_with_a_drawn_one() -> None:
    """An outside load that comes and goes every two blocks, as another A B B A comparison of the same block length
    beside this one makes it: in step with the fixed order it always lands on B's blocks, and an A/A comparison
    claims B slower; with each round drawn at random, it lands on either alike, and the A/A interval covers zero
    about as often as the 95 % it states."""
    rounds = 33

    def with_rhythm(order: list[int], seed: int) -> list[Block]:
        blocks = _blocks(order, (1.0, 1.0), seed)
        busy = [(seq % 4) in (1, 2) for seq in range(len(order))]  # the neighbour's B blocks: seq 1, 2, 5, 6, …
        return [replace(b, p50_ms=b.p50_ms * 1.3, p99_ms=b.p99_ms * 1.3, throughput_per_s=b.throughput_per_s / 1.3,
                        cpu_ms_per_run=b.cpu_ms_per_run * 1.3) if hit else b for b, hit in zip(blocks, busy)]

    fixed = [compare(with_rhythm(schedule(2, rounds), s), 0, 1, "p50") for s in range(100)]
    assert all(c.verdict == "slower" for c in fixed)
    drawn = [compare(with_rhythm(schedule(2, rounds, seed=1000 + s), s), 0, 1, "p50", margin_pct=0.0)
             for s in range(100)]
    covered = sum(c.ci_low_pct <= 0 <= c.ci_high_pct for c in drawn)
    assert covered >= 90, covered


def test_pairs_are_neighbours_each_block_once() -> None:
    order = [0, 1, 1, 0, 0, 1, 1, 0, 1]  # the trailing B has no partner
    blocks = [Block(c, i, i, i + 1, 1, 1.0, 1.0, 1.0, 1.0) for i, c in enumerate(order)]
    ps = pairs(list(reversed(blocks)), 0, 1)  # input order does not matter: schedule order does
    assert [(a.seq, b.seq) for a, b in ps] == [(0, 1), (3, 2), (4, 5), (7, 6)]
    assert all(a.config == 0 and b.config == 1 for a, b in ps)
    used = [blk.seq for p in ps for blk in p]
    assert len(used) == len(set(used))
    # a repeated block of one configuration is skipped, not paired across: A A B → (A₁ B)
    aab = [Block(c, i, i, i + 1, 1, 1.0, 1.0, 1.0, 1.0) for i, c in enumerate([0, 0, 1])]
    assert [(a.seq, b.seq) for a, b in pairs(aab, 0, 1)] == [(1, 2)]
    # with three configurations, blocks of the third are stepped over
    abc = [Block(c, i, i, i + 1, 1, 1.0, 1.0, 1.0, 1.0) for i, c in enumerate(schedule(3, 2))]  # 0 1 2 2 1 0
    assert [(a.seq, b.seq) for a, b in pairs(abc, 0, 2)] == [(0, 2), (5, 3)]
    with pytest.raises(ValueError):
        pairs(blocks, 1, 1)


def test_block_from_runs() -> None:
    lat = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    b = block_from_runs(1, 7, lat, t_start=10.0, t_end=10.5, cpu_ms=40.0, cpu_between_ms=25.0)
    assert (b.config, b.seq, b.runs) == (1, 7, 5)
    assert b.p50_ms == 3.0 and b.p99_ms == pytest.approx(np.percentile(lat, 99))
    assert b.throughput_per_s == pytest.approx(10.0) and b.cpu_ms_per_run == pytest.approx(8.0)
    assert b.cpu_ms_between_per_s == pytest.approx(50.0)
    assert [b.value(m) for m in METRICS] == [b.p50_ms, b.p99_ms, b.throughput_per_s, b.cpu_ms_per_run]
    with pytest.raises(ValueError):
        b.value("p42")
    empty = block_from_runs(0, 0, np.zeros(0), t_start=0.0, t_end=0.0, cpu_ms=0.0)
    assert empty.runs == 0 and math.isnan(empty.p50_ms) and math.isnan(empty.throughput_per_s)
    assert math.isnan(empty.cpu_ms_per_run) and math.isnan(empty.cpu_ms_between_per_s)


# -- drift: interleaving against sequential ------------------------------------------------------------------


def test_interleaving_sees_through_drift() -> None:
    # the host slows by 20 % across ~20 s; B is truly 5 % slower
    rounds = 33
    blocks, _ = _runs(schedule(2, rounds), (1.0, 1.05), seed=1)
    c = compare(blocks, 0, 1, "p50")
    assert c.ci_low_pct <= 5.0 <= c.ci_high_pct
    assert c.verdict == "slower" and c.significant and c.pairs == rounds
    assert c.change_pct == pytest.approx(5.0, abs=1.0)
    # with no effect at all, interleaving claims none
    blocks_aa, _ = _runs(schedule(2, rounds), (1.0, 1.0), seed=2)
    assert not compare(blocks_aa, 0, 1, "p50").significant


# -- calibration over many seeds ------------------------------------------------------------------------------


AA_SEEDS = range(200)


@pytest.mark.parametrize("drawn", [False, True], ids=["fixed order", "drawn order"])
def test_aa_false_positives_are_rare_but_the_interval_is_not_inflated(drawn: bool) -> None:
    claims = {"default": 0, "zero": 0}
    zero_covered = 0
    for seed in AA_SEEDS:
        order = schedule(2, 33, 5000 + seed if drawn else None)  # ~20 s of 0.3 s blocks
        blocks = _blocks(order, (1.0, 1.0), seed)
        default = [compare(blocks, 0, 1, m) for m in ("p50", "throughput")]
        zero = [compare(blocks, 0, 1, m, margin_pct=0.0) for m in ("p50", "throughput")]
        claims["default"] += any(c.significant for c in default)
        claims["zero"] += zero[0].significant
        zero_covered += zero[0].ci_low_pct <= 0 <= zero[0].ci_high_pct
    # with the margin: at most 5 % of A/A runs claim a difference in p50 or throughput (the target is 1 in 10)
    assert claims["default"] <= 0.05 * len(AA_SEEDS)
    # without it the interval alone is honest, not inflated: it covers zero at about the nominal 95 %
    assert 0.90 <= zero_covered / len(AA_SEEDS) <= 0.99
    assert claims["zero"] > 0


@pytest.mark.parametrize("effect", [0.90, 1.05])
def test_the_interval_covers_the_true_effect(effect: float) -> None:
    order = schedule(2, 33)
    truth = {"p50": (effect - 1) * 100, "cpu": (effect - 1) * 100}
    covered = {m: 0 for m in truth}
    for seed in range(150):
        blocks = _blocks(order, (1.0, effect), int(effect * 1000) + seed)
        for m, true_pct in truth.items():
            c = compare(blocks, 0, 1, m)
            covered[m] += c.ci_low_pct <= true_pct <= c.ci_high_pct
    for m, k in covered.items():
        assert 0.90 <= k / 150 <= 0.99, (m, k)


def test_small_samples_are_not_over_confident() -> None:
    # 8 pairs of heavy-tailed ratios: the exact rank interval still covers at about the nominal rate
    rng = np.random.default_rng(5)
    covered, trials = 0, 400
    for _ in range(trials):
        d = 0.03 * rng.standard_t(3, 8)
        blocks = []
        for i, x in enumerate(d):
            for c, v in ((0, 1.0), (1, math.exp(x))):
                blocks.append(Block(c, 2 * i + c, 2 * i + c, 2 * i + c + 1, 100, v, v, 1 / v, v))
        c = compare(blocks, 0, 1, "p50")
        covered += c.ci_low_pct <= 0 <= c.ci_high_pct
    assert covered / trials >= 0.93


def test_signed_rank_critical_values_match_the_tables() -> None:
    # k − 1 is the tabulated two-sided 5 % critical value of the signed-rank statistic; none exists below n = 6
    assert [compare_mod._signed_rank_k(n, 0.95) - 1 for n in (5, 6, 7, 8, 10, 20, 30)] == [-1, 0, 2, 3, 8, 52, 137]


def test_large_sample_branches_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    blocks = _pairs_of(list(np.exp(rng.normal(0.03, 0.02, 120))))
    exact = compare(blocks, 0, 1, "p50")
    monkeypatch.setattr(compare_mod, "_EXACT_MAX", 10)  # the normal approximation of the critical value
    compare_mod._signed_rank_k.cache_clear()
    approx = compare(blocks, 0, 1, "p50")
    monkeypatch.setattr(compare_mod, "_WALSH_MAX", 10)  # the z-interval on the mean
    z = compare(blocks, 0, 1, "p50")
    compare_mod._signed_rank_k.cache_clear()
    for c in (approx, z):
        assert c.ci_low_pct == pytest.approx(exact.ci_low_pct, abs=0.15)
        assert c.ci_high_pct == pytest.approx(exact.ci_high_pct, abs=0.15)
        assert c.verdict == exact.verdict == "slower"


# -- verdicts -------------------------------------------------------------------------------------------------


def _pairs_of(ratios: list[float], metric_values: float = 2.0) -> list[Block]:
    blocks = []
    for i, r in enumerate(ratios):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for k, c in enumerate(order):
            v = metric_values * (r if c == 1 else 1.0)
            seq = 2 * i + k
            blocks.append(Block(c, seq, seq * BLOCK_S, (seq + 1) * BLOCK_S, 150, v, 1.3 * v, 1000 / v, v))
    return blocks


def test_few_pairs_stay_undecided_with_an_estimate_of_time() -> None:
    blocks = _pairs_of([0.6, 0.62, 0.58, 0.61])  # a huge, clean effect, but only 4 pairs
    c = compare(blocks, 0, 1, "p50")
    assert c.pairs == 4 < MIN_PAIRS
    assert c.verdict == "undecided" and not c.significant
    assert c.seconds_more is not None and 0 < c.seconds_more < SECONDS_MORE_CAP
    assert "undecided (4 pairs so far)" in c.text() and "s more would decide" in c.text()
    assert c.as_dict()["ci_low_pct"] is None
    # two pairs more decide it
    c = compare(_pairs_of([0.6, 0.62, 0.58, 0.61, 0.6, 0.59]), 0, 1, "p50")
    assert c.verdict == "faster" and c.significant and c.seconds_more is None
    assert -42.5 < c.ci_low_pct < c.change_pct < c.ci_high_pct < -37.5  # the exact interval: min…max here


def test_no_difference_inside_the_margin() -> None:
    rng = np.random.default_rng(3)
    c = compare(_pairs_of(list(np.exp(rng.normal(0.002, 0.01, 40)))), 0, 1, "p50")
    assert -MARGIN_PCT < c.ci_low_pct < c.ci_high_pct < MARGIN_PCT
    assert c.verdict == "no difference" and not c.significant and c.seconds_more is None
    assert c.text().startswith("p50 2.00 → 2.00 ms, no detectable difference (95 % CI −")


def test_undecided_says_how_long_and_that_long_decides() -> None:
    rng = np.random.default_rng(15)
    ratios = list(np.exp(rng.normal(0.045, 0.05, 200)))  # B about 4.6 % slower, noisy pairs
    first = compare(_pairs_of(ratios[:10]), 0, 1, "p50")
    assert first.verdict == "undecided" and first.ci_low_pct < MARGIN_PCT < first.ci_high_pct
    assert first.seconds_more is not None and 10 < first.seconds_more < 60  # 10 pairs took 6 s
    assert first.text().endswith(f"about {first.seconds_more:.0f} s more would decide")
    per_pair = 2 * BLOCK_S
    enough = 10 + math.ceil(first.seconds_more / per_pair)
    later = compare(_pairs_of(ratios[:enough]), 0, 1, "p50")
    assert later.verdict == "slower"
    # elapsed_s sets the pace: twice the time per pair, about twice the time
    slow = compare(_pairs_of(ratios[:10]), 0, 1, "p50", elapsed_s=10 * per_pair * 2)
    assert slow.seconds_more == pytest.approx(2 * first.seconds_more)
    # an estimate sitting on the margin needs "forever": capped
    on_margin = compare(_pairs_of([1.02 * math.exp(x) for x in rng.normal(0, 0.04, 10)]), 0, 1, "p50")
    assert on_margin.verdict == "undecided" and on_margin.seconds_more is not None
    assert on_margin.seconds_more <= SECONDS_MORE_CAP


def test_directions_throughput_and_cpu() -> None:
    # B takes 20 % less time per run: p50 and CPU per run go down (faster), throughput goes up (also faster)
    blocks = _pairs_of([0.8 * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(20)])
    by = {c.metric: c for c in compare_all(blocks, 2)}
    assert list(by) == list(METRICS)
    assert by["p50"].change_pct < 0 and by["p50"].verdict == "faster"
    assert by["cpu"].change_pct < 0 and by["cpu"].verdict == "faster"
    assert by["throughput"].change_pct > 0 and by["throughput"].verdict == "faster"
    assert by["throughput"].change_pct == pytest.approx(25, abs=1)
    # and the other way round
    worse = {c.metric: c for c in compare_all(_pairs_of([1.25] * 12), 2)}
    assert [worse[m].verdict for m in METRICS] == ["slower"] * 4
    assert worse["throughput"].change_pct == pytest.approx(-20)


def test_spinning_cpu_per_run_is_seen_several_fold() -> None:
    # same latency, 7x the CPU per run (spinning between paced runs): only CPU differs
    blocks, _ = _runs(schedule(2, 33), (1.0, 1.0), seed=4, cpu_per_ms=(2.5, 17.5))
    cpu = compare(blocks, 0, 1, "cpu")
    assert cpu.verdict == "slower" and cpu.change_pct == pytest.approx(600, rel=0.05)
    assert cpu.text().startswith("CPU/run 5.4 → 38.2 ms, +597 % (95 % CI +59")


def test_unmeasured_metric_is_undecided_without_a_time() -> None:
    blocks = [Block(c, i, i, i + 1, 10, 1.0, 1.0, 10.0, math.nan) for i, c in enumerate(schedule(2, 10))]
    c = compare(blocks, 0, 1, "cpu")
    assert c.pairs == 0 and c.verdict == "undecided" and c.seconds_more is None
    d = c.as_dict()
    assert d["change_pct"] is None and d["before"] is None
    json.dumps(d)


def test_three_configs_compare_all() -> None:
    blocks = _blocks(schedule(3, 24), (1.0, 0.6, 1.0), seed=9)
    out = compare_all(blocks, 3, metrics=("p50",))
    assert [(c.other, c.metric) for c in out] == [(1, "p50"), (2, "p50")]
    assert out[0].verdict == "faster" and out[0].ci_low_pct <= -40 <= out[0].ci_high_pct
    assert not out[1].significant


def test_bad_arguments() -> None:
    blocks = _pairs_of([1.0] * 8)
    with pytest.raises(ValueError):
        compare(blocks, 0, 1, "latency")
    with pytest.raises(ValueError):
        compare(blocks, 0, 1, "p50", confidence=1.0)
    with pytest.raises(ValueError):
        schedule(0, 3)


def test_confidence_changes_the_interval() -> None:
    rng = np.random.default_rng(2)
    blocks = _pairs_of(list(np.exp(rng.normal(0.03, 0.03, 30))))
    c95, c80 = compare(blocks, 0, 1, "p50"), compare(blocks, 0, 1, "p50", confidence=0.8)
    assert c80.ci_low_pct > c95.ci_low_pct and c80.ci_high_pct < c95.ci_high_pct
    assert "80 % CI" in c80.text() and c80.change_pct == c95.change_pct


# -- how it reads ---------------------------------------------------------------------------------------------


def _cmp(metric: str, before: float, after: float, change: float, lo: float, hi: float, verdict: str,
         seconds_more: float | None = None) -> Comparison:
    significant = verdict in ("faster", "slower")
    return Comparison(0, 1, metric, before, after, change, lo, hi, significant, verdict, 30, seconds_more)


def test_text_formats() -> None:
    assert (_cmp("p50", 2.10, 1.70, -19.04, -22.2, -15.9, "faster").text()
            == "p50 2.10 → 1.70 ms, −19 % (95 % CI −22…−16 %)")
    assert (_cmp("p99", 3.0, 3.4, 13.0, 9.6, 16.1, "slower").text()
            == "p99 3.00 → 3.40 ms, +13 % (95 % CI +10…+16 %)")
    assert (_cmp("cpu", 36.6, 5.2, -85.8, -87.0, -84.5, "faster").text()
            == "CPU/run 36.6 → 5.2 ms, −86 % (95 % CI −87…−84 %)")
    assert (_cmp("throughput", 480.2, 610.4, 27.1, 24.0, 30.3, "faster").text()
            == "runs/s 480 → 610, +27 % (95 % CI +24…+30 %)")
    assert (_cmp("p50", 2.1, 2.09, -0.2, -1.23, 0.91, "no difference").text()
            == "p50 2.10 → 2.09 ms, no detectable difference (95 % CI −1.2…+0.9 %)")
    # an interval clear of 0 but inside the margin names the margin, not "no detectable difference"
    assert (_cmp("p50", 1.0, 1.01, 1.0, 0.52, 1.6, "no difference").text()
            == "p50 1.00 → 1.01 ms, under the 2 % margin (95 % CI +0.5…+1.6 %)")
    assert (_cmp("p50", 1.0, 0.99, -1.0, -1.6, -0.52, "no difference").text()
            == "p50 1.00 → 0.99 ms, under the 2 % margin (95 % CI −1.6…−0.5 %)")
    assert (_cmp("p50", 2.1, 2.14, 0.5, -3.1, 4.0, "undecided", 20.2).text()
            == "p50 2.10 → 2.14 ms, undecided (95 % CI −3.1…+4.0 %): about 20 s more would decide")
    assert (_cmp("p50", 0.123, 0.125, 1.6, 0.1, 3.2, "undecided", SECONDS_MORE_CAP).text()
            == "p50 0.123 → 0.125 ms, undecided (95 % CI +0.1…+3.2 %): more than 300 s more would be needed to decide")
    assert "−4.5 %" in _cmp("p50", 2.0, 1.91, -4.5, -6.0, -3.0, "faster").text()


def test_as_dict() -> None:
    c = _cmp("p50", 2.1, 1.7, -19.0412, -22.2, math.nan, "faster")
    d = c.as_dict()
    for key in ("baseline", "other", "metric", "change_pct", "ci_low_pct", "ci_high_pct", "significant", "verdict"):
        assert key in d
    assert d["change_pct"] == -19.04 and d["ci_high_pct"] is None and d["seconds_more"] is None
    assert d["baseline"] == 0 and d["other"] == 1 and d["significant"] is True and d["verdict"] == "faster"
    json.dumps(d)


def test_decided_after_is_when_the_verdict_settles() -> None:
    from ortop.measure.compare import decided_after

    def blocks_with(effect: float, n_rounds: int, seed: int = 3) -> list[Block]:
        rng = np.random.default_rng(seed)
        out = []
        t = 0.0
        for seq, cfg in enumerate(schedule(2, n_rounds)):
            lat = rng.lognormal(0, 0.05, 200) * (1 + effect * cfg)
            out.append(block_from_runs(cfg, seq, lat, t_start=t, t_end=t + 0.3, cpu_ms=float(lat.sum())))
            t += 0.3
        return out

    clear = blocks_with(0.30, 20)
    took = decided_after(clear, 0, 1, "p50")
    assert took is not None and 0 < took <= clear[-1].t_end
    # it needs at least the pairs the rank interval needs before it can decide anything
    assert took >= 0.3 * 2 * 6 - 1e-9
    assert decided_after(blocks_with(0.0, 2), 0, 1, "p50") is None  # too few pairs: undecided, no time


# -- stopping once decided (measure.sequential) ---------------------------------------------------------------


def test_looks_are_fixed_and_spend_at_most_alpha() -> None:
    from ortop.measure.sequential import Looks, look_alpha, look_pairs

    assert [look_pairs(k) for k in range(8)] == [8, 12, 16, 24, 32, 48, 64, 96]
    assert sum(look_alpha(k) for k in range(60)) < 0.4 * 0.05  # the looks before the last: under 2α/5
    looks = Looks()
    assert [looks.due(n) for n in range(1, 8)] == [None] * 7  # no look before 8 pairs
    assert looks.due(8) == pytest.approx(0.99) and looks.due(8) is None  # each look once
    assert looks.due(11) is None and looks.due(12) == pytest.approx(0.995)
    assert looks.due(20) == pytest.approx(1 - 0.0025)
    assert looks.due(40) == pytest.approx(1 - 0.000625)  # 24 and 32 at once: the newest taken, 24's α counted
    assert looks.taken == 5 and looks.spent() == pytest.approx(sum(look_alpha(k) for k in range(5)))
    assert looks.last() == pytest.approx(1 - (0.05 - looks.spent()))  # the last look: what is left
    assert looks.spent() + (1 - looks.last()) == pytest.approx(0.05)
    assert Looks().last() == pytest.approx(0.95)  # no look taken: the plain interval, as without the rule
    plain = Looks(corrected=False)
    assert plain.due(8) == plain.due(12) == plain.last() == 0.95


def _null_ratios(rng: np.random.Generator, n: int, noise: float = 0.015) -> np.ndarray:
    """Per-pair log ratios of an A/A comparison: each block carries its own noise and, one in twenty, a hiccup
    (a slowdown of a few percent to tens of percent); a pair's ratio is the other block's against its partner's."""
    noise_ab = rng.normal(0, noise, (2, n))
    hiccup = np.where(rng.random((2, n)) < 0.05, np.abs(rng.normal(0, 0.08, (2, n))), 0.0)
    log_block = noise_ab + hiccup
    return log_block[1] - log_block[0]


@pytest.mark.slow
def test_sequential_aa_false_claims_stay_under_five_percent() -> None:
    from ortop.measure.sequential import Looks, run_on_ratios

    rng = np.random.default_rng(2024)
    sims, n_pairs = 2000, 42  # a 30 s budget of 0.35 s blocks: looks at 8, 12, 16, 24, 32 pairs and the last
    claims = {"rule": 0, "plain": 0, "rule, margin": 0}
    early = 0
    for _ in range(sims):
        d = _null_ratios(rng, n_pairs)
        rule = run_on_ratios(d, margin_pct=0.0)  # no margin: the purely statistical claim the margin sits on
        plain = run_on_ratios(d, margin_pct=0.0, looks=Looks(corrected=False))
        with_margin = run_on_ratios(d)
        claims["rule"] += rule.judgement.significant
        claims["plain"] += plain.judgement.significant
        claims["rule, margin"] += with_margin.judgement.significant
        early += with_margin.early and with_margin.judgement.verdict == "no difference"
    rate = {k: v / sims for k, v in claims.items()}
    assert rate["rule"] <= 0.05, rate
    # the plain 95 % interval at the same looks: two to three times the false claims
    assert rate["plain"] >= 0.09 and rate["plain"] > 2 * rate["rule"], rate
    assert rate["rule, margin"] <= rate["rule"]
    assert early > sims / 3  # and the rule still ends many A/A comparisons early, with "no difference"


def test_a_large_effect_stops_at_the_first_look() -> None:
    from ortop.measure.sequential import look_pairs, run_on_ratios

    rng = np.random.default_rng(6)
    d = np.log(0.57) + rng.normal(0, 0.01, 42)  # two threads instead of one: −43 %, pairs agreeing to a point
    out = run_on_ratios(d)
    assert out.early and out.pairs == look_pairs(0) == 8 and out.judgement.verdict == "faster"
    assert out.level == pytest.approx(0.99)
    # a small effect in noisy pairs is not decided at the first look: it runs on
    small = run_on_ratios(0.04 + _null_ratios(rng, 42, noise=0.03))
    assert small.pairs > 8


def _walk_rounds(blocks: list[Block], n_configs: int, metric: str) -> tuple[int, list[Comparison] | None]:
    """What the interleaving does: after each round of blocks, the look due (if any); (blocks used, comparisons)
    when one settled every verdict, else (all blocks, None)."""
    from ortop.measure.sequential import Looks, look, settled

    looks = Looks()
    for rounds in range(1, len(blocks) // n_configs + 1):
        taken = look(blocks[: rounds * n_configs], n_configs, metric, looks)
        if taken is not None and settled(taken[1]):
            return rounds * n_configs, taken[1]
    return len(blocks), None


def test_the_interleavings_looks_on_blocks_match_the_rule_on_ratios() -> None:
    from ortop.measure.sequential import run_on_ratios

    rng = np.random.default_rng(11)
    for effect, noise in ((0.57, 0.01), (1.06, 0.02), (1.0, 0.01), (1.03, 0.04)):
        ratios = effect * np.exp(rng.normal(0, noise, 40))
        blocks = _pairs_of(list(ratios))
        used, comps = _walk_rounds(blocks, 2, "p50")
        out = run_on_ratios(np.log(ratios))
        if comps is None:
            assert not out.early or out.pairs == 40
        else:
            assert comps[0].pairs == out.pairs == used // 2 and comps[0].verdict == out.judgement.verdict
            assert comps[0].look_confidence == pytest.approx(out.level)
            assert comps[0].confidence == 0.95 and "95 % CI" in comps[0].text()


def test_a_stopped_comparison_reports_the_interval_of_its_look() -> None:
    blocks = _blocks(schedule(2, 42), (1.0, 0.57), seed=4)  # three configurations' worth of budget, decided at 8
    used, comps = _walk_rounds(blocks, 2, "p50")
    assert used == 16 and comps is not None and comps[0].verdict == "faster"
    c = comps[0]
    plain = compare(blocks[:used], 0, 1, "p50")  # the 95 % interval on the same pairs would be narrower
    assert c.ci_low_pct <= plain.ci_low_pct and plain.ci_high_pct <= c.ci_high_pct
    assert c.ci_high_pct - c.ci_low_pct > plain.ci_high_pct - plain.ci_low_pct
    assert c.ci_low_pct <= -43 <= c.ci_high_pct
    assert c.as_dict()["look_confidence"] == pytest.approx(0.99) and plain.as_dict()["look_confidence"] is None
    # three configurations stop together, when both comparisons are settled at the same look
    rng = np.random.default_rng(9)  # a quiet host: ±0.5 % per block, nothing else
    three = []
    for i, cfg in enumerate(schedule(3, 40)):
        v = BASE_MS * (1.0, 0.57, 1.0)[cfg] * math.exp(rng.normal(0, 0.005))
        three.append(Block(cfg, i, i * BLOCK_S, (i + 1) * BLOCK_S, 150, v, 1.3 * v, 1000 / v, v))
    used3, comps3 = _walk_rounds(three, 3, "p50")
    assert comps3 is not None and [c.verdict for c in comps3] == ["faster", "no difference"]
    assert used3 < len(three) and min(c.pairs for c in comps3) >= 8


def test_a_resumed_comparison_spends_a_smaller_share_each_time_and_continues_the_schedule() -> None:
    """Every run of a comparison taken up again spends half what the one before did, so all of them together
    spend at most α; its first look is the schedule's next after the pairs it already has."""
    from ortop.measure import sequential as S

    shares = [S.resumed(0, j).alpha for j in range(30)]
    assert shares[0] == pytest.approx(0.025) and sum(shares) < 0.05
    assert all(b < a for a, b in zip(shares, shares[1:]))
    looks = S.resumed(10, 1)  # 10 pairs before: looks at 8 passed, the next at 12
    assert looks.due(11) is None
    level = looks.due(12)
    assert level == pytest.approx(1 - 0.0125 * S.FIRST_SHARE)
    assert looks.due(15) is None and looks.due(16) is not None
