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
from tests.poll import until

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


def test_main_screen_under_poisson_arrivals_says_them_at_80x24(snap_compare) -> None:
    """The production workload of a slow model (Poisson at 15 Hz): at 80×24 the status line keeps the rate and the
    arrival mode when it cuts the changes."""
    from ortop.config import profile as profile_mod
    from ortop.config.profile import Profile
    from ortop.tui.widgets import Panel

    poisson = profile_mod.merge(Profile(), **{"workload.rate_hz": 15.0, "workload.arrival": "poisson"})
    app = fake_app(profile=poisson, n_configs=2, p50_ms=150.0)
    app.monitor.service_p50_ms = 55.0

    async def before(pilot) -> None:
        await settle(pilot)
        line = app.screen.query_one("#status", Panel).text.plain
        assert line.rstrip().endswith("#1 threads 2 · 15 Hz poisson"), line

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_main_screen_256_cores_building(snap_compare) -> None:
    app = fake_app(cores=256, no_gpu=True)
    monitor = app.monitor
    monitor.state = "building"
    from ortop.config import profile as profile_mod

    monitor.pending = profile_mod.merge(monitor.snapshot().profile, **{"session.intra_op_num_threads": 8})
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)


async def settings_still(pilot) -> None:
    """Settle, open the settings form and wait until it has drawn, its cursors not blinking: a blinking cursor is
    drawn or not by when the picture is taken, and on a busy host the picture can come before the form's first draw."""
    from textual.widgets import Input

    from tests.test_tui import open_settings

    await settle(pilot)
    await open_settings(pilot)
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_settings_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fake_app(), terminal_size=size, run_before=settings_still)


def test_settings_screen_refuses_bad_affinity(snap_compare) -> None:
    async def before(pilot) -> None:
        await settings_still(pilot)
        screen = pilot.app.screen
        screen.set_value("session.intra_op_num_threads", "3")
        screen.set_value("session.intra_op_thread_affinities", "1")
        await pilot.pause()
        await pilot.press("ctrl+s")
        # the refusal is drawn beside its field: on a busy host one pause may come before it
        await until(pilot, lambda: bool(screen.query(".-error")), what="the refusal shown")
        await pilot.pause()

    assert snap_compare(fake_app(), terminal_size=(120, 40), run_before=before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_history_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(fake_app(), terminal_size=size, press=["h"], run_before=settle)


def test_shapes_screen(snap_compare) -> None:
    from tests.fakes.shapes import shape_mix

    app = fake_app()
    app.monitor.traffic = shape_mix(16)  # sixteen lengths, the longest two short of 100 runs
    assert snap_compare(app, terminal_size=(120, 40), press=["m"], run_before=settle)


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


# ---- the screens a key opens, and the replicas panel ------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_doctor_screen(snap_compare, size: tuple[int, int]) -> None:
    """Findings about a session with more threads than the (fake, 8-core) host and spinning while paced; the host
    is pinned, so the findings are the same on any machine."""
    from ortop.config import profile as profile_mod
    from ortop.config.profile import Profile
    from ortop.tui.screens.doctor import DoctorScreen
    from tests.test_doctor import host

    start = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 12, "workload.rate_hz": 100.0})
    app = fake_app(profile=start, n_configs=1, no_gpu=True)

    async def before(pilot) -> None:
        await settle(pilot)
        screen = DoctorScreen(pilot.app.monitor.snapshot(), host=host(logical=8, physical=8))
        await pilot.app.push_screen(screen)
        await until(pilot, lambda: screen.static is not None, "the static checks")

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_tune_screen_after_a_search(snap_compare, size: tuple[int, int]) -> None:
    """t, then g: the search (the real tuner over a fake racer and clock) runs to its end; the leaderboard, the
    verdict and the selected row."""
    from ortop.tui.screens import TuneScreen
    from tests.test_tui_tune import Factory

    app = fake_app(n_configs=1)
    app.tuner_factory = Factory()

    async def before(pilot) -> None:
        await settle(pilot)
        await pilot.press("t", "g")
        screen = pilot.app.screen
        assert isinstance(screen, TuneScreen)
        await until(pilot, lambda: screen.state == "done", "the search's result")

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("fmt_presses", [0, 3], ids=["python", "perf-test"])
def test_export_screen(snap_compare, fmt_presses: int) -> None:
    assert snap_compare(fake_app(), terminal_size=(120, 40), press=["e", *["right"] * fmt_presses],
                        run_before=settle)


def test_open_screen(snap_compare) -> None:
    """The profiles to open, the second highlighted after a refusal with its reason (paths pinned: the shipped
    profiles' folder differs between checkouts)."""
    from pathlib import Path

    from rich.text import Text

    from ortop.tui.screens import OpenScreen

    mine = Path("/home/me/.config/ortop/profiles")
    shipped = Path("/opt/ortop/profiles")
    paths = [mine / "resnet-ish-config-2.toml", mine / "serving.toml", shipped / "latency.toml",
             shipped / "throughput.toml", shipped / "low-cpu.toml"]

    async def before(pilot) -> None:
        await settle(pilot)
        why = Text("✗ serving.toml line 3: session.intra_op_num_threads must be an integer ≥ 0, got 'four'",
                   style="bold red")
        await pilot.app.push_screen(OpenScreen(paths, mine, message=why, highlight=paths[1]))
        await pilot.pause()

    assert snap_compare(fake_app(), terminal_size=(120, 40), run_before=before)


def test_save_screen(snap_compare) -> None:
    """ctrl+s: the name offered (the model and the configuration) and the file it names."""
    assert snap_compare(fake_app(), terminal_size=(120, 40), press=["ctrl+s"], run_before=settle)


@pytest.mark.parametrize("size,replicas", [((80, 24), 2), ((120, 40), 2), ((160, 50), 8)],
                         ids=["80x24-2", "120x40-2", "160x50-8"])
def test_replicas_panel(snap_compare, size: tuple[int, int], replicas: int) -> None:
    """Pinned replicas: the panel beside the others, and the CPU cores tagged with the replica that owns them."""
    from ortop.config import profile as profile_mod
    from ortop.config.profile import Profile

    start = profile_mod.merge(Profile(), **{"workload.replicas": replicas, "workload.pin_replicas": True})
    app = fake_app(profile=start, n_configs=1, replicas=replicas, pin_replicas=True, host_cores=8)
    assert snap_compare(app, terminal_size=size, run_before=settle)
