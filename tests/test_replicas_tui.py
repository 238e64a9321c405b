"""Replicas in the live view: the replicas panel as plain text (2, 8 and 64 replicas, two widths), the CPU panel's
replica tags on pinned cores, the panel shown only while there are replicas (Pilot, fake monitor), and a real
worker serving two pinned replicas whose cores the CPU panel labels."""

from __future__ import annotations

import math
import os
import time

import pytest

from ortop.collectors.cpu import CpuSample, FakeCpuCollector, PsutilCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.config.replicas import describe_share
from ortop.engine.live.monitor import Monitor
from ortop.engine.live.snapshot import ReplicaFigures
from ortop.measure.stats import LatencyStats
from ortop.tui.app import OrtopApp, make_app
from ortop.tui.panels import cpu, replicas
from ortop.tui.widgets import Panel
from tests.fakes import FakeMonitor, StepClock


def lines(text) -> list[str]:
    return text.plain.split("\n")


def figures(n: int, host_cores: int = 16, pinned: bool = True) -> tuple[ReplicaFigures, ...]:
    return FakeMonitor(replicas=n, pin_replicas=pinned, host_cores=host_cores).snapshot().replicas


def fits(text, width: int, height: int) -> bool:
    out = lines(text)
    return len(out) <= height and all(len(line) <= width for line in out)


MIB = 2 ** 20


# ---- the panel as text ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [39, 64])  # the right column's content at 80 and at 120 columns
def test_two_replicas_are_a_table_with_their_cores_rate_and_latency(width: int) -> None:
    reps = figures(2)
    text = replicas.replicas_panel(reps, 700.0, 212 * MIB, width, 10)
    out = lines(text)
    assert fits(text, width, 10)
    assert len(out) == replicas.replicas_rows(reps, width, 10) == 4  # header, two replicas, the total
    assert "runs/s" in out[0] and "p50" in out[0] and "p99" in out[0]
    for r, line in zip(reps, out[1:3]):
        assert line.startswith(f"r{r.index} ")
        assert describe_share(r.cores) in line  # "cores 0-7", "cores 8-15"
        assert f"{r.latency.p50:.2f}" in line and f"{r.latency.p99:.2f}" in line
        assert f"{r.throughput_per_s:.0f}/s" in line
    assert out[-1].startswith("total 700/s · RSS 212 MB")
    assert ("2 sessions, one worker" in out[-1]) == (width >= 48)


@pytest.mark.parametrize("width,height", [(39, 4), (39, 12), (64, 4), (64, 12)])
def test_eight_replicas_fit_by_table_or_by_cells(width: int, height: int) -> None:
    reps = figures(8)
    text = replicas.replicas_panel(reps, 2800.0, 300 * MIB, width, height)
    out = lines(text)
    assert fits(text, width, height), out
    assert len(out) == replicas.replicas_rows(reps, width, height)
    names = " ".join(out[:-1])
    assert all(f"r{i} " in names for i in range(8)), out  # every replica is there, compact or not
    assert out[-1].startswith("total 2.8k/s")
    if height >= 10:  # room for a row each: the table, with each replica's cores
        assert len(out) == 10 and all(describe_share(r.cores) in out[1 + r.index] for r in reps)
    else:  # 80×24's four lines: several short cells per line
        assert len(out) <= 4 and "more" not in text.plain


@pytest.mark.parametrize("width,height", [(39, 4), (64, 12), (20, 3), (10, 2), (120, 1)])
def test_sixty_four_replicas_never_overflow_and_say_what_is_left_out(width: int, height: int) -> None:
    reps = figures(64, host_cores=2)
    text = replicas.replicas_panel(reps, 9000.0, 2 * 2 ** 30, width, height)
    assert fits(text, width, height), lines(text)
    if height > 1:
        shown = sum(line.count("/s") for line in lines(text)[:-1])
        assert f"+{64 - shown} more" in text.plain


def test_unpinned_replicas_say_all_cores_and_one_session_says_so() -> None:
    text = replicas.replicas_panel(figures(2, pinned=False), 700.0, None, 64, 6)
    assert text.plain.count("all cores") == 2 and "RSS —" in text.plain
    assert replicas.replicas_panel((), 1.0, None, 40, 4).plain == "one session: no replicas"
    assert replicas.core_owners(figures(2, pinned=False)) == {}


def test_a_replica_with_no_runs_yet_shows_dashes() -> None:
    rep = ReplicaFigures(0, (0,), 0, math.nan, LatencyStats())
    text = replicas.replicas_panel((rep, rep), math.nan, 100 * MIB, 40, 6)
    assert "—" in lines(text)[1] and lines(text)[-1].startswith("total —")


# ---- the CPU panel's replica tags --------------------------------------------------------------------------------
def sample(n: int) -> CpuSample:
    return CpuSample(tuple(float(10 + 7 * i) for i in range(n)), 40.0, 150.0, (), frozenset({0}), 1.0)


def test_cpu_meters_tag_each_core_with_its_replica() -> None:
    reps = figures(2, host_cores=8)  # cores 0-3 and 4-7
    owners = replicas.core_owners(reps)
    assert owners == {c: (0 if c < 4 else 1,) for c in range(8)}
    text = cpu.cpu_panel(sample(8), 38, 6, owners)
    meters = lines(text)[:-1]
    assert fits(text, 38, 6)
    tags = {}
    for line in meters:
        for cell in line.split("▏")[:-1]:
            head = cell.rsplit("▕", 1)[0].split()
            if len(head) >= 2 and head[-2].isdigit():
                tags[int(head[-2])] = head[-1]
    assert tags == {c: f"r{0 if c < 4 else 1}" for c in range(8)}, meters
    # styled per replica: the two shares in different colours
    styles = {text.plain[s.start:s.end].strip(): str(s.style) for s in text.spans
              if text.plain[s.start:s.end].strip() in ("r0", "r1")}
    assert styles["r0"] != styles["r1"]
    # without pinned replicas, no tags: the panel as before
    assert cpu.cpu_panel(sample(8), 38, 6).plain == cpu.cpu_panel(sample(8), 38, 6, {}).plain
    assert " r0" not in cpu.cpu_panel(sample(8), 38, 6).plain


