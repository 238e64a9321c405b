"""Each command-line flag's value reaches what it sets: the profile (through the parser and the function the command
builds its start profile with), the tuner's p99 limit, the metrics endpoint's address, the live view's refresh rate;
``--version`` through the installed entry point.

Every value asked for differs from the default, so a flag that is parsed and then dropped fails here.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import urllib.request
from functools import reduce
from pathlib import Path
from typing import Any

import pytest

import ortop
from ortop.cli import main, ops, run, tune
from ortop.cli.main import _with_command, build_parser
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.errors import UsageError

MODEL = "/models/m.onnx"  # the profile functions name the model; none of them reads it

# flag and its argument, the profile key it sets, the value it must reach
PROFILE_FLAGS: list[tuple[list[str], str, Any]] = [
    (["--concurrency", "3"], "workload.concurrency", 3),
    (["--replicas", "2"], "workload.replicas", 2),
    (["--pin-replicas"], "workload.pin_replicas", True),
    (["--shared-arena"], "session.use_env_allocators", True),
    (["--inter-threads", "2"], "session.inter_op_num_threads", 2),
    (["--no-spinning"], "session.allow_spinning", False),
    (["--seed", "7"], "workload.seed", 7),
]
SESSION_ONLY = {"--inter-threads", "--no-spinning"}  # the quick session knobs: run, doctor and ops take them
NO_TRAFFIC = {"--concurrency", "--replicas", "--pin-replicas"}  # ops refuses them: it runs one session, one caller


def value(profile: Profile, key: str) -> Any:
    return reduce(getattr, key.split("."), profile)


def parse(argv: list[str]) -> Any:
    return build_parser().parse_args(_with_command(argv))


def run_profile(*flags: str) -> Profile:
    return run.effective_profile(parse([MODEL, *flags]), MODEL)


def tune_profile(*flags: str) -> Profile:
    return tune.start_profile(parse(["tune", MODEL, *flags]), MODEL)[0]


def doctor_profile(*flags: str) -> Profile:
    return ops.start_profile(parse(["doctor", MODEL, *flags]), MODEL)


def ops_profile(*flags: str) -> Profile:
    return ops.start_profile(parse(["ops", MODEL, *flags]), MODEL)


COMMANDS = {"run": run_profile, "tune": tune_profile, "doctor": doctor_profile, "ops": ops_profile}


@pytest.mark.parametrize("flags,key,want", PROFILE_FLAGS, ids=[f[0][0] for f in PROFILE_FLAGS])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_flag_reaches_the_profile(command: str, flags: list[str], key: str, want: Any) -> None:
    build = COMMANDS[command]
    if command == "tune" and flags[0] in SESSION_ONLY:
        with pytest.raises(UsageError, match="unrecognized arguments"):
            build(*flags)
        return
    if command == "ops" and flags[0] in NO_TRAFFIC:
        with pytest.raises(UsageError, match=f"^{flags[0]} is not taken by ortop ops: ops traces runs one after"):
            build(*flags)
        return
    assert value(build(), key) != want  # the default is something else: the flag is what moved it
    got = build(*flags)
    assert value(got, key) == want
    assert got.model == MODEL
    # nothing else moved
    assert got == profile_mod.merge(build(), **{key: want})


def test_all_the_flags_together_and_over_a_profile_file(tmp_path: Path) -> None:
    start = tmp_path / "start.toml"
    start.write_text("[workload]\nconcurrency = 5\nseed = 3\nrate_hz = 50.0\n\n[session]\ninter_op_num_threads = 4\n")
    got = run_profile("--profile", str(start), *(a for flags, _, _ in PROFILE_FLAGS for a in flags))
    for _, key, want in PROFILE_FLAGS:
        assert value(got, key) == want, key
    assert got.workload.rate_hz == 50.0  # what no flag names comes from the file


def fake_tuner_builder(racer_class: Any, seen: dict[str, Any] | None = None) -> Any:
    """A ``build_tuner`` for ``ortop tune`` whose search runs on ``racer_class`` (a fake racer) and a fake clock;
    what it was asked for lands in ``seen``."""
    from ortop.engine import Tuner
    from ortop.engine.answers.space import Space
    from tests.test_tuner import CHAIN, StepClock, host, threads_effect

    def build_tuner(model_path, profile, *, objective, max_p99_ms, budget_s, stop, clock, **kw):
        if seen is not None:
            seen.update(objective=objective, max_p99_ms=max_p99_ms, budget_s=budget_s)
        fake = StepClock(0.0)
        racer = racer_class(fake, threads_effect({2: 0.7}))
        racer.warnings = []
        return Tuner(Space(profile, host(4), CHAIN, ["threads"]), racer, objective=objective, max_p99_ms=max_p99_ms,
                     budget_s=budget_s, clock=fake, stop=stop), racer

    return build_tuner


def test_max_p99_reaches_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``ortop tune --max-p99 MS`` hands MS to the tuner (the search itself runs on a fake racer and clock here; the
    real search with real workers is tests/test_tuner.py's end-to-end test)."""
    import ortop.engine
    from tests.models import make_matmul_model
    from tests.test_tuner import FakeRacer


    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(ortop.engine, "build_tuner", fake_tuner_builder(FakeRacer, seen))
    assert main(["tune", model, "--max-p99", "7.5", "--objective", "cpu", "--budget", "30",
                                "--json"]) == 0
    assert seen == {"objective": "cpu", "max_p99_ms": 7.5, "budget_s": 30.0}
    assert json.loads(capsys.readouterr().out)["max_p99_ms"] == 7.5


