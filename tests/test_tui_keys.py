"""The live view's rate and block-base keys (``R``, ``b``) pressed as a user would (Pilot), over the fake monitor:
what each press hands the monitor, that presses stack on the profile being built, and what the user is told.

The same keys on a real worker are in tests/test_tui.py (``test_quick_keys_stack_on_the_pending_profile``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.tui import quick
from ortop.tui.app import OrtopApp, make_app
from tests.fakes import FakeMonitor, StepClock

SIZE = (120, 40)


def app_over(monitor: FakeMonitor, tmp_path: Path) -> OrtopApp:
    return make_app(monitor, cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir=tmp_path / "profiles", clock=StepClock())


async def press_each(pilot, monitor: FakeMonitor, key: str, times: int, read) -> list:
    """Press ``key`` ``times`` times; what ``read`` finds in the profile applied after each press."""
    seen = []
    for _ in range(times):
        await pilot.press(key)
        await pilot.pause()
        seen.append(read(monitor.applied[-1]))
    return seen


@pytest.mark.slow
async def test_capital_r_cycles_the_paced_rate_and_nothing_else(tmp_path: Path) -> None:
    monitor = FakeMonitor()  # the running configuration: 2 threads, spinning off, paced at 100 Hz
    start = monitor.snapshot().profile
    assert start.workload.rate_hz == 100.0
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rates = await press_each(pilot, monitor, "R", 4, lambda p: p.workload.rate_hz)
        assert rates == [10.0, 0.0, 100.0, 10.0]  # 100 Hz → 10 Hz → closed loop → 100 Hz → …
        assert len(monitor.applied) == 4  # one rebuild a press
        assert monitor.applied[-1] == profile_mod.merge(start, **{"workload.rate_hz": 10.0})
        await pilot.press("r")  # lower case is another key: it resets the statistics, the rate stays
        await pilot.pause()
        assert len(monitor.applied) == 4 and monitor.events[-1].text == "statistics reset"


async def test_capital_r_from_a_rate_outside_the_cycle_goes_to_a_closed_loop(tmp_path: Path) -> None:
    monitor = FakeMonitor(profile=profile_mod.merge(Profile(), **{"workload.rate_hz": 250.0}), n_configs=1)
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await pilot.pause()
        assert [p.workload.rate_hz for p in monitor.applied] == [0.0]


@pytest.mark.slow
async def test_b_toggles_dynamic_block_base_between_unset_and_the_quick_value(tmp_path: Path) -> None:
    monitor = FakeMonitor(n_configs=2)  # 2 threads, dynamic_block_base unset
    start = monitor.snapshot().profile
    assert start.session.dynamic_block_base is None
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        seen = await press_each(pilot, monitor, "b", 3, lambda p: p.session.dynamic_block_base)
        assert seen == [quick.BLOCK_BASE, None, quick.BLOCK_BASE] and quick.BLOCK_BASE == 4
        assert monitor.applied[0] == profile_mod.merge(start, **{"session.dynamic_block_base": 4})
        assert monitor.applied[1] == start  # toggled back: the profile it started from
        await pilot.press("R")  # another quick key stacks on the block base just set
        await pilot.pause()
        assert monitor.applied[-1].session.dynamic_block_base == 4 and monitor.applied[-1].workload.rate_hz == 100.0


@pytest.mark.slow
async def test_b_from_a_profile_with_a_block_base_of_its_own(tmp_path: Path) -> None:
    """A block base other than the quick value is set: b unsets it (the first press never lands on 4 silently)."""
    monitor = FakeMonitor(profile=profile_mod.merge(Profile(), **{"session.dynamic_block_base": 8}), n_configs=1)
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b", "b")
        await pilot.pause()
        assert [p.session.dynamic_block_base for p in monitor.applied] == [None, 4]


async def test_keys_typed_while_the_settings_form_opens_do_not_land_in_its_first_field(tmp_path, monkeypatch) -> None:
    """On a busy host the form takes half a second to draw, and keys meant for the live view went into its first
    field. A key that arrives after the form mounted (its first field focused) but before it has drawn is dropped;
    once it is up, typing goes to the field."""
    from textual import events
    from textual.widgets import Input

    from ortop.tui.screens.settings import SettingsScreen

    mounted = SettingsScreen.on_mount

    def mount_then_a_key_arrives(self) -> None:
        mounted(self)
        self.app.post_message(events.Key("7", "7"))

    monkeypatch.setattr(SettingsScreen, "on_mount", mount_then_a_key_arrives)
    app = app_over(FakeMonitor(), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        app.tick()
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        field = screen.focused
        assert isinstance(field, Input) and field.id == "f-session--intra_op_num_threads"
        assert field.value == "2", field.value  # the running profile's threads, nothing typed into it
        await pilot.press("end", "5")
        await pilot.pause()
        assert field.value == "25"
