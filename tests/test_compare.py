"""Interleaved comparisons on real workers: ``ortop compare`` as a user runs it, and the live history's verdicts
(sequential rows stay unverified; ``Monitor.verify`` interleaves the two and stores an interval on the row)."""

from __future__ import annotations

import json
import math

import pytest

from ortop.config import profile as P
from ortop.config.profile import Profile
from ortop.engine.live.monitor import Monitor
from ortop.engine.live.snapshot import RowVerdict
from ortop.measure.compare import METRICS
from tests.poll import wait_for
from tests.test_cli import env, one_error_line, ortop  # noqa: F401  (env is a fixture)

pytestmark = pytest.mark.integration

READY_S = 30.0
CONFIG_KEYS = {"profile", "runs", "p50_ms", "p99_ms", "throughput_per_s", "cpu_ms_per_run"}
COMPARISON_KEYS = {"baseline", "other", "metric", "change_pct", "ci_low_pct", "ci_high_pct", "significant", "verdict"}
VERDICTS = {"faster", "slower", "no difference", "undecided"}


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory) -> str:
    from ortop.model.demo import build_demo

    return str(build_demo(tmp_path_factory.mktemp("demo") / "demo.onnx"))


def profile_files(folder, **texts: str) -> tuple:
    """One profile file per keyword (its name, its TOML), in order."""
    for name, text in texts.items():
        (folder / f"{name}.toml").write_text(text)
    return tuple(folder / f"{name}.toml" for name in texts)


@pytest.fixture
def threads_profiles(tmp_path):
    return profile_files(tmp_path, one="[session]\nintra_op_num_threads = 1\n",
                         two="[session]\nintra_op_num_threads = 2\n")


def check_comparison_json(d: dict, n_configs: int, budget: float) -> None:
    assert {"model", "budget_s", "configs", "comparisons"} <= set(d)
    assert d["budget_s"] == budget
    assert len(d["configs"]) == n_configs
    for c in d["configs"]:
        assert CONFIG_KEYS <= set(c)
        assert c["runs"] > 0
        assert 0 < c["p50_ms"] <= c["p99_ms"]
        assert c["throughput_per_s"] > 0 and c["cpu_ms_per_run"] > 0
        # A closed loop: runs/s cannot beat one run per p50 by much (mean ≥ a good share of the median).
        assert c["throughput_per_s"] < 1.5 * 1000 / c["p50_ms"]
    comps = d["comparisons"]
    assert len(comps) == (n_configs - 1) * len(METRICS)  # one per other configuration and metric
    assert {(c["other"], c["metric"]) for c in comps} == {(i, m) for i in range(1, n_configs) for m in METRICS}
    for c in comps:
        assert COMPARISON_KEYS <= set(c)
        assert c["baseline"] == 0
        assert c["verdict"] in VERDICTS
        assert isinstance(c["significant"], bool)
        assert c["significant"] == (c["verdict"] in ("faster", "slower"))
        if c["ci_low_pct"] is not None:
            assert c["ci_low_pct"] <= c["change_pct"] <= c["ci_high_pct"]
        else:
            assert c["verdict"] == "undecided"


