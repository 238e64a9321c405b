"""CPU load per core, for the inference worker and for ortop itself.

ORT's intra-op pool spins between runs, so a model that looks cheap in latency can still hold whole cores. To show
that, ortop needs per-core load (where the spinning lands), the worker's per-thread load (which threads spin) and
its own cost (so the monitor never hides inside the figure it reports). Every reading is a delta between two
calls, so ``sample()`` never sleeps and can run on the UI's refresh tick.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
from dataclasses import dataclass, replace
from typing import Protocol

import psutil

_LINUX = sys.platform.startswith("linux")
_CLK_TCK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
_BUSY_THREAD_PCT = 1.0  # a thread below this is idle for worker_cores


@dataclass(frozen=True)
class ThreadSample:
    """One thread of the watched process over the last interval."""

    tid: int
    cpu_percent: float  # % of one core
    core: int | None    # the logical core it last ran on; None where the OS does not say
    name: str
    role: str = ""      # in an ortop worker: main, caller N, reader or pool (see thread_role); "" elsewhere


@dataclass(frozen=True)
class CpuSample:
    """CPU load over the interval since the previous sample."""

    per_core: tuple[float, ...]         # system-wide % per logical core (0-based order, as htop)
    system_percent: float               # mean over cores
    process_percent: float | None       # the watched process (the inference worker): % of ONE core (can exceed 100)
    threads: tuple[ThreadSample, ...]   # the watched process's threads, busiest first
    worker_cores: frozenset[int]        # cores the watched process's busy threads (> 1 %) ran on last
    self_percent: float                 # the calling process's own CPU (the UI/monitor), % of one core


class CpuCollector(Protocol):
    """Anything that yields CPU samples for one watched process."""

    def sample(self) -> CpuSample: ...

    def watch(self, pid: int | None) -> None: ...


def physical_cores() -> int:
    """Physical core count, for advice on intra-op threads (SMT siblings add little to a matmul)."""
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


_REPLICA_CALLER = re.compile(r"ortop-r(\d+)c(\d+)")


def thread_role(tid: int, name: str, pid: int | None) -> str:
    """What a thread of an ortop worker does, from its OS name (the worker names its own threads, see
    ``runtime.child.set_os_thread_name``): ``caller N`` runs the model (``caller N of rR`` for replica R),
    ``main`` builds sessions and serves the parent, ``reader`` forwards ORT's log lines, ``library`` was started by a
    library before any session; any other thread is ORT's intra-op pool (it inherits the main thread's name)."""
    if name.startswith("ortop-caller-"):
        return "caller " + name[len("ortop-caller-"):]
    replica = _REPLICA_CALLER.fullmatch(name)
    if replica:  # a replica's caller (workload.replicas): ortop-r<replica>c<caller>
        return f"caller {replica[2]} of r{replica[1]}"
    if name == "ortop-stderr":
        return "reader"
    if name == "ortop-lib":  # started by a library at import (numpy's BLAS, onnxruntime): runtime.child
        return "library"
    if tid == pid:
        return "main"
    return "pool"


def with_roles(threads: list[ThreadSample], pid: int | None) -> list[ThreadSample]:
    """The threads with their role, when they belong to an ortop worker (one of them carries an ``ortop-`` name);
    another process's threads are left without one, as their roles cannot be known."""
    if not any(t.name.startswith("ortop-") for t in threads):
        return threads
    return [replace(t, role=thread_role(t.tid, t.name, pid)) for t in threads]


def parse_cpulist(text: str) -> tuple[int, ...]:
    """Parse a kernel cpulist such as ``0-3,8-11`` or ``5`` (empty for a memory-only node)."""
    cores: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cores.extend(range(int(lo), int(hi) + 1))
        else:
            cores.append(int(part))
    return tuple(cores)


def numa_nodes(root: str = "/sys/devices/system/node") -> dict[int, tuple[int, ...]]:
    """{node id: its logical cores} from sysfs on Linux; {} elsewhere or when sysfs cannot be read.

    Threads pinned across nodes pay for remote memory, so the core view groups cores by node.
    """
    if not _LINUX:
        return {}
    try:
        entries = os.listdir(root)
    except OSError:
        return {}
    nodes: dict[int, tuple[int, ...]] = {}
    for entry in entries:
        if not entry.startswith("node") or not entry[4:].isdigit():
            continue
        try:
            with open(os.path.join(root, entry, "cpulist")) as fh:
                nodes[int(entry[4:])] = parse_cpulist(fh.read())
        except (OSError, ValueError):
            continue
    return dict(sorted(nodes.items()))


