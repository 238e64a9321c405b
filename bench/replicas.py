"""Replicas on this host: what N sessions of one model served at once give and cost, and why ortop serves them
from one worker process.

    python bench/replicas.py [MODEL] [--replicas 1,2,4] [--duration S] [--rounds R] [--skip-layout] [--skip-table]

MODEL defaults to ortop's demo model.

1. One process or N? For each N > 1: N sessions in one process (one caller thread each) against N processes of
   one session each, started together; both pinned alike (one share of the cores per replica, its pool sized to
   it). Bare ONNX Runtime loops, no ortop. Rounds alternate the two layouts (A B, B A, …) so drift hits both;
   prints per round the aggregate throughput ratio (one process / N processes) and each layout's memory: the sum
   of the processes' PSS (proportional set size: shared library pages counted once across processes, which RSS
   would count N times).
2. The table: ``ortop MODEL --headless --json --replicas N [--pin-replicas] [--shared-arena]`` for each N, with
   and without pinning and a shared arena. Each round runs every variant once, in a rotated order; printed are the
   medians over rounds of the aggregate throughput, the worst replica's p99 and the worker's RSS at the end, with
   the throughput's spread (min–max over rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent("""
    import json, os, sys, threading, time
    import numpy as np
    import onnxruntime as ort
    from ortop import model

    path, shares, shared, duration, start_at = (sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1",
                                                float(sys.argv[4]), float(sys.argv[5]))
    if shared:
        info_mem = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        ort.create_and_register_allocator(info_mem, ort.OrtArenaCfg(0, -1, -1, -1))
    info = model.load_model(path)
    feeds, _ = model.make_feeds(info)
    sessions = []
    for share in shares:
        so = ort.SessionOptions()
        so.intra_op_num_threads = len(share)
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if len(share) > 1:
            so.add_session_config_entry("session.intra_op_thread_affinities",
                                        ";".join(str(c + 1) for c in share[1:]))
        if shared:
            so.add_session_config_entry("session.use_env_allocators", "1")
        sessions.append(ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]))
    for s in sessions:
        for _ in range(5):
            s.run(None, feeds)
    lat = [[] for _ in sessions]
    stop = threading.Event()

    def caller(i):
        os.sched_setaffinity(0, set(shares[i]))  # this thread (Linux): the pool's thread 0 runs on the share
        run, out = sessions[i].run, lat[i]
        while not stop.is_set():
            t0 = time.perf_counter_ns()
            run(None, feeds)
            out.append(time.perf_counter_ns() - t0)

    if start_at > 0:
        time.sleep(max(0.0, start_at - time.time()))
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(len(sessions))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(duration)
    stop.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    pss = 0
    with open("/proc/self/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    per = [(float(np.percentile(x, 50)) / 1e6, float(np.percentile(x, 99)) / 1e6) for x in lat if x]
    print(json.dumps({"throughput": sum(len(x) for x in lat) / wall, "p99_max": max(p[1] for p in per),
                      "pss_mb": pss / 2**20}))
""")


def split(cores: list[int], n: int) -> list[list[int]]:
    from ortop.config.replicas import split_cores

    return [list(s) for s in split_cores(cores, n)]


def one_process(path: str, shares: list[list[int]], duration: float) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, json.dumps(shares), "0", str(duration), "0"],
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def n_processes(path: str, shares: list[list[int]], duration: float) -> dict:
    start_at = time.time() + 6.0  # every process imported, built and warm by then
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, path, json.dumps([s]), "0", str(duration),
                               str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in shares]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        if p.returncode != 0:
            raise SystemExit(f"a replica process failed: {stderr.strip()[-500:]}")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return {"throughput": sum(o["throughput"] for o in outs), "p99_max": max(o["p99_max"] for o in outs),
            "pss_mb": sum(o["pss_mb"] for o in outs)}


def layout(path: str, counts: list[int], duration: float, rounds: int) -> None:
    cores = sorted(os.sched_getaffinity(0))
    print(f"one process with N sessions (A) against N processes with one session each (B), pinned, "
          f"{duration:g} s each, {rounds} rounds alternated")
    print(f"{'N':>3} {'round':>5} {'A runs/s':>9} {'B runs/s':>9} {'A/B':>6} {'A p99':>7} {'B p99':>7} "
          f"{'A PSS MB':>9} {'B PSS MB':>9}")
    for n in counts:
        if n < 2:
            continue
        shares = split(cores, n)
        ratios = []
        for r in range(rounds):
            first, second = (one_process, n_processes) if r % 2 == 0 else (n_processes, one_process)
            x, y = first(path, shares, duration), second(path, shares, duration)
            a, b = (x, y) if first is one_process else (y, x)
            ratios.append(a["throughput"] / b["throughput"])
            print(f"{n:>3} {r + 1:>5} {a['throughput']:>9.0f} {b['throughput']:>9.0f} {ratios[-1]:>6.3f} "
                  f"{a['p99_max']:>7.2f} {b['p99_max']:>7.2f} {a['pss_mb']:>9.0f} {b['pss_mb']:>9.0f}")
        print(f"{n:>3} median throughput ratio one process / N processes: {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}–{max(ratios):.3f})")


def through_ortop(path: str, n: int, pin: bool, shared: bool, duration: float) -> dict:
    cmd = [sys.executable, "-m", "ortop.cli", path, "--headless", "--json", "--duration", str(duration),
           "--replicas", str(n)]
    cmd += ["--pin-replicas"] if pin else []
    cmd += ["--shared-arena"] if shared else []
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"ortop failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    d = json.loads(out.stdout)
    reps = d.get("replicas") or [{"p99_ms": d["latency_ms"]["p99"]}]
    return {"throughput": d["throughput_per_s"], "p99_max": max(r["p99_ms"] for r in reps),
            "rss_mb": d["memory"]["rss_mb"]}


def table(path: str, counts: list[int], duration: float, rounds: int) -> None:
    variants = [(n, pin, shared) for n in counts for pin in (False, True) for shared in (False, True)]
    results: dict[tuple, list[dict]] = {v: [] for v in variants}
    for r in range(rounds):
        k = r % len(variants)
        for v in variants[k:] + variants[:k]:
            results[v].append(through_ortop(path, *v, duration))
    print(f"\nthrough ortop (--headless --replicas N), {duration:g} s each, medians of {rounds} rounds")
    print(f"{'replicas':>8} {'pinned':>6} {'shared arena':>12} {'runs/s':>8} {'(min–max)':>13} {'p99 ms':>7} "
          f"{'RSS MB':>7}")
    for v in variants:
        rs = results[v]
        thr = [x["throughput"] for x in rs]
        print(f"{v[0]:>8} {'yes' if v[1] else 'no':>6} {'yes' if v[2] else 'no':>12} {statistics.median(thr):>8.0f} "
              f"{f'{min(thr):.0f}–{max(thr):.0f}':>13} {statistics.median(x['p99_max'] for x in rs):>7.2f} "
              f"{statistics.median(x['rss_mb'] for x in rs):>7.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-layout", action="store_true", help="leave out part 1 (one process or N)")
    ap.add_argument("--skip-table", action="store_true", help="leave out part 2 (the table through ortop)")
    args = ap.parse_args()
    path = args.model
    if path is None:
        from ortop.model.demo import ensure_demo

        path = str(ensure_demo())
    counts = [int(x) for x in args.replicas.split(",")]
    print(f"model {path}; cores {sorted(os.sched_getaffinity(0))}")
    if not args.skip_layout:
        layout(path, counts, args.duration, args.rounds)
    if not args.skip_table:
        table(path, counts, args.duration, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
