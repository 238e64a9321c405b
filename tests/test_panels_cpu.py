"""The CPU and spin panels as plain strings: no app, no terminal."""

from __future__ import annotations

import math

import pytest

from ortop.collectors.cpu import CpuSample, ThreadSample
from ortop.engine.monitor import CpuCost
from ortop.tui.panels import cpu, spin


def lines(text) -> list[str]:
    return text.plain.split("\n")


# ---- CPU ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 16, 64, 256])
@pytest.mark.parametrize("width,height", [(38, 6), (48, 9), (66, 17), (20, 4)])
def test_core_view_fits_its_box(n: int, width: int, height: int) -> None:
    per_core = [(i * 37) % 101 for i in range(n)]
    text = cpu.core_meters(per_core, {0, 1}, width, height)
    out = lines(text)
    assert len(out) <= height
    assert all(len(line) <= width for line in out), out


def test_meters_number_cores_from_zero_and_show_load() -> None:
    out = lines(cpu.core_meters([12.0, 87.0], set(), 40, 4))
    assert len(out) == 1  # two meters side by side when the bars stay readable
    assert out[0].startswith("0▕")
    assert "1▕" in out[0]
    assert out[0].rstrip().endswith("87")


def test_meters_bar_length_follows_load() -> None:
    full, empty = lines(cpu.core_meters([100.0, 0.0], set(), 20, 2))
    assert full.count("█") > 5
    assert "█" not in empty


def test_worker_cores_are_highlighted() -> None:
    text = cpu.core_meters([50.0, 50.0, 50.0, 50.0], {2}, 60, 4)
    styled = {str(span.style) for span in text.spans if text.plain[span.start:span.end].strip() == "2"}
    assert any("cyan" in s for s in styled)


def test_many_cores_become_a_heat_grid() -> None:
    per_core = [0.0] * 256
    per_core[5] = 100.0
    text = cpu.core_meters(per_core, {5}, 38, 8)
    out = lines(text)
    assert "▕" not in text.plain  # no meters: one cell per core
    assert len(out) <= 8
    assert sum(line.count("·") for line in out) >= 250
    assert "█" in text.plain


def test_heat_grid_labels_rows_and_groups_by_eight_when_there_is_room() -> None:
    out = lines(cpu.heat_grid([1.0] * 64, set(), 60, None))
    assert out[0].startswith(" 0 ")
    assert "········ ········" in out[0]


def test_cpu_panel_summary_line() -> None:
    sample = CpuSample((10.0, 90.0), 50.0, 180.0, (), frozenset({1}), 1.5)
    out = lines(cpu.cpu_panel(sample, 40, 4))
    assert out[-1] == "worker 180% · system 50% · ui 1.5%"
    assert cpu.cpu_panel(None, 40, 4).plain.startswith("waiting")


# ---- spin -----------------------------------------------------------------------------------------------------
def test_spin_split_in_runs_and_between() -> None:
    inside, between, total = spin.spin_split(CpuCost(13.1, 850.0, 100.0, 12.0))
    assert total == pytest.approx(1000.0)
    assert between == pytest.approx(850.0)
    assert inside == pytest.approx(150.0)
    assert all(math.isnan(x) for x in spin.spin_split(CpuCost())[::2])


def test_spin_panel_shows_spinning_as_the_bigger_share() -> None:
    threads = (ThreadSample(101, 97.0, 3, "python"), ThreadSample(102, 0.2, 1, "python"))
    text = spin.spin_panel(CpuCost(13.1, 850.0, 100.0, 12.0), threads, 48, 8)
    out = lines(text)
    assert out[0].startswith("CPU/run 13.1 ms")
    assert "850 ms/s" in out[1] and "85% of its CPU" in out[1]
    bar = out[2]
    assert bar.count("▒") > 3 * bar.count("█")  # most of the CPU went between runs
    assert any(line.startswith("101") and " 3 " in line and "97%" in line for line in out)
    assert all(len(line) <= 48 for line in out)


def test_spin_panel_concurrent_callers_have_no_between_figure() -> None:
    text = spin.spin_panel(CpuCost(2.0, math.nan, 150.0, 90.0), (), 48, 4)
    assert "n/a with concurrent callers" in text.plain
