"""Is ``ortop capacity``'s interval honest? N searches back to back on each model, each interval against the others.

``ortop capacity`` gives each capacity an interval at 90 % confidence: where a rerun of the same search on the same
host is expected to land (:mod:`ortop.measure.rerun`). This bench reruns it. Per model:

1. The SLO: ``--slo`` ms (p99 of response time), or ``--slo-factor`` × the p50 of a 5 s closed loop.
2. N searches (``--runs``, default 10) back to back, each ``ortop capacity --budget B --json`` with arrivals of its
   own (``--seed``), every one with the same flags.
3. For each run: its capacity and interval, and whether the interval holds the median of the other N − 1 runs'
   capacities (a rerun's typical landing place: the median, so that one run caught in a stall does not decide it;
   a run that met no rate within its budget landed at 0, and counts so).

What is printed per model, and the targets:

* how many of the N intervals hold the others' median: at least 8 of 10 for a 90 % interval (7 of 10 happens to
  an honest one one time in 14: a miss of the target says look again, not that the method is wrong);
* the median interval half-width (in log terms, as a share: (ln hi − ln lo) / 2) against the runs' own spread (sd
  of log capacity): an honest 90 % interval's half-width is about 1.645 × the sd a rerun shows. Above 2.5 × it is
  merely wide: it holds the others because it holds everything, which says nothing about the method.

Runs are sequential and nothing else should run on the host meanwhile (the drift being measured is the host's own).
Each model's searches keep their stalls' record (``stall-shares.jsonl``) in a state folder of that model's own, empty
at its first search: as a user rerunning one search finds it, the first three read only themselves, and the later
ones the earlier ones' shares too. The reproduce command is printed first.

    python bench/capacity_rerun.py MODEL [MODEL ...] [--runs 10] [--budget 60] [--slo MS | --slo-factor 8]
                                   [--dim SYM=N ...] [--shape NAME=1x3x96x96 ...] [--threads 1] [--no-spinning]
                                   [--keep FILE.jsonl] [--aa]

With ``--aa`` each search is an A/A: the same settings under two names (``--profile a.toml --profile b.toml``, both
the flags given), searched side by side as two profiles are. Per run it prints both capacities and intervals, the
"best" the search named and whether it called it separated; the targets: no separated "best" in any run, and the
two intervals overlapping in at least 9 of 10. Each of the two searches also counts as a rerun of the others.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def ortop(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "ortop.cli", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ortop {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def half_width(lo: float, hi: float) -> float:
    """An interval's half-width in log terms (as a share of the capacity)."""
    return (math.log(hi) - math.log(lo)) / 2


def held(runs: list[dict]) -> list[bool | None]:
    """Per run: whether its interval holds the median of the other runs' capacities (None: no interval)."""
    out: list[bool | None] = []
    for i, r in enumerate(runs):
        others = [x["capacity"] for j, x in enumerate(runs) if j != i]  # a rerun that met nothing landed at 0
        if r["interval"] is None or not others:
            out.append(None)
            continue
        m = statistics.median(others)
        out.append(r["interval"][0] <= m <= r["interval"][1])
    return out


def verdict(runs: list[dict]) -> str:
    """The model's summary: intervals holding the others' median, and the half-width against the runs' sd."""
    h = held(runs)
    judged = [x for x in h if x is not None]
    caps = [r["capacity"] for r in runs if r["capacity"] > 0]
    widths = [half_width(*r["interval"]) for r in runs if r["interval"] is not None]
    sd = statistics.stdev(math.log(c) for c in caps) if len(caps) >= 2 else math.nan
    hw = statistics.median(widths) if widths else math.nan
    ratio = hw / sd if sd > 0 else math.nan
    need = math.ceil(0.8 * len(judged))
    text = (f"  {sum(judged)} of {len(judged)} intervals hold the others' median (target at least {need}); "
            f"median half-width {100 * hw:.1f} % against the runs' sd {100 * sd:.1f} % (× {ratio:.2f}; an honest "
            "90 % interval ≈ × 1.645")
    if math.isfinite(ratio) and ratio > 2.5:
        text += "; above × 2.5: merely wide, not shown honest"
    zero = sum(1 for r in runs if not r["capacity"] > 0)
    return text + ")" + (f"; {zero} run(s) met no rate (capacity 0), left out of the sd" if zero else "")


def run_of(p: dict) -> dict:
    """One profile's capacity and interval from a search's JSON."""
    span = p.get("interval")
    return {"capacity": float(p["capacity_per_s"] or 0.0),
            "interval": (float(span[0]), float(span[1])) if span and None not in span else None}


