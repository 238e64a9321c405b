"""What traffic did to a configuration: offered against served, the queue, response split into queue and service,
service by the idle gap before a run, and figures per input shape.

Response time is measured from a request's scheduled arrival (``queue + service``), so an offered rate the host
cannot keep shows as queueing and shed requests instead of a fine-looking service time. In a closed loop there is
no queue and response = service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from ortop.measure import pace as pace_rule
from ortop.measure import rows as R
from ortop.measure import stats
from ortop.measure.stats import json_num
from ortop.present import rate_figure


class RingCol(IntEnum):
    """The columns of a configuration store's ring (engine.store), in ms unless said: response first, so every
    figure judged on "latency" (verdicts, percentiles, the history) is what a request sees."""

    RESPONSE = 0     # the wait in the queue plus the service (:func:`ortop.measure.rows.response_ms`)
    CPU_IN = 1       # process CPU inside Run() (negative with concurrent callers)
    CPU_BETWEEN = 2  # process CPU since the previous Run() ended
    T_S = 3          # when Run() began, seconds on the monitor's clock
    REPLICA = 4
    SERVICE = 5      # inside Run()
    QUEUE = 6        # the wait from the scheduled arrival to the start (0 in a closed loop)
    SHAPE = 7        # index of the input shape
    IDLE = 8         # the caller's idle gap before the run (nan on rows too narrow to carry it)


RESPONSE, CPU_IN, CPU_BETWEEN, T_S, REPLICA, SERVICE, QUEUE, SHAPE, IDLE = RingCol
WIDTH = len(RingCol)

IDLE_BUCKETS_MS = (1.0, 10.0, 100.0)  # idle gap buckets: < 1, 1–10, 10–100, ≥ 100 ms


def ring_rows(rows: np.ndarray, t_s: np.ndarray) -> np.ndarray:
    """The protocol's int64 rows (runtime.serve's columns) as the store ring's float rows (columns above)."""
    n = len(rows)
    out = np.empty((n, WIDTH), dtype=np.float64)
    wide = rows.shape[1] >= R.COLUMNS
    out[:, RESPONSE] = R.response_ms(rows)
    out[:, CPU_IN] = rows[:, R.Col.CPU_IN] / 1e6
    out[:, CPU_BETWEEN] = rows[:, R.Col.CPU_BETWEEN] / 1e6
    out[:, T_S] = t_s
    out[:, REPLICA] = R.replica(rows)
    out[:, SERVICE] = R.service_ms(rows)
    out[:, QUEUE] = rows[:, R.Col.QUEUE] / 1e6 if wide else 0.0
    out[:, SHAPE] = rows[:, R.Col.SHAPE] if wide else 0
    out[:, IDLE] = rows[:, R.Col.IDLE] / 1e6 if wide else math.nan
    return out


@dataclass
class Counters:
    """An open loop's queue counters, summed over the batches a configuration received."""

    arrived: int = 0
    dropped: int = 0
    queue_len: int = 0      # at the latest batch
    queue_max: int = 0
    queue_first: int = -1   # at the first batch after a reset: the queue's growth is the last against it

    def add(self, traffic: tuple[int, int, int, int] | None) -> None:
        if traffic is None:
            return
        arrived, dropped, qlen, qmax = traffic
        self.arrived += int(arrived)
        self.dropped += int(dropped)
        self.queue_len = int(qlen)
        self.queue_max = max(self.queue_max, int(qmax))
        if self.queue_first < 0:
            self.queue_first = int(qlen)


@dataclass(frozen=True)
class GapRow:
    """Service time of the runs that followed an idle gap of a bucket's length."""

    label: str
    runs: int
    p50_ms: float
    p99_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {"gap": self.label, "runs": self.runs, "service_p50_ms": json_num(self.p50_ms),
                "service_p99_ms": json_num(self.p99_ms)}


