"""The worker's rows: one int64 row per run, its columns named here once.

A worker sends its runs as ``Samples.rows`` (:mod:`ortop.runtime.protocol`), an int64 array of shape (n, COLUMNS)
written by :mod:`ortop.runtime.serve`. Every reader names a column through :class:`Col` and takes a request's
response time from :func:`response_ms`, so the layout and the one definition of response (the wait in the queue
plus the service: what a request sees from its scheduled arrival) live in one place.

Clocks are the worker's ``perf_counter_ns`` (start, service, queue, idle) and ``process_time_ns`` (the cpu
columns, -1 when concurrent callers make a per-run process clock meaningless).
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Col(IntEnum):
    """The columns of a worker's row."""

    START = 0        # when Run() began (ns)
    SERVICE = 1      # how long Run() took (ns)
    CPU_IN = 2       # process CPU inside Run() (ns; -1 with concurrent callers)
    CPU_BETWEEN = 3  # process CPU since the previous Run() ended (ns; -1 likewise): spinning shows here
    REPLICA = 4      # which caller (replica) ran it
    QUEUE = 5        # how long the request waited from its scheduled arrival to its start (ns; 0 in a closed loop)
    SHAPE = 6        # index of the input shape it ran
    IDLE = 7         # the caller's idle gap before it (ns): a sleeping thread pool pays its wake-up after a long one


COLUMNS = len(Col)


def empty() -> np.ndarray:
    """No runs, with the full width."""
    return np.zeros((0, COLUMNS), dtype=np.int64)


def _has(rows: np.ndarray, col: Col) -> bool:
    return rows.ndim == 2 and rows.shape[1] > col


def response_ns(rows: np.ndarray) -> np.ndarray:
    """Each request's response time (ns): the wait in the queue plus the service (the service alone on rows too
    narrow to carry a queue)."""
    if not _has(rows, Col.QUEUE):
        return rows[:, Col.SERVICE].astype(np.int64)
    return rows[:, Col.SERVICE] + rows[:, Col.QUEUE]


def response_ms(rows: np.ndarray) -> np.ndarray:
    """Each request's response time in milliseconds (see :func:`response_ns`)."""
    return response_ns(rows) / 1e6


def service_ms(rows: np.ndarray) -> np.ndarray:
    return rows[:, Col.SERVICE] / 1e6


def arrival_ns(rows: np.ndarray) -> np.ndarray:
    """When each request arrived (was scheduled): its start less its wait; its start in a closed loop."""
    return rows[:, Col.START] - rows[:, Col.QUEUE] if _has(rows, Col.QUEUE) else rows[:, Col.START]


def end_ns(rows: np.ndarray) -> np.ndarray:
    """When each run completed."""
    return rows[:, Col.START] + rows[:, Col.SERVICE]


def served_span_ns(rows: np.ndarray) -> int:
    """The wall time the requests actually took: the first arrival to the last completion (0 without runs).

    A block's served rate is its runs over this span, never over the block's nominal length: an offered rate the
    host cannot keep leaves a queue that drains past the block's end, and dividing by the nominal length would
    report the offered rate as served.
    """
    if not len(rows):
        return 0
    return int(end_ns(rows).max() - arrival_ns(rows).min())


def replica(rows: np.ndarray) -> np.ndarray:
    """Which caller ran each request (0 on rows too narrow to say)."""
    return rows[:, Col.REPLICA] if _has(rows, Col.REPLICA) else np.zeros(len(rows), dtype=np.int64)
