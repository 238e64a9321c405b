"""``ortop capacity``: the SLO, how a point is decided, and the search on a real model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ortop.config.profile import Profile
from ortop.engine.answers.capacity import MET_MIN_S, POOL_MIN_S, CapacityResult, Point, Search
from ortop.errors import UsageError
from ortop.measure.bracket import grid
from ortop.measure.queue import predict_knee, queue_model, server_times, simulate
from ortop.measure.rerun import rerun_interval
from ortop.measure.slo import Slo, parse_slo
from ortop.measure.stats import t95
from tests.models import make_matmul_model
from tests.test_bench import ctrl_c_once, start_ortop
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
    assert few.decide(slo) == "undecided"  # fewer than POINT_MIN_BLOCKS blocks never decide
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
    assert hi is not None and 0 < lo <= prof["capacity_per_s"] <= hi <= prof["ceiling_per_s"] * 1.02
    assert prof["points"] and {p["decision"] for p in prof["points"]} <= {"met", "not met", "undecided"}
    # listed by rate, each saying when it was measured: every place once
    assert sorted(p["order"] for p in prof["points"]) == list(range(len(prof["points"])))
    for p in prof["points"]:  # what was offered was served, up to the knee
        if p["decision"] == "met":
            assert p["served_per_s"] == pytest.approx(p["rate_per_s"], rel=0.15)
            if p["decided_by"] == "measured":
                assert p["slo_ms"] <= 20.0 * 1.5
            else:  # met by the queue model's whole interval: a host stall in its blocks may lift the p99 read
                #    from them (CI: 56 ms over one such point), which a rerun need not see; the model says why
                assert p["decided_by"] == "long-run estimate" and p["model_ms"][2] < 20.0, p
    assert d["elapsed_s"] <= 25 + 2  # the budget holds: no round starts that would overrun it (+ a block's drain)
    zero = ortop("capacity", model, "--dim", "batch=256", "--threads", "1", "--slo", "p99=0.001ms", "--budget", "10",
                 env=env, timeout=60)
    assert zero.returncode == 0, zero.stderr
    assert "no rate meets p99 ≤ 0.001 ms (capacity 0)" in zero.stdout and "met: false" in zero.stdout
    assert "points (" not in zero.stdout  # none measured: no empty section
    assert math.isfinite(prof["floor_ms"])


@pytest.mark.integration
def test_a_point_that_meets_the_slo_measures_on_until_its_search_has_seen_six_seconds(tmp_path, monkeypatch):
    """A search that met its first point from 2 s of record had mostly seen none of the host's stalls: a met point
    goes on measuring (while it has time) until the search holds POOL_MIN_S of record. Each met point is seen as
    the search reports it; an SLO loose enough for every rate under the ceiling keeps the first point met (at
    p99 ≤ 20 ms the first point, at 0.9 × the ceiling, read a long-run p99 up to 27 ms in 3 of 6 runs here)."""
    from ortop.config.profile import merge
    from ortop.engine.answers.capacity_search import CapacitySearch

    for xdg in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(xdg, str(tmp_path / xdg))
    model = make_matmul_model(tmp_path / "mm.onnx", n=256, batch=256)
    seen: list[tuple[str, float, float]] = []  # decision, the point's record, the search's record

    def record(p: Point) -> float:
        return sum(b["wall_s"] for b in p.blocks)

    # the rule is about met points: a host stall can make a search meet none (CI once saw its first point missed at
    # p99 <= 60 ms on a 1 ms model, and the next ones undecided; on a host whose hypervisor took up to 3 % of the CPU,
    # three searches in a row missed every point at 60 ms), so the SLO is far above any stall and up to three
    # searches are run for one that meets a point
    for _ in range(3):
        seen.clear()
        search = CapacitySearch(model, [merge(Profile(), **{"session.intra_op_num_threads": 1})], Slo("p99", 250.0),
                                budget_s=30, point_max_s=10,
                                on_point=lambda s, p: seen.append((p.decision, record(p),
                                                                   sum(map(record, s.points.values())))))
        search.run()
        met = [x for x in seen if x[0] == "met"]
        if met:
            break
    assert met, seen
    _, own, pooled = met[0]
    # on the old rule the first met point stopped after 2 s, the search with it
    assert own >= MET_MIN_S and pooled >= POOL_MIN_S > MET_MIN_S, seen


@pytest.mark.integration
def test_capacity_refuses_a_bad_slo_in_one_line(tmp_path, env):
    model = make_matmul_model(tmp_path / "mm.onnx", n=8)
    assert "--slo" in one_error_line(ortop("capacity", model, "--slo", "p42=1ms", env=env))


def test_a_run_judged_against_an_slo_counts_requests_over_it_and_shed_ones():
    from ortop.engine.live.headless import slo_summary

    lat = np.arange(1, 101, dtype=float)  # 1 … 100 ms
    d = slo_summary(parse_slo("p99=95ms"), lat)
    assert d["over"] == 5 and d["requests"] == 100 and d["share_over"] == 0.05
    assert d["value_ms"] == pytest.approx(np.quantile(lat, 0.99)) and d["met"] is False
    ok = slo_summary(parse_slo("p90=95ms"), lat)
    assert ok["met"] is True and ok["over"] == 5
    shed = slo_summary(parse_slo("p50=1000ms"), lat, shed=3)  # every kept request within it, but 3 were shed
    assert shed["over"] == 3 and shed["requests"] == 103 and shed["met"] is False
    mean = slo_summary(parse_slo("mean=50ms"), lat)
    assert mean["value_ms"] == pytest.approx(50.5) and mean["met"] is False
    none = slo_summary(parse_slo("p99=1ms"), np.zeros(0))
    assert none["met"] is False and none["share_over"] is None and none["value_ms"] is None


@pytest.mark.integration
def test_a_headless_run_judges_its_requests_against_an_slo(tmp_path, env):
    model = make_matmul_model(tmp_path / "mm.onnx", n=8)
    common = ("--headless", "--duration", "1", "--threads", "1", "--arrival", "poisson", "--rate", "200")
    r = ortop(model, *common, "--json", "--slo", "p99=1s", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    s = d["slo"]
    assert s["metric"] == "p99" and s["ms"] == 1000.0 and s["met"] is True and s["over"] == 0
    assert s["requests"] == d["runs"] + d["arrivals"]["dropped"] > 0
    assert s["value_ms"] == pytest.approx(d["latency_ms"]["p99"], rel=1e-3)
    tight = ortop(model, *common, "--slo", "p50=1us", env=env)  # the table: one line, not met
    assert tight.returncode == 0, tight.stderr
    (line,) = [x for x in tight.stdout.splitlines() if x.startswith("slo ")]
    assert "p50 ≤ 0.001 ms: NOT MET" in line and "100.00 %" in line
    assert "--headless" in one_error_line(ortop(model, "--slo", "p99=1s", env=env))
    assert "--slo" in one_error_line(ortop(model, "--headless", "--slo", "p42=1s", env=env))


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
    # 80 s: the knee gets a quarter, 20 s (with 15 s, one search in five here ended "none met": its first point
    # landed over the knee in a stall and no lower one fitted). 64 rows, about 1 ms: at 256 a host that ran at half
    # its usual pace put the no-load p99 itself over 20 ms, and then there is no knee to race at. Stopped (ctrl-C)
    # once the race at the knee has begun: how a race ends is the tuner's (tests/test_tuner.py), and the result so
    # far carries the knee and the profile raced at it
    proc = start_ortop("tune", model, "--dim", "batch=64", "--objective", "capacity", "--slo", "p99=20ms",
                       "--budget", "80", "--space", "spinning", "--json", env=env)
    code, out, err = ctrl_c_once(proc, lambda line: line.startswith("[") and "] racing " in line)
    assert "racing on p99 under Poisson arrivals at" in err, err
    assert code == 130, err
    d = json.loads(out)
    assert d["stopped"] is True and d["objective"] == "p99"
    knee = d["knee"]
    assert knee["met"] is True and knee["rate_per_s"] == pytest.approx(0.9 * knee["bracket_per_s"][0], rel=1e-3)
    w = d["baseline"]["profile"]["workload"]  # the baseline raced: the start profile at 90 % of its capacity
    assert w["arrival"] == "poisson" and w["rate_hz"] == pytest.approx(knee["rate_per_s"], abs=0.051)


def test_the_simulated_queue_is_lindleys_recursion_and_the_multi_server_path_agrees_with_one_server():
    rng = np.random.default_rng(3)
    svc, gaps = rng.exponential(4.0, 3000), rng.exponential(1.0, 3000)
    fast = simulate(svc, gaps, 150.0, servers=1)
    # the same queue by the textbook loop: wait = max(0, previous wait + previous service − gap)
    arrive = np.cumsum(gaps) * (1e3 / 150.0)
    wait, slow = 0.0, []
    for n in range(svc.size):
        if n:
            wait = max(0.0, wait + svc[n - 1] - (arrive[n] - arrive[n - 1]))
        slow.append(wait + svc[n])
    assert np.allclose(fast, slow)
    # a one-server heap gives the same; two servers wait less
    assert np.allclose(simulate(svc, gaps, 150.0, servers=2)[:1], svc[:1])
    assert simulate(svc, gaps, 150.0, servers=2).mean() < fast.mean()


@pytest.mark.parametrize("metric, ms", [("p99", 40.0), ("mean", 12.0)])
def test_the_predicted_knee_matches_the_mm1_queue(metric, ms):
    """Exponential service (mean 4 ms, μ = 250/s) under Poisson arrivals is M/M/1: response time is exponential
    with rate μ − λ, so p99 = ln(100) / (μ − λ) and the mean 1 / (μ − λ)."""
    service = np.random.default_rng(0).exponential(4.0, 20000)
    mu = 1e3 / service.mean()
    want = mu - (math.log(100) if metric == "p99" else 1.0) / (ms / 1e3)
    got = predict_knee(service, Slo(metric, ms), n=60000)
    assert got == pytest.approx(want, rel=0.06)
    # two replicas, each its own queue at half the rate: twice the traffic
    assert predict_knee(service, Slo(metric, ms), queues=2, n=60000) == pytest.approx(2 * got, rel=1e-9)
    # an SLO under the service time alone: nothing meets it
    assert predict_knee(service, Slo("p99", 1.0)) == 0.0
    assert math.isnan(predict_knee(np.array([1.0, 2.0]), Slo("p99", 10.0)))


def test_the_search_looks_at_the_prediction_first_then_steps_ten_percent_then_halves():
    s = Search(0, "a", Profile(), ceiling_per_s=1000.0, hi=grid(1000.0), predicted_per_s=400.0)
    assert s.next_rate() == grid(400.0)
    s.points[grid(400.0)] = Point(grid(400.0))
    s.lo = grid(400.0)                      # met: step up 10 %
    up = grid(grid(400.0) * 1.1)
    assert s.next_rate() == up
    s.points[up] = Point(up)
    s.hi = up                               # missed: a 10 % bracket, done
    assert s.done()
    s.hi = grid(600.0)                      # a wider one: both ends measured, halve
    assert s.lo < s.next_rate() < s.hi and s.done() is False
    s.lo = s.hi / 1.15
    assert not s.done()
    s.lo = s.hi / 1.09
    assert s.done()                         # within 10 %
    down = Search(0, "b", Profile(), ceiling_per_s=1000.0, hi=grid(1000.0), predicted_per_s=400.0)
    down.points[grid(400.0)] = Point(grid(400.0))
    down.hi = grid(400.0)                   # the prediction missed: step down 10 %
    assert down.next_rate() == grid(grid(400.0) / 1.1)
    none = Search(0, "c", Profile(), ceiling_per_s=1000.0, hi=grid(1000.0))
    assert none.next_rate() == grid(500.0)  # no prediction: bisection from the ceiling


def test_a_step_heads_for_the_prediction_from_the_last_points_service_times_within_10_percent_and_2x():
    s = Search(0, "a", Profile(), ceiling_per_s=2000.0, hi=grid(2000.0), predicted_per_s=400.0)
    s.points[grid(400.0)] = Point(grid(400.0))
    s.lo = grid(400.0)
    s.predicted_per_s = 600.0                   # service under that load says the knee is further up
    assert s.next_rate() == grid(600.0)
    s.predicted_per_s = 5000.0                  # far further: at most twice the last rate met
    assert s.next_rate() == grid(2 * grid(400.0))
    s.predicted_per_s = 405.0                   # just above: at least a 10 % step
    assert s.next_rate() == grid(grid(400.0) * 1.1)
    d = Search(0, "b", Profile(), ceiling_per_s=2000.0, hi=grid(2000.0), predicted_per_s=1200.0)
    d.points[grid(1200.0)] = Point(grid(1200.0))
    d.hi = grid(1200.0)                         # missed by far: the service under load predicts 700/s
    d.predicted_per_s = 700.0
    assert d.next_rate() == grid(700.0)
    d.predicted_per_s = 100.0                   # at most halved
    assert d.next_rate() == grid(grid(1200.0) / 2)


def test_a_point_meets_the_slo_only_after_two_seconds_recorded():
    slo = Slo("p99", 10.0)
    p = Point(100.0)
    for k in range(1, 8):
        p.add(np.full(100, 2.0), 0.3, 100, 0, slo)   # nothing near the SLO, 0.3 s a block
        assert p.decide(slo) == ("met" if k * 0.3 >= MET_MIN_S else "undecided"), k
    assert p.decision == "met"
    missed = Point(100.0)
    for _ in range(4):
        missed.add(np.full(100, 20.0), 0.3, 100, 0, slo)
    assert missed.decide(slo) == "not met"          # a miss needs no such wait


def test_a_measured_point_scales_the_simulated_curve_before_it_is_crossed():
    """M/M/1 (mean 4 ms): p99 = ln 100 / (μ − λ). A point measured at 150/s reading 2× the queue's p99 there (a
    host whose stalls come in runs) moves the knee to where the queue's p99 is half the SLO."""
    service = np.random.default_rng(0).exponential(4.0, 20000)
    mu = 1e3 / service.mean()
    slo = Slo("p99", 100.0)
    plain = predict_knee(service, slo, n=60000)
    simulated_at_150 = math.log(100) / (mu - 150.0) * 1e3
    same = predict_knee(service, slo, n=60000, at=(150.0, simulated_at_150))
    assert same == pytest.approx(plain, rel=0.04)                  # the point agrees with the queue: no change
    worse = predict_knee(service, slo, n=60000, at=(150.0, 2 * simulated_at_150))
    want = mu - math.log(100) / (slo.ms / 2 / 1e3)                 # where the queue's p99 is 50 ms
    assert worse == pytest.approx(want, rel=0.06) and worse < plain
    better = predict_knee(service, slo, n=60000, at=(150.0, simulated_at_150 / 2))
    assert better > plain
    assert predict_knee(service, slo, at=(150.0, math.nan)) == pytest.approx(predict_knee(service, slo))


