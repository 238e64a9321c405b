"""Does ``ortop capacity --certify`` discriminate? Certifications below and above a measured capacity.

A certification (MLPerf Server's early-stopping rule at the SLO's percentile, :mod:`ortop.measure.certify`) should
say ``certified`` at a rate the host comfortably serves and ``violated`` at one it cannot, and never ``certified``
above the capacity. Per model:

1. ``--capacity`` R/s, or the median of ``--searches`` capacity searches (default 3, ``--budget-search`` s each)
   under the same SLO.
2. ``--runs`` certifications (default 5) at ``--low`` × R (default 0.85) and as many at ``--high`` × R (default
   1.3), alternated low, high, low, high …, each ``ortop capacity --certify RATE`` with the default minimum
   duration (60 s) and budget (300 s) unless ``--min-duration`` / ``--budget`` say otherwise.

Printed: each certification's verdict, requests, over, needed and wall time, then the counts. Targets: at the low
rate ``certified`` in at least 4 of 5; at the high rate ``violated`` in 5 of 5 and never ``certified``. Runs are
sequential; nothing else should run on the host meanwhile.

    python bench/certify.py MODEL --slo MS [--capacity R | --searches 3] [--runs 5] [--low 0.85] [--high 1.3]
                            [--threads 1] [--min-duration S] [--budget S] [--dim SYM=N ...] [--shape NAME=SHAPE ...]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time


def capacity(model: str, common: list[str], budget: float) -> float:
    out = subprocess.run([sys.executable, "-m", "ortop.cli", "capacity", model, *common, "--budget", f"{budget:g}",
                          "--json"], capture_output=True, text=True)
    if out.returncode not in (0,):
        raise SystemExit(f"capacity search failed ({out.returncode}): {out.stderr.strip()}")
    res = json.loads(out.stdout)
    return float(res["profiles"][0].get("capacity_per_s") or 0.0)


def certify(model: str, common: list[str], rate: float, extra: list[str]) -> tuple[dict, int, float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ortop.cli", "capacity", model, *common, "--certify", f"{rate:.1f}",
                          *extra, "--json"], capture_output=True, text=True)
    took = time.monotonic() - t0
    if out.returncode not in (0, 5, 6):
        raise SystemExit(f"certification failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)["certification"], out.returncode, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--slo", type=float, required=True, help="p99 limit in ms")
    ap.add_argument("--capacity", type=float, help="the capacity to certify around (default: searched)")
    ap.add_argument("--searches", type=int, default=3)
    ap.add_argument("--budget-search", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--low", type=float, default=0.85)
    ap.add_argument("--high", type=float, default=1.3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-duration", type=float)
    ap.add_argument("--budget", type=float)
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--shape", action="append", default=[])
    a = ap.parse_args()
    print("reproduce: python bench/certify.py " + shlex.join(sys.argv[1:]), flush=True)
    common = ["--slo", f"p99={a.slo:g}ms", "--threads", str(a.threads)]
    for d in a.dim:
        common += ["--dim", d]
    for s in a.shape:
        common += ["--shape", s]
    extra = (["--min-duration", f"{a.min_duration:g}"] if a.min_duration else []) + \
            (["--budget", f"{a.budget:g}"] if a.budget else [])
    if a.capacity:
        cap = a.capacity
    else:
        caps = [capacity(a.model, common, a.budget_search) for _ in range(a.searches)]
        cap = statistics.median(caps)
        print(f"capacity searches: {', '.join(f'{c:.0f}' for c in caps)}/s → median {cap:.0f}/s", flush=True)
    if not cap > 0:
        raise SystemExit("no capacity to certify around: no rate met the SLO")
    verdicts: dict[str, list[str]] = {"low": [], "high": []}
    times: dict[str, list[float]] = {"low": [], "high": []}
    for k in range(a.runs):
        for side, factor in (("low", a.low), ("high", a.high)):
            c, code, took = certify(a.model, common, factor * cap, extra)
            verdicts[side].append(c["verdict"])
            times[side].append(took)
            print(f"{side:>4} {factor:.2f} × {cap:.0f} = {factor * cap:6.1f}/s  run {k + 1}: {c['verdict']:<9} "
                  f"exit {code}  {c['requests']:>6} requests, {c['over_slo']:>4} over, needed {c['needed']:>6}, "
                  f"clump × {c.get('clump_factor', 1.0):.2f}, {took:5.1f} s", flush=True)
    low_ok = verdicts["low"].count("certified")
    high_violated = verdicts["high"].count("violated")
    high_certified = verdicts["high"].count("certified")
    print(f"at {a.low:g} ×: certified {low_ok} of {a.runs} (target at least {max(1, round(0.8 * a.runs))}); "
          f"median {statistics.median(times['low']):.1f} s per certification")
    print(f"at {a.high:g} ×: violated {high_violated} of {a.runs} (target {a.runs}), certified {high_certified} "
          f"(target 0); median {statistics.median(times['high']):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
