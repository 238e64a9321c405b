"""The live view's process stays flat over a long session under open arrivals with a shape mix: what the monitor
reads per refresh and what it holds do not grow with the runs it has kept or the rebuilds it has made.

Measured before the fix, in a 40-minute soak of the live view (Poisson arrivals at 25/s, a three-shape mix, served
about 19/s): the UI process grew 83 → 89 MB from minute 5 to 40 and its CPU 3.4 → 4.9 % of a core. At that rate the
running configuration's ring (CONFIG_RING runs) fills over 44 minutes, and the readout's work grew with it: every
snapshot copied the whole ring for the recent window, and every second the record and the traffic figures were
computed again over all of it, through more whole copies (with 50 000 runs kept a snapshot's transient peak was
3.5 MB, the traffic figures' 6.5 MB: a heap that keeps its high-water mark grew with the ring). The ring's buffer
was mapped page by page as rows landed, and a replaced configuration kept a full ring's buffer.

These tests drive a Monitor that has no worker, with a fake clock, through its own message path: the build answer and
batches of runs as a worker sends them. An hour of a slow model's runs takes seconds that way; the figures are the
monitor's own, over rows shaped like a real worker's (queue, service, shape, idle gap columns).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.live import readout as readout_mod
from ortop.engine.live.monitor import Monitor
from ortop.engine.live.snapshot import Snapshot
from ortop.engine.live.store import CONFIG_RING, SETTLE_SPARE
from ortop.measure import stats
from ortop.measure.stats import Ring
from ortop.runtime import protocol as proto
from tests.models import make_matmul_model

SHAPES = [{"x": [1, 16]}, {"x": [2, 16]}, {"x": [4, 16]}]
LABELS = ["batch=1", "batch=2", "batch=4"]


class Session:
    """A monitor without a worker, fed as one: ``build()`` answers a rebuild, ``run(seconds)`` sends batches of
    runs every 0.25 s of the fake clock at ``rate`` runs a second, with open-arrival counters (a full queue that
    sheds), and reads a snapshot after each batch as the live view's 4 Hz tick does."""

    def __init__(self, model: str, rate: float, on_snapshot: Callable[[Snapshot], None] | None = None) -> None:
        self.clock = [0.0]
        prof = profile_mod.merge(Profile(), **{"workload.arrival": "poisson", "workload.rate_hz": rate * 1.3,
                                               "workload.dim_mix": {"batch": "1:1,2:1,4:1"}})
        self.mon = Monitor(model, prof, clock=lambda: self.clock[0])  # never started: no worker
        self.rate = rate
        self.on_snapshot = on_snapshot
        self.rng = np.random.default_rng(0)
        self.carry = 0.0
        self.offset_ns = 5_000_000_000  # the worker's perf clock is not the monitor's

    def build(self, **changes) -> int:
        """Apply a profile (the build request goes nowhere) and answer it as the worker does."""
        cid = self.mon.apply(profile_mod.merge(self.mon.snapshot().profile, **changes))
        info = {"providers_requested": ["CPUExecutionProvider"], "providers_active": ["CPUExecutionProvider"],
                "create_ms": 5.0, "first_run_ms": 2.0, "shapes": SHAPES, "shape_labels": LABELS}
        self.mon._handle(proto.Built(cid, info))
        return cid

    def run(self, seconds: float, tick: float = 0.25) -> None:
        cid = self.mon.snapshot().config_id
        for _ in range(round(seconds / tick)):
            self.carry += self.rate * tick
            n = int(self.carry)
            self.carry -= n
            if n:
                rows = np.zeros((n, 8), dtype=np.int64)
                start = self.clock[0] + np.sort(self.rng.uniform(0, tick, n))
                rows[:, 0] = (start * 1e9).astype(np.int64) + self.offset_ns        # start
                rows[:, 1] = self.rng.integers(10_000_000, 40_000_000, n)           # service 10–40 ms
                rows[:, 2] = rows[:, 1]                                             # cpu in Run()
                rows[:, 3] = self.rng.integers(0, 100_000, n)                       # cpu between runs
                rows[:, 5] = self.rng.integers(500_000_000, 1_000_000_000, n)       # queue: full, 0.5–1 s
                rows[:, 6] = self.rng.integers(0, 3, n)                             # shape
                rows[:, 7] = self.rng.integers(0, 100_000, n)                       # idle gap
                shed = int(n * 0.3) + 1
                self.mon._handle(proto.Samples(cid, rows, int(tick * 1e9), int(rows[:, 2].sum()), proto.LIVE, 100 << 20,
                                           (n + shed, shed, 25, 25)))
            self.clock[0] += tick
            snap = self.mon.snapshot()
            if self.on_snapshot is not None:
                self.on_snapshot(snap)


