"""bench/gpu_check.py where there is no GPU: it says so in one line and exits 0; its IO-binding and CUDA-graph checks,
run against the fake GPU (tests/fakes/cuda_graph.py), pass on ortop's paths and fail when the outputs are wrong."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ortop.runtime import child
from tests.fakes import cuda_graph as fake

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_check.py"


def load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_cuda_it_says_so_in_one_line_and_exits_0():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    if out.returncode == 0 and "nothing to check" not in out.stdout:
        pytest.skip("CUDA is active on this host: the checks ran")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    (line,) = out.stdout.splitlines()
    assert line.startswith("gpu_check: ") and line.endswith("; nothing to check")


def test_a_missing_model_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--model", str(tmp_path / "no.onnx")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [f"gpu_check: --model {tmp_path / 'no.onnx'}: no such file"]


@pytest.fixture
def checks(monkeypatch, tmp_path):
    monkeypatch.setattr(child, "_preload", {"done": None})
    gpu = fake.install(monkeypatch)
    gpu.capture_s = 0.0
    mod = load()
    return mod, mod.Checks(argparse.Namespace(model=None, device_id=0, runs=20), tmp_path), gpu


@pytest.mark.slow
@pytest.mark.parametrize("model", ["conv", "demo"])
def test_the_graph_and_binding_checks_pass_on_ortops_paths(checks, model):
    mod, c, gpu = checks
    path = c.models[model]
    status, detail = c.io_binding(model, path)
    assert status == "PASS", detail
    status, detail = c.cuda_graph(model, path)
    assert status == "PASS", detail
    assert "first run (capture)" in detail and "new inputs read in place" in detail
    assert len(gpu.of("capture")) == 1  # a plain run() of the graph session would have raised


def test_the_graph_check_fails_when_a_replay_ignores_new_inputs(checks, monkeypatch):
    """A replay that kept the captured input (what a rebound input does) is caught by the in-place step."""
    mod, c, gpu = checks
    compute = fake.FakeGraphSession._compute
    frozen: dict = {}

    def stale(self, b):
        if self.graphs:
            frozen.setdefault(id(self), {k: v.data.copy() for k, v in b.inputs.items()})
            saved = {k: v.data.copy() for k, v in b.inputs.items()}
            for k, v in b.inputs.items():
                v.data[...] = frozen[id(self)][k]
            compute(self, b)
            for k, v in b.inputs.items():
                v.data[...] = saved[k]
        else:
            compute(self, b)

    monkeypatch.setattr(fake.FakeGraphSession, "_compute", stale)
    status, detail = c.cuda_graph("conv", c.conv)
    assert status == "FAIL" and "after a new input in place" in detail
