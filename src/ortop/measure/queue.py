"""A queue's response times from what its server measured: a FIFO queue simulated by Lindley's recursion, the rate
where it would cross an SLO (the knee's prediction), and the long-run SLO metric with an interval by a moving-block
bootstrap of a point's server times (the queue model).

Pure numbers: the capacity search (:mod:`ortop.engine.answers.capacity`, whose docstring says why the search needs each)
hands in arrays of what it measured and gets numbers back.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from ortop.measure import rows as R
from ortop.measure.noise import SLOW_K
from ortop.measure.slo import Slo

MODEL_N = 40_000        # simulated requests per replicate of the queue model (see queue_model)
MODEL_REPS = 24         # its replicates: the spread of the metric over resampled busy times and fresh arrivals
CHUNK = 32              # busy times are resampled in runs of this many, keeping the host's slow spells together


def simulate(service_ms: np.ndarray, gaps: np.ndarray, rate_per_s: float, servers: int = 1,
             wake_ms: np.ndarray | None = None) -> np.ndarray:
    """Response times (ms) of a FIFO queue with ``servers`` servers: request *n* arrives ``gaps[n] / rate`` after
    request *n − 1* (``gaps``: unit-mean inter-arrival draws) and needs ``service_ms[n]``; ``wake_ms[n]`` more when
    it finds its server idle (a sleeping thread wakes late; a busy one takes the next request at once)."""
    arrive = np.cumsum(gaps) * (1e3 / rate_per_s)
    if servers <= 1:
        def lindley(work: np.ndarray) -> np.ndarray:
            # Lindley's recursion in closed form: D_n = C_n + max_{j≤n} (A_j − C_{j−1}), C the cumulative work.
            done = np.cumsum(work)
            return done + np.maximum.accumulate(arrive - (done - work))

        depart = lindley(service_ms)
        if wake_ms is not None:  # who found the server idle, from the queue without the wake-ups, then with them
            idle = np.r_[True, arrive[1:] >= depart[:-1]]
            depart = lindley(service_ms + np.where(idle, wake_ms, 0.0))
        return depart - arrive
    free = [0.0] * servers  # a heap of the times each server is next free
    out = np.empty(arrive.size)
    wake = wake_ms.tolist() if wake_ms is not None else [0.0] * arrive.size
    for n, (a, s, w) in enumerate(zip(arrive.tolist(), service_ms.tolist(), wake)):
        f = heapq.heappop(free)
        start = a + w if a >= f else f
        heapq.heappush(free, start + s)
        out[n] = start + s - a
    return out


def predict_knee(service_ms: np.ndarray, slo: Slo, servers: int = 1, queues: int = 1, n: int = 20000,
                 seed: int = 0, at: tuple[float, float] | None = None) -> float:
    """The offered rate (requests/s, all ``queues`` together) at which the SLO metric of response time would
    cross the SLO if every run took what the closed loop's runs took (``service_ms``, resampled): Poisson
    arrivals split evenly over ``queues`` FIFO queues (replicas) of ``servers`` callers each, simulated with common
    random numbers so the metric grows with the rate, and the rate bisected. 0 when even a lone request misses;
    nan without service times.

    ``at = (rate, measured_ms)``: a point measured the SLO metric at that offered rate. The simulation's curve is
    then scaled to pass through it (measured over simulated, at that rate) before it is crossed with the SLO: the
    simulation knows the curve's shape, the point its level — stalls of the host that come in runs, which a queue
    of independent service times does not have, raise it."""
    svc = np.asarray(service_ms, dtype=float)
    svc = svc[np.isfinite(svc) & (svc > 0)]
    if svc.size < 10:
        return math.nan
    rng = np.random.default_rng(seed)
    n = n if servers <= 1 else min(n, 8000)
    draws = rng.choice(svc, size=n)
    gaps = rng.exponential(1.0, size=n)
    skip = n // 10  # the queue starts empty: the first tenth is its warm-up

    def metric(rate: float) -> float:
        return slo.of(simulate(draws, gaps, rate, servers)[skip:])

    top = servers * 1e3 / float(svc.mean())  # one queue's ceiling: beyond it the queue grows without bound
    limit = slo.ms
    if at is not None:
        rate, measured = at
        if rate > 0 and measured > 0 and math.isfinite(measured):
            simulated = metric(min(rate / queues, top * 0.999))
            if simulated > 0 and math.isfinite(simulated):
                limit = slo.ms * simulated / measured
    if metric(top * 1e-3) > limit:
        return 0.0
    lo, hi = top * 1e-3, top
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if metric(mid) <= limit else (lo, mid)
        if hi - lo <= 1e-3 * hi:
            break
    return lo * queues


BUSY_COLUMNS = 4  # server_times' columns: service ms, the gap before the run ms, 1 when the server was idle, shape


def server_times(rows: np.ndarray) -> np.ndarray:
    """What each request cost its server (ms, in start order per server), from a block's rows: (service, gap,
    idle, shape) — the gap from when it could have started (its arrival, or its server's previous end when that
    came later) to its start, whether the server was idle when it arrived, and the index of the input shape it ran
    (what a stall is judged against: :func:`stalled`). A queued request's gap is the serving loop's own work
    between runs; an idle server's is how late its thread woke. Replayed through Lindley's recursion on the same
    arrivals, service + gap gives back the responses measured, so a queue simulated with them is this server, not
    an ideal one. The first request of each server counts its service alone."""
    if rows.ndim != 2 or not len(rows):
        return np.zeros((0, BUSY_COLUMNS))
    shape = rows[:, R.Col.SHAPE].astype(float) if rows.shape[1] > R.Col.SHAPE else np.zeros(len(rows))
    if rows.shape[1] <= R.Col.QUEUE:
        return np.column_stack([R.service_ms(rows), np.zeros(len(rows)), np.zeros(len(rows)), shape])
    out = []
    for caller in np.unique(rows[:, R.Col.REPLICA]):
        mine = rows[:, R.Col.REPLICA] == caller
        r, kind = rows[mine], shape[mine]
        order = np.argsort(r[:, R.Col.START], kind="stable")
        r, kind = r[order], kind[order]
        start, service = r[:, R.Col.START], r[:, R.Col.SERVICE]
        arrive = R.arrival_ns(r)
        free = np.concatenate((start[:1], (start + service)[:-1]))  # when the server could take it
        ready = np.maximum(arrive, free)
        out.append(np.column_stack([service / 1e6, (start - ready) / 1e6, (arrive > free).astype(float), kind]))
    return np.concatenate(out)


def work_ms(times: np.ndarray) -> np.ndarray:
    """Each request's time on its server from :func:`server_times` rows: its service plus the gap before it (never
    below zero: a caller starts a run only after its previous one ends)."""
    return times[:, 0] + np.maximum(times[:, 1], 0.0)


def _runs_of(pool: np.ndarray, n: int, rng: np.random.Generator, start_p: np.ndarray | None = None) -> np.ndarray:
    """Indices of ``n`` draws from ``pool`` in runs of CHUNK consecutive ones (a moving-block bootstrap);
    ``start_p``: each possible run start's probability (one per start: ``max(1, pool.size − CHUNK + 1)``), uniform
    without it."""
    k = -(-n // CHUNK)
    starts_n = max(1, pool.size - CHUNK + 1)
    starts = rng.integers(0, starts_n, size=k) if start_p is None else rng.choice(starts_n, size=k, p=start_p)
    return np.minimum((starts[:, None] + np.arange(CHUNK)[None, :]).ravel()[:n], pool.size - 1)


def _table(times: Sequence[np.ndarray]) -> np.ndarray:
    """:func:`server_times` rows of several blocks as one table, the usable ones (finite, a service above 0); rows
    of three columns (no shape) read as all one shape."""
    seqs = []
    for t in times:
        a = np.asarray(t, dtype=float)
        if not a.size:
            continue
        a = a.reshape(len(a), -1)
        seqs.append(a if a.shape[1] >= BUSY_COLUMNS else np.column_stack([a[:, :3], np.zeros(len(a))]))
    table = np.concatenate(seqs)[:, :BUSY_COLUMNS] if seqs else np.zeros((0, BUSY_COLUMNS))
    return table[np.isfinite(table).all(axis=1) & (table[:, 0] > 0)]


def stalled(table: np.ndarray, k: float = SLOW_K) -> np.ndarray:
    """Which rows of a :func:`server_times` table ran slower than ``k`` × the median service of their own shape
    over the table: the host's stalls, as :func:`ortop.measure.noise.slow_share` counts them."""
    out = np.zeros(len(table), dtype=bool)
    for s in np.unique(table[:, 3]):
        mine = table[:, 3] == s
        out[mine] = table[mine, 0] > k * np.median(table[mine, 0])
    return out


