"""Shared fixtures for the engine and CLI tests: small models that run in a real onnxruntime worker."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.models import _vi, make_add_model, make_matmul_model, model_of, save

# x [256, 256] @ W [256, 256]: about 0.4 ms per run on one core of the 2-core test host, so a second of
# measuring gives thousands of runs, and spinning between paced runs dominates the CPU cost.
MATMUL_N = 256
MATMUL_BATCH = 256


@pytest.fixture(scope="session", autouse=True)
def own_state_folder(tmp_path_factory) -> Iterator[None]:
    """What ortop keeps between runs (saved sessions, the host's record of its stalls) goes to a folder of the test
    session's own, never the user's: a search run in the tests reads no earlier search of a user's, nor leaves one."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(scope="session")
def matmul_model(tmp_path_factory) -> str:
    """A fixed-shape MatMul + Add + Relu model (input x: float32[256x256])."""
    path = tmp_path_factory.mktemp("models") / "matmul.onnx"
    return make_matmul_model(path, n=MATMUL_N, batch=MATMUL_BATCH)


@pytest.fixture(scope="session")
def fixed_model(tmp_path_factory) -> str:
    """A tiny MatMul model with every shape fixed (x: float32[2x8]): CUDA graphs need no run to size outputs."""
    return make_matmul_model(tmp_path_factory.mktemp("models") / "fixed.onnx", n=8, batch=2)


@pytest.fixture(scope="session")
def free_model(tmp_path_factory) -> str:
    """The same with a free batch dim (x: float32[batch x 8]): outputs sized by a run that skips capture."""
    return make_matmul_model(tmp_path_factory.mktemp("models") / "free.onnx", n=8)


@pytest.fixture(scope="session")
def broadcast_model(tmp_path_factory) -> str:
    """a [N] + b [M]: runs with the default N = M = 1, fails in Run() with --dim N=2 --dim M=3."""
    path = tmp_path_factory.mktemp("models") / "broadcast.onnx"
    return make_add_model(path, ["N"], ["M"])


def build_random_reshape_model(path, seed: int, threshold: float = 0.99) -> str:
    """y = Reshape(x [1], [1 + (RandomUniform(seed) > threshold)]): a Run() fails when the draw exceeds threshold.

    RandomUniform with a seed draws the same sequence in every fresh session, so the index of the first failing
    run is fixed for a seed: the tests find it in-process, then check what the worker reports against it.
    """
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    thr = numpy_helper.from_array(np.array([threshold], np.float32), "thr")
    nodes = [
        helper.make_node("RandomUniform", [], ["r"], shape=[1], seed=float(seed), dtype=TensorProto.FLOAT),
        helper.make_node("Greater", ["r", "thr"], ["g"]),
        helper.make_node("Cast", ["g"], ["gi"], to=TensorProto.INT64),
        helper.make_node("Add", ["gi", "one"], ["shape"]),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return save(model_of(nodes, [_vi("x", "float32", [1])], [_vi("y", "float32", None)], [one, thr]), path)


def first_failing_run(path: str, limit: int = 5000) -> int | None:
    """0-based index of the first Run() of a fresh session of ``path`` that raises (None if none in ``limit``)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4  # the expected failure is not news on the test's stderr
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.ones(1, np.float32)
    for i in range(limit):
        try:
            sess.run(None, {"x": x})
        except Exception:
            return i
    return None


@pytest.fixture(scope="session")
def random_fail_model(tmp_path_factory) -> tuple[str, int]:
    """(path, index of the first failing run), with that index at least 30 so a warm-up can come before it."""
    d = tmp_path_factory.mktemp("models")
    for seed in range(20):
        path = build_random_reshape_model(d / f"random_fail_{seed}.onnx", seed)
        idx = first_failing_run(path)
        if idx is not None and 30 <= idx <= 2000:
            return path, idx
    pytest.fail("no seed gives a first failing run between 30 and 2000")


# Modules whose integration tests judge measured time against a reference (queueing theory, a closed loop measured
# just before, a verdict between two configurations, a capacity): a neighbour on the other core moves them, so they
# run alone (`-m timing`). The other integration tests count, build, kill and read files: they run two at a time.
# A test elsewhere that judges measured time carries `@pytest.mark.timing` itself.
TIMING_MODULES = {"test_traffic", "test_capacity", "test_capacity_idle", "test_capacity_interval", "test_compare",
                  "test_tuner", "test_bench", "test_certify_run", "test_gates_cli"}


def pytest_collection_modifyitems(items) -> None:
    """Tests that take the real-worker ``monitor`` fixture are integration tests wherever they live; integration
    tests of TIMING_MODULES that do not share the host are ``timing`` tests."""
    for item in items:
        if "monitor" in getattr(item, "fixturenames", ()) and "integration" not in item.keywords:
            item.add_marker(pytest.mark.integration)
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if module in TIMING_MODULES and "integration" in item.keywords and "sharing" not in item.keywords:
            item.add_marker(pytest.mark.timing)
