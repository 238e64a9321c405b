"""GPU memory and utilisation through NVML, behind one wrapper at the hardware edge.

CUDA EP runs die of out-of-memory more often than of anything else, and the arena's growth is invisible from
inside ORT, so ortop shows each GPU's memory and the worker's share of it. NVML is optional (no driver, a Mac, a
MIG slice that refuses some queries): every NVML failure becomes None or a status line here, never an exception
in the UI, and NVML itself starts only on the first sample.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

NO_GPU = "no NVIDIA GPU / NVML not available"
OK = "ok"
PID_NOT_LISTED = "worker pid not among GPU processes"
PID_NOT_LISTED_CONTAINER = "worker pid not among GPU processes (containers report host pids)"


@dataclass(frozen=True)
class GpuDevice:
    """One GPU at one moment. Bytes throughout."""

    index: int
    name: str
    mem_used: int
    mem_total: int
    mem_reserved: int | None    # driver/firmware reservation (NVML memory v2 only)
    util_percent: float | None  # None = n/a, e.g. MIG raises NotSupported
    process_mem: int | None     # the watched pid's used GPU memory; None when not listed or not reported


@dataclass(frozen=True)
class GpuSample:
    devices: tuple[GpuDevice, ...]
    status: str                  # "ok" | NO_GPU | "NVML error: ..."
    pid_note: str | None = None  # why the worker's GPU memory is missing, when it is


class GpuCollector(Protocol):
    """Anything that yields GPU samples for one watched process."""

    def sample(self) -> GpuSample: ...

    def watch(self, pid: int | None) -> None: ...

    def close(self) -> None: ...


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ may itself call into NVML
        text = ""
    return f"NVML error: {text or type(exc).__name__}"


class NvmlGpuCollector:
    """The real collector over pynvml (or any object with the same functions, for tests).

    ``nvml`` defaults to the ``pynvml`` module from nvidia-ml-py, imported on the first sample so that a host
    without it (macOS) still imports ortop.
    """

    def __init__(self, nvml: Any = None, pid: int | None = None) -> None:
        self._nvml = nvml
        self._pid = pid
        self._started = False
        self._failed: str | None = None   # status once init failed; NVML is not retried on every tick
        self._handles: list[Any] = []
        self._names: list[str] = []
        self._mem_v2: list[bool] = []     # per device: memory v2 still worth asking for
        self._procs_fn: Any = None        # the running-processes query that works on this driver

    def watch(self, pid: int | None) -> None:
        self._pid = pid

    def _start(self) -> None:
        """nvmlInit, device handles and names; any failure leaves a status instead of raising."""
        self._started = True
        if self._nvml is None:
            try:
                import pynvml
            except Exception:
                self._failed = NO_GPU
                return
            self._nvml = pynvml
        nv = self._nvml
        try:
            nv.nvmlInit()
        except Exception:  # LibraryNotFound, DriverNotLoaded, NoPermission, a broken libnvidia-ml...
            self._failed = NO_GPU
            return
        try:
            count = int(nv.nvmlDeviceGetCount())
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            names = []
            for h in handles:
                name = nv.nvmlDeviceGetName(h)
                names.append(name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name))
        except Exception as exc:
            self._failed = _error_text(exc)
            self._shutdown()
            return
        if not handles:
            self._failed = NO_GPU
            self._shutdown()
            return
        self._handles, self._names = handles, names
        self._mem_v2 = [hasattr(nv, "nvmlMemory_v2")] * len(handles)
        self._procs_fn = getattr(nv, "nvmlDeviceGetComputeRunningProcesses", None)

    def _memory(self, i: int) -> tuple[int, int, int | None]:
        """(used, total, reserved). v2's ``used`` matches nvidia-smi; v1 counts the reservation as used."""
        nv, h = self._nvml, self._handles[i]
        if self._mem_v2[i]:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                return int(m.used), int(m.total), int(m.reserved)
            except Exception:  # old driver: FunctionNotFound, NotSupported, ArgumentVersionMismatch
                m = nv.nvmlDeviceGetMemoryInfo(h)  # raises on its own if the device itself failed
                self._mem_v2[i] = False           # v1 works where v2 did not: stop asking
                return int(m.used), int(m.total), None
        m = nv.nvmlDeviceGetMemoryInfo(h)
        return int(m.used), int(m.total), None

    def _util(self, h: Any) -> float | None:
        try:
            return float(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        except Exception:  # NotSupported on MIG slices and some vGPUs
            return None

    def _processes(self, h: Any) -> list[Any] | None:
        """Compute processes on a device; None when NVML will not list them."""
        fn = self._procs_fn
        if fn is None:
            return None
        try:
            return list(fn(h))
        except Exception as exc:
            # pynvml's unversioned call needs the driver's _v3 symbol; older drivers only have _v2
            fallback = getattr(self._nvml, "nvmlDeviceGetComputeRunningProcesses_v2", None)
            mismatch = type(exc).__name__ in ("NVMLLibraryMismatchError", "NVMLError_FunctionNotFound")
            if not mismatch or fallback is None or fn is fallback:
                return None
            self._procs_fn = fallback
            try:
                return list(fallback(h))
            except Exception:
                return None

    def sample(self) -> GpuSample:
        """One reading of every GPU; the status says why there is none."""
        try:
            return self._sample()
        except Exception as exc:  # last guard: nothing from NVML reaches the UI as an exception
            return GpuSample((), _error_text(exc))

    def _sample(self) -> GpuSample:
        if not self._started:
            self._start()
        if self._failed is not None:
            return GpuSample((), self._failed)
        pid = self._pid
        devices: list[GpuDevice] = []
        errors: list[str] = []
        listed_any = False      # some device returned a process list
        others_listed = False   # ...holding processes, none of them ours
        found = False
        for i, h in enumerate(self._handles):
            try:
                used, total, reserved = self._memory(i)
            except Exception as exc:  # the GPU fell off the bus, the driver was reloaded...
                errors.append(_error_text(exc))
                continue
            util = self._util(h)
            process_mem: int | None = None
            if pid is not None:
                procs = self._processes(h)
                if procs is not None:
                    listed_any = True
                    mine = [p for p in procs if getattr(p, "pid", None) == pid]
                    others_listed = others_listed or len(procs) > len(mine)
                    if mine:
                        found = True
                        known = [int(p.usedGpuMemory) for p in mine if getattr(p, "usedGpuMemory", None) is not None]
                        process_mem = sum(known) if known else None
            devices.append(GpuDevice(i, self._names[i], used, total, reserved, util, process_mem))
        note = None
        if pid is not None and listed_any and not found:
            note = PID_NOT_LISTED_CONTAINER if others_listed else PID_NOT_LISTED
        return GpuSample(tuple(devices), errors[0] if errors else OK, note)

    def _shutdown(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass

    def close(self) -> None:
        """Release NVML; a later sample starts it again."""
        if self._started and self._failed is None:
            self._shutdown()
        self._started = False
        self._failed = None
        self._handles, self._names, self._mem_v2 = [], [], []


GiB = 1024 ** 3


class FakeGpuCollector:
    """Seeded GPU samples for tests and snapshots: configurable devices, a worker's share, or no GPU at all.

    ``util_supported`` False reports util as n/a, as a MIG slice does; ``worker_mem`` None leaves the worker out
    of the process list so the pid note shows.
    """

    def __init__(self, devices: Sequence[tuple[str, int]] = (("NVIDIA H100 80GB HBM3", 80 * GiB),), *,
                 seed: int = 0, no_gpu: bool = False, util_supported: bool = True,
                 worker_mem: int | None = 3 * GiB, worker_device: int = 0, pid: int | None = 4242) -> None:
        self.specs = tuple(devices)
        self.no_gpu = no_gpu
        self.util_supported = util_supported
        self.worker_mem = worker_mem
        self.worker_device = worker_device
        self._pid = pid
        self._rng = random.Random(seed)
        self.closed = False

    def watch(self, pid: int | None) -> None:
        self._pid = pid

    def close(self) -> None:
        self.closed = True

    def sample(self) -> GpuSample:
        if self.no_gpu or not self.specs:
            return GpuSample((), NO_GPU)
        rng = self._rng
        devices = []
        for i, (name, total) in enumerate(self.specs):
            reserved = min(total // 100, 512 * 1024 ** 2)
            mine = self.worker_mem if self._pid is not None and i == self.worker_device else None
            used = int(total * rng.uniform(0.01, 0.05)) + (mine or 0)
            util = float(round(rng.uniform(20.0, 95.0))) if self.util_supported else None
            devices.append(GpuDevice(i, name, min(used, total - reserved), total, reserved, util, mine))
        note = PID_NOT_LISTED_CONTAINER if self._pid is not None and self.worker_mem is None else None
        return GpuSample(tuple(devices), OK, note)


def make_gpu_collector() -> GpuCollector:
    """The collector for this host: NVML, which reports its own absence as a status."""
    return NvmlGpuCollector()