# ---- ortop compare ---------------------------------------------------------------------------------------------------
def test_compare_json_on_the_demo_model(demo_model, threads_profiles, env):  # noqa: F811
    a, b = threads_profiles
    r = ortop("compare", demo_model, a, b, "--budget", 4, "--json", "--objective", "throughput", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_comparison_json(d, 2, 4.0)
    assert d["model"] == demo_model
    assert [c["profile"] for c in d["configs"]] == [str(a), str(b)]
    assert d["comparisons"][0]["metric"] == "throughput"  # the objective first
    assert d["workers"] == 1  # both sessions in one worker
    assert d["elapsed_s"] <= 5.0
    # the budget is the most it takes: it ends sooner exactly when a look (8 pairs or more) settled the objective,
    # and then at that look; a verdict settled at the last look is dated at the budget's end
    main = d["comparisons"][0]
    assert d["stopped_early"] or d["elapsed_s"] >= 3.5, d  # not stopped by the rule: the budget was spent
    assert not d["stopped_early"] or (main["pairs"] >= 8 and d["decided_s"] == d["elapsed_s"]), d
    assert (d["decided_s"] is not None) == (main["verdict"] != "undecided"), d
    assert d["decided_s"] is None or d["decided_s"] <= d["elapsed_s"], d
    # Blocks alternate: each configuration ran about half of the time, in about as many blocks.
    assert d["blocks"] >= 12 and abs(d["configs"][0]["blocks"] - d["configs"][1]["blocks"]) <= 1
    mem = d["memory"]
    assert mem["rss_all_mib"] >= mem["rss_one_mib"] > 0 and mem["per_session_mib"] >= 0
    assert r.stderr == ""


@pytest.fixture
def batch_profiles(tmp_path):
    """One thread each; the first feeds 512 rows a run, the second 16: a difference no host load can hide."""
    one = "[session]\nintra_op_num_threads = 1\n\n[workload.dims]\n"
    return profile_files(tmp_path, rows512=one + "batch = 512\n", rows16=one + "batch = 16\n")


def test_compare_stops_once_the_objective_is_decided(tmp_path, batch_profiles, env):  # noqa: F811
    """A run that does 32 times less work: every pair of blocks agrees on the sign, however loaded the host, so the
    rule's first look (8 pairs) settles it and a 30 s budget ends there, with the interval of the deciding look.
    The event waited for is the command's end; nothing is timed against the wall clock."""
    from tests.models import make_matmul_model

    model = make_matmul_model(tmp_path / "free.onnx", n=256)
    a, b = batch_profiles
    budget = 30.0
    r = ortop("compare", model, a, b, "--budget", budget, "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_comparison_json(d, 2, budget)
    p50 = d["comparisons"][0]
    assert p50["metric"] == "p50" and p50["verdict"] == "faster" and p50["ci_high_pct"] < -50, p50
    assert p50["ci_low_pct"] <= p50["change_pct"] <= p50["ci_high_pct"], p50
    assert d["stopped_early"] is True and d["decided_s"] == d["elapsed_s"] < budget, d
    # the result holds what the decision used: whole rounds, and the stricter level of one of the looks
    assert d["blocks"] % 2 == 0 and p50["pairs"] == d["blocks"] // 2 >= 8
    assert 0.99 <= p50["look_confidence"] < 1 and all(c["look_confidence"] == p50["look_confidence"]
                                                       for c in d["comparisons"])
    text = ortop("compare", model, a, b, "--budget", budget, env=env, timeout=120)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[1].startswith("decided after "), text.stdout
    assert f" s of {budget:g} s in " in text.stdout.splitlines()[1]


def test_compare_text_and_env_profiles_take_turns_in_two_workers(demo_model, tmp_path, env):  # noqa: F811
    """Profiles that differ in an environment knob need a process each: they take turns, block by block."""
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text("[session]\nintra_op_num_threads = 1\n")
    b.write_text("[session]\nintra_op_num_threads = 1\n\n[env]\nOMP_WAIT_POLICY = \"PASSIVE\"\n")
    r = ortop("compare", demo_model, a, b, "--budget", 3, env=env)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "2 workers taking turns" in text
    for head in ("runs", "p50 ms", "p99 ms", "runs/s", "CPU/run ms", f"{b} vs {a}", "memory: 2 workers"):
        assert head in text, text
    table = [ln.split() for ln in text.splitlines() if ln.strip().startswith(("0 ", "1 "))]
    assert [row[1] for row in table] == [str(a), str(b)] and all(int(row[2]) > 0 for row in table)
    verdicts = [ln for ln in text.splitlines() if ln.startswith((" *", "  ")) and "→" in ln]
    assert len(verdicts) == len(METRICS) and verdicts[0].startswith(" *p50")  # the objective first, marked
    assert r.stderr == ""


def test_compare_bad_input_is_one_line_and_exit_2(demo_model, threads_profiles, tmp_path, env):  # noqa: F811
    a, b = threads_profiles
    bad = tmp_path / "bad.toml"
    bad.write_text("[session]\nintra_op_threads = 2\n")
    cases = {
        "one profile": ([demo_model, a], "at least two profiles"),
        "no profile": ([demo_model], "PROFILE"),
        "unknown profile": ([demo_model, a, "no-such-profile"], "profile not found: no-such-profile"),
        "bad profile key": ([demo_model, a, bad], "intra_op_threads"),
        "budget 0": ([demo_model, a, b, "--budget", "0"], "--budget"),
        "budget nan": ([demo_model, a, b, "--budget", "nan"], "--budget"),
        "budget text": ([demo_model, a, b, "--budget", "soon"], "--budget"),
        "missing model": ([tmp_path / "nope.onnx", a, b], "not found"),
        "bad objective": ([demo_model, a, b, "--objective", "speed"], "--objective"),
        "bad --dim": ([demo_model, a, b, "--dim", "nosuch=2"], "nosuch"),
    }
    for case, (args, needle) in cases.items():
        r = ortop("compare", *args, env=env)
        line = one_error_line(r, 2)
        assert needle in line, (case, line)
        assert r.stdout == "", case


def test_compare_run_time_failure_exits_1(broadcast_model, tmp_path, env):  # noqa: F811
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text("[session]\nintra_op_num_threads = 1\n")
    b.write_text("[session]\nintra_op_num_threads = 2\n")
    r = ortop("compare", broadcast_model, a, b, "--dim", "N=2", "--dim", "M=3", "--budget", 1, env=env)
    line = one_error_line(r, 1)
    assert "failed to build" in line


# ---- the live history's verdicts -------------------------------------------------------------------------------------
@pytest.fixture
def monitor(matmul_model):
    made: list[Monitor] = []

    def make(profile: Profile) -> Monitor:
        mon = Monitor(matmul_model, profile)
        made.append(mon)
        mon.start()
        assert mon.wait_ready(READY_S)
        return mon

    try:
        yield make
    finally:
        for mon in made:
            mon.stop()


def _one_thread() -> Profile:
    return P.merge(Profile(), **{"session.intra_op_num_threads": 1})


def _applied(mon: Monitor, profile: Profile, runs: int = 300) -> int:
    cid = mon.apply(profile)
    wait_for(lambda: mon.snapshot().config_id == cid and mon.snapshot().runs >= runs, 20, f"#{cid} measured")
    return cid


def test_reapplying_the_same_profile_is_never_called_faster_or_slower(monitor):
    start = _one_thread()
    mon = monitor(start)
    wait_for(lambda: mon.snapshot().runs >= 300, 10, "the start measured")
    for _ in range(2):
        _applied(mon, start)
    history = mon.snapshot().history
    assert len(history) == 3
    assert history[0].verdict == ""  # nothing before the first row
    for row in history[1:]:
        v = row.verdict
        assert isinstance(v, RowVerdict)
        assert v.kind == "unverified", v
        assert v.kind not in ("faster", "slower")
        assert v.short.endswith("% unverified") and "one after the other" in v.text
        assert not v.comparisons
    d = history[1].as_dict()
    assert d["verdict"]["kind"] == "unverified" and d["verdict"]["against"] == history[0].config_id


def test_verify_interleaves_and_stores_a_verdict_with_an_interval(monitor):
    start = _one_thread()
    mon = monitor(start)
    wait_for(lambda: mon.snapshot().runs >= 300, 10, "the start measured")
    cid = _applied(mon, P.merge(start, **{"session.intra_op_num_threads": 2}))
    pid = mon.worker_pid()
    fut = mon.verify(cid, seconds=3.0)
    seen = wait_for(lambda: mon.snapshot().verifying, 5, "the verification in the snapshot")
    assert seen.config_id == cid and seen.against_id == cid - 1 and seen.budget_s == 3.0
    # a snapshot taken while it runs says so in its state: the two are read together
    during = wait_for(lambda: (x := mon.snapshot()).verifying is not None and x.verifying.blocks >= 4 and x, 15,
                      "four blocks verified")
    assert during.state == "verifying", during.state
    rv = fut.result(timeout=30)
    assert isinstance(rv, RowVerdict) and rv.metric == "p50"
    assert {c.metric for c in rv.comparisons} == set(METRICS)
    main = next(c for c in rv.comparisons if c.metric == "p50")
    assert rv.kind == main.verdict, (rv, main)  # the row's verdict is the one on its metric
    assert main.pairs >= 6
    assert math.isfinite(main.ci_low_pct) and math.isfinite(main.ci_high_pct)
    assert main.ci_low_pct <= main.change_pct <= main.ci_high_pct
    assert "CI" in rv.text
    s = mon.snapshot()
    assert s.verifying is None
    assert s.history[-1].config_id == cid and s.history[-1].verdict == rv
    assert [h.config_id for h in s.history] == [cid - 1, cid]  # the rebuilt sessions are not history rows
    # Back to the configuration that was live, in the same worker.
    assert s.config_id == cid and mon.worker_pid() == pid
    runs = s.runs
    wait_for(lambda: mon.snapshot().runs > runs + 50 and mon.snapshot().state == "measuring", 10, "live again")
    assert s.history[-1].as_dict()["verdict"]["comparisons"][0]["metric"] in METRICS


def _folding_model(path, n: int = 384) -> str:
    """y = x @ (W @ W): the product of two initializers is folded into one constant when the graph is optimized,
    and computed again in every run (n³ multiply-adds, some ms) when it is not."""
    import numpy as np
    from onnx import helper, numpy_helper

    from tests.models import _vi, model_of, save

    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((n, n)) / n).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["W", "W"], ["WW"]), helper.make_node("MatMul", ["x", "WW"], ["y"])]
    return save(model_of(nodes, [_vi("x", "float32", [1, n])], [_vi("y", "float32", [1, n])], [w]), path)


