"""The latency panel and the number formats it shows, as plain strings."""

from __future__ import annotations

import math

import pytest

from ortop.measure.stats import Bucket, LatencyStats
from ortop.present import ms_text
from ortop.tui.panels import latency


def lines(text) -> list[str]:
    return text.plain.split("\n")


def _series(n: int, markers: tuple[int, ...] = (), gap: tuple[int, ...] = ()) -> list[Bucket]:
    return [Bucket(i * 0.5, 100, 1.0 + (i % 3) * 0.1, 2.0 + (i % 5) * 0.2, i in markers) for i in range(n)
            if i not in gap]


def test_latency_marker_sits_over_the_rebuild_bucket() -> None:
    series = _series(30, markers=(20,))
    text = latency.latency_panel(series, LatencyStats(), LatencyStats(), 3000, 200.0, 0.5, 40, 6)
    out = lines(text)
    marker, p50 = out[0], out[1]
    col = marker.index("▼")
    assert marker.count("▼") == 1
    # the bucket under the marker is bucket 20: 9 buckets from the newest (29) at the right end of the spark
    spark_end = len(p50) - 12
    assert col == spark_end - 1 - 9


def test_latency_gap_shows_blank_columns() -> None:
    cols = latency.series_columns(_series(20, gap=(10, 11)), 40, 0.5)
    assert len(cols) == 20 and cols[10] is None and cols[11] is None
    assert latency.series_columns([], 40, 0.5) == []


def test_latency_panel_current_figures() -> None:
    window = LatencyStats(100, 1.1, 1.0, 1.5, 1.6, 2.0, 2.5, 0.9, 3.0)
    text = latency.latency_panel(_series(5), window, window, 1234, 812.0, 0.5, 60, 6, window_rate=200.0)
    out = lines(text)
    assert out[0].endswith("last 5 s")  # the column of figures names its window
    assert out[1].startswith("p50 ") and out[1].endswith("1.00 ms")
    assert out[3].startswith("thr ") and out[3].endswith("200/s")
    assert out[4] == "last 5 s: 100 runs · p90 1.50 · max 3.00 ms"
    assert out[5] == "all 1,234 runs: p50 1.00 · p99 2.00 · p99.9 2.50 ms · 812/s"
    assert all(len(line) <= 60 for line in out)


def test_the_headline_rests_on_the_window_not_on_the_last_bucket() -> None:
    """At 2 runs a second a bucket's p50 and p99 are one run: the figures beside the sparklines are the window's,
    and a window of few runs says how many."""
    series = [Bucket(i * 0.5, 1, 16.5, 16.5) for i in range(20)]
    window = LatencyStats(7, 100.0, 109.0, 200.0, 250.0, 285.0, 285.0, 16.5, 285.0)
    out = lines(latency.latency_panel(series, window, window, 40, 2.0, 0.5, 60, 6, 12.0, window_rate=0.6))
    assert out[1].endswith("109 ms") and out[2].endswith("285 ms"), out
    assert "16.5" not in out[1] + out[2]
    assert out[0].endswith("12 s·7 runs")
    assert out[4].startswith("last 12 s: 7 runs")


def test_throughput_reads_paused_while_paused() -> None:
    window = LatencyStats(100, 1.1, 1.0, 1.5, 1.6, 2.0, 2.5, 0.9, 3.0)
    out = lines(latency.latency_panel(_series(20), window, window, 1234, 22.0, 0.5, 60, 6, window_rate=22.0,
                                      paused=True))
    assert out[3].endswith("paused") and "22" not in out[3]


def test_the_window_widens_at_low_rates_and_serves_a_rate_over_its_span() -> None:
    import numpy as np

    from ortop.engine.live.readout import recent_window
    from ortop.measure.stats import WINDOW_MIN_RUNS

    def rows(times):
        r = np.zeros((len(times), 4))
        r[:, 0] = 10.0
        r[:, 3] = times
        return r

    # 8 runs a second for 60 s: 40 runs in the last 5 s, 8.0/s
    lat, span, rate = recent_window(rows(np.arange(0, 60, 0.125)), 60.0, 5.0)
    assert span == 5.0 and lat.runs == 40 and rate == pytest.approx(8.0)
    # 2 runs a second: 10 runs in 5 s, widened to the last 20 runs (10 s)
    lat, span, rate = recent_window(rows(np.arange(0, 60, 0.5)), 60.0, 5.0)
    assert span == 10.0 and lat.runs >= WINDOW_MIN_RUNS and rate == pytest.approx(2.0, rel=0.1)
    # a configuration 3 s old: the rate is over the 3 s it ran, not the window
    lat, span, rate = recent_window(rows(np.arange(57, 60, 0.125)), 60.0, 5.0, age_s=3.0)
    assert rate == pytest.approx(8.0)
    # back from a 12 s verification 2 s ago: the window widens for its p99, the rate counts the last 2 s only
    times = np.concatenate([np.arange(40, 46, 0.1), np.arange(58, 60, 0.2)])  # 5 runs a second since
    lat, span, rate = recent_window(rows(times), 60.0, 5.0, age_s=2.0)
    assert span == 15.0 and lat.runs == 20 and rate == pytest.approx(5.0, rel=0.1)


@pytest.mark.parametrize("value,expected", [(0.1234, "0.123"), (1.234, "1.23"), (12.34, "12.3"), (123.4, "123"),
                                            (0.9996, "1.00"), (9.996, "10.0"), (math.nan, "—"), (None, "—")])
def test_ms_text(value, expected) -> None:
    assert ms_text(value) == expected


def test_throughput_scales_from_zero_so_a_small_dip_is_not_a_crash() -> None:
    """94 against 100 runs/s drew as the lowest block next to the highest on its own range; from 0 they read alike."""
    series = [Bucket(i * 0.5, 50 if i % 2 else 47, 1.0, 2.0) for i in range(20)]  # 100 and 94 runs/s
    thr = lines(latency.latency_panel(series, LatencyStats(), LatencyStats(), 100, 97.0, 0.5, 60, 6))[3]
    blocks = set(thr[4:-12].strip())
    assert blocks <= {"▇", "█"}, thr
    assert "thr: from 0" in lines(latency.latency_panel(series, LatencyStats(), LatencyStats(), 100, 97.0, 0.5, 60,
                                                         8))[-1]


@pytest.mark.parametrize(("runs", "shown", "left_out"), [
    (40, ("p50 ",), ("p99 ", "p99.9")),     # p99 of 40 runs would be the slowest of them
    (500, ("p50 ", "p99 "), ("p99.9",)),    # p99.9 needs 1,000
    (1234, ("p50 ", "p99 ", "p99.9 "), ()),
])
def test_the_all_runs_line_leaves_out_a_percentile_its_runs_cannot_give(runs: int, shown: tuple, left_out: tuple
                                                                        ) -> None:
    window = LatencyStats(runs, 1.1, 1.0, 1.5, 1.6, 2.0, 2.5, 0.9, 3.0)
    out = lines(latency.latency_panel(_series(5), window, window, runs, 812.0, 0.5, 60, 6, window_rate=200.0))
    total = out[5]
    assert total.startswith(f"all {runs:,} runs: p50 1.00"), out
    assert all(k in total for k in shown) and not any(k in total for k in left_out), total
