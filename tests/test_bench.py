"""The measuring bench as its clients use it, on real workers and a real model: served is what was served, a
worker's death loses nothing measured, and every configuration is alternated block by block."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import psutil
import pytest

from ortop.engine.live import headless
from tests.poll import wait_for
from tests.test_cli import ortop
from tests.test_compare import threads_profiles  # noqa: F401  (a fixture)
from tests.test_traffic import batch_model, env, prof  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


def closed_loop_per_s(model: str) -> float:
    """What the model serves in a closed loop on one thread, measured now, on this host as it is."""
    closed = headless.measure(model, prof(model, workload__dims={"batch": 64}), duration_s=1.5)
    return float(closed.summary["throughput_per_s"])


def test_compare_at_twice_what_the_model_serves_says_the_rate_was_not_kept(batch_model, threads_profiles, env):  # noqa: F811
    """Paced at 2× the closed-loop throughput the queue drains past every block's window: served is over the time
    the requests took (about what the model serves, well under the offered rate), and every verdict is marked."""
    ceiling = closed_loop_per_s(batch_model)
    rate = 2 * ceiling
    a, b = threads_profiles
    r = ortop("compare", batch_model, a, b, "--budget", 4, "--json", "--threads", 1, "--dim", "batch=64",
              "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for c in d["configs"]:
        assert c["offered_per_s"] == pytest.approx(rate, rel=0.25), c
        assert c["rate_kept"] is False, c
        # served is what was served: the model's own pace (two configurations share two cores with whatever else
        # runs), never the offered rate
        assert c["throughput_per_s"] < 0.8 * c["offered_per_s"], (c, ceiling)
        assert c["throughput_per_s"] > 0.25 * ceiling, (c, ceiling)
        assert c["blocks_ending_queued"] > 0, c
    assert all(comp["paced_answer"] is False and comp["note"].startswith("not a paced answer")
               for comp in d["comparisons"]), d["comparisons"]
    said = [w for w in d["warnings"] if "the rate was not kept" in w]
    assert len(said) == 2 and all("not a paced answer" in w for w in said), d["warnings"]
    text = ortop("compare", batch_model, a, b, "--budget", 2, "--threads", 1, "--dim", "batch=64",
                 "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "← rate not kept" in text.stdout and "[not a paced answer" in text.stdout, text.stdout


def test_tune_at_three_times_what_the_model_serves_marks_every_raced_candidate(batch_model, env):  # noqa: F811
    ceiling = closed_loop_per_s(batch_model)
    rate = 3 * ceiling  # a ceiling read in a stall is low: at twice it, a faster candidate once kept the rate
    r = ortop("tune", batch_model, "--dim", "batch=64", "--rate", f"{rate:.0f}", "--arrival",
              "poisson", "--budget", 12, "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    raced = [t for t in d["trials"] if t["blocks"]]
    assert raced, d["trials"]
    for t in raced:
        # served over the time its requests took: about what the model serves, never the offered rate
        assert t["throughput_per_s"] < 0.8 * rate, (t, ceiling)
        assert t["rate_kept"] is False and t["paced_answer"] is False and t["note"].startswith("not a paced"), t
    for t in raced:
        assert any(w.startswith(f"{t['label']}: rate not kept") and "not a paced answer" in w
                   for w in d["warnings"]), (t["label"], d["warnings"])


@pytest.fixture
def env_profiles(threads_profiles):  # noqa: F811
    """Two profiles in two restart groups: the second sets an environment knob, so it needs a worker of its own."""
    one = threads_profiles[0]
    own = one.parent / "own-env.toml"
    own.write_text(one.read_text() + "\n[env]\nOMP_WAIT_POLICY = \"PASSIVE\"\n")
    return one, own


def assert_rounds_alternate(blocks: list[dict], key: str) -> int:
    """Blocks of one round (the same arrivals) run back to back, one per configuration, whichever worker holds
    it; the number of rounds both configurations ran in."""
    in_time = sorted(range(len(blocks)), key=lambda k: blocks[k]["t_start_s"])
    place = {k: n for n, k in enumerate(in_time)}
    rounds: dict[tuple, list[int]] = {}
    for k, b in enumerate(blocks):
        rounds.setdefault((b.get("rate_per_s"), b["round"]), []).append(k)
    both = [ks for ks in rounds.values() if len({blocks[k][key] for k in ks}) == 2]
    for ks in both:
        assert len(ks) == 2 and abs(place[ks[0]] - place[ks[1]]) == 1, [blocks[k] for k in ks]
    return len(both)


@pytest.mark.sharing  # reads the block order: measures no time
def test_capacity_alternates_profiles_of_different_restart_groups(batch_model, env_profiles, env):  # noqa: F811
    a, b = env_profiles
    r = ortop("capacity", batch_model, "--profile", a, "--profile", b, "--dim", "batch=64", "--slo", "p99=1s",
              "--budget", 12, "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    blocks = d["blocks"]
    assert {x["profile"] for x in blocks} == {0, 1}
    # the closed-loop ceilings and every point: each round's two blocks are neighbours in time
    assert assert_rounds_alternate(blocks, "profile") >= 2, blocks
    order = [x["profile"] for x in sorted(blocks, key=lambda x: x["t_start_s"])]
    assert sorted(order[:2]) == sorted(order[2:4]) == [0, 1], order  # the ceilings: a round each, not A A B B
    assert d["restarts"] == [] and d["fault"] is None


@pytest.mark.sharing  # reads the block order: measures no time
def test_compare_alternates_profiles_of_different_restart_groups(batch_model, env_profiles, env):  # noqa: F811
    a, b = env_profiles
    r = ortop("compare", batch_model, a, b, "--dim", "batch=64", "--budget", 4, "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["workers"] == 2
    order = d["block_order"]
    assert len(order) == d["blocks"] >= 4
    # in time as in the schedule: A B B A …, each pair of neighbours one block of each
    assert [x["seq"] for x in order] == sorted(x["seq"] for x in order)
    configs = [x["config"] for x in order]
    assert all(configs[k] != configs[k + 1] for k in range(0, len(configs) - 1, 2)), configs


# ---- a worker's death loses nothing measured ---------------------------------------------------------------------
def start_ortop(*args, env) -> subprocess.Popen:  # noqa: F811
    return subprocess.Popen([sys.executable, "-m", "ortop.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def ctrl_c_once(proc: subprocess.Popen, begun: Callable[[str], bool],
                timeout_s: float = 60.0) -> tuple[int, str, str]:
    """Read the command's stderr until a line for which ``begun(line)`` holds, then ctrl-C it once and give it
    ``timeout_s`` to end; its exit code, stdout and whole stderr. The stderr ends when the command does (its budget
    bounds the wait); a check that fails before the ctrl-C leaves no command running."""
    seen: list[str] = []
    try:
        for line in proc.stderr:  # type: ignore[union-attr]
            seen.append(line)
            if begun(line):
                break
        assert seen and begun(seen[-1]), "".join(seen)
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, "".join(seen) + rest


def worker_of(proc: subprocess.Popen, besides: int | None = None, timeout_s: float = 60.0) -> psutil.Process:
    """The command's worker process (a spawned child), other than ``besides``: waited for."""
    parent = psutil.Process(proc.pid)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        for child in parent.children():
            try:
                if child.pid != besides and "spawn_main" in " ".join(child.cmdline()):
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    raise AssertionError("no worker process appeared")


