"""The UI's drawing functions as plain strings: no app, no terminal."""

from __future__ import annotations

import math

import pytest

from ortop.config import profile as profile_mod
from ortop.collectors.cpu import CpuSample, ThreadSample
from ortop.collectors.gpu import NO_GPU, GpuDevice, GpuSample
from ortop.engine.monitor import ConfigRecord, CpuCost, Event
from ortop.config.profile import Profile
from ortop.measure.stats import Bucket, LatencyStats
from ortop.tui import form, render


def lines(text) -> list[str]:
    return text.plain.split("\n")


# ---- CPU -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 16, 64, 256])
@pytest.mark.parametrize("width,height", [(38, 6), (48, 9), (66, 17), (20, 4)])
def test_core_view_fits_its_box(n: int, width: int, height: int) -> None:
    per_core = [(i * 37) % 101 for i in range(n)]
    text = render.core_meters(per_core, {0, 1}, width, height)
    out = lines(text)
    assert len(out) <= height
    assert all(len(line) <= width for line in out), out


def test_meters_number_cores_from_zero_and_show_load() -> None:
    out = lines(render.core_meters([12.0, 87.0], set(), 40, 4))
    assert len(out) == 1  # two meters side by side when the bars stay readable
    assert out[0].startswith("0▕")
    assert "1▕" in out[0]
    assert out[0].rstrip().endswith("87")


def test_meters_bar_length_follows_load() -> None:
    full, empty = lines(render.core_meters([100.0, 0.0], set(), 20, 2))
    assert full.count("█") > 5
    assert "█" not in empty


def test_worker_cores_are_highlighted() -> None:
    text = render.core_meters([50.0, 50.0, 50.0, 50.0], {2}, 60, 4)
    styled = {str(span.style) for span in text.spans if text.plain[span.start:span.end].strip() == "2"}
    assert any("cyan" in s for s in styled)


def test_many_cores_become_a_heat_grid() -> None:
    per_core = [0.0] * 256
    per_core[5] = 100.0
    text = render.core_meters(per_core, {5}, 38, 8)
    out = lines(text)
    assert "▕" not in text.plain  # no meters: one cell per core
    assert len(out) <= 8
    assert sum(line.count("·") for line in out) >= 250
    assert "█" in text.plain


def test_heat_grid_labels_rows_and_groups_by_eight_when_there_is_room() -> None:
    out = lines(render.heat_grid([1.0] * 64, set(), 60, None))
    assert out[0].startswith(" 0 ")
    assert "········ ········" in out[0]


def test_cpu_panel_summary_line() -> None:
    sample = CpuSample((10.0, 90.0), 50.0, 180.0, (), frozenset({1}), 1.5)
    out = lines(render.cpu_panel(sample, 40, 4))
    assert out[-1] == "worker 180% · system 50% · ui 1.5%"
    assert render.cpu_panel(None, 40, 4).plain.startswith("waiting")


# ---- spin ------------------------------------------------------------------------------------------------------
def test_spin_split_in_runs_and_between() -> None:
    inside, between, total = render.spin_split(CpuCost(13.1, 850.0, 100.0, 12.0))
    assert total == pytest.approx(1000.0)
    assert between == pytest.approx(850.0)
    assert inside == pytest.approx(150.0)
    assert all(math.isnan(x) for x in render.spin_split(CpuCost())[::2])


def test_spin_panel_shows_spinning_as_the_bigger_share() -> None:
    threads = (ThreadSample(101, 97.0, 3, "python"), ThreadSample(102, 0.2, 1, "python"))
    text = render.spin_panel(CpuCost(13.1, 850.0, 100.0, 12.0), threads, 48, 8)
    out = lines(text)
    assert out[0].startswith("CPU/run 13.1 ms")
    assert "850 ms/s" in out[1] and "85% of its CPU" in out[1]
    bar = out[2]
    assert bar.count("▒") > 3 * bar.count("█")  # most of the CPU went between runs
    assert any(line.startswith("101") and " 3 " in line and "97%" in line for line in out)
    assert all(len(line) <= 48 for line in out)


def test_spin_panel_concurrent_callers_have_no_between_figure() -> None:
    text = render.spin_panel(CpuCost(2.0, math.nan, 150.0, 90.0), (), 48, 4)
    assert "n/a with concurrent callers" in text.plain


