"""The UI driven as a user would (Pilot), over the real Monitor and a real worker on a small MatMul model.

Only the GPU is faked (this host may have none); the CPU collector is the real one. Each test stops its monitor.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortop.collectors.cpu import FakeCpuCollector, PsutilCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.live.monitor import Monitor
from ortop.tui import actions
from ortop.tui.actions import sanitize_name
from ortop.tui.app import OrtopApp, make_app
from ortop.tui.screens import ConfirmScreen, ExportScreen, HistoryScreen, OpenScreen, SaveAs, SaveScreen, SettingsScreen
from ortop.tui.widgets import Panel
from tests.fakes import FakeMonitor, StepClock
from tests.models import make_matmul_model
from tests.poll import until

SIZE = (120, 40)


@pytest.fixture
def model(tmp_path: Path) -> str:
    return make_matmul_model(tmp_path / "matmul.onnx", n=64)


@contextlib.contextmanager
def started(model: str, threads: int = 1, rate_hz: float = 200.0) -> Iterator[Monitor]:
    """A real Monitor on ``model``, running ``threads`` intra-op threads paced at ``rate_hz`` (3 warm-up runs), stopped
    at the end."""
    start = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": threads, "workload.rate_hz": rate_hz,
                                            "workload.warmup_runs": 3})
    m = Monitor(model, start)
    m.start()
    try:
        yield m
    finally:
        m.stop()


@pytest.fixture
def monitor(model: str):
    # One thread, paced at 200 Hz: the worker leaves this 2-core host's CPU to the app under test.
    with started(model) as m:
        yield m


def app_for(monitor: Monitor, tmp_path: Path, **kw) -> OrtopApp:
    return make_app(monitor, cpu=PsutilCpuCollector(), gpu=FakeGpuCollector(seed=1), refresh_hz=10.0,
                    profile_dir=tmp_path / "profiles", **kw)


async def open_settings(pilot) -> None:
    """Press ``s`` and wait until the form has drawn: keys typed before that are dropped by design, and its first
    draw shows the running profile again (over anything typed into it meanwhile)."""
    await pilot.press("s")
    app = pilot.app
    await until(pilot, lambda: app._keys_held is None or app._keys_held[1] is not None, what="the form drawn")


def measuring(monitor: Monitor, min_runs: int = 20) -> Callable[[], bool]:
    def ok() -> bool:
        s = monitor.snapshot()
        return s.state == "measuring" and s.runs >= min_runs and s.pending is None
    return ok


def panel_text(app: OrtopApp, pid: str) -> str:
    return app.screen_stack[0].query_one(f"#{pid}", Panel).text.plain


async def test_panels_fill_with_numbers_once_measuring(monitor: Monitor, tmp_path: Path) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor, 50), what="measuring")
        await until(pilot, lambda: "runs" in panel_text(app, "latency") and "—" not in
                       panel_text(app, "latency").split("\n")[-2], what="latency figures")
        latency = panel_text(app, "latency")
        assert "p50 " in latency and " ms" in latency
        assert "measuring" in panel_text(app, "model")
        assert "x: float32[1x64]" in panel_text(app, "model")  # the fed input and its shape
        assert "CPU" in panel_text(app, "model")
        assert "worker " in panel_text(app, "cpu") and "ui " in panel_text(app, "cpu")
        assert "CPU/run" in panel_text(app, "spin") and "ms" in panel_text(app, "spin")
        assert "NVIDIA H100" in panel_text(app, "gpu")
        assert "session built" in panel_text(app, "events")
        assert "measuring" in panel_text(app, "status")


async def test_settings_apply_threads_rebuilds_and_history_grows(monitor: Monitor, tmp_path: Path) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        first = monitor.snapshot().config_id
        await open_settings(pilot)
        assert isinstance(app.screen, SettingsScreen)
        await pilot.press("backspace", "2", "enter")  # intra-op threads is focused: 1 → 2, enter applies
        await pilot.pause()
        assert not isinstance(app.screen, SettingsScreen)
        await until(pilot, lambda: monitor.snapshot().config_id != first and measuring(monitor)(),
                       what="the rebuilt session measuring")
        snap = monitor.snapshot()
        assert snap.profile.session.intra_op_num_threads == 2
        assert len(snap.history) == 2
        assert "intra_op_num_threads: 1 → 2" in snap.history[-1].label
        await pilot.press("h")
        assert isinstance(app.screen, HistoryScreen)
        await pilot.pause()
        table = app.screen.query_one("#history-table")
        assert table.row_count == 2
        await pilot.press("h")
        assert not isinstance(app.screen, HistoryScreen)


async def test_invalid_affinity_is_refused_beside_its_field(monitor: Monitor, tmp_path: Path) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        before = monitor.snapshot()
        await open_settings(pilot)
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.set_value("session.intra_op_num_threads", "3")
        screen.set_value("session.intra_op_thread_affinities", "1")  # one core list for two pool threads
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is screen  # still open, with what the user typed
        hint = screen.query_one("#hint-session--intra_op_thread_affinities")
        assert hint.has_class("-error") and "needs 2" in str(hint.render())
        assert screen.values()["session.intra_op_thread_affinities"] == "1"
        assert screen.values()["session.intra_op_num_threads"] == "3"
        after = monitor.snapshot()
        assert after.config_id == before.config_id and after.pending is None
        assert after.profile == before.profile
        await pilot.press("escape")
        assert not isinstance(app.screen, SettingsScreen)
        # reopened, the same form shows the running profile again, errors gone
        await open_settings(pilot)
        await pilot.pause()
        assert app.screen is screen
        assert screen.values()["session.intra_op_thread_affinities"] == ""
        assert not screen.query(".fhint.-error")
        await pilot.press("escape")


async def test_ctrl_s_saves_a_profile_that_loads_back_equal(monitor: Monitor, tmp_path: Path) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, SaveScreen)
        await pilot.press(*"my best", "enter")  # the default name is selected: typing replaces it
        await pilot.pause()
        path = tmp_path / "profiles" / "my-best.toml"
        assert path.exists()
        assert not isinstance(app.screen, SaveScreen)
        saved = profile_mod.load(path)
        assert replace(saved, description="") == monitor.snapshot().profile
        assert saved.description == "threads 1 · 200 Hz · warm-up runs 3, saved from the live view on matmul.onnx"
        assert any("profile saved" in e.text for e in monitor.snapshot().events)
        # the same name again asks first, and "n" leaves the file alone
        mtime = path.stat().st_mtime_ns
        await pilot.press("ctrl+s", *"my best", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.press("escape")
        assert path.stat().st_mtime_ns == mtime
    assert sanitize_name("../etc/pass wd.toml") == "pass-wd"


async def test_sighup_saves_last_session_and_summary(monitor: Monitor, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from ortop.config.files import last_session_path

    summary = tmp_path / "summary.json"
    app = app_for(monitor, tmp_path, summary_path=summary)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        await pilot.press("p")  # spinning off: a rebuild, so the saved profile is not just the start one
        await until(pilot, lambda: monitor.snapshot().profile.session.allow_spinning is False
                       and measuring(monitor)(), what="spinning off")
        app.handle_signal(signal.SIGHUP)  # what the SIGHUP handler calls
        await pilot.pause()
    assert app.return_code == 0
    path = last_session_path(monitor.snapshot().profile.model)
    assert path.is_relative_to(tmp_path)
    assert profile_mod.load(path) == monitor.snapshot().profile
    import json

    data = json.loads(summary.read_text())
    assert data["runs"] > 0 and data["profile"]["session"]["allow_spinning"] is False
    m = data["monitor"]
    assert 0 < m["live_cpu_s"] <= m["cpu_s"] and 0 < m["live_wall_s"] <= m["wall_s"]


async def test_space_pauses_and_resumes_and_q_keeps_the_session(monitor: Monitor, tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from ortop.config.files import last_session_path

    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        await pilot.press("space")
        await until(pilot, lambda: monitor.snapshot().state == "paused", what="paused")
        await until(pilot, lambda: "paused" in panel_text(app, "status"), what="paused shown")
        await pilot.press("space")
        await until(pilot, lambda: monitor.snapshot().state == "measuring", what="resumed")
        await pilot.press("q")
        await pilot.pause()
    assert app.finished and app.return_code == 0
    assert profile_mod.load(last_session_path(monitor.snapshot().profile.model)) == monitor.snapshot().profile


async def test_quick_keys_stack_on_the_pending_profile(monitor: Monitor, tmp_path: Path) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        await pilot.press("R", "b", "plus")  # 200 Hz is not in the cycle: closed loop; dbb 4; threads 1 → 2
        await until(pilot, lambda: monitor.snapshot().profile.session.intra_op_num_threads == 2
                       and measuring(monitor)(), what="three changes applied")
        prof = monitor.snapshot().profile
        assert prof.workload.rate_hz == 0.0 and prof.session.dynamic_block_base == 4
        await pilot.press("R")  # closed loop → half its measured throughput (100 Hz if too few runs were measured)
        await until(pilot, lambda: monitor.snapshot().profile.workload.rate_hz > 0 and measuring(monitor)(),
                       what="paced")
        hz = monitor.snapshot().profile.workload.rate_hz
        await until(pilot, lambda: f"dbb 4 · {hz:g} Hz" in panel_text(app, "model"), what="model panel")
        assert "threads 2 · " in panel_text(app, "model")


async def test_w_and_a_on_a_real_worker_poisson_and_back_and_the_pool_pinned(monitor: Monitor, tmp_path: Path
                                                                              ) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        await pilot.press("w")  # paced at 200 Hz → Poisson at 200 Hz: the queue shows in the latency panel
        await until(pilot, lambda: monitor.snapshot().profile.workload.arrival == "poisson"
                       and measuring(monitor)(), what="poisson")
        await until(pilot, lambda: "poisson queue " in panel_text(app, "latency"), what="queue and service split")
        await pilot.press("R")  # 200 Hz is not in R's cycle: a closed loop, which the worker takes
        await until(pilot, lambda: monitor.snapshot().profile.workload.rate_hz == 0.0 and measuring(monitor)(),
                       what="closed loop")
        assert monitor.snapshot().profile.workload.arrival is None
        await pilot.press("plus", "a")  # threads 1 → 2, then its one pool thread pinned to the last core
        last = (os.cpu_count() or 1) - 1
        await until(pilot, lambda: monitor.snapshot().profile.session.intra_op_thread_affinities == ((last,),)
                       and measuring(monitor)(), what="pinned")
        assert not [e for e in monitor.snapshot().events if e.level == "error"]


# ---- over the fake monitor: what the screens hand back and what the app does with it --------------------------
def fake_app(tmp_path: Path) -> OrtopApp:
    from ortop.collectors.cpu import FakeCpuCollector

    return make_app(FakeMonitor(), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir=tmp_path / "profiles", clock=StepClock())


@pytest.mark.slow
async def test_settings_dismiss_with_the_profile_and_a_refusal_reopens_with_the_error(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.set_value("session.intra_op_num_threads", "3")
        screen.set_value("session.intra_op_thread_affinities", "cores: 8-9")  # the fake host has cores 0-7
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is screen  # the monitor refused: the same form again, with what was typed
        shown = " ".join(str(w.render()) for w in screen.query(".-error, #settings-error"))
        assert "does not exist on this host" in shown
        assert screen.values()["session.intra_op_thread_affinities"] == "cores: 8-9"
        assert app.monitor.applied == []
        screen.set_value("session.intra_op_thread_affinities", "")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, SettingsScreen)
        assert app.monitor.applied[-1].session.intra_op_num_threads == 3


@pytest.mark.slow
async def test_save_screen_answers_with_a_path_and_the_app_writes_it(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    results: list = []
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(SaveScreen(tmp_path / "elsewhere", "a b"), results.append)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert results == [SaveAs("a b", tmp_path / "elsewhere" / "a-b.toml")]
        assert not (tmp_path / "elsewhere").exists()  # the screen only names the file
        # through the app: the file is written, and a write that fails asks again with the reason
        await pilot.press("ctrl+s", *"mine", "enter")
        await pilot.pause()
        assert (tmp_path / "profiles" / "mine.toml").exists()
        app.profile_dir = tmp_path / "profiles" / "mine.toml" / "sub"  # a folder under a file: the write fails
        await pilot.press("ctrl+s", *"again", "enter")
        await pilot.pause()
        assert isinstance(app.screen, SaveScreen)
        assert "cannot write" in str(app.screen.query_one("#save-message").render())
        await pilot.press("escape")


@pytest.mark.slow
async def test_history_rows_are_applied_saved_and_exported_by_the_app(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("h")
        await pilot.pause()
        history = app.screen
        assert isinstance(history, HistoryScreen)
        await pilot.press("up", "enter")  # row #1
        await pilot.pause()
        assert app.monitor.applied[-1].session.intra_op_num_threads == 2
        assert "re-applying #1" in str(history.query_one("#history-detail").render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, SaveScreen) and app.screen.default_name.startswith("config-")
        await pilot.press("escape", "e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        export = app.screen
        await pilot.press("w")  # asks a name, the model's offered
        await pilot.pause()
        assert isinstance(app.screen, SaveScreen) and app.screen.default_name == "resnet-ish-export"
        await pilot.press("enter")
        await pilot.pause()
        written = sorted((tmp_path / "profiles").glob("resnet-ish-export*.py"))
        assert len(written) == 1 and "written to" in str(export.query_one("#export-message").render())
        await pilot.press("w")
        await pilot.pause()
        assert app.screen.default_name == "resnet-ish-export-2"  # a free name is offered: never overwrites
        await pilot.press("ctrl+a", "ctrl+k", *"serving", "enter")  # the user names it
        await pilot.pause()
        assert (tmp_path / "profiles" / "serving.py").exists()
        assert len(sorted((tmp_path / "profiles").glob("*.py"))) == 2


@pytest.mark.slow
async def test_open_applies_the_chosen_profile_and_a_bad_one_asks_again(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    profile_mod.save(profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 3}), folder / "a-three.toml")
    (folder / "b-broken.toml").write_text("[session]\nintra_op_num_threads = 'x'\n")
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        await pilot.press("down", "enter")  # b-broken
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen) and app.screen.highlight == folder / "b-broken.toml"
        assert "✗" in str(app.screen.query_one("#open-message").render())
        await pilot.press("up", "enter")  # a-three
        await pilot.pause()
        assert not isinstance(app.screen, OpenScreen)
        assert app.monitor.applied[-1].session.intra_op_num_threads == 3


def test_actions_name_and_write_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from ortop.config.files import last_session_path

    assert actions.profile_path(tmp_path, " x/../my best.toml ") == tmp_path / "my-best.toml"
    assert actions.profile_path(tmp_path, "../..") is None
    out = actions.save_profile(replace(Profile(), model="rel/m.onnx"), tmp_path / "p.toml")
    assert str(Path("rel/m.onnx").resolve()) in out.read_text()  # works from any folder
    snap = FakeMonitor().snapshot()
    summary = tmp_path / "summary.json"
    assert actions.finish_session(snap, summary_path=summary, duration_s=1.0, gpu_sample=None,
                                  ui_cost={"cpu_s": 0.1}) == []
    assert profile_mod.load(last_session_path(snap.profile.model)) == snap.profile
    import json

    assert json.loads(summary.read_text())["monitor"] == {"cpu_s": 0.1}
    errors = actions.finish_session(snap, summary_path=summary / "under-a-file.json", duration_s=1.0,
                                    gpu_sample=None, ui_cost={})
    assert len(errors) == 1 and errors[0].startswith("cannot write summary")


@pytest.mark.slow
async def test_v_verifies_the_last_change_and_the_history_verifies_a_row():
    """v asks the monitor to verify the newest row against the one before; the history's v the selected row; the
    status line shows the verification under way."""
    from ortop.engine.live.view import MonitorView

    mon = FakeMonitor()
    assert isinstance(mon, MonitorView)
    app = make_app(mon, cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0)
    async with app.run_test(size=(120, 40)) as pilot:
        app.tick()
        await pilot.press("v")
        await pilot.pause()
        assert mon.verified == [(2, 1)]
        app.tick()
        await pilot.pause()
        assert "verifying #2 vs #1" in panel_text(app, "status")
        await pilot.press("h")
        await pilot.pause()
        await pilot.press("up", "v")
        await pilot.pause()
        assert mon.verified[-1] == (1, 0)
        await pilot.press("up", "v")  # the first row has nothing before it: said, not raised
        await pilot.pause()
        assert len(mon.verified) == 2
        assert mon.verify_metrics == [None, None]  # no objective picked: the change's own metric


@pytest.mark.slow
async def test_v_judges_the_objective_picked_in_the_tune_screen():
    """The objective the user picks with tune's o is what the live view's v judges from then on."""
    mon = FakeMonitor()
    app = make_app(mon, cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0)
    async with app.run_test(size=(120, 40)) as pilot:
        app.tick()
        await pilot.press("t")
        await pilot.pause()
        screen = app.screen
        picked = screen.objective
        await pilot.press("o")
        await pilot.pause()
        assert screen.objective != picked
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("v")
        await pilot.pause()
        assert mon.verify_metrics == [screen.objective], (mon.verify_metrics, screen.objective)


# ---- what the demo walk found: each item, as a user meets it ---------------------------------------------------
@pytest.fixture
def conv_monitor(tmp_path: Path):
    """A real worker on a conv model whose spatial dims are free (left at 1 unless --dim is given)."""
    from tests.models import make_conv_model

    with started(make_conv_model(tmp_path / "conv.onnx")) as m:
        yield m


@pytest.mark.slow
async def test_free_spatial_dims_left_at_1_are_a_warning_shown_whole_and_once(conv_monitor: Monitor,
                                                                              tmp_path: Path) -> None:
    """The note used to be an info event, cut at 120 columns just before its flag, and logged again on every
    rebuild (×12). Now: a warning, the flag first, wrapped whole in the events and the model panel, said once."""
    app = app_for(conv_monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, measuring(conv_monitor), what="first session")
        warnings = [e for e in conv_monitor.snapshot().events if e.level == "warning" and e.text.startswith("--dim")]
        assert [e.text.split(":")[0] for e in warnings] == ["--dim height=VALUE", "--dim width=VALUE"]
        await until(pilot, lambda: "--dim height=VALUE" in panel_text(app, "events"), what="the warning shown")
        events = panel_text(app, "events")
        assert "--dim width=VALUE: input 'x' axis 3 is left" in events
        assert "convolution's input" in events  # wrapped, not cut
        # A slow host can queue a few of the first paced runs; the panel's "queueing" line then takes a row until the
        # backlog clears (the service is microseconds), so the panel is waited for rather than read at once.
        await until(pilot, lambda: "! --dim height=VALUE" in panel_text(app, "model") and
                       "! --dim width=VALUE" in panel_text(app, "model"), what="both warnings in the model panel")
        first = conv_monitor.snapshot().config_id
        await pilot.press("p")  # a rebuild: the same feeds, the same notes
        await until(pilot, lambda: conv_monitor.snapshot().config_id != first and measuring(conv_monitor)(),
                       what="rebuilt")
        again = [e for e in conv_monitor.snapshot().events if e.text.startswith(("--dim", "free dim"))]
        assert [e.count for e in again] == [1, 1, 1]  # once per distinct note per session, not once per build


async def test_r_resets_the_runs_and_the_measuring_timer(monitor: Monitor, tmp_path: Path) -> None:
    app = app_for(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: measuring(monitor)() and monitor.snapshot().state_elapsed > 2.5,
                       what="measuring for a while")
        await pilot.press("r")
        snap = monitor.snapshot()
        assert snap.state == "measuring" and snap.state_elapsed < 1.0 and snap.runs < 200
        await until(pilot, lambda: "measuring 0 s" in panel_text(app, "status"), what="the timer shown reset")


def fake_app_with(monitor: FakeMonitor, tmp_path: Path) -> OrtopApp:
    return make_app(monitor, cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir=tmp_path / "profiles", clock=StepClock())


@pytest.mark.slow
async def test_a_paced_rate_the_model_cannot_keep_is_said_with_the_achieved_rate(tmp_path: Path) -> None:
    mon = FakeMonitor()  # the running configuration is paced at 100 Hz
    row = mon.history[-1]
    mon.history[-1] = replace(row, throughput_per_s=16.0, latency=replace(row.latency, runs=5))
    app = fake_app_with(mon, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(3):  # the layout settles: later drawings are the refresh tick's alone
            app.clock.t += 1.0
            app.tick()
            await pilot.pause()
        assert "saturated" not in panel_text(app, "status") + panel_text(app, "model")  # 5 runs: too few to tell
        mon.history[-1] = replace(row, throughput_per_s=16.0)  # the runs come in, at 16/s
        app.clock.t += 1.0
        app.tick()
        await pilot.pause()
        assert "! saturated: 16/s of 100 Hz" in panel_text(app, "status")
        assert "saturated: 16/s of 100 Hz: the model cannot keep this rate" in panel_text(app, "model")


@pytest.mark.slow
async def test_opening_a_profile_without_a_section_keeps_its_running_values(tmp_path: Path) -> None:
    """A profile of session knobs used to reset the running 100 Hz to a closed loop."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "threads-only.toml").write_text("[session]\nintra_op_num_threads = 3\n")
    app = fake_app(tmp_path)  # running: 2 threads, spinning off, 100 Hz
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        await pilot.press("enter")
        await pilot.pause()
        applied = app.monitor.applied[-1]
        assert applied.session.intra_op_num_threads == 3
        assert applied.workload.rate_hz == 100.0  # no [workload] in the file: the running rate is kept
        assert applied.session.allow_spinning is None  # [session] is in the file: it is taken whole
        assert any("no [provider], [workload], [env] in it: running values kept" in e.text
                   for e in app.monitor.events)


