"""Every run the monitor records, read incrementally through its public face, off the per-run path.

The monitor keeps each configuration's recent runs in a ring (``Monitor.config_runs``: up to CONFIG_RING latencies
in arrival order). A :class:`RunFeed` polls that ring and returns only the runs that arrived since its last poll:
it remembers the last few latencies it saw and finds them again in the new copy. While the ring has not wrapped the
new runs are simply those past the old length (an O(1) check); once it has, the remembered tail is looked up among
the positions holding its last value. A tail that is gone (the statistics were reset) means every run in the ring
is new. Latencies are nanosecond counts, so 32 equal values in a row at another position do not happen in
practice. A :class:`Pacer` polls often enough that at most a quarter of a ring turns over between two polls, so
no run goes by unseen, down to models of a few microseconds (measured: every one of 880 000 runs at 90 000/s),
unless the poller itself is starved (a host busier than its cores): where the source counts its runs
(``Monitor.config_tally``), those that turned the ring over unseen are counted in ``RunFeed.unread``, so totals
stay exact though their latencies are gone.

Which configuration is live comes from a snapshot, taken only when ``Monitor.generation`` moved (a rebuild, an
event, a state change) and never for new runs alone; the configuration that was live before keeps being polled
until its last runs are in. Runs of the temporary sessions of a verification are not fed.

:class:`WorkerRss` reads the worker's resident memory, the other figure both consumers take from outside a
snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import psutil

from ortop.engine.live.store import CONFIG_RING

TAIL = 32           # latencies remembered per configuration to find the old end again
MIN_MATCH = 4       # ... and the fewest of them that still identify it at the start of a ring that turned over
DRAINED_POLLS = 2   # polls without new runs after which a configuration that is no longer live is forgotten
MIN_POLL_S = 0.05
QUIET_POLL_S = 0.2  # while no runs come (starting, building, paused): runs may start at any rate, and a ring of
                    # CONFIG_RING runs lasts 0.2 s only at 250 000 runs/s
RING_SHARE = 0.25   # poll before a quarter of a configuration's ring has turned over


def poll_interval(rate_per_s: float, longest_s: float, capacity: int = CONFIG_RING) -> float:
    """How long to wait before the next poll: ``longest_s``, or less when runs come fast enough (``rate_per_s``)
    to turn a quarter of a ring of ``capacity`` over in that time (a model of a few microseconds), and
    QUIET_POLL_S while none come."""
    if not rate_per_s > 0:
        return min(longest_s, QUIET_POLL_S)
    return min(longest_s, max(MIN_POLL_S, RING_SHARE * capacity / rate_per_s))


class Pacer:
    """The next poll's delay from the runs the last polls found. Polls closer together than MIN_POLL_S (a scrape
    right after a poll, say) are pooled, so one that found nothing a moment after another does not slow it down."""

    def __init__(self, longest_s: float, capacity: int = CONFIG_RING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.longest_s = longest_s
        self.capacity = capacity
        self.next_s = min(longest_s, QUIET_POLL_S)
        self._clock = clock
        self._since = clock()
        self._runs = 0

    def found(self, runs: int) -> float:
        """Record a poll that found ``runs`` new runs; returns the delay until the next."""
        self._runs += runs
        now = self._clock()
        dt = now - self._since
        if dt >= MIN_POLL_S:
            self.next_s = poll_interval(self._runs / dt, self.longest_s, self.capacity)
            self._since, self._runs = now, 0
        return self.next_s


class RunSource(Protocol):
    """What a feed reads: the monitor's snapshot (for the live configuration id) and a configuration's runs."""

    def snapshot(self) -> Any: ...

    def config_runs(self, config_id: int) -> np.ndarray: ...


class _Cursor:
    __slots__ = ("tail", "length", "idle", "total")

    def __init__(self) -> None:
        self.tail = np.zeros(0)
        self.length = 0
        self.idle = 0
        self.total = 0


def new_runs(runs: np.ndarray, tail: np.ndarray, length: int) -> np.ndarray:
    """The runs of ``runs`` that came after ``tail``, the last latencies of a copy of the same ring that was
    ``length`` long. Everything is new when ``tail`` is empty or cannot be found (a reset, or a ring that turned
    over all but fewer than MIN_MATCH of the old runs since)."""
    k = len(tail)
    n = len(runs)
    if k == 0:
        return runs
    if k <= length <= n and np.array_equal(runs[length - k:length], tail):
        return runs[length:]  # the ring grew without wrapping (or did not grow)
    last = tail[-1]
    for i in np.flatnonzero(runs[k - 1:] == last)[::-1] + (k - 1):
        if np.array_equal(runs[i - k + 1:i + 1], tail):
            return runs[i + 1:]
    for j in range(min(k, n) - 1, MIN_MATCH - 1, -1):  # the ring turned over all but the tail's last j runs
        if np.array_equal(runs[:j], tail[-j:]):
            return runs[j:]
    return runs


class RunFeed:
    """New runs (latency ms) of the monitor's live configurations since the last :meth:`poll`. Thread-safe."""

    def __init__(self, source: RunSource) -> None:
        self._source = source
        self._tally = getattr(source, "config_tally", None)
        self._lock = threading.Lock()
        self._cursors: dict[int, _Cursor] = {}
        self._generation: Any = object()
        self._live = -1
        self.unread = 0  # runs that went by before a poll could read them (a poller starved on a busy host)

    @property
    def live_config(self) -> int:
        """The live configuration's id as of the last poll (-1 before the first session is built)."""
        return self._live

    def poll(self) -> np.ndarray:
        """The latencies (ms) of every run recorded since the last call, the live configuration's last."""
        with self._lock:
            gen = getattr(self._source, "generation", None)
            if gen is None or gen != self._generation:
                self._generation = gen if gen is not None else object()
                self._live = int(self._source.snapshot().config_id)
            live = self._live
            if live >= 0 and live not in self._cursors:
                self._cursors[live] = _Cursor()
            parts = []
            for cid in [c for c in self._cursors if c != live] + ([live] if live >= 0 else []):
                cur = self._cursors[cid]
                if self._tally is not None:
                    ring, total = self._tally(cid)
                    runs = np.asarray(ring, dtype=np.float64)
                else:
                    runs = np.asarray(self._source.config_runs(cid), dtype=np.float64)
                    total = -1
                fresh = new_runs(runs, cur.tail, cur.length)
                if total >= 0:  # the source counts its runs: those that turned the ring over unseen are known
                    arrived = total - cur.total if total >= cur.total else total  # smaller: the statistics reset
                    self.unread += max(0, arrived - len(fresh))
                    cur.total = total
                cur.tail = runs[-TAIL:].copy()
                cur.length = len(runs)
                cur.idle = 0 if len(fresh) else cur.idle + 1
                if len(fresh):
                    parts.append(fresh)
                if cid != live and cur.idle >= DRAINED_POLLS:
                    del self._cursors[cid]
            return np.concatenate(parts) if parts else np.zeros(0)


class WorkerRss:
    """The worker's resident memory in bytes (psutil), or None when there is no worker or it cannot be read.

    The psutil handle is kept while the pid stays the same (a restarted worker has a new one).
    """

    def __init__(self) -> None:
        self._proc: Any = None

    def __call__(self, pid: int | None) -> int | None:
        if pid is None:
            return None
        try:
            if self._proc is None or self._proc.pid != pid:
                self._proc = psutil.Process(pid)
            return int(self._proc.memory_info().rss)
        except (psutil.Error, OSError):
            return None