@dataclass(frozen=True)
class ShapeRow:
    """One distinct input shape of a mix or a trace: its runs, their share of all runs, and its requests' time in
    the queue, in Run() (service) and in all (response = queue + service), each over its own runs."""

    shape: dict[str, list[int]]
    label: str
    runs: int
    service: stats.LatencyStats
    response: stats.LatencyStats
    queue: stats.LatencyStats = field(default_factory=stats.LatencyStats)
    share: float = math.nan     # of the runs of every shape (0…1)

    def as_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "label": self.label, "runs": self.runs,
                "service_ms": {"p50": json_num(self.service.p50), "p99": json_num(self.service.p99)},
                "latency_ms": {"p50": json_num(self.response.p50), "p99": json_num(self.response.p99)}}


@dataclass(frozen=True)
class Traffic:
    """The workload's figures for one configuration (a snapshot's, a summary's)."""

    mode: str
    offered_per_s: float        # nan in a closed loop
    asked_per_s: float          # the profile's rate (nan for closed and trace)
    served_per_s: float
    dropped: int
    queue_max: int
    queue_len: int
    service: stats.LatencyStats
    queue: stats.LatencyStats
    service_std: float = math.nan
    queue_std: float = math.nan
    idle_gaps: tuple[GapRow, ...] = ()
    shapes: tuple[ShapeRow, ...] = field(default_factory=tuple)
    window_s: float = math.nan  # the time offered and served are over (the configuration's measured wall time)
    servers: int = 0            # the callers serving the arrivals (replicas × callers; 0: unknown)

    @property
    def open(self) -> bool:
        return self.mode != "closed"

    def pace(self, servers: int = 0) -> pace_rule.Pace:
        """What arrived, what was served and what was shed over its window, with the mean service and ``servers``
        (this figure's own when 0), for :mod:`ortop.measure.pace`'s rule. Without a window the counts are a
        second's: the rule then goes by shed requests and the utilisation, and says kept rather than read a
        backlog from rates alone."""
        window = self.window_s if self.window_s > 0 else 1.0
        return pace_rule.Pace.of_rates(self.offered_per_s, self.served_per_s, self.dropped, window,
                                       self.service.mean, servers or self.servers, self.asked_per_s)

    def kept(self, servers: int = 0) -> bool:
        """The requests that arrived were served at their pace (:func:`ortop.measure.pace.kept`; always true in a
        closed loop); ``servers`` as :meth:`pace`."""
        if not self.open or not self.offered_per_s > 0:
            return True
        return self.pace(servers).kept()

    def warning(self) -> str:
        """One line when the pace was not kept, naming both rates and what the host serves; "" when it was."""
        if self.kept():
            return ""
        shed = f", {self.dropped} requests shed (queue full at {self.queue_max})" if self.dropped else ""
        return (f"offered {rate_figure(self.offered_per_s)}/s, served {rate_figure(self.served_per_s)}/s{shed}: "
                f"this configuration serves about {rate_figure(self.served_per_s)}/s here; the latencies include "
                "queueing")

    def arrivals_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "offered_per_s": json_num(self.offered_per_s),
                "served_per_s": json_num(self.served_per_s), "dropped": self.dropped, "queue_max": self.queue_max,
                "kept": self.kept()}


def offered_rate(profile: Any) -> float:
    """The rate a profile asks for in all (``rate_hz`` per replica), nan for a closed loop or a trace: named beside
    what arrived, never judged against (a Poisson count over a few seconds lands ±10 % from it)."""
    from ortop.measure.arrivals import FIXED, POISSON, mode_of

    w = profile.workload
    return float(w.rate_hz) * int(w.replicas) if mode_of(w) in (FIXED, POISSON) else math.nan


def idle_gaps(rows: np.ndarray) -> tuple[GapRow, ...]:
    """Service p50/p99 by the idle gap before each run (rows: the ring's); () when no gap was recorded."""
    if not len(rows) or not np.isfinite(rows[:, IDLE]).any():
        return ()
    gap = rows[:, IDLE]
    edges = (0.0, *IDLE_BUCKETS_MS, math.inf)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = rows[(gap >= lo) & (gap < hi), SERVICE] if lo > 0 else rows[gap < hi, SERVICE]
        label = f"< {hi:g} ms" if lo == 0 else (f"≥ {lo:g} ms" if hi == math.inf else f"{lo:g}–{hi:g} ms")
        if len(sel):
            s = stats.latency_stats(sel)
            out.append(GapRow(label, len(sel), s.p50, s.p99))
        else:
            out.append(GapRow(label, 0, math.nan, math.nan))
    return tuple(out)


