"""Import layering at run time: no room below the UI pulls in textual, and only the runtime room pulls in
onnxruntime. Checked in a fresh interpreter, so nothing another test imported can hide a violation. The static
side of the same rules is import-linter's contracts in pyproject.toml (run by .ci/run)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import ortop

ALL_MODULES = sorted(m.name for m in pkgutil.walk_packages(ortop.__path__, "ortop.")
                     if not m.name.endswith("__main__"))
NON_UI_MODULES = [m for m in ALL_MODULES if not m.startswith("ortop.tui")]
NO_ORT_MODULES = [m for m in NON_UI_MODULES if not m.startswith("ortop.runtime")]


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


def _has(loaded: set[str], top: str) -> set[str]:
    return {m for m in loaded if m == top or m.startswith(top + ".")}


def test_the_rooms_are_all_seen():
    for room in ("config", "model", "runtime", "measure", "engine", "collectors", "export", "cli", "tui"):
        assert any(m.startswith(f"ortop.{room}") for m in ALL_MODULES), room


def test_nothing_below_the_ui_imports_textual():
    loaded = _imported_after(NON_UI_MODULES)
    assert set(NON_UI_MODULES) <= loaded
    assert not _has(loaded, "textual")


def test_only_the_runtime_room_imports_onnxruntime():
    loaded = _imported_after(NO_ORT_MODULES)
    assert set(NO_ORT_MODULES) <= loaded
    assert not _has(loaded, "onnxruntime")


def test_a_model_check_does_not_import_onnxruntime(tmp_path):
    # load_model() answers the IR question from its measured table for this onnxruntime, or from a child process.
    from tests.models import make_matmul_model

    path = make_matmul_model(tmp_path / "m.onnx", n=4)
    code = (
        "import sys\n"
        "from ortop import model\n"
        "from ortop.config import profile\n"
        f"info = model.load_model({path!r})\n"
        "model.make_feeds(info)\n"
        "profile.validate(profile.Profile())\n"
        "print('onnxruntime' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
