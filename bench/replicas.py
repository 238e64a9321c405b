"""Replicas before ortop serves them: N sessions of one model in one process, each driven by its own caller thread,
with and without pinning each replica to its share of the cores, and with and without one CPU arena shared by all
sessions (ORT's environment allocator: ``onnxruntime.create_and_register_allocator`` and the session config entry
``session.use_env_allocators = 1``).

Each variant runs in a fresh process (an environment allocator is registered once per process). Prints per variant
the aggregate throughput, the worst replica's p50 and p99, and the process's RSS after the runs.

    python bench/replicas.py [MODEL] [--replicas 1,2,4] [--duration S]

MODEL defaults to ortop's demo model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json, os, sys, threading, time
    import numpy as np
    import onnxruntime as ort
    from ortop import model

    path, n, pin, shared, duration = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1", \\
        float(sys.argv[5])
    cores = sorted(os.sched_getaffinity(0))

    def split(cores, n):
        # Contiguous shares, as even as the count allows; with more replicas than cores they share round-robin.
        if n >= len(cores):
            return [[cores[i % len(cores)]] for i in range(n)]
        k, extra = divmod(len(cores), n)
        out, at = [], 0
        for i in range(n):
            size = k + (1 if i < extra else 0)
            out.append(cores[at:at + size])
            at += size
        return out

    shares = split(cores, n)
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
        if pin and len(share) > 1:
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
        if pin:
            os.sched_setaffinity(0, {shares[i][0]})  # this thread (Linux): the caller runs the first share
        run, out = sessions[i].run, lat[i]
        while not stop.is_set():
            t0 = time.perf_counter_ns()
            run(None, feeds)
            out.append(time.perf_counter_ns() - t0)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(duration)
    stop.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    with open("/proc/self/statm") as fh:
        rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    per = [(float(np.percentile(x, 50)) / 1e6, float(np.percentile(x, 99)) / 1e6) for x in lat if x]
    print(json.dumps({"throughput": sum(len(x) for x in lat) / wall, "p50_max": max(p[0] for p in per),
                      "p99_max": max(p[1] for p in per), "rss_mb": rss / 2**20}))
""")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--duration", type=float, default=2.0)
    args = ap.parse_args()
    path = args.model
    if path is None:
        from ortop.model.demo import ensure_demo

        path = str(ensure_demo())
    print(f"{'replicas':>8} {'pinned':>6} {'shared arena':>12} {'runs/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'RSS MB':>7}")
    for n in (int(x) for x in args.replicas.split(",")):
        for pin in (False, True):
            for shared in (False, True):
                out = subprocess.run([sys.executable, "-c", CHILD, path, str(n), str(int(pin)), str(int(shared)),
                                      str(args.duration)], capture_output=True, text=True, timeout=120)
                if out.returncode != 0:
                    print(f"{n:>8} {pin!s:>6} {shared!s:>12}  failed: {out.stderr.strip().splitlines()[-1:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{n:>8} {pin!s:>6} {shared!s:>12} {r['throughput']:>8.1f} {r['p50_max']:>7.2f} "
                      f"{r['p99_max']:>7.2f} {r['rss_mb']:>7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
