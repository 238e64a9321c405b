"""The latency panel and the number formats it shows, as plain strings."""

from __future__ import annotations

import math

import pytest

from ortop.measure.stats import Bucket, LatencyStats
from ortop.tui.panels import _format, latency


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
    spark_end = len(p50) - 11
    assert col == spark_end - 1 - 9


def test_latency_gap_shows_blank_columns() -> None:
    cols = latency.series_columns(_series(20, gap=(10, 11)), 40, 0.5)
    assert len(cols) == 20 and cols[10] is None and cols[11] is None
    assert latency.series_columns([], 40, 0.5) == []


def test_latency_panel_current_figures() -> None:
    window = LatencyStats(100, 1.1, 1.0, 1.5, 1.6, 2.0, 2.5, 0.9, 3.0)
    text = latency.latency_panel(_series(5), window, window, 1234, 812.0, 0.5, 60, 6)
    out = lines(text)
    assert out[1].startswith("p50 ") and out[1].endswith("1.10 ms")
    assert out[3].startswith("thr ") and out[3].endswith("200/s")
    assert out[4] == "last 5 s p50 1.00 p90 1.50 p99 2.00 max 3.00 ms"
    assert out[5].startswith("1,234 runs p50 1.00 p99 2.00")
    assert all(len(line) <= 60 for line in out)


@pytest.mark.parametrize("value,expected", [(0.1234, "0.123"), (1.234, "1.23"), (12.34, "12.3"), (123.4, "123"),
                                            (0.9996, "1.00"), (9.996, "10.0"), (math.nan, "—"), (None, "—")])
def test_fmt_ms(value, expected) -> None:
    assert _format.fmt_ms(value) == expected


def test_throughput_scales_from_zero_so_a_small_dip_is_not_a_crash() -> None:
    """94 against 100 runs/s drew as the lowest block next to the highest on its own range; from 0 they read alike."""
    series = [Bucket(i * 0.5, 50 if i % 2 else 47, 1.0, 2.0) for i in range(20)]  # 100 and 94 runs/s
    thr = lines(latency.latency_panel(series, LatencyStats(), LatencyStats(), 100, 97.0, 0.5, 60, 6))[3]
    blocks = set(thr[4:-11].strip())
    assert blocks <= {"▇", "█"}, thr
    assert "thr: from 0" in lines(latency.latency_panel(series, LatencyStats(), LatencyStats(), 100, 97.0, 0.5, 60,
                                                         8))[-1]
