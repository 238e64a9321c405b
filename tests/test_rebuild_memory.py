"""Memory across rebuilds: quick presses of a rebuild key leave the worker the size one rebuild leaves it, a worker that
keeps what it built is a finding with its figures, and the memory panel shows the change since the worker started."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil
import pytest

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine import Monitor
from ortop.engine.live.memory import MemoryInfo, RebuildGrowth, WorkerMemory, rebuild_growth
from ortop.present import MIB as MB
from ortop.tui.app import make_app
from ortop.tui.panels import memory
from tests.models import make_matmul_model


# ---- growth across rebuilds (pure) -------------------------------------------------------------------------------
def test_a_worker_that_keeps_every_build_is_found_with_its_figures() -> None:
    # What quick presses did: each build of the same two settings left ~57 MB more behind.
    builds = [("dbb 4" if i % 2 else "unset", (188 + 57 * i) * MB) for i in range(8)]
    g = rebuild_growth(builds)
    assert isinstance(g, RebuildGrowth)
    assert g.first_mb == pytest.approx(188) and g.now_mb == pytest.approx(188 + 57 * 6)
    assert g.builds == 4 and g.rebuilds == 6
    assert "188 → 530 MB" in g.text() and "+342 MB over 6 rebuilds" in g.text()


def test_allocator_slack_and_other_settings_are_no_finding() -> None:
    steady = [("unset" if i % 2 else "dbb 4", (188 + (i % 3)) * MB) for i in range(30)]  # a few MB of slack
    assert rebuild_growth(steady) is None
    # more threads hold more memory: different settings are not compared with each other
    assert rebuild_growth([("1 thread", 150 * MB), ("8 threads", 400 * MB)]) is None
    # a rise under the floors (64 MB and a quarter of the first) is no finding either
    assert rebuild_growth([("a", 1000 * MB), ("a", 1100 * MB)]) is None


def test_worker_memory_keeps_its_start_low_point_and_says_a_growth_once() -> None:
    wm = WorkerMemory()
    wm.sample(999 * MB)  # before any build: no start yet, not a low point
    assert wm.start is None and wm.low is None
    assert wm.built("a", 200 * MB) is None
    wm.sample(180 * MB)
    assert (wm.start, wm.low) == (200 * MB, 180 * MB)
    assert wm.built("b", 300 * MB) is None
    first = wm.built("a", 400 * MB)
    assert isinstance(first, RebuildGrowth)
    assert wm.built("a", 600 * MB) is None  # said once; the figure stays on the snapshot
    assert wm.growth is first
    for i in range(WorkerMemory.MAX_BUILDS * 2):
        wm.built(str(i), 200 * MB)
    assert len(wm.builds) == WorkerMemory.MAX_BUILDS


# ---- the panel: a fake worker that grew ------------------------------------------------------------------------
def test_the_memory_panel_shows_growth_since_the_worker_started_not_only_since_the_build() -> None:
    grown = MemoryInfo(rss=1190 * MB, rss_peak=1190 * MB, rss_built=1264 * MB, rss_start=181 * MB, rss_low=176 * MB,
                       rebuild=rebuild_growth([("a", 188 * MB), ("b", 530 * MB), ("a", 870 * MB)]))
    out = memory.memory_panel(grown, (), None, 80, 4).plain.split("\n")
    assert out[0] == "RSS 1190 MB  peak 1190  +1009 since start · low 176 · \u221274 since build"
    assert out[2].startswith("⚠ RSS after building the same settings again: 188 → 870 MB")
    # narrow: the change since the start stays, the rest gives way
    narrow = memory.memory_panel(grown, (), None, 40, 4).plain.split("\n")[0]
    assert narrow == "RSS 1190 MB  peak 1190  +1009 since start"


def test_a_steady_worker_reads_no_growth() -> None:
    steady = MemoryInfo(rss=190 * MB, rss_peak=192 * MB, rss_built=189 * MB, rss_start=188 * MB, rss_low=187 * MB)
    head = memory.memory_panel(steady, (), None, 80, 4)
    assert head.plain.split("\n")[0] == "RSS 190 MB  peak 192  +2 since start · low 187 · +1 since build"
    assert not any(span.style == "yellow" for span in head.spans)


# ---- quick presses on a real worker --------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.slow
async def test_thirty_quick_rebuilds_leave_the_worker_the_size_one_rebuild_leaves_it(tmp_path: Path) -> None:
    # 16 MB of weights and a run of tens of ms: a build with its warm-up takes longer than the presses are apart, so
    # presses arrive while a build is under way (as they did on a detector in a live demo).
    model = make_matmul_model(tmp_path / "m.onnx", n=2048, batch=256)
    start = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1, "workload.warmup_runs": 3})
    mon = Monitor(model, start)
    mon.start()
    try:
        assert mon.wait_ready(60), "the first build did not finish"
        app = make_app(mon, cpu=FakeCpuCollector(2, seed=1), gpu=FakeGpuCollector(seed=1, no_gpu=True),
                       refresh_hz=4.0, profile_dir=tmp_path / "profiles")

        async def settled(what: str, timeout: float = 60.0) -> float:
            end = time.monotonic() + timeout
            while mon.snapshot().pending is not None or mon.snapshot().state != "measuring":
                assert time.monotonic() < end, f"timed out waiting for {what}"
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # the dropped sessions' memory handed back
            pid = mon.worker_pid()
            assert pid is not None
            return psutil.Process(pid).memory_info().rss

        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("b")
            after_one = await settled("the first rebuild")
            for _ in range(29):
                await pilot.press("b")
                await asyncio.sleep(0.25)
            after_thirty = await settled("the last of thirty rebuilds")
            snap = mon.snapshot()
        assert after_thirty <= 1.15 * after_one, (after_one / MB, after_thirty / MB)
        assert snap.memory.rebuild is None
        assert snap.memory.rss_start is not None and snap.memory.since_start is not None
        # thirty presses from unset end unset: the running settings are the last ones asked for
        assert snap.profile.session.dynamic_block_base is None
    finally:
        mon.stop()
