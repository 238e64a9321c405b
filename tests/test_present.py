"""The presentation room: each unit written one way, and no other room writing its own.

Property tests for the formatters (widths, round trips, order kept, the sign), and a scan of the source for a
formatter of milliseconds, rates, percentages or sizes defined anywhere else.
"""

from __future__ import annotations

import ast
import math
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ortop import present as P

SRC = Path(__file__).resolve().parents[1] / "src" / "ortop"
finite_ms = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
sizes = st.integers(min_value=0, max_value=1 << 50)
missing = st.sampled_from([None, math.nan, math.inf, -math.inf, "12", True])


@given(finite_ms)
def test_ms_text_keeps_three_significant_figures_and_reads_back_within_half_a_unit_of_its_last_digit(x):
    s = P.ms_text(x)
    back = float(s)
    digits = len(s.split(".")[1]) if "." in s else 0
    assert abs(back - x) <= 0.5 * 10 ** -digits + 1e-12
    assert len(s.replace(".", "").lstrip("0")) <= max(3, len(str(int(round(x)))))  # no invented digits
    assert len(s) <= max(5, len(str(int(round(x)))))  # at most five cells below 100 s ("0.123", "12345")


@given(finite_ms, finite_ms)
def test_ms_text_keeps_the_order_of_two_figures(a, b):
    if a <= b:
        assert float(P.ms_text(a)) <= float(P.ms_text(b))


@given(missing)
def test_every_formatter_says_nothing_to_say_the_same_way(x):
    for f in (P.ms_text, P.rate_text, P.pct_text, P.secs_text, P.size_text, P.mb_text, P.cell, P.signed):
        assert f(x) == P.DASH, f
    assert P.rate_figure(x) == "?" and P.change_pct(x) == "?" and P.mib(x) is None


@given(st.floats(min_value=0.0, max_value=1e8, allow_nan=False))
def test_rate_text_is_at_most_seven_cells_and_keeps_its_unit(x):
    s = P.rate_text(x)
    assert s.endswith("/s") and len(s) <= 7  # the replicas panel's column: "10.0k/s" is its widest
    scale = {"k": 1e3, "M": 1e6}.get(s[-3], 1)
    value = float(s.removesuffix("/s").rstrip("kM")) * scale
    assert value == pytest.approx(x, rel=0.06, abs=0.0501)


@given(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), st.integers(min_value=0, max_value=3))
def test_signed_figures_carry_a_sign_always_and_the_true_minus(x, decimals):
    s = P.signed_pct(x, decimals)
    assert s[0] in "+\u2212" and "-" not in s
    assert float(s.replace("\u2212", "-")) == pytest.approx(round(x, decimals), abs=10 ** -decimals)


@given(sizes)
def test_size_text_reads_back_within_its_three_figures_and_picks_the_largest_unit_under_the_size(n):
    s = P.size_text(n)
    number, unit = s.split(" ")
    scale = {"B": 1, "KiB": P.KIB, "MiB": P.MIB, "GiB": P.GIB}[unit]
    # within half its last figure, that half included (1792 B is 1.75 KiB, written 1.8)
    assert abs(float(number) * scale - n) <= max(0.005 * n, 0.05 * scale) * (1 + 1e-9)
    assert n < P.KIB if unit == "B" else n >= scale
    assert len(number) <= 4 or unit == "GiB"  # "1023", "99.9": four cells at most below a GiB


@given(sizes, sizes)
def test_size_text_keeps_the_order_of_two_sizes(a, b):
    def back(s: str) -> float:
        number, unit = s.split(" ")
        return float(number) * {"B": 1, "KiB": P.KIB, "MiB": P.MIB, "GiB": P.GIB}[unit]
    if a <= b:
        assert back(P.size_text(a)) <= back(P.size_text(b))


@given(st.integers(min_value=-(1 << 40), max_value=1 << 40))
def test_memory_in_mb_and_its_change(n):
    assert P.mib(n, signed=True) == pytest.approx(n / P.MIB, abs=0.05)
    assert (P.mib(n) is None) == (n < 0)
    change = P.signed_mb(n)
    assert change == "±0 MB" if abs(n) < P.MIB / 2 else change[0] in "+\u2212" and change.endswith(" MB")


