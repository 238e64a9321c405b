"""The live view's rate and block-base keys (``R``, ``b``) pressed as a user would (Pilot), over the fake monitor:
what each press hands the monitor, that presses stack on the profile being built, and what the user is told.

The same keys on a real worker are in tests/test_tui.py (``test_quick_keys_stack_on_the_pending_profile``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.tui import quick
from ortop.tui.app import OrtopApp, make_app
from ortop.tui.noload import no_load
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


@pytest.mark.slow
async def test_capital_r_from_a_rate_outside_the_cycle_goes_to_a_closed_loop(tmp_path: Path) -> None:
    """No ceiling is known for these settings: the preset rates may not fit the model, so a closed loop, which
    measures one."""
    monitor = FakeMonitor(profile=profile_mod.merge(Profile(), **{"workload.rate_hz": 250.0}), n_configs=1)
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await pilot.pause()
        assert [p.workload.rate_hz for p in monitor.applied] == [0.0]


@pytest.mark.parametrize(("p50_ms", "ceiling", "paced"), [
    (1.0, "970/s", [500.0, 100.0]),   # a 1 ms model: 970 runs/s back to back
    (40.0, "24/s", [12.0, 2.5]),      # a 40 ms one: 24 runs/s; "100 Hz" would be four times what it can serve
])
@pytest.mark.slow
async def test_capital_r_paces_at_shares_of_the_measured_ceiling_and_says_which(tmp_path: Path, p50_ms: float,
                                                                                 ceiling: str, paced: list) -> None:
    monitor = FakeMonitor(n_configs=1, p50_ms=p50_ms)  # ORT's defaults in a closed loop, 6000 runs measured
    start = monitor.snapshot().profile
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rates = await press_each(pilot, monitor, "R", 3, lambda p: p.workload.rate_hz)
        assert rates == [*paced, 0.0]  # closed → 50 % → 10 % of the ceiling → closed
        assert monitor.applied[0] == profile_mod.merge(start, **{"workload.rate_hz": paced[0]})
        said = [e.text for e in monitor.events if e.text.startswith(quick.label(quick.RATE))]
        assert said == [f"{quick.label(quick.RATE)}: paced at 50 % of the measured {ceiling}: {paced[0]:g} Hz",
                        f"{quick.label(quick.RATE)}: paced at 10 % of the measured {ceiling}: {paced[1]:g} Hz",
                        f"{quick.label(quick.RATE)}: closed loop: runs back to back"]
        toasts = [n.message for n in app._notifications]
        assert f"paced at 50 % of the measured {ceiling}: {paced[0]:g} Hz" in toasts


@pytest.mark.slow
async def test_capital_r_without_a_measured_closed_loop_keeps_the_fixed_rates_and_says_so(tmp_path: Path) -> None:
    monitor = FakeMonitor(n_configs=1)
    monitor.history[0] = replace(monitor.history[0], latency=replace(monitor.history[0].latency, runs=12))
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await pilot.pause()
        assert [p.workload.rate_hz for p in monitor.applied] == [100.0]
        assert monitor.events[-1].text.startswith(f"{quick.label(quick.RATE)}: paced at 100 Hz, a preset rate: "
                                                  "these settings are not measured yet")


def test_the_paced_rates_follow_the_closed_loop_of_the_same_settings():
    """R from a paced configuration finds the ceiling in the history row that ran its settings in a closed loop;
    other settings' rows do not count."""
    monitor = FakeMonitor(n_configs=3)  # #0 defaults, #1 2 threads (closed, 376/s), #2 2 threads spin off 100 Hz
    history = monitor.snapshot().history
    two = history[1].profile
    assert no_load(history, two).ceiling_per_s == pytest.approx(history[1].throughput_per_s)
    paced = profile_mod.merge(two, **{"workload.rate_hz": 120.0, "workload.arrival": "poisson"})
    assert no_load(history, paced) == no_load(history, two)
    assert no_load(history, history[2].profile) is None  # spinning off never ran in a closed loop here
    ceiling = history[1].throughput_per_s
    presets = quick.rate_presets(ceiling)
    assert presets == (200.0, 35.0)  # 184 and 37 runs/s, rounded
    # 120 Hz is no preset: the next one below it, the Poisson arrivals kept; above them all, the first
    assert quick.rate(paced, ceiling).changes == {quick.RATE: 35.0}
    assert quick.rate(profile_mod.merge(paced, **{"workload.rate_hz": 900.0}), ceiling).changes == {quick.RATE: 200.0}
    # below them all, a closed loop
    assert quick.rate(profile_mod.merge(paced, **{"workload.rate_hz": 20.0}), ceiling).changes == {
        quick.RATE: 0.0, quick.ARRIVAL: None}
    # from the last preset a closed loop, and the Poisson arrivals (which need a rate) end with it
    low = profile_mod.merge(paced, **{"workload.rate_hz": 35.0})
    assert quick.rate(low, ceiling).changes == {quick.RATE: 0.0, quick.ARRIVAL: None}
    near = profile_mod.merge(two, **{"workload.rate_hz": 180.0})  # set from a ceiling read a moment before
    assert quick.rate(near, ceiling).changes == {quick.RATE: 35.0}
    at_half = profile_mod.merge(paced, **{"workload.rate_hz": 200.0})
    assert quick.rate(at_half, ceiling).changes == {quick.RATE: 35.0}
    assert quick.rate(profile_mod.merge(two, **{"workload.rate_hz": 35.0}), ceiling).changes == {quick.RATE: 0.0}


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


