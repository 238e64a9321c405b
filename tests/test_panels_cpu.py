"""The CPU and spin panels as plain strings: no app, no terminal."""

from __future__ import annotations

import math

import pytest

from ortop.collectors.cpu import CpuSample, ThreadSample
from ortop.engine.live.monitor import CpuCost
from ortop.tui.panels import cpu, spin


def lines(text) -> list[str]:
    return text.plain.split("\n")


# ---- CPU ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 16, 64, 256])
@pytest.mark.parametrize("width,height", [(38, 6), (48, 9), (66, 17), (20, 4)])
def test_core_view_fits_its_box(n: int, width: int, height: int) -> None:
    per_core = [(i * 37) % 101 for i in range(n)]
    text = cpu.core_meters(per_core, {0, 1}, width, height)
    out = lines(text)
    assert len(out) <= height
    assert all(len(line) <= width for line in out), out


@pytest.mark.parametrize("n", [2, 16, 64, 256])
@pytest.mark.parametrize("replicas", [2, 8, 64])
@pytest.mark.parametrize("width,height", [(38, 6), (48, 9), (66, 17)])
def test_core_view_with_replica_tags_fits_its_box(n: int, replicas: int, width: int, height: int) -> None:
    """Pinned replicas tag each meter (``3 r1▕``): the tags come out of the bars, never past the box."""
    from ortop.config.replicas import split_cores

    owners: dict[int, list[int]] = {}
    for r, share in enumerate(split_cores(range(n), replicas)):
        for c in share:
            owners.setdefault(c, []).append(r)
    sample = CpuSample(tuple(float((i * 37) % 101) for i in range(n)), 40.0, 120.0, (), frozenset({0}), 1.0)
    out = lines(cpu.cpu_panel(sample, width, height, owners))
    assert len(out) <= height
    assert all(len(line) <= width for line in out[:-1]), out
    if "▕" in out[0]:  # meters: each carries its replica
        assert " r0" in out[0]


def test_meters_number_cores_from_zero_and_show_load() -> None:
    out = lines(cpu.core_meters([12.0, 87.0], set(), 40, 4))
    assert len(out) == 1  # two meters side by side when the bars stay readable
    assert out[0].startswith("0▕")
    assert "1▕" in out[0]
    assert out[0].rstrip().endswith("87")


def test_meters_bar_length_follows_load() -> None:
    full, empty = lines(cpu.core_meters([100.0, 0.0], set(), 20, 2))
    assert full.count("█") > 5
    assert "█" not in empty


def test_worker_cores_are_highlighted() -> None:
    text = cpu.core_meters([50.0, 50.0, 50.0, 50.0], {2}, 60, 4)
    styled = {str(span.style) for span in text.spans if text.plain[span.start:span.end].strip() == "2"}
    assert any("cyan" in s for s in styled)


def test_many_cores_become_a_heat_grid() -> None:
    per_core = [0.0] * 256
    per_core[5] = 100.0
    text = cpu.core_meters(per_core, {5}, 38, 8)
    out = lines(text)
    assert "▕" not in text.plain  # no meters: one cell per core
    assert len(out) <= 8
    assert sum(line.count("·") for line in out) >= 250
    assert "█" in text.plain


def test_heat_grid_labels_rows_and_groups_by_eight_when_there_is_room() -> None:
    out = lines(cpu.heat_grid([1.0] * 64, set(), 60, None))
    assert out[0].startswith(" 0 ")
    assert "········ ········" in out[0]


def test_cpu_panel_summary_line() -> None:
    """One convention: a process's CPU in cores, shares in per cent."""
    sample = CpuSample((10.0, 90.0), 50.0, 180.0, (), frozenset({1}), 1.5)
    out = lines(cpu.cpu_panel(sample, 40, 4))
    assert out[-1] == "cores: worker 1.80 · ui 0.01 · host 50%"  # 1.5 % of a core; the unit always said
    assert lines(cpu.cpu_panel(sample, 30, 4))[-1] == "worker 1.80 cores · host 50%"
    assert lines(cpu.cpu_panel(sample, 50, 4))[-1] == "worker 1.80 cores · host 50% · ui 0.01 cores"
    assert lines(cpu.cpu_panel(sample, 34, 4))[-1] == "worker 1.80 cores · host 50%"  # whole, or not at all
    assert cpu.cpu_panel(None, 40, 4).plain.startswith("waiting")


