"""Replicas: N sessions of one model served at once, the split of the cores between them, and the shared arena."""

from __future__ import annotations

import os

import pytest

from ortop.collectors.host import HostFacts
from ortop.config import profile as P
from ortop.config.errors import ProfileError
from ortop.config.profile import Profile
from ortop.config.replicas import describe_share, overlap_note, replica_profile, split_cores
from ortop.engine.live import headless
from ortop.engine.placement import core_order, shares_for
from tests.models import make_chained_activations_model

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing


def prof(**dotted) -> Profile:
    return P.merge(Profile(), **{k.replace("__", "."): v for k, v in dotted.items()})


# ---- the split --------------------------------------------------------------------------------------------------
def test_cores_are_cut_into_contiguous_even_shares() -> None:
    assert split_cores(range(8), 2) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert split_cores(range(7), 3) == [(0, 1, 2), (3, 4), (5, 6)]
    assert split_cores(range(4), 1) == [(0, 1, 2, 3)]


def test_more_replicas_than_cores_share_them_round_robin_and_say_so() -> None:
    shares = split_cores([0, 1], 4)
    assert shares == [(0,), (1,), (0,), (1,)]
    assert "4 replicas on 2 cores" in overlap_note(shares)
    assert overlap_note(split_cores(range(4), 2)) == ""


def test_whole_numa_nodes_go_to_replicas_when_there_are_enough() -> None:
    nodes = {0: (0, 1, 8, 9), 1: (2, 3, 10, 11)}
    assert split_cores([0, 1, 2, 3, 8, 9, 10, 11], 2, nodes) == [(0, 1, 8, 9), (2, 3, 10, 11)]
    # Fewer nodes than replicas: the cores are cut instead.
    assert len(split_cores([0, 1, 2, 3], 4, {0: (0, 1), 1: (2, 3)})) == 4


def test_smt_siblings_stay_together() -> None:
    host = HostFacts(logical_cpus=8, usable_cpus=tuple(range(8)), physical_cores=4,
                     siblings=((0, 4), (1, 5), (2, 6), (3, 7)))
    assert core_order(host) == [0, 4, 1, 5, 2, 6, 3, 7]
    shares = shares_for(prof(workload__replicas=2, workload__pin_replicas=True), host)
    assert shares == ((0, 4, 1, 5), (2, 6, 3, 7))  # two whole physical cores each, not one sibling of each
    assert shares_for(prof(workload__replicas=2), host) is None  # not pinned


def test_a_cpuset_bounds_the_split() -> None:
    host = HostFacts(logical_cpus=8, usable_cpus=(2, 3, 4, 5), physical_cores=8)
    assert shares_for(prof(workload__replicas=2, workload__pin_replicas=True), host) == ((2, 3), (4, 5))


def test_a_pinned_replica_gets_a_pool_of_its_share() -> None:
    p, notes = replica_profile(Profile(), (4, 5, 6))
    assert notes == []
    assert p.session.intra_op_num_threads == 3
    assert p.session.intra_op_thread_affinities == ((5,), (6,))  # the caller is thread 0, pinned by the loop
    p, _ = replica_profile(prof(session__intra_op_num_threads=4), (4, 5))
    assert p.session.intra_op_thread_affinities == ((5,), (4,), (5,))
    p, _ = replica_profile(prof(session__intra_op_num_threads=1), (4, 5))
    assert p.session.intra_op_thread_affinities is None


def test_pinning_says_what_it_cannot_do() -> None:
    own = prof(session__intra_op_num_threads=2, session__intra_op_thread_affinities=((1,),))
    p, notes = replica_profile(own, (2, 3))
    assert p == own and "pins the pool threads itself" in notes[0]
    glob = prof(session__use_per_session_threads=False)
    p, notes = replica_profile(glob, (2, 3))
    assert p == glob and "global thread pools" in notes[0]
    assert replica_profile(Profile(), None) == (Profile(), [])


def test_share_text() -> None:
    assert describe_share((0, 1, 2, 5)) == "cores 0-2,5"
    assert describe_share((3,)) == "core 3"
    assert describe_share(None) == "all cores"


def test_replica_count_is_bounded() -> None:
    for bad in (0, 65):
        with pytest.raises(ProfileError, match="replicas"):
            P.loads(f"[workload]\nreplicas = {bad}\n")
    assert P.loads("[workload]\nreplicas = 4\npin_replicas = true\n").workload.replicas == 4


# ---- through ortop, with a real worker -------------------------------------------------------------------------
@pytest.mark.integration
def test_two_pinned_replicas_run_on_disjoint_cores(matmul_model) -> None:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two usable cores")
    res = headless.measure(matmul_model, prof(workload__replicas=2, workload__pin_replicas=True), duration_s=1.5)
    assert res.fatal is None and res.measured
    reps = res.summary["replicas"]
    assert [r["replica"] for r in reps] == [0, 1]
    assert all(r["runs"] > 0 and r["p50_ms"] > 0 for r in reps)
    a, b = (set(r["cores"]) for r in reps)
    assert a and b and not a & b and a | b <= set(cores)
    # The aggregate is the replicas' sum.
    assert res.summary["runs"] == sum(r["runs"] for r in reps)
    assert res.summary["throughput_per_s"] == pytest.approx(sum(r["throughput_per_s"] for r in reps), rel=0.01)


@pytest.mark.integration
def test_unpinned_replicas_report_no_cores(matmul_model) -> None:
    res = headless.measure(matmul_model, prof(workload__replicas=3), duration_s=1.0)
    assert res.fatal is None
    assert [r["cores"] for r in res.summary["replicas"]] == [None, None, None]
    assert "replicas" not in headless.measure(matmul_model, Profile(), duration_s=0.5).summary


@pytest.fixture(scope="module")
def chained(tmp_path_factory) -> str:
    return make_chained_activations_model(tmp_path_factory.mktemp("rep") / "chained.onnx")


@pytest.mark.integration
def test_two_replicas_with_a_shared_arena_use_less_memory(chained) -> None:
    # Paced, with the replicas' runs spread over the period: one shared arena holds about one run's activations,
    # two arenas hold two (measured: 402 MB apart, 270 MB shared).
    def rss(shared: bool | None) -> float:
        res = headless.measure(chained, prof(workload__rate_hz=2.0, workload__replicas=2,
                                             session__use_env_allocators=shared), duration_s=2.0)
        assert res.fatal is None and all(r["runs"] > 0 for r in res.summary["replicas"])
        return res.summary["memory"]["rss_mb"]

    apart, shared = rss(None), rss(True)
    assert apart - shared > 64, (apart, shared)
