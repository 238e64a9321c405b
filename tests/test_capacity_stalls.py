"""The capacity interval's stall term: how far the host's stalls move from one search to the next (read over the
search's blocks, each run against its own shape), and how far that moves the capacity (the bracket's ends judged
again with the stalls thinned and thickened)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from ortop.config.profile import Profile
from ortop.engine.answers.capacity import Point, Search
from ortop.engine.answers.stall_record import MAX_AGE_S, add_shares, past_shares, record_key
from ortop.measure import rows as R
from ortop.measure.queue import queue_model, server_times, stall_sd, stalled
from ortop.measure.rerun import PaceBlock, between_searches, block_stalls, rerun_interval, stall_movement
from ortop.measure.slo import Slo


def stall_blocks(rng: np.random.Generator, shares: Sequence[float], runs: int = 400,
                 shape_ms: Sequence[float] = (1.0, 6.0), mix: np.ndarray | None = None, clump: int = 4,
                 stall_x: float = 6.0) -> list[PaceBlock]:
    """A search's blocks in the order they ran: block ``i``'s runs drawn from the shapes by its ``mix`` row
    (evenly without one), each its shape's service with 3 % of noise, and stalls — ``clump`` runs in a row
    ``stall_x`` times as long — starting so that about ``shares[i]`` of its runs stall."""
    out = []
    for i, share in enumerate(shares):
        p = mix[i] if mix is not None else np.full(len(shape_ms), 1 / len(shape_ms))
        shape = rng.choice(len(shape_ms), size=runs, p=p)
        service = np.asarray(shape_ms)[shape] * np.exp(rng.normal(0, 0.03, runs))
        for start in np.flatnonzero(rng.random(runs) < share / clump):
            service[start:start + clump] *= stall_x
        out.append(PaceBlock(1e9 * i, service, shape))
    return out


def naive_share(blocks: Sequence[PaceBlock]) -> float:
    """The share of runs over 3× the median of all runs, shapes ignored."""
    service = np.concatenate([b.service_ms for b in blocks])
    return float(np.mean(service > 3 * np.median(service)))


def test_a_mix_drawn_unevenly_on_a_steady_host_gives_a_narrow_term():
    """Two shapes 6× apart (seven runs in ten the fast one), drawn unevenly from block to block, on a host
    that stalls 1 % of runs throughout: each run read against its own shape finds the 1 %, and the share's
    movement is what its few dozen clumps leave (about 1 / √clumps); read against the runs' overall median, the
    slow shape's every run would read as a stall."""
    rels = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        blocks = stall_blocks(rng, np.full(40, 0.01), mix=rng.dirichlet([1.4, 0.6], size=40))
        share, rel, dof = stall_movement(blocks)
        assert 0.007 < share < 0.013, share
        assert naive_share(blocks) > 0.2
        assert dof == 7
        rels.append(rel)
    clumps = 40 * 400 * 0.01 / 4
    assert max(rels) < 3 * math.sqrt(2 / clumps), rels


def test_a_host_whose_stalls_move_over_the_search_gives_a_wide_term():
    """The same mix, the host stalling 0.2 % of runs in the search's first half and 3 % in its second (a neighbour
    arriving): the batches' shares move with it, and the term is twice a steady host's of the same mean share or
    more (what the steady host's term holds is its clumps' sampling, about 1 / √clumps)."""
    steady, moving = [], []
    for seed in range(4):
        rng = np.random.default_rng(10 + seed)
        mix = rng.dirichlet([0.5, 0.5], size=40)
        steady.append(stall_movement(stall_blocks(rng, np.full(40, 0.016), mix=mix))[1])
        moving.append(stall_movement(stall_blocks(rng, np.r_[np.full(20, 0.002), np.full(20, 0.03)], mix=mix))[1])
    assert min(moving) > 0.4, moving
    assert min(moving) > 1.5 * max(steady) and np.median(moving) > 2 * np.median(steady), (moving, steady)


