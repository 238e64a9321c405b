"""A worker under another Python interpreter (``--ort-python``, ``[env] ORTOP_PYTHON``): checked before it starts,
started with subprocess, fed the model's summary, and compared with this interpreter's onnxruntime."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time

import onnxruntime as ort
import pytest

from ortop.config import profile as P
from ortop.config.profile import Profile
from ortop.engine import workerproc
from ortop.engine.workerproc import PYTHON_VAR, check_python, launch
from ortop.errors import UsageError
from ortop.runtime import protocol as Proto
from tests.models import make_matmul_model

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

OTHER_ORT = "1.22.0"  # an onnxruntime other than the one installed here, whose wheel runs on this Python


def _venv(path, *packages: str) -> str:
    """A venv at ``path`` with ``packages`` (pip's own index), or a skip when it cannot be had here."""
    python = os.path.join(path, "bin", "python")
    marker = os.path.join(path, ".complete")
    if os.path.exists(marker):
        return python
    done = subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a venv here: {done.stderr.strip()[-200:]}")
    if packages:
        done = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.skip(f"cannot install {' '.join(packages)} (no registry?): {done.stderr.strip()[-300:]}")
    with open(marker, "w") as fh:
        fh.write("ok\n")
    return python


@pytest.fixture(scope="session")
def other_ort_python(request) -> str:
    """A venv with onnxruntime OTHER_ORT and numpy, built once and kept in pytest's cache between runs."""
    folder = request.config.cache.mkdir(f"ort-{OTHER_ORT}-venv")
    return _venv(folder, f"onnxruntime=={OTHER_ORT}", "numpy")


# ---- the check -------------------------------------------------------------------------------------------------------
def test_check_python_refuses_a_missing_path_a_folder_and_a_non_python(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        check_python(str(tmp_path / "nope" / "python"))
    with pytest.raises(UsageError, match="not an executable file"):
        check_python(str(tmp_path))
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\necho 'not python' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(UsageError, match="not a Python interpreter that runs \\(not python\\)"):
        check_python(str(script))


def test_check_python_refuses_an_interpreter_without_onnxruntime(tmp_path):
    bare = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                          capture_output=True)
    if bare.returncode != 0:
        pytest.skip("cannot make a venv here")
    python = str(tmp_path / "bare" / "bin" / "python")
    with pytest.raises(UsageError) as err:
        check_python(python)
    msg = str(err.value)
    assert "cannot import onnxruntime" in msg and "\n" not in msg and "-m pip install onnxruntime" in msg


def test_check_python_reads_this_interpreter_and_remembers_it():
    found = check_python(sys.executable)
    assert found.ort_version == ort.__version__
    assert found.python == ".".join(map(str, sys.version_info[:3]))
    assert check_python(sys.executable) is found  # asked once per path
    assert ort.__version__ in found.text() and sys.executable in found.text()


def test_launch_refuses_a_profile_naming_a_missing_interpreter_before_starting_anything(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    with pytest.raises(UsageError, match="no such file"):
        launch(model, {PYTHON_VAR: str(tmp_path / "missing")}, lambda m: None)


def test_the_package_folder_holds_only_ortop():
    folder = workerproc.package_dir()
    assert os.listdir(folder) == ["ortop"]
    assert os.path.realpath(os.path.join(folder, "ortop")) == os.path.dirname(os.path.realpath(
        __import__("ortop").__file__))


# ---- another onnxruntime, for real ------------------------------------------------------------------------------
def _foreign_maps(pid: int) -> str:
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
        return fh.read()


@pytest.mark.slow
@pytest.mark.integration
def test_a_worker_under_another_interpreter_builds_and_runs_its_onnxruntime(tmp_path, other_ort_python):
    assert check_python(other_ort_python).ort_version == OTHER_ORT
    model = make_matmul_model(tmp_path / "m.onnx", n=32, batch=4)
    got: list = []
    built = threading.Event()

    def on_message(msg):
        got.append(msg)
        if isinstance(msg, (Proto.Built, Proto.BuildFailed)):
            built.set()

    w = launch(model, {PYTHON_VAR: other_ort_python}, on_message, name="ortop-test-foreign")
    try:
        prof = P.merge(Profile(), model=model)
        assert w.send(Proto.Build(0, prof.to_dict(full=True)))
        assert built.wait(60), got
        done = [m for m in got if isinstance(m, (Proto.Built, Proto.BuildFailed))][0]
        assert isinstance(done, Proto.Built), done
        maps = _foreign_maps(w.pid)
        venv = os.path.dirname(os.path.dirname(other_ort_python))
        assert f"{venv}/lib" in maps and "onnxruntime" in maps  # its own onnxruntime, not this venv's
        assert os.path.dirname(ort.__file__) not in maps
        assert done.info["rss_after"] > 0  # no psutil there: read from /proc
        w.send(Proto.RunLive(0))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(isinstance(m, Proto.Samples) and len(m.rows) for m in got):
            time.sleep(0.05)
        assert any(isinstance(m, Proto.Samples) and len(m.rows) for m in got)
    finally:
        w.stop()
    assert w.exitcode is not None


@pytest.mark.slow
@pytest.mark.integration
def test_compare_the_same_model_across_two_onnxruntimes(tmp_path, other_ort_python):
    from ortop.engine import compare

    model = make_matmul_model(tmp_path / "m.onnx", n=64, batch=16)
    here = Profile()
    there = P.merge(here, env={PYTHON_VAR: other_ort_python})
    res = compare(model, [here, there], budget_s=2.0, names=["here", "there"])
    assert res.workers == 2  # one worker each: the interpreter is part of the environment
    assert [c.name for c in res.configs] == ["here", "there"]
    assert all(c.runs > 100 for c in res.configs)
    assert {c.metric for c in res.comparisons} >= {"p50"}
    assert [c.ort_version for c in res.configs] == [ort.__version__, OTHER_ORT]  # the versions, shown per config
    for c in res.configs:  # a leak would show here: the worker's memory over its measured blocks
        assert math.isfinite(c.rss_growth_mib) and c.as_dict()["rss_growth_mib"] is not None


@pytest.mark.slow
@pytest.mark.integration
def test_variants_adds_the_original_under_the_other_onnxruntime(tmp_path, other_ort_python, capsys):
    import json

    from ortop.cli.variants import variants_main

    model = make_matmul_model(tmp_path / "m.onnx", n=32, batch=4)
    assert variants_main([model, "--budget", "1", "--ort-python", other_ort_python, "--json"]) == 0
    configs = json.loads(capsys.readouterr().out)["comparison"]["configs"]
    last = configs[-1]
    assert last["profile"] == f"original@ort-{OTHER_ORT}" and last["ort_version"] == OTHER_ORT
    assert configs[0]["ort_version"] == ort.__version__
    assert last["agreement"]["y"]["max_abs"] < 1e-4  # the same model, the same inputs: the same outputs


def test_compare_refuses_a_missing_interpreter_in_one_line(tmp_path, capsys):
    from ortop.cli.compare import compare_main

    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    assert compare_main([model, "--ort-python", str(tmp_path / "nope"), "--budget", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--ort-python" in err and "no such file" in err


@pytest.mark.slow
@pytest.mark.integration
def test_compare_ort_python_adds_the_first_configuration_under_the_other_onnxruntime(tmp_path, other_ort_python,
                                                                                      capsys):
    import json

    from ortop.cli.compare import compare_main

    model = make_matmul_model(tmp_path / "m.onnx", n=32, batch=4)
    assert compare_main([model, "--ort-python", other_ort_python, "--budget", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["profile"] for c in data["configs"]] == ["defaults", f"defaults@ort-{OTHER_ORT}"]
    assert [c["ort_version"] for c in data["configs"]] == [ort.__version__, OTHER_ORT]
    assert data["workers"] == 2


def test_a_worker_that_dies_before_it_starts_says_why(tmp_path):
    """An interpreter that passes the check but cannot run the worker: its last words reach the caller as a Log."""
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = -c ]; then exec {sys.executable} \"$@\"; fi\n"
                    "echo 'ImportError: the worker cannot start here' >&2\nexit 1\n")
    fake.chmod(0o755)
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    got: list = []
    ended = threading.Event()
    w = launch(model, {PYTHON_VAR: str(fake)}, got.append, lambda wp: ended.set(), name="ortop-test-dies")
    assert ended.wait(30)
    assert w.exitcode == 1
    logs = [m.line for m in got if isinstance(m, Proto.Log)]
    assert logs == [f"{fake}: ImportError: the worker cannot start here"]
    w.stop()