def _read_small(path: str) -> bytes:
    """Read a /proc file with one syscall; cheaper than open() for the dozens read per sample."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _parse_task_stat(raw: bytes) -> tuple[float, int | None, str]:
    """(user+system CPU seconds, last core, comm) from a /proc/.../stat line.

    comm sits between the first '(' and the last ')' and may itself hold spaces or parentheses, so fields are
    counted from after the last ')': state is field 3, utime 14, stime 15, processor 39.
    """
    close = raw.rfind(b")")
    name = raw[raw.find(b"(") + 1: close].decode("utf-8", "replace")
    fields = raw[close + 2:].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / _CLK_TCK
    core = int(fields[36]) if len(fields) > 36 else None
    return cpu_s, core, name


class PsutilCpuCollector:
    """The real collector: /proc (through psutil where it is cheap) on Linux, psutil alone elsewhere.

    On Linux each thread costs one read of ``/proc/<pid>/task/<tid>/stat``, which holds its CPU times, the core it
    last ran on and its name; going through ``psutil.Process.threads()`` and then reading ``stat`` and ``comm``
    again would cost three reads per thread, about 2.5x the time of a whole sample.
    """

    def __init__(self, pid: int | None = None) -> None:
        self._me = psutil.Process()
        self._me.cpu_percent(None)
        self._prev_cores = self._core_times()
        self._pid: int | None = None
        self._proc: psutil.Process | None = None
        self._prev_threads: dict[int, float] = {}
        self._prev_t = time.monotonic()
        self._primed = False
        self._watch(pid)

    # -- system -----------------------------------------------------------------------------------------

    @staticmethod
    def _core_times() -> list[tuple[float, float]]:
        """(busy, total) seconds per logical core. Own deltas, not psutil.cpu_percent's module-wide state, so
        another caller of psutil.cpu_percent in this process cannot shorten our interval."""
        out = []
        for t in psutil.cpu_times(percpu=True):
            total = sum(t)
            # guest time is already counted in user/nice on Linux
            total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
            idle = t.idle + getattr(t, "iowait", 0.0)
            out.append((total - idle, total))
        return out

    def _per_core(self) -> tuple[float, ...]:
        cur = self._core_times()
        prev = self._prev_cores
        self._prev_cores = cur
        if len(prev) != len(cur):  # a core went on- or offline: no delta this time
            return tuple(0.0 for _ in cur)
        out = []
        for (b0, t0), (b1, t1) in zip(prev, cur):
            dt = t1 - t0
            out.append(min(100.0, max(0.0, (b1 - b0) / dt * 100.0)) if dt > 0 else 0.0)
        return tuple(out)

    # -- watched process --------------------------------------------------------------------------------

    def watch(self, pid: int | None) -> None:
        """Switch to another worker (it restarted). The same pid again keeps the running deltas."""
        if pid == self._pid and (pid is None or self._proc is not None):
            return
        self._watch(pid)

    def _watch(self, pid: int | None) -> None:
        self._pid = pid
        self._proc = None
        self._prev_threads = {}
        self._primed = False
        self._prev_t = time.monotonic()
        if pid is None:
            return
        try:
            self._proc = psutil.Process(pid)
            self._proc.cpu_percent(None)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self._proc = None
            return
        threads = self._thread_times()
        if threads is not None:
            self._prev_threads = {tid: cpu_s for tid, (cpu_s, _, _) in threads.items()}
            self._primed = True

    def _thread_times(self) -> dict[int, tuple[float, int | None, str]] | None:
        """{tid: (cpu seconds, core, name)}; None when the process is gone or hidden."""
        pid = self._pid
        if pid is None:
            return None
        if _LINUX:
            base = f"/proc/{pid}/task/"
            try:
                tids = os.listdir(base)
            except OSError:
                return None
            out: dict[int, tuple[float, int | None, str]] = {}
            for tid in tids:
                try:
                    out[int(tid)] = _parse_task_stat(_read_small(base + tid + "/stat"))
                except (OSError, ValueError, IndexError):
                    continue  # the thread ended between listdir and read
            return out
        if self._proc is None:
            return None
        try:
            return {t.id: (t.user_time + t.system_time, None, "") for t in self._proc.threads()}
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            return None

    def sample(self) -> CpuSample:
        """Load since the previous call (or since construction / ``watch``); never raises for a vanished pid."""
        per_core = self._per_core()
        system = sum(per_core) / len(per_core) if per_core else 0.0
        # CPU time moves in clock ticks: over a window much shorter than a tick (two samples close together) one
        # tick reads as thousands of percent. No process uses more than every core, nor a thread more than one.
        cap = 100.0 * (len(per_core) or psutil.cpu_count() or 1)
        try:
            me = min(cap, float(self._me.cpu_percent(None)))
        except (psutil.Error, OSError):
            me = 0.0

        now = time.monotonic()
        dt = now - self._prev_t
        self._prev_t = now
        process: float | None = None
        threads: list[ThreadSample] = []
        if self._proc is not None:
            try:
                process = min(cap, float(self._proc.cpu_percent(None)))
            except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                process = None
            cur = self._thread_times() if process is not None else None
            if cur is None:
                process = None
                self._prev_threads = {}
            else:
                for tid, (cpu_s, core, name) in cur.items():
                    # a thread absent from the last snapshot started since then: all its CPU time is in this
                    # interval (unless there was no snapshot at all)
                    before = self._prev_threads.get(tid, 0.0 if self._primed else None)
                    pct = min(100.0, max(0.0, (cpu_s - before) / dt * 100.0)) if before is not None and dt > 0 else 0.0
                    threads.append(ThreadSample(tid, pct, core, name))
                self._prev_threads = {tid: v[0] for tid, v in cur.items()}
                self._primed = True
        threads = with_roles(threads, self._pid)
        threads.sort(key=lambda t: (-t.cpu_percent, t.tid))
        cores = frozenset(t.core for t in threads if t.core is not None and t.cpu_percent > _BUSY_THREAD_PCT)
        return CpuSample(per_core, system, process, tuple(threads), cores, me)


class FakeCpuCollector:
    """Deterministic CPU samples for tests and UI snapshots: a worker whose intra-op threads spin on some cores.

    The same seed gives the same sequence of samples, on any host.
    """

    def __init__(self, n_cores: int = 8, *, seed: int = 0, n_threads: int = 6, pid: int | None = 4242,
                 thread_names: tuple[str, ...] = ("ortop-caller-0", "ortop-worker")) -> None:
        self.n_cores = n_cores
        self.n_threads = n_threads
        self.thread_names = thread_names
        self._rng = random.Random(seed)
        self._pid = pid
        self.samples = 0

    def watch(self, pid: int | None) -> None:
        self._pid = pid

    @property
    def pid(self) -> int | None:
        return self._pid

    def sample(self) -> CpuSample:
        rng = self._rng
        self.samples += 1
        load = [rng.uniform(0.0, 8.0) for _ in range(self.n_cores)]  # background noise
        threads: list[ThreadSample] = []
        if self._pid is not None:
            for i in range(self.n_threads):
                tid = self._pid + i
                # thread 0 is the caller; threads 1.. form the pool and mostly spin
                pct = rng.uniform(60.0, 100.0) if i == 0 or rng.random() < 0.8 else rng.uniform(0.0, 0.8)
                core = (i * 2 + rng.randrange(2)) % self.n_cores if self.n_cores else None
                name = self.thread_names[min(i, len(self.thread_names) - 1)] if self.thread_names else ""
                threads.append(ThreadSample(tid, round(pct, 1), core, name))
                if core is not None:
                    load[core] += pct
        per_core = tuple(round(min(100.0, v), 1) for v in load)
        threads = with_roles(threads, None)  # thread 0 is the caller here, not the main thread
        threads.sort(key=lambda t: (-t.cpu_percent, t.tid))
        process = round(sum(t.cpu_percent for t in threads), 1) if self._pid is not None else None
        cores = frozenset(t.core for t in threads if t.core is not None and t.cpu_percent > _BUSY_THREAD_PCT)
        system = sum(per_core) / len(per_core) if per_core else 0.0
        return CpuSample(per_core, system, process, tuple(threads), cores, round(rng.uniform(1.0, 6.0), 1))
