"""Profiles: strict TOML in and out, every validation error, affinity translation, and the ORT objects built from
them (ortop.ortopts) checked on real onnxruntime sessions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from ortop.config import knobs
from ortop.config import profile as pm
from ortop.config.profile import Profile, ProfileError, ProfileErrors, ProviderSettings, SessionSettings, Workload
from ortop.runtime import options as ortopts
from tests.models import make_matmul_model

FULL_TOML = """\
description = "every field set"
env = { OMP_NUM_THREADS = "4", MIMALLOC_OPTIONS = "x=1" }

[session]
intra_op_num_threads = 3
inter_op_num_threads = 2
execution_mode = "parallel"
graph_optimization_level = "extended"
enable_cpu_mem_arena = false
enable_mem_pattern = false
enable_mem_reuse = false
use_per_session_threads = false
global_intra_op_num_threads = 2
global_inter_op_num_threads = 1
allow_spinning = false
inter_op_allow_spinning = false
spin_duration_us = 100
spin_backoff_max = 4
inter_op_spin_duration_us = 20
inter_op_spin_backoff_max = 2
dynamic_block_base = 4
intra_op_thread_affinities = [[0, 1], [2]]
disable_cpu_ep_fallback = true
use_env_allocators = true
log_severity_level = 3

[session.config]
"session.set_denormal_as_zero" = "1"

[provider]
name = "cuda"
io_binding = true

[provider.options]
device_id = 0
gpu_mem_limit = 1073741824
arena_extend_strategy = "kSameAsRequested"
cudnn_conv_algo_search = "HEURISTIC"
do_copy_in_default_stream = false

