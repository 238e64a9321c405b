"""What does the live UI cost? The TUI in a real terminal (tmux, 120×40) against a bare loop.

Each round runs, in turn, a bare ``while True: sess.run(None, feed)`` loop and ``ortop MODEL`` in tmux for the same
time with the same session options; ortop writes its summary at quit (``--summary``), which carries the model's
throughput and the UI process's own CPU time (``monitor.cpu_s`` / ``monitor.wall_s``).

    python bench/tui.py [MODEL] [--threads N] [--duration S] [--rounds R] [--refresh HZ] [--metrics-port PORT]
                        [--window S] [--against SRC]

With ``--window`` the UI's CPU is also read over the first and the last S seconds after settling, in one run (e.g.
``--duration 300 --window 60``: minute 0–1 against minute 4–5): a cost that grows with the run shows there.

With ``--against SRC`` the reference is not the bare loop but the TUI of another checkout (SRC: its ``src`` folder,
put first on PYTHONPATH), the two in turn in each round, the order swapped every other round: what a change costs
the live view. ``--against`` this checkout's own ``src`` is the A/A.

With ``--metrics-port`` the TUI also serves its Prometheus endpoint, scraped here every second.

"UI % steady" is the ortop process's CPU from SETTLE_S after start to the end (read with psutil); "UI % live"
counts from the first frame (the summary's live_cpu_s / live_wall_s: the first paint and session build included);
"UI % all" also includes imports and start-up.

Targets: throughput >= 0.98 × the bare loop on a 1–10 ms model; UI <= 3 % of one core at the default refresh.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import Scraper, run_bare, with_src  # noqa: E402  (same bare loop as the headless benchmark)

SETTLE_S = 8.0  # start-up, the first build and the first full paint are over by then


def run_tui(model: str, threads: int, duration: float, refresh: float, size: tuple[int, int],
            metrics_port: int | None = None, window: float | None = None, src: str | None = None) -> dict:
    ortop = shutil.which("ortop") or str(Path(sys.executable).with_name("ortop"))
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        session = f"ortop-bench-{os.getpid()}"
        cmd = (f"{ortop} {model} --threads {threads} --refresh {refresh} --summary {summary} "
               f"--profile-dir {tmp}" + (f" --metrics-port {metrics_port}" if metrics_port else ""))
        scraper = Scraper(metrics_port, 1.0) if metrics_port else None
        env_state = f"XDG_STATE_HOME={tmp}" + (f" PYTHONPATH={shlex.quote(os.path.abspath(src))}" if src else "")
        subprocess.run(["tmux", "new", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]),
                        f"env {env_state} {cmd}"], check=True)
        try:
            if scraper is not None:
                scraper.__enter__()
            time.sleep(SETTLE_S)
            ui = ui_process(session)
            marks = [(sum(ui.cpu_times()[:2]), time.monotonic())]  # (UI CPU s, time) at settle, window ends, end
            for wait in window_waits(duration, window):
                time.sleep(wait)
                marks.append((sum(ui.cpu_times()[:2]), time.monotonic()))
            (cpu0, t0), (cpu_end, t_end) = marks[0], marks[-1]
            steady = 100 * (cpu_end - cpu0) / (t_end - t0)
            share = [100 * (c1 - c0) / (t1 - t0) for (c0, t0), (c1, t1) in zip(marks, marks[1:])]
            first, last = (share[0], share[-1]) if len(share) == 3 else (steady, steady)
            subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
            deadline = time.monotonic() + 20
            while not summary.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            if scraper is not None:
                scraper.__exit__()
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        if scraper is not None and scraper.ok == 0:
            raise SystemExit(f"no scrape of {scraper.url} succeeded: is the endpoint up?")
        if not summary.exists():
            raise SystemExit("ortop wrote no summary: did it start? run the command by hand to see")
        d = json.loads(summary.read_text())
    m = d["monitor"]
    return {"throughput": d["throughput_per_s"], "p50": d["latency_ms"]["p50"],
            "ui_percent": 100 * m["cpu_s"] / m["wall_s"], "live_percent": 100 * m["live_cpu_s"] / m["live_wall_s"],
            "steady_percent": steady, "first_percent": first, "last_percent": last}


def window_waits(duration: float, window: float | None) -> list[float]:
    """The sleeps after SETTLE_S: one to the end, or (with ``window``, when the run holds two windows) to the end
    of the first window, to the start of the last one, and to the end: the UI's CPU early and late in one run, so
    a cost that grows as the run goes on shows (a figure recomputed over a filling buffer, say)."""
    rest = max(0.0, duration - SETTLE_S)
    if not window or rest < 2 * window:
        return [rest]
    return [window, rest - 2 * window, window]


def ui_process(session: str) -> psutil.Process:
    """The ortop process in the tmux pane (the pane runs ``env … ortop``, which execs)."""
    out = subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"], capture_output=True, text=True,
                         check=True).stdout
    proc = psutil.Process(int(out.split()[0]))
    while proc.name() in ("sh", "bash", "env") and proc.children():
        proc = proc.children()[0]
    return proc


def main() -> int:
    from ortop.config import profile
    from ortop.model.demo import ensure_demo

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="model (default: the built-in demo model)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--refresh", type=float, default=4.0)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--window", type=float, help="also the UI's CPU over the first and the last WINDOW seconds "
                    "after settling (e.g. --duration 300 --window 60: minute 0–1 against minute 4–5)")
    ap.add_argument("--metrics-port", type=int, help="serve and scrape ortop's Prometheus endpoint on this port")
    ap.add_argument("--ab-metrics", action="store_true",
                    help="instead of the bare loop: the TUI with the endpoint (scraped every second) against the TUI "
                         "without it, alternated in each round (order swapped every other round)")
    ap.add_argument("--against", metavar="SRC", help="instead of the bare loop: the TUI of the ortop in SRC (another "
                    "checkout's src folder), alternated with this one, the order swapped every other round")
    a = ap.parse_args()
    if a.ab_metrics and not a.metrics_port:
        raise SystemExit("--ab-metrics needs --metrics-port")
    if a.duration < SETTLE_S + 5:
        raise SystemExit(f"--duration must be at least {SETTLE_S + 5:.0f} s ({SETTLE_S:.0f} s settle + 5 s measured)")
    if shutil.which("tmux") is None:
        raise SystemExit("this benchmark needs tmux")
    model = a.model or str(ensure_demo())
    size = tuple(int(x) for x in a.size.split("x"))
    prof = profile.merge(profile.Profile(model=model), **{"session.intra_op_num_threads": a.threads})
    prof_json = json.dumps(prof.to_dict(full=True))
    print(f"model {model}, intra_op_num_threads={a.threads}, {a.duration:.0f} s per run, {a.rounds} rounds, "
          f"{a.size} terminal, refresh {a.refresh} Hz")
    if a.ab_metrics:
        return ab_metrics(model, a, size)
    if a.against:
        return against(model, a, size)
    print(f"{'round':>5} {'bare runs/s':>12} {'tui runs/s':>11} {'ratio':>7} {'UI % steady':>12} {'UI % live':>10} "
          f"{'UI % all':>9}")
    thr, ui, live, steady = [], [], [], []
    for i in range(a.rounds):
        b = run_bare(prof_json, a.duration)
        t = run_tui(model, a.threads, a.duration, a.refresh, size, a.metrics_port, a.window)
        thr.append(t["throughput"] / b["throughput"])
        ui.append(t["ui_percent"])
        live.append(t["live_percent"])
        steady.append(t["steady_percent"])
        print(f"{i + 1:>5} {b['throughput']:>12.1f} {t['throughput']:>11.1f} {thr[-1]:>7.3f} {steady[-1]:>12.1f} "
              f"{live[-1]:>10.1f} {ui[-1]:>9.1f}" + (f"   UI % first {a.window:.0f} s {t['first_percent']:.1f}, "
                                                     f"last {a.window:.0f} s {t['last_percent']:.1f}"
                                                     if a.window else ""))
    print(f"median throughput ratio (tui/bare) {statistics.median(thr):.3f}; median UI CPU "
          f"{statistics.median(steady):.1f}% of one core steady, {statistics.median(live):.1f}% from the first frame, "
          f"{statistics.median(ui):.1f}% with start-up")
    return 0


def ab_metrics(model: str, a: argparse.Namespace, size: tuple[int, ...]) -> int:
    """The endpoint's cost, paired: the TUI with it on (scraped every second) and off, one after the other in
    each round, the order swapped every other round."""
    print(f"{'round':>5} {'on runs/s':>10} {'off runs/s':>11} {'on/off':>7} {'UI % on':>8} {'UI % off':>9}")
    thr, d_ui = [], []
    for i in range(a.rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        # A port of its own per round: the previous round's ortop may still be closing its listening socket.
        got = {on: run_tui(model, a.threads, a.duration, a.refresh, size, a.metrics_port + i if on else None)
               for on in order}
        thr.append(got[True]["throughput"] / got[False]["throughput"])
        d_ui.append(got[True]["steady_percent"] - got[False]["steady_percent"])
        print(f"{i + 1:>5} {got[True]['throughput']:>10.1f} {got[False]['throughput']:>11.1f} {thr[-1]:>7.3f} "
              f"{got[True]['steady_percent']:>8.1f} {got[False]['steady_percent']:>9.1f}")
    print(f"median throughput ratio (endpoint on/off) {statistics.median(thr):.3f} (range {min(thr):.3f}–"
          f"{max(thr):.3f}); UI CPU with the endpoint {statistics.median(d_ui):+.1f} points of one core (median)")
    return 0


def against(model: str, a: argparse.Namespace, size: tuple[int, ...]) -> int:
    """This checkout's TUI against another's (``--against``), one after the other in each round, the order swapped
    every other round: the throughput's ratio and the UI's CPU difference, this minus that."""
    with_src(a.against)  # refused before the first round if it holds no ortop
    print(f"{'round':>5} {'this runs/s':>12} {'that runs/s':>12} {'ratio':>7} {'UI % this':>10} {'UI % that':>10}")
    thr, d_ui = [], []
    for i in range(a.rounds):
        order = (None, a.against) if i % 2 == 0 else (a.against, None)
        got = {src: run_tui(model, a.threads, a.duration, a.refresh, size, src=src) for src in order}
        this, that = got[None], got[a.against]
        thr.append(this["throughput"] / that["throughput"])
        d_ui.append(this["steady_percent"] - that["steady_percent"])
        print(f"{i + 1:>5} {this['throughput']:>12.1f} {that['throughput']:>12.1f} {thr[-1]:>7.3f} "
              f"{this['steady_percent']:>10.2f} {that['steady_percent']:>10.2f}")
    print(f"median throughput ratio (this/that) {statistics.median(thr):.3f} (range {min(thr):.3f}–{max(thr):.3f}); "
          f"UI CPU this minus that {statistics.median(d_ui):+.2f} points of one core (median; range "
          f"{min(d_ui):+.2f} to {max(d_ui):+.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