def _pools(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`cost_pools` with each pool's rows' :func:`stalled` flags beside it: (queued, after idle, their
    flags)."""
    if len(table) < 50:
        return None
    work, slow = work_ms(table), stalled(table)
    idle = table[:, 2] > 0
    keep_q = ~idle if np.count_nonzero(~idle) >= 10 else np.ones(len(table), dtype=bool)
    keep_i = idle if np.count_nonzero(idle) >= 10 else keep_q
    return work[keep_q], work[keep_i], slow[keep_q], slow[keep_i]


def cost_pools(times: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """What requests cost their server (ms, :func:`work_ms`), from :func:`server_times` rows, in two pools: when
    they were queued (the server busy, warm), and when they found it idle (a wake-up, caches gone cold). A pool
    with under 10 requests borrows the other. None with under 50 requests."""
    pools = _pools(_table(times))
    return None if pools is None else (pools[0], pools[1])


def past_ceiling(cost_ms: float, per_queue_per_s: float, servers: int = 1) -> bool:
    """Whether requests costing ``cost_ms`` each back to back, offered at ``per_queue_per_s`` to a queue of
    ``servers`` callers, add up to more work than the callers have time: a queue that never empties."""
    return per_queue_per_s * cost_ms / 1e3 >= max(1, servers)


def queue_model(times: list[np.ndarray], slo: Slo, rate_per_s: float, servers: int = 1, queues: int = 1,
                seed: int = 0) -> tuple[float, float, float]:
    """The SLO metric of response time at ``rate_per_s`` in the long run, from what a point's requests cost their
    server (:func:`server_times`, per block): (estimate, low, high), the bounds 95 % over replicates; nans with
    under 50 requests.

    Why: a point's own percentile comes from a few seconds of one arrival sequence, and a queue's tail lives in
    its rare long busy periods. At 75 % load a p99 read from 1 000 requests swings by a quarter from one sequence
    to the next, and its requests over the SLO come in clumps, so blocks mostly hold none and a t-interval over
    them is narrow exactly when it should not be. What varies from one sequence to the next is the arrivals;
    what the point has to measure is the server. So the measured service times — service under this load, the
    host's slow spells, resampled in runs of CHUNK to keep them together — are replayed through a simulated FIFO
    queue (``servers`` callers per queue, Poisson arrivals split over ``queues``), each request costing what the
    point's requests in its situation cost: queued (the loop's gap between runs, warm caches) or finding its
    server idle (a wake-up, cold caches: a queue that charged those to every request would read busy periods
    too long), for MODEL_N requests per replicate, each replicate a fresh resample and fresh arrivals: the median is
    the estimate, and the bounds are the replicates' spread (of one replicate, not of their mean: a deliberately
    wide interval, which holds the sampling of the service times and what one replicate's arrivals leave in)."""
    pools = cost_pools(times)
    if pools is None or not rate_per_s > 0:
        return (math.nan, math.nan, math.nan)
    queued, after_idle = pools
    rng = np.random.default_rng(seed)
    servers, queues = max(1, servers), max(1, queues)
    n, reps = (MODEL_N, MODEL_REPS) if servers == 1 else (6000, 8)  # the heap is a Python loop: fewer, shorter
    per_queue = rate_per_s / queues
    if past_ceiling(float(queued.mean()), per_queue, servers):  # no long run
        return (math.inf, math.inf, math.inf)
    vals = np.array([_replicate(queued, after_idle, slo, per_queue, servers, n, rng) for _ in range(reps)])
    lo, mid, hi = np.percentile(vals, (2.5, 50, 97.5))
    return (float(mid), float(lo), float(hi))


