"""Memory: the summary's ``memory`` block, the arena and memory-pattern effects in MB through ortop, the slow
leak check, the memory panel as text, and a preloaded allocator that is not in effect."""

from __future__ import annotations

import math
import random

import pytest

from ortop.collectors.allocator import MIMALLOC_HINT, find_mimalloc, not_a_shared_library, resolve_allocator
from ortop.config import profile as P
from ortop.config.profile import Profile
from ortop.engine.live import headless
from ortop.engine.live.memory import Leak, MemoryInfo, leak_check
from ortop.engine.live.snapshot import summary
from ortop.present import MIB as MB
from ortop.runtime.child import preload_missing
from ortop.tui.panels import memory
from tests.fakes.monitor import FakeMonitor
from tests.models import make_chained_activations_model, make_matmul_model
from tests.poll import wait_for

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

MEMORY_KEYS = {"rss_mb", "rss_peak_mb", "rss_growth_mb", "host_used_mb", "host_available_mb", "gpu_mb", "leak",
               "rss_start_mb", "rss_low_mb", "rss_since_start_mb", "rebuild_growth"}


def prof(**dotted) -> Profile:
    changes = {"session.intra_op_num_threads": 1}
    changes.update({k.replace("__", "."): v for k, v in dotted.items()})
    return P.merge(Profile(), **changes)


# ---- the leak check (pure) ---------------------------------------------------------------------------------------
def test_leak_flagged_on_a_steady_rise() -> None:
    rng = random.Random(1)
    t = [float(i) for i in range(60)]
    rss = [(200 + 0.25 * i + rng.uniform(-0.3, 0.3)) * MB for i in range(60)]  # +15 MB a minute
    leak = leak_check(t, rss)
    assert isinstance(leak, Leak)
    assert 11 < leak.rise_mb < 17 and 11 < leak.mb_per_min < 17
    assert "rising steadily" in leak.text()


def test_no_leak_for_an_arena_that_grows_once_then_holds() -> None:
    t = [float(i) for i in range(60)]
    rss = [(93 if i < 5 else 225) * MB for i in range(60)]
    assert leak_check(t, rss) is None


def test_no_leak_for_noise_or_a_short_series() -> None:
    rng = random.Random(2)
    t = [float(i) for i in range(120)]
    assert leak_check(t, [(200 + rng.uniform(-3, 3)) * MB for _ in t]) is None
    short = [float(i) for i in range(10)]
    assert leak_check(short, [(200 + 5 * i) * MB for i in range(10)]) is None  # 10 s is too short to say


def test_no_leak_for_a_rise_too_small_to_matter() -> None:
    t = [float(i) for i in range(60)]
    assert leak_check(t, [(200 + 0.02 * i) * MB for i in range(60)]) is None  # 1.2 MB in a minute


# ---- the summary block and the panel (fake snapshots) ------------------------------------------------------------
def test_summary_memory_block_keys_and_values() -> None:
    snap = FakeMonitor().snapshot()
    gpu = [{"index": 0, "name": "x", "mem_used": 2 ** 31, "mem_total": 2 ** 33, "util_percent": 5.0,
            "worker_mem": 512 * MB}]
    m = summary(snap, duration_s=1.0, gpu=gpu)["memory"]
    assert set(m) == MEMORY_KEYS
    assert m["rss_mb"] > 0 and m["rss_peak_mb"] >= m["rss_mb"]
    assert m["rss_growth_mb"] == pytest.approx(12.0)
    assert m["host_available_mb"] == pytest.approx(9 * 1024) and m["host_used_mb"] == pytest.approx(7 * 1024)
    assert m["gpu_mb"] == pytest.approx(512) and m["leak"] is None
    none = summary(snap, duration_s=1.0)["memory"]
    assert none["gpu_mb"] is None
    rows = summary(snap, duration_s=1.0)["history"]
    assert rows[0]["rss_peak_mb"] == pytest.approx(212) and rows[0]["rss_delta_mb"] is None
    assert rows[1]["rss_delta_mb"] == pytest.approx(-9)


