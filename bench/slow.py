"""Answers sized in requests at three paces: tune, capacity, a certification and a gate on models that run about
1 000, 100 and 10 times a second, each with the same budget.

    python bench/slow.py [--budget 60] [--paces 1000,100,10] [--out DIR] [--model MODEL --dim SYM=N ...]
    python bench/slow.py --paces 10 --commands capacity --repeats 6

Without ``--model`` the models are MatMuls of x [B, 2048] @ W [2048, 2048] on one thread, B picked per pace (2,
110 and 1280 on a quiet host here); the pace each one really ran at is measured and printed. For each: a 20 s
closed loop gives the model's p99, the SLO is twice that; then ``ortop tune --objective capacity``, ``ortop
capacity``, ``ortop capacity --certify`` at half the capacity found, and an A/A ``ortop compare --fail-if`` (ORT's
defaults against themselves), each with ``--budget``. Per pace it prints the requests behind each figure, the
budget used, the verdicts and exit codes, and whether any figure rests on fewer requests than its statistic
needs. Each command's JSON is kept in ``--out``. Nothing here is a timing ratio: the figures are counts and
verdicts, read from one run of each. ``--commands`` picks some of them (tune, capacity, certify, gate) and
``--repeats N`` runs each N times against the one SLO, to count how often an answer comes out the same.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCH = {1000: 2, 100: 110, 10: 1280}  # the paces on this host when nothing else runs (under load: a third)


def ortop(*args: object, timeout: float) -> tuple[int, dict, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ortop", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    took = time.monotonic() - t0
    try:
        out = json.loads(r.stdout) if r.stdout.strip() else {}
    except json.JSONDecodeError:
        out = {}
    if not out:
        out = {"stderr": r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else []}
    return r.returncode, out, took


def closed_loop(model: str, dims: list[str], seconds: float = 20.0) -> tuple[float, float, int]:
    """Runs/s and p99 of a closed loop: 20 s, so that even ten runs a second give a p99 its 100 runs (and more: a
    p99 of exactly 100 runs is the slowest but one)."""
    code, d, _ = ortop("run", model, "--threads", 1, *dims, "--headless", "--duration", seconds, "--json",
                       timeout=120)
    if code != 0:
        raise SystemExit(f"the closed loop failed on {model}: {d}")
    return float(d["throughput_per_s"]), float(d["latency_ms"]["p99"]), int(d["runs"])


def capacity_row(d: dict) -> dict:
    p = (d.get("profiles") or [{}])[0]
    pts = p.get("points") or []
    short = [x for x in pts if not x.get("enough", True)]
    nl = p.get("no_load") or {}
    return {"result": p.get("result"), "capacity": p.get("capacity_per_s"), "interval": p.get("interval"),
            "no_load_runs": nl.get("runs"), "no_load_enough": nl.get("enough"), "points": len(pts),
            "fewest_requests": min((x.get("arrived", 0) for x in pts), default=None),
            "points_short": len(short), "served_over_offered": sum(
                1 for x in pts if x.get("served_per_s", 0) > x.get("offered_per_s", 0) * 1.02),
            "elapsed_s": d.get("elapsed_s"), "warnings": len(d.get("warnings") or [])}


def certify_row(d: dict) -> dict:
    c = d.get("certification") or {}
    return {"verdict": c.get("verdict") or c.get("result"), "requests": c.get("requests") or c.get("runs"),
            "needed": c.get("needed"), "profile": d.get("applied"),
            "elapsed_s": d.get("elapsed_s")}


def tune_row(d: dict) -> dict:
    knee = d.get("knee") or {}
    base = d.get("baseline") or {}
    return {"verdict": d.get("verdict"), "raced": len(d.get("trials") or []),
            "not_tried": len(d.get("not_tried") or []),
            "baseline_runs": base.get("runs"), "knee": knee.get("result"), "bracket": knee.get("bracket_per_s"),
            "knee_needs_budget_s": knee.get("needs_budget_s"),
            "measured": d.get("measured"), "needs": d.get("needs"), "elapsed_s": d.get("elapsed_s")}


def gate_row(d: dict) -> dict:
    comps = d.get("comparisons") or []
    claims = [c.get("text") for c in comps if c.get("verdict") in ("faster", "slower")]
    return {"gate_result": d.get("gate_result"),
            "gates": {g.get("spec"): (g.get("result"), (g.get("judged_on") or {}).get("text"))
                      for g in d.get("gates", [])},
            "false_claims": claims, "elapsed_s": d.get("elapsed_s")}


def run_commands(commands: set[str], tag: str, model: str, dims: list[str], slo: float, rate: float,
                 one_thread: Path, budget: float, out: Path) -> None:
    """The chosen commands on one model at one SLO, each command's JSON kept in ``out`` under ``tag``."""
    wait = budget * 3 + 120
    rate_c = max(0.2, rate / 4)  # certified at half the capacity found, else at a quarter of the closed loop
    if "tune" in commands:
        code, d, took = ortop("tune", model, *dims, "--profile", one_thread, "--objective", "capacity", "--slo",
                              f"p99={slo}ms", "--budget", budget, "--json", timeout=wait)
        (out / f"{tag}-tune.json").write_text(json.dumps(d, indent=1))
        print(f"tune      exit {code}  {took:5.1f} s  {tune_row(d)}", flush=True)
    if "capacity" in commands:
        code, d, took = ortop("capacity", model, "--threads", 1, *dims, "--slo", f"p99={slo}ms", "--budget", budget,
                              "--json", timeout=wait)
        (out / f"{tag}-capacity.json").write_text(json.dumps(d, indent=1))
        cap = capacity_row(d)
        print(f"capacity  exit {code}  {took:5.1f} s  {cap}", flush=True)
        rate_c = (cap["capacity"] or 0) / 2 or rate_c
    if "certify" in commands:
        code, d, took = ortop("capacity", model, "--threads", 1, *dims, "--slo", f"p99={slo}ms", "--certify",
                              f"{rate_c:.3g}", "--min-duration", round(budget * 2 / 3), "--budget", budget, "--json",
                              timeout=wait)
        (out / f"{tag}-certify.json").write_text(json.dumps(d, indent=1))
        print(f"certify   exit {code}  {took:5.1f} s  at {rate_c:.3g}/s {certify_row(d)}", flush=True)
    if "gate" in commands:
        code, d, took = ortop("compare", model, *dims, "--profile", "defaults", "--profile", "defaults", "--threads",
                              1, "--fail-if", "p99:+5%", "--fail-if", "p50:+5%", "--budget", budget, "--json",
                              timeout=wait)
        (out / f"{tag}-gate.json").write_text(json.dumps(d, indent=1))
        print(f"A/A gate  exit {code}  {took:5.1f} s  {gate_row(d)}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--paces", default="1000,100,10", help="comma-separated target runs/s of the built-in models")
    ap.add_argument("--out", type=Path, default=None, help="folder for each command's JSON")
    ap.add_argument("--model", help="one model instead of the built-in ones (its --dim settings after it)")
    ap.add_argument("--dim", action="append", default=[], help="SYMBOL=N for --model")
    ap.add_argument("--commands", default="tune,capacity,certify,gate", help="which of tune, capacity, certify, gate")
    ap.add_argument("--repeats", type=int, default=1, help="run each command this many times (default 1)")
    args = ap.parse_args()
    commands = {c.strip() for c in args.commands.split(",") if c.strip()}
    if not commands or commands - {"tune", "capacity", "certify", "gate"} or args.repeats < 1:
        raise SystemExit("--commands takes tune, capacity, certify and gate, comma-separated; --repeats 1 or more")
    out = args.out or Path(tempfile.mkdtemp(prefix="slow-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from tests.models import make_slow_model

    if args.model:
        runs = [("model", args.model, [f"--dim={d}" for d in args.dim])]
    else:
        runs = [(f"{p}/s", make_slow_model(out / f"pace{p}.onnx", batch=BATCH[p]), [])
                for p in (int(x) for x in args.paces.split(","))]
    budget = args.budget
    one_thread = out / "one-thread.toml"  # tune starts where the closed loop and the SLO were measured
    one_thread.write_text('description = "one intra-op thread"\n[session]\nintra_op_num_threads = 1\n')
    for name, model, dims in runs:
        rate, p99, n = closed_loop(model, dims)
        slo = max(1, round(2 * p99, 1))
        print(f"\n== {name}: closed loop {rate:.1f} runs/s, p99 {p99:.3g} ms ({n} runs); SLO p99 ≤ {slo} ms",
              flush=True)
        for k in range(args.repeats):
            tag = f"{name.replace('/', '')}{f'-{k}' if args.repeats > 1 else ''}"
            run_commands(commands, tag, model, dims, slo, rate, one_thread, budget, out)
    print(f"\nJSON kept in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
