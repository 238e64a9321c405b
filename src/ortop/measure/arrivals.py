"""Open-loop traffic: when requests arrive, and the FIFO queue they wait in until a server takes them.

Requests are scheduled independently of completions, on absolute times from a seeded sequence (fixed spacing,
Poisson gaps, or a recorded trace), never as "sleep a gap after each run" (that drifts and couples to the server).
Response time is measured from a request's *scheduled* arrival, so waiting is counted (no coordinated omission).

:class:`Dispatcher` is the queue: servers (caller threads) ask it for the next request when they are free. It
holds no thread of its own (waking one through a queue costs tens of µs here): a free server takes the oldest
waiting request, or, when none waits, the next one to come and sleeps until it is due. Arrivals are taken into
the queue lazily, at each claim, which is exact for a FIFO queue: between two claims nothing starts, so the queue
only grows, and arrivals beyond ``max_queue`` waiting are shed (the newest, as a full server refuses them).

Pure and clocked from outside (the caller passes ``now``): tests drive it on a fake clock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

CLOSED, FIXED, POISSON, TRACE = "closed", "fixed", "poisson", "trace"
MODES = (CLOSED, FIXED, POISSON, TRACE)
OPEN_MODES = (FIXED, POISSON, TRACE)
CHUNK = 4096  # arrivals generated at a time


def default_max_queue(rate_hz: float) -> int:
    """One second of requests at the offered rate (at least 64): a queue deeper than that is an overload."""
    return max(64, int(math.ceil(rate_hz))) if rate_hz > 0 else 1024


def offsets(mode: str, rate_hz: float, seed: int, trace_s: np.ndarray | None = None, speed: float = 1.0,
            loop: bool = False) -> Iterator[np.ndarray]:
    """Chunks of arrival offsets (int64 ns from the start), increasing, for ``mode``.

    fixed: k / rate; poisson: cumulative exponential gaps of mean 1 / rate (``numpy`` Generator seeded by
    ``seed``, so two configurations given the same seed see the same arrivals); trace: the recorded times scaled by
    ``1 / speed``, once, or repeated end to end when ``loop`` (the next pass starts one mean gap after the last).
    """
    if mode == FIXED:
        if not rate_hz > 0:
            raise ValueError("fixed arrivals need a rate > 0")
        period = 1e9 / rate_hz
        k = 0
        while True:
            yield np.round(np.arange(k, k + CHUNK) * period).astype(np.int64)
            k += CHUNK
    elif mode == POISSON:
        if not rate_hz > 0:
            raise ValueError("poisson arrivals need a rate > 0")
        rng = np.random.default_rng(seed)
        t = 0.0
        while True:
            gaps = rng.exponential(1e9 / rate_hz, CHUNK)
            gaps[0] += t
            times = np.cumsum(gaps)
            t = float(times[-1])
            yield times.astype(np.int64)
    elif mode == TRACE:
        if trace_s is None or len(trace_s) == 0:
            raise ValueError("trace arrivals need a trace")
        base = np.asarray(trace_s, dtype=np.float64) * 1e9 / speed
        span = float(base[-1] - base[0])
        step = span / (len(base) - 1) if len(base) > 1 else 1e9 / speed
        shift = 0.0
        while True:
            yield (base - base[0] + shift).astype(np.int64)
            if not loop:
                return
            shift += span + step
    else:
        raise ValueError(f"no arrival schedule for mode {mode!r}")


def shape_ids(n_shapes: int, weights: np.ndarray | None, seed: int) -> Iterator[np.ndarray]:
    """Chunks of shape ids drawn per request (seeded apart from the arrivals: ``seed`` + a constant)."""
    if n_shapes <= 1:
        while True:
            yield np.zeros(CHUNK, dtype=np.int64)
    rng = np.random.default_rng([seed, 0x5A]) if seed >= 0 else np.random.default_rng(0x5A)
    p = None if weights is None else np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    while True:
        yield rng.choice(n_shapes, size=CHUNK, p=p).astype(np.int64)


@dataclass(frozen=True)
class Request:
    """One request a server takes: its index in the schedule, its scheduled arrival (ns, the servers' clock) and
    its input shape id."""

    index: int
    arrival_ns: int
    shape: int


class _Stream:
    """An endless (or finite) sequence read by index from chunks, keeping only what is still ahead."""

    def __init__(self, chunks: Iterator[np.ndarray]):
        self._chunks = chunks
        self._buf = np.zeros(0, dtype=np.int64)
        self._base = 0          # index of _buf[0]
        self.ended = False

    def get(self, i: int) -> int | None:
        """Element ``i`` (indices asked for never go back more than one chunk); None past a finite end."""
        while i - self._base >= len(self._buf):
            if self.ended:
                return None
            try:
                nxt = next(self._chunks)
            except StopIteration:
                self.ended = True
                return None
            self._buf = np.concatenate([self._buf, nxt])
        if i - self._base > 2 * CHUNK:  # forget what is well behind
            cut = i - self._base - CHUNK
            self._buf = self._buf[cut:]
            self._base += cut
        return int(self._buf[i - self._base])


class Dispatcher:
    """The FIFO queue between arrivals and servers. Not thread-safe by itself: servers claim under one lock.

    Counters (read under the same lock): ``arrived`` requests that came (taken or shed), ``dropped`` shed on a
    full queue, ``queue_max`` the longest queue seen, ``queue_len`` the queue now (as of the last claim), and
    ``window_dropped`` those shed of the arrivals inside the window set by :meth:`watch_window`. A request is shed
    when a server next takes arrivals in, which on a busy host can come well after it arrived: counted by its
    arrival time, a measuring block's sheds are its own, not those of the moment it was read.
    """

    def __init__(self, arrivals: Iterator[np.ndarray], shapes: Iterator[np.ndarray], start_ns: int,
                 max_queue: int, limit: int | None = None):
        self._arr = _Stream(arrivals)
        self._shape = _Stream(shapes)
        self.start_ns = start_ns
        self.max_queue = max(1, int(max_queue))
        self.limit = limit                  # at most this many requests (a trace's length); None: endless
        self._next = 0                      # next schedule index not yet taken in (queued, shed or claimed)
        self._queue: deque[tuple[int, int]] = deque()  # (index, arrival ns) waiting
        self.arrived = 0
        self.dropped = 0
        self.queue_max = 0
        self._window = (0, 0)               # [start, end) ns of arrivals whose sheds window_dropped counts
        self.window_dropped = 0

    @property
    def queue_len(self) -> int:
        return len(self._queue)

    def _arrival(self, i: int) -> int | None:
        if self.limit is not None and i >= self.limit:
            return None
        off = self._arr.get(i)
        return None if off is None else self.start_ns + off

    def _take_in(self, now: int) -> None:
        """Every arrival up to ``now`` joins the queue, or is shed when the queue is full."""
        while True:
            a = self._arrival(self._next)
            if a is None or a > now:
                return
            self.arrived += 1
            if len(self._queue) < self.max_queue:
                self._queue.append((self._next, a))
                if len(self._queue) > self.queue_max:
                    self.queue_max = len(self._queue)
            else:
                self.dropped += 1
                if self._window[0] <= a < self._window[1]:
                    self.window_dropped += 1
            self._next += 1

    def claim(self, now: int) -> Request | None:
        """The request a server free at ``now`` serves next: the oldest waiting, or the next to arrive (the server
        waits for it); None when a finite schedule has nothing left."""
        self._take_in(now)
        if self._queue:
            i, a = self._queue.popleft()
        else:
            a_next = self._arrival(self._next)
            if a_next is None:
                return None
            i, a = self._next, a_next
            self._next += 1
            self.arrived += 1
        shape = self._shape.get(i)
        return Request(i, a, 0 if shape is None else shape)

    def watch_window(self, start_ns: int, end_ns: int) -> None:
        """Count from now on the sheds of arrivals in [start_ns, end_ns) (``window_dropped``, from 0). Arrivals at
        or after ``start_ns`` must not have been taken in yet: set it before any server looks past ``start_ns``."""
        self._window = (start_ns, end_ns)
        self.window_dropped = 0

    def _queued_before(self, t_ns: int) -> int:
        """How many queued requests arrived before ``t_ns``: the queue is in arrival order, so a binary search (the
        drain asks every millisecond, holding the lock the servers claim under; a scan of a long queue starved them)."""
        q, lo, hi = self._queue, 0, len(self._queue)
        while lo < hi:
            mid = (lo + hi) // 2
            if q[mid][1] < t_ns:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def waiting_before(self, t_ns: int, since_ns: int = 0) -> int:
        """Requests that arrived before ``t_ns`` (and at or after ``since_ns``) that no server has taken yet:
        queued, or due but not taken in."""
        n = self._queued_before(t_ns) - (self._queued_before(since_ns) if since_ns else 0)
        j = self._next
        while True:
            a = self._arrival(j)
            if a is None or a >= t_ns:
                return n
            n += a >= since_ns
            j += 1

    def ended(self) -> bool:
        """A finite schedule taken in whole and its queue empty."""
        return not self._queue and self._arrival(self._next) is None


def wait_until(due_ns: int, now: Callable[[], int], sleep: Callable[[float], bool]) -> bool:
    """Sleep until ``due_ns``; ``sleep(seconds)`` returns True when told to stop (an Event's ``wait``)."""
    left = due_ns - now()
    if left > 0:
        return sleep(left / 1e9)
    return False


def mode_of(workload: object) -> str:
    """The arrival mode a profile's workload asks for: ``arrival`` when set, else fixed when a rate is set (a
    profile that sets only ``rate_hz`` keeps meaning a paced loop), else closed."""
    mode = getattr(workload, "arrival", None)
    if mode:
        return str(mode)
    return FIXED if float(getattr(workload, "rate_hz", 0.0) or 0.0) > 0 else CLOSED