def _served(arrive_ns: np.ndarray, service_ns: np.ndarray, gap_ns: np.ndarray, caller: int = 0) -> np.ndarray:
    """A single server's rows as the worker writes them (start, service, -, -, caller, queue, shape, idle): FIFO,
    each run starting ``gap_ns`` after the server could take it (a wake-up late, the loop's own work)."""
    rows, free = [], 0
    for a, s, g in zip(arrive_ns.tolist(), service_ns.tolist(), gap_ns.tolist()):
        start = max(a, free) + g
        rows.append((start, s, -1, -1, caller, start - a, 0, max(0, start - free)))
        free = start + s
    return np.array(rows, dtype=np.int64)


def test_server_times_replayed_on_the_same_arrivals_give_back_the_responses_measured():
    rng = np.random.default_rng(5)
    n = 2000
    arrive = np.cumsum(rng.exponential(5e6, n)).astype(np.int64)        # 200/s
    service = rng.normal(4e6, 3e5, n).astype(np.int64)
    gap = rng.exponential(2e5, n).astype(np.int64)                      # 0.2 ms between runs on average
    gap[0] = 0  # the first request's gap is not known (no earlier end to count from)
    rows = _served(arrive, service, gap)
    t = server_times(rows)
    assert np.allclose(t[:, 0], service / 1e6) and np.allclose(t[1:, 1], gap[1:] / 1e6)
    # idle: the request came after its server's previous end (then its gap is a wake-up)
    ends = (rows[:, 0] + rows[:, 1])[:-1]
    assert np.array_equal(t[1:, 2] > 0, arrive[1:] > ends) and 0.05 < t[:, 2].mean() < 0.5  # 80 % load
    # Lindley with service + gap on the same arrivals is the measured response of every request
    measured = (rows[:, 1] + rows[:, 5]) / 1e6
    replay = simulate(t[:, 0] + t[:, 1], np.diff(np.r_[0, arrive]) / 1e6, 1e3)  # "1000/s": the gaps in ms as given
    assert np.allclose(replay, measured, rtol=0, atol=1e-6)
    assert not np.allclose(simulate(t[:, 0], np.diff(np.r_[0, arrive]) / 1e6, 1e3), measured, atol=0.1)
    # ... and so is the queue that adds the gap as a wake-up only to requests that found the server idle
    queued = np.where(t[:, 2] > 0, 0.0, t[:, 1])
    woke = simulate(t[:, 0] + queued, np.diff(np.r_[0, arrive]) / 1e6, 1e3, wake_ms=t[:, 1] - queued)
    assert np.allclose(woke, measured, rtol=0, atol=1e-6)
    # two callers' rows come one caller after the other; each is its own server
    other = _served(arrive + 1, service, gap, caller=1)
    both = server_times(np.concatenate([rows, other]))
    assert np.allclose(np.sort(both[:, 1]), np.sort(np.r_[t[:, 1], server_times(other)[:, 1]]))


