"""Does ``ortop capacity`` find the knee, fast? Three searches interleaved with the exhaustive curve, then a check.

This host's speed under open load moves by up to a third within minutes (the classifier's knee read 134/s in one
curve and 92/s in the next, two minutes later, while its closed loop stayed within 5 %). A search compared with a
curve taken before or after it measures that drift as much as the search. So the searches and the curve's halves
are interleaved, and both sides of every comparison are centred on the same moment.

Per model:

1. The ceiling: a closed loop (``ortop --headless``, 5 s), and the SLO: ``--slo-factor`` × its p50 (p99 of
   response time), unless ``--slo`` is given.
2. Search 1 (``ortop capacity --budget B``, default 60), the curve's rising half, search 2, the independent check,
   the curve's falling half, search 3.
3. The exhaustive curve: Poisson arrivals at 10 rates (10 % … 100 % of the ceiling), ``--point-s`` seconds each
   (default 10), taken in two halves: rising through the rates, then falling back (ABBA), so a host that drifts
   steadily moves every rate alike instead of bending the curve. Every half draws its own arrivals (``--seed``):
   with one seed every point would replay the same stretch of one sequence, and a stretch of 5 s can hold 10 %
   fewer arrivals than its rate, at every point alike. A point's rate is what was offered (arrivals over its time,
   both halves), not what was asked. Every run (curve and check) warms up for about a second of back-to-back runs
   (``--warmup`` = the ceiling): after the default 10, a fresh process's first second of Poisson arrivals read p99
   a median 1.19 × its next four (8 runs of the classifier at 150/s); after 300, 0.83 ×.
   Its knee is where the long run's share of requests over the SLO crosses 1 − q (1 % for p99): each half's share
   over the SLO (``ortop --slo``; a shed request is over), pooled by requests — a mean, so pooling halves
   estimates the long run's share without bias, where a p99 read from 5 s is biased low near the knee (the queue's
   tail lives in its rare long busy periods: on the classifier, 10 s of requests read p99 0.67–0.8 × what the 20 s
   after them read). The shares' monotone fit (pool adjacent violators: the share cannot fall as the rate rises)
   is crossed with 1 − q, interpolated. Also printed: the knee where the halves' mean p99 crosses the SLO, and each
   half's own knee (the yardstick's A/A: two 5 s-per-rate curves a minute apart).
   With ``--point-s 20`` each half is itself a curve of the length the target assumes (10 rates × 10 s), and
   the halves' agreement says how often the exhaustive method agrees with itself within ±10 %; each search is also
   set against the half measured beside it (searches 1 and 2 the rising half, 2 and 3 the falling one).
   The knee's own 95 % interval comes from a parametric bootstrap of the curve (:func:`knee_interval`): each
   rate's count over the SLO redrawn as clumps whose size is the halves' pooled index of dispersion, the knee
   found again; it says how far a curve of this length can place the knee, so that a search outside ±10 % but
   inside it is not taken for the search's error.
4. Each search's capacity against the knee (target within ±10 %), and its time against the curve's 100 s of
   measuring (target at most a sixth); the three searches' spread is the search's own A/A.
5. Independent check, after search 2: Poisson at 0.85 × and 1.3 × its capacity, ``--point-s`` seconds each,
   alternated twice (ABAB), every run arrivals of its own: the first rate's runs pooled should meet the SLO (at most
   1 − q of their requests over it, a shed request over), the second's not. One 10 s run is a lottery here: one
   slow spell of the host put 4.9 % of a run's requests over the SLO at a rate whose curve point read 0.55 %.
6. The closed loop again: how far the host's speed moved meanwhile.

``--long S`` referees between the curve's knee and the searches: after search 3, Poisson at the knee and at the
searches' geometric mean, S seconds each, ABBA, each rate's runs pooled; at the knee the long run's share over the
SLO should be 1 %. In runs 14–16 (README) it was over 1 % at 6 of 9 curves' knees (1.14–3.86 %).

``--pair-pool`` pairs each search with one whose points stop as soon as they meet the SLO (the search's 6 s rule
off, ``POOL_MIN_S`` = 0), on the same arrivals, the pair's order alternated (ABBA over the three): the rule's
effect against the same knee, with the host's drift shared by both sides of every pair.

    python bench/capacity.py MODEL [MODEL ...] [--dim SYM=N ...] [--threads 1] [--budget 60] [--point-s 10]
                             [--pair-pool] [--long S] [--keep FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time

# ``--pair-pool``: ortop with the search's 6 s rule off (POOL_MIN_S = 0: a point stops once it meets the SLO)
RULE_OFF = ("import sys, ortop.engine.answers.capacity_search as s; s.POOL_MIN_S = 0.0; "
            "from ortop.cli.main import main; sys.exit(main(sys.argv[1:]))")


def ortop(*args: str, rule_off: bool = False) -> dict:
    cmd = [sys.executable, "-c", RULE_OFF] if rule_off else [sys.executable, "-m", "ortop.cli"]
    out = subprocess.run([*cmd, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ortop {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


CURVE_S = 100.0  # the exhaustive curve a search is timed against: 10 rates × 10 s (whatever --point-s measures)
SEEDS = iter(range(1000, 10**6))  # every measured run draws arrivals of its own


def point(model: str, common: list[str], rate: float, seconds: float, slo: float) -> dict:
    d = ortop(model, "--headless", "--json", "--duration", str(seconds), "--arrival", "poisson", "--rate",
              f"{rate:.3f}", "--seed", str(next(SEEDS)), "--slo", f"p99={slo}ms", *common)
    return {"rate": rate, "p99": d["latency_ms"]["p99"], "dropped": d["arrivals"]["dropped"],
            "served": d["arrivals"]["served_per_s"], "offered": d["arrivals"]["offered_per_s"],
            "seconds": d["duration_s"], "requests": d["slo"]["requests"], "over": d["slo"]["over"]}


def pooled(halves: list[dict]) -> dict:
    """One rate from its halves: offered and served over their time, requests over the SLO over their requests,
    the mean of their p99s, their shed requests added."""
    secs = sum(h["seconds"] for h in halves)
    req = sum(h["requests"] for h in halves)
    p99s = [h["p99"] for h in halves]
    return {"asked": halves[0]["rate"], "rate": sum(h["offered"] * h["seconds"] for h in halves) / secs,
            "served": sum(h["served"] * h["seconds"] for h in halves) / secs,
            "share": sum(h["over"] for h in halves) / req if req else 1.0,
            "p99": None if None in p99s else round(sum(p99s) / len(p99s), 3),
            "dropped": sum(h["dropped"] for h in halves), "halves": p99s,
            "counts": ", ".join(f"{h['over']}/{h['requests']}" for h in halves)}


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
    return crossing([p["rate"] for p in curve], monotone([min(x, cap) for x in p99]), slo)


def share_crossing(curve: list[dict], limit: float = 0.01) -> float:
    """Where the monotone fit of the pooled share of requests over the SLO crosses ``limit``, interpolated."""
    return crossing([p["rate"] for p in curve], monotone([p["share"] for p in curve]), limit)


def crossing(rates: list[float], fit: list[float], slo: float) -> float:
    """The rate where a non-decreasing fit first exceeds ``slo``, interpolated from the point before it."""
    prev_r, prev_y = 0.0, 0.0
    for r, y in zip(rates, fit):
        if y > slo:
            return prev_r + (slo - prev_y) / (y - prev_y) * (r - prev_r) if prev_r else 0.0
        prev_r, prev_y = r, y
    return prev_r


def dispersion(halves: dict[float, list[dict]], near: float = 0.10) -> float:
    """How clumped the requests over the SLO are: the index of dispersion of the halves' counts over it about their
    rate's pooled share (1 for independent requests; a stall of the host puts a run of them over at once), pooled
    over the rates near the knee — some requests over, at most ``near`` of them (past the knee whole busy periods
    are over together, clumps far larger than those that place the knee) — one degree of freedom each; over every
    rate with some over when none is near. At least 1."""
    shares = {r: pooled(hs)["share"] for r, hs in halves.items()}
    use = [r for r, x in shares.items() if 0 < x <= near] or [r for r, x in shares.items() if 0 < x < 1]
    chi, df = 0.0, 0
    for r in use:
        hs = halves[r]
        req, over = sum(h["requests"] for h in hs), sum(h["over"] for h in hs)
        share = over / req
        chi += sum((h["over"] - h["requests"] * share) ** 2 / (h["requests"] * share * (1 - share)) for h in hs)
        df += len(hs) - 1
    return max(1.0, chi / df) if df else 1.0


def knee_interval(halves: dict[float, list[dict]], reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The knee's 95 % interval by a parametric bootstrap: each rate's count over the SLO redrawn as clumps — the
    dispersion × a Poisson count of mean (its requests × its pooled share) ÷ the dispersion — and the knee found
    again from the redrawn curve; also the dispersion. Rates where no request was over stay at none (the interval
    then holds what the curve saw, not what it might have missed)."""
    import numpy as np

    c = dispersion(halves)
    rng = np.random.default_rng(seed)
    rates = sorted(halves)
    base = [pooled(halves[r]) for r in rates]
    reqs = np.array([sum(h["requests"] for h in halves[r]) for r in rates], dtype=float)
    means = reqs * np.array([p["share"] for p in base])
    knees = []
    for _ in range(reps):
        shares = c * rng.poisson(means / c) / np.maximum(reqs, 1)
        knees.append(share_crossing([{**p, "share": float(x)} for p, x in zip(base, shares)]))
    lo, hi = np.percentile(knees, (2.5, 97.5))
    return float(lo), float(hi), c


