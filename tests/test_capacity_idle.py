"""A capacity search whose idle server already misses the SLO stops once the closed loop has measured the floor,
and says so in its result (the note, a warning in the JSON): stepping down rate after rate could only find the
same answer, at the cost of the whole budget."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ortop.config.profile import Profile, merge
from ortop.engine.capacity import Point, Search
from ortop.engine.capacity_search import CapacitySearch, idle_miss, nearly_idle_miss
from ortop.measure.slo import Slo
from tests.models import make_matmul_model


def test_the_idle_miss_names_the_floor_and_the_slo():
    assert idle_miss(Slo("p99", 20.0), 42.0) == ("the model's own p99 at no load is 42 ms: no rate meets "
                                                  "p99 ≤ 20 ms (capacity 0)")


def _point(rate: float, ms: float, slo: Slo) -> Point:
    p = Point(rate)
    for _ in range(4):
        p.add(np.full(50, ms), 1.0, 50, 0, slo)
    p.decide(slo)
    return p


def test_a_point_missed_with_the_server_nearly_idle_ends_the_search_before_it_steps_lower():
    """Open load can be slower than back to back (runs after idle gaps: caches cold, pools asleep): a 40 ms model
    read p99 60 ms in its closed loop, under a 100 ms SLO, and 150 ms at 2/s. No lower rate leaves its server idler."""
    slo = Slo("p99", 100.0)
    s = Search(0, "running", Profile(), ceiling_per_s=24.0, floor_ms=60.0, hi=24.0)
    idle = _point(2.0, 150.0, slo)
    assert idle.decision == "not met"
    assert nearly_idle_miss(s, idle, slo) == ("the model's own p99 with its server nearly idle (2/s, 8 % of its "
                                              "ceiling) is 150 ms: no rate meets p99 ≤ 100 ms (capacity 0)")
    assert nearly_idle_miss(s, _point(12.0, 150.0, slo), slo) == ""  # half its ceiling: a lower rate may meet it
    assert nearly_idle_miss(s, _point(2.0, 50.0, slo), slo) == ""    # met
    s.lo = 1.0                                                       # a lower rate already met it
    assert nearly_idle_miss(s, idle, slo) == ""


@pytest.mark.integration
def test_an_slo_below_the_models_own_service_time_stops_at_once_with_the_verdict(tmp_path, monkeypatch):
    for xdg in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(xdg, str(tmp_path / xdg))
    model = make_matmul_model(tmp_path / "mm.onnx", n=256, batch=64)
    seen: list[float] = []
    slo = Slo("p99", 0.01)  # far below what one run of the model takes
    search = CapacitySearch(model, [merge(Profile(), **{"session.intra_op_num_threads": 1})], slo, budget_s=60,
                            on_point=lambda s, p: seen.append(p.rate_per_s))
    result = search.run()
    (s,) = result.searches
    assert s.floor_ms >= slo.ms and s.ceiling_per_s > 0
    assert s.note == idle_miss(slo, s.floor_ms)
    assert s.note.startswith("the model's own p99 at no load is ") and s.note.endswith(
        ": no rate meets p99 ≤ 0.01 ms (capacity 0)")
    assert not s.points and seen == []          # no rate was offered: the search stopped after the closed loop
    assert result.elapsed_s < 30 and not result.stopped  # far from the 60 s budget, and not by a stop
    d = json.loads(json.dumps(result.as_dict()))
    assert d["best"] is None and d["profiles"][0]["met"] is False and d["profiles"][0]["note"] == s.note
    assert f"#0: {s.note}" in d["warnings"]