[workload]
rate_hz = 50.0
concurrency = 2
replicas = 2
pin_replicas = true
warmup_runs = 3
seed = 7
batch = 2
dims = { seq = 16 }
shapes = { x = [1, 3] }
values = { sr = 16000.0 }
inputs = { ids = "ids.npy" }
arrival = "trace"
max_queue = 500
trace = "/data/requests.jsonl"
trace_speed = 2.0
trace_loop = true
dim_mix = { seq = "16..512" }
shape_mix = { x = "1x3,2x3" }
"""


def full_profile(tmp_path: Path) -> Profile:
    model = str(tmp_path / "m.onnx")
    return pm.loads(f"model = {model!r}\n" + FULL_TOML)


def err_of(text: str, path: str | None = "p.toml") -> ProfileError:
    with pytest.raises(ProfileError) as info:
        pm.loads(textwrap.dedent(text), path=path)
    return info.value


# ---- TOML round trip ----------------------------------------------------------------------------------------

def test_full_profile_reads_every_field(tmp_path: Path) -> None:
    p = full_profile(tmp_path)
    assert p.session.intra_op_thread_affinities == ((0, 1), (2,))
    assert p.session.config == {"session.set_denormal_as_zero": "1"}
    assert p.provider.options["gpu_mem_limit"] == 1073741824
    assert p.workload.shapes == {"x": (1, 3)}
    assert p.workload.values == {"sr": 16000.0}
    assert p.env == {"OMP_NUM_THREADS": "4", "MIMALLOC_OPTIONS": "x=1"}
    # Every field differs from its default, so the round trip below covers them all.
    flat_default = pm.flatten(Profile().to_dict(full=True))
    flat = pm.flatten(p.to_dict(full=True))
    for key, value in flat_default.items():
        if key in flat:
            assert flat[key] != value, key
    # ... and every declared knob (maps included) is set, so a new knob needs a line in FULL_TOML.
    for knob in knobs.registry():
        if knob.key != "model" and not knobs.is_entry(knob):
            assert knob.read(p) not in (None, knob.default), f"FULL_TOML leaves {knob.key} out"


def test_a_trace_is_relative_to_the_profile_like_the_model(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "p.toml"
    path.write_text('[workload]\narrival = "trace"\ntrace = "../requests.jsonl"\n')
    assert pm.load(path).workload.trace == str(tmp_path / "requests.jsonl")
    path.write_text('[workload]\ntrace = "/abs/requests.jsonl"\n')
    assert pm.load(path).workload.trace == "/abs/requests.jsonl"


def test_toml_round_trip(tmp_path: Path) -> None:
    p = full_profile(tmp_path)
    path = tmp_path / "full.toml"
    pm.save(p, path, header="a header\nover two lines")
    text = path.read_text()
    assert text.startswith("# a header\n# over two lines\n")
    assert pm.load(path) == p


def test_relative_model_is_relative_to_the_profile(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "p.toml"
    path.write_text('model = "../m.onnx"\n')
    assert pm.load(path).model == os.path.normpath(str(tmp_path / "m.onnx"))


def test_save_leaves_no_temp_files(tmp_path: Path) -> None:
    pm.save(full_profile(tmp_path), tmp_path / "p.toml")
    assert sorted(os.listdir(tmp_path)) == ["p.toml"]


def test_save_failure_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    pm.save(Profile(description="good"), path)
    before = path.read_text()
    bad = Profile(env={"A": object()})  # type: ignore[dict-item]  # TOML cannot hold it: serialising fails
    with pytest.raises(TypeError):
        pm.save(bad, path)
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["p.toml"]


def test_save_over_a_directory_is_refused_before_writing(tmp_path: Path) -> None:
    from ortop.errors import UsageError

    target = tmp_path / "p.toml"
    target.mkdir()  # a directory where the file should go: refused up front, nothing written
    (target / "keep").write_text("x")
    with pytest.raises(UsageError, match="it is a directory"):
        pm.save(Profile(description="x"), target)
    assert sorted(os.listdir(tmp_path)) == ["p.toml"]
    assert (target / "keep").read_text() == "x"


def test_save_failure_in_the_final_rename_removes_the_temp_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ortop import fsutil
    from ortop.errors import UsageError

    path = tmp_path / "p.toml"
    pm.save(Profile(description="good"), path)
    before = path.read_text()

    def failing_replace(src: str, dst: str) -> None:
        assert os.path.exists(src)  # the temp file was written before the rename
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "replace", failing_replace)
    with pytest.raises(UsageError, match="No space left on device"):
        pm.save(Profile(description="new"), path)
    assert sorted(os.listdir(tmp_path)) == ["p.toml"]
    assert path.read_text() == before


# ---- validation ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, key, fragment",
    [
        ('modle = "m.onnx"\n', "modle", "did you mean 'model'"),
        ("[session]\nintra_op_num_thread = 2\n", "session.intra_op_num_thread", "did you mean 'intra_op_num_threads'"),
        ("[provider]\nio_bind = true\n", "provider.io_bind", "did you mean 'io_binding'"),
        ("[workload]\nconcurency = 2\n", "workload.concurency", "did you mean 'concurrency'"),
        ('[session]\n"session.intra_op.allow_spinning" = "0"\n', "session.session.intra_op.allow_spinning",
         "use session.allow_spinning"),
    ],
)
def test_unknown_keys_at_each_level(text: str, key: str, fragment: str) -> None:
    e = err_of(text)
    assert e.key == key
    assert fragment in str(e)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('[session]\nintra_op_num_threads = "4"\n', "intra_op_num_threads must be an integer"),
        ("[session]\nallow_spinning = 1\n", "allow_spinning must be true or false"),
        ('[workload]\nrate_hz = "fast"\n', "rate_hz must be a number"),
        ("description = 3\n", "description must be a string"),
        ("env = { A = [1] }\n", "env.A must be a string"),
        ("[provider.options]\nx = { y = 1 }\n", "provider.options.x must be a plain value"),
        ('[workload]\nshapes = { x = [1, "a"] }\n', "must be a list of integers"),
        ("[session]\nintra_op_thread_affinities = [1, 2]\n", "list of lists of 0-based core numbers"),
        ("session = 3\n", "[session] must be a table"),
    ],
)
def test_wrong_types(text: str, fragment: str) -> None:
    assert fragment in str(err_of(text))


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('[session]\nexecution_mode = "paralel"\n', "did you mean 'parallel'"),
        ('[session]\ngraph_optimization_level = "max"\n', "graph_optimization_level must be one of"),
        ('[provider]\nname = "cuda"\n[provider.options]\narena_extend_strategy = "grow"\n',
         "arena_extend_strategy must be one of kNextPowerOfTwo, kSameAsRequested"),
        ('[provider]\nname = "cuda"\n[provider.options]\ncudnn_conv_algo_search = "FAST"\n',
         "cudnn_conv_algo_search must be one of"),
    ],
)
def test_bad_enum_values(text: str, fragment: str) -> None:
    assert fragment in str(err_of(text))


@pytest.mark.parametrize("field", ["intra_op_num_threads", "inter_op_num_threads", "global_intra_op_num_threads",
                                   "global_inter_op_num_threads"])
def test_negative_threads(field: str) -> None:
    assert f"{field} must be >= 0" in str(err_of(f"[session]\n{field} = -1\n"))


def test_affinity_count_mismatch() -> None:
    e = err_of("[session]\nintra_op_num_threads = 3\nintra_op_thread_affinities = [[1]]\n")
    assert "has 1 entries but intra_op_num_threads = 3 needs 2" in str(e)


def test_affinity_needs_two_threads() -> None:
    e = err_of("[session]\nintra_op_num_threads = 1\nintra_op_thread_affinities = [[1]]\n")
    assert "needs intra_op_num_threads >= 2" in str(e)
    e = err_of("[session]\nintra_op_thread_affinities = [[1]]\n")  # 0 = ORT's default count: also refused
    assert "needs intra_op_num_threads >= 2" in str(e)


def test_affinity_negative_core() -> None:
    e = err_of("[session]\nintra_op_num_threads = 2\nintra_op_thread_affinities = [[-1]]\n")
    assert "core -1 in intra_op_thread_affinities is negative" in str(e)


def test_affinity_core_beyond_host() -> None:
    p = pm.loads("[session]\nintra_op_num_threads = 2\nintra_op_thread_affinities = [[5]]\n")
    pm.validate(p)  # without host information the core is fine
    with pytest.raises(ProfileError, match=r"core 5 .* does not exist on this host \(cores 0-3\)"):
        pm.validate(p, host_cpus=4)
    pm.validate(p, host_cpus=6)


def test_config_key_shadowing_a_field() -> None:
    e = err_of('[session.config]\n"session.intra_op.allow_spinning" = "0"\n')
    assert "has a field of its own: set session.allow_spinning instead" in str(e)


def test_unknown_cuda_option() -> None:
    e = err_of('[provider]\nname = "cuda"\n[provider.options]\ngpu_mem_limt = 1\n')
    assert "unknown CUDA provider option 'gpu_mem_limt' (did you mean 'gpu_mem_limit'?)" in str(e)
    # Other providers take their options verbatim.
    pm.loads('[provider]\nname = "openvino"\n[provider.options]\ndevice_type = "CPU"\n')


def test_cuda_option_types() -> None:
    assert "gpu_mem_limit must be a non-negative integer" in str(
        err_of('[provider]\nname = "cuda"\n[provider.options]\ngpu_mem_limit = -5\n'))
    assert "enable_cuda_graph must be true or false" in str(
        err_of('[provider]\nname = "cuda"\nio_binding = true\n[provider.options]\nenable_cuda_graph = "yes"\n'))


def test_cuda_graph_needs_io_binding() -> None:
    e = err_of('[provider]\nname = "cuda"\n[provider.options]\nenable_cuda_graph = true\n')
    assert "enable_cuda_graph needs provider.io_binding = true" in str(e)


def test_cuda_graph_refuses_parallel() -> None:
    e = err_of('[session]\nexecution_mode = "parallel"\n[provider]\nname = "cuda"\nio_binding = true\n'
               '[provider.options]\nenable_cuda_graph = true\n')
    assert 'enable_cuda_graph needs execution_mode = "sequential"' in str(e)


@pytest.mark.parametrize("name", ["1BAD", "A-B", "A B"])
def test_bad_env_name(name: str) -> None:
    assert "is not a valid environment variable name" in str(err_of(f'[env]\n"{name}" = "1"\n'))


def test_workload_limits() -> None:
    assert "rate_hz must be >= 0" in str(err_of("[workload]\nrate_hz = -1.0\n"))
    assert "rate_hz must be 0..1000000, got inf" in str(err_of("[workload]\nrate_hz = inf\n"))
    assert "concurrency must be >= 1" in str(err_of("[workload]\nconcurrency = 0\n"))
    assert "warmup_runs must be >= 0" in str(err_of("[workload]\nwarmup_runs = -1\n"))
    assert "dims.seq must be >= 1" in str(err_of("[workload]\ndims = { seq = 0 }\n"))


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[session]\nspin_duration_us = -1\n", "spin_duration_us must be >= 0"),
        ("[session]\nspin_backoff_max = 0\n", "spin_backoff_max must be >= 1"),
        ("[session]\ndynamic_block_base = -4\n", "dynamic_block_base must be >= 0"),
        ("[session]\nlog_severity_level = 5\n", "log_severity_level must be 0..4"),
        ("[session]\nintra_op_num_threads = 2\nintra_op_thread_affinities = [[]]\n", "an empty core list"),
        ('[provider]\nname = ""\n', "provider.name must not be empty"),
        ("[workload]\nbatch = -1\n", "batch must be >= 0"),
        ("[workload]\nshapes = { x = [1, -3] }\n", "shapes.x has a negative dimension"),
    ],
)
def test_other_limits(text: str, fragment: str) -> None:
    assert fragment in str(err_of(text))


def test_messages_carry_file_and_line() -> None:
    e = err_of('description = "x"\n\n[session]\nintra_op_num_threads = -2\n', path="dir/p.toml")
    assert str(e).startswith("dir/p.toml:4: ")
    assert (e.path, e.line, e.key) == ("dir/p.toml", 4, "session.intra_op_num_threads")
    e = err_of("[workload]\nwarmup_runs = 1\nconcurrency = 0\n", path="w.toml")
    assert str(e).startswith("w.toml:3: concurrency must be >= 1")
    e = err_of("[session]\nx = = 1\n", path="bad.toml")
    assert str(e).startswith("bad.toml:2: not valid TOML")


def test_several_errors_at_once() -> None:
    with pytest.raises(ProfileErrors) as info:
        pm.loads("[session]\nintra_op_num_threads = -1\n[workload]\nconcurrency = 0\n", path="p.toml")
    assert len(info.value.errors) == 2
    assert "\n" not in str(info.value)
    assert [e.line for e in info.value.errors] == [2, 4]


def test_load_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="profile not found"):
        pm.load(tmp_path / "nope.toml")
    with pytest.raises(ProfileError, match="is a directory"):
        pm.load(tmp_path)


def test_merge_validates() -> None:
    p = pm.merge(Profile(), **{"session.intra_op_num_threads": 4})
    assert p.session.intra_op_num_threads == 4
    with pytest.raises(ProfileError):
        pm.merge(Profile(), **{"workload.concurrency": 0})


# ---- affinity -----------------------------------------------------------------------------------------------

def test_affinity_is_written_one_based() -> None:
    p = Profile(session=SessionSettings(intra_op_num_threads=3, intra_op_thread_affinities=((0, 1), (2,))))
    assert p.config_entries()["session.intra_op_thread_affinities"] == "1,2;3"
    assert pm.affinity_string(((0,), (7, 8))) == "1;8,9"


def test_parse_affinity_string() -> None:
    assert pm.parse_affinity_string("1,2;3") == ((0, 1), (2,))
    assert pm.parse_affinity_string("1-3;4") == ((0, 1, 2), (3,))
    for cores in [((0, 1), (2,)), ((5,), (6, 7, 8))]:
        assert pm.parse_affinity_string(pm.affinity_string(cores)) == cores


def test_parse_core_list() -> None:
    assert pm.parse_core_list("0-3,6") == (0, 1, 2, 3, 6)
    assert pm.parse_core_list(" 4, 5 ") == (4, 5)
    for bad in ("3-1", "a", "1-b"):
        with pytest.raises(ProfileError, match="bad core list"):
            pm.parse_core_list(bad)


# ---- ortopts: real sessions ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_matmul_model(tmp_path_factory.mktemp("m") / "mm.onnx", n=16)


def check_session(sess, profile: Profile) -> None:
    """The session's own view of its options equals what the profile asks for: every SessionOptions knob of the
    registry, and every config entry."""
    import onnxruntime as ort

    got = sess.get_session_options()
    checked = set()
    for knob in knobs.settings(knobs.SESSION_OPTION):
        expected = knob.read(profile)
        if knob.ort_enum:
            expected = getattr(getattr(ort, knob.ort_enum), ortopts.ENUM_NAMES[knob.ort_enum][expected])
        assert getattr(got, knob.ort_name) == expected, knob.key
        checked.add(knob.ort_name)
    assert checked >= {"intra_op_num_threads", "inter_op_num_threads", "execution_mode", "graph_optimization_level",
                       "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "use_per_session_threads",
                       "log_severity_level"}
    for key, value in profile.config_entries().items():
        assert got.get_session_config_entry(key) == value, key


CPU_PROFILES = [
    Profile(),
    Profile(session=SessionSettings(
        intra_op_num_threads=2, inter_op_num_threads=2, execution_mode="parallel", graph_optimization_level="basic",
        enable_cpu_mem_arena=False, enable_mem_pattern=False, enable_mem_reuse=False, allow_spinning=False,
        inter_op_allow_spinning=False, spin_duration_us=50, spin_backoff_max=2, dynamic_block_base=4,
        intra_op_thread_affinities=((0,),), log_severity_level=3,
        config={"session.set_denormal_as_zero": "1"},
        extra={"inter_op_spin_duration_us": 30, "inter_op_spin_backoff_max": 2})),
    Profile(session=SessionSettings(graph_optimization_level="layout", allow_spinning=True)),
    Profile(session=SessionSettings(graph_optimization_level="disable")),
]


@pytest.mark.parametrize("profile", CPU_PROFILES, ids=["defaults", "everything", "layout", "disable"])
def test_session_options_on_a_real_session(model: str, profile: Profile) -> None:
    import numpy as np
    import onnxruntime as ort

    pm.validate(profile)
    sess = ort.InferenceSession(model, sess_options=ortopts.session_options(profile),
                                providers=ortopts.provider_list(profile))
    check_session(sess, profile)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    (y,) = sess.run(None, {"x": np.ones((2, 16), np.float32)})
    assert y.shape == (2, 16)


def test_provider_list() -> None:
    assert ortopts.provider_list(Profile()) == [("CPUExecutionProvider", {})]
    cuda = Profile(provider=ProviderSettings(name="cuda", options={"device_id": 0, "enable_cuda_graph": False}))
    assert ortopts.provider_list(cuda) == [("CUDAExecutionProvider", {"device_id": "0", "enable_cuda_graph": "0"}),
                                           "CPUExecutionProvider"]
    strict = replace(cuda, session=SessionSettings(disable_cpu_ep_fallback=True))
    assert ortopts.provider_list(strict) == [("CUDAExecutionProvider", {"device_id": "0", "enable_cuda_graph": "0"})]
    custom = Profile(provider=ProviderSettings(name="MyExecutionProvider", options={"k": "v"}))
    assert ortopts.provider_list(custom) == [("MyExecutionProvider", {"k": "v"}), "CPUExecutionProvider"]


def test_name_tables_match_onnxruntime() -> None:
    import onnxruntime as ort

    for level, member in ortopts.OPT_LEVEL_NAMES.items():
        assert int(getattr(ort.GraphOptimizationLevel, member)) == ortopts.OPT_LEVEL_VALUES[level]
    for mode, member in ortopts.EXEC_MODE_NAMES.items():
        assert int(getattr(ort.ExecutionMode, member)) == ortopts.EXEC_MODE_VALUES[mode]
    assert set(ortopts.OPT_LEVEL_NAMES) == set(pm.OPT_LEVELS)
    assert set(ortopts.EXEC_MODE_NAMES) == set(pm.EXECUTION_MODES)


def test_ortopts_import_does_not_load_onnxruntime() -> None:
    code = "import sys, ortop.runtime.options, ortop.export, ortop.cli.profiles; print('onnxruntime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


GLOBAL_POOLS = textwrap.dedent("""
    import sys
    import onnxruntime as ort
    from ortop.runtime import options as ortopts
    from ortop.config import profile as pm
    model = sys.argv[1]
    p = pm.from_dict({"session": {"use_per_session_threads": False, "global_intra_op_num_threads": 2,
                                  "global_inter_op_num_threads": 1}})
    ortopts.set_global_thread_pool(p)
    so = ortopts.session_options(p)
    sess = ort.InferenceSession(model, sess_options=so, providers=ortopts.provider_list(p))
    assert sess.get_session_options().use_per_session_threads is False
    ortopts.session_options(p)  # same sizes again: fine
    other = pm.merge(p, **{"session.global_intra_op_num_threads": 3})
    try:
        ortopts.session_options(other)
    except pm.ProfileError as exc:
        print("refused:", exc)
    else:
        raise SystemExit("other pool sizes were accepted")