def mm1(rng: np.random.Generator, n: int = 300, mean_ms: float = 4.0) -> np.ndarray:
    """server_times for ``n`` requests of exponential service, no gaps: with Poisson arrivals, an M/M/1 queue."""
    return np.column_stack([rng.exponential(mean_ms, n), np.zeros(n), np.zeros(n)])


def test_the_queue_model_matches_the_mm1_queue_and_its_interval_holds_it():
    """Service exponential of mean 4 ms (μ = 250/s) under Poisson arrivals: M/M/1, p99 = ln 100 / (μ − λ)."""
    busy = [mm1(np.random.default_rng(k), 1500) for k in range(4)]  # 6 000 measured, in 4 blocks
    mu = 1e3 / np.concatenate(busy)[:, 0].mean()
    for rate in (120.0, 170.0):
        est, lo, hi = queue_model(busy, Slo("p99", 50.0), rate)
        want = math.log(100) / (mu - rate) * 1e3
        assert est == pytest.approx(want, rel=0.08) and lo < want < hi, (rate, est, lo, hi, want)
        assert hi / lo < 1.6
        mean, _, _ = queue_model(busy, Slo("mean", 50.0), rate)
        assert mean == pytest.approx(1e3 / (mu - rate), rel=0.08)
    assert queue_model(busy, Slo("p99", 50.0), 1.01 * mu)[0] == math.inf  # over the ceiling: no long run
    assert math.isnan(queue_model([np.ones((20, 3))], Slo("p99", 50.0), 100.0)[0])  # too few to model
    # two callers on one queue wait less than one; two replicas at twice the rate are one queue at the rate
    one, _, _ = queue_model(busy, Slo("p99", 50.0), 170.0)
    assert queue_model(busy, Slo("p99", 50.0), 170.0, servers=2)[0] < one
    assert queue_model(busy, Slo("p99", 50.0), 340.0, queues=2)[0] == pytest.approx(one, rel=1e-9)


