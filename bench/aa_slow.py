"""A/A at a slow pace: ORT's defaults against themselves, repeated, on a model that runs about ten times a second.

    python bench/aa_slow.py [--repeats 10] [--budget 20] [--batch 512] [--rate 0]

Each repeat runs ``ortop compare MODEL --profile defaults --profile defaults --threads 1 --fail-if p99:+5%
--fail-if p50:+5% --budget B --json`` (with ``--rate``: Poisson arrivals at that rate) on a MatMul of x [B, 2048] @
W [2048, 2048]. The same settings on both sides: any "faster", "slower", "more/less CPU per run" or a failed gate is
a false claim. It prints each repeat's verdicts and gate results, and the count of repeats with a false claim (the
claim holds at 0 of 10). Counts of verdicts, not a timing ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--rate", type=float, default=0.0)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.models import make_slow_model

    model = make_slow_model(Path(tempfile.mkdtemp()) / "slow.onnx", batch=args.batch)
    rate = ["--rate", str(args.rate), "--arrival", "poisson"] if args.rate > 0 else []
    false = 0
    for k in range(args.repeats):
        r = subprocess.run([sys.executable, "-m", "ortop", "compare", model, "--profile", "defaults", "--profile",
                            "defaults", "--threads", "1", *rate, "--fail-if", "p99:+5%", "--fail-if", "p50:+5%",
                            "--budget", str(args.budget), "--json"], capture_output=True, text=True,
                           timeout=args.budget * 4 + 120)
        try:
            d = json.loads(r.stdout)
        except json.JSONDecodeError:
            print(f"repeat {k}: exit {r.returncode}, no JSON: {r.stderr.strip()[-200:]}")
            continue
        verdicts = {c["metric"]: (c["verdict"], c["pairs"]) for c in d.get("comparisons", [])}
        gates = {g["spec"]: g["result"] for g in d.get("gates", [])}
        claims = [m for m, (v, _) in verdicts.items() if v in ("faster", "slower")] + \
                 [s for s, res in gates.items() if res == "fail"]
        false += bool(claims)
        print(f"repeat {k}: exit {r.returncode} gates {gates} verdicts {verdicts}"
              f"{'  FALSE CLAIM: ' + ', '.join(claims) if claims else ''}", flush=True)
    print(f"\nrepeats with a false claim: {false} of {args.repeats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
