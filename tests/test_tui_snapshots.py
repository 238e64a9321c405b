"""SVG snapshots of every screen at 80×24, 120×40 and 160×50, from seeded fakes with a fixed clock.

Regenerate after an intended change with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the
SVGs before committing them. The refresh timer is off (refresh_hz=0): the test ticks the app itself, so every run
draws the same frames.
"""

from __future__ import annotations

import pytest

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.tui.app import OrtopApp, make_app
from tests.fakes import FakeMonitor, StepClock

pytestmark = pytest.mark.snapshot

pytest.importorskip("pytest_textual_snapshot")


def fake_app(*, cores: int = 8, no_gpu: bool = False, state: str = "measuring", **kw) -> OrtopApp:
    monitor = FakeMonitor(state=state, **kw)
    return make_app(monitor, cpu=FakeCpuCollector(cores, seed=3), gpu=FakeGpuCollector(seed=3, no_gpu=no_gpu),
                    refresh_hz=0, profile_dir="/nonexistent/profiles", clock=StepClock())


async def settle(pilot) -> None:
    """Tick through ten seconds of the fake clock (sparklines get history), let the layout fit, tick once more."""
    app = pilot.app
    for _ in range(40):
        app.clock.t += 0.25
        app.tick()
    await pilot.pause()
    app.tick()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 50)])
def test_main_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fake_app(), terminal_size=size, run_before=settle)


def test_main_screen_many_cores_no_gpu(snap_compare) -> None:
    assert snap_compare(fake_app(cores=64, no_gpu=True), terminal_size=(80, 24), run_before=settle)


def test_main_screen_256_cores_building(snap_compare) -> None:
    app = fake_app(cores=256, no_gpu=True)
    monitor = app.monitor
    monitor.state = "building"
    from ortop.config import profile as profile_mod

    monitor.pending = profile_mod.merge(monitor.snapshot().profile, **{"session.intra_op_num_threads": 8})
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_settings_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fake_app(), terminal_size=size, press=["s"], run_before=settle)


def test_settings_screen_refuses_bad_affinity(snap_compare) -> None:
    async def before(pilot) -> None:
        await settle(pilot)
        await pilot.press("s")
        screen = pilot.app.screen
        screen.set_value("session.intra_op_num_threads", "3")
        screen.set_value("session.intra_op_thread_affinities", "1")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()

    assert snap_compare(fake_app(), terminal_size=(120, 40), run_before=before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_history_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fake_app(), terminal_size=size, press=["h"], run_before=settle)


def test_help_screen(snap_compare) -> None:
    assert snap_compare(fake_app(), terminal_size=(120, 40), press=["question_mark"], run_before=settle)


def test_fallback_and_failed_state(snap_compare) -> None:
    app = fake_app(state="failed", fatal="cannot build a session: CUDA failure 100: no CUDA-capable device",
                   providers_active=("CPUExecutionProvider",))
    from ortop.config import profile as profile_mod

    monitor = app.monitor
    monitor.start_profile = profile_mod.merge(monitor.start_profile, **{"provider.name": "cuda"})
    monitor.history = []
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)
