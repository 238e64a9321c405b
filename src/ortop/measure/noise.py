"""How much of a tail the host makes on its own: the share of runs its stalls slow down, and when that share is
large enough that a percentile SLO measures the host rather than the model.

The host's own figures (:mod:`ortop.collectors.noise`)
    ``steal_pct``: CPU time the hypervisor gave to other guests while this one wanted it, as a share of all CPU
    time over the measurement (``/proc/stat``). ``cpu_pressure_pct``: the share of wall time in which at least one
    runnable task waited for a CPU (``/proc/pressure/cpu``, "some"). Both say the host was contended; neither says
    how many requests it pushed over a bound, which is what a percentile SLO is about.

The runs' own figure (:func:`slow_share`)
    A stall (a preempted vCPU, a page-fault storm, a neighbour's burst) stretches the run it lands in far beyond
    what the model needs: a run slower than ``k`` times the median service time is a stalled one, not a slow
    model. Two choices keep that honest:

    * Service time, not response time: queueing behind a slow run is the stall's consequence, and counting the
      requests queued behind it would count one stall many times over (:mod:`ortop.measure.certify` counts those
      clumps for the certification).
    * Each run against the median of its *own* shape: a mix of a small and a large input (a 10× difference in
      service) puts the large shape's every run over 3× the overall median, and would read as a host stalling a
      third of the time. Against its own shape's median, a run is slow only if its shape usually runs much faster.

    ``k = 3`` (``SLOW_K``): on this kind of shared VM the same loop run twice back to back moved its p50 by up
    to 1.38× (the host's slow drift, which moves every run alike), so a bound at 1.5× or 2× would count drift as
    stalls; 3× is beyond that drift and well within a stall's reach: a 1 ms run that loses its core for a
    scheduler slice of a few milliseconds takes 4–5 ms. A larger ``k`` counts fewer, longer stalls; the verdict
    names the ``k`` it used.

A busy host (:func:`busy_verdict`)
    Stalls are not the only way a host moves an answer: work beside the measurement that keeps its cores busy
    (another process, a build, a second measurement) slows every run a little rather than a few runs a lot, and
    shows as CPU pressure or steal rather than as stalled runs. When some task waited for a CPU a fifth of the time
    or more (``BUSY_PRESSURE_PCT``), or the hypervisor took 5 % of the CPU time (``BUSY_STEAL_PCT``), the runs shared
    their cores often enough to move a capacity or a percentile by several percent, and a rerun on a quiet host may
    differ by as much: the verdict names the host as busy, with its figures.

When it matters (:func:`stall_verdict`)
    A p99 SLO tolerates ``1 − p`` = 1 % of requests over its bound. If stalls alone put a share of runs far out
    of line comparable to that (at least half of it: ``0.5 · (1 − p)``, 0.5 % for p99), then whether the bound
    holds is decided by how often the host stalls during the run, not by the model or its settings: a second run
    on the same host can pass or fail by chance, and a tuning comparison at p99 is measuring the neighbours. The
    verdict says so in one sentence; below that share it says nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ortop.measure.stats import json_num as _num

SLOW_K = 3.0          # a run slower than this × its shape's median service counts as stalled
BUSY_PRESSURE_PCT = 20.0  # CPU pressure ("some") at or over this: the measurement shared its cores (docstring)
BUSY_STEAL_PCT = 5.0      # hypervisor steal at or over this, likewise
COMPARABLE = 0.5      # a slow share ≥ this × (1 − p) puts a p SLO within the host's noise


def percentile_label(p: float) -> str:
    """0.99 → ``p99``, 0.999 → ``p99.9``, 0.9 → ``p90``."""
    return f"p{round(p * 100, 6):g}"


def _share_text(share: float) -> str:
    pct = share * 100
    return f"{pct:.0f}" if pct >= 10 else f"{pct:.1f}" if pct >= 0.1 else f"{pct:.2g}"


def slow_share(service_ms: Sequence[float] | np.ndarray, shape_ids: Sequence[object] | np.ndarray | None = None,
               k: float = SLOW_K) -> float | None:
    """The share of runs slower than ``k`` × the median service time of their own shape (``shape_ids`` one per
    run; None: all one shape). None when there are no runs."""
    s = np.asarray(service_ms, dtype=float)
    if s.size == 0:
        return None
    if not k > 1:
        raise ValueError(f"k must be above 1 (a run k times its shape's median); got {k!r}")
    ids = np.zeros(s.size, dtype=np.int64) if shape_ids is None else np.asarray(shape_ids)
    if ids.shape != s.shape:
        raise ValueError(f"one shape id per run: {ids.size} ids for {s.size} runs")
    _, group = np.unique(ids, return_inverse=True)
    group = group.reshape(-1)
    medians = np.array([np.median(s[group == g]) for g in range(int(group.max()) + 1)])
    return float(np.count_nonzero(s > k * medians[group]) / s.size)


# Where the stalls reach the SLO's percentile, the capacity follows their share, and that share moves from one run
# to the next (0.2–1.6 % over four minutes of searches of one profile on one 2-core VM, the capacity 309/s at the
# lowest and 135/s at the highest). The interval's stall term counts the movement this search and the profile's
# earlier searches here saw (ortop.measure.rerun, term (d)); a first search, or a host that moves more than they
# did, can still put a rerun outside it. Said by the table, the live view's capacity screen and the report.
STALLS_MOVE = ("the stalls' share moves between runs, and the capacity with it: the interval counts how far this "
               "search and the profile's earlier searches here saw it move (a first search has only its own "
               "reading), and a rerun can land outside the interval where the host moves more. An SLO further "
               "above the stalls is decided by the queue")


def stall_verdict(share: float | None, percentile: float, k: float = SLOW_K) -> str | None:
    """A sentence when the host's stalls alone put a share of runs comparable to ``1 − percentile`` (at least half
    of it) over ``k`` × their shape's median; else None."""
    if not 0 < percentile < 1:
        raise ValueError(f"percentile must be a fraction in (0, 1), e.g. 0.99 for p99; got {percentile!r}")
    bar = COMPARABLE * (1 - percentile) * (1 - 1e-9)  # 1 − 0.99 is 0.010000000000000009: half of it must reach
    if share is None or not math.isfinite(share) or share < bar:
        return None
    return (f"the host's stalls alone put {_share_text(share)} % of runs over {k:g}\u00d7 their shape's median: "
            f"a {percentile_label(percentile)} SLO sits within the host's noise")


