"""CI gates: parsing and refusing specs, the non-inferiority test on an interval, the overall result and its exit
code, the markdown summary; each gate judged on blocks that hold its metric (pooled neighbouring pairs, or "not
judged"), and the blocks sized for it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ortop.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from ortop.measure.compare import (
    Block,
    block_from_runs,
    compare,
    merge_blocks,
    pairs,
    pool_groups,
    pooled_pairs,
    schedule,
)
from ortop.measure.gate import (
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_UNDECIDED,
    FORMS,
    Gate,
    evaluate,
    exit_code,
    judge,
    judge_blocks,
    overall,
    parse_gate,
    summary_markdown,
)


@pytest.mark.parametrize(("spec", "gate"), [
    ("p99:+5%", Gate("p99", 5.0)),
    ("p50:+10%", Gate("p50", 10.0)),
    ("throughput:-5%", Gate("throughput", -5.0)),
    ("cpu:+5%", Gate("cpu", 5.0)),
    ("P99 : +2.5 %", Gate("p99", 2.5)),
    ("p99:+0%", Gate("p99", 0.0)),
    ("throughput:-.5%", Gate("throughput", -0.5)),
])
def test_parse(spec: str, gate: Gate) -> None:
    assert parse_gate(spec) == gate
    assert parse_gate(gate.spec) == gate


@pytest.mark.parametrize(("spec", "message"), [
    ("p99:-5%", "a fall in p99 is an improvement, not a regression; write p99:+5%"),
    ("cpu:-5%", "a fall in cpu is an improvement, not a regression; write cpu:+5%"),
    ("throughput:+5%", "a rise in throughput is an improvement, not a regression; write throughput:-5%"),
    ("p95:+5%", "unknown metric 'p95'"),
    ("latency:+5%", "unknown metric 'latency'"),
    ("p99:5%", "expected METRIC:±X%"),
    ("p99:+5", "expected METRIC:±X%"),
    ("p99:+5ms", "expected METRIC:±X%"),
    ("p99", "expected METRIC:±X%"),
    ("", "expected METRIC:±X%"),
])
def test_refusals_name_the_valid_forms(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_gate(spec)
    text = str(err.value)
    assert message in text
    assert text.endswith(FORMS)
    assert "p99:+X%" in FORMS and "throughput:-X%" in FORMS


def test_judge_latency_and_cpu_a_rise_is_worse() -> None:
    for spec in ("p99:+5%", "p50:+5%", "cpu:+5%"):
        assert judge(spec, -3.0, 4.9) == "pass"
        assert judge(spec, -20.0, -10.0) == "pass"   # an improvement passes
        assert judge(spec, 5.1, 9.0) == "fail"
        assert judge(spec, 2.0, 8.0) == "undecided"  # straddles the threshold
        assert judge(spec, -1.0, 5.0) == "undecided"  # touching it decides nothing
        assert judge(spec, 5.0, 7.0) == "undecided"


def test_judge_throughput_a_fall_is_worse() -> None:
    g = parse_gate("throughput:-5%")
    assert judge(g, -4.9, 3.0) == "pass"
    assert judge(g, 10.0, 20.0) == "pass"
    assert judge(g, -12.0, -5.1) == "fail"
    assert judge(g, -8.0, -2.0) == "undecided"
    assert judge(g, -5.0, 1.0) == "undecided"


def test_judge_without_an_interval_is_undecided() -> None:
    assert judge("p99:+5%", math.nan, math.nan) == "undecided"
    assert judge("p99:+5%", -math.inf, 1.0) == "undecided"
    assert judge("throughput:-5%", math.nan, 2.0) == "undecided"


def test_judge_refuses_a_reversed_interval_and_a_bad_spec() -> None:
    with pytest.raises(ValueError, match="above its high"):
        judge("p99:+5%", 3.0, 1.0)
    with pytest.raises(ValueError, match="improvement"):
        judge("p99:-5%", 1.0, 3.0)


def test_overall() -> None:
    assert overall(["pass", "pass"]) == "pass"
    assert overall(["pass", "undecided"]) == "undecided"
    assert overall(["undecided", "fail", "pass"]) == "fail"
    assert overall(["fail"]) == "fail"
    assert overall(["undecided"]) == "undecided"
    assert overall([]) == "pass"


def test_exit_codes_undecided_is_never_a_pass() -> None:
    assert (EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED) == (0, 5, 6)
    assert exit_code("pass") == EXIT_OK
    assert exit_code("undecided") != EXIT_OK and exit_code("fail") != EXIT_OK
    assert len({EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED}) == 3
    # distinct from the codes ortop already gives bad input and the doctor's findings
    assert {EXIT_FAIL, EXIT_UNDECIDED}.isdisjoint({EXIT_USAGE, EXIT_FINDINGS, 1})


def test_evaluate_and_as_dict() -> None:
    r = evaluate("throughput:-5%", -7.0, -9.5, -5.5)
    assert r.result == "fail"
    assert r.as_dict() == {"metric": "throughput", "threshold_pct": -5.0, "spec": "throughput:-5%",
                           "change_pct": -7.0, "ci_low_pct": -9.5, "ci_high_pct": -5.5, "result": "fail"}
    assert evaluate("p99:+5%", math.nan, math.nan, math.nan).as_dict()["ci_low_pct"] is None


def test_summary_markdown() -> None:
    results = [evaluate("p99:+5%", 1.2, -0.8, 3.1), evaluate("throughput:-5%", -2.0, -6.5, 1.0),
               evaluate("cpu:+5%", 12.0, 8.0, 16.6)]
    md = summary_markdown(results)
    lines = md.splitlines()
    assert lines[0] == "### ortop gates: fail"
    assert lines[2] == "| metric | change | 95 % interval | fail if | result |"
    assert lines[4] == "| p99 | +1.2 % | \u22120.8 % \u2026 +3.1 % | > +5.0 % | pass |"
    assert lines[5] == "| throughput | \u22122.0 % | \u22126.5 % \u2026 +1.0 % | < \u22125.0 % | undecided |"
    assert lines[6] == "| cpu | +12 % | +8.0 % \u2026 +17 % | > +5.0 % | **FAIL** |"
    assert lines[-1] == "Exit 5: an interval lies wholly beyond its threshold."
    # every table row has the header's five cells
    assert all(row.count("|") == 6 for row in lines[2:7])

    undecided = summary_markdown([evaluate("p99:+5%", 0.0, math.nan, math.nan)], confidence=0.9)
    assert "| 90 % interval |" in undecided and "no interval yet" in undecided
    assert undecided.splitlines()[-1].startswith("Exit 6:") and "undecided is not a pass" in undecided
    assert summary_markdown([evaluate("p50:+10%", -1.0, -3.0, 2.0)]).splitlines()[-1].startswith("Exit 0:")
    assert "(no gates)" in summary_markdown([])


# ---- gates judged on blocks that hold their metric -------------------------------------------------------------------
def ab_blocks(runs_a: list[int], runs_b: list[int], *, slower: float = 1.0, seed: int = 0) -> list[Block]:
    """A B B A … blocks, pair k holding ``runs_a[k]`` BASE runs and ``runs_b[k]`` NEW runs of one seeded heavy-tailed
    latency distribution (NEW's ×``slower``), each block as long as its runs."""
    rng = np.random.default_rng(seed)
    out, t = [], 0.0
    for seq, config in enumerate(schedule(2, len(runs_a))):
        k = seq // 2
        n = runs_a[k] if config == 0 else runs_b[k]
        lat = 100.0 * rng.lognormal(0.0, 0.3, n) * (slower if config == 1 else 1.0)
        out.append(block_from_runs(config, seq, lat, t_start=t, t_end=t + lat.sum() / 1e3, cpu_ms=lat.sum()))
        t += lat.sum() / 1e3
    return out


run_counts = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=60)


