"""``ortop tune`` on a model that runs about ten times a second: what was not measured is said as such.

A budget too small for one rung measures and prints the baseline (its figures with their runs), lists each
dimension as not raced with what a rung needs at the model's pace, saves nothing as best, and exits 6 ("not
measured") with and without ``--json``. The table never reads "winner" above a verdict that keeps the baseline, and
ORT's default thread count races once, as the count it resolves to.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from ortop.cli.tune import EXIT_NOT_MEASURED, format_result, tune_main
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.answers.space import Candidate, Space, describe
from ortop.engine.answers.trials import BETTER, KEEP, NOT_MEASURED, Figures, RaceOutcome, Trial, TuneResult
from ortop.engine.answers.tuner import Tuner
from ortop.engine.answers.tunerun import leaderboard_rows
from ortop.errors import EXIT_GATE_UNDECIDED, exit_codes
from ortop.measure.compare import Comparison
from tests.models import make_slow_model
from tests.test_tuner import CHAIN, FakeRacer, StepClock, host, run_tuner, threads_effect


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_slow_model(tmp_path_factory.mktemp("models") / "slow.onnx")


# ---- (a) a budget too small for a rung, on the real slow model ------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_a_budget_too_small_for_a_rung_prints_the_baseline_and_saves_nothing(slow_model: str, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture) -> None:
    """A p99 rung on this model needs blocks of 100 runs each (ten seconds a block): 8 s cannot hold one rung."""
    save = tmp_path / "best.toml"
    argv = [slow_model, "--objective", "p99", "--budget", "8", "--space", "threads", "--save", str(save)]

    plain = tune_main(argv)
    out, err = capsys.readouterr()
    assert plain == EXIT_NOT_MEASURED == EXIT_GATE_UNDECIDED, err
    lines = out.splitlines()
    baseline = next(line for line in lines if line.startswith("baseline: "))
    assert baseline.startswith("baseline: p50 ") and "runs/s" in baseline and " pooled from " in baseline
    runs = int(baseline.split(" — over ")[1].split(" run")[0])
    assert runs > 0
    if runs < 100:  # a p99 over fewer runs is never printed as one
        assert f"p99 ? ({runs} runs: a p99 needs 100)" in baseline
    not_raced = [line for line in lines if line.strip().startswith("not raced: threads")]
    assert not_raced and "a rung needs ~" in not_raced[0] and "at this model's pace (" in not_raced[0]
    assert "runs/s)" in not_raced[0]
    verdict = next(line for line in lines if line.startswith("verdict: "))
    assert verdict.startswith("verdict: not measured: no candidate could be raced in 8 s") and "--budget " in verdict
    assert "no detectable gain" not in out and not any(line.startswith(" * ") for line in lines)
    assert any(line.startswith("not saved: ") for line in lines) and not save.exists()

    as_json = tune_main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert as_json == plain, err
    d = json.loads(out)  # the whole of stdout is one object
    assert isinstance(d, dict) and d["exit_code"] == plain
    assert d["verdict"] == NOT_MEASURED and d["measured"] is False and d["best"]["verdict"] == NOT_MEASURED
    assert d["baseline"]["runs"] > 0 and d["baseline"]["blocks"] > 0 and d["baseline"]["p50_ms"] is not None
    assert d["baseline"]["throughput_per_s"] is not None
    assert (d["baseline"]["p99_ms"] is None) == (d["baseline"]["runs"] < 100)
    assert d["trials"] == [] and d["not_tried"]
    assert all(t["reason"].startswith("not raced: a rung needs ~") for t in d["not_tried"])
    assert d["needs"]["budget_s"] > 8 and d["needs"]["rung_s"] > 8 and d["needs"]["runs_per_s"] > 0
    assert f"--budget {d['needs']['budget_s']:.0f}" in d["best"]["text"]
    assert d["saved"] is None and "not written" in d["not_saved"] and not save.exists()


@pytest.mark.integration
@pytest.mark.slow
def test_a_baseline_measured_alone_is_judged_on_its_pace(slow_model: str, capsys: pytest.CaptureFixture) -> None:
    """Nothing can race in 8 s, so the baseline is measured alone. At four times what this model serves (about ten
    runs a second on ORT's threads here), its figures are a backlog's: the plain output, the JSON's baseline and its
    warnings say its rate was not kept. At a rate it keeps, nothing is said."""
    over = tune_main([slow_model, "--objective", "p99", "--budget", "8", "--space", "threads", "--rate", "60",
                      "--arrival", "poisson"])
    out, err = capsys.readouterr()
    assert over == EXIT_NOT_MEASURED, err
    assert "the baseline's rate not kept: offered " in out and "its figures are not a paced answer" in out
    code = tune_main([slow_model, "--objective", "p99", "--budget", "8", "--space", "threads", "--rate", "60",
                      "--arrival", "poisson", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == over and d["baseline"]["rate_kept"] is False and "not a paced answer" in d["baseline"]["note"]
    assert any(w.startswith("baseline: rate not kept: ") for w in d["warnings"])

    tune_main([slow_model, "--objective", "p99", "--budget", "8", "--space", "threads", "--rate", "2",
               "--arrival", "poisson", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert d["baseline"]["rate_kept"] is True and "note" not in d["baseline"]
    assert not any(w.startswith("baseline:") for w in d["warnings"])


def test_not_measured_is_a_documented_exit_code() -> None:
    assert EXIT_NOT_MEASURED in dict(exit_codes("tune"))
    assert "not measured" in dict(exit_codes("tune"))[EXIT_NOT_MEASURED]


def test_nothing_to_race_at_the_knee_measures_the_baseline_and_says_not_measured() -> None:
    """``--objective capacity`` whose baseline's knee was not found: the baseline's figures, "not measured"."""
    clock = StepClock(0.0)
    racer = FakeRacer(clock, threads_effect({2: 0.7}))
    space = Space(Profile(), host(4), CHAIN, ["threads"])
    why = "the baseline's knee under p99 ≤ 150 ms was not found (undecided: fake): nothing to race at it"
    result = Tuner(space, racer, objective="p99", budget_s=20.0, clock=clock, no_race=why).run()
    assert result.verdict == NOT_MEASURED and result.text == f"not measured: {why}"
    assert result.trials == [] and racer.races == 0
    assert result.baseline_figures.blocks > 0 and math.isfinite(result.baseline_figures.p50_ms)


def test_a_baseline_shown_to_meet_the_slo_at_no_rate_is_a_result_that_keeps_it() -> None:
    """The no-load figure's interval lies above the SLO (decided): keep the baseline, a result (exit 0), not "not
    measured"."""
    from ortop.cli.tune import exit_code
    from ortop.engine.answers.tuner import NO_RATE

    clock = StepClock(0.0)
    racer = FakeRacer(clock, threads_effect({2: 0.7}))
    space = Space(Profile(), host(4), CHAIN, ["threads"])
    why = f"{NO_RATE}: the baseline meets p99 ≤ 5 ms at no rate here (p99 at no load 80 ms): nothing to race"
    result = Tuner(space, racer, objective="p99", budget_s=20.0, clock=clock, no_race=why).run()
    assert result.verdict == KEEP and result.text == f"keep the baseline: {why}"
    assert exit_code(result) == 0 and racer.races == 0
    assert result.baseline_figures.blocks > 0


# ---- (b) the table and the verdict agree ----------------------------------------------------------------------------


def _comparison(change: float, lo: float, hi: float, verdict: str) -> Comparison:
    return Comparison(0, 1, "p50", 2.0, 2.0 * (1 + change / 100), change, lo, hi, verdict != "undecided", verdict, 8,
                      None)


def _fake_result(verdict: str, *, winner_marked: bool) -> tuple[TuneResult, Trial]:
    """A race result as the tuner would hand it over: "threads 2" won its race by −35.5 % (−56.3…−3.9)."""
    start = Profile()
    two = profile_mod.merge(start, **{"session.intra_op_num_threads": 2})
    one = profile_mod.merge(start, **{"session.intra_op_num_threads": 1})
    won = Trial(Candidate(two, describe(two, start), "threads"), "baseline", status="ok",
                comparison=_comparison(-35.5, -56.3, -3.9, "faster"), figures=Figures(2.0, 4.0, 9.0, 90.0, 8, 24),
                stage_winner=True, winner=winner_marked)
    lost = Trial(Candidate(one, describe(one, start), "threads"), "baseline", status="dropped",
                 reason="significantly worse: p50 +40.0 %, worse (95 % CI +30.0…+50.0 %, 8 pairs)",
                 comparison=_comparison(40.0, 30.0, 50.0, "slower"), figures=Figures(2.8, 5.0, 7.0, 90.0, 8, 24))
    better = verdict == BETTER
    text = ("p50 −30.0 %, better (95 % CI −33.0…−27.0 %, 12 pairs) with threads 2, against the baseline" if better
            else "no detectable gain: keep the baseline (verified, threads 2: p50 −1.0 %, no difference (95 % CI "
                 "−1.8…+0.2 %, 12 pairs))")
    result = TuneResult("p50", None, 60.0, 59.0, start, Figures(2.0, 4.1, 9.0, 90.0, 24, 120),
                        two if better else start, Figures(1.4, 3.0, 12.0, 80.0, 24, 160) if better else Figures(),
                        verdict, text, _comparison(-30.0 if better else -1.0, -33.0 if better else -1.8,
                                                   -27.0 if better else 0.2, "faster" if better else "no difference"),
                        two, [won, lost], [], [], ("threads",))
    return result, won


@pytest.mark.parametrize("winner_marked", [True, False])
def test_a_verdict_that_keeps_the_baseline_has_no_winner_row(winner_marked: bool) -> None:
    result, won = _fake_result(KEEP, winner_marked=winner_marked)
    text = format_result(result, "/models/slow.onnx", None)
    assert "winner" not in text and not any(line.startswith(" * ") for line in text.splitlines())
    assert "verdict: no detectable gain: keep the baseline" in text and "\nbest: " not in text
    rows = leaderboard_rows(result.trials, result)
    assert all(r[2] != "winner" for r in rows)
    assert {r[0]: r[2] for r in rows} == {"threads 2": "ok", "threads 1": "dropped"}


def test_a_winner_row_is_the_one_the_verdict_names() -> None:
    result, won = _fake_result(BETTER, winner_marked=True)
    text = format_result(result, "/models/slow.onnx", None)
    winners = [line for line in text.splitlines() if line.startswith(" * ")]
    assert len(winners) == 1 and winners[0].split()[1:3] == ["threads", "2"] and " winner " in winners[0]
    verdict = next(line for line in text.splitlines() if line.startswith("verdict: "))
    assert "with threads 2" in verdict
    assert "\nbest: session.intra_op_num_threads: 0 → 2\n" in text
    rows = leaderboard_rows(result.trials, result)
    assert [r[0] for r in rows if r[2] == "winner"] == ["threads 2"]


def test_the_tuner_marks_a_winner_only_once_verified() -> None:
    better, *_ = run_tuner(threads_effect({2: 0.7, 1: 1.3}))
    assert better.verdict == BETTER
    assert [t.label for t in better.trials if t.winner] == ["threads 2"] and "with threads 2" in better.text
    assert [r[0] for r in leaderboard_rows(better.trials, better) if r[2] == "winner"] == ["threads 2"]
    keep, *_ = run_tuner(lambda p: {}, dims=("threads", "spinning"))
    assert keep.verdict == KEEP
    assert all(r[2] != "winner" for r in leaderboard_rows(keep.trials, keep))
    assert not any(t.winner for t in keep.trials)


def test_a_winner_left_unverified_is_not_measured_and_never_a_winner() -> None:
    """The verification gets three pairs where six are the least that decide: the dimension's winner is named as
    such, the verdict says it was not verified and what that needs, and no row reads "winner"."""

    class ShortVerification(FakeRacer):
        verifying = False

        def race(self, profiles: Sequence[Profile], seconds: float) -> RaceOutcome:
            return super().race(profiles, min(seconds, 3 * 2 * self.block_s) if self.verifying else seconds)

    clock = StepClock(0.0)
    racer = ShortVerification(clock, threads_effect({2: 0.7, 1: 1.3}))

    def on_event(kind: str, tuner: Tuner) -> None:
        racer.verifying = racer.verifying or kind == "verify"

    space = Space(Profile(), host(8), CHAIN, ["threads"])
    result = Tuner(space, racer, budget_s=60.0, clock=clock, on_event=on_event).run()
    assert result.verdict == NOT_MEASURED and result.text.startswith("not verified: threads 2 won its race")
    assert "--budget " in result.text and result.needs["budget_s"] >= 60
    assert not any(t.winner for t in result.trials)
    won = next(t for t in result.trials if t.stage_winner)
    assert won.label == "threads 2" and "not confirmed when verified" in won.reason
    text = format_result(result, "/models/m.onnx", None)
    assert not any(line.startswith(" * ") for line in text.splitlines()) and "\nbest: " not in text
    assert all(r[2] != "winner" for r in leaderboard_rows(result.trials, result))


# ---- (c) ORT's default thread count races once ----------------------------------------------------------------------


def _labels(space: Space, start: Profile) -> list[str]:
    return [c.label for c in space.candidates("threads", start)]


def test_the_default_thread_count_is_not_raced_beside_the_count_it_resolves_to() -> None:
    # Two cores: ORT's default resolves to 2. From the default, threads 2 is the baseline itself.
    start = Profile()
    space = Space(start, host(2), CHAIN, ["threads", "spinning"])
    assert 0 in space.thread_values() and 2 in space.thread_values()
    labels = _labels(space, start)
    assert "threads 1" in labels and not any(x.startswith("threads 2") for x in labels)
    assert any("resolves to 2" in n and "baseline itself" in n for n in space.pruned)
    # From one thread: threads 2 races, ORT's default (the same two threads) does not race beside it.
    one = profile_mod.merge(start, **{"session.intra_op_num_threads": 1})
    space = Space(one, host(2), CHAIN, ["threads", "spinning"])
    labels = _labels(space, one)
    assert "threads 2" in labels and not any(x.startswith("threads default") for x in labels)
    assert any("raced once, as threads 2" in n for n in space.pruned)
    assert {c.profile.session.intra_op_num_threads for c in space.grid()} == {2}  # the start (1) aside


def test_a_default_counted_in_the_worker_decides_what_it_duplicates() -> None:
    # The worker counted four threads for ORT's default on this two-core host: then it is a count of its own.
    one = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1})
    space = Space(one, host(2), CHAIN, ["threads"])
    space.set_default_threads(4)
    assert set(_labels(space, one)) == {"threads 2", "threads default"}
    assert not any(n.startswith("threads default:") for n in space.pruned)
    space.set_default_threads(2)
    assert _labels(space, one) == ["threads 2"]