def test_a_wake_up_costs_only_the_requests_that_find_the_server_idle():
    """4 ms of service, and 1 ms late whenever the thread slept: at 200/s a queue charging that 1 ms to every
    request would be at 100 % load and grow without bound; charged only after idle, the queue keeps up."""
    n = 4000
    idle = (np.arange(n) % 3 == 0).astype(float)  # a third of the requests found the server idle
    times = np.column_stack([np.full(n, 4.0), idle * 1.0, idle])
    est, _, hi = queue_model([times], Slo("p99", 100.0), 200.0)
    assert math.isfinite(hi) and 4.0 < est < 100.0
    every = np.column_stack([np.full(n, 4.0), np.full(n, 1.0), np.zeros(n)])  # the same 1 ms between every run
    assert queue_model([every], Slo("p99", 100.0), 200.0)[0] == math.inf
    # at light load nearly every request finds the server idle and pays the wake-up
    light, _, _ = queue_model([times], Slo("mean", 100.0), 20.0)
    assert light == pytest.approx(5.0, abs=0.2)


def test_blocks_that_saw_no_clump_do_not_meet_an_slo_the_queue_misses_in_the_long_run():
    """At 80 % load (M/M/1, μ = 250/s at 200/s) the long-run p99 is ln 100 / 50/s = 92 ms. Four short blocks
    whose requests all came in under a 50 ms SLO — a calm stretch of arrivals — used to be "met": their
    share over the SLO was 0 with no spread. With the busy times they measured, the point is not met."""
    slo = Slo("p99", 50.0)
    rng = np.random.default_rng(2)
    calm = Point(200.0)
    for _ in range(4):
        calm.add(np.full(300, 12.0), 0.6, 300, 0, slo, busy=mm1(rng))
    assert calm.decide(slo) == "not met"
    mu = 1e3 / np.concatenate(calm.busy)[:, 0].mean()  # the sample's own service rate (about 250/s)
    assert calm.model[1] > slo.ms and calm.estimate(slo) == pytest.approx(math.log(100) / (mu - 200) * 1e3, rel=0.1)
    assert calm.value(slo) == 12.0  # what was measured is still what the curve shows
    light = Point(100.0)  # 40 % load: p99 = ln 100 / 150/s = 31 ms, clear of the SLO
    for _ in range(4):
        light.add(np.full(300, 9.0), 0.6, 300, 0, slo, busy=mm1(rng))
    assert light.decide(slo) == "met" and light.model[2] < slo.ms
    seen = Point(100.0)  # requests seen over the SLO in numbers are believed, whatever the model says
    for _ in range(4):
        seen.add(np.r_[np.full(270, 9.0), np.full(30, 80.0)], 0.6, 300, 0, slo, busy=mm1(rng))
    assert seen.decide(slo) == "not met"