@pytest.mark.slow
@given(runs=run_counts, need=st.integers(1, 120))
@settings(max_examples=300, deadline=None)
def test_pool_groups_hold_the_runs_needed_and_keep_pairs_whole(runs, need) -> None:
    """Groups are consecutive runs of whole pairs, in order, each holding ``need`` runs a side; each but the last
    closes as soon as it does; they cover every pair, or there are none because the pairs together fall short."""
    groups = pool_groups(runs, need)
    total_a, total_b = sum(a for a, _ in runs), sum(b for _, b in runs)
    if not groups:
        assert total_a < need or total_b < need
        return
    assert groups[0].start == 0 and groups[-1].stop == len(runs)
    assert all(g.stop == h.start for g, h in zip(groups, groups[1:]))  # contiguous: pair k is in exactly one
    for g in groups:
        assert sum(runs[k][0] for k in g) >= need and sum(runs[k][1] for k in g) >= need
    for g in groups[:-1]:  # greedy: one pair fewer would fall short on a side
        shorter = range(g.start, g.stop - 1)
        assert sum(runs[k][0] for k in shorter) < need or sum(runs[k][1] for k in shorter) < need


@given(runs=st.lists(st.tuples(st.integers(5, 40), st.integers(5, 40)), min_size=1, max_size=40))
@settings(max_examples=100, deadline=None)
def test_pairs_that_hold_the_runs_are_not_pooled(runs) -> None:
    assert pool_groups(runs, 5) == [range(k, k + 1) for k in range(len(runs))]
    blocks = ab_blocks([a for a, _ in runs], [b for _, b in runs])
    paired = pairs(blocks, 0, 1)
    assert pooled_pairs(paired, 5) == paired  # the blocks themselves, untouched


