"""``ortop tune``: the space's pruning by host and model, the racing logic against a fake racer on a fake clock
(known effects, noise, drift), the saved profile, and one end-to-end run in a real worker."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from onnx import helper

from ortop.cli.tune import save_header, tune_main
from ortop.collectors.host import HostFacts
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.answers.space import ModelFacts, Space, has_parallel_branches, profile_key, unfixed_dims
from ortop.engine.answers.tuner import BETTER, KEEP, NOT_MEASURED, STOPPED, RaceOutcome, Tuner, figures
from ortop.errors import RuntimeFailure
from ortop.fsutil import write_text
from ortop.measure.compare import Block, schedule
from tests.models import _vi, make_if_model, model_of, save


class StepClock:
    """A clock that moves only when the fake racer says so."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fake_model_info():
    from ortop.model import ModelInfo, TensorInfo

    return ModelInfo(
        path="/models/convnet.onnx", ir_version=10, opsets={"": 17}, producer="tests",
        inputs=(TensorInfo("image", "float32", ("batch", 16, 64, 64)),),
        outputs=(TensorInfo("logits", "float32", ("batch", 10)),),
        initializer_inputs=(), op_histogram={"Conv": 2, "Relu": 4, "MatMul": 3}, control_flow=(), num_nodes=9,
        num_initializers=7, param_bytes=1000, free_dims=("batch",), gather_bounds={})

# ---- hosts and models ---------------------------------------------------------------------------------------------


def host(cores: int = 2, *, quota: float | None = None, usable: Sequence[int] | None = None, smt: bool = False,
         numa: int = 1) -> HostFacts:
    logical = cores * (2 if smt else 1)
    siblings = tuple((c, c + cores) if smt else (c,) for c in range(cores))
    per = logical // numa
    nodes = {n: tuple(range(n * per, (n + 1) * per)) for n in range(numa)}
    return HostFacts(logical_cpus=logical, usable_cpus=tuple(usable if usable is not None else range(logical)),
                     physical_cores=cores, siblings=siblings, numa_nodes=nodes, cpu_quota=quota,
                     cpu_model="Fake CPU")


CHAIN = ModelFacts(parallel_branches=False, ops=frozenset({"Conv", "MatMul", "Relu"}))
BRANCHY = ModelFacts(parallel_branches=True, ops=frozenset({"MatMul", "Add"}))


def threads_tried(space: Space) -> set[int]:
    return {c.profile.session.intra_op_num_threads for c in space.grid()}


# ---- the space: pruning by host -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_core_host_never_tries_four_threads() -> None:
    space = Space(Profile(), host(2), CHAIN)
    assert threads_tried(space) <= {0, 1, 2}
    assert 4 not in threads_tried(space)
    big = Space(Profile(), host(16), CHAIN, ["threads", "spinning"])
    # 16 is what the start profile's default resolves to on 16 cores: the baseline itself, never raced again
    assert {1, 2, 4, 8} <= threads_tried(big) and 16 not in threads_tried(big)
    one = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1})
    assert {2, 4, 8, 16} <= threads_tried(Space(one, host(16), CHAIN, ["threads", "spinning"]))


@pytest.mark.slow
def test_quota_of_one_and_a_half_cpus_caps_threads_at_two() -> None:
    space = Space(Profile(), host(16, quota=1.5), CHAIN)
    assert space.thread_values() == (1, 2)
    tried = {c.profile.session.intra_op_num_threads for d in space.dimensions
             for c in space.candidates(d, Profile())}
    assert tried <= {0, 1, 2}  # 0 only as the start's own value, never as a change
    for c in space.grid():
        assert c.profile.session.intra_op_num_threads in (0, 1, 2)
        if c.profile.session.intra_op_num_threads == 0:
            assert "threads" not in c.label  # the baseline's count, left as it was


def test_cpuset_caps_threads() -> None:
    space = Space(Profile(), host(16, usable=[0, 1, 2]), CHAIN)
    assert max(space.thread_values()) == 3
    assert 0 not in space.thread_values()  # ORT's default would start 16 threads on 3 CPUs


