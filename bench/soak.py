"""Long runs: does ortop stay flat? Memory and UI CPU over time, headless, in the live view, and in the live view
under open arrivals with a shape mix.

    python bench/soak.py [MODEL] [--minutes 10] [--interval 30] [--modes headless,tui,open]
    python bench/soak.py --modes open --minutes 60 [--rate 60] [--dim rows=384:1,768:1,1536:1]

``headless`` runs ``ortop MODEL --headless --duration MINUTES*60``; ``tui`` runs ``ortop MODEL`` in tmux (120×40)
for the same time, a closed loop on one shape. Both sample every ``--interval`` seconds with psutil: the monitor's
RSS (the ortop process), the worker's RSS (its child) and, in the live view, the UI process's CPU over the last
interval. A leak shows as RSS climbing interval after interval; a UI that gets slower, as CPU rising.

``open`` runs the live view with Poisson arrivals at ``--rate`` and a three-shape mix (``--dim``), offered more than
the host serves, so the queue stays full and sheds: every kept run is then a slow one, and the running
configuration's ring fills at the served rate over most of an hour instead of in seconds. Without a MODEL it builds
one that needs no file (a chain of 32 MatMul 256×256 over a free dim ``rows``: 384, 768 and 1536 rows cost about 12,
26 and 45 ms on one thread of a 2-core x86 host; pick a ``--rate`` above what the host serves). It prints the UI's
and the worker's RSS at minutes 1 and 5 and then every 5, the UI's CPU share over minutes 5–15 and over the last ten
minutes, and what the live view's summary says was offered, served and shed; beside each figure, the host's steal
and the CPU every other process took over the same minutes (a UI figure that moved with them is the host's, not the
UI's). Beside the live view a canary does a fixed piece of work once a second (:data:`CANARY`); its CPU moves only
with the host's speed, which steal does not show (a neighbour's load on the same memory and caches), so the UI's CPU
over the canary's, compared between the two stretches, is the UI's own rise. Flat means: from minute 5 on both RSS
stay within 2 MB, and the UI's CPU over the last ten minutes is no more than over minutes 5–15 (5 % and 0.05 points
of slack for noise) and at most 2 % of a core. Run it on a quiet host: the UI's CPU is its own process time, but a
loaded host slows the worker (fewer runs served) and makes every figure noisier.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

MB = 2**20
MIX_DIM = "rows=384:1,768:1,1536:1"  # the built-in model's three widths
FLAT_MB = 2.0                        # RSS from minute 5 on stays within this
CPU_CEILING = 2.0                    # % of a core the UI may use over the last ten minutes
SETTLE_MIN = 5.0                     # minutes of start-up and of the first fill that flatness does not judge


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


def make_mix_model(path: str | os.PathLike, layers: int = 32, width: int = 256, seed: int = 0) -> str:
    """x [rows, width] → (MatMul W_i → Relu) × layers → y: its cost grows with the free dim ``rows``."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(seed)
    inits, nodes, cur = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / math.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
        out = "y" if i == layers - 1 else f"r{i}"
        nodes += [helper.make_node("MatMul", [cur, f"W{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [out])]
        cur = out
    graph = helper.make_graph(nodes, "mix", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)  # ORT reads IR 10
    save(model, os.fspath(path))
    return os.fspath(path)


def _tmux(session: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", session, *args], **kw)


def _pane_pid(session: str) -> int:
    out = _tmux(session, "list-panes", "-t", session, "-F", "#{pane_pid}", capture_output=True, text=True,
                check=True).stdout
    return int(out.split()[0])


def _open_marks(minutes: float) -> list[float]:
    """The minutes at which RSS is printed: 1, 5, then every 5, and the end."""
    marks = [m for m in (1.0, *range(5, int(minutes) + 1, 5)) if m <= minutes]
    if not marks or marks[-1] < minutes:
        marks.append(minutes)
    return marks


def _cpu_share(samples: list[dict], a_min: float, b_min: float, key: str = "cpu_s") -> float:
    """The UI's CPU over [a, b] minutes, % of one core, from the cumulative CPU of the samples nearest to a and b
    (``key``: another cumulative CPU figure of the samples: the host's steal, the other processes' CPU)."""
    if b_min <= a_min or not samples:
        return math.nan
    a = min(samples, key=lambda s: abs(s["t_s"] - a_min * 60))
    b = min(samples, key=lambda s: abs(s["t_s"] - b_min * 60))
    if key not in a or key not in b:
        return math.nan
    return 100 * (b[key] - a[key]) / (b["t_s"] - a["t_s"]) if b["t_s"] > a["t_s"] else math.nan


def _shares(samples: list[dict], a: float, b: float, key: str = "cpu_s") -> list[float]:
    """Per sample inside [a, b] minutes: the share of a core (%) a cumulative CPU figure (``key``) grew by."""
    return [100 * (s1[key] - s0[key]) / (s1["t_s"] - s0["t_s"]) for s0, s1 in zip(samples, samples[1:])
            if a * 60 - 1 <= s0["t_s"] and s1["t_s"] <= b * 60 + 1 and s1["t_s"] > s0["t_s"]
            and key in s0 and key in s1]


def _rise(samples: list[dict], first: tuple[float, float], last: tuple[float, float],
          per_canary: bool = False) -> tuple[float, float, float]:
    """The UI's CPU (% of a core) over ``last`` less over ``first`` (minutes), from the per-sample shares inside
    each, with a 90 % interval (Welch's normal approximation): a mean over twenty 30-s samples moves by its own
    spread, and a rise within it is not one. ``per_canary``: each sample's UI share over the canary's (see CANARY),
    as a change in percent: what is left of the rise once the host's own speed is taken out."""
    import numpy as np

    def series(a: float, b: float) -> np.ndarray:
        ui = np.array(_shares(samples, a, b), dtype=float)
        if not per_canary:
            return ui
        canary = np.array(_shares(samples, a, b, "canary_s"), dtype=float)
        if canary.size != ui.size or not (canary > 0).all():
            return np.zeros(0)
        return ui / canary

    e, late = series(*first), series(*last)
    if e.size < 2 or late.size < 2:
        return math.nan, math.nan, math.nan
    d = float(late.mean() - e.mean())
    se = math.sqrt(e.var(ddof=1) / e.size + late.var(ddof=1) / late.size)
    if per_canary:  # as a share of the first stretch's ratio
        return 100 * d / e.mean(), 100 * (d - 1.645 * se) / e.mean(), 100 * (d + 1.645 * se) / e.mean()
    return d, d - 1.645 * se, d + 1.645 * se


# A fixed piece of work done once a second (~15 ms of Python and numpy here, like a UI frame): its CPU per second
# moves only with the host's speed, so the UI's CPU over the canary's cancels the host's drift over the hour.
CANARY = """
import time, numpy as np
a = np.random.default_rng(0).standard_normal(20_000)
t = time.monotonic()
while True:
    x = 0
    for i in range(60_000):
        x += i % 7
    np.sort(a)
    t += 1.0
    time.sleep(max(0.0, t - time.monotonic()))
"""


def _host_cpu(tree: list[psutil.Process]) -> dict:
    """The host's cumulative steal and the CPU of every process outside ``tree`` (the UI and its worker), seconds:
    a window whose UI figure moved can then be read against what the host did beside it."""
    t = psutil.cpu_times()
    busy = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "steal", 0.0)
    own = 0.0
    for p in tree:
        try:
            own += sum(p.cpu_times()[:4])  # user, system and their children's
        except psutil.Error:
            pass
    return {"steal_s": getattr(t, "steal", 0.0), "others_s": busy - own}


def soak_open(model: str, minutes: float, rate: float, dim: str, threads: int, tmp: str) -> dict:
    """The live view under Poisson arrivals with a shape mix, in tmux: samples every 30 s, the summary at the end."""
    seconds = minutes * 60
    session = f"ortop-soak-open-{os.getpid()}"
    summary = os.path.join(tmp, "open-summary.json")
    cmd = (f"env XDG_STATE_HOME={tmp} {_ortop()} {model} --threads {threads} --rate {rate:g} --arrival poisson "
           f"--dim {dim} --summary {summary} --profile-dir {tmp}")
    # stderr is not redirected: Textual draws on it
    _tmux(session, "new", "-d", "-s", session, "-x", "120", "-y", "40", cmd, check=True)
    canary = subprocess.Popen([sys.executable, "-c", CANARY])
    canary_proc = psutil.Process(canary.pid)
    samples: list[dict] = []
    try:
        t0 = time.monotonic()
        time.sleep(3)
        proc = psutil.Process(_pane_pid(session))
        marks = _open_marks(minutes)
        step = 30.0
        k = 1
        while proc.is_running():
            target = min(k * step, seconds)
            time.sleep(max(0.0, t0 + target - time.monotonic()))
            if not proc.is_running():
                break
            worker = _worker(proc)
            s = {"t_s": time.monotonic() - t0, "cpu_s": sum(proc.cpu_times()[:2]),
                 "canary_s": sum(canary_proc.cpu_times()[:2]),
                 "ui_mb": proc.memory_info().rss / MB,
                 "worker_mb": worker.memory_info().rss / MB if worker else math.nan,
                 **_host_cpu([proc, canary_proc, *([worker] if worker else [])])}
            samples.append(s)
            at = s["t_s"] / 60
            if any(abs(at - m) < 0.25 for m in marks):
                cpu = _cpu_share(samples, max(0.0, at - 5), at) if at >= 5 - 0.25 else math.nan
                host = (f" (host: steal {_cpu_share(samples, at - 5, at, 'steal_s'):.2f} %, other processes "
                        f"{_cpu_share(samples, at - 5, at, 'others_s'):.1f} % of a core)")
                said = f"  UI CPU {cpu:.2f} % over the last 5 min{host}" if math.isfinite(cpu) else ""
                print(f"    open {at:5.1f} min  UI {s['ui_mb']:6.1f} MB  worker {s['worker_mb']:6.1f} MB{said}",
                      flush=True)
            if target >= seconds:
                break
            k += 1
        _tmux(session, "send-keys", "-t", session, "q", check=True)
        for _ in range(30):
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(1)
    except psutil.NoSuchProcess:
        pass
    finally:
        _tmux(session, "kill-server", capture_output=True)
        canary.kill()
        canary.wait()
    data: dict = {}
    try:
        data = json.loads(Path(summary).read_text())
    except (OSError, ValueError):
        pass
    return {"samples": samples, "summary": data, "minutes": minutes}


def report_open(result: dict) -> bool:
    """Print the open run's figures and verdict; whether it was flat."""
    samples, minutes = result["samples"], result["minutes"]
    print()
    arr = (result["summary"] or {}).get("arrivals") or {}
    if arr:
        print(f"    open: offered {arr.get('offered_per_s')}/s, served {arr.get('served_per_s')}/s, "
              f"{arr.get('dropped')} shed, longest queue {arr.get('queue_max')}")
    else:
        print("    open: no summary was written (the live view did not end with q)")
    late = [s for s in samples if s["t_s"] >= SETTLE_MIN * 60 - 1]
    if not late:
        print(f"    open: shorter than {SETTLE_MIN:g} minutes: nothing to judge")
        return False
    ui = [s["ui_mb"] for s in late]
    wk = [s["worker_mb"] for s in late]
    ui_span, wk_span = max(ui) - min(ui), max(wk) - min(wk)
    first = _cpu_share(samples, SETTLE_MIN, min(15.0, minutes))
    last_from = max(SETTLE_MIN, minutes - 10)
    last = _cpu_share(samples, last_from, minutes)
    print(f"    open: from minute {SETTLE_MIN:g} on, UI RSS {min(ui):.1f}–{max(ui):.1f} MB (span {ui_span:.1f}), "
          f"worker {min(wk):.1f}–{max(wk):.1f} MB (span {wk_span:.1f})")
    print(f"    open: UI CPU {first:.2f} % of a core over minutes {SETTLE_MIN:g}–{min(15.0, minutes):g}, "
          f"{last:.2f} % over minutes {last_from:g}–{minutes:g}")
    for name, (a, b) in (("first", (SETTLE_MIN, min(15.0, minutes))), ("last", (last_from, minutes))):
        print(f"    open: beside the {name} stretch the host's steal was "
              f"{_cpu_share(samples, a, b, 'steal_s'):.2f} % and other processes took "
              f"{_cpu_share(samples, a, b, 'others_s'):.1f} % of a core")
    rise, lo, hi = _rise(samples, (SETTLE_MIN, min(15.0, minutes)), (last_from, minutes))
    print(f"    open: the rise from one stretch to the other, over its {30:g}-s samples: {rise:+.2f} points "
          f"(90 % interval {lo:+.2f}…{hi:+.2f}); an interval that holds 0 is a rise these samples cannot tell "
          f"from their own spread")
    stretches = ((SETTLE_MIN, min(15.0, minutes)), (last_from, minutes))
    canary = [_cpu_share(samples, a, b, "canary_s") for a, b in stretches]
    if all(math.isfinite(c) and c > 0 for c in canary):
        rel, rlo, rhi = _rise(samples, *stretches, per_canary=True)
        drift = 100 * (canary[1] / canary[0] - 1)
        print(f"    open: the canary (a fixed piece of work a second) took {canary[0]:.2f} % of a core over the "
              f"first stretch and {canary[1]:.2f} % over the last: {drift:+.1f} %, the host's own drift")
        print(f"    open: the UI's CPU over the canary's, last stretch against first: {rel:+.1f} % (90 % interval "
              f"{rlo:+.1f}…{rhi:+.1f} %): the UI's own rise, with the host's drift taken out")
    checks = {f"RSS within {FLAT_MB:g} MB from minute {SETTLE_MIN:g}": ui_span <= FLAT_MB and wk_span <= FLAT_MB,
              "UI CPU over the last ten minutes no more than over minutes 5–15": last <= max(first, 0) * 1.05 + 0.05,
              f"UI CPU ≤ {CPU_CEILING:g} % of a core": last <= CPU_CEILING}
    if all(math.isfinite(c) and c > 0 for c in canary):
        checks["the UI's CPU over the canary's: no rise shown (its interval holds 0 or lies below)"] = rlo <= 0
    for what, ok in checks.items():
        print(f"    open: {'ok    ' if ok else 'NOT ok'} {what}")
    return all(checks.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default="headless,tui", help="which runs: headless, tui, open, comma-separated "
                    "(default headless,tui)")
    ap.add_argument("--rate", type=float, default=60.0, help="open: Poisson arrivals per second (default 60: more "
                    "than the built-in model serves on one thread)")
    ap.add_argument("--dim", default=None, help=f"open: the shape mix (default {MIX_DIM}, the built-in model's)")
    ap.add_argument("--json", metavar="FILE", help="open: write every sample (t_s, cpu_s, ui_mb, worker_mb, "
                    "steal_s, others_s) and the live view's summary to FILE")
    args = ap.parse_args()
    modes = {m.strip() for m in args.modes.split(",") if m.strip()}
    if not modes or modes - {"headless", "tui", "open"}:
        raise SystemExit("--modes takes headless, tui and open, comma-separated")
    if args.minutes <= 0 or args.rate <= 0:
        raise SystemExit("--minutes and --rate must be above 0")
    if "open" in modes and args.model is not None and args.dim is None:
        raise SystemExit("open with a MODEL needs --dim NAME=A:1,B:1,C:1 (three sizes of one of its free dims)")
    seconds = args.minutes * 60
    summary: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None and modes & {"headless", "tui"}:
            from ortop.model.demo import ensure_demo

            model = str(ensure_demo())
        env = {**os.environ, "XDG_STATE_HOME": tmp}
        if "headless" in modes:
            p = subprocess.Popen([_ortop(), str(model), "--headless", "--duration", str(seconds), "--threads",
                                  str(args.threads), "--json"], stdout=subprocess.DEVNULL, env=env)
            try:
                summary["headless"] = _watch(psutil.Process(p.pid), seconds, args.interval, "headless")
            finally:
                p.wait(timeout=60)
        if "tui" in modes:
            session = f"ortop-soak-{os.getpid()}"
            _tmux(session, "new", "-d", "-s", session, "-x", "120", "-y", "40",
                  f"env XDG_STATE_HOME={tmp} {_ortop()} {model} --threads {args.threads}", check=True)
            try:
                time.sleep(3)
                summary["tui"] = _watch(psutil.Process(_pane_pid(session)), seconds, args.interval, "tui")
                _tmux(session, "send-keys", "-t", session, "q", check=True)
                time.sleep(3)
            finally:
                _tmux(session, "kill-server", capture_output=True)
        _report(summary)
        if "open" in modes:
            open_model = args.model or make_mix_model(os.path.join(tmp, "mix.onnx"))
            result = soak_open(open_model, args.minutes, args.rate, args.dim or MIX_DIM, args.threads, tmp)
            result["flat"] = report_open(result)
            if args.json:
                Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


def _report(summary: dict[str, list[dict]]) -> None:
    if not summary:
        return
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


if __name__ == "__main__":
    sys.exit(main())
