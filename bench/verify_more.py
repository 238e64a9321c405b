"""Does the live view's "about N s more would decide" come true? ``v`` pressed, and pressed again when it said so.

    python bench/verify_more.py [--cases 10] [--first 3] [--batch 40] [--rate 0] [--changes mixed|threads]

A Monitor runs a MatMul of x [B, 2048] @ W [2048, 2048] (B = ``--batch``: about a hundred runs a second on one thread
here), closed loop or at ``--rate`` Poisson. Each case applies a change (one thread ↔ two, spinning off ↔ on,
alternately; every other case the same settings again, an A/A) and verifies it for ``--first`` seconds: short
enough that it is often undecided and says how much more would decide. Then ``v`` again with the default length,
which is at least what the first press said (capped at two minutes), and the second press's verdict is read. It
prints each case and the share of cases with an "about N s more" that the second press decided: the claim holds when
that share is at least 8 in 10. Counts of verdicts, not a timing ratio.

``--changes threads`` makes every case a real change (one thread ↔ two), the kind an estimate is shown for; with
``--batch 400`` (about ten runs a second on one thread here) a short first press leaves most of them undecided.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECIDED = ("faster", "slower", "no difference")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10)
    ap.add_argument("--first", type=float, default=3.0, help="seconds of the first press")
    ap.add_argument("--batch", type=int, default=40)
    ap.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals per second (0: closed loop)")
    ap.add_argument("--changes", choices=("mixed", "threads"), default="mixed",
                    help="mixed: threads, spinning and the same settings again in turn; threads: every case 1 ↔ 2")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from ortop.config.profile import Profile, merge
    from ortop.engine import Monitor
    from tests.models import make_slow_model

    model = make_slow_model(Path(tempfile.mkdtemp()) / "m.onnx", batch=args.batch)
    workload = {"workload.rate_hz": args.rate, "workload.arrival": "poisson"} if args.rate > 0 else {}
    base = merge(Profile(), **{"session.intra_op_num_threads": 1, **workload})
    mon = Monitor(model, base)
    mon.start()
    shown = came_true = 0
    try:
        if not mon.wait_ready(120):
            print("the first build did not finish", file=sys.stderr)
            return 1
        current = base
        for k in range(args.cases):
            if k % 2 and args.changes == "mixed":
                change = current  # the same settings again
            elif k % 4 == 0 or args.changes == "threads":
                change = merge(current, **{"session.intra_op_num_threads":
                                           3 - current.session.intra_op_num_threads})
            else:
                spin = current.session.allow_spinning is not False  # unset: ORT spins
                change = merge(current, **{"session.allow_spinning": not spin})
            cid = mon.apply(change)
            deadline = time.monotonic() + 120
            while not (mon.snapshot().config_id == cid and mon.snapshot().runs >= 50):
                if time.monotonic() > deadline:
                    print(f"case {k}: #{cid} never measured", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            current = change
            first = mon.verify(cid, seconds=args.first).result(timeout=600)
            main_c = next((c for c in first.comparisons if c.metric == first.metric), None) if first else None
            more = main_c.seconds_more if main_c is not None else None
            line = f"case {k}: {first.metric if first else '?'} first {first.kind if first else 'none'}"
            if first is not None and first.kind == "undecided" and more is not None and more < 300:
                shown += 1
                t0 = time.monotonic()
                second = mon.verify(cid).result(timeout=900)
                took = time.monotonic() - t0
                ok = second is not None and second.kind in DECIDED
                came_true += ok
                line += (f", said about {more:.0f} s more; second press {took:.0f} s: "
                         f"{second.kind if second else 'none'} {'✓' if ok else '✗'}")
            print(line, flush=True)
    finally:
        mon.stop()
    print(f"\n'about N s more' shown in {shown} of {args.cases} cases; the next press decided {came_true} of {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
