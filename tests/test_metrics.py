"""The metrics room: the Prometheus endpoint's families (names, types, units) read back with prometheus_client's own
parsers, the histogram and the run feed against direct counts on synthetic runs, the JSON-lines stream, and, as
integration tests, a real headless ortop scraped over HTTP, streamed, stopped with SIGTERM and refused a busy port.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from ortop.collectors.gpu import FakeGpuCollector, GiB, GpuSample
from ortop.collectors.host import facts_type, read_host
from ortop.errors import UsageError
from ortop.measure.stats import Ring
from ortop.metrics import runs as runs_mod
from ortop.metrics.jsonl import JsonlWriter, interval_line, open_jsonl
from ortop.metrics.prometheus import (
    LATENCY_BUCKETS_S,
    HistogramFeed,
    LatencyHistogram,
    OrtopCollector,
    start_metrics_server,
)
from ortop.metrics.runs import RunFeed, new_runs, poll_interval
from tests.fakes.monitor import FakeMonitor
from tests.models import make_matmul_model

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

RSS = 123_456_789


# ---- synthetic sources ------------------------------------------------------------------------------------------
class SyntheticRuns:
    """The part of the Monitor a RunFeed reads, over real Rings: ``snapshot().config_id``, ``config_runs`` and
    ``generation``. ``add`` records runs of the live configuration; ``rebuild`` makes a new one live."""

    def __init__(self, capacity: int = 1000, seed: int = 0) -> None:
        self.capacity = capacity
        self.rings: dict[int, Ring] = {}
        self.live = -1
        self.generation = 0
        self.snapshots = 0
        self.rng = np.random.default_rng(seed)
        self.all: list[np.ndarray] = []
        self.counts: dict[int, int] = {}
        self.tally = True  # False: a source that keeps no count (config_runs alone)

    def rebuild(self) -> int:
        self.live += 1
        self.rings[self.live] = Ring(self.capacity, 1)
        self.counts[self.live] = 0
        self.generation += 1
        return self.live

    def add(self, n: int, config_id: int | None = None) -> np.ndarray:
        lat = self.rng.integers(200_000, 5_000_000, n) / 1e6  # whole nanoseconds, in ms, as the monitor keeps them
        cid = self.live if config_id is None else config_id
        self.rings[cid].extend(lat[:, None])
        self.counts[cid] += n
        self.all.append(lat)
        return lat

    def reset(self) -> None:
        self.rings[self.live].clear()
        self.counts[self.live] = 0
        self.generation += 1

    def snapshot(self) -> Any:
        self.snapshots += 1
        return type("Snap", (), {"config_id": self.live})()

    def config_runs(self, config_id: int) -> np.ndarray:
        r = self.rings.get(config_id)
        return r.view()[:, 0] if r is not None else np.zeros(0)

    def __getattr__(self, name: str) -> Any:
        if name == "config_tally" and self.__dict__.get("tally"):
            return lambda cid: (self.config_runs(cid), self.counts.get(cid, 0))
        raise AttributeError(name)


class FedMonitor(FakeMonitor):
    """FakeMonitor's seeded snapshots, with synthetic runs behind config_runs and a ready first session."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.runs = SyntheticRuns()
        while self.runs.live < self.history[-1].config_id:
            self.runs.rebuild()
        self.generation = 0

    def config_runs(self, config_id: int) -> np.ndarray:
        return self.runs.config_runs(config_id)

    def __getattr__(self, name: str) -> Any:
        if name == "config_tally" and "runs" in self.__dict__:
            return getattr(self.runs, name)
        raise AttributeError(name)

    def wait_ready(self, timeout: float | None = None) -> bool:
        return True


def _scrape_families(registry: CollectorRegistry) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}


def _collector(**kw: Any) -> tuple[CollectorRegistry, OrtopCollector]:
    kw.setdefault("gpu", FakeGpuCollector())
    kw.setdefault("rss", lambda pid: RSS)
    registry = CollectorRegistry()
    collector = OrtopCollector(FakeMonitor(), profile_name="fast", **kw)
    registry.register(collector)
    return registry, collector


# ---- buckets and the histogram ---------------------------------------------------------------------------------
def test_buckets_are_twenty_per_decade_from_1us_to_10s():
    b = np.asarray(LATENCY_BUCKETS_S)
    assert b[0] == 1e-6 and b[-1] == 10.0
    assert len(b) == 141
    ratios = b[1:] / b[:-1]
    assert ratios.min() > 1.1 and ratios.max() < 1.15  # no bucket wider than ~15 %: quantiles within a few percent
    assert {1e-4, 1e-3, 2.5e-3, 0.1, 1.0} <= set(LATENCY_BUCKETS_S)  # exact decimal bounds, no 0.0010000000000002