@pytest.mark.slow
@given(runs=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 12)), min_size=1, max_size=40),
       need=st.integers(2, 40))
@settings(max_examples=150, deadline=None)
def test_pooled_pairs_pool_each_side_of_the_same_pairs(runs, need) -> None:
    """A pooled pair is BASE's blocks of pairs k … k+m against NEW's blocks of the same pairs: every run of them,
    nothing else; its p99 is the p99 of those runs pooled."""
    blocks = ab_blocks([a for a, _ in runs], [b for _, b in runs], seed=len(runs))
    paired = pairs(blocks, 0, 1)
    groups = pool_groups([(a.runs, b.runs) for a, b in paired], need)
    pooled = pooled_pairs(paired, need)
    assert len(pooled) == len(groups)
    for g, (a, b) in zip(groups, pooled):
        assert (a.config, b.config) == (0, 1)
        for side, merged in ((0, a), (1, b)):
            runs_in = np.concatenate([paired[k][side].latency_ms for k in g])
            assert np.array_equal(merged.latency_ms, runs_in)
            assert merged.runs == runs_in.size >= need
            assert merged.p99_ms == pytest.approx(float(np.percentile(runs_in, 99)))
    # the pooled pairs pair up again as they were made
    flat = [x for pair in pooled for x in pair]
    assert pairs(flat, 0, 1) == pooled


def test_merge_blocks_throughput_counts_the_blocks_own_time() -> None:
    a = block_from_runs(0, 0, np.full(10, 5.0), t_start=0.0, t_end=0.1, cpu_ms=50.0)
    b = block_from_runs(0, 2, np.full(30, 5.0), t_start=1.0, t_end=1.3, cpu_ms=300.0)
    m = merge_blocks([a, b], 0)
    assert m.runs == 40 and m.throughput_per_s == pytest.approx(40 / 0.4)  # not 40 over the 1.3 s between
    assert m.cpu_ms_per_run == pytest.approx(350 / 40)
    with pytest.raises(ValueError):
        merge_blocks([a, block_from_runs(1, 1, np.ones(3), t_start=0.2, t_end=0.3, cpu_ms=1.0)], 0)


