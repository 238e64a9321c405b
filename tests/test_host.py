"""Host facts read under a fake root: cgroup v1/v2 quotas, cpusets, SMT siblings, NUMA nodes, the CPU model."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortop.collectors.host import HostFacts, format_cpulist, read_cpu_quota, read_host


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _cpus(root: Path, n: int, siblings: dict[int, str] | None = None) -> None:
    """n CPUs under sys/devices/system/cpu, each its own core unless ``siblings`` says otherwise."""
    for c in range(n):
        sib = (siblings or {}).get(c, str(c))
        _write(root, f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list", sib + "\n")
    _write(root, "proc/cpuinfo", "".join(f"processor\t: {c}\nmodel name\t: Fake CPU 9000 @ 3.0GHz\n\n"
                                         for c in range(n)))


def test_cgroup_v2_quota_in_a_container(tmp_path: Path) -> None:
    _cpus(tmp_path, 8)
    _write(tmp_path, "proc/self/cgroup", "0::/\n")
    _write(tmp_path, "sys/fs/cgroup/cpu.max", "150000 100000\n")
    h = read_host(str(tmp_path))
    assert h.cpu_quota == pytest.approx(1.5)
    assert h.thread_cap == 2
    assert h.restricted
    assert h.cpu_model == "Fake CPU 9000 @ 3.0GHz"
    assert "cgroup quota 1.5 CPUs" in h.describe()


def test_cgroup_v2_unlimited_and_nested_limit(tmp_path: Path) -> None:
    _cpus(tmp_path, 8)
    _write(tmp_path, "proc/self/cgroup", "0::/system.slice/app.service\n")
    _write(tmp_path, "sys/fs/cgroup/cpu.max", "max 100000\n")
    _write(tmp_path, "sys/fs/cgroup/system.slice/cpu.max", "400000 100000\n")
    _write(tmp_path, "sys/fs/cgroup/system.slice/app.service/cpu.max", "max 100000\n")
    assert read_cpu_quota(str(tmp_path)) == pytest.approx(4.0)  # the parent's limit applies to its child
    assert read_host(str(tmp_path)).thread_cap == 4


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    _cpus(tmp_path, 16)
    _write(tmp_path, "proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    h = read_host(str(tmp_path))
    assert h.cpu_quota == pytest.approx(2.5)
    assert h.thread_cap == 3


def test_cgroup_v1_unlimited(tmp_path: Path) -> None:
    _cpus(tmp_path, 4)
    _write(tmp_path, "proc/self/cgroup", "4:cpu,cpuacct:/\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    h = read_host(str(tmp_path))
    assert h.cpu_quota is None
    assert h.thread_cap == 4
    assert not h.restricted


def test_cpuset_bounds_usable_cpus(tmp_path: Path) -> None:
    _cpus(tmp_path, 8)
    _write(tmp_path, "proc/self/status", "Name:\tpython\nCpus_allowed_list:\t2-3\n")
    h = read_host(str(tmp_path))
    assert h.usable_cpus == (2, 3)
    assert h.thread_cap == 2
    assert "usable CPUs 2-3" in h.describe()


def test_smt_siblings_and_first_siblings(tmp_path: Path) -> None:
    # 4 cores with 2 threads each, Linux numbering: CPU i and i+4 share a core.
    sib = {c: f"{c % 4},{c % 4 + 4}" for c in range(8)}
    _cpus(tmp_path, 8, sib)
    h = read_host(str(tmp_path))
    assert h.logical_cpus == 8
    assert h.physical_cores == 4
    assert h.smt
    assert h.first_siblings == (0, 1, 2, 3)
    assert h.thread_cap == 4
    assert h.siblings == ((0, 4), (1, 5), (2, 6), (3, 7))


def test_cpuset_on_smt_counts_physical_cores(tmp_path: Path) -> None:
    sib = {c: f"{c % 4},{c % 4 + 4}" for c in range(8)}
    _cpus(tmp_path, 8, sib)
    _write(tmp_path, "proc/self/status", "Cpus_allowed_list:\t0,4,1\n")
    h = read_host(str(tmp_path))
    assert h.usable_physical_cores == 2      # CPUs 0 and 4 are one core
    assert h.usable_first_siblings == (0, 1)
    assert h.thread_cap == 2


def test_numa_nodes(tmp_path: Path) -> None:
    _cpus(tmp_path, 8)
    _write(tmp_path, "sys/devices/system/node/node0/cpulist", "0-3\n")
    _write(tmp_path, "sys/devices/system/node/node1/cpulist", "4-7\n")
    _write(tmp_path, "sys/devices/system/node/node2/cpulist", "\n")  # a memory-only node
    _write(tmp_path, "sys/devices/system/node/online", "0-2\n")
    h = read_host(str(tmp_path))
    assert dict(h.numa_nodes) == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7), 2: ()}
    assert h.usable_numa_nodes == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
    assert "3 NUMA nodes" in h.describe()


def test_missing_files_are_no_facts(tmp_path: Path) -> None:
    h = read_host(str(tmp_path))
    assert h.logical_cpus == 1
    assert h.cpu_quota is None
    assert h.numa_nodes == {}
    assert h.thread_cap == 1
    assert h.cpu_model == ""


def test_garbage_is_ignored(tmp_path: Path) -> None:
    _cpus(tmp_path, 2)
    _write(tmp_path, "proc/self/cgroup", "0::/\n")
    _write(tmp_path, "sys/fs/cgroup/cpu.max", "lots of cpu\n")
    _write(tmp_path, "sys/devices/system/cpu/cpu1/topology/thread_siblings_list", "x-y\n")
    h = read_host(str(tmp_path))
    assert h.cpu_quota is None
    assert h.logical_cpus == 2


def test_arm_cpuinfo_model(tmp_path: Path) -> None:
    _write(tmp_path, "proc/cpuinfo", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\n")
    assert read_host(str(tmp_path)).cpu_model == "CPU part 0xd0c"


def test_real_host_reads() -> None:
    h = read_host()
    assert h.logical_cpus >= 1 and h.physical_cores >= 1
    assert set(h.usable_cpus) and h.thread_cap >= 1
    assert isinstance(h.as_dict()["usable_cpus"], list)


def test_format_cpulist() -> None:
    assert format_cpulist([0, 1, 2, 3, 6, 8, 9]) == "0-3,6,8-9"
    assert format_cpulist(()) == ""


def test_frozen() -> None:
    h = HostFacts(logical_cpus=4, usable_cpus=(0, 1, 2, 3), physical_cores=4)
    with pytest.raises(AttributeError):
        h.logical_cpus = 2  # type: ignore[misc]
    assert h.thread_cap == 4