def test_the_blocks_counts_and_what_has_no_term():
    """Each block's runs and stalls in the order the blocks ran; under two blocks nothing to read (nan); a search
    with no stall has no share to move (0, not missing)."""
    rng = np.random.default_rng(3)
    blocks = stall_blocks(rng, [0.0, 0.05, 0.0], runs=100, shape_ms=(2.0,))
    runs, slow = block_stalls(list(reversed(blocks)))
    assert runs.tolist() == [100, 100, 100]
    assert slow[0] == 0 and slow[2] == 0 and slow[1] > 0
    assert all(math.isnan(x) for x in stall_movement(blocks[:1])[:2])
    assert stall_movement(stall_blocks(rng, [0.0] * 6, shape_ms=(2.0,)))[:2] == (0.0, 0.0)


def test_server_times_carry_each_runs_shape_and_stalls_are_judged_against_it():
    """A run's shape travels with its cost, so a stall is judged against its own shape's median: the slow shape's
    every run is not a stall, the one run 5× its shape is."""
    n = 200
    rows = np.zeros((n, R.COLUMNS), dtype=np.int64)
    shape = np.arange(n) % 2
    service_ms = np.where(shape == 1, 6.0, 1.0)
    service_ms[10] *= 5  # shape 0, five times its median
    rows[:, R.Col.START] = np.arange(n) * 20_000_000
    rows[:, R.Col.SERVICE] = (service_ms * 1e6).astype(np.int64)
    rows[:, R.Col.SHAPE] = shape
    t = server_times(rows)
    assert t.shape == (n, 4) and t[:, 3].tolist() == shape.tolist()
    assert np.flatnonzero(stalled(t)).tolist() == [10]


def record(rng: np.random.Generator, n: int, share: float, stall_ms: float, clump: int = 4) -> np.ndarray:
    """Server times of a ~2 ms server whose stalls add ``stall_ms`` to ``clump`` runs in a row, about ``share`` of
    runs."""
    service = rng.gamma(20, 0.1, size=n)
    for start in np.flatnonzero(rng.random(n) < share / clump):
        service[start:start + clump] += stall_ms
    return np.column_stack([service, np.full(n, 0.05), np.zeros(n), np.zeros(n)])


def bracket(times: list[np.ndarray], slo: Slo, rates: np.ndarray) -> tuple[float, float]:
    """The two neighbouring rates the queue model's metric crosses the SLO between."""
    metric = [queue_model(times, slo, float(r))[0] for r in rates]
    i = next(i for i, m in enumerate(metric) if m > slo.ms)
    return float(rates[i - 1]), float(rates[i])


@pytest.mark.slow
def test_the_stall_term_is_wide_where_stalls_decide_the_slo_and_narrow_where_the_queue_does():
    """One server, 1 % of runs stalled by 30 ms in clumps. At p99 ≤ 40 ms the tail is the stalls' (the server is
    mostly idle where it crosses): a share moving by half moves the capacity by more than its bracket. At a p99 far
    above them, near the queue's ceiling, small stalls (1 ms added) barely move it. Thickened stalls lower the
    capacity, so both crossings move the same way and the term grows with the share's movement."""
    rng = np.random.default_rng(7)
    rec = [record(rng, 4000, 0.01, 30.0)]
    slo = Slo("p99", 40.0)
    lo, hi = bracket(rec, slo, np.geomspace(40, 400, 25))
    ends = [(lo, rec), (hi, rec)]
    decided = stall_sd(ends, slo, 0.5)
    assert decided > math.log(hi / lo), (decided, lo, hi)

    calm = [record(rng, 4000, 0.01, 1.0)]
    far = Slo("p99", 300.0)
    lo2, hi2 = bracket(calm, far, np.linspace(380, 500, 25))
    queued = stall_sd([(lo2, calm), (hi2, calm)], far, 0.5)
    assert queued < 0.25 * decided and queued < 0.02, (queued, decided)
    assert stall_sd([(lo2, calm), (hi2, calm)], far, 0.1) <= queued + 1e-9
    assert stall_sd([(lo2, calm), (hi2, calm)], far, 0.0) == 0.0
    assert math.isnan(stall_sd([(lo, rec)], slo, 0.5))


