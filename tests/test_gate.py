"""CI gates: parsing and refusing specs, the non-inferiority test on an interval, the overall result and its exit
code, the markdown summary."""

from __future__ import annotations

import math

import pytest

from ortop.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from ortop.measure.gate import (
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_UNDECIDED,
    FORMS,
    Gate,
    evaluate,
    exit_code,
    judge,
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
