"""What a :class:`~ortop.engine.live.monitor.Monitor` holds, declared once: the worker it runs, the configurations'
stores, the state machine, the event log, the live series and the caches its readout keeps.

The monitor and its two parts in modules of their own (:mod:`ortop.engine.live.readout` reads this state,
:mod:`ortop.engine.live.verify` borrows the worker) reach it as ``self.st``; every field is read and written under
``lock``, and ``changed`` (a condition on it) wakes whoever waits for a build, a state or a verification.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortop.engine.live.events import EventLog
from ortop.engine.live.memory import WorkerMemory
from ortop.engine.live.snapshot import State
from ortop.measure.compare import Block
from ortop.measure.series import Series

if TYPE_CHECKING:
    from ortop.config.profile import Profile
    from ortop.engine.bench.ab import Interleaving
    from ortop.engine.live.snapshot import ConfigRecord
    from ortop.engine.live.store import ConfigStore

__all__ = ["MonitorState", "Pooled", "Verifying"]


@dataclass
class Pooled:
    """What earlier verifications of one pair of rows measured, for the next press to add to: their blocks as
    whole pairs (seq 0 … P−1), their measuring time, and how many runs there were (each spends its own share of α:
    :func:`ortop.measure.sequential.resumed`); ``more_s``: what the last one said more would decide."""

    blocks: tuple[Block, ...] = ()
    elapsed_s: float = 0.0
    times: int = 0
    more_s: float | None = None
    block_s: float | None = None   # the first run's blocks: every later one keeps them, so its pairs are alike
    settle_s: float | None = None  # (a longer press would plan longer blocks, and fewer pairs than "N s" counted)


class Verifying:
    """A verification under way: its ids, its interleaving (once started), a cancel flag and the caller's future."""

    def __init__(self, config_id: int, against_id: int, seconds: float, future: Future, metric: str = "p50",
                 pooled: Pooled | None = None):
        self.config_id = config_id
        self.against_id = against_id
        self.seconds = seconds
        self.metric = metric
        self.pooled = pooled or Pooled()
        self.future = future
        self.cancel = threading.Event()
        self.interleaving: Interleaving | None = None
        self.temp_ids: tuple[int, ...] = ()
        self.thread: threading.Thread | None = None
        self.why = ""
        self.paused = False          # cancelled by a pause: the worker stays paused afterwards


@dataclass(eq=False)
class MonitorState:
    """The monitor's state (see the module docstring)."""

    series: Series                            # the live latency series, one bucket per ``bucket_s``
    lock: threading.RLock = field(default_factory=threading.RLock)
    changed: threading.Condition = field(init=False)  # on ``lock``
    ready: threading.Event = field(default_factory=threading.Event)  # the first build answered
    # the worker
    worker: Any = None                        # engine.workerproc.WorkerProc
    worker_offset: float | None = None        # monitor clock − worker perf clock (s), set by the first samples
    worker_key: tuple | None = None           # the restart key the worker was started with
    in_worker: set[int] = field(default_factory=set)  # config ids with a session built in the worker
    worker_has_session: bool = False
    worker_mem: WorkerMemory = field(default_factory=WorkerMemory)
    deaths: list[float] = field(default_factory=list)  # when the worker died (monitor clock), for the restart limit
    restarts: int = 0
    stopping: bool = False
    fatal: str | None = None                  # why the session cannot go on (nothing runs after it)
    # the configurations: history rows 0, 1, 2… and sessions built for a comparison only
    stores: OrderedDict[int, ConfigStore] = field(default_factory=OrderedDict)
    next_id: int = 0
    next_temp_id: int = 0
    current: ConfigStore | None = None
    pending: ConfigStore | None = None
    # The row id of the live build the worker is working on (sent, not answered yet). While one is in flight a newer
    # apply only replaces ``pending``: the worker builds the latest settings next, not every one asked for on the way
    # (ten quick presses build two sessions, not ten), and a superseded build's session is dropped as soon as it is
    # answered (kept, each held the model's weights and arena for good).
    in_flight: int | None = None
    good: Profile | None = None               # the last profile that built and ran
    # the state machine, and what it told the user
    state: State = State.STARTING
    state_since: float = 0.0
    generation: int = 0                       # moves with every change except new runs (Monitor.generation)
    events: EventLog = field(default_factory=EventLog)
    noted: set[str] = field(default_factory=set)  # feed notes already logged (each once per session, not per build)
    # the readout's caches
    record_cache: dict[int, tuple[tuple, float, ConfigRecord]] = field(default_factory=dict)  # id -> (key, when, it)
    live_cache: dict[tuple[str, int], tuple[int, float, Any]] = field(default_factory=dict)  # (what, id) -> figures
    # verification (engine.verify)
    verify: Verifying | None = None             # a verification under way
    verify_pool: OrderedDict[tuple[int, int], Pooled] = field(default_factory=OrderedDict)  # earlier runs, per pair

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)