def test_the_tuner_takes_the_count_the_racer_saw() -> None:
    class CountingRacer(FakeRacer):
        def default_threads(self, profile: Profile) -> int | None:
            return 4 if profile.session.intra_op_num_threads == 0 else None

    clock = StepClock(0.0)
    space = Space(Profile(), host(8), CHAIN, ["threads"])
    result = Tuner(space, CountingRacer(clock, threads_effect({2: 0.7})), budget_s=60.0, clock=clock).run()
    assert space.default_threads == 4
    labels = {t.label for t in result.trials} | {c.label for c, _ in result.not_tried}
    assert "threads 4" not in labels and {"threads 8", "threads 1"} <= labels  # 4 is the baseline's own count
    assert any("counted in its worker" in n for n in result.pruned)


def test_a_knee_the_budget_cannot_hold_says_what_budget_would_find_it() -> None:
    """A capacity search's points each hold the SLO metric's requests (a p99: 100): at ten runs a second that is
    about 50 s of knee, which a 60 s budget's quarter cannot hold; at a thousand a second half a second."""
    from ortop.cli.tune import KNEE_SHARE, knee_needs_s

    slow = knee_needs_s(10.0, 100)
    assert slow is not None and 45 < slow < 80 and slow > KNEE_SHARE * 60
    fast = knee_needs_s(1000.0, 100)
    assert fast is not None and fast < 1
    assert knee_needs_s(float("nan"), 100) is None and knee_needs_s(0.0, 100) is None


@pytest.mark.integration
@pytest.mark.slow
def test_tune_at_a_slow_models_knee_says_in_one_line_what_budget_it_needs(slow_model: str,
                                                                         capsys: pytest.CaptureFixture) -> None:
    """On a model that runs about ten times a second a 20 s budget's knee (15 s) cannot hold its points' requests:
    tune says so in one line with the budget that would find it, prints its JSON, and exits "not measured"."""
    code = tune_main([slow_model, "--objective", "capacity", "--slo", "p99=2s", "--budget", "20", "--json"])
    out, err = capsys.readouterr()
    d = json.loads(out)
    if d["knee"]["result"] != "undecided":  # found or decided in 15 s after all: nothing to say about the budget
        pytest.skip(f"the knee was {d['knee']['result']} in its 15 s on this host")
    assert code == EXIT_NOT_MEASURED
    assert d["knee"]["needs_budget_s"] > 20 and "would find it" in d["knee"]["note"], d["knee"]
    said = [ln for ln in err.splitlines() if "a knee needs about" in ln]
    assert len(said) == 1 and f"--budget {d['knee']['needs_budget_s']}" in said[0], err
