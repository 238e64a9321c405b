"""What ``ortop COMMAND --help`` prints and which flags a command refuses: plain text, examples and exit codes in
every epilog, one metavar per concept, and a refused flag as one ``ortop: error:`` line; then capacity's
``--strict-providers`` against a real worker that falls back."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from ortop.cli.commands import COMMANDS
from ortop.cli.flags import NO_TRAFFIC, OWN_ARRIVALS, refused
from ortop.cli.main import build_parser, main
from ortop.errors import COMMAND_EXIT_CODES, EXIT_CODES


def subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_every_help_is_plain_text_with_examples_and_exit_codes(name: str, capsys) -> None:
    assert main([name, "--help"]) == 0
    text = capsys.readouterr().out
    for markup in ("``", ":mod:", ":func:", ":class:", "`"):
        assert markup not in text, (name, markup)
    examples = text.index("\nexamples:\n")
    assert f"  ortop {name}" in text[examples:] or (name == "run" and "  ortop model.onnx" in text[examples:])
    codes = text[text.index("\nexit codes:\n"):]
    for code, meaning in COMMAND_EXIT_CODES[name].items():
        assert f"  {code:<4} {meaning}" in codes, (name, code)


def test_the_top_help_lists_every_exit_code(capsys) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "`" not in text
    for code, meaning in EXIT_CODES.items():
        assert f"  {code:<4} {meaning}" in text


def test_export_and_profiles_each_have_a_description_of_their_own() -> None:
    subs = subparsers()
    assert subs["export"].description != subs["profiles"].description
    assert (subs["export"].description or "").startswith("ortop export PROFILE --to FORMAT")
    assert "export" not in (subs["profiles"].description or "")


def test_one_metavar_per_concept() -> None:
    """--profile is PROFILE, the model MODEL and every file written FILE, whatever the command."""
    seen: dict[str, set[str]] = {}
    for p in subparsers().values():
        for a in p._actions:
            key = a.option_strings[-1] if a.option_strings else a.dest
            if key in ("--profile", "model", "--model") or key in ("--save", "--save-fixed", "--report",
                                                                    "--summary", "--jsonl", "--output",
                                                                    "--fix-model"):
                seen.setdefault(key, set()).add(str(a.metavar))
    assert seen["--profile"] == {"PROFILE"}
    assert seen["model"] == seen["--model"] == {"MODEL"}
    for flag in ("--save", "--save-fixed", "--report", "--summary", "--jsonl", "--output", "--fix-model"):
        assert seen[flag] == {"FILE"}, flag
    for name, p in subparsers().items():
        for a in p._actions:
            if a.metavar == "FILE" and a.option_strings and a.option_strings[-1] not in ("--trace",):
                assert "to FILE" in (a.help or ""), (name, a.option_strings)


def test_budget_says_which_clock_it_counts() -> None:
    wall, measuring = "wall-clock seconds", "seconds of measuring, session builds not counted"
    helps = {name: next(a.help for a in p._actions if "--budget" in a.option_strings)
             for name, p in subparsers().items() if any("--budget" in a.option_strings for a in p._actions)}
    assert set(helps) == {"compare", "variants", "tune", "capacity", "doctor"}
    for name in ("tune", "capacity"):
        assert helps[name].startswith(wall) and "builds included" in helps[name]
    for name in ("compare", "variants", "doctor"):
        assert helps[name].startswith(measuring)


@pytest.mark.parametrize("name,rule", [("ops", NO_TRAFFIC), ("capacity", OWN_ARRIVALS)])
def test_flags_a_command_cannot_use_are_refused_in_one_line(name: str, rule, capsys) -> None:
    why, flags = rule
    p = subparsers()[name]
    assert refused(p) == {f: why for f in flags}
    help_ = p.format_help()
    usage = help_[:help_.index("\n\n")]
    for flag in flags:
        assert f"[{flag}" not in usage  # not offered
        value = [] if flag in ("--pin-replicas", "--trace-loop") else ["1"]
        slo = ["--slo", "p99=5ms"] if name == "capacity" else []
        assert main([name, "m.onnx", *slo, flag, *value]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"ortop: error: {flag} is not taken by ortop {name}: {why}"]


def test_capacity_takes_max_queue_and_says_what_it_does_there() -> None:
    p = subparsers()["capacity"]
    [a] = [a for a in p._actions if "--max-queue" in a.option_strings]
    assert "at each rate offered" in (a.help or "")
    assert p.parse_args(["m.onnx", "--slo", "p99=5ms", "--max-queue", "9", "--strict-providers"]).max_queue == 9


# ---- capacity --strict-providers, against a real worker --------------------------------------------------------
@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    for var in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        e[var] = str(tmp_path / var.lower())
    return e


def _capacity(model: str, *flags: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ortop.cli", "capacity", model, "--slo", "p99=50ms", "--threads",
                           "1", "--provider", "NoSuchExecutionProvider", *flags], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.integration
def test_capacity_strict_providers_refuses_a_fallback_and_without_it_warns(matmul_model, env):
    r = _capacity(matmul_model, "--strict-providers", "--budget", "30", env=env)
    assert r.returncode == 1, (r.stdout, r.stderr)
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("ortop: error: defaults: NoSuchExecutionProvider requested but not active")
    assert line.endswith("refused by --strict-providers")
    r = _capacity(matmul_model, "--budget", "4", "--json", env=env)
    assert r.returncode == 0, r.stderr
    warnings = json.loads(r.stdout)["warnings"]
    assert any("NoSuchExecutionProvider requested but not active" in w for w in warnings), warnings
