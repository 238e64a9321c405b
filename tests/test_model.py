"""ortop.model against real onnxruntime sessions: the synthesized feeds must be accepted and run, not just look
right, and every bad model must turn into one readable line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ortop.model import (
    ModelError,
    ModelInfo,
    TensorInfo,
    check_ir_supported,
    describe_feeds,
    format_info,
    load_model,
    make_feeds,
    parse_shape,
)
from ortop.model.inspect import _probe_max_ir
from tests.models import (
    make_add_model,
    make_bert_like_model,
    make_cast_model,
    make_gather_model,
    make_identity_model,
    make_if_model,
    make_initializer_input_model,
    make_matmul_model,
    model_of,
    save,
)

ALL_DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "bool", "string"]


def run(path: str, feeds: dict[str, np.ndarray]) -> list:
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert text and "\n" not in text, repr(text)
    return text


# ---- dtypes ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_gets_a_nonzero_feed_that_onnxruntime_accepts(tmp_path, dtype):
    path = make_identity_model(tmp_path / "m.onnx", dtype, shape=("N", 5))
    info = load_model(path)
    assert info.inputs == (TensorInfo("x", dtype, ("N", 5)),)
    feeds, _ = make_feeds(info, dims={"N": 4})
    x = feeds["x"]
    assert x.shape == (4, 5)
    if dtype == "string":
        assert x.dtype == object and all(isinstance(s, str) and s for s in x.ravel())
    else:
        assert str(x.dtype) == dtype
        assert np.any(x.astype(np.float64) != 0)
    assert describe_feeds(feeds) == [f"x: {dtype}[4x5]"]
    if dtype == "bfloat16":
        # onnxruntime's run() can't take an ml_dtypes array; an OrtValue of the raw bits is how bfloat16 goes in.
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x.view(np.uint16), TensorProto.BFLOAT16)
        (y,) = sess.run_with_ort_values(["y"], {"x": value})
        assert y.data_type() == "tensor(bfloat16)" and y.shape() == [4, 5]
    else:
        (y,) = run(path, feeds)
        np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("dtype", ["float16", "int8", "uint64", "bool"])
def test_cast_models_run(tmp_path, dtype):
    path = make_cast_model(tmp_path / "c.onnx", dtype)
    feeds, _ = make_feeds(load_model(path), batch=3)
    (y,) = run(path, feeds)
    assert y.shape == (3, 3) and y.dtype == np.float32 and np.any(y != 0)


def test_floats_in_range_and_seeded(tmp_path):
    path = make_identity_model(tmp_path / "m.onnx", "float32", shape=(64, 64))
    info = load_model(path)
    a, _ = make_feeds(info, seed=1)
    b, _ = make_feeds(info, seed=1)
    c, _ = make_feeds(info, seed=2)
    np.testing.assert_array_equal(a["x"], b["x"])
    assert not np.array_equal(a["x"], c["x"])
    assert a["x"].min() >= -1 and a["x"].max() < 1


def test_ints_small_positive_and_bool_has_a_true(tmp_path):
    ints = make_identity_model(tmp_path / "i.onnx", "uint8", shape=(1000,))
    x = make_feeds(load_model(ints))[0]["x"]
    assert x.min() >= 1 and x.max() < 10
    one = make_identity_model(tmp_path / "b.onnx", "bool", shape=(1,))
    for seed in range(20):
        assert make_feeds(load_model(one), seed=seed)[0]["x"].all()


def test_scalar_input_gives_0d_array(tmp_path):
    path = make_identity_model(tmp_path / "s.onnx", "float32", shape=())
    feeds, notes = make_feeds(load_model(path))
    assert feeds["x"].shape == () and feeds["x"] != 0 and notes == []
    assert describe_feeds(feeds) == ["x: float32[]"]
    (y,) = run(path, feeds)
    assert y.shape == ()


# ---- dims and overrides --------------------------------------------------------------------------------------------
def test_symbolic_and_unnamed_dims_default_to_1_with_notes(tmp_path):
    path = make_add_model(tmp_path / "a.onnx", ["N", None, 3], ["N", 1, 3])
    info = load_model(path)
    assert info.inputs[0].shape == ("N", None, 3)
    assert info.free_dims == ("N", "a[1]")
    feeds, notes = make_feeds(info)
    assert feeds["a"].shape == (1, 1, 3) and feeds["b"].shape == (1, 1, 3)
    assert notes == ["free dim 'N' of input 'a' set to 1 (override with --dim N=VALUE)",
                     "input 'a' axis 1 is unnamed; set to 1 (override with --shape a=...)"]
    run(path, feeds)


def test_question_mark_and_negative_dims_are_unnamed(tmp_path):
    m = model_of([helper.make_node("Identity", ["x"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["?", 2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = -1
    info = load_model(save(m, tmp_path / "q.onnx"))
    assert info.inputs[0].shape == (None, None)


def test_dim_batch_shape_value_input_overrides(tmp_path):
    path = make_add_model(tmp_path / "a.onnx", ["N", None, 3], ["N", "M", 3])
    info = load_model(path)
    npy = tmp_path / "b.npy"
    np.save(npy, np.full((2, 4, 3), 7, dtype=np.float64))
    feeds, notes = make_feeds(info, dims={"N": 2, "M": 9}, shapes={"a": (2, 4, 3)}, inputs={"b": str(npy)})
    assert feeds["a"].shape == (2, 4, 3)
    assert feeds["b"].dtype == np.float32 and (feeds["b"] == 7).all()
    assert notes == ["input 'b': b.npy converted to float32"]
    (y,) = run(path, feeds)
    assert y.shape == (2, 4, 3)

    feeds, notes = make_feeds(info, batch=5, values={"b": 2.5})
    assert feeds["a"].shape == (5, 1, 3) and feeds["b"].shape == (5, 1, 3) and (feeds["b"] == 2.5).all()
    assert notes == ["free dim 'M' of input 'b' set to 1 (override with --dim M=VALUE)",
                     "input 'a' axis 1 is unnamed; set to 1 (override with --shape a=...)"]
    feeds, _ = make_feeds(info, batch=5, dims={"N": 2, "a[1]": 1})  # --dim beats --batch; unnamed dims by index
    assert feeds["a"].shape == (2, 1, 3)
    run(path, feeds)


def test_value_fills_in_the_input_dtype(tmp_path):
    path = make_identity_model(tmp_path / "i.onnx", "int64", shape=[])
    feeds, _ = make_feeds(load_model(path), values={"x": 16000.0})
    assert feeds["x"].dtype == np.int64 and feeds["x"].shape == () and feeds["x"] == 16000
    with pytest.raises(ModelError, match="whole number"):
        make_feeds(load_model(path), values={"x": 0.5})


@pytest.mark.parametrize("kwargs, match", [
    ({"dims": {"n": 3}}, r"--dim: unknown free dim 'n'; did you mean 'N'\? \(free dims: N, a\[1\]\)"),
    ({"shapes": {"aa": (1, 1, 3)}}, r"--shape: unknown input 'aa'; did you mean 'a'\? \(inputs: a, b\)"),
    ({"values": {"B": 1.0}}, r"--value: unknown input 'B'; did you mean 'b'\?"),
    ({"inputs": {"zzz": "x.npy"}}, r"--input: unknown input 'zzz' \(inputs: a, b\)"),
])
def test_unknown_override_names_error_with_suggestion(tmp_path, kwargs, match):
    info = load_model(make_add_model(tmp_path / "a.onnx", ["N", None, 3], ["N", 1, 3]))
    with pytest.raises(ModelError, match=match) as exc:
        make_feeds(info, **kwargs)
    one_line(exc)


def test_shape_override_must_fit_the_model(tmp_path):
    info = load_model(make_identity_model(tmp_path / "m.onnx", "float32", shape=("N", 3)))
    assert make_feeds(info, shapes={"x": (6, 3)})[0]["x"].shape == (6, 3)
    with pytest.raises(ModelError, match=r"^--shape x=1x3x3: input 'x' has rank 2 \(Nx3\), not 3$"):
        make_feeds(info, shapes={"x": (1, 3, 3)})
    with pytest.raises(ModelError, match=r"^--shape x=2x4: axis 1 of input 'x' is fixed to 3 \(Nx3\)$"):
        make_feeds(info, shapes={"x": (2, 4)})


def test_npy_input_errors(tmp_path):
    info = load_model(make_identity_model(tmp_path / "m.onnx", "float32", shape=("N", 3)))
    with pytest.raises(ModelError, match="--input x: file not found"):
        make_feeds(info, inputs={"x": str(tmp_path / "nope.npy")})
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(ModelError, match="--input x: .*junk.npy is not a .npy file") as exc:
        make_feeds(info, inputs={"x": str(tmp_path / "junk.npy")})
    one_line(exc)
    np.save(tmp_path / "wrong.npy", np.zeros((2, 4), np.float32))
    with pytest.raises(ModelError, match="axis 1 of input 'x' is fixed to 3"):
        make_feeds(info, inputs={"x": str(tmp_path / "wrong.npy")})


def test_unknown_rank_needs_a_shape(tmp_path):
    path = make_add_model(tmp_path / "a.onnx", None, [1])
    info = load_model(path)
    assert info.inputs[0].shape is None
    with pytest.raises(ModelError, match=r"input 'a' has no declared shape; give one with --shape a="):
        make_feeds(info)
    feeds, _ = make_feeds(info, shapes={"a": [2, 1]})
    assert run(path, feeds)[0].shape == (2, 1)


def test_sequence_input_is_refused(tmp_path):
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    m = model_of([helper.make_node("SequenceLength", ["s"], ["n"])], [seq],
                 [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    info = load_model(save(m, tmp_path / "s.onnx"))
    assert info.inputs[0].dtype == "sequence"
    with pytest.raises(ModelError, match="input 's' is a sequence type; ortop can only feed tensors"):
        make_feeds(info)


# ---- gather bounds -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("via", [(), ("Cast", "Identity"), ("Unsqueeze",)])
def test_gather_ids_stay_inside_the_table(tmp_path, via):
    if via == ("Unsqueeze",):  # Unsqueeze needs its axes input; build by hand
        path = make_gather_model(tmp_path / "g.onnx", 7, ids_dtype="int32", ids_shape=["seq"])
        m = onnx.load(path)
        axes = onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")
        m.graph.initializer.append(axes)
        m.graph.node.insert(0, helper.make_node("Unsqueeze", ["ids", "axes"], ["ids_u"]))
        m.graph.node[1].input[1] = "ids_u"
        del m.graph.output[0].type.tensor_type.shape.dim[:]
        path = save(m, path)
    else:
        path = make_gather_model(tmp_path / "g.onnx", 7, ids_dtype="int32", ids_shape=["seq"], via=via)
    info = load_model(path)
    assert info.gather_bounds == {"ids": 7}
    feeds, notes = make_feeds(info, dims={"seq": 200})
    ids = feeds["ids"]
    assert ids.dtype == np.int32 and ids.min() >= 1 and ids.max() <= 6 and len(set(ids.tolist())) == 6
    assert "input 'ids' drawn from [1, 7) (size of the table it indexes)" in notes
    (y,) = run(path, feeds)  # an out-of-range id would fail the run
    assert y.size == 200 * 4


def test_out_of_range_ids_really_fail_in_ort(tmp_path):
    """Guards the test above: onnxruntime does reject an id equal to the table size."""
    path = make_gather_model(tmp_path / "g.onnx", 7, ids_shape=[3])
    with pytest.raises(Exception, match="out of bounds|indices"):
        run(path, {"ids": np.array([0, 7, 1], np.int64)})


def test_gather_axis_and_minimum_of_tables(tmp_path):
    t1 = onnx.numpy_helper.from_array(np.zeros((50, 5), np.float32), "t1")
    t2 = onnx.numpy_helper.from_array(np.zeros((3, 11), np.float32), "t2")
    nodes = [helper.make_node("Gather", ["t1", "ids"], ["a"], axis=-1),  # 5 on the last axis
             helper.make_node("Gather", ["t2", "ids"], ["b"], axis=0)]   # 3 on axis 0
    const = helper.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(np.zeros((9, 2), np.float32)))
    nodes += [const, helper.make_node("Gather", ["c", "ids2"], ["d"])]
    ins = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"]),
           helper.make_tensor_value_info("ids2", TensorProto.INT64, ["n"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "abd"]
    path = save(model_of(nodes, ins, outs, [t1, t2]), tmp_path / "g.onnx")
    info = load_model(path)
    assert info.gather_bounds == {"ids": 3, "ids2": 9}
    feeds, _ = make_feeds(info, dims={"n": 100})
    run(path, feeds)


def test_masks_filled_with_ones_and_token_types_bounded(tmp_path):
    path = make_bert_like_model(tmp_path / "bert.onnx", vocab=30, types=2)
    info = load_model(path)
    assert info.gather_bounds == {"input_ids": 30, "token_type_ids": 2}
    feeds, notes = make_feeds(info, dims={"batch": 2, "seq": 64})
    assert (feeds["attention_mask"] == 1).all()
    assert (feeds["token_type_ids"] == 1).all()  # [1, 2): never all zeros, always in range
    assert feeds["input_ids"].max() < 30
    assert "input 'attention_mask' filled with 1s (a mask; override with --value/--input)" in notes
    (y,) = run(path, feeds)
    assert y.shape == (2, 64, 8)


def test_embed_layer_normalization_tables(tmp_path):
    def table(name, *shape):
        return onnx.numpy_helper.from_array(np.zeros(shape, np.float32), name)

    inits = [table("word", 100, 8), table("pos", 16, 8), table("seg", 2, 8), table("gamma", 8), table("beta", 8)]
    node = helper.make_node("EmbedLayerNormalization",
                            ["input_ids", "segment_ids", "word", "pos", "seg", "gamma", "beta", "mask"],
                            ["out", "mask_index"], domain="com.microsoft")
    ins = [helper.make_tensor_value_info(n, TensorProto.INT32, ["b", "s"])
           for n in ("input_ids", "segment_ids", "mask")]
    outs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("mask_index", TensorProto.INT32, None)]
    path = save(model_of([node], ins, outs, inits, extra_opsets={"com.microsoft": 1}), tmp_path / "e.onnx")
    info = load_model(path)
    assert info.gather_bounds == {"input_ids": 100, "segment_ids": 2}
    feeds, _ = make_feeds(info, dims={"b": 1, "s": 16})
    assert (feeds["mask"] == 1).all()
    run(path, feeds)


# ---- structure -----------------------------------------------------------------------------------------------------
def test_initializer_listed_as_input_is_not_fed(tmp_path):
    path = make_initializer_input_model(tmp_path / "ir3.onnx")
    info = load_model(path)
    assert [t.name for t in info.inputs] == ["x"] and info.initializer_inputs == ("B",)
    feeds, _ = make_feeds(info)
    assert set(feeds) == {"x"}
    (y,) = run(path, feeds)
    np.testing.assert_allclose(y, feeds["x"] + 1)
    with pytest.raises(ModelError, match="B are initializers, not fed"):
        make_feeds(info, values={"B": 1.0})


def test_if_subgraph_ops_are_counted(tmp_path):
    path = make_if_model(tmp_path / "if.onnx")
    info = load_model(path)
    assert info.control_flow == ("If",)
    assert info.op_histogram == {"Add": 1, "If": 1, "Mul": 1, "Neg": 1}
    assert info.num_nodes == 4
    feeds, notes = make_feeds(info, dims={"N": 3})
    assert feeds["cond"].shape == () and feeds["cond"].dtype == np.bool_
    run(path, feeds)


def test_summary_fields(tmp_path):
    path = make_matmul_model(tmp_path / "mm.onnx", n=64)
    info = load_model(path)
    assert isinstance(info, ModelInfo)
    assert info.ir_version == 10 and info.opsets == {"ai.onnx": 17} and info.producer == "ortop-tests 1"
    assert info.num_initializers == 2 and info.param_bytes == (64 * 64 + 64) * 4
    assert list(info.op_histogram) == ["Add", "MatMul", "Relu"] and info.control_flow == ()
    assert info.outputs == (TensorInfo("y", "float32", ("batch", 64)),)
    text = format_info(info)
    assert "x: float32[batchx64]" in text and "MatMul 1" in text and "16.2 KiB" in text
    feeds, _ = make_feeds(info, batch=8)
    assert run(path, feeds)[0].shape == (8, 64)


def test_op_histogram_sorted_by_count(tmp_path):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Neg", ["b"], ["y"])]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])])
    info = load_model(save(m, tmp_path / "m.onnx"))
    assert list(info.op_histogram.items()) == [("Neg", 2), ("Relu", 1)]


# ---- load errors ---------------------------------------------------------------------------------------------------
def test_load_errors_are_one_line(tmp_path):
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ModelError, match=f"^model file not found: {missing}$") as exc:
        load_model(str(missing))
    one_line(exc)
    with pytest.raises(ModelError, match=f"^{tmp_path} is a directory, not an .onnx file$"):
        load_model(str(tmp_path))

    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ModelError, match=r"garbage.onnx is not a valid ONNX model \(") as exc:
        load_model(str(garbage))
    one_line(exc)

    text = tmp_path / "text.onnx"
    text.write_text("hello, this is not a model\n" * 10)
    with pytest.raises(ModelError, match="is not a valid ONNX model") as exc:
        load_model(str(text))
    one_line(exc)

    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match=r"empty.onnx is not a valid ONNX model \(empty file\)$"):
        load_model(str(empty))


def test_truncated_model_is_invalid(tmp_path):
    full = make_gather_model(tmp_path / "full.onnx", 2000, dim=16)
    data = open(full, "rb").read()
    for cut in (len(data) // 2, len(data) - 7, 40):
        part = tmp_path / f"cut{cut}.onnx"
        part.write_bytes(data[:cut])
        with pytest.raises(ModelError, match="is not a valid ONNX model") as exc:
            load_model(str(part))
        one_line(exc)


def test_ir_too_new(tmp_path):
    m = model_of([helper.make_node("Identity", ["x"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], ir_version=14)
    path = save(m, tmp_path / "model.onnx")
    with pytest.raises(ModelError, match=r"^model.onnx has IR version 14 but the installed onnxruntime \S+ reads up "
                                         r"to IR 13: upgrade onnxruntime") as exc:
        load_model(path)
    one_line(exc)
    with pytest.raises(Exception, match="max supported IR version: 13"):  # onnxruntime agrees
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    m.ir_version = 13
    load_model(save(m, path))
    run(path, {"x": np.ones(1, np.float32)})


def test_measured_ir_table_matches_onnxruntime():
    """The hard-coded IR limit for this onnxruntime is what onnxruntime itself reports."""
    from ortop.model.inspect import _MEASURED_MAX_IR, _ort_version, _version_tuple

    version = _ort_version()
    assert version == ort.__version__
    probed = _probe_max_ir()
    assert probed is not None and probed >= 10
    if _version_tuple(version) in _MEASURED_MAX_IR:
        assert _MEASURED_MAX_IR[_version_tuple(version)] == probed


def test_check_ir_supported_accepts_current(tmp_path):
    info = load_model(make_matmul_model(tmp_path / "m.onnx"))
    check_ir_supported(info)


def test_missing_external_data_is_reported(tmp_path):
    m = onnx.load(make_matmul_model(tmp_path / "m.onnx", n=64))
    path = str(tmp_path / "ext.onnx")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
              size_threshold=0)
    info = load_model(path)
    assert info.param_bytes == (64 * 64 + 64) * 4
    os.remove(tmp_path / "ext.data")
    with pytest.raises(ModelError, match="external data file that is missing: ext.data"):
        load_model(path)


def test_load_does_not_import_onnxruntime_or_textual(tmp_path):
    path = make_matmul_model(tmp_path / "m.onnx")
    code = ("import sys; from ortop.model import load_model, make_feeds; i = load_model(sys.argv[1]); "
            "make_feeds(i); assert 'onnxruntime' not in sys.modules and 'textual' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, path], check=True)


# ---- onnxruntime's own example models --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sigmoid.onnx", "logreg_iris.onnx", "mul_1.onnx"])
def test_onnxruntime_datasets_load_and_run(tmp_path, name):
    from onnxruntime.datasets import get_example

    path = shutil.copy(get_example(name), tmp_path / name)
    info = load_model(path)
    feeds, _ = make_feeds(info)
    outs = run(str(path), feeds)
    assert outs and info.num_nodes >= 1
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == [t.name for t in info.inputs]


# ---- text helpers --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, shape", [("1x3x224x224", (1, 3, 224, 224)), ("1,3,224,224", (1, 3, 224, 224)),
                                         (" 8 ", (8,)), ("[2, 5]", (2, 5)), ("4X4", (4, 4))])
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["", "x", "1x", "1xax3", "1x0x3", "-1x3", "1.5x2", "1;2"])
def test_parse_shape_rejects_junk(text):
    with pytest.raises(ModelError, match="bad shape") as exc:
        parse_shape(text)
    one_line(exc)


# ---- hostile files -------------------------------------------------------------------------------------------------
def test_fifo_device_and_symlink_loop_as_model_are_refused_without_hanging(tmp_path):
    fifo = tmp_path / "f.onnx"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="not a regular file"):
        load_model(fifo)  # open() on a FIFO would block forever
    with pytest.raises(ModelError, match="not a regular file"):
        load_model("/dev/zero")
    loop = tmp_path / "loop.onnx"
    loop.symlink_to(loop)
    with pytest.raises(ModelError, match="cannot read the model"):
        load_model(loop)


def test_opset_newer_than_onnxruntime_is_bad_input_with_a_fix(tmp_path):
    from ortop.model.inspect import _MEASURED_MAX_OPSET, _ort_version, _version_tuple

    max_opset = _MEASURED_MAX_OPSET.get(_version_tuple(_ort_version() or "0"))
    if max_opset is None:
        pytest.fail("no measured opset limit for this onnxruntime: measure it and add it to _MEASURED_MAX_OPSET")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    for opset, ok in ((max_opset, True), (max_opset + 1, False)):
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
        path = str(tmp_path / f"op{opset}.onnx")
        onnx.save(m, path)
        if ok:
            load_model(path)
            run(path, {"x": np.ones(1, np.float32)})  # the limit is onnxruntime's own
        else:
            with pytest.raises(ModelError, match=f"opset {opset} .* up to opset {max_opset}"):
                load_model(path)
            with pytest.raises(Exception, match=f"till opset {max_opset}"):
                run(path, {"x": np.ones(1, np.float32)})


def test_huge_synthetic_feed_is_refused_before_allocating(tmp_path):
    info = load_model(make_matmul_model(tmp_path / "m.onnx", n=4))
    with pytest.raises(ModelError, match=r"input 'x' would be 1000000000x4 float32 = 14.90 GiB"):
        make_feeds(info, dims={"batch": 1_000_000_000})


def test_input_files_that_are_not_npy_are_named(tmp_path):
    info = load_model(make_matmul_model(tmp_path / "m.onnx", n=4))
    text = tmp_path / "x.txt"
    text.write_text("1 2 3 4")
    fifo = tmp_path / "x.fifo"
    os.mkfifo(fifo)
    cases = {str(tmp_path): "is a directory", str(text): "is not a .npy file", str(fifo): "not a regular file",
             str(tmp_path / "none.npy"): "file not found"}
    for path, message in cases.items():
        with pytest.raises(ModelError, match=message):
            make_feeds(info, inputs={"x": path})
