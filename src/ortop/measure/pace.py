"""Whether an offered rate was kept: one rule for the live view, the doctor, compare, tune and capacity.

Pure numbers. A rate is judged against the requests that *arrived*, never against the rate a profile asked for: a
Poisson count is noisy (at 12/s over 5 s, 60 ± 7.7 arrive), so a server that served every arrival can read 10 %
under the asked rate, and one compared with it would be told it fell behind while its queue sat empty.

The rule (:func:`kept`), in order:

1. Anything shed: not kept. A shed request is one the server could not take (a full queue, or still waiting when a
   block's drain ran out); no figure of the others answers a paced question then.
2. When the mean time a request keeps its server busy is known (its service, and ``servers``, the callers that
   serve the arrivals), the utilisation decides: arrivals per second × mean service / servers. A queue keeps its
   rate in the long run exactly when that stays under 1, so this is immune to count noise: the backlog of a queue
   at 90 % swings by tens of requests from one few-second window to the next, its utilisation does not. Not kept
   when KEEP_RATIO × utilisation reaches 1 (utilisation ≥ 1/0.95 ≈ 1.05): the margin lets a server read at its
   limit keep it (a mean over a few hundred requests, and a service time that can hold a wake-up after idle, are
   that uncertain), and a server past it for long sheds soon after (the queue holds a second of requests by
   default), which rule 1 says.
3. Otherwise the counts decide: not kept when the backlog, arrived − served, exceeds both BACKLOG_SHARE (5 %) of the
   arrivals and Z (3) × √arrived, the spread of a Poisson count of that size. A server that keeps up leaves a
   backlog of the few requests in its queue; one at 80 % of the arrivals leaves a fifth of them, which passes 3 √n
   once n is a few hundred (30 s at 12/s). Below that the counts cannot tell the two apart, and the rule says
   kept rather than guess. ``arrived`` may be an expected count (the asked rate × the time) where what arrived was
   not counted; the allowance is then the asked rate's own Poisson spread.

Where the mean service is not known, the fastest response seen (``service_floor_ms``) still bounds it from below: no
request is served faster than the fastest one was answered. When even that floor fills the servers (arrivals per
second × floor / servers reaches 1/KEEP_RATIO), the rate was not kept, whatever the counts say. Short blocks need
this: a block that records its window's arrivals each to its response drains its whole backlog before the next one
starts, so its counts always balance, though at 60/s offered to a model of 40 ms a run the server could never keep up.

Counts over a few requests prove nothing either way: callers that show a verdict as it forms (the live view's
status line) wait for MIN_ARRIVALS and SETTLE_S first (:func:`settled`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ortop.present import rate_figure

KEEP_RATIO = 0.95     # the utilisation's margin: not kept once arrivals at this share of their rate fill the servers
BACKLOG_SHARE = 0.05  # a backlog under this share of the arrivals is a queue's ordinary content, never "not kept"
Z = 3.0               # ... nor one within this many standard deviations of a Poisson count of the arrivals
MIN_ARRIVALS = 20     # before this many arrivals a live verdict is not shown
SETTLE_S = 3.0        # nor before the running configuration has measured this long (a fresh build's first seconds)


def utilisation(arrived: float, window_s: float, service_ms: float, servers: int) -> float:
    """The share of the servers' time the arrivals need: arrivals per second × mean service (ms) / servers; nan
    when any of them is unknown."""
    if not (window_s > 0 and servers > 0 and math.isfinite(service_ms) and service_ms >= 0 and arrived >= 0):
        return math.nan
    return arrived / window_s * service_ms / 1e3 / servers


def backlog_allowed(arrived: float) -> float:
    """The largest backlog (arrived − served) that still reads as kept: BACKLOG_SHARE of the arrivals or Z Poisson
    standard deviations of their count, the larger."""
    n = max(0.0, float(arrived))
    return max(BACKLOG_SHARE * n, Z * math.sqrt(n))


def kept(arrived: float, served: float, shed: int, window_s: float, service_ms: float = math.nan,
         servers: int = 0, service_floor_ms: float = math.nan) -> bool:
    """Whether the requests that arrived over ``window_s`` were served at their pace (the module docstring says
    the rule and why). ``service_ms``: the mean time a request keeps its server busy, with ``servers`` the callers
    serving the arrivals (0: unknown); without them the counts decide, unless ``service_floor_ms`` (the fastest
    response, a lower bound of the service) already fills the servers."""
    if shed > 0:
        return False
    if not arrived > 0:
        return True
    u = utilisation(arrived, window_s, service_ms, servers)
    if math.isfinite(u):
        return KEEP_RATIO * u < 1.0
    if KEEP_RATIO * utilisation(arrived, window_s, service_floor_ms, servers) >= 1.0:
        return False
    return arrived - served <= backlog_allowed(arrived)


def settled(arrived: float, measured_s: float) -> bool:
    """Whether a verdict that is forming may be shown: MIN_ARRIVALS arrived and SETTLE_S measured (nan: unknown,
    not held against it)."""
    return arrived >= MIN_ARRIVALS and not measured_s < SETTLE_S


def servers_of(workload: object) -> int:
    """The callers that serve a workload's arrivals: its replicas × the callers of each."""
    replicas = int(getattr(workload, "replicas", 1) or 1)
    callers = int(getattr(workload, "concurrency", 1) or 1)
    return max(1, replicas) * max(1, callers)


