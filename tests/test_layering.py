"""Import layering: the engine and the headless CLI never pull in textual; profiles and model inspection never pull
in onnxruntime. Checked in a fresh interpreter, so nothing another test imported can hide a violation."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

# Everything below the UI. Modules that are not written yet are skipped, and named in the skip reason.
NON_UI_MODULES = [
    "ortop.engine",
    "ortop.profile",
    "ortop.model",
    "ortop.stats",
    "ortop.collectors.cpu",
    "ortop.collectors.gpu",
    "ortop.export",
    "ortop.cli",
]
NO_ORT_MODULES = ["ortop.profile", "ortop.model"]


def _existing(names: list[str]) -> tuple[list[str], list[str]]:
    have, missing = [], []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        (have if found else missing).append(name)
    return have, missing


def _imported_after(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout))


@pytest.mark.parametrize("module", NON_UI_MODULES)
def test_non_ui_module_does_not_import_textual(module):
    have, _ = _existing([module])
    if not have:
        pytest.skip(f"{module} is not written yet")
    loaded = _imported_after([module])
    assert module in loaded
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}


def test_all_non_ui_modules_together_do_not_import_textual():
    have, missing = _existing(NON_UI_MODULES)
    assert {"ortop.engine", "ortop.cli", "ortop.profile", "ortop.model"} <= set(have), missing
    loaded = _imported_after(have)
    assert set(have) <= loaded
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}


def test_profile_and_model_do_not_import_onnxruntime():
    loaded = _imported_after(NO_ORT_MODULES)
    assert set(NO_ORT_MODULES) <= loaded
    assert not {m for m in loaded if m == "onnxruntime" or m.startswith("onnxruntime.")}
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}


def test_a_model_check_does_not_import_onnxruntime(tmp_path):
    # load_model() answers the IR question from its measured table for this onnxruntime: no import needed.
    from ortop import model

    version = model._ort_version()
    if version is None or model._version_tuple(version) < min(model._MEASURED_MAX_IR):
        pytest.skip(f"onnxruntime {version} is older than the measured table: load_model asks onnxruntime")
    from tests.models import make_matmul_model

    path = make_matmul_model(tmp_path / "m.onnx", n=4)
    code = (
        "import sys\n"
        "from ortop import model, profile\n"
        f"info = model.load_model({path!r})\n"
        "model.make_feeds(info)\n"
        "profile.validate(profile.Profile())\n"
        "print('onnxruntime' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