def shape_rows(rows: np.ndarray, shapes: list[dict[str, list[int]]], labels: list[str]) -> tuple[ShapeRow, ...]:
    """One row per distinct input shape of the mix, in the mix's order (only when there are several): its runs
    among ``rows`` (the ring's), their share of them, and queue, service and response over that shape's runs alone.
    A shape that has not run yet has 0 runs and no figures."""
    if len(shapes) < 2 or not len(rows):
        return ()
    out = []
    ids = rows[:, SHAPE].astype(np.int64)
    order = np.argsort(ids, kind="stable")  # one pass over the ring, not one mask per shape
    bounds = np.searchsorted(ids[order], np.arange(len(shapes) + 1), side="left")
    for k, (shape, label) in enumerate(zip(shapes, labels)):
        sel = order[bounds[k]:bounds[k + 1]]  # gathered a column at a time: whole rows are 9 columns of a full ring
        out.append(ShapeRow(shape, label, len(sel), stats.latency_stats(rows[sel, SERVICE]),
                            stats.latency_stats(rows[sel, RESPONSE]), stats.latency_stats(rows[sel, QUEUE]),
                            len(sel) / len(rows)))
    return tuple(out)


def rates(mode: str, counters: Counters, wall_s: float, runs: int) -> tuple[float, float]:
    """(offered, served) per second over ``wall_s``: requests that arrived (nan in a closed loop) and runs done."""
    served = runs / wall_s if wall_s > 0 else math.nan
    offered = counters.arrived / wall_s if mode != "closed" and wall_s > 0 else math.nan
    return offered, served


def figures(mode: str, asked_hz: float, rows: np.ndarray, counters: Counters, wall_s: float, runs: int,
            shapes: list[dict[str, list[int]]] | None = None, labels: list[str] | None = None,
            servers: int = 0) -> Traffic:
    """A configuration's traffic figures from its ring rows, its queue counters, wall time and run count;
    ``servers``: the callers serving its arrivals (replicas × callers), when known."""
    offered, served = rates(mode, counters, wall_s, runs)
    n = len(rows)
    if mode == "closed":  # no queue: its figures are zeros, not worth a percentile over the ring each snapshot
        queue = stats.LatencyStats(n, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0) if n else stats.LatencyStats()
        queue_std = 0.0 if n > 1 else math.nan
    else:
        queue = stats.latency_stats(rows[:, QUEUE]) if n else stats.LatencyStats()
        queue_std = float(np.std(rows[:, QUEUE])) if n > 1 else math.nan
    return Traffic(
        mode=mode, offered_per_s=offered,
        asked_per_s=asked_hz if mode in ("fixed", "poisson") else math.nan,
        served_per_s=served, dropped=counters.dropped, queue_max=counters.queue_max, queue_len=counters.queue_len,
        service=stats.latency_stats(rows[:, SERVICE]) if len(rows) else stats.LatencyStats(),
        queue=queue,
        service_std=float(np.std(rows[:, SERVICE])) if len(rows) > 1 else math.nan,
        queue_std=queue_std,
        idle_gaps=idle_gaps(rows) if mode != "closed" else (),
        shapes=shape_rows(rows, shapes or [], labels or []),
        window_s=wall_s, servers=servers,
    )




def summary_part(t: Traffic) -> dict[str, Any]:
    """The summary's traffic keys: ``arrivals``, ``service_ms``, ``queue_ms``, ``idle_gaps``, ``shapes``."""
    out: dict[str, Any] = {
        "arrivals": t.arrivals_dict(),
        "service_ms": t.service.as_dict(std=t.service_std),
        "queue_ms": t.queue.as_dict(std=t.queue_std),
    }
    if t.idle_gaps:
        out["idle_gaps"] = [g.as_dict() for g in t.idle_gaps]
    if t.shapes:
        out["shapes"] = [s.as_dict() for s in t.shapes]
    return out
