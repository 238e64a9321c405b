"""``ortop profiles ...`` and ``ortop export ...`` through their entry points: output, exit codes, and errors that
stay on one stderr line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ortop.cli.profiles import export_main, profiles_main, resolve_profile, shipped_profiles_dir
from ortop.config import profile as pm

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory, so ./profiles is under the test's control."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ortop: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_shipped_profiles_dir() -> None:
    assert shipped_profiles_dir() == REPO / "profiles"


def test_resolve_order(workdir: Path) -> None:
    assert resolve_profile("cpu-latency") == REPO / "profiles" / "cpu-latency.toml"
    (workdir / "profiles").mkdir()
    (workdir / "profiles" / "cpu-latency.toml").write_text('description = "mine"\n')
    assert resolve_profile("cpu-latency") == Path("profiles") / "cpu-latency.toml"
    assert resolve_profile("cpu-latency.toml") == Path("profiles") / "cpu-latency.toml"
    (workdir / "cpu-latency").write_text("")
    assert resolve_profile("cpu-latency") == Path("cpu-latency")


def test_list(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "profiles").mkdir()
    (workdir / "profiles" / "mine.toml").write_text("# For my model on my box.\n[session]\nintra_op_num_threads = 2\n")
    (workdir / "profiles" / "broken.toml").write_text("[session]\nintra_op_num_threads = -1\n")
    assert profiles_main(["list"]) == 0
    out = capsys.readouterr().out
    assert "profiles in ./profiles:" in out
    assert "mine" in out and "For my model on my box." in out
    assert "broken" in out and "INVALID" in out
    assert f"shipped profiles ({REPO / 'profiles'}):" in out
    for name in ("cpu-latency", "cuda-graph", "numa-node0"):
        assert name in out
    assert "CPU, lowest latency: all physical cores, spinning on" in out  # its description key
    assert "Lowest single-request latency" not in out  # not the comment over it
    assert str(REPO / "profiles" / "cuda-graph.toml") in out


def test_list_shows_the_description_key_and_the_comment_only_without_one(workdir: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "profiles").mkdir()
    (workdir / "profiles" / "both.toml").write_text('# A long comment on why.\ndescription = "two threads"\n'
                                                    "[session]\nintra_op_num_threads = 2\n")
    (workdir / "profiles" / "bare.toml").write_text("[session]\nintra_op_num_threads = 2\n")
    assert profiles_main(["list"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ") and ln.split()}
    assert lines["both"].split(None, 1)[1] == "two threads"
    assert lines["bare"].split(None, 1)[1] == "(no description)"


def test_show_prints_loadable_toml(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profiles_main(["show", "numa-node0"]) == 0
    out = capsys.readouterr().out
    data = tomllib.loads(out)
    assert data["session"]["intra_op_num_threads"] == 4
    assert data["session"]["enable_mem_pattern"] is True  # defaults filled in
    assert data["workload"]["warmup_runs"] == 10
    assert "#   session.intra_op_thread_affinities = 2;3;4" in out  # ORT's 1-based text
    assert pm.loads(out) == pm.load(REPO / "profiles" / "numa-node0.toml")


def test_show_names_only_the_settings_it_leaves_unset(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profiles_main(["show", "cpu-low-power"]) == 0
    out = capsys.readouterr().out
    assert "allow_spinning = false" in out
    notes = " ".join(ln.lstrip("# ") for ln in out.splitlines() if ln.startswith("#"))
    unset = notes.split("ORT's own default applies: ")[1].split(" left unset")[0]
    assert "session.dynamic_block_base" in unset and "session.spin_duration_us" in unset
    assert "allow_spinning" not in unset  # the profile sets both spinning knobs: neither is said to be unset
    assert "workload.arrival (closed, or fixed when rate_hz is set)" in notes  # ortop's, not ORT's
    assert "ORT's default" not in notes.replace("ORT's own default applies", "")
    assert pm.loads(out) == pm.load(REPO / "profiles" / "cpu-low-power.toml")


def test_show_of_a_profile_setting_everything_has_no_unset_note(workdir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from ortop.config import knobs

    values = {"session.intra_op_thread_affinities": ((1,),), "session.intra_op_num_threads": 2,
              "workload.arrival": "closed"}
    for knob in knobs.registry():
        if knob.optional and not knobs.is_entry(knob) and knob.key not in values:
            values[knob.key] = {bool: False, int: 1, str: "closed"}[knob.type]
    path = workdir / "full.toml"
    pm.save(pm.merge(pm.Profile(), **values), path)
    assert profiles_main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "left unset" not in out
    assert "dynamic_block_base = 1" in out


def test_show_cuda_lists_provider_options(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profiles_main(["show", "cuda-memory-capped"]) == 0
    out = capsys.readouterr().out
    assert "# providers: CUDAExecutionProvider, CPUExecutionProvider" in out
    assert "CUDAExecutionProvider arena_extend_strategy = kSameAsRequested" in out


def test_diff(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profiles_main(["diff", "cpu-latency", "cpu-low-power"]) == 0
    out = capsys.readouterr().out
    assert "session.allow_spinning: on → off" in out
    assert "session.inter_op_allow_spinning: default → off" in out
    assert profiles_main(["diff", "cuda-graph", "cuda-graph"]) == 0
    assert "no differences" in capsys.readouterr().out


def test_validate(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = workdir / "good.toml"
    good.write_text('description = "ok"\n')
    bad = workdir / "bad.toml"
    bad.write_text("[session]\nintra_op_num_threads = -1\n[workload]\nconcurrency = 0\n")
    assert profiles_main(["validate", str(good)]) == 0
    assert capsys.readouterr().out == f"ok {good}\n"
    assert profiles_main(["validate", str(good), str(bad), str(workdir / "missing.toml")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"ok {good}"
    assert out[1] == f"FAIL {bad}"
    assert out[2] == f"  {bad}:2: intra_op_num_threads must be >= 0 (0 = ORT's default), got -1"
    assert out[3] == f"  {bad}:4: concurrency must be >= 1, got 0"
    assert out[4] == f"FAIL {workdir / 'missing.toml'}"


def test_validate_reads_a_full_provider_name_as_its_alias(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[provider] name = "CUDAExecutionProvider" (the README allows it) has its CUDA options checked exactly as with
    name = "cuda", instead of passing a value ORT refuses and then running on the CPU."""
    p = workdir / "graph.toml"
    lines = {}
    for name in ("cuda", "CUDAExecutionProvider"):
        p.write_text(f'[provider]\nname = "{name}"\nio_binding = true\n\n'
                     '[provider.options]\nenable_cuda_graph = "yes"\n')
        assert profiles_main(["validate", str(p)]) == 1
        lines[name] = capsys.readouterr().out.splitlines()
    assert lines["cuda"] == [f"FAIL {p}", f"  {p}:6: enable_cuda_graph must be true or false, got 'yes' (ORT's CUDA "
                                          "provider takes only 0, 1, true, false, True, False)"]
    assert lines["CUDAExecutionProvider"] == lines["cuda"]
    p.write_text('[provider]\nname = "CUDAExecutionProvider"\nio_binding = true\n\n[provider.options]\n'
                 "enable_cuda_graph = true\n")
    assert profiles_main(["validate", str(p)]) == 0
    assert capsys.readouterr().out == f"ok {p}\n"


