"""The model / session panel, the status header and the events panel as plain strings."""

from __future__ import annotations

from dataclasses import replace

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.live.monitor import Event
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
    assert model.settings_line(p) == "threads 4 · spin off · dbb 4 · 100 Hz"


def test_status_line_names_model_state_and_configuration() -> None:
    from ortop.tui.panels import status
    from tests.fakes import FakeMonitor

    snap = FakeMonitor(n_configs=2).snapshot()
    line = status.status_line(snap, 120).plain
    # compact: changes from the start, then how requests arrive
    assert line == " ortop  resnet-ish.onnx  ● measuring 12 s  #1 threads 2 · closed loop"
    snap3 = FakeMonitor().snapshot()  # #2: 2 threads, spinning off, paced at 100 Hz
    assert status.status_line(snap3, 120).plain.endswith("#2 threads 2 · spin off · 100 Hz fixed")
    narrow = status.status_line(snap3, 72).plain
    # the changes cut after a whole term, never mid-word; the rate and the arrival mode kept
    assert narrow.endswith("#2 threads 2… · 100 Hz fixed") and len(narrow) <= 72
    assert status.status_line(snap3, 64).plain.endswith("#2 100 Hz fixed")  # no room for the changes


def test_model_panel_shows_the_pending_change_while_building() -> None:
    from ortop.tui.panels import model
    from tests.fakes import FakeMonitor

    m = FakeMonitor(state="building")
    m.pending = profile_mod.merge(m.snapshot().profile, **{"session.intra_op_num_threads": 8})
    out = lines(model.model_panel(m.snapshot(), 80, 10))
    assert out[0].startswith(" ⟳ building 1.7 s ") and out[0].endswith("→ threads 8")
    assert out[1].startswith("model resnet-ish.onnx  IR 10 · 12 nodes")


def test_a_long_event_wraps_at_words_and_keeps_its_flag() -> None:
    """At 120 columns the events panel is ~64 cells: a free-dim warning used to be cut just before its flag."""
    note = ("--dim p2o.DynamicDimension.1=VALUE: input 'x' axis 2 is left at 1, too small for a spatial axis of a "
            "convolution's input")
    evs = [Event(0.5, "info", "session built in 40 ms"), Event(0.6, "warning", note),
           Event(9.0, "warning", "ORT: Initializer fc1_w appears in graph inputs and will not be treated as constant "
                                 "value/weight.", 12)]
    out = lines(events.events_panel(evs, 64, 6))
    assert out == [
        "    0.5 · session built in 40 ms",
        "    0.6 ! --dim p2o.DynamicDimension.1=VALUE: input 'x' axis 2",
        "          is left at 1, too small for a spatial axis of a",
        "          convolution's input",
        "    9.0 ! ORT: Initializer fc1_w appears in graph inputs and",
        "          will not be treated as constant value/weight. ×12",
    ]
    # less room: the newest keep their lines, an older one is cut at a word, the oldest go
    short = lines(events.events_panel(evs, 64, 3))
    assert short[0].endswith("! --dim p2o.DynamicDimension.1=VALUE: input 'x' axis 2…") and short[-1].endswith("×12")


def test_model_panel_puts_an_implausible_free_dim_first_and_whole() -> None:
    from tests.fakes import FakeMonitor

    m = FakeMonitor()
    warn = "--dim h=VALUE: input 'image' axis 2 is left at 1, too small for a spatial axis of a convolution's input"
    snap = replace(m.snapshot(), notes=("free dim 'batch' of input 'image' set to 1 (override with --dim "
                                        "batch=VALUE)", warn))
    out = lines(model.model_panel(snap, 64, 12))
    i = next(i for i, line in enumerate(out) if line.startswith("! --dim h=VALUE"))
    assert out[i + 1].startswith("  ") and "convolution's input" in out[i + 1] + out[i + 2]
    assert out[-1].startswith("note free dim 'batch'")


