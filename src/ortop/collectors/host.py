"""Host facts: CPUs, physical cores, SMT siblings, NUMA nodes, the cgroup CPU quota and the CPU model.

What a tuner, a doctor or a saved profile's header needs to know about the machine, read once. Every file read
goes through ``root`` (``/`` by default), so tests can build a fake ``/sys`` and ``/proc`` under a temporary folder:

- ``proc/cpuinfo``: the CPU model name (and the processor count when there is no sysfs);
- ``sys/devices/system/cpu/cpu*/topology/thread_siblings_list``: which logical CPUs share a physical core;
- ``sys/devices/system/node/node*/cpulist``: NUMA nodes and their CPUs;
- ``proc/self/cgroup`` and ``sys/fs/cgroup``: the CPU quota, cgroup v2 (``cpu.max``) or v1
  (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), the tightest along the process's cgroup path;
- ``proc/self/status`` (``Cpus_allowed_list``): the CPUs the process may run on, when ``root`` is not ``/``; on the
  real root ``os.sched_getaffinity`` answers (a cpuset or ``taskset`` restricts it).

Why it matters: ONNX Runtime's default intra-op pool follows the host's physical cores, not a container's quota
or cpuset, so a container with 1.5 CPUs on a 64-core host gets 64 threads fighting for 1.5 CPUs. The thread
counts worth trying are bounded by :attr:`HostFacts.thread_cap`.

A host's *type* (:func:`facts_type`) is named from these facts and its GPU models: the fleet types a node that
declares none this way, and the metrics endpoint labels itself the same way, so both name one host alike.

Nothing here imports onnxruntime or textual; nothing raises on a missing or odd file (that fact is None/empty).
"""

from __future__ import annotations

import math
import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ortop.collectors.cpu import parse_cpulist
from ortop.config.values import format_cpulist  # re-exported: the doctor names core sets with it

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")


