"""The Python export's IO binding: with enable_cuda_graph it binds once, allocates the outputs up front and refreshes
inputs in place (run for real on the CPU, and against the fake GPU that refuses what ORT refuses); CUDA and
TensorRT profiles preload the CUDA libraries, guarded."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ortop.config import profile as pm
from ortop.export import render
from tests.fakes import cuda_graph as fake

REPO = Path(__file__).resolve().parents[1]
GRAPH = REPO / "profiles" / "cuda-graph.toml"


@pytest.fixture
def quiet_preload(monkeypatch):
    """preload_dlls() as a recorder: the export's calls counted, no CUDA library looked for."""
    import onnxruntime as ort

    calls: list[int] = []
    monkeypatch.setattr(ort, "preload_dlls", lambda: calls.append(1))
    return calls


def exported(profile: pm.Profile, model: str) -> dict:
    ns: dict = {}
    exec(compile(render(profile, "python", model_path=model), "<ortop export>", "exec"), ns)
    return ns


def plain(model: str, x: np.ndarray) -> np.ndarray:
    """The reference: a plain run of a real CPU session (the real class, also while the fake GPU is installed)."""
    return fake._REAL_SESSION(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("which", ["fixed", "free"])
def test_graph_export_binds_once_and_refreshes_inputs_in_place(which, fixed_model, free_model, quiet_preload):
    """Real onnxruntime on the CPU (DEVICE set to "cpu": no GPU here): one io_binding() per session, outputs
    allocated before the first run (from the model's shapes, or a gpu_graph_id = -1 run where a dim is free), the
    same bound OrtValues refreshed on every later call."""
    model = fixed_model if which == "fixed" else free_model
    ns = exported(pm.load(GRAPH), model)
    assert ns["DEVICE"] == "cuda"
    ns["DEVICE"] = "cpu"
    sess = ns["make_session"](model, providers=["CPUExecutionProvider"])
    made = []
    io_binding = sess.io_binding
    sess.io_binding = lambda: made.append(1) or io_binding()
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((2, 8)).astype(np.float32) for _ in range(3)]
    (first,) = ns["run_with_io_binding"](sess, {"x": xs[0]})
    runner = ns["_runners"][sess]
    bound_in, bound_out = runner.inputs["x"], runner.outputs["y"]
    assert bound_out.shape() == [2, 8]
    np.testing.assert_allclose(first, plain(model, xs[0]), rtol=1e-6)
    for x in xs[1:]:
        (y,) = ns["run_with_io_binding"](sess, {"x": x})
        np.testing.assert_allclose(y, plain(model, x), rtol=1e-6)
        np.testing.assert_allclose(bound_out.numpy(), y)  # the run wrote into the bound buffer
    assert made == [1]
    assert runner.inputs["x"] is bound_in and runner.outputs["y"] is bound_out
    np.testing.assert_array_equal(bound_in.numpy(), xs[-1])
    with pytest.raises(ValueError, match="replays the shapes it captured"):
        ns["run_with_io_binding"](sess, {"x": np.zeros((3, 8), np.float32)})


def test_graph_export_follows_ort_rules_on_the_fake_gpu(fixed_model, monkeypatch, quiet_preload):
    """On the fake GPU (DEVICE "cuda"): the first call captures with device buffers bound once, later calls replay
    them with new inputs, nothing goes through a plain run()."""
    gpu = fake.install(monkeypatch)
    ns = exported(pm.load(GRAPH), fixed_model)
    sess = ns["make_session"](strict=True)  # the fake reports CUDA active
    xs = [np.full((2, 8), v, np.float32) for v in (0.25, 0.5, 1.0)]
    for x in xs:
        (y,) = ns["run_with_io_binding"](sess, {"x": x})
        np.testing.assert_allclose(y, plain(fixed_model, x), rtol=1e-6)
    assert len(gpu.of("capture")) == 1 and len(gpu.of("replay")) == 2 and gpu.plain_runs == []
    assert gpu.bindings == 1
    assert all(device == "cuda" for _, device, _ in gpu.allocations)
    assert quiet_preload == [1]


def test_io_binding_export_without_graphs_still_runs_on_the_cpu(fixed_model):
    profile = replace(pm.merge(pm.Profile(), **{"provider.io_binding": True}), model=fixed_model)
    ns = exported(profile, fixed_model)
    assert "GraphRunner" not in ns and ns["DEVICE"] == "cpu"
    sess = ns["make_session"]()
    x = np.ones((2, 8), np.float32)
    (y,) = ns["run_with_io_binding"](sess, {"x": x})
    np.testing.assert_allclose(y, plain(fixed_model, x), rtol=1e-6)


@pytest.mark.parametrize("name", ["cuda-default", "cuda-graph", "cuda-memory-capped", "tensorrt", "cpu"])
def test_cuda_and_tensorrt_exports_preload_the_cuda_libraries(name, fixed_model, quiet_preload):
    if name in ("tensorrt", "cpu"):
        profile = pm.merge(pm.Profile(), **{"provider.name": name})
    else:
        profile = pm.load(REPO / "profiles" / f"{name}.toml")
    text = render(profile, "python")
    gpu = name != "cpu"
    assert ("    _preload_cuda_libraries()" in text) is gpu
    ns = exported(profile, fixed_model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # CUDA asked, CPU here: make_session says so
        for _ in range(2):
            ns["make_session"](fixed_model, providers=["CPUExecutionProvider"])
    assert quiet_preload == ([1] if gpu else [])  # once per process, before the first session


def test_a_failed_preload_is_a_warning_and_the_session_is_made(fixed_model, monkeypatch):
    import onnxruntime as ort

    def broken():
        raise RuntimeError("Invalid parameter of directory=x. The directory does not exist!")

    monkeypatch.setattr(ort, "preload_dlls", broken)
    ns = exported(pm.load(REPO / "profiles" / "cuda-default.toml"), fixed_model)
    with pytest.warns(RuntimeWarning, match=r"preload_dlls\(\) failed: Invalid parameter"):
        sess = ns["make_session"](fixed_model, providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    monkeypatch.delattr(ort, "preload_dlls")  # onnxruntime before 1.21: nothing to call, nothing said
    ns = exported(pm.load(REPO / "profiles" / "cuda-default.toml"), fixed_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ns["make_session"](fixed_model, providers=["CPUExecutionProvider"])
