"""A capacity search whose idle server already misses the SLO stops once the closed loop has measured the floor,
and says so in its result (the note, a warning in the JSON): stepping down rate after rate could only find the
same answer, at the cost of the whole budget."""

from __future__ import annotations

import json

import pytest

from ortop.config.profile import Profile, merge
from ortop.engine.capacity_search import CapacitySearch, idle_miss
from ortop.measure.slo import Slo
from tests.models import make_matmul_model


def test_the_idle_miss_names_the_floor_and_the_slo():
    assert idle_miss(Slo("p99", 20.0), 42.0) == ("the model's own p99 at no load is 42 ms: no rate meets "
                                                  "p99 ≤ 20 ms (capacity 0)")


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