def test_histogram_matches_a_direct_count_with_le_semantics():
    rng = np.random.default_rng(1)
    lat_ms = np.concatenate([rng.lognormal(0.0, 1.5, 20_000), [1.0, 2.5, 1e-3, 20_000.0]])  # bounds and beyond
    h = LatencyHistogram()
    for part in np.array_split(lat_ms, 7):
        h.observe(part)
    fam = h.family(doc="latency")
    buckets = {s.labels["le"]: s.value for s in fam.samples if s.name.endswith("_bucket")}
    for bound in LATENCY_BUCKETS_S:
        le = next(k for k in buckets if k != "+Inf" and float(k) == bound)
        assert buckets[le] == np.count_nonzero(lat_ms <= bound * 1e3), bound
    assert buckets["+Inf"] == len(lat_ms) == h.count
    total = next(s.value for s in fam.samples if s.name.endswith("_sum"))
    assert total == pytest.approx(lat_ms.sum() / 1e3)


def test_histogram_refuses_unsorted_bounds():
    with pytest.raises(ValueError):
        LatencyHistogram([0.1, 0.01])


# ---- the collector's families ------------------------------------------------------------------------------------
EXPECTED = {  # family name as the text parser reports it -> type
    "ortop_latency_seconds": "histogram",
    "ortop_runs": "counter",
    "ortop_errors": "counter",
    "ortop_rebuilds": "counter",
    "ortop_worker_restarts": "counter",
    "ortop_config_id": "gauge",
    "ortop_throughput_per_second": "gauge",
    "ortop_cpu_per_run_seconds": "gauge",
    "ortop_cpu_between_runs_ratio": "gauge",
    "ortop_worker_cpu_ratio": "gauge",
    "ortop_worker_resident_memory_bytes": "gauge",
    "ortop_worker_gpu_memory_bytes": "gauge",
    "ortop_config": "info",
    "ortop_host": "info",
    "ortop_state": "gauge",
}


def test_families_names_types_and_values_from_a_snapshot():
    registry, collector = _collector()
    runs = np.random.default_rng(2).lognormal(0.5, 0.4, 5000)
    collector.histogram.observe(runs)
    fams = _scrape_families(registry)
    assert {n: fams[n].type for n in EXPECTED if n in fams and fams[n].type != "unknown"} == {
        n: t for n, t in EXPECTED.items() if t != "info"}
    # The text format has no info type: the info metric is a gauge named ..._info, value 1.
    info = fams["ortop_config_info"]
    assert info.type == "gauge"
    (s,) = info.samples
    snap = FakeMonitor().snapshot()
    assert s.value == 1
    assert s.labels == {"config_id": "2", "model": snap.model_path, "profile": "fast", "label": snap.history[-1].label,
                        "provider": "CPUExecutionProvider", "intra_op_threads": "2", "inter_op_threads": "0",
                        "spinning": "off", "execution_mode": "sequential", "concurrency": "1", "rate_hz": "100.0"}

    def value(name: str, sample: str | None = None, **labels: str) -> float:
        return next(x.value for x in fams[name].samples
                    if x.name == (sample or name) and all(x.labels.get(k) == v for k, v in labels.items()))

    assert value("ortop_runs", "ortop_runs_total") == 5000
    assert value("ortop_latency_seconds", "ortop_latency_seconds_count") == 5000
    assert value("ortop_latency_seconds", "ortop_latency_seconds_sum") == pytest.approx(runs.sum() / 1e3)
    assert value("ortop_errors", "ortop_errors_total") == 1        # the fake's one error event
    assert value("ortop_rebuilds", "ortop_rebuilds_total") == 2    # three configurations
    assert value("ortop_worker_restarts", "ortop_worker_restarts_total") == 0
    assert value("ortop_config_id") == 2
    assert value("ortop_throughput_per_second") == pytest.approx(snap.throughput_per_s)
    assert value("ortop_cpu_per_run_seconds") == pytest.approx(2.9e-3)
    assert value("ortop_cpu_between_runs_ratio") == pytest.approx(0.021)
    assert value("ortop_worker_cpu_ratio") == pytest.approx(0.29)
    assert value("ortop_worker_resident_memory_bytes") == RSS
    assert value("ortop_worker_gpu_memory_bytes", gpu="0", gpu_name="NVIDIA H100 80GB HBM3") == 3 * GiB
    assert value("ortop_state", state="measuring") == 1
    assert sum(x.value for x in fams["ortop_state"].samples) == 1


