"""An A/A check of model comparison: a model against a byte-identical copy of it, ``--runs`` times.

    python bench/models_aa.py [MODEL] [--runs 10] [--budget 20] [--threads 1]

Each run is ``ortop compare MODEL COPY --json`` (the two files in that order on even runs, swapped on odd ones, so
neither always goes first). Nothing differs between them but the file's name, so every claim of a difference is a
false one:

- a speed claim: a significant verdict (faster or slower) on p50 or throughput;
- an output claim: outputs not identical (the same session on the same inputs must give the same bits), or flagged
  beyond the tolerance.

Target: no false difference in ten runs. Prints each run's verdicts and time to a decision, then the counts.
Runs are sequential (one comparison at a time: each is a measurement).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _compare(first: str, second: str, budget: float, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "ortop.cli", "compare", first, second, "--budget", str(budget), "--json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=budget * 4 + 120)
    if out.returncode != 0:
        raise SystemExit(f"ortop compare failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:+6.1f}"


def _fmt(c: dict) -> str:
    return f"{c['metric']:<10} {_pct(c['change_pct'])} % [{_pct(c['ci_low_pct'])}, {_pct(c['ci_high_pct'])}]  " \
           f"{c['verdict']}"


def _took(result: dict) -> str:
    if result["decided_s"] is None:
        return f"undecided after {result['elapsed_s']:.1f} s"
    return f"decided {result['decided_s']:.1f} s of {result['budget_s']:g}" + (" (early)" if result["stopped_early"]
                                                                             else "")


def output_claims(result: dict) -> list[str]:
    """Why the second configuration's outputs are not those of the first (empty: identical)."""
    second = result["configs"][1]
    out = list(second.get("outputs_differ") or [])
    agreement = second.get("agreement")
    if agreement is None:
        out.append(second.get("agreement_note") or "outputs not compared")
        return out
    for name, a in agreement.items():
        if a.get("max_abs") != 0 or a.get("nonfinite"):
            out.append(f"{name} max abs {a.get('max_abs')}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="the model (default: ortop's demo model)")
    ap.add_argument("--runs", type=int, default=10, help="A/A runs (default 10)")
    ap.add_argument("--budget", type=float, default=20.0, help="each comparison's budget, seconds (default 20)")
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads for both (default: ORT's)")
    args = ap.parse_args()
    model = args.model
    if model is None:
        from ortop.model.demo import ensure_demo

        model = str(ensure_demo())
    extra = [] if args.threads is None else ["--threads", str(args.threads)]

    speed = outputs = either = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = str(Path(tmp) / f"copy-of-{Path(model).name}")
        shutil.copyfile(model, copy)
        print(f"A/A: {model} against a byte-identical copy, {args.runs} × {args.budget:g} s")
        for i in range(args.runs):
            first, second = (model, copy) if i % 2 == 0 else (copy, model)
            result = _compare(first, second, args.budget, extra)
            cmp = {c["metric"]: c for c in result["comparisons"] if c["other"] == 1}
            claimed = [m for m in ("p50", "throughput") if cmp[m]["significant"]]
            moved = output_claims(result)
            speed += bool(claimed)
            outputs += bool(moved)
            either += bool(claimed or moved)
            note = ("   <- false speed claim" if claimed else "") + (f"   <- outputs: {'; '.join(moved)}" if moved
                                                                      else "")
            print(f"  {i + 1:>2}  {_fmt(cmp['p50'])}   {_fmt(cmp['throughput'])}   {_took(result)}{note}")

    print()
    print(f"A/A false differences (speed or outputs): {either} of {args.runs}")
    print(f"  speed (p50 or throughput significant): {speed} of {args.runs}")
    print(f"  outputs (not identical, or flagged): {outputs} of {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
