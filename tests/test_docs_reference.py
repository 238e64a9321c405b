"""The reference pages against the code they are generated from, and the hand-written pages against the parsers and
the metrics registry: a flag, a profile key or a metric renamed in the code and not in the docs fails here. Each
check is also shown to fail, on a fake parser, knob list or registry with one name changed. No worker is spawned.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from ortop.cli import docgen
from ortop.cli.main import build_parser
from ortop.config import knobs
from ortop.metrics import families as fam

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "contrib" / "README.md"]
CONTRIB = sorted(p for p in (ROOT / "contrib").iterdir() if p.suffix in (".md", ".json", ".yml", ".yaml"))
# Metric names a hand-written page still spells wrong today; each is reported again once the page is fixed or moves.
TOLERATED: dict[str, set[str]] = {}  # page -> names let through (none today)


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def _renamed(fams: list, old: str, new: str) -> list:
    """The registry's families with ``old`` (and its samples) named ``new``."""
    for f in fams:
        if f.name == old:
            f.name = new
            f.samples = [s._replace(name=new + s.name[len(old):]) for s in f.samples]
    return fams


# ---- (a) the generated pages are what the code makes now ---------------------------------------------------------
def test_the_generated_pages_are_current() -> None:
    assert docgen.stale(ROOT) == [], "run: python -m ortop.cli.docgen"


def test_check_names_the_page_a_renamed_knob_leaves_stale(monkeypatch, capsys) -> None:
    first = knobs.REGISTRY[0]
    monkeypatch.setattr(knobs, "REGISTRY", (replace(first, key=first.key + "_renamed"), *knobs.REGISTRY[1:]))
    assert docgen.stale(ROOT) == [Path("docs/reference/profile-keys.md")]
    assert docgen.main(["--check"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "ortop docgen: docs/reference/profile-keys.md is stale: run python -m ortop.cli.docgen"]


def test_check_names_the_page_a_renamed_metric_leaves_stale(monkeypatch) -> None:
    real = fam.families
    monkeypatch.setattr(fam, "families", lambda: _renamed(real(), "ortop_worker_restarts", "ortop_worker_respawns"))
    assert docgen.stale(ROOT) == [Path("docs/reference/metrics.md")]


def test_check_names_the_page_a_rebound_key_leaves_stale(monkeypatch) -> None:
    from ortop.tui import keymap

    keys = tuple(replace(k, keys="P", display="P") if k.action == "toggle_spinning" else k for k in keymap.MAIN_KEYS)
    monkeypatch.setattr(keymap, "MAIN_KEYS", keys)
    assert docgen.stale(ROOT) == [Path("docs/live-view.md")]
    assert "| `P` | toggle the intra-op pool's spinning" in docgen.expected(ROOT)[Path("docs/live-view.md")]


def test_check_names_the_page_a_changed_flag_leaves_stale(monkeypatch) -> None:
    from ortop.cli import compare

    prepare = compare.prepare_parser

    def renamed(p: argparse.ArgumentParser) -> None:
        prepare(p)
        [a] = [a for a in p._actions if "--budget" in a.option_strings]
        a.help = "a budget said otherwise"

    monkeypatch.setattr(compare, "prepare_parser", renamed)
    assert docgen.stale(ROOT) == [Path("docs/reference/cli.md")]


def test_the_readme_table_between_the_markers_is_filled_and_checked(tmp_path: Path) -> None:
    for name, make in docgen.PAGES.items():
        (tmp_path / "docs" / "reference").mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / "reference" / name).write_text(make())
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nno markers here\n")
    assert docgen.stale(tmp_path) == [] and Path("README.md") not in docgen.expected(tmp_path)  # left alone
    readme.write_text(f"# x\n\n{docgen.START}\n| code | old |\n{docgen.END}\n\nafter\n")
    assert docgen.stale(tmp_path) == [Path("README.md")]
    filled = docgen.expected(tmp_path)[Path("README.md")]
    assert filled.startswith(f"# x\n\n{docgen.START}\n| code | meaning | returned by |") and filled.endswith(
        f"{docgen.END}\n\nafter\n")
    assert "| 3 | ortop doctor only: findings above info" in filled
    readme.write_text(filled)
    assert docgen.stale(tmp_path) == []