# ---- GPU -------------------------------------------------------------------------------------------------------
def test_gpu_panel_no_gpu_is_a_state_not_an_error() -> None:
    text = render.gpu_panel(GpuSample((), NO_GPU), {}, 40, 3)
    assert text.plain.startswith("no NVIDIA GPU / NVML not available")
    assert "red" not in " ".join(str(s.style) for s in text.spans)


def test_gpu_panel_memory_worker_and_util() -> None:
    dev = GpuDevice(0, "NVIDIA H100", 6 * 2 ** 30, 80 * 2 ** 30, None, 45.0, 3 * 2 ** 30)
    text = render.gpu_panel(GpuSample((dev,), "ok"), {0: ([1.0, 2.0, 3.0], [10.0, 50.0, 45.0])}, 60, 2)
    out = lines(text)
    assert out[0].startswith("#0 NVIDIA H100") and "util  45%" in out[0]
    assert "6.0 GiB/80.0 GiB" in out[1] and "worker 3.0 GiB" in out[1]
    assert render.gpu_rows(GpuSample((dev,), "ok")) == 2


# ---- latency ---------------------------------------------------------------------------------------------------
def _series(n: int, markers: tuple[int, ...] = (), gap: tuple[int, ...] = ()) -> list[Bucket]:
    return [Bucket(i * 0.5, 100, 1.0 + (i % 3) * 0.1, 2.0 + (i % 5) * 0.2, i in markers) for i in range(n)
            if i not in gap]


def test_latency_marker_sits_over_the_rebuild_bucket() -> None:
    series = _series(30, markers=(20,))
    text = render.latency_panel(series, LatencyStats(), LatencyStats(), 3000, 200.0, 0.5, 40, 6)
    out = lines(text)
    marker, p50 = out[0], out[1]
    col = marker.index("▼")
    assert marker.count("▼") == 1
    # the bucket under the marker is bucket 20: 9 buckets from the newest (29) at the right end of the spark
    spark_end = len(p50) - 11
    assert col == spark_end - 1 - 9


def test_latency_gap_shows_blank_columns() -> None:
    cols = render.series_columns(_series(20, gap=(10, 11)), 40, 0.5)
    assert len(cols) == 20 and cols[10] is None and cols[11] is None
    assert render.series_columns([], 40, 0.5) == []


def test_latency_panel_current_figures() -> None:
    window = LatencyStats(100, 1.1, 1.0, 1.5, 1.6, 2.0, 2.5, 0.9, 3.0)
    text = render.latency_panel(_series(5), window, window, 1234, 812.0, 0.5, 60, 6)
    out = lines(text)
    assert out[1].startswith("p50 ") and out[1].endswith("1.10 ms")
    assert out[3].startswith("thr ") and out[3].endswith("200/s")
    assert out[4] == "last 5 s p50 1.00 p90 1.50 p99 2.00 max 3.00 ms"
    assert out[5].startswith("1,234 runs p50 1.00 p99 2.00")
    assert all(len(line) <= 60 for line in out)


@pytest.mark.parametrize("value,expected", [(0.1234, "0.123"), (1.234, "1.23"), (12.34, "12.3"), (123.4, "123"),
                                            (0.9996, "1.00"), (9.996, "10.0"), (math.nan, "—"), (None, "—")])
def test_fmt_ms(value, expected) -> None:
    assert render.fmt_ms(value) == expected


# ---- events / history --------------------------------------------------------------------------------------------
def test_events_newest_last_with_counts() -> None:
    events = [Event(1.0, "info", "first"), Event(2.0, "warning", "ORT: repeated", 269), Event(3.0, "error", "last")]
    out = lines(render.events_panel(events, 40, 2))
    assert len(out) == 2
    assert "ORT: repeated" in out[0] and out[0].endswith("×269")
    assert out[1].endswith("✗ last")


def _record(cid: int, p50: float, verdict: str = "", best: bool = False, label: str = "start") -> ConfigRecord:
    lat = LatencyStats(500, p50, p50, p50, p50, p50 * 2, p50 * 3, p50, p50 * 4)
    return ConfigRecord(cid, label, Profile(), 0.0, 40.0, 3.0, ("CPUExecutionProvider",), lat, 1000 / p50,
                        CpuCost(2.5, math.nan, 100.0, 90.0), verdict, best)


