"""The live view repaints what changed and nothing else: a panel fed the same drawing twice repaints no line, fed one
changed line repaints that line alone (its style counts, not only its text); the model panel's lines that change
only with a rebuild are drawn once per rebuild, not on every frame of a shape mix; a repainted line is drawn as
Rich draws it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from textual.strip import Strip

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.measure.series import Bucket
from ortop.tui.app import OrtopApp, make_app
from ortop.tui.panels import latency
from ortop.tui.panels import model as model_mod
from ortop.tui.panels._format import join_lines
from ortop.tui.widgets import Panel, line_segments, runs, stacked_lines
from tests.fakes import FakeMonitor, StepClock
from tests.models import make_matmul_model
from tests.poll import until


def fake_app(tmp_path: Path) -> OrtopApp:
    return make_app(FakeMonitor(), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir=tmp_path / "profiles", clock=StepClock())


async def settle(pilot) -> None:
    app = pilot.app
    for _ in range(20):
        app.clock.t += 0.25
        app.tick()
    await pilot.pause()


def lines(*texts: str, style: str = "") -> Text:
    return join_lines([Text(t, style=style, end="") for t in texts])


async def test_a_panel_fed_the_same_drawing_twice_repaints_no_line_and_a_changed_one_alone(tmp_path: Path) -> None:
    app = fake_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one("#events", Panel)

        async def painted(text: Text) -> tuple[bool, int]:
            before = panel.lines_painted
            said = panel.set_text(text)
            await pilot.pause()
            return said, panel.lines_painted - before

        assert (await painted(lines("a", "b", "c", "d")))[0]
        assert await painted(lines("a", "b", "c", "d")) == (False, 0)  # the same drawing: nothing repainted
        assert await painted(lines("a", "B", "c", "d")) == (True, 1)   # one line changed: that line alone
        assert await painted(lines("a", "B", "c", "d", style="red")) == (True, 4)  # same text, another style
        assert await painted(lines("a", "B", "c", style="red")) == (True, 1)  # the last line left: it is blanked
        assert panel.text.plain == "a\nB\nc"


def test_changed_lines_are_marked_dirty_as_runs() -> None:
    assert runs([]) == []
    assert runs([3]) == [(3, 4)]
    assert runs([1, 2, 3, 5, 7, 8]) == [(1, 4), (5, 6), (7, 9)]


@pytest.mark.slow  # over half a second: left out of the quick tier
async def test_every_live_panel_line_draws_as_rich_renders_it(tmp_path: Path) -> None:
    """The one-pass renderer over the lines a panel keeps, against Rich's over the same text split into lines (how
    the panel drew it before): cell for cell, the same text and styles."""
    app = fake_app(tmp_path)
    console = Console(color_system="truecolor")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        checked = 0
        for panel in app.screen.query(Panel):
            text = panel.text
            split = list(text.split("\n", allow_blank=True)) if text.plain else []
            kept = stacked_lines(text)
            assert [k.plain for k in kept] == [s.plain for s in split]
            for mine, theirs in zip(kept, split):
                want = Strip(list(theirs.render(console)), theirs.cell_len).simplify()
                assert Strip(line_segments(mine, console), mine.cell_len).simplify() == want, theirs
                checked += 1
        assert checked > 40
    # overlapping spans: Rich's own render
    t = Text("abcdef", end="")
    t.stylize("bold", 0, 4)
    t.stylize("red", 2, 6)
    assert line_segments(t, console) == list(t.render(console))


def test_the_latency_columns_from_the_tail_are_those_from_the_whole_series() -> None:
    rng = random.Random(5)
    bucket_s = 0.5
    slots = sorted(rng.sample(range(400), 250))  # gaps: pauses and rebuilds
    series = [Bucket(t=k * bucket_s, runs=3, p50=1.0, p99=2.0) for k in slots]
    for width in (1, 10, 57, 200, 500):
        full = [None] * (slots[-1] - max(slots[0], slots[-1] - width + 1) + 1)
        for k, b in zip(slots, series):
            if k >= slots[-1] - width + 1:
                full[k - max(slots[0], slots[-1] - width + 1)] = b
        assert latency.series_columns(series, width, bucket_s) == full


@pytest.mark.integration
@pytest.mark.slow
async def test_the_model_panel_draws_its_settings_once_per_rebuild_under_a_shape_mix(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """A real worker under Poisson arrivals with three shapes: the model panel is redrawn each frame for its moving
    figures, its model, inputs, providers, session and settings lines once; a rebuild draws them again."""
    from ortop.collectors.cpu import PsutilCpuCollector
    from ortop.engine import Monitor

    drawn: list[int] = []
    head = model_mod.model_head

    def counted(snap, width, fatal=None):
        drawn.append(snap.config_id)
        return head(snap, width, fatal)

    monkeypatch.setattr(model_mod, "model_head", counted)
    path = make_matmul_model(tmp_path / "mm.onnx", n=64)
    start = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1, "workload.warmup_runs": 3,
                                            "workload.arrival": "poisson", "workload.rate_hz": 100.0,
                                            "workload.dim_mix": {"batch": "2,8,32"}})
    mon = Monitor(path, start)
    mon.start()
    try:
        app = make_app(mon, cpu=PsutilCpuCollector(), gpu=FakeGpuCollector(seed=1), refresh_hz=10.0,
                       profile_dir=tmp_path / "profiles")
        async with app.run_test(size=(120, 40)) as pilot:
            panel = app.screen.query_one("#model", Panel)

            def mixed() -> bool:
                s = mon.snapshot()
                return s.state == "measuring" and s.traffic is not None and len(s.traffic.shapes) == 3

            await until(pilot, mixed, "three shapes measured", timeout=30)
            await pilot.pause(0.5)
            drawn.clear()
            repaints = panel.repaints
            # the shapes' figures move at the refresh: three repaints within a deadline, not a count at a fixed moment
            await until(pilot, lambda: panel.repaints - repaints >= 3, "the shapes' figures moving", timeout=15)
            assert len(drawn) <= 1, drawn
            snap = app.snap
            assert snap is not None
            width = panel.size.width
            shown = panel.text.plain.split("\n")
            assert shown[: len(head(snap, width))] == [t.plain for t in head(snap, width)]

            await pilot.press("plus")  # one more intra-op thread: a rebuild
            await until(pilot, lambda: mon.snapshot().config_id >= 1 and mon.snapshot().state == "measuring",
                        "the rebuild", timeout=30)
            await pilot.pause(0.5)
            assert any(cid >= 1 for cid in drawn)
            assert "threads 2" in panel.text.plain and "config #1" in panel.text.plain
    finally:
        mon.stop()
