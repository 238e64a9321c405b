"""Models in a comparison: sessions of different models interleaved, fed the same inputs, their outputs compared
with the first model's; models whose inputs differ refused before anything is built."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ortop.config import profile as P
from ortop.engine import ab
from ortop.engine.models import InputsDiffer, check_inputs
from ortop.measure.agreement import Agreement, Tolerance, figures
from tests.models import make_matmul_model

ONE_THREAD = P.merge(P.Profile(), **{"session.intra_op_num_threads": 1})


def perturbed_copy(src: str, dst: str, factor: float = 1.1, columns: int = 8) -> str:
    """``src`` with the first ``columns`` columns of its weight W scaled by ``factor``."""
    m = onnx.load(src)
    for init in m.graph.initializer:
        if init.name == "W":
            w = numpy_helper.to_array(init).copy()
            w[:, :columns] *= np.float32(factor)
            init.CopyFrom(numpy_helper.from_array(w, "W"))
    onnx.save(m, dst)
    return dst


def outputs_in_process(path: str, feed_from: str) -> np.ndarray:
    """The model's output on the feeds ortop makes from ``feed_from``'s inputs (seed 0), one intra-op thread."""
    import onnxruntime as ort

    from ortop.model import load_model, make_feeds

    feeds, _ = make_feeds(load_model(feed_from))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.fixture
def models(tmp_path):
    a = make_matmul_model(tmp_path / "a.onnx", n=32, batch=8)
    b = shutil.copy(a, tmp_path / "a-copy.onnx")
    c = perturbed_copy(a, str(tmp_path / "a-perturbed.onnx"))
    return a, str(b), c


# ---- refused before anything is built ----------------------------------------------------------------------------
def test_models_whose_inputs_differ_are_refused_naming_the_difference(tmp_path):
    from onnx import helper

    from tests.models import _vi, model_of, save

    def identity(name: str, dtype: str, shape, input_name: str = "x") -> str:
        node = helper.make_node("Identity", [input_name], ["y"])
        inp = _vi(input_name, dtype, shape)
        return save(model_of([node], [inp], [_vi("y", dtype, shape)]), tmp_path / f"{name}.onnx")

    ref = identity("ref", "float32", ["N", 4])
    cases = {
        identity("name", "float32", ["N", 4], "z"): "ref.onnx has input 'x', name.onnx has not (its inputs: z)",
        identity("dtype", "float64", ["N", 4]): "input 'x' is float32 in ref.onnx but float64 in dtype.onnx",
        identity("rank", "float32", ["N", 4, 1]): "input 'x' has rank 2 in ref.onnx but 3 in rank.onnx",
        identity("fixed", "float32", ["N", 5]): "input 'x' axis 1 is 4 in ref.onnx but 5 in fixed.onnx",
        identity("batch", "float32", [2, 4]): "input 'x' axis 0 is fixed at 2 in batch.onnx but would be fed 1 (free "
                                              "in ref.onnx): set --dim N=2",
    }
    for path, words in cases.items():
        profiles = [replace(ONE_THREAD, model=ref), replace(ONE_THREAD, model=path)]
        with pytest.raises(InputsDiffer) as err:
            ab.compare_profiles(ref, profiles, budget_s=1.0)
        assert str(err.value) == f"the models take different inputs: {words}"
        assert err.value.exit_code == 2
    # a free axis fed with the size the other model fixes is fine, and so is a free dim named differently
    fits = replace(ONE_THREAD, model=identity("batch", "float32", [2, 4]),
                   workload=replace(ONE_THREAD.workload, dims={"N": 2}))
    assert set(check_inputs([replace(fits, model=ref), fits])) == {ref, fits.model}
    renamed = identity("renamed", "float32", ["batch", 4])
    check_inputs([replace(ONE_THREAD, model=ref), replace(ONE_THREAD, model=renamed)])


# ---- interleaved for real ----------------------------------------------------------------------------------------
@pytest.mark.integration
def test_a_model_and_its_byte_identical_copy_agree_exactly_across_two_workers(models):
    """The copy runs in another worker (its environment differs): its outputs come over the pipe and agree to the
    last bit with the first model's, on the same inputs."""
    a, copy, _ = models
    other_env = P.merge(replace(ONE_THREAD, model=copy), env={"OMP_WAIT_POLICY": "PASSIVE"})
    res = ab.compare_profiles("", [replace(ONE_THREAD, model=a), other_env], budget_s=1.0, names=["a", "copy"],
                              tolerance=Tolerance(atol=0.0, rtol=0.0, cosine=1.0))
    assert res.workers == 2
    first, second = res.configs
    assert (first.model, second.model) == (a, copy)
    assert first.model_bytes == second.model_bytes == len(open(a, "rb").read())
    assert first.ort_version and first.ort_version == second.ort_version
    assert first.agreement is None and second.runs > 0 and first.runs > 0
    ag = second.agreement["y"]
    assert isinstance(ag, Agreement)
    assert (ag.max_abs, ag.mean_rel, ag.cosine, ag.top1, ag.elements) == (0.0, 0.0, 1.0, 1.0, 8 * 32)
    assert second.differs == () and second.agreement_text() == "outputs identical"
    assert first.create_ms > 0 and second.first_run_ms > 0 and second.session_mib >= 0
    d = second.as_dict()
    assert d["agreement"] == {"y": {"max_abs": 0.0, "mean_rel": 0.0, "cosine": 1.0, "top1": 1.0, "elements": 256,
                                    "sampled": False, "nonfinite": 0}}
    assert d["model"] == copy and d["model_bytes"] == first.model_bytes and d["outputs_differ"] == []