def test_units_in_openmetrics():
    registry, collector = _collector()
    collector.histogram.observe(np.array([0.5, 1.5]))
    fams = {f.name: f for f in parse_openmetrics(generate_openmetrics(registry).decode())}
    assert fams["ortop_latency_seconds"].unit == "seconds"
    assert fams["ortop_cpu_per_run_seconds"].unit == "seconds"
    assert fams["ortop_worker_resident_memory_bytes"].unit == "bytes"
    assert fams["ortop_worker_gpu_memory_bytes"].unit == "bytes"
    assert fams["ortop_cpu_between_runs_ratio"].unit == "ratio"
    assert fams["ortop_config"].type == "info"
    for name, typ in EXPECTED.items():
        assert fams[name].type == typ, name
    # Prometheus conventions: counters end in _total, base units only, no milliseconds anywhere.
    text = generate_latest(registry).decode()
    assert not re.search(r"^ortop_\w*(_ms|milli)\w*", text, re.M)
    for f in text_string_to_metric_families(text):
        if f.type == "counter":
            assert all(s.name.endswith("_total") for s in f.samples), f.name


def test_no_gpu_no_worker_no_figures_are_left_out_not_zero():
    registry, _ = _collector(gpu=FakeGpuCollector(no_gpu=True), rss=lambda pid: None)
    fams = _scrape_families(registry)
    assert "ortop_worker_gpu_memory_bytes" not in fams
    assert "ortop_worker_resident_memory_bytes" not in fams
    fm = FakeMonitor(n_configs=0, state="building")
    reg = CollectorRegistry()
    reg.register(OrtopCollector(fm, gpu=FakeGpuCollector(no_gpu=True), rss=lambda pid: None))
    fams = _scrape_families(reg)
    assert "ortop_throughput_per_second" not in fams and "ortop_cpu_per_run_seconds" not in fams  # NaN: absent
    assert next(s.value for s in fams["ortop_runs"].samples) == 0


def test_errors_counter_never_goes_down_when_old_events_are_trimmed():
    registry, collector = _collector()
    fm = collector.monitor
    fm.add_event("error", "Run() failed in configuration #7: boom")
    assert next(s.value for s in _scrape_families(registry)["ortop_errors"].samples) == 2
    fm.events = [e for e in fm.events if e.level != "error"]
    assert next(s.value for s in _scrape_families(registry)["ortop_errors"].samples) == 2


