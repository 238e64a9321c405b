"""A stream of live figures: one JSON object per interval, for scripts, notebooks and ``jq``.

Each line covers the runs recorded since the line before (read like the histogram's, through
:class:`~ortop.metrics.runs.RunFeed`, so no run is missed or counted twice)::

    {"t": 1767225600.123, "interval_s": 1.0, "config_id": 0, "state": "measuring", "runs": 812, "runs_total": 4051,
     "p50_ms": 1.204, "p99_ms": 1.871, "throughput_per_s": 812.0, "cpu_ms_per_run": 1.19, "rss_bytes": 91750400}

``t`` is Unix time at the interval's end; ``p50_ms``/``p99_ms``/``throughput_per_s`` are over the interval (null
when it had no runs; on a host so busy that the stream's reader falls behind a model of a few microseconds, runs
that went by unread count in ``runs`` but not in the percentiles, and an event says so); ``cpu_ms_per_run`` is the
live configuration's since it was built; ``rss_bytes`` is the worker's resident memory. Lines start once the first
session is measuring and a last, shorter one is written when the run ends. The file is line-buffered, so a FIFO, a
pipe or ``-`` (stdout) sees each line as it is written; a FIFO is opened on the writer's thread, so the run does not
wait for its reader.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

import numpy as np

from ortop.errors import UsageError
from ortop.measure.stats import json_num
from ortop.metrics.runs import Pacer, RunFeed, WorkerRss

__all__ = ["JsonlWriter", "open_jsonl", "interval_line"]

def interval_line(latency_ms: np.ndarray, *, t: float, interval_s: float, snap: Any, runs_total: int,
                  rss_bytes: int | None, unread: int = 0) -> dict[str, Any]:
    """The JSON object for one interval: its runs' percentiles and rate, the live configuration's CPU cost.
    ``unread`` runs happened in the interval but went by before they could be read: counted, not in percentiles."""
    a = np.asarray(latency_ms, dtype=np.float64)
    n = int(a.size) + unread
    p50, p99 = (float(x) for x in np.percentile(a, (50, 99))) if a.size else (math.nan, math.nan)
    return {
        "t": round(t, 3),
        "interval_s": round(interval_s, 3),
        "config_id": int(snap.config_id),
        "state": str(snap.state),
        "runs": n,
        "runs_total": int(runs_total),
        "p50_ms": json_num(p50),
        "p99_ms": json_num(p99),
        "throughput_per_s": json_num(n / interval_s if interval_s > 0 and n else math.nan, 2),
        "cpu_ms_per_run": json_num(snap.cpu.cpu_ms_per_run),
        "rss_bytes": rss_bytes,
        **_traffic(snap),
    }


def _traffic(snap: Any) -> dict[str, Any]:
    """Open arrivals: the live configuration's offered rate, requests shed, and its response split into queue and
    service (p50, p99 since it was built); p50_ms/p99_ms above are response times."""
    t = getattr(snap, "traffic", None)
    if t is None or not t.open:
        return {}
    return {"arrival": t.mode, "offered_per_s": json_num(t.offered_per_s, 2), "dropped": int(t.dropped),
            "queue_p50_ms": json_num(t.queue.p50), "queue_p99_ms": json_num(t.queue.p99),
            "service_p50_ms": json_num(t.service.p50), "service_p99_ms": json_num(t.service.p99)}


class JsonlWriter:
    """Writes :func:`interval_line` objects to a stream every ``interval_s`` on a thread of its own.

    ``stream`` is an open text stream, or None with ``fifo`` set: the FIFO is opened on the thread (opening blocks
    until a reader comes). ``owned`` streams are closed at the end. A reader that goes away ends the stream (an
    event says so), never the run.
    """

    def __init__(self, stream: IO[str] | None, *, interval_s: float = 1.0, owned: bool = True,
                 fifo: str | None = None, rss: Callable[[int | None], int | None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not (interval_s > 0 and math.isfinite(interval_s)):
            raise UsageError(f"--jsonl-interval must be > 0 seconds, got {interval_s}")
        self.interval_s = interval_s
        self.lines = 0
        self._stream = stream
        self._owned = owned
        self._fifo = fifo
        self._rss = rss or WorkerRss()
        self._clock = clock
        self._monitor: Any = None
        self._feed: RunFeed | None = None
        self._total = 0
        self._unread = 0      # the feed's unread count as of the last line
        self._warned = False
        self._pending: list[np.ndarray] = []
        self._pacer = Pacer(interval_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dead = False

    def attach(self, monitor: Any) -> None:
        """Start writing ``monitor``'s figures (once its first session measures)."""
        self._monitor = monitor
        self._feed = RunFeed(monitor)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ortop-jsonl")
        self._thread.start()

    def _loop(self) -> None:
        monitor = self._monitor
        while not self._stop.is_set() and not monitor.wait_ready(0.2):
            pass
        if self._stop.is_set() and not monitor.wait_ready(0):
            return
        if self._stream is None and self._fifo is not None:
            try:
                self._stream = open(self._fifo, "w", buffering=1, encoding="utf-8")
            except OSError as exc:
                self._give_up(exc)
                return
        last = time.monotonic()
        deadline = last + self.interval_s
        while not self._dead:
            now = time.monotonic()
            stopping = self._stop.wait(max(0.0, min(deadline, now + self._pacer.next_s) - now))
            self.collect()
            now = time.monotonic()
            if stopping or now >= deadline:
                self.write_interval(now - last)
                last = now
                if stopping:
                    return
                deadline += self.interval_s
                if deadline < now:  # a stall (a suspended process, a slow reader): skip the missed ticks
                    deadline = now + self.interval_s

    def collect(self) -> None:
        """Take the runs recorded since the last poll into the interval under way; polls between lines keep a
        fast model's runs from turning the monitor's ring over unseen."""
        if self._feed is None:
            return
        new = self._feed.poll()
        self._pacer.found(len(new))
        if len(new):
            self._pending.append(new)

    def write_interval(self, interval_s: float) -> None:
        """Write one line for the runs collected since the last line (collecting the latest first)."""
        if self._dead or self._stream is None or self._feed is None:
            return
        self.collect()
        new = np.concatenate(self._pending) if self._pending else np.zeros(0)
        self._pending = []
        unread = self._feed.unread - self._unread
        self._unread = self._feed.unread
        if unread and not self._warned:
            self._warned = True
            self._monitor.add_event("warning", f"jsonl: {unread} runs went by before they could be read (a host "
                                    "busier than its cores); they are counted, but not in p50_ms/p99_ms")
        self._total += len(new) + unread
        snap = self._monitor.snapshot()
        line = interval_line(new, t=self._clock(), interval_s=interval_s, snap=snap, runs_total=self._total,
                             rss_bytes=self._rss(snap.worker_pid), unread=unread)
        try:
            self._stream.write(json.dumps(line) + "\n")
            self._stream.flush()
            self.lines += 1
        except (OSError, ValueError) as exc:  # EPIPE: the reader left; ValueError: the stream was closed
            self._give_up(exc)

    def _give_up(self, exc: BaseException) -> None:
        self._dead = True
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        if self._monitor is not None:
            self._monitor.add_event("warning", f"jsonl stream stopped: {why}")
        self._close_stream()

    def _close_stream(self) -> None:
        s, self._stream = self._stream, None
        if s is not None and self._owned:
            try:
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        """Write the last (partial) interval and close the stream (idempotent)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(5)
        if t is None or not t.is_alive():
            self._close_stream()


def open_jsonl(path: str, *, interval_s: float = 1.0, protect: Iterable[str] = (),
               tty_is_busy: bool = False) -> JsonlWriter:
    """A writer for ``--jsonl PATH`` (``-``: stdout), refusing now what cannot be written.

    ``tty_is_busy``: stdout is the terminal a live view draws on, so ``-`` there is refused.

    Raises:
        UsageError: the path is refused by ``ortop.fsutil.check_writable`` or cannot be opened.
    """
    if not (interval_s > 0 and math.isfinite(interval_s)):
        raise UsageError(f"--jsonl-interval must be > 0 seconds, got {interval_s}")
    if path == "-":
        if tty_is_busy and sys.stdout.isatty():
            raise UsageError("--jsonl -: stdout is the terminal the live view draws on; give a file or a pipe")
        return JsonlWriter(sys.stdout, interval_s=interval_s, owned=False)
    from ortop.fsutil import check_writable

    real = check_writable(path, protect=protect, what="jsonl stream")
    try:
        if stat.S_ISFIFO(os.stat(real).st_mode):
            return JsonlWriter(None, interval_s=interval_s, fifo=real)
    except FileNotFoundError:
        pass
    try:
        stream = open(real, "w", buffering=1, encoding="utf-8")  # closed by the writer
    except OSError as exc:
        raise UsageError(f"cannot write the jsonl stream {path}: {exc.strerror or exc}") from None
    return JsonlWriter(stream, interval_s=interval_s)