def test_cores_shared_by_several_replicas_are_marked() -> None:
    owners = replicas.core_owners(figures(4, host_cores=2))  # more replicas than cores: round robin
    assert owners == {0: (0, 2), 1: (1, 3)}
    out = lines(cpu.cpu_panel(sample(2), 38, 3, owners))
    assert out[0].startswith("0 r0+▕") and out[1].startswith("1 r1+▕")


@pytest.mark.parametrize("width,height", [(38, 6), (48, 9), (30, 4)])
def test_many_cores_say_the_shares_under_the_heat_grid(width: int, height: int) -> None:
    owners = replicas.core_owners(figures(4, host_cores=64))
    text = cpu.cpu_panel(sample(64), width, height, owners)
    assert fits(text, width, height), lines(text)
    assert "▕" not in text.plain  # one cell per core, no meters
    assert any(line.startswith("r0 0-15") for line in lines(text))


# ---- the live view (Pilot, fake monitor) ------------------------------------------------------------------------
def fake_app(monitor: FakeMonitor, cores: int = 8) -> OrtopApp:
    return make_app(monitor, cpu=FakeCpuCollector(cores, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir="/nonexistent/profiles", clock=StepClock())


async def settle(pilot) -> None:
    app = pilot.app
    for _ in range(3):
        for _ in range(8):
            app.clock.t += 0.25
            app.tick()
        await pilot.pause()


def main_panel(app: OrtopApp, pid: str) -> Panel:
    return app.screen_stack[0].query_one(f"#{pid}", Panel)


@pytest.mark.slow
async def test_the_panel_is_there_only_with_replicas() -> None:
    app = fake_app(FakeMonitor())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert not main_panel(app, "replicas").display
        assert " r0" not in main_panel(app, "cpu").text.plain
    app = fake_app(FakeMonitor(replicas=2, pin_replicas=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        panel = main_panel(app, "replicas")
        assert panel.display and panel.region.height > 0
        assert "r0  cores 0-3" in panel.text.plain and "r1  cores 4-7" in panel.text.plain
        assert "total" in panel.text.plain
        assert "0 r0▕" in main_panel(app, "cpu").text.plain and "4 r1▕" in main_panel(app, "cpu").text.plain
        # a rebuild to one session takes the panel away, and the tags
        app.monitor.replica_figures = ()
        await settle(pilot)
        assert not panel.display
        assert " r0" not in main_panel(app, "cpu").text.plain


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("n", [2, 4, 8, 64])
async def test_the_panel_fits_the_screen(size: tuple[int, int], n: int) -> None:
    app = fake_app(FakeMonitor(replicas=n, pin_replicas=True, host_cores=8))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = main_panel(app, "replicas")
        assert panel.display
        out = lines(panel.text)
        assert 0 < len(out) <= panel.size.height and all(len(line) <= panel.size.width for line in out), out
        assert out[-1].startswith("total")
        assert panel.region.bottom <= main_panel(app, "events").region.y  # the events panel keeps its lines
        assert main_panel(app, "events").size.height >= 2
        assert "r0" in out[0] or "r0" in out[1]
        if n <= 8 and size == (120, 40):  # a row per replica with its cores
            assert all(describe_share(r.cores) in panel.text.plain for r in app.monitor.replica_figures)


# ---- a real worker ------------------------------------------------------------------------------------------------
@pytest.mark.integration
def test_two_pinned_replicas_land_on_disjoint_cores_the_cpu_panel_labels(matmul_model) -> None:
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        pytest.skip("needs two usable cores")
    profile = profile_mod.merge(Profile(), **{"workload.replicas": 2, "workload.pin_replicas": True,
                                              "workload.rate_hz": 100.0, "workload.warmup_runs": 3})
    mon = Monitor(matmul_model, profile)
    mon.start()
    try:
        assert mon.wait_ready(60), "the monitor did not become ready"
        deadline = time.monotonic() + 30
        snap = mon.snapshot()
        while time.monotonic() < deadline and not (len(snap.replicas) == 2 and all(r.runs >= 5 for r in snap.replicas)):
            time.sleep(0.1)
            snap = mon.snapshot()
        assert [r.index for r in snap.replicas] == [0, 1] and all(r.runs >= 5 for r in snap.replicas), snap.replicas
        a, b = (set(r.cores or ()) for r in snap.replicas)
        assert a and b and not a & b and a | b <= set(usable)
        collector = PsutilCpuCollector()
        collector.watch(snap.worker_pid)
        collector.sample()
        time.sleep(0.3)
        owners = replicas.core_owners(snap.replicas)
        text = cpu.cpu_panel(collector.sample(), 60, 2 + len(usable), owners)
        for r in snap.replicas:
            for core in r.cores or ():
                assert any(line.lstrip().startswith(f"{core} r{r.index}▕") or f" {core} r{r.index}▕" in line
                           for line in lines(text)), (core, r.index, text.plain)
        panel = replicas.replicas_panel(snap.replicas, snap.throughput_per_s, snap.memory.rss, 64, 6)
        assert describe_share(snap.replicas[0].cores) in panel.plain and "total" in panel.plain
    finally:
        mon.stop()
