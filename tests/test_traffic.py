"""Open-loop traffic on real sessions: one server's waits are exactly its queue's, overload is said, shape mixes and
traces replay."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ortop.config import profile as P
from ortop.engine.live import headless
from ortop.measure import arrivals as A
from ortop.measure import rows as R
from tests.models import make_matmul_model
from tests.test_cli import one_error_line, ortop


@pytest.fixture(scope="module")
def batch_model(tmp_path_factory) -> str:
    """x [batch, 256] @ W: the service time grows with the free dim ``batch``."""
    return make_matmul_model(tmp_path_factory.mktemp("traffic") / "mm.onnx", n=256)


@pytest.fixture
def env(tmp_path):
    from tests.test_cli import env as cli_env

    return cli_env.__wrapped__(tmp_path)


def prof(model: str, **kw) -> P.Profile:
    changes = {"session.intra_op_num_threads": 1, "workload.warmup_runs": 20}
    changes.update({k.replace("__", "."): v for k, v in kw.items()})
    return P.merge(P.Profile(model=model), **changes)


# ---- one server's waits, checked request by request against Lindley's recursion -----------------------------------
# How late a request may start, at the median, beyond what Lindley's recursion allows (see wait_faults). From the rows
# of 5–8 s Poisson runs offered 60 % of the closed loop's throughput on the 2-core test host (seven alone, six beside
# a busy loop, two with both cores busy): a request that found its server busy started a median 23–45 µs after the
# run before it ended (the claim under the queue's lock, two clock reads, the row's append; p90 40–75 µs) alone,
# 42–64 µs beside a busy loop; one that found it idle started a median 38–66 µs after its arrival (the thread's
# wake-up), alone or beside a busy loop. Single requests are not bounded: a few percent of them start 1–13 ms late
# alone (host stalls, ~5 ms most often), over 20 % beside a busy loop. With both cores taken by busy loops the
# medians reached 0.86 ms (busy) and 1.9 ms (idle): such a host fails these bounds, so the test stays in the timing
# tier, which runs alone.
QUEUED_LATE_NS = 250_000
IDLE_LATE_NS = 500_000


def lindley_excess_ns(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each request after the first of one server's rows (in start order): its recorded wait less the wait
    Lindley's recursion gives it from the request before, W[n+1] − max(0, W[n] + S[n] − (a[n+1] − a[n])) (ns),
    and whether it arrived before that request's run ended (it found the server busy).

    The recursion is a FIFO server that starts a request the moment it has arrived and the server is free, so the
    excess is how much later this one started: the serving loop's work between runs for a request that waited in
    the queue, how late the thread woke for one that found the server idle. Below zero, a request started before
    it had arrived or before the run before it ended: waiting was lost."""
    start, service, wait = (rows[:, c].astype(np.int64) for c in (R.Col.START, R.Col.SERVICE, R.Col.QUEUE))
    arrive = start - wait
    lindley = np.maximum(0, wait[:-1] + service[:-1] - np.diff(arrive))
    return wait[1:] - lindley, arrive[1:] < (start + service)[:-1]


def wait_faults(rows: np.ndarray, schedule_ns: np.ndarray) -> list[str]:
    """What is wrong with one server's recorded waits (none: an empty list), from its rows (every request it served
    since its loop began, in start order) and its queue's arrival schedule (``schedule_ns``: offsets from the
    loop's first arrival, as :func:`ortop.measure.arrivals.offsets` draws them).

    Exact: every recorded arrival (start − wait) is a scheduled one, each served once and in order (shed ones have
    no row), and no request waited less than the recursion gives it. These catch a wait counted from anything but
    the scheduled arrival, waits that never drain, a request started early, runs overlapping on one server. Within
    the host's tolerance: the median excess over requests that found the server busy, and over those that found
    it idle, is at most QUEUED_LATE_NS / IDLE_LATE_NS: a server that dawdles before most requests invents waiting.
    """
    if len(rows) < 2:
        return [f"{len(rows)} request(s): nothing to check"]
    faults = []
    if np.unique(rows[:, R.Col.REPLICA]).size != 1:
        faults.append("more than one caller: Lindley's recursion is one server's")
    arrive = R.arrival_ns(rows)
    offset = arrive - arrive[0] + schedule_ns[0]  # nothing is shed before the first request: it is the first
    at = np.minimum(np.searchsorted(schedule_ns, offset), len(schedule_ns) - 1)
    off = np.flatnonzero(schedule_ns[at] != offset)
    if off.size:
        k = int(off[0])
        near = schedule_ns[np.abs(schedule_ns - offset[k]).argmin()]
        faults.append(f"{off.size} of {len(rows)} recorded arrivals (start − wait) are not scheduled ones: the first "
                      f"is request {k}, {(offset[k] - near) / 1e3:+.1f} µs from the nearest")
    elif not (np.diff(at) > 0).all():
        faults.append("requests served out of their arrival order, or twice")
    excess, busy = lindley_excess_ns(rows)
    short = excess < 0
    if short.any():
        faults.append(f"{int(short.sum())} requests waited less than Lindley's recursion gives them (by up to "
                      f"{-excess.min() / 1e3:.1f} µs): started before they arrived or before the run before ended")
    for said, group, limit in (("busy", busy, QUEUED_LATE_NS), ("idle", ~busy, IDLE_LATE_NS)):
        late = float(np.median(excess[group])) if group.any() else 0.0
        if late > limit:
            faults.append(f"requests that found the server {said} started a median {late / 1e3:.0f} µs later than "
                          f"the recursion allows (at most {limit / 1e3:.0f} µs)")
    return faults


