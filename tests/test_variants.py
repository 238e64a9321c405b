"""Variants of a model made with onnxruntime's own tools (runtime.variants in a child, engine.variants around it)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ortop.config import profile as P
from ortop.config.profile import Profile
from ortop.engine.answers.variants import check_out_dir, default_out_dir, make_variants, plan_kinds
from ortop.errors import UsageError
from ortop.model import load_model
from ortop.runtime.variants import FeedReader, calibration_feeds
from tests.models import _vi, make_matmul_model, model_of, save

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing


def _two_input_model(path) -> str:
    """a [batch, 8] @ W + b [batch, 8] -> y: two inputs, for the calibration layout's per-input files."""
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["a", "W"], ["aw"]), helper.make_node("Add", ["aw", "b"], ["y"])]
    return save(model_of(nodes, [_vi("a", "float32", ["batch", 8]), _vi("b", "float32", ["batch", 8])],
                         [_vi("y", "float32", ["batch", 8])], [w]), path)


def _run(path: str, feed: dict) -> np.ndarray:
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feed)[0]


# ---- calibration inputs ----------------------------------------------------------------------------------------------
def test_calibration_one_file_per_input_stacked_or_single(tmp_path):
    model = load_model(_two_input_model(tmp_path / "two.onnx"))
    cal = tmp_path / "cal"
    cal.mkdir()
    np.save(cal / "a.npy", np.arange(3 * 2 * 8, dtype=np.float32).reshape(3, 2, 8))  # 3 samples of [2, 8]
    np.save(cal / "b.npy", np.ones((3, 2, 8), np.float32))
    feeds = calibration_feeds(str(cal), model.inputs)
    assert len(feeds) == 3
    assert set(feeds[0]) == {"a", "b"}
    assert feeds[1]["a"].shape == (2, 8)
    np.testing.assert_array_equal(feeds[2]["a"], np.arange(32, 48, dtype=np.float32).reshape(2, 8))
    np.save(cal / "a.npy", np.zeros((2, 8), np.float32))  # one sample each: shaped like the input
    np.save(cal / "b.npy", np.zeros((2, 8), np.float32))
    assert len(calibration_feeds(str(cal), model.inputs)) == 1


def test_calibration_single_input_takes_any_files_in_name_order(tmp_path):
    model = load_model(make_matmul_model(tmp_path / "m.onnx", n=64))
    cal = tmp_path / "cal"
    cal.mkdir()
    np.save(cal / "b_second.npy", np.full((2, 1, 64), 2.0, np.float32))  # a stack of two [1, 64]
    np.save(cal / "a_first.npy", np.full((1, 64), 1.0, np.float32))      # one sample
    feeds = calibration_feeds(str(cal), model.inputs)
    assert [float(f["x"][0, 0]) for f in feeds] == [1.0, 2.0, 2.0]


@pytest.mark.parametrize("arrays, words", [
    ({"a.npy": np.zeros((3, 2, 8), np.float32)}, "no b.npy"),
    ({"a.npy": np.zeros((3, 2, 8), np.float32), "b.npy": np.zeros((2, 2, 8), np.float32)}, "different numbers"),
    ({"a.npy": np.zeros((2, 8), np.float64), "b.npy": np.zeros((2, 8), np.float32)}, "dtype float64"),
    ({"a.npy": np.zeros((2, 5), np.float32), "b.npy": np.zeros((2, 8), np.float32)}, "does not fit input 'a'"),
    ({"a.npy": np.zeros((2, 2, 2, 8), np.float32), "b.npy": np.zeros((2, 8), np.float32)}, "shape [2, 2, 2, 8]"),
])
def test_calibration_refusals_name_the_file_and_why(tmp_path, arrays, words):
    model = load_model(_two_input_model(tmp_path / "two.onnx"))
    cal = tmp_path / "cal"
    cal.mkdir()
    for name, arr in arrays.items():
        np.save(cal / name, arr)
    with pytest.raises(ValueError) as err:
        calibration_feeds(str(cal), model.inputs)
    assert words in str(err.value)


def test_calibration_folder_missing_or_empty(tmp_path, matmul_model):
    model = load_model(matmul_model)
    with pytest.raises(ValueError, match="does not exist"):
        calibration_feeds(str(tmp_path / "nope"), model.inputs)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .npy"):
        calibration_feeds(str(tmp_path / "empty"), model.inputs)


def test_feed_reader_gives_each_feed_once_then_none_and_rewinds():
    feeds = [{"x": np.zeros(1)}, {"x": np.ones(1)}]
    r = FeedReader(feeds)
    assert [r.get_next(), r.get_next(), r.get_next()] == [feeds[0], feeds[1], None]
    r.rewind()
    assert r.get_next() is feeds[0]
    assert len(r) == 2