def test_the_interval_carries_the_stall_term_and_names_it_when_missing():
    plain = rerun_interval(100.0, tail=0.05, drift=0.03, bracket=0.03)
    wide = rerun_interval(100.0, tail=0.05, drift=0.03, bracket=0.03, stall=0.10, stall_dof=7, stall_moves=0.4)
    assert wide.lo < plain.lo < 100.0 < plain.hi < wide.hi
    assert wide.stall_sd == 0.10 and wide.as_dict()["stall_sd"] == 0.1 and wide.as_dict()["stall_moves"] == 0.4
    assert wide.sd == pytest.approx(math.sqrt(0.05 ** 2 + 0.03 ** 2 + 0.03 ** 2 + 0.10 ** 2))
    # a term read from eight batches that dominates takes Student's t, not the normal's quantile
    assert math.log(wide.hi / 100.0) > 1.645 * wide.sd * 1.05
    lacking = rerun_interval(100.0, tail=0.05, drift=0.03, bracket=0.03, stall=math.nan)
    assert lacking.missing == ("stalls",) and lacking.stall_sd == 0.0


# ---- between searches: the host's record -------------------------------------------------------------------------
def test_the_shares_of_earlier_searches_give_the_movement_between_searches():
    """√2 × the sd of the log shares (this search's and a rerun's each one draw); under three, or shares of 0,
    nothing to read."""
    shares = [0.002, 0.004, 0.008, 0.016]
    rel, dof = between_searches(shares)
    assert rel == pytest.approx(math.sqrt(2) * float(np.std(np.log(shares), ddof=1))) and dof == 3
    assert math.isnan(between_searches([0.01, 0.02])[0])
    assert math.isnan(between_searches([0.0, 0.0, 0.01, 0.02])[0])  # two above zero


def test_the_record_keeps_a_days_shares_per_key_and_passes_over_a_torn_line(tmp_path):
    path = tmp_path / "state" / "stall-shares.jsonl"
    assert past_shares("k", path=path) == []
    assert add_shares([("k", 0.01), ("other", 0.5), ("k", math.nan)], now=1000.0, path=path) is None
    assert add_shares([("k", 0.02)], now=2000.0, path=path) is None
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"key": "k", "t": 2100, "sha')  # a write cut short
    assert past_shares("k", now=2500.0, path=path) == [0.01, 0.02]
    assert past_shares("k", now=1000.0 + MAX_AGE_S + 1, path=path) == [0.02]  # the first is over a day old
    assert past_shares("other", now=2500.0, path=path) == [0.5]
    blocked = tmp_path / "file"
    blocked.write_text("")
    said = add_shares([("k", 0.01)], path=blocked / "stall-shares.jsonl")
    assert said is not None and "could not be written" in said
    one = replace(Profile(), session=replace(Profile().session, intra_op_num_threads=1))
    two = replace(one, session=replace(one.session, intra_op_num_threads=2))
    assert record_key("m.onnx", one) != record_key("m.onnx", two)
    reseeded = replace(one, description="other", workload=replace(one.workload, seed=7))
    assert record_key("m.onnx", one) == record_key("m.onnx", reseeded)  # a rerun: other arrivals, the same record
    assert record_key("m.onnx", one) != record_key("n.onnx", one)


def test_a_search_reads_the_larger_movement_and_says_where_it_read_it():
    """Steady within itself (its own reading about 1 / √clumps), but its earlier searches' shares spread eightfold:
    the movement between them is the one used, and the interval says it came from them."""
    rng = np.random.default_rng(2)
    search = Search(0, "a", Profile())
    search.points[100.0] = Point(100.0)
    for b in stall_blocks(rng, np.full(16, 0.01), shape_ms=(2.0,)):
        search.points[100.0].pace.append(b)
    own, _, where = search.stall_moves()
    assert where == "this search" and 0 < own < 0.6
    search.stall_past = (0.002, 0.016, 0.004, 0.012)
    moved, dof, where = search.stall_moves()
    assert where == "4 earlier searches" and moved > 1.0 and dof == 3
    assert moved == pytest.approx(between_searches(search.stall_past)[0])