def test_a_gate_whose_blocks_hold_its_metric_is_judged_on_them() -> None:
    """Blocks of 150 runs hold a p99: the gate is judged on the comparison's own interval, nothing pooled."""
    blocks = ab_blocks([150] * 12, [150] * 12)
    (r,) = judge_blocks([parse_gate("p99:+50%")], blocks)
    plain = compare(blocks, 0, 1, "p99")
    assert (r.change_pct, r.ci_low_pct, r.ci_high_pct) == (plain.change_pct, plain.ci_low_pct, plain.ci_high_pct)
    assert r.basis is not None and not r.basis.short and r.basis.pooled == (1, 1) and r.basis.pairs == 12
    assert r.basis.text() == "p99 judged on blocks of ~150 runs (12 pairs)"


def test_short_blocks_are_pooled_and_the_gate_says_so() -> None:
    """Blocks of 25 runs: four pairs pooled make ~100 runs a side; 40 pairs make 10 pooled pairs, enough for an
    interval, and a clear regression fails while an A/A passes a wide gate."""
    same = ab_blocks([25] * 40, [25] * 40, seed=1)
    (r,) = judge_blocks([parse_gate("p99:+50%")], same)
    assert r.basis is not None and r.basis.short and r.basis.judged
    assert r.basis.pooled == (4, 4) and r.basis.pooled_pairs == 10 and r.basis.pooled_runs == 100
    assert r.basis.text() == "p99 judged on pooled blocks of ~100 runs (4 blocks each, 10 pairs)"
    assert r.result == "pass" and r.ci_high_pct < 50
    worse = ab_blocks([25] * 40, [25] * 40, slower=2.0, seed=2)
    (f,) = judge_blocks([parse_gate("p99:+5%")], worse)
    assert f.result == "fail" and f.ci_low_pct > 5 and f.basis is not None and f.basis.pooled == (4, 4)
    assert f.as_dict()["judged_on"]["pooled_blocks"] == [4, 4]


@given(runs=st.integers(1, 30), n_pairs=st.integers(1, 30), slower=st.sampled_from([0.5, 1.0, 2.0]))
@settings(max_examples=60, deadline=None)
def test_a_gate_pooling_cannot_judge_is_not_judged_never_a_pass(runs, n_pairs, slower) -> None:
    """Too few runs for six pooled pairs of 100: "not judged" (exit 6), with no interval and the reason, whatever
    the data say; the other gates are judged as usual."""
    if runs * n_pairs >= 6 * 100:
        return
    blocks = ab_blocks([runs] * n_pairs, [runs] * n_pairs, slower=slower)
    p99, p50 = judge_blocks([parse_gate("p99:+5%"), parse_gate("p50:+500%")], blocks)
    assert p99.result == "not judged" and p99.result != "pass"
    assert math.isnan(p99.ci_low_pct) and p99.interval_text() == "no interval yet"
    assert p99.basis is not None and not p99.basis.judged
    assert p99.basis.text().startswith(f"p99 gate: blocks of ~{runs} runs cannot hold a p99 (needs 100 runs)")
    assert "not judged" in p99.basis.text()
    assert overall([p99.result, p50.result]) in ("undecided", "fail")
    assert exit_code(overall([p99.result, "pass"])) == EXIT_UNDECIDED


def test_not_judged_says_what_budget_would_judge_it_and_the_summary_says_why() -> None:
    blocks = ab_blocks([3] * 20, [3] * 20)
    (r,) = judge_blocks([parse_gate("p99:+5%")], blocks)
    span = blocks[-1].t_end - blocks[0].t_start
    # 8 pooled pairs of 34 blocks of 3 runs (102 runs) a side, at the pace measured: 60 runs a side in `span`
    assert r.basis is not None and r.basis.budget_s == math.ceil(span * 8 * 102 / 60 / 10) * 10
    assert r.basis.text().endswith(f"not judged; about {r.basis.budget_s:.0f} s of --budget would judge it")
    assert r.verdict_text() == "not judged" and r.rule_text() == "gate p99 \u2264 +5.0 %"
    md = summary_markdown([r])
    assert md.splitlines()[0].endswith(": undecided") and "| not judged |" in md
    assert f"- {r.basis.text()}." in md
    assert md.rstrip().endswith("Exit 6: a gate was not judged, and not judged is not a pass.")


