"""``ortop compare BASE NEW --fail-if …`` as a CI job runs it, on real workers and real models: a non-inferiority
test per gate, the comparison ending at the sequential look that decides the gates, exit 0 / 5 / 6, and a markdown
summary. Every wait is for the command's end (or a worker's CPU time), never a wall-clock bound."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ortop.engine.bench.deciders import GateLooks
from ortop.measure.compare import block_from_runs, compare, schedule
from ortop.measure.gate import parse_gate
from ortop.measure.sequential import look_pairs
from tests.test_bench import closed_loop_per_s, killed, start_ortop
from tests.test_cli import env, one_error_line, ortop  # noqa: F401  (env is a fixture)
from tests.test_compare import batch_profiles, demo_model, profile_files  # noqa: F401  (fixtures)
from tests.test_traffic import batch_model  # noqa: F401  (a fixture)

pytestmark = pytest.mark.integration

GATE_KEYS = {"metric", "threshold_pct", "change_pct", "ci_low_pct", "ci_high_pct", "result"}


@pytest.fixture
def same_profile(tmp_path):
    """One profile, twice: an A/A comparison (the same configuration as BASE and NEW)."""
    (one,) = profile_files(tmp_path, one="[session]\nintra_op_num_threads = 1\n")
    return one


def check_gates_json(d: dict, specs: list[str]) -> None:
    """The gates' keys, one per spec in order, each result the non-inferiority test of its interval, and the gate
    result and exit code that follow from them (no fault, every rate kept)."""
    assert [g["spec"] for g in d["gates"]] == specs
    for g in d["gates"]:
        assert GATE_KEYS <= set(g), g
        on = g["judged_on"]
        if not on["judged"]:  # its blocks, even pooled, could not hold the metric: never a pass
            assert g["result"] == "not judged" and g["ci_low_pct"] is None, g
            continue
        if on["pooled_blocks"] == [1, 1]:
            # every block holds the metric: the gate is judged on the comparison's own interval, the one of the
            # look the rule stopped at
            comp = next(c for c in d["comparisons"] if c["metric"] == g["metric"])
            assert (g["change_pct"], g["ci_low_pct"], g["ci_high_pct"]) == \
                (comp["change_pct"], comp["ci_low_pct"], comp["ci_high_pct"]), (g, comp)
        else:  # pooled neighbouring pairs, each side holding the runs the metric needs
            assert on["pooled_runs"] >= on["needs_runs"] and on["pooled_blocks"][1] > 1, on
        if g["ci_low_pct"] is None:
            assert g["result"] == "undecided", g
            continue
        worse_up = g["threshold_pct"] > 0
        lo, hi, th = g["ci_low_pct"], g["ci_high_pct"], g["threshold_pct"]
        want = ("pass" if hi < th else "fail" if lo > th else "undecided") if worse_up else \
            ("pass" if lo > th else "fail" if hi < th else "undecided")
        assert g["result"] == want, g
    results = [g["result"] for g in d["gates"]]
    overall = "fail" if "fail" in results else "pass" if all(r == "pass" for r in results) else "undecided"
    assert d["gate_result"] == overall
    assert d["exit_code"] == {"pass": 0, "fail": 5, "undecided": 6}[overall]
    assert overall != "pass" or all(g["result"] == "pass" for g in d["gates"])  # "not judged" is never a pass


# ---- the rule: a look ends the measuring once the gates are decided ------------------------------------------------
def blocks_of(p50_ratios: list[float]) -> list:
    """A B B A … blocks whose NEW / BASE latency ratio of pair k is ``p50_ratios[k]`` (BASE 1 ms a run)."""
    out = []
    for seq, config in enumerate(schedule(2, len(p50_ratios))):
        ms = 1.0 if config == 0 else p50_ratios[seq // 2]
        lat = np.full(100, ms)
        out.append(block_from_runs(config, seq, lat, t_start=seq, t_end=seq + lat.sum() / 1e3, cpu_ms=lat.sum()))
    return out


def feed(rule: GateLooks, blocks: list) -> int | None:
    """Blocks one at a time, as they arrive; the count at which the rule ended the measuring (None: it did not)."""
    for k in range(1, len(blocks) + 1):
        if rule.after(blocks[:k], float(k)):
            return k
    return None


def test_the_rule_stops_at_the_first_look_that_decides_every_gate() -> None:
    """Every pair 20 % slower: p50:+5% fails and throughput:-50% passes at the first look (8 pairs), and the
    measuring ends there; the look's intervals are the comparison's at the look's own, stricter level."""
    rule = GateLooks([parse_gate("p50:+5%"), parse_gate("throughput:-50%")])
    blocks = blocks_of([1.2 + 0.01 * (k % 3) for k in range(40)])
    assert feed(rule, blocks) == 2 * look_pairs(0)
    (look,) = rule.taken
    assert look.pairs == look_pairs(0) and [r.result for r in look.results] == ["fail", "pass"]
    assert rule.decision is not None and rule.decision.level == look.level == rule.level() and look.level > 0.95
    again = compare(blocks[:2 * look_pairs(0)], 0, 1, "p50", level=look.level)
    assert (look.results[0].ci_low_pct, look.results[0].ci_high_pct) == (again.ci_low_pct, again.ci_high_pct)


