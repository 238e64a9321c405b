"""The settings form's values, parsing and error keys, without the screen."""

from __future__ import annotations

import pytest

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.tui import form


def test_form_round_trips_a_profile() -> None:
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4,
                                        "session.intra_op_thread_affinities": [[1], [2, 3], [5]],
                                        "session.allow_spinning": False, "workload.rate_hz": 100.0,
                                        "env.OMP_NUM_THREADS": "1"})
    values = form.form_values(p)
    assert values["session.intra_op_thread_affinities"] == "1;2,3;5"
    assert values["session.allow_spinning"] == "off"
    assert values["session.spin_duration_us"] == ""
    assert form.changes(p, values) == {}
    assert form.build(p, values) == p


def test_form_changes_tri_states_and_blanks() -> None:
    p = Profile()
    values = form.form_values(p)
    values.update({"session.allow_spinning": "off", "session.dynamic_block_base": "4",
                   "env.OMP_WAIT_POLICY": "PASSIVE"})
    assert form.changes(p, values) == {"session.allow_spinning": False, "session.dynamic_block_base": 4,
                                       "env.OMP_WAIT_POLICY": "PASSIVE"}
    new = form.build(p, values)
    assert new.session.allow_spinning is False and new.env == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_form_bad_number_names_its_field() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "four"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "session.intra_op_num_threads"


def test_form_affinity_count_mismatch_is_keyed_to_the_affinity_field() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "3"
    values["session.intra_op_thread_affinities"] = "1"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.build(Profile(), values)
    keys = [k for k, _ in form.error_keys(exc.value)]
    assert "session.intra_op_thread_affinities" in keys
    assert form.field_for("provider.options.gpu_mem_limit") == "provider.options.gpu_mem_limit"
    assert form.field_for("workload.dims.batch") is None


def test_cores_helper_spreads_one_core_per_pool_thread() -> None:
    assert form.parse_affinity("cores: 0-3", 4) == ((1,), (2,), (3,))  # core 0 left to the calling thread
    assert form.parse_affinity("cores: 4-6", 4) == ((4,), (5,), (6,))
    assert form.parse_affinity("1;2,3", 3) == ((1,), (2, 3))
    assert form.parse_affinity("", 3) is None
    assert form.affinity_preview("cores: 0-3", 4) == 'ORT: "2;3;4" (1-based)'
    assert form.affinity_preview("cores: 0-3", 1).startswith("✗")
    for bad in ("cores: 0-1Z", "1;x"):
        with pytest.raises(profile_mod.ProfileError) as exc:
            form.parse_affinity(bad, 3)
        assert exc.value.key == "session.intra_op_thread_affinities"


def test_cuda_options_need_the_cuda_provider() -> None:
    values = form.form_values(Profile())
    values["provider.options.gpu_mem_limit"] = "1000000"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "provider.options.gpu_mem_limit"
    values["provider.name"] = "cuda"
    assert form.changes(Profile(), values)["provider.options.gpu_mem_limit"] == 1000000


@pytest.mark.parametrize("name", ["CUDAExecutionProvider", "CUDA", "cudaexecutionprovider"])
def test_the_full_provider_name_edits_cuda_fields_like_cuda(name: str) -> None:
    """A profile naming the provider in full (or in capitals) edits CUDA options, instead of being told to set the
    provider to cuda first."""
    p = profile_mod.merge(Profile(), **{"provider.name": name})
    values = form.form_values(p)
    assert values["provider.name"] == name
    values["provider.options.gpu_mem_limit"] = "1000000"
    values["provider.options.cudnn_conv_algo_search"] = "HEURISTIC"
    assert form.changes(p, values) == {"provider.options.gpu_mem_limit": 1000000,
                                       "provider.options.cudnn_conv_algo_search": "HEURISTIC"}
    new = form.build(p, values)
    assert new.provider.name == name
    assert new.provider.options == {"gpu_mem_limit": 1000000, "cudnn_conv_algo_search": "HEURISTIC"}
    values["provider.options.gpu_mem_limit"] = "-5"  # and its values are checked as for cuda
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.build(p, values)
    assert [k for k, _ in form.error_keys(exc.value)] == ["provider.options.gpu_mem_limit"]
    values["provider.options.gpu_mem_limit"] = "1000000"
    values["provider.name"] = "cpu"  # moving away from CUDA still refuses its options
    with pytest.raises(profile_mod.ProfileError, match="set provider to cuda first"):
        form.changes(p, values)