def late_figures(rows: np.ndarray) -> dict[str, Any]:
    """How late one server's requests started (µs beyond the recursion), busy and idle apart: what a failure shows."""
    excess, busy = lindley_excess_ns(rows)
    return {said: {"requests": int(group.sum()),
                   "p50_p90_p99_max_us": (np.percentile(excess[group], [50, 90, 99, 100]) / 1e3).round(1).tolist()
                   if group.any() else None}
            for said, group in (("busy", busy), ("idle", ~busy))} | {"mean_wait_ms": rows[:, R.Col.QUEUE].mean() / 1e6}


def poisson_schedule(rate_hz: float, seed: int, past_ns: int) -> np.ndarray:
    """A queue's seeded Poisson arrivals (ns from its start), as the worker draws them, up to past ``past_ns``."""
    chunks = []
    for chunk in A.offsets(A.POISSON, rate_hz, seed):
        chunks.append(chunk)
        if chunk[-1] > past_ns:
            return np.concatenate(chunks)
    raise AssertionError("a Poisson schedule is endless")


def fifo_rows(schedule_ns: np.ndarray, service_ns: np.ndarray, late_ns: int | np.ndarray) -> np.ndarray:
    """The rows of one FIFO server fed ``schedule_ns`` (shifted to a clock's origin) that starts each request
    ``late_ns`` after it could: at its arrival, or when the run before ended."""
    rows = np.zeros((len(schedule_ns), R.COLUMNS), dtype=np.int64)
    rows[:, R.Col.CPU_IN] = rows[:, R.Col.CPU_BETWEEN] = -1
    late = np.broadcast_to(np.asarray(late_ns, dtype=np.int64), schedule_ns.shape)
    free = 0
    for n, (a, s, d) in enumerate(zip((schedule_ns + 10**12).tolist(), service_ns.tolist(), late.tolist())):
        start = max(a, free) + d
        rows[n, R.Col.START], rows[n, R.Col.SERVICE], rows[n, R.Col.QUEUE] = start, s, start - a
        free = start + s
    return rows


@pytest.fixture(scope="module")
def synthetic() -> tuple[np.ndarray, np.ndarray]:
    """2000 Poisson arrivals at 600/s on a server of 0.5–1.5 ms runs (60 % load): (schedule, service times)."""
    schedule = poisson_schedule(600.0, 3, 0)[:2000]
    service = np.random.default_rng(3).integers(500_000, 1_500_000, schedule.size)
    return schedule, service


def _invented_never_drains(rows: np.ndarray) -> None:
    rows[:, R.Col.QUEUE] = np.maximum.accumulate(rows[:, R.Col.QUEUE])


def _invented_falls_behind(rows: np.ndarray) -> None:  # each start 1 ms later than the one before allowed
    rows[:, R.Col.START] += np.arange(len(rows)) * 1_000_000
    rows[:, R.Col.QUEUE] += np.arange(len(rows)) * 1_000_000


def _lost_counted_from_the_claim(rows: np.ndarray) -> None:  # coordinated omission: the wait since the server was free
    ends = rows[:, R.Col.START] + rows[:, R.Col.SERVICE]
    free = np.r_[rows[0, R.Col.START] - rows[0, R.Col.QUEUE], ends[:-1]]
    rows[:, R.Col.QUEUE] = np.minimum(rows[:, R.Col.QUEUE], rows[:, R.Col.START] - free)


def _lost_overlapping(rows: np.ndarray) -> None:  # started at arrival, whatever the server was doing
    rows[:, R.Col.START] -= rows[:, R.Col.QUEUE]
    rows[:, R.Col.QUEUE] = 0