# ---- (b) every ortop command line in the docs uses flags its command takes ---------------------------------------
@pytest.mark.parametrize("page", DOCS, ids=_rel)
def test_command_lines_in_the_docs_use_only_flags_their_command_takes(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert docgen.flag_drift(text) == []


def test_the_docs_hold_command_lines_to_check() -> None:
    lines = [line for page in DOCS for line in docgen.command_lines(page.read_text(encoding="utf-8"))]
    assert len(lines) > 50 and any(" compare " in line and "--budget" in line for line in lines)


PAGE = """Run it:

```sh
$ .venv/bin/ortop compare m.onnx a.toml b.toml \\
    --budget 20 --objective p99   # a comment --not-a-flag
ortop ops m.onnx --rate 5 | head
ortop profiles validate --host a.toml && ortop export a --to python -o x.py
ortop tune MODEL --budget … --whatever-follows-a-placeholder
```

Inline, wrapped: `ortop capacity m.onnx --slo p99=5ms
--budgte 3` and `ortop --version`.
"""


def test_command_lines_are_found_in_blocks_continuations_and_inline_code() -> None:
    assert docgen.command_lines(PAGE) == [
        "ortop compare m.onnx a.toml b.toml --budget 20 --objective p99",
        "ortop ops m.onnx --rate 5",
        "ortop profiles validate --host a.toml",
        "ortop export a --to python -o x.py",
        "ortop capacity m.onnx --slo p99=5ms --budgte 3",
        "ortop --version",
    ]
    # a misspelt flag and a flag the command refuses are both reported; the rest pass
    assert docgen.flag_drift(PAGE) == [
        "'ortop ops m.onnx --rate 5': --rate not taken by that command",
        "'ortop capacity m.onnx --slo p99=5ms --budgte 3': --budgte not taken by that command",
    ]


def _without(flag: str, command: str) -> argparse.ArgumentParser:
    """The real parser with ``flag`` of ``command`` renamed to ``flag-renamed``."""
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    action = sub._option_string_actions.pop(flag)
    action.option_strings = [f"{flag}-renamed"]
    sub._option_string_actions[f"{flag}-renamed"] = action
    return top


def test_a_flag_renamed_in_the_parser_is_reported_in_the_readme() -> None:
    # the README's own lines, and two a page could hold: drift in either is reported
    readme = (ROOT / "README.md").read_text(encoding="utf-8") + (
        "\n```bash\nortop compare m.onnx a.toml b.toml --budget 20\nortop m.onnx --headless --duration 5\n```\n")
    assert docgen.flag_drift(readme) == []
    drift = docgen.flag_drift(readme, _without("--budget", "compare"))
    assert drift and all(d.startswith("'ortop compare ") and d.endswith(": --budget not taken by that command")
                         for d in drift)
    assert docgen.flag_drift(readme, _without("--headless", "run"))  # the default command too


# ---- (c) every metric the docs name is exported ------------------------------------------------------------------
@pytest.mark.parametrize("page", sorted({*DOCS, *CONTRIB}), ids=_rel)
def test_metric_names_in_the_docs_are_exported(page: Path) -> None:
    found = docgen.metric_drift(page.read_text(encoding="utf-8"))
    assert set(found) - TOLERATED.get(_rel(page), set()) == set()


def test_a_metric_renamed_in_the_registry_is_reported() -> None:
    text = (ROOT / "contrib" / "README.md").read_text(encoding="utf-8")
    assert docgen.metric_drift(text) == []
    fams = _renamed(fam.families(), "ortop_requests_dropped", "ortop_requests_shed")
    assert docgen.metric_drift(text, fam.exported_names(fams)) == ["ortop_requests_dropped_total"]
    # Prometheus' suffixes on an exported family pass, a prefix passes when a name has it, a stranger does not
    names = fam.exported_names()
    assert docgen.metric_drift("ortop_latency_seconds_bucket ortop_runs_created ortop_process_ ortop_nope",
                               names) == ["ortop_nope"]


# ---- the dashboard and the contrib README ----------------------------------------------------------------------
def _dashboard_names(dash: dict) -> set[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in dash["annotations"]["list"] if "expr" in a]
    return {n for e in exprs for n in re.findall(r"\bortop_\w+", e)}


def test_every_metric_the_dashboard_queries_is_exported_and_traffic_has_panels() -> None:
    dash = json.loads((ROOT / "contrib" / "grafana-ortop.json").read_text(encoding="utf-8"))
    names = fam.exported_names()
    queried = _dashboard_names(dash)
    assert {n for n in queried if not fam.is_exported(n, names)} == set()
    traffic = {"ortop_offered_rate_per_second", "ortop_queue_wait_seconds", "ortop_service_seconds",
               "ortop_requests_dropped_total", "ortop_runs_total"}
    assert traffic <= queried
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    # the same check on a registry without one of them fails
    fams = [f for f in fam.families() if f.name != "ortop_service_seconds"]
    assert {n for n in queried if not fam.is_exported(n, fam.exported_names(fams))} == {"ortop_service_seconds"}


def test_the_contrib_readme_lists_every_metric_and_points_to_the_generated_list() -> None:
    text = (ROOT / "contrib" / "README.md").read_text(encoding="utf-8")
    assert "docs/reference/metrics.md" in text
    for f in fam.families():
        name = docgen._exported_as(f)
        assert f"`{name}`" in text or (name.startswith("ortop_process_") and "`ortop_process_*`" in text), name


# ---- one command for the tests: the README's, CI's and the script's ------------------------------------------------
def _development_commands(readme: str) -> list[str]:
    """The commands of the README's Development block, comments and blank lines left out."""
    section = readme.split("\n## Development\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_the_readme_sets_up_in_two_commands_and_ci_runs_the_same_script() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _development_commands(readme) == ["pip install -e '.[test,fleet]'", "scripts/test"]
    script = ROOT / "scripts" / "test"
    assert os.access(script, os.X_OK), "scripts/test is not executable"
    # CI calls the script, and holds no copy of the tiers of its own
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test" in ci and "pytest" not in ci.replace('"== pytest"', "")
    # the three tiers, in order, each its own marker expression
    tiers = re.findall(r'^tier "[^"]+" -m "([^"]+)"', script.read_text(encoding="utf-8"), re.M)
    assert tiers == ["not integration or sharing", "integration and not sharing and not timing and not alone",
                     "timing or alone"]
    help_ = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert help_.returncode == 0 and "--quick" in help_.stdout
    # a README still giving the old three pytest lines is caught
    old = readme.replace("scripts/test                     #", ".venv/bin/python -m pytest -q -m timing  #", 1)
    assert _development_commands(old) != _development_commands(readme)
