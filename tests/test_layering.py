"""Import layering at run time: no room below the UI pulls in textual, only the runtime room pulls in onnxruntime,
and the CLI and TUI reach the engine and the doctor through their faces (``ortop.engine``, ``ortop.doctor``) alone.
Checked in a fresh interpreter, so nothing another test imported can hide a violation, or by reading the source,
so an import inside a function counts too. The static side of the same rules is import-linter's contracts in
pyproject.toml (run by .ci/run)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import ortop

ALL_MODULES = sorted(m.name for m in pkgutil.walk_packages(ortop.__path__, "ortop.")
                     if not m.name.endswith("__main__"))
NON_UI_MODULES = [m for m in ALL_MODULES if not m.startswith("ortop.tui")]
NO_ORT_MODULES = [m for m in NON_UI_MODULES if not m.startswith("ortop.runtime")]
FACES = ("ortop.engine", "ortop.doctor")
SRC = Path(ortop.__file__).parent


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


ROOMS = {"config", "model", "runtime", "measure", "engine", "doctor", "collectors", "export", "report", "metrics",
         "cli", "tui", "fleet", "present"}


def test_the_rooms_are_all_seen():
    """Every package of ortop is a room named here, holds modules for the import checks of this file to load, and
    is a layer of the rooms' layers contract in pyproject.toml: a new room cannot sit outside the layering
    unnoticed."""
    packages = {m.name for m in pkgutil.iter_modules(ortop.__path__) if m.ispkg}
    assert packages == ROOMS
    for room in ROOMS:
        assert any(m.startswith(f"ortop.{room}.") for m in ALL_MODULES), room
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    config = tomllib.loads((SRC.parent.parent / "pyproject.toml").read_text())
    layered = [{name.strip().removeprefix("ortop.") for layer in c["layers"] for name in layer.split(":")}
               for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    assert ROOMS in layered, layered


@pytest.mark.slow
def test_nothing_below_the_ui_imports_textual():
    loaded = _imported_after(NON_UI_MODULES)
    assert set(NON_UI_MODULES) <= loaded
    assert not _has(loaded, "textual")


@pytest.mark.slow
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


def _imports(source: str, package: str) -> list[tuple[int, str]]:
    """Every module a file of ``package`` imports, at any depth (a function's deferred imports, TYPE_CHECKING
    blocks), by line: ``from P import N`` counts as P.N too where N is a module of P, as the import system reads it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names if f"{base}.{a.name}" in ALL_MODULES]
    return found


def _private_imports(source: str, package: str) -> list[str]:
    return [f"{line}: {name}" for line, name in _imports(source, package)
            if any(name.startswith(face + ".") for face in FACES)]


@pytest.mark.slow
def test_the_cli_and_tui_use_the_engine_and_doctor_through_their_faces():
    files = sorted((SRC / "tui").rglob("*.py")) + sorted((SRC / "cli").rglob("*.py"))
    assert len(files) > 20
    private = [f"{f.relative_to(SRC)}:{hit}" for f in files
               for hit in _private_imports(f.read_text(), ".".join(f.relative_to(SRC.parent).parts[:-1]))]
    assert not private, "\n".join(private)


def test_the_face_check_sees_deferred_relative_and_from_imports():
    """What the check above must catch: a deferred import, a module named in a from-import, a relative import."""
    src = ("from ortop.engine import Monitor\n"
           "def f():\n    from ortop.engine.live import snapshot\n    import ortop.doctor.static\n"
           "    from ..engine.answers import space\n")
    hits = [h.split(": ")[1] for h in _private_imports(src, "ortop.tui")]
    assert hits == ["ortop.engine.live", "ortop.engine.live.snapshot", "ortop.doctor.static", "ortop.engine.answers",
                    "ortop.engine.answers.space"]


@pytest.mark.parametrize("face", FACES)
def test_each_face_gives_what_it_lists_and_types_it(face):
    """``__all__``, the lazy names (``_FACE``) and the ``TYPE_CHECKING`` imports a type checker reads agree; every
    name resolves to the object of the module defining it; no name is spelled as a module of the package (importing
    that module would replace the name with it)."""
    mod = importlib.import_module(face)
    tree = ast.parse(Path(mod.__file__).read_text())
    typed = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.If)
             and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
             for imp in node.body if isinstance(imp, ast.ImportFrom) for a in imp.names}
    lazy = mod._FACE
    assert typed == set(lazy)
    assert set(lazy) <= set(mod.__all__) and len(set(mod.__all__)) == len(mod.__all__)
    submodules = {m.rsplit(".", 1)[1] for m in ALL_MODULES if m.startswith(face + ".")}
    assert not set(mod.__all__) & submodules
    for name in mod.__all__:
        value = getattr(mod, name)
        module, _, attribute = lazy.get(name, "").partition(":")
        if module:
            assert value is getattr(importlib.import_module(f"{face}.{module}"), attribute or name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = mod.no_such_name


@pytest.mark.slow
def test_the_faces_and_the_tui_start_up_leave_the_heavy_modules_unloaded():
    """The faces load a name when it is first read: importing them, or starting the TUI, does not import the
    monitor, the A/B runner or the doctor's checks (the TUI needs those only when a screen runs them)."""
    heavy = {"ortop.engine.live.monitor", "ortop.engine.bench.ab", "ortop.engine.live.headless", "ortop.doctor.static",
             "ortop.doctor.measured", "ortop.doctor.diagnose"}
    faces = _imported_after(list(FACES))
    assert not {m for m in faces if m.startswith("ortop.engine.")}
    assert not faces & heavy
    tui = _imported_after(["ortop.tui.app"])
    assert "ortop.tui.app" in tui and not tui & heavy


def test_the_monitor_and_the_ui_fake_take_the_views_arguments():
    """mypy checks the Monitor against the TUI's MonitorView (run_app hands one to make_app); the tests' fake is
    outside mypy's files, so its methods are held to the view's parameters here (names, kinds, defaults)."""
    from ortop.engine import Monitor, MonitorView
    from tests.fakes import FakeMonitor

    members = [k for k in vars(MonitorView) if not k.startswith("_")]
    assert {"snapshot", "apply", "verify", "generation"} <= set(members)

    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    for impl in (Monitor, FakeMonitor):
        for name in members:
            want = inspect.getattr_static(MonitorView, name)
            if callable(want):
                assert params(getattr(impl, name)) == params(want), (impl.__name__, name)


def _package_of(path: Path) -> str:
    """The package a source file's relative imports start from (``ortop.engine`` for engine/monitor.py and for
    engine/__init__.py alike)."""
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])