def test_blank_means_the_default_in_every_field() -> None:
    """One rule: intra-op threads refused a blank while spin duration took it as ORT's default."""
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 3, "workload.rate_hz": 100.0,
                                        "session.spin_duration_us": 50, "workload.warmup_runs": 3})
    values = form.form_values(p)
    for key in ("session.intra_op_num_threads", "workload.rate_hz", "session.spin_duration_us", "provider.name",
                "workload.warmup_runs"):
        values[key] = "  "
    assert form.changes(p, values) == {"session.intra_op_num_threads": 0, "workload.rate_hz": 0.0,
                                       "session.spin_duration_us": None, "workload.warmup_runs": 10}
    assert {f.kind for f in form.FIELDS if f.kind not in ("tri", "bool", "choice")} <= set(form.PLACEHOLDER)


def test_a_huge_core_range_is_refused_without_being_built() -> None:
    """`0-99999999` typed into the affinity field froze the app while the range was expanded. Held by what was
    allocated (a hundred million cores would be hundreds of MB), not by a wall-clock bound."""
    import tracemalloc

    tracemalloc.start()
    try:
        for text in ("0-99999999", "cores: 0-99999999", "0-3;0-99999999", "9000"):
            with pytest.raises(profile_mod.ProfileError) as exc:
                form.parse_affinity(text, 4)
            assert exc.value.key == "session.intra_op_thread_affinities" and "beyond any host" in exc.value.message
            assert form.affinity_preview(text, 4).startswith("✗ core ")
        with pytest.raises(profile_mod.ProfileError, match="too long"):
            profile_mod.parse_core_list("0-7," * 40, host_cpus=2)  # more than 4 entries per logical CPU
        assert profile_mod.parse_core_list("0-7,0-3", host_cpus=4) == (0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20


# ---- bounds for this host --------------------------------------------------------------------------------------
TWO_CORES = form.HostCores(2, "2 usable cores")


def test_thread_counts_past_four_per_usable_core_are_refused_with_the_reason() -> None:
    values = form.form_values(Profile())
    values["session.intra_op_num_threads"] = "999"
    values["session.inter_op_num_threads"] = "9"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values, TWO_CORES)
    assert dict(form.error_keys(exc.value)) == {
        "session.intra_op_num_threads": "intra_op_num_threads must be <= 8 on this host, got 999: 2 usable cores × 4 "
                                        "(more threads only measure contention)",
        "session.inter_op_num_threads": "inter_op_num_threads must be <= 8 on this host, got 9: 2 usable cores × 4 "
                                        "(more threads only measure contention)"}
    values["session.intra_op_num_threads"] = values["session.inter_op_num_threads"] = "8"
    assert form.changes(Profile(), values, TWO_CORES) == {"session.intra_op_num_threads": 8,
                                                          "session.inter_op_num_threads": 8}
    values["session.intra_op_num_threads"] = "999"
    assert form.changes(Profile(), values)["session.intra_op_num_threads"] == 999  # no host given: no host bound
    # a profile made on a bigger host keeps its count: only what is typed here is held to this host
    big = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 64})
    values = form.form_values(big)
    values["workload.rate_hz"] = "50"
    assert form.changes(big, values, TWO_CORES) == {"workload.rate_hz": 50.0}


