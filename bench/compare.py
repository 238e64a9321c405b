"""Does `ortop compare` tell the truth on a drifting host? An A/A check of the method, then two real effects.

    python bench/compare.py [MODEL] [--budget 20] [--aa 10] [--tries 5] [--only TEXT]

1. A/A: the same profile against itself, ``--aa`` times. Nothing changed, so every "significant" verdict on p50 or
   throughput is a false positive. Target: at most one run of ten claims one.
2. Real effects, ``--tries`` times each: intra-op threads 1 vs 2 (judged on p50), spinning on vs off at a paced
   100 Hz (judged on CPU per run), and a 5 % change: the demo model's batch 20 against 21, one intra-op thread
   (5 % more work per run; judged on p50). Target: the right sign, decided, every time; for the 5 % change, how
   long a decision takes.

Each comparison stops once its objective's verdict is settled (``--budget`` is the most it takes): each run's line
ends with the time it took to a decision ("decided 6.2 s of 20", or "undecided" after the whole budget).

Prints each run's verdicts and, at the end, the false-positive count, the detection counts, the median interval
widths and, for the A/A runs and each real effect, the median time to a decision and how many stopped early. Runs
are sequential (one comparison at a time: each is a measurement).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _profile(directory: Path, name: str, body: str) -> str:
    path = directory / f"{name}.toml"
    path.write_text(body)
    return str(path)


def _compare(model: str, a: str, b: str, budget: float, extra: list[str], objective: str = "p50") -> dict:
    cmd = [sys.executable, "-m", "ortop.cli", "compare", model, a, b, "--budget", str(budget), "--json",
           "--objective", objective, *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=budget * 4 + 120)
    if out.returncode != 0:
        raise SystemExit(f"ortop compare failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def _by_metric(result: dict) -> dict[str, dict]:
    return {c["metric"]: c for c in result["comparisons"] if c["other"] == 1}


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:+6.1f}"


def _fmt(c: dict) -> str:
    interval = f"[{_pct(c['ci_low_pct'])}, {_pct(c['ci_high_pct'])}]"
    return f"{c['metric']:<10} {_pct(c['change_pct'])} % {interval}  {c['verdict']}"


def _took(result: dict) -> str:
    """When the comparison was decided: "decided 6.2 s of 20 (early)", or "undecided" after its whole budget."""
    if result["decided_s"] is None:
        return f"undecided after {result['elapsed_s']:.1f} s"
    return f"decided {result['decided_s']:.1f} s of {result['budget_s']:g}" + (" (early)" if result["stopped_early"]
                                                                             else "")


class Decisions:
    """Time to a decision per group of runs: the decided runs' times, how many stopped early, how many ran."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.early: dict[str, int] = {}
        self.runs: dict[str, int] = {}

    def add(self, label: str, result: dict) -> None:
        self.runs[label] = self.runs.get(label, 0) + 1
        self.early[label] = self.early.get(label, 0) + bool(result["stopped_early"])
        if result["decided_s"] is not None:
            self.times.setdefault(label, []).append(result["decided_s"])

    def lines(self, budget: float) -> list[str]:
        out = []
        for label, runs in self.runs.items():
            times = self.times.get(label, [])
            median = f"median {statistics.median(times):.1f} s of {budget:g}" if times else "none decided"
            out.append(f"time to a decision, {label}: {median} ({len(times)} of {runs} decided, "
                       f"{self.early[label]} stopped early)")
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="the model (default: ortop's demo model)")
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--aa", type=int, default=10, help="A/A runs")
    ap.add_argument("--tries", type=int, default=5, help="runs of each real effect")
    ap.add_argument("--only", default="", help="run only the real effects whose label holds this text (with --aa 0: "
                                                "only those)")
    args = ap.parse_args()
    model = args.model
    if model is None:
        from ortop.model.demo import ensure_demo

        model = str(ensure_demo())

    widths: dict[str, list[float]] = {}
    decisions = Decisions()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        one = _profile(d, "one", "[session]\nintra_op_num_threads = 1\n")
        one_again = _profile(d, "one-again", "[session]\nintra_op_num_threads = 1\n")
        two = _profile(d, "two", "[session]\nintra_op_num_threads = 2\n")
        spin = _profile(d, "spin", "[session]\nintra_op_num_threads = 2\nallow_spinning = true\n")
        nospin = _profile(d, "nospin", "[session]\nintra_op_num_threads = 2\nallow_spinning = false\n")
        batch20 = _profile(d, "batch20", "[session]\nintra_op_num_threads = 1\n[workload.dims]\nbatch = 20\n")
        batch21 = _profile(d, "batch21", "[session]\nintra_op_num_threads = 1\n[workload.dims]\nbatch = 21\n")

        false_pos = 0
        print(f"A/A: 1 thread against itself, {args.aa} × {args.budget:g} s")
        for i in range(args.aa):
            result = _compare(model, one, one_again, args.budget, [])
            decisions.add("A/A (p50)", result)
            cmp = _by_metric(result)
            claimed = [m for m in ("p50", "throughput") if cmp[m]["significant"]]
            false_pos += bool(claimed)
            for m in ("p50", "throughput"):
                if cmp[m]["ci_low_pct"] is not None:
                    widths.setdefault(f"A/A {m}", []).append(cmp[m]["ci_high_pct"] - cmp[m]["ci_low_pct"])
            print(f"  {i + 1:>2}  {_fmt(cmp['p50'])}   {_fmt(cmp['throughput'])}   {_took(result)}"
                  + ("   <- false positive" if claimed else ""))

        effects = [
            ("threads 1 → 2 (p50)", one, two, [], "p50", "faster"),
            ("spinning on → off at 100 Hz (cpu)", spin, nospin, ["--rate", "100"], "cpu", "faster"),
        ]
        if args.model is None:  # the demo model's free batch: 5 % more work
            effects.append(("batch 20 → 21, 5 % more work (p50)", batch20, batch21, [], "p50", "slower"))
        found: dict[str, int] = {}
        for label, a, b, extra, metric, want in [e for e in effects if args.only in e[0]]:
            print(f"{label}: {args.tries} × {args.budget:g} s")
            found[label] = 0
            for i in range(args.tries):
                result = _compare(model, a, b, args.budget, extra, objective=metric)
                decisions.add(label, result)
                c = _by_metric(result)[metric]
                ok = c["verdict"] == want and c["significant"]
                found[label] += ok
                if c["ci_low_pct"] is not None:
                    widths.setdefault(label, []).append(c["ci_high_pct"] - c["ci_low_pct"])
                print(f"  {i + 1:>2}  {_fmt(c)}   {_took(result)}" + ("" if ok else "   <- missed"))

    print()
    print(f"A/A false positives (p50 or throughput significant): {false_pos} of {args.aa}")
    for label, n in found.items():
        print(f"{label}: detected with the right sign {n} of {args.tries}")
    for label, ws in widths.items():
        print(f"median 95 % CI width, {label}: {statistics.median(ws):.1f} points")
    for line in decisions.lines(args.budget):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
