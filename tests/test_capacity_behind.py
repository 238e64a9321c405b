"""A capacity search on a real model with one point pushed far past what its server can do: that point's costs are a
backlog's, and the other points' verdicts do not change for it."""

from __future__ import annotations

import pytest

from ortop.config.profile import Profile, merge
from ortop.engine.answers.capacity_search import CapacitySearch
from ortop.measure.slo import Slo
from tests.models import make_slow_model


@pytest.mark.integration
def test_a_real_point_pushed_far_past_the_server_leaves_the_other_points_verdicts_as_they_were(tmp_path):
    model = make_slow_model(str(tmp_path / "m.onnx"), batch=64)  # a few ms a run on one thread
    one = merge(Profile(), **{"session.intra_op_num_threads": 1})
    probe = CapacitySearch(model, [one], Slo("p99", 1000.0), budget_s=120.0)
    probe._budget.start()
    try:
        probe._build()
        probe._ceilings()
        s = probe.searches[0]
        ceiling = s.ceiling_per_s
        assert 20 < ceiling < 2000, (ceiling, s.failed)
        # an SLO the calm points meet with room: twenty times the bare service's p99
        slo = Slo("p99", 20 * s.floor_ms)
        probe.slo = slo
        calm = [round(0.2 * ceiling, 1), round(0.4 * ceiling, 1)]
        for rate in calm:
            probe._point(rate, [s])
        before = {r: s.points[r].decide(slo, others=s.server_times(besides=r)) for r in calm}
        pooled_before = {r: sum(len(t) for t in s.server_times(besides=r)) for r in calm}
        assert all(not s.points[r].overloaded() for r in calm) and set(before.values()) == {"met"}, before

        far = round(3 * ceiling, 1)  # three times what back-to-back runs reach: a queue that never empties
        probe._point(far, [s])
        assert s.points[far].overloaded()
        assert not s.points[far].kept()  # the rate offered was not served: said as a backlog, not a paced answer

        after = {r: s.points[r].decide(slo, others=s.server_times(besides=r)) for r in calm}
        assert after == before
        # what the other points model their rates with holds none of the backlog's costs
        assert {r: sum(len(t) for t in s.server_times(besides=r)) for r in calm} == pooled_before
        backlog = {id(b) for b in s.points[far].busy}
        assert backlog and not any(backlog & {id(t) for t in s.server_times(besides=r)} for r in calm)
    finally:
        probe._pool.close()