def busy_verdict(steal_pct: float | None, cpu_pressure_pct: float | None) -> str | None:
    """A sentence when the host was busy enough beside the measurement to move its answer; else None."""
    said = []
    if cpu_pressure_pct is not None and cpu_pressure_pct >= BUSY_PRESSURE_PCT:
        said.append(f"some task waited for a CPU {cpu_pressure_pct:.0f} % of the time")
    if steal_pct is not None and steal_pct >= BUSY_STEAL_PCT:
        said.append(f"the hypervisor took {steal_pct:.0f} % of the CPU time")
    if not said:
        return None
    return (f"a busy host: {' and '.join(said)}; other work shared its cores, and a rerun on a quiet host may read "
            "several percent apart")


@dataclass(frozen=True)
class HostNoise:
    """The host's own noise over one measurement; None where it could not be read or was not judged."""

    steal_pct: float | None = None          # hypervisor steal, % of all CPU time in the window
    cpu_pressure_pct: float | None = None   # % of wall time some task waited for a CPU (PSI "some")
    slow_share: float | None = None         # share of runs over slow_k × their shape's median service
    slow_k: float = SLOW_K
    verdict: str | None = None              # stall_verdict's sentence, when the stalls reach the percentile
    stalls_reach: bool = False              # the stalls alone reach the SLO's percentile (stall_verdict said so)

    def judged(self, service_ms: Sequence[float] | np.ndarray, shape_ids: Sequence[object] | np.ndarray | None,
               percentile: float, k: float = SLOW_K) -> HostNoise:
        """This reading with the runs' slow share and the verdict for a ``percentile`` SLO added."""
        share = slow_share(service_ms, shape_ids, k)
        stalls = stall_verdict(share, percentile, k)
        said = [v for v in (stalls, busy_verdict(self.steal_pct, self.cpu_pressure_pct)) if v]
        return replace(self, slow_share=share, slow_k=k, verdict="; ".join(said) or None, stalls_reach=bool(stalls))

    def as_dict(self) -> dict:
        """JSON-ready."""
        return {"steal_pct": _num(self.steal_pct, 3), "cpu_pressure_pct": _num(self.cpu_pressure_pct, 3),
                "slow_share": _num(self.slow_share, 6), "slow_k": self.slow_k, "verdict": self.verdict,
                "stalls_reach_slo": self.stalls_reach}
