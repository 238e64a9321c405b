"""``ortop`` run as a user runs it: a subprocess with arguments, reading its stdout, stderr and exit code."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.models import make_conv_model, make_matmul_model, save

pytestmark = pytest.mark.integration

SUMMARY_KEYS = {"model", "profile", "providers_requested", "providers_active", "warnings", "runs", "warmup_runs",
                "duration_s", "latency_ms", "throughput_per_s", "cpu", "session", "gpu"}
LATENCY_KEYS = {"mean", "p50", "p90", "p95", "p99", "p999", "min", "max"}
CPU_KEYS = {"cpu_ms_per_run", "cpu_ms_between_runs_per_s", "process_cpu_percent"}


@pytest.fixture
def env(tmp_path):
    """The environment ortop runs in: caches and saved state under tmp_path, never the user's home."""
    e = dict(os.environ)
    e["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    e["XDG_STATE_HOME"] = str(tmp_path / "state")
    e["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    e.pop("PYTHONWARNINGS", None)
    return e


def ortop(*args, env, timeout: float = 90, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ortop.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd)


def one_error_line(r: subprocess.CompletedProcess, code: int = 2) -> str:
    """The run failed as ortop promises: exit ``code`` and exactly one 'ortop: error:' line, no traceback."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ortop: error: "), r.stderr
    return lines[0]


def no_gpu() -> bool:
    return shutil.which("nvidia-smi") is None


def check_summary(d: dict) -> None:
    assert SUMMARY_KEYS <= set(d), SUMMARY_KEYS - set(d)
    assert set(d["latency_ms"]) == LATENCY_KEYS
    assert set(d["cpu"]) == CPU_KEYS
    assert set(d["session"]) == {"create_ms", "first_run_ms"}
    assert d["runs"] > 0
    lat = d["latency_ms"]
    assert all(isinstance(lat[k], float) and math.isfinite(lat[k]) for k in LATENCY_KEYS)
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert d["throughput_per_s"] > 0
    assert d["cpu"]["cpu_ms_per_run"] > 0
    assert d["session"]["create_ms"] > 0 and d["session"]["first_run_ms"] > 0
    assert "CPUExecutionProvider" in d["providers_active"]
    assert isinstance(d["warnings"], list)
    if no_gpu():
        assert d["gpu"] is None


# ---- headless runs ---------------------------------------------------------------------------------------------------
def test_headless_json_summary_and_overrides(matmul_model, tmp_path, env):
    profile = tmp_path / "p.toml"
    profile.write_text("[session]\nintra_op_num_threads = 1\n\n[workload]\nwarmup_runs = 7\n")
    summary = tmp_path / "out" / "summary.json"
    args = (matmul_model, "--headless", "--duration", 1, "--json", "--profile", profile, "--threads", 2,
            "--summary", summary)
    r = ortop(*args, env=env)  # no folder made silently: refused before measuring, nothing on stdout
    assert r.returncode == 2 and r.stdout == "" and "the folder" in r.stderr and "does not exist" in r.stderr
    assert not summary.parent.exists()
    summary.parent.mkdir()
    r = ortop(*args, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)  # the whole of stdout is one JSON object
    check_summary(d)
    assert d["model"] == matmul_model
    assert d["profile"]["session"]["intra_op_num_threads"] == 2   # the flag wins over the profile
    assert d["profile"]["workload"]["warmup_runs"] == 7            # the rest of the profile stays
    assert d["warmup_runs"] == 7
    assert d["providers_requested"] == ["CPUExecutionProvider"]
    assert d["providers_active"] == ["CPUExecutionProvider"]
    assert 0.9 <= d["duration_s"] <= 3
    assert d["inputs"] == ["x: float32[256x256]"]
    assert json.loads(summary.read_text()) == d
    assert r.stderr == ""
    # The configurations it ran, each with its row verdict (one configuration here: nothing to compare with).
    [row] = d["history"]
    assert row["runs"] == d["runs"] and row["label"] == "start" and row["changes"] == []
    assert row["verdict"] is None and row["p50_ms"] == d["latency_ms"]["p50"]


def test_free_spatial_dims_left_at_1_are_a_warning_naming_the_flag(tmp_path, env):
    """A conv input's free spatial dims defaulted to 1 ran as x: float32[1x3x1x1] with warnings: []. Now each is a
    warning in --json, starting with the --dim flag that fixes it; given the dims, the warnings go."""
    model = make_conv_model(tmp_path / "conv.onnx")
    r = ortop(model, "--headless", "--duration", 1, "--json", "--threads", 1, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"] == ["x: float32[1x3x1x1]"]
    dims = [w for w in d["warnings"] if w.startswith("--dim ")]
    assert dims == ["--dim height=VALUE: input 'x' axis 2 is left at 1, too small for a spatial axis of a "
                    "convolution's input",
                    "--dim width=VALUE: input 'x' axis 3 is left at 1, too small for a spatial axis of a "
                    "convolution's input"]
    assert not any("batch" in w for w in d["warnings"])  # a batch of 1 is plausible: a note, not a warning
    r = ortop(model, "--headless", "--duration", 1, "--json", "--threads", 1, "--dim", "height=32", "--dim",
              "width=32", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["inputs"] == ["x: float32[1x3x32x32]"] and not any(w.startswith("--dim") for w in d["warnings"])


def test_headless_table(matmul_model, env):
    r = ortop(matmul_model, "--headless", "--duration", 1, "--threads", 1, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    heads = [ln.split()[0] for ln in lines if ln.strip()]
    for head in ("model", "inputs", "providers", "session", "runs", "latency", "cpu", "gpu"):
        assert head in heads, r.stdout
    text = r.stdout
    assert f"model       {matmul_model}" in text
    assert "CPUExecutionProvider" in text
    assert "(+10 warm-up)" in text
    assert "runs/s" in text and "ms/run" in text
    assert "p50" in text and "p99" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_a_percentile_beyond_the_runs_measured_reads_a_dash_and_says_what_it_needs(matmul_model, env):
    """p999 of a few hundred runs would be the slowest run under another name."""
    from ortop.cli.run import _latency_line

    lat = {"mean": 1.0, "p50": 0.9, "p90": 1.5, "p99": 2.5, "p999": 4.0, "max": 4.1}
    assert _latency_line(lat, 559).endswith("p99 2.50  p999 —  max 4.10  (p999 needs 1,000 runs)")
    assert "p99 —  p999 —" in _latency_line(lat, 50) and _latency_line(lat, 50).endswith("(p99 needs 100 runs)")
    assert "—" not in _latency_line(lat, 1000)
    r = ortop(matmul_model, "--headless", "--duration", 1, "--threads", 1, "--rate", 50, env=env)  # ~50 runs
    assert r.returncode == 0, r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("latency ms")]
    assert "p999 —" in line and "needs" in line, r.stdout


def test_json_stdout_stays_clean_on_a_provider_fallback(matmul_model, env):
    r = ortop(matmul_model, "--headless", "--duration", 1, "--json", "--threads", 1,
              "--provider", "NoSuchExecutionProvider", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["providers_requested"] == ["NoSuchExecutionProvider", "CPUExecutionProvider"]
    assert d["providers_active"] == ["CPUExecutionProvider"]
    assert any("requested but not active" in w for w in d["warnings"])


def test_strict_providers_refuses_a_fallback(matmul_model, env):
    r = ortop(matmul_model, "--headless", "--duration", 1, "--threads", 1, "--provider", "NoSuchExecutionProvider",
              "--strict-providers", env=env)
    line = one_error_line(r, 1)
    assert "strict-providers" in line


def test_demo_headless(tmp_path, env):
    r = ortop("--demo", "--headless", "--duration", 1, "--json", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_summary(d)
    cached = tmp_path / "cache" / "ortop"
    assert Path(d["model"]).parent == cached
    assert list(cached.glob("*.onnx")) == [Path(d["model"])]
    assert d["inputs"] == ["image: float32[1x16x64x64]"]


def test_headless_on_an_onnxruntime_example_model(env):
    from onnxruntime.datasets import get_example

    r = ortop(get_example("logreg_iris.onnx"), "--headless", "--duration", 1, "--json", "--threads", 1, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_summary(d)
    assert d["inputs"] == ["float_input: float32[3x2]"]


def test_console_script(matmul_model, env):
    exe = Path(sys.executable).parent / "ortop"
    if not exe.exists():
        pytest.skip("no ortop console script next to this interpreter")
    r = subprocess.run([str(exe), "info", matmul_model], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "x: float32[256x256]" in r.stdout


def test_model_with_token_ids(env, tmp_path):
    from tests.models import make_bert_like_model

    # ids index an embedding table, a mask and token types: feeds that run without the user preparing data
    model = make_bert_like_model(tmp_path / "bert.onnx")
    r = ortop(model, "--headless", "--duration", 2, "--json", "--dim", "batch=2", "--dim", "seq=16", env=env,
              timeout=180)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_summary(d)
    assert d["runs"] > 0
    assert not [w for w in d["warnings"] if w.startswith("Run() failed") or "failed to build" in w]


def test_sigterm_finishes_with_what_was_measured(matmul_model, env):
    p = subprocess.Popen([sys.executable, "-m", "ortop.cli", matmul_model, "--headless", "--duration", "60",
                          "--json", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        # Measuring has begun once the worker (one intra-op thread, closed loop) has burned well over what its
        # imports and session build cost: about a core-second per second from then on.
        deadline = time.monotonic() + 45
        busy = False
        while time.monotonic() < deadline and not busy:
            time.sleep(0.1)
            assert p.poll() is None, p.communicate()
            try:
                # Children: the worker and multiprocessing's resource tracker (idle); the worker is the busy one.
                kids = psutil.Process(p.pid).children()
                busy = max((sum(k.cpu_times()[:2]) for k in kids), default=0.0) > 3.0
            except psutil.Error:
                pass
        assert busy, "the worker never got busy"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    d = json.loads(out)
    check_summary(d)
    assert d["duration_s"] < 40
    assert d["runs"] > 100


# ---- errors ----------------------------------------------------------------------------------------------------------
def _bad_inputs(tmp_path: Path, good: str) -> dict[str, tuple[list, str]]:
    """case -> (arguments after the model's place, text the error line must contain)."""
    import onnx

    text = tmp_path / "notes.onnx"
    text.write_text("this is not an ONNX model\n" * 20)
    data = Path(good).read_bytes()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    newer = tmp_path / "ir14.onnx"
    m = onnx.load(good)
    m.ir_version = 14
    save(m, newer)
    badprof = tmp_path / "bad.toml"
    badprof.write_text("[session]\nintra_op_threads = 2\n")
    one_s = ["--duration", "1"]
    return {
        "missing model": ([tmp_path / "nope.onnx", *one_s], "not found"),
        "directory": ([tmp_path, *one_s], "directory"),
        "not onnx": ([text, *one_s], "not a valid ONNX model"),
        "truncated": ([truncated, *one_s], str(truncated)),
        "IR too new": ([newer, *one_s], "IR version 14"),
        "unknown profile key": ([good, "--profile", badprof, *one_s], "intra_op_threads"),
        "bad --dim name": ([good, "--dim", "nosuch=2", *one_s], "nosuch"),
        "bad --shape text": ([good, "--shape", "x=abc", *one_s], "bad shape"),
        "--duration -1": ([good, "--duration", "-1"], "--duration"),
        "--dim not a number": ([good, "--dim", "batch=abc", *one_s], "--dim"),
        "--threads -1": ([good, "--threads", "-1", *one_s], "intra_op_num_threads"),
        "--rate -5": ([good, "--rate", "-5", *one_s], "rate_hz"),
        "missing --input file": ([good, "--input", f"x={tmp_path / 'nope.npy'}", *one_s], "nope.npy"),
        "missing --profile file": ([good, "--profile", tmp_path / "nope.toml", *one_s], "profile not found"),
        "--resume with nothing saved": ([good, "--resume", *one_s], "no last session saved"),
    }


BAD_CASES = ["missing model", "directory", "not onnx", "truncated", "IR too new", "unknown profile key",
             "bad --dim name", "bad --shape text", "--duration -1", "--dim not a number", "--threads -1", "--rate -5",
             "missing --input file", "missing --profile file", "--resume with nothing saved"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_is_one_line_and_exit_2(case, tmp_path, env):
    good = make_matmul_model(tmp_path / "good.onnx", n=8)  # symbolic batch: --dim has a free dim to name
    args, needle = _bad_inputs(tmp_path, good)[case]
    r = ortop(*args, "--headless", env=env)
    line = one_error_line(r, 2)
    assert needle in line, line
    assert r.stdout == ""


def test_bad_profile_names_the_file_line_and_suggests(tmp_path, env, matmul_model):
    bad = tmp_path / "bad.toml"
    bad.write_text("[session]\nintra_op_threads = 2\n")
    line = one_error_line(ortop(matmul_model, "--headless", "--profile", bad, env=env))
    assert f"{bad}:2:" in line and "intra_op_num_threads" in line


def test_model_that_fails_at_run_time_exits_1(broadcast_model, env):
    r = ortop(broadcast_model, "--headless", "--duration", 1, "--dim", "N=2", "--dim", "M=3", env=env)
    line = one_error_line(r, 1)
    assert "the first run failed" in line and ("Add" in line or "broadcast" in line.lower()), line
    # with --json the summary still reaches stdout, with the error in its warnings
    r = ortop(broadcast_model, "--headless", "--duration", 1, "--dim", "N=2", "--dim", "M=3", "--json", env=env)
    assert r.returncode == 1
    d = json.loads(r.stdout)
    assert d["runs"] == 0 and any(w.startswith("the first run failed") for w in d["warnings"])


def test_run_error_after_warmup_exits_1_with_the_summary(random_fail_model, env):
    path, idx = random_fail_model
    r = ortop(path, "--headless", "--duration", 5, "--json", "--warmup", 5, env=env)
    line = one_error_line(r, 1)
    assert "failed at run time" in line and "Reshape" in line
    d = json.loads(r.stdout)
    assert d["warmup_runs"] == 5
    assert any(w.startswith("Run() failed") for w in d["warnings"])


def test_debug_shows_the_traceback(tmp_path, env):
    r = ortop(tmp_path / "nope.onnx", "--headless", "--debug", env=env)
    assert r.returncode != 0
    assert "Traceback" in r.stderr and "ModelError" in r.stderr


# ---- ortop info ------------------------------------------------------------------------------------------------------
def test_info_text(matmul_model, env):
    r = ortop("info", matmul_model, env=env)
    assert r.returncode == 0, r.stderr
    assert "inputs      1" in r.stdout and "x: float32[256x256]" in r.stdout
    assert "outputs     1" in r.stdout and "y: float32[256x256]" in r.stdout
    assert "MatMul" in r.stdout


def test_info_json(matmul_model, env):
    r = ortop("info", "--json", matmul_model, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [i["name"] for i in d["inputs"]] == ["x"]
    assert d["inputs"][0]["dtype"] == "float32" and d["inputs"][0]["shape"] == [256, 256]
    assert [o["name"] for o in d["outputs"]] == ["y"]
    assert d["ir_version"] == 10
    assert d["op_histogram"] == {"Add": 1, "MatMul": 1, "Relu": 1}


def test_info_on_a_missing_model_is_one_line(tmp_path, env):
    one_error_line(ortop("info", tmp_path / "nope.onnx", env=env), 2)


def test_the_profiles_model_runs_when_none_is_given(matmul_model, tmp_path, env):
    """`ortop --profile p.toml` with no MODEL runs the model the profile names (relative to the profile), not the
    demo model."""
    import shutil

    shutil.copy(matmul_model, tmp_path / "m.onnx")
    profile = tmp_path / "p.toml"
    profile.write_text('model = "m.onnx"\n[session]\nintra_op_num_threads = 1\n')
    r = ortop("--profile", profile, "--headless", "--duration", 1, "--json", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == str(tmp_path / "m.onnx") and d["inputs"] == ["x: float32[256x256]"]


def test_runs_before_a_worker_crash_are_kept_and_the_restart_is_said(matmul_model, env):
    """SIGKILL the worker mid-run: the summary keeps the runs measured before the fault, and says when and why."""
    import psutil

    p = subprocess.Popen([sys.executable, "-m", "ortop.cli", matmul_model, "--headless", "--duration", "6",
                          "--json", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        deadline = time.monotonic() + 30
        worker = None
        while worker is None and time.monotonic() < deadline:
            kids = [k for k in psutil.Process(p.pid).children() if "resource_tracker" not in " ".join(k.cmdline())]
            worker = kids[0] if kids else None
            time.sleep(0.1)
        assert worker is not None, "no worker process appeared"
        # the evidence that warm-up is over and runs are being measured: the worker's own CPU time, not the clock
        # (a busy host stretches start-up; a kill before the first measured run, or after the end, proves nothing)
        while sum(worker.cpu_times()[:2]) < 1.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.kill()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    d = json.loads(out)
    assert d["restarts"]["count"] == 1 and "signal 9" in d["restarts"]["events"][0]["why"]
    assert len(d["restarts"]["configurations"]) == 2
    # the runs from before the fault count with those after the restart (without them: only the second term)
    before, after = d["restarts"]["configurations"]
    rows = {r["config_id"]: r["runs"] for r in d["history"]}
    assert rows[before] > 1000 and rows[after] > 0
    assert d["runs"] == rows[before] + rows[after]