def curve_half(model: str, common: list[str], rates: list[float], seconds: float, slo: float) -> list[dict]:
    return [point(model, common, r, seconds, slo) for r in rates]


def knees(halves: dict[float, list[dict]], slo: float) -> tuple[float, float]:
    """The curve's knee (pooled share over the SLO) and the halves' mean-p99 knee; prints the curve."""
    curve = [pooled(halves[r]) for r in sorted(halves)]
    for p in curve:
        print(f"   asked {p['asked']:>7.1f}/s  offered {p['rate']:>7.1f}/s  served {p['served']:>7.1f}/s  "
              f"over the SLO {100 * p['share']:6.2f} % ({p['counts']})  p99 {p['p99']} ms (up, down: {p['halves']})  "
              f"shed {p['dropped']}")
    return share_crossing(curve), monotone_crossing(curve, slo)


def search(model: str, common: list[str], slo: float, budget: float, off: list | None = None,
           first_off: bool = False, keep: str | None = None) -> tuple[float, float, list]:
    """One search; with ``off`` (``--pair-pool``) also one with the 6 s rule off on the same arrivals, the two in
    the order ``first_off`` says (the bench alternates it: ABBA over its three searches), appended to ``off``;
    with ``keep`` (``--keep``) each one's JSON result is appended to that file as it ends."""
    seed = str(next(SEEDS))
    got = {}
    for rule_off in ([True, False] if first_off else [False, True]) if off is not None else [False]:
        t = time.monotonic()
        cap = ortop("capacity", model, "--slo", f"p99={slo}ms", "--budget", str(budget), "--json", "--seed", seed,
                    *common, rule_off=rule_off)
        took = time.monotonic() - t
        prof = cap["profiles"][0]
        found = prof["capacity_per_s"] or 0.0
        print(f"  ortop capacity{' (6 s rule off)' if rule_off else ''} {found:.1f}/s (bracket {prof['bracket'][0]}…"
              f"{prof['bracket'][1]}) in {took:.1f} s, {len(prof['points'])} points")
        got[rule_off] = (found, took, prof["bracket"])
        if keep:  # the search's whole result, its points' order included: how it got there can be read back
            with open(keep, "a") as f:
                f.write(json.dumps({"model": model, "rule_off": rule_off, "took_s": round(took, 2), "result": cap})
                        + "\n")
    if off is not None:
        off.append(got[True])
    return got[False]


