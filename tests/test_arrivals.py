"""The open-loop dispatcher on a fake clock, the arrival schedules, shape mixes and trace files: pure, fast."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ortop.measure import arrivals as A
from ortop.model import ModelError, load_model, mixes
from ortop.model import trace as trace_mod
from tests.models import make_matmul_model


def serve_one(disp: A.Dispatcher, service_ns, n: int) -> list[tuple[int, int, int, int]]:
    """One server on a fake clock: claim when free, wait for the arrival, serve for service_ns(k).
    Returns (index, arrival, start, end) per request served."""
    now = 0
    out = []
    for _ in range(n):
        req = disp.claim(now)
        if req is None:
            break
        start = max(now, req.arrival_ns)
        end = start + service_ns(req.index)
        out.append((req.index, req.arrival_ns, start, end))
        now = end
    return out


def test_fixed_arrivals_are_evenly_spaced_from_the_start():
    it = A.offsets(A.FIXED, 250.0, seed=0)
    a = next(it)
    assert a[0] == 0 and np.all(np.diff(a) == 4_000_000)
    b = next(it)
    assert b[0] == a[-1] + 4_000_000  # the next chunk carries on


def test_poisson_arrivals_are_seeded_and_have_the_asked_rate():
    a = np.concatenate([x for _, x in zip(range(10), A.offsets(A.POISSON, 1000.0, seed=3))])
    b = np.concatenate([x for _, x in zip(range(10), A.offsets(A.POISSON, 1000.0, seed=3))])
    c = next(A.offsets(A.POISSON, 1000.0, seed=4))
    assert np.array_equal(a, b) and not np.array_equal(a[: len(c)], c)
    gaps = np.diff(a) / 1e9
    assert np.all(gaps >= 0)
    assert abs(gaps.mean() - 1e-3) < 0.03e-3          # 40 960 gaps: the mean within 3 %
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.03  # exponential: coefficient of variation 1


def test_a_trace_is_scaled_by_its_speed_and_loops_end_to_end():
    t = np.array([0.0, 0.1, 0.3])
    once = list(A.offsets(A.TRACE, 0.0, 0, t, speed=2.0))
    assert len(once) == 1 and list(once[0]) == [0, 50_000_000, 150_000_000]
    it = A.offsets(A.TRACE, 0.0, 0, t, speed=1.0, loop=True)
    first, second = next(it), next(it)
    assert second[0] == first[-1] + 150_000_000  # one mean gap after the last


def test_fifo_single_server_matches_lindleys_recursion():
    """Each request waits exactly as long as Lindley's recursion says: W' = max(0, W + S − gap)."""
    rng = np.random.default_rng(1)
    service = rng.integers(500_000, 3_000_000, 5000)
    disp = A.Dispatcher(A.offsets(A.POISSON, 600.0, seed=2), A.shape_ids(1, None, 0), start_ns=0,
                        max_queue=10**9)
    served = serve_one(disp, lambda k: int(service[k]), 5000)
    idx = [s[0] for s in served]
    assert idx == sorted(idx) == list(range(len(served)))  # FIFO, nothing skipped
    arrivals = np.array([s[1] for s in served])
    wait = np.array([s[2] - s[1] for s in served])
    w = 0
    for k in range(1, len(served)):
        w = max(0, w + int(service[k - 1]) - int(arrivals[k] - arrivals[k - 1]))
        assert wait[k] == w
    # response = queue + service, exactly
    resp = np.array([s[3] - s[1] for s in served])
    assert np.array_equal(resp, wait + service[: len(served)])


def test_a_full_queue_sheds_the_newest_arrivals_and_counts_them():
    # Arrivals every 1 ms, service 10 ms, room for 3 waiting.
    disp = A.Dispatcher(A.offsets(A.FIXED, 1000.0, 0), A.shape_ids(1, None, 0), start_ns=0, max_queue=3)
    served = serve_one(disp, lambda k: 10_000_000, 4)
    # Request 0 at t=0 runs to 10 ms; by then 1..10 arrived: 1, 2, 3 queued, 4..10 shed.
    assert [s[0] for s in served[:2]] == [0, 1]
    # At 20 ms (second claim): 11..20 arrived; 2, 3 still waited, so one place: 11 taken in, 12..20 shed.
    assert [s[0] for s in served] == [0, 1, 2, 3]
    assert disp.queue_max == 3
    assert disp.dropped == 7 + 9 + 9
    assert disp.arrived == 31  # arrivals up to 30 ms (0..30), taken in or shed


def test_a_windows_sheds_are_those_that_arrived_in_it_however_late_they_are_taken_in():
    # Arrivals every 1 ms, room for 3 waiting; the window is [5 ms, 15 ms). Request 0 runs from 0 to 10 ms, and
    # the next claim comes late, at 40 ms, as on a busy host: it takes in 10..40 at once, and sheds all but three.
    disp = A.Dispatcher(A.offsets(A.FIXED, 1000.0, 0), A.shape_ids(1, None, 0), start_ns=0, max_queue=3)
    assert disp.claim(0).index == 0
    disp.watch_window(5_000_000, 15_000_000)
    disp.claim(10_000_000)  # 1..10 arrived: 1, 2, 3 queued, 4..10 shed; of those, 5..10 in the window
    assert disp.window_dropped == 6
    disp.claim(40_000_000)  # 11..40 taken in late: 11 queued, 12..40 shed; of those, 12, 13, 14 in the window
    assert disp.dropped == 7 + 29
    assert disp.window_dropped == 6 + 3  # the counter read now would say 36
    # 3 and 11 still wait (2 was taken at 40 ms): 3 arrived before the window, 11 inside it
    assert disp.waiting_before(15_000_000) == 2 and disp.waiting_before(15_000_000, since_ns=5_000_000) == 1
    disp.watch_window(41_000_000, 42_000_000)
    assert disp.window_dropped == 0


def test_waiting_before_agrees_with_counting_the_queue_one_by_one():
    """The count is a binary search over the queue (the drain asks every millisecond, holding the servers' lock):
    the same as counting each waiting request, on Poisson arrivals with sheds, at any window."""
    rng = np.random.default_rng(7)
    disp = A.Dispatcher(A.offsets(A.POISSON, 5000.0, seed=3), A.shape_ids(1, None, 0), start_ns=0, max_queue=40)
    now = 0
    for _ in range(60):
        now += int(rng.integers(1, 20)) * 1_000_000
        disp.claim(now)
        queued = [a for _, a in disp._queue]
        for _ in range(5):
            since, t = sorted(int(x) for x in rng.integers(0, now + 5_000_000, 2))
            due = 0
            j = disp._next
            while (a := disp._arrival(j)) is not None and a < t:
                due += a >= since
                j += 1
            assert disp.waiting_before(t, since) == sum(since <= a < t for a in queued) + due


def test_waiting_before_counts_the_queued_and_the_due_not_yet_taken_in():
    # Arrivals every 1 ms from t=0; one claim at 2.5 ms takes request 0 and queues 1 and 2.
    disp = A.Dispatcher(A.offsets(A.FIXED, 1000.0, 0), A.shape_ids(1, None, 0), start_ns=0, max_queue=100)
    assert disp.claim(2_500_000).index == 0
    assert disp.queue_len == 2
    assert disp.waiting_before(1_500_000) == 1          # request 1 (at 1 ms), queued
    assert disp.waiting_before(5_500_000) == 5          # 1, 2 queued; 3, 4, 5 due but not taken in yet
    assert disp.waiting_before(0) == 0
    for _ in range(5):
        disp.claim(6_000_000)
    assert disp.waiting_before(5_500_000) == 0 and disp.waiting_before(6_500_000) == 1


def test_a_free_server_takes_the_next_request_and_waits_for_it():
    disp = A.Dispatcher(A.offsets(A.FIXED, 100.0, 0), A.shape_ids(1, None, 0), start_ns=5_000, max_queue=8)
    r0 = disp.claim(0)
    r1 = disp.claim(1)  # a second server, free too: the one after
    assert (r0.index, r0.arrival_ns) == (0, 5_000)
    assert (r1.index, r1.arrival_ns) == (1, 10_005_000)
    assert disp.queue_len == 0 and disp.dropped == 0


def test_a_finite_schedule_ends_and_says_so():
    disp = A.Dispatcher(A.offsets(A.TRACE, 0.0, 0, np.array([0.0, 0.001, 0.002])), iter([np.array([2, 0, 1])]),
                        start_ns=0, max_queue=8, limit=3)
    got = serve_one(disp, lambda k: 100, 10)
    assert [g[0] for g in got] == [0, 1, 2]
    assert disp.claim(10**9) is None and disp.ended()


def test_shape_ids_follow_the_weights_and_the_seed():
    a = next(A.shape_ids(3, np.array([0.7, 0.2, 0.1]), seed=5))
    b = next(A.shape_ids(3, np.array([0.7, 0.2, 0.1]), seed=5))
    assert np.array_equal(a, b)
    share = np.bincount(a, minlength=3) / len(a)
    assert abs(share[0] - 0.7) < 0.03 and abs(share[2] - 0.1) < 0.02


def test_mode_of_a_profile():
    from ortop.config import profile as P

    assert A.mode_of(P.Profile().workload) == A.CLOSED
    assert A.mode_of(P.from_dict({"workload": {"rate_hz": 50}}).workload) == A.FIXED  # as before: paced
    assert A.mode_of(P.from_dict({"workload": {"rate_hz": 50, "arrival": "poisson"}}).workload) == A.POISSON
    assert A.default_max_queue(2000.0) == 2000 and A.default_max_queue(10.0) == 64


# ---- mixes --------------------------------------------------------------------------------------------------
def test_dim_mix_spellings():
    assert mixes.parse_dim_mix("seq", "32:5,128:3,512:1") == [(32, 5.0), (128, 3.0), (512, 1.0)]
    assert mixes.parse_dim_mix("seq", "4,8") == [(4, 1.0), (8, 1.0)]
    pool = mixes.parse_dim_mix("seq", "16..512")
    sizes = [s for s, _ in pool]
    assert sizes[0] == 16 and sizes[-1] == 512 and len(sizes) == mixes.RANGE_POOL
    assert [s for s, _ in mixes.parse_dim_mix("seq", "3..5")] == [3, 4, 5]
    assert mixes.parse_shape_mix("x", "1x3x48x160,1x3x48x320:2") == [((1, 3, 48, 160), 1.0), ((1, 3, 48, 320), 2.0)]


@pytest.mark.parametrize("text, said", [("512..16", "goes down"), ("a..8", "not a whole number"),
                                        ("4:0", "positive"), ("4,,8", "empty"), ("0,4", ">= 1"),
                                        ("4,4", "twice")])
def test_bad_dim_mixes_are_one_clear_error(text, said):
    with pytest.raises(ModelError, match=said):
        mixes.parse_dim_mix("seq", text)


def test_variants_of_a_model(tmp_path):
    info = load_model(make_matmul_model(tmp_path / "m.onnx", n=8))
    vs = mixes.variants(info, {"batch": "1:3,4:1"}, {})
    assert [dict(v.dims) for v in vs] == [{"batch": 1}, {"batch": 4}] and [v.weight for v in vs] == [3.0, 1.0]
    assert list(mixes.weights(vs)) == [0.75, 0.25]
    assert mixes.variants(info, {}, {}) == [mixes.Variant()]
    with pytest.raises(ModelError, match="no free dim 'seq'"):
        mixes.variants(info, {"seq": "1,2"}, {})
    with pytest.raises(ModelError, match="no input 'y'"):
        mixes.variants(info, {}, {"y": "1x8,2x8"})


# ---- traces ------------------------------------------------------------------------------------------------
def write(path, lines):
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines))
    return str(path)


def test_a_trace_reads_times_and_distinct_shapes(tmp_path):
    info = load_model(make_matmul_model(tmp_path / "m.onnx", n=8))
    np.save(tmp_path / "x.npy", np.ones((2, 8), np.float32))
    path = write(tmp_path / "t.jsonl", [{"t": 0}, {"t": 0.01, "dims": {"batch": 4}}, "",
                                        {"t": 0.02, "shapes": {"x": [2, 8]}}, {"t": 0.03, "dims": {"batch": 4}},
                                        {"t": 0.04, "inputs": {"x": "x.npy"}}])
    tr = trace_mod.load(path, info)
    assert list(tr.times) == [0, 0.01, 0.02, 0.03, 0.04]
    assert list(tr.ids) == [0, 1, 2, 1, 3] and tr.counts == {0: 1, 1: 2, 2: 1, 3: 1}
    assert tr.variants[3].inputs == {"x": str(tmp_path / "x.npy")}
    assert abs(tr.rate_hz - 100.0) < 1e-9


@pytest.mark.parametrize("lines, line, said", [
    ([{"t": 0}, {"t": 0.1, "size": 3}], 2, "unknown key 'size'"),
    ([{"t": 0.2}, {"t": 0.1}], 2, "goes backwards"),
    ([{"t": 0}, {"t": 1, "dims": {"seq": 3}}], 2, "'seq' is not one of the model's free dims"),
    ([{"t": 0, "dims": {"batch": 0}}], 1, "whole number >= 1"),
    (["{not json"], 1, "not JSON"),
    ([{"t": "soon"}], 1, "'t'"),
    ([{"t": 0, "inputs": {"x": "missing.npy"}}], 1, "no such file"),
    ([{"t": 0, "dims": {"batch": 2}, "shapes": {"x": [2, 8]}}], 1, "not dims and shapes"),
])
def test_a_bad_trace_names_its_file_and_line(tmp_path, lines, line, said):
    info = load_model(make_matmul_model(tmp_path / "m.onnx", n=8))
    path = write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(ModelError) as e:
        trace_mod.load(path, info)
    assert str(e.value).startswith(f"{path}:{line}: ") and said in str(e.value)


def test_the_doctor_says_when_the_offered_rate_is_not_kept(tmp_path):
    from ortop.collectors.host import read_host
    from ortop.config import profile as P
    from ortop.doctor.static import Context, check_pace
    from ortop.engine import traffic as T

    info = load_model(make_matmul_model(tmp_path / "m.onnx", n=8))
    prof = P.from_dict({"workload": {"rate_hz": 1000, "arrival": "poisson"}})
    rows = T.ring_rows(np.zeros((0, 8), dtype=np.int64), np.zeros(0))

    def traffic(arrived: int, served: int, shed: int = 0) -> T.Traffic:  # over 10 s
        return T.figures("poisson", 1000.0, rows, T.Counters(arrived=arrived, dropped=shed), 10.0, served)

    ctx = Context(model=info, profile=prof, host=read_host(), served_per_s=220.0, traffic=traffic(10000, 2200))
    (f,) = check_pace(ctx)
    assert f.severity == "warning" and "offered 1000/s, served 220/s" in f.message
    assert f.profile_patch == {"workload.rate_hz": 176.0}
    kept = Context(model=info, profile=prof, host=read_host(), served_per_s=990.0, traffic=traffic(9900, 9880))
    assert check_pace(kept) == []
    closed = P.Profile()
    assert check_pace(Context(model=info, profile=closed, host=read_host(), served_per_s=10.0)) == []


def test_exports_state_the_traffic_and_perf_test_says_what_it_cannot_do():
    from ortop.config import profile as P
    from ortop.export import render

    prof = P.from_dict({"workload": {"rate_hz": 200, "arrival": "poisson", "dim_mix": {"batch": "1..8"}}})
    said = "Measured under Poisson arrivals at 200/s per session into a FIFO queue; input shapes drawn per request"
    assert said in render(prof, "python", model_path="m.onnx") and said in render(prof, "cpp", model_path="m.onnx")
    perf = render(prof, "perf-test", model_path="m.onnx")
    assert "perf_test cannot pace requests or queue them" in perf and "perf_test feeds one shape" in perf
    assert "Measured under" not in render(P.Profile(), "python", model_path="m.onnx")
