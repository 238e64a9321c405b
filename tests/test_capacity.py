"""``ortop capacity``: the SLO, how a point is decided, and the search on a real model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ortop.engine.capacity import Point, Slo, grid, parse_slo, t95
from ortop.errors import UsageError
from tests.models import make_matmul_model
from tests.test_cli import one_error_line, ortop


@pytest.mark.parametrize("text, metric, ms", [("p99=50ms", "p99", 50.0), ("p95=20", "p95", 20.0),
                                               ("mean=10ms", "mean", 10.0), ("p99=0.05s", "p99", 50.0),
                                               ("P99.9 = 250us", "p999", 0.25)])
def test_slo_spellings(text, metric, ms):
    slo = parse_slo(text)
    assert slo.metric == metric and slo.ms == pytest.approx(ms)


@pytest.mark.parametrize("text, said", [("p99", "METRIC=VALUE"), ("p42=5ms", "one of"), ("p99=0ms", "positive"),
                                        ("p99=fast", "METRIC=VALUE")])
def test_bad_slos_are_usage_errors(text, said):
    with pytest.raises(UsageError, match=said):
        parse_slo(text)


def test_rates_meet_on_a_two_percent_grid():
    assert grid(100.0) == pytest.approx(grid(100.5))
    assert grid(104.0) / grid(100.0) == pytest.approx(1.02**2, rel=1e-9)
    assert t95(3) == pytest.approx(3.182) and t95(100) == 1.96


def blocks(point: Point, slo: Slo, shares_over: list[float], runs: int = 200, dropped: int = 0) -> None:
    for share in shares_over:
        n_over = int(round(share * runs))
        resp = np.r_[np.full(runs - n_over, slo.ms / 2), np.full(n_over, slo.ms * 2)]
        point.add(resp, 1.0, runs, dropped, slo)


def test_a_point_is_met_only_when_the_interval_of_the_share_over_the_slo_is_clear_of_it():
    slo = Slo("p99", 10.0)
    clear = Point(100.0)
    blocks(clear, slo, [0.0, 0.005, 0.0, 0.005])
    assert clear.decide(slo) == "met" and clear.interval[1] < 0.01
    over = Point(200.0)
    blocks(over, slo, [0.05, 0.06, 0.04, 0.05])
    assert over.decide(slo) == "not met" and over.interval[0] > 0.01
    near = Point(150.0)
    blocks(near, slo, [0.0, 0.02, 0.005, 0.015])  # mean 1 %: the interval straddles the SLO
    assert near.decide(slo) == "undecided" and near.interval[0] < 0.01 < near.interval[1]
    few = Point(100.0)
    blocks(few, slo, [0.0, 0.0])
    assert few.decide(slo) == "undecided"  # fewer than MIN_BLOCKS blocks never decide
    shed = Point(300.0)
    blocks(shed, slo, [0.0, 0.0, 0.0, 0.0], dropped=3)
    assert shed.decide(slo) == "not met"  # a shed request is a miss, whatever the percentile says


def test_a_mean_slo_is_judged_on_the_blocks_means():
    slo = Slo("mean", 10.0)
    p = Point(100.0)
    for m in (5.0, 6.0, 5.5, 6.5):
        p.add(np.full(100, m), 1.0, 100, 0, slo)
    assert p.decide(slo) == "met" and p.value(slo) == pytest.approx(5.75)


@pytest.mark.integration
def test_capacity_on_a_real_model_lies_below_its_ceiling_and_an_slo_below_the_floor_is_zero(tmp_path, env):
    model = make_matmul_model(tmp_path / "mm.onnx", n=256)
    r = ortop("capacity", model, "--dim", "batch=256", "--threads", "1", "--slo", "p99=20ms", "--budget", "25",
              "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["slo"] == {"metric": "p99", "ms": 20.0} and d["arrival"] == "poisson"
    (prof,) = d["profiles"]
    assert prof["met"] is True and d["best"] == 0
    lo, hi = prof["bracket"]
    assert 0 < lo == prof["capacity_per_s"] <= hi <= prof["ceiling_per_s"] * 1.02
    assert prof["points"] and {p["decision"] for p in prof["points"]} <= {"met", "not met", "undecided"}
    for p in prof["points"]:  # what was offered was served, up to the knee
        if p["decision"] == "met":
            assert p["served_per_s"] == pytest.approx(p["rate_per_s"], rel=0.15)
            assert p["slo_ms"] <= 20.0 * 1.5
    assert d["elapsed_s"] <= 25 * 1.3
    zero = ortop("capacity", model, "--dim", "batch=256", "--threads", "1", "--slo", "p99=0.001ms", "--budget", "10",
                 env=env, timeout=60)
    assert zero.returncode == 0, zero.stderr
    assert "no rate meets it (capacity 0)" in zero.stdout and "met: false" in zero.stdout
    assert math.isfinite(prof["floor_ms"])


@pytest.mark.integration
def test_capacity_refuses_a_bad_slo_in_one_line(tmp_path, env):
    model = make_matmul_model(tmp_path / "mm.onnx", n=8)
    assert "--slo" in one_error_line(ortop("capacity", model, "--slo", "p42=1ms", env=env))


@pytest.fixture
def env(tmp_path):
    from tests.test_cli import env as cli_env

    return cli_env.__wrapped__(tmp_path)


@pytest.mark.integration
def test_tune_on_capacity_needs_a_p50_or_p99_slo(tmp_path, env):
    model = make_matmul_model(tmp_path / "mm.onnx", n=8)
    assert "needs --slo" in one_error_line(ortop("tune", model, "--objective", "capacity", env=env))
    assert "races on p50 or p99" in one_error_line(ortop("tune", model, "--objective", "capacity", "--slo",
                                                         "mean=5ms", env=env))


@pytest.mark.integration
def test_tune_on_capacity_races_at_the_baselines_knee(tmp_path, env):
    model = make_matmul_model(tmp_path / "mm.onnx", n=256)
    r = ortop("tune", model, "--dim", "batch=256", "--objective", "capacity", "--slo", "p99=20ms", "--budget", "40",
              "--space", "spinning", "--json", env=env, timeout=150)
    assert r.returncode == 0, r.stderr
    assert "racing on p99 under Poisson arrivals at" in r.stderr
    d = json.loads(r.stdout)
    assert d["objective"] == "p99"
    w = d["baseline"]["profile"]["workload"]  # the baseline raced: the start profile at 90 % of its capacity
    assert w["arrival"] == "poisson" and w["rate_hz"] > 0
