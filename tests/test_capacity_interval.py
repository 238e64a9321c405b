"""A capacity's interval (where a rerun lands), the host's noise over a search, goodput beside throughput, and what
the answer rests on (input notes, what was applied)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ortop.cli.capacity import format_result
from ortop.cli.flags import add_workload_args, apply_flags
from ortop.config.profile import Profile
from ortop.engine.answers.capacity_search import CapacitySearch
from ortop.measure.queue import capacity_spread, queue_model
from ortop.measure.rerun import (
    CONFIDENCE,
    PaceBlock,
    RerunInterval,
    bracket_sd,
    drift_gain,
    local_slope,
    pace_drift,
    rerun_interval,
    t_quantile,
    tail_sd,
)
from ortop.measure.slo import Slo
from tests.models import make_conv_model, make_matmul_model
from tests.test_cli import ortop


# ---- the method, on synthetic inputs ------------------------------------------------------------------------------
def record(rng: np.random.Generator, n: int, stalls: float = 0.0) -> list[np.ndarray]:
    """``n`` requests' server times (service ms, gap, idle) of a server of about 2.25 ms a run, ``stalls`` of them
    six times as long (the host's slow spells)."""
    service = rng.gamma(9, 0.25, size=n)
    service = np.where(rng.random(n) < stalls, 6 * service, service)
    return [np.column_stack([service, np.full(n, 0.02), np.zeros(n)])]


@pytest.mark.slow
def test_the_tail_term_is_the_spread_independent_records_show():
    """The resampled spread of one record against the spread of capacities read from independent records of the
    same server: the same size within a factor of two, and narrower for a record 16 times longer."""
    rng = np.random.default_rng(3)
    slo, lo, hi = Slo("p99", 25.0), 330.0, 360.0

    def crossing(a, b) -> float:
        ma, mb = queue_model(a, slo, lo)[0], queue_model(b, slo, hi)[0]
        return math.log(lo + (1 / ma - 1 / slo.ms) / (1 / ma - 1 / mb) * (hi - lo))

    spreads = {}
    for n in (1_000, 16_000):
        spreads[n] = float(np.median([capacity_spread([(lo, record(rng, n)), (hi, record(rng, n))], slo, seed=k)
                                      for k in range(3)]))
    truth = float(np.std([crossing(record(rng, 1_000), record(rng, 1_000)) for _ in range(16)], ddof=1))
    assert truth / 2 <= spreads[1_000] <= truth * 2, (spreads[1_000], truth)
    # 16 times the record: under half the spread, and below any host's drift (the resampling's own floor)
    assert spreads[16_000] < min(spreads[1_000] / 2, 0.01), spreads
    assert tail_sd(spreads[1_000]) == pytest.approx(math.sqrt(2) * spreads[1_000])  # the estimate's and a rerun's
    assert math.isnan(capacity_spread([(lo, record(rng, 1000))], slo))  # one end: nothing to read a crossing from


def blocks_of(rng: np.random.Generator, paces: Sequence[float], runs: int = 60, jitter: float = 0.03,
              shape_ms: Sequence[float] = (2.0,), mix: np.ndarray | None = None) -> list[PaceBlock]:
    """A search's blocks in the order they ran, the host's log pace ``paces[i]`` in block ``i``: each run's service
    its shape's (drawn by the block's ``mix`` row, evenly without one) times the pace, lognormal ``jitter``."""
    out = []
    for i, pace in enumerate(paces):
        p = mix[i] if mix is not None else np.full(len(shape_ms), 1 / len(shape_ms))
        shape = rng.choice(len(shape_ms), size=runs, p=p)
        service = np.asarray(shape_ms)[shape] * np.exp(pace + rng.normal(0, jitter, runs))
        out.append(PaceBlock(1e9 * i, service, shape))
    return out


def block_spread(blocks: Sequence[PaceBlock], per_rate: int) -> float:
    """√2 × the pooled sd of log block medians, each against the other blocks at its rate (``per_rate`` blocks in
    a row at one rate): one block's spread, on raw service times."""
    medians = np.log([float(np.median(b.service_ms)) for b in blocks]).reshape(-1, per_rate)
    return math.sqrt(2 * float(np.sum((medians - medians.mean(axis=1, keepdims=True)) ** 2))
                     / (medians.size - medians.shape[0]))


def test_which_shapes_a_block_drew_is_not_the_hosts_pace():
    """Three shapes (1, 2.5 and 6 ms) on a steady host, drawn unevenly (some blocks mostly the slow one): each
    block's raw median reads the draw as the host, a spread of tens of percent; read against each shape's own
    median, the search's mean pace is known within a percent or two."""
    rng = np.random.default_rng(5)
    mix = rng.dirichlet([0.4, 0.4, 0.4], size=40)
    blocks = blocks_of(rng, np.zeros(40), runs=30, shape_ms=(1.0, 2.5, 6.0), mix=mix)
    term, old = drift_of(blocks), block_spread(blocks, per_rate=8)
    assert term < 0.02, term
    assert old > 5 * term and old > 0.2, (old, term)


def test_a_host_whose_pace_moves_over_the_search_widens_the_term():
    """The pace a slow swing of ±15 % over the search's 40 blocks, against a steady host (both with 2 % of noise a
    block): the batches' means move with it, and the term is several times the steady one's."""
    swing = 0.15 * np.sin(2 * math.pi * np.arange(40) / 40)
    steady, moving = [], []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        steady.append(drift_of(blocks_of(rng, rng.normal(0, 0.02, 40))))
        moving.append(drift_of(blocks_of(rng, swing + rng.normal(0, 0.02, 40))))
    assert min(moving) > 0.05, moving
    assert min(moving) > 3 * max(steady), (moving, steady)


def test_a_pace_that_swings_block_to_block_averages_out_over_the_search():
    """White noise in the pace (sd 10 % a block): the term is √2 × the standard error of the mean of the blocks,
    √2 × 0.10 / √n, and narrows as the search holds more blocks; one block's spread would stay at √2 × 0.10."""
    def term(n: int) -> float:
        return float(np.median([drift_of(blocks_of(rng, rng.normal(0, 0.10, n))) for _ in range(20)]))

    rng = np.random.default_rng(9)
    for n in (10, 40):
        want = math.sqrt(2) * 0.10 / math.sqrt(n)
        assert want / 1.6 < term(n) < want * 1.6, (n, term(n), want)
    assert term(40) < 0.7 * term(10)


def test_the_blocks_are_read_in_the_order_they_ran_not_the_order_given():
    """A pace that climbs over the search, handed over shuffled: the same term as in order, and wider than the
    same blocks had they run in the shuffled order (each batch then holds some of every part of the climb)."""
    rng = np.random.default_rng(4)
    blocks = blocks_of(rng, np.linspace(-0.15, 0.15, 32))
    shuffled = [blocks[i] for i in rng.permutation(len(blocks))]
    assert drift_of(shuffled) == pytest.approx(drift_of(blocks))
    relabelled = [PaceBlock(float(i), b.service_ms, b.shape) for i, b in enumerate(shuffled)]
    assert drift_of(blocks) > 1.5 * drift_of(relabelled)


def test_too_few_blocks_or_runs_for_batches():
    """Under two blocks: not had (nan). Two to five: the blocks taken as independent, √2 × sd / √n. A block of
    fewer than 3 runs has no pace; a shape of fewer than 5 runs has no median, and its runs are left out."""
    rng = np.random.default_rng(2)
    assert math.isnan(drift_of([])) and math.isnan(drift_of(blocks_of(rng, [0.0])))
    paces = [0.0, 0.05, -0.03, 0.1]
    four = blocks_of(rng, paces, jitter=0.0)
    assert drift_of(four) == pytest.approx(math.sqrt(2) * float(np.std(paces, ddof=1)) / 2)
    short = PaceBlock(5e9, np.array([9.0, 9.0]), np.array([0, 0]))  # two runs: no pace of its own
    assert drift_of([*four, short]) == pytest.approx(drift_of(four))
    assert math.isnan(drift_of([four[0], short]))
    rare = PaceBlock(6e9, np.array([2.0, 2.0, 50.0, 50.0, 50.0, 50.0]), np.array([0, 0, 7, 7, 7, 7]))
    assert drift_of([*four, rare]) == pytest.approx(drift_of(four))  # shape 7's 4 runs out: 2 runs left
    assert math.isnan(drift_of([PaceBlock(0.0, np.array([3.0, 0.0, math.nan]), np.array([0, 0, 0]))] * 2))


def test_a_host_whose_pace_moves_more_widens_the_interval():
    rng = np.random.default_rng(1)
    calm = drift_of(blocks_of(rng, rng.normal(0, 0.02, 24)))
    rough = drift_of(blocks_of(rng, rng.normal(0, 0.15, 24)))
    assert rough > 3 * calm
    a = rerun_interval(100.0, tail=0.03, drift=calm, bracket=0.03)
    b = rerun_interval(100.0, tail=0.03, drift=rough, bracket=0.03)
    assert b.lo < a.lo < 100.0 < a.hi < b.hi


def test_the_interval_contains_its_estimate_at_its_confidence_and_names_what_it_lacks():
    iv = rerun_interval(250.0, tail=0.05, drift=0.1, bracket=math.nan)
    assert iv.contains(250.0) and iv.confidence == CONFIDENCE and iv.missing == ("bracket",)
    assert math.log(iv.hi / 250.0) == pytest.approx(1.6449 * math.hypot(0.05, 0.1), rel=1e-3)
    assert math.log(250.0 / iv.lo) == pytest.approx(math.log(iv.hi / 250.0))
    wider = rerun_interval(250.0, tail=0.05, drift=0.1, bracket=math.nan, confidence=0.99)
    assert wider.lo < iv.lo and wider.hi > iv.hi
    with pytest.raises(ValueError):
        rerun_interval(250.0, tail=0.1, drift=0.1, bracket=0.1, confidence=90)


def ar1(rng: np.random.Generator, n: int, sd: float, phi: float) -> np.ndarray:
    """A stationary pace of ``n`` blocks, ``sd`` each, correlated ``phi`` from one block to the next."""
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + rng.normal(0, sd * math.sqrt(1 - phi * phi))
    return x


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_reruns_from_a_known_drift_model_land_inside_at_about_the_stated_confidence():
    """The model the interval assumes, simulated: the host's pace stationary over minutes (sd 15 % a block,
    correlated 0.3 from one block to the next), each search's capacity resting on its own 32 blocks' mean pace (on
    a three-shape mix), searches minutes apart; the tail's sampling adds its own error and the bracket a uniform
    position. A search's interval should hold another search's capacity about 90 % of the time (reruns are
    generated, not assumed), and without the drift term clearly less often."""
    rng = np.random.default_rng(7)
    per_search_tail = 0.03  # each search's own error from its record
    true = 500.0
    caps, ivs, bare = [], [], []
    for _ in range(300):
        paces = ar1(rng, 32, 0.15, 0.3)
        blocks = blocks_of(rng, paces, runs=40, shape_ms=(1.0, 2.5, 6.0))
        width = math.log(1.1)
        offset = rng.uniform(0, width)  # where the grid put the bracket
        cap = true * math.exp(-float(paces.mean()) + rng.normal(0, per_search_tail))
        lo, hi = cap * math.exp(-offset), cap * math.exp(width - offset)
        ivs.append(rerun_interval(cap, tail=tail_sd(per_search_tail), drift=drift_of(blocks),
                                  bracket=bracket_sd(lo, hi)))
        bare.append(rerun_interval(cap, tail=tail_sd(per_search_tail), drift=0.0, bracket=bracket_sd(lo, hi)))
        caps.append(cap * math.exp(rng.uniform(-width / 2, width / 2)))  # the rerun's own place in its bracket
    assert ivs[0].tail_sd == pytest.approx(math.sqrt(2) * per_search_tail)

    def share(intervals: list[RerunInterval]) -> float:
        return float(np.mean([intervals[i].contains(caps[j]) for i in range(len(intervals)) for j in (i + 1, i - 1)
                              if 0 <= j < len(intervals)]))

    assert 0.84 <= share(ivs) <= 0.96, share(ivs)
    assert share(bare) < 0.8, share(bare)


def drift_of(blocks: list[PaceBlock]) -> float:
    """Term (b) alone, without its degrees of freedom."""
    return pace_drift(blocks)[0]


def test_the_t_quantile_matches_students_at_an_intervals_quantiles():
    from scipy import stats

    for dof in (3, 4, 7, 12, 30, 200):
        for p in (0.95, 0.975, 0.995) if dof >= 5 else (0.95, 0.975):  # 90, 95 and 99 % two-sided
            assert t_quantile(p, dof) == pytest.approx(float(stats.t.ppf(p, dof)), rel=0.01), (p, dof)
    assert t_quantile(0.95, math.inf) == pytest.approx(1.6449, rel=1e-4)


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_a_drift_read_from_few_batches_widens_to_students_t_where_it_dominates():
    """Drift the only large term (24 blocks of white pace, sd 15 %; a small tail, a tight bracket): its sd is read
    from eight batch means, and the normal quantile under-covers by what that estimate misses; Student's t at the
    Welch–Satterthwaite degrees of freedom brings reruns back to about the stated share. Where the drift is small
    beside the other terms, the interval is the normal one."""
    rng = np.random.default_rng(11)
    true, tail = 300.0, 0.005
    caps, with_t, normal = [], [], []
    for _ in range(400):
        paces = rng.normal(0, 0.15, 24)
        drift, dof = pace_drift(blocks_of(rng, paces, runs=30, shape_ms=(2.0,)))
        cap = true * math.exp(-float(paces.mean()) + rng.normal(0, tail))
        with_t.append(rerun_interval(cap, tail=tail_sd(tail), drift=drift, bracket=0.001, drift_dof=dof))
        normal.append(rerun_interval(cap, tail=tail_sd(tail), drift=drift, bracket=0.001))
        caps.append(cap)
    assert dof == 7

    def share(intervals: list[RerunInterval]) -> float:
        return float(np.mean([intervals[i].contains(caps[i + 1]) for i in range(len(intervals) - 1)]))

    assert share(normal) < share(with_t), (share(normal), share(with_t))
    assert 0.86 <= share(with_t) <= 0.95, share(with_t)
    small = rerun_interval(300.0, tail=0.05, drift=0.005, bracket=0.03, drift_dof=7)
    plain = rerun_interval(300.0, tail=0.05, drift=0.005, bracket=0.03)
    assert small.hi == pytest.approx(plain.hi, rel=1e-3)


def _flat_reruns(slope: float, use_slope: bool) -> float:
    """Share of reruns held, on a curve metric = m0 · (rate / r0) ** slope whose whole shape scales with the host's
    pace f (metric(rate) → f · metric(f · rate)): its capacity moves as f ** −(1 + 1 / slope), f the search's mean
    pace over its 20 blocks (white noise, sd 10 % a block)."""
    rng = np.random.default_rng(11)
    true = 100.0
    caps, ivs = [], []
    for _ in range(300):
        paces = rng.normal(0, 0.10, 20)
        cap = true * math.exp(-float(paces.mean()) * (1 + 1 / slope))
        lo, hi = cap / 1.05, cap * 1.05
        metric_lo, metric_hi = 20.0 * (lo / cap) ** slope, 20.0 * (hi / cap) ** slope  # crossing 20 ms at cap
        k = local_slope(lo, hi, metric_lo, metric_hi) if use_slope else math.nan
        assert not use_slope or k == pytest.approx(slope)
        iv = rerun_interval(cap, tail=0.0, drift=drift_of(blocks_of(rng, paces, runs=20)),
                            bracket=bracket_sd(lo, hi), slope=k)
        caps.append(cap)
        ivs.append(iv)
    held = [ivs[i].contains(caps[j]) for i in range(len(ivs)) for j in (i + 1, i - 1) if 0 <= j < len(ivs)]
    return float(np.mean(held))


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_a_flat_curve_moves_the_capacity_further_than_the_pace_and_the_interval_counts_it():
    """Where the SLO metric barely climbs with the rate (a tail set by wake-ups, not queueing), a small change of
    pace moves the capacity far: at slope 0.4, 3.5 × the pace. One for one, the interval held a rerun about half the
    time; scaled by the slope read between the bracket's ends, about 90 %."""
    assert drift_gain(math.nan) == 1.0 and drift_gain(4.0) == pytest.approx(1.25) and drift_gain(0.4) == 3.5
    assert drift_gain(-0.2) == drift_gain(0.0) == 11.0  # a flat or falling reading is capped, not infinite
    assert local_slope(100, 110, 20.0, 20.0) == 0.0 and math.isnan(local_slope(100, math.inf, 20.0, 30.0))
    one_for_one, scaled = _flat_reruns(0.4, use_slope=False), _flat_reruns(0.4, use_slope=True)
    assert one_for_one < 0.7, one_for_one
    assert 0.84 <= scaled <= 0.97, scaled
    iv = rerun_interval(100.0, tail=0.01, drift=0.02, bracket=0.01, slope=0.4)
    assert iv.flat and iv.drift_sd == pytest.approx(0.07) and iv.as_dict()["flat"] is True
    assert not rerun_interval(100.0, tail=0.01, drift=0.02, bracket=0.01, slope=3.0).flat


# ---- on a real model ------------------------------------------------------------------------------------------------
STAT = "cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\n"
PSI = "some avg10={avg10:.2f} avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def applied_profile(model: str, *flags: str) -> Profile:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    add_workload_args(p, session=True)
    args = p.parse_args([model, *flags])
    return apply_flags(Profile(), args, model)


@pytest.mark.integration
def test_a_search_carries_its_interval_the_hosts_noise_and_goodput(tmp_path: Path):
    """One real search: the interval holds the capacity, the host's noise is read over the whole search (a fake
    /proc rewritten after the first point: the values are the window's), each point's goodput is at most what it
    served, and the table names what was applied (``--threads 1``), not "defaults"."""
    model = make_matmul_model(tmp_path / "mm.onnx", n=256)
    proc = tmp_path / "proc"
    (proc / "pressure").mkdir(parents=True)
    (proc / "stat").write_text(STAT.format(user=1000, system=200, idle=5000, steal=100))
    (proc / "pressure" / "cpu").write_text(PSI.format(avg10=1.0, total=1_000_000))

    def later(search, point):  # 300 jiffies on, 30 of them stolen; the pressure total grew
        (proc / "stat").write_text(STAT.format(user=1150, system=230, idle=5090, steal=130))
        (proc / "pressure" / "cpu").write_text(PSI.format(avg10=1.0, total=1_200_000))

    slo = Slo("p99", 20.0)
    profile = applied_profile(model, "--dim", "batch=256", "--threads", "1")
    result = CapacitySearch(model, [profile], slo, budget_s=25, names=["defaults"], on_point=later,
                            noise_root=str(proc)).run()
    d = json.loads(json.dumps(result.as_dict()))
    [p] = d["profiles"]
    assert p["met"], ({k: v for k, v in p.items() if k != "points"}, p["points"], d["warnings"])
    lo, hi = p["interval"]
    assert lo <= p["capacity_per_s"] <= hi and p["interval_confidence"] == 0.9
    assert set(p["interval_terms"]) == {"tail_sd", "drift_sd", "bracket_sd", "stall_sd", "stall_moves",
                                        "stall_moves_from", "missing", "slope", "flat"}
    assert isinstance(p["interval_terms"]["flat"], bool)
    # the drift term is read from the blocks' runs (their start, service and shape), not left out
    assert "drift" not in p["interval_terms"]["missing"] and 0 < p["interval_terms"]["drift_sd"] < 0.5
    noise = d["host_noise"]
    assert noise["steal_pct"] == pytest.approx(10.0)
    assert 0 < noise["cpu_pressure_pct"] <= 100
    assert isinstance(noise["slow_share"], float) and 0 <= noise["slow_share"] < 1 and noise["slow_k"] == 3.0
    for q in p["points"]:
        assert q["goodput_per_s"] <= q["served_per_s"] and q["decided_by"] in ("measured", "long-run estimate",
                                                                                 "requests shed")
    assert p["applied"] == "threads 1, batch=256"
    text = format_result(result, plot=True)
    assert "90 % interval" in text and "steal 10.0 %" in text
    row = next(line for line in text.splitlines() if line.startswith("  0  "))
    assert "threads 1" in row and "defaults" not in row


@pytest.fixture
def env(tmp_path):
    from tests.test_cli import env as cli_env

    return cli_env.__wrapped__(tmp_path)


@pytest.mark.integration
def test_input_warnings_reach_capacitys_json_and_table(tmp_path, env):
    """An image model's free spatial axes left at 1: the headless run warns of it; capacity said warnings: []."""
    model = make_conv_model(tmp_path / "conv.onnx")
    r = ortop("capacity", model, "--threads", "1", "--slo", "p99=0.0001ms", "--budget", "6", "--json", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    said = "input 'x' axis 2 is left at 1, too small for a spatial axis"
    assert any(said in w for w in d["warnings"]), d["warnings"]
    assert any(said in n for n in d["profiles"][0]["input_notes"])
    assert d["host_noise"] is not None and set(d["host_noise"]) >= {"steal_pct", "cpu_pressure_pct", "slow_share"}
    r = ortop("capacity", model, "--threads", "1", "--slo", "p99=0.0001ms", "--budget", "6", "--no-plot", env=env)
    assert r.returncode == 0, r.stderr
    assert said in r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("  0  "))
    assert "threads 1" in row and "defaults" not in row


@pytest.mark.integration
def test_input_warnings_reach_compares_json(tmp_path, env):
    """compare builds its sessions on the same path: the same warning, once, however many profiles."""
    from tests.test_compare import profile_files

    model = make_conv_model(tmp_path / "conv.onnx")
    a, b = profile_files(tmp_path, one="[session]\nintra_op_num_threads = 1\n",
                         two="[session]\nintra_op_num_threads = 2\n")
    r = ortop("compare", model, a, b, "--budget", 2, "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    said = [w for w in json.loads(r.stdout)["warnings"] if "too small for a spatial axis" in w]
    assert len(said) == 2 and said[0].startswith("--dim height=VALUE")  # axes 2 and 3, each once


def _data(**profile):
    points = [{"rate_per_s": 100.0, "served_per_s": 100.0, "goodput_per_s": 99.5, "dropped": 0, "p50_ms": 2.0,
               "p99_ms": 8.16, "slo_ms": 8.16, "model_ms": [12.0, 10.5, 14.0], "decision": "not met",
               "decided_by": "long-run estimate", "order": 1},
              {"rate_per_s": 80.0, "served_per_s": 80.0, "goodput_per_s": 80.0, "dropped": 0, "p50_ms": 2.0,
               "p99_ms": 5.0, "slo_ms": 5.0, "model_ms": [7.0, 6.0, 8.0], "decision": "met",
               "decided_by": "long-run estimate", "order": 0}]
    p = {"profile": "defaults", "applied": "threads 1", "capacity_per_s": 90.0, "interval": [75.0, 105.0],
         "interval_confidence": 0.9, "bracket": [80.0, 100.0], "met": True, "ceiling_per_s": 200.0,
         "input_notes": [], "note": None, "points": points, **profile}
    return {"model": "m.onnx", "slo": {"metric": "p99", "ms": 10.0}, "arrival": "poisson", "profiles": [p],
            "best": 0, "best_separated": True, "elapsed_s": 10.0, "budget_s": 20.0, "warnings": [],
            "host_noise": {"steal_pct": 1.5, "cpu_pressure_pct": 20.0, "slow_share": 0.008, "slow_k": 3.0,
                           "verdict": "the host's stalls alone put 0.8 % of runs over 3× their shape's median: a "
                                      "p99 SLO sits within the host's noise"}}


def test_the_text_curve_draws_each_capacity_inside_its_interval():
    from ortop.report.curve import text_curve

    lines = text_curve(_data()).splitlines()
    assert "● threads 1" in lines[0]  # the legend names what was applied, not "defaults"
    span = lines[-1]
    assert span.endswith("90 % interval") and span.index("├") < span.index("●") < span.index("┤")
    assert "├" not in text_curve(_data(), intervals=False)


@pytest.mark.slow
def test_the_report_says_the_interval_what_decided_each_point_goodput_and_the_hosts_noise():
    from ortop.report import capacity_page

    html = capacity_page(_data())
    assert "90 % interval 75.0–105/s" in html and "<td>75.0 … 105/s</td>" in html
    assert "decided by" in html and "long-run estimate" in html and "within the SLO /s" in html and "99.5" in html
    assert "steal 1.5 %" in html and "sits within the host" in html


@pytest.mark.slow
def test_a_flat_crossing_is_said_in_the_report_beside_its_interval():
    from ortop.report import capacity_page

    steep = capacity_page(_data(interval_terms={"slope": 4.0, "flat": False}))
    flat = capacity_page(_data(interval_terms={"slope": 0.3, "flat": True}))
    assert "flat:" not in steep
    assert "flat: the SLO metric barely climbs with the rate" in flat and "can land outside the interval" in flat