def block_span(wall_s: float, blocks: int, response_p50_ms: float, floor_s: float) -> float:
    """The time over which blocks' arrivals were served at their pace: their wall time (each block's, to its last
    request served) less a median response per block, never below ``floor_s``. A block records the requests that
    arrived in its window, each to its response, so a server that keeps up still serves its last arrivals up to a
    response time after the window closes: on a model of 60 ms a run in blocks of 0.4 s that is a sixth of the wall
    time, which compared with the arrival rate would read as a sixth fallen behind."""
    if not wall_s > 0:
        return wall_s
    drain = blocks * response_p50_ms / 1e3 if blocks > 0 and response_p50_ms > 0 else 0.0
    return max(floor_s, wall_s - drain)


def of_blocks(arrived: int, window_s: float, runs: int, served_per_s: float, blocks: int, response_p50_ms: float,
              shed: int = 0, asked_per_s: float = math.nan, fastest_ms: float = math.nan, servers: int = 0) -> Pace:
    """What blocks of open arrivals say of the pace: ``arrived`` requests over their windows (``window_s`` in all),
    ``runs`` served at ``served_per_s`` over their wall time. Each block records the requests that arrived in its
    window, each to its response, so its runs end up to a response time after the window: the arrivals are judged
    at their rate over the time the runs took, less a median response per block (:func:`block_span`). The fastest
    response (``fastest_ms``, with the ``servers`` that served them) bounds the service from below (:func:`kept`)."""
    offered = arrived / window_s if window_s > 0 else math.nan
    wall = runs / served_per_s if served_per_s > 0 else window_s
    span = block_span(wall, blocks, response_p50_ms, window_s)
    return Pace(offered * span, runs, shed, span, servers=servers, asked_per_s=asked_per_s,
                service_floor_ms=fastest_ms, busy_s=wall)




def words(offered_per_s: float, served_per_s: float, shed: int = 0, asked_per_s: float = math.nan) -> str:
    """``offered 12/s, served 10/s, 3 shed``; the rate asked beside what arrived when they read differently
    (``offered 10.8/s (asked 12/s), …``), or alone where what arrived was not counted (``asked 12/s, …``)."""
    if math.isfinite(offered_per_s):
        asked = (f" (asked {rate_figure(asked_per_s)}/s)"
                 if math.isfinite(asked_per_s) and rate_figure(asked_per_s) != rate_figure(offered_per_s) else "")
        head = f"offered {rate_figure(offered_per_s)}/s{asked}"
    else:
        head = f"asked {rate_figure(asked_per_s)}/s"
    return f"{head}, served {rate_figure(served_per_s)}/s" + (f", {shed} shed" if shed else "")


@dataclass(frozen=True)
class Pace:
    """What a rate is judged from: requests that arrived over a window, those served over the same window, those
    shed; the mean service and the servers when known; the rate asked, to name beside what arrived."""

    arrived: float                 # counted; or expected from the asked rate where not (``counted`` False)
    served: float
    shed: int
    window_s: float
    service_ms: float = math.nan
    servers: int = 0
    asked_per_s: float = math.nan
    counted: bool = True
    service_floor_ms: float = math.nan  # the fastest response: a lower bound of the service (nan: unknown)
    busy_s: float = math.nan            # blocks: the whole time their runs took (``window_s`` is less the drains)

    @classmethod
    def of_rates(cls, offered_per_s: float, served_per_s: float, shed: int, window_s: float,
                 service_ms: float = math.nan, servers: int = 0, asked_per_s: float = math.nan) -> Pace:
        """From rates over one window: what arrived and what was served, each per second of ``window_s``."""
        return cls(offered_per_s * window_s, served_per_s * window_s, shed, window_s, service_ms, servers,
                   asked_per_s)

    @property
    def offered_per_s(self) -> float:
        return self.arrived / self.window_s if self.counted and self.window_s > 0 else math.nan

    @property
    def served_per_s(self) -> float:
        return self.served / self.window_s if self.window_s > 0 else math.nan

    def utilisation(self) -> float:
        return utilisation(self.arrived, self.window_s, self.service_ms, self.servers)

    def kept(self) -> bool:
        return kept(self.arrived, self.served, self.shed, self.window_s, self.service_ms, self.servers,
                    self.service_floor_ms)

    def text(self) -> str:
        """:func:`words` of its rates. A rate not kept reads its runs over the whole time they took (``busy_s``,
        where given): a backlogged server was busy throughout, and that is the rate it delivered."""
        served = self.served_per_s
        if self.busy_s > 0 and not self.kept():
            served = self.served / self.busy_s
        return words(self.offered_per_s, served, self.shed, self.asked_per_s)
