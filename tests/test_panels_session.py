"""The model / session panel, the status header and the events panel as plain strings."""

from __future__ import annotations

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.monitor import Event
from ortop.tui.panels import events, model


def lines(text) -> list[str]:
    return text.plain.split("\n")


def test_events_newest_last_with_counts() -> None:
    evs = [Event(1.0, "info", "first"), Event(2.0, "warning", "ORT: repeated", 269), Event(3.0, "error", "last")]
    out = lines(events.events_panel(evs, 40, 2))
    assert len(out) == 2
    assert "ORT: repeated" in out[0] and out[0].endswith("×269")
    assert out[1].endswith("✗ last")


def test_settings_line_names_the_demo_knobs() -> None:
    p = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4, "session.allow_spinning": False,
                                        "session.dynamic_block_base": 4, "workload.rate_hz": 100.0})
    assert model.settings_line(p) == "intra 4 · spin off · dbb 4 · rate 100 Hz"


def test_status_line_names_model_state_and_configuration() -> None:
    from ortop.tui.panels import status
    from tests.fakes import FakeMonitor

    snap = FakeMonitor(n_configs=2).snapshot()
    line = status.status_line(snap, 120).plain
    assert line.startswith(" ortop  resnet-ish.onnx  ● measuring 12 s  #1 intra_op_num_threads: 0 → 2")
    narrow = status.status_line(snap, 60).plain
    assert len(narrow) == 60 and narrow.endswith("intra_op_num_…")  # the label is clipped to what is left


def test_model_panel_shows_the_pending_change_while_building() -> None:
    from ortop.tui.panels import model
    from tests.fakes import FakeMonitor

    m = FakeMonitor(state="building")
    m.pending = profile_mod.merge(m.snapshot().profile, **{"session.intra_op_num_threads": 8})
    out = lines(model.model_panel(m.snapshot(), 80, 10))
    assert out[0].startswith(" ⟳ building 1.7 s ") and "→ intra_op_num_threads: 2 → 8" in out[0]
    assert out[1].startswith("model resnet-ish.onnx  IR 10 · 12 nodes")
