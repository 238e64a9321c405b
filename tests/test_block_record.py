"""The blocks of an interleaved comparison, from the workers' messages (``ortop.engine.bench.record``): a pure step
with no lock and no worker, fed the messages a real alternation sends."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ortop.engine.bench.record import LONG_GAP_NS, BlockRecord, gap_figures
from ortop.measure import rows as R
from ortop.measure.compare import block_from_runs
from ortop.runtime import protocol as proto

MS = 1_000_000


def rows(start_ms: list[float], service_ms: float, queue_ms: float = 0.0, shape: int = 0,
         idle_ms: float = 0.0) -> np.ndarray:
    out = np.zeros((len(start_ms), R.COLUMNS), dtype=np.int64)
    out[:, R.Col.START] = (np.array(start_ms) * MS).astype(np.int64)
    out[:, R.Col.SERVICE] = int(service_ms * MS)
    out[:, R.Col.QUEUE] = int(queue_ms * MS)
    out[:, R.Col.SHAPE] = shape
    out[:, R.Col.IDLE] = int(idle_ms * MS)
    return out


def test_a_blocks_runs_become_a_block_with_response_time_and_its_arrivals() -> None:
    rec = BlockRecord(2)
    r = rows([0, 10, 20, 30], service_ms=5.0, queue_ms=3.0, shape=1)
    rec.samples(1, proto.Samples(7, r, wall_ns=40 * MS, cpu_ns=20 * MS, block=0, rss=100,
                                 traffic=(5, 1, 2, 3)))
    b = rec.block_done(1, proto.BlockDone(7, 0, 0, 30 * MS, 20 * MS, -1, 4), seq=4)
    assert (b.config, b.seq, b.runs) == (1, 4, 4)
    assert b.p50_ms == pytest.approx(8.0)  # queue + service
    assert b.t_end == pytest.approx(0.035)  # to its last completion, past the 30 ms window
    assert (b.arrived, b.shed, b.window_s) == (5, 1, pytest.approx(0.03))
    assert math.isnan(b.cpu_ms_between_per_s)
    assert rec.offered == [(0, 0), (5, 1)] and rec.queued == [0, 1] and rec.rss == [(-1, -1), (100, 100)]
    assert rec.windows == [pytest.approx(0.03)] and rec.shape_ids[0].tolist() == [1, 1, 1, 1]
    assert rec.new_blocks() == 1


def test_runs_after_a_long_idle_gap_are_kept_apart() -> None:
    rec = BlockRecord(1)
    idle = LONG_GAP_NS / MS
    r = np.vstack([rows([0, 10], 2.0, idle_ms=idle + 1), rows([20, 30, 40], 1.0)])
    rec.samples(0, proto.Samples(0, r, wall_ns=0, cpu_ns=0, block=0))
    rec.block_done(0, proto.BlockDone(0, 0, 0, 50 * MS, 0, 0, 5), seq=0)
    assert [a.tolist() for a in rec.long_gap[0]] == [[2.0, 2.0]]
    assert gap_figures(rec.long_gap[0])[1] == 2


def test_prior_blocks_come_first_and_a_decision_keeps_the_blocks_before_it() -> None:
    prior = [block_from_runs(k % 2, k, np.full(10, 1.0), t_start=k, t_end=k + 1, cpu_ms=1.0) for k in range(4)]
    rec = BlockRecord(2, prior)
    assert rec.seq0 == 4 and rec.new_blocks() == 0
    for k, cfg in enumerate((0, 1, 0)):
        rec.samples(cfg, proto.Samples(cfg, rows([0, 1], 1.0), wall_ns=0, cpu_ns=0, block=4 + k))
        rec.block_done(cfg, proto.BlockDone(cfg, k, 0, 2 * MS, 0, 0, 2), seq=rec.seq0 + k)
    blocks, windows, ids = rec.upto(6)
    assert [b.seq for b in blocks] == [0, 1, 2, 3, 4, 5] and len(windows) == len(ids) == 6
    assert windows[:4] == [0.0] * 4 and ids[0].tolist() == [-1] * 10  # a prior block's window and shapes: not kept
    assert [b.seq for b in rec.upto(None)[0]] == list(range(7))


def test_a_block_done_without_its_samples_is_an_empty_block() -> None:
    rec = BlockRecord(1)
    b = rec.block_done(0, proto.BlockDone(0, 0, 0, 10 * MS, 0, 0, 0), seq=0)
    assert b.runs == 0 and b.arrived == -1


def test_prior_blocks_must_be_whole_rounds() -> None:
    one = block_from_runs(0, 0, np.full(3, 1.0), t_start=0, t_end=1, cpu_ms=1.0)
    with pytest.raises(ValueError, match="whole rounds"):
        BlockRecord(2, [one])
