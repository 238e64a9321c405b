"""The worker's stderr read as events: ORT's own lines by their level, a few known-harmless warnings as info."""

from __future__ import annotations

import pytest

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.live.events import built_text, worker_line


def test_ort_lines_keep_their_level_and_a_plain_line_is_info_unless_it_warns():
    w = "2026-11-26 23:47:59.812459196 [W:onnxruntime:Default, inference_session.cc:1 f] Some initializer is unused"
    assert worker_line(w) == ("warning", "ORT: Some initializer is unused")
    e = "2026-11-26 23:47:59.8 [E:onnxruntime:, provider_bridge_ort.cc:2043 Get] Failed to load library x.so"
    assert worker_line(e) == ("error", "ORT: Failed to load library x.so")
    assert worker_line("numpy: WARNING something") == ("warning", "worker: numpy: WARNING something")
    assert worker_line("loaded") == ("info", "worker: loaded")


def test_the_plugin_ep_registry_line_that_comes_with_every_cuda_session_is_not_a_warning():
    line = ("2026-11-26 23:47:59.812459196 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:856 operator()] "
            "No registered plugin EP device found for 'CUDAExecutionProvider' with device_id=0")
    assert worker_line(line) == ("info", "ORT: No registered plugin EP device found for 'CUDAExecutionProvider' "
                                         "with device_id=0")
    other = line.replace("No registered plugin EP device found", "No device found")
    assert worker_line(other)[0] == "warning"


def test_a_rebuild_names_what_changed_from_the_configuration_it_replaced():
    """Turning spinning back on read "intra_op_num_threads: 0 → 2" (the difference from the start), and a return
    to the start settings read "rebuilt" with nothing after it."""
    start = Profile()
    threads = profile_mod.merge(start, **{"session.intra_op_num_threads": 2})
    spin_off = profile_mod.merge(threads, **{"session.allow_spinning": False})
    info = {"create_ms": 41.0, "first_run_ms": 5.8}
    assert built_text(info, None, start) == "session built in 41 ms, first run 5.8 ms"
    on_again = built_text(info, spin_off, threads)
    assert on_again.startswith("rebuilt: session.allow_spinning: off →")
    assert on_again.endswith("(in 41 ms, first run 5.8 ms)")
    assert "intra_op_num_threads" not in on_again
    back = built_text(info, threads, start)
    assert back.startswith("rebuilt: session.intra_op_num_threads: 2 → 0 (")
    assert built_text(info, threads, threads).startswith(
        "rebuilt: no setting changed (the same settings applied again)")
    assert built_text(info, threads, threads, "the worker was restarted").startswith(
        "rebuilt: no setting changed (the worker was restarted)")


def test_sessions_built_for_a_comparison_leave_the_row_numbers_dense(matmul_model):
    """Row numbers jumped 4 → 7 after a verification: its two sessions took ids from the same count."""
    from ortop.engine.live.monitor import TEMP_ID_BASE, Monitor

    mon = Monitor(matmul_model, Profile())  # not started: only its numbering is read
    rows = [mon._new_row_id()]
    temps = [mon._new_id(), mon._new_id()]
    rows.append(mon._new_row_id())
    assert rows == [0, 1] and all(t > TEMP_ID_BASE for t in temps) and len(set(temps)) == 2


def test_a_grouped_repeat_moves_to_its_latest_time_so_the_log_stays_in_time_order():
    """A repeat was counted where it first came with its newest time: the panel read 145.6 before 118.9."""
    from ortop.engine.live.events import EventLog

    log = EventLog()
    log.add(100.0, "warning", "ORT: slow node")
    log.add(118.9, "info", "rebuilt: allow_spinning: default → off")
    log.add(145.6, "warning", "ORT: slow node")
    log.add(150.0, "info", "statistics reset")
    events = log.items()
    assert [e.t for e in events] == [118.9, 145.6, 150.0]
    assert [(e.text, e.count) for e in events][1] == ("ORT: slow node", 2)
    log.add(151.0, "warning", "ORT: slow node")
    assert [e.t for e in log.items()] == [118.9, 150.0, 151.0] and log.items()[-1].count == 3


def test_the_events_panel_shows_events_in_time_order_whatever_order_they_come_in():
    from ortop.engine.live.snapshot import Event
    from ortop.tui.panels.events import events_panel

    events = [Event(10.0, "info", "first"), Event(145.6, "warning", "grouped", 4), Event(118.9, "info", "between")]
    lines = events_panel(events, 60, 3).plain.split("\n")
    assert [line.split()[0] for line in lines] == ["10.0", "118.9", "145.6"], lines
    assert lines[-1].endswith("grouped ×4")
    newest = events_panel(events, 60, 2).plain.split("\n")  # two lines: the two newest by time, not by place
    assert [line.split()[0] for line in newest] == ["118.9", "145.6"], newest


@pytest.mark.parametrize(("seconds", "said"), [
    (10.9423, "11 s"), (6.0, "6 s"), (6.5, "6.5 s"), (9.96, "10 s"), (13.04, "13 s"), (0.25, "0.25 s"),
    (120.4, "120 s"),
])
def test_a_duration_in_an_event_is_rounded_as_one_reads_it(seconds: float, said: str):
    from ortop.engine.live.events import seconds_text

    assert seconds_text(seconds) == said