def test_meters_show_the_workers_share_beside_the_cores_total() -> None:
    """A busy neighbour on core 1 and the worker on core 0: the meters tell them apart (worker/all)."""
    threads = (ThreadSample(11, 70.0, 0, "ortop-caller-0", "caller 0"),
               ThreadSample(12, 20.0, 0, "ortop-worker", "pool"), ThreadSample(13, 0.0, 1, "ortop-worker", "pool"))
    assert cpu.worker_share([95.0, 100.0], threads) == [90.0, 0.0]
    assert cpu.worker_share([50.0], (ThreadSample(1, 80.0, 0, "x"),)) == [50.0]  # never above the core's total
    sample = CpuSample((95.0, 100.0), 97.5, 90.0, threads, frozenset({0}), 1.0)
    text = cpu.cpu_panel(sample, 40, 3)
    meters = lines(text)[0]  # two meters side by side
    assert meters.startswith("0▕") and "▏ 90/95  1▕" in meters and meters.rstrip().endswith("▏  0/100")
    cyan = "".join(text.plain[s.start:s.end] for s in text.spans if "cyan" in str(s.style) and "reverse" not in
                   str(s.style))
    assert 7 <= cyan.count("█") <= 9  # core 0's bar is mostly the worker's; core 1's none of it (9 cells each)
    assert cpu.TITLE == "CPU · per core: worker / all %"
    # no watched process: one figure per core, as before
    bare = cpu.cpu_panel(CpuSample((95.0, 100.0), 97.5, None, (), frozenset(), 1.0), 40, 3)
    assert "/" not in lines(bare)[0] and "▏ 95 " in lines(bare)[0]


# ---- spin -----------------------------------------------------------------------------------------------------
def test_spin_split_in_runs_and_between() -> None:
    inside, between, total = spin.spin_split(CpuCost(13.1, 850.0, 100.0, 12.0))
    assert total == pytest.approx(1000.0)
    assert between == pytest.approx(850.0)
    assert inside == pytest.approx(150.0)
    assert all(math.isnan(x) for x in spin.spin_split(CpuCost())[::2])


def test_spin_panel_shows_spinning_as_the_bigger_share() -> None:
    threads = (ThreadSample(101, 97.0, 3, "python"), ThreadSample(102, 0.2, 1, "python"))
    text = spin.spin_panel(CpuCost(13.1, 850.0, 100.0, 12.0), threads, 48, 8)
    out = lines(text)
    assert out[0] == "CPU/run 13.1 ms · 1.00 cores avg · in Run 12%"  # cores for CPU, % for a share
    assert "850 ms/s" in out[1] and "85% of its CPU" in out[1]
    bar = out[2]
    assert bar.count("▒") > 3 * bar.count("█")  # most of the CPU went between runs
    assert any(line.startswith("101") and " 3 " in line and "97%" in line for line in out)
    assert all(len(line) <= 48 for line in out)


def test_spin_panel_concurrent_callers_have_no_between_figure() -> None:
    text = spin.spin_panel(CpuCost(2.0, math.nan, 150.0, 90.0), (), 48, 4)
    out = lines(text)
    assert "n/a with concurrent callers" in out[1]
    # The split bar cannot be drawn either; it says why instead of waiting for runs that are already there.
    assert out[2] == "in / between runs: n/a, concurrent callers"  # the long wording does not fit 48 cells
    assert lines(spin.spin_panel(CpuCost(2.0, math.nan, 150.0, 90.0), (), 60, 4))[2] == \
        "in runs / between runs: n/a with concurrent callers"
    assert lines(spin.spin_panel(CpuCost(), (), 48, 4))[2] == "in runs / between runs: waiting for runs…"


def test_spin_panel_names_the_threads_roles_and_the_units() -> None:
    """Threads named by the worker show their role (caller, main, reader); ORT's others are the pool."""
    from ortop.collectors.cpu import thread_role, with_roles

    assert thread_role(7, "ortop-caller-0", 5) == "caller 0"
    assert thread_role(5, "ortop-worker", 5) == "main"
    assert thread_role(6, "ortop-stderr", 5) == "reader"
    assert thread_role(10, "ortop-r12c3", 5) == "caller 3 of r12"  # a replica's caller (15 chars at most)
    assert thread_role(8, "ortop-worker", 5) == "pool"  # created by the main thread: its name, another tid
    assert thread_role(9, "ortop-lib", 5) == "library"  # started by numpy or onnxruntime before any session
    named = with_roles([ThreadSample(5, 1.0, 0, "ortop-worker"), ThreadSample(9, 90.0, 1, "python3")], 5)
    assert [t.role for t in named] == ["main", "pool"]
    assert [t.role for t in with_roles([ThreadSample(9, 9.0, 1, "python3")], 5)] == [""]  # not an ortop worker
    threads = (ThreadSample(101, 97.0, 3, "ortop-worker", "pool"), ThreadSample(102, 60.0, 1, "ortop-caller-0",
                                                                                  "caller 0"))
    out = lines(spin.spin_panel(CpuCost(13.1, 850.0, 100.0, 12.0), threads, 60, 9, [120.0, 157.0]))
    assert out[0] == "CPU/run 13.1 ms · 1.00 cores avg · in Run() 12% of the time"
    assert out[3].startswith("worker ") and out[3].endswith(" 1.57 cores")
    assert out[4].startswith("thread") and "% of a core" in out[4]
    assert out[5].endswith("97% pool") and out[6].endswith("60% caller 0")