def test_contrib_dashboard_and_readme_name_only_metrics_that_exist():
    from pathlib import Path

    from ortop.metrics.families import exported_names

    root = Path(__file__).resolve().parents[1] / "contrib"
    registry, collector = _collector()
    collector.histogram.observe(np.array([1.0]))
    exposed = exported_names()  # every family, those of open arrivals included (the dashboard graphs them)
    dash = json.loads((root / "grafana-ortop.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in dash["annotations"]["list"] if "expr" in a]
    named = {n for e in exprs for n in re.findall(r"\bortop_\w+", e)}
    assert named and named <= exposed, named - exposed
    documented = set(re.findall(r"`(ortop_\w+?)`", (root / "README.md").read_text())) - {"ortop_process_"}
    families = {f.name for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert documented <= exposed | families, documented - exposed - families
    assert {f"{n}_info" if t == "info" else n for n, t in EXPECTED.items()} <= {d.removesuffix("_total")
                                                                               for d in documented}


# ---- the run feed ------------------------------------------------------------------------------------------------
def test_new_runs_after_growth_wrap_and_reset():
    rng = np.random.default_rng(3)
    ring = Ring(100, 1)
    seen: list[np.ndarray] = []
    tail, length = np.zeros(0), 0
    for n in (5, 40, 0, 70, 90, 1, 100):  # grows, wraps, turns over all but 10, wraps by one, by a whole ring
        lat = rng.integers(1, 10**9, n) / 1e6
        ring.extend(lat[:, None]) if n else None
        a = ring.view()[:, 0]
        got = new_runs(a, tail, length)
        np.testing.assert_array_equal(got, lat)
        seen.append(got)
        tail, length = a[-32:], len(a)
    ring.clear()
    lat = rng.integers(1, 10**9, 120) / 1e6  # a reset, then more runs than the ring holds: what is kept is new
    ring.extend(lat[:, None])
    np.testing.assert_array_equal(new_runs(ring.view()[:, 0], tail, length), lat[-100:])


def test_feed_counts_every_run_across_rebuilds_and_resets():
    src = SyntheticRuns(capacity=1000)
    feed = RunFeed(src)
    assert len(feed.poll()) == 0 and feed.live_config == -1
    src.rebuild()
    got = []
    for n in (10, 300, 900, 990, 0, 50):  # the ring turns over all but 10 runs at once
        src.add(n)
        got.append(feed.poll())
    old = src.live
    src.add(20)
    src.rebuild()                # runs of the old configuration that came in after the rebuild still count
    src.add(5, config_id=old)
    src.add(700)
    got.append(feed.poll())
    src.reset()
    src.add(40)
    got.append(feed.poll())
    np.testing.assert_array_equal(np.sort(np.concatenate(got)), np.sort(np.concatenate(src.all)))
    for _ in range(runs_mod.DRAINED_POLLS):
        feed.poll()
    assert list(feed._cursors) == [src.live]  # the drained old configuration is no longer polled


def test_feed_takes_a_snapshot_only_when_the_generation_moves():
    src = SyntheticRuns()
    src.rebuild()
    feed = RunFeed(src)
    for _ in range(5):
        src.add(10)
        feed.poll()
    assert src.snapshots == 1
    src.rebuild()
    feed.poll()
    assert src.snapshots == 2


def test_poll_interval_keeps_a_ring_from_turning_over():
    assert poll_interval(0.0, 1.0) == runs_mod.QUIET_POLL_S
    assert poll_interval(100.0, 1.0, capacity=50_000) == 1.0            # slow runs: once a second
    assert poll_interval(100_000.0, 1.0, capacity=50_000) == pytest.approx(0.125)
    assert poll_interval(10**7, 1.0, capacity=50_000) == runs_mod.MIN_POLL_S


def test_histogram_feed_thread_and_scrape_count_each_run_once():
    src = SyntheticRuns(capacity=5000)
    src.rebuild()
    h = LatencyHistogram()
    feed = HistogramFeed(RunFeed(src), h, interval_s=0.05)
    scrapes = 0
    feed.start()
    try:
        for i in range(20):
            src.add(200)
            if i % 3 == 0:
                feed.update()  # a scrape brings it up to date in between
                scrapes += 1
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        while feed.polls <= scrapes and time.monotonic() < deadline:  # the thread's own polls, on a loaded host too
            time.sleep(0.01)
    finally:
        feed.close()
    feed.update()
    scrapes += 1
    assert h.count == sum(len(a) for a in src.all) == 4000
    assert feed.polls > scrapes  # the feed thread polled as well as the scrapes
    assert feed.busy_s > 0 and feed.failures == 0  # what polling cost is counted


# ---- the endpoint ------------------------------------------------------------------------------------------------
def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@pytest.mark.slow
def test_endpoint_serves_the_monitor_it_is_given_on_its_own_registry():
    fm = FedMonitor()
    server = start_metrics_server(None, "127.0.0.1", 0, gpu=FakeGpuCollector(no_gpu=True))
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        before = {f.name: f for f in text_string_to_metric_families(_get(server.url))}
        assert "ortop_process_cpu_seconds" in before  # before the session: the counters are there, at 0
        for name in ("ortop_runs", "ortop_errors", "ortop_rebuilds", "ortop_worker_restarts", "ortop_requests_dropped"):
            assert [s.value for s in before[name].samples if s.name == f"{name}_total"] == [0.0], name
        assert "ortop_state" not in before and "ortop_config" not in before  # what needs a session waits for one
        assert [s.labels["host"] for s in before["ortop_host_info"].samples] == [socket.gethostname()]  # needs none
        server.attach(fm)
        fm.runs.add(300)
        fams = {f.name: f for f in text_string_to_metric_families(_get(server.url))}
        assert next(s.value for s in fams["ortop_runs"].samples) == 300
        fm.runs.add(200)
        fams = {f.name: f for f in text_string_to_metric_families(_get(server.url))}
        assert next(s.value for s in fams["ortop_runs"].samples) == 500
        assert "python_gc_objects_collected_total" not in _get(server.url)  # not the global default registry
    finally:
        server.close()
        server.close()  # idempotent
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)


def test_a_port_in_use_or_out_of_range_is_a_usage_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"cannot listen on 127.0.0.1:{port}: address already in use"):
            start_metrics_server(None, "127.0.0.1", port, gpu=FakeGpuCollector())
    with pytest.raises(UsageError, match="0…65535"):
        start_metrics_server(None, "127.0.0.1", 70000, gpu=FakeGpuCollector())
    with pytest.raises(UsageError, match="cannot listen on"):
        start_metrics_server(None, "no-such-host.invalid", 0, gpu=FakeGpuCollector())


# ---- the host and its node type ----------------------------------------------------------------------------------
def _host_info(text: str) -> dict[str, str]:
    """The labels of the one ``ortop_host_info`` sample of a scrape (value 1, as an info metric's always is)."""
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    [s] = fams["ortop_host_info"].samples
    assert s.name == "ortop_host_info" and s.value == 1
    return s.labels


def _cpu_type() -> str:
    host = read_host()
    return f"{' '.join(host.cpu_model.split())} x{len(host.usable_cpus)}"


def test_host_info_names_the_host_and_the_type_its_facts_make():
    me = socket.gethostname()
    registry, _ = _collector(gpu=FakeGpuCollector([("NVIDIA L4", 24 * GiB)] * 2))
    assert _host_info(generate_latest(registry).decode()) == {"host": me, "node_type": "NVIDIA L4 x2"}
    registry, _ = _collector(gpu=FakeGpuCollector(no_gpu=True))
    assert _host_info(generate_latest(registry).decode()) == {"host": me, "node_type": _cpu_type()}
    registry, _ = _collector(node_type="c6i-2xl")  # a GPU host typed by name: the name wins
    assert _host_info(generate_latest(registry).decode()) == {"host": me, "node_type": "c6i-2xl"}
    # in OpenMetrics it is an info family, ortop_host_info, like ortop_config_info
    fams = {f.name: f for f in parse_openmetrics(generate_openmetrics(registry).decode())}
    assert fams["ortop_host"].type == "info" and fams["ortop_host"].samples[0].name == "ortop_host_info"


def test_a_gpu_nvml_could_not_read_does_not_fix_the_type():
    """An NVML error at the first scrape types the host by its CPU for that scrape only; once NVML answers, the GPU
    names it, and that answer is kept."""

    class Flaky(FakeGpuCollector):
        failing = True

        def sample(self) -> GpuSample:
            return GpuSample((), "NVML error: Unknown Error") if self.failing else super().sample()

    gpu = Flaky([("NVIDIA A10G", 24 * GiB)])
    registry, _ = _collector(gpu=gpu)
    assert _host_info(generate_latest(registry).decode())["node_type"] == _cpu_type()
    gpu.failing = False
    assert _host_info(generate_latest(registry).decode())["node_type"] == "NVIDIA A10G"
    gpu.failing = True
    assert _host_info(generate_latest(registry).decode())["node_type"] == "NVIDIA A10G"


def _cli_endpoint_labels(argv: list[str]) -> dict[str, str]:
    """``ortop run`` parses ``argv``, binds its endpoint as a run does (before any session) and is scraped once."""
    from ortop.cli import run
    from ortop.cli.main import _with_command, build_parser

    args = build_parser().parse_args(_with_command(argv))
    outputs = run.open_outputs(args, protect=[])
    try:
        [server] = outputs.items
        return _host_info(_get(server.url))
    finally:
        outputs.close()


@pytest.mark.slow
def test_node_type_from_the_flag_else_the_environment_else_as_the_fleet_names_the_host(monkeypatch):
    from ortop.fleet import tasks  # what the fleet's probe reads on a node (no Ray needed to call it here)

    monkeypatch.delenv("ORTOP_NODE_TYPE", raising=False)
    base = ["model.onnx", "--metrics-port", "0"]
    me = socket.gethostname()
    assert _cli_endpoint_labels([*base, "--node-type", "c6i-2xl"]) == {"host": me, "node_type": "c6i-2xl"}
    probed = tasks.probe()
    assert _cli_endpoint_labels(base) == {"host": probed["hostname"], "node_type": facts_type(probed)}
    monkeypatch.setenv("ORTOP_NODE_TYPE", "g5-xl")
    assert _cli_endpoint_labels(base) == {"host": me, "node_type": "g5-xl"}
    assert _cli_endpoint_labels([*base, "--node-type", "Intel Xeon 8375C × 8"])["node_type"] == "Intel Xeon 8375C × 8"
    monkeypatch.setenv("ORTOP_NODE_TYPE", "")  # set but empty: as if unset
    assert _cli_endpoint_labels(base)["node_type"] == facts_type(probed)


@pytest.mark.parametrize(("argv", "variable", "said"), [
    (["--node-type", "", "--metrics-port", "0"], None, "argument --node-type: expected a name, got ''"),
    (["--node-type", " g5-xl", "--metrics-port", "0"], None,
     "argument --node-type: no spaces at either end, got ' g5-xl'"),
    (["--node-type", "g5\nxl", "--metrics-port", "0"], None,
     "argument --node-type: no control characters (tab, newline, ...), got 'g5\\nxl'"),
    (["--node-type", "x" * 129, "--metrics-port", "0"], None, "argument --node-type: at most 128 characters, got 129"),
    (["--node-type", "g5-xl"], None, "--node-type labels the metrics endpoint: add --metrics-port"),
    (["--metrics-port", "0"], "g5\txl", "ORTOP_NODE_TYPE: no control characters (tab, newline, ...), got 'g5\\txl'"),
], ids=["empty", "spaces", "newline", "long", "no-endpoint", "environment"])
@pytest.mark.slow
def test_a_bad_node_type_is_one_line_exit_2_before_the_endpoint_is_bound(small_model, env, argv, variable, said):
    if variable is not None:
        env["ORTOP_NODE_TYPE"] = variable
    r = subprocess.run(_ortop(small_model, "--headless", "--duration", 30, *argv), capture_output=True, text=True,
                       env=env, timeout=60)
    assert _one_error_line(r) == f"ortop: error: {said}"  # one line: no "metrics on ..." came before it


# ---- the JSON-lines stream ---------------------------------------------------------------------------------------
def test_interval_line_figures():
    snap = FakeMonitor().snapshot()
    lat = np.arange(1, 101, dtype=float)
    d = interval_line(lat, t=1000.0, interval_s=0.5, snap=snap, runs_total=250, rss_bytes=RSS)
    assert d == {"t": 1000.0, "interval_s": 0.5, "config_id": 2, "state": "measuring", "runs": 100,
                 "runs_total": 250, "p50_ms": pytest.approx(50.5), "p99_ms": pytest.approx(99.01),
                 "throughput_per_s": 200.0, "cpu_ms_per_run": 2.9, "rss_bytes": RSS}
    empty = interval_line(np.zeros(0), t=1.0, interval_s=1.0, snap=snap, runs_total=0, rss_bytes=None)
    assert empty["runs"] == 0 and empty["p50_ms"] is None and empty["throughput_per_s"] is None
    json.dumps(empty, allow_nan=False)


def test_writer_lines_cover_every_run_once():
    fm = FedMonitor()
    out = io.StringIO()
    w = JsonlWriter(out, interval_s=60, owned=False, rss=lambda pid: RSS)
    w._monitor, w._feed = fm, RunFeed(fm)  # driven by hand: no thread
    fm.runs.add(300)
    w.write_interval(1.0)
    fm.runs.add(120)
    w.collect()
    fm.runs.add(80)
    w.write_interval(1.0)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["runs"] for x in lines] == [300, 200]
    assert lines[-1]["runs_total"] == 500
    assert lines[1]["p99_ms"] == pytest.approx(float(np.percentile(np.concatenate(fm.runs.all[1:]), 99)), rel=1e-3)


