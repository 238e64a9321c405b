"""A seeded shape mix for the fake monitor to carry (``FakeMonitor.traffic``): the worker's int64 rows of a
sequence-length mix, read by the engine's own functions (``engine.traffic.ring_rows`` and ``figures``), so the
figures the screens draw come from the code that makes them in a real session."""

from __future__ import annotations

import numpy as np

from ortop.engine import traffic as T
from ortop.measure import rows as R


def worker_rows(lengths: list[int], ids: np.ndarray, rng: np.random.Generator, queue_ms: float) -> np.ndarray:
    """The protocol rows a worker sends for requests of ``lengths[ids]``: service grows with the length, the wait
    in the queue is exponential around ``queue_ms`` (0: a closed loop)."""
    n = len(ids)
    rows = np.zeros((n, R.COLUMNS), dtype=np.int64)
    service = 0.15 * np.asarray(lengths)[ids] * (1 + 0.2 * rng.random(n))
    queue = rng.exponential(queue_ms, n) if queue_ms > 0 else np.zeros(n)
    rows[:, R.Col.START] = np.cumsum(np.full(n, 12_500_000))
    rows[:, R.Col.SERVICE] = (service * 1e6).astype(np.int64)
    rows[:, R.Col.CPU_IN] = rows[:, R.Col.SERVICE]
    rows[:, R.Col.QUEUE] = (queue * 1e6).astype(np.int64)
    rows[:, R.Col.SHAPE] = ids
    rows[:, R.Col.IDLE] = 1_000_000
    return rows


def shape_mix(n_shapes: int = 16, runs: int = 6000, seed: int = 1, mode: str = "poisson",
              dim: str = "seq_len", tail: float = 0.05) -> T.Traffic:
    """``n_shapes`` lengths from 16 up by 7 at 80 requests a second, the longest drawn ``tail`` / 3 as often as the
    shortest (the default: the longest few have fewer than 100 runs, their p99 not read yet; 3.0: all as often)."""
    rng = np.random.default_rng(seed)
    lengths = [16 + 7 * k for k in range(n_shapes)]
    weights = np.linspace(3.0, tail, n_shapes)
    ids = rng.choice(n_shapes, size=runs, p=weights / weights.sum())
    rows = worker_rows(lengths, ids, rng, 2.0 if mode != "closed" else 0.0)
    ring = T.ring_rows(rows, rows[:, R.Col.START] / 1e9)
    shapes = [{"input_ids": [1, k]} for k in lengths]
    return T.figures(mode, 80.0, ring, T.Counters(arrived=runs), runs / 80.0, runs, shapes,
                     [f"{dim}={k}" for k in lengths])
