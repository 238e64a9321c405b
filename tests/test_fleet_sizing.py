"""The fleet's pure parts: sizing a peak by simulation from recorded service times, the per-type answer with its
sick-host flag, the cost ranking and the exit code (no cluster, no Ray)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ortop.fleet import gather as G
from ortop.measure import fleet_sizing as S
from ortop.measure.slo import Slo

# service_ms of `ortop run --headless --json --duration 3` on a 256-wide matmul, batch 16, one thread (this host)
RECORDED = {"mean": 0.0414, "std": 0.0414, "p50": 0.0352, "p90": 0.0522, "p99": 0.1395, "p999": 0.7163,
            "max": 2.1865}


def test_draws_follow_the_recorded_quantiles() -> None:
    draws = S.draw_service([RECORDED], 200_000, np.random.default_rng(1))
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert np.quantile(draws, q) == pytest.approx(RECORDED[key], rel=0.03)
    assert draws.max() <= RECORDED["max"] and draws.min() >= 0.8 * RECORDED["p50"]


def test_the_random_split_is_one_hosts_queue_at_rate_over_n() -> None:
    """Against M/M/1 theory: exponential service of mean 1 ms at 0.5 load has mean response 2 ms."""
    rng = np.random.default_rng(3)
    work = rng.exponential(1.0, 200_000)
    resp = S.random_split(work, peak_per_s=2000.0, hosts=4, servers=1, rng=rng)
    assert resp.mean() == pytest.approx(2.0, rel=0.05)
    assert S.random_split(work, 2000.0, 0, 1, rng).size == 0
    assert S.slo_metric(Slo("p99", 1.0), np.empty(0)) == math.inf


def test_least_outstanding_does_no_worse_than_a_random_split() -> None:
    rng = np.random.default_rng(4)
    work = rng.exponential(1.0, 40_000)
    slo = Slo("p99", 10.0)
    rand = S.slo_metric(slo, S.random_split(work, 3200.0, 4, 1, np.random.default_rng(5)))
    lor = S.slo_metric(slo, S.least_outstanding(work, 3200.0, 4, 1, np.random.default_rng(5)))
    assert lor < rand


def test_sizing_meets_the_slo_at_n_and_misses_at_n_minus_1_on_recorded_service_times() -> None:
    """One host of this type holds p99 ≤ 1 ms up to about 8000/s (its simulated knee): with that as the interval's
    low end, a peak of 28 000/s needs 4 hosts (7000/s each); the simulation meets the SLO at 4 and misses it at 3
    (9333/s each)."""
    slo = Slo("p99", 1.0)
    one_host = [S.slo_metric(slo, S.random_split(S.draw_service([RECORDED], 40_000, np.random.default_rng(0)),
                                                  rate, 1, 1, np.random.default_rng(1)))
                for rate in (7000.0, 10000.0)]
    assert one_host[0] < slo.ms and one_host[-1] > slo.ms  # the knee lies between: the figures below rest on it
    sizing = S.size(28_000.0, 8000.0, [RECORDED], slo)
    assert sizing.hosts == 4 and sizing.with_spare == 5
    assert sizing.meets_at_n and sizing.misses_at_n_minus_1
    assert sizing.lor_at_n <= sizing.random_at_n
    d = sizing.as_dict()
    assert d["hosts_with_spare"] == 5 and "meets the SLO at 4 hosts and misses it at 3" in d["verdict"]


def test_a_cautious_low_end_is_said() -> None:
    sizing = S.size(28_000.0, 4000.0, [RECORDED], Slo("p99", 1.0))
    assert sizing.hosts == 7 and sizing.meets_at_n and not sizing.misses_at_n_minus_1
    assert "cautious" in sizing.verdict()


@pytest.mark.parametrize("peak, per_host", [(0.0, 10.0), (10.0, 0.0), (math.nan, 1.0)])
def test_hosts_needed_refuses_nonsense(peak: float, per_host: float) -> None:
    with pytest.raises(ValueError):
        S.hosts_needed(peak, per_host)


def node(node_id: str, kind: str, cap: float | None, lo: float | None, hi: float | None, status: str = "done",
         code: int = 0) -> dict:
    profile = {"profile": "defaults", "capacity_per_s": cap, "interval": [lo, hi], "met": cap is not None}
    result = {"profiles": [profile]}
    return {"node": {"id": node_id, "type": kind, "address": "10.0.0.1"}, "status": status, "exit_code": code,
            "result": result if status == "done" else None, "line": "the node died" if status == "lost" else None}


def test_a_node_whose_interval_leaves_out_its_siblings_median_is_flagged_and_not_pooled() -> None:
    nodes = [node("a", "c6i", 100, 90, 110), node("b", "c6i", 104, 95, 112), node("c", "c6i", 98, 88, 108),
             node("d", "c6i", 60, 50, 70), node("e", "g5", 400, 350, 420)]
    types = {t["type"]: t for t in G.per_type(nodes, {"c6i": 0.34, "g5": 1.01})}
    c6i = types["c6i"]["profiles"][0]
    assert [f["id"] for f in c6i["flagged"]] == ["d"] and "below" in c6i["flagged"][0]["why"]
    assert c6i["pooled"] == ["a", "b", "c"]
    assert c6i["capacity_per_s"] == 100 and c6i["interval"] == [88, 112]
    assert c6i["usd_per_million"] == pytest.approx(0.34 / (88 * 3600) * 1e6)
    ranking = G.ranking(list(types.values()))
    assert [r["type"] for r in ranking] == ["g5", "c6i"]  # 1.01 / 350 per s is cheaper than 0.34 / 88


def test_two_nodes_that_disagree_are_both_pooled_with_a_note() -> None:
    types = G.per_type([node("a", "t", 100, 90, 110), node("b", "t", 50, 45, 55)])
    p = types[0]["profiles"][0]
    assert p["flagged"] == [] and p["pooled"] == ["a", "b"] and "disagree" in p["note"]


def test_the_fleet_exit_code_is_its_gravest_nodes() -> None:
    assert G.exit_code([node("a", "t", 1, 1, 1), node("b", "t", 1, 1, 1)]) == 0
    assert G.exit_code([node("a", "t", 1, 1, 1), node("b", "t", None, None, None, status="lost")]) == 4
    assert G.exit_code([node("a", "t", 1, 1, 1, code=6), node("b", "t", 1, 1, 1, code=5)]) == 5
    assert G.exit_code([node("a", "t", None, None, None, status="refused")]) == 1
    assert G.exit_code([node("a", "t", 1, 1, 1)], interrupted=True) == 130
    assert G.lost_lines([node("bb", "t", None, None, None, status="lost")]) == [
        "node bb (t, 10.0.0.1) lost: the node died"]


def fleet_data() -> dict:
    """A fleet's JSON as ``ortop fleet capacity --json --peak 280 --price c6i=0.34`` gives it: four c6i nodes, one
    flagged, a g5 node lost (the report tests render it in a browser too)."""
    nodes = [node("a" * 20, "c6i", 100, 90, 110), node("b" * 20, "c6i", 104, 95, 112),
             node("c" * 20, "c6i", 98, 88, 108), node("d" * 20, "c6i", 60, 50, 70),
             node("e" * 20, "g5", None, None, None, status="lost")]
    for n in nodes:
        n["node"]["facts"] = {"cpu_model": "Xeon <8375C>", "usable_cpus": 8, "gpus": []}
    types = G.per_type(nodes, {"c6i": 0.34})
    types[0]["sizing"] = S.size(280.0, 88.0, [RECORDED], Slo("p99", 1.0)).as_dict()
    return {"fleet": {"command": "capacity", "model": "m.onnx", "sha256": "0" * 64, "args": ["--slo", "p99=1ms"],
                      "cluster": "10.0.0.5:6379", "elapsed_s": 41.0, "peak_per_s": 280.0,
                      "slo": {"metric": "p99", "ms": 1.0}},
            "nodes": nodes, "types": types, "ranking": G.ranking(types), "lost": G.lost_lines(nodes),
            "not_measured": [], "exit_code": 4}


def test_the_fleet_page_renders_the_json_alone() -> None:
    from ortop.report.fleet import fleet_page

    data = fleet_data()
    html = fleet_page(data)
    assert "Xeon &lt;8375C&gt;" in html and "<script" not in html
    assert "dddddddddddd flagged" in html and "Lost nodes" in html and "eeeeeeeeeeee (g5" in html
    assert "Sizing a peak of 280/s" in html and "Cost per million requests" in html