def test_verdict_text_names_the_end_of_the_interval_that_decided() -> None:
    assert evaluate("p99:+5%", 1.2, -0.8, 3.1).verdict_text() == "pass (upper end +3.1 %)"
    assert evaluate("p99:+5%", 9.0, 6.0, 12.0).verdict_text() == "FAIL (lower end +6.0 %)"
    assert evaluate("throughput:-5%", 1.0, -2.0, 4.0).verdict_text() == "pass (lower end \u22122.0 %)"
    assert evaluate("throughput:-5%", 1.0, -2.0, 4.0).rule_text() == "gate throughput \u2265 \u22125.0 %"
    straddles = "undecided (\u22122.0 % \u2026 +8.0 % straddles +5.0 %)"
    assert evaluate("p50:+5%", 2.0, -2.0, 8.0).verdict_text() == straddles
    assert evaluate("p50:+5%", 0.0, math.nan, math.nan).verdict_text() == "undecided (no interval yet)"


@pytest.mark.parametrize(("run_ms", "budget", "block"), [
    (1.0, 30.0, 0.3),              # 0.3 s already holds 300 runs: unchanged
    (5.0, 120.0, 0.625),           # 125 runs' worth (100 with a margin)
    (5.0, 40.0, 40 / 48 - 0.3),    # ... as long as 48 blocks in the budget allow (the rest is pooled)
    (100.0, 30.0, 30 / 48 - 0.3),  # ten runs a second, 30 s: little room to grow; the rest is pooled
    (100.0, 600.0, 2.0),           # ... and never beyond the cap
])
def test_gate_blocks_grow_to_hold_a_tail_where_the_budget_allows(run_ms, budget, block) -> None:
    from ortop.engine.bench.ab import gate_block_s

    assert gate_block_s(0.3, 0.3, run_ms, budget, 100) == pytest.approx(block)
    assert gate_block_s(0.3, 0.3, run_ms, budget, 1) == 0.3  # throughput and CPU need no more than a run
    assert gate_block_s(0.9, 0.3, 1.0, budget, 100) == 0.9   # never shorter than planned


def test_the_comparison_itself_judges_a_p99_only_on_pooled_blocks_that_hold_it() -> None:
    """A comparison's p99 on blocks of six runs pools neighbouring pairs, exactly as the gate does, so the table
    and the gate speak of the same pairs: 30 pairs pool into one, which is undecided with the time more it needs;
    200 pairs pool into 12 and see NEW twice as slow. A p50 (two runs) is read from the blocks as they ran."""
    few = ab_blocks([6] * 30, [6] * 30, seed=3)
    c = compare(few, 0, 1, "p99")
    assert c.pooled and c.block_runs == 6 and c.pairs == 1 and c.verdict == "undecided"
    assert c.seconds_more is not None and c.seconds_more > 0
    assert not compare(few, 0, 1, "p50").pooled
    worse = ab_blocks([6] * 200, [6] * 200, slower=2.0, seed=4)
    w = compare(worse, 0, 1, "p99")
    assert w.pooled and w.pairs == 200 // 17 and w.verdict == "slower", w
    (g,) = judge_blocks([parse_gate("p99:+5%")], worse)
    assert g.result == "fail" and g.ci_low_pct == w.ci_low_pct


def test_a_percentile_no_pooled_pair_holds_says_so_instead_of_question_marks() -> None:
    """Sixty runs a side in blocks of six: not one pooled pair of 100 runs a side, so the p99 has no figure at all,
    and its text says why (not "p99 ? → ? ms")."""
    c = compare(ab_blocks([6] * 10, [6] * 10, seed=5), 0, 1, "p99")
    assert c.pooled and c.pairs == 0 and c.verdict == "undecided"
    text = c.text()
    assert "?" not in text and text.startswith("p99 not judged yet: blocks of ~6 runs cannot hold a p99 (needs 100)")
