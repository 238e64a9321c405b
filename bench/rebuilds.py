"""Quick rebuilds: does the worker hold what superseded builds made? The live view's b key, pressed in bursts.

    python bench/rebuilds.py [MODEL] [--shape x=1x3x224x224] [--bursts 3] [--presses 10] [--gap 0.33]

Starts a Monitor on MODEL (without one: a 16 MB MatMul that runs about 18 times a second on one thread here, so a
build with its warm-up outlasts the gap between presses), then applies ``session.dynamic_block_base`` unset ↔ 4
``--presses`` times ``--gap`` seconds apart, ``--bursts`` times, 3 s apart, as the live view's ``b`` key does. It
prints the worker's RSS after the first build, after one rebuild and after each burst, and the last against the one
rebuild as a ratio (a worker that keeps its superseded builds grows by a session's footprint per press). Run it from
two checkouts (``PYTHONPATH=src``) to compare them: RSS is a count of pages, not a timing, so one run of each says it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil

MB = 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="an ONNX model (default: a built-in 16 MB MatMul)")
    ap.add_argument("--shape", action="append", default=[], metavar="INPUT=AxBxC", help="a whole input shape")
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--presses", type=int, default=10)
    ap.add_argument("--gap", type=float, default=0.33, help="seconds between presses")
    args = ap.parse_args()

    from ortop.config.profile import Profile, merge
    from ortop.engine import Monitor

    model = args.model
    if model is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.models import make_matmul_model

        model = make_matmul_model(Path(tempfile.mkdtemp()) / "m.onnx", n=2048, batch=256)
    shapes = {}
    for s in args.shape:
        name, _, dims = s.partition("=")
        shapes[name] = [int(d) for d in dims.split("x")]
    start = merge(Profile(), **{"session.intra_op_num_threads": 1, "workload.warmup_runs": 3,
                                **({"workload.shapes": shapes} if shapes else {})})
    mon = Monitor(model, start)
    mon.start()
    try:
        if not mon.wait_ready(120):
            print("the first build did not finish", file=sys.stderr)
            return 1

        def settled() -> float:
            deadline = time.monotonic() + 120
            while mon.snapshot().pending is not None or mon.snapshot().state != "measuring":
                if time.monotonic() > deadline:
                    raise SystemExit("the rebuilds did not settle in 120 s")
                time.sleep(0.1)
            time.sleep(1.5)
            pid = mon.worker_pid()
            assert pid is not None
            return psutil.Process(pid).memory_info().rss / MB

        first = settled()
        dbb: int | None = 4
        mon.apply(merge(start, **{"session.dynamic_block_base": dbb}))
        one = settled()
        print(f"worker RSS after the first build {first:.0f} MB, after one rebuild {one:.0f} MB")
        last = one
        for burst in range(args.bursts):
            for _ in range(args.presses):
                dbb = None if dbb else 4
                mon.apply(merge(start, **{"session.dynamic_block_base": dbb}))
                time.sleep(args.gap)
            time.sleep(3)
            last = settled()
            print(f"after burst {burst + 1} ({args.presses} presses {args.gap:g} s apart): {last:.0f} MB")
        print(f"RSS after {1 + args.bursts * args.presses} rebuilds / after one: ×{last / one:.2f}")
    finally:
        mon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