def test_the_host_cores_are_the_affinity_bounded_by_the_cgroup_quota(monkeypatch) -> None:
    from ortop.collectors import host

    monkeypatch.setattr(form.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5}, raising=False)
    monkeypatch.setattr(host, "read_cpu_quota", lambda root="/": None)
    assert form.host_cores() == form.HostCores(6, "6 usable cores")
    monkeypatch.setattr(host, "read_cpu_quota", lambda root="/": 1.5)  # 150 ms per 100 ms: 2 cores' worth
    cores = form.host_cores()
    assert cores == form.HostCores(2, "2 usable cores (cgroup quota 1.5 CPUs)") and cores.thread_limit == 8
    monkeypatch.setattr(host, "read_cpu_quota", lambda root="/": 0.5)
    assert form.host_cores() == form.HostCores(1, "1 usable core (cgroup quota 0.5 CPUs)")
    monkeypatch.setattr(host, "read_cpu_quota", lambda root="/": 16.0)  # a quota above the cpuset binds nothing
    assert form.host_cores().cores == 6


def test_a_paced_rate_below_the_floor_is_refused_with_how_long_a_measurement_would_take() -> None:
    values = form.form_values(Profile())
    values["workload.rate_hz"] = "0.001"
    with pytest.raises(profile_mod.ProfileError) as exc:
        form.changes(Profile(), values)
    assert exc.value.key == "workload.rate_hz"
    assert exc.value.message == ("rate_hz must be 0 (closed loop) or >= 0.1, got 0.001: 300 runs (a p99 worth "
                                 "reading) would take 3.5 days")
    assert "8.3 h" in (form.rate_floor_error(0.01) or "")
    for ok, rate in (("0", None), ("0.1", 0.1), ("250", 250.0)):
        values["workload.rate_hz"] = ok
        assert form.changes(Profile(), values).get("workload.rate_hz") == rate  # 0 is the profile's own: no change


# ---- the screen ----------------------------------------------------------------------------------------------------
def fake_app(tmp_path):
    from ortop.collectors.cpu import FakeCpuCollector
    from ortop.collectors.gpu import FakeGpuCollector
    from ortop.tui.app import make_app
    from tests.fakes import FakeMonitor, StepClock

    return make_app(FakeMonitor(), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir=tmp_path / "profiles", clock=StepClock())


def shown_text(screen, widget_id: str) -> str:
    """What the terminal shows of a widget: its lines as drawn, within the form's visible part, joined by one
    space (a wrapped message reads back whole; a cut one, or one whose lines are scrolled away, does not)."""
    lines = [strip.text for strip in screen._compositor.render_strips()]
    box = screen.query_one("#settings-form").region
    r = screen.query_one(f"#{widget_id}").region
    rows = [lines[y][r.x:r.right].strip() for y in range(max(r.y, box.y), min(r.bottom, box.bottom))]
    return " ".join(row for row in rows if row)


async def open_form(app, pilot, monkeypatch, cores=TWO_CORES):
    from ortop.tui.screens import SettingsScreen
    from tests.test_tui import open_settings

    monkeypatch.setattr(form, "host_cores", lambda: cores)
    await open_settings(pilot)
    screen = app.screen
    assert isinstance(screen, SettingsScreen)
    return screen


async def type_into(pilot, screen, key: str, text: str) -> None:
    screen.query_one("#f-" + key.replace(".", "--")).focus()
    await pilot.pause()
    await pilot.press("end", *["backspace"] * 12, *text)
    await pilot.pause()


@pytest.mark.slow
async def test_999_threads_are_refused_beside_the_field_with_this_hosts_bound(tmp_path, monkeypatch) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_form(app, pilot, monkeypatch)
        await type_into(pilot, screen, "session.intra_op_num_threads", "999")
        reason = ("✗ intra_op_num_threads must be <= 8 on this host, got 999: 2 usable cores × 4 (more threads only "
                  "measure contention)")
        assert shown_text(screen, "hint-session--intra_op_num_threads") == reason  # as typed, no enter
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and app.monitor.applied == []  # refused: nothing applied
        assert shown_text(screen, "hint-session--intra_op_num_threads") == reason
        await pilot.press("backspace", "backspace")  # 9: one past the bound
        await pilot.pause()
        assert "got 9:" in shown_text(screen, "hint-session--intra_op_num_threads")
        await pilot.press("backspace", "8", "enter")
        await pilot.pause()
        assert app.screen is not screen and app.monitor.applied[-1].session.intra_op_num_threads == 8