@pytest.fixture(scope="module")
def mix_model(tmp_path_factory) -> str:
    return make_matmul_model(tmp_path_factory.mktemp("bounded") / "mix.onnx", n=16, batch="batch")


@pytest.mark.slow
def test_a_refresh_reads_no_more_runs_as_the_ring_fills(mix_model, monkeypatch) -> None:
    """100 runs a second with a full queue and three shapes: the ring fills after 500 s. The runs the figures read
    (percentiles) and the rows the readout copies out of the ring, per minute of the session, are about the same
    with 50 000 runs kept as with 6 000–12 000; before, both grew with the ring (× 5)."""
    counts = {"stats": 0, "copied": 0}
    latency_stats = stats.latency_stats

    def counted_stats(a):
        counts["stats"] += int(np.size(a))
        return latency_stats(a)

    def counting(method):
        def wrapped(self, *args):
            out = method(self, *args)
            counts["copied"] += len(out)
            return out
        return wrapped

    monkeypatch.setattr(stats, "latency_stats", counted_stats)
    for name in ("view", "tail", "column"):  # every way a copy of rows leaves the ring
        monkeypatch.setattr(Ring, name, counting(getattr(Ring, name)))

    s = Session(mix_model, rate=100.0)
    s.build()
    s.run(60)                       # the first minute: start-up
    counts.update(stats=0, copied=0)
    s.run(60)                       # minute 2: 6 000–12 000 runs kept
    early = dict(counts)
    s.run(7 * 60)                   # the ring fills and turns over
    c = s.mon.st.current
    assert c.runs > CONFIG_RING and len(c.ring) == CONFIG_RING
    counts.update(stats=0, copied=0)
    s.run(60)                       # minute 10: 50 000 runs kept
    late = dict(counts)
    assert late["stats"] <= 1.6 * early["stats"], (early, late)
    assert late["copied"] <= 1.6 * early["copied"], (early, late)
    snap = s.mon.snapshot()
    assert snap.latency.runs == CONFIG_RING and len(snap.traffic.shapes) == 3
    assert sum(r.runs for r in snap.traffic.shapes) == CONFIG_RING


@pytest.mark.slow
def test_figures_kept_between_recomputations_are_the_ones_over_every_kept_run(mix_model) -> None:
    """Kept for a while, the figures are the ones over the kept runs as they were then: within a share of the ring
    of the ones over the runs kept now; once that share is new they are computed again."""
    s = Session(mix_model, rate=20.0)
    s.build()
    s.run(300)
    c = s.mon.st.current
    snap = s.mon.snapshot()
    fresh = stats.latency_stats(c.latency_ms())
    assert abs(snap.latency.runs - fresh.runs) < readout_mod.STALE_SHARE * len(c.ring) + 1
    assert snap.latency.p50 == pytest.approx(fresh.p50, rel=0.05)
    s.run(readout_mod.STALE_MAX_S + 1)  # a share of the ring new, or old enough: computed again since
    later = s.mon.snapshot().latency.runs
    assert later > snap.latency.runs
    assert len(c.ring) - later < readout_mod.STALE_SHARE * len(c.ring) + 1


@pytest.mark.slow
def test_the_counters_are_current_at_every_refresh_whatever_the_figures_age(mix_model) -> None:
    """Throughput, offered, served, shed and the queue are read at every snapshot, also while the percentiles over
    the kept runs are kept from an earlier one."""
    seen = []

    def current(snap: Snapshot) -> None:
        c = s.mon.st.current
        t = snap.traffic
        assert t is not None and (t.dropped, t.queue_len) == (c.counters.dropped, c.counters.queue_len)
        assert (t.served_per_s, snap.throughput_per_s) == (c.throughput(), c.throughput())
        assert snap.cpu.cpu_ms_per_run == c.cpu_ns / 1e6 / c.runs
        seen.append(snap.latency.runs != len(c.ring))

    s = Session(mix_model, rate=20.0, on_snapshot=current)
    s.build()
    s.run(120)
    assert any(seen)  # some snapshots did keep the figures over the kept runs from an earlier one