@pytest.mark.parametrize("tally", [True, False])
def test_runs_a_starved_reader_missed_are_counted_not_lost(tally):
    """A poller starved on a busy host: more runs than the ring holds came between two polls. Where the source
    counts its runs, the line still counts every one (its percentiles over those read) and an event says so."""
    fm = FedMonitor()
    fm.runs.tally = tally
    out = io.StringIO()
    w = JsonlWriter(out, interval_s=60, owned=False, rss=lambda pid: RSS)
    w._monitor, w._feed = fm, RunFeed(fm)
    fm.runs.add(300)
    w.write_interval(1.0)
    fm.runs.add(2500)  # the ring holds 1000: 1500 go by unread
    w.write_interval(1.0)
    fm.runs.reset()
    fm.runs.add(40)
    w.write_interval(1.0)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    warned = [e.text for e in fm.events if e.text.startswith("jsonl: ")]
    if tally:
        assert [x["runs"] for x in lines] == [300, 2500, 40] and lines[-1]["runs_total"] == 2840
        assert lines[1]["throughput_per_s"] == 2500.0
        assert len(warned) == 1 and "1500 runs went by" in warned[0]
    else:
        assert [x["runs"] for x in lines] == [300, 1000, 40] and not warned
    assert lines[1]["p99_ms"] == pytest.approx(float(np.percentile(fm.runs.all[1][-1000:], 99)), rel=1e-3)


