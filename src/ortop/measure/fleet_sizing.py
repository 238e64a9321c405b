"""How many hosts of one type serve a peak rate within an SLO, and a check of that count by simulation.

Pure numbers, like the rest of this room: ``ortop fleet --peak RATE`` hands in a type's capacity interval and the
service times its hosts measured, and gets the count and the simulated SLO metric back.

The count: a host of the type is expected to serve at least the low end of the type's capacity interval (where a
rerun on any of its hosts lands), so ``N = ceil(RATE / low end)`` hosts serve the peak, and one more is the spare
(N+1) that lets one host fail or be drained at the peak.

The check: a balancer that picks a host at random splits Poisson arrivals at RATE into independent Poisson streams
at RATE/N per host, which is the traffic ``ortop capacity`` offered each host; so one host's FIFO queue, simulated at
RATE/N from the measured service times (:func:`ortop.measure.queue.simulate`), is every host's. A balancer that
sends each request to the host with the fewest requests outstanding (least outstanding requests) does at least as
well; it is simulated host by host (:func:`least_outstanding`). Both are read at N and N−1: the count is right when
the SLO is met at N and missed at N−1; the simulation says when the interval's low end was cautious (N−1 meets too).
This is how the answer reaches fleets of hundreds of hosts without a hundred hosts to test on: the random split is
exact for any N, and only least outstanding requests is simulated host by host (up to :data:`LOR_MAX_HOSTS`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortop.measure.queue import simulate
from ortop.measure.slo import Slo
from ortop.measure.stats import json_num

# The service-time quantiles a headless run reports (``service_ms`` of ``ortop run --headless --json``), by the
# probability each stands for: the inverse of the measured distribution is read through these points.
QUANTILE_KEYS: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999),
                                               ("max", 1.0))
MIN_REQUESTS = 20_000   # simulated requests at the least: a p99 read from 20 000 has ~200 requests above it
WARMUP_SHARE = 0.1      # the first tenth of the simulated requests is left out: the queues start empty
LOR_MAX_HOSTS = 64      # least outstanding requests is simulated host by host up to here (requests × hosts steps)


def quantile_points(service_ms: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The measured service times' inverse distribution as points (probability, ms), from a run's ``service_ms``
    (p50, p90, p99, p999, max; what is missing is left out). Below the median the distribution is taken as flat
    down to 0.8 × the median: a service time has a floor, and the median sits near it for most models."""
    probs, values = [], []
    for key, p in QUANTILE_KEYS:
        v = service_ms.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            probs.append(p)
            values.append(float(v))
    if not values:
        raise ValueError("no service-time quantiles (p50 … max) to simulate from")
    probs = [0.0, *probs]
    values = [0.8 * values[0], *values]
    return np.asarray(probs), np.maximum.accumulate(np.asarray(values))


