"""``ortop capacity --certify RATE``: MLPerf Server's early-stopping rule run on a real model in a real worker —
certified, violated and undecided with their exit codes, bad input in one line, a worker's death."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import threading
import time

import numpy as np
import pytest

from ortop.engine.answers.certify import blocks_clump_factor
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
    (("--slo", "p99=5ms", "--certify", "-5"), "argument --certify: must be a rate > 0 requests/s, got -5"),
    (("--slo", "p99=5ms", "--certify", "abc"), "argument --certify: expected a rate in requests/s, got 'abc'"),
    (("--slo", "p99=5ms", "--certify", "inf"), "argument --certify: must be a rate > 0"),
    (("--slo", "p99=5ms", "--certify", "10", "--min-duration", "0"), "argument --min-duration: must be > 0 seconds"),
    (("--slo", "p99=5ms", "--certify", "10", "--budget", "nan"), "argument --budget: must be > 0 seconds, got nan"),
    (("--slo", "p99=5ms", "--certify", "10", "--min-duration", "60", "--budget", "30"), "could never certify"),
    (("--slo", "mean=5ms", "--certify", "10"), "percentile SLO"),
    (("--slo", "p99=5ms", "--min-duration", "30"), "--min-duration is a certification's: it needs --certify"),
])
def test_bad_certify_input_is_one_line_exit_2(small_model, env, args, said):  # noqa: F811
    assert said in one_error_line(ortop("capacity", small_model, *args, env=env))


@pytest.mark.integration
@pytest.mark.sharing  # a fault or ctrl-C and the exit code: no time judged
def test_a_worker_that_dies_twice_ends_the_certification_with_what_was_measured(env, tmp_path):  # noqa: F811
    model = make_matmul_model(tmp_path / "mm.onnx", n=256)
    # 1500/s keeps the worker about a third busy, so its CPU time shows blocks measured within seconds (at 200/s it
    # took a minute to reach them); far under this model's ceiling, and the minimum duration keeps it undecided
    proc = start_ortop("capacity", model, "--dim", "batch=256", "--threads", 1, "--slo", "p99=1s", "--certify", 1500,
                       "--min-duration", 60, "--budget", 90, "--json", env=env)
    code, d, err = killed(proc, again=True, cpu_s=3.0)
    assert code == 4, err
    c = d["certification"]
    assert d["exit_code"] == 4 and "signal 9" in d["fault"] and len(d["restarts"]) == 1
    assert c["verdict"] == "undecided" and c["requests"] > 0  # what was measured before the deaths is kept


# ---- the capacity screen's C ---------------------------------------------------------------------------------------
class FakeCertify:
    """A certification over a model of the worker: ``over_every`` requests in each block of 150 are over the bound
    (0: none), the engine's own rule on the counts; it hands over one block, then waits until the test allows more
    or the run is stopped, so the screen can be watched while it certifies."""

    def __init__(self, over_every: int = 0) -> None:
        self.over_every = over_every
        self.calls: list[dict] = []
        self.go = threading.Event()

    def __call__(self, model_path, profile, slo, rate_per_s, *, min_duration_s, budget_s, name, stop, on_block):
        from ortop.engine.answers.certify import CertifyResult
        from ortop.measure.certify import Certification

        self.calls.append({"model_path": model_path, "profile": profile, "slo": slo, "rate": rate_per_s,
                           "min_duration_s": min_duration_s, "budget_s": budget_s, "name": name})
        flags: list[np.ndarray] = []

        def result(ended: str) -> CertifyResult:
            x = np.concatenate(flags)
            v = early_stopping(x.size, int(x.sum()), slo.quantile, clump=blocks_clump_factor(flags))
            seconds = 1.5 * len(flags)
            if v.status == "certified" and seconds < min_duration_s:
                v = dataclasses.replace(v, status="undecided")
            return CertifyResult(model_path, slo, name, Certification(rate_per_s, seconds, v), min_duration_s,
                                 budget_s, seconds, ended)

        block = np.zeros(150, dtype=bool)
        if self.over_every:
            block[::self.over_every] = True
        flags.append(block)
        on_block(result("running"))
        while not (self.go.is_set() or stop.is_set()):
            time.sleep(0.01)
        while not stop.is_set() and len(flags) < 40:
            flags.append(block)
            got = result("the rule certified and the minimum duration was reached")
            if got.verdict != "undecided":
                return got
        return result("stopped (ctrl-C)")


@pytest.mark.slow
async def test_C_after_a_search_certifies_the_chosen_rate_with_progress_and_its_verdict(tmp_path, monkeypatch):
    from ortop.tui.screens import capacity as screen_mod
    from ortop.tui.screens.capacity import CapacityScreen
    from tests.fakes import FakeMonitor
    from tests.poll import until
    from tests.test_tui_capacity import Factory, capacity_app, footer_label, text_of
    from tests.test_tui_tune import spy_pause_resume

    monkeypatch.setattr(screen_mod, "_host", lambda: (8, 4))
    fake = FakeCertify()
    monkeypatch.setattr(screen_mod, "real_certify", fake)
    monitor = FakeMonitor(n_configs=1)
    calls = spy_pause_resume(monitor)
    app = capacity_app(tmp_path, Factory(), monitor)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CapacityScreen)
        await pilot.press("C")  # before a search: nothing to certify yet, said so
        assert not fake.calls and "C certifies its rate once it has ended" in text_of(screen, "cap-detail")
        await pilot.press("l", "g")  # the next SLO preset: whichever it is, the verdict names it
        await until(pilot, lambda: screen.state == "done", "the search's result")
        assert footer_label(screen, "C") == "certify"
        res = screen.result
        row = screen.selected()
        chosen = res.searches[row.index]
        await pilot.press("C")
        await until(pilot, lambda: screen.certification is not None, "the first block's progress")
        (call,) = fake.calls
        assert call["rate"] == pytest.approx(0.9 * chosen.capacity(res.slo)) and call["name"] == chosen.name
        assert call["slo"] == res.slo and call["profile"] == chosen.profile
        assert call["model_path"] == monitor.model_path and call["min_duration_s"] == 60
        assert screen.running and "certifying" in text_of(screen, "cap-title")
        verdict = text_of(screen, "cap-verdict")
        assert "certifying" in verdict and "150 requests, 0 over, 459 needed" in verdict
        assert monitor.state == "paused" and calls == ["pause", "resume", "pause"]
        assert screen.result is res  # the search stays shown while its rate is certified
        fake.go.set()
        await until(pilot, lambda: screen.state == "done", "the certification's verdict")
        await until(pilot, lambda: calls == ["pause", "resume", "pause", "resume"], "the live session resumed")
        assert screen.certification.verdict == "certified" and screen.result is res
        line = text_of(screen, "cap-verdict").splitlines()[-1]
        assert line.startswith(f"certified: p99 ≤ {res.slo.ms:g} ms at {0.9 * chosen.capacity(res.slo):.0f}/s — "), line
        assert screen.budget_s == 60.0 and "certifying" not in text_of(screen, "cap-title")


@pytest.mark.integration
def test_certify_without_a_rate_searches_first_and_certifies_nine_tenths_of_the_capacity(small_model, env):  # noqa: F811
    r = certify(small_model, "--slo", "p99=20ms", "--certify", "--min-duration", 3, "--budget", 40, "--json",
                env=env, timeout=150)
    d = json.loads(r.stdout)
    (prof,) = d["capacity"]["profiles"]
    assert d["capacity"]["budget_s"] == 20  # half the budget
    c = d["certification"]
    if not prof["met"]:  # a host too busy for the search to meet a point in time: nothing to certify, never a pass
        assert r.returncode == d["exit_code"] == 6 and c is None, r.stderr
        return
    assert c["rate_per_s"] == pytest.approx(0.9 * prof["capacity_per_s"], rel=1e-3)
    # whatever the verdict at that rate, the exit code is its own
    assert r.returncode == d["exit_code"] == {"certified": 0, "violated": 5, "undecided": 6}[c["verdict"]], r.stderr
    assert c["requests"] > 0 and d["capacity"]["elapsed_s"] + d["elapsed_s"] <= 40 + 5


@pytest.mark.integration
@pytest.mark.sharing  # a fault or ctrl-C and the exit code: no time judged
def test_ctrl_c_prints_the_certification_so_far_as_undecided(env, tmp_path):  # noqa: F811
    from tests.poll import wait_for
    from tests.test_bench import worker_of

    model = make_matmul_model(tmp_path / "mm.onnx", n=256)
    # 1500/s keeps the worker about a third busy, so its CPU time shows blocks measured within seconds (at 200/s it
    # took a minute to reach them); far under this model's ceiling, and the minimum duration keeps it undecided
    proc = start_ortop("capacity", model, "--dim", "batch=256", "--threads", 1, "--slo", "p99=1s", "--certify", 1500,
                       "--min-duration", 60, "--budget", 90, "--json", env=env)
    try:
        w = worker_of(proc)

        def measuring() -> bool:  # past onnxruntime's import and the build: blocks are being measured
            assert proc.poll() is None, proc.communicate()
            return sum(w.cpu_times()[:2]) >= 3.0

        wait_for(measuring, 120, "the worker to measure blocks (3 s of its CPU)", interval=0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    d = json.loads(out)
    c = d["certification"]
    assert d["exit_code"] == 130 and d["stopped"] is True and c["verdict"] == "undecided"
    assert c["requests"] > 0 and c["needed_more"] >= 0 and "stopped" in c["ended"]


def test_the_report_names_the_verdict_the_counts_the_rule_and_the_searched_capacity():
    from ortop.engine.answers.certify import CertifyResult
    from ortop.measure.certify import Certification
    from ortop.measure.noise import HostNoise
    from ortop.measure.slo import Slo
    from ortop.report import certify_page

    v = early_stopping(3000, 25, 0.99)
    assert v.status == "undecided"
    res = CertifyResult("m.onnx", Slo("p99", 20.0), "defaults", Certification(150.0, 21.0, v), 60.0, 300.0, 23.0,
                        "the budget of 300 s ran out", HostNoise(steal_pct=1.5, cpu_pressure_pct=12.0,
                                                                  slow_share=0.004))
    data = {**res.as_dict(), "capacity": {"elapsed_s": 40.0, "profiles": [{"met": True, "capacity_per_s": 166.7}]}}
    page = certify_page(data)
    assert "Undecided at 150 requests/s" in page and f"{v.more} more requests needed" in page
    assert f">{v.needed:,}<" in page and ">25<" in page and ">3,000<" in page and "early stopping" in page
    assert "0.9 × the capacity the search before it found: 167 requests/s" in page
    assert "1.5 %" in page and "12.0 %" in page and "0.4 %" in page
    assert res.line() == (f"undecided: needs {v.more:,} more requests, none of them over and 39 s more to reach the "
                          "minimum duration of 60 s — p99 ≤ 20 ms at 150/s — 3,000 requests, 25 over (clump factor "
                          "1), 21 s")


def test_a_certification_of_ort_defaults_plus_flags_names_what_the_flags_set():
    """``--threads 1`` without a profile is certified as ``threads 1``, in the JSON and the text: "defaults" would
    not say what was certified."""
    from ortop.cli.capacity import format_certification
    from ortop.engine.answers.certify import CertifyResult
    from ortop.measure.certify import Certification
    from ortop.measure.slo import Slo

    v = early_stopping(3000, 25, 0.99)
    res = CertifyResult("m.onnx", Slo("p99", 20.0), "defaults", Certification(150.0, 21.0, v), 60.0, 300.0, 23.0,
                        "the budget of 300 s ran out", applied="threads 1")
    d = res.as_dict()
    assert d["profile"] == "threads 1" and d["applied"] == "threads 1"
    assert "\nprofile  threads 1\n" in format_certification(res)
    plain = dataclasses.replace(res, applied="")  # ORT's defaults, nothing set: called so
    assert plain.as_dict()["profile"] == "defaults" and plain.as_dict()["applied"] is None
    named = dataclasses.replace(res, profile="one.toml")  # a profile by its name
    assert named.as_dict()["profile"] == "one.toml" and named.as_dict()["applied"] == "threads 1"