def test_writer_thread_writes_lines_and_a_last_one_at_close():
    fm = FedMonitor()
    out = io.StringIO()
    w = JsonlWriter(out, interval_s=0.05, owned=False, rss=lambda pid: None)
    w.attach(fm)
    for _ in range(10):
        fm.runs.add(10)
        time.sleep(0.02)
    deadline = time.monotonic() + 10
    while not out.getvalue() and time.monotonic() < deadline:  # the thread's first line, on a loaded host too
        time.sleep(0.01)
    w.close()
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) >= 2 and sum(x["runs"] for x in lines) == 100


def test_a_reader_that_leaves_ends_the_stream_not_the_run():
    fm = FedMonitor()
    r, wfd = os.pipe()
    stream = os.fdopen(wfd, "w", buffering=1)
    os.close(r)
    w = JsonlWriter(stream, interval_s=60, rss=lambda pid: None)
    w._monitor, w._feed = fm, RunFeed(fm)
    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        w.write_interval(1.0)
    finally:
        signal.signal(signal.SIGPIPE, old)
    assert w.lines == 0
    assert fm.events[-1].text.startswith("jsonl stream stopped")
    w.write_interval(1.0)  # quietly nothing
    w.close()


def test_open_jsonl_refuses_what_check_writable_refuses(tmp_path):
    with pytest.raises(UsageError, match="directory"):
        open_jsonl(str(tmp_path))
    with pytest.raises(UsageError, match="does not exist"):
        open_jsonl(str(tmp_path / "no" / "s.jsonl"))
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    with pytest.raises(UsageError, match="refusing"):
        open_jsonl(str(model), protect=[str(model)])
    with pytest.raises(UsageError, match="--jsonl-interval"):
        open_jsonl(str(tmp_path / "s.jsonl"), interval_s=0)
    w = open_jsonl(str(tmp_path / "s.jsonl"))
    w.close()
    assert (tmp_path / "s.jsonl").exists()


