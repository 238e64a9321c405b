"""The one alternation loop (:class:`ortop.engine.bench.interleave.Interleaver`) on workers played by threads: the
schedule and its seq numbers in one worker and across several, a dead worker restarted with every block measured
kept, one that dies again ending the measuring, and an early stop within a block of deciding."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.bench import ab
from ortop.engine.bench.interleave import Faults, Interleaver, WorkerLost
from ortop.measure import rows as R
from ortop.measure.compare import schedule
from ortop.runtime import protocol as proto

DIED = "the worker process died (signal 9)"


class FakeWorker:
    """A worker process played by a thread: it builds at once and runs an Alternate's blocks a few ms each (five
    runs of ``1 + config_id`` ms); it dies before finishing its block number ``die_before[0]`` (counted over its
    whole life, a restart included), and so on down the list; or, ``die_after``, once that block is done and said,
    before it says its alternation ended."""

    def __init__(self, name: str = "fake", die_before: tuple[int, ...] = (), die_after: tuple[int, ...] = ()):
        self.name = name
        self.restarts = 0
        self.blocks_since_start = 0
        self.deliver: Callable[[Any], None] = lambda msg: None
        self.died: Callable[[str], None] = lambda why: None
        self.die_before = list(die_before)
        self.die_after = list(die_after)
        self.finished = 0
        self.sent: list[Any] = []
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def send(self, msg: Any) -> None:
        self.sent.append(msg)
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
        if isinstance(msg, proto.Build):
            self.deliver(proto.Built(msg.config_id, {"warmup_ms": 1.0, "rss_before": -1, "rss_after": -1}))
        elif isinstance(msg, proto.Alternate):
            self._halt = threading.Event()
            self._thread = threading.Thread(target=self._alternate, args=(msg, self._halt), daemon=True)
            self._thread.start()

    def restart(self, timeout_s: float = 0.0, stop: threading.Event | None = None) -> bool:
        self.restarts += 1
        self.blocks_since_start = 0
        return True

    def alternates(self) -> list[proto.Alternate]:
        return [m for m in self.sent if isinstance(m, proto.Alternate)]

    def _alternate(self, msg: proto.Alternate, halt: threading.Event) -> None:
        n = len(msg.config_ids)
        for pos, k in enumerate(schedule(n, msg.rounds or 10_000, msg.order_seed)):
            if halt.wait(0.002):
                return
            if self.die_before and self.finished == self.die_before[0]:
                self.die_before.pop(0)
                self.died(DIED)
                return
            self.finished += 1
            cid = msg.config_ids[k]
            t = time.perf_counter_ns()
            rows = np.zeros((5, R.COLUMNS), dtype=np.int64)
            rows[:, R.Col.START] = t + np.arange(5) * 1_000_000
            rows[:, R.Col.SERVICE] = (1 + cid) * 1_000_000 + np.arange(5) * 1000
            self.deliver(proto.Samples(cid, rows, 5_000_000, 5_000_000, pos))
            self.deliver(proto.BlockDone(cid, pos, t, t + 5_000_000, 5_000_000, -1, 5))
            if self.die_after and self.finished == self.die_after[0]:
                self.die_after.pop(0)
                self.died(DIED)
                return
        self.deliver(proto.AlternationDone(True))


def interleaving(workers: list[FakeWorker], channel_of: list[int], budget_s: float,
                 **kw: Any) -> ab.Interleaving:
    """A comparison of two profiles (ids 0 and 1) over the fake workers, restarting a dead one."""
    routes = ab.Routes([0, 1], [w.send for w in workers], channel_of, restart=lambda ch: workers[ch].restart())
    il = ab.Interleaving([Profile(), Profile()], routes, budget_s=budget_s, names=["a", "b"], block_s=0.002,
                         settle_s=0.0, **kw)
    for ch, w in enumerate(workers):
        w.deliver = lambda msg, ch=ch: il.deliver(msg, ch)
        w.died = lambda why, ch=ch: il.worker_died(ch, why)
    return il


def test_a_worker_killed_mid_alternation_across_workers_loses_no_block_and_keeps_the_order():
    a, b = FakeWorker("a"), FakeWorker("b", die_before=(3,))
    res = interleaving([a, b], [0, 1], budget_s=0.4).run()
    assert res.fault is None and not res.stopped
    assert len(res.restarts) == 1 and res.restarts[0].startswith(f"b: {DIED}; restarted it with its sessions")
    in_time = sorted(res.blocks, key=lambda blk: blk.t_start)
    # every place in the schedule measured once, in order, whichever worker ran it: the lost block ran again
    assert [blk.seq for blk in in_time] == list(range(len(in_time))) and len(in_time) >= 8
    configs = [blk.config for blk in in_time]  # each round (its order drawn) one block of each
    assert all(sorted(configs[k:k + 2]) == [0, 1] for k in range(0, len(configs) - 1, 2)), configs
    # one block per Alternate, each drawing the arrivals of its round; the lost one asked for again
    firsts = [(m.config_ids, m.rounds, m.first_round) for m in b.alternates()]
    assert all(ids == (1,) and rounds == 1 for ids, rounds, _ in firsts)
    lost = [first for _, _, first in firsts]
    assert len(lost) == len(set(lost)) + 1  # the block it died in, sent twice
    assert all(blk.runs == 5 for blk in res.blocks)


def test_a_worker_killed_after_its_block_came_in_does_not_run_that_block_again():
    """Killed between saying its block was done and saying its alternation ended: the block is measured, so the
    schedule goes on from the next place, and every place is measured once."""
    a, b = FakeWorker("a"), FakeWorker("b", die_after=(2,))
    res = interleaving([a, b], [0, 1], budget_s=0.4).run()
    assert res.fault is None and len(res.restarts) == 1
    seqs = sorted(blk.seq for blk in res.blocks)
    assert seqs == list(range(len(seqs))) and len(seqs) >= 8, seqs
    firsts = [m.first_round for m in b.alternates()]  # b runs one block a round: no round asked of it twice
    assert len(firsts) == len(set(firsts)), firsts


def test_one_worker_alternates_with_one_message_and_stops_within_a_block_of_deciding():
    w = FakeWorker()
    res = interleaving([w], [0, 0], budget_s=20.0, ending=ab.Ending(decide_on="p50")).run()
    assert res.stopped_early and not res.stopped and res.elapsed_s < 10
    (alt,) = w.alternates()  # every round of blocks from one message: no round trip between blocks
    assert alt.config_ids == (0, 1) and alt.rounds is None
    assert isinstance(w.sent[-1], proto.Pause)
    # what ran between the decision and the Pause is not part of the result
    assert w.finished >= len(res.blocks) and max(blk.seq for blk in res.blocks) < len(res.blocks)


def test_one_worker_restarted_goes_on_from_a_fresh_pair_of_rounds():
    w = FakeWorker(die_before=(5,))
    res = interleaving([w], [0, 0], budget_s=0.3).run()
    assert res.fault is None and len(res.restarts) == 1
    first, again = w.alternates()
    assert first.first_round == 0 and again.first_round == 4 and again.rounds is None
    seqs = [blk.seq for blk in sorted(res.blocks, key=lambda blk: blk.t_start)]
    # the five blocks before the death kept; after it the numbering goes on from seq 8 (a fresh pair of rounds)
    assert seqs[:5] == [0, 1, 2, 3, 4] and seqs[5:] == list(range(8, 8 + len(seqs) - 5))


def test_a_worker_that_dies_again_before_a_block_ends_the_comparison_with_what_was_measured():
    w = FakeWorker(die_before=(3, 3))
    res = interleaving([w], [0, 0], budget_s=5.0).run()
    assert res.stopped and res.elapsed_s < 4
    assert res.fault == f"a, b: {DIED} again, before finishing a block since its restart: measuring ended there"
    assert len(res.restarts) == 1 and [blk.seq for blk in res.blocks] == [0, 1, 2]


def test_a_bounded_alternation_restarted_owes_its_rounds_and_numbers_them_on():
    """Capacity's: rounds are owed, and a restarted worker goes on from the last round it finished."""
    w = FakeWorker(die_before=(3,))
    faults = Faults()
    il = Interleaver([w], [0, 0], [7, 8], names=["x", "y"], faults=faults)
    seqs: list[int] = []
    w.deliver = lambda msg: (seqs.append(il.block_done(0, msg.seq)) if isinstance(msg, proto.BlockDone) else
                             il.alternation_done(0) if isinstance(msg, proto.AlternationDone) else None)
    w.died = lambda why: il.died(0, why)
    il.run(0.002, 0.0, 3, first_round=10)
    first, again = w.alternates()
    assert (first.rounds, first.first_round) == (3, 10) and (again.rounds, again.first_round) == (2, 11)
    assert seqs == [0, 1, 2, 2, 3, 4, 5]
    assert faults.lost is None and len(faults.said) == 1 and faults.said[0].startswith("x, y: ")


def test_a_bounded_alternation_that_loses_its_worker_for_good_raises_worker_lost():
    w = FakeWorker(die_before=(2, 2))
    il = Interleaver([w], [0], [1], names=["x"])
    w.deliver = lambda msg: (il.block_done(0, msg.seq) if isinstance(msg, proto.BlockDone) else
                             il.alternation_done(0) if isinstance(msg, proto.AlternationDone) else None)
    w.died = lambda why: il.died(0, why)
    try:
        il.run(0.002, 0.0, 6)
    except WorkerLost as lost:
        assert str(lost) == il.faults.lost and "again, before finishing a block" in str(lost)
    else:
        raise AssertionError("no WorkerLost")
