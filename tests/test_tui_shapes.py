"""The shapes screen (``m``): every shape of the running mix with its runs, share, queue, service and response, from
the engine's per-shape figures (``engine.traffic.shape_rows``) over the worker's rows."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from textual.widgets import DataTable, Static

from ortop.collectors.cpu import FakeCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine import traffic as T
from ortop.measure import rows as R
from ortop.tui.app import OrtopApp, make_app
from ortop.tui.screens.shapes import ShapesScreen
from ortop.tui.widgets import Panel
from tests.fakes import FakeMonitor, StepClock
from tests.fakes.shapes import shape_mix, worker_rows
from tests.models import make_matmul_model


# ---- the per-shape figures ---------------------------------------------------------------------------------------
def test_each_shape_gets_its_own_queue_service_and_response_over_its_own_runs() -> None:
    """Rows as a worker writes them, three shapes interleaved: each row's figures are those of its runs alone, in
    the mix's order, and a shape that has not run yet is listed with no runs."""
    lengths = [16, 64, 128, 256]
    ids = np.array([2, 0, 1, 0, 2, 1, 0, 2] * 50)  # 400 runs: 150 of shape 0, 100 of 1, 150 of 2, none of 3
    rows = worker_rows(lengths, ids, np.random.default_rng(3), queue_ms=2.0)
    ring = T.ring_rows(rows, rows[:, R.Col.START] / 1e9)
    out = T.shape_rows(ring, [{"x": [1, k]} for k in lengths], [f"seq={k}" for k in lengths])
    assert [r.label for r in out] == ["seq=16", "seq=64", "seq=128", "seq=256"]
    assert [r.runs for r in out] == [150, 100, 150, 0]
    assert [r.share for r in out] == pytest.approx([0.375, 0.25, 0.375, 0.0])
    for k, r in enumerate(out[:3]):
        mine = rows[ids == k]
        service, queue = mine[:, R.Col.SERVICE] / 1e6, mine[:, R.Col.QUEUE] / 1e6
        assert r.service.p50 == pytest.approx(np.percentile(service, 50))
        assert r.queue.p99 == pytest.approx(np.percentile(queue, 99))
        assert r.response.p50 == pytest.approx(np.percentile(service + queue, 50))
        assert r.response.p99 == pytest.approx(np.percentile(R.response_ms(mine), 99))
        assert r.queue.runs == r.service.runs == r.response.runs == r.runs
    assert out[0].service.p50 < out[1].service.p50 < out[2].service.p50  # service grows with the length
    assert out[3].queue.runs == 0 and math.isnan(out[3].response.p50)
    # one shape is no mix: nothing to split
    assert T.shape_rows(ring, [{"x": [1, 16]}], ["seq=16"]) == ()


# ---- the screen, over the fake monitor -------------------------------------------------------------------------------
def app_over(monitor: FakeMonitor, tmp_path: Path) -> OrtopApp:
    return make_app(monitor, cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                    profile_dir=tmp_path / "profiles", clock=StepClock())


def table_rows(screen: ShapesScreen) -> list[list[str]]:
    table = screen.query_one(DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def headers(screen: ShapesScreen) -> list[str]:
    return [c.label.plain for c in screen.query_one(DataTable).columns.values()]


def text_of(screen: ShapesScreen, wid: str) -> str:
    return str(screen.query_one(f"#{wid}", Static).render())


@pytest.mark.slow
async def test_m_lists_every_shape_of_a_long_mix_and_says_which_p99s_need_more_runs(tmp_path: Path) -> None:
    monitor = FakeMonitor()
    monitor.traffic = shape_mix(16)
    shapes = monitor.traffic.shapes
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        app.tick()
        await pilot.pause()
        model = app.screen.query_one("#model", Panel).text.plain
        shown = [line for line in model.split("\n") if line.startswith(("seq_len=", "shape seq_len="))]
        [hint] = [line for line in model.split("\n") if " more (m), " in line]  # the panel names the key
        assert shown and hint.startswith(f"+{len(shapes) - len(shown)} more (m), resp"), model
        await pilot.press("m")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ShapesScreen)
        assert headers(screen) == ["seq_len", "runs", "share", "queue p50", "queue p99", "service p50",
                                   "service p99", "response p50", "response p99"]
        rows = table_rows(screen)
        assert [r[0] for r in rows] == [s.label.split("=")[1] for s in shapes]  # every shape, in the mix's order
        for cells, s in zip(rows, shapes):
            assert cells[1] == f"{s.runs:,}" and cells[2] == f"{100 * s.share:.1f}%"
            p50s = [float(cells[3]), float(cells[5]), float(cells[7])]
            assert p50s == pytest.approx([s.queue.p50, s.service.p50, s.response.p50], rel=0.01)  # 3 figures
            p99s = [cells[4], cells[6], cells[8]]
            if s.runs < 100:  # the slowest run or two: not a p99 yet
                assert p99s == ["—"] * 3, cells
            else:
                assert [float(c) for c in p99s] == pytest.approx([s.queue.p99, s.service.p99, s.response.p99],
                                                                 rel=0.01)
        few = [s for s in shapes if s.runs < 100]
        assert few and len(few) < len(shapes)  # the seeded mix has both kinds
        note = text_of(screen, "shapes-note")
        least = min(few, key=lambda s: s.runs)
        assert note.startswith(f"— p99 needs 100 runs: {len(few)} of {len(shapes)} shapes have fewer (the fewest: "
                               f"{least.label}, {least.runs} runs)"), note
        assert "16 shapes of the running mix" in text_of(screen, "shapes-title")
        assert sum(s.share for s in shapes) == pytest.approx(1.0)

        # live: the next tick's figures replace the old ones (the longest shape has now run enough)
        more = replace(shapes[-1], runs=250, response=replace(shapes[-1].response, runs=250, p99=99.5))
        monitor.traffic = replace(monitor.traffic, shapes=(*shapes[:-1], more))
        app.tick()
        await pilot.pause()
        assert table_rows(screen)[-1][1] == "250" and table_rows(screen)[-1][8] == "99.5"
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, ShapesScreen)


