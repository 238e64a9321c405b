"""Exporters: every format for every shipped profile, the Python export run for real, perf_test flags checked
against the verified list, Olive's shape, and values that try to escape their string literals."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from ortop import export
from ortop.config import knobs
from ortop.config import profile as pm
from ortop.config.profile import Profile, ProviderSettings, SessionSettings, Workload
from ortop.config.replicas import split_cores
from ortop.export import FORMATS, PERF_TEST_FLAGS, ExportError, perf_test, render
from ortop.runtime import options as ortopts
from tests.models import make_matmul_model
from tests.test_profile import FULL_TOML, check_session

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "profiles").glob("*.toml"))
SHIPPED_IDS = [p.stem for p in SHIPPED]

EVIL = '"); import os; os.system("x") #'
EVIL_VALUES = [
    EVIL,
    "a\nimport os\nos.system('x')",
    "'''\"\"\"",
    "back\\slash\\",
    "line\u2028sep\u0085next",
    "tri??/graph??=",
    "*/ /* //",
    "$(touch /tmp/ortop-pwned) `id`; rm -rf ~ #",
    "tab\there\x01ctl\x1b[0m\x7f",  # NUL itself is refused by profile validation
    "caf\u00e9 \U0001f600",
]


def prof(**dotted) -> Profile:
    return pm.merge(Profile(), **{k.replace("__", "."): v for k, v in dotted.items()})


# Replicas and the shared arena, in every combination the exporters spell differently.
REPLICA_PROFILES = [
    prof(workload__replicas=3, session__use_env_allocators=True),
    prof(workload__replicas=2, workload__pin_replicas=True, workload__concurrency=2),
    prof(workload__replicas=2, workload__pin_replicas=True, session__use_env_allocators=True,
         session__intra_op_num_threads=3),
    prof(workload__replicas=2, workload__pin_replicas=True, session__use_per_session_threads=False,
         session__global_intra_op_num_threads=2, session__use_env_allocators=True),
    prof(workload__replicas=2, workload__pin_replicas=True, session__intra_op_num_threads=2,
         session__intra_op_thread_affinities=((0,),)),
    prof(workload__pin_replicas=True),
    prof(workload__replicas=2, provider__name="cuda", session__use_per_session_threads=False,
         session__use_env_allocators=True),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_matmul_model(tmp_path_factory.mktemp("m") / "mm.onnx", n=16)


def test_shipped_profiles_are_all_there() -> None:
    assert set(SHIPPED_IDS) >= {"cpu-latency", "cpu-throughput", "cpu-low-power", "cpu-low-variance", "numa-node0",
                                "cuda-default", "cuda-graph", "cuda-memory-capped"}
    for path in SHIPPED:
        text = path.read_text()
        assert text.startswith("# "), f"{path.name} needs a '#' header saying when to use it"
        p = pm.load(path)
        assert p.model == "", f"{path.name} should leave model out"
        assert p.description


@pytest.mark.parametrize("path", SHIPPED, ids=SHIPPED_IDS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_for_every_shipped_profile(path: Path, fmt: str) -> None:
    text = render(pm.load(path), fmt)
    assert text.strip()
    assert text.endswith("\n")
    if fmt == "python":
        ast.parse(text)
    if fmt in ("olive", "json"):
        json.loads(text)


# ---- python -------------------------------------------------------------------------------------------------

def exec_export(profile: Profile, **kw) -> dict:
    ns: dict = {}
    exec(compile(render(profile, "python", **kw), "<ortop export>", "exec"), ns)
    return ns


@pytest.mark.parametrize("path", SHIPPED, ids=SHIPPED_IDS)
def test_python_export_builds_the_profiles_session(path: Path, model: str) -> None:
    profile = pm.load(path)
    ns = exec_export(profile, model_path=model)
    assert ns["MODEL_PATH"] == model
    assert ns["PROVIDERS"] == ortopts.provider_list(profile)
    if profile.provider_name() == "CPUExecutionProvider":
        sess = ns["make_session"]()
        assert sess.get_provider_options()["CPUExecutionProvider"] == profile.provider_options()
    else:  # no GPU here: same settings, CPU provider
        sess = ns["make_session"](model, providers=["CPUExecutionProvider"])
    check_session(sess, profile)


def test_python_export_with_everything_runs(model: str) -> None:
    import numpy as np

    profile = Profile(
        description="all the session knobs",
        env={"OMP_NUM_THREADS": "1", "LD_PRELOAD": "/usr/lib/libjemalloc.so"},
        session=SessionSettings(
            intra_op_num_threads=2, inter_op_num_threads=2, execution_mode="parallel",
            graph_optimization_level="extended", enable_cpu_mem_arena=False, enable_mem_pattern=False,
            enable_mem_reuse=False, allow_spinning=False, spin_duration_us=10, dynamic_block_base=4,
            intra_op_thread_affinities=((0,),), log_severity_level=3, config={"session.set_denormal_as_zero": "1"}),
        provider=ProviderSettings(io_binding=True),
    )
    text = render(profile, "python", model_path=model)
    assert "NOT enough for LD_PRELOAD" in text
    assert "#   LD_PRELOAD = '/usr/lib/libjemalloc.so'" in text
    ns = exec_export(profile, model_path=model)
    sess = ns["make_session"]()
    check_session(sess, profile)
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    (bound,) = ns["run_with_io_binding"](sess, {"x": x})
    (plain,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(bound, plain)


def test_python_export_cuda_graph_explains_io_binding() -> None:
    text = render(pm.load(REPO / "profiles" / "cuda-graph.toml"), "python")
    assert "DEVICE = 'cuda'" in text
    assert "update_inplace" in text


GLOBAL_POOLS = textwrap.dedent("""
    import sys
    code, model = open(sys.argv[1]).read(), sys.argv[2]
    ns = {}
    exec(compile(code, "export", "exec"), ns)
    sess = ns["make_session"](model)
    sess = ns["make_session"](model)  # the pools are created once; a second session reuses them
    o = sess.get_session_options()
    print(o.use_per_session_threads, o.get_session_config_entry("session.intra_op.allow_spinning"))
