"""``--resume``: the last session is kept per model, by the model's absolute path, so it resumes from any folder, two
ortops on two models keep both, and ``--resume`` alone starts the latest of any model and says which.

The state folder is under tmp_path (``XDG_STATE_HOME``); a session is saved as the live view's end saves it
(``save_last_session`` of the profile ``ortop MODEL FLAGS`` starts from).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ortop.cli import main, run
from ortop.cli.main import _with_command, build_parser
from ortop.config import profile as profile_mod
from ortop.config.errors import ProfileError
from ortop.config.files import (
    SavedSession,
    last_session,
    last_session_path,
    legacy_session_path,
    save_last_session,
)
from ortop.config.profile import Profile
from tests.models import make_matmul_model


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ortop's state folder, under tmp_path."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "ortop"


def parse(argv: list[str]):
    return build_parser().parse_args(_with_command(argv))


def start_profile(model: str, *flags: str) -> Profile:
    """The profile ``ortop MODEL FLAGS`` starts from: what its end saves when nothing was changed."""
    return run.effective_profile(parse([model, *flags]), model)


def quit_ortop(model: str, *flags: str, at: float | None = None) -> Path:
    """An ortop on ``model`` ending: its session saved (its file's time set to ``at``, seconds ago)."""
    path = save_last_session(start_profile(model, *flags))
    if at is not None:
        t = time.time() - at
        os.utime(path, (t, t))
    return path


def found(model: str | None = None) -> SavedSession:
    """The session ``--resume`` starts from (``model``'s, or the latest of any), which must exist."""
    s = last_session(model)
    assert s is not None, model
    return s


def threads(profile: Profile) -> int:
    return profile.session.intra_op_num_threads


def saved(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """``ortop ARGV`` failed as bad input: exit 2 and one 'ortop: error:' line on stderr, no traceback."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ortop: error: --resume: "), err
    return lines[0]


def test_a_model_saved_by_a_relative_path_resumes_from_another_folder(tmp_path: Path, state: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    model = make_matmul_model(tmp_path / "a" / "m.onnx", n=8)
    absolute = str(Path(model).resolve())
    monkeypatch.chdir(tmp_path / "a")
    path = quit_ortop("m.onnx", "--threads", "3")
    assert path.parent == state / "sessions" and path.name.startswith("m-")
    assert f'model = "{absolute}"' in path.read_text()  # the absolute path, not the one typed

    monkeypatch.chdir(tmp_path / "b")
    args = parse(["--resume"])
    assert run._resolve_model(args) == absolute
    assert capsys.readouterr().err.startswith(f"ortop: resuming the last session of {absolute} (saved ")
    prof = run.effective_profile(args, absolute)
    assert prof.model == absolute and threads(prof) == 3
    # the model named again, by another spelling of the same file
    for spelled in ("../a/m.onnx", "../b/../a/m.onnx", absolute):
        assert threads(run.effective_profile(parse([spelled, "--resume"]), spelled)) == 3, spelled
    assert run._profile_name(args) == "last-session"  # the metrics' profile label


def test_two_ortops_on_two_models_keep_both_sessions(tmp_path: Path, state: Path) -> None:
    """Two models of one name in two folders, each ortop quitting in turn: neither overwrites the other's; on one
    model the later end wins."""
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
    x = make_matmul_model(tmp_path / "x" / "m.onnx", n=8)
    y = make_matmul_model(tmp_path / "y" / "m.onnx", n=8)
    px = quit_ortop(x, "--threads", "2", at=30)
    py = quit_ortop(y, "--threads", "3", at=20)
    assert px != py and sorted((state / "sessions").iterdir()) == sorted([px, py])
    assert threads(found(x).profile) == 2 and threads(found(y).profile) == 3
    assert quit_ortop(x, "--threads", "4") == px  # the same model again, later
    assert threads(found(x).profile) == 4 and threads(found(y).profile) == 3
    assert len(list((state / "sessions").iterdir())) == 2
    latest = found()
    assert latest.model == str(Path(x).resolve()) and threads(latest.profile) == 4


@pytest.mark.integration
@pytest.mark.sharing
def test_resume_alone_picks_the_latest_and_names_it(tmp_path: Path, state: Path) -> None:
    """``ortop --resume`` from a folder with no model in it: the latest session of any model, named on stderr in one
    line, runs with its settings."""
    older = make_matmul_model(tmp_path / "older.onnx", n=8)
    newer = make_matmul_model(tmp_path / "newer.onnx", n=16)
    quit_ortop(older, "--threads", "2", at=3600)
    path = quit_ortop(newer, "--threads", "3", at=120)
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("PYTHONWARNINGS", None)
    r = subprocess.run([sys.executable, "-m", "ortop.cli", "--resume", "--headless", "--duration", "0.3", "--json"],
                       capture_output=True, text=True, env=env, timeout=90, cwd=tmp_path / "elsewhere")
    assert r.returncode == 0, r.stderr
    resuming = [line for line in r.stderr.splitlines() if "resuming" in line]
    assert resuming == [f"ortop: resuming the last session of {Path(newer).resolve()} "
                        f"(saved {saved(path.stat().st_mtime)})"], r.stderr
    summary = json.loads(r.stdout)
    assert summary["model"] == str(Path(newer).resolve()) and summary["runs"] > 0
    assert summary["profile"]["session"]["intra_op_num_threads"] == 3


def test_no_session_saved_is_one_line_and_exit_2(tmp_path: Path, state: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    for argv in (["--resume", "--headless"], [model, "--resume", "--headless"]):
        assert "no last session saved yet" in one_error(capsys, argv), argv


def test_no_session_for_the_model_named_says_which_is_latest(tmp_path: Path, state: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A model with no session of its own is an error naming it and the latest of the others, not a silent start
    from another model's settings."""
    other = make_matmul_model(tmp_path / "other.onnx", n=8)
    make_matmul_model(tmp_path / "m.onnx", n=8)
    path = quit_ortop(other, "--threads", "2", at=60)
    monkeypatch.chdir(tmp_path)
    line = one_error(capsys, ["m.onnx", "--resume", "--headless"])
    assert line == (f"ortop: error: --resume: no last session for m.onnx; `ortop --resume` alone resumes the latest "
                    f"(of {Path(other).resolve()}, saved {saved(path.stat().st_mtime)})")


def test_a_broken_session_file_is_one_line_naming_it(tmp_path: Path, state: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    path = quit_ortop(model)
    path.write_text("[session]\nintra_op_threads = 2\n")
    with pytest.raises(ProfileError, match="intra_op_threads"):
        last_session(model)
    code = main([model, "--resume", "--headless"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err, err


def write_legacy(text: str, at: float) -> Path:
    """The single last-session file older versions wrote, ``at`` seconds ago."""
    path = legacy_session_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    t = time.time() - at
    os.utime(path, (t, t))
    return path


def test_the_old_single_file_is_one_more_session(tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    model = make_matmul_model(tmp_path / "old.onnx", n=8)
    absolute = str(Path(model).resolve())
    path = write_legacy(f'model = "{absolute}"\n\n[session]\nintra_op_num_threads = 5\n', at=600)
    assert path == state / "last-session.toml"
    monkeypatch.chdir(state.parent)
    assert found().model == absolute and threads(found(model).profile) == 5
    assert run._resolve_model(parse(["--resume"])) == absolute
    capsys.readouterr()
    # a session saved since, of another model, is the latest; the old one still resumes its own model
    newer = make_matmul_model(tmp_path / "new.onnx", n=8)
    quit_ortop(newer, "--threads", "2", at=10)
    assert found().model == str(Path(newer).resolve())
    assert threads(run.effective_profile(parse([model, "--resume"]), model)) == 5
    # a relative model path is the current folder's, as the old version wrote it (not the state folder's)
    write_legacy('model = "old.onnx"\n\n[session]\nintra_op_num_threads = 6\n', at=5)
    monkeypatch.chdir(tmp_path)
    s = found()
    assert s.model == absolute and threads(s.profile) == 6


@pytest.mark.parametrize("text", ['model = "m.onnx"\n', 'model = "sub/m.onnx"\n[session]\nthreads = 2\n',
                                  "not toml [", ""])
def test_an_old_single_file_that_cannot_be_used_is_skipped(text: str, tmp_path: Path, state: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A relative model that does not exist from here (or a file that does not read): no candidate, no traceback."""
    write_legacy(text, at=5)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    assert last_session() is None
    assert "no last session saved yet" in one_error(capsys, ["--resume", "--headless"])
    model = make_matmul_model(tmp_path / "other.onnx", n=8)
    older = quit_ortop(model, "--threads", "2", at=3600)  # older than the old file, still the one that resumes
    assert found().path == older


def test_saved_sessions_read_back_equal(tmp_path: Path, state: Path) -> None:
    """What is saved is what ``--resume`` starts from, model included (absolute, resolved)."""
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    prof = start_profile(model, "--threads", "2", "--no-spinning", "--rate", "50", "--concurrency", "2")
    path = save_last_session(prof)
    assert path == last_session_path(model)
    assert profile_mod.load(path) == prof == found(model).profile