def test_affinity_only_where_it_differs_from_the_default() -> None:
    start = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 4})
    plain = Space(start, host(8), CHAIN)
    assert "affinity" not in plain.dimensions
    assert any(n.startswith("affinity") for n in plain.pruned)
    smt = Space(start, host(8, smt=True), CHAIN)
    cands = smt.candidates("affinity", start)
    assert cands and cands[0].profile.session.intra_op_thread_affinities == ((1,), (2,), (3,))
    numa = Space(start, host(8, numa=2), CHAIN)
    aff = [c.profile.session.intra_op_thread_affinities for c in numa.candidates("affinity", start)]
    assert aff == [((0, 1, 2, 3),) * 3]
    for c in smt.candidates("affinity", start) + numa.candidates("affinity", start):
        profile_mod.validate(c.profile, host_cpus=16)


def test_spinning_and_block_base_pruned_with_one_thread() -> None:
    one = profile_mod.merge(Profile(), **{"session.intra_op_num_threads": 1})
    space = Space(one, host(4), CHAIN)
    assert space.candidates("spinning", one) == []
    assert space.candidates("dynamic_block_base", one) == []
    assert all(c.profile.session.allow_spinning is None for c in space.candidates("threads", one)
               if c.profile.session.intra_op_num_threads == 1)


def test_values_come_from_the_knob_registry() -> None:
    from ortop.config import knobs

    space = Space(Profile(), host(4), CHAIN)
    want = {int(v) for v in knobs.get("session.dynamic_block_base").tune(4)} - {0}
    got = {c.profile.session.dynamic_block_base for c in space.candidates("dynamic_block_base", Profile())}
    assert got == want


def test_unknown_dimension_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown space dimension 'thread'"):
        Space(Profile(), host(2), CHAIN, ["thread"])


# ---- the space: pruning by model ----------------------------------------------------------------------------------


def _graph(nodes, inputs=("x",), outputs=("y",)):
    return model_of(nodes, [_vi(n, "float32", [4, 4]) for n in inputs],
                    [_vi(n, "float32", [4, 4]) for n in outputs]).graph


def test_parallel_branches_found_in_the_graph() -> None:
    chain = _graph([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
                    helper.make_node("Tanh", ["b"], ["y"])])
    assert not has_parallel_branches(chain)
    fork = _graph([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
                   helper.make_node("Add", ["a", "b"], ["y"])])
    assert has_parallel_branches(fork)
    shapes = _graph([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["a"]),
                     helper.make_node("Reshape", ["a", "s"], ["y"])])
    assert not has_parallel_branches(shapes)  # shape bookkeeping beside a node is not a branch


def test_no_parallel_mode_without_branches() -> None:
    space = Space(Profile(), host(8), CHAIN, ["threads", "execution_mode", "dynamic_block_base"])
    assert "execution_mode" not in space.dimensions
    assert any(n.startswith("execution_mode: the graph has no parallel branches") for n in space.pruned)
    assert all(c.profile.session.execution_mode == "sequential" for c in space.grid())
    branchy = Space(Profile(), host(8), BRANCHY)
    modes = {c.profile.session.execution_mode for c in branchy.candidates("execution_mode", Profile())}
    assert modes == {"parallel"}
    assert {c.profile.session.inter_op_num_threads for c in branchy.candidates("execution_mode", Profile())} <= \
        {0, 2, 4, 8}


@pytest.mark.slow
def test_if_and_loop_models_never_try_cuda_graph(tmp_path) -> None:
    from ortop.model import load_model

    cuda = profile_mod.merge(Profile(), **{"provider.name": "cuda"})
    info = load_model(make_if_model(tmp_path / "if.onnx"))
    facts = ModelFacts.from_model(info, cuda)
    assert facts.control_flow == ("If",)
    for dims in (None, ["cuda_graph", "io_binding", "threads"]):
        space = Space(cuda, host(4), facts, dims)
        assert "cuda_graph" not in space.dimensions
        assert not any(c.profile.cuda_graph() for c in space.grid())
    assert any("control flow" in n for n in Space(cuda, host(4), facts, ["cuda_graph"]).pruned)
    fixed = ModelFacts(ops=frozenset({"Conv"}))
    assert "cuda_graph" in Space(cuda, host(4), fixed).dimensions
    small = Space(cuda, host(4), fixed, ["io_binding", "cuda_graph", "threads", "conv_algo"])
    graphs = [c.profile for c in small.grid() if c.profile.cuda_graph()]
    assert graphs and all(p.provider.io_binding and p.session.execution_mode == "sequential" for p in graphs)
    for p in graphs[:5]:
        profile_mod.validate(p)