def notes(app: OrtopApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


@pytest.mark.slow
async def test_quick_keys_that_change_nothing_say_so_and_rebuild_nothing(tmp_path: Path, monkeypatch) -> None:
    from ortop.tui import quick

    monkeypatch.setattr(quick, "_logical", lambda: 4)
    monkeypatch.setattr(quick, "_physical", lambda: 4)
    mon = FakeMonitor(profile=profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4}), n_configs=1)
    app = fake_app_with(mon, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")  # at the host's logical cores
        await pilot.pause()
        assert mon.applied == [] and "already at 4, this host's logical cores" in notes(app)[-1]
        mon.history[-1] = replace(mon.history[-1], profile=replace(mon.start_profile, session=replace(
            mon.start_profile.session, intra_op_num_threads=1)))
        await pilot.press("minus")  # at 1
        await pilot.pause()
        assert mon.applied == [] and "already at 1, the fewest" in notes(app)[-1]
        mon.history[-1] = replace(mon.history[-1], profile=replace(mon.start_profile, session=replace(
            mon.start_profile.session, intra_op_num_threads=0)))
        await pilot.press("plus")  # ORT's default already runs more than the 4 logical cores here
        await pilot.pause()
        # the count is the one the worker runs (the fake's pool: 5 threads and the caller), not a guess
        assert mon.applied == [] and "ORT's default already runs 6 intra-op threads (counted in the worker)" in \
            notes(app)[-1]
        assert "counted in the worker" in mon.events[-1].text  # in the events too, not only a passing toast
        assert len(mon.history) == 1  # no rebuild, no history row


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 3])
def test_the_threads_counted_in_a_real_worker_are_the_sessions_intra_op_threads(model: str, threads: int) -> None:
    """The CPU panel's pool is ORT's intra-op pool alone: the threads numpy and onnxruntime start at import are
    named ``library`` (they were counted as pool threads, so ORT's default read two threads more than it runs)."""
    from ortop.tui.meters import MeterState

    with started(model, threads=threads) as m:
        end = time.monotonic() + 20
        while m.snapshot().state != "measuring" and time.monotonic() < end:
            time.sleep(0.05)
        meters = MeterState(cpu=PsutilCpuCollector())
        meters.watch(m.snapshot().worker_pid)
        meters.sample()
        time.sleep(0.3)
        meters.sample()
        roles = sorted(t.role for t in meters.cpu_sample.threads)
        assert meters.intra_op_threads() == threads, roles
        if os.path.isdir("/proc/self/task"):
            assert "library" in roles, roles  # numpy's BLAS pool at least (two cores here)


