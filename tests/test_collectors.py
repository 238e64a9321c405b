"""Collectors: the real CPU collector against live processes, the NVML wrapper against a fake NVML module.

The fake NVML object stands in for the hardware edge only; it raises pynvml's own exception classes, so the
wrapper's error handling is exercised exactly as a driver would trigger it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psutil
import pynvml
import pytest

from ortop.collectors import cpu as cpu_mod
from ortop.collectors import gpu as gpu_mod
from ortop.collectors.cpu import (
    CpuSample,
    FakeCpuCollector,
    PsutilCpuCollector,
    numa_nodes,
    parse_cpulist,
    physical_cores,
)
from ortop.collectors.gpu import (
    NO_GPU,
    PID_NOT_LISTED,
    PID_NOT_LISTED_CONTAINER,
    FakeGpuCollector,
    NvmlGpuCollector,
    make_gpu_collector,
)

LINUX = sys.platform.startswith("linux")

# Two threads doing matmul with single-threaded BLAS: numpy releases the GIL, so both really run at once.
BUSY_CHILD = """
import os, sys, threading, time
import numpy as np
a = np.random.default_rng(0).random((160, 160))
stop = time.monotonic() + float(sys.argv[1])
def burn():
    while time.monotonic() < stop:
        a @ a
ts = [threading.Thread(target=burn) for _ in range(2)]
for t in ts:
    t.start()
print("ready", flush=True)
for t in ts:
    t.join()
