"""Do `ortop compare --fail-if` gates pass what did not change and fail what got slower? Two checks of the gates.

    python bench/gates.py [MODEL] [--aa 10] [--tries 3] [--budget 60] [--batch 64] [--threshold 5] [--dir DIR]

1. A/A: the same profile (one intra-op thread) as BASE and NEW, ``--aa`` times, gated with ``--fail-if p50:+5%``.
   Nothing changed, so every run should pass; a fail is a false alarm, an undecided run a gate too slow to tell.
   Target: at least 9 passes of 10.
2. A real regression, ``--tries`` times: BASE two intra-op threads, NEW one, on a model whose runs use both (the
   demo model at ``--batch`` rows a run), gated the same way. NEW is slower by far more than 5 %, so every run
   should fail. Target: 3 fails of 3.

Each run prints its gate result and exit code, the p50 change with the interval it was judged on, when it was
decided (the gates end the comparison at the first look that decides them; ``--budget`` is the most it takes),
and the command that reproduces it (the profiles are kept in ``--dir``). Runs are sequential, one comparison at a
time: each is a measurement, and wants the host to itself.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXPECT = {"pass": 0, "fail": 5, "undecided": 6}


def _profile(directory: Path, name: str, body: str) -> str:
    path = directory / f"{name}.toml"
    path.write_text(body)
    return str(path)


def _gate(model: str, base: str, new: str, spec: str, budget: float) -> tuple[dict, list[str], float]:
    """One gated comparison: its JSON, the command (without --json) and the wall time it took."""
    cmd = ["ortop", "compare", model, base, new, "--fail-if", spec, "--budget", f"{budget:g}"]
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ortop.cli", *cmd[1:], "--json"], capture_output=True, text=True,
                         timeout=budget * 4 + 120)
    took = time.monotonic() - t0
    if out.returncode not in EXPECT.values() or not out.stdout:
        raise SystemExit(f"ortop compare failed ({out.returncode}): {out.stderr.strip()}")
    data = json.loads(out.stdout)
    if data["exit_code"] != out.returncode or EXPECT[data["gate_result"]] != out.returncode:
        raise SystemExit(f"exit {out.returncode} disagrees with the JSON: {data['gate_result']}, "
                         f"exit_code {data['exit_code']}")
    return data, cmd, took


def _pct(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:+6.1f}"


def _line(i: int, data: dict, cmd: list[str], took: float) -> str:
    g = data["gates"][0]
    when = (f"decided at {data['decided_s']:.1f} s of {data['budget_s']:g}" if data["decided_s"] is not None
            else f"undecided after {data['elapsed_s']:.1f} s")
    looks = len(data["gate_looks"])
    return (f"  {i:>2}  {data['gate_result']:<9} exit {data['exit_code']}  p50 {_pct(g['change_pct'])} % "
            f"[{_pct(g['ci_low_pct'])}, {_pct(g['ci_high_pct'])}]  {when}, {looks} look{'s' if looks != 1 else ''}"
            f", {took:.0f} s with builds\n      {shlex.join(cmd)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="the model (default: ortop's demo model)")
    ap.add_argument("--aa", type=int, default=10, help="A/A runs (default 10)")
    ap.add_argument("--tries", type=int, default=3, help="runs of the real regression (default 3)")
    ap.add_argument("--budget", type=float, default=60.0, help="each comparison's budget, s (default 60)")
    ap.add_argument("--batch", type=int, default=64,
                    help="rows a run on the demo model, so that two threads have work to share (default 64)")
    ap.add_argument("--threshold", type=float, default=5.0, help="the gate: --fail-if p50:+X%% (default 5)")
    ap.add_argument("--dir", help="where the profiles are written, kept for the reproduce commands "
                                  "(default: a new folder under the temporary directory)")
    args = ap.parse_args()
    model = args.model
    if model is None:
        from ortop.model.demo import ensure_demo

        model = str(ensure_demo())
    d = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ortop-bench-gates-"))
    d.mkdir(parents=True, exist_ok=True)
    dims = f"\n[workload.dims]\nbatch = {args.batch}\n" if args.model is None else ""
    one = _profile(d, "one-thread", f"[session]\nintra_op_num_threads = 1\n{dims}")
    two = _profile(d, "two-threads", f"[session]\nintra_op_num_threads = 2\n{dims}")
    spec = f"p50:+{args.threshold:g}%"
    print(f"model {model}; profiles in {d}; gate --fail-if {spec}; budget {args.budget:g} s\n")

    counts = {"aa": dict.fromkeys(EXPECT, 0), "threads": dict.fromkeys(EXPECT, 0)}
    print(f"A/A: one thread against itself, {args.aa} runs (want pass)")
    for i in range(args.aa):
        data, cmd, took = _gate(model, one, one, spec, args.budget)
        counts["aa"][data["gate_result"]] += 1
        print(_line(i + 1, data, cmd, took))
    print(f"\nintra-op threads 2 → 1 (BASE two, NEW one), {args.tries} runs (want fail)")
    for i in range(args.tries):
        data, cmd, took = _gate(model, two, one, spec, args.budget)
        counts["threads"][data["gate_result"]] += 1
        print(_line(i + 1, data, cmd, took))

    aa, thr = counts["aa"], counts["threads"]
    aa_target = max(0, args.aa - args.aa // 10)  # 9 of 10
    print()
    print(f"A/A: {aa['pass']} of {args.aa} passed ({aa['fail']} failed, {aa['undecided']} undecided); target "
          f"≥ {aa_target}: {'met' if aa['pass'] >= aa_target else 'MISSED'}")
    print(f"threads 2 → 1: {thr['fail']} of {args.tries} failed ({thr['pass']} passed, {thr['undecided']} "
          f"undecided); target {args.tries}: {'met' if thr['fail'] == args.tries else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
