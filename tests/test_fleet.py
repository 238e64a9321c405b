"""``ortop fleet`` on a real local Ray cluster of three nodes of two types (``ray.cluster_utils.Cluster``): every
node's answer shaped like the single-host command's JSON, a per-type answer, no two measurements on one node at once,
a node killed mid-run, and bad input refused in one line before anything starts. The parser and the docs' command
lines need no cluster."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ortop.cli import fleet as F
from ortop.cli.docgen import command_lines
from ortop.cli.main import build_parser
from ortop.fleet import INSTALL, available
from tests.models import make_matmul_model
from tests.poll import wait_for
from tests.test_cli import env, one_error_line, ortop  # noqa: F401  (env is a fixture)

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 12  # each node's search: three nodes share two cores (at 6 s a busy CI saw a session not built in time)
CAPACITY = ["--dim", "batch=16", "--threads", "1", "--slo", "p99=20ms", "--budget", str(BUDGET_S)]

needs_ray = pytest.mark.skipif(not available(), reason="ray is not installed (pip install 'ortop[fleet]')")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return make_matmul_model(tmp_path_factory.mktemp("fleet") / "m.onnx", n=256)


@pytest.fixture(scope="module")
def cluster():
    """Three nodes of one CPU each: two of type small (the head among them), one of type big."""
    if not available():
        pytest.skip("ray is not installed")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"ortop-type:small": 1},
                                                      "include_dashboard": False})
    c.add_node(num_cpus=1, resources={"ortop-type:small": 1})
    big = c.add_node(num_cpus=1, resources={"ortop-type:big": 1})
    c.wait_for_nodes()
    c.big = big  # type: ignore[attr-defined]
    try:
        yield c
    finally:
        c.shutdown()


def fleet(*args: str, env: dict, cluster) -> subprocess.Popen:  # noqa: F811  (env: the caller's fixture)
    return subprocess.Popen([sys.executable, "-m", "ortop.cli", "fleet", *args, "--cluster", cluster.address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finished(p: subprocess.Popen, timeout: float = 150) -> tuple[int, dict, str]:
    out, err = p.communicate(timeout=timeout)
    assert out.strip(), err
    return p.returncode, json.loads(out.strip().splitlines()[-1]), err


# ---- the parser, the words each node is given --------------------------------------------------------------------
def test_the_nodes_get_the_single_host_words_less_the_fleets_own(tmp_path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text("[session]\nintra_op_num_threads = 1\n")
    words = ["m.onnx", "--cluster", "auto", "--slo", "p99=5ms", "--price=a=1", "--per-type", "2", "--json",
             "--profile", str(profile), "--peak", "50", "--report", "r.html", "--budget", "9"]
    kept = F.forwarded(words, "m.onnx")
    assert kept == ["--slo", "p99=5ms", "--profile", str(profile), "--budget", "9"]
    sent, files = F.shipped(kept, "m.onnx")
    assert sent[3].endswith("/0-p.toml") and sent[3].startswith("@ORTOP_FLEET_DIR@")
    assert files == {"0-p.toml": profile.read_bytes()}
    # the headless service run takes the session's words, not capacity's own
    assert F.service_args(["--slo", "p99=5ms", "--threads", "1", "--budget", "9", "--dim", "batch=4"]) == [
        "--threads", "1", "--dim", "batch=4"]


def test_the_fleet_parser_takes_the_single_host_commands_own_flags() -> None:
    args = build_parser().parse_args(["fleet", "capacity", "m.onnx", "--slo", "p99=5ms", "--threads", "1",
                                      "--price", "small=0.5", "--peak", "100", "--per-type", "1"])
    assert args.fleet_command == "capacity" and args.slo == "p99=5ms" and args.price == [("small", 0.5)]
    assert args.fleet_argv[0] == "m.onnx"


@pytest.mark.slow
@pytest.mark.parametrize("extra, said", [(["--peak", "0"], "--peak"), (["--per-type", "0"], "--per-type"),
                                         (["--price", "small"], "--price"), (["--price", "small=-1"], "--price")])
def test_bad_fleet_flags_are_one_line_before_anything_starts(tmp_path, env, extra, said) -> None:  # noqa: F811
    m = make_matmul_model(tmp_path / "m.onnx", n=8)
    r = ortop("fleet", "capacity", m, "--slo", "p99=5ms", "--cluster", "127.0.0.1:1", *extra, env=env)
    assert said in one_error_line(r)


@pytest.mark.slow
def test_a_missing_model_and_an_unreachable_cluster_are_one_line_each(tmp_path, env) -> None:  # noqa: F811
    r = ortop("fleet", "capacity", tmp_path / "none.onnx", "--slo", "p99=5ms", env=env)
    assert "no such model" in one_error_line(r)
    m = make_matmul_model(tmp_path / "m.onnx", n=8)
    t0 = time.monotonic()
    r = ortop("fleet", "capacity", m, "--slo", "p99=5ms", "--cluster", "127.0.0.1:1", env=env, timeout=40)
    assert "cannot reach 127.0.0.1:1" in one_error_line(r)
    assert time.monotonic() - t0 < 30


@pytest.mark.slow
def test_without_ray_fleet_says_how_to_install_it(tmp_path, env) -> None:  # noqa: F811
    """A Python where ``import ray`` finds nothing (a shadowing empty path entry): one line, exit 2."""
    m = make_matmul_model(tmp_path / "m.onnx", n=8)
    shadow = tmp_path / "noray"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import importlib.abc, sys\n"
        "class NoRay(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'ray':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoRay())\n")
    e = {**env, "PYTHONPATH": str(shadow)}
    r = ortop("fleet", "capacity", m, "--slo", "p99=5ms", env=e)
    line = one_error_line(r)
    assert INSTALL in line and "pip install 'ortop[fleet]'" in line
    assert "ray" not in ortop("info", m, env=e).stderr.lower()


def test_a_measurement_asked_to_stop_by_the_fleets_flag_stops_its_command_and_keeps_what_it_printed(tmp_path) -> None:
    """The second way a stop reaches a node (a cancel can be lost at a task's start): once the flag reads set, the
    command gets its ctrl-C — taken by its own handler even when the process that started it ignores ctrl-C — and
    what it prints then is kept; a command left alone runs to its end."""
    from ortop.fleet.tasks import _run

    ready = tmp_path / "measuring"  # the child is in its measuring loop (a signal before that is another matter)
    child = [sys.executable, "-c", "import time, json, pathlib\ntry:\n    pathlib.Path('measuring').touch()\n"
             "    time.sleep(60)\nexcept KeyboardInterrupt:\n"
             "    print(json.dumps({'stopped': True}))\n    raise SystemExit(130)\n"]
    t0 = time.monotonic()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # started from a process that ignores ctrl-C
    try:
        code, out, _, stopped = _run(child, str(tmp_path), ready.exists)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped and code == 130 and json.loads(out) == {"stopped": True}
    assert time.monotonic() - t0 < 20
    code, out, _, stopped = _run([sys.executable, "-c", "print('done')"], str(tmp_path))
    assert (code, out.strip(), stopped) == (0, "done", False)


@pytest.mark.integration
def test_a_cancel_sent_again_and_again_stops_a_measurement_once_and_keeps_what_it_printed(tmp_path, model) -> None:
    """Ray's cancel comes to a task as a ctrl-C of its own process, and the fleet sends it again every couple of
    seconds until the node answers (a first one can be lost as the task starts). A measurement notes each one: the
    command is stopped once, what it prints then is the node's result, and no cancel breaks off the measurement
    halfway, not even one coming as it ends (here one every millisecond until it has returned)."""
    import _thread
    import threading

    from ortop.fleet.tasks import DIR_MARK, measure, sha256

    data = Path(model).read_bytes()
    live = tmp_path / "live.jsonl"  # a line a second once the command measures
    spec = {"sha256": sha256(data), "model_name": "m.onnx", "command": "run",
            "args": ["--dim", "batch=16", "--threads", "1", "--headless", "--duration", "60", "--jsonl", str(live),
                     "--summary", f"{DIR_MARK}/summary.json"]}

    answered = threading.Event()

    def cancels() -> None:
        wait_for(lambda: live.exists() and live.read_text().strip(), 60, "the command's first live line")
        while not answered.is_set():  # as the fleet does until the node answers, every CANCEL_AGAIN_S; here densely
            _thread.interrupt_main()
            time.sleep(0.001)

    before = signal.getsignal(signal.SIGINT)
    sender = threading.Thread(target=cancels, daemon=True)
    t0 = time.monotonic()
    sender.start()
    try:
        got = measure(spec, data, keep_noting=True)  # as the fleet's task: noted after it returns too
    finally:
        answered.set()
        sender.join(timeout=30)
        signal.signal(signal.SIGINT, before)
    assert got["status"] == "interrupted" and got["exit_code"] == 0, got  # a headless run ends on ctrl-C with 0
    assert got["result"] is not None and got["result"]["runs"] > 0, got  # the summary the ctrl-C printed
    assert time.monotonic() - t0 < 45


def test_a_stop_asked_before_the_command_starts_starts_none(tmp_path) -> None:
    """A cancel noted while the model was being written: the command is not started only to be stopped."""
    from ortop.fleet.tasks import _run

    child = [sys.executable, "-c", "import pathlib; pathlib.Path('started').touch()"]
    assert _run(child, str(tmp_path), lambda: True) == (None, "", "", True)
    assert not (tmp_path / "started").exists()


def test_a_cancel_is_noted_only_inside_the_block_unless_kept() -> None:
    import _thread

    from ortop.fleet.tasks import Cancelled

    before = signal.getsignal(signal.SIGINT)
    with Cancelled() as c:
        _thread.interrupt_main()
        wait_for(c.event.is_set, 5, "the cancel noted")
    assert signal.getsignal(signal.SIGINT) is before
    try:
        with Cancelled(restore=False) as kept:
            pass
        _thread.interrupt_main()
        wait_for(kept.event.is_set, 5, "a cancel after the block noted")
    finally:
        signal.signal(signal.SIGINT, before)


@needs_ray
def test_the_stop_flag_is_asked_without_blocking_so_the_node_stays_taken(monkeypatch) -> None:
    """A task blocked in ``ray.get`` gives its node's CPUs back to Ray, and another fleet's measurement starts beside
    it: the flag is asked with a future and its answer read once it has come, never by a blocking get."""
    import concurrent.futures

    import ray

    from ortop.fleet import tasks

    def no_get(*args, **kwargs):
        raise AssertionError("ray.get blocks the task and frees its node's CPUs")

    monkeypatch.setattr(ray, "get", no_get)
    monkeypatch.setattr(tasks, "FLAG_POLL_S", 0.0)
    answers = iter([False, True])
    asked_times = []

    class Answer:
        def future(self):
            asked_times.append(time.monotonic())
            f: concurrent.futures.Future = concurrent.futures.Future()
            f.set_result(next(answers))
            return f

    class Flag:
        class is_set:  # noqa: N801  (an actor method's handle)
            @staticmethod
            def remote():
                return Answer()

    asked = tasks._asked_to_stop(Flag())
    seen = [asked() for _ in range(4)]
    assert seen == [False, False, False, True] and len(asked_times) == 2


def test_every_fleet_line_in_the_docs_parses_with_the_real_parser() -> None:
    text = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    lines = [line for line in command_lines(text) if line.startswith("ortop fleet ")]  # not the name in prose
    assert len(lines) >= 4
    parser = build_parser()
    for line in lines:
        words = [w for w in re.findall(r"'[^']*'|\"[^\"]*\"|\S+", line)[1:]]
        args = parser.parse_args([w.strip("'\"") for w in words])
        assert args.command == "fleet" and args.fleet_command in F.COMMANDS, line


# ---- on a real cluster -------------------------------------------------------------------------------------------
@needs_ray
@pytest.mark.integration
@pytest.mark.alone
def test_capacity_on_three_nodes_never_two_measurements_on_one_node(cluster, model, env) -> None:  # noqa: F811
    """Two fleet runs at once on the same nodes: each node answers both, one after the other; every answer has the
    shape of ``ortop capacity --json`` and a per-type answer comes with it."""
    single = ortop("capacity", model, *CAPACITY[:-1], "2", "--json", env=env)
    shape = set(json.loads(single.stdout))
    a = fleet("capacity", model, *CAPACITY, "--json", "--price", "small=0.2", "--price", "BIG=0.5", env=env,
              cluster=cluster)
    b = fleet("capacity", model, *CAPACITY, "--json", "--per-type", "1", env=env, cluster=cluster)
    (code_a, da, err_a), (code_b, db, err_b) = finished(a), finished(b)
    assert code_a == 0 and da["exit_code"] == 0, err_a
    assert code_b == 0, err_b
    assert len(da["nodes"]) == 3 and len(db["nodes"]) == 2
    assert {n["node"]["type"] for n in db["nodes"]} == {"small", "big"}
    for n in da["nodes"] + db["nodes"]:
        assert n["status"] == "done", n
        assert set(n["result"]) == shape
        assert n["node"]["facts"]["cpu_model"] and n["node"]["type_from"] == "resource"
    types = {t["type"]: t for t in da["types"]}
    assert set(types) == {"small", "big"} and len(types["small"]["nodes"]) == 2
    priced = {(t["type"], p["profile"]) for t in da["types"] for p in t["profiles"] if p["interval"][0]}
    assert {(r["type"], r["profile"]) for r in da["ranking"]} == priced, da["types"]
    costs = [r["usd_per_million"] for r in da["ranking"]]
    assert costs == sorted(costs)
    spans: dict[str, list[tuple[float, float]]] = {}
    for n in da["nodes"] + db["nodes"]:
        spans.setdefault(n["node"]["id"], []).append((n["started_at"], n["ended_at"]))
    assert len(spans) == 3
    for node, times in spans.items():
        times.sort()
        for (_, end), (start, _) in zip(times, times[1:]):
            assert start >= end, (node, times)


@needs_ray
@pytest.mark.integration
@pytest.mark.alone
def test_a_price_for_a_type_no_node_has_is_one_line(cluster, model, env) -> None:  # noqa: F811
    p = fleet("capacity", model, *CAPACITY, "--price", "huge=3", env=env, cluster=cluster)
    out, err = p.communicate(timeout=60)
    line = one_error_line(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert "--price huge=3" in line and "'small'" in line


def wait_measuring(p: subprocess.Popen) -> None:
    """Until the fleet says it started its nodes' measurements (its stderr), or fail if it ended first."""
    assert p.stderr is not None
    line = ""
    while "measuring" not in line:
        line = p.stderr.readline()
        assert line, "the fleet ended before it started measuring"


@needs_ray
@pytest.mark.integration
@pytest.mark.alone
def test_ctrl_c_stops_every_nodes_measurement_and_prints_what_they_gathered(cluster, model, env) -> None:  # noqa: F811
    """ctrl-C a few seconds into 30 s searches: every node's command still measuring is told to stop (as its own
    ctrl-C) and prints what it measured, the fleet prints the three, exit 130, and no measurement goes on on any
    host. A search may close its bracket before its budget: a node whose search had ended before the ctrl-C says
    so ("done", ended before it), and at least one was stopped."""
    args = [a if a != str(BUDGET_S) else "30" for a in CAPACITY]
    p = fleet("capacity", model, *args, "--json", env=env, cluster=cluster)
    wait_measuring(p)
    time.sleep(5)
    sent = time.time()
    p.send_signal(signal.SIGINT)
    code, data, err = finished(p, timeout=120)
    assert code == 130 and data["exit_code"] == 130 and data["fleet"]["stopped"] is True, err
    assert len(data["nodes"]) == 3 and data["lost"] == []
    for n in data["nodes"]:
        assert n["status"] in ("interrupted", "done"), n
        if n["status"] == "done":  # its search had closed its bracket before the ctrl-C
            assert n["ended_at"] <= sent + 0.5 and n["result"]["stopped"] is False, n
            continue
        assert n["result"] is not None and n["result"]["stopped"] is True, n  # what the node gathered, as JSON
        assert n["ended_at"] - n["started_at"] < 25, n  # stopped, not run to its 30 s budget
    assert any(n["status"] == "interrupted" for n in data["nodes"]), data["nodes"]
    time.sleep(2)
    left = subprocess.run(["pgrep", "-f", "ortop-fleet-"], capture_output=True, text=True).stdout.split()
    assert not left, "a measurement went on after ctrl-C"


@needs_ray
@pytest.mark.integration
@pytest.mark.alone
def test_a_provider_a_node_cannot_give_refuses_that_node_in_one_line_and_starts_nothing_there(
        cluster, model, env) -> None:  # noqa: F811
    """``--provider cuda`` on nodes with no GPU: each node refused on its own, one line naming it and why (not one
    refusal for the fleet, and no measurement started on it); none left to measure is the fleet's exit 1."""
    p = fleet("capacity", model, *CAPACITY, "--provider", "cuda", "--json", env=env, cluster=cluster)
    code, data, err = finished(p, timeout=90)
    assert code == 1 and data["exit_code"] == 1, err
    assert [n["status"] for n in data["nodes"]] == ["refused"] * 3
    refused = [ln for ln in err.splitlines() if " refused: --provider cuda: " in ln]
    assert len(refused) == 3 and len({ln.split()[2] for ln in refused}) == 3, err  # one line per node, by its id
    assert all("no GPU" in n["line"] and "\n" not in n["line"] for n in data["nodes"]), data["nodes"]
    assert all("started_at" not in n for n in data["nodes"]), data["nodes"]  # nothing ran there


@needs_ray
@pytest.mark.integration
@pytest.mark.alone
def test_a_node_killed_mid_run_is_named_and_the_others_answer(cluster, model, env) -> None:  # noqa: F811
    """Last in the module: the node removed (its raylet killed) does not come back."""
    args = [a if a != str(BUDGET_S) else "20" for a in CAPACITY]  # the two left must finish beside another test
    p = fleet("capacity", model, *args, "--json", env=env, cluster=cluster)
    wait_measuring(p)
    time.sleep(4)
    big_id = cluster.big.node_id
    cluster.remove_node(cluster.big)
    code, data, err = finished(p)
    assert code == 4 and data["exit_code"] == 4
    by_id = {n["node"]["id"]: n for n in data["nodes"]}
    assert by_id[big_id]["status"] == "lost"
    assert [n["status"] for i, n in by_id.items() if i != big_id] == ["done", "done"]
    assert any(big_id[:12] in line and "big" in line for line in data["lost"])
    time.sleep(2)
    left = subprocess.run(["pgrep", "-f", "ortop-fleet-"], capture_output=True, text=True).stdout.split()
    assert not left, "a measurement outlived its node"
