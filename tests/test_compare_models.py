"""Models in a comparison: sessions of different models interleaved, fed the same inputs, their outputs compared
with the first model's; models whose inputs differ refused before anything is built."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ortop.config import profile as P
from ortop.engine.bench import ab
from ortop.engine.models import InputsDiffer, check_inputs
from ortop.measure.agreement import Agreement, Tolerance, figures
from tests.models import make_matmul_model
from tests.test_cli import env, one_error_line, ortop  # noqa: F401  (env is a fixture)

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

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


# ---- ortop compare with models ---------------------------------------------------------------------------------------
def _plan(*argv):
    from ortop.cli.compare import plan
    from ortop.cli.main import build_parser

    return plan(build_parser().parse_args(["compare", *map(str, argv)]))


def test_the_command_line_crosses_models_with_profiles_model_by_model(models, tmp_path):
    a, copy, _ = models
    p1, p2 = tmp_path / "p1.toml", tmp_path / "p2.toml"
    p1.write_text("[session]\nintra_op_num_threads = 1\n")
    p2.write_text("[session]\nintra_op_num_threads = 2\n")
    threads = [p.session.intra_op_num_threads for p in _plan(a, p1, p2).profiles]
    same = _plan(a, p1, p2)
    assert same.names == [str(p1), str(p2)] and [p.model for p in same.profiles] == [a, a] and threads == [1, 2]
    two = _plan(a, copy)  # ORT's defaults on each
    assert two.names == [a, copy] and [p.model for p in two.profiles] == [a, copy]
    with_p = _plan(a, copy, "--profile", p1)
    assert with_p.names == [a, copy] and {p.session.intra_op_num_threads for p in with_p.profiles} == {1}
    assert _plan(a, p1, copy).names == _plan(a, copy, "--profile", p1).names  # a profile anywhere, or --profile
    crossed = _plan(a, copy, p1, "--profile", p2, "--threads", 3)
    assert crossed.names == [f"{a} + {p1}", f"{a} + {p2}", f"{copy} + {p1}", f"{copy} + {p2}"]
    assert [p.model for p in crossed.profiles] == [a, a, copy, copy]
    assert {p.session.intra_op_num_threads for p in crossed.profiles} == {3}  # the flag over every profile
    # with no model, each profile runs the one it names (a relative path is the profile file's)
    shutil.copy(a, tmp_path / "near.onnx")
    own1, own2 = tmp_path / "own1.toml", tmp_path / "own2.toml"
    own1.write_text('model = "near.onnx"\n[session]\nintra_op_num_threads = 1\n')
    own2.write_text(f'model = "{copy}"\n')
    own = _plan(own1, own2)
    assert own.names == [str(own1), str(own2)] and [p.model for p in own.profiles] == [str(tmp_path / "near.onnx"),
                                                                                       copy]
    # a model file not named .onnx is known by its content
    bare = shutil.copy(a, tmp_path / "model.bin")
    assert _plan(a, bare).names == [a, str(bare)]


def test_ort_defaults_are_named_as_a_profile(models, tmp_path):
    """The shipped profile ``defaults`` is ORT's defaults, as two models with no profile get them: named where a
    profile goes (an argument or --profile), flags on top, and the configuration called by that name."""
    a, copy, _ = models
    p1 = tmp_path / "p1.toml"
    p1.write_text("[session]\nintra_op_num_threads = 1\n")
    def settings(prof):  # all but the words describing it
        return replace(prof, description="")

    bare = _plan(a, copy).profiles[0]  # ORT's defaults, as they always were
    named = _plan(a, "defaults", p1)
    assert named.names == ["defaults", str(p1)] and settings(named.profiles[0]) == bare
    assert _plan(a, "--profile", "defaults", "--profile", p1).names == ["defaults", str(p1)]
    flagged = _plan(a, "defaults", "defaults", "--threads", 1)
    assert flagged.names == ["defaults", "defaults"]
    assert [p.session.intra_op_num_threads for p in flagged.profiles] == [1, 1]
    assert [settings(p) for p in _plan(a, copy, "--profile", "defaults").profiles] == _plan(a, copy).profiles


@pytest.mark.slow
def test_bad_model_comparisons_are_one_line_and_exit_2(models, tmp_path, env):  # noqa: F811
    from onnx import helper

    from tests.models import _vi, model_of, save

    a, copy, _ = models
    other = save(model_of([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", "float64", [8, 32])],
                          [_vi("y", "float64", [8, 32])]), tmp_path / "f64.onnx")
    no_model = tmp_path / "no-model.toml"
    no_model.write_text("[session]\nintra_op_num_threads = 1\n")
    cases = {
        "inputs differ": ([a, other], "the models take different inputs: input 'x' is float32 in a.onnx but float64 "
                                      "in f64.onnx"),
        "one model": ([a], "compare needs at least two profiles, or two models"),
        "a profile without its model": ([no_model, no_model], "names no model: give one first"),
        "missing second model": ([a, tmp_path / "nope.onnx"], "model file not found"),
        "negative atol": ([a, copy, "--atol", "-1"], "--atol"),
        "cosine above 1": ([a, copy, "--cosine", "1.5"], "between -1 and 1"),
        "rtol text": ([a, copy, "--rtol", "tight"], "--rtol"),
    }
    for case, (args, needle) in cases.items():
        r = ortop("compare", *args, "--budget", 1, env=env)
        line = one_error_line(r, 2)
        assert needle in line, (case, line)
        assert r.stdout == "", case


@pytest.mark.integration
def test_compare_flags_a_perturbed_copy_in_its_row_and_shows_each_models_figures(models, env):  # noqa: F811
    a, _, perturbed = models
    r = ortop("compare", a, perturbed, "--threads", 1, "--budget", 1, "--atol", "0.001", "--cosine", "off", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"models   {a}, {perturbed}"
    rows = [ln for ln in lines if ln.startswith(("  0  ", "  1  "))]
    assert rows[0].split()[1] == a and "outputs differ" not in rows[0]
    assert rows[1].split()[1] == perturbed and "← outputs differ: y max abs " in rows[1] and "> atol 0.001" in rows[1]
    models_rows = [ln.split() for ln in rows[2:4]]
    assert [m[1] for m in models_rows] == ["a.onnx", "a-perturbed.onnx"]
    assert [" ".join(m[2:4]) for m in models_rows] == [f"{os.path.getsize(p) / 1024:.1f} KiB" for p in (a, perturbed)]
    assert f"outputs against {a} (the same inputs, one run after the warm-up):" in lines
    assert rows[4].startswith("  1  y: max abs ") and "cosine" in rows[4] and "top-1" in rows[4]
    assert f"{perturbed} vs {a} (" in r.stdout and r.stderr == ""


@pytest.mark.integration
def test_compare_json_of_profiles_that_name_their_models(models, tmp_path, env):  # noqa: F811
    a, copy, _ = models
    p1, p2 = tmp_path / "p1.toml", tmp_path / "p2.toml"
    p1.write_text(f'model = "{a}"\n[session]\nintra_op_num_threads = 1\n')
    p2.write_text(f'model = "{copy}"\n[session]\nintra_op_num_threads = 1\n')
    r = ortop("compare", p1, p2, "--budget", 1, "--json", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == a and d["models"] == [a, copy] and d["workers"] == 1
    assert d["tolerance"] == {"atol": None, "rtol": 0.01, "cosine": 0.999}
    first, second = d["configs"]
    assert [first["profile"], second["profile"]] == [str(p1), str(p2)]
    assert first["model_bytes"] == second["model_bytes"] > 0 and first["ort_version"] == second["ort_version"]
    assert first["agreement"] is None and first["outputs_differ"] == []
    assert second["agreement"] == {"y": {"max_abs": 0.0, "mean_rel": 0.0, "cosine": 1.0, "top1": 1.0,
                                         "elements": 256, "sampled": False, "nonfinite": 0}}
    assert second["outputs_differ"] == [] and first["create_ms"] > 0 and second["first_run_ms"] > 0


def test_the_compare_page_shows_each_models_size_and_its_outputs_agreement():
    from html.parser import HTMLParser

    from ortop.report import compare_page

    def config(name: str, model: str, size: int, agreement, differs=()):
        return {"profile": name, "runs": 900, "p50_ms": 1.0, "p99_ms": 2.0, "throughput_per_s": 800.0,
                "cpu_ms_per_run": 1.1, "blocks": 8, "rate_kept": True, "model": model, "model_bytes": size,
                "ort_version": "1.31.1", "create_ms": 12.5, "first_run_ms": 3.25, "rss_mib": 90.0, "session_mib": 14.2,
                "agreement": agreement, "outputs_differ": list(differs)}

    same = {"max_abs": 0.0, "mean_rel": 0.0, "cosine": 1.0, "top1": 1.0, "elements": 10, "sampled": False,
            "nonfinite": 0}
    moved = {"max_abs": 0.31, "mean_rel": 0.0213, "cosine": 0.99897, "top1": 0.94, "elements": 10, "sampled": False,
             "nonfinite": 0}
    data = {"model": "/m/net.onnx", "models": ["/m/net.onnx", "/m/copy.onnx", "/m/net.int8.onnx"], "budget_s": 10.0,
            "objective": "p50", "tolerance": {"atol": 0.1, "rtol": 0.01, "cosine": 0.999},
            "configs": [config("/m/net.onnx", "/m/net.onnx", 3_300_000, None),
                        config("/m/copy.onnx", "/m/copy.onnx", 3_300_000, {"logits": same}),
                        config("/m/net.int8.onnx", "/m/net.int8.onnx", 830_000, {"logits": moved},
                               ["logits max abs 0.31 > atol 0.1", "logits cosine 0.99897 < 0.999"])],
            "comparisons": [], "elapsed_s": 9.0, "blocks": 30, "block_s": 0.1, "memory": {}, "warnings": []}
    page = compare_page(data)

    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.text: list[str] = []

        def handle_data(self, d):
            self.text.append(d)

    p = Text()
    p.feed(page)
    text = " ".join(p.text)
    for needle in ("Models", "3.1 MiB", "811 KiB", "1.31.1", "14.2", "the reference", "identical",
                   "differ: logits max abs 0.31 > atol 0.1; logits cosine 0.99897 < 0.999", "Outputs against net.onnx",
                   "0.0213", "0.99897", "0.940", "Tolerance: max abs ≤ 0.1, mean rel ≤ 0.01, cosine ≥ 0.999",
                   "within the tolerance", "differs: logits max abs 0.31 > atol 0.1; logits cosine 0.99897 < 0.999"):
        assert needle in text, needle
    # a comparison of profiles on one model (an older JSON without these keys, too) has neither section
    plain = {**data, "configs": [{k: v for k, v in c.items() if k not in ("model", "agreement")}
                                 for c in data["configs"]]}
    assert "<h2>Models</h2>" not in compare_page(plain) and "Outputs against" not in compare_page(plain)