def _replicate(queued: np.ndarray, after_idle: np.ndarray, slo: Slo, per_queue: float, servers: int, n: int,
               rng: np.random.Generator, weights: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """One replicate of the queue model: ``n`` requests drawn from the pools in runs, fresh arrivals; the SLO
    metric after the first tenth (the queue's warm-up). ``weights``: the queued pool's run starts' and the idle
    pool's rows' probabilities (:func:`stall_sd`), uniform without them."""
    busy = queued[_runs_of(queued, n, rng, None if weights is None else weights[0])]
    # found idle: the other pool's cost instead
    if weights is None:
        wake = after_idle[rng.integers(0, after_idle.size, n)] - busy
    else:
        wake = after_idle[rng.choice(after_idle.size, size=n, p=weights[1])] - busy
    return float(slo.of(simulate(busy, rng.exponential(1.0, n), per_queue, servers, wake_ms=wake)[n // 10:]))


RESAMPLES = 24          # resamples of a record for the spread of the capacity read from it (capacity_spread)
RESAMPLE_REPS = 3       # ... each judged over this many replicates, the same arrivals for every resample


def capacity_spread(ends: Sequence[tuple[float, Sequence[np.ndarray]]], slo: Slo, servers: int = 1,
                    queues: int = 1, resamples: int = RESAMPLES, seed: int = 0) -> float:
    """The sd of log capacity owed to the record being finite: how far the capacity read between the bracket's two
    rates would move had the search recorded another sample of the same server.

    ``ends``: the bracket's (rate, server times) at its low and high end, each the record the queue model judged
    that rate by. Each resample redraws each end's record from itself in runs of CHUNK (a moving-block bootstrap,
    the same size as the record: the host's slow spells stay together), judges both rates by the queue model with
    the same arrivals for every resample (common random numbers: the synthetic arrivals' own noise, which the
    model's median over replicates averages away, is not counted as the record's), and reads the capacity where
    the metric crosses the SLO, linear in 1 / metric as the knee is read (:func:`ortop.measure.bracket.knee`),
    extended past the bracket when a resample puts the crossing outside it, by one bracket's width at most: a
    record that flips one end's decision moves a search's bracket by a step, and a flat line (a tail set by the
    host's stalls, not by the queue) would otherwise extrapolate without bound. nan with no two ends to read."""
    if len(ends) != 2 or not slo.ms > 0:
        return math.nan
    (lo, lo_times), (hi, hi_times) = ends
    pools = [cost_pools(lo_times), cost_pools(hi_times)]
    if any(p is None for p in pools) or not 0 < lo < hi:
        return math.nan
    servers, queues = max(1, servers), max(1, queues)
    n, reps, resamples = (MODEL_N, RESAMPLE_REPS, resamples) if servers == 1 else (6000, 2, max(8, resamples // 3))
    boot = np.random.default_rng(seed)
    caps = []
    for _ in range(resamples):
        inv = []
        for rate, pool in zip((lo, hi), pools):
            assert pool is not None
            queued, after_idle = (x[_runs_of(x, x.size, boot)] for x in pool)
            if past_ceiling(float(queued.mean()), rate / queues, servers):
                inv.append(0.0)  # no long run: the metric is unbounded
                continue
            same = np.random.default_rng(seed + 1)  # the same arrivals for every resample
            m = float(np.median([_replicate(queued, after_idle, slo, rate / queues, servers, n, same)
                                 for _ in range(reps)]))
            inv.append(1.0 / m if m > 0 else math.inf)
        cap = _crossing(lo, hi, inv, slo)
        if math.isfinite(cap):
            caps.append(math.log(cap))
    return float(np.std(caps, ddof=1)) if len(caps) >= 3 else math.nan


def _crossing(lo: float, hi: float, inv: Sequence[float], slo: Slo) -> float:
    """The rate where the SLO metric crosses the SLO between ``lo`` and ``hi`` (``inv``: 1 / metric at each),
    linear in 1 / metric, at most one bracket's width (in log) outside it; nan where the metric does not climb."""
    falls = inv[0] - inv[1]
    if not (math.isfinite(falls) and falls > 0):
        return math.nan
    cap = lo + (inv[0] - 1.0 / slo.ms) / falls * (hi - lo)
    return min(max(cap, lo * lo / hi), hi * hi / lo)


STALL_REPS = 8          # replicates per end for each share the stall term judges (stall_sd)


def stall_sd(ends: Sequence[tuple[float, Sequence[np.ndarray]]], slo: Slo, rel: float, servers: int = 1,
             queues: int = 1, reps: int = STALL_REPS, seed: int = 0) -> float:
    """How far the capacity read between the bracket's two rates moves when the host's stalls come ``rel`` times
    their share more or less often (sd of log; ``rel`` from :func:`ortop.measure.rerun.stall_movement`): each
    end judged again by the queue model with the runs of its record that hold a stall (:func:`stalled`) drawn
    (1 ± ``rel``) times as often as the others — thinned or thickened, their clumps kept whole — and the same
    arrivals for both (common random numbers: the difference is the stalls'). The term is half the distance
    between the two crossings in log, scaled to ``rel`` where thinning stops at none. 0 when the record holds no
    stall or ``rel`` is 0; nan with no two ends to read or a crossing that cannot be read."""
    if len(ends) != 2 or not slo.ms > 0 or not math.isfinite(rel):
        return math.nan
    (lo, lo_times), (hi, hi_times) = ends
    pools = [_pools(_table(lo_times)), _pools(_table(hi_times))]
    if any(p is None for p in pools) or not 0 < lo < hi:
        return math.nan
    if rel <= 0 or not any(p[2].any() or p[3].any() for p in pools if p is not None):
        return 0.0
    servers, queues = max(1, servers), max(1, queues)
    n = MODEL_N if servers == 1 else 6000
    up, down = 1.0 + rel, max(0.0, 1.0 - rel)
    caps = []
    for factor in (down, up):
        inv = []
        for rate, pool in zip((lo, hi), pools):
            assert pool is not None
            queued, after_idle, q_slow, a_slow = pool
            if past_ceiling(float(queued.mean()), rate / queues, servers):
                inv.append(0.0)
                continue
            weights = (_stall_weights(q_slow, factor, CHUNK), _stall_weights(a_slow, factor, 1))
            same = np.random.default_rng(seed + 1)
            m = float(np.median([_replicate(queued, after_idle, slo, rate / queues, servers, n, same, weights)
                                 for _ in range(reps)]))
            inv.append(1.0 / m if m > 0 else math.inf)
        caps.append(_crossing(lo, hi, inv, slo))
    if not all(math.isfinite(c) and c > 0 for c in caps):
        return math.nan
    return abs(math.log(caps[0]) - math.log(caps[1])) / (up - down) * rel


def _stall_weights(slow: np.ndarray, factor: float, run: int) -> np.ndarray:
    """Probabilities over a pool's draws (run starts of ``run`` rows, or rows with ``run`` = 1) where a draw
    holding a stalled row is ``factor`` times as likely as one without; uniform where nothing stalled or every
    draw holds one."""
    starts = max(1, slow.size - run + 1)
    hits = np.convolve(slow.astype(float), np.ones(run), mode="valid")[:starts] > 0 if slow.size >= run else \
        np.full(starts, bool(slow.any()))
    w = np.where(hits, factor, 1.0)
    total = w.sum()
    return w / total if total > 0 else np.full(starts, 1.0 / starts)
