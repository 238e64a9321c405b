"""Does `ortop tune` find what an exhaustive grid finds, in a tenth of the time? And does a paced caller get
spinning turned off?

    python bench/tune.py [MODEL ...] [--budget 60] [--grid-factor 10] [--space threads,spinning,dynamic_block_base]
                         [--grid-max N] [--grid-seconds S] [--compare 30] [--rate 50] [--no-paced]

For the demo model (and each MODEL given):

1. ``ortop tune MODEL --budget B --space S --json`` in a fresh process; its wall time is measured here.
2. The exhaustive grid over the same space (``Space.grid()``: every combination, the start profile included),
   given ``--grid-factor`` × B seconds (or ``--grid-seconds``): every grid point races the start profile in
   interleaved groups of four for an equal share of 70 % of that time; the three best by estimate then race each
   other and the start profile for the remaining 30 %, and the best of those is the grid's answer.
   ``--grid-max`` keeps the first N grid points only (the grid is listed dimension by dimension, so the first
   points are the thread counts), for a short check.
3. The tuned profile against the grid's best, interleaved in one worker for ``--compare`` seconds: the ratio
   tuned / grid on the objective (below 1 = the tuner's answer is better on a lower-is-better objective), with
   its 95 % interval, and the time each search took.

Then the paced case: ``ortop tune DEMO --rate R --objective cpu --space spinning``; the expected answer is spinning
off, with CPU per run several times lower, and an interval. (With threads in the space too, one thread is as good
an answer: a pool of one has nothing to spin.)

One measurement at a time: the steps run one after another. The full run takes about a quarter of an hour.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

_TUNE = "import sys; from ortop.cli.tune import tune_main; sys.exit(tune_main(sys.argv[1:]))"
GROUP = 4


def run_tune(model: str, extra: list[str], budget: float) -> tuple[dict, float]:
    cmd = [sys.executable, "-c", _TUNE, model, "--budget", f"{budget:g}", "--json", *extra]
    t = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=budget * 3 + 120)
    took = time.monotonic() - t
    if out.returncode != 0:
        raise SystemExit(f"ortop tune failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout), took


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.1f} %"


def grid_search(model: str, start, space, objective: str, seconds: float, grid_max: int | None,
                block_s: float) -> tuple:
    """The exhaustive grid's best profile (see the module docstring), its label, and the grid's size."""
    from ortop.engine.answers.racer import WorkerRacer
    from ortop.measure.compare import compare

    grid = space.grid()
    full = len(grid)
    if grid_max is not None:
        grid = grid[:grid_max]
    t_end = time.monotonic() + seconds
    racer = WorkerRacer(model, block_s=block_s)
    try:
        failed = racer.prepare([start])
        if failed:
            raise SystemExit(f"the start profile failed: {failed[0]}")
        better = 1 if objective == "throughput" else -1
        scores: list[tuple[float, int]] = []
        groups = [list(range(i, min(i + GROUP, len(grid)))) for i in range(0, len(grid), GROUP)]
        phase1_end = time.monotonic() + 0.7 * (t_end - time.monotonic())
        for gi, members in enumerate(groups):
            share = (phase1_end - time.monotonic()) / (len(groups) - gi)
            profiles = [start] + [grid[i].profile for i in members]
            out = racer.race(profiles, max(share, 0.5))
            for j, i in enumerate(members, start=1):
                if j in out.failed:
                    print(f"   grid point failed: {grid[i].label}: {out.failed[j]}")
                    continue
                c = compare(out.blocks, 0, j, objective)
                if math.isfinite(c.change_pct):
                    scores.append((better * c.change_pct, i))
            racer.release([grid[i].profile for i in members])
        scores.sort(reverse=True)
        top = [i for _, i in scores[:3]]
        profiles = [start] + [grid[i].profile for i in top]
        out = racer.race(profiles, max(t_end - time.monotonic(), 1.0))
        final = [(0.0, -1)]  # the start profile itself is a grid point: change 0
        for j, i in enumerate(top, start=1):
            if j not in out.failed:
                c = compare(out.blocks, 0, j, objective)
                if math.isfinite(c.change_pct):
                    final.append((better * c.change_pct, i))
        score, best = max(final)
    finally:
        racer.close()
    if best < 0:
        return start, "the start profile", full, len(grid)
    return grid[best].profile, grid[best].label, full, len(grid)


def one_model(model: str, args: argparse.Namespace) -> dict:
    from dataclasses import replace

    from ortop.collectors.host import read_host
    from ortop.config import profile as profile_mod
    from ortop.engine.answers.space import ModelFacts, Space, describe, profile_key
    from ortop.engine.bench import ab
    from ortop.model import load_model

    print(f"\n== {model}")
    tuned_json, tune_s = run_tune(model, ["--space", args.space, "--objective", args.objective], args.budget)
    start = profile_mod.Profile(model=model)
    tuned = replace(profile_mod.from_dict(tuned_json["best"]["profile"]), model=model)
    print(f"tune: {tune_s:.1f} s wall; {describe(tuned, start)}; {tuned_json['best']['text']}")

    info = load_model(model)
    space = Space(start, read_host(), ModelFacts.from_model(info, start), args.space.split(","))
    grid_s = args.grid_seconds if args.grid_seconds else args.grid_factor * args.budget
    t = time.monotonic()
    from ortop.engine.answers.racer import block_target_for

    grid_best, grid_label, full, used = grid_search(model, start, space, args.objective, grid_s, args.grid_max,
                                                    block_target_for(args.budget))
    grid_took = time.monotonic() - t
    note = f" (first {used} of {full})" if used < full else ""
    print(f"grid: {used} points{note}, {grid_took:.1f} s wall; best: {grid_label}")

    if profile_key(grid_best) == profile_key(tuned):
        ratio, lo, hi, verdict = 1.0, 1.0, 1.0, "the same profile"
    else:
        res = ab.compare_profiles(model, [grid_best, tuned], budget_s=args.compare, names=["grid", "tuned"])
        c = res.comparison(1, args.objective)
        ratio = 1 + c.change_pct / 100 if c is not None else math.nan
        lo = 1 + c.ci_low_pct / 100 if c is not None and math.isfinite(c.ci_low_pct) else math.nan
        hi = 1 + c.ci_high_pct / 100 if c is not None and math.isfinite(c.ci_high_pct) else math.nan
        verdict = c.verdict if c is not None else "n/a"
    print(f"tuned / grid on {args.objective}: {ratio:.3f} (95 % CI {lo:.3f}…{hi:.3f}, {verdict}); "
          f"time: tune {tune_s:.1f} s vs grid {grid_took:.1f} s ({grid_took / tune_s:.1f}×)")
    return {"model": model, "tune_s": tune_s, "grid_s": grid_took, "ratio": ratio, "ci": [lo, hi],
            "verdict": verdict, "grid_points": used, "grid_size": full, "tuned": describe(tuned, start),
            "grid_best": grid_label, "tune_verdict": tuned_json["best"]["verdict"]}


def paced(model: str, args: argparse.Namespace) -> dict:
    print(f"\n== paced {args.rate:g} Hz, objective cpu: {model}")
    d, took = run_tune(model, ["--rate", f"{args.rate:g}", "--objective", "cpu", "--space", "spinning"], args.budget)
    best = d["best"]
    spin = best["profile"].get("session", {}).get("allow_spinning")
    base_cpu, best_cpu = d["baseline"]["cpu_ms_per_run"], best["cpu_ms_per_run"]
    fold = base_cpu / best_cpu if base_cpu and best_cpu else math.nan
    print(f"tune: {took:.1f} s wall; best: {', '.join(best['changes']) or 'the baseline'}")
    print(f"CPU per run {base_cpu} → {best_cpu} ms ({fold:.1f}× lower); change {_pct(best['change_pct'])} "
          f"(95 % CI {_pct(best['ci_low_pct'])}…{_pct(best['ci_high_pct'])}); spinning off: {spin is False}")
    return {"spinning_off": spin is False, "fold": fold, "change_pct": best["change_pct"],
            "ci": [best["ci_low_pct"], best["ci_high_pct"]], "tune_s": took}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="more models besides the demo")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--objective", default="p50", choices=("p50", "p99", "throughput", "cpu"))
    ap.add_argument("--space", default="threads,spinning,dynamic_block_base")
    ap.add_argument("--grid-factor", type=float, default=10.0, help="grid time = factor × budget")
    ap.add_argument("--grid-seconds", type=float, help="grid time in seconds (overrides --grid-factor)")
    ap.add_argument("--grid-max", type=int, help="only the first N grid points (a short check)")
    ap.add_argument("--compare", type=float, default=30.0, help="seconds for tuned vs grid best")
    ap.add_argument("--rate", type=float, default=50.0, help="the paced case's rate")
    ap.add_argument("--no-paced", action="store_true")
    args = ap.parse_args()

    from ortop.model.demo import ensure_demo

    demo = str(ensure_demo())
    rows = [one_model(m, args) for m in [demo, *[str(Path(m).resolve()) for m in args.models]]]
    paced_row = None if args.no_paced else paced(demo, args)
    print("\n== summary")
    for r in rows:
        print(f"{Path(r['model']).name}: tuned/grid {r['ratio']:.3f} (CI {r['ci'][0]:.3f}…{r['ci'][1]:.3f}, "
              f"{r['verdict']}); tune {r['tune_s']:.1f} s, grid {r['grid_s']:.1f} s over {r['grid_points']} of "
              f"{r['grid_size']} points; tuned: {r['tuned']}; grid: {r['grid_best']}")
    if paced_row:
        print(f"paced {args.rate:g} Hz cpu: spinning off {paced_row['spinning_off']}, CPU/run "
              f"{paced_row['fold']:.1f}× lower, change {_pct(paced_row['change_pct'])} "
              f"(CI {_pct(paced_row['ci'][0])}…{_pct(paced_row['ci'][1])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
