"""Every configuration alternated block by block, across workers too: the capacity search's scheduler over
:class:`ortop.engine.bench.pool.Worker` objects. (Compare, verify and tune's racer run the same schedule through
:class:`ortop.engine.ab.Interleaving`, which also reads the blocks' memory, idle gaps and outputs.)

Configurations in one worker are alternated by the worker itself (one ``Alternate`` for all their rounds: no round
trip between blocks). Configurations in several workers (different restart groups: an ``[env]`` knob, a global
thread pool) are alternated by the parent, block by block in the same order (:func:`ortop.measure.compare.schedule`),
telling one worker at a time to run one block while the others wait on their command pipe, so a profile of its own
group takes its turns like any other instead of running all its blocks in a row. Every block of round r draws the
arrivals and shapes of round r (common random numbers), whichever worker runs it.

A worker that dies is restarted with its sessions rebuilt (:meth:`ortop.engine.bench.pool.Worker.restart`), and the
alternation goes on from the block it lost; one that dies again before finishing a block ends the alternation with
:class:`WorkerLost`, which carries every block measured before.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortop.engine.bench.pool import Worker
from ortop.errors import RuntimeFailure
from ortop.measure import rows as R
from ortop.measure.compare import schedule
from ortop.runtime import protocol as P

RESTART_TIMEOUT_S = 120.0   # a restarted worker's sessions must be built again within this


@dataclass
class BlockRun:
    """One recorded block: whose (index into the configurations alternated), where in the order, its runs."""

    config: int
    seq: int
    t_start_ns: int
    t_end_ns: int         # the window's end (what its arrivals were offered over)
    rows: np.ndarray
    traffic: tuple | None
    cpu_ns: int = 0
    cpu_between_ns: int = -1

    @property
    def window_s(self) -> float:
        return (self.t_end_ns - self.t_start_ns) / 1e9

    @property
    def served_s(self) -> float:
        """From the window's start to the last completion: a queue that drained past the window counts."""
        last = int(R.end_ns(self.rows).max()) if len(self.rows) else self.t_end_ns
        return (max(self.t_end_ns, last) - self.t_start_ns) / 1e9

    @property
    def ended_queued(self) -> bool:
        return self.traffic is not None and self.traffic[2] > 0


@dataclass
class Faults:
    """What went wrong with the workers during the measuring, said in the result."""

    said: list[str] = field(default_factory=list)
    lost: str | None = None  # a worker that could not be restarted: measuring ended there

    def add(self, text: str) -> None:
        self.said.append(text)


class WorkerLost(Exception):
    """A worker died and could not be restarted: ``blocks`` holds what was measured before."""

    def __init__(self, message: str, blocks: list[BlockRun]):
        super().__init__(message)
        self.blocks = blocks


class _Collector:
    """A worker's block messages for the configurations alternated, by worker-side config id."""

    def __init__(self, index: dict[int, int]):
        self.index = index
        self.rows: dict[tuple[int, int], tuple[np.ndarray, Any]] = {}
        self.done: list[P.BlockDone] = []

    def __call__(self, msg: Any) -> None:
        if isinstance(msg, P.Samples) and msg.block >= 0 and msg.config_id in self.index:
            self.rows[(msg.config_id, msg.block)] = (msg.rows, getattr(msg, "traffic", None))
        elif isinstance(msg, P.BlockDone) and msg.config_id in self.index:
            self.done.append(msg)


