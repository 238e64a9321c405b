"""Long runs: does ortop stay flat? A fast model headless and in the TUI, memory and UI CPU over time.

    python bench/soak.py [MODEL] [--minutes 10] [--interval 30] [--modes headless,tui]

Runs ``ortop MODEL --headless --duration MINUTES*60`` and then ``ortop MODEL`` in tmux (120×40) for the same time,
sampling every ``--interval`` seconds with psutil: the monitor's RSS (the ortop process), the worker's RSS (its
child) and, in the TUI run, the UI process's CPU over the last interval. Prints a row per sample and the start/end
figures. A leak shows as RSS climbing interval after interval; a UI that gets slower, as CPU rising.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

MB = 2**20


def _ortop() -> str:
    return shutil.which("ortop") or str(Path(sys.executable).with_name("ortop"))


def _worker(proc: psutil.Process) -> psutil.Process | None:
    kids = [k for k in proc.children(recursive=True) if "resource_tracker" not in " ".join(k.cmdline())]
    return max(kids, key=lambda k: k.memory_info().rss) if kids else None


def _sample(proc: psutil.Process, cpu_prev: tuple[float, float] | None) -> tuple[dict, tuple[float, float]]:
    now = time.monotonic()
    cpu = sum(proc.cpu_times()[:2])
    worker = _worker(proc)
    row = {"monitor_mb": proc.memory_info().rss / MB,
           "worker_mb": worker.memory_info().rss / MB if worker else float("nan")}
    if cpu_prev is not None:
        row["ui_cpu_pct"] = 100 * (cpu - cpu_prev[0]) / (now - cpu_prev[1])
    return row, (cpu, now)


def _watch(proc: psutil.Process, seconds: float, interval: float, label: str) -> list[dict]:
    rows: list[dict] = []
    t0 = time.monotonic()
    prev = None
    time.sleep(min(10.0, seconds / 4))  # past start-up and the first build
    while time.monotonic() - t0 < seconds and proc.is_running():
        row, prev = _sample(proc, prev)
        row["t_s"] = time.monotonic() - t0
        rows.append(row)
        cpu = f"  UI {row['ui_cpu_pct']:.1f} %" if "ui_cpu_pct" in row else ""
        print(f"{label:>8} {row['t_s']:6.0f} s  monitor {row['monitor_mb']:6.1f} MB  worker {row['worker_mb']:6.1f} MB"
              f"{cpu}", flush=True)
        time.sleep(interval)
    return rows




def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default="headless,tui", help="which runs: headless, tui or both (default both)")
    args = ap.parse_args()
    modes = {m.strip() for m in args.modes.split(",") if m.strip()}
    if not modes or modes - {"headless", "tui"}:
        raise SystemExit("--modes takes headless, tui or headless,tui")
    model = args.model
    if model is None:
        from ortop.model.demo import ensure_demo

        model = str(ensure_demo())
    seconds = args.minutes * 60
    summary: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": tmp}
        if "headless" in modes:
            p = subprocess.Popen([_ortop(), model, "--headless", "--duration", str(seconds), "--threads",
                                  str(args.threads), "--json"], stdout=subprocess.DEVNULL, env=env)
            try:
                summary["headless"] = _watch(psutil.Process(p.pid), seconds, args.interval, "headless")
            finally:
                p.wait(timeout=60)
        if "tui" not in modes:
            return _report(summary)
        session = f"ortop-soak-{os.getpid()}"
        subprocess.run(["tmux", "-L", session, "new", "-d", "-s", session, "-x", "120", "-y", "40",
                        f"env XDG_STATE_HOME={tmp} {_ortop()} {model} --threads {args.threads}"], check=True)
        try:
            time.sleep(3)
            pid = int(subprocess.run(["tmux", "-L", session, "list-panes", "-t", session, "-F", "#{pane_pid}"],
                                     capture_output=True, text=True, check=True).stdout.split()[0])
            summary["tui"] = _watch(psutil.Process(pid), seconds, args.interval, "tui")
            subprocess.run(["tmux", "-L", session, "send-keys", "-t", session, "q"], check=True)
            time.sleep(3)
        finally:
            subprocess.run(["tmux", "-L", session, "kill-server"], capture_output=True)
    return _report(summary)


def _report(summary: dict[str, list[dict]]) -> int:
    print()
    for mode, rows in summary.items():
        if not rows:
            continue
        a, b = rows[0], rows[-1]
        line = (f"{mode:>8}: monitor {a['monitor_mb']:.1f} → {b['monitor_mb']:.1f} MB, worker {a['worker_mb']:.1f} → "
                f"{b['worker_mb']:.1f} MB over {b['t_s']:.0f} s")
        cpus = [r["ui_cpu_pct"] for r in rows if "ui_cpu_pct" in r]
        if mode == "tui" and cpus:
            line += f"; UI CPU first {cpus[0]:.1f} %, last {cpus[-1]:.1f} %, max {max(cpus):.1f} %"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