"""


def _single_thread_env() -> dict[str, str]:
    env = dict(os.environ)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    return env


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1


@contextlib.contextmanager
def spinner() -> Iterator[tuple[threading.Thread, list[float]]]:
    """A thread spinning on a core for the length of the block; the list holds the CPU seconds it has used."""
    stop = threading.Event()
    used = [0.0]

    def spin() -> None:
        while not stop.is_set():
            used[0] = time.thread_time()

    t = threading.Thread(target=spin, name="spinner")
    t.start()
    try:
        yield t, used
    finally:
        stop.set()
        t.join()


# -- CPU: real collector --------------------------------------------------------------------------------


def _check_shape(s: CpuSample) -> None:
    assert len(s.per_core) == psutil.cpu_count()
    assert all(0.0 <= v <= 100.0 for v in s.per_core)
    assert s.system_percent == pytest.approx(sum(s.per_core) / len(s.per_core))
    assert 0.0 <= s.self_percent <= 100.0 * psutil.cpu_count()
    assert [t.cpu_percent for t in s.threads] == sorted((t.cpu_percent for t in s.threads), reverse=True)
    assert all(c in range(psutil.cpu_count()) for c in s.worker_cores)


def test_current_process_busy_main_thread() -> None:
    # Compared with an independent reading of the same window, not a fixed threshold: on a loaded host a burn of
    # 0.25 s CPU takes longer in wall time and the share is lower, for the collector and the reference alike.
    w0, c0 = time.monotonic(), time.process_time()
    c = PsutilCpuCollector(os.getpid())
    _burn(0.25)
    s = c.sample()
    expected = (time.process_time() - c0) / (time.monotonic() - w0) * 100
    _check_shape(s)
    assert s.process_percent is not None
    assert s.process_percent == pytest.approx(expected, abs=max(15.0, 0.2 * expected))
    assert s.self_percent == pytest.approx(expected, abs=max(15.0, 0.2 * expected))  # the caller is watched here
    tids = {t.tid for t in s.threads}
    assert os.getpid() in tids  # the main thread's tid is the pid
    main = next(t for t in s.threads if t.tid == os.getpid())
    assert main.cpu_percent >= 0.6 * s.process_percent  # the burning thread carries the process's load
    if LINUX:
        with open("/proc/self/comm") as fh:
            assert main.name == fh.read().strip()
        assert main.core in range(psutil.cpu_count())
        assert main.core in s.worker_cores


@pytest.mark.slow
def test_busy_child_two_threads() -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY_CHILD, "1.0"], stdout=subprocess.PIPE, text=True,
                             env=_single_thread_env())
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        ref = psutil.Process(child.pid)
        t0, w0 = sum(ref.cpu_times()[:2]), time.monotonic()
        c = PsutilCpuCollector()
        c.watch(child.pid)
        time.sleep(0.5)
        s = c.sample()
        expected = (sum(ref.cpu_times()[:2]) - t0) / (time.monotonic() - w0) * 100
    finally:
        child.kill()
        child.wait()
    _check_shape(s)
    assert s.process_percent is not None
    assert s.process_percent == pytest.approx(expected, abs=max(25.0, 0.25 * expected))
    assert len(s.threads) >= 3  # main + 2 burners
    # the two burners lead, each with a fair share of what the process used in the same window (a ratio, so a
    # loaded host that gives the child less CPU gives both sides less)
    busy = list(s.threads[:2])
    assert all(t.cpu_percent >= 0.25 * s.process_percent for t in busy), s.threads
    # per-thread figures add up to the process figure (tick granularity and slightly different windows aside)
    total = sum(t.cpu_percent for t in s.threads)
    assert abs(total - s.process_percent) < max(25.0, 0.25 * s.process_percent)
    if LINUX:
        assert all(t.core in range(psutil.cpu_count()) for t in s.threads)
        assert {t.core for t in busy} <= s.worker_cores
        assert s.worker_cores


def test_vanished_pid_gives_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    c = PsutilCpuCollector(child.pid)
    assert c.sample().process_percent is not None
    child.kill()
    child.wait()  # reaped: the pid is gone
    s = c.sample()
    assert s.process_percent is None
    assert s.threads == () and s.worker_cores == frozenset()
    _check_shape(s)
    # watching a pid that no longer exists is not an error either
    c.watch(child.pid)
    assert c.sample().process_percent is None


def test_no_pid_and_watch_switch() -> None:
    c = PsutilCpuCollector()
    s = c.sample()
    _check_shape(s)
    assert s.process_percent is None and s.threads == ()
    c.watch(os.getpid())
    c.watch(os.getpid())  # same pid again keeps the deltas
    assert c.sample().process_percent is not None
    c.watch(None)
    assert c.sample().process_percent is None


def test_new_thread_counts_from_its_start() -> None:
    """A thread started after the previous sample still shows the CPU it used since it began: nearly all the
    process used in the window, as the process's own figure says (a ratio within one sample, whatever the host's
    load)."""
    c = PsutilCpuCollector(os.getpid())
    with spinner() as (t, used):
        deadline = time.monotonic() + 10
        while used[0] < 0.1 and time.monotonic() < deadline:  # ten clock ticks of CPU, however long they take
            time.sleep(0.01)
        s = c.sample()  # sampled while the thread is alive
    assert used[0] >= 0.1
    mine = [x for x in s.threads if x.tid == t.native_id]
    assert mine and s.process_percent is not None
    assert mine[0].cpu_percent >= 0.6 * s.process_percent


def test_samples_close_together_stay_within_the_cores() -> None:
    """CPU time moves in clock ticks: psutil once gave 10441 % for this process from two calls a fraction of a tick
    apart, and a thread's tick over a window shorter than a tick reads as more than a core. No process uses more
    than every core, nor a thread more than one."""
    cap = 100.0 * psutil.cpu_count()
    c = PsutilCpuCollector(os.getpid())
    c._me.cpu_percent = lambda interval=None: 10441.5  # what psutil answered
    assert c._proc is not None
    c._proc.cpu_percent = lambda interval=None: 10441.5
    real = c._thread_times
    c._thread_times = lambda: {tid: (cpu_s + 0.01, core, name) for tid, (cpu_s, core, name) in real().items()}
    s = c.sample()  # a tick more for every thread, within the microseconds since the collector was made
    assert s.self_percent == cap and s.process_percent == cap
    assert s.threads and all(t.cpu_percent == 100.0 for t in s.threads)
    _check_shape(s)


@pytest.mark.skipif(not LINUX, reason="/proc layout")
def test_parse_task_stat_comm_with_spaces_and_parens() -> None:
    rest = ["S"] + [str(i) for i in range(4, 53)]  # fields 3..52
    rest[14 - 3] = "150"  # utime ticks
    rest[15 - 3] = "50"   # stime ticks
    rest[39 - 3] = "7"    # processor
    raw = ("1234 (we (ird) na)me) " + " ".join(rest) + "\n").encode()
    cpu_s, core, name = cpu_mod._parse_task_stat(raw)
    assert name == "we (ird) na)me"
    assert core == 7
    assert cpu_s == pytest.approx(200 / cpu_mod._CLK_TCK)


def _thread_list_the_long_way(pid: int) -> None:
    """What a sample would cost through psutil's thread list: that list, then each thread's stat and comm again."""
    for t in psutil.Process(pid).threads():
        for name in ("stat", "comm"):
            with open(f"/proc/{pid}/task/{t.id}/{name}", "rb") as fh:
                fh.read()


@pytest.mark.skipif(not LINUX, reason="/proc layout")
def test_sample_is_cheap() -> None:
    """A whole sample of a 20-thread process (it runs on every UI tick) costs less than listing the threads through
    psutil and reading each one's stat and comm: one read per thread instead of three. Blocks of each, interleaved,
    best block against best block, so the host's load falls on both sides alike."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import threading, time\n"
                              "for _ in range(19):\n"
                              "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                              "print('ready', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        c = PsutilCpuCollector(child.pid)
        assert len(c.sample().threads) == 20
        n, sample_s, long_s = 20, [], []
        for _ in range(6):
            t0 = time.perf_counter()
            for _ in range(n):
                c.sample()
            t1 = time.perf_counter()
            for _ in range(n):
                _thread_list_the_long_way(child.pid)
            sample_s.append((t1 - t0) / n)
            long_s.append((time.perf_counter() - t1) / n)
    finally:
        child.kill()
        child.wait()
    print(f"one CPU sample, 20 threads: {min(sample_s) * 1e6:.0f} us; the long way {min(long_s) * 1e6:.0f} us")
    assert min(sample_s) < min(long_s)


def test_topology_helpers(tmp_path) -> None:
    assert 1 <= physical_cores() <= psutil.cpu_count()
    assert parse_cpulist("0-3,8-11") == (0, 1, 2, 3, 8, 9, 10, 11)
    assert parse_cpulist("5\n") == (5,)
    assert parse_cpulist("\n") == ()
    for node, text in ((1, "4-7\n"), (0, "0-3,8\n"), (10, "\n")):
        (tmp_path / f"node{node}").mkdir()
        (tmp_path / f"node{node}" / "cpulist").write_text(text)
    (tmp_path / "possible").write_text("0-1\n")
    (tmp_path / "nodeX").mkdir()
    if LINUX:
        assert numa_nodes(str(tmp_path)) == {0: (0, 1, 2, 3, 8), 1: (4, 5, 6, 7), 10: ()}
        assert numa_nodes(str(tmp_path / "missing")) == {}
        real = numa_nodes()
        assert all(c in range(psutil.cpu_count()) for cores in real.values() for c in cores)
    else:
        assert numa_nodes(str(tmp_path)) == {}


# -- CPU: fake ------------------------------------------------------------------------------------------


def test_fake_cpu_is_seeded_and_consistent() -> None:
    a, b = FakeCpuCollector(8, seed=3), FakeCpuCollector(8, seed=3)
    sa = [a.sample() for _ in range(5)]
    assert sa == [b.sample() for _ in range(5)]
    assert sa != [FakeCpuCollector(8, seed=4).sample() for _ in range(5)]
    for s in sa:
        assert len(s.per_core) == 8 and all(0 <= v <= 100 for v in s.per_core)
        assert s.process_percent == pytest.approx(sum(t.cpu_percent for t in s.threads), abs=0.2)
        assert s.worker_cores == {t.core for t in s.threads if t.cpu_percent > 1}
        assert [t.cpu_percent for t in s.threads] == sorted((t.cpu_percent for t in s.threads), reverse=True)
    a.watch(None)
    s = a.sample()
    assert s.process_percent is None and s.threads == () and s.worker_cores == frozenset()


# -- GPU: the NVML wrapper over a fake NVML module -------------------------------------------------------


def _err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeNvml:
    """A pynvml-shaped object: devices as dicts, failures as pynvml's own exception classes."""

    def __init__(self, devices: list[dict[str, Any]] | None = None, *, init_error: int | None = None,
                 v2_error: int | None = None, util_error: int | None = None) -> None:
        self.devices = devices if devices is not None else [
            {"name": "NVIDIA H100 80GB HBM3", "total": 80_000, "used": 1_000, "reserved": 500, "util": 42,
             "procs": []}]
        self.init_error = init_error
        self.v2_error = v2_error
        self.util_error = util_error
        self.calls: dict[str, int] = {}
        self.nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def nvmlInit(self) -> None:
        self._call("init")
        if self.init_error is not None:
            raise _err(self.init_error)

    def nvmlShutdown(self) -> None:
        self._call("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return self.devices[h]["name"]

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> SimpleNamespace:
        d = self.devices[h]
        if d.get("mem_error") is not None:
            raise _err(d["mem_error"])
        if version:
            self._call("mem_v2")
            assert version == pynvml.nvmlMemory_v2
            if self.v2_error is not None:
                raise _err(self.v2_error)
            return SimpleNamespace(version=version, total=d["total"], reserved=d["reserved"],
                                   free=d["total"] - d["used"] - d["reserved"], used=d["used"])
        self._call("mem_v1")
        used = d["used"] + d["reserved"]  # v1 counts the reservation as used
        return SimpleNamespace(total=d["total"], free=d["total"] - used, used=used)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        if self.util_error is not None:
            raise _err(self.util_error)
        return SimpleNamespace(gpu=self.devices[h]["util"], memory=10)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        d = self.devices[h]
        if d.get("procs_error") is not None:
            raise d["procs_error"]
        return [SimpleNamespace(pid=p, usedGpuMemory=m, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                for p, m in d["procs"]]

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: int) -> list[SimpleNamespace]:
        self._call("procs_v2")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.devices[h]["procs"]]


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
                                  pynvml.NVML_ERROR_NO_PERMISSION])