@pytest.mark.slow
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


# ---- a: where the intra-op pool runs; w: how requests arrive ------------------------------------------------------
def _threads(n: int, **more) -> Profile:
    return profile_mod.merge(Profile(), **{"session.intra_op_num_threads": n, **more})


def test_a_pins_the_pool_to_the_last_cores_then_the_first_then_unpins():
    p = _threads(3)
    seen = []
    for _ in range(3):
        q = quick.affinity(p, logical=8)
        assert not q.confirm and quick.THREADS not in q.changes
        seen.append(q.changes[quick.AFFINITY])
        p = profile_mod.merge(p, **q.changes)
        profile_mod.validate(p, host_cpus=8)  # every step is a profile ORT takes
    assert seen == [((6,), (7,)), ((0,), (1,)), None]  # two pool threads: cores 6, 7; then 0, 1; then free
    assert "pool pinned to cores 6, 7, the last, one thread each" in quick.affinity(_threads(3), logical=8).info


def test_a_from_orts_default_sets_the_count_it_runs_with_the_pin():
    q = quick.affinity(Profile(), logical=2, running=2)
    assert q.changes == {quick.AFFINITY: ((1,),), quick.THREADS: 2}
    assert "threads set to 2, what ORT's default runs here" in q.info
    profile_mod.validate(profile_mod.merge(Profile(), **q.changes), host_cpus=2)


def test_a_with_one_thread_has_nothing_to_pin_and_a_hand_made_pin_is_dropped_only_after_asking():
    q = quick.affinity(_threads(1), logical=8)
    assert q.noop and "no pool thread to pin" in q.message
    q = quick.affinity(Profile(), logical=2, running=4)  # ORT's default running more threads than the host's cores
    assert q.noop and "3 pool threads, more than this host's 2 cores" in q.message
    mine = _threads(3, **{quick.AFFINITY: ((2, 3), (4, 5))})
    q = quick.affinity(mine, logical=8)
    assert q.changes == {quick.AFFINITY: None} and "2,3;4,5" in q.confirm


def test_w_switches_paced_arrivals_to_poisson_and_back_at_the_same_rate():
    paced = profile_mod.merge(Profile(), **{"workload.rate_hz": 120.0})
    q = quick.arrival(paced, 376.0)
    assert q.changes == {quick.ARRIVAL: "poisson"}  # the rate stays: only how requests come changes
    poisson = profile_mod.merge(paced, **q.changes)
    assert quick.arrival(poisson, 376.0).changes == {quick.ARRIVAL: None}  # unset with a rate: evenly paced


def test_w_from_a_closed_loop_offers_poisson_near_the_measured_ceiling_or_says_why_not():
    q = quick.arrival(Profile(), 376.0)
    assert q.changes == {quick.ARRIVAL: "poisson", quick.RATE: 300.0}  # 80 % of 376/s, rounded
    assert "Poisson arrivals at 80 % of the measured" in q.info
    q = quick.arrival(Profile(), None)
    assert q.noop and "not measured yet" in q.message
    trace = profile_mod.merge(Profile(), **{"workload.arrival": "trace", "workload.trace": "t.jsonl"})
    assert quick.arrival(trace, 376.0).noop