def meets(runs: list[dict]) -> bool:
    """The check's runs pooled: at most 1 % of all their requests over the SLO (shed ones count as over)."""
    return sum(r["over"] for r in runs) <= 0.01 * sum(r["requests"] for r in runs)


def check(runs: list[dict]) -> str:
    p = pooled(runs)
    each = ", ".join(f"{100 * r['over'] / max(1, r['requests']):.2f}" for r in runs)
    return (f"offered {p['rate']:.1f}/s, {100 * p['share']:.2f} % over the SLO (runs: {each} %), p99 {p['halves']} ms, "
            f"shed {p['dropped']}")


def referee(model: str, yard: list[str], slo: float, knee: float, searched: float, seconds: float) -> None:
    """Long runs at the curve's knee and at the searches' (geometric) mean, ABBA, ``seconds`` each: at the rate
    where the long run's share over the SLO is 1 %, the knee is. A curve's 10 s a rate mostly miss the host's rare
    long stalls — its share is right on average but reads low more often than high — so where the two disagree,
    the long runs say which is nearer."""
    runs: dict[str, list[dict]] = {"knee": [], "searches": []}
    for which in ("knee", "searches", "searches", "knee"):
        runs[which].append(point(model, yard, knee if which == "knee" else searched, seconds, slo))
    for which, rate in (("knee", knee), ("searches", searched)):
        label = "the curve's knee" if which == "knee" else "the searches' mean"
        print(f"  long runs ({len(runs[which])} × {seconds:g} s) at {label}, {rate:.1f}/s: {check(runs[which])}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--slo", type=float, help="p99 limit in ms (default: --slo-factor × the closed loop's p50)")
    ap.add_argument("--slo-factor", type=float, default=8.0)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--point-s", type=float, default=10.0)
    ap.add_argument("--long", type=float, default=0.0, metavar="S",
                    help="also run S seconds at the knee and at the searches' mean, twice each (ABBA)")
    ap.add_argument("--keep", metavar="FILE.jsonl",
                    help="also write every search's JSON result, one line each (its points' order shows its path)")
    ap.add_argument("--pair-pool", action="store_true",
                    help="pair each search with one on the same arrivals with the 6 s rule off, order alternated")
    a = ap.parse_args()
    if a.keep:  # started afresh, with the command line; a path that cannot be written stops the bench now
        try:
            with open(a.keep, "w") as f:
                f.write(json.dumps({"argv": sys.argv[1:]}) + "\n")
        except OSError as e:
            raise SystemExit(f"--keep {a.keep}: {e.strerror}") from None
    common = ["--threads", str(a.threads)] + [x for d in a.dim for x in ("--dim", d)]
    rows = []
    aa_all: list[bool] = []    # per model: the halves' knees within ±10 % of each other
    near_all: list[bool] = []  # per search and half beside it: within ±10 %
    for model in a.models:
        closed = ortop(model, "--headless", "--json", "--duration", "5", *common)
        ceiling = closed["throughput_per_s"]
        slo = a.slo or round(a.slo_factor * closed["latency_ms"]["p50"], 2)
        # the yardstick's runs (curve and check) warm up for about a second of back-to-back runs
        yard = ["--warmup", str(max(10, round(ceiling))), *common]
        print(f"\n{model}: ceiling {ceiling:.0f}/s, p50 {closed['latency_ms']['p50']:.3f} ms, SLO p99 ≤ {slo:g} ms")
        rates = [ceiling * k / 10 for k in range(1, 11)]
        t0 = time.monotonic()
        off: list | None = [] if a.pair_pool else None
        s1 = search(model, common, slo, a.budget, off, first_off=False, keep=a.keep)
        up = curve_half(model, yard, rates, a.point_s / 2, slo)
        print("  curve: rising half done")
        s2 = search(model, common, slo, a.budget, off, first_off=True, keep=a.keep)
        under: list[dict] = []
        over: list[dict] = []
        for _ in range(2 if s2[0] else 0):  # alternated (ABAB), each run arrivals of its own, pooled
            under.append(point(model, yard, 0.85 * s2[0], a.point_s, slo))
            over.append(point(model, yard, 1.3 * s2[0], a.point_s, slo))
        if under and over:
            print(f"  check: 0.85× → {check(under)} ({'meets' if meets(under) else 'MISSES'}); "
                  f"1.3× → {check(over)} ({'STILL MEETS' if meets(over) else 'misses'})")
        down = curve_half(model, yard, rates[::-1], a.point_s / 2, slo)[::-1]
        s3 = search(model, common, slo, a.budget, off, first_off=False, keep=a.keep)
        print(f"  curve (all of it took {time.monotonic() - t0:.0f} s; {10 * a.point_s:g} s of it measured a curve)")
        halves = {r: [u, d] for r, u, d in zip(rates, up, down)}
        knee, p99_knee = knees(halves, slo)
        knee_up = share_crossing([pooled([u]) for u in up])
        knee_down = share_crossing([pooled([d]) for d in down])
        k_lo, k_hi, clump = knee_interval(halves)
        found = [s1[0], s2[0], s3[0]]
        if a.long and knee > 0 and all(found):
            referee(model, yard, slo, knee, math.exp(sum(math.log(x) for x in found) / 3), a.long)
        again = ortop(model, "--headless", "--json", "--duration", "5", *common)["throughput_per_s"]
        took = [s1[1], s2[1], s3[1]]
        mean = sum(found) / 3
        print(f"  knee {knee:.1f}/s (halves' mean p99: {p99_knee:.1f}/s; rising half alone {knee_up:.1f}, falling "
              f"half alone {knee_down:.1f}/s); closed loop {ceiling:.0f} → {again:.0f}/s (×{again / ceiling:.3f})")
        print(f"  the knee's 95 % interval {k_lo:.1f}…{k_hi:.1f}/s ({k_lo / knee:.2f}…{k_hi / knee:.2f} × the knee; "
              f"requests over the SLO come in clumps of ~{clump:.1f}); searches inside it: "
              f"{sum(k_lo <= x <= k_hi for x in found)} of 3")
        print(f"  searches {' / '.join(f'{x:.1f}' for x in found)}/s: ÷ knee "
              f"{' / '.join(f'{x / knee:.3f}' for x in found)}, their mean {mean / knee:.3f}; in "
              f"{' / '.join(f'{x:.1f}' for x in took)} s (a curve of 10 rates × 10 s measures {CURVE_S:g} s: "
              f"×{' / ×'.join(f'{CURVE_S / x:.1f}' for x in took)}; at most a sixth is {CURVE_S / 6:.1f} s)")
        # The yardstick against itself: each half is a curve of its own (with --point-s 20, one of the target's
        # length, 10 rates × 10 s); a search is set against the half measured next to it (1 and 2 beside the rising
        # half, 2 and 3 beside the falling one), a minute or so apart as the halves are from each other.
        beside = [(s1[0], knee_up), (s2[0], knee_up), (s2[0], knee_down), (s3[0], knee_down)]
        near = [x / k for x, k in beside if x > 0 and k > 0]
        aa = knee_up / knee_down if knee_down > 0 else math.nan
        print(f"  the yardstick against itself: rising ÷ falling half {aa:.3f} "
              f"({'within' if abs(aa - 1) <= 0.10 else 'NOT within'} ±10 %); searches ÷ the half beside them "
              f"{' / '.join(f'{x:.3f}' for x in near)} ({sum(abs(x - 1) <= 0.10 for x in near)} of {len(near)} "
              f"within ±10 %)")
        if off:
            print(f"  6 s rule off: {' / '.join(f'{x[0]:.1f}' for x in off)}/s: ÷ knee "
                  f"{' / '.join(f'{x[0] / knee:.3f}' for x in off)}; in {' / '.join(f'{x[1]:.1f}' for x in off)} s")
        rows.append((model, slo, knee, (k_lo, k_hi), p99_knee, knee_up, knee_down, found, took, again / ceiling,
                     check(under) if under else None, check(over) if over else None))
        aa_all.append(abs(aa - 1) <= 0.10)
        near_all.extend(abs(x - 1) <= 0.10 for x in near)
    print("\nmodel | SLO ms | knee [95 % interval] (p99 knee; halves) | searches | ÷ knee | mean ÷ knee | times s | "
          "host speed after/before | 0.85x | 1.3x")
    for m, slo, knee, (k_lo, k_hi), pk, ku, kd, found, took, speed, u, o in rows:
        print(f"{m} | {slo:g} | {knee:.0f} [{k_lo:.0f}…{k_hi:.0f}] ({pk:.0f}; {ku:.0f}, {kd:.0f}) | "
              f"{' / '.join(f'{x:.0f}' for x in found)} | {' / '.join(f'{x / knee:.2f}' for x in found)} | "
              f"{sum(found) / 3 / knee:.3f} | "
              f"{' / '.join(f'{x:.0f}' for x in took)} | {speed:.3f} | {u} | {o}")
    print(f"\nthe halves against each other: {sum(aa_all)} of {len(aa_all)} within ±10 %; the searches against the "
          f"half beside them: {sum(near_all)} of {len(near_all)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