def test_validate_names_an_unknown_provider(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = workdir / "typo.toml"
    p.write_text('[provider]\nname = "cdua"\n')
    assert profiles_main(["validate", str(p)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"FAIL {p}", f"  {p}:2: provider.name 'cdua' is not a provider ortop knows (did you mean 'cuda'?): use a "
        "short name (cpu, cuda, tensorrt, openvino, ...) or ORT's full name, ending in ExecutionProvider"]


def test_validate_host(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    far = workdir / "far.toml"
    core = (os.cpu_count() or 1) + 7
    far.write_text(f"[session]\nintra_op_num_threads = 2\nintra_op_thread_affinities = [[{core}]]\n")
    assert profiles_main(["validate", str(far)]) == 0
    capsys.readouterr()
    assert profiles_main(["validate", "--host", str(far)]) == 1
    assert "does not exist on this host" in capsys.readouterr().out


def test_validate_every_shipped_profile(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in (REPO / "profiles").glob("*.toml"))
    assert profiles_main(["validate", *files]) == 0
    assert capsys.readouterr().out.count("ok ") == len(files)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        ([], "the following arguments are required"),
        (["bogus"], "invalid choice"),
        (["show"], "the following arguments are required"),
        (["show", "no-such-profile"], "profile not found: no-such-profile"),
        (["diff", "cpu-latency"], "the following arguments are required"),
    ],
)
def test_profiles_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    assert profiles_main(argv) == 2
    assert fragment in one_error_line(capsys)


def test_show_invalid_profile_is_one_line(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = workdir / "bad.toml"
    bad.write_text("[session]\nintra_op_num_threads = -1\n[workload]\nconcurrency = 0\n")
    assert profiles_main(["show", str(bad)]) == 2
    line = one_error_line(capsys)
    assert f"{bad}:2:" in line and f"{bad}:4:" in line
    bad.write_text("[session\n")
    assert profiles_main(["show", str(bad)]) == 2
    assert "not valid TOML" in one_error_line(capsys)


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert profiles_main(["--help"]) == 0
    assert "validate" in capsys.readouterr().out
    assert export_main(["--help"]) == 0
    assert "--to FORMAT" in capsys.readouterr().out


# ---- export -------------------------------------------------------------------------------------------------

def test_export_to_stdout(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert export_main(["cpu-low-power", "--to", "python"]) == 0
    out = capsys.readouterr().out
    assert "so.add_session_config_entry('session.intra_op.allow_spinning', '0')" in out
    assert "MODEL_PATH = 'model.onnx'" in out


def test_export_model_option(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert export_main(["cuda-graph", "--to", "perf-test", "--model", "my model.onnx"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("'my model.onnx' perf_result.txt")
    assert " -g " in out


def test_export_to_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = workdir / "out" / "olive.json"
    assert export_main(["cuda-memory-capped", "--to", "olive", "-o", str(target)]) == 2  # no folder made silently
    assert "does not exist" in capsys.readouterr().err and not target.parent.exists()
    target.parent.mkdir()
    assert export_main(["cuda-memory-capped", "--to", "olive", "-o", str(target)]) == 0
    assert f"wrote {target}" in capsys.readouterr().out
    assert '"gpu_mem_limit": "2147483648"' in target.read_text()
    assert os.listdir(target.parent) == ["olive.json"]  # no temp files left


def test_export_never_writes_over_its_profile(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = workdir / "p.toml"
    p.write_text("[session]\nintra_op_num_threads = 2\n")
    assert export_main([str(p), "--to", "python", "-o", str(p)]) == 2
    assert "ortop is using" in capsys.readouterr().err
    assert p.read_text() == "[session]\nintra_op_num_threads = 2\n"


def test_export_path_profile(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = workdir / "p.toml"
    p.write_text('model = "m.onnx"\n[env]\nOMP_NUM_THREADS = "2"\n')
    assert export_main([str(p), "--to", "env"]) == 0
    assert capsys.readouterr().out == "export OMP_NUM_THREADS=2\n"
    assert export_main([str(p), "--to", "python"]) == 0
    assert f"MODEL_PATH = {str(workdir / 'm.onnx')!r}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["cpu-latency"], "the following arguments are required: --to"),
        (["cpu-latency", "--to", "yaml"], "unknown export format 'yaml'"),
        (["nope", "--to", "python"], "profile not found: nope"),
        (["cpu-latency", "--to", "json", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_export_bad_input(workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    assert export_main(argv) == 2
    assert fragment in one_error_line(capsys)


def test_export_refused_by_the_format(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = workdir / "custom.toml"
    p.write_text('[provider]\nname = "MyExecutionProvider"\n')
    assert export_main([str(p), "--to", "perf-test"]) == 2
    assert "no -e name for provider" in one_error_line(capsys)


def test_export_unwritable_output(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "adir").mkdir()
    assert export_main(["cpu-latency", "--to", "json", "-o", str(workdir / "adir")]) == 2
    one_error_line(capsys)
    assert os.listdir(workdir / "adir") == []


def test_cli_main_dispatches(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ortop.cli.main import main

    assert main(["profiles", "validate", str(REPO / "profiles" / "cpu-latency.toml")]) == 0
    assert main(["export", "cpu-latency", "--to", "env"]) == 0
    assert "no environment variables" in capsys.readouterr().out