def test_nvml_init_failure(code: int) -> None:
    nv = FakeNvml(init_error=code)
    c = NvmlGpuCollector(nv)
    assert nv.calls == {}  # lazy: nothing until the first sample
    s = c.sample()
    assert s.status == NO_GPU and s.devices == () and s.pid_note is None
    c.sample()
    assert nv.calls["init"] == 1  # not retried on every tick
    c.close()
    assert "shutdown" not in nv.calls


def test_nvml_no_devices() -> None:
    s = NvmlGpuCollector(FakeNvml(devices=[])).sample()
    assert s.status == NO_GPU and s.devices == ()


def test_nvml_v2_memory() -> None:
    nv = FakeNvml()
    s = NvmlGpuCollector(nv).sample()
    assert s.status == "ok"
    (d,) = s.devices
    assert (d.index, d.name, d.mem_used, d.mem_total, d.mem_reserved) == (
        0, "NVIDIA H100 80GB HBM3", 1_000, 80_000, 500)
    assert d.util_percent == 42.0 and d.process_mem is None
    assert "mem_v1" not in nv.calls


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NOT_SUPPORTED,
                                  pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH])
def test_nvml_v2_unsupported_falls_back_to_v1(code: int) -> None:
    nv = FakeNvml(v2_error=code)
    c = NvmlGpuCollector(nv)
    (d,) = c.sample().devices
    assert (d.mem_used, d.mem_total, d.mem_reserved) == (1_500, 80_000, None)
    c.sample()
    assert nv.calls["mem_v2"] == 1 and nv.calls["mem_v1"] == 2  # v2 is not asked again