def test_history_rows_star_best_and_colour_verdicts() -> None:
    rows = render.history_rows([
        _record(0, 4.0),
        _record(1, 2.0, "50.0% faster", best=True, label="session.intra_op_num_threads: 0 → 4"),
        _record(2, 2.1, "no real change (+5.0%, within noise)", label="session.allow_spinning: default → off"),
    ], current_id=2)
    assert [r[0].plain for r in rows] == ["", "★", "▶"]
    assert rows[1][2].plain == "intra_op_num_threads: 0 → 4"
    assert rows[1][4].plain == "2.00"
    assert "green" in str(rows[1][8].style)
    assert "dim" in str(rows[2][8].style) and rows[2][8].plain == "noise (+5.0%)"
    assert render.verdict_style("12.0% slower") == "bold red"
    assert len(rows[0]) == len(render.HISTORY_COLUMNS)


def test_settings_line_names_the_demo_knobs() -> None:
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4, "session.allow_spinning": False,
                                        "session.dynamic_block_base": 4, "workload.rate_hz": 100.0})
    assert render.settings_line(p) == "intra 4 · spin off · dbb 4 · rate 100 Hz"


# ---- the settings form ------------------------------------------------------------------------------------------
def test_form_round_trips_a_profile() -> None:
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4,
                                        "session.intra_op_thread_affinities": [[1], [2, 3], [5]],
                                        "session.allow_spinning": False, "workload.rate_hz": 100.0,
                                        "env.OMP_NUM_THREADS": "1"})
    values = form.form_values(p)
    assert values["session.intra_op_thread_affinities"] == "1;2,3;5"
    assert values["session.allow_spinning"] == "off"
    assert values["session.spin_duration_us"] == ""
    assert form.changes(p, values) == {}
    assert form.build(p, values) == p


def test_form_changes_tri_states_and_blanks() -> None:
    p = Profile()
    values = form.form_values(p)
    values.update({"session.allow_spinning": "off", "session.dynamic_block_base": "4",
                   "env.OMP_WAIT_POLICY": "PASSIVE"})
    assert form.changes(p, values) == {"session.allow_spinning": False, "session.dynamic_block_base": 4,
                                       "env.OMP_WAIT_POLICY": "PASSIVE"}
    new = form.build(p, values)
    assert new.session.allow_spinning is False and new.env == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_form_bad_number_names_its_field() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "four"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "session.intra_op_num_threads"


def test_form_affinity_count_mismatch_is_keyed_to_the_affinity_field() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "3"
    values["session.intra_op_thread_affinities"] = "1"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.build(Profile(), values)
    keys = [k for k, _ in form.error_keys(exc.value)]
    assert "session.intra_op_thread_affinities" in keys
    assert form.field_for("provider.options.gpu_mem_limit") == "provider.options.gpu_mem_limit"
    assert form.field_for("workload.dims.batch") is None


def test_cores_helper_spreads_one_core_per_pool_thread() -> None:
    assert form.parse_affinity("cores: 0-3", 4) == ((1,), (2,), (3,))  # core 0 left to the calling thread
    assert form.parse_affinity("cores: 4-6", 4) == ((4,), (5,), (6,))
    assert form.parse_affinity("1;2,3", 3) == ((1,), (2, 3))
    assert form.parse_affinity("", 3) is None
    assert form.affinity_preview("cores: 0-3", 4) == 'ORT: "2;3;4" (1-based)'
    assert form.affinity_preview("cores: 0-3", 1).startswith("✗")
    for bad in ("cores: 0-1Z", "1;x"):
        with pytest.raises(profile_mod.ProfileError) as exc:
            form.parse_affinity(bad, 3)
        assert exc.value.key == "session.intra_op_thread_affinities"


def test_cuda_options_need_the_cuda_provider() -> None:
    values = form.form_values(Profile())
    values["provider.options.gpu_mem_limit"] = "1000000"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "provider.options.gpu_mem_limit"
    values["provider.name"] = "cuda"
    assert form.changes(Profile(), values)["provider.options.gpu_mem_limit"] == 1000000