def test_memory_panel_as_text() -> None:
    snap = FakeMonitor().snapshot()
    out = memory.memory_panel(snap.memory, snap.history, None, 60, 6).plain.split("\n")
    assert out[0] == "RSS 192 MB  peak 194  +12 since build"
    assert out[1].startswith("host 7.0 GiB used") and "9.0 GiB available" in out[1]
    assert out[2].startswith("RSS ") and len(out[2]) <= 60  # the sparkline
    assert out[3].startswith("#0 peak  212 MB") and "start" in out[3]
    # the change named is the one from the row before, as the delta is against it
    assert out[4].startswith("#1 peak  203 MB") and "\u22129 MB" in out[4] and out[4].endswith("threads 2")
    assert len(out) == 6


def test_memory_panel_leak_line_and_unknowns() -> None:
    leak = Leak(15.0, 60.0, 200.0)
    text = memory.memory_panel(MemoryInfo(rss=215 * MB, leak=leak), (), None, 70, 4).plain.split("\n")
    assert text[0].startswith("RSS 215 MB  peak —")
    assert text[1] == "host —"
    assert text[2].startswith("⚠ RSS rising steadily: +15.0 MB over 60 s")


def test_preload_missing_reads_the_mapped_files() -> None:
    maps = ("7f00-7f01 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libmimalloc.so.2.1\n"
            "7f02-7f03 r--p 00000000 00:00 0 [heap]\n")
    assert preload_missing("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.1", maps) == []
    assert preload_missing("libmimalloc.so.2.1", maps) == []
    assert preload_missing("/nonexistent/x.so:libmimalloc.so.2.1", maps) == ["/nonexistent/x.so"]


def test_ld_preload_mimalloc_becomes_the_library_path(tmp_path) -> None:
    env, said = resolve_allocator({"LD_PRELOAD": "mimalloc", "OMP_NUM_THREADS": "1"},
                                  finder=lambda: "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.1")
    assert env == {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.1", "OMP_NUM_THREADS": "1"}
    assert said == []
    import glob
    import os

    import numpy

    lib = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), "**", "*.so"), recursive=True))[0]
    # ^ an extension module of numpy's: a shared library built for this machine
    assert resolve_allocator({"LD_PRELOAD": lib}, finder=lambda: None) == ({"LD_PRELOAD": lib}, [])
    env, said = resolve_allocator({"LD_PRELOAD": f"/nonexistent/x.so:{lib}"}, finder=lambda: None)
    assert env == {"LD_PRELOAD": lib} and said == ["LD_PRELOAD /nonexistent/x.so does not exist: the allocator is "
                                                   "not in effect"]


def test_ld_preload_of_a_file_ld_so_would_refuse_is_left_out_in_one_line(tmp_path) -> None:
    # ld.so prints its refusal on the terminal when the worker starts (before its stderr is caught): the file is
    # checked here instead, from its ELF header.
    text = tmp_path / "notes.txt"
    text.write_text("not a library\n")
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    exe = tmp_path / "prog"
    exe.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(9) + (2).to_bytes(2, "little") + (62).to_bytes(2, "little")
                    + bytes(44))  # ET_EXEC
    arm = tmp_path / "libarm.so"
    arm.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + (183).to_bytes(2, "little")
                    + bytes(44))  # ET_DYN for aarch64
    assert not_a_shared_library(str(text)) == "is not a shared library (not an ELF file)"
    assert not_a_shared_library(str(empty)) == "is not a shared library (not an ELF file)"
    assert not_a_shared_library(str(exe)) == "is not a shared library (an ELF file of another kind)"
    assert "built for another machine" in not_a_shared_library(str(arm), machine="x86_64")
    assert not_a_shared_library(str(arm), machine="aarch64") == ""
    env, said = resolve_allocator({"LD_PRELOAD": f"{text} {empty}"}, finder=lambda: None)
    assert "LD_PRELOAD" not in env
    assert said == [f"LD_PRELOAD {text} is not a shared library (not an ELF file): the allocator is not in effect",
                    f"LD_PRELOAD {empty} is not a shared library (not an ELF file): the allocator is not in effect"]


def test_ld_preload_mimalloc_without_one_installed_says_how_to_get_it() -> None:
    env, said = resolve_allocator({"LD_PRELOAD": "mimalloc"}, finder=lambda: None)
    assert "LD_PRELOAD" not in env
    assert len(said) == 1 and "apt install libmimalloc2.0" in said[0] and "not in effect" in said[0]
    assert MIMALLOC_HINT in said[0]


