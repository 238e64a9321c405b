"""``ortop capacity --certify RATE``: MLPerf Server's early-stopping rule run on a real model in a real worker —
certified, violated and undecided with their exit codes, bad input in one line, a worker's death."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ortop.engine.certify import blocks_clump_factor
from ortop.measure.certify import clump_factor, early_stopping, min_queries
from tests.models import make_matmul_model
from tests.test_bench import killed, start_ortop
from tests.test_cli import one_error_line, ortop
from tests.test_traffic import env  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> str:
    """x [batch, 64] @ W: well under a millisecond a run at batch 16 on one thread."""
    return make_matmul_model(tmp_path_factory.mktemp("certify") / "mm.onnx", n=64)


def certify(model: str, *args, env, timeout: float = 120):  # noqa: F811
    return ortop("capacity", model, "--dim", "batch=16", "--threads", 1, *args, env=env, timeout=timeout)


def test_clumps_are_read_block_by_block():
    """Overs at the end of one block and the start of the next are two clumps, not one: each block's queue drained
    before the next began."""
    a = np.array([False] * 50 + [True] * 4)
    b = np.array([True] * 4 + [False] * 50)
    assert blocks_clump_factor([a, b]) == pytest.approx(4.0)
    assert clump_factor(np.concatenate([a, b])) == pytest.approx(8.0)  # what reading across blocks would give
    assert blocks_clump_factor([np.zeros(10, dtype=bool)]) == 1.0 and blocks_clump_factor([]) == 1.0
    # every request over in every block: one clump a block, and two blocks prove the violation
    every = [np.ones(150, dtype=bool)] * 2
    v = early_stopping(300, 300, 0.99, clump=blocks_clump_factor(every))
    assert v.status == "violated"


@pytest.mark.integration
def test_a_rate_far_below_capacity_with_a_loose_slo_is_certified(small_model, env, tmp_path):  # noqa: F811
    report = tmp_path / "cert.html"
    r = certify(small_model, "--slo", "p99=250ms", "--certify", 100, "--min-duration", 3, "--budget", 60, "--json",
                "--report", report, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    c = d["certification"]
    assert d["exit_code"] == 0 and c["verdict"] == "certified"
    assert c["rate_per_s"] == 100 and c["percentile"] == 0.99 and c["confidence"] == 0.99
    assert c["duration_s"] >= 3 and c["min_duration_s"] == 3
    # the rule's own arithmetic on the counts the run reports
    over = math.ceil(c["over_slo"] / c["clump_factor"] - 1e-9)
    assert c["requests"] >= c["needed"] >= min_queries(0.99, overshoot=0)
    assert c["over_slo"] <= 0.01 * c["requests"] and c["needed_more"] == 0
    assert early_stopping(c["requests"], c["over_slo"], clump=c["clump_factor"]).status == "certified"
    assert c["needed"] >= min_queries(0.99, overshoot=over)
    # it ended once both the rule and the minimum duration were met: not at the budget
    assert d["elapsed_s"] < 45 and "minimum duration was reached" in c["ended"]
    assert {"steal_pct", "cpu_pressure_pct", "slow_share", "verdict"} <= set(c["host_noise"])
    assert c["host_noise"]["slow_share"] is not None
    page = report.read_text()
    assert "Certification" in page and "Certified:" in page and "MLPerf asks 600 s" in page
    assert f">{c['requests']}<" in page and "noise over the run" in page


@pytest.mark.integration
def test_an_slo_below_the_service_time_is_violated_well_before_the_minimum_duration(small_model, env):  # noqa: F811
    r = certify(small_model, "--slo", "p99=0.001ms", "--certify", 100, "--min-duration", 60, "--budget", 120,
                "--json", env=env)
    assert r.returncode == 5, r.stderr
    d = json.loads(r.stdout)
    c = d["certification"]
    assert d["exit_code"] == 5 and c["verdict"] == "violated"
    assert c["over_slo"] == c["requests"] > 0
    assert c["duration_s"] < 15 and d["elapsed_s"] < 30  # proven after a block or two, not at 60 s
    text = certify(small_model, "--slo", "p99=0.001ms", "--certify", 100, "--min-duration", 60, "--budget", 120,
                   env=env)
    assert text.returncode == 5, text.stderr
    assert text.stdout.strip().splitlines()[-1].startswith("violated: p99 ≤ 0.001 ms at 100/s — ")


@pytest.mark.integration
def test_a_tiny_budget_leaves_the_rule_undecided_with_the_requests_it_still_needs(small_model, env):  # noqa: F811
    r = certify(small_model, "--slo", "p99=250ms", "--certify", 40, "--min-duration", 1, "--budget", 4, "--json",
                env=env)
    assert r.returncode == 6, r.stderr
    d = json.loads(r.stdout)
    c = d["certification"]
    assert d["exit_code"] == 6 and c["verdict"] == "undecided" and "budget" in c["ended"]
    assert c["needed"] > c["requests"] > 0 and c["needed_more"] == c["needed"] - c["requests"]
    assert d["elapsed_s"] <= 4 + 2
    text = certify(small_model, "--slo", "p99=250ms", "--certify", 40, "--min-duration", 1, "--budget", 4, env=env)
    assert text.returncode == 6, text.stderr
    last = text.stdout.strip().splitlines()[-1]
    assert last.startswith("undecided: needs ") and "more requests" in last, last


@pytest.mark.integration
@pytest.mark.parametrize(("args", "said"), [
    (("--slo", "p99=5ms", "--certify", "-5"), "--certify must be a rate > 0"),
    (("--slo", "p99=5ms", "--certify", "abc"), "--certify 'abc'"),
    (("--slo", "p99=5ms", "--certify", "10", "--min-duration", "0"), "--min-duration must be > 0"),
    (("--slo", "p99=5ms", "--certify", "10", "--min-duration", "60", "--budget", "30"), "could never certify"),
    (("--slo", "mean=5ms", "--certify", "10"), "percentile SLO"),
])
def test_bad_certify_input_is_one_line_exit_2(small_model, env, args, said):  # noqa: F811
    assert said in one_error_line(ortop("capacity", small_model, *args, env=env))


@pytest.mark.integration
def test_a_worker_that_dies_twice_ends_the_certification_with_what_was_measured(env, tmp_path):  # noqa: F811
    model = make_matmul_model(tmp_path / "mm.onnx", n=256)
    proc = start_ortop("capacity", model, "--dim", "batch=256", "--threads", 1, "--slo", "p99=1s", "--certify", 200,
                       "--min-duration", 60, "--budget", 90, "--json", env=env)
    code, d, err = killed(proc, again=True, cpu_s=3.0)
    assert code == 4, err
    c = d["certification"]
    assert d["exit_code"] == 4 and "signal 9" in d["fault"] and len(d["restarts"]) == 1
    assert c["verdict"] == "undecided" and c["requests"] > 0  # what was measured before the deaths is kept