def test_nvml_without_v2_constant_uses_v1() -> None:
    nv = FakeNvml()
    del nv.nvmlMemory_v2  # an nvidia-ml-py too old to know memory v2
    (d,) = NvmlGpuCollector(nv).sample().devices
    assert d.mem_reserved is None and d.mem_used == 1_500


def test_nvml_util_not_supported() -> None:
    s = NvmlGpuCollector(FakeNvml(util_error=pynvml.NVML_ERROR_NOT_SUPPORTED)).sample()
    assert s.status == "ok" and s.devices[0].util_percent is None


def test_nvml_process_matched() -> None:
    nv = FakeNvml()
    nv.devices[0]["procs"] = [(111, 5_000), (4242, 700)]
    c = NvmlGpuCollector(nv, pid=4242)
    s = c.sample()
    assert s.devices[0].process_mem == 700 and s.pid_note is None
    nv.devices[0]["procs"] = [(4242, None)]  # WDDM / some vGPUs do not report per-process memory
    s = c.sample()
    assert s.devices[0].process_mem is None and s.pid_note is None
    c.watch(None)
    assert c.sample().devices[0].process_mem is None


def test_nvml_process_not_matched() -> None:
    nv = FakeNvml()
    nv.devices[0]["procs"] = [(98765, 5_000)]  # a host pid, as seen from inside a container
    c = NvmlGpuCollector(nv, pid=4242)
    s = c.sample()
    assert s.devices[0].process_mem is None and s.pid_note == PID_NOT_LISTED_CONTAINER
    nv.devices[0]["procs"] = []
    assert c.sample().pid_note == PID_NOT_LISTED