def test_a_paced_rate_the_model_cannot_keep_is_said() -> None:
    """`rate 100 Hz` while doing 16 runs/s: the achieved rate, and that the loop is saturated."""
    from ortop.tui.panels import _format, status
    from tests.fakes import FakeMonitor

    snap = FakeMonitor().snapshot()  # paced at 100 Hz
    kept = replace(snap, throughput_per_s=99.0)
    assert _format.pace_shortfall(kept.profile, kept.throughput_per_s, kept.runs) is None
    slow = replace(snap, throughput_per_s=16.2)
    assert _format.pace_shortfall(slow.profile, 16.2, slow.runs) == "saturated: 16/s of 100 Hz"
    assert _format.pace_shortfall(slow.profile, 16.2, 5) is None  # too few runs to tell
    assert status.status_line(slow, 120).plain.endswith(" ! saturated: 16/s of 100 Hz ")
    assert any(line.startswith("! saturated: 16/s of 100 Hz: the model cannot keep this rate")
               for line in lines(model.model_panel(slow, 80, 12)))
    assert "saturated" not in model.model_panel(kept, 80, 12).plain


def test_a_fresh_build_is_not_judged_in_its_first_seconds() -> None:
    """Right after a rebuild the first requests wait behind the first cold runs: the status line says nothing of
    the pace until the configuration has measured 3 s (its traffic's window, and the measuring state's time) and
    20 requests arrived; then a rate not kept is said."""
    import numpy as np

    from ortop.engine import traffic as T
    from ortop.tui.panels import status
    from tests.fakes import FakeMonitor

    paced = profile_mod.merge(Profile(), **{"workload.rate_hz": 12.0, "workload.arrival": "poisson"})
    snap = FakeMonitor(profile=paced).snapshot()
    rows = T.ring_rows(np.zeros((0, 8), dtype=np.int64), np.zeros(0))

    def at(window_s: float, arrived: int, served: int, state: str = "measuring", elapsed: float = 12.5) -> str:
        t = T.figures("poisson", 12.0, rows, T.Counters(arrived=arrived), window_s, served)
        return status.status_line(replace(snap, traffic=t, runs=served, state=state, state_elapsed=elapsed), 160).plain

    behind = at(30.0, 360, 240)  # served 8/s of 12/s for 30 s: said
    assert " ! offered 12/s, served 8.0/s: queueing " in behind
    assert " ! " not in at(30.0, 360, 240, elapsed=2.9)  # measuring for 2.9 s since the build
    assert " ! " not in at(30.0, 360, 240, state="warming", elapsed=0.4)
    assert " ! " not in at(2.5, 30, 8)  # the configuration's own 2.5 s: a fresh build's first seconds
    assert " ! " not in at(4.0, 19, 0)  # 19 arrivals: too few to tell
    assert " ! " in at(4.0, 48, 8)  # 4 s, 48 arrived, 8 served: fallen behind
    # a rebuild's first seconds at the asked rate: 11/s arrived and 9.8/s served, the queue's last few requests
    assert " ! " not in at(3.5, 39, 34, elapsed=3.5)


def test_rebuild_events_drop_section_prefixes_and_info_takes_two_lines_at_most() -> None:
    text = ("rebuilt in 46 ms, first run 2.0 ms: session.allow_spinning: default → off; session.dynamic_block_base: "
            "default → 4; session.intra_op_num_threads: 0 → 2; workload.rate_hz: 0.0 → 10.0")
    assert events.event_text(text) == ("rebuilt in 46 ms, first run 2.0 ms: allow_spinning: default → off; "
                                       "dynamic_block_base: default → 4; intra_op_num_threads: 0 → 2; rate_hz: 0.0 → "
                                       "10.0")
    assert events.event_text("profile saved: /tmp/session.x/a.toml") == "profile saved: /tmp/session.x/a.toml"
    out = lines(events.events_panel([Event(1.0, "info", text)], 64, 6))
    assert len(out) == 2 and out[-1].endswith("…")
