"""Is the dispatcher the bottleneck? Open-loop arrivals measured against what was asked of them.

Three figures:

1. Offered against asked: ``ortop --headless --json --arrival fixed|poisson --rate R`` on a model that keeps R
   easily; the summary's ``arrivals.offered_per_s`` over R (target: within 2 %).
2. The dispatcher's own lateness, start − max(scheduled arrival, the moment its server became free), read from the
   worker's own rows (``runtime.serve.Loop`` driven in this process, one server): p50 and p99 (target p99 ≤ 0.2 ms).
3. The closed loop's duty cycle (share of wall time inside Run()), ortop's over a bare loop's, alternated in fresh
   processes (``bench/overhead.py``'s method; target ≥ 0.99 on the demo model).

    python bench/arrivals.py [MODEL] [--rate HZ ...] [--duration S] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from overhead import run_bare, run_ortop  # noqa: E402  (a sibling script, not a package)


def offered(model: str, mode: str, rate: float, duration: float) -> float:
    cmd = [sys.executable, "-m", "ortop.cli", model, "--headless", "--json", "--threads", "1", "--duration",
           str(duration), "--arrival", mode, "--rate", str(rate)]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    if not d["arrivals"]["kept"]:
        raise SystemExit(f"{rate:g}/s is more than this model serves here: pick a lower --rate")
    return float(d["arrivals"]["offered_per_s"])


def lateness(model: str, rate: float, duration: float) -> np.ndarray:
    """Dispatcher lateness (ms) of every request of a Poisson run at ``rate``, one server, in this process."""
    from ortop import model as model_mod
    from ortop.config import profile
    from ortop.runtime.serve import Loop
    from ortop.runtime.session import build

    prof = profile.merge(profile.Profile(model=model), **{"session.intra_op_num_threads": 1,
                                                          "workload.arrival": "poisson", "workload.rate_hz": rate})
    sess = build(prof, model_mod.load_model(model))
    sess.warm()
    loop = Loop(sess, 0, lambda cid, msg: print(msg, file=sys.stderr))
    loop.start()
    time.sleep(duration)
    loop.halt()
    rows = loop.take()
    sess.close()
    late = np.minimum(rows[:, 5], rows[:, 7])  # start − arrival, start − the server's previous end: the later bound
    return late[1:] / 1e6  # the first request has no previous end on this server


def main() -> int:
    from ortop.config import profile
    from ortop.model.demo import ensure_demo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="model (default: the built-in demo model)")
    ap.add_argument("--rate", type=float, action="append", help="offered rates to check (default 100 and 400)")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    model = a.model or str(ensure_demo())
    rates = a.rate or [100.0, 400.0]
    print(f"model {model}, 1 intra-op thread, {a.duration:g} s per run")

    print("\n1. offered / asked (ortop --headless --json; Poisson runs last for 10 000 requests: a Poisson count"
          " of N has a standard deviation of √N, 1 % at 10 000)")
    for mode in ("fixed", "poisson"):
        for rate in rates:
            seconds = a.duration if mode == "fixed" else min(60.0, max(a.duration, 10_000 / rate))
            got = offered(model, mode, rate, seconds)
            print(f"   {mode:<8} asked {rate:>7.1f}/s  offered {got:>8.1f}/s  ratio {got / rate:.4f}  ({seconds:g} s)")

    print("\n2. dispatcher lateness: start − max(arrival, server free), Poisson, one server")
    for rate in rates:
        late = lateness(model, rate, a.duration)
        p50, p99 = np.percentile(late, (50, 99))
        print(f"   {rate:>7.1f}/s  {len(late):>6} requests  p50 {p50:.3f} ms  p99 {p99:.3f} ms  "
              f"max {late.max():.3f} ms")

    print("\n3. closed-loop duty cycle, ortop / bare (alternated, fresh processes)")
    prof = profile.merge(profile.Profile(model=model), **{"session.intra_op_num_threads": 1})
    prof_json = json.dumps(prof.to_dict(full=True))
    duty = []
    for i in range(a.rounds):
        b = run_bare(prof_json, a.duration)
        o = run_ortop(model, 1, a.duration)
        duty.append(o["duty"] / b["duty"])
        print(f"   round {i + 1}: bare {b['duty']:.4f}  ortop {o['duty']:.4f}  ratio {duty[-1]:.4f}")
    print(f"   median duty-cycle ratio {statistics.median(duty):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
