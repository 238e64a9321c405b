"""Where traffic's figures are shown: the summary, the live panels, the Prometheus endpoint and the jsonl stream."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from ortop.config import profile as P
from ortop.engine import traffic as T
from ortop.metrics.jsonl import interval_line
from ortop.metrics.prometheus import OrtopCollector


def ring(service_ms, queue_ms, shapes=None, idle_ms=None) -> np.ndarray:
    n = len(service_ms)
    rows = np.zeros((n, 8), dtype=np.int64)
    rows[:, 0] = np.arange(n) * 1_000_000
    rows[:, 1] = (np.asarray(service_ms) * 1e6).astype(np.int64)
    rows[:, 5] = (np.asarray(queue_ms) * 1e6).astype(np.int64)
    rows[:, 6] = 0 if shapes is None else shapes
    rows[:, 7] = (np.asarray(idle_ms if idle_ms is not None else np.zeros(n)) * 1e6).astype(np.int64)
    return T.ring_rows(rows, np.arange(n) / 1000.0)


def test_ring_rows_put_response_first_as_queue_plus_service():
    r = ring([1.0, 2.0], [0.5, 0.0])
    assert list(r[:, T.RESPONSE]) == [1.5, 2.0] and list(r[:, T.SERVICE]) == [1.0, 2.0]
    assert list(r[:, T.QUEUE]) == [0.5, 0.0]


def test_figures_say_when_the_rate_was_not_kept():
    rows = ring([4.0] * 400, np.linspace(0, 900, 400), idle_ms=np.r_[np.full(200, 0.1), np.full(200, 50.0)])
    counters = T.Counters(arrived=2000, dropped=600, queue_len=1000, queue_max=1000)
    t = T.figures("poisson", 1000.0, rows, counters, wall_s=2.0, runs=400)
    assert t.offered_per_s == 1000.0 and t.served_per_s == 200.0 and not t.kept()
    assert t.warning() == ("offered 1000/s, served 200/s, 600 requests shed (queue full at 1000): this configuration "
                           "serves about 200/s here; the latencies include queueing")
    gaps = {g.label: g.runs for g in t.idle_gaps}
    assert gaps == {"< 1 ms": 200, "1–10 ms": 0, "10–100 ms": 200, "≥ 100 ms": 0}
    d = T.summary_part(t)
    assert d["arrivals"] == {"mode": "poisson", "offered_per_s": 1000.0, "served_per_s": 200.0, "dropped": 600,
                             "queue_max": 1000, "kept": False}
    keys = {"mean", "std", "p50", "p90", "p95", "p99", "p999", "min", "max"}
    assert set(d["service_ms"]) == keys == set(d["queue_ms"])
    kept = T.figures("poisson", 1000.0, rows, T.Counters(arrived=2000), wall_s=2.0, runs=1960)
    assert kept.kept() and kept.warning() == ""
    closed = T.figures("closed", 0.0, rows, T.Counters(), wall_s=2.0, runs=400)
    assert closed.kept() and not closed.open and closed.idle_gaps == ()


def test_shape_rows_follow_the_shape_column():
    rows = ring([1.0, 1.2, 5.0, 5.5, 5.2], [0, 0, 1, 0, 0], shapes=[0, 0, 1, 1, 1])
    t = T.figures("fixed", 10.0, rows, T.Counters(arrived=5), 1.0, 5, [{"x": [1, 8]}, {"x": [4, 8]}],
                  ["batch=1", "batch=4"])
    assert [(s.label, s.runs) for s in t.shapes] == [("batch=1", 2), ("batch=4", 3)]
    assert t.shapes[1].service.p50 == pytest.approx(5.2) and t.shapes[1].response.max == pytest.approx(6.0)


def test_the_asked_rate_and_the_servers_of_a_profile_count_its_replicas():
    from ortop.measure.pace import servers_of

    prof = P.from_dict({"workload": {"rate_hz": 100, "replicas": 2, "concurrency": 2}})
    assert T.offered_rate(prof) == 200.0 and servers_of(prof.workload) == 4
    assert np.isnan(T.offered_rate(P.Profile()))
    # 200/s at 15 ms a request: three servers' time, which four have and two do not, whatever the counts say
    t = T.figures("poisson", 100.0, ring([15.0] * 400, [0.0] * 400), T.Counters(arrived=2000), 10.0, 1990)
    assert t.window_s == 10.0 and t.kept() and t.kept(servers=4) and not t.kept(servers=2)
    assert not T.figures("poisson", 100.0, ring([15.0] * 400, [0.0] * 400), T.Counters(arrived=2000), 10.0, 1990,
                         servers=2).kept()



def _snapshot(traffic: T.Traffic | None):
    from tests.fakes.monitor import FakeMonitor

    snap = FakeMonitor().snapshot()
    return dataclasses.replace(snap, traffic=traffic)


def test_prometheus_and_jsonl_carry_the_offered_rate_the_shed_and_the_split():
    rows = ring([2.0] * 100, [3.0] * 100)
    t = T.figures("poisson", 500.0, rows, T.Counters(arrived=1000, dropped=7), 2.0, 100)
    snap = _snapshot(t)
    mon = type("M", (), {"snapshot": lambda self: snap, "config_runs": lambda self, cid: np.zeros(0)})()
    reg = CollectorRegistry()
    reg.register(OrtopCollector(mon))
    text = generate_latest(reg).decode()
    assert "ortop_requests_dropped_total 7.0" in text
    assert "ortop_offered_rate_per_second 500.0" in text
    assert 'ortop_queue_wait_seconds{quantile="0.99"} 0.003' in text
    assert 'ortop_service_seconds{quantile="0.5"} 0.002' in text
    line = interval_line(np.array([5.0, 5.0]), t=1.0, interval_s=1.0, snap=snap, runs_total=2, rss_bytes=None)
    assert line["arrival"] == "poisson" and line["dropped"] == 7 and line["queue_p99_ms"] == 3.0
    closed = interval_line(np.array([5.0]), t=1.0, interval_s=1.0, snap=_snapshot(None), runs_total=1,
                           rss_bytes=None)
    assert "arrival" not in closed


def test_the_latency_panel_splits_response_and_the_status_line_says_the_pace():
    from ortop.tui.panels import latency, status

    rows = ring([2.0] * 100, [30.0] * 100)
    t = T.figures("poisson", 2000.0, rows, T.Counters(arrived=4000, dropped=3000), 2.0, 100)
    split = latency.split_line(t)
    assert split is not None
    assert split.plain == "poisson queue 30.0/30.0 + service 2.00/2.00 ms p50/p99 3000 shed"
    assert latency.split_line(dataclasses.replace(t, mode="closed")) is None
    # the status line judges a configuration that has measured SETTLE_S (3 s) at least
    t = T.figures("poisson", 2000.0, rows, T.Counters(arrived=8000, dropped=6000), 4.0, 200)
    snap = dataclasses.replace(_snapshot(t), runs=200)
    line = status.status_line(snap, 200).plain
    assert "offered 2.0k/s, served 50/s, 6000 shed: queueing" in line


def test_the_spin_panel_gives_p99_by_idle_gap():
    from ortop.tui.panels import spin

    rows = ring([1.0] * 50 + [3.0] * 50, [0.0] * 100, idle_ms=[0.2] * 50 + [40.0] * 50)
    t = T.figures("poisson", 50.0, rows, T.Counters(arrived=100), 2.0, 100)
    line = spin.gaps_line(t.idle_gaps, 80)
    assert line is not None
    assert line.plain == "p99 after an idle gap of (ms): < 1: 1.00 · 1–10: — · 10–100: 3.00 · ≥ 100: —"
    # at the spin panel's width at 80×24 every bucket is still there, wrapped at a term, none cut
    narrow = spin.gaps_lines(t.idle_gaps, 38)
    assert len(narrow) == 2 and all(len(x.plain) <= 38 for x in narrow)
    joined = " ".join(x.plain for x in narrow)
    assert all(term in joined for term in ("< 1: 1.00", "1–10: —", "10–100: 3.00", "≥ 100: —"))
    assert spin.gaps_line((), 80) is None


def test_a_verified_spinning_change_reports_the_long_gap_p99_beside_cpu_per_run():
    from types import SimpleNamespace

    from ortop.engine.bench.record import gap_figures as _gap_figures
    from ortop.engine.live.snapshot import RowVerdict
    from ortop.engine.live.verify import with_long_gaps

    assert _gap_figures([np.full(10, 1.0)])[1] == 10 and np.isnan(_gap_figures([np.full(10, 1.0)])[0])
    p99, n = _gap_figures([np.linspace(1.0, 2.0, 50), np.full(50, 3.0)])
    assert n == 100 and p99 == pytest.approx(3.0)
    v = RowVerdict("faster", "CPU/run −80 %", "CPU/run 10 → 2 ms, −80 %", (), "cpu", 0)
    res = SimpleNamespace(configs=[SimpleNamespace(gap_p99_ms=1.5, gap_runs=40),
                                   SimpleNamespace(gap_p99_ms=2.5, gap_runs=42)])
    said = with_long_gaps(v, res, "cpu").text
    assert said == "CPU/run 10 → 2 ms, −80 %; service p99 after ≥ 10 ms idle 1.5 → 2.5 ms (40 and 42 runs)"
    assert with_long_gaps(v, res, "p50") is v  # only a change judged on CPU per run


def test_the_headless_tables_queue_service_gap_and_shape_percentiles_say_dash_under_their_runs() -> None:
    """99 runs of a slow model: no p99 of service, queue, an idle gap or a shape is printed, as on the latency line;
    their p50s (and 120 runs' p99) are."""
    from ortop.cli.run import _traffic_lines

    ms = {"mean": 90.0, "p50": 85.0, "p99": 149.0, "max": 152.0}
    d = {"runs": 99, "arrivals": {"mode": "poisson", "offered_per_s": 6.8, "served_per_s": 6.7, "dropped": 0,
                                  "queue_max": 4},
         "service_ms": ms, "queue_ms": ms,
         "idle_gaps": [{"gap": "1–10 ms", "runs": 1, "service_p50_ms": 77.2, "service_p99_ms": 77.2},
                       {"gap": "< 1 ms", "runs": 120, "service_p50_ms": 83.7, "service_p99_ms": 149.0}],
         "shapes": [{"label": "640x640", "runs": 99, "service_ms": ms, "latency_ms": ms}]}
    service, queue, gaps, shape = _traffic_lines(d)[1:]
    assert "p99 —" in service and "p99 —" in queue and "p50 85.0" in service and "max 152" in service
    assert "1–10 ms: 1 runs p50 — p99 —" in gaps and "< 1 ms: 120 runs p50 83.7 p99 149" in gaps
    assert shape.count("p99 —") == 2 and "service p50 85.0" in shape