""")


def test_python_export_global_thread_pools(tmp_path: Path, model: str) -> None:
    profile = Profile(session=SessionSettings(use_per_session_threads=False, global_intra_op_num_threads=2,
                                              global_inter_op_num_threads=1, allow_spinning=False))
    code = render(profile, "python", model_path=model)
    assert "set_global_thread_pool_sizes(*GLOBAL_THREAD_POOL_SIZES)" in code
    assert "GLOBAL_THREAD_POOL_SIZES = (2, 1)" in code
    src = tmp_path / "export.py"
    src.write_text(code)
    out = subprocess.run([sys.executable, "-c", GLOBAL_POOLS, str(src), model], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "0"]


# ---- replicas and the shared arena ----------------------------------------------------------------------------

# Runs an exported module in a fresh interpreter (the shared arena is registered once per process): builds the
# replicas, serves each from threads pinned to its share, and prints what the sessions were built with.
RUN_REPLICAS = textwrap.dedent("""
    import json, os, sys, threading
    import numpy as np
    code, model = open(sys.argv[1]).read(), sys.argv[2]
    ns = {}
    exec(compile(code, "export", "exec"), ns)
    pinned = "replica_cores" in ns
    if len(sys.argv) > 3:
        cores = [tuple(int(c) for c in share.split(",")) for share in sys.argv[3].split(";")]
    else:
        cores = ns["replica_cores"]() if pinned else [None] * ns["REPLICAS"]
    sessions = ns["make_sessions"](model, cores=cores) if pinned else ns["make_sessions"](model)
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    served = [None] * len(sessions)

    def serve(i, k):
        if pinned:
            ns["pin_caller"](cores[i])
        outs = [sessions[i].run(None, {"x": x})[0] for _ in range(10)]
        served[i] = (sorted(os.sched_getaffinity(0)), outs[-1].tolist())

    threads = [threading.Thread(target=serve, args=(i, k)) for i in range(len(sessions))
               for k in range(ns["CALLERS_PER_REPLICA"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def entry(sess, key):
        try:
            return sess.get_session_options().get_session_config_entry(key)
        except Exception:
            return None

    print(json.dumps({
        "n": len(sessions), "arena": ns.get("_env_allocator_ready"), "cores": cores,
        "shared": [entry(s, "session.use_env_allocators") for s in sessions],
        "threads": [s.get_session_options().intra_op_num_threads for s in sessions],
        "affinities": [entry(s, "session.intra_op_thread_affinities") for s in sessions],
        "per_session": [s.get_session_options().use_per_session_threads for s in sessions],
        "pinned": [p for p, _ in served], "same": all(out == served[0][1] for _, out in served),
    }))
""")


def run_export(tmp_path: Path, profile: Profile, model: str, *shares: str) -> dict:
    src = tmp_path / "export.py"
    src.write_text(render(profile, "python", model_path=model))
    out = subprocess.run([sys.executable, "-c", RUN_REPLICAS, str(src), model, *shares], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_python_export_serves_pinned_replicas_from_one_shared_arena(tmp_path: Path, model: str) -> None:
    profile = prof(workload__replicas=2, workload__pin_replicas=True, workload__concurrency=2,
                   session__use_env_allocators=True)
    code = render(profile, "python", model_path=model)
    assert code.index("ort.create_and_register_allocator(") < code.index("def make_session(")
    assert "    _env_allocator()\n    return ort.InferenceSession(" in code  # registered before the session
    assert "REPLICAS = 2" in code and "CALLERS_PER_REPLICA = 2" in code
    assert "os.sched_setaffinity(0, cores)" in code and "when this\n# module runs" in code
    # the split this host gives, worked out by the module itself at run time
    usable = sorted(os.sched_getaffinity(0))
    got = run_export(tmp_path, profile, model)
    assert got["n"] == 2 and got["arena"] is True and got["same"]
    assert got["shared"] == ["1", "1"]
    expected = split_cores(usable, 2)
    assert [tuple(c) for c in got["cores"]] == expected
    assert got["pinned"] == [sorted(share) for share in expected]  # each replica's callers on its share
    assert got["threads"] == [len(share) for share in expected]  # each pool sized to its share
    # two cores per share: the pool's second thread pinned to the share's second core (ORT counts from 1)
    got = run_export(tmp_path, profile, model, "1,0;0,1")
    assert got["threads"] == [2, 2] and got["affinities"] == ["1", "2"]
    assert got["pinned"] == [[0, 1], [0, 1]] and got["same"]


def test_python_export_replicas_with_global_pools_and_a_shared_arena(tmp_path: Path, model: str) -> None:
    profile = prof(workload__replicas=3, session__use_per_session_threads=False, session__global_intra_op_num_threads=2,
                   session__use_env_allocators=True)
    code = render(profile, "python", model_path=model)
    # the pools before the arena: both come before the first session
    assert code.index("    _global_thread_pools()\n    _env_allocator()\n") < code.index("ort.InferenceSession(")
    assert "os" not in code.split("import onnxruntime")[0]  # nothing pinned: no os import
    got = run_export(tmp_path, profile, model)
    assert got["n"] == 3 and got["arena"] is True and got["same"]
    assert got["shared"] == ["1", "1", "1"] and got["per_session"] == [False, False, False]


def test_python_export_pinning_what_it_cannot_pin_says_so(tmp_path: Path, model: str) -> None:
    own = prof(workload__replicas=2, workload__pin_replicas=True, session__intra_op_num_threads=2,
               session__intra_op_thread_affinities=((0,),))
    code = render(own, "python", model_path=model)
    assert "def replica_options" not in code
    assert "# pin_replicas: the profile pins the pool threads itself" in code
    got = run_export(tmp_path, own, model)
    assert got["n"] == 2 and got["threads"] == [2, 2] and got["affinities"] == ["1", "1"] and got["same"]
    glob = prof(workload__replicas=2, workload__pin_replicas=True, session__use_per_session_threads=False)
    assert "# pin_replicas: the global thread pools are shared by every replica" in render(glob, "python")


@pytest.mark.parametrize("profile", REPLICA_PROFILES, ids=range(len(REPLICA_PROFILES)))
def test_every_code_format_builds_the_replicas(profile: Profile) -> None:
    n = profile.workload.replicas
    py = render(profile, "python")
    ast.parse(py)
    assert f"REPLICAS = {n}" in py and "def make_sessions(" in py
    cpp = render(profile, "cpp")
    assert f"constexpr int kReplicas = {n};" in cpp and "inline std::vector<Ort::Session> MakeSessions(" in cpp
    cs = render(profile, "csharp")
    assert f"public const int Replicas = {n};" in cs and "public static InferenceSession[] CreateReplicas(" in cs
    arena = bool(profile.session.use_env_allocators)
    for text in (py, cpp, cs):
        assert ("use_env_allocators" in text) == arena
    if arena:
        assert 'so.AddConfigEntry("session.use_env_allocators", "1");' in cpp
        assert 'so.AddSessionConfigEntry("session.use_env_allocators", "1");' in cs
    pinned_pools = profile.workload.pin_replicas and profile.session.use_per_session_threads and \
        profile.session.intra_op_thread_affinities is None
    assert ("def replica_options(" in py) == ("MakeReplicaSessionOptions(" in cpp) == \
        ("CreateReplicaOptions(" in cs) == pinned_pools


def test_cpp_registers_the_shared_arena_in_the_env_before_any_session() -> None:
    text = render(prof(workload__replicas=3, session__use_env_allocators=True, session__use_per_session_threads=False,
                       session__global_intra_op_num_threads=2), "cpp")
    env = text[text.index("inline Ort::Env MakeEnv() {"):text.index("inline Ort::SessionOptions MakeSessionOptions")]
    assert env.index("Ort::ThreadingOptions threading;") < env.index('Ort::Env env(threading, ORT_LOGGING_LEVEL')
    assert "Ort::MemoryInfo memory_info = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);" in env
    assert "Ort::ArenaCfg arena_cfg(0, -1, -1, -1);" in env
    assert env.index("env.CreateAndRegisterAllocator(memory_info, arena_cfg);") < env.index("return env;")
    assert "so.DisablePerSessionThreads();" in text
    assert "for (int i = 0; i < n; ++i) sessions.push_back(MakeSession(env, model_path));" in text
    assert "Ort::Env env = MakeEnv();  std::vector<Ort::Session> sessions = MakeSessions(env);" in text
    plain = render(prof(workload__replicas=2), "cpp")
    assert "CreateAndRegisterAllocator" not in plain and 'return Ort::Env(ORT_LOGGING_LEVEL_WARNING, "ortop");' in plain
    pinned = render(prof(workload__replicas=2, workload__pin_replicas=True, session__intra_op_num_threads=4), "cpp")
    assert "const int threads = 4;" in pinned and "so.SetIntraOpNumThreads(threads);" in pinned
    assert "pthread_setaffinity_np" in pinned and "MakeSessions(env, shares)" in pinned


def test_csharp_registers_the_shared_arena_before_the_first_options() -> None:
    text = render(prof(workload__replicas=3, session__use_env_allocators=True, session__use_per_session_threads=False,
                       session__global_intra_op_num_threads=2), "csharp")
    assert 'new OrtMemoryInfo("Cpu", OrtAllocatorType.ArenaAllocator, 0,' in text
    assert "new OrtArenaCfg(0, -1, -1, -1)" in text
    assert "OrtEnv.Instance().CreateAndRegisterAllocator(memoryInfo, arenaCfg);" in text
    options = text[text.index("public static SessionOptions CreateOptions()"):]
    # the environment with its pools, then the arena in it, then the first SessionOptions
    assert options.index("CreateEnvironment();") < options.index("RegisterSharedArena();") < \
        options.index("new SessionOptions()")
    assert "OrtEnv.CreateInstanceWithOptions(ref envOptions);" in text and "so.DisablePerSessionThreads();" in text
    assert "for (int i = 0; i < Replicas; i++) sessions[i] = Create(modelPath);" in text
    pinned = render(prof(workload__replicas=2, workload__pin_replicas=True), "csharp")
    assert "int threads = cores.Length;" in pinned and "CreateReplicas(int[][] shares" in pinned
    assert "RegisterSharedArena" not in pinned


def test_python_export_of_a_gpu_profile_with_global_pools_parses() -> None:
    """The provider check's signature and docstring go in place of make_session's own, wherever the set-up calls
    (pools, arena) put them."""
    pools = {"provider__name": "cuda", "session__use_per_session_threads": False}
    for profile in (prof(**pools), prof(**pools, session__use_env_allocators=True)):
        text = render(profile, "python")
        tree = ast.parse(text)
        make = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_session")
        assert [a.arg for a in make.args.args] == ["model_path", "providers", "strict"]
        assert "is not active" in (ast.get_docstring(make) or "")
        assert "    _global_thread_pools()\n" in text


def test_python_split_is_ortops() -> None:
    """The exported module splits the cores at run time by the rule ortop uses (whole NUMA nodes, contiguous runs,
    round robin past the core count)."""
    ns: dict = {}
    exec(compile(render(prof(workload__replicas=2, workload__pin_replicas=True), "python"), "<export>", "exec"), ns)
    cases = [(list(range(8)), 2, {}), (list(range(7)), 3, {}), ([0, 1], 4, {}), ([0, 4, 1, 5, 2, 6, 3, 7], 2, {}),
             ([0, 1, 2, 3, 8, 9, 10, 11], 2, {0: (0, 1, 8, 9), 1: (2, 3, 10, 11)}),
             (list(range(4)), 4, {0: (0, 1), 1: (2, 3)}),
             (list(range(12)), 2, {0: (0, 1, 2, 3), 1: (4, 5, 6, 7), 2: (8, 9, 10, 11)}), (list(range(16)), 1, {})]
    for cores, n, nodes in cases:
        mine = [tuple(c for c in cpus if c in cores) for _, cpus in sorted(nodes.items())]
        assert ns["split_cores"](cores, n, mine) == split_cores(cores, n, nodes), (cores, n, nodes)
    assert ns["_cpulist"]("/nonexistent") == ()


def test_perf_test_and_olive_say_they_cannot_serve_replicas() -> None:
    profile = prof(workload__replicas=4, workload__pin_replicas=True, workload__concurrency=2,
                   session__use_env_allocators=True)
    text = render(profile, "perf-test")
    notes = [line for line in text.splitlines() if line.startswith("# note:")]
    assert any("replicas = 4: perf_test serves one session" in n for n in notes)
    assert any("pin_replicas = true" in n for n in notes)
    assert any("use_env_allocators = true: perf_test registers no allocator" in n for n in notes)
    flags, _ = perf_flags(perf_command(text))  # the command stays runnable, with verified flags only
    assert flags["-c"] == ["2"]
    assert_every_knob_carried(profile, text)
    for one in (prof(workload__replicas=2), prof(workload__pin_replicas=True), prof(session__use_env_allocators=True)):
        with pytest.raises(ExportError, match="Olive's inference settings cannot carry .*one session"):
            render(one, "olive")
    assert json.loads(render(prof(session__use_env_allocators=False), "olive"))


# ---- injection ----------------------------------------------------------------------------------------------

def evil_profile(value: str, provider: str = "MyExecutionProvider") -> Profile:
    return Profile(
        description=value,
        env={"EVIL": value},
        session=SessionSettings(config={"custom." + value: value}),
        provider=ProviderSettings(name=provider, options={value: value}),
    )


def string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_python_injection(value: str) -> None:
    text = render(evil_profile(value), "python", model_path=value)
    tree = ast.parse(text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert not [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "system"]
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import) and n.names[0].name == "os"]
    assert value in string_constants(tree)
    # The description and env values sit in comments: still one comment line each.
    for line in text.splitlines():
        if line.startswith("# profile:"):
            assert ast.literal_eval(line[len("# profile: "):]) == value
    ns: dict = {}
    exec(compile(text, "<export>", "exec"), ns)
    assert ns["MODEL_PATH"] == value
    assert ns["PROVIDERS"][0] == ("MyExecutionProvider", {value: value})
    so = ns["session_options"]()
    assert so.get_session_config_entry("custom." + value) == value


def c_like_scan(code: str) -> tuple[str, list[str], list[str]]:
    """Split C++/C# text into (code without strings and comments, string literals, comments)."""
    rest, literals, comments = [], [], []
    i = 0
    while i < len(code):
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = len(code) if j < 0 else j
            comments.append(code[i:j])
            i = j
        elif code[i] == '"':
            j = i + 1
            while code[j] != '"':
                assert code[j] != "\n", "a string literal runs past the end of its line"
                j += 2 if code[j] == "\\" else 1
            literals.append(code[i:j + 1])
            rest.append('""')
            i = j + 1
        else:
            rest.append(code[i])
            i += 1
    return "".join(rest), literals, comments


def decode_c_literal(lit: str) -> str:
    body, out, i = lit[1:-1], bytearray(), 0
    simple = {"\\": b"\\", '"': b'"', "?": b"?", "'": b"'", "n": b"\n", "t": b"\t", "r": b"\r"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        if n in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group(0)
            out.append(int(digits, 8))
            i += 1 + len(digits)
        else:
            out += simple[n]
            i += 2
    return out.decode("utf-8", "surrogatepass")


def decode_cs_literal(lit: str) -> str:
    body, out, i = lit[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
        elif body[i + 1] == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif body[i + 1] == "U":
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        else:
            out.append({"\\": "\\", '"': '"'}[body[i + 1]])
            i += 2
    return "".join(out)


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_cpp_injection(value: str) -> None:
    text = render(evil_profile(value), "cpp", model_path=value)
    code, literals, comments = c_like_scan(text)
    assert "system" not in code and "import" not in code
    assert_safe_outside_comments(code, literals, comments)
    decoded = [decode_c_literal(lit) for lit in literals]
    assert decoded.count(value) >= 4  # model path, config value, option key and value
    assert "custom." + value in decoded
    assert any(export.comment_str(value) in c for c in comments)  # description and env value
    assert not any(c.rstrip().endswith("\\") for c in comments)  # no line splice into the next line


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_csharp_injection(value: str) -> None:
    text = render(evil_profile(value), "csharp", model_path=value)
    code, literals, comments = c_like_scan(text)
    assert "system" not in code and "import" not in code
    assert_safe_outside_comments(code, literals, comments)
    decoded = [decode_cs_literal(lit) for lit in literals]
    assert decoded.count(value) >= 4
    assert "custom." + value in decoded
    assert any(export.comment_str(value) in c for c in comments)


def assert_safe_outside_comments(code: str, literals: list[str], comments: list[str]) -> None:
    """Code and string literals are printable ASCII; a comment may carry printable text of any script (the
    profile's own words), never a control, a line break or a bidirectional override."""
    assert all(ch.isascii() and (ch.isprintable() or ch == "\n") for ch in code + "".join(literals))
    assert all(ch.isprintable() for c in comments for ch in c)
    assert not any(c.rstrip().endswith("\\") for c in comments)  # no line splice into the next line


@pytest.mark.parametrize("fmt", ["cpp", "csharp"])
def test_comments_carry_the_description_as_text(fmt: str) -> None:
    text = render(prof(description="threads 2 · spin off · 100 Hz, µs ≤ 5 — café", session__intra_op_num_threads=2,
                       env={"OMP_WAIT_POLICY": "PASSIVE", "X": "a\u202eb\tc"}), fmt)
    assert '// profile: "threads 2 · spin off · 100 Hz, µs ≤ 5 — café"' in text.splitlines()
    assert '//   X="a\\u202eb\\tc"' in text.splitlines()  # a bidirectional override and a tab stay escapes
    assert "\\302" not in text and "\\u00b7" not in text


def test_comment_str_breaks_trigraphs_and_escapes_what_would_end_the_line() -> None:
    assert export.comment_str("why?? ??/") == '"why?\\? ?\\?/"'
    assert export.comment_str('say "hi"\\\n\u2028') == '"say \\"hi\\"\\\\\\n\\u2028"'
    assert export.comment_str("\U000e0001 😀") == '"\\U000e0001 😀"'


def perf_command(text: str) -> list[str]:
    """The command after the leading '#' lines (a quoted argument may span lines), split as a shell would."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return shlex.split("\n".join(lines[start:]))


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_shell_injection(value: str) -> None:
    env = render(Profile(env={"EVIL": value}, description=value), "env")
    header, command = env.split("\n", 1)  # a shell only ends a comment at "\n"
    assert header.startswith("# environment of profile ")
    assert json.loads(header[len("# environment of profile "):]) == value
    assert shlex.split(command) == ["export", f"EVIL={value}"]
    perf = render(Profile(env={"EVIL": value}, description=value), "perf-test", model_path=value)
    argv = perf_command(perf)
    assert argv[0] == f"EVIL={value}"
    assert argv[-2:] == [value, "perf_result.txt"]


@pytest.mark.parametrize("value", [v for v in EVIL_VALUES if not any(c.isspace() for c in v)])
def test_perf_test_carries_spaceless_values_intact(value: str) -> None:
    argv = perf_command(render(evil_profile(value, provider="openvino"), "perf-test"))
    assert argv[argv.index("-C") + 1] == f"custom.{value}|{value}"
    if "|" not in value:
        assert argv[argv.index("-i") + 1] == f"{value}|{value}"


def test_perf_test_refuses_what_its_lists_cannot_hold() -> None:
    with pytest.raises(ExportError, match=r"no whitespace or '\|'"):
        render(evil_profile(EVIL, provider="openvino"), "perf-test")
    with pytest.raises(ExportError, match="cannot hold whitespace"):
        render(Profile(session=SessionSettings(config={"k": "a b"})), "perf-test")
    with pytest.raises(ExportError, match="cannot hold whitespace"):
        render(Profile(provider=ProviderSettings(name="openvino", options={"cache_dir": "/my models"})), "perf-test")
    with pytest.raises(ExportError, match=r"no whitespace or '\|'"):
        render(Profile(session=SessionSettings(config={"a|b": "1"})), "perf-test")
    with pytest.raises(ExportError, match="free dimension"):
        render(Profile(workload=Workload(dims={"a b": 2})), "perf-test")


@pytest.mark.parametrize("value", EVIL_VALUES)
def test_json_formats_carry_values_as_data(value: str) -> None:
    p = evil_profile(value)
    assert pm.from_dict(json.loads(render(p, "json"))) == p
    olive = json.loads(render(p, "olive"))
    assert olive["provider_options"] == [{value: value}]
    assert olive["session_options"]["extra_session_config"] == {"custom." + value: value}


# ---- C++ compile check (syntax and literals, against the API as declared in onnxruntime_cxx_api.h) -----------

# The declarations the export uses, with the signatures of onnxruntime_cxx_api.h (SessionOptionsImpl, Env,
# ThreadingOptions, MemoryInfo, ArenaCfg; Env and Session move-only, as their Base is) and onnxruntime_c_api.h
# (OrtApi members, enums, ORT_TSTR); enough for -fsyntax-only.
ORT_STUB = """
#include <cstddef>
#include <string>
#include <unordered_map>
typedef char ORTCHAR_T;
#define ORT_TSTR(X) X
#define ORT_API_CALL
struct OrtStatus; struct OrtCUDAProviderOptionsV2; struct OrtTensorRTProviderOptionsV2; struct OrtThreadingOptions;
struct OrtMemoryInfo; struct OrtArenaCfg;
typedef enum OrtAllocatorType { OrtInvalidAllocator = -1, OrtDeviceAllocator = 0, OrtArenaAllocator = 1
} OrtAllocatorType;
typedef enum OrtMemType { OrtMemTypeCPUInput = -2, OrtMemTypeCPUOutput = -1, OrtMemTypeCPU = OrtMemTypeCPUOutput,
  OrtMemTypeDefault = 0 } OrtMemType;
typedef enum ExecutionMode { ORT_SEQUENTIAL = 0, ORT_PARALLEL = 1 } ExecutionMode;
typedef enum GraphOptimizationLevel { ORT_DISABLE_ALL = 0, ORT_ENABLE_BASIC = 1, ORT_ENABLE_EXTENDED = 2,
  ORT_ENABLE_LAYOUT = 3, ORT_ENABLE_ALL = 99 } GraphOptimizationLevel;
typedef enum OrtLoggingLevel { ORT_LOGGING_LEVEL_VERBOSE, ORT_LOGGING_LEVEL_INFO, ORT_LOGGING_LEVEL_WARNING,
  ORT_LOGGING_LEVEL_ERROR, ORT_LOGGING_LEVEL_FATAL } OrtLoggingLevel;
struct OrtApi {
  OrtStatus*(ORT_API_CALL* CreateCUDAProviderOptions)(OrtCUDAProviderOptionsV2** out);
  OrtStatus*(ORT_API_CALL* UpdateCUDAProviderOptions)(OrtCUDAProviderOptionsV2* o, const char* const* k,
                                                     const char* const* v, size_t n);
  void(ORT_API_CALL* ReleaseCUDAProviderOptions)(OrtCUDAProviderOptionsV2* o);
  OrtStatus*(ORT_API_CALL* CreateTensorRTProviderOptions)(OrtTensorRTProviderOptionsV2** out);
  OrtStatus*(ORT_API_CALL* UpdateTensorRTProviderOptions)(OrtTensorRTProviderOptionsV2* o, const char* const* k,
                                                         const char* const* v, size_t n);
  void(ORT_API_CALL* ReleaseTensorRTProviderOptions)(OrtTensorRTProviderOptionsV2* o);
};
namespace Ort {
const OrtApi& GetApi();
void ThrowOnError(OrtStatus* status);
struct ThreadingOptions {
  ThreadingOptions();
  ThreadingOptions& SetGlobalIntraOpNumThreads(int n);
  ThreadingOptions& SetGlobalInterOpNumThreads(int n);
  operator OrtThreadingOptions*() const;
};
struct MemoryInfo {
  static MemoryInfo CreateCpu(OrtAllocatorType type, OrtMemType mem_type1);
  operator OrtMemoryInfo*() const;
};
struct ArenaCfg {
  ArenaCfg(size_t max_mem, int arena_extend_strategy, int initial_chunk_size_bytes, int max_dead_bytes_per_chunk);
  operator OrtArenaCfg*() const;
};
struct Env {
  Env(OrtLoggingLevel logging_level = ORT_LOGGING_LEVEL_WARNING, const char* logid = "");
  Env(const OrtThreadingOptions* tp_options, OrtLoggingLevel logging_level = ORT_LOGGING_LEVEL_WARNING,
      const char* logid = "");
  Env(const Env&) = delete;
  Env(Env&&) noexcept;
  Env& CreateAndRegisterAllocator(const OrtMemoryInfo* mem_info, const OrtArenaCfg* arena_cfg);
};
struct SessionOptions {
  SessionOptions();
  SessionOptions& SetIntraOpNumThreads(int n);
  SessionOptions& SetInterOpNumThreads(int n);
  SessionOptions& SetGraphOptimizationLevel(GraphOptimizationLevel level);
  SessionOptions& EnableCpuMemArena();
  SessionOptions& DisableCpuMemArena();
  SessionOptions& EnableMemPattern();
  SessionOptions& DisableMemPattern();
  SessionOptions& SetExecutionMode(ExecutionMode mode);
  SessionOptions& SetLogSeverityLevel(int level);
  SessionOptions& DisablePerSessionThreads();
  SessionOptions& AddConfigEntry(const char* key, const char* value);
  SessionOptions& AppendExecutionProvider_CUDA_V2(const OrtCUDAProviderOptionsV2& options);
  SessionOptions& AppendExecutionProvider_TensorRT_V2(const OrtTensorRTProviderOptionsV2& options);
  SessionOptions& AppendExecutionProvider(const std::string& name,
                                          const std::unordered_map<std::string, std::string>& options = {});
};
struct Session {
  Session(const Env& env, const ORTCHAR_T* model_path, const SessionOptions& options);
  Session(const Session&) = delete;
  Session(Session&&) noexcept;
};
}  // namespace Ort
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_cpp_exports_compile_against_the_declared_api(tmp_path: Path) -> None:
    profiles = [pm.load(p) for p in SHIPPED] + [
        evil_profile(v) for v in EVIL_VALUES] + [
        Profile(session=SessionSettings(use_per_session_threads=False, global_intra_op_num_threads=2,
                                        enable_cpu_mem_arena=False, enable_mem_pattern=False, enable_mem_reuse=False,
                                        graph_optimization_level="layout", execution_mode="parallel")),
        Profile(provider=ProviderSettings(name="tensorrt", options={"trt_fp16_enable": True})),
        Profile(provider=ProviderSettings(name="cuda")),
        prof(description="threads 2 · spin off · 100 Hz, tuned on m.onnx", env={"X": "tri??/"}),
        *REPLICA_PROFILES,
    ]
    (tmp_path / "onnxruntime_cxx_api.h").write_text(ORT_STUB)
    parts = ["#include <onnxruntime_cxx_api.h>", "#include <memory>", "#include <vector>"]
    for i, p in enumerate(profiles):
        body = "\n".join(ln for ln in render(p, "cpp", model_path=EVIL).splitlines() if not ln.startswith("#include"))
        use = "Ort::Env env = MakeEnv(); MakeSession(env);"
        if p.workload.pin_replicas:
            use += (" std::vector<std::vector<int>> shares{{0, 1}, {2}};"
                    " std::vector<Ort::Session> s = MakeSessions(env, shares);")
        elif p.workload.replicas > 1:
            use += " std::vector<Ort::Session> s = MakeSessions(env);"
        parts.append(f"namespace p{i} {{\n{body}\nvoid Use() {{ {use} }}\n}}")
    src = tmp_path / "all.cpp"
    src.write_text("\n".join(parts))
    out = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-Wno-unused-function", "-fsyntax-only",
                          "-I", str(tmp_path), str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_cpp_literals_decode_to_the_values(tmp_path: Path) -> None:
    # Each literal is written length-first ("12:bytes"), as the values themselves hold NULs and newlines.
    body = "\n".join(f"  {{ static const char s[] = {export.cpp_str(v)};"
                     f" std::printf(\"%zu:\", sizeof(s) - 1); std::fwrite(s, 1, sizeof(s) - 1, stdout); }}"
                     for v in EVIL_VALUES)
    src = tmp_path / "lit.cpp"
    src.write_text(f"#include <cstdio>\nint main() {{\n{body}\n}}\n")
    exe = tmp_path / "lit"
    subprocess.run(["g++", "-std=c++11", "-trigraphs", "-o", str(exe), str(src)], check=True, capture_output=True)
    raw = subprocess.run([str(exe)], capture_output=True, check=True).stdout
    got = []
    while raw:
        size, raw = raw.split(b":", 1)
        got.append(raw[:int(size)])
        raw = raw[int(size):]
    assert got == [v.encode("utf-8") for v in EVIL_VALUES]


# ---- perf_test ----------------------------------------------------------------------------------------------

def perf_flags(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Walk a perf_test argv with PERF_TEST_FLAGS' arities: (flag -> values, positionals)."""
    i = 0
    while "=" in argv[i] and not argv[i].startswith("-"):
        i += 1  # NAME=VALUE environment assignments
    assert argv[i] == "onnxruntime_perf_test"
    flags: dict[str, list[str]] = {}
    positional: list[str] = []
    i += 1
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("-") and not positional:
            assert tok in PERF_TEST_FLAGS, f"{tok} is not a verified perf_test flag"
            takes_value = PERF_TEST_FLAGS[tok][0]
            flags.setdefault(tok, []).append(argv[i + 1] if takes_value else "")
            i += 2 if takes_value else 1
        else:
            positional.append(tok)
            i += 1
    return flags, positional


def test_perf_test_flag_list_holds_the_known_flags() -> None:
    for flag in ("-x", "-y", "-P", "-o", "-C", "-e", "-i", "-A", "-M", "-I", "-f", "-T", "-D", "-g", "-m", "-t",
                 "-S", "-s", "-r", "-c", "-d", "-q", "-Z", "-z", "-p", "-v", "-F"):
        assert flag in PERF_TEST_FLAGS


@pytest.mark.parametrize("path", SHIPPED, ids=SHIPPED_IDS)
def test_perf_test_emits_only_verified_flags(path: Path) -> None:
    profile = pm.load(path)
    flags, positional = perf_flags(perf_command(render(profile, "perf-test")))
    assert positional == ["model.onnx", "perf_result.txt"]
    assert flags["-e"] == ["cuda" if profile.provider.name == "cuda" else "cpu"]
    assert flags["-o"] == ["99"]
    assert "-I" in flags and flags["-S"] == ["0"]


def test_perf_test_maps_every_knob() -> None:
    profile = Profile(
        env={"OMP_NUM_THREADS": "2"},
        session=SessionSettings(
            intra_op_num_threads=3, inter_op_num_threads=2, execution_mode="parallel",
            graph_optimization_level="layout",
            enable_cpu_mem_arena=False, enable_mem_pattern=False, enable_mem_reuse=False, allow_spinning=False,
            spin_duration_us=100, dynamic_block_base=4, intra_op_thread_affinities=((0, 1), (2,)),
            use_per_session_threads=False, log_severity_level=1, config={"session.set_denormal_as_zero": "1"}),
        provider=ProviderSettings(name="cuda", io_binding=True, options={
            "device_id": 1, "cudnn_conv_algo_search": "HEURISTIC", "do_copy_in_default_stream": False,
            "gpu_mem_limit": 1024}),
        workload=Workload(concurrency=3, seed=5, dims={"batch": 4, "seq": 8}, rate_hz=20.0, batch=2),
    )
    text = render(profile, "perf-test", model_path="m.onnx")
    argv = perf_command(text)
    assert argv[0] == "OMP_NUM_THREADS=2"
    flags, positional = perf_flags(argv)
    assert positional == ["m.onnx", "perf_result.txt"]
    assert flags["-x"] == ["3"] and flags["-y"] == ["2"] and "-P" in flags
    assert flags["-o"] == ["3"]
    assert "-A" in flags and "-M" in flags and "-D" in flags
    assert flags["-T"] == ["1,2;3"]
    assert flags["-C"] == ["session.intra_op.spin_duration_us|100 session.dynamic_block_base|4 "
                           "session.set_denormal_as_zero|1"]
    assert flags["-d"] == ["1"] and "-q" in flags and "-g" in flags
    assert flags["-i"] == ["device_id|1 gpu_mem_limit|1024"]
    assert flags["-c"] == ["3"] and flags["-S"] == ["5"]
    assert flags["-f"] == ["batch:4", "seq:8"]
    assert flags["-m"] == ["duration"] and flags["-t"] == ["10"]
    for note in ("rate_hz", "batch = 2"):  # workload settings perf_test cannot carry
        assert any(line.startswith("# note:") and note in line for line in text.splitlines()), note
    assert_every_knob_carried(profile, text)


def assert_every_knob_carried(profile: Profile, text: str) -> None:
    """Every ORT knob of the registry the profile sets away from its default is carried: by its perf_test flag,
    in -C (config entries) or -i (provider options), or named in a '# note:' line."""
    flags, _ = perf_flags(perf_command(text))
    notes = [line for line in text.splitlines() if line.startswith("# note:")]
    config = dict(pair.split("|", 1) for pair in flags.get("-C", [""])[0].split())
    options = dict(pair.split("|", 1) for pair in flags.get("-i", [""])[0].split())
    s = profile.session
    for knob in knobs.settings(knobs.SESSION_OPTION, knobs.CONFIG_ENTRY, knobs.GLOBAL_POOL):
        value = knob.read(profile)
        if value is None or value == knob.default or (knob.target == knobs.GLOBAL_POOL and s.use_per_session_threads):
            continue
        flag = perf_test.KNOB_FLAGS.get(knob.key)
        carried = flag(value) if flag else None
        if carried:
            assert carried[0] in flags, knob.key
            if len(carried) > 1:
                assert carried[1] in flags[carried[0]], knob.key
        elif carried is None and knob.target == knobs.CONFIG_ENTRY:
            assert config[knob.ort_name] == knob.ort_value(value), knob.key
        elif carried is None:
            assert any(f"{knob.name} = " in n for n in notes), f"{knob.key} is neither a flag nor a note"
    for name, value in profile.provider_options().items():
        flag = perf_test.KNOB_FLAGS.get(f"provider.options.{name}")
        carried = flag(profile.provider.options[name]) if flag else None
        if carried is None:
            assert options[name] == value, name
        elif carried:
            assert carried[0] in flags, name


def test_perf_test_carries_every_knob_of_a_full_profile() -> None:
    profile = pm.loads(FULL_TOML)
    assert_every_knob_carried(profile, render(profile, "perf-test"))


def test_perf_test_spinning_on_goes_through_c() -> None:
    flags, _ = perf_flags(perf_command(render(pm.load(REPO / "profiles" / "cpu-latency.toml"), "perf-test")))
    assert "-D" not in flags
    assert flags["-C"] == ["session.intra_op.allow_spinning|1"]


def test_perf_test_npy_inputs_drop_generated_inputs() -> None:
    text = render(Profile(workload=Workload(inputs={"x": "x.npy"})), "perf-test")
    flags, _ = perf_flags(perf_command(text))
    assert "-I" not in flags and "-S" not in flags
    assert "test_data_set" in text


def test_perf_test_refuses_providers_it_lacks() -> None:
    with pytest.raises(ExportError, match="no -e name for provider 'MyExecutionProvider'"):
        render(Profile(provider=ProviderSettings(name="MyExecutionProvider")), "perf-test")
    with pytest.raises(ExportError, match="rocm"):
        render(Profile(provider=ProviderSettings(name="rocm")), "perf-test")


# ---- Olive, env, json ---------------------------------------------------------------------------------------

def test_olive_shape() -> None:
    profile = Profile(
        session=SessionSettings(intra_op_num_threads=4, inter_op_num_threads=2, execution_mode="parallel",
                                graph_optimization_level="layout", allow_spinning=False),
        provider=ProviderSettings(name="cuda", io_binding=True, options={"device_id": 0, "enable_cuda_graph": False}),
    )
    data = json.loads(render(profile, "olive"))
    assert set(data) == {"execution_provider", "provider_options", "io_bind", "session_options"}
    assert data["execution_provider"] == ["CUDAExecutionProvider"]
    assert data["provider_options"] == [{"device_id": "0", "enable_cuda_graph": "0"}]
    assert data["io_bind"] is True
    assert data["session_options"] == {
        "intra_op_num_threads": 4, "inter_op_num_threads": 2, "execution_mode": 1, "graph_optimization_level": 3,
        "log_severity_level": 2,  # written even at ORT's default: Olive would otherwise set its own 3
        "extra_session_config": {"session.intra_op.allow_spinning": "0"},
    }


def test_python_export_warns_or_raises_when_cuda_falls_back(model: str) -> None:
    """On a host where CUDA cannot load, ORT silently runs on the CPU: the exported make_session says so."""
    import warnings

    import onnxruntime as ort

    profile = Profile(provider=ProviderSettings(name="cuda"))
    ns: dict = {}
    exec(compile(render(profile, "python", model_path=model), "<ortop export>", "exec"), ns)
    available = "CUDAExecutionProvider" in ort.get_available_providers()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = ns["make_session"]()
    if "CUDAExecutionProvider" in sess.get_providers():  # a real GPU: nothing to say
        assert not [w for w in caught if "not active" in str(w.message)]
        return
    assert any("CUDAExecutionProvider is not active" in str(w.message) for w in caught), (available, caught)
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider is not active"):
        ns["make_session"](strict=True)


def test_perf_test_header_names_the_builds_its_flags_need() -> None:
    text = render(Profile(session=SessionSettings(enable_cpu_mem_arena=False, dynamic_block_base=4)), "perf-test")
    header = [ln for ln in text.splitlines() if ln.startswith("# needs:")]
    assert header and ">= 1.17 for -C" in header[0] and "-A" in header[0]


def test_olive_levels_are_ort_enum_values() -> None:
    import onnxruntime as ort

    for level in pm.OPT_LEVELS:
        data = export.olive_settings(Profile(session=SessionSettings(graph_optimization_level=level)))
        value = data["session_options"]["graph_optimization_level"]
        assert ort.GraphOptimizationLevel(value) == getattr(ort.GraphOptimizationLevel, ortopts.OPT_LEVEL_NAMES[level])
    assert export.olive_settings(Profile(session=SessionSettings(log_severity_level=0)))["session_options"][
        "log_severity_level"] == 0


def test_olive_refuses_what_it_cannot_apply_and_passes_custom_providers() -> None:
    for session in (SessionSettings(enable_cpu_mem_arena=False), SessionSettings(enable_mem_pattern=False),
                    SessionSettings(enable_mem_reuse=False), SessionSettings(use_per_session_threads=False)):
        with pytest.raises(ExportError, match="Olive's inference settings cannot carry"):
            render(Profile(session=session), "olive")
    data = json.loads(render(Profile(provider=ProviderSettings(name="MyExecutionProvider", options={"k": 1})),
                             "olive"))
    assert data["execution_provider"] == ["MyExecutionProvider"]
    assert data["provider_options"] == [{"k": "1"}]


def test_env_format() -> None:
    assert render(Profile(), "env") == "# this profile sets no environment variables\n"
    text = render(Profile(env={"OMP_NUM_THREADS": "4", "MIMALLOC_OPTIONS": "a b"}), "env")
    assert text.splitlines() == ["export OMP_NUM_THREADS=4", "export MIMALLOC_OPTIONS='a b'"]


def test_json_format_is_the_full_profile(tmp_path: Path) -> None:
    p = replace(pm.load(REPO / "profiles" / "numa-node0.toml"), model=str(tmp_path / "m.onnx"))
    data = json.loads(render(p, "json"))
    assert data == p.to_dict(full=True)
    assert pm.from_dict(data) == p


def test_model_path_defaults() -> None:
    assert "MODEL_PATH = 'model.onnx'" in render(Profile(), "python")
    assert "MODEL_PATH = '/m/x.onnx'" in render(Profile(model="/m/x.onnx"), "python")
    assert "MODEL_PATH = 'y.onnx'" in render(Profile(model="/m/x.onnx"), "python", model_path="y.onnx")


def test_unknown_format_lists_the_valid_ones() -> None:
    with pytest.raises(ExportError) as info:
        render(Profile(), "yaml")
    assert all(f in str(info.value) for f in FORMATS)
    with pytest.raises(ExportError, match="did you mean 'python'"):
        render(Profile(), "pyhton")


def test_export_module_does_not_import_onnxruntime() -> None:
    code = "import sys, ortop.export as e; e.render(e.Profile(), 'python'); print('onnxruntime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- input shapes ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def unnamed_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An image model whose height and width have neither a value nor a name (PP-OCR's detector leaves them so)."""
    from tests.models import make_conv_model

    return make_conv_model(tmp_path_factory.mktemp("u") / "unnamed.onnx", shape=(1, 3, None, None))


@pytest.fixture(scope="module")
def named_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.models import make_conv_model

    return make_conv_model(tmp_path_factory.mktemp("n") / "named.onnx")


def ortop_feed_shapes(model_path: str, profile: Profile) -> dict[str, tuple[int, ...]]:
    """The shapes ortop itself feeds the model under ``profile`` (what the profile was measured with)."""
    from ortop.model import load_model, make_feeds

    w = profile.workload
    feeds, _ = make_feeds(load_model(model_path), dims=w.dims, shapes=w.shapes, batch=w.batch, seed=w.seed)
    return {k: v.shape for k, v in feeds.items()}


def test_python_export_feeds_a_whole_shape_to_an_unnamed_dim(unnamed_model: str) -> None:
    profile = prof(workload__shapes={"x": [1, 3, 224, 224]})
    ns = exec_export(profile, model_path=unnamed_model)
    sess = ns["make_session"]()
    feeds = ns["example_feeds"](sess)
    assert {k: v.shape for k, v in feeds.items()} == {"x": (1, 3, 224, 224)} == ortop_feed_shapes(unnamed_model,
                                                                                                  profile)
    (y,) = sess.run(None, feeds)
    assert y.shape == (1, 4, 224, 224)
    assert ns["example_feeds"](sess, shapes={"x": [1, 3, 48, 160]})["x"].shape == (1, 3, 48, 160)


def test_python_export_feeds_free_dims_by_name_and_by_position(named_model: str, unnamed_model: str) -> None:
    profile = prof(workload__dims={"height": 40, "width": 56}, workload__batch=2)
    ns = exec_export(profile, model_path=named_model)
    sess = ns["make_session"]()
    feeds = ns["example_feeds"](sess)
    assert feeds["x"].shape == (2, 3, 40, 56) == ortop_feed_shapes(named_model, profile)["x"]
    assert sess.run(None, feeds)[0].shape == (2, 4, 40, 56)
    profile = prof(workload__dims={"x[2]": 24, "x[3]": 32})
    ns = exec_export(profile, model_path=unnamed_model)
    feeds = ns["example_feeds"](ns["make_session"]())
    assert feeds["x"].shape == (1, 3, 24, 32) == ortop_feed_shapes(unnamed_model, profile)["x"]


def test_python_export_of_a_shape_mix_feeds_its_typical_shape_and_says_so(named_model: str) -> None:
    profile = prof(workload__dims={"width": 64}, workload__dim_mix={"height": "16,32:3,48"})
    text = render(profile, "python", model_path=named_model)
    assert "shape mix" in text and "height=16,32:3,48" in text
    ns = exec_export(profile, model_path=named_model)
    assert ns["example_feeds"](ns["make_session"]())["x"].shape == (1, 3, 32, 64)


def test_code_exports_name_the_input_shapes() -> None:
    profile = prof(workload__shapes={"x": [1, 3, 224, 224]}, workload__dims={"x[0]": 1})
    for fmt in ("cpp", "csharp"):
        text = render(profile, fmt)
        assert "// Measured with inputs x=1x3x224x224, x[0]=1: build the input tensors" in text, fmt
    assert "Measured with inputs" not in render(Profile(), "cpp")


def test_perf_test_names_the_named_dims_of_a_whole_shape(named_model: str) -> None:
    text = render(prof(workload__shapes={"x": [1, 3, 224, 320]}), "perf-test", model_path=named_model)
    flags, _ = perf_flags(perf_command(text))
    assert flags["-f"] == ["batch:1", "height:224", "width:320"]
    assert "another shape" not in text


def test_perf_test_says_it_runs_another_shape_and_how_to_feed_the_real_one(tmp_path: Path,
                                                                            unnamed_model: str) -> None:
    import onnx
    from onnx import numpy_helper

    profile = prof(workload__shapes={"x": [1, 3, 224, 224]})
    text = render(profile, "perf-test", model_path=unnamed_model)
    flags, _ = perf_flags(perf_command(text))
    assert "-f" not in flags and "-I" in flags
    (note,) = [line for line in text.splitlines() if "another shape" in line]
    assert note.startswith("# note: perf_test cannot set x[2]=224") and "(x=1x3x1x1)" in note
    # the note's recipe writes perf_test's test data of the profile's shape
    (tmp_path / "ort_session.py").write_text(render(profile, "python", model_path=unnamed_model))
    recipe = re.search(r'python -c "([^"]+)"', note)
    assert recipe is not None
    subprocess.run([sys.executable, "-c", recipe.group(1)], cwd=tmp_path, check=True, timeout=120)
    tensor = numpy_helper.to_array(onnx.load_tensor(str(tmp_path / "test_data_set_0" / "input_0.pb")))
    assert tensor.shape == (1, 3, 224, 224)
    # an unnamed dim given by position has no -f either
    text = render(prof(workload__dims={"x[2]": 48}), "perf-test", model_path=unnamed_model)
    assert "-f" not in perf_flags(perf_command(text))[0]
    assert "cannot set x[2]=48 (an unnamed dim)" in text