def test_a_fifo_servers_own_records_pass_the_wait_check_with_or_without_shed_requests(synthetic):
    schedule, service = synthetic
    rows = fifo_rows(schedule, service, 40_000)
    excess, busy = lindley_excess_ns(rows)
    assert (excess == 40_000).all() and 0.4 < busy.mean() < 0.8  # arrivals overlap runs: the queue is exercised
    assert wait_faults(rows, schedule) == []
    kept = np.ones(schedule.size, bool)
    kept[[300, 301, 302, 900]] = False  # shed: no rows, the next request served is the next kept one
    assert wait_faults(fifo_rows(schedule[kept], service[kept], 40_000), schedule) == []


@pytest.mark.parametrize(("spoil", "said"), [
    (_invented_never_drains, "are not scheduled ones"),
    (_invented_falls_behind, "later than the recursion allows"),
    (_lost_counted_from_the_claim, "are not scheduled ones"),
    (_lost_overlapping, "waited less than Lindley's recursion gives them"),
], ids=["invented: waits never drain", "invented: 1 ms further behind at each request", "lost: counted from the claim",
        "lost: no queue while arrivals overlap"])
def test_the_wait_check_catches_waiting_invented_or_lost(synthetic, spoil, said):
    schedule, service = synthetic
    rows = fifo_rows(schedule, service, 40_000)
    spoil(rows)
    faults = wait_faults(rows, schedule)
    assert any(said in f for f in faults), faults


def test_the_wait_check_catches_a_server_that_dawdles_before_starting(synthetic):
    """Starts that keep to the schedule and to one server, each a little late: no exact rule is broken, the median
    lateness is: 0.3 ms idle before every request fails the busy side, a wake-up 0.6 ms late the idle side."""
    schedule, service = synthetic
    faults = wait_faults(fifo_rows(schedule, service, 300_000), schedule)
    assert len(faults) == 1 and "found the server busy started a median 300 µs" in faults[0], faults
    rows = fifo_rows(schedule, service, 40_000)
    _, busy = lindley_excess_ns(rows)
    wake = np.where(np.r_[False, ~busy], 600_000, 40_000)  # late only where the request found the server idle
    faults = wait_faults(fifo_rows(schedule, service, wake), schedule)
    assert len(faults) == 1 and "found the server idle started a median 600 µs" in faults[0], faults
    assert wait_faults(fifo_rows(schedule[1:], service[1:], 40_000), schedule) != []  # not from the first arrival


