"""Does a real Prometheus read the same p99 from ortop's histogram as ortop computes from its runs?

    python bench/prometheus_check.py [MODEL] [--seconds 75] [--threads 1] [--scrape 1]

Needs the ``prometheus`` binary on PATH (Debian: ``apt-get install prometheus``). Runs MODEL (default: the demo
model) through the headless runner with the metrics endpoint attached, as ``ortop MODEL --headless
--metrics-port`` does, while a throwaway Prometheus scrapes it every ``--scrape`` seconds. A recorder beside the
endpoint keeps every run with the time it was read. At the end the script asks Prometheus, at the time of its last
scrape, for ``histogram_quantile(q, rate(ortop_latency_seconds_bucket[1m]))`` and compares it with the exact
percentile of the runs recorded in that minute, for p50, p90 and p99; and it checks that ``ortop_runs_total`` over
the minute matches the recorded count. It also prints what feeding the histogram cost (CPU per poll and per run).

Target: every quantile within a few percent (the buckets are twenty per decade, each ~12 % wider than the last, so
linear interpolation inside one is off by at most ~12 % and typically by 1–2 %); runs within 1 %.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np

QUANTILES = (0.5, 0.9, 0.99)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _query(base: str, expr: str, at: float) -> float | None:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as r:
        data = json.load(r)
    result = data["data"]["result"]
    return float(result[0]["value"][1]) if result else None


class Recorder:
    """Every run of the monitor, stamped with the wall time it was read (polled every 0.1 s)."""

    def __init__(self) -> None:
        self.batches: list[tuple[float, np.ndarray]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def attach(self, monitor) -> None:
        from ortop.metrics.runs import RunFeed

        feed = RunFeed(monitor)

        def loop() -> None:
            while not self._stop.wait(0.1):
                self.batches.append((time.time(), feed.poll()))

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def between(self, t0: float, t1: float) -> np.ndarray:
        parts = [a for t, a in self.batches if t0 < t <= t1]
        return np.concatenate(parts) if parts else np.zeros(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="an .onnx model (default: the demo model)")
    ap.add_argument("--seconds", type=float, default=75.0, help="measuring time (at least 65: a 1m window)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--scrape", type=float, default=1.0, help="Prometheus scrape interval, seconds")
    args = ap.parse_args()
    prom = shutil.which("prometheus")
    if prom is None:
        print("prometheus is not on PATH (Debian: apt-get install prometheus)", file=sys.stderr)
        return 2

    from ortop.config import profile as P
    from ortop.engine.live import headless
    from ortop.metrics.prometheus import start_metrics_server
    from ortop.model.demo import ensure_demo

    model = args.model or str(ensure_demo())
    prof = P.merge(P.Profile(), **{"session.intra_op_num_threads": args.threads})
    server = start_metrics_server(None, "127.0.0.1", 0, profile_name="bench")
    recorder = Recorder()
    work = Path(tempfile.mkdtemp(prefix="ortop-prom-"))
    web = _free_port()
    base = f"http://127.0.0.1:{web}"
    (work / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {round(args.scrape * 1000)}ms\n"
        f"scrape_configs:\n  - job_name: ortop\n    static_configs:\n      - targets: ['127.0.0.1:{server.port}']\n")
    log = open(work / "prometheus.log", "w")
    p = subprocess.Popen([prom, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
                          f"--web.listen-address=127.0.0.1:{web}"], stdout=log, stderr=subprocess.STDOUT)

    def attach(monitor) -> None:
        server.attach(monitor)
        recorder.attach(monitor)

    try:
        print(f"model {model}; endpoint {server.url}; prometheus {base}; measuring {args.seconds:g} s", flush=True)
        time.sleep(1)
        if p.poll() is not None:
            log.flush()
            print("prometheus did not start:\n" + (work / "prometheus.log").read_text()[-2000:], file=sys.stderr)
            return 1
        res = headless.measure(model, prof, duration_s=args.seconds, on_monitor=attach)
        time.sleep(2 * args.scrape)  # one more scrape after the last runs
        last = _query(base, "timestamp(ortop_runs_total)", time.time())
        if last is None:
            print("Prometheus never scraped ortop: see " + str(work / "prometheus.log"), file=sys.stderr)
            return 1
        # The last scrape that still saw runs coming: the window ends before the monitor stopped.
        t_end = last - 3 * args.scrape
        runs = recorder.between(t_end - 60, t_end)
        prom_runs = _query(base, "increase(ortop_runs_total[1m])", t_end)
        print(f"\nsummary: {res.summary['runs']} runs, p99 {res.summary['latency_ms']['p99']} ms (ortop, whole run)")
        print(f"window: the minute before {time.strftime('%H:%M:%S', time.localtime(t_end))}: {len(runs)} runs "
              f"recorded, Prometheus increase(ortop_runs_total[1m]) = {prom_runs:.0f} "
              f"(extrapolated to the full minute)")
        print(f"{'quantile':>8} {'ortop ms':>10} {'PromQL ms':>10} {'diff':>7}")
        worst = 0.0
        for q in QUANTILES:
            exact = float(np.percentile(runs, 100 * q))
            got = _query(base, f"histogram_quantile({q}, rate(ortop_latency_seconds_bucket[1m]))", t_end)
            got_ms = got * 1e3 if got is not None else float("nan")
            diff = got_ms / exact - 1
            worst = max(worst, abs(diff))
            print(f"{'p' + format(100 * q, 'g'):>8} {exact:10.4f} {got_ms:10.4f} {100 * diff:+6.1f}%")
        feed = server.feed
        if feed is not None and feed.polls:
            total = feed.histogram.count
            print(f"\nhistogram feed: {feed.polls} polls, {1e3 * feed.busy_s / feed.polls:.3f} ms CPU per poll, "
                  f"{1e9 * feed.busy_s / max(total, 1):.0f} ns CPU per run ({total} runs), "
                  f"{100 * feed.busy_s / max(res.duration_s, 1e-9):.3f} % of a core")
        print(f"worst quantile difference {100 * worst:.1f} %")
        return 0
    finally:
        recorder.close()
        server.close()
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
        if not os.environ.get("ORTOP_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