def test_a_point_models_the_slow_spells_its_search_saw_at_other_rates():
    """The host's slow spells are the host's, not one rate's: a point whose own 2.4 s were calm, but whose search
    met a spell at another rate, models the long run with that spell in it, and no longer meets the SLO.

    Calm: 4 ms service (25 % load at 62.5/s: p99 well under 30 ms). The spell, seen at another rate: 300 requests
    of which a run of 64 took 40 ms each, which queued at 62.5/s builds a backlog far over the SLO."""
    slo = Slo("p99", 30.0)
    n = 300
    calm = np.column_stack([np.full(n, 4.0), np.full(n, 0.1), np.zeros(n)])
    spell = calm.copy()
    spell[100:164, 0] = 40.0
    alone, pooled = Point(62.5), Point(62.5)
    for p in (alone, pooled):
        for _ in range(4):
            p.add(np.full(n, 5.0), 0.6, n, 0, slo, busy=calm)
    assert alone.decide(slo) == "met"
    assert pooled.decide(slo, others=[spell]) != "met" and pooled.model[0] > alone.model[0] * 2
    search = Search(0, "s", Profile())
    search.points = {62.5: alone, 80.0: Point(80.0, busy=[spell])}
    assert [b is spell for b in search.server_times(besides=62.5)] == [True]
    assert len(search.server_times()) == 5