def worker_cpu_s(w: psutil.Process) -> float:
    """The worker's CPU time (s), every thread: importing onnxruntime and building the sessions (~0.5 s here) too."""
    return sum(w.cpu_times()[:2])


def runs_cpu_s(w: psutil.Process) -> float:
    """The CPU time (s) of the worker's threads but its main one (which imports onnxruntime, builds the sessions and
    forwards rows): its callers' and ORT's pools', the sessions' runs. Past a little of it the worker is measuring,
    whatever its start-up cost."""
    return sum(t.user_time + t.system_time for t in w.threads() if t.id != w.pid)


def kill_once_measuring(proc: subprocess.Popen, cpu_s: float = 5.0, timeout_s: float = 120.0,
                        clock: Callable[[psutil.Process], float] = worker_cpu_s) -> int:
    """SIGKILL the command's worker once it has run long enough to have measured blocks: ``clock(worker)`` (its CPU
    time, :func:`worker_cpu_s`, or its sessions' runs alone, :func:`runs_cpu_s`) at ``cpu_s`` (the evidence waited
    for, not a wall-clock guess), while the command still runs, within ``timeout_s`` (a worker that stalls fails
    the test instead of hanging it; a command that ends first fails it with its output: there was nothing to
    kill)."""
    w = worker_of(proc)

    def killed_when_measured() -> int | None:
        nonlocal w
        assert proc.poll() is None, proc.communicate()
        try:
            if clock(w) >= cpu_s:
                w.send_signal(signal.SIGKILL)
                return w.pid
        except psutil.NoSuchProcess:  # a spawned child that ended (not the worker): look again
            w = worker_of(proc, besides=w.pid)
        return None

    return wait_for(killed_when_measured, timeout_s, f"the worker to spend {cpu_s:g} s of CPU measuring",
                    interval=0.05)


