"""The doctor's model-level findings measured: the fixed copy against the original, interleaved."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from onnx import helper, numpy_helper

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.doctor.diagnose import diagnose
from ortop.doctor.findings import Finding
from ortop.doctor.modelfix import MODEL_FIXES, FixMeasured, applicable, measure_model_fixes, merge
from ortop.measure.compare import Comparison
from ortop.model import load_model
from tests.models import _vi, make_initializer_input_model, make_matmul_model, model_of, save

NO_OPT = {"session.graph_optimization_level": "disable"}


def make_foldable_input_model(path: Path, n: int = 192) -> str:
    """y = x @ (B @ C): B and C are initializers and B is also listed as a graph input, so ORT cannot fold B @ C
    (a caller may override B) and multiplies two n×n matrices at every run; a copy without B in the inputs folds
    it once, at session start."""
    rng = np.random.default_rng(0)
    b = numpy_helper.from_array((rng.standard_normal((n, n)) / n).astype(np.float32), "B")
    c = numpy_helper.from_array((rng.standard_normal((n, n)) / n).astype(np.float32), "C")
    nodes = [helper.make_node("MatMul", ["B", "C"], ["BC"]), helper.make_node("MatMul", ["x", "BC"], ["y"])]
    return save(model_of(nodes, [_vi("x", "float32", [1, n]), _vi("B", "float32", [n, n])],
                         [_vi("y", "float32", [1, n])], [b, c]), path)


def _comparison(verdict: str, change: float = -20.0) -> Comparison:
    return Comparison(0, 1, "p50", 1.0, 1.0 + change / 100, change, change - 2, change + 2, verdict != "undecided",
                      verdict, 10, None)


# ---- which findings have a copy to measure -----------------------------------------------------------------------
def test_applicable_fixes_follow_the_model_and_the_profile(tmp_path):
    plain = load_model(make_matmul_model(tmp_path / "m.onnx", n=8))
    listed = load_model(make_initializer_input_model(tmp_path / "ii.onnx"))
    assert applicable(plain, Profile()) == []
    assert [f.check for f in applicable(listed, Profile())] == ["initializer-inputs"]
    assert [f.check for f in applicable(plain, profile_mod.merge(Profile(), **NO_OPT))] == ["unoptimized-graph"]
    assert [f.check for f in applicable(plain, profile_mod.merge(
        Profile(), **{"session.graph_optimization_level": "basic"}))] == ["unoptimized-graph"]
    assert {f.check for f in MODEL_FIXES} == {"initializer-inputs", "unoptimized-graph"}


def test_merge_puts_the_measurement_in_the_finding_and_downgrades_a_fix_that_gains_nothing():
    static = Finding("initializer-inputs", "warning", "listed", {"initializer_inputs": 1}, "write a copy")
    other = Finding("threads", "warning", "too many", {}, "fewer")
    none = FixMeasured("initializer-inputs", "the copy", {"p50": _comparison("no difference", 0.5)}, "identical")
    out = merge([static, other], {"initializer-inputs": none}, Profile())
    f = out[0]
    assert f.severity == "info" and "no gain measured here" in f.fix and f.fix.startswith("write a copy")
    assert f.evidence["fixed_copy"]["agreement"] == "identical" and f.evidence["initializer_inputs"] == 1
    assert out[1] is other
    gain = FixMeasured("initializer-inputs", "the copy", {"p50": _comparison("faster")})
    assert merge([static], {"initializer-inputs": gain}, Profile())[0].severity == "warning"
    undecided = FixMeasured("initializer-inputs", "the copy", {"p50": _comparison("undecided")})
    assert merge([static], {"initializer-inputs": undecided}, Profile())[0].severity == "warning"


def test_an_unoptimized_graph_becomes_a_finding_of_its_own_warning_only_when_the_copy_is_faster():
    prof = profile_mod.merge(Profile(), **NO_OPT)
    fast = FixMeasured("unoptimized-graph", "the graph ORT optimized offline", {"p50": _comparison("faster")})
    (f,) = merge([], {"unoptimized-graph": fast}, prof)
    assert f.check == "unoptimized-graph" and f.severity == "warning" and "'disable'" in f.message
    assert "runs faster here" in f.fix
    differs = FixMeasured("unoptimized-graph", "x", {"p50": _comparison("faster")}, outputs_differ=("y cosine",))
    assert merge([], {"unoptimized-graph": differs}, prof)[0].severity == "info"
    failed = FixMeasured("unoptimized-graph", "x", error="the copy could not be written: no room")
    (g,) = merge([], {"unoptimized-graph": failed}, prof)
    assert g.severity == "info" and "could not be measured: the copy could not be written" in g.fix


# ---- measured, for real ------------------------------------------------------------------------------------------
@pytest.mark.integration
def test_the_copy_without_initializer_inputs_folds_constants_and_is_measured_faster(tmp_path):
    model = make_foldable_input_model(tmp_path / "fold.onnx")
    said: list[str] = []
    out = measure_model_fixes(model, Profile(), budget_s=6.0, on_start=said.append)
    m = out["initializer-inputs"]
    assert not m.error, m.error
    assert said and "without initializers" in said[0]
    p50 = m.comparisons["p50"]
    assert p50.verdict == "faster" and p50.ci_high_pct < -20  # B @ C no longer computed at every run
    assert m.outputs and not m.outputs_differ  # the same weights: the same outputs, within the tolerance
    assert not list(tmp_path.glob("*-fixed.onnx"))  # the copy lived in a temporary folder


@pytest.mark.integration
def test_no_copy_when_nothing_applies_and_none_without_a_budget(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    assert measure_model_fixes(model, Profile(), budget_s=2.0) == {}
    listed = make_initializer_input_model(tmp_path / "ii.onnx")
    assert measure_model_fixes(listed, Profile(), budget_s=0) == {}


@pytest.mark.integration
def test_doctor_measures_the_fix_only_in_its_measured_tier(tmp_path):
    model = make_foldable_input_model(tmp_path / "fold.onnx", n=128)
    quick = diagnose(model, Profile(), budget_s=0)
    assert quick.model_fixes == {}
    f = next(f for f in quick.findings if f.check == "initializer-inputs")
    assert "fixed_copy" not in f.evidence
    full = diagnose(model, profile_mod.merge(Profile(), **NO_OPT), budget_s=2.0)
    assert set(full.model_fixes) == {"initializer-inputs", "unoptimized-graph"}
    by = {f.check: f for f in full.findings}
    assert "Measured:" in by["initializer-inputs"].fix and "fixed_copy" in by["initializer-inputs"].evidence
    assert "unoptimized-graph" in by and "unoptimized-graph" in full.checks
    data = full.as_dict()
    fix = data["model_fixes"]["initializer-inputs"]
    assert fix["error"] is None and math.isfinite(fix["p50"]["change_pct"])