def test_a_point_whose_server_fell_behind_does_not_model_the_rates_below_it():
    """An overloaded point's costs are a backlog's: pooled into a calm point's model they would judge it over
    the SLO. Calm: 1 ms per request at 300/s (30 % load), 30 % of requests queued. Overloaded: 800 requests at
    791/s, every one queued, 3 ms each (791 × 3 ms = 2.4 s of work a second)."""
    slo = Slo("p99", 8.0)
    rng = np.random.default_rng(3)
    n = 300
    calm = np.column_stack([np.full(n, 0.95), np.full(n, 0.05), (rng.random(n) > 0.3).astype(float)])
    backlog = np.column_stack([np.full(800, 2.9), np.full(800, 0.1), np.zeros(800)])
    behind = Point(791.0)
    behind.add(np.full(800, 94.0), 1.0, 800, 0, slo, busy=backlog)
    kept_up = Point(300.0)
    for _ in range(4):
        kept_up.add(np.full(n, 2.0), 0.6, n, 0, slo, busy=calm)
    assert behind.overloaded() and not kept_up.overloaded()
    stall = calm.copy()
    stall[100:164, 0] = 40.0  # a stall of the host: 64 requests at 40 ms, its pace otherwise kept
    stalled = Point(300.0)
    stalled.add(np.full(n, 2.0), 0.6, n + 5, 5, slo, busy=stall)
    assert not stalled.overloaded()  # shed requests and a mean past the ceiling, but the host's spell: pooled
    search = Search(0, "s", Profile())
    search.points = {300.0: kept_up, 791.0: behind}
    assert search.pooled(besides=300.0) == [] and search.server_times(besides=300.0) == []
    assert search.recorded_s() == pytest.approx(2.4)  # the overloaded point's second is not the host seen
    assert kept_up.decide(slo, others=search.server_times(besides=300.0)) == "met"
    polluted = Point(300.0)
    for _ in range(4):
        polluted.add(np.full(n, 2.0), 0.6, n, 0, slo, busy=calm)
    assert polluted.decide(slo, others=[backlog]) == "not met"  # what pooling the backlog would have said


def decided_result(points: dict[int, dict[float, float]], slo: Slo,
                   names: tuple[str, ...] = ("p0", "p1")) -> CapacityResult:
    """A result with ``points[i] = {rate: latency}`` per profile, each point decided, brackets set from them."""
    searches = []
    for i, pts in points.items():
        s = Search(i, names[i], Profile(), ceiling_per_s=1000.0, floor_ms=4.0, hi=1000.0)
        for rate, ms in pts.items():
            p = s.points.setdefault(rate, Point(rate))
            for _ in range(4):
                p.add(np.full(100, ms), 0.5, 100, 0, slo)
            if p.decide(slo) == "met":
                s.lo = max(s.lo, rate)
            else:
                s.hi = min(s.hi, rate)
        searches.append(s)
    return CapacityResult("/models/m.onnx", slo, searches, 30.0, 60.0)


def test_the_cli_names_a_best_profile_only_when_the_brackets_stay_apart():
    from ortop.cli.capacity import format_result

    slo = Slo("p99", 20.0)
    apart = decided_result({0: {200.0: 8.0, 300.0: 30.0}, 1: {400.0: 10.0, 600.0: 40.0}}, slo)
    # 200…400 against 300…600
    close = decided_result({0: {200.0: 8.0, 400.0: 30.0}, 1: {300.0: 10.0, 600.0: 40.0}}, slo)
    assert apart.separated(1) and not close.separated(1)
    assert "\nbest for p99 ≤ 20 ms: p1, 533/s\n" in format_result(apart, plot=False)
    said = format_result(close, plot=False)
    assert "best for" not in said
    assert ("\nahead for p99 ≤ 20 ms: p1, 500/s, but their rerun intervals or their brackets overlap (or lie within "
            "10 %): not shown to serve more (a longer --budget gives points time to decide)") in said
    assert apart.as_dict()["best_separated"] is True and close.as_dict()["best_separated"] is False


def test_brackets_set_by_an_undecided_point_do_not_separate_two_profiles_unless_far_apart():
    """An undecided point moves its bracket by its estimate, but it straddles the SLO: the A/A runs whose
    brackets stayed apart each had an end set by one within 5 % of the other's."""
    slo = Slo("p99", 20.0)
    res = decided_result({0: {200.0: 8.0, 380.0: 30.0}, 1: {400.0: 10.0, 600.0: 40.0}}, slo)
    assert not res.separated(1)  # its rerun interval overlaps the other's: not apart, whatever the brackets say
    res.searches[0].interval = lambda slo, confidence=0.9: None  # type: ignore[method-assign]  # the bracket rule alone
    # a decided miss at 380/s, a decided met at 400/s, and a rerun of the best expected above 380/s
    near, wide = (rerun_interval(450.0, tail=0.0, drift=0.0, bracket=b) for b in (0.1, 0.2))
    assert near.lo > 380.0 > wide.lo
    res.searches[1].interval = lambda slo, confidence=0.9: near  # type: ignore[method-assign]
    assert res.best() == 1 and res.separated(1)
    # the same miss where a rerun of the best may land below it: a miss the best's rerun might share is the host's
    res.searches[1].interval = lambda slo, confidence=0.9: wide  # type: ignore[method-assign]
    assert not res.separated(1)
    res.searches[1].interval = lambda slo, confidence=0.9: near  # type: ignore[method-assign]
    res.searches[0].points[380.0].decision = "undecided"  # its time ran out with the interval across the SLO
    assert res.searches[0].hi == 380.0 and not res.separated(1)  # 380 and 400: within the search's 10 %
    res.searches[0].hi = 360.0
    res.searches[0].points[360.0] = Point(360.0, decision="undecided")
    assert res.separated(1)  # 360 × 1.1 ≤ 400: apart by more than the search narrows a bracket
    res.searches[0].hi = 380.0
    del res.searches[0].points[360.0]
    res.searches[0].points[390.0] = Point(390.0, decision="not met")
    res.searches[1].points[400.0].decision = "undecided"  # the best's own end undecided too
    assert not res.separated(1)