def alternate(workers: Sequence[Worker], ids: Sequence[int], rounds: int, block_s: float, settle_s: float, *,
              rate_hz: float | None = None, arrival: str | None = None, first_round: int = 0,
              stop: threading.Event | None = None, faults: Faults | None = None, names: Sequence[str] = ()
              ) -> list[BlockRun]:
    """Alternate configuration i (session ``ids[i]`` in ``workers[i]``) for ``rounds`` rounds of blocks; the
    blocks recorded, in order. Ends early, with what it has, when ``stop`` is set. Raises WorkerLost."""
    stop = stop or threading.Event()
    faults = faults if faults is not None else Faults()
    n = len(ids)
    distinct: list[Worker] = []
    for w in workers:
        if w not in distinct:
            distinct.append(w)
    out: list[BlockRun] = []
    per_block = block_s + settle_s
    if len(distinct) == 1:
        w = distinct[0]
        done_rounds = 0
        while done_rounds < rounds and not stop.is_set():
            left = rounds - done_rounds
            got, alive = _run(w, tuple(ids), {cid: k for k, cid in enumerate(ids)}, left, block_s, settle_s,
                              rate_hz, arrival, first_round + done_rounds, per_block * n * left, stop)
            for b in got:
                b.seq += done_rounds * n
            out.extend(got)
            if alive:
                break
            done_rounds += len(got) // n
            _recover(w, got, out, faults, names)
        return out
    order = schedule(n, rounds)
    pos = 0
    while pos < len(order) and not stop.is_set():
        i = order[pos]
        w = workers[i]
        got, alive = _run(w, (ids[i],), {ids[i]: i}, 1, block_s, settle_s, rate_hz, arrival,
                          first_round + pos // n, per_block, stop)
        for b in got:
            b.seq = pos
        out.extend(got)
        if not alive:
            _recover(w, got, out, faults, names)
            continue  # the block lost runs again
        pos += 1
    return out


def _recover(w: Worker, got: list[BlockRun], out: list[BlockRun], faults: Faults, names: Sequence[str]) -> None:
    """After ``w`` died: restart it with its sessions, or raise WorkerLost when it died again before finishing a
    block since its last restart (or cannot be restarted)."""
    why = w.dead or "the worker process died"
    who = ", ".join(names) if names else w.name
    if w.restarts and w.blocks_since_start == 0:
        faults.lost = f"{who}: {why} again, before finishing a block since its restart: measuring ended there"
        raise WorkerLost(faults.lost, out)
    faults.add(f"{who}: {why}; restarted it with its sessions rebuilt and went on (the block it was running is "
               "measured again)")
    if not w.restart(RESTART_TIMEOUT_S):
        faults.lost = f"{who}: {why}, and the restarted worker could not build its sessions again: measuring ended"
        raise WorkerLost(faults.lost, out)


def _run(w: Worker, ids: tuple[int, ...], index: dict[int, int], rounds: int, block_s: float, settle_s: float,
         rate_hz: float | None, arrival: str | None, first_round: int, expect_s: float,
         stop: threading.Event) -> tuple[list[BlockRun], bool]:
    """One Alternate on ``w``; its recorded blocks and whether the worker lived through it."""
    col = _Collector(index)
    with w.cv:
        w.listener = col
        w.run_errors.clear()
        expect = w.alt_done + 1
    try:
        w.send(P.Alternate(ids, block_s, settle_s, rounds, rate_hz=rate_hz, arrival=arrival, first_round=first_round))
        ok = w.wait(lambda: w.alt_done >= expect, expect_s * 3 + 30, stop)
        if w.run_errors:
            message = next(iter(w.run_errors.values()))
            raise RuntimeFailure(f"Run() failed: {message}")
        if not ok and w.dead is None:
            w.send(P.RunLive(-1))  # stopped or late: end the alternation (-1 is no session: the worker idles)
    finally:
        with w.cv:
            w.listener = None
            done, rows = list(col.done), dict(col.rows)
    out = []
    for msg in done:
        r, traffic = rows.get((msg.config_id, msg.seq), (R.empty(), None))
        out.append(BlockRun(index[msg.config_id], msg.seq, msg.t_start_ns, msg.t_end_ns, r, traffic, msg.cpu_ns,
                            msg.cpu_between_ns))
    w.blocks_since_start += len(out)
    return out, w.dead is None