def test_stdout_is_refused_where_the_live_view_draws(monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    with pytest.raises(UsageError, match="terminal the live view draws on"):
        open_jsonl("-", tty_is_busy=True)
    open_jsonl("-", tty_is_busy=False).close()  # headless: stdout is the stream's


def test_duration_zero_or_inf_means_until_stopped():
    from ortop.cli.run import _check_duration

    assert _check_duration(0) == _check_duration(math.inf) == math.inf
    assert _check_duration(2.5) == 2.5
    for bad in (-1.0, math.nan, -math.inf):
        with pytest.raises(UsageError, match="--duration"):
            _check_duration(bad)


def test_a_fifo_is_opened_by_the_writer_not_before(tmp_path):
    fifo = tmp_path / "live.fifo"
    os.mkfifo(fifo)
    w = open_jsonl(str(fifo), interval_s=0.05)  # does not block: no reader yet
    fm = FedMonitor()
    fm.runs.add(50)
    w.attach(fm)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(open(fifo).readlines()), daemon=True)
    reader.start()
    _polled(lambda: w.lines, lambda lines: lines > 0, "line in the FIFO", timeout=30)  # the reader came
    w.close()
    reader.join(5)
    lines = [json.loads(x) for x in got]
    assert lines and sum(x["runs"] for x in lines) == 50


# ---- integration: a real ortop -----------------------------------------------------------------------------------
@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    for k, sub in (("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config")):
        e[k] = str(tmp_path / sub)
    e.pop("PYTHONWARNINGS", None)
    return e


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> str:
    return make_matmul_model(tmp_path_factory.mktemp("models") / "mm64.onnx", n=64, batch=16)


def _ortop(*args: Any) -> list[str]:
    return [sys.executable, "-m", "ortop.cli", *map(str, args)]


def _metrics_url(p: subprocess.Popen, timeout: float = 60) -> str:
    """The URL from the 'metrics on ...' line, read from the child's stderr without blocking past ``timeout``."""
    found: list[str] = []
    lines: list[str] = []

    def read() -> None:
        for line in p.stderr:  # type: ignore[union-attr]
            lines.append(line)
            m = re.search(r"metrics on (http://\S+)", line)
            if m:
                found.append(m.group(1))
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    assert found, "".join(lines)
    return found[0]


def _runs_total(url: str) -> float:
    fams = {f.name: f for f in text_string_to_metric_families(_get(url))}
    return next(s.value for s in fams["ortop_runs"].samples)


