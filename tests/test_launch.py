"""One worker launcher: every run that starts a worker gives it the allocator its profile asks for."""

from __future__ import annotations

import json
import threading

import psutil
import pytest

from ortop.cli.ops import ops_main
from ortop.collectors.allocator import find_mimalloc
from ortop.config import profile as P
from ortop.engine.bench import ab
from ortop.engine.workerproc import worker_env
from tests.models import make_matmul_model

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

needs_mimalloc = pytest.mark.skipif(find_mimalloc() is None, reason="libmimalloc is not installed (Debian: "
                                    "libmimalloc2.0)")


def workers_maps(before: set[int]) -> list[str]:
    """The memory maps of this process's children started since ``before`` (their pids) that run onnxruntime: the
    workers. Children of earlier tests (multiprocessing's resource tracker, started once per session) are not."""
    out = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in before:
            continue
        try:
            with open(f"/proc/{child.pid}/maps", encoding="utf-8", errors="replace") as fh:
                maps = fh.read()
        except OSError:
            continue
        if "onnxruntime" in maps:
            out.append(maps)
    return out


def child_pids() -> set[int]:
    return {c.pid for c in psutil.Process().children(recursive=True)}


@needs_mimalloc
def test_worker_env_turns_mimalloc_into_the_librarys_path():
    env, said = worker_env({"LD_PRELOAD": "mimalloc", "OMP_NUM_THREADS": "1"})
    assert env["LD_PRELOAD"] == find_mimalloc() and env["OMP_NUM_THREADS"] == "1" and said == []


def test_worker_env_leaves_out_what_ld_so_could_not_load(tmp_path):
    text = tmp_path / "not-a-library.so"
    text.write_text("hello")
    env, said = worker_env({"LD_PRELOAD": f"{tmp_path}/missing.so {text}"})
    assert "LD_PRELOAD" not in env
    assert len(said) == 2 and all("the allocator is not in effect" in s for s in said)


@pytest.mark.integration
@needs_mimalloc
def test_a_running_compare_whose_profile_preloads_mimalloc_has_it_in_the_workers_memory_map(tmp_path):
    model = make_matmul_model(tmp_path / "m.onnx", n=64)
    base = P.merge(P.Profile(model=model), **{"session.intra_op_num_threads": 1, "env": {"LD_PRELOAD": "mimalloc"}})
    other = P.merge(base, **{"session.allow_spinning": False})
    seen: list[bool] = []
    measuring = threading.Event()
    before = child_pids()
    n_workers = max(ab.restart_groups([base, other])) + 1   # one: the two differ in a session option alone

    def on_start(il: ab.Interleaving) -> None:
        def look() -> None:
            while il.phase != "measuring" and not il.stop.is_set():
                il.stop.wait(0.05)
            maps = workers_maps(before)
            seen.append(len(maps) == n_workers and all("libmimalloc" in m for m in maps))
            measuring.set()

        threading.Thread(target=look, daemon=True).start()

    res = ab.compare_profiles(model, [base, other], budget_s=3.0, on_start=on_start)
    assert measuring.wait(5) and seen == [True], seen
    assert res.configs[0].runs > 0


@pytest.mark.integration
def test_ortop_ops_says_what_the_profiles_preload_left_out_and_ld_so_stays_quiet(tmp_path, capfd):
    model = make_matmul_model(tmp_path / "m.onnx", n=8)
    text = tmp_path / "not-a-library.so"
    text.write_text("hello")
    prof = tmp_path / "p.toml"
    prof.write_text(f'[env]\nLD_PRELOAD = "{text}"\n')
    assert ops_main([model, "--profile", str(prof), "--runs", "2"]) == 0
    out, err = capfd.readouterr()
    said = [line for line in out.splitlines() if line.startswith("warning")]
    assert said == [f"warning   LD_PRELOAD {text} is not a shared library (not an ELF file): the allocator is not "
                    "in effect"], out
    assert "ld.so" not in err and "cannot be preloaded" not in err, err
    assert ops_main([model, "--profile", str(prof), "--runs", "2", "--json"]) == 0
    assert json.loads(capfd.readouterr().out)["warnings"] == [said[0].removeprefix("warning   ")]