def killed(proc: subprocess.Popen, *, again: bool = False, cpu_s: float = 5.0,
           clock: Callable[[psutil.Process], float] = worker_cpu_s) -> tuple[int, dict, str]:
    """Kill the command's worker once it has measured blocks (``cpu_s`` and ``clock``: see
    :func:`kill_once_measuring`; and, ``again``, the restarted one as soon as it appears: before it can finish a
    block); the command's exit code, its JSON and its stderr."""
    try:
        first = kill_once_measuring(proc, cpu_s, clock=clock)
        if again:
            worker_of(proc, besides=first).send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert out, err
    return proc.returncode, json.loads(out), err


@pytest.mark.sharing  # a fault, its restart and exit code: no time judged
def test_capacity_goes_on_after_its_worker_is_killed_and_prints_everything_if_it_dies_again(batch_model, env):  # noqa: F811
    proc = start_ortop("capacity", batch_model, "--dim", "batch=64", "--threads", 1, "--slo", "p99=1s",
                       "--budget", 40, "--json", env=env)
    # the restarted worker is killed as soon as it appears: it cannot finish a block, so the search ends. The first
    # kill comes once the sessions' runs used 2 s of CPU while the search still runs: past the closed-loop ceiling
    # (two rounds of 0.7 s: at most 1.4 s of it), well short of a whole search (5-6 s of it here); at 3 s of the
    # whole worker's CPU (start-up included) a CI run once found the search over
    code, d, err = killed(proc, again=True, cpu_s=2.0, clock=runs_cpu_s)
    assert code == 4, err
    assert d["exit_code"] == 4 and d["stopped"] is True
    assert len(d["restarts"]) == 1 and "signal 9" in d["restarts"][0], d["restarts"]
    assert "signal 9" in d["fault"], d["fault"]
    assert any(d["fault"] == w for w in d["warnings"])
    # what was measured before the deaths is all there: the closed-loop ceiling, its blocks
    (prof,) = d["profiles"]
    assert prof["ceiling_per_s"] > 0 and len(d["blocks"]) >= 2, d


@pytest.mark.sharing  # a fault, its restart and exit code: no time judged
def test_capacity_restarts_a_killed_worker_and_finishes_its_search(batch_model, env):  # noqa: F811
    proc = start_ortop("capacity", batch_model, "--dim", "batch=64", "--threads", 1, "--slo", "p99=1s",
                       "--budget", 40, "--json", env=env)
    # killed once its callers have run the session for half a second of CPU: the closed loop has measured, and the
    # search is far from done (a whole one took 5–6 s of the callers' CPU here, alone or beside a busy loop),
    # whatever share of a core the worker gets. 3 s of the whole worker's CPU (its start-up included) sometimes
    # came after the search had ended, with both cores busy
    code, d, err = killed(proc, cpu_s=0.5, clock=runs_cpu_s)
    assert code == 0, err
    assert d["fault"] is None and d["exit_code"] == 0
    assert len(d["restarts"]) == 1 and "signal 9" in d["restarts"][0] and "restarted" in d["restarts"][0]
    (prof,) = d["profiles"]
    assert prof["ceiling_per_s"] > 0 and prof["points"], prof  # the search went on after the restart


@pytest.mark.sharing  # a fault, its restart and exit code: no time judged
def test_compare_restarts_a_killed_worker_and_goes_on(batch_model, threads_profiles, env):  # noqa: F811
    a, b = threads_profiles
    proc = start_ortop("compare", batch_model, a, b, "--threads", 1, "--dim", "batch=64", "--budget", 10, "--json",
                       env=env)
    code, d, err = killed(proc, cpu_s=3.5)
    assert code == 0, err
    assert d["fault"] is None and d["exit_code"] == 0 and d["stopped"] is False
    assert len(d["restarts"]) == 1 and "signal 9" in d["restarts"][0] and "restarted" in d["restarts"][0]
    assert all(c["runs"] > 0 and c["blocks"] >= 4 for c in d["configs"]), d["configs"]
    assert d["comparisons"] and d["comparisons"][0]["pairs"] >= 4


