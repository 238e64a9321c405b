"""``ortop ops`` and the probe session behind it and the doctor: the trace parsed into per-node and per-op-type
tables (pure, on synthetic traces), then the real thing in a child process on the demo model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ortop.cli.ops import ops_main
from ortop.config.profile import Profile
from ortop.engine.answers import ops
from ortop.engine.workerproc import run_child
from ortop.model.demo import build_demo
from ortop.runtime.opprof import op_table, parse_trace
from tests.models import make_add_model, make_initializer_input_model


def _node(name: str, op: str, ts: int, dur: int, provider: str = "CPUExecutionProvider") -> dict:
    return {"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "ts": ts, "dur": dur,
            "args": {"op_name": op, "provider": provider}}


def _run(ts: int, dur: int) -> dict:
    return {"cat": "Session", "name": "model_run", "ph": "X", "ts": ts, "dur": dur}


def _trace(runs: int) -> list[dict]:
    """``runs`` runs of conv (30 µs), mm (10 µs) on CPU and gather (60 µs) on CUDA, 1000 µs apart; fences too."""
    events: list[dict] = []
    for i in range(runs):
        t = 1000 * i
        events.append(_run(t, 200))
        events.append(_node("conv", "Conv", t + 1, 30))
        events.append({"cat": "Node", "name": "conv_fence_before", "ph": "X", "ts": t + 1, "dur": 5, "args": {}})
        events.append(_node("mm", "MatMul", t + 40, 10))
        events.append(_node("gather", "Gather", t + 60, 60, "CUDAExecutionProvider"))
    return events


def test_parse_trace_leaves_out_the_warmup_runs_and_the_fences() -> None:
    nodes, runs = parse_trace(_trace(5), warmup=2)
    assert runs == 3
    by_name = {n["name"]: n for n in nodes}
    assert set(by_name) == {"conv", "mm", "gather"}
    assert by_name["conv"] == {"name": "conv", "op_type": "Conv", "provider": "CPUExecutionProvider", "calls": 3,
                               "total_us": 90}
    assert by_name["gather"]["provider"] == "CUDAExecutionProvider"
    # a trace without run markers counts every node event
    nodes, runs = parse_trace([e for e in _trace(2) if e["cat"] == "Node"])
    assert runs == 0 and sum(n["calls"] for n in nodes) == 6


def test_op_table_shares_add_up_and_rows_are_by_time() -> None:
    nodes, runs = parse_trace(_trace(4), warmup=1)
    table = op_table(nodes, runs)
    assert table["runs"] == 3
    assert [r["name"] for r in table["nodes"]] == ["gather", "conv", "mm"]
    assert sum(r["share_pct"] for r in table["nodes"]) == pytest.approx(100.0, abs=0.01)
    assert sum(r["share_pct"] for r in table["op_types"]) == pytest.approx(100.0, abs=0.01)
    conv = next(r for r in table["op_types"] if r["op_type"] == "Conv")
    assert conv == {"op_type": "Conv", "provider": "CPUExecutionProvider", "calls": 3, "total_ms": 0.09,
                    "share_pct": 30.0, "mean_ms": 0.03, "nodes": 1}
    assert table["kernel_ms_per_run"] == pytest.approx(0.1)
    assert op_table([], 0) == {"runs": 0, "kernel_ms_per_run": 0.0, "nodes": [], "op_types": []}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> str:
    return str(build_demo(tmp_path_factory.mktemp("demo") / "demo.onnx"))


@pytest.mark.integration
def test_ops_on_the_demo_model_lists_conv_and_matmul(demo: str, capsys) -> None:
    assert ops_main([demo, "--runs", "5", "--warmup", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 5 and out["warmup"] == 2
    assert out["providers_active"] == ["CPUExecutionProvider"]
    types = {r["op_type"] for r in out["op_types"]}
    assert {"Conv", "MatMul"} <= types
    assert sum(r["share_pct"] for r in out["op_types"]) == pytest.approx(100.0, abs=0.05)
    assert sum(r["share_pct"] for r in out["nodes"]) == pytest.approx(100.0, abs=0.05)
    matmuls = {r["name"] for r in out["nodes"] if r["op_type"] == "MatMul"}
    assert matmuls == {"fc1", "fc2", "fc3"}  # the demo's three MatMul nodes, by name
    assert all(r["calls"] == 5 for r in out["nodes"] if r["op_type"] == "MatMul")
    assert all(r["provider"] == "CPUExecutionProvider" for r in out["nodes"])

    assert ops_main([demo, "--runs", "3", "--warmup", "1", "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "Conv" in text and "total ms" in text and "more (" in text  # --top cut the tables


@pytest.mark.integration
def test_the_probe_keeps_orts_log_off_the_terminal_and_records_placement(tmp_path: Path, capfd) -> None:
    path = make_initializer_input_model(tmp_path / "init_input.onnx")
    report = ops.probe(path, Profile(), runs=1)
    assert report["stage"] == "done" and "error" not in report
    assert any("appears in graph inputs" in line for line in report["log"])  # ORT's warning, caught in the child
    assert "appears in graph inputs" not in capfd.readouterr().err
    assert report["placement"] == [{"name": "", "op_type": "Add", "domain": "", "ep": "CPUExecutionProvider"}]
    assert report["providers_active"] == ["CPUExecutionProvider"]


@pytest.mark.integration
def test_a_session_that_fails_to_run_is_exit_1_and_bad_input_exit_2(tmp_path: Path, capsys) -> None:
    broadcast = make_add_model(tmp_path / "add.onnx", ["N"], ["M"])
    assert ops_main([broadcast, "--runs", "1", "--dim", "N=2", "--dim", "M=3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ortop: error: could not run the model:") and err.count("\n") == 1
    assert ops_main([str(tmp_path / "missing.onnx")]) == 2
    assert ops_main([broadcast, "--runs", "0"]) == 2
    assert ops_main([broadcast, "--dim", "N"]) == 2
    assert ops_main([broadcast, "--no-such-flag"]) == 2
    assert all(line.startswith("ortop: error: ") for line in capsys.readouterr().err.splitlines())


def _dies(conn, request) -> None:
    os._exit(3)


def test_a_child_that_dies_without_a_word_is_reported() -> None:
    result, why = run_child(_dies, None, {}, "ortop-test-dies", timeout_s=30, stop=None)
    assert result is None and why == "died (exit code 3)"
