"""What does measuring cost? ortop's headless loop against a bare ``while: sess.run(None, feed)`` loop.

Both run the same model with the same session options and the same feeds, each in a fresh process, alternating
A B A B … so drift in the machine's speed hits both alike. Prints each pair and the median ratios.

    python bench/overhead.py [MODEL] [--threads N] [--duration S] [--rounds R] [--metrics-port PORT]
                             [--against SRC]

With ``--against SRC`` the reference is not the bare loop but ortop from another checkout (SRC: its ``src`` folder,
put first on PYTHONPATH), so that the ratios say what a change costs at run time; each round runs the two in turn,
the order swapped every other round. ``--against`` this checkout's own ``src`` is the A/A.

With ``--metrics-port`` ortop serves its Prometheus endpoint on that port and a scraper here reads it every
``--scrape-interval`` seconds (default 1: fifteen times Prometheus' usual rate) while it measures.

Targets: throughput ratio >= 0.98 and p50 within ±2 % on a 1–10 ms model; duty-cycle ratio (the share of wall time
spent inside run(), ortop's over the bare loop's) >= 0.95 on a 15–30 µs model such as onnxruntime's
datasets/logreg_iris.onnx, where ortop's per-run bookkeeping is largest relative to the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import urllib.request

BARE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import onnxruntime as ort
    from ortop import model
    from ortop.config import profile
    from ortop.runtime import options as ortopts
    prof = profile.from_dict(json.loads(sys.argv[1]))
    info = model.load_model(prof.model)
    w = prof.workload
    feeds, _ = model.make_feeds(info, dims=w.dims, shapes=w.shapes, values=w.values, batch=w.batch, seed=w.seed)
    sess = ort.InferenceSession(prof.model, ortopts.session_options(prof), providers=ortopts.provider_list(prof))
    for _ in range(w.warmup_runs):
        sess.run(None, feeds)
    duration = float(sys.argv[2])
    lat = []
    t_end = time.perf_counter() + duration
    t0 = time.perf_counter()
    while True:
        a = time.perf_counter_ns()
        sess.run(None, feeds)
        b = time.perf_counter_ns()
        lat.append(b - a)
        if b / 1e9 >= t_end:
            break
    wall = time.perf_counter() - t0
    print(json.dumps({"throughput": len(lat) / wall, "p50": float(np.median(lat)) / 1e6, "runs": len(lat),
                      "duty": float(np.sum(lat)) / 1e9 / wall}))
""")


