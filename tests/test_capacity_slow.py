"""``ortop capacity`` and its certification on a model that runs about ten times a second (``make_slow_model``):
the no-load figure rests on the runs its percentile needs and carries its interval, "no rate meets" is a result
(exit 0) said only when that interval lies above the SLO, the settings set by flags are named, and no point serves
more than was offered to it."""

from __future__ import annotations

import json
import math

import pytest
from scipy.stats import binom, poisson

from tests.models import make_slow_model
from tests.test_cli import ortop

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory) -> str:
    return make_slow_model(tmp_path_factory.mktemp("slow") / "slow.onnx")


@pytest.fixture
def env(tmp_path):
    from tests.test_cli import env as cli_env

    return cli_env.__wrapped__(tmp_path)


def capacity(model: str, *args, env, timeout: float = 90):
    return ortop("capacity", model, "--threads", 1, *args, env=env, timeout=timeout)


def test_an_slo_far_below_the_no_load_p99_is_a_result_resting_on_a_hundred_runs(slow_model, env):
    """Two closed-loop blocks of this model hold about twenty runs, whose p99 is their slowest: the figure the
    search stops on now rests on at least the 100 runs a p99 needs, with its order-statistic interval, and "no
    rate meets" is printed as the answer, exit 0."""
    r = capacity(slow_model, "--slo", "p99=1ms", "--budget", 40, "--json", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["exit_code"] == 0 and d["best"] is None and not d["stopped"]
    (p,) = d["profiles"]
    assert p["profile"] == "threads 1" and p["applied"] == "threads 1"  # what was run, not "defaults"
    assert p["result"] == "no rate meets" and p["met"] is False and not p["points"]
    f = p["no_load"]
    assert f["metric"] == "p99" and f["runs"] >= f["runs_needed"] == 100 and f["enough"] is True
    lo, hi = f["interval"]
    assert f["confidence"] == 0.95 and lo is not None and 1.0 < lo <= f["ms"] and (hi is None or hi >= f["ms"])
    # the interval is the order statistics': a p99 of n runs has its upper end only from 368 runs on
    assert (hi is None) == (binom.cdf(f["runs"] - 1, f["runs"], 0.99) < 0.975)
    assert p["floor_ms"] == f["ms"] and "no rate meets p99 ≤ 1 ms (capacity 0)" in p["note"]
    assert f"{f['runs']:,} runs" in p["note"] and "95 % interval" in p["note"]
    assert f"threads 1: {p['note']}" in d["warnings"]
    assert d["elapsed_s"] < 40  # stopped after the closed loop, not at the budget


def test_the_same_result_in_the_table_exits_0_too(slow_model, env):
    r = capacity(slow_model, "--slo", "p99=1ms", "--budget", 40, "--no-plot", env=env)
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("  0  "))
    assert "threads 1" in row and "defaults" not in row and "95 % interval" in row and " runs)" in row
    assert "no rate meets p99 ≤ 1 ms (capacity 0)" in r.stdout and "Traceback" not in r.stderr


def test_every_point_serves_at_most_what_was_offered_and_is_judged_on_enough_requests(slow_model, env):
    """Offered and served count the same requests (those that arrived in the points' windows): served can never
    exceed offered, and offered is the Poisson draw of the rate asked over its windows. A p90 needs 10 requests: a
    point judged on fewer would be a handful of runs under another name."""
    r = capacity(slow_model, "--slo", "p90=2000ms", "--budget", 30, "--json", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    (p,) = d["profiles"]
    assert p["no_load"]["runs"] >= 10 and p["points"], (p, d["warnings"])
    for q in p["points"]:
        assert q["served_per_s"] <= q["offered_per_s"], q  # by construction: the same requests, a longer span
        assert q["arrived"] == q["runs"] + q["dropped"]
        window = q["arrived"] / q["offered_per_s"]
        low, high = poisson.ppf([0.0005, 0.9995], q["rate_per_s"] * window)
        assert low <= q["arrived"] <= high, q  # what arrived is the rate asked, within the Poisson draw's spread
        assert q["enough"] == (q["runs"] + q["dropped"] >= 10) and q["requests_needed"] == 10
        if q["decision"] != "undecided" and q["decided_by"] != "requests shed":
            assert q["enough"], q
        if not q["enough"]:
            assert q["decision"] == "undecided" and q["decided_by"] is None
    thin = {q["rate_per_s"] for q in p["points"] if not q["enough"]}
    assert not thin & set(p["bracket"]), (thin, p["bracket"])  # a thin point moves neither end of the bracket
    assert math.isfinite(p["ceiling_per_s"])


def test_a_certification_of_threads_1_names_threads_1(slow_model, env):
    r = capacity(slow_model, "--slo", "p99=400ms", "--certify", 2, "--min-duration", 2, "--budget", 8, "--json",
                 env=env)
    assert r.returncode in (0, 5, 6), r.stderr
    d = json.loads(r.stdout)
    assert d["profile"] == "threads 1" and d["applied"] == "threads 1"
    assert d["exit_code"] == r.returncode and d["certification"]["rate_per_s"] == 2
    text = capacity(slow_model, "--slo", "p99=400ms", "--certify", 2, "--min-duration", 2, "--budget", 8, env=env)
    assert text.returncode in (0, 5, 6), text.stderr
    assert "\nprofile  threads 1\n" in text.stdout and "defaults" not in text.stdout

