"""The worker's row layout: named columns, one response time, the span its requests took."""

import numpy as np

from ortop.engine import traffic as T
from ortop.measure import rows as R


def _rows(*runs: tuple[int, int, int]) -> np.ndarray:
    """(start, service, queue) per run, the other columns filled as a closed loop's would be."""
    out = np.zeros((len(runs), R.COLUMNS), dtype=np.int64)
    for k, (start, service, queue) in enumerate(runs):
        out[k, R.Col.START], out[k, R.Col.SERVICE], out[k, R.Col.QUEUE] = start, service, queue
        out[k, R.Col.CPU_IN] = out[k, R.Col.CPU_BETWEEN] = -1
    return out


def test_response_is_queue_plus_service():
    rows = _rows((0, 2_000_000, 0), (2_000_000, 1_000_000, 3_000_000))
    assert R.response_ms(rows).tolist() == [2.0, 4.0]
    assert R.response_ms(rows[:, :2]).tolist() == [2.0, 1.0]  # too narrow for a queue: the service alone


def test_served_span_runs_from_first_arrival_to_last_completion():
    # the second request arrived at 1 ms, waited 4 ms, ran 2 ms: completed at 7 ms
    rows = _rows((0, 5_000_000, 0), (5_000_000, 2_000_000, 4_000_000))
    assert R.arrival_ns(rows).tolist() == [0, 1_000_000]
    assert R.end_ns(rows).tolist() == [5_000_000, 7_000_000]
    assert R.served_span_ns(rows) == 7_000_000
    assert R.served_span_ns(R.empty()) == 0


def test_the_store_ring_reads_the_named_columns():
    rows = _rows((10, 2_000_000, 1_000_000))
    rows[0, R.Col.REPLICA], rows[0, R.Col.SHAPE], rows[0, R.Col.IDLE] = 3, 2, 5_000_000
    ring = T.ring_rows(rows, np.array([1.5]))
    assert ring[0, T.RESPONSE] == 3.0 and ring[0, T.SERVICE] == 2.0 and ring[0, T.QUEUE] == 1.0
    assert ring[0, T.REPLICA] == 3 and ring[0, T.SHAPE] == 2 and ring[0, T.IDLE] == 5.0 and ring[0, T.T_S] == 1.5


def test_a_block_is_served_over_the_time_its_requests_took():
    from ortop.engine.bench.interleave import BlockRun

    # a 1 s window (0 … 1e9 ns) whose last request, queued behind the others, completes at 1.5 s
    rows = _rows((0, 400_000_000, 0), (400_000_000, 500_000_000, 300_000_000),
                 (900_000_000, 600_000_000, 800_000_000))
    b = BlockRun(0, 0, 0, 1_000_000_000, rows, (3, 0, 1, 2))
    assert b.window_s == 1.0 and b.served_s == 1.5 and b.ended_queued
    closed = BlockRun(0, 1, 0, 1_000_000_000, _rows((0, 400_000_000, 0)), None)
    assert closed.served_s == 1.0 and not closed.ended_queued  # a closed loop: its window, no queue
