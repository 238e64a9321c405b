"""Nothing is cut mid-word: every panel of the live view, at the sizes it gets at 80×24 and 120×40, either fits a
line whole or ends it with the one rule's "…" after a whole word (``_format.fit`` / ``clip_words``).

The panels are read as the user meets them: the app runs at each size with a snapshot that carries everything a
panel can show at once (open arrivals with a shape mix and every idle-gap bucket, a long op list, a provider
fallback, long events), and each panel's text is checked against the width its box really has.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.engine import traffic as T
from ortop.engine.live.snapshot import Event
from ortop.tui.app import make_app
from ortop.tui.widgets import Panel
from tests.fakes import FakeMonitor, StepClock


def open_traffic() -> T.Traffic:
    """Poisson arrivals over a mix of three sequence lengths, runs after every length of idle gap."""
    n = 400
    rows = np.zeros((n, T.WIDTH))
    rows[:, T.SERVICE] = np.linspace(20.0, 160.0, n)
    rows[:, T.QUEUE] = np.linspace(0.1, 9.0, n)
    rows[:, T.RESPONSE] = rows[:, T.SERVICE] + rows[:, T.QUEUE]
    rows[:, T.SHAPE] = np.arange(n) % 3
    rows[:, T.IDLE] = np.tile([0.5, 5.0, 50.0, 500.0], n // 4)
    shapes = [{"input_ids": [1, k]} for k in (16, 64, 128)]
    return T.figures("poisson", 8.0, rows, T.Counters(arrived=n), 50.0, n, shapes,
                     ["seq=16", "seq=64", "seq=128"])


def rich_monitor(replicas: int = 1) -> FakeMonitor:
    m = FakeMonitor(providers_active=("CPUExecutionProvider",), replicas=replicas, n_configs=1 if replicas > 1 else 3)
    m.traffic = open_traffic()
    m.info = replace(m.info, op_histogram={"Constant": 420, "Add": 107, "Mul": 96, "MatMul": 48, "Softmax": 12,
                                           "LayerNormalization": 12})
    m.events.append(Event(80.0, "info", "rebuilt: intra_op_num_threads: 2 → 4; allow_spinning: off → "
                                        "default; inter_op_num_threads: 0 → 2 (in 41 ms, first run 5.8 ms)"))
    return m


WORD = re.compile(r"\S+")


def check_panel(panel: Panel, wide: str) -> list[str]:
    """What is wrong with a panel's lines: one wider than its box (the terminal would cut it anywhere), or one cut
    by the rule whose last word before the "…" is not a word of the full text (cut mid-word)."""
    width = panel.size.width
    words = {w.rstrip(" ;,·:→") for w in WORD.findall(wide)}  # clip_words drops a separator before the "…"
    bad = []
    for line in panel.text.plain.split("\n"):
        if len(line) > width:
            bad.append(f"{panel.id}: {len(line)} > {width}: {line!r}")
        elif line.endswith("…"):
            kept = WORD.findall(line[:-1])
            if kept and line[-2] != " " and kept[-1] not in words:
                bad.append(f"{panel.id}: cut mid-word: {line!r}")
    return bad


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_no_panel_cuts_a_word_at_80x24_or_120x40(size: tuple[int, int], replicas: int) -> None:
    monitor = rich_monitor(replicas)
    app = make_app(monitor, cpu=FakeCpuCollector(2, seed=3), gpu=FakeGpuCollector(seed=3, no_gpu=True),
                   refresh_hz=0, profile_dir="/nonexistent/profiles", clock=StepClock())
    async with app.run_test(size=size) as pilot:
        for _ in range(12):
            app.clock.t += 0.25
            app.tick()
        await pilot.pause()
        app.tick()
        await pilot.pause()
        bad: list[str] = []
        panels = list(app.screen.query(Panel))
        assert {p.id for p in panels} >= {"status", "cpu", "spin", "latency", "model", "events", "memory"}
        for panel in panels:
            if not panel.display or panel.size.width <= 0 or panel._draw is None:
                continue
            wide = panel._draw(400, max(1, panel.size.height)).plain
            bad += check_panel(panel, wide)
        assert not bad, "\n".join(bad)
        # what the walkthrough lost: each shape's response p99, every idle-gap bucket, the service p99
        model = app.screen.query_one("#model", Panel).text.plain
        shown = [line for line in model.split("\n") if line.startswith(("seq=", "shape seq="))]
        assert all("resp" in line for line in shown), model
        summary = [line for line in model.split("\n") if "p99 by seq: " in line]  # shapes without a line of their own
        assert shown or summary, model
        if size == (120, 40) and replicas == 1:
            assert len(shown) == 3, model
        spin = app.screen.query_one("#spin", Panel).text.plain
        for bucket in ("< 1:", "1–10:", "10–100:", "≥ 100:"):
            assert bucket in spin, spin
        latency = app.screen.query_one("#latency", Panel).text.plain
        assert f"/{monitor.traffic.service.p99:.0f} " in latency, latency


def test_a_shape_mix_is_named_a_mix_on_the_inputs_line() -> None:
    from ortop.tui.panels.model import mixed_feeds

    shapes = open_traffic().shapes
    assert mixed_feeds(["input_ids: int64[1x16]", "mask: int64[1x16]"], shapes) == [
        "input_ids: int64[1x16..128] mix", "mask: int64[1x16]"]
    assert mixed_feeds(["input_ids: int64[1x16]"], shapes[:1]) == ["input_ids: int64[1x16]"]  # one shape: no mix


def test_wrapping_breaks_at_spaces_even_after_a_short_first_word() -> None:
    """"rebuilt: intra_op_num_threads: 0 → 2" in 29 cells broke as "…intra_op_num_threads" / ": 0 → 2"."""
    from ortop.tui.panels._format import wrap_words

    text = "rebuilt: intra_op_num_threads: 0 → 2 (in 41 ms, first run 5.8 ms)"
    lines = wrap_words(text, 29, 3)
    assert lines[0] == "rebuilt:" and lines[1].startswith("intra_op_num_threads: 0 → 2")
    assert all(len(line) <= 29 for line in lines)
    assert wrap_words("x" * 40, 29, 2) == ["x" * 29, "x" * 11]  # one word longer than the line is broken


def test_shapes_that_do_not_fit_are_counted_not_dropped_silently() -> None:
    from ortop.tui.panels.model import model_panel

    monitor = FakeMonitor()
    t = open_traffic()
    monitor.traffic = replace(t, shapes=t.shapes * 3)  # nine shapes
    out = model_panel(monitor.snapshot(), 64, 9).plain.split("\n")
    assert out[-1].startswith("+7 more (m), ") and "p99 by seq: 128 " in out[-1], out  # the rest on one line
    assert out[-1].endswith((" ms", " · +1", " · +2", " · +3", " · +4")), out  # what does not fit is counted
    assert len(out) == 9 and all(len(line) <= 64 for line in out)


def test_with_room_for_one_line_every_shape_shares_it() -> None:
    """At 80×24 the model panel had room for the first shape only, and the others were not shown at all."""
    from ortop.tui.panels.model import model_panel, shapes_summary

    monitor = FakeMonitor()
    monitor.traffic = open_traffic()
    shapes = monitor.traffic.shapes
    line = shapes_summary(shapes, 60, more=False).plain
    expect = " · ".join(f"{r.label.split('=')[1]} {r.response.p99:.3g}" for r in shapes)
    assert line == f"response p99 by seq: {expect} ms", line
    snap = monitor.snapshot()
    full = model_panel(snap, 40, 40).plain.split("\n")
    rows = len([x for x in full if x.startswith("shape ") or x.startswith("seq=")])
    assert rows == len(shapes)
    height = next(i for i, x in enumerate(full) if x.startswith(("shape ", "seq="))) + 1  # one line for the shapes
    out = model_panel(snap, 40, height).plain.split("\n")
    [line] = [x for x in out if "p99 by seq: " in x]
    assert line.count(" · ") == len(shapes) - 1 and line.endswith(" ms"), out  # every shape on it


def test_an_event_never_leaves_a_unit_alone_on_its_line() -> None:
    from ortop.tui.panels.events import events_panel

    text = "rebuilt: rate_hz: 0.0 → 100.0 (in 27 ms, first run 1.3 ms)"
    lines = events_panel([Event(123.1, "info", text)], 64, 3).plain.split("\n")
    assert lines[1].strip() == "1.3 ms)", lines


def test_the_status_line_fits_80_columns_while_verifying() -> None:
    from ortop.engine.live.snapshot import VerifyProgress
    from ortop.tui.panels.status import status_line

    monitor = FakeMonitor(state="verifying")
    monitor.verifying = VerifyProgress(2, 1, "measuring", 3.0, 8.0, 6)
    line = status_line(monitor.snapshot(), 80).plain
    assert len(line) <= 80 and "#2 vs #1" in line and "3/8 s" in line, line
    assert "#2 vs #1 3/8 s" in status_line(monitor.snapshot(), 60).plain
    assert "verifying #2 vs #1 measuring 3/8 s" in status_line(monitor.snapshot(), 120).plain