@pytest.mark.sharing  # a fault, its restart and exit code: no time judged
def test_compare_across_workers_restarts_a_killed_one_and_keeps_every_block_in_order(  # noqa: F811
        batch_model, env_profiles, env):  # noqa: F811
    """Two restart groups, two workers alternated block by block by the parent: one killed mid-alternation is
    restarted, the block it lost runs again, and every place in the schedule is measured once, in order."""
    a, b = env_profiles
    proc = start_ortop("compare", batch_model, a, b, "--dim", "batch=64", "--budget", 16, "--json", env=env)
    # each worker runs every other block, and the sequential looks may settle within seconds: killed early
    code, d, err = killed(proc, cpu_s=1.5)
    assert code == 0, err
    assert d["workers"] == 2 and d["fault"] is None and d["stopped"] is False
    assert len(d["restarts"]) == 1 and "signal 9" in d["restarts"][0] and "restarted" in d["restarts"][0]
    order = d["block_order"]
    assert [x["seq"] for x in order] == list(range(len(order))) and len(order) >= 8, order
    configs = [x["config"] for x in order]
    assert all(configs[k] != configs[k + 1] for k in range(0, len(configs) - 1, 2)), configs


@pytest.mark.sharing  # a fault, its restart and exit code: no time judged
def test_compare_prints_everything_measured_when_its_worker_dies_again(batch_model, threads_profiles, env):  # noqa: F811
    a, b = threads_profiles
    proc = start_ortop("compare", batch_model, a, b, "--threads", 1, "--dim", "batch=64", "--budget", 30, "--json",
                       env=env)
    code, d, err = killed(proc, again=True, cpu_s=3.5)
    assert code == 4, err
    assert d["exit_code"] == 4 and d["stopped"] is True
    assert "signal 9" in d["fault"] and len(d["restarts"]) == 1, d
    # the blocks measured before the first death are all there, with their figures
    assert d["blocks"] >= 2 and all(c["runs"] > 0 for c in d["configs"]), d
    assert d["elapsed_s"] < 30


# ---- one definition of a configuration's percentiles ----------------------------------------------------------------
def test_tune_and_compare_report_the_same_percentiles_for_the_same_blocks(batch_model):  # noqa: F811
    from ortop.engine.answers.trials import figures
    from ortop.engine.bench.ab import compare_profiles

    base = prof(batch_model, workload__dims={"batch": 16})
    result = compare_profiles(batch_model, [base, prof(batch_model, workload__dims={"batch": 64})], budget_s=2.0)
    for c in result.configs:
        mine = [b for b in result.blocks if b.config == c.index]
        runs = np.concatenate([b.latency_ms for b in mine])
        tuned = figures(mine)
        assert c.runs == tuned.runs == runs.size > 0
        # pooled over the blocks' runs, as tune's figures take them, never the median of the blocks' own p50
        assert c.p50_ms == tuned.p50_ms == pytest.approx(float(np.percentile(runs, 50)), rel=1e-12)
        assert c.p99_ms == tuned.p99_ms == pytest.approx(float(np.percentile(runs, 99)), rel=1e-12)


def test_a_configurations_percentiles_pool_its_blocks_runs():
    from ortop.measure.compare import block_from_runs, pooled

    short = block_from_runs(0, 0, np.array([1.0, 1.0, 1.0]), t_start=0.0, t_end=0.1, cpu_ms=1.0)
    long = block_from_runs(0, 2, np.full(97, 5.0), t_start=0.2, t_end=1.2, cpu_ms=1.0)
    third = block_from_runs(0, 4, np.array([2.0]), t_start=1.3, t_end=1.4, cpu_ms=1.0)
    # the blocks' p50 are 1, 5 and 2: their median (2) says nothing of the 97 runs at 5 ms
    assert pooled([short, long, third]).p50 == 5.0 and pooled([short, long, third]).runs == 101


def test_a_capacity_point_at_twice_the_ceiling_reports_what_it_served(batch_model, tmp_path,  # noqa: F811
                                                                        monkeypatch):
    """A point offered twice the closed-loop ceiling: its queue drains past every block, so its served rate (over
    the time its requests took) is about the ceiling, and the search says the rate was not kept."""
    from ortop.engine.answers.capacity import Slo
    from ortop.engine.answers.capacity_search import CapacitySearch

    for xdg in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(xdg, str(tmp_path / xdg))
    search = CapacitySearch(batch_model, [prof(batch_model, workload__dims={"batch": 64})], Slo("p99", 10_000.0),
                            budget_s=60, point_max_s=3)
    search._budget.start()
    try:
        search._build()
        search._ceilings()
        (s,) = search.searches
        assert s.ceiling_per_s > 0
        rate = 2 * s.ceiling_per_s
        search._point(rate, [s])
        point = s.points[rate]
        assert point.served_per_s() < 0.8 * rate, (point.served_per_s(), rate)
        assert point.served_per_s() > 0.25 * s.ceiling_per_s
        assert any(w.startswith(f"{s.name} at {rate:.0f}/s") and "not a paced answer" in w for w in search.unpaced)
    finally:
        search._pool.close()