@pytest.mark.slow
async def test_a_rate_of_a_thousandth_of_a_hertz_is_refused_with_the_reason(tmp_path, monkeypatch) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_form(app, pilot, monkeypatch)
        await type_into(pilot, screen, "workload.rate_hz", "0.001")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and app.monitor.applied == []
        # at 80×24 the message wraps to several lines, all of them on screen
        assert shown_text(screen, "hint-workload--rate_hz") == (
            "✗ rate_hz must be 0 (closed loop) or >= 0.1, got 0.001: 300 runs (a p99 worth reading) would take 3.5 "
            "days")


@pytest.mark.slow
@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_affinity_count_error_is_shown_whole(tmp_path, monkeypatch, size) -> None:
    """It was cut to its first line at 120 columns: "✗ intra_op_thread_affinities has 1 entries but"."""
    app = fake_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await open_form(app, pilot, monkeypatch)
        screen.set_value("session.intra_op_num_threads", "3")
        await type_into(pilot, screen, "session.intra_op_thread_affinities", "1")
        whole = ("✗ intra_op_thread_affinities has 1 entries but intra_op_num_threads = 3 needs 2 (one per pool "
                 "thread; the calling thread is not pinned)")
        assert shown_text(screen, "hint-session--intra_op_thread_affinities") == whole
        await pilot.press("enter")  # refused on apply: still whole
        await pilot.pause()
        assert app.screen is screen
        assert shown_text(screen, "hint-session--intra_op_thread_affinities") == whole


@pytest.mark.slow
@pytest.mark.parametrize(("size", "key", "text", "ending"), [
    ((120, 40), "workload.rate_hz", "0.001", "would take 3.5 days"),
    ((80, 24), "session.global_inter_op_num_threads", "999", "(more threads only measure contention)"),
])
async def test_an_error_on_the_last_visible_row_is_scrolled_into_view_whole(tmp_path, monkeypatch, size, key, text,
                                                                             ending) -> None:
    """A field on the form's bottom row (reached going back up, or scrolled there) showed only its error's first
    line: the rest lay below the fold."""
    app = fake_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await open_form(app, pilot, monkeypatch)
        scroll = screen.query_one("#settings-form")
        control = screen.query_one("#f-" + key.replace(".", "--"))
        control.focus()
        await pilot.pause()
        scroll.scroll_to(y=control.virtual_region.y - scroll.scrollable_content_region.height + 1, animate=False)
        await pilot.pause()
        assert control.region.bottom == scroll.region.bottom  # the field on the last row the form shows
        await pilot.press("end", *["backspace"] * 8, *text)
        await pilot.pause()
        shown = shown_text(screen, "hint-" + key.replace(".", "--"))
        assert shown.startswith("✗ ") and shown.endswith(ending), shown


# ---- keystrokes ------------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_typing_between_refreshes_keeps_every_keystroke(tmp_path, monkeypatch) -> None:
    """Keys were reported lost under load ("…-prod" saved as "…-pro"): nothing the app does on a refresh may rewrite
    a field being typed into. Each key lands between two of the app's ticks (a new snapshot read and drawn, the
    screen repainted) and the form's own check of what is typed."""
    from ortop.tui.screens import SaveAs, SaveScreen

    app = fake_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:

        async def refreshed() -> None:
            app.clock.t += 0.5
            app.tick()
            app.screen.refresh(layout=True)
            await pilot.pause()

        screen = await open_form(app, pilot, monkeypatch)
        field = screen.query_one("#f-workload--rate_hz")
        field.focus()
        await refreshed()
        for key in ("end", "backspace", "backspace", "a", "b", "c", "backspace", "backspace", "backspace", *"250"):
            await pilot.press(key)
            await refreshed()
        assert field.value == "1250"  # the profile's 100 → "1", then "abc" typed and taken back, then "250"
        await pilot.press("escape")
        await refreshed()
        results: list = []
        app.push_screen(SaveScreen(tmp_path / "p", "model-config-3"), results.append)
        await refreshed()
        for key in (*"resnet-prod", "backspace", "d"):
            await pilot.press(key)
            await refreshed()
        await pilot.press("enter")
        await refreshed()
        assert results == [SaveAs("resnet-prod", tmp_path / "p" / "resnet-prod.toml")]