def test_cuda_graph_needs_fixed_shapes() -> None:
    info = fake_model_info()
    cuda = profile_mod.merge(Profile(), **{"provider.name": "cuda"})
    assert unfixed_dims(info, cuda) == ("batch",)
    pinned = profile_mod.merge(cuda, **{"workload.dims": {"batch": 1}})
    assert unfixed_dims(info, pinned) == ()
    loose = ModelFacts(ops=frozenset(info.op_histogram), unfixed_dims=("batch",))
    assert "cuda_graph" not in Space(cuda, host(4), loose).dimensions


def test_cuda_dimensions_only_with_cuda() -> None:
    space = Space(Profile(), host(4), CHAIN)
    assert not set(space.dimensions) & {"io_binding", "cuda_graph", "conv_algo", "tf32"}
    asked = Space(Profile(), host(4), CHAIN, ["threads", "conv_algo"])
    assert asked.dimensions == ("threads",)
    assert any(n.startswith("conv_algo: CUDA only") for n in asked.pruned)


def test_grid_profiles_all_validate() -> None:
    space = Space(Profile(), host(4, smt=True), BRANCHY, ["threads", "spinning", "execution_mode", "affinity"])
    grid = space.grid()
    assert len({c.key for c in grid}) == len(grid)
    assert profile_key(Profile()) not in {c.key for c in grid}
    for c in grid[:: max(1, len(grid) // 40)]:
        profile_mod.validate(c.profile)


# ---- a fake racer -------------------------------------------------------------------------------------------------

BASE = {"p50": 2.0, "p99": 4.0, "throughput": 480.0, "cpu": 2.0}
Effect = Callable[[Profile], dict[str, float]]


@dataclass
class FakeRacer:
    """Blocks with known effects, multiplicative noise and a slow drift shared by all configurations."""

    clock: StepClock
    effect: Effect = lambda p: {}
    noise: float = 0.03
    drift: float = 0.2
    block_s: float = 0.2
    build_s: float = 0.3
    fail_build: Callable[[Profile], str] = lambda p: ""
    fail_run: Callable[[Profile], str] = lambda p: ""
    seed: int = 0
    built: set[str] = field(default_factory=set)
    released: list[str] = field(default_factory=list)
    blocks_of: dict[str, int] = field(default_factory=dict)
    races: int = 0
    closed: bool = False

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.seq = 0

    def prepare(self, profiles: Sequence[Profile]) -> dict[int, str]:
        failed = {}
        for i, p in enumerate(profiles):
            k = profile_key(p)
            if k in self.built:
                continue
            self.clock.t += self.build_s
            why = self.fail_build(p)
            if why:
                failed[i] = why
            else:
                self.built.add(k)
        return failed

    def race(self, profiles: Sequence[Profile], seconds: float) -> RaceOutcome:
        self.races += 1
        out = RaceOutcome(failed=self.prepare(profiles))
        for i, p in enumerate(profiles):
            if i not in out.failed and self.fail_run(p):
                out.failed[i] = self.fail_run(p)
        ok = [i for i in range(len(profiles)) if i not in out.failed]
        end = self.clock.t + seconds
        if len(ok) < 2:
            self.clock.t = end
            return out
        rounds = int(seconds // (len(ok) * self.block_s))
        for j in schedule(len(ok), rounds):
            i = ok[j]
            t = self.clock.t
            host_state = 1 + self.drift * math.sin(t / 15.0)
            eff = {**{m: 1.0 for m in BASE}, **self.effect(profiles[i])}
            vals = {m: BASE[m] * eff[m] * (host_state if m != "throughput" else 1 / host_state)
                    * math.exp(self.noise * self.rng.standard_normal()) for m in BASE}
            out.blocks.append(Block(i, self.seq, t, t + self.block_s, 100, vals["p50"], vals["p99"],
                                    vals["throughput"], vals["cpu"]))
            self.blocks_of[profile_key(profiles[i])] = self.blocks_of.get(profile_key(profiles[i]), 0) + 1
            self.seq += 1
            self.clock.t += self.block_s
        self.clock.t = end
        return out

    def measure(self, profile: Profile, seconds: float) -> RaceOutcome:
        """``profile`` alone, in blocks (its figures where nothing raced beside it)."""
        out = RaceOutcome(failed=self.prepare([profile]))
        if out.failed:
            return out
        for _ in range(max(1, int(seconds // self.block_s))):
            t = self.clock.t
            eff = {**{m: 1.0 for m in BASE}, **self.effect(profile)}
            vals = {m: BASE[m] * eff[m] * math.exp(self.noise * self.rng.standard_normal()) for m in BASE}
            out.blocks.append(Block(0, self.seq, t, t + self.block_s, 100, vals["p50"], vals["p99"],
                                    vals["throughput"], vals["cpu"]))
            self.seq += 1
            self.clock.t += self.block_s
        return out

    def block_seconds(self, profiles: Sequence[Profile]) -> float:
        return self.block_s

    def runs_per_s(self, profiles: Sequence[Profile]) -> float:
        return 100 / self.block_s  # a block holds 100 runs

    def build_seconds(self) -> float:
        return self.build_s

    def release(self, profiles: Sequence[Profile]) -> None:
        for p in profiles:
            k = profile_key(p)
            self.built.discard(k)
            self.released.append(k)

    def close(self) -> None:
        self.closed = True


def threads_effect(factors: dict[int, float], metric: str = "p50") -> Effect:
    def effect(p: Profile) -> dict[str, float]:
        f = factors.get(p.session.intra_op_num_threads, 1.0)
        return {metric: f, "throughput": 1 / f} if metric in ("p50", "p99") else {metric: f}
    return effect


def run_tuner(effect: Effect = lambda p: {}, *, budget: float = 60.0, cores: int = 4, dims=("threads",),
              objective: str = "p50", max_p99: float | None = None, start: Profile | None = None,
              seed: int = 0, **racer_kw):
    clock = StepClock(0.0)
    racer = FakeRacer(clock, effect, seed=seed, **racer_kw)
    space = Space(start or Profile(), host(cores), CHAIN, list(dims) if dims is not None else None)
    events: list[str] = []
    tuner = Tuner(space, racer, objective=objective, max_p99_ms=max_p99, budget_s=budget, clock=clock,
                  on_event=lambda kind, t: events.append(kind))
    result = tuner.run()
    return result, racer, clock, events


def by_label(result, label: str):
    return next(t for t in result.trials if t.label == label)


# ---- racing -------------------------------------------------------------------------------------------------------


def test_a_clear_winner_is_found_and_verified() -> None:
    result, racer, clock, events = run_tuner(threads_effect({2: 0.7, 1: 1.3}))
    assert result.verdict == BETTER
    assert result.best.session.intra_op_num_threads == 2
    c = result.comparison
    assert c is not None and c.verdict == "faster" and c.ci_high_pct < 0
    assert -40 < c.change_pct < -20
    assert by_label(result, "threads 2").winner
    assert racer.closed
    assert events[0] == "start" and events[-1] == "done" and "verify" in events


def test_within_noise_keeps_the_baseline() -> None:
    result, *_ = run_tuner(lambda p: {}, dims=("threads", "spinning"))
    assert result.verdict == KEEP
    assert result.text.startswith("no detectable gain: keep the baseline")
    assert profile_key(result.best) == profile_key(Profile())
    assert not any(t.winner for t in result.trials)
    d = result.as_dict()
    assert d["best"]["verdict"] == KEEP and d["best"]["changes"] == []


def test_a_small_gain_inside_the_margin_is_not_claimed() -> None:
    result, *_ = run_tuner(threads_effect({2: 0.99}), noise=0.02)
    assert result.verdict == KEEP


def test_a_losing_candidate_is_dropped_early() -> None:
    result, racer, *_ = run_tuner(threads_effect({1: 1.6, 2: 0.8, 4: 0.97}), budget=90)
    loser = by_label(result, "threads 1")
    assert loser.status == "dropped" and loser.reason.startswith("significantly worse")
    assert loser.rungs == 0
    winner = by_label(result, "threads 2")
    assert racer.blocks_of[profile_key(loser.profile)] < racer.blocks_of[profile_key(winner.profile)] / 2


def test_successive_halving_drops_the_back_half() -> None:
    # Eight candidates, none far off: after the first rung the half behind by estimate goes.
    factors = {0: 1.0, 1: 0.97, 2: 0.90, 4: 0.95, 8: 0.985}
    space_dims = ("threads", "spinning")
    result, *_ = run_tuner(threads_effect(factors), cores=8, dims=space_dims, budget=120, noise=0.05)
    halved = [t for t in result.trials if t.reason.startswith("halved")]
    assert halved
    assert result.best.session.intra_op_num_threads == 2


def test_failed_candidates_are_never_best() -> None:
    def fail(p: Profile) -> str:
        return "InvalidArgument: bad thing" if p.session.intra_op_num_threads == 2 else ""

    # eight cores: four threads is a count of its own, not what ORT's default resolves to
    result, racer, *_ = run_tuner(threads_effect({2: 0.5, 4: 0.8}), fail_build=fail, cores=8)
    failed = [t for t in result.trials if t.status == "failed"]
    assert [t.label for t in failed] == ["threads 2"] and "InvalidArgument" in failed[0].reason
    assert result.best.session.intra_op_num_threads == 4
    assert all(t.comparison is None for t in failed)


def test_a_run_failure_is_recorded_and_never_ranked() -> None:
    def fail(p: Profile) -> str:
        return "Run() failed: boom" if p.session.intra_op_num_threads == 2 else ""

    result, *_ = run_tuner(threads_effect({2: 0.5}), fail_run=fail)
    t = by_label(result, "threads 2")
    assert t.status == "failed" and "boom" in t.reason and not t.winner
    assert result.best.session.intra_op_num_threads != 2
    assert json.loads(result.to_json())["trials"]


def test_the_start_profile_failing_is_a_runtime_failure() -> None:
    with pytest.raises(RuntimeFailure, match="start profile failed"):
        run_tuner(fail_build=lambda p: "no" if p.session.intra_op_num_threads == 0 else "")


@pytest.mark.slow
@pytest.mark.parametrize("budget", [5.0, 12.0, 60.0, 300.0])
def test_the_budget_is_kept(budget: float) -> None:
    result, racer, clock, _ = run_tuner(threads_effect({2: 0.8, 4: 0.9}), budget=budget, cores=8,
                                        dims=None, build_s=0.4)
    assert clock.t <= budget * 1.1
    assert result.elapsed_s <= budget * 1.1
    if budget >= 60:
        assert clock.t >= budget * 0.5  # and it is used
        assert result.trials


def test_a_short_budget_lists_what_it_left_out() -> None:
    result, *_ = run_tuner(threads_effect({}), budget=6, cores=8, dims=None)
    assert result.not_tried
    # not even one candidate gets a first rung in 6 s: each says what a rung needs at the model's pace, and the
    # verdict says nothing was measured (never "no detectable gain")
    assert all(why.startswith("not raced: a rung needs ~") and "runs/s" in why for _, why in result.not_tried)
    assert result.verdict == NOT_MEASURED and "no detectable gain" not in result.text
    assert result.baseline_figures.blocks > 0  # measured alone: its figures are always there
    assert f"give --budget {result.needs['budget_s']:.0f}" in result.text and result.needs["budget_s"] > 6
    d = result.as_dict()
    assert d["not_tried"][0]["reason"].startswith("not raced: a rung needs ~")
    assert d["measured"] is False and d["needs"]["budget_s"] == result.needs["budget_s"]


@pytest.mark.slow
def test_drift_does_not_fake_a_gain() -> None:
    # A strong drift (±40 %) over the run and no effect: the paired blocks still find nothing.
    for seed in range(3):
        result, *_ = run_tuner(lambda p: {}, drift=0.4, noise=0.05, seed=seed, dims=("threads", "spinning"))
        assert result.verdict == KEEP


def test_cpu_objective_for_a_paced_caller_prefers_spinning_off() -> None:
    def effect(p: Profile) -> dict[str, float]:
        if p.session.allow_spinning is False:
            return {"cpu": 0.2, "p50": 1.03}
        return {}

    start = profile_mod.merge(Profile(), **{"workload.rate_hz": 50.0})
    result, *_ = run_tuner(effect, objective="cpu", dims=("threads", "spinning"), start=start)
    assert result.verdict == BETTER
    assert result.best.session.allow_spinning is False
    assert result.comparison is not None and result.comparison.ci_high_pct < -50


def test_max_p99_constraint() -> None:
    # Spinning off: far less CPU, but p99 above the 6 ms limit. One thread: less CPU, p99 within it (4.4 ms with
    # the fake host's drift of up to +20 %).
    def effect(p: Profile) -> dict[str, float]:
        if p.session.allow_spinning is False:
            return {"cpu": 0.3, "p99": 3.0}
        if p.session.intra_op_num_threads == 1:
            return {"cpu": 0.7, "p99": 1.1}
        return {}

    result, *_ = run_tuner(effect, objective="cpu", max_p99=6.0, dims=("threads", "spinning"))
    assert result.best.session.allow_spinning is not False
    assert result.best.session.intra_op_num_threads == 1
    off = [t for t in result.trials if t.profile.session.allow_spinning is False]
    assert off and all(not t.winner for t in off)
    assert any(t.reason.startswith("p99 above the limit") for t in off)


def test_max_p99_makes_a_violating_baseline_lose() -> None:
    def effect(p: Profile) -> dict[str, float]:
        return {"p99": 0.5, "cpu": 1.05} if p.session.intra_op_num_threads == 1 else {}

    result, *_ = run_tuner(effect, objective="cpu", max_p99=3.0)
    assert result.verdict == BETTER
    assert result.best.session.intra_op_num_threads == 1
    assert "meets the 3 ms limit" in result.text


def test_stop_ends_early_with_a_result() -> None:
    clock = StepClock(0.0)
    racer = FakeRacer(clock, threads_effect({2: 0.7}))
    stop = threading.Event()
    space = Space(Profile(), host(4), CHAIN, ["threads", "spinning"])

    def on_event(kind: str, t: Tuner) -> None:
        if kind == "rung":
            stop.set()

    result = Tuner(space, racer, budget_s=60, clock=clock, on_event=on_event, stop=stop).run()
    assert clock.t < 40
    assert result.stopped and result.as_dict()["stopped"] is True
    # Stopped before the verification: nothing is claimed, and what was leading is named.
    assert result.verdict == KEEP
    assert result.text.startswith("stopped before the best candidate (threads 2") and "was verified" in result.text
    assert result.candidate is not None and result.candidate.session.intra_op_num_threads == 2
    assert not any(t.winner for t in result.trials)  # a leader, never a winner: nothing was verified


@pytest.mark.integration
def test_ctrl_c_prints_the_result_so_far_and_exits_130(matmul_model, tmp_path) -> None:
    import subprocess
    import sys

    from tests.test_bench import ctrl_c_once

    save_path = tmp_path / "best.toml"
    proc = subprocess.Popen([sys.executable, "-m", "ortop", "tune", matmul_model, "--budget", "60", "--space",
                             "threads", "--json", "--save", str(save_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code, out, err = ctrl_c_once(proc, lambda line: "racing" in line, 30)  # progress lines, until the race begins
    assert code == 130, err
    d = json.loads(out)
    assert d["stopped"] is True and d["elapsed_s"] < 30
    assert d["best"]["verdict"] == KEEP
    assert "stopping: the result so far follows" in err
    assert "stopped by the user" in save_path.read_text()
    profile_mod.load(save_path)


def test_candidates_left_unbuilt_by_a_stop_are_not_failures() -> None:
    # A stop (s, esc, q in the TUI) during a stage's builds: the racer leaves the rest unbuilt, and they are listed
    # as not raced, never as failed candidates.
    clock = StepClock(0.0)
    stop = threading.Event()

    def fail_build(p: Profile) -> str:
        if p.session.intra_op_num_threads == 1:
            stop.set()
            return STOPPED
        return ""

    racer = FakeRacer(clock, threads_effect({2: 0.7}), fail_build=fail_build)
    space = Space(Profile(), host(4), CHAIN, ["threads"])
    result = Tuner(space, racer, budget_s=60, clock=clock, stop=stop).run()
    assert result.stopped and not any(t.status == "failed" for t in result.trials)
    stopped = [t for t in result.trials if t.reason == "not raced: the search was stopped"]
    assert stopped and all(t.status == "dropped" for t in stopped)


def test_a_stop_before_the_baseline_is_built_says_so() -> None:
    clock = StepClock(0.0)
    racer = FakeRacer(clock, fail_build=lambda p: STOPPED)
    space = Space(Profile(), host(4), CHAIN, ["threads"])
    with pytest.raises(RuntimeFailure, match="stopped before the start profile was built"):
        Tuner(space, racer, budget_s=60, clock=clock).run()


@pytest.mark.integration
def test_worker_racer_builds_nothing_once_stopped(matmul_model) -> None:
    from ortop.engine.answers.racer import WorkerRacer

    stop = threading.Event()
    stop.set()
    racer = WorkerRacer(matmul_model, stop=stop)
    try:
        a = Profile(model=matmul_model)
        b = profile_mod.merge(a, **{"session.intra_op_num_threads": 1})
        assert racer.prepare([a, b]) == {0: STOPPED, 1: STOPPED}
    finally:
        racer.close()


def test_losers_are_released() -> None:
    result, racer, *_ = run_tuner(threads_effect({2: 0.7, 1: 1.5}))
    assert profile_key(by_label(result, "threads 1").profile) in racer.released


def test_figures_from_blocks() -> None:
    blocks = [Block(0, i, i * 0.2, i * 0.2 + 0.2, 100, 1.0 + i, 2.0 + i, 500.0, 2.0) for i in range(3)]
    f = figures(blocks)
    assert f.p50_ms == 2.0 and f.p99_ms == 3.0 and f.runs == 300
    assert f.throughput_per_s == pytest.approx(500.0)
    assert f.cpu_ms_per_run == 2.0
    assert figures([]).blocks == 0 and math.isnan(figures([]).p50_ms)


def test_json_schema() -> None:
    result, *_ = run_tuner(threads_effect({2: 0.7, 1: 1.3}))
    d = json.loads(result.to_json())
    for key in ("p50_ms", "p99_ms", "throughput_per_s", "cpu_ms_per_run", "profile"):
        assert key in d["baseline"] and key in d["best"]
    for key in ("verdict", "change_pct", "ci_low_pct", "ci_high_pct"):
        assert key in d["best"]
    for t in d["trials"]:
        assert t["status"] in ("ok", "failed", "dropped")
        for key in ("profile", "p50_ms", "p99_ms", "throughput_per_s", "cpu_ms_per_run", "reason", "verdict"):
            assert key in t
    assert d["best"]["profile"]["session"]["intra_op_num_threads"] == 2


# ---- the saved profile --------------------------------------------------------------------------------------------


def test_saved_profile_loads_and_validates(tmp_path) -> None:
    import datetime as dt

    result, *_ = run_tuner(threads_effect({2: 0.7}), start=profile_mod.merge(Profile(), **{"workload.rate_hz": 6}))
    h = host(2, quota=1.5)
    header = save_header(result, "/models/m.onnx", h, ["NVIDIA H100 80GB HBM3"],
                         dt.datetime(2025, 1, 2, 3, 4, tzinfo=dt.timezone.utc))
    path = tmp_path / "best.toml"
    write_text(path, result.best.to_toml(header=header), protect=[], what="profile")
    loaded = profile_mod.load(path)
    profile_mod.validate(loaded)
    assert profile_key(replace(loaded, model="")) == profile_key(replace(result.best, model=""))
    text = path.read_text()
    assert text.startswith("# ortop tune result for m.onnx")
    for part in ("Fake CPU", "cgroup quota 1.5 CPUs", "NVIDIA H100", "2025-01-02", "lowest p50 latency",
                 "95 % CI", "paced at 6 Hz"):
        assert part in text


# ---- end to end in a real worker ----------------------------------------------------------------------------------


@pytest.mark.integration
def test_tune_main_end_to_end(matmul_model, capsys, tmp_path) -> None:
    import time

    save_path = tmp_path / "best.toml"
    t = time.monotonic()
    code = tune_main([matmul_model, "--budget", "8", "--space", "threads", "--json", "--save", str(save_path)])
    took = time.monotonic() - t
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert took <= 8 * 1.1 + 1.0  # the budget, and the interpreter's own start is not in this process's clock
    assert d["elapsed_s"] <= 8.8
    assert d["space"] == ["threads"]
    assert d["trials"] and all(t["status"] in ("ok", "failed", "dropped") for t in d["trials"])
    assert d["baseline"]["p50_ms"] is not None
    assert d["best"]["verdict"] in (BETTER, KEEP)
    saved = profile_mod.load(save_path)
    # what `ortop profiles list` shows for it: what it was tuned for, and whether it gained
    assert saved.description.startswith(f"ortop tune on {os.path.basename(matmul_model)}: lowest p50 latency, ")


def test_tune_bad_input_exits_2(tmp_path, capsys, matmul_model) -> None:
    assert tune_main([str(tmp_path / "missing.onnx")]) == 2
    assert capsys.readouterr().err.startswith("ortop: error:")
    assert tune_main([matmul_model, "--budget", "0"]) == 2
    assert "--budget" in capsys.readouterr().err
    assert tune_main([matmul_model, "--space", "threads,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err
    assert tune_main([matmul_model, "--objective", "speed"]) == 2
    assert tune_main([matmul_model, "--save", str(tmp_path / "no" / "dir.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert tune_main([matmul_model, "--save", matmul_model]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing" in err


@pytest.mark.integration
def test_tune_model_failing_at_run_time_exits_1(broadcast_model, capsys) -> None:
    code = tune_main([broadcast_model, "--budget", "5", "--dim", "N=2", "--dim", "M=3", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert "ortop: error:" in err and "start profile failed" in err


def test_tiny_graph_helpers_round_trip(tmp_path) -> None:
    # the helpers used above make loadable models (guards the fixtures this file relies on)
    path = save(model_of([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", "float32", [2])],
                         [_vi("y", "float32", [2])]), tmp_path / "relu.onnx")
    from ortop.model import load_model

    assert load_model(path).num_nodes == 1


@pytest.mark.integration
def test_worker_racer_keeps_sessions_and_reports_failures(matmul_model) -> None:
    from ortop.engine.answers.racer import WorkerRacer
    from ortop.measure.compare import compare

    a = Profile(model=matmul_model)
    b = profile_mod.merge(a, **{"session.intra_op_num_threads": 1})
    bad = profile_mod.merge(a, **{"provider.name": "tensorrt"})
    racer = WorkerRacer(matmul_model, block_s=0.05)
    try:
        failed = racer.prepare([a, b, bad])
        assert list(failed) == [2] and "Tensorrt" in failed[2]
        first = racer.race([a, b], 1.2)
        second = racer.race([b, a], 1.2)  # built once: no second build, blocks numbered on
        assert not first.failed and not second.failed
        assert {x.config for x in first.blocks} == {0, 1}
        assert min(x.seq for x in second.blocks) > max(x.seq for x in first.blocks)
        swapped = [replace(x, config=1 - x.config) for x in second.blocks]
        c = compare(first.blocks + swapped, 0, 1, "p50")
        assert c.pairs >= 4
        again = racer.race([a, bad], 0.5)
        assert list(again.failed) == [1] and not again.blocks
    finally:
        racer.close()


class LosingRacer(FakeRacer):
    """A racer whose worker is lost for good on its second race (every session in it proven by the first)."""

    def race(self, profiles: Sequence[Profile], seconds: float) -> RaceOutcome:
        from ortop.engine.answers.trials import RacerError

        if self.races == 1:
            self.races += 1
            raise RacerError("the worker process died (signal 9)")
        return super().race(profiles, seconds)


def test_a_worker_lost_with_only_proven_sessions_ends_the_search_with_what_it_measured() -> None:
    """The racer loses its worker on the second race, when every session in it has raced once (RacerError): the
    search ends there instead of failing, keeps every trial measured so far, and names the fault."""
    clock = StepClock(0.0)
    racer = LosingRacer(clock, threads_effect({2: 0.7, 1: 1.3}))
    space = Space(Profile(), host(4), CHAIN, ["threads"])
    result = Tuner(space, racer, objective="p50", budget_s=60.0, clock=clock).run()
    assert result.fault == "the worker process died (signal 9)" and result.stopped
    assert result.verdict == KEEP and "a worker was lost (the worker process died (signal 9))" in result.text
    raced = [t for t in result.trials if t.figures.blocks]
    assert raced, [(t.label, t.status) for t in result.trials]  # the first race's figures are kept
    d = result.as_dict()
    assert d["fault"] == result.fault and d["stopped"] is True and len(d["trials"]) == len(result.trials)
    assert racer.races == 2 and racer.closed