class RowsSeen:
    """Every batch of rows the monitor receives from its worker, whole (the monitor keeps each run's figures, not
    its row), hooked onto a monitor through ``headless.measure(on_monitor=...)``."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, np.ndarray]] = []

    def attach(self, monitor: Any) -> None:
        receive = monitor._add_samples  # the monitor's one entry for a worker's rows

        def add(msg: Any) -> None:
            self.batches.append((msg.config_id, msg.rows.copy()))
            receive(msg)

        monitor._add_samples = add

    def rows(self, config_id: int) -> np.ndarray:
        return np.concatenate([rows for cid, rows in list(self.batches) if cid == config_id] or [R.empty()])


@pytest.mark.integration
def test_one_servers_waits_are_its_queues_request_by_request(batch_model):
    """One caller, Poisson arrivals at ~60 % of the closed loop's throughput: every request served waited exactly
    what its FIFO queue made it wait, read from the run's own rows (start, service, wait) and the profile's seeded
    schedule. ``wait_faults`` says what is checked exactly (recorded arrivals are the scheduled ones, in order; no
    wait is shorter than Lindley's recursion gives) and what within the host's tolerance (the median start past the
    recursion: QUEUED_LATE_NS, IDLE_LATE_NS, with the figures they come from).

    The mean wait is not compared with Pollaczek–Khinchine's: even with the dispatch gaps taken out (the same
    arrivals and services through an ideal server) it came out 1.7–4× the formula's in runs here, because the
    host's slow spells make service times come in runs, which the formula's independent services do not; and a
    stall of tens of ms piles a queue up that no service time explains. A band wide enough never to flake would
    judge nothing that the exact checks do not."""
    base = prof(batch_model, workload__dims={"batch": 1024})  # ~1-2 ms a run: wake-ups are small beside it
    closed = headless.measure(batch_model, base, duration_s=2.0)
    poisson = P.merge(base, **{"workload.arrival": "poisson",
                               "workload.rate_hz": 0.6 * closed.summary["throughput_per_s"]})
    seen = RowsSeen()
    res = headless.measure(batch_model, poisson, duration_s=6.0, on_monitor=seen.attach)
    s = res.summary
    assert res.fatal is None and s["arrivals"]["mode"] == "poisson", res.fatal
    # response = queue + service (means add up), in every run
    assert s["latency_ms"]["mean"] == pytest.approx(s["queue_ms"]["mean"] + s["service_ms"]["mean"], rel=1e-3)
    rows = seen.rows(res.snapshot.config_id)
    assert len(rows) > 1, "no runs reached the monitor"
    arrive = R.arrival_ns(rows)
    schedule = poisson_schedule(float(poisson.workload.rate_hz), int(poisson.workload.seed),
                                int(arrive[-1] - arrive[0]) + 10**9)
    figures = late_figures(rows)
    assert wait_faults(rows, schedule) == [], figures
    # and the run exercised both ways of being served: after waiting behind another request, and on arrival
    assert figures["busy"]["requests"] >= 100 and figures["idle"]["requests"] >= 100, figures


@pytest.mark.integration
def test_twice_the_capacity_is_said_loudly_and_exits_0(batch_model, env):
    closed = headless.measure(batch_model, prof(batch_model, workload__dims={"batch": 64}), duration_s=1.5)
    rate = 2 * closed.summary["throughput_per_s"]
    r = ortop(batch_model, "--headless", "--json", "--duration", "4", "--threads", "1", "--dim", "batch=64",
              "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    arr = d["arrivals"]
    assert arr["kept"] is False and arr["served_per_s"] < 0.7 * arr["offered_per_s"]
    assert arr["dropped"] > 0 or d["latency_ms"]["p99"] > 5 * d["service_ms"]["p99"]
    warning = next(w for w in d["warnings"] if w.startswith("offered "))
    assert f"served {arr['served_per_s']:.0f}/s" in warning and "queueing" in warning
    text = ortop(batch_model, "--headless", "--duration", "2", "--threads", "1", "--dim", "batch=64",
                 "--rate", f"{rate:.0f}", env=env)
    assert text.returncode == 0 and "warning     offered" in text.stdout and "arrivals    fixed" in text.stdout


@pytest.mark.integration
def test_a_shape_mix_gives_one_row_per_shape_costing_more_as_it_grows(batch_model, env):
    r = ortop(batch_model, "--headless", "--json", "--duration", "3", "--threads", "1",
              "--dim", "batch=1,16,256", env=env)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["shapes"]
    assert [row["shape"] for row in rows] == [{"x": [1, 256]}, {"x": [16, 256]}, {"x": [256, 256]}]
    assert all(row["runs"] > 20 for row in rows)
    runs = [row["runs"] for row in rows]
    assert max(runs) - min(runs) > 0  # drawn at random per request, not cycled
    p50 = [row["service_ms"]["p50"] for row in rows]
    assert p50[0] < p50[1] < p50[2] and p50[2] > 4 * p50[0]


@pytest.mark.integration
def test_a_trace_replays_every_request_at_its_recorded_rate(batch_model, env, tmp_path):
    rng = np.random.default_rng(0)
    sizes = rng.choice([1, 8, 32], 200)
    times = np.arange(200) / 100.0  # 100 requests/s for 2 s
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"t": round(float(t), 4), "dims": {"batch": int(b)}}) + "\n"
                            for t, b in zip(times, sizes)))
    r = ortop(batch_model, "--headless", "--json", "--threads", "1", "--trace", path, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["runs"] == 200 and d["arrivals"]["mode"] == "trace" and d["arrivals"]["dropped"] == 0
    # offered is arrivals over the run's wall time, which holds the last requests' service and the wind-down after
    # the trace's last arrival at 1.99 s: a replay can never read faster than recorded, a host stall there (CI has
    # seen 44 ms) reads a little slower
    assert 95.0 <= d["arrivals"]["offered_per_s"] <= 102.0, d["arrivals"]
    counts = {row["shape"]["x"][0]: row["runs"] for row in d["shapes"]}
    assert counts == {int(b): int((sizes == b).sum()) for b in (1, 8, 32)}


@pytest.mark.integration
def test_a_bad_trace_or_a_refused_shape_is_exit_2_naming_it(batch_model, broadcast_model, env, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"t": 0}\n{"t": 0.5}\n{"t": 0.2}\n')
    line = one_error_line(ortop(batch_model, "--headless", "--trace", path, env=env))
    assert f"{path}:3: 't' goes backwards" in line
    # a + b with N = 1 broadcasts; N = 2 against M = 3 does not: the mix's second shape is refused, named
    line = one_error_line(ortop(broadcast_model, "--headless", "--duration", "1", "--dim", "N=1,2",
                                "--dim", "M=3", env=env))
    assert "N=2" in line and "the model refuses it" in line
    line = one_error_line(ortop(batch_model, "--headless", "--arrival", "poisson", env=env))
    assert "needs an offered rate" in line