# ---- what is made, and where -----------------------------------------------------------------------------------------
def test_plan_kinds_fp16_for_cuda_or_when_asked_static_with_calibration():
    cpu = Profile()
    kinds, skipped = plan_kinds(cpu)
    assert kinds == ["opt-extended", "opt-all", "int8-dynamic"]
    assert any(s.startswith("fp16:") for s in skipped) and any(s.startswith("int8-static:") for s in skipped)
    assert plan_kinds(cpu, fp16=True)[0][-1] == "fp16"
    assert plan_kinds(cpu, calibrate="cal")[0][-1] == "int8-static"
    cuda = P.merge(cpu, **{"provider.name": "cuda"})
    assert "fp16" in plan_kinds(cuda)[0]


def test_out_dir_default_beside_the_model_and_refusals(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx")
    assert default_out_dir(model) == str(tmp_path / "m-variants")
    out = check_out_dir(str(tmp_path / "a" / "b"), model)
    assert os.path.isdir(out)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        check_out_dir(str(tmp_path / "file"), model)
    with pytest.raises(UsageError, match="model's own folder"):
        check_out_dir(str(tmp_path), model)


# ---- making them, in a child -----------------------------------------------------------------------------------------
@pytest.mark.integration
def test_make_variants_real_quantize_dynamic_and_optimized_graphs(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx", n=128)
    out = check_out_dir(str(tmp_path / "out"), model)
    made = make_variants(model, Profile(), out, ["opt-extended", "opt-all", "int8-dynamic"])
    assert made.ort_version == ort.__version__
    by = {v.kind: v for v in made.variants}
    assert list(by) == ["opt-extended", "opt-all", "int8-dynamic"]
    assert all(v.ok for v in made.variants), [v.error for v in made.variants]
    for v in made.variants:
        assert os.path.isfile(v.path) and os.path.dirname(v.path) == out
        assert v.bytes == os.path.getsize(v.path) and v.make_s is not None and v.make_s >= 0
    assert any("tied to onnxruntime" in n for n in by["opt-all"].notes)
    original = os.path.getsize(model)
    assert by["int8-dynamic"].bytes < original / 2  # 128x128 float32 weights -> int8
    q = onnx.load(by["int8-dynamic"].path)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} & {n.op_type for n in q.graph.node} or \
        any(n.op_type.startswith("DynamicQuantize") or "Integer" in n.op_type for n in q.graph.node)
    x = {"x": np.random.default_rng(3).standard_normal((4, 128)).astype(np.float32)}
    ref = _run(model, x)
    np.testing.assert_allclose(_run(by["opt-extended"].path, x), ref, rtol=1e-5, atol=1e-5)
    got = _run(by["int8-dynamic"].path, x)
    err = np.abs(got - ref).max()
    assert 0 < err < 0.2 * np.abs(ref).max()  # quantized: close, not equal


@pytest.mark.integration
def test_a_variant_that_fails_is_reported_and_the_others_go_on(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx", n=32)
    cal = tmp_path / "cal"
    cal.mkdir()
    np.save(cal / "x.npy", np.zeros((4, 1, 16), np.float32))  # 16 columns where the model takes 32
    out = check_out_dir(str(tmp_path / "out"), model)
    made = make_variants(model, Profile(), out, ["int8-static", "int8-dynamic", "fp16"], calibrate=str(cal))
    by = {v.kind: v for v in made.variants}
    bad = by["int8-static"]
    assert not bad.ok and "does not fit input 'x'" in bad.error and "\n" not in bad.error
    assert not os.path.exists(bad.path)
    assert by["int8-dynamic"].ok and os.path.isfile(by["int8-dynamic"].path)
    assert by["fp16"].ok
    x = {"x": np.ones((1, 32), np.float32)}
    np.testing.assert_allclose(_run(by["fp16"].path, x), _run(model, x), rtol=1e-2, atol=1e-2)


@pytest.mark.integration
def test_static_int8_calibrated_on_the_folder(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx", n=32)
    cal = tmp_path / "cal"
    cal.mkdir()
    np.save(cal / "x.npy", np.random.default_rng(0).standard_normal((8, 2, 32)).astype(np.float32))
    out = check_out_dir(str(tmp_path / "out"), model)
    (v,) = make_variants(model, Profile(), out, ["int8-static"], calibrate=str(cal)).variants
    assert v.ok, v.error
    assert any("8 samples" in n for n in v.notes)
    ops = {n.op_type for n in onnx.load(v.path).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops


# ---- the command ---------------------------------------------------------------------------------------------------
def _cli(argv, capsys):
    from ortop.cli.variants import variants_main

    code = variants_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("extra, words", [
    (["--budget", "0"], "argument --budget: must be > 0 seconds, got 0"),
    (["--cosine", "2"], "a cosine floor is between -1 and 1"),
    (["--rtol", "-1"], "expected a number >= 0 or 'off'"),
    (["--calibrate", "/nonexistent/cal"], "--calibrate /nonexistent/cal: not a folder"),
    (["--ort-python", "/nonexistent/python"], "--ort-python /nonexistent/python: no such file"),
])
def test_variants_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, words):
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    code, out, err = _cli([model, "--out", str(tmp_path / "out"), *extra], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_variants_refuses_a_missing_model_and_an_out_that_is_a_file(tmp_path, capsys):
    code, _, err = _cli([str(tmp_path / "missing.onnx")], capsys)
    assert code == 2 and "model file not found" in err
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    (tmp_path / "f").write_text("x")
    code, _, err = _cli([model, "--out", str(tmp_path / "f")], capsys)
    assert code == 2 and "not a folder" in err and err.count("\n") == 1


def test_best_variant_is_the_fastest_decided_within_the_tolerance():
    from types import SimpleNamespace as NS

    from ortop.cli.variants import best_variant

    def comp(other, verdict, change):
        return NS(other=other, metric="p50", verdict=verdict, change_pct=change, text=lambda: f"p50 {change:+}%")

    configs = [NS(name="original", differs=()), NS(name="opt-all", differs=()), NS(name="int8", differs=("y",)),
               NS(name="opt-extended", differs=())]
    res = NS(configs=configs, comparisons=[comp(1, "faster", -10.0), comp(2, "faster", -40.0),
                                           comp(3, "faster", -15.0)])
    name, line = best_variant(res, "p50")
    assert name == "opt-extended" and "fastest within the tolerance: opt-extended" in line  # int8 differs
    res = NS(configs=configs, comparisons=[comp(1, "no difference", 0.5), comp(2, "faster", -40.0)])
    name, line = best_variant(res, "p50")
    assert name is None and "none beats the original" in line and "int8 faster, but outputs beyond" in line
    assert best_variant(None, "p50")[0] is None


@pytest.mark.integration
def test_variants_command_makes_compares_and_names_the_verdict(tmp_path, capsys):
    import json

    model = make_matmul_model(tmp_path / "m.onnx", n=96, batch=8)
    cal = tmp_path / "cal"
    cal.mkdir()
    np.save(cal / "x.npy", np.zeros((3, 8, 5), np.float32))  # the wrong width: static int8 fails, the rest go on
    code, out, err = _cli([model, "--budget", "2", "--calibrate", str(cal), "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["out_dir"] == str(tmp_path / "m-variants")  # beside the model by default
    made = {v["variant"]: v for v in data["variants"]}
    assert made["int8-static"]["error"] and "does not fit input 'x'" in made["int8-static"]["error"]
    assert all(made[k]["error"] is None for k in ("opt-extended", "opt-all", "int8-dynamic"))
    assert any(s.startswith("fp16:") for s in data["not_made"])
    configs = data["comparison"]["configs"]
    assert [c["profile"] for c in configs] == ["original", "opt-extended", "opt-all", "int8-dynamic"]
    assert [c["model"] for c in configs][1:] == [made[k]["path"] for k in ("opt-extended", "opt-all", "int8-dynamic")]
    assert all(c["runs"] > 0 and c["model_bytes"] > 0 for c in configs)
    assert configs[3]["model_bytes"] < configs[0]["model_bytes"] / 2
    int8 = configs[3]["agreement"]["y"]
    assert int8["max_abs"] > 0 and int8["cosine"] < 1  # quantized: close, not equal
    assert configs[1]["agreement"]["y"]["max_abs"] < 1e-4  # ORT's optimized graph computes the same
    assert data["best"] in (None, "opt-extended", "opt-all", "int8-dynamic")
    assert data["verdict"].startswith("fastest within the tolerance" if data["best"] else "none beats")
    code, out, _ = _cli([model, "--budget", "1", "--out", str(tmp_path / "o2")], capsys)
    assert code == 0
    assert "int8-dynamic" in out and "outputs" in out and ("fastest within" in out or "none beats" in out)


def test_out_dir_default_is_a_temporary_folder_beside_a_read_only_model(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    model = make_matmul_model(ro / "m.onnx", n=8)
    ro.chmod(0o555)
    try:
        out = default_out_dir(model)
        assert not out.startswith(str(ro)) and os.path.isdir(out) and "ortop-m-variants-" in out
        os.rmdir(out)
    finally:
        ro.chmod(0o755)
