"""Screenshots of ortop on a real model, for the README: the live view, after a threads change, settings, history,
the tune screen, and two pinned replicas.

    python scripts/make_screenshots.py [MODEL.onnx] [--out screenshots] [--size 120x40]

Runs the app headlessly (Textual's run_test) over a real Monitor and worker, so the figures are this machine's.
The GPU panel shows whatever this host has (NVML or "no NVIDIA GPU").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path


async def _wait(pilot, cond, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        await pilot.pause(0.25)
    raise SystemExit(f"make_screenshots: timed out waiting for {what}")


async def shoot(model: str, out: Path, size: tuple[int, int]) -> list[Path]:
    from ortop.collectors.cpu import PsutilCpuCollector, physical_cores
    from ortop.collectors.gpu import make_gpu_collector
    from ortop.config import profile as profile_mod
    from ortop.config.profile import Profile
    from ortop.engine.live.monitor import Monitor
    from ortop.tui.app import make_app

    monitor = Monitor(model, profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1}))
    gpu = make_gpu_collector()
    app = make_app(monitor, cpu=PsutilCpuCollector(), gpu=gpu, refresh_hz=4.0, profile_dir=str(out / "profiles"))
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []

    def measuring(min_runs: int = 100) -> bool:
        s = monitor.snapshot()
        return s.state == "measuring" and s.pending is None and s.runs >= min_runs

    def save(name: str) -> None:
        shots.append(Path(app.save_screenshot(f"{name}.svg", path=str(out))))

    monitor.start()
    try:
        async with app.run_test(size=size) as pilot:
            await _wait(pilot, measuring, 60, "the first session")
            await pilot.pause(6.0)  # a few seconds of sparkline
            save("main")
            await pilot.press("plus" if physical_cores() > 1 else "p")  # more threads (or spinning off on 1 core)
            await _wait(pilot, lambda: len(monitor.snapshot().history) >= 2 and measuring(), 60, "the rebuild")
            await pilot.pause(6.0)
            save("after-threads-change")
            await pilot.press("s")
            await pilot.pause(0.5)
            save("settings")
            await pilot.press("escape", "h")
            await pilot.pause(1.0)
            save("history")
            await pilot.press("h", "t", "b", "b", "b", "g")  # the tune screen, a 30 s budget
            await _wait(pilot, lambda: not getattr(app.screen, "running", True), 90, "the tune search")
            await pilot.pause(0.5)
            save("tune")
            await pilot.press("escape")
    finally:
        monitor.stop()
        gpu.close()
    shots.append(await shoot_replicas(model, out, size))
    return shots


async def shoot_replicas(model: str, out: Path, size: tuple[int, int]) -> Path:
    """Two replicas pinned to their own cores: the replicas panel and the CPU meters tagged with their owner."""
    from ortop.collectors.cpu import PsutilCpuCollector
    from ortop.collectors.gpu import make_gpu_collector
    from ortop.config import profile as profile_mod
    from ortop.config.profile import Profile
    from ortop.engine.live.monitor import Monitor
    from ortop.tui.app import make_app

    monitor = Monitor(model, profile_mod.merge(Profile(), **{"workload.replicas": 2, "workload.pin_replicas": True}))
    gpu = make_gpu_collector()
    app = make_app(monitor, cpu=PsutilCpuCollector(), gpu=gpu, refresh_hz=4.0, profile_dir=str(out / "profiles"))
    monitor.start()
    try:
        async with app.run_test(size=size) as pilot:
            await _wait(pilot, lambda: monitor.snapshot().state == "measuring" and monitor.snapshot().runs >= 100,
                        60, "the replicas")
            await pilot.pause(6.0)
            return Path(app.save_screenshot("replicas.svg", path=str(out)))
    finally:
        monitor.stop()
        gpu.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", help="the model (default: ortop's demo model)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "screenshots"))
    p.add_argument("--size", default="120x40", help="terminal size, WIDTHxHEIGHT")
    a = p.parse_args(argv)
    model = a.model
    if not model:
        from ortop.model.demo import ensure_demo

        model = str(ensure_demo())
    w, h = (int(x) for x in a.size.lower().split("x"))
    for path in asyncio.run(shoot(model, Path(a.out), (w, h))):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
