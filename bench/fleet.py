"""Does the fleet run in parallel? Three nodes of a local Ray cluster, each measuring ``ortop capacity`` with a
BUDGET, timed against that budget: the wall time less the budget is the fleet's fixed start-up (the cluster
joined, every node probed, each node's command started and its model shipped) plus whatever ran past the budget.

The cluster is made here (``ray.cluster_utils.Cluster``, one CPU each, two types) and timed apart: starting a
cluster is not part of a fleet run. On a host with fewer cores than nodes, the nodes' measurements share cores:
each node's capacity is then what a third of the host serves while its neighbours load the rest, not what a host of
its type serves.

    flock /tmp/ortop-timing.lock python bench/fleet.py [--budget S] [--model MODEL]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=40.0)
    ap.add_argument("--model", help="default: a 256-wide matmul made here, batch 16")
    args = ap.parse_args()
    from ray.cluster_utils import Cluster

    from tests.models import make_matmul_model

    folder = tempfile.mkdtemp(prefix="ortop-bench-fleet-")
    model = args.model or make_matmul_model(os.path.join(folder, "m.onnx"), n=256)
    t0 = time.monotonic()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"ortop-type:small": 1},
                                                      "include_dashboard": False})
    c.add_node(num_cpus=1, resources={"ortop-type:small": 1})
    c.add_node(num_cpus=1, resources={"ortop-type:big": 1})
    c.wait_for_nodes()
    cluster_s = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "ortop", "fleet", "capacity", model, "--dim", "batch=16",
                              "--threads", "1", "--slo", "p99=20ms", "--budget", f"{args.budget:g}", "--json",
                              "--cluster", c.address], capture_output=True, text=True, timeout=args.budget * 4 + 120)
        wall = time.monotonic() - t1
    finally:
        c.shutdown()
    data = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"cluster of 3 nodes started in {cluster_s:.1f} s (not counted)")
    print("| node | type | status | on the node (s) | capacity /s (interval) |")
    print("|---|---|---|---|---|")
    for n in data["nodes"]:
        p = ((n.get("result") or {}).get("profiles") or [{}])[0]
        iv = p.get("interval") or [None, None]
        took = (n["ended_at"] - n["started_at"]) if n.get("ended_at") else float("nan")
        cap = (f"{p.get('capacity_per_s'):.0f} ({iv[0]:.0f}–{iv[1]:.0f})" if p.get("met") and iv[0] is not None
               else p.get("result", "?"))
        print(f"| {n['node']['id'][:12]} | {n['node']['type']} | {n['status']} | {took:.1f} | {cap} |")
    starts = [n["started_at"] for n in data["nodes"]]
    ends = [n["ended_at"] for n in data["nodes"]]
    print()
    print("| budget | fleet wall | wall − budget | first start → last end on the nodes | nodes' starts spread |")
    print("|---|---|---|---|---|")
    print(f"| {args.budget:g} s | {wall:.1f} s | {wall - args.budget:.1f} s | {max(ends) - min(starts):.1f} s | "
          f"{max(starts) - min(starts):.2f} s |")
    print(f"exit {out.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