def test_the_rule_goes_on_while_a_gate_straddles_its_threshold() -> None:
    """Pairs scattered from −10 % to +20 % around a +5 % threshold: no look decides, every look is taken and kept,
    and the budget's last look is what the result will use."""
    rule = GateLooks([parse_gate("p50:+5%")])
    ratios = [(0.9, 1.2, 1.05, 0.95, 1.15)[k % 5] for k in range(40)]
    assert feed(rule, blocks_of(ratios)) is None
    assert [look.pairs for look in rule.taken] == [look_pairs(k) for k in range(len(rule.taken))]
    assert len(rule.taken) >= 5 and all(look.result == "undecided" for look in rule.taken)
    assert rule.decision is None and rule.level() == rule.looks.last()


def test_a_failed_gate_ends_the_measuring_whatever_the_others() -> None:
    """One gate shown failed decides the build: a second gate still straddling does not keep it measuring."""
    rule = GateLooks([parse_gate("p50:+5%"), parse_gate("p50:+22%")])
    assert feed(rule, blocks_of([1.2 + 0.02 * (k % 3) for k in range(40)])) == 2 * look_pairs(0)
    assert [r.result for r in rule.taken[-1].results] == ["fail", "undecided"]


def test_the_interleavings_rule_judges_a_tail_only_on_blocks_that_hold_it() -> None:
    """The rule a comparison with gates runs: on blocks of 100 runs a p99 gate decides as the plain rule does; on
    blocks of 3 runs (a slow model) every look finds the p99 gate not judged, so a wide gate that the blocks' own
    "p99s" (their slowest runs) would pass never passes (nor does the plain rule: its comparison pools them too),
    and a failing p50 gate still ends the measuring."""
    from ortop.engine.bench.ab import TailGateLooks

    ratios = [1.2 + 0.01 * (k % 3) for k in range(40)]
    plain, tail = GateLooks([parse_gate("p99:+50%")]), TailGateLooks([parse_gate("p99:+50%")])
    assert feed(tail, blocks_of(ratios)) == feed(plain, blocks_of(ratios)) == 2 * look_pairs(0)
    assert [r.result for r in tail.taken[-1].results] == ["pass"]
    assert tail.taken[-1].results[0].basis.pooled == (1, 1)

    short = blocks_of_runs(ratios, 3)
    # the comparison itself pools a tail the blocks cannot hold, so even the plain rule never passes on them
    assert feed(GateLooks([parse_gate("p99:+50%")]), short) is None
    rule = TailGateLooks([parse_gate("p99:+50%")])
    assert feed(rule, short) is None and rule.taken
    assert all(look.results[0].result == "not judged" for look in rule.taken), rule.taken
    both = TailGateLooks([parse_gate("p99:+50%"), parse_gate("p50:+5%")])
    assert feed(both, short) == 2 * look_pairs(0)
    assert [r.result for r in both.taken[-1].results] == ["not judged", "fail"]


