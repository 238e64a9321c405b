"""A Prometheus endpoint over the monitor: a custom collector on a registry of its own, served over HTTP.

Everything but the latency histogram is read from one :class:`~ortop.engine.live.snapshot.Snapshot` per scrape, so an
endpoint nobody scrapes costs nothing. The histogram must count every run, which a snapshot cannot give: a
:class:`HistogramFeed` thread polls the monitor's per-configuration rings through :class:`~ortop.metrics.runs.
RunFeed` about once a second (faster when runs come quickly enough to turn a ring over) and adds the new runs
with one ``numpy.searchsorted``; a scrape brings it up to date first. Nothing is added to the per-run path.

``ortop_host_info`` says which host serves the endpoint and its node type (``--node-type``, else the type the fleet
names from the host's facts: :func:`~ortop.collectors.host.facts_type`), so a Prometheus scraping many hosts can
group them by type with a join, without target labels of its own.

Names and units follow Prometheus conventions (base units, ``_total`` counters, ``_seconds``, ``_bytes``,
``_ratio``). The latency buckets are twenty per decade (the R20 preferred numbers: 1, 1.12, 1.25, 1.4 … 9) from
1 µs to 10 s, 141 bounds: each about 12 % wider than the one before, so ``histogram_quantile``'s linear
interpolation inside a bucket lands within a few percent of the exact percentile for models of a few microseconds
and of seconds alike. Ten per decade (R10) was measured off by 11 % at p99 on a heavy-tailed model, and a first
bound of 10 µs by 11 % at p50 on a 6 µs model.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

from ortop.collectors.gpu import NO_GPU, OK
from ortop.collectors.host import HostFacts, host_type, read_host
from ortop.engine.live.snapshot import Snapshot, State
from ortop.engine.live.store import CONFIG_RING
from ortop.errors import UsageError
from ortop.metrics.runs import Pacer, RunFeed, WorkerRss

__all__ = ["LATENCY_BUCKETS_S", "LatencyHistogram", "HistogramFeed", "OrtopCollector", "MetricsServer",
           "start_metrics_server", "WorkerRss"]

R20 = (1.0, 1.12, 1.25, 1.4, 1.6, 1.8, 2.0, 2.24, 2.5, 2.8, 3.15, 3.55, 4.0, 4.5, 5.0, 5.6, 6.3, 7.1, 8.0, 9.0)


def _buckets(lo_exp: int = -6, hi_exp: int = 1) -> tuple[float, ...]:
    """Upper bounds in seconds: the R20 series in every decade from 10**lo_exp, ending at 10**hi_exp."""
    out = [float(f"{m}e{e}") for e in range(lo_exp, hi_exp) for m in R20]
    return tuple(out) + (float(f"1e{hi_exp}"),)


LATENCY_BUCKETS_S: tuple[float, ...] = _buckets()
FEED_INTERVAL_S = 1.0     # the histogram's poll when runs come slowly


class LatencyHistogram:
    """Cumulative run counts per latency bucket, and their sum. Thread-safe."""

    def __init__(self, bounds_s: Sequence[float] = LATENCY_BUCKETS_S) -> None:
        self.bounds_s = tuple(float(b) for b in bounds_s)
        if list(self.bounds_s) != sorted(set(self.bounds_s)):
            raise ValueError("bucket bounds must be increasing")
        self._bounds_ms = np.asarray(self.bounds_s) * 1e3
        self._counts = np.zeros(len(self.bounds_s) + 1, dtype=np.int64)  # per bucket; the last is +Inf
        self._sum_s = 0.0
        self._lock = threading.Lock()

    def observe(self, latency_ms: np.ndarray) -> None:
        """Count runs (latencies in milliseconds): a run lands in the first bucket whose bound it does not exceed."""
        a = np.asarray(latency_ms, dtype=np.float64)
        if a.size == 0:
            return
        idx = np.searchsorted(self._bounds_ms, a, side="left")
        per = np.bincount(idx, minlength=len(self._counts))
        with self._lock:
            self._counts += per
            self._sum_s += float(a.sum()) / 1e3

    @property
    def count(self) -> int:
        with self._lock:
            return int(self._counts.sum())

    def family(self, name: str = "ortop_latency", doc: str = "") -> HistogramMetricFamily:
        with self._lock:
            cum = np.cumsum(self._counts)
            total = self._sum_s
        buckets = [(floatToGoString(b), float(c)) for b, c in zip(self.bounds_s, cum[:-1])]
        buckets.append(("+Inf", float(cum[-1])))
        return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=total, unit="seconds")


class HistogramFeed:
    """Keeps a :class:`LatencyHistogram` fed with every run from a :class:`RunFeed`, on a thread of its own.

    The poll interval adapts: about once a second, shorter when the runs between two polls would fill a quarter of a
    configuration's ring (CONFIG_RING), so no run is lost on a model of a few microseconds. ``polls`` and ``busy_s``
    (CPU seconds of the threads that polled) say what feeding has cost so far.
    """

    def __init__(self, runs: RunFeed, histogram: LatencyHistogram, *, interval_s: float = FEED_INTERVAL_S,
                 capacity: int = CONFIG_RING) -> None:
        self.runs = runs
        self.histogram = histogram
        self.interval_s = interval_s
        self.capacity = capacity
        self.polls = 0
        self.busy_s = 0.0
        self.failures = 0              # polls that raised: counted and exported, never silently dropped
        self.last_failure = ""
        self._pacer = Pacer(interval_s, capacity)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self) -> int:
        """One poll: add the runs recorded since the last one; returns how many."""
        with self._lock:
            t0 = time.thread_time()
            new = self.runs.poll()
            self.histogram.observe(new)
            self._pacer.found(len(new))
            self.polls += 1
            self.busy_s += time.thread_time() - t0
            return len(new)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True, name="ortop-metrics-feed")
            self._thread.start()

    def failed(self, exc: BaseException) -> None:
        """A poll that raised (a monitor being torn down, say): the next poll or scrape tries again; the failure is
        counted in ``ortop_metrics_feed_failures_total`` with its last message."""
        self.failures += 1
        self.last_failure = f"{type(exc).__name__}: {exc}"

    def _loop(self) -> None:
        while not self._stop.wait(self._pacer.next_s):
            try:
                self.update()
            except Exception as exc:
                self.failed(exc)

    def close(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(5)


def _tri(v: Any) -> str:
    return "default" if v is None else ("on" if v is True else "off" if v is False else str(v))


def _finite(x: float) -> bool:
    return x is not None and math.isfinite(x)


class OrtopCollector:
    """The custom collector: one snapshot per scrape, the histogram from its feed.

    ``monitor`` may come later (:meth:`attach`): the endpoint is bound before any session is built, so a port in use
    is bad input found at once. ``gpu`` is a GpuCollector (NVML) for the worker's GPU memory; ``rss`` maps a pid to
    bytes (injectable for tests); ``profile_name`` is what the run started from, for the info metric. ``node_type``
    names the host's type for ``ortop_host_info``; None: the type its facts make (:meth:`host_labels`).
    """

    def __init__(self, monitor: Any = None, *, histogram: LatencyHistogram | None = None,
                 feed: HistogramFeed | None = None, gpu: Any = None, rss: Any = None,
                 profile_name: str = "default", node_type: str | None = None) -> None:
        self.monitor = monitor
        self.histogram = histogram or (feed.histogram if feed is not None else LatencyHistogram())
        self.feed = feed
        self.gpu = gpu
        self.rss = rss or WorkerRss()
        self.profile_name = profile_name
        self.node_type = node_type
        self._host: dict[str, str] | None = None  # read once: a host's name and facts do not change under a run
        self._facts: HostFacts | None = None
        self._errors = 0
        self._dropped: dict[int, int] = {}  # requests shed, per configuration (a counter never goes down)
        self._lock = threading.Lock()

    def attach(self, monitor: Any, feed: HistogramFeed | None = None) -> None:
        with self._lock:
            self.monitor = monitor
            if feed is not None:
                self.feed = feed
                self.histogram = feed.histogram

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            monitor, feed = self.monitor, self.feed
            if monitor is None:  # the endpoint is up before the session: its counters already read 0
                return iter([self._host_info(), *self._counters(None), self._dropped_family()])
            if feed is not None:
                try:
                    feed.update()
                except Exception as exc:
                    feed.failed(exc)
            return iter(list(self._families(monitor.snapshot())))

    def host_labels(self) -> dict[str, str]:
        """``host`` (the host name, as the fleet's probe reads it) and ``node_type``: the one given, else the type
        the host's facts make, as the fleet names a node that declares none. Read at the first scrape and kept;
        a GPU sample with a device NVML could not read is not kept (the type would miss it, or fall back to the
        CPU's), so the next scrape asks NVML again."""
        if self._host is not None:
            return self._host
        labels = {"host": socket.gethostname(), "node_type": self.node_type or ""}
        keep = True
        if not self.node_type:
            gpus: list[str] = []
            if self.gpu is not None:
                sample = self.gpu.sample()
                keep = sample.status in (OK, NO_GPU)
                gpus = [d.name for d in sample.devices]
            if self._facts is None:
                self._facts = read_host()
            labels["node_type"] = host_type(self._facts, gpus)
        if keep:
            self._host = labels
        return labels

    def _host_info(self) -> Metric:
        return InfoMetricFamily("ortop_host", "The host serving this endpoint and its node type (--node-type or "
                                "ORTOP_NODE_TYPE, else its GPU model, else its CPU model and usable CPUs, as the "
                                "fleet names it); join on instance to group other series by type.",
                                value=self.host_labels())

    def _families(self, s: Snapshot) -> Iterable[Metric]:
        yield self._host_info()
        yield from self._counters(s)
        yield from self._gauges(s)
        yield from self._traffic(s)
        yield self._info(s)
        state = GaugeMetricFamily("ortop_state", "1 for the monitor's current state, 0 for the others.",
                                  labels=["state"])
        for st in State:
            state.add_metric([st.value], 1.0 if str(s.state) == st.value else 0.0)
        yield state

    def _counters(self, s: Snapshot | None) -> Iterable[Metric]:
        """The latency histogram and the counters, all 0 before there is a snapshot (``s`` None): Prometheus'
        advice for a metric known to exist, so that a scrape, ``rate()`` or an alert finds it from the start."""
        h = self.histogram
        yield h.family("ortop_latency", "Response time of every request of the live configuration, seconds: from "
                       "its scheduled arrival with open arrivals (queue + Run()), the Run() call in a closed loop.")
        yield CounterMetricFamily("ortop_runs", "Runs of the live configurations since ortop started "
                                  "(the latency histogram's count).", value=h.count)
        if s is not None:
            errors = sum(e.count for e in s.events if e.level == "error")
            self._errors = max(self._errors, errors)  # old events are trimmed from the list; a counter never goes down
        yield CounterMetricFamily("ortop_errors", "Errors reported: failed runs and builds, worker deaths, ORT "
                                  "errors (repeats counted).", value=self._errors)
        yield CounterMetricFamily("ortop_rebuilds", "Configurations applied after the first (rebuilds and "
                                  "restarts for environment knobs).",
                                  value=max(0, len(s.history) - 1) if s is not None else 0)
        yield CounterMetricFamily("ortop_worker_restarts", "Worker processes restarted after dying.",
                                  value=s.restarts if s is not None else 0)
        if self.feed is not None:
            yield CounterMetricFamily("ortop_metrics_feed_failures", "Polls of the latency feed that failed (the "
                                      "next one tries again); non-zero means the histogram may lag.",
                                      value=self.feed.failures)
            yield CounterMetricFamily("ortop_metrics_feed_unread_runs", "Runs that went by before the latency feed "
                                      "could read them (a host busier than its cores, a model of a few "
                                      "microseconds): counted in ortop_runs_total, not in the latency histogram.",
                                      value=self.feed.runs.unread)

    def _dropped_family(self) -> Metric:
        return CounterMetricFamily("ortop_requests_dropped", "Requests shed on a full queue (open arrivals), over "
                                   "every configuration since ortop started.", value=sum(self._dropped.values()))

    def _gauges(self, s: Snapshot) -> Iterable[Metric]:
        def gauge(name: str, doc: str, value: float | None, unit: str = "") -> Metric | None:
            if value is None or not _finite(value):
                return None
            return GaugeMetricFamily(name, doc, value=value, unit=unit)

        cpu = s.cpu
        found = [
            gauge("ortop_config_id", "The live configuration's id; it moves at every rebuild.", s.config_id),
            gauge("ortop_throughput_per_second", "Runs per second of the live configuration since it was built.",
                  s.throughput_per_s),
            gauge("ortop_cpu_per_run_seconds", "Worker CPU time per run of the live configuration.",
                  cpu.cpu_ms_per_run / 1e3 if _finite(cpu.cpu_ms_per_run) else None, "seconds"),
            gauge("ortop_cpu_between_runs_ratio", "Worker CPU seconds burned between runs per second (thread-pool "
                  "spinning; 1 = one core).", cpu.cpu_ms_between_runs_per_s / 1e3
                  if _finite(cpu.cpu_ms_between_runs_per_s) else None, "ratio"),
            gauge("ortop_worker_cpu_ratio", "Worker CPU seconds per second (1 = one core).",
                  cpu.process_cpu_percent / 100 if _finite(cpu.process_cpu_percent) else None, "ratio"),
            gauge("ortop_worker_resident_memory_bytes", "Worker process resident memory.",
                  self.rss(s.worker_pid), "bytes"),
        ]
        yield from (g for g in found if g is not None)
        gpu_mem = self._gpu(s.worker_pid)
        if gpu_mem:
            fam = GaugeMetricFamily("ortop_worker_gpu_memory_bytes", "GPU memory used by the worker process.",
                                    labels=["gpu", "gpu_name"], unit="bytes")
            for index, name, used in gpu_mem:
                fam.add_metric([str(index), name], float(used))
            yield fam

    def _traffic(self, s: Snapshot) -> Iterable[Metric]:
        """Open arrivals: the offered rate, requests shed (a counter over every configuration), and the response
        split into queue and service (p50, p99)."""
        t = s.traffic
        if t is not None and s.config_id >= 0:
            self._dropped[s.config_id] = max(self._dropped.get(s.config_id, 0), t.dropped)
        yield self._dropped_family()
        if t is None or not t.open:
            return
        if _finite(t.offered_per_s):
            yield GaugeMetricFamily("ortop_offered_rate_per_second", "Requests per second offered to the live "
                                    "configuration (open arrivals).", value=t.offered_per_s)
        for name, st, doc in (("ortop_queue_wait_seconds", t.queue, "Time requests waited in the queue"),
                              ("ortop_service_seconds", t.service, "Time inside Run()")):
            fam = GaugeMetricFamily(name, f"{doc} (live configuration), by quantile.", labels=["quantile"],
                                    unit="seconds")
            for q, v in (("0.5", st.p50), ("0.99", st.p99)):
                if _finite(v):
                    fam.add_metric([q], v / 1e3)
            yield fam

    def _gpu(self, pid: int | None) -> list[tuple[int, str, int]]:
        if self.gpu is None or pid is None:
            return []
        self.gpu.watch(pid)
        sample = self.gpu.sample()
        return [(d.index, d.name, d.process_mem) for d in sample.devices if d.process_mem is not None]

    def _info(self, s: Snapshot) -> Metric:
        p = s.profile
        provider = (s.providers_active or s.providers_requested or ("",))[0]
        fam = InfoMetricFamily("ortop_config", "The live configuration: its id and main knobs (a new id at every "
                               "rebuild).", labels=["config_id"])
        label = next((h.label for h in s.history if h.config_id == s.config_id), "start")
        fam.add_metric([str(s.config_id)], {
            "model": s.model_path,
            "profile": self.profile_name,
            "label": label,
            "provider": provider,
            "intra_op_threads": str(p.session.intra_op_num_threads),
            "inter_op_threads": str(p.session.inter_op_num_threads),
            "spinning": _tri(p.session.allow_spinning),
            "execution_mode": str(p.session.execution_mode),
            "concurrency": str(p.workload.concurrency),
            "rate_hz": floatToGoString(p.workload.rate_hz),
        })
        return fam


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/metrics" if ":" in host else f"http://{host}:{port}/metrics"


class MetricsServer:
    """A running endpoint: its registry, collector and HTTP server. :meth:`attach` a monitor, :meth:`close` at the
    end (idempotent)."""

    def __init__(self, registry: CollectorRegistry, collector: OrtopCollector, httpd: Any, thread: threading.Thread):
        self.registry = registry
        self.collector = collector
        self.feed: HistogramFeed | None = None
        self._httpd = httpd
        self._thread = thread
        self._closed = False
        host, port = httpd.server_address[:2]
        self.host, self.port = str(host), int(port)
        self.url = _url(self.host, self.port)

    def attach(self, monitor: Any) -> None:
        """Serve ``monitor``'s figures from now on and start feeding the histogram from its runs."""
        if self.feed is not None:
            self.feed.close()
        self.feed = HistogramFeed(RunFeed(monitor), self.collector.histogram)
        self.collector.attach(monitor, self.feed)
        self.feed.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.feed is not None:
            self.feed.close()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        if self.collector.gpu is not None:
            self.collector.gpu.close()


def start_metrics_server(monitor: Any = None, addr: str = "127.0.0.1", port: int = 0, *,
                         profile_name: str = "default", gpu: Any = None, node_type: str | None = None,
                         registry: CollectorRegistry | None = None) -> MetricsServer:
    """Bind ``addr:port`` (0: any free port; ``.port`` says which) and serve ``/metrics`` on a daemon thread.

    ``monitor`` may be attached later with :meth:`MetricsServer.attach`; until then the endpoint answers with the
    host, the process metrics and the counters (at 0). ``gpu`` defaults to NVML (started on the first scrape; absent
    GPUs report nothing). ``node_type`` labels ``ortop_host_info``; None: the type the host's facts make.

    Raises:
        UsageError: the port is out of range, in use or not allowed, or the address cannot be bound.
    """
    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be 0…65535, got {port}")
    if gpu is None:
        from ortop.collectors.gpu import make_gpu_collector

        gpu = make_gpu_collector()
    registry = registry or CollectorRegistry()
    collector = OrtopCollector(gpu=gpu, profile_name=profile_name, node_type=node_type)
    registry.register(collector)
    ProcessCollector(namespace="ortop", registry=registry)
    try:
        httpd, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        gpu.close()
        why = (exc.strerror or str(exc) or type(exc).__name__).lower()
        where = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        raise UsageError(f"--metrics-port: cannot listen on {where}: {why}") from None
    server = MetricsServer(registry, collector, httpd, thread)
    if monitor is not None:
        server.attach(monitor)
    return server