def test_plus_from_ort_default_steps_from_the_count_ort_runs() -> None:
    from ortop.tui import quick

    # ORT runs 4 threads here though the host has 2 physical cores: + asks for 5, - for 3
    assert quick.threads(Profile(), +1, logical=8, physical=2, running=4).changes == {quick.THREADS: 5}
    assert quick.threads(Profile(), -1, logical=8, physical=2, running=4).changes == {quick.THREADS: 3}
    assert quick.threads(Profile(), +1, logical=8, physical=2).changes == {quick.THREADS: 3}  # not counted yet


@pytest.mark.slow
async def test_plus_while_pinned_asks_before_dropping_the_affinity(tmp_path: Path, monkeypatch) -> None:
    from ortop.tui import quick

    monkeypatch.setattr(quick, "_logical", lambda: 8)
    pinned = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 3,
                                             "session.intra_op_thread_affinities": [[1], [2]]})
    mon = FakeMonitor(n_configs=1)
    mon.history[-1] = replace(mon.history[-1], profile=replace(pinned, model=mon.model_path))
    app = fake_app_with(mon, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and "drops the thread affinity 1;2" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert mon.applied == [] and "nothing changed" in notes(app)[-1]
        await pilot.press("plus", "y")
        await pilot.pause()
        new = mon.applied[-1]
        assert new.session.intra_op_num_threads == 4 and new.session.intra_op_thread_affinities is None
        assert any(e.level == "warning" and "thread affinity 1;2 dropped" in e.text for e in mon.events)


@pytest.mark.slow
async def test_history_rows_read_apart_and_the_selected_one_is_shown_in_full(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("h")
        await pilot.pause()
        table = app.screen.query_one("#history-table")
        cells = [table.get_row_at(i)[2].plain for i in range(table.row_count)]
        assert cells == ["start", "threads 2", "spin off · 100 Hz"]
        detail = str(app.screen.query_one("#history-detail").render())
        assert "#2 allow_spinning: default → off; intra_op_num_threads: 0 → 2; rate_hz: 0.0 → 100.0" in detail
        assert "from #1: spin off · 100 Hz" in detail
        await pilot.press("up")
        await pilot.pause()
        assert "from #0: threads 2" in str(app.screen.query_one("#history-detail").render())


@pytest.mark.slow
async def test_at_80x24_the_footer_shows_the_demo_keys_and_the_header_cuts_at_words(tmp_path: Path) -> None:
    from textual.widgets._footer import FooterKey

    from ortop.tui.keymap import MAIN_KEYS, bar_display

    def left_out_reach_the_palette(app, shown) -> None:
        """Every key the footer leaves out is a command of the palette the footer's ``^p more`` opens."""
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for k in MAIN_KEYS:
            if k.footer and bar_display(k) not in shown and k.action != "quit":
                assert any(title.startswith(k.label + " (") for title in titles), (k.label, titles)

    app = fake_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.tick()
        await pilot.pause()
        keys = list(app.screen.query(FooterKey))
        shown = {k.key_display: k for k in keys}
        for key in ("?", "+/-", "p", "R", "b", "v", "spc", "s", "q", "^p"):
            assert key in shown, sorted(shown)
            assert shown[key].region.right <= 80, (key, shown[key].region)  # on screen, not cut off
        assert shown["^p"].description == "more"  # h, ^s, o, e… are not dropped silently
        left_out_reach_the_palette(app, shown)
        status = panel_text(app, "status")
        assert status.rstrip().endswith("#2 threads 2… · 100 Hz fixed")  # the rate and arrivals kept, whole
    async with fake_app(tmp_path).run_test(size=(120, 40)) as pilot:  # the screens' keys too at 120
        await pilot.pause()
        keys = list(pilot.app.screen.query(FooterKey))
        shown = {k.key_display: k for k in keys}
        assert {"d", "t", "c", "^s", "a", "w", "q", "^p"} <= set(shown), sorted(shown)  # h waits in the palette
        assert all(k.region.right <= 120 for k in keys)
        left_out_reach_the_palette(pilot.app, shown)
        left_out_reach_the_palette(pilot.app, shown)


async def test_cores_show_the_workers_share_threads_their_role_and_one_unit(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.tick()
        await pilot.pause()
        import re

        cpu_text = panel_text(app, "cpu")
        shares = [(int(w), int(a)) for w, a in re.findall(r"▏ *(\d+)/(\d+)", cpu_text)]
        assert len(shares) == 8 and all(w <= a for w, a in shares)  # worker/all per core
        assert any(w > 50 for w, _ in shares) and any(w == 0 for w, _ in shares)  # the worker's cores, quiet ones
        assert re.search(r"worker \d\.\d\d cores · host \d+%", cpu_text)
        assert app.screen.query_one("#cpu", Panel).border_title == "CPU · per core: worker / all %"
        spin_text = panel_text(app, "spin")
        assert "caller 0" in spin_text and "pool" in spin_text and "python" not in spin_text
        assert "0.29 cores avg" in spin_text and "% of a core" in spin_text


@pytest.mark.slow
async def test_settings_errors_follow_the_typing_and_blank_is_the_default(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        hint = screen.query_one("#hint-session--intra_op_num_threads")
        await pilot.press("backspace", "x")  # intra-op threads: 2 → "x"
        await pilot.pause()
        assert hint.has_class("-error") and "not a whole number" in str(hint.render())  # as typed, no enter
        await pilot.press("backspace")  # blank: ORT's default, like every other field
        await pilot.pause()
        assert not hint.has_class("-error") and "ORT's default" in str(hint.render())
        aff = screen.query_one("#hint-session--intra_op_thread_affinities")
        screen.set_value("session.intra_op_thread_affinities", "0-99999999")  # used to freeze the app
        await pilot.pause()
        assert aff.has_class("-error") and "beyond any host" in str(aff.render())
        screen.set_value("session.intra_op_thread_affinities", "")
        await pilot.pause()
        assert not aff.has_class("-error") and "not pinned" in str(aff.render())
        await pilot.press("enter")
        await pilot.pause()
        assert app.monitor.applied[-1].session.intra_op_num_threads == 0


@pytest.mark.slow
async def test_enter_in_the_rate_field_applies_the_typed_rate(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.query_one("#f-workload--rate_hz").focus()
        await pilot.pause()
        await pilot.press("end", *["backspace"] * 8, "3", "5")
        await pilot.pause()
        assert screen.values()["workload.rate_hz"] == "35"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, SettingsScreen)
        assert app.monitor.applied[-1].workload.rate_hz == 35.0


@pytest.mark.slow
async def test_enter_on_a_choice_applies_the_form_and_enter_on_close_does_not(tmp_path: Path) -> None:
    """A choice (arrival here) took enter and did nothing: it has no list to open, so enter applies, as in a text
    field."""
    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.query_one("#f-workload--arrival").focus()
        await pilot.pause()
        await pilot.press("right", "right", "right")  # default → closed → fixed → poisson
        await pilot.pause()
        assert screen.values()["workload.arrival"] == "poisson"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, SettingsScreen)
        assert app.monitor.applied[-1].workload.arrival == "poisson"
        applied = len(app.monitor.applied)
        await open_settings(pilot)
        assert app.screen is screen
        screen.set_value("workload.rate_hz", "40")
        screen.query_one("#cancel").focus()  # enter on Close still closes without applying
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, SettingsScreen)
        assert len(app.monitor.applied) == applied


@pytest.mark.slow
async def test_settings_sections_are_a_key_away_and_the_focused_row_shows(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_settings(pilot)
        screen = app.screen
        assert isinstance(screen, SettingsScreen)

        def focused(wid: str) -> Callable[[], bool]:
            return lambda: app.focused is not None and app.focused.id == wid

        await until(pilot, focused("f-session--intra_op_num_threads"), what="the first field focused")
        await until(pilot, lambda: screen.query_one("#label-session--intra_op_num_threads").has_class("-focus"),
                       what="the first field's label marked")
        names = screen.sections()
        presses = names.index("Workload")
        await pilot.press(*["ctrl+down"] * presses)
        await until(pilot, focused("f-workload--rate_hz"), what="the Workload section's first field")  # ~25 tabs
        await until(pilot, lambda: screen.query_one("#label-workload--rate_hz").has_class("-focus"),
                       what="its label marked")
        await until(pilot, lambda: "Workload › rate Hz" in str(screen.query_one("#settings-focus").render()),
                       what="the focused row named")
        await pilot.press("ctrl+up")
        from ortop.tui import form

        before = next(f for f in form.FIELDS if f.section == names[presses - 1])
        await until(pilot, focused("f-" + before.key.replace(".", "--")), what="the section before")
        await pilot.press("ctrl+down", "ctrl+down")  # wraps around to the first section
        await until(pilot, focused("f-session--intra_op_num_threads"), what="the first section again")


def help_text(app: OrtopApp, width: int) -> str:
    """The help screen's text as it is laid out ``width`` cells wide (its lines unwrapped into one string)."""
    import io

    from rich.console import Console

    from ortop.tui.screens import HelpScreen

    screen = app.screen
    assert isinstance(screen, HelpScreen)
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(screen.query_one("#help-text").content)
    return " ".join(console.export_text().split())


async def test_help_explains_every_panels_figures_and_scrolls_at_80x24(monitor: Monitor, tmp_path: Path) -> None:
    from textual.containers import VerticalScroll

    from ortop.tui.screens import HelpScreen

    app = app_for(monitor, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, measuring(monitor), what="first session")
        titles = [str(p.border_title) for p in app.screen.query(Panel) if p.border_title]
        assert len(titles) >= 8  # CPU, spin, GPU, memory, latency, replicas, model, events
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = help_text(app, 76)
        for title in titles:  # every panel of the live view has its legend
            assert title in text, title
        for figure in ("in Run 56%", "p99 after idle (ms)", "3▕███▌ 40/57", "between runs N ms/s",
                       "▼ rebuild", "own scale", "thread core % of a core", "caller N", "main", "reader", "pool",
                       "p50 ▁▂█ 0.345 ms", "last 5 s: N runs", "all 8,413 runs: p50…", "★",
                       "p50 +3.1 % unverified", "too few runs", "−12 % faster / slower", "no difference",
                       "undecided", "not comparable"):
            assert figure in text, figure
        # each p50's window, from the running monitor's own spans
        assert f"one column per {monitor.bucket_s:g} s" in text
        assert f"the runs that ended in the last {monitor.window_s:g} s" in text
        assert "since its build or the last reset (r): its run count, p50, p99, p99.9 over its last 50,000 runs" \
            in text
        assert "over the last 0.2 s" in text  # the CPU meters' period at this app's 10 Hz (two ticks a frame)
        box = app.screen.query_one("#help-box", VerticalScroll)
        assert box.max_scroll_y > 0 and box.scroll_y == 0  # longer than 24 lines: it scrolls
        await pilot.press("pagedown")
        await pilot.pause()
        assert box.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert box.scroll_y == box.max_scroll_y
        await pilot.press("question_mark")  # the key that opened it closes it
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


def test_the_help_quotes_the_engines_own_figures() -> None:
    from ortop.engine.live.store import CONFIG_RING
    from ortop.engine.live.verdicts import MIN_VERDICT_RUNS
    from ortop.tui.screens import help as help_screen

    assert help_screen.CONFIG_RING == CONFIG_RING
    assert help_screen.MIN_VERDICT_RUNS == MIN_VERDICT_RUNS


@pytest.mark.slow
async def test_f1_is_help_and_f10_quits_like_htop(tmp_path: Path) -> None:
    from ortop.tui.screens import HelpScreen

    app = fake_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("h")  # h stays the history
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)
        await pilot.press("h", "f10")
        await pilot.pause()
    assert app.finished and app.return_code == 0


@pytest.mark.slow
async def test_saved_profiles_are_described_by_what_they_set_and_exports_are_named(tmp_path: Path) -> None:
    import os
    import stat

    app = fake_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+s", "ctrl+a", "ctrl+k", *"fast", "enter")
        await pilot.pause()
        saved = profile_mod.load(tmp_path / "profiles" / "fast.toml")
        assert saved.description == "threads 2 · spin off · 100 Hz, saved from the live view on resnet-ish.onnx"
        await pilot.press("e", "w", "ctrl+a", "ctrl+k", *"serving", "enter")
        await pilot.pause()
        out = tmp_path / "profiles" / "serving.py"
        assert out.exists() and "written to" in str(app.screen.query_one("#export-message").render())
        mask = os.umask(0)
        os.umask(mask)
        assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask  # an ordinary file, not the temp file's 0600