@pytest.mark.slow
async def test_w_then_capital_r_keeps_poisson_and_comes_back_to_it_after_the_closed_loop(tmp_path: Path) -> None:
    monitor = FakeMonitor(n_configs=1)  # ORT's defaults in a closed loop, measured
    ceiling = monitor.history[0].throughput_per_s
    half, tenth = quick.rate_presets(ceiling)
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await pilot.pause()
        poisson = monitor.applied[-1].workload
        assert poisson.arrival == "poisson" and poisson.rate_hz > half
        assert monitor.events[-1].text.startswith(f"{quick.label(quick.ARRIVAL)}: Poisson arrivals at 80 %")
        seen = await press_each(pilot, monitor, "R", 4, lambda p: (p.workload.rate_hz, p.workload.arrival))
        # 80 % is no preset: 50 %, 10 %, a closed loop (the arrivals end with the rate), then Poisson at 50 % again
        assert seen == [(half, "poisson"), (tenth, "poisson"), (0.0, None), (half, "poisson")]
        said = [e.text for e in monitor.events if e.text.startswith(quick.label(quick.RATE))]
        assert said[1].startswith(f"{quick.label(quick.RATE)}: Poisson arrivals at 10 % of the measured")
        assert "(the poisson arrivals end with the rate; the next R comes back to them)" in said[2]
        assert said[3].endswith(f"{half:g} Hz (Poisson, as last run; w paces them evenly)")


def _poisson_production(service_p50_ms: float = 55.0) -> FakeMonitor:
    """A slow model under its production workload: Poisson arrivals at 15 Hz, service p99 about 96 ms, response
    (queue + service) higher; no closed loop of its settings has run."""
    poisson = profile_mod.merge(Profile(), **{"workload.rate_hz": 15.0, "workload.arrival": "poisson"})
    monitor = FakeMonitor(profile=poisson, n_configs=1, p50_ms=150.0)
    monitor.service_p50_ms = service_p50_ms
    return monitor


def _ran_a_while(monitor: FakeMonitor) -> None:
    """The configuration just applied has run a few seconds: its runs and throughput are in."""
    rec = monitor.history[-1]
    monitor.history[-1] = replace(rec, latency=replace(rec.latency, runs=600),
                                  throughput_per_s=1000.0 / rec.latency.p50 * 0.97)


@pytest.mark.slow
async def test_capital_r_under_a_running_poisson_workload_paces_from_its_service_time_and_keeps_poisson(
        tmp_path: Path) -> None:
    """From 15 Hz Poisson, R offered a closed loop and then 25 Hz evenly paced: the production arrivals were lost.
    Now the rates come from the service time the Poisson workload measures (1 / mean service), and Poisson stays;
    after the closed loop R comes back to it."""
    monitor = _poisson_production()
    snap = monitor.snapshot()
    assert no_load(snap.history, snap.profile) is None  # no closed loop ran: only the service time can tell
    mean_ms = snap.traffic.service.mean
    half, tenth = quick.rate_presets(1000.0 / mean_ms)
    assert (half, tenth) == (9.0, 1.5)  # 17/s: 15 Hz is near it, where the queue grows
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        seen = []
        for _ in range(4):
            await pilot.press("R")
            await pilot.pause()
            seen.append((monitor.applied[-1].workload.rate_hz, monitor.applied[-1].workload.arrival))
            _ran_a_while(monitor)
        assert seen[:3] == [(half, "poisson"), (tenth, "poisson"), (0.0, None)]
        # the closed loop has run: its measured throughput sets the rate now, and the Poisson arrivals are back
        closed = monitor.history[-2]
        assert seen[3] == (quick.rate_presets(closed.throughput_per_s)[0], "poisson")
        said = [e.text for e in monitor.events if e.text.startswith(quick.label(quick.RATE))]
        assert said[0] == (f"{quick.label(quick.RATE)}: Poisson arrivals at 50 % of the estimated 17/s (1 / mean "
                           f"service {mean_ms:.3g} ms under the running Poisson arrivals): 9 Hz")


