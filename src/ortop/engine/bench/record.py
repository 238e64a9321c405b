"""What an interleaved comparison's workers measured, block by block: the pure step that turns their ``Samples`` and
``BlockDone`` messages into :class:`~ortop.measure.compare.Block` objects, with what each block's arrivals, input
shapes, idle gaps and worker memory said beside it.

:class:`BlockRecord` holds no lock, sends nothing and knows no worker: :class:`ortop.engine.bench.ab.Interleaving`
routes the messages to it under its own lock and gives each block its place in the schedule (its seq), and anything else
that alternates configurations may do the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortop.measure import rows as R
from ortop.measure.compare import Block, block_from_runs

__all__ = ["BlockRecord", "LONG_GAP_NS", "gap_figures"]

LONG_GAP_NS = 10_000_000  # an idle gap this long lets a spinning pool go to sleep (ORT spins for ~ms at most)
GAP_MIN_RUNS = 20         # fewer runs after long gaps give no p99 worth showing


def gap_figures(parts: list[np.ndarray]) -> tuple[float, int]:
    """Service p99 (ms) of the runs after long idle gaps, and their count (nan under GAP_MIN_RUNS runs)."""
    a = np.concatenate(parts) if parts else np.zeros(0)
    return (float(np.percentile(a, 99)) if a.size >= GAP_MIN_RUNS else float("nan")), int(a.size)


@dataclass
class BlockRecord:
    """The blocks of ``configs`` configurations, in the order they ended, after ``prior``: blocks of an earlier run
    of the same comparison (seq 0 … P−1, whole rounds) that this one adds to (the live view's ``v`` pressed again).
    Their windows and shapes are not kept, so the offered rate and the shape figures are this run's own."""

    configs: int
    prior: Sequence[Block] = ()
    blocks: list[Block] = field(init=False)
    windows: list[float] = field(init=False)       # each block's arrival window (s), beside ``blocks``
    shape_ids: list[np.ndarray] = field(init=False)  # each block's input shape id of each of its runs
    offered: list[tuple[int, int]] = field(init=False)  # per configuration, open arrivals: (arrived, shed)
    queued: list[int] = field(init=False)           # ... and its blocks that ended with requests still waiting
    long_gap: list[list[np.ndarray]] = field(init=False)  # ... service ms of its runs after a long idle gap
    rss: list[tuple[int, int]] = field(init=False)  # ... the worker's RSS at its first and last block (-1: unknown)
    # per configuration, its last block's rows until its BlockDone: (block, response ms, last end ns, shape ids,
    # (arrived, shed) of open arrivals or (-1, 0))
    _pending: dict[int, tuple[int, np.ndarray, int, np.ndarray, tuple[int, int]]] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.prior) % self.configs or sorted(b.seq for b in self.prior) != list(range(len(self.prior))):
            raise ValueError("prior blocks must be whole rounds numbered 0 … P−1")
        self.blocks = sorted(self.prior, key=lambda b: b.seq)
        self.windows = [0.0] * len(self.prior)
        self.shape_ids = [np.full(b.runs, -1, np.int32) for b in self.blocks]
        self.offered = [(0, 0)] * self.configs
        self.queued = [0] * self.configs
        self.long_gap = [[] for _ in range(self.configs)]
        self.rss = [(-1, -1)] * self.configs
        self._pending = {}

    @property
    def seq0(self) -> int:
        """The seq of this run's first block: the prior blocks come before it."""
        return len(self.prior)

    def new_blocks(self) -> int:
        return len(self.blocks) - self.seq0

    def samples(self, i: int, msg: Any) -> None:
        """Configuration ``i``'s rows of its running block (a ``Samples`` message with ``block`` ≥ 0): response time
        is service plus the wait in the queue (open arrivals; 0 in a closed loop)."""
        rows = msg.rows
        last_end = int(R.end_ns(rows).max()) if len(rows) else -1
        shapes = rows[:, R.Col.SHAPE].astype(np.int32) if rows.shape[1] > R.Col.SHAPE else \
            np.zeros(len(rows), dtype=np.int32)
        traffic = getattr(msg, "traffic", None)
        self._pending[i] = (msg.block, R.response_ms(rows), last_end, shapes,
                            (int(traffic[0]), int(traffic[1])) if traffic is not None else (-1, 0))
        if rows.shape[1] > R.Col.IDLE:  # service times of runs after a long idle gap: a pool's wake-up
            self.long_gap[i].append(R.service_ms(rows[rows[:, R.Col.IDLE] >= LONG_GAP_NS]))
        if getattr(msg, "rss", -1) >= 0:  # a leak shows as growth over the configuration's blocks
            first, _ = self.rss[i]
            self.rss[i] = (msg.rss if first < 0 else first, msg.rss)
        if traffic is not None:
            arrived, dropped = self.offered[i]
            self.offered[i] = (arrived + traffic[0], dropped + traffic[1])
            if traffic[2] > 0:  # requests still queued when the block's window closed
                self.queued[i] += 1

    def block_done(self, i: int, msg: Any, seq: int) -> Block:
        """Configuration ``i``'s block ended (a ``BlockDone`` message); ``seq``: its place in the schedule."""
        _, lat, last_end, shapes, (arrived, shed) = self._pending.pop(
            i, (msg.seq, np.zeros(0), -1, np.zeros(0, dtype=np.int32), (-1, 0)))
        between = msg.cpu_between_ns / 1e6 if msg.cpu_between_ns >= 0 else float("nan")
        # Served is served: the block's wall time runs to its last completion, past the window's end when a queue
        # drained after it (the window's nominal length would report the offered rate as served).
        t_end = max(msg.t_end_ns, last_end)
        window_s = (msg.t_end_ns - msg.t_start_ns) / 1e9
        block = block_from_runs(i, seq, lat, t_start=msg.t_start_ns / 1e9, t_end=t_end / 1e9, cpu_ms=msg.cpu_ns / 1e6,
                                cpu_between_ms=between, arrived=arrived, shed=shed, window_s=window_s)
        self.blocks.append(block)
        self.windows.append(window_s)
        self.shape_ids.append(shapes)
        return block

    def upto(self, seq: int | None) -> tuple[list[Block], list[float], list[np.ndarray]]:
        """The blocks before ``seq`` (all with None), their windows and shape ids."""
        keep = [k for k, b in enumerate(self.blocks) if seq is None or b.seq < seq]
        return [self.blocks[k] for k in keep], [self.windows[k] for k in keep], [self.shape_ids[k] for k in keep]