@dataclass(frozen=True)
class HostFacts:
    """What the machine offers a process, as read by :func:`read_host`."""

    logical_cpus: int                            # logical CPUs the OS has online
    usable_cpus: tuple[int, ...]                 # CPUs this process may run on (affinity / cpuset)
    physical_cores: int                          # physical cores of the host (psutil's count)
    siblings: tuple[tuple[int, ...], ...] = ()   # logical CPUs per physical core (SMT siblings), by first CPU
    numa_nodes: Mapping[int, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    cpu_quota: float | None = None               # cgroup CPU quota in CPUs (1.5 = 150 ms per 100 ms); None = none
    cpu_model: str = ""

    @property
    def first_siblings(self) -> tuple[int, ...]:
        """One logical CPU per physical core (the lowest of each sibling list): pinning here avoids SMT pairs."""
        return tuple(sorted(g[0] for g in self.siblings if g))

    @property
    def smt(self) -> bool:
        """Whether some physical core carries two or more logical CPUs."""
        return any(len(g) > 1 for g in self.siblings)

    @property
    def usable_physical_cores(self) -> int:
        """Physical cores with at least one usable CPU (all of them without sibling information)."""
        usable = set(self.usable_cpus)
        if not self.siblings:
            return min(self.physical_cores, len(usable)) if usable else self.physical_cores
        return sum(1 for g in self.siblings if usable.intersection(g)) or 1

    @property
    def usable_first_siblings(self) -> tuple[int, ...]:
        """One usable logical CPU per physical core that has one."""
        usable = set(self.usable_cpus)
        out = []
        for g in self.siblings:
            mine = [c for c in g if c in usable]
            if mine:
                out.append(mine[0])
        return tuple(sorted(out))

    @property
    def usable_numa_nodes(self) -> dict[int, tuple[int, ...]]:
        """NUMA nodes with the usable CPUs of each (nodes left with none are left out)."""
        usable = set(self.usable_cpus)
        out = {n: tuple(c for c in cpus if c in usable) for n, cpus in self.numa_nodes.items()}
        return {n: cpus for n, cpus in out.items() if cpus}

    @property
    def thread_cap(self) -> int:
        """The most compute threads worth running: usable physical cores, bounded by the CPUs usable and the quota."""
        cap = min(self.usable_physical_cores, max(1, len(self.usable_cpus)) if self.usable_cpus else self.logical_cpus)
        if self.cpu_quota is not None:
            cap = min(cap, max(1, math.ceil(self.cpu_quota - 1e-9)))
        return max(1, cap)

    @property
    def restricted(self) -> bool:
        """Whether a quota or a cpuset leaves fewer CPUs than ORT's default pool (the physical cores) assumes."""
        return self.thread_cap < self.physical_cores

    def describe(self) -> str:
        """One line: ``Intel(R) Xeon(R) …, 16 logical / 8 physical cores, usable 0-3, cgroup quota 1.5 CPUs``."""
        parts = [self.cpu_model or "unknown CPU", f"{self.logical_cpus} logical / {self.physical_cores} physical cores"]
        if self.usable_cpus and len(self.usable_cpus) < self.logical_cpus:
            parts.append(f"usable CPUs {format_cpulist(self.usable_cpus)}")
        if len(self.numa_nodes) > 1:
            parts.append(f"{len(self.numa_nodes)} NUMA nodes")
        parts.append(f"cgroup quota {self.cpu_quota:g} CPUs" if self.cpu_quota is not None else "no cgroup CPU quota")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return {
            "cpu_model": self.cpu_model,
            "logical_cpus": self.logical_cpus,
            "physical_cores": self.physical_cores,
            "usable_cpus": list(self.usable_cpus),
            "smt": self.smt,
            "numa_nodes": {str(k): list(v) for k, v in self.numa_nodes.items()},
            "cpu_quota": self.cpu_quota,
            "thread_cap": self.thread_cap,
        }


# ---- reading ------------------------------------------------------------------------------------------------------
def _path(root: str, rel: str) -> str:
    return os.path.join(root, rel.lstrip("/"))


def _read(root: str, rel: str) -> str | None:
    try:
        with open(_path(root, rel), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _listdir(root: str, rel: str) -> list[str]:
    try:
        return os.listdir(_path(root, rel))
    except OSError:
        return []


def _cpulist(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return parse_cpulist(text.strip())
    except ValueError:
        return ()


def read_cpu_model(root: str = "/") -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (x86 ``model name``; ARM ``Hardware``/``Processor``/``CPU part``)."""
    text = _read(root, "proc/cpuinfo") or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields and value.strip():
            fields[key.strip()] = value.strip()
    for key in ("model name", "Model", "Hardware", "Processor", "cpu model", "cpu"):
        if key in fields:
            return fields[key]
    if "CPU part" in fields:
        return f"CPU part {fields['CPU part']}"
    return platform.processor() if root == "/" else ""


def _sysfs_cpus(root: str) -> list[int]:
    return sorted(int(m.group(1)) for name in _listdir(root, "sys/devices/system/cpu") if (m := _CPU_DIR.match(name)))


def read_siblings(root: str = "/") -> tuple[tuple[int, ...], ...]:
    """Sibling groups (logical CPUs per physical core) from each CPU's ``topology/thread_siblings_list``."""
    groups: set[tuple[int, ...]] = set()
    for cpu in _sysfs_cpus(root):
        sib = _cpulist(_read(root, f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"))
        if sib:
            groups.add(tuple(sorted(sib)))
    return tuple(sorted(groups))


def read_numa_nodes(root: str = "/") -> dict[int, tuple[int, ...]]:
    """{node: its logical CPUs} from ``/sys/devices/system/node/node*/cpulist``; {} without NUMA information."""
    nodes: dict[int, tuple[int, ...]] = {}
    for name in _listdir(root, "sys/devices/system/node"):
        m = _NODE_DIR.match(name)
        if not m:
            continue
        text = _read(root, f"sys/devices/system/node/{name}/cpulist")
        if text is not None:
            nodes[int(m.group(1))] = _cpulist(text)
    return dict(sorted(nodes.items()))


def _quota_v2(text: str | None) -> float | None:
    """``cpu.max``: ``"max 100000"`` (no limit) or ``"150000 100000"`` (1.5 CPUs)."""
    if not text:
        return None
    parts = text.split()
    if len(parts) < 1 or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_v1(quota_text: str | None, period_text: str | None) -> float | None:
    """``cpu.cfs_quota_us`` (-1 = no limit) over ``cpu.cfs_period_us``."""
    if not quota_text or not period_text:
        return None
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _ancestors(path: str) -> list[str]:
    """``/a/b`` → ``["a/b", "a", ""]``: the cgroup folders from the process's own up to the mount's root."""
    parts = [p for p in path.strip().split("/") if p and p != ".."]
    return ["/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def read_cpu_quota(root: str = "/") -> float | None:
    """The tightest CPU quota (in CPUs) on the process's cgroup path, v2 or v1; None when unlimited or unknown.

    In a container the cgroup namespace usually makes the process's path ``/``, so the mount's root holds the
    limit; on a host the path names the service's cgroup. Each folder from the process's own up to the root is
    read (a limit on a parent applies to its children), and the smallest quota wins.
    """
    lines = (_read(root, "proc/self/cgroup") or "").splitlines()
    v2_path, v1_path = None, None
    for line in lines:
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":
            v2_path = path
        elif "cpu" in controllers.split(","):
            v1_path = path
    quotas: list[float] = []
    v2_base = "sys/fs/cgroup"
    if v2_path is not None or os.path.exists(_path(root, f"{v2_base}/cpu.max")):
        for sub in _ancestors(v2_path or "/"):
            q = _quota_v2(_read(root, f"{v2_base}/{sub}/cpu.max" if sub else f"{v2_base}/cpu.max"))
            if q is not None:
                quotas.append(q)
    for mount in ("sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpu", "sys/fs/cgroup/cpuacct,cpu"):
        if not os.path.isdir(_path(root, mount)):
            continue
        for sub in _ancestors(v1_path or "/"):
            base = f"{mount}/{sub}" if sub else mount
            q = _quota_v1(_read(root, f"{base}/cpu.cfs_quota_us"), _read(root, f"{base}/cpu.cfs_period_us"))
            if q is not None:
                quotas.append(q)
        break
    return min(quotas) if quotas else None


def _usable(root: str, logical: list[int]) -> tuple[int, ...]:
    if root in ("/", "") and hasattr(os, "sched_getaffinity"):
        try:
            return tuple(sorted(os.sched_getaffinity(0)))
        except OSError:
            pass
    for line in (_read(root, "proc/self/status") or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            cpus = _cpulist(line.split(":", 1)[1])
            if cpus:
                return cpus
    return tuple(logical)


def read_host(root: str = "/") -> HostFacts:
    """Read the host's facts under ``root`` (see the module docstring for the files). Never raises."""
    real = root in ("/", "")
    cpus = _sysfs_cpus(root)
    if not cpus:
        n = sum(1 for line in (_read(root, "proc/cpuinfo") or "").splitlines() if line.startswith("processor"))
        if not n and real:
            n = os.cpu_count() or 1
        cpus = list(range(max(n, 1)))
    logical = len(cpus)
    if real:
        logical = os.cpu_count() or logical
    siblings = read_siblings(root)
    physical = 0
    if real:
        try:
            import psutil

            physical = psutil.cpu_count(logical=False) or 0
        except Exception:
            physical = 0
    if not physical:
        physical = len(siblings) or logical
    return HostFacts(
        logical_cpus=logical,
        usable_cpus=_usable(root, cpus),
        physical_cores=physical,
        siblings=siblings,
        numa_nodes=MappingProxyType(read_numa_nodes(root)),
        cpu_quota=read_cpu_quota(root),
        cpu_model=read_cpu_model(root),
    )


# ---- the host's type ----------------------------------------------------------------------------------------------
def facts_type(facts: Mapping[str, Any]) -> str:
    """A host's type from its facts as the fleet's probe reports them (``gpus``: GPU models, ``cpu_model``,
    ``usable_cpus``: a count): its GPU model (with the count beyond one), else its CPU model × usable CPUs.

    Two hosts of one type should measure alike: the GPU decides that where there is one, the CPU model and the
    cores this process may use where there is not."""
    gpus = list(facts.get("gpus") or [])
    if gpus:
        return gpus[0] + (f" x{len(gpus)}" if len(gpus) > 1 else "")
    model = " ".join(str(facts.get("cpu_model") or "unknown CPU").split())
    return f"{model} x{facts.get('usable_cpus') or '?'}"


def host_type(host: HostFacts, gpus: Sequence[str]) -> str:
    """This host's type (:func:`facts_type`) from its facts and the GPU models NVML lists, read as the fleet's
    probe reads them."""
    return facts_type({"gpus": list(gpus), "cpu_model": host.cpu_model, "usable_cpus": len(host.usable_cpus)})