def aa_line(k: int, d: dict, took_s: float) -> tuple[bool, bool | None]:
    """Print one A/A search; (a separated best was named, the two intervals overlap: None unless both have one)."""
    a, b = (run_of(p) for p in d["profiles"][:2])
    ia, ib = a["interval"], b["interval"]
    overlap = None if ia is None or ib is None else ia[0] <= ib[1] and ib[0] <= ia[1]
    separated = bool(d.get("best_separated"))

    def one(r: dict) -> str:
        iv = r["interval"]
        return f"{r['capacity']:8.1f}/s " + (f"({iv[0]:.1f}–{iv[1]:.1f})" if iv else "(no interval)")

    print(f"  run {k + 1:>2}: a {one(a)}  b {one(b)}  best {d.get('best')}"
          f"{' separated' if separated else ''}  intervals "
          f"{'—' if overlap is None else 'overlap' if overlap else 'APART'}  {took_s:.0f} s",
          flush=True)
    return separated, overlap


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--runs", type=int, default=10, help="searches per model, back to back (default 10)")
    ap.add_argument("--budget", type=float, default=60.0, help="each search's --budget in seconds (default 60)")
    ap.add_argument("--slo", type=float, help="p99 limit in ms (default: --slo-factor × the closed loop's p50)")
    ap.add_argument("--slo-factor", type=float, default=8.0)
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (0: ORT's default)")
    ap.add_argument("--no-spinning", action="store_true", help="the pool's spin-wait off (a tail set by wake-ups)")
    ap.add_argument("--keep", metavar="FILE.jsonl", help="also write every search's JSON result, one line each")
    ap.add_argument("--aa", action="store_true", help="each search an A/A: the same settings under two names")
    a = ap.parse_args()
    if a.runs < 2:
        ap.error("--runs must be at least 2 (each interval is set against the other runs)")
    print("reproduce: python bench/capacity_rerun.py " + shlex.join(sys.argv[1:]), flush=True)
    common = [x for d in a.dim for x in ("--dim", d)] + [x for s in a.shape for x in ("--shape", s)]
    common += ["--threads", str(a.threads)] + (["--no-spinning"] if a.no_spinning else [])
    keep = open(a.keep, "w") if a.keep else None
    twins: list[str] = []
    if a.aa:
        folder = tempfile.mkdtemp(prefix="ortop-aa-")
        for name in ("a", "b"):
            path = os.path.join(folder, f"{name}.toml")
            with open(path, "w") as f:
                f.write(f'description = "the same settings as the other, under the name {name}"\n')
            twins += ["--profile", path]
    seed = 5000
    try:
        for model in a.models:
            os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="ortop-state-")  # this model's record alone
            if a.slo:
                slo = a.slo
            else:
                closed = ortop(model, "--headless", "--json", "--duration", "5", *common)
                slo = round(a.slo_factor * closed["latency_ms"]["p50"], 2)
            print(f"\n{model}  (p99 ≤ {slo:g} ms, {a.runs} searches of --budget {a.budget:g} s)", flush=True)
            runs = []
            pairs: list[tuple[bool, bool | None]] = []  # per A/A run: a separated best, the intervals overlap
            for k in range(a.runs):
                seed += 1
                t = time.monotonic()
                d = ortop("capacity", model, "--slo", f"p99={slo}ms", "--budget", str(a.budget), "--json",
                          "--seed", str(seed), *common, *twins)
                if a.aa:
                    pairs.append(aa_line(k, d, time.monotonic() - t))
                    runs += [run_of(p) for p in d["profiles"]]
                    if keep is not None:
                        keep.write(json.dumps({"model": model, "run": k, "result": d}) + "\n")
                        keep.flush()
                    continue
                if keep is not None:
                    keep.write(json.dumps({"model": model, "run": k, "result": d}) + "\n")
                    keep.flush()
                p = d["profiles"][0]
                cap = float(p["capacity_per_s"] or 0.0)
                span = p.get("interval")
                iv = (float(span[0]), float(span[1])) if span and None not in span else None
                runs.append({"capacity": cap, "interval": iv})
                terms = p.get("interval_terms") or {}
                noise = d.get("host_noise") or {}
                print(f"  run {k + 1:>2}: {cap:8.1f}/s  interval "
                      + (f"{iv[0]:8.1f}–{iv[1]:8.1f}/s" if iv else "—".center(20))
                      + f"  (tail {terms.get('tail_sd')}, drift {terms.get('drift_sd')}, bracket "
                        f"{terms.get('bracket_sd')}, stalls {terms.get('stall_sd')} (moves "
                        f"{terms.get('stall_moves')} from {terms.get('stall_moves_from')}); "
                        f"slope {terms.get('slope')}; "
                        f"slow share {noise.get('slow_share')})  "
                        f"{time.monotonic() - t:.0f} s", flush=True)
            if a.aa:
                sep = sum(1 for x in pairs if x[0])
                both = [x[1] for x in pairs if x[1] is not None]
                print(f"  A/A: a separated best named in {sep} of {len(pairs)} (target 0); the two intervals overlap "
                      f"in {sum(both)} of the {len(both)} runs where both profiles met a rate (target at least "
                      f"{math.ceil(0.9 * len(both))})", flush=True)
            for k, h in enumerate(held(runs)):
                if h is False:
                    print(f"  run {k + 1}'s interval misses the others' median", flush=True)
            print(verdict(runs), flush=True)
    finally:
        if keep is not None:
            keep.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
