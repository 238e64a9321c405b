"""Does ``ortop capacity`` find the knee, fast? Against the exhaustive curve, then an independent check.

Per model:

1. The ceiling: a closed loop (``ortop --headless``, 5 s), and the SLO: ``--slo-factor`` × its p50 (p99 of
   response time), unless ``--slo`` is given.
2. The exhaustive curve: Poisson arrivals at 10 rates (10 % … 100 % of the ceiling), ``--point-s`` seconds each
   (default 10), one after another; the knee is where p99 crosses the SLO, interpolated between the last rate that
   met it and the first that did not (a shed request fails a rate).
3. ``ortop capacity --budget B`` (default 60) on the same model and SLO: its capacity against the knee (target within
   ±10 %), and its time against the curve's (target at most a sixth).
4. Independent check: Poisson at 0.85 × and 1.3 × the found capacity for ``--point-s`` seconds: the first should
   meet the SLO, the second not.

    python bench/capacity.py MODEL [MODEL ...] [--dim SYM=N ...] [--threads 1] [--budget 60] [--point-s 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def ortop(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "ortop.cli", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ortop {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def point(model: str, common: list[str], rate: float, seconds: float) -> dict:
    d = ortop(model, "--headless", "--json", "--duration", str(seconds), "--arrival", "poisson", "--rate",
              f"{rate:.3f}", *common)
    return {"rate": rate, "p99": d["latency_ms"]["p99"], "dropped": d["arrivals"]["dropped"],
            "served": d["arrivals"]["served_per_s"]}


def knee(curve: list[dict], slo: float) -> float:
    """The rate where p99 crosses the SLO, interpolated between the last rate that met it and the next."""
    ok = lambda p: p["p99"] is not None and p["p99"] <= slo and p["dropped"] == 0  # noqa: E731
    last = 0.0
    for a, b in zip([{"rate": 0.0, "p99": 0.0, "dropped": 0}] + curve, curve):
        if ok(b):
            last = b["rate"]
            continue
        if ok(a) and b["p99"] is not None and b["p99"] > a["p99"]:
            return a["rate"] + (slo - a["p99"]) / (b["p99"] - a["p99"]) * (b["rate"] - a["rate"])
        return last
    return last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--slo", type=float, help="p99 limit in ms (default: --slo-factor × the closed loop's p50)")
    ap.add_argument("--slo-factor", type=float, default=8.0)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--point-s", type=float, default=10.0)
    a = ap.parse_args()
    common = ["--threads", str(a.threads)] + [x for d in a.dim for x in ("--dim", d)]
    rows = []
    for model in a.models:
        closed = ortop(model, "--headless", "--json", "--duration", "5", *common)
        ceiling = closed["throughput_per_s"]
        slo = a.slo or round(a.slo_factor * closed["latency_ms"]["p50"], 2)
        print(f"\n{model}: ceiling {ceiling:.0f}/s, p50 {closed['latency_ms']['p50']:.3f} ms, SLO p99 ≤ {slo:g} ms")
        t0 = time.monotonic()
        curve = []
        for k in range(1, 11):
            p = point(model, common, ceiling * k / 10, a.point_s)
            curve.append(p)
            print(f"   {p['rate']:>8.1f}/s  served {p['served']:>8.1f}/s  p99 {p['p99']:>9.3f} ms  "
                  f"shed {p['dropped']}")
        curve_s = time.monotonic() - t0
        exhaustive = knee(curve, slo)
        t1 = time.monotonic()
        cap = ortop("capacity", model, "--slo", f"p99={slo}ms", "--budget", str(a.budget), "--json", *common)
        cap_s = time.monotonic() - t1
        found = cap["profiles"][0]["capacity_per_s"] or 0.0
        lo, hi = cap["profiles"][0]["bracket"]
        under = point(model, common, 0.85 * found, a.point_s) if found else None
        over = point(model, common, 1.3 * found, a.point_s) if found else None
        ratio = found / exhaustive if exhaustive else float("nan")
        print(f"   exhaustive knee {exhaustive:.1f}/s in {curve_s:.0f} s; ortop capacity {found:.1f}/s "
              f"(bracket {lo}…{hi}) in {cap_s:.0f} s: ratio {ratio:.3f}, time ×{curve_s / cap_s:.1f} less")
        if under and over:
            print(f"   check: 0.85× → p99 {under['p99']:.3f} ms ({'meets' if under['p99'] <= slo else 'MISSES'}); "
                  f"1.3× → p99 {over['p99']:.3f} ms, shed {over['dropped']} "
                  f"({'misses' if over['p99'] > slo or over['dropped'] else 'STILL MEETS'})")
        rows.append((model, slo, exhaustive, found, ratio, curve_s, cap_s))
    print("\nmodel | SLO p99 ms | exhaustive knee /s | capacity /s | ratio | curve s | capacity s")
    for m, slo, ex, found, ratio, cs, ks in rows:
        print(f"{m} | {slo:g} | {ex:.1f} | {found:.1f} | {ratio:.3f} | {cs:.0f} | {ks:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