def _polled(read: Callable[[], float], done: Callable[[float], bool], what: str, timeout: float = 60) -> float:
    """``read()`` again until ``done`` says its value is the one awaited; a failure naming ``what`` after
    ``timeout`` seconds (a generous bound: a busy host makes it slow, never wrong)."""
    deadline = time.monotonic() + timeout
    while not done(value := read()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s (last read: {value})"
        time.sleep(0.1)
    return value


@pytest.mark.integration
def test_headless_until_stopped_serves_metrics_and_ends_on_sigterm(small_model, env):
    env["ORTOP_NODE_TYPE"] = "not-this-one"  # the flag wins over the environment
    p = subprocess.Popen(_ortop(small_model, "--headless", "--duration", "0", "--json", "--threads", 1,
                                "--metrics-port", 0, "--node-type", "c6i-2xl"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = _metrics_url(p)
        assert _runs_total(url) >= 0  # the counter is there from the first scrape, before the session is built
        first = _polled(lambda: _runs_total(url), lambda runs: runs > 0, "the first runs")
        _polled(lambda: _runs_total(url), lambda runs: runs > first, "more runs")
        text = _get(url)
        assert 'ortop_state{state="measuring"} 1.0' in text
        assert _host_info(text) == {"host": socket.gethostname(), "node_type": "c6i-2xl"}
        assert "ortop_worker_resident_memory_bytes" in text
        assert p.poll() is None  # --duration 0 runs until stopped
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    d = json.loads(out)
    assert d["runs"] > 0 and d["duration_s"] > 0


@pytest.mark.integration
def test_jsonl_on_stdout_comes_before_the_summary(small_model, env):
    r = subprocess.run(_ortop(small_model, "--headless", "--duration", 2, "--json", "--threads", 1, "--jsonl", "-",
                              "--jsonl-interval", 0.5), capture_output=True, text=True, env=env, timeout=90)
    assert r.returncode == 0, r.stderr
    *stream, summary = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(stream) >= 3
    keys = {"t", "interval_s", "config_id", "state", "runs", "runs_total", "p50_ms", "p99_ms", "throughput_per_s",
            "cpu_ms_per_run", "rss_bytes"}
    assert all(set(x) == keys for x in stream)
    assert sum(x["runs"] for x in stream) == stream[-1]["runs_total"] >= summary["runs"] > 0
    measuring = [x for x in stream if x["state"] == "measuring" and x["runs"]]
    assert measuring and all(x["p50_ms"] <= x["p99_ms"] and x["rss_bytes"] > 0 for x in measuring)
    assert all(math.isclose(x["t"], time.time(), abs_tol=600) for x in stream)


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ortop: error: "), r.stderr
    assert r.stdout == ""
    return lines[0]


@pytest.mark.integration
def test_bad_metrics_and_jsonl_input_is_one_line_before_any_build(small_model, env, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        t0 = time.monotonic()
        r = subprocess.run(_ortop(small_model, "--headless", "--duration", 30, "--metrics-port", port),
                           capture_output=True, text=True, env=env, timeout=60)
        took = time.monotonic() - t0
    line = _one_error_line(r)
    assert f"127.0.0.1:{port}" in line and "address already in use" in line
    assert took < 20  # refused at once, not after a session was built and measured
    r = subprocess.run(_ortop(small_model, "--headless", "--duration", 1, "--jsonl", tmp_path / "no" / "s.jsonl"),
                       capture_output=True, text=True, env=env, timeout=60)
    assert "does not exist" in _one_error_line(r)
    r = subprocess.run(_ortop(small_model, "--headless", "--duration", -1), capture_output=True, text=True,
                       env=env, timeout=60)
    assert "--duration" in _one_error_line(r)


def test_a_failing_feed_poll_is_counted_and_exported_not_dropped():
    class Broken(SyntheticRuns):
        def config_runs(self, config_id):  # a monitor being torn down
            raise RuntimeError("monitor stopped")

    src = Broken(capacity=100)
    src.rebuild()
    feed = HistogramFeed(RunFeed(src), LatencyHistogram(), interval_s=0.05)
    reg = CollectorRegistry()
    reg.register(OrtopCollector(FakeMonitor(), feed=feed, gpu=FakeGpuCollector(no_gpu=True), rss=lambda pid: None))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(reg).decode())}
    [sample] = families["ortop_metrics_feed_failures"].samples
    assert sample.value == 1 and feed.last_failure == "RuntimeError: monitor stopped"


def test_runs_the_feed_missed_are_exported_beside_the_histogram():
    """More runs than the ring holds between two polls (a starved poller): the histogram holds those it read, and
    ``ortop_metrics_feed_unread_runs_total`` the rest, so the two add up to every run."""
    src = SyntheticRuns(capacity=100)
    src.rebuild()
    feed = HistogramFeed(RunFeed(src), LatencyHistogram(), interval_s=60)
    src.add(50)
    feed.update()
    src.add(350)
    feed.update()
    reg = CollectorRegistry()
    reg.register(OrtopCollector(FakeMonitor(), feed=feed, gpu=FakeGpuCollector(no_gpu=True), rss=lambda pid: None))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(reg).decode())}
    [unread] = [s for s in families["ortop_metrics_feed_unread_runs"].samples if s.name.endswith("_total")]
    count = next(s for s in families["ortop_latency_seconds"].samples if s.name.endswith("_count"))
    assert unread.value == 250 and count.value == 150
