"""The host's own noise: steal and CPU pressure read from a fake /proc (and the real one, for types only), and the
share of runs stalled beyond their own shape's median."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ortop.collectors.noise import NoiseSampler, read_pressure, read_steal
from ortop.measure.noise import SLOW_K, HostNoise, percentile_label, slow_share, stall_verdict

STAT = ("cpu  {user} 0 {system} {idle} 10 0 5 {steal} 0 0\n"
        "cpu0 1 0 1 1 0 0 0 0 0 0\n"
        "intr 12345\nctxt 999\n")
PSI = ("some avg10={avg10:.2f} avg60=1.00 avg300=0.50 total={total}\n"
       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


class FakeProc:
    """A /proc with a stat and a pressure/cpu file the test rewrites between start and stop, and its own clock."""

    def __init__(self, root: Path, pressure: bool = True) -> None:
        self.root = root
        self.now = 100.0
        if pressure:
            (root / "pressure").mkdir(parents=True)

    def set(self, *, user: int, system: int, idle: int, steal: int, total_us: int | None = None,
            avg10: float = 0.0) -> None:
        (self.root / "stat").write_text(STAT.format(user=user, system=system, idle=idle, steal=steal))
        if total_us is not None:
            (self.root / "pressure" / "cpu").write_text(PSI.format(avg10=avg10, total=total_us))

    def clock(self) -> float:
        return self.now


def test_steal_and_pressure_over_a_window(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.set(user=1000, system=200, idle=5000, steal=100, total_us=7_000_000)
    sampler = NoiseSampler(root=tmp_path, clock=proc.clock)
    sampler.start()
    # 2 s later: 300 jiffies passed (150 user, 30 system, 90 idle, 0 iowait, 0 softirq, 30 steal); 0.5 s stalled
    proc.now += 2.0
    proc.set(user=1150, system=230, idle=5090, steal=130, total_us=7_500_000, avg10=40.0)
    noise = sampler.stop()
    assert noise.steal_pct == pytest.approx(100 * 30 / 300)
    assert noise.cpu_pressure_pct == pytest.approx(25.0)
    assert noise.slow_share is None and noise.verdict is None


def test_missing_pressure_file_is_none_not_an_error(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path, pressure=False)
    proc.set(user=10, system=10, idle=10, steal=0)
    sampler = NoiseSampler(root=tmp_path, clock=proc.clock)
    sampler.start()
    proc.now += 1.0
    proc.set(user=20, system=20, idle=20, steal=0)
    noise = sampler.stop()
    assert noise.cpu_pressure_pct is None
    assert noise.steal_pct == 0.0
    assert read_pressure(tmp_path) == (None, None)


def test_an_empty_root_reads_none_everywhere(tmp_path: Path) -> None:
    sampler = NoiseSampler(root=tmp_path / "nothing")
    sampler.start()
    assert sampler.stop() == HostNoise()
    assert read_steal(tmp_path) is None


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    (tmp_path / "pressure" / "cpu").mkdir(parents=True)  # a directory where the file should be: reading fails
    (tmp_path / "stat").write_text("cpu  1 2 3 4 5 6 7\n")  # an old kernel: no steal field
    assert read_pressure(tmp_path) == (None, None)
    assert read_steal(tmp_path) is None
    (tmp_path / "stat").write_text("cpu  1 2 x 4 5 6 7 8\n")
    assert read_steal(tmp_path) is None
    (tmp_path / "stat").write_text("intr 1\n")
    assert read_steal(tmp_path) is None
    other = tmp_path / "other"
    (other / "pressure").mkdir(parents=True)
    (other / "pressure" / "cpu").write_text("some avg10=3.50 avg60=1.00\n")  # no total: only avg10
    assert read_pressure(other) == (None, 3.5)


def test_pressure_falls_back_to_avg10_without_totals_or_time(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.set(user=1, system=1, idle=1, steal=0, total_us=500, avg10=12.5)
    sampler = NoiseSampler(root=tmp_path, clock=proc.clock)
    sampler.start()  # no time passes: Δwall = 0, and no tick in /proc/stat either
    noise = sampler.stop()
    assert noise.cpu_pressure_pct == 12.5
    assert noise.steal_pct is None


def test_stop_before_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="before start"):
        NoiseSampler(root=tmp_path).stop()


def test_the_real_host_reads_numbers_or_none() -> None:
    sampler = NoiseSampler()
    sampler.start()
    sum(i * i for i in range(200_000))
    noise = sampler.stop()
    for value in (noise.steal_pct, noise.cpu_pressure_pct):
        assert value is None or (isinstance(value, float) and 0.0 <= value <= 100.0)
    assert set(noise.as_dict()) == {"steal_pct", "cpu_pressure_pct", "slow_share", "slow_k", "verdict",
                                    "stalls_reach_slo"}


def test_slow_share_counts_runs_over_k_times_their_shape_median() -> None:
    rng = np.random.default_rng(1)
    service = rng.uniform(0.9, 1.1, 1000)
    service[::100] = 5.0  # 10 stalled runs
    assert slow_share(service) == pytest.approx(0.01)
    assert slow_share(service, k=6.0) == 0.0
    assert slow_share(list(service), [0] * 1000) == pytest.approx(0.01)
    assert slow_share([]) is None


def test_a_mix_of_shapes_is_not_noise() -> None:
    rng = np.random.default_rng(2)
    shapes = (rng.random(4000) < 0.3).astype(int)  # 30 % of runs on a shape 10× slower
    service = np.where(shapes == 1, 10.0, 1.0) * rng.uniform(0.8, 1.2, 4000)
    assert slow_share(service, shapes) == 0.0
    # read as one shape, the large one's every run is over 3× the overall median: the mistake the ids prevent
    assert slow_share(service) == pytest.approx(np.mean(shapes == 1))
    small = np.flatnonzero(shapes == 0)[:30]
    service[small] = 4.0  # stall 30 runs of the small shape: 4× its median, well below the large shape's
    assert slow_share(service, shapes) == pytest.approx(30 / 4000)
    assert slow_share(service, [f"s{i}" for i in shapes]) == pytest.approx(30 / 4000)  # any hashable ids


def test_slow_share_refusals() -> None:
    with pytest.raises(ValueError, match="one shape id per run"):
        slow_share([1.0, 2.0], [0])
    with pytest.raises(ValueError, match="above 1"):
        slow_share([1.0, 2.0], k=1.0)


def test_stall_verdict() -> None:
    assert stall_verdict(0.006, 0.99) == ("the host's stalls alone put 0.6 % of runs over 3\u00d7 their shape's "
                                          "median: a p99 SLO sits within the host's noise")
    assert stall_verdict(0.005, 0.99) is not None  # exactly half of 1 %
    assert stall_verdict(0.0049, 0.99) is None
    assert stall_verdict(0.0, 0.99) is None and stall_verdict(None, 0.99) is None
    assert stall_verdict(math.nan, 0.99) is None
    # p99.9 tolerates 0.1 %: 0.06 % of runs stalled is already comparable
    assert stall_verdict(0.0006, 0.999, k=5.0) == ("the host's stalls alone put 0.06 % of runs over 5\u00d7 their "
                                                   "shape's median: a p99.9 SLO sits within the host's noise")
    assert stall_verdict(0.0006, 0.99) is None
    assert "12 % of runs" in (stall_verdict(0.12, 0.9) or "") and "p90 SLO" in (stall_verdict(0.12, 0.9) or "")
    with pytest.raises(ValueError, match="e.g. 0.99 for p99"):
        stall_verdict(0.01, 99)


def test_percentile_label() -> None:
    assert [percentile_label(p) for p in (0.5, 0.9, 0.99, 0.999, 0.9999)] == ["p50", "p90", "p99", "p99.9",
                                                                               "p99.99"]


def test_host_noise_judged_and_as_dict() -> None:
    service = np.ones(1000)
    service[:8] = 10.0
    noise = HostNoise(steal_pct=1.23456, cpu_pressure_pct=12.0).judged(service, None, 0.99)
    assert noise.as_dict() == {
        "steal_pct": 1.235, "cpu_pressure_pct": 12.0, "slow_share": 0.008, "slow_k": SLOW_K,
        "verdict": "the host's stalls alone put 0.8 % of runs over 3\u00d7 their shape's median: a p99 SLO sits "
                   "within the host's noise", "stalls_reach_slo": True}
    quiet = HostNoise().judged(np.ones(100), np.zeros(100, int), 0.99, k=4.0)
    assert quiet.as_dict() == {"steal_pct": None, "cpu_pressure_pct": None, "slow_share": 0.0, "slow_k": 4.0,
                               "verdict": None, "stalls_reach_slo": False}


def test_where_the_stalls_reach_the_slo_a_capacity_says_a_rerun_can_land_outside_its_interval() -> None:
    """The table, the report and the live view's screen add one sentence where the stalls alone reach the SLO's
    percentile and a capacity was found; a busy host without such stalls, or no capacity, adds none."""
    from ortop.cli.capacity import host_lines
    from ortop.measure.noise import STALLS_MOVE
    from ortop.report.pages import host_noise_text

    service = np.ones(1000)
    service[:8] = 10.0
    stalled = HostNoise(steal_pct=1.4).judged(service, None, 0.99)
    busy = HostNoise(steal_pct=0.2, cpu_pressure_pct=98.0).judged(np.ones(1000), None, 0.99)
    assert stalled.stalls_reach and not busy.stalls_reach and busy.verdict
    assert host_lines(stalled, met=True)[-1].strip() == STALLS_MOVE
    assert STALLS_MOVE not in "\n".join(host_lines(stalled, met=False) + host_lines(busy, met=True))
    assert "a rerun can land outside the interval" in host_noise_text(stalled.as_dict())
    assert "a rerun can land outside" not in host_noise_text(busy.as_dict())


def test_a_busy_host_is_named_with_its_figures_and_a_quiet_one_is_not() -> None:
    """CPU pressure of a fifth of the time or more, or 5 % steal, names the host as busy in the verdict (with the
    figure), beside any stall verdict; below both, nothing is said."""
    from ortop.measure.noise import busy_verdict

    assert busy_verdict(0.2, 4.0) is None and busy_verdict(None, None) is None
    said = busy_verdict(0.19, 98.1)
    assert said is not None and said.startswith("a busy host: some task waited for a CPU 98 % of the time"), said
    assert "hypervisor" in (busy_verdict(7.0, None) or "")
    runs = np.ones(1000)
    quiet = HostNoise(steal_pct=0.1, cpu_pressure_pct=3.0).judged(runs, None, 0.99)
    assert quiet.verdict is None
    busy = HostNoise(steal_pct=0.19, cpu_pressure_pct=98.1).judged(runs, None, 0.99)
    assert busy.verdict is not None and busy.verdict.startswith("a busy host") and busy.as_dict()["verdict"]