def test_a_profile_that_meets_no_rate_is_served_less_only_below_where_a_rerun_of_the_best_lands():
    """As in A/A runs on a host whose stalls decided the p99: one copy met a rate the other missed, or missed with
    its server nearly idle ("meets at no rate"). A miss where a rerun of the best may land too is the host's: no
    "best" is shown. Below the best's rerun interval, it is."""
    slo = Slo("p99", 20.0)
    res = decided_result({0: {35.0: 30.0}, 1: {40.0: 10.0, 80.0: 40.0}}, slo)  # a decided miss below a met rate
    wide, near = (rerun_interval(56.8, tail=0.0, drift=0.0, bracket=b) for b in (0.3, 0.05))
    assert wide.lo < 35.0 < near.lo
    res.searches[1].interval = lambda slo, confidence=0.9: wide  # type: ignore[method-assign]
    assert res.best() == 1 and not res.separated(1)
    res.searches[1].interval = lambda slo, confidence=0.9: near  # type: ignore[method-assign]
    assert res.separated(1)
    res.searches[1].interval = lambda slo, confidence=0.9: wide  # type: ignore[method-assign]
    res.searches[0].note = "a point with its server nearly idle missed it"
    assert not res.separated(1)
    res.searches[1].interval = lambda slo, confidence=0.9: near  # type: ignore[method-assign]
    assert res.separated(1)
    res.searches[0].note, res.searches[0].points = "its no-load p99 lies above the SLO", {}
    res.searches[1].interval = lambda slo, confidence=0.9: wide  # type: ignore[method-assign]
    assert res.separated(1)  # its service time alone misses: it serves nothing, whatever the best's interval


# ---- what the answers rest on: the no-load figure, a point's requests, offered and served ------------------------
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99, 0.999])
def test_a_percentiles_order_statistic_interval_holds_it_at_95_percent_and_is_the_tightest_that_does(q):
    from scipy.stats import binom

    from ortop.measure.slo import quantile_ranks

    for n in (*range(1, 160), 367, 368, 1000, 5000):
        lo, hi = quantile_ranks(n, q)
        below_lo = binom.cdf(lo - 1, n, q) if lo >= 1 else 0.0  # P[x(lo) > the quantile]
        upto_hi = binom.cdf(hi - 1, n, q) if hi <= n else 1.0   # P[x(hi) ≥ the quantile]
        assert upto_hi - below_lo >= 0.95, (n, q, lo, hi)
        assert lo == n or binom.cdf(lo, n, q) > 0.025           # one rank higher would miss it too often
        assert hi <= 1 or binom.cdf(hi - 2, n, q) < 0.975       # one rank lower too
    # a p99 of 100 runs: a lower end (the 97th run) and no upper one; an upper one from 368 runs on
    assert quantile_ranks(100, 0.99) == (97, 101) and quantile_ranks(367, 0.99)[1] == 368
    assert quantile_ranks(368, 0.99)[1] == 368


def test_the_no_load_figure_says_when_its_interval_lies_above_the_slo_and_when_it_straddles_it():
    from ortop.measure.slo import metric_figure

    slo = Slo("p99", 100.0)
    runs = np.r_[np.full(97, 120.0), np.full(3, 500.0)]  # 100 runs, every one over the SLO: the 97th is 120
    f = metric_figure(slo, runs)
    assert f.runs == 100 and f.needed == 100 and f.enough and f.confidence == 0.95
    assert f.lo == 120.0 and f.hi == math.inf and f.above(slo) and not f.straddles(slo)
    assert f.text() == "500 ms (95 % interval 120–∞ ms, 100 runs)"
    assert f.as_dict() == {"metric": "p99", "ms": 500.0, "interval": [120.0, None], "confidence": 0.95,
                           "runs": 100, "runs_needed": 100, "enough": True}
    # the slowest of twenty runs is over the SLO, the rest under: the p99 of 20 is no figure to stop on
    few = metric_figure(slo, np.r_[np.full(19, 60.0), 155.0])
    assert few.ms > slo.ms and few.straddles(slo) and not few.enough
    assert few.text().endswith("20 runs of the 100 a p99 needs)")
    calm = metric_figure(slo, np.linspace(10.0, 50.0, 1000))
    assert calm.below(slo) and calm.lo < calm.ms < calm.hi < 50.0
    mean = metric_figure(Slo("mean", 10.0), np.full(50, 4.0))
    assert mean.needed == 10 and mean.lo == mean.hi == 4.0 and mean.below(Slo("mean", 10.0))