@given(st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_secs_text_reads_as_elapsed_time(x):
    s = P.secs_text(x)
    assert re.fullmatch(r"\d+\.\d s|\d+m\d\ds|\d+h\d\dm", s), s


def test_the_figures_people_see_most():
    assert [P.ms_text(v) for v in (0.1234, 1.234, 12.34, 123.4, 0.9996, 9.996)] == \
        ["0.123", "1.23", "12.3", "123", "1.00", "10.0"]
    assert [P.rate_text(v) for v in (4.25, 812, 1234, 12345)] == ["4.2/s", "812/s", "1.2k/s", "12k/s"]
    assert [P.rate_figure(v) for v in (0.37, 4.2, 6, 9.96, 812.4)] == ["0.37", "4.2", "6.0", "10", "812"]
    assert [P.size_text(v) for v in (812, 66253, 3355443, 1181116006)] == ["812 B", "64.7 KiB", "3.2 MiB", "1.1 GiB"]
    assert P.change_pct(-12.4) == "\u221212 %" and P.change_pct(1.24) == "+1.2 %"
    assert P.figures_alike(12.34, 9.8) == ["12.3", "9.8"] and P.hz_text(0) == "closed loop"
    assert P.cores_text(110.0) == "1.10 cores" and P.pct_text(45.2, 4) == " 45%"


# A formatter is a function that turns a figure of one of these kinds into text. Outside the presentation room none
# is defined: the rooms call ortop.present.
FORMATTER = re.compile(r"(^|_)(fmt|ms_text|rate_text|pct_text|size|bytes|num|pct|mb|mib|rate)$|^fmt_|_fmt_")


def _formatters_outside() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "present":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and FORMATTER.search(node.name) and node.returns is not None \
                    and ast.unparse(node.returns) == "str":
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    return found


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_no_room_but_the_presentation_room_writes_a_unit():
    assert _formatters_outside() == []


def test_the_scan_finds_a_formatter_where_one_is_written(tmp_path, monkeypatch):
    """The scan itself: a module with a local byte formatter is found (and one returning a number is not)."""
    room = tmp_path / "ortop" / "somewhere"
    room.mkdir(parents=True)
    (room / "m.py").write_text("def _size(n: int) -> str:\n    return f'{n} B'\n\n"
                               "def period_ms(x: float) -> float:\n    return x\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "ortop")
    assert _formatters_outside() == ["somewhere/m.py:1 _size"]


@pytest.mark.parametrize("p50,p99", [(0.123456, 1.23456), (1.23456, 12.3456), (12.3456, 123.456)])
def test_one_figure_reads_the_same_in_the_live_view_the_headless_table_and_the_report(p50, p99):
    """A run's p50 and p99 through the live view's latency panel, the headless summary and the compare report."""
    from ortop.cli.run import format_summary
    from ortop.measure.stats import LatencyStats
    from ortop.report.pages import compare_page
    from ortop.tui.panels.latency import latency_panel

    lat = LatencyStats(500, p50, p50, p50, p99, p99, p99, p50, p99)
    tui = latency_panel([], lat, lat, 500, 100.0, 0.5, 120, 8).plain
    row = {"mean": p50, "p50": p50, "p90": p50, "p99": p99, "p999": p99, "max": p99}
    d = {"model": "m.onnx", "inputs": ["x float32[1]"], "providers_active": ["CPUExecutionProvider"],
         "providers_requested": ["CPUExecutionProvider"], "session": {"create_ms": 5.0, "first_run_ms": 1.0},
         "runs": 500, "duration_s": 5.0, "warmup_runs": 3, "throughput_per_s": 100.0, "latency_ms": row,
         "cpu": {"cpu_ms_per_run": 1.0, "cpu_ms_between_runs_per_s": 0.0, "process_cpu_percent": 100.0},
         "gpu": None, "warnings": []}
    headless = format_summary(d)
    page = compare_page({"model": "m.onnx", "objective": "p50", "elapsed_s": 5, "budget_s": 5, "blocks": 10,
                         "block_s": 0.3, "configs": [{"profile": "a", "runs": 500, "p50_ms": p50, "p99_ms": p99,
                                                      "throughput_per_s": 100.0, "cpu_ms_per_run": 1.0}]})
    for ms in (p50, p99):
        said = P.ms_text(ms)
        assert f"p{50 if ms == p50 else 99} {said}" in tui
        assert f"p{50 if ms == p50 else 99} {said}" in headless
        assert f">{said}<" in page, (said, page)