def test_the_service_time_stands_in_only_for_the_running_settings_once_measured():
    """The open arrivals' service time stands in for the same settings at another rate, not for other settings, not
    before MIN_RUNS runs, and never before a closed loop of the settings that has run."""
    from ortop.tui.noload import MIN_RUNS, measured

    monitor = _poisson_production()
    snap = monitor.snapshot()
    other_rate = profile_mod.merge(snap.profile, **{"workload.rate_hz": 3.0, "workload.arrival": None})
    m = measured(snap, other_rate)
    assert m is not None and m.under_arrivals and m.p99_ms == snap.traffic.service.p99
    assert m.ceiling_per_s == pytest.approx(1000.0 / snap.traffic.service.mean)
    two = profile_mod.merge(snap.profile, **{"workload.concurrency": 2})  # other settings: nothing stands in
    assert measured(snap, two) is None
    monitor.history[0] = replace(monitor.history[0], latency=replace(monitor.history[0].latency, runs=MIN_RUNS - 1))
    assert measured(monitor.snapshot(), snap.profile) is None  # too few runs to tell
    closed = replace(monitor.history[0], config_id=1, profile=profile_mod.merge(
        snap.profile, **{"workload.rate_hz": 0.0, "workload.arrival": None}), latency=snap.history[0].latency,
        throughput_per_s=123.0)
    monitor.history = [replace(monitor.history[0], latency=snap.history[0].latency), closed, monitor.history[0]]
    m = measured(monitor.snapshot(), snap.profile)  # running Poisson again, after a closed loop of its settings
    assert m is not None and not m.under_arrivals and m.ceiling_per_s == 123.0


@pytest.mark.slow
async def test_tune_limits_fit_the_service_time_of_a_running_poisson_workload(tmp_path: Path) -> None:
    """Under the production workload tune's l offered p99 ≤ 2 … 50 ms to a model whose p99 is about 100 ms."""
    from ortop.tui.screens.tune import P99_LIMITS_MS, TuneScreen

    monitor = _poisson_production()
    assert 90.0 < monitor.snapshot().traffic.service.p99 < 100.0
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TuneScreen)
        assert screen.limits == (None, 150.0, 200.0, 250.0, 400.0) != P99_LIMITS_MS
        await pilot.press("l")
        assert screen.max_p99_ms == 150.0


async def test_the_status_line_says_the_rate_and_the_arrival_mode_at_80_columns(tmp_path: Path) -> None:
    """At 80×24 the settings line was cut before the rate, and nothing else said how requests arrived."""
    from ortop.tui.widgets import Panel

    monitor = _poisson_production()
    monitor.history.append(replace(monitor.history[0], config_id=1, profile=profile_mod.merge(
        monitor.start_profile, **{"session.intra_op_num_threads": 2, "session.allow_spinning": False,
                                  "session.dynamic_block_base": 4, "session.inter_op_num_threads": 2})))
    app = app_over(monitor, tmp_path)

    def status() -> str:
        return app.screen_stack[0].query_one("#status", Panel).text.plain

    async with app.run_test(size=(80, 24)) as pilot:
        app.tick()
        await pilot.pause()
        line = status()
        assert line.rstrip().endswith("#1 threads 2… · 15 Hz poisson") and len(line) <= 80, line  # changes cut
        # R: 50 % of the ceiling the service time gives, then (9 Hz not measured yet) a closed loop
        for cid, shown in ((2, "9 Hz poisson"), (3, "closed loop")):
            await pilot.press("R")
            await pilot.pause()
            app.tick()
            await pilot.pause()
            assert status().rstrip().endswith(f" #{cid} threads 2… · {shown}"), status()


async def test_a_pins_the_running_pool_on_the_fake_host(tmp_path: Path) -> None:
    monitor = FakeMonitor()  # 2 intra-op threads on an 8-core fake host
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert monitor.applied[-1].session.intra_op_thread_affinities == ((7,),)  # the last of the panel's 8
        assert monitor.events[-1].text.startswith(f"{quick.label(quick.AFFINITY)}: pool pinned to core 7, the last")
