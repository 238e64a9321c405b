"""A history row's verdict: what a sequential before/after may say (nothing beyond "unverified"), and what an
interleaved comparison says, on the metric the change is about."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ortop.config.knobs import VERDICT_METRICS
from ortop.config.profile import Profile
from ortop.engine.live.snapshot import Change, RowVerdict, changes_between, workload_difference
from ortop.measure.compare import Comparison
from ortop.present import signed_pct

MIN_VERDICT_RUNS = 20


def primary_metric(before: Profile, after: Profile, changes: Sequence[Change] | None = None) -> str:
    """The metric a change is about, as its knobs declare it (``Knob.verdict``): CPU per run for a spin knob at a
    paced rate, p99 for a knob judged on its tail, else the workload's own (throughput with concurrent callers,
    else p50). When the changed knobs name several, the first of ``VERDICT_METRICS`` wins (CPU, p99, …)."""
    w = after.workload
    named = {c.metric(w.rate_hz, w.concurrency) for c in (changes if changes is not None
                                                           else changes_between(before, after))}
    named.add("throughput" if w.concurrency > 1 else "p50")
    return next(m for m in VERDICT_METRICS if m in named)


def objective_metric(before: Profile, after: Profile) -> str:
    """What a live verification judges when the user named nothing: the metric the change is about
    (:func:`primary_metric`), except that a paced or open-arrival caller's plain latency gives way to CPU per run —
    its latency is mostly set by the rate, what each request costs is not (tune's objective for such a caller)."""
    metric = primary_metric(before, after)
    return "cpu" if metric == "p50" and after.workload.rate_hz > 0 else metric


def verdict_from(comparisons: Sequence[Comparison], metric: str, against: int) -> RowVerdict:
    """A row verdict from an interleaved comparison: the kind comes from ``metric``; all metrics are kept."""
    comparisons = tuple(comparisons)
    main = next((c for c in comparisons if c.metric == metric), None)
    if main is None:
        return RowVerdict("undecided", "undecided", "no blocks were measured", comparisons, metric, against)
    if main.verdict in ("faster", "slower"):
        pct = signed_pct(main.change_pct, 0 if abs(main.change_pct) >= 10 else 1)
        short = {"p50": f"{pct} % {main.verdict}", "p99": f"p99 {pct} % {main.verdict}",
                 "throughput": f"runs/s {pct} %", "cpu": f"CPU/run {pct} %"}[metric]
    elif main.verdict == "no difference":
        short = "no difference"
    else:
        short = "undecided"
    return RowVerdict(main.verdict, short, main.text(), comparisons, metric, against)


def not_comparable(before: Profile, after: Profile, against: int) -> RowVerdict | None:
    """"not comparable" when the two run different workloads (rate, callers, inputs), else None."""
    diff = workload_difference(before, after)
    if not diff:
        return None
    return RowVerdict("not comparable", "not comparable",
                      f"different workload ({', '.join(diff)}) from #{against}: the runs do different work, so their "
                      "figures are not compared", (), "", against)


def sequential_verdict(prev_id: int, before: Profile, before_ms: np.ndarray, after: Profile,
                       after_ms: np.ndarray) -> RowVerdict:
    """What a row measured after the one before it may claim: the p50 change, marked unverified.

    Measured one after the other, drift and effect are mixed (on a shared host drift alone moves figures by
    10–20 %), so this never says "faster" or "slower"; :meth:`Monitor.verify` interleaves the two to decide.
    """
    nc = not_comparable(before, after, prev_id)
    if nc is not None:
        return nc
    if len(before_ms) < MIN_VERDICT_RUNS or len(after_ms) < MIN_VERDICT_RUNS:
        return RowVerdict("measuring", "measuring…", "not enough runs yet", (), "p50", prev_id)
    b50, a50 = float(np.median(before_ms)), float(np.median(after_ms))
    if not (b50 > 0 and math.isfinite(a50)):
        return RowVerdict("unverified", "unverified", "measured one after the other", (), "p50", prev_id)
    change = (a50 - b50) / b50 * 100
    return RowVerdict(
        "unverified", f"{signed_pct(change)} % unverified",
        f"p50 {b50:.3g} → {a50:.3g} ms ({signed_pct(change)} %) measured one after the other: on a shared host "
        f"drift alone moves figures this much, so this is not a verdict — verify to interleave the two",
        (), "p50", prev_id)
