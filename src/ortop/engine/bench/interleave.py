"""The one alternation loop: every configuration alternated block by block, in one worker or across several, for
every question ortop measures (:class:`Interleaver`). Capacity drives :class:`ortop.engine.bench.pool.Worker`
objects through :func:`alternate`; compare, verify, the doctor, variants and tune's racer through
:class:`ortop.engine.bench.ab.Interleaving`, which collects the blocks (:class:`ortop.engine.bench.record.BlockRecord`)
and reads their memory, idle gaps and outputs into its figures.

Configurations in one worker are alternated by the worker itself (one ``Alternate`` for all their rounds: no round
trip between blocks), while the parent watches the blocks come in and asks its stop rule after each (compare's
sequential looks end it within a block of deciding). Configurations in several workers (different restart groups:
an ``[env]`` knob, a global thread pool) are alternated by the parent, block by block in the same order
(:func:`ortop.measure.compare.schedule`), telling one worker at a time to run one block while the others wait on
their command pipe, so a profile of its own group takes its turns like any other instead of running all its blocks
in a row. A block's seq is its place in that order, whichever worker runs it. Every block of round r draws the
arrivals and shapes of round r (common random numbers), whichever worker runs it.

A worker that dies is restarted with its sessions rebuilt (:meth:`Channel.restart`), and the alternation goes on
from the block it lost; one that dies again before finishing a block ends the alternation with
:class:`WorkerLost` (its owner keeps every block measured before).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import numpy as np

from ortop.engine.bench.pool import Worker
from ortop.errors import RuntimeFailure
from ortop.measure import rows as R
from ortop.measure.compare import order_seed, schedule
from ortop.runtime import protocol as proto

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


class Channel(Protocol):
    """A worker as the interleaver drives it: :class:`ortop.engine.bench.pool.Worker` is one (capacity), a
    :class:`SendChannel` over a send function another (compare, verify, the racer). The interleaver counts the
    blocks it finishes (``blocks_since_start``); ``restart`` starts it again with its sessions (True once built)."""

    name: str
    restarts: int
    blocks_since_start: int

    def send(self, msg: Any) -> Any: ...

    def restart(self, timeout_s: float, stop: threading.Event | None = None) -> bool: ...


class SendChannel:
    """A :class:`Channel` over a send function: ``restart`` (optional) starts the worker again with its sessions."""

    def __init__(self, send: Callable[[Any], Any], name: str = "", restart: Callable[[], bool] | None = None):
        self._send = send
        self._restart = restart
        self.name = name
        self.restarts = 0
        self.blocks_since_start = 0

    def send(self, msg: Any) -> None:
        self._send(msg)

    def restart(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        self.restarts += 1
        self.blocks_since_start = 0
        return self._restart is not None and self._restart()


class Interleaver:
    """The one alternation loop: configuration i (worker-side id ``ids[i]``) runs on ``channels[channel_of[i]]``.

    Its owner routes the workers' word to it (under ``cv``, which it may share): :meth:`block_done` for each
    ``BlockDone`` (it answers the block's seq in the whole alternation), :meth:`alternation_done`, :meth:`died`
    and :meth:`fail` (a run error, or a death that is not to be recovered from: :meth:`run` raises ``error`` with
    the message). :meth:`run` alternates; ``end(channel)``, when given, ends the alternation of a live channel that
    :meth:`run` leaves before its worker finished (stopped, or late).
    """

    def __init__(self, channels: Sequence[Channel], channel_of: Sequence[int], ids: Sequence[int], *,
                 names: Sequence[str] = (), stop: threading.Event | None = None, faults: Faults | None = None,
                 recover: bool = True, restart_timeout_s: float = RESTART_TIMEOUT_S,
                 cv: threading.Condition | None = None, error: Callable[[str], Exception] = RuntimeFailure,
                 end: Callable[[Channel], None] | None = None):
        self.channels = list(channels)
        self.channel_of = list(channel_of)
        self.ids = list(ids)
        self.names = list(names)
        self.stop = stop or threading.Event()
        self.faults = faults if faults is not None else Faults()
        self.recover = recover              # a dead worker is restarted (else the alternation fails with why)
        self.restart_timeout_s = restart_timeout_s
        self.cv = cv or threading.Condition()
        self.error_type = error
        self.end = end
        self.error: str | None = None
        self._alt_done = [0] * len(self.channels)   # AlternationDone per channel
        self._dead: dict[int, str] = {}             # channel -> why its worker died, until the loop restarts it
        self._base = [0] * len(self.channels)       # seq of the first block of each channel's last Alternate
        self._in_alt = [0] * len(self.channels)     # ... and the blocks it finished of it
        self._top = 0                               # one past the highest seq finished
        self._plan: tuple[float, float, float | None, str | None, int] = (0.0, 0.0, None, None, 0)

    # ---- what the workers say (under cv) ----------------------------------------------------------------------
    def block_done(self, channel: int, seq: int) -> int:
        """``channel`` finished the block of its own seq ``seq``: its seq in the whole alternation."""
        with self.cv:
            self.channels[channel].blocks_since_start += 1
            self._in_alt[channel] += 1
            out = self._base[channel] + seq
            self._top = max(self._top, out + 1)
            self.cv.notify_all()
            return out

    def alternation_done(self, channel: int) -> None:
        with self.cv:
            self._alt_done[channel] += 1
            self.cv.notify_all()

    def died(self, channel: int, why: str) -> None:
        """The worker behind ``channel`` died: restarted by :meth:`run` (``recover``), else the alternation fails."""
        if not self.recover:
            self.fail(why)
            return
        with self.cv:
            self._dead[channel] = why
            self.cv.notify_all()

    def fail(self, message: str) -> None:
        with self.cv:
            if self.error is None:
                self.error = message
            self.cv.notify_all()

    # ---- the alternation --------------------------------------------------------------------------------------
    def run(self, block_s: float, settle_s: float, rounds: int | None = None, *,
            should_stop: Callable[[float], bool] | None = None, rate_hz: float | None = None,
            arrival: str | None = None, first_round: int = 0) -> None:
        """Alternate for ``rounds`` rounds of blocks (None: until ``should_stop``), round r drawing the arrivals of
        ``first_round + r``. ``should_stop(ahead_s)``, asked under ``cv`` whenever a block may have come in (one
        worker) or before each block (several; ``ahead_s``: half a block, that it would take), ends it early, as
        the ``stop`` flag does. Raises ``error`` (a run error, a worker late by far) and WorkerLost (``blocks``
        empty: its owner holds them)."""
        self._plan = (block_s, settle_s, rate_hz, arrival, first_round)
        ask = should_stop or (lambda ahead_s: False)

        def stopping(ahead_s: float) -> bool:
            with self.cv:
                return self.stop.is_set() or ask(ahead_s)

        if len(self.channels) == 1:
            self._in_one(rounds, stopping)
        else:
            self._across(rounds, stopping)

    def _in_one(self, rounds: int | None, stopping: Callable[[float], bool]) -> None:
        """One worker alternates every configuration itself: one Alternate for all the rounds (again after a
        restart), and the parent only watches the blocks come in."""
        n = len(self.ids)
        per_block = self._plan[0] + self._plan[1]
        base = 0
        while rounds is None or base < rounds * n:
            left = None if rounds is None else rounds - base // n
            expect = self._send(0, tuple(self.ids), base, left)
            late_s = None if left is None else 30.0 + 4 * per_block * n * left
            outcome = self._wait(0, expect, late_s, partial(stopping, 0.0))
            if outcome == "done":
                if rounds is None:
                    raise self.error_type("the worker stopped alternating")
                return
            if outcome != "dead":
                self._leave(0, outcome, self._who(0))
                return
            # A bounded alternation owes its rounds (its caller numbers rounds across calls): it goes on from the
            # last it finished. An unbounded one goes on from a fresh pair of rounds past every block measured, as
            # each Alternate draws its rounds' order afresh. Either way each round draws its own arrivals.
            base = base + self._in_alt[0] // n * n if rounds is not None else -(-self._top // (2 * n)) * 2 * n
            if not self._recover(0):
                return

    def _across(self, rounds: int | None, stopping: Callable[[float], bool]) -> None:
        """Configurations in several workers: the parent runs the schedule block by block, telling one worker at a
        time to run one block (its seq: its place in the schedule) while the others wait on their command pipe."""
        n = len(self.ids)
        per_block = self._plan[0] + self._plan[1]
        seed = order_seed()
        order = schedule(n, rounds, seed) if rounds is not None else []
        pos = 0
        # A block costs its settle and its recording plus a round trip: none starts that would end past the budget
        # by more than half of it.
        while not stopping(per_block / 2):
            if rounds is None and pos >= len(order):
                order = schedule(n, 2 * (pos // n + 2), seed)
            if pos >= len(order):
                return
            i = order[pos]
            ch = self.channel_of[i]
            expect = self._send(ch, (self.ids[i],), pos, 1)
            outcome = self._wait(ch, expect, 30.0 + 4 * per_block, self.stop.is_set)
            if outcome == "dead":
                with self.cv:  # its block came in before it died (its end of alternation did not): not run twice
                    finished = self._in_alt[ch] >= 1
                if not self._recover(ch):
                    return
                pos += finished  # else the block lost runs again
                continue
            if outcome != "done":
                self._leave(ch, outcome, self.names[i] if self.names else self.channels[ch].name)
                return
            pos += 1

    def _send(self, channel: int, ids: tuple[int, ...], base: int, rounds: int | None) -> int:
        """One Alternate whose first block is seq ``base``; the AlternationDone count that says it ended."""
        block_s, settle_s, rate_hz, arrival, first_round = self._plan
        with self.cv:
            self._base[channel] = base
            self._in_alt[channel] = 0
            expect = self._alt_done[channel] + 1
        self.channels[channel].send(proto.Alternate(ids, block_s, settle_s, rounds, rate_hz=rate_hz, arrival=arrival,
                                                first_round=first_round + base // len(self.ids),
                                                order_seed=order_seed()))
        return expect

    def _wait(self, channel: int, expect: int, late_s: float | None, stopping: Callable[[], bool]) -> str:
        """Until the channel's Alternate ended ("done"), ``stopping()`` ("stopped"), its worker died ("dead") or
        ``late_s`` passed ("late"); raises ``error`` on a failure."""
        deadline = None if late_s is None else time.monotonic() + late_s
        with self.cv:
            while True:
                if self.error is not None:
                    raise self.error_type(self.error)
                if stopping():
                    return "stopped"
                if channel in self._dead:
                    return "dead"
                if self._alt_done[channel] >= expect:
                    return "done"
                left = 0.05 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return "late"
                self.cv.wait(min(left, 0.05))

    def _leave(self, channel: int, outcome: str, who: str) -> None:
        """Leave a channel whose Alternate has not ended: stopped, or late (an error)."""
        if self.end is not None and channel not in self._dead:
            self.end(self.channels[channel])
        if outcome == "late":
            raise self.error_type(f"{who}: the worker did not finish a block")

    def _who(self, channel: int) -> str:
        mine = [name for name, ch in zip(self.names, self.channel_of) if ch == channel]
        return ", ".join(mine) if mine else self.channels[channel].name

    def _recover(self, channel: int) -> bool:
        """Restart the dead worker of ``channel`` with its sessions; False when ``stop`` was set while it rebuilt
        (the alternation ends, not a fault). Raises WorkerLost when it died again before finishing a block since
        its last restart, or when its sessions do not build again."""
        c = self.channels[channel]
        with self.cv:
            why = self._dead.pop(channel)  # a death of the restarted worker is its own, said again
        who = self._who(channel)
        if c.restarts and c.blocks_since_start == 0:
            self.faults.lost = f"{who}: {why} again, before finishing a block since its restart: measuring ended there"
            raise WorkerLost(self.faults.lost, [])
        self.faults.add(f"{who}: {why}; restarted it with its sessions rebuilt and went on (the block it was "
                        "running is measured again)")
        if not c.restart(self.restart_timeout_s, self.stop):
            if self.stop.is_set():
                return False
            self.faults.lost = (f"{who}: {why}, and the restarted worker could not build its sessions again: "
                                "measuring ended there")
            raise WorkerLost(self.faults.lost, [])
        return True


def alternate(workers: Sequence[Worker], ids: Sequence[int], rounds: int, block_s: float, settle_s: float, *,
              rate_hz: float | None = None, arrival: str | None = None, first_round: int = 0,
              stop: threading.Event | None = None, faults: Faults | None = None, names: Sequence[str] = ()
              ) -> list[BlockRun]:
    """Alternate configuration i (session ``ids[i]`` in ``workers[i]``) for ``rounds`` rounds of blocks; the
    blocks recorded, in order. Ends early, with what it has, when ``stop`` is set. Raises WorkerLost."""
    distinct: list[Worker] = []
    for w in workers:
        if w not in distinct:
            distinct.append(w)
    il = Interleaver(distinct, [distinct.index(w) for w in workers], ids, names=names, stop=stop, faults=faults,
                     end=lambda c: c.send(proto.RunLive(-1)))  # -1 is no session: the worker idles
    index = {cid: k for k, cid in enumerate(ids)}
    rows: dict[tuple[int, int], tuple[np.ndarray, Any]] = {}
    out: list[BlockRun] = []

    def listen(channel: int, msg: Any) -> None:
        with il.cv:
            if isinstance(msg, proto.Samples) and msg.block >= 0 and msg.config_id in index:
                rows[(msg.config_id, msg.block)] = (msg.rows, getattr(msg, "traffic", None))
            elif isinstance(msg, proto.BlockDone) and msg.config_id in index:
                r, traffic = rows.pop((msg.config_id, msg.seq), (R.empty(), None))
                out.append(BlockRun(index[msg.config_id], il.block_done(channel, msg.seq), msg.t_start_ns,
                                    msg.t_end_ns, r, traffic, msg.cpu_ns, msg.cpu_between_ns))
            elif isinstance(msg, proto.AlternationDone):
                il.alternation_done(channel)
            elif isinstance(msg, proto.RunError) and msg.config_id in index:
                il.fail(f"Run() failed: {msg.message}")

    for ch, w in enumerate(distinct):
        with w.cv:
            w.listener, w.on_death = partial(listen, ch), partial(il.died, ch)
            dead = w.dead
        if dead is not None:  # died since the last alternation: restarted before its first block
            il.died(ch, dead)
    try:
        il.run(block_s, settle_s, rounds, rate_hz=rate_hz, arrival=arrival, first_round=first_round)
    except WorkerLost as lost:
        with il.cv:
            lost.blocks = list(out)
        raise
    finally:
        for w in distinct:
            with w.cv:
                w.listener, w.on_death = None, None
    with il.cv:
        return list(out)
