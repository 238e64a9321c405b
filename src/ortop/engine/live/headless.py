"""The one headless runner: measure a profile for a while, or compare profiles, with no UI and no argparse.

``ortop MODEL --headless``, ``ortop compare`` (and whatever else runs without a screen) call these functions and
only format what they return. Stopping early is a ``threading.Event`` the caller sets (from a signal handler, say):
the runner then finishes with what was measured.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.live.snapshot import Snapshot, summary
from ortop.engine.live.store import CONFIG_RING
from ortop.engine.models import check_profile

if TYPE_CHECKING:
    from ortop.measure.slo import Slo


@dataclass(frozen=True)
class HeadlessResult:
    summary: dict[str, Any]     # the one summary schema (engine.snapshot.summary)
    fatal: str | None           # why the model could not be measured (build or run failure), else None
    measured: bool              # False when it failed before measuring started (nothing on stdout then)
    snapshot: Snapshot
    duration_s: float


def gpu_summary(collector: Any, pid: int | None = None, warnings: list[str] | None = None) -> Any:
    """GPU figures for the summary; None without a GPU (or without a collector).

    ``pid``: the worker to read the GPU memory of, given again at each reading because a restarted worker has a
    new one (the figures would otherwise follow the dead process). Devices NVML could not read are named in
    ``warnings`` when it is given.
    """
    if collector is None:
        return None
    if pid is not None:
        collector.watch(pid)
    sample = collector.sample()
    skipped = tuple(getattr(sample, "skipped", None) or ())
    if warnings is not None and skipped:
        said = f"GPU figures leave out {'; '.join(skipped)}"
        if said not in warnings:
            warnings.append(said)
    if not sample.devices:
        return None
    return [
        {"index": d.index, "name": d.name, "mem_used": d.mem_used, "mem_total": d.mem_total,
         "util_percent": d.util_percent, "worker_mem": d.process_mem}
        for d in sample.devices
    ]


def measure(model_path: str, profile: Profile, *, duration_s: float, strict_providers: bool = False,
            stop: threading.Event | None = None, gpu: Any = None,
            on_monitor: Callable[[Any], None] | None = None, slo: Slo | None = None) -> HeadlessResult:
    """Build ``profile``, forget the warm-up, measure for ``duration_s`` (or until ``stop``), and summarise.

    ``duration_s`` may be ``math.inf``: measure until ``stop`` is set (a canary a service manager stops).
    ``on_monitor`` gets the monitor before it starts, for consumers that read it while it runs (a metrics
    endpoint, a stream). ``slo`` (a :class:`~ortop.engine.answers.capacity.Slo`): the summary's ``slo`` judges the
    measured requests against it (:func:`slo_summary`). Raises ProfileError / ModelError for bad input (before any
    worker starts). A build or run failure is not raised: ``fatal`` says it, and ``measured`` says whether measuring had
    begun.
    """
    from ortop.engine.live.monitor import Monitor

    if not duration_s > 0:  # math.inf is allowed; NaN is not
        raise ValueError(f"duration must be > 0, got {duration_s}")
    stop = stop or threading.Event()
    monitor = Monitor(model_path, profile, strict_providers=strict_providers)
    if on_monitor is not None:
        on_monitor(monitor)
    monitor.start()
    t_start = time.monotonic()
    try:
        while not monitor.wait_ready(0.2):
            if stop.is_set():
                break
        if monitor.fatal:
            snap = monitor.snapshot()
            took = time.monotonic() - t_start
            return HeadlessResult(summary(snap, duration_s=took, gpu=gpu_summary(gpu)), monitor.fatal, False,
                                  snap, took)
        from ortop.measure.arrivals import TRACE, mode_of

        replay = mode_of(profile.workload) == TRACE
        if not replay:  # a trace counts from its first request: nothing it sent is forgotten
            monitor.reset_stats()
        t0 = time.monotonic()
        while (not stop.is_set() and time.monotonic() - t0 < duration_s and not monitor.fatal
               and not (replay and monitor.schedule_ended.is_set())):
            stop.wait(0.05)
        snap = monitor.snapshot()
        # Runs reach the parent in batches every ~250 ms: a window shorter than that can end before its first
        # batch lands. Wait for it (at most a second), and count the wait as measured: its runs are in it.
        late = time.monotonic() + 1.0
        while snap.runs == 0 and not stop.is_set() and not monitor.fatal and time.monotonic() < late:
            stop.wait(0.05)
            snap = monitor.snapshot()
        measured = time.monotonic() - t0
        skipped: list[str] = []
        gpu_info = gpu_summary(gpu, monitor.worker_pid(), skipped)  # the worker now: a restart gives a new pid
        data = summary(snap, duration_s=measured, gpu=gpu_info)
        data["warnings"] += [w for w in skipped if w not in data["warnings"]]
        if snap.restarts:
            keep_runs_across_restarts(data, monitor, snap, measured)
        if slo is not None:
            shed = int((data.get("arrivals") or {}).get("dropped") or 0)
            lat = monitor.config_runs(snap.config_id)
            if snap.latency.runs < lat.size < CONFIG_RING:  # runs that landed after the snapshot: not its figures
                lat = lat[: snap.latency.runs]
            data["slo"] = slo_summary(slo, lat, shed)
    finally:
        monitor.stop()
    return HeadlessResult(data, monitor.fatal, True, snap, measured)


def slo_summary(slo: Slo, response_ms: np.ndarray, shed: int = 0) -> dict[str, Any]:
    """A run judged against a latency objective: the SLO metric over its requests, how many were over the limit
    (a shed request counts as over) and their share, and whether it was met (the metric within the limit and
    nothing shed).

    The share over the limit is a mean, so the shares of several runs pooled by their requests estimate the long
    run's share without bias, where a percentile read from a few seconds is biased low near a queue's knee (its
    tail lives in rare long busy periods): a percentile SLO is met in the long run when the share is under
    1 − q (1 % for p99)."""
    lat = np.asarray(response_ms, dtype=float)
    lat = lat[np.isfinite(lat)]
    value = slo.of(lat)
    over = int(np.count_nonzero(lat > slo.ms)) + int(shed)
    total = int(lat.size) + int(shed)
    share = over / total if total else math.nan
    return {"metric": slo.metric, "ms": slo.ms, "value_ms": None if math.isnan(value) else round(value, 4),
            "requests": total, "over": over, "share_over": None if math.isnan(share) else round(share, 6),
            "met": bool(total and value <= slo.ms and not shed)}


def keep_runs_across_restarts(data: dict[str, Any], monitor: Any, snap: Any, measured_s: float) -> None:
    """After a worker died and was restarted, count the runs of every configuration of the running profile, not
    only those since the restart, and say when and why the worker died (``restarts``).

    A restart rebuilds the last good profile as a new configuration; its runs and the ones measured before the
    fault are the same experiment, so the summary's runs, latency and throughput cover them all.
    """
    from ortop.measure.stats import latency_stats

    same = snap.profile.to_dict(full=True)
    ids = [h.config_id for h in snap.history if h.profile.to_dict(full=True) == same]
    runs = [monitor.config_runs(cid) for cid in ids]
    lat = np.concatenate(runs) if runs else np.zeros(0)
    # the running configuration's count is exact; earlier ones count the runs their ring kept (the newest 50,000)
    data["runs"] = int(snap.runs + sum(r.size for cid, r in zip(ids, runs) if cid != snap.config_id))
    data["latency_ms"] = latency_stats(lat).as_dict()
    data["throughput_per_s"] = round(lat.size / measured_s, 4) if measured_s > 0 else None
    data["restarts"] = {
        "count": snap.restarts,
        "events": [{"t_s": round(e.t, 3), "why": e.text} for e in snap.events if "worker process died" in e.text],
        "configurations": ids,
    }


def compare(model_path: str, profiles: Sequence[Profile], *, budget_s: float, names: Sequence[str] | None = None,
            stop: threading.Event | None = None, decide_on: str | None = None, gates: Sequence[Any] = (),
            **kw: Any):
    """Interleave ``profiles`` for ``budget_s`` seconds and compare each with the first: each on its own model, or
    on ``model_path`` when it names none (see ``engine.bench.ab.compare_profiles``). ``decide_on`` (a metric) or
    ``gates`` end it once a look settles them (``engine.bench.ab.Ending``); ``kw`` goes to the interleaving.

    Returns an ``engine.ab.AbResult``. Raises ProfileError / ModelError for bad input (models whose inputs differ
    included), ``ab.NotEnoughMemory`` when the sessions would not fit, ``ab.AbError`` when a session fails to build
    or run.
    """
    from ortop import model as model_mod
    from ortop.engine.bench import ab

    if len(profiles) < 2:
        raise ValueError("a comparison needs at least two profiles")
    if not (budget_s > 0 and math.isfinite(budget_s)):
        raise ValueError(f"budget must be > 0 seconds, got {budget_s}")
    profiles = [p if p.model else replace(p, model=model_path) for p in profiles]
    info = model_mod.load_model(profiles[0].model)  # every session is fed from the first model's inputs
    for p in profiles:
        check_profile(info, p)
    return ab.compare_profiles(model_path, profiles, budget_s=budget_s, names=names, stop=stop,
                               ending=ab.Ending(decide_on=decide_on, gates=tuple(gates)), **kw)