def run_bare(prof_json: str, duration: float) -> dict:
    out = subprocess.run([sys.executable, "-c", BARE, prof_json, str(duration)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


class Scraper:
    """GET http://127.0.0.1:PORT/metrics every ``interval`` seconds until stopped; counts the good scrapes."""

    def __init__(self, port: int, interval: float):
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.stop = threading.Event()
        self.ok = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                with urllib.request.urlopen(self.url, timeout=2) as r:
                    if b"ortop_runs_total" in r.read():
                        self.ok += 1
            except OSError:
                pass  # not up yet, or gone

    def __enter__(self) -> Scraper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def with_src(src: str | None) -> dict[str, str] | None:
    """The environment that runs the ortop in ``src`` (another checkout's ``src`` folder); None: this one's."""
    if src is None:
        return None
    if not os.path.isfile(os.path.join(src, "ortop", "__init__.py")):
        raise SystemExit(f"--against {src}: no ortop package there (give a checkout's src folder)")
    return {**os.environ, "PYTHONPATH": os.path.abspath(src)}


def run_ortop(model: str, threads: int, duration: float, metrics_port: int | None = None,
              scrape_interval: float = 1.0, src: str | None = None) -> dict:
    """ortop headless on ``model``; ``src``: the ortop of another checkout's ``src`` folder (first on PYTHONPATH)."""
    cmd = [sys.executable, "-m", "ortop.cli", model, "--headless", "--json", "--threads", str(threads),
           "--duration", str(duration)]
    env = with_src(src)
    if metrics_port is None:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    else:
        with Scraper(metrics_port, scrape_interval) as scraper:
            out = subprocess.run([*cmd, "--metrics-port", str(metrics_port)], capture_output=True, text=True,
                                 check=True, env=env)
        if scraper.ok == 0:
            raise SystemExit(f"no scrape of {scraper.url} succeeded: is the endpoint up?")
    d = json.loads(out.stdout)
    # duty cycle: the share of wall time inside run() (throughput × mean latency); drift in the host's speed moves
    # run() time and throughput together, so this figure cancels most of it within one run
    duty = d["throughput_per_s"] * d["latency_ms"]["mean"] / 1e3
    return {"throughput": d["throughput_per_s"], "p50": d["latency_ms"]["p50"], "runs": d["runs"], "duty": duty}


def main() -> int:
    from ortop.config import profile
    from ortop.model.demo import ensure_demo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="model (default: the built-in demo model)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--metrics-port", type=int, help="serve and scrape ortop's Prometheus endpoint on this port")
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    ap.add_argument("--against", metavar="SRC", help="instead of the bare loop: the ortop in SRC (another checkout's "
                    "src folder), alternated with this one, the order swapped every other round")
    a = ap.parse_args()
    model = a.model or str(ensure_demo())
    prof = profile.merge(profile.Profile(model=model), **{"session.intra_op_num_threads": a.threads})
    prof_json = json.dumps(prof.to_dict(full=True))
    if a.against:
        return against(model, a)
    thr, p50, duty = [], [], []
    print(f"model {model}, intra_op_num_threads={a.threads}, {a.duration:.0f} s per run, {a.rounds} rounds"
          + (f", metrics endpoint on :{a.metrics_port} scraped every {a.scrape_interval:g} s"
             if a.metrics_port else ""))
    print(f"{'round':>5} {'bare runs/s':>12} {'ortop runs/s':>13} {'ratio':>7} {'bare p50':>9} {'ortop p50':>10} "
          f"{'ratio':>7} {'duty ratio':>10}")
    for i in range(a.rounds):
        b = run_bare(prof_json, a.duration)
        o = run_ortop(model, a.threads, a.duration, a.metrics_port, a.scrape_interval)
        thr.append(o["throughput"] / b["throughput"])
        p50.append(o["p50"] / b["p50"])
        duty.append(o["duty"] / b["duty"])
        print(f"{i + 1:>5} {b['throughput']:>12.1f} {o['throughput']:>13.1f} {thr[-1]:>7.3f} {b['p50']:>9.3f} "
              f"{o['p50']:>10.3f} {p50[-1]:>7.3f} {duty[-1]:>10.3f}")
    print(f"median throughput ratio (ortop/bare) {statistics.median(thr):.3f}; "
          f"median p50 ratio {statistics.median(p50):.3f}; median duty-cycle ratio {statistics.median(duty):.3f}")
    return 0


def against(model: str, a: argparse.Namespace) -> int:
    """This checkout's ortop against another's (``--against``): the duty cycle's and the throughput's ratio per
    round, this over that, and their medians with the range."""
    with_src(a.against)  # refused before the first round if it holds no ortop
    print(f"model {model}, intra_op_num_threads={a.threads}, {a.duration:.0f} s per run, {a.rounds} rounds, "
          f"this checkout against {a.against}")
    print(f"{'round':>5} {'this runs/s':>12} {'that runs/s':>12} {'ratio':>7} {'this duty':>10} {'that duty':>10} "
          f"{'duty ratio':>10}")
    thr, duty = [], []
    for i in range(a.rounds):
        order = (None, a.against) if i % 2 == 0 else (a.against, None)
        got = {src: run_ortop(model, a.threads, a.duration, src=src) for src in order}
        this, that = got[None], got[a.against]
        thr.append(this["throughput"] / that["throughput"])
        duty.append(this["duty"] / that["duty"])
        print(f"{i + 1:>5} {this['throughput']:>12.1f} {that['throughput']:>12.1f} {thr[-1]:>7.3f} "
              f"{this['duty']:>10.4f} {that['duty']:>10.4f} {duty[-1]:>10.3f}")
    print(f"median duty-cycle ratio (this/that) {statistics.median(duty):.3f} (range {min(duty):.3f}–{max(duty):.3f}); "
          f"median throughput ratio {statistics.median(thr):.3f} (range {min(thr):.3f}–{max(thr):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