def blocks_of_runs(p50_ratios: list[float], runs: int) -> list:
    """:func:`blocks_of` with ``runs`` runs a block, the slowest of each 10 % above the rest."""
    out = []
    for seq, config in enumerate(schedule(2, len(p50_ratios))):
        ms = 1.0 if config == 0 else p50_ratios[seq // 2]
        lat = np.full(runs, ms)
        lat[-1] *= 1.1
        out.append(block_from_runs(config, seq, lat, t_start=seq, t_end=seq + lat.sum() / 1e3, cpu_ms=lat.sum()))
    return out


def test_the_rule_judges_exactly_two_configurations() -> None:
    with pytest.raises(ValueError, match="exactly two"):
        GateLooks([parse_gate("p50:+5%")], n_configs=3)


def test_gates_judged_on_comparisons_and_a_summary_that_says_why_undecided() -> None:
    """Each gate on its metric's comparison (none: no interval, undecided); a summary whose exit line carries the
    reason and code the command gives when the intervals alone do not decide (a lost worker's 4)."""
    from types import SimpleNamespace

    from ortop.measure.gate import evaluate_all, summary_markdown

    p50 = SimpleNamespace(metric="p50", change_pct=1.0, ci_low_pct=-0.5, ci_high_pct=2.5)
    results = evaluate_all([parse_gate("p50:+5%"), parse_gate("cpu:+5%")], [p50])
    assert [r.result for r in results] == ["pass", "undecided"]
    assert results[1].ci_low_pct != results[1].ci_low_pct and results[1].interval_text() == "no interval yet"
    assert results[0].threshold_text() == "> +5.0 %" and results[0].interval_text() == "\u22120.5 % \u2026 +2.5 %"
    text = summary_markdown(results, note="a worker was lost for good (it died)", code=4)
    assert text.splitlines()[0].endswith(": undecided")
    assert text.rstrip().endswith("Exit 4: a worker was lost for good (it died).")


# ---- bad input: one line, exit 2, nothing measured -----------------------------------------------------------------
@pytest.mark.parametrize("spec, said", [
    ("p99:-5%", "a fall in p99 is an improvement, not a regression; write p99:+5%"),
    ("latency:+5%", "unknown metric 'latency'"),
    ("p99+5", "expected METRIC:\u00b1X%"),
])
def test_a_spec_that_does_not_parse_is_one_line_and_exit_2(demo_model, same_profile, env, spec, said):  # noqa: F811
    r = ortop("compare", demo_model, same_profile, same_profile, "--fail-if", "p50:+5%", "--fail-if", spec,
              env=env)
    line = one_error_line(r)
    assert said in line and f"--fail-if {spec!r}" in line, line
    assert r.stdout == ""


def test_gates_judge_exactly_two_configurations(demo_model, tmp_path, env):  # noqa: F811
    a, b, c = profile_files(tmp_path, a="", b="[session]\nintra_op_num_threads = 1\n",
                            c="[session]\nintra_op_num_threads = 2\n")
    r = ortop("compare", demo_model, a, b, c, "--fail-if", "p50:+5%", env=env)
    line = one_error_line(r)
    assert "exactly two configurations" in line and "makes 3" in line, line


def test_summary_md_is_checked_before_measuring_and_needs_a_gate(demo_model, same_profile, tmp_path, env):  # noqa: F811
    r = ortop("compare", demo_model, same_profile, same_profile, "--fail-if", "p50:+5%",
              "--summary-md", tmp_path / "no-such-folder" / "gate.md", env=env)
    assert "does not exist" in one_error_line(r)
    r = ortop("compare", demo_model, same_profile, same_profile, "--summary-md", tmp_path / "gate.md", env=env)
    assert "--fail-if" in one_error_line(r)
    assert not (tmp_path / "gate.md").exists()


# ---- the verdicts ----------------------------------------------------------------------------------------------------
def test_the_same_profile_twice_passes_a_generous_gate(demo_model, same_profile, env):  # noqa: F811
    """A/A: the change is drift alone, and ±50 % is far outside it: the gate passes at a look, exit 0."""
    budget = 60.0
    r = ortop("compare", demo_model, same_profile, same_profile, "--fail-if", "p50:+50%", "--budget", budget,
              "--json", env=env, timeout=150)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_gates_json(d, ["p50:+50%"])
    assert d["gate_result"] == "pass" and d["gates"][0]["result"] == "pass" and d["exit_code"] == 0, d["gates"]
    assert d["gate_note"] is None
    # it ended at the look that decided the gate, before the budget was spent
    assert d["stopped_early"] is True and d["decided_s"] == d["elapsed_s"] < budget, d
    assert d["gate_looks"][-1]["gate_result"] == "pass"
    assert all(look["gate_result"] == "undecided" for look in d["gate_looks"][:-1]), d["gate_looks"]


def test_a_large_regression_fails_the_gate_at_the_first_look(tmp_path, batch_profiles, env):  # noqa: F811
    """NEW feeds 512 rows a run, BASE 16: every pair of blocks agrees, so the first look (8 pairs) shows p50 far
    beyond +5 %: exit 5, the comparison ended there with a long budget left, the summary written."""
    from tests.models import make_matmul_model

    model = make_matmul_model(tmp_path / "free.onnx", n=256)
    rows512, rows16 = batch_profiles
    budget = 60.0
    md = tmp_path / "gate.md"
    r = ortop("compare", model, rows16, rows512, "--fail-if", "p50:+5%", "--fail-if", "throughput:-3%",
              "--budget", budget, "--json", "--summary-md", md, env=env, timeout=150)
    assert r.returncode == 5, r.stderr
    d = json.loads(r.stdout)
    check_gates_json(d, ["p50:+5%", "throughput:-3%"])
    assert d["gate_result"] == "fail" and d["exit_code"] == 5
    p50 = d["gates"][0]
    assert p50["result"] == "fail" and p50["ci_low_pct"] > 100, p50
    # decided at a look: the result holds that look's pairs and level, long before the budget
    (look,) = d["gate_looks"]
    assert look["pairs"] == look_pairs(0) and look["gate_result"] == "fail", d["gate_looks"]
    assert d["stopped_early"] is True and d["decided_s"] == d["elapsed_s"] < budget
    comp = next(c for c in d["comparisons"] if c["metric"] == "p50")
    assert comp["pairs"] == look["pairs"] and comp["look_confidence"] == pytest.approx(look["level"], abs=1e-6)
    text = md.read_text()
    assert text.startswith("### ortop gates: ") and text.splitlines()[0].endswith(": fail"), text
    assert "| p50 |" in text and "**FAIL**" in text and "| > +5.0 % |" in text, text
    assert "| throughput |" in text and "| < \u22123.0 % |" in text, text
    assert text.rstrip().endswith("Exit 5: an interval lies wholly beyond its threshold."), text


def test_a_budget_too_short_to_decide_is_undecided_exit_6(demo_model, same_profile, tmp_path, env):  # noqa: F811
    """One second holds a few blocks, fewer pairs than the first look needs: no interval, undecided, never a
    pass; the table and the summary say so."""
    md = tmp_path / "gate.md"
    r = ortop("compare", demo_model, same_profile, same_profile, "--fail-if", "p50:+50%", "--budget", 1,
              "--json", "--summary-md", md, env=env)
    assert r.returncode == 6, r.stderr
    d = json.loads(r.stdout)
    check_gates_json(d, ["p50:+50%"])
    assert d["gate_result"] == "undecided" and d["gates"][0]["ci_low_pct"] is None and d["gate_looks"] == []
    assert "the budget ended" in d["gate_note"] and d["stopped_early"] is False
    text = md.read_text()
    assert "no interval yet" in text and text.rstrip().endswith("undecided is not a pass."), text
    r = ortop("compare", demo_model, same_profile, same_profile, "--fail-if", "p50:+50%", "--budget", 1, env=env)
    assert r.returncode == 6, r.stderr
    tail = r.stdout.splitlines()
    at = tail.index(next(line for line in tail if line.startswith("gates (")))
    # the gate under its rule, then the comparison's verdict on the same metric under its own
    assert tail[at + 1].split()[:6] == ["p50", "gate", "p50", "\u2264", "+50", "%:"], tail[at:]
    assert "undecided (no interval yet)" in tail[at + 1], tail[at:]
    assert tail[at + 2].split()[:2] == ["comparison:", "undecided"], tail[at:]
    assert tail[at + 3].startswith("gate result: undecided (exit 6)"), tail


# ---- answers to another question are never a pass ------------------------------------------------------------------
def test_a_rate_not_kept_makes_the_gates_undecided(batch_model, same_profile, env):  # noqa: F811
    """Paced at twice what the model serves, both configurations queue: their latencies answer another question,
    so the gates are undecided (exit 6) with the reason, whatever the intervals say."""
    rate = 2 * closed_loop_per_s(batch_model)
    r = ortop("compare", batch_model, same_profile, same_profile, "--fail-if", "p50:+50%", "--budget", 4, "--json",
              "--dim", "batch=64", "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env, timeout=120)
    assert r.returncode == 6, r.stderr
    d = json.loads(r.stdout)
    assert any(c["rate_kept"] is False for c in d["configs"]), d["configs"]
    assert d["gate_result"] == "undecided" and d["exit_code"] == 6
    assert d["gates"][0]["result"] == "undecided" and "not a paced answer" in d["gate_note"], d


@pytest.mark.sharing  # a fault and the exit code: no time judged
def test_a_worker_lost_for_good_leaves_the_gates_undecided_and_exits_4(batch_model, same_profile, env):  # noqa: F811
    """The worker killed once it has measured, and its restart killed at once: exit 4 as without gates, the gates
    undecided with the fault named, never a pass. Runs of 16384 rows make blocks of at least five long runs, so
    the first look (8 pairs, 16 such blocks) comes long after the worker's CPU time says it has measured: no look
    can decide the gate before the kill."""
    proc = start_ortop("compare", batch_model, same_profile, same_profile, "--fail-if", "p50:+1%", "--dim",
                       "batch=16384", "--budget", 60, "--json", env=env)
    code, d, err = killed(proc, again=True, cpu_s=3.5)
    assert code == 4, err
    assert d["exit_code"] == 4 and d["fault"] and "signal 9" in d["fault"], d
    assert d["gate_result"] == "undecided" and all(g["result"] == "undecided" for g in d["gates"]), d["gates"]
    assert "worker was lost" in d["gate_note"], d["gate_note"]
