"""Every metric family the Prometheus endpoint can export, read from the collector itself.

A family that depends on a figure (traffic only with open arrivals, GPU memory only on an NVIDIA GPU, the feed's
failures only with a feed) is left out of a scrape until that figure exists. :func:`families` builds the endpoint's
own collectors on a snapshot where every figure exists, so the names, types, units, labels and help texts it
returns are the exported ones, and the reference page and the dashboard's checks are read from them.
"""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from ortop.collectors.gpu import FakeGpuCollector
from ortop.config.profile import Profile
from ortop.engine import traffic as T
from ortop.engine.live.snapshot import CpuCost, Snapshot
from ortop.measure.stats import LatencyStats
from ortop.metrics.prometheus import HistogramFeed, LatencyHistogram, OrtopCollector
from ortop.metrics.runs import RunFeed

NAMESPACE = "ortop"
# Sample-name suffixes Prometheus adds to a family's name (a histogram's buckets, a counter's total, ...).
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_info")


class _Everything:
    """A monitor whose one snapshot holds every figure: a live configuration, open arrivals, a worker."""

    generation = 0

    def __init__(self) -> None:
        n = 8
        rows = np.zeros((n, 8), dtype=np.int64)
        rows[:, 0] = np.arange(n) * 1_000_000
        rows[:, 1] = 2_000_000
        rows[:, 5] = 1_000_000
        traffic = T.figures("poisson", 100.0, T.ring_rows(rows, np.arange(n) / 1e3),
                            T.Counters(arrived=n + 1, dropped=1), wall_s=1.0, runs=n)
        lat = LatencyStats(runs=n, mean=3.0, p50=3.0, p90=3.0, p95=3.0, p99=3.0, p999=3.0, min=3.0, max=3.0)
        self._snapshot = Snapshot(
            t=1.0, state="measuring", state_elapsed=1.0, model_path="model.onnx", model=None, profile=Profile(),
            pending=None, config_id=0, runs=n, feeds=(), notes=(), providers_requested=("CPUExecutionProvider",),
            providers_active=("CPUExecutionProvider",), fallback=False, create_ms=1.0, first_run_ms=1.0,
            latency=lat, window=lat, throughput_per_s=float(n), cpu=CpuCost(1.0, 1.0, 50.0, 30.0), series=(),
            events=(), history=(), worker_pid=4242, restarts=0, traffic=traffic)

    def snapshot(self) -> Snapshot:
        return self._snapshot

    def config_runs(self, config_id: int) -> np.ndarray:
        return np.full(8, 3.0)


def families() -> list[Metric]:
    """Every family the endpoint can export, by name: ortop's own and the process collector's (``ortop_process_*``,
    the ortop process itself, present where /proc is)."""
    monitor = _Everything()
    histogram = LatencyHistogram()
    feed = HistogramFeed(RunFeed(monitor), histogram)
    registry = CollectorRegistry()
    registry.register(OrtopCollector(monitor, feed=feed, gpu=FakeGpuCollector(), rss=lambda pid: 1))
    ProcessCollector(namespace=NAMESPACE, registry=registry)
    found = {f.name: f for f in registry.collect()}
    return [found[name] for name in sorted(found)]


def exported_names(fams: list[Metric] | None = None) -> set[str]:
    """Every name a scrape can show: the families' names, their sample names (``ortop_runs_total``,
    ``ortop_latency_seconds_bucket``) and a histogram's ``_bucket``, ``_sum``, ``_count``."""
    names: set[str] = set()
    for f in families() if fams is None else fams:
        names.add(f.name)
        names.update(s.name for s in f.samples)
        if f.type == "histogram":
            names.update(f.name + s for s in ("_bucket", "_sum", "_count"))
        if f.type == "counter":
            names.add(f.name + "_total")
        if f.type == "info":
            names.add(f.name + "_info")
    return names


def is_exported(name: str, names: set[str]) -> bool:
    """``name`` as a document may write it: exported as it is, a family whose samples carry a Prometheus suffix, or
    a prefix ending in ``_`` that some exported name starts with (``ortop_process_``)."""
    if name in names:
        return True
    if name.endswith("_"):
        return any(n.startswith(name) for n in names)
    return any(name.endswith(s) and name[: -len(s)] in names for s in SUFFIXES)