""")


def test_global_thread_pools_in_a_fresh_process(model: str) -> None:
    out = subprocess.run([sys.executable, "-c", GLOBAL_POOLS, model], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "refused: the global thread pools already exist with intra=2, inter=1" in out.stdout


def test_workload_and_provider_defaults() -> None:
    assert Workload().concurrency == 1
    assert Profile().providers() == ["CPUExecutionProvider"]


@pytest.mark.parametrize("section", ["session.config", "provider.options", "env"])
def test_nul_characters_are_refused(section: str) -> None:
    # ORT cuts config entries at a NUL and the environment cannot hold one: refuse rather than run something else.
    top, _, sub = section.partition(".")
    key = "X" if section == "env" else "custom.key"
    table = {key: "a\x00b"}
    data = {top: {sub: table}} if sub else {top: table}
    with pytest.raises(pm.ProfileError, match="NUL"):
        pm.from_dict(data)


def test_disable_cpu_ep_fallback_needs_another_provider() -> None:
    with pytest.raises(pm.ProfileError, match="disable_cpu_ep_fallback"):
        pm.from_dict({"session": {"disable_cpu_ep_fallback": True}})
    p = pm.from_dict({"session": {"disable_cpu_ep_fallback": True}, "provider": {"name": "cuda"}})
    assert p.providers() == ["CUDAExecutionProvider"]