def _module_of(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(files: dict[str, str]) -> dict[str, set[str]]:
    """Module → the ortop modules it imports anywhere in its source (a function's deferred imports and
    TYPE_CHECKING blocks too). Its own packages are left out: Python imports them before the module in any case."""
    graph = {}
    for name, source in files.items():
        package = name if name in _PACKAGES else name.rpartition(".")[0]
        ancestors = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = {m for m in _named(source, package) if m in files and m != name and m not in ancestors}
    return graph


def _named(source: str, package: str) -> set[str]:
    """Every dotted name an import in the source names, at any depth: ``from P import N`` names P and P.N."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
    return names


def _base(node: ast.ImportFrom, package: str) -> str:
    """The module a from-import reads from, a relative one resolved against ``package``."""
    base = node.module or ""
    if node.level:
        parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{parent}.{base}" if base else parent
    return base


def _two_module_circles(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} <-> {b}" for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, ()))


_PACKAGES = {m.name for m in pkgutil.walk_packages(ortop.__path__, "ortop.") if m.ispkg} | {"ortop"}


@pytest.mark.slow
def test_no_two_modules_import_each_other():
    """No two modules of ortop import each other, at any depth (an import deferred into a function or kept for the
    type checker counts): what both need lives in the one it belongs to, or in a module below both."""
    files = {_module_of(f): f.read_text() for f in sorted(SRC.rglob("*.py"))}
    assert len(files) > 100
    graph = _import_graph(files)
    assert sum(len(t) for t in graph.values()) > 300
    assert not _two_module_circles(graph), "\n".join(_two_module_circles(graph))


def test_the_circle_check_sees_deferred_and_type_checking_imports():
    files = {"ortop.engine.a": "def f():\n    from ortop.engine.b import g\n",
             "ortop.engine.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
             "ortop.engine.c": "from ortop.engine import a\nimport ortop.engine\n"}
    graph = _import_graph(files)
    assert graph == {"ortop.engine.a": {"ortop.engine.b"}, "ortop.engine.b": {"ortop.engine.a"},
                     "ortop.engine.c": {"ortop.engine.a"}}
    assert _two_module_circles(graph) == ["ortop.engine.a <-> ortop.engine.b"]


def _private_names(source: str, package: str) -> list[str]:
    """``from ortop.X import _name`` in a source file, relative imports resolved: a name its module keeps to itself."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            if base == "ortop" or base.startswith("ortop."):
                hits += [f"{node.lineno}: from {base} import {a.name}" for a in node.names
                         if a.name.startswith("_") and not a.name.startswith("__")]
    return hits


@pytest.mark.slow
def test_no_module_imports_a_private_name_of_another():
    files = sorted(SRC.rglob("*.py"))
    hits = [f"{f.relative_to(SRC)}:{h}" for f in files for h in _private_names(f.read_text(), _package_of(f))]
    assert not hits, "\n".join(hits)


def test_the_private_name_check_sees_deferred_and_relative_imports():
    src = ("from ortop.model.inspect import walk, _walk\n"
           "def f():\n    from ..fsutil import _umask\n    from ortop import __version__\n    from os import _exit\n")
    assert _private_names(src, "ortop.doctor") == ["1: from ortop.model.inspect import _walk",
                                                   "3: from ortop.fsutil import _umask"]


def test_a_module_over_450_lines_says_why_within_ten_percent_of_its_length() -> None:
    """A long module carries an "Over ~N lines:" note saying why it is one module, and N stays true as it grows."""
    import re

    wrong = []
    for path in sorted((Path(__file__).resolve().parents[1] / "src" / "ortop").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines <= 450:
            continue
        note = re.search(r"Over ~([0-9,]+) lines", text)
        said = int(note.group(1).replace(",", "")) if note else None
        if said is None or abs(lines - said) > 0.10 * lines:
            wrong.append(f"{path.name}: {lines} lines, note says {said}")
    assert not wrong, wrong


# The export room's code templates: each returns the text of a generated program, read as one piece of that program
TEMPLATES = {("python.py", "_replica_helpers"), ("python.py", "_graph_binding"), ("python.py", "_feeds_helper")}


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_no_function_is_over_80_lines_outside_the_export_templates() -> None:
    """A function over 80 lines does several jobs; the generated-code templates are the exception, named above."""
    import ast

    long, templates = [], set()
    for path in sorted((Path(__file__).resolve().parents[1] / "src" / "ortop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if (path.name, node.name) in TEMPLATES and path.parent.name == "export":
                    templates.add((path.name, node.name))
                elif n > 80:
                    long.append(f"{path.relative_to(path.parents[2])}: {node.name} ({n} lines)")
    assert not long, long
    assert templates == TEMPLATES  # every name let off is still an export template (a rename would hide a long one)
