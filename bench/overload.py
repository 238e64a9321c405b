"""Does an overloaded capacity point serve what the model can? One point at twice the closed-loop ceiling (a
256-wide MatMul at batch 64, one thread, Poisson arrivals): the figure is served ÷ ceiling, both read within the
same search, so the host's drift between runs cancels.

With ``--against SRC`` (another checkout's ``src`` folder) the two code trees are alternated round by round, and
this tree is also run against itself (an A/A check of the method): the ratio of this tree to the other with a 95 %
t-interval over the rounds' log ratios, and the same for the A/A pair, which should include 1.

    python bench/overload.py [--rounds 6] [--against /path/to/other/checkout/src]

Each point runs in its own process (the tree under test on PYTHONPATH); nothing else should run on the host.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

POINT = r"""
import os, sys, tempfile
sys.path.insert(0, {tests!r})
from tests.models import make_matmul_model
from ortop.engine.answers.capacity import Slo
from ortop.engine.answers.capacity_search import CapacitySearch
from ortop.config import profile as P
from ortop.config.profile import Profile

def main():
    d = tempfile.mkdtemp()
    for xdg in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        os.environ[xdg] = d
    model = make_matmul_model(os.path.join(d, "mm.onnx"), n=256)
    prof = P.merge(Profile(), **{{"model": model, "session.intra_op_num_threads": 1, "workload.warmup_runs": 20,
                                  "workload.dims": {{"batch": 64}}}})
    search = CapacitySearch(model, [prof], Slo("p99", 10_000.0), budget_s=60, point_max_s=3)
    search._budget.start()
    try:
        search._build()
        search._ceilings()
        (s,) = search.searches
        rate = 2 * s.ceiling_per_s
        search._point(rate, [s])
        print(s.points[rate].served_per_s() / s.ceiling_per_s)
    finally:
        search._pool.close()

if __name__ == "__main__":
    main()
"""


def served_share(src: str, script: str) -> float:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"the point failed under {src}: {out.stderr.strip()[-400:]}")
    return float(out.stdout.strip().splitlines()[-1])


def ratio_ci(logs: list[float]) -> str:
    from scipy import stats

    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    t = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return f"×{math.exp(mean):.3f} (95 % CI ×{math.exp(mean - t):.3f}…×{math.exp(mean + t):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--against", metavar="SRC", help="another checkout's src folder, alternated with this one")
    a = ap.parse_args()
    if a.rounds < 2:
        ap.error("--rounds must be at least 2 (an interval needs two rounds)")
    here = os.path.join(HERE, "src")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "point.py")
        with open(script, "w") as fh:
            fh.write(POINT.format(tests=HERE))
        print("reproduce: python bench/overload.py " + " ".join(sys.argv[1:]), flush=True)
        rows = []
        for k in range(a.rounds):
            other = served_share(a.against, script) if a.against else math.nan
            this, again = served_share(here, script), served_share(here, script)
            rows.append((other, this, again))
            print(f"  round {k + 1}: served ÷ ceiling  other {other:.3f}  this {this:.3f}  this again {again:.3f}",
                  flush=True)
    print(f"this tree served {min(r[1] for r in rows):.0%}–{max(r[1] for r in rows):.0%} of the ceiling".replace(
        "%", " %"))
    print("A/A (this against itself): " + ratio_ci([math.log(r[2] / r[1]) for r in rows]))
    if a.against:
        print("this against the other:   " + ratio_ci([math.log(r[1] / r[0]) for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
