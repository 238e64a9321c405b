"""Does ``ortop capacity`` find the knee, fast? Against the exhaustive curve, taken twice, then an independent check.

Per model:

1. The ceiling: a closed loop (``ortop --headless``, 5 s), and the SLO: ``--slo-factor`` × its p50 (p99 of
   response time), unless ``--slo`` is given.
2. The exhaustive curve: Poisson arrivals at 10 rates (10 % … 100 % of the ceiling), ``--point-s`` seconds each
   (default 10), taken in two halves: rising through the rates, then falling back (ABBA), so each rate's two
   halves straddle the curve's middle and a host that drifts steadily moves every rate alike instead of bending
   the curve (a rate's p99 is the mean of its halves'; its shed requests add up). Its knee, two ways: where p99
   first crosses the SLO, interpolated between the last rate that met it and the first that did not (a shed
   request fails a rate); and where a monotone fit of the ten p99s crosses it (p99 cannot fall as the offered rate
   rises, so a point under its neighbour below is noise: the pool-adjacent-violators fit averages such runs, and
   one stall in one run no longer sets the knee on its own). The monotone knee is the reference.
3. ``ortop capacity --budget B`` (default 60) on the same model and SLO: its capacity against the knee (target within
   ±10 %), and its time against one curve's (target at most a sixth).
4. Independent check: Poisson at 0.85 × and 1.3 × the found capacity for ``--point-s`` seconds: the first should
   meet the SLO, the second not.
5. The exhaustive curve again (an A/A check of the yardstick: how far two curves minutes apart put the knee), and
   the closed loop again (how far the host's speed moved meanwhile). The capacity is compared with each curve's
   knee and with their mean.

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


def first_crossing(curve: list[dict], slo: float) -> float:
    """The rate where p99 first crosses the SLO, interpolated between the last rate that met it and the next."""
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


def monotone(values: list[float]) -> list[float]:
    """The least-squares non-decreasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, c2), (m1, c1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    return [m for m, c in blocks for _ in range(int(c))]


def monotone_crossing(curve: list[dict], slo: float) -> float:
    """Where the monotone fit of p99 (a shed request: infinite) crosses the SLO, interpolated."""
    p99 = [p["p99"] if p["p99"] is not None and p["dropped"] == 0 else float("inf") for p in curve]
    finite = [x for x in p99 if x != float("inf")]
    cap = 10 * max(finite + [slo])  # a shed point's stand-in: far over the SLO, finite for the averaging
    fit = monotone([min(x, cap) for x in p99])
    rates = [p["rate"] for p in curve]
    prev_r, prev_y = 0.0, 0.0
    for r, y in zip(rates, fit):
        if y > slo:
            return prev_r + (slo - prev_y) / (y - prev_y) * (r - prev_r) if prev_r else 0.0
        prev_r, prev_y = r, y
    return prev_r


def exhaustive(model: str, common: list[str], ceiling: float, seconds: float, slo: float) -> tuple[float, float, float]:
    t0 = time.monotonic()
    rates = [ceiling * k / 10 for k in range(1, 11)]
    halves: dict[float, list[dict]] = {r: [] for r in rates}
    for r in rates + rates[::-1]:   # ABBA: up, then down
        halves[r].append(point(model, common, r, seconds / 2))
    curve = []
    for r in rates:
        h = halves[r]
        p99s = [x["p99"] for x in h]
        p = {"rate": r, "p99": None if None in p99s else round(sum(p99s) / len(p99s), 3),
             "dropped": sum(x["dropped"] for x in h), "served": sum(x["served"] for x in h) / len(h)}
        curve.append(p)
        print(f"   {r:>8.1f}/s  served {p['served']:>8.1f}/s  p99 {p['p99']} ms (up, down: {p99s})  "
              f"shed {p['dropped']}")
    took = time.monotonic() - t0
    first, mono = first_crossing(curve, slo), monotone_crossing(curve, slo)
    print(f"   knee: monotone fit {mono:.1f}/s, first crossing {first:.1f}/s ({took:.0f} s with 20 starts; "
          f"{10 * seconds:g} s measured)")
    return mono, first, 10 * seconds   # the time target is against the measuring alone, not the starts


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
        print("  curve A")
        knee_a, first_a, curve_s = exhaustive(model, common, ceiling, a.point_s, slo)
        t1 = time.monotonic()
        cap = ortop("capacity", model, "--slo", f"p99={slo}ms", "--budget", str(a.budget), "--json", *common)
        cap_s = time.monotonic() - t1
        found = cap["profiles"][0]["capacity_per_s"] or 0.0
        lo, hi = cap["profiles"][0]["bracket"]
        print(f"  ortop capacity {found:.1f}/s (bracket {lo}…{hi}) in {cap_s:.0f} s, ×{curve_s / cap_s:.1f} less "
              "than one curve's measuring")
        under = point(model, common, 0.85 * found, a.point_s) if found else None
        over = point(model, common, 1.3 * found, a.point_s) if found else None
        if under and over:
            print(f"  check: 0.85× → p99 {under['p99']:.3f} ms ({'meets' if under['p99'] <= slo else 'MISSES'}); "
                  f"1.3× → p99 {over['p99']:.3f} ms, shed {over['dropped']} "
                  f"({'misses' if over['p99'] > slo or over['dropped'] else 'STILL MEETS'})")
        print("  curve B")
        knee_b, first_b, _ = exhaustive(model, common, ceiling, a.point_s, slo)
        again = ortop(model, "--headless", "--json", "--duration", "5", *common)["throughput_per_s"]
        knee = (knee_a + knee_b) / 2
        print(f"  curves A/B: knee {knee_a:.1f} / {knee_b:.1f}/s (B/A {knee_b / knee_a:.3f}); closed loop "
              f"{ceiling:.0f} → {again:.0f}/s (×{again / ceiling:.3f}); capacity / knee: A {found / knee_a:.3f}, "
              f"B {found / knee_b:.3f}, mean {found / knee:.3f}")
        rows.append((model, slo, knee_a, knee_b, first_a, first_b, found, curve_s, cap_s, again / ceiling,
                     under["p99"] if under else None, over["p99"] if over else None))
    print("\nmodel | SLO ms | knee A (first) | knee B (first) | capacity | cap/A | cap/B | cap/mean | curve s | "
          "capacity s | host speed B/A | 0.85x p99 | 1.3x p99")
    for m, slo, ka, kb, fa, fb, found, cs, ks, speed, u, o in rows:
        mean = (ka + kb) / 2
        print(f"{m} | {slo:g} | {ka:.0f} ({fa:.0f}) | {kb:.0f} ({fb:.0f}) | {found:.0f} | {found / ka:.3f} | "
              f"{found / kb:.3f} | {found / mean:.3f} | {cs:.0f} | {ks:.0f} | {speed:.3f} | {u} | {o}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
