"""The UI's cost stays flat over a long session: the work per refresh does not grow with the runs kept or the time
the session has run.

Measured before the fix: the UI process used 3.8 % of a core in its first seconds and 6–7 % in every minute after,
memory flat. Each snapshot computed the running configuration's traffic figures (percentiles of the queue, the
service, the idle gaps and the shapes) over every kept run: 0.5 ms at 500 runs, 7 ms at 50 000 with open arrivals,
several snapshots a second. They are now computed at most once per RECORD_REFRESH_S.
"""

from __future__ import annotations

import numpy as np
import pytest

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.live import store as store_mod
from ortop.engine.live.monitor import Monitor
from ortop.engine.live.readout import RECORD_REFRESH_S
from ortop.engine.live.store import ConfigStore


def test_snapshots_do_not_recompute_figures_over_every_kept_run(matmul_model, monkeypatch) -> None:
    """Four snapshots a second for 20 s while runs arrive: the figures over the whole ring are computed about once
    a second, not on every snapshot, however many runs the ring holds."""
    clock = [0.0]
    prof = profile_mod.merge(Profile(), **{"workload.arrival": "poisson", "workload.rate_hz": 100.0})
    mon = Monitor(matmul_model, prof, clock=lambda: clock[0])  # not started: its stores are filled here
    c = ConfigStore(0, mon.start_profile)
    c.info = {"create_ms": 1.0, "first_run_ms": 1.0}
    mon.st.stores[0] = c
    mon.st.current = c
    computed: list[int] = []
    figures = store_mod.T.figures

    def counted(*args, **kw):
        computed.append(c.runs)
        return figures(*args, **kw)

    monkeypatch.setattr(store_mod.T, "figures", counted)
    rng = np.random.default_rng(0)
    snapshots = 0
    for _ in range(80):  # 20 s at 4 snapshots a second, 2 500 runs arriving per step
        n = 2_500
        rows = np.zeros((n, 8), dtype=np.int64)
        rows[:, 0] = ((clock[0] + np.linspace(0, 0.25, n, endpoint=False)) * 1e9).astype(np.int64)
        rows[:, 1] = rng.integers(1_000_000, 3_000_000, n)
        rows[:, 5] = rng.integers(0, 1_000_000, n)
        c.add(rows, 250_000_000, 200_000_000, rows[:, 0] / 1e9)
        clock[0] += 0.25
        snap = mon.snapshot()
        snapshots += 1
        assert snap.traffic is not None and snap.window.runs > 0
    assert c.runs > store_mod.CONFIG_RING  # the ring filled and turned over
    assert len(computed) <= 20 / RECORD_REFRESH_S + 2, f"{len(computed)} computations for {snapshots} snapshots"


@pytest.mark.slow
async def test_the_live_view_repaints_no_more_lines_per_tick_as_the_session_goes_on(tmp_path) -> None:
    """Two hundred refreshes of the live view: the lines repainted per refresh in the last fifty are no more than
    in the first fifty after start-up (the worker-CPU history and the GPU series fill up meanwhile), and every
    history the meters keep stays bounded."""
    from ortop.collectors.cpu import FakeCpuCollector
    from ortop.collectors.gpu import FakeGpuCollector
    from ortop.tui.app import make_app
    from ortop.tui.meters import HISTORY
    from ortop.tui.widgets import Panel
    from tests.fakes import FakeMonitor, StepClock

    app = make_app(FakeMonitor(), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3), refresh_hz=0,
                   profile_dir=tmp_path, clock=StepClock())
    async with app.run_test(size=(120, 40)) as pilot:
        panels = list(app.screen.query(Panel))

        def painted() -> int:
            return sum(p.lines_painted for p in panels)

        async def run(ticks: int) -> int:
            before = painted()
            for _ in range(ticks):
                app.clock.t += 0.5
                app.tick()
                await pilot.pause()
            return painted() - before

        await run(20)  # start-up: the layout settles
        first = await run(50)
        await run(100)
        last = await run(50)
        assert last <= first * 1.2 + 10, (first, last)
        assert len(app.meters.process_history) <= HISTORY
        assert all(len(m) <= HISTORY and len(u) <= HISTORY for m, u in app.meters.gpu_history.values())