def test_nvml_process_query_version_mismatch_uses_v2() -> None:
    nv = FakeNvml()
    nv.devices[0]["procs"] = [(4242, 700)]
    nv.devices[0]["procs_error"] = pynvml.NVMLLibraryMismatchError("driver lacks _v3")
    c = NvmlGpuCollector(nv, pid=4242)
    assert c.sample().devices[0].process_mem == 700
    c.sample()
    assert nv.calls["procs_v2"] == 2


def test_nvml_process_query_error_is_none() -> None:
    nv = FakeNvml()
    nv.devices[0]["procs_error"] = _err(pynvml.NVML_ERROR_NO_PERMISSION)
    s = NvmlGpuCollector(nv, pid=4242).sample()
    assert s.status == "ok" and s.devices[0].process_mem is None and s.pid_note is None


def test_nvml_error_mid_sample() -> None:
    nv = FakeNvml(devices=[
        {"name": "A", "total": 100, "used": 10, "reserved": 1, "util": 5, "procs": []},
        {"name": b"B", "total": 200, "used": 20, "reserved": 2, "util": 6, "procs": []},
    ])
    c = NvmlGpuCollector(nv)
    s = c.sample()
    assert [d.name for d in s.devices] == ["A", "B"]  # bytes names (old pynvml) are decoded
    nv.devices[1]["mem_error"] = pynvml.NVML_ERROR_GPU_IS_LOST
    s = c.sample()
    assert [d.index for d in s.devices] == [0]
    assert s.status == "NVML error: GPU is lost"
    assert [d.mem_v2 for d in c._devs] == [True, True]  # a dead device does not demote memory v2
    nv.devices[1]["mem_error"] = None
    assert c.sample().status == "ok"


def test_nvml_error_during_start_and_unexpected_exceptions() -> None:
    nv = FakeNvml()

    def broken_count() -> int:
        raise _err(pynvml.NVML_ERROR_UNKNOWN)

    nv.nvmlDeviceGetCount = broken_count  # type: ignore[method-assign]
    s = NvmlGpuCollector(nv).sample()
    assert s.status == "NVML error: Unknown Error" and s.devices == ()
    assert nv.calls["shutdown"] == 1

    nv2 = FakeNvml()
    nv2.nvmlDeviceGetHandleByIndex = None  # type: ignore[assignment]  # not even callable
    assert NvmlGpuCollector(nv2).sample().status.startswith("NVML error: ")


def test_nvml_close_and_restart() -> None:
    nv = FakeNvml()
    c = NvmlGpuCollector(nv)
    assert c.sample().status == "ok"
    c.close()
    assert nv.calls["shutdown"] == 1
    assert c.sample().status == "ok"
    assert nv.calls["init"] == 2


def test_real_nvml_on_this_host() -> None:
    """The real wrapper never raises; on a host without the NVML library it says so."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        have_gpu = False
    else:
        have_gpu = pynvml.nvmlDeviceGetCount() > 0
        pynvml.nvmlShutdown()
    c = make_gpu_collector()
    assert isinstance(c, NvmlGpuCollector)
    c.watch(os.getpid())
    s = c.sample()
    if have_gpu:
        assert s.status == "ok" and s.devices
        assert all(0 < d.mem_used <= d.mem_total for d in s.devices)
    else:
        assert s.status == NO_GPU and s.devices == ()
    c.close()


# -- GPU: fake collector --------------------------------------------------------------------------------


def test_fake_gpu_collector() -> None:
    two = (("NVIDIA A100-SXM4-40GB", 40 * gpu_mod.GiB), ("NVIDIA A100-SXM4-40GB", 40 * gpu_mod.GiB))
    a, b = FakeGpuCollector(two, seed=1), FakeGpuCollector(two, seed=1)
    assert [a.sample() for _ in range(3)] == [b.sample() for _ in range(3)]
    s = a.sample()
    assert s.status == "ok" and len(s.devices) == 2
    assert s.devices[0].process_mem == 3 * gpu_mod.GiB and s.devices[1].process_mem is None
    assert all(d.mem_used <= d.mem_total for d in s.devices)
    assert FakeGpuCollector(no_gpu=True).sample() == gpu_mod.GpuSample((), NO_GPU)
    assert all(d.util_percent is None for d in FakeGpuCollector(util_supported=False).sample().devices)
    s = FakeGpuCollector(worker_mem=None).sample()
    assert s.pid_note == PID_NOT_LISTED_CONTAINER and s.devices[0].process_mem is None
    c = FakeGpuCollector()
    c.watch(None)
    assert c.sample().devices[0].process_mem is None
    c.close()
    assert c.closed