@pytest.mark.slow
def test_metrics_addr_is_the_address_the_endpoint_listens_on() -> None:
    args = parse([MODEL, "--metrics-port", "0", "--metrics-addr", "127.0.0.2"])
    assert parse([MODEL, "--metrics-port", "0"]).metrics_addr == "127.0.0.1"  # the default is another address
    outputs = run.open_outputs(args, protect=[])
    try:
        [server] = outputs.items
        assert server.url.startswith("http://127.0.0.2:")
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert b"ortop_" in r.read()
    finally:
        outputs.close()


@pytest.mark.slow
def test_version_through_the_installed_entry_point(capsys) -> None:
    want = f"ortop {importlib.metadata.version('ortop')}"
    assert ortop.__version__ == importlib.metadata.version("ortop")
    [script] = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "ortop"]
    assert script.load()(["--version"]) == 0
    assert capsys.readouterr().out.strip() == want
    r = subprocess.run([sys.executable, "-m", "ortop", "--version"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, want, "")


@pytest.mark.integration
def test_refresh_and_the_flags_reach_the_live_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ortop MODEL --refresh HZ …`` end to end: the real app on a real monitor, with a headless driver in place of
    the terminal; the app's refresh rate and the monitor's start profile are the flags' values."""
    from ortop.tui.app import OrtopApp
    from tests.models import make_matmul_model

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    seen: dict[str, Any] = {}
    real_run = OrtopApp.run

    def headless(self: OrtopApp, *args: Any, **kw: Any) -> Any:
        async def pilot(p: Any) -> None:
            seen["refresh_hz"] = p.app.refresh_hz
            seen["profile"] = p.app.monitor.start_profile
            await p.press("q")

        return real_run(self, headless=True, size=(120, 40), auto_pilot=pilot)

    monkeypatch.setattr(OrtopApp, "run", headless)
    assert main([model, "--refresh", "5", "--seed", "7", "--concurrency", "2",
                                "--profile-dir", str(tmp_path / "profiles")]) == 0
    assert seen["refresh_hz"] == 5.0 and parse([model]).refresh == 2.0
    assert seen["profile"].workload.seed == 7 and seen["profile"].workload.concurrency == 2
    # the rate is held to what a terminal can draw
    monkeypatch.setattr(OrtopApp, "run", headless)
    assert main([model, "--refresh", "1000", "--profile-dir", str(tmp_path / "profiles")]) == 0
    assert seen["refresh_hz"] == 30.0


def test_tune_prints_what_it_measured_and_exits_4_when_a_worker_is_lost(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys) -> None:
    """A worker lost for good while only proven sessions race: the JSON so far, with the fault, and exit 4 (not a
    traceback, not exit 1 with nothing printed); the text form names the fault too."""
    import ortop.engine
    from tests.models import make_matmul_model
    from tests.test_tuner import LosingRacer

    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    monkeypatch.setattr(ortop.engine, "build_tuner", fake_tuner_builder(LosingRacer))
    assert main(["tune", model, "--budget", "30", "--json"]) == 4
    d = json.loads(capsys.readouterr().out)
    assert d["fault"] == "the worker process died (signal 9)" and d["stopped"] is True and d["trials"]
    assert main(["tune", model, "--budget", "30"]) == 4
    assert "a worker was lost for good (the worker process died (signal 9))" in capsys.readouterr().out
