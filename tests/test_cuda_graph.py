"""The CUDA-graph path of ortop's runtime against a fake GPU that refuses what ONNX Runtime refuses
(tests/fakes/cuda_graph.py), and the same binding code on real onnxruntime CPU sessions.

What ORT does (1.31's source): the first ``Run()`` of a graph-enabled session captures (InferenceSession::Run
re-runs until the provider has captured), the graph lives in the CUDA provider's per-thread context, a capture
needs bound device buffers that stay the same, and ``gpu_graph_id = -1`` skips capture for one run.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ortop import model as model_mod
from ortop.config import profile as pm
from ortop.runtime import child, iobind
from ortop.runtime.serve import Loop
from ortop.runtime.session import Replicas, Session, build
from tests.fakes import cuda_graph as fake
from tests.models import make_cast_model

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def gpu(monkeypatch) -> fake.World:
    monkeypatch.setattr(child, "_preload", {"done": None})  # the CUDA libraries: tested on their own below
    return fake.install(monkeypatch)


def graph_profile(model: str, **changes) -> pm.Profile:
    p = replace(pm.load(REPO / "profiles" / "cuda-graph.toml"), model=model)
    return pm.merge(p, **{"workload.warmup_runs": 4, **changes})


def serve(session, seconds: float = 0.15):
    """Warm the session, then measure for a moment on its server threads; the rows and the errors."""
    errors: list[str] = []
    session.warm()
    loop = Loop(session, 1, lambda cid, msg: errors.append(msg))
    loop.start()
    time.sleep(seconds)
    loop.halt()
    return loop.take(), errors


def test_graph_is_captured_on_the_server_thread_that_then_serves(gpu, fixed_model):
    s = Session(graph_profile(fixed_model), model_mod.load_model(fixed_model))
    try:
        assert s.device == "cuda" and s.graphs
        rows, errors = serve(s)
        server = s.servers[0]._thread.ident
        assert errors == [] and len(rows) > 0
        captures, replays = gpu.of("capture"), gpu.of("replay")
        assert [(e[1], e[2]) for e in captures] == [(server, 1)]  # one graph, shape 0 -> id 1, on the server
        assert {e[1] for e in replays} == {server}                # warm-up and measuring: the same thread
        assert len(replays) >= 3 + len(rows)                      # the warm-up runs after the first, then the loop
        assert gpu.plain_runs == []                               # never a plain run()
        assert gpu.bindings == 1                                  # bound once
        b = s.bound(0, 0)
        assert [v.device for v in b.inputs.values()] == ["cuda"]
        assert [(v.device, v.shape()) for v in b.outputs.values()] == [("cuda", [2, 8])]  # allocated up front
        assert ([2, 8], "cuda", server) in gpu.allocations
        assert gpu.updates[0] == ([2, 8], "cuda", server)          # inputs filled in place, on that thread
        expected = fake._REAL_SESSION(fixed_model, providers=["CPUExecutionProvider"]).run(None, s.feeds)[0]
        np.testing.assert_allclose(b.outputs["y"].numpy(), expected, rtol=1e-6)
    finally:
        s.close()


def test_first_run_captures_and_later_runs_replay_the_same_buffers(gpu, fixed_model):
    s = Session(graph_profile(fixed_model, **{"workload.warmup_runs": 1}), model_mod.load_model(fixed_model))
    try:
        first_ns, _ = s.warm()
        assert len(gpu.of("capture")) == 1 and gpu.of("replay") == []
        assert first_ns >= gpu.capture_s * 1e9  # the first run's time is the capture's
        b = s.bound(0, 0)
        x = np.full((2, 8), 0.5, np.float32)
        s.servers[0].call(lambda: (b.refresh({"x": x}), s.runner(0)()))  # new input, in place, then a replay
        expected = fake._REAL_SESSION(fixed_model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(b.outputs["y"].numpy(), expected, rtol=1e-6)
        assert len(gpu.of("replay")) == 1
        with pytest.raises(ValueError, match="bound"):
            b.refresh({"x": np.zeros((3, 8), np.float32)})
    finally:
        s.close()


def test_the_outputs_compared_across_models_replay_the_warm_up_graph(gpu, fixed_model):
    """compare's output agreement runs the session once more after warm-up: a replay of its graph on its server
    thread, not a second capture."""
    from ortop.runtime.outputs import run_outputs

    s = Session(graph_profile(fixed_model, **{"workload.warmup_runs": 1}), model_mod.load_model(fixed_model))
    try:
        s.warm()
        out = run_outputs(s)
        assert len(gpu.of("capture")) == 1 and len(gpu.of("replay")) == 1
        assert {e[1] for e in gpu.events} == {s.servers[0]._thread.ident}
        expected = fake._REAL_SESSION(fixed_model, providers=["CPUExecutionProvider"]).run(None, s.feeds)[0]
        np.testing.assert_allclose(out["y"], expected, rtol=1e-6)
    finally:
        s.close()


def test_a_graph_binding_is_refused_on_another_thread(gpu, fixed_model):
    s = Session(graph_profile(fixed_model), model_mod.load_model(fixed_model))
    try:
        s.warm()
        with pytest.raises(iobind.GraphBindingError, match="thread that captured"):
            s.runner(0)()  # this test's thread holds no graph of this session
    finally:
        s.close()


def test_the_fake_refuses_what_ort_refuses(gpu, fixed_model):
    """The old path (outputs from a plain run, outputs left to ORT, buffers swapped after capture) fails here."""
    import onnxruntime as ort

    sess = ort.InferenceSession(fixed_model, providers=[("CUDAExecutionProvider", {"enable_cuda_graph": "1"})])
    x = np.ones((2, 8), np.float32)
    with pytest.raises(fake.CaptureError, match="stream is capturing"):
        sess.run(None, {"x": x})
    b = sess.io_binding()
    b.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0))
    b.bind_output("y", "cuda", 0)
    with pytest.raises(fake.CaptureError, match="left to ORT"):
        sess.run_with_iobinding(b)
    bound = iobind.Bound(sess, {"x": x}, "cuda", 0, graph_id=1)
    bound.run()
    bound.binding.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_shape_and_type([2, 8], np.float32, "cuda", 0))
    with pytest.raises(fake.CaptureError, match="changed after the capture"):
        bound.run()


def test_free_output_shapes_come_from_a_run_that_skips_capture(gpu, free_model):
    s = Session(graph_profile(free_model, **{"workload.batch": 3}), model_mod.load_model(free_model))
    try:
        serve(s, 0.05)
        server = s.servers[0]._thread.ident
        skip, capture = gpu.of("skip"), gpu.of("capture")
        assert [(e[1], e[2]) for e in skip] == [(server, -1)]
        assert skip[0][4] <= capture[0][3]  # the shapes first, then the capture
        assert [v.shape() for v in s.bound(0, 0).outputs.values()] == [[3, 8]]
    finally:
        s.close()


def test_each_shape_of_a_mix_has_its_own_graph_on_the_same_thread(gpu, free_model):
    from ortop.runtime.worker import workload_shapes

    prof = graph_profile(free_model, **{"workload.dim_mix": {"batch": "2:1,5:1"}})
    info = model_mod.load_model(free_model)
    _, variants = workload_shapes(prof, info)
    s = Session(prof, info, variants)
    try:
        rows, errors = serve(s)
        server = s.servers[0]._thread.ident
        assert errors == [] and set(rows[:, 6].tolist()) == {0, 1}
        assert sorted((e[1], e[2]) for e in gpu.of("capture")) == [(server, 1), (server, 2)]
        assert {e[1] for e in gpu.of("replay")} == {server}
        assert [v.shape() for v in s.bound(0, 1).outputs.values()] == [[5, 8]]
    finally:
        s.close()


def test_replicas_capture_one_at_a_time(gpu, fixed_model):
    prof = graph_profile(fixed_model, **{"workload.replicas": 2})
    r = build(prof, model_mod.load_model(fixed_model))
    assert isinstance(r, Replicas)
    try:
        rows, errors = serve(r)
        assert errors == [] and set(rows[:, 4].tolist()) == {0, 1}
        caps = sorted(gpu.of("capture"), key=lambda e: e[3])
        assert [e[1] for e in caps] == [m.servers[0]._thread.ident for m in r.members]
        assert caps[0][4] <= caps[1][3]  # the second began after the first ended
    finally:
        r.close()


def test_captures_started_at_once_wait_for_each_other(gpu, fixed_model):
    """Two sessions warmed from two threads at the same moment: the capture lock keeps them apart. Without it the
    fake GPU fails the second capture, as CUDA's global capture mode does."""
    info = model_mod.load_model(fixed_model)
    a, b = (Session(graph_profile(fixed_model), info) for _ in range(2))
    try:
        failures: list[BaseException] = []
        start = threading.Barrier(2)

        def warm(s):
            start.wait()
            try:
                s.warm()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=warm, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        caps = sorted(gpu.of("capture"), key=lambda e: e[3])
        assert len(caps) == 2 and caps[0][4] <= caps[1][3]

        # The same two captures without the lock: the fake refuses the overlap.
        c, d = (iobind.Bound(s.sess, s.feeds, "cuda", 0, graph_id=7) for s in (a, b))
        start = threading.Barrier(2)

        def unlocked(bound):
            start.wait()
            try:
                bound.sess.run_with_iobinding(bound.binding, bound.run_options)
            except fake.CaptureError as exc:
                failures.append(exc)

        threads = [threading.Thread(target=unlocked, args=(x,)) for x in (c, d)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(failures) == 1 and "stream is capturing" in str(failures[0])
    finally:
        a.close()
        b.close()


def test_graphs_with_concurrent_callers_are_refused(gpu, fixed_model):
    with pytest.raises(ValueError, match="concurrency = 2"):
        Session(graph_profile(fixed_model, **{"workload.concurrency": 2}), model_mod.load_model(fixed_model))


@pytest.mark.parametrize("provider", ["tensorrt", "cuda"])
def test_tensorrt_and_cuda_bind_on_the_device_like_the_exporter(gpu, fixed_model, provider):
    from ortop.export.common import device

    prof = pm.merge(pm.Profile(model=fixed_model), **{"provider.name": provider, "provider.io_binding": True,
                                                      "workload.warmup_runs": 1})
    s = Session(prof, model_mod.load_model(fixed_model))
    try:
        rows, errors = serve(s, 0.05)
        assert errors == [] and len(rows) > 0
        assert (s.device, s.device_id) == device(prof) == ("cuda", 0)
        assert [v.device for v in s.bound(0, 0).inputs.values()] == ["cuda"]
        assert gpu.of("plain") and not gpu.of("capture")  # no graphs asked: plain IO-binding runs
    finally:
        s.close()


def test_a_provider_that_fell_back_binds_on_the_cpu(fixed_model, monkeypatch):
    """Real onnxruntime on this host: CUDA asked, no GPU, so CPU runs; IO binding then binds on the CPU."""
    monkeypatch.setattr(child, "_preload", {"done": None})
    prof = pm.merge(graph_profile(fixed_model), **{"session.log_severity_level": 4})
    s = Session(prof, model_mod.load_model(fixed_model))
    try:
        if "CUDAExecutionProvider" in s.providers_active:
            pytest.skip("this host runs CUDA")
        assert s.device == "cpu" and not s.graphs
        rows, errors = serve(s, 0.05)
        assert errors == [] and len(rows) > 0
    finally:
        s.close()


# ---- the same binding code on real onnxruntime (CPU) ----------------------------------------------------------
def real(model: str):
    import onnxruntime as ort

    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("which", ["fixed", "free"])
def test_graph_binding_on_a_real_session(which, fixed_model, free_model):
    """Bound with a graph id on a real CPU session: outputs allocated from the static shapes or from a run with
    gpu_graph_id = -1 (ORT's real RunOptions and OrtValue calls), filled by the run, refreshed in place."""
    model = fixed_model if which == "fixed" else free_model
    sess = real(model)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    b = iobind.Bound(sess, {"x": x}, "cpu", 0, graph_id=1)
    assert list(b.outputs) == ["y"] and b.outputs["y"].shape() == [2, 8]
    assert b.run_options.get_run_config_entry("gpu_graph_id") == "1"
    b.runner()()
    np.testing.assert_allclose(b.outputs["y"].numpy(), sess.run(None, {"x": x})[0], rtol=1e-6)
    b.refresh({"x": 3 * x})
    b.runner()()
    np.testing.assert_allclose(b.output_values()[0].numpy(), sess.run(None, {"x": 3 * x})[0], rtol=1e-5)


def test_io_binding_runs_bfloat16_inputs_like_plain_run(tmp_path):
    """numpy has no bfloat16: the bound input is an OrtValue of ONNX type bfloat16 filled from the raw bits."""
    path = make_cast_model(tmp_path / "cast.onnx", "bfloat16")
    info = model_mod.load_model(path)
    outs = {}
    for io in (False, True):
        prof = pm.merge(pm.Profile(model=path), **{"provider.io_binding": io, "workload.warmup_runs": 2})
        s = Session(prof, info)
        try:
            rows, errors = serve(s, 0.05)
            assert errors == [] and len(rows) > 0
            if io:
                outs[io] = s.servers[0].call(lambda s=s: (s.runner(0)(), s.binding(0).copy_outputs_to_cpu()[0])[1])
            else:
                outs[io] = s.servers[0].call(lambda s=s: s.runner(0)()[0].numpy())
            feeds = s.feeds
        finally:
            s.close()
    (x,) = feeds.values()
    assert x.dtype.name == "bfloat16"
    np.testing.assert_array_equal(outs[True], outs[False])
    np.testing.assert_array_equal(outs[True], x.astype(np.float32))


def test_io_binding_on_cpu_measures_with_outputs_equal_to_plain_run(fixed_model):
    info = model_mod.load_model(fixed_model)
    prof = pm.merge(pm.Profile(model=fixed_model), **{"provider.io_binding": True, "workload.warmup_runs": 2})
    s = Session(prof, info)
    try:
        rows, errors = serve(s, 0.1)
        assert errors == [] and len(rows) > 0
        got = s.servers[0].call(lambda: s.binding(0).copy_outputs_to_cpu()[0])
        np.testing.assert_allclose(got, real(fixed_model).run(None, s.feeds)[0], rtol=1e-6)
        assert s.bound(0, 0).outputs == {}  # no graph: outputs left to ORT on the device
    finally:
        s.close()


# ---- the CUDA libraries ------------------------------------------------------------------------------------------
def test_preload_once_per_process_with_one_warning(monkeypatch):
    import onnxruntime as ort

    calls = []

    def preload_dlls():
        calls.append(1)
        print("Failed to load libcublasLt.so.13: libcublasLt.so.13: cannot open shared object file")
        print("Failed to load /x/nvidia/cudnn/lib/libcudnn.so.9: cannot open shared object file")
        print("Please follow https://onnxruntime.ai/docs/install/#cuda-and-cudnn to install CUDA.")

    monkeypatch.setattr(ort, "preload_dlls", preload_dlls)
    monkeypatch.setattr(child, "_preload", {})
    said: list[str] = []
    monkeypatch.setattr(child, "_warning_sink", [said.append])
    assert child.preload_cuda_libraries() == said[0]
    assert child.preload_cuda_libraries() == said[0]
    assert calls == [1] and len(said) == 1
    assert said[0].startswith("onnxruntime.preload_dlls() could not load libcublasLt.so.13, libcudnn.so.9: ")


@pytest.mark.parametrize("how", ["raises", "missing", "fine"])
def test_preload_never_raises(monkeypatch, how):
    import onnxruntime as ort

    def broken():
        raise RuntimeError("Invalid parameter of directory=x. The directory does not exist!")

    if how == "missing":
        monkeypatch.delattr(ort, "preload_dlls")
    else:
        monkeypatch.setattr(ort, "preload_dlls", broken if how == "raises" else lambda: None)
    problem = child.preload_problem()
    if how == "fine":
        assert problem is None
    else:
        assert problem and "\n" not in problem
        assert ("failed: RuntimeError: Invalid parameter" in problem) if how == "raises" else \
            ("has no preload_dlls() (1.21 and later have it)" in problem)


def test_a_cuda_session_preloads_before_it_is_made(gpu, monkeypatch, fixed_model):
    import onnxruntime as ort

    order: list[str] = []
    monkeypatch.setattr(child, "_preload", {})
    monkeypatch.setattr(ort, "preload_dlls", lambda: order.append("preload"))
    made = fake.FakeGraphSession

    def session(*a, **k):
        order.append("session")
        return made(*a, **k)

    monkeypatch.setattr(ort, "InferenceSession", session)
    for name in ("cuda", "cpu"):
        prof = pm.merge(pm.Profile(model=fixed_model), **{"provider.name": name})
        s = Session(prof, model_mod.load_model(fixed_model))
        s.close()
    assert order == ["preload", "session", "session"]


@pytest.mark.integration
def test_the_worker_says_a_failed_preload_in_one_warning(fixed_model):
    """A real worker building a CUDA profile on this host: preload_dlls() is called before the session, and what
    it could not load is one Log line at warning level (none where the libraries are there)."""
    from ortop.engine.workerproc import WorkerProc
    from ortop.runtime import protocol as proto

    expected = child.preload_problem()
    seen: list = []
    done = threading.Event()

    def on_message(msg):
        seen.append(msg)
        if isinstance(msg, (proto.Built, proto.BuildFailed)):
            done.set()

    w = WorkerProc(fixed_model, {}, on_message)
    w.start()
    try:
        prof = pm.merge(pm.Profile(model=fixed_model), **{"provider.name": "cuda", "session.log_severity_level": 4,
                                                          "workload.warmup_runs": 1})
        w.send(proto.Build(1, prof.to_dict(full=True)))
        assert done.wait(60), seen
    finally:
        w.stop()
    result = next(m for m in seen if isinstance(m, (proto.Built, proto.BuildFailed)))
    assert isinstance(result, proto.Built), result
    said = [m for m in seen if isinstance(m, proto.Log) and "preload_dlls" in m.line]
    if expected is None:
        assert said == []
    else:
        assert [(m.line, m.level) for m in said] == [(expected, "warning")]


# ---- the per-operator probe --------------------------------------------------------------------------------------
def test_the_operator_probe_runs_a_graph_profile_with_capture_skipped(gpu, fixed_model, tmp_path, monkeypatch):
    """ORT's profiler sees no kernels in a replay, and a plain run() would capture: the probe binds once and runs
    every warm-up and timed run with gpu_graph_id = -1."""
    import onnxruntime as ort

    from ortop.runtime import opprof

    monkeypatch.setattr(child, "_preload", {})
    monkeypatch.setattr(ort, "preload_dlls", lambda: print("Failed to load libcublas.so.13: not here"))
    req = opprof.Request(fixed_model, graph_profile(fixed_model).to_dict(full=True), str(tmp_path), runs=5, warmup=2,
                         placement=False)
    out: dict = {}
    opprof.probe(req, out)
    assert out["stage"] == "done" and out["providers_active"][0] == "CUDAExecutionProvider"
    assert len(gpu.of("skip")) == 7 and gpu.of("capture") == [] and gpu.plain_runs == []
    assert gpu.bindings == 1
    assert any(n.startswith("onnxruntime.preload_dlls() could not load libcublas.so.13") for n in out["notes"])
    assert any("gpu_graph_id = -1" in n for n in out["notes"])


def test_the_operator_probe_times_io_binding_runs_on_a_real_session(fixed_model, tmp_path):
    from ortop.runtime import opprof

    prof = pm.merge(pm.Profile(model=fixed_model), **{"provider.io_binding": True})
    req = opprof.Request(fixed_model, prof.to_dict(full=True), str(tmp_path), runs=4, warmup=1, trace=True)
    out: dict = {}
    opprof.probe(req, out)
    assert out["stage"] == "done" and out["ops"]["runs"] == 4
    assert {r["op_type"] for r in out["ops"]["op_types"]} == {"FusedGemm"}  # MatMul + Add + Relu, fused by ORT