@pytest.mark.slow
async def test_a_mix_longer_than_the_screen_scrolls_and_narrow_headers_shorten_together(tmp_path: Path) -> None:
    monitor = FakeMonitor()
    monitor.traffic = shape_mix(40, runs=20000)
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        screen = app.screen
        table = screen.query_one(DataTable)
        assert table.row_count == 40
        assert headers(screen)[3:] == ["q p50", "q p99", "svc p50", "svc p99", "resp p50", "resp p99"]
        assert sum(c.width + 2 for c in table.columns.values()) <= 80
        assert table.scroll_y == 0
        await pilot.press("ctrl+end")  # the last row (end scrolls sideways)
        await pilot.pause()
        assert table.cursor_row == 39 and table.scroll_y > 0  # the last shapes scroll into view
        app.tick()  # a refresh keeps the place
        await pilot.pause()
        assert table.cursor_row == 39


@pytest.mark.slow
async def test_a_closed_loop_says_nothing_queues_and_one_shape_says_there_is_no_mix(tmp_path: Path) -> None:
    monitor = FakeMonitor()
    monitor.traffic = shape_mix(3, runs=900, mode="closed", tail=3.0)  # drawn evenly
    app = app_over(monitor, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        screen = app.screen
        rows = table_rows(screen)
        assert len(rows) == 3 and all(r[3] == r[4] == "0" for r in rows)  # no queue
        assert all(r[5] == r[7] and r[6] == r[8] for r in rows)  # response = service
        note = text_of(screen, "shapes-note")
        assert "every shape has 100 runs or more" in note and "closed loop" in note
        monitor.traffic = None  # the next configuration runs one shape
        app.tick()
        await pilot.pause()
        assert table_rows(screen) == [] and "one input shape: no mix to split" in text_of(screen, "shapes-title")


# ---- the screen, over a real worker ------------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.slow
async def test_a_real_three_shape_mix_under_poisson_arrivals(tmp_path: Path) -> None:
    from ortop.collectors.cpu import PsutilCpuCollector
    from ortop.engine import Monitor

    model = make_matmul_model(tmp_path / "mm.onnx", n=256)  # x: float32[batch x 256], run time grows with batch
    start = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1, "workload.warmup_runs": 3,
                                            "workload.arrival": "poisson", "workload.rate_hz": 200.0,
                                            "workload.dim_mix": {"batch": "2,32,1024"}})
    mon = Monitor(model, start)
    mon.start()
    try:
        app = make_app(mon, cpu=PsutilCpuCollector(), gpu=FakeGpuCollector(seed=1), refresh_hz=10.0,
                       profile_dir=tmp_path / "profiles")
        async with app.run_test(size=(120, 40)) as pilot:
            end = time.monotonic() + 30
            while time.monotonic() < end:
                t = mon.snapshot().traffic
                if t is not None and len(t.shapes) == 3 and min(s.runs for s in t.shapes) >= 100:
                    break
                await pilot.pause(0.2)
            else:
                raise AssertionError("each shape did not reach 100 runs")
            await pilot.press("m")
            await pilot.pause(0.3)
            screen = app.screen
            assert isinstance(screen, ShapesScreen)
            assert [r[0] for r in table_rows(screen)] == ["2", "32", "1024"] and headers(screen)[0] == "batch"
            t = mon.snapshot().traffic
            assert t is not None and t.open
            small, mid, large = t.shapes
            assert sum(s.share for s in t.shapes) == pytest.approx(1.0)
            assert all(0.15 < s.share < 0.5 for s in t.shapes)  # drawn evenly
            assert large.service.p50 > 3 * small.service.p50  # 512 times the work (a run's overhead aside)
            for s in t.shapes:  # response = queue + service, run by run: never below either, p50 or p99
                assert s.queue.p50 >= 0 and s.response.p50 >= s.service.p50 and s.response.p99 >= s.queue.p99
                assert s.queue.runs == s.service.runs == s.response.runs == s.runs
            rows = table_rows(screen)
            assert all(r[4] != "—" and r[8] != "—" for r in rows), rows
            assert "every shape has 100 runs or more" in text_of(screen, "shapes-note")
    finally:
        mon.stop()