def test_a_point_is_judged_only_once_it_holds_the_requests_its_metric_needs():
    """A p99 needs 100 requests, a p90 10: a point of 60 requests, every one far under the SLO, is not judged for a
    p99 (its p99 is its slowest run) and stays undecided — thin, and so marked — while for a p90 it is met."""
    p99, p90 = Slo("p99", 100.0), Slo("p90", 100.0)
    for slo, judged in ((p99, False), (p90, True)):
        p = Point(5.0)
        for _ in range(6):
            p.add(np.full(10, 20.0), 3.0, 10, 0, slo, window_s=2.0)
        assert p.decide(slo) == ("met" if judged else "undecided") and p.thin(slo) is not judged
        assert p.as_dict(slo)["enough"] is judged and p.as_dict(slo)["requests_needed"] == slo.runs_needed()
    assert Point(5.0).decision_text(p99) == "undecided"  # nothing measured yet: nothing to mark
    thin = Point(5.0)
    for _ in range(6):
        thin.add(np.full(10, 20.0), 3.0, 10, 0, p99, window_s=2.0)
    thin.decide(p99)
    assert thin.decision_text(p99) == "not judged: 60 of the 100 requests a p99 needs"
    shed = Point(5.0)
    shed.add(np.full(10, 20.0), 3.0, 13, 3, p99, window_s=2.0)
    shed.add(np.full(10, 20.0), 3.0, 10, 0, p99, window_s=2.0)
    assert shed.decide(p99) == "not met" and not shed.thin(p99)  # a shed request decides at once


def test_served_is_counted_over_the_same_requests_as_offered_and_is_never_above_it():
    """Offered: the requests that arrived in the blocks' windows, over those windows; served: the same requests
    less the shed, over the time from each window's start to the last of them served. A Poisson draw lands
    above or below the rate asked; served follows what arrived, never above it."""
    slo = Slo("p99", 100.0)
    p = Point(2.3)
    rng = np.random.default_rng(1)
    for _ in range(8):
        arrived = int(rng.poisson(2.3 * 1.5))
        shed = int(rng.integers(0, 2)) if arrived else 0
        p.add(np.full(arrived - shed, 50.0), 1.5 + float(rng.uniform(0, 0.4)), arrived, shed, slo, window_s=1.5)
    assert p.offered_per_s() == pytest.approx(p.arrived / 12.0)
    assert p.served_per_s() <= p.offered_per_s() and p.goodput_per_s() <= p.served_per_s()
    d = p.as_dict(slo)
    assert d["served_per_s"] <= d["offered_per_s"] and d["arrived"] == p.runs + p.dropped
    # a paced point's last requests are served up to a response time after its window: served reads below
    # offered, yet its server kept up (80 ms a request at 10/s: 80 % busy); at 120 ms a request it could not
    def costs(ms: float) -> np.ndarray:
        return np.column_stack([np.full(15, ms), np.zeros(15), np.zeros(15)])

    paced, behind = Point(10.0), Point(10.0)
    for _ in range(4):
        paced.add(np.full(15, 150.0), 1.5 + 0.25, 15, 0, slo, busy=costs(80.0), window_s=1.5)
        behind.add(np.full(15, 900.0), 1.5 + 1.2, 15, 0, slo, busy=costs(120.0), window_s=1.5)
    assert paced.kept() and paced.served_per_s() < 0.95 * paced.offered_per_s()
    assert not behind.kept()
    shed = Point(10.0)
    shed.add(np.full(14, 80.0), 1.5, 15, 1, slo, busy=costs(80.0)[:14], window_s=1.5)
    assert not shed.kept()


def test_a_profile_of_ort_defaults_plus_flags_is_named_by_what_the_flags_set():
    from ortop.config.profile import merge
    from ortop.engine.answers.capacity import applied, label

    one = merge(Profile(), **{"session.intra_op_num_threads": 1})
    assert applied(one) == "threads 1" and applied(Profile()) == ""
    assert label("defaults", "threads 1") == "threads 1" and label("defaults", "") == "defaults"
    assert label("one.toml", "threads 1") == "one.toml"
    s = Search(0, "defaults", one, applied=applied(one))
    assert s.label() == "threads 1" and s.as_dict(Slo("p99", 10.0))["profile"] == "threads 1"