def test_verify_stops_once_the_metric_it_verifies_is_decided(tmp_path):
    """The live view's verification uses the same rule, on the metric the change is about (p50 here): a 30 s
    verification of a change no host load can hide (graph optimization back on, folding a product of two weights
    that every run otherwise computes) ends at one of the first looks, with that look's interval on the row. The
    event waited for is the verification's end; nothing is timed against the wall clock."""
    model = _folding_model(tmp_path / "folding.onnx")
    start = P.merge(_one_thread(), **{"session.graph_optimization_level": "disable"})
    mon = Monitor(model, start)
    mon.start()
    try:
        assert mon.wait_ready(READY_S)
        wait_for(lambda: mon.snapshot().runs >= 20, 20, "the start measured")
        cid = _applied(mon, P.merge(start, **{"session.graph_optimization_level": "all"}), runs=20)
        rv = mon.verify(cid, seconds=30.0).result(timeout=90)
        assert isinstance(rv, RowVerdict) and rv.metric == "p50" and rv.kind == "faster", rv
        main = next(c for c in rv.comparisons if c.metric == "p50")
        assert main.change_pct < -50, main
        assert main.look_confidence is not None and main.look_confidence >= 0.99 and main.pairs >= 8
        assert mon.snapshot().verifying is None
    finally:
        mon.stop()