def draw_service(sources: Sequence[Mapping[str, Any]], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` service times (ms) drawn from the hosts' measured distributions in equal shares (a type's pooled
    hosts), each by its inverse distribution at a uniform probability."""
    if not sources:
        raise ValueError("no measured service times to simulate from")
    parts = []
    for i, source in enumerate(sources):
        probs, values = quantile_points(source)
        k = n // len(sources) + (1 if i < n % len(sources) else 0)
        parts.append(np.interp(rng.random(k), probs, values))
    out = np.concatenate(parts)
    rng.shuffle(out)
    return out


def hosts_needed(peak_per_s: float, per_host_per_s: float) -> int:
    """The hosts that serve ``peak_per_s`` when each serves ``per_host_per_s`` (the capacity interval's low end)."""
    if not (peak_per_s > 0 and math.isfinite(peak_per_s)):
        raise ValueError(f"the peak must be a rate > 0, got {peak_per_s}")
    if not (per_host_per_s > 0 and math.isfinite(per_host_per_s)):
        raise ValueError(f"a host's capacity must be > 0, got {per_host_per_s}")
    return max(1, math.ceil(peak_per_s / per_host_per_s - 1e-9))


def requests_for(slo: Slo) -> int:
    """Simulated requests enough for the SLO's metric: 50 × the requests it is read from, at least MIN_REQUESTS."""
    return max(MIN_REQUESTS, 50 * slo.runs_needed())


def random_split(service_ms: np.ndarray, peak_per_s: float, hosts: int, servers: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Response times (ms) behind a balancer that picks a host at random: each host gets Poisson at peak/hosts, so
    one host's queue stands for all of them. No host: an empty array (the peak is not served)."""
    if hosts < 1:
        return np.empty(0)
    gaps = rng.exponential(1.0, service_ms.size)
    return simulate(service_ms, gaps, peak_per_s / hosts, servers=servers)


def least_outstanding(service_ms: np.ndarray, peak_per_s: float, hosts: int, servers: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Response times (ms) behind a balancer that sends each request (Poisson at ``peak_per_s``) to the host with
    the fewest outstanding (queued or running), ties broken at random; each host a FIFO queue with ``servers``
    servers."""
    if hosts < 1:
        return np.empty(0)
    arrive = np.cumsum(rng.exponential(1e3 / peak_per_s, service_ms.size))
    ties = rng.random((service_ms.size, hosts)) * 0.5
    free = [[0.0] * servers for _ in range(hosts)]   # each host's servers, by when each is free (a heap)
    outstanding = np.zeros(hosts)
    ends: list[tuple[float, int]] = []              # (completion time, host) of every request not yet done
    out = np.empty(service_ms.size)
    for i, t in enumerate(arrive):
        while ends and ends[0][0] <= t:
            outstanding[heapq.heappop(ends)[1]] -= 1
        h = int(np.argmin(outstanding + ties[i]))
        start = max(t, heapq.heappop(free[h]))
        end = start + service_ms[i]
        heapq.heappush(free[h], end)
        heapq.heappush(ends, (end, h))
        outstanding[h] += 1
        out[i] = end - t
    return out


def slo_metric(slo: Slo, response_ms: np.ndarray) -> float:
    """The SLO's metric of simulated response times, the warm-up left out; inf when nothing was served."""
    if not response_ms.size:
        return math.inf
    return slo.of(response_ms[int(response_ms.size * WARMUP_SHARE):])


@dataclass(frozen=True)
class Sizing:
    """One type's answer to a peak: N hosts serve it (N+1 with the spare), and the simulated SLO metric at N and
    N−1 behind each balancer (``lor_*`` nan where least outstanding requests was not simulated)."""

    peak_per_s: float
    per_host_per_s: float
    hosts: int
    servers: int
    random_at_n: float
    random_at_n_minus_1: float
    lor_at_n: float
    lor_at_n_minus_1: float
    slo: Slo

    @property
    def with_spare(self) -> int:
        return self.hosts + 1

    @property
    def meets_at_n(self) -> bool:
        return self.random_at_n <= self.slo.ms

    @property
    def misses_at_n_minus_1(self) -> bool:
        return not self.random_at_n_minus_1 <= self.slo.ms

    def verdict(self) -> str:
        """One line: whether the simulation bears the count out."""
        m = self.slo.metric
        if not self.meets_at_n:
            return (f"the simulation misses the SLO at {self.hosts} hosts ({m} {self.random_at_n:.3g} ms behind a "
                    "random split): the measured service times queue worse than the capacity interval says")
        if self.misses_at_n_minus_1:
            return f"the simulation meets the SLO at {self.hosts} hosts and misses it at {self.hosts - 1}"
        return (f"the simulation meets the SLO at {self.hosts - 1} hosts too: the interval's low end is cautious "
                f"(it holds where a rerun on any host of the type lands)")

    def as_dict(self) -> dict[str, Any]:
        return {"peak_per_s": self.peak_per_s, "per_host_per_s": json_num(self.per_host_per_s),
                "hosts": self.hosts, "hosts_with_spare": self.with_spare, "servers_per_host": self.servers,
                "slo": self.slo.as_dict(),
                "simulated": {"random": {"at_n": json_num(self.random_at_n),
                                         "at_n_minus_1": json_num(self.random_at_n_minus_1)},
                              "least_outstanding": {"at_n": json_num(self.lor_at_n),
                                                    "at_n_minus_1": json_num(self.lor_at_n_minus_1)}},
                "meets_at_n": self.meets_at_n, "misses_at_n_minus_1": self.misses_at_n_minus_1,
                "verdict": self.verdict()}


def size(peak_per_s: float, per_host_per_s: float, service: Sequence[Mapping[str, Any]], slo: Slo, *,
         servers: int = 1, seed: int = 0) -> Sizing:
    """The hosts that serve ``peak_per_s`` (each serving ``per_host_per_s``, the type's interval's low end), checked
    by simulating the ``service`` times the type's hosts measured (``service_ms`` of a headless run each)."""
    n = hosts_needed(peak_per_s, per_host_per_s)
    rng = np.random.default_rng(seed)
    work = draw_service(service, requests_for(slo), rng)
    servers = max(1, int(servers))

    def at(hosts: int, how: Any) -> float:
        return slo_metric(slo, how(work, peak_per_s, hosts, servers, np.random.default_rng(seed + hosts)))

    lor = n <= LOR_MAX_HOSTS
    return Sizing(peak_per_s=peak_per_s, per_host_per_s=per_host_per_s, hosts=n, servers=servers,
                  random_at_n=at(n, random_split), random_at_n_minus_1=at(n - 1, random_split),
                  lor_at_n=at(n, least_outstanding) if lor else math.nan,
                  lor_at_n_minus_1=at(n - 1, least_outstanding) if lor else math.nan, slo=slo)