@pytest.mark.slow
def test_rebuilds_do_not_each_keep_a_full_ring(mix_model) -> None:
    """Eighteen rebuilds, each run for a while: a replaced configuration's ring keeps its runs and a little room,
    not CONFIG_RING rows; its record and its runs are what they were."""
    s = Session(mix_model, rate=20.0)
    s.build()
    for i in range(18):
        s.run(10)
        s.build(**{"session.allow_spinning": i % 2 == 0})
    s.run(10)
    stores = list(s.mon.st.stores.values())
    assert len(stores) == 19
    finished, live = stores[:-1], stores[-1]
    assert all(c.ring.capacity <= c.runs + SETTLE_SPARE for c in finished)
    assert sum(c.ring.capacity for c in stores) <= CONFIG_RING + 18 * (200 + SETTLE_SPARE)
    assert live.ring.capacity == CONFIG_RING
    history = {h.config_id: h for h in s.mon.snapshot().history}
    for c in finished:
        row, ran = history[c.config_id], stats.latency_stats(c.latency_ms())
        assert row.latency.runs == c.runs == len(c.ring) == 200
        assert (row.latency.p50, row.latency.p99) == (ran.p50, ran.p99)
    # a batch sent before the switch still lands in the replaced configuration, whole
    first = stores[0]
    n = first.runs
    rows = np.zeros((50, 8), dtype=np.int64)
    rows[:, 1] = 20_000_000
    s.mon._handle(proto.Samples(first.config_id, rows, 100_000_000, 0, proto.LIVE, -1, (50, 0, 0, 0)))
    assert len(first.ring) == first.runs == n + 50


def _rows(start: int, n: int, width: int = 3) -> np.ndarray:
    col = np.arange(start, start + n, dtype=np.float64)
    return np.stack([col * (k + 1) for k in range(width)], axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("cap", [1, 2, 5, 17])
def test_ring_tail_at_column_and_kept_match_its_view(cap: int) -> None:
    """What the readout reads instead of a full copy: the newest rows, one row, one column, the rows unordered."""
    rng = np.random.default_rng(cap)
    r = Ring(cap, 3)
    ref = np.zeros((0, 3))
    for _ in range(200):
        batch = rng.random((int(rng.integers(0, 2 * cap + 2)), 3))
        r.extend(batch)
        ref = np.concatenate([ref, batch])[-cap:]
        for k in range(cap + 2):
            np.testing.assert_array_equal(r.tail(k), ref[len(ref) - min(k, len(ref)):])
        for i in range(-len(ref), len(ref)):
            np.testing.assert_array_equal(r.at(i), ref[i])
        np.testing.assert_array_equal(r.column(1), ref[:, 1])
        kept = r.kept()
        assert not kept.flags.writeable
        assert sorted(map(tuple, kept)) == sorted(map(tuple, ref))
    with pytest.raises(IndexError):
        r.at(len(ref))


def test_ring_shrink_keeps_the_rows_and_wraps_after() -> None:
    r = Ring(20, 3)
    r.extend(_rows(0, 14))
    r.shrink(spare=2)
    assert r.capacity == 16 and len(r) == 14
    np.testing.assert_array_equal(r.view(), _rows(0, 14))
    r.extend(_rows(100, 3))  # past the spare room: the oldest go, as in any ring
    np.testing.assert_array_equal(r.view(), np.concatenate([_rows(1, 13), _rows(100, 3)]))
    full = Ring(10, 3)
    full.extend(_rows(0, 14))  # turned over
    full.shrink(spare=5)       # never grows
    assert full.capacity == 10
    np.testing.assert_array_equal(full.view(), _rows(4, 10))
    full.shrink()
    np.testing.assert_array_equal(full.view(), _rows(4, 10))
    empty = Ring(10, 3)
    empty.shrink()
    assert empty.capacity == 1 and len(empty) == 0
    empty.extend(_rows(0, 3))
    np.testing.assert_array_equal(empty.view(), _rows(2, 1))