def test_rows_with_different_workloads_are_not_comparable(monitor):
    start = _one_thread()
    mon = monitor(start)
    cid = _applied(mon, P.merge(start, **{"workload.rate_hz": 200.0}), runs=30)
    row = mon.snapshot().history[-1]
    assert row.verdict.kind == "not comparable" and "rate_hz" in row.verdict.text
    rv = mon.verify(cid).result(timeout=5)
    assert rv.kind == "not comparable" and "different workload" in rv.text
    assert mon.snapshot().verifying is None


def test_sessions_that_would_not_fit_in_memory_are_refused(matmul_model):
    from ortop.engine.bench import ab
    from ortop.engine.live import headless

    one = _one_thread()
    two = P.merge(one, **{"session.intra_op_num_threads": 2})
    with pytest.raises(ab.NotEnoughMemory, match=r"need about \d+ MiB .* available: compare fewer profiles"):
        headless.compare(matmul_model, [one, two], budget_s=1.0, per_session_hint=1 << 50)


def test_verify_pressed_again_adds_to_the_pairs_of_the_press_before(monitor):
    """``v`` twice on the same row: the second press adds its pairs to the first's (the row's verdict rests on both)
    and says so; each press spends its own, smaller share of α. The metric the user names is the one judged."""
    start = _one_thread()
    mon = monitor(start)
    wait_for(lambda: mon.snapshot().runs >= 300, 10, "the start measured")
    cid = _applied(mon, start)  # the same settings again: whatever the verdict, it needs pairs
    first = mon.verify(cid, seconds=2.0, metric="cpu").result(timeout=60)
    assert isinstance(first, RowVerdict) and first.metric == "cpu"
    before = next(c for c in first.comparisons if c.metric == "cpu").pairs
    assert before >= 1
    second = mon.verify(cid, seconds=2.0, metric="cpu").result(timeout=60)
    after = next(c for c in second.comparisons if c.metric == "cpu")
    assert after.pairs > before, (before, after)
    assert after.look_confidence is not None and after.look_confidence > 0.975  # the second press's share: ≤ 1.25 %
    said = [e.text for e in mon.snapshot().events if "adding to the" in e.text]
    assert said and f"adding to the {before} pairs measured before" in said[-1], said
    with pytest.raises(ValueError, match="unknown metric"):
        mon.verify(cid, metric="p42")


def test_a_paced_caller_s_verification_judges_cpu_per_run_by_default(monitor):
    """At a paced rate a run's latency is mostly the rate's: the verification judges what each run costs, as tune's
    objective does for such a caller."""
    paced = P.merge(_one_thread(), **{"workload.rate_hz": 50.0})
    mon = monitor(paced)
    wait_for(lambda: mon.snapshot().runs >= 40, 20, "the start measured")
    cid = _applied(mon, P.merge(paced, **{"session.intra_op_num_threads": 2}), runs=40)
    rv = mon.verify(cid, seconds=2.0).result(timeout=60)
    assert isinstance(rv, RowVerdict) and rv.metric == "cpu", rv