def test_spin_panel_shows_nothing_of_a_new_session_before_it_has_runs_enough() -> None:
    """Right after spinning went off the first figures read "545 ms/s = 100 % of its CPU" between runs, the
    gap before the first run divided by the span of two runs: a new session's split waits for its runs."""
    early = CpuCost(50.0, 545.0, 54.5, 0.5)
    out = spin.spin_panel(early, (), 48, 8, runs=3).plain
    assert "545" not in out and "100%" not in out
    assert "measuring" in out and "3 of 20 runs" in out
    steady = spin.spin_panel(CpuCost(3.0, 25.0, 20.0, 5.0), (), 48, 8, runs=200).plain
    assert "between runs 25 ms/s" in steady


def test_between_runs_leaves_out_the_gap_before_the_first_kept_run() -> None:
    import numpy as np

    from ortop.config.profile import Profile
    from ortop.engine.live.store import ConfigStore

    c = ConfigStore(1, Profile())
    # two runs 0.1 s apart; the first came after a 0.5 s gap (the build) spent spinning: 500 ms of CPU
    rows = np.zeros((2, 9), dtype=np.int64)
    rows[:, 1] = 1_000_000                    # 1 ms in Run()
    rows[:, 3] = [500_000_000, 2_500_000]     # CPU between runs, ns
    c.add(rows, wall_ns=200_000_000, cpu_ns=510_000_000, t_s=np.array([10.0, 10.1]))
    assert c.cost().cpu_ms_between_runs_per_s == pytest.approx(25.0)


class ScriptedCpu:
    """A collector that returns the thread lists it is given, one per sample."""

    def __init__(self, *threads: tuple[ThreadSample, ...]) -> None:
        self.script = list(threads)

    def watch(self, pid) -> None:
        pass

    def sample(self) -> CpuSample:
        threads = self.script.pop(0)
        return CpuSample((50.0,), 50.0, 100.0, threads, frozenset(), 1.0)


def test_the_thread_table_shows_the_live_sessions_threads_only() -> None:
    """Threads of the sessions a rebuild replaced stayed ("17525 1 0 % pool"), and a verification left a second
    "caller 0": the table shows the worker's own threads and the running session's."""
    from ortop.tui.meters import MeterState

    main, reader = ThreadSample(1, 1.0, 0, "ortop-worker", "main"), ThreadSample(2, 0.0, 0, "ortop-stderr", "reader")
    old = (ThreadSample(10, 0.0, 1, "ortop-worker", "pool"), ThreadSample(11, 30.0, 1, "ortop-caller-0", "caller 0"))
    new = (ThreadSample(20, 40.0, 0, "ortop-worker", "pool"), ThreadSample(21, 30.0, 0, "ortop-caller-0", "caller 0"))
    temp = (ThreadSample(30, 0.0, 1, "ortop-caller-0", "caller 0"),)
    m = MeterState(ScriptedCpu((main, reader, *old), (main, reader, *old, *new), (main, reader, *old, *new, *temp),
                               (main, reader, *old, *new, *temp)))

    def tids() -> set[int]:
        m.close_period()
        return {t.tid for t in m.view(0, 0).threads}

    m.follow(building=False, verifying=False)
    m.sample()
    assert tids() == {1, 2, 10, 11}
    m.follow(building=True, verifying=False)   # a rebuild starts: what runs now is the old session's
    m.sample()
    m.follow(building=False, verifying=False)
    assert tids() == {1, 2, 20, 21}
    m.follow(building=False, verifying=True)   # a verification builds sessions of its own
    m.sample()
    m.follow(building=False, verifying=False)
    m.sample()
    assert tids() == {1, 2, 20, 21}
    assert [t.role for t in m.view(0, 0).threads].count("caller 0") == 1


def test_the_spin_panel_fits_concurrent_callers_at_80_columns() -> None:
    out = spin.spin_panel(CpuCost(8.4, math.nan, 200.0, 98.0), (), 38, 6).plain.split("\n")
    assert all(len(line) <= 38 for line in out), out
    assert "split n/a: concurrent callers" in out