def test_find_mimalloc_looks_in_the_given_places(tmp_path) -> None:
    lib = tmp_path / "lib" / "libmimalloc.so.2.1"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    assert find_mimalloc(globs=(str(tmp_path / "lib" / "libmimalloc.so.2*"),), site_dirs=()) == str(lib)
    assert find_mimalloc(globs=(), site_dirs=(str(tmp_path),)) == str(lib)
    assert find_mimalloc(globs=(str(tmp_path / "none*"),), site_dirs=()) is None


# ---- through ortop, with a real worker -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chained(tmp_path_factory) -> str:
    return make_chained_activations_model(tmp_path_factory.mktemp("mem") / "chained.onnx")


def _memory(model: str, profile: Profile, seconds: float = 2.0) -> dict:
    res = headless.measure(model, profile, duration_s=seconds)
    assert res.fatal is None and res.measured
    return res.summary["memory"]


@pytest.mark.integration
def test_arena_on_keeps_its_memory_and_off_gives_it_back(chained) -> None:
    # Paced (a run is ~55 ms here: busy ~11 % of the time), so the last RSS sample mostly falls between runs, where
    # an arena-less process has given the activations back (measured: 247 MB on, 115 MB off; 205 MB mid-run).
    on = _memory(chained, prof(workload__rate_hz=2.0, session__enable_cpu_mem_arena=True))
    off = _memory(chained, prof(workload__rate_hz=2.0, session__enable_cpu_mem_arena=False))
    assert set(on) == MEMORY_KEYS
    assert on["rss_mb"] > 0 and on["rss_peak_mb"] >= on["rss_mb"] and on["host_available_mb"] > 0
    assert on["gpu_mb"] is None and on["leak"] is None
    assert on["rss_mb"] - off["rss_mb"] > 32, (on, off)  # at least one 32 MB activation held (mid-run: 42 MB)


@pytest.mark.integration
def test_memory_pattern_off_lowers_the_peak(chained) -> None:
    on = _memory(chained, prof(workload__rate_hz=4.0, session__enable_mem_pattern=True))
    off = _memory(chained, prof(workload__rate_hz=4.0, session__enable_mem_pattern=False))
    assert on["rss_peak_mb"] - off["rss_peak_mb"] > 24, (on, off)  # measured: 247 → 181 MB


@pytest.mark.integration
def test_history_rows_carry_the_peak_and_its_change(chained) -> None:
    from ortop.engine.live.monitor import Monitor

    mon = Monitor(chained, prof(workload__rate_hz=4.0))
    mon.start()
    try:
        assert mon.wait_ready(60) and mon.fatal is None
        wait_for(lambda: mon.snapshot().memory.rss_peak, 20, "an RSS sample")
        mon.apply(prof(workload__rate_hz=4.0, session__enable_mem_pattern=False))
        wait_for(lambda: len(mon.snapshot().history) == 2 and mon.snapshot().history[1].rss_delta is not None,
                 60, "the second row's memory")
        first, second = mon.snapshot().history
        assert first.rss_peak > 0 and second.rss_delta == second.rss_peak - first.rss_peak
        assert second.rss_delta < -24 * MB
        assert mon.snapshot().memory.rss_built is not None
    finally:
        mon.stop()


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["missing", "not a library"])
def test_a_bogus_ld_preload_is_a_warning(tmp_path, kind: str) -> None:
    model = make_matmul_model(tmp_path / "m.onnx")
    path = "/nonexistent/x.so"
    if kind == "not a library":
        path = str(tmp_path / "x.so")
        (tmp_path / "x.so").write_text("not an ELF file\n")
    res = headless.measure(model, prof(env={"LD_PRELOAD": path}), duration_s=0.5)
    assert res.fatal is None
    said = [w for w in res.summary["warnings"] if "the allocator is not in effect" in w]
    assert len(said) == 1 and path in said[0], res.summary["warnings"]
    assert math.isfinite(res.summary["memory"]["rss_mb"])


@pytest.mark.integration
def test_ld_preload_mimalloc_without_a_library_is_a_warning(tmp_path, monkeypatch) -> None:
    from ortop.collectors import allocator as cmem

    monkeypatch.setattr(cmem, "MIMALLOC_GLOBS", ())
    monkeypatch.setattr(cmem, "_site_dirs", lambda: [])
    model = make_matmul_model(tmp_path / "m.onnx")
    res = headless.measure(model, prof(env={"LD_PRELOAD": "mimalloc"}), duration_s=0.5)
    said = [w for w in res.summary["warnings"] if "apt install libmimalloc2.0" in w]
    assert res.fatal is None and len(said) == 1 and "not in effect" in said[0]