@pytest.mark.integration
def test_a_perturbed_copy_differs_by_what_the_maths_says_and_is_flagged(models):
    """Models of one environment share a worker; the perturbed copy's figures are those of its outputs computed
    here in-process on the same seeded inputs."""
    a, _, perturbed = models
    res = ab.compare_profiles(a, [ONE_THREAD, replace(ONE_THREAD, model=perturbed)], budget_s=1.0,
                              names=["a", "perturbed"], tolerance=Tolerance(atol=1e-3, rtol=None, cosine=0.999999))
    assert res.workers == 1
    ag = res.configs[1].agreement["y"]
    want = figures(outputs_in_process(a, a), outputs_in_process(perturbed, a))
    assert isinstance(ag, Agreement) and (ag.max_abs, ag.mean_rel, ag.cosine) == want[:3]
    assert ag.max_abs > 0.01 and 0 < ag.mean_rel < 0.1 and 0.99 < ag.cosine < 0.999999
    atol, cosine = res.configs[1].differs
    assert atol == f"y max abs {ag.max_abs:.3g} > atol 0.001"
    assert cosine.startswith("y cosine 0.99") and cosine.endswith(" < 0.999999")
    assert float(cosine.split()[2]) < 0.999999  # shown with the digits that put it under the floor
    assert any(w.startswith("perturbed: outputs differ from a's: y max abs") for w in res.warnings)


@pytest.mark.integration
def test_a_dynamic_int8_variant_is_compared_interleaved(tmp_path):
    """onnxruntime's own quantize_dynamic on a MatMul model: smaller, interleaved with the original in one worker,
    its outputs near the original's but not equal."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    a = make_matmul_model(tmp_path / "m.onnx", n=128, batch=16)
    q = str(tmp_path / "m.int8.onnx")
    quantize_dynamic(a, q, weight_type=QuantType.QInt8)
    res = ab.compare_profiles(a, [ONE_THREAD, replace(ONE_THREAD, model=q)], budget_s=1.5, names=["fp32", "int8"],
                              tolerance=Tolerance())
    first, int8 = res.configs
    assert (first.model, int8.model) == (a, q) and res.workers == 1
    assert int8.model_bytes < first.model_bytes / 3
    assert first.runs > 0 and int8.runs > 0 and len(res.blocks) >= 4
    assert {c.metric for c in res.comparisons} == {"p50", "p99", "throughput", "cpu"}
    ag = int8.agreement["y"]
    assert isinstance(ag, Agreement)
    assert 0 < ag.max_abs < 0.2 and 0 < ag.mean_rel < 0.05 and 0.99 < ag.cosine < 1 and 0.5 < ag.top1 <= 1
