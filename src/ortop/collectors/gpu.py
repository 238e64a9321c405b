"""GPU memory and utilisation through NVML, behind one wrapper at the hardware edge.

CUDA EP runs die of out-of-memory more often than of anything else, and the arena's growth is invisible from
inside ORT, so ortop shows each GPU's memory and the worker's share of it. NVML is optional (no driver, a Mac, a
MIG slice that refuses some queries): every NVML failure becomes None or a status line here, never an exception
in the UI, and NVML itself starts only on the first sample. A device NVML will not open (``NO_PERMISSION`` from
``nvmlDeviceGetHandleByIndex`` in a container that was given some GPUs only) is left out and named in
``GpuSample.skipped``; the others are still read.

Which NVML device a CUDA device number is: :mod:`ortop.collectors.cuda`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    uuid: str | None = None     # "GPU-…" (a MIG slice: "MIG-…"), as nvidia-smi -L and CUDA_VISIBLE_DEVICES spell it
    pci_bus_id: str | None = None  # "0000:07:00.0": domain:bus:device.function, lower-case hex
    slices: tuple[GpuDevice, ...] = ()  # a GPU in MIG mode: its MIG devices, which are what CUDA runs on
    mig_ids: tuple[int, int] | None = None  # a MIG slice: (GPU instance id, compute instance id)


@dataclass(frozen=True)
class GpuSample:
    devices: tuple[GpuDevice, ...]
    status: str                  # "ok" | NO_GPU | "NVML error: ..." (the first device that could not be read)
    pid_note: str | None = None  # why the worker's GPU memory is missing, when it is
    skipped: tuple[str, ...] = ()  # devices left out of this sample, each "GPU 1: NVML error: ..."


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


def _text(value: Any) -> str:
    """An NVML string: old nvidia-ml-py returns bytes."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def pci_bus_id(domain: int, bus: int, device: int, function: int = 0) -> str:
    """The one spelling of a PCI address used here: ``0000:07:00.0`` (NVML writes ``00000000:07:00.0``, CUDA's
    ``cudaDeviceGetPCIBusId`` ``0000:07:00.0``; both read the same)."""
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


def _pci(nv: Any, h: Any) -> str | None:
    """The device's PCI bus id from ``nvmlDeviceGetPciInfo`` (its domain, bus and device numbers), or None."""
    try:
        info = nv.nvmlDeviceGetPciInfo(h)
        return pci_bus_id(int(info.domain), int(info.bus), int(info.device))
    except Exception:  # NotSupported on some vGPUs; a fake without it
        return None


def _optional(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None when NVML does not answer (NotSupported, NoPermission, an old driver)."""
    try:
        return fn(*args)
    except Exception:
        return None


@dataclass
class _Handle:
    """One device NVML opened: a GPU, or a MIG slice of one (``slices`` empty then)."""

    index: int
    handle: Any
    name: str
    uuid: str | None
    pci: str | None
    mem_v2: bool
    slices: list[_Handle] = field(default_factory=list)
    mig_ids: tuple[int, int] | None = None


class NvmlGpuCollector:
    """The real collector over pynvml (or any object with the same functions, for tests).

    ``nvml`` defaults to the ``pynvml`` module from nvidia-ml-py, imported on the first sample so that a host
    without it (macOS) still imports ortop. Errors are per device: a GPU NVML will not open or read is left out of
    the sample and named in ``skipped``, the others are still reported.
    """

    def __init__(self, nvml: Any = None, pid: int | None = None) -> None:
        self._nvml = nvml
        self._pid = pid
        self._started = False
        self._failed: str | None = None   # status once init failed; NVML is not retried on every tick
        self._devs: list[_Handle] = []
        self._skipped: list[str] = []     # devices that could not be opened at start, "GPU 1: NVML error: ..."
        self._procs_fn: Any = None        # the running-processes query that works on this driver

    def watch(self, pid: int | None) -> None:
        self._pid = pid

    def _start(self) -> None:
        """nvmlInit, then each device's handle, name, UUID, PCI bus id and MIG slices; a device that fails is
        skipped and named, a failure of NVML itself leaves a status instead of raising."""
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
        except Exception as exc:
            self._failed = _error_text(exc)
            self._shutdown()
            return
        v2 = hasattr(nv, "nvmlMemory_v2")
        devs: list[_Handle] = []
        skipped: list[str] = []
        for i in range(count):
            try:  # NO_PERMISSION here for a GPU this process (container, cgroup) may not open
                h = nv.nvmlDeviceGetHandleByIndex(i)
                name = _text(nv.nvmlDeviceGetName(h))
            except Exception as exc:
                skipped.append(f"GPU {i}: {_error_text(exc)}")
                continue
            uuid = _optional(nv.nvmlDeviceGetUUID, h) if hasattr(nv, "nvmlDeviceGetUUID") else None
            dev = _Handle(i, h, name, _text(uuid) if uuid is not None else None, _pci(nv, h), v2)
            dev.slices = self._mig_slices(dev, v2)
            devs.append(dev)
        if not devs:
            self._failed = (f"{skipped[0].partition(': ')[2]} ({', '.join(s.partition(':')[0] for s in skipped)})"
                            if skipped else NO_GPU)
            self._shutdown()
            return
        self._devs, self._skipped = devs, skipped
        self._procs_fn = getattr(nv, "nvmlDeviceGetComputeRunningProcesses", None)

    def _mig_slices(self, gpu: _Handle, v2: bool) -> list[_Handle]:
        """A GPU in MIG mode: its MIG devices (NVML's slots hold none where no compute instance was made)."""
        nv = self._nvml
        if not hasattr(nv, "nvmlDeviceGetMigMode"):
            return []
        mode = _optional(nv.nvmlDeviceGetMigMode, gpu.handle)  # NotSupported before Ampere
        if not mode or int(mode[0]) != int(getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1)):
            return []
        out: list[_Handle] = []
        for j in range(int(_optional(nv.nvmlDeviceGetMaxMigDeviceCount, gpu.handle) or 0)):
            h = _optional(nv.nvmlDeviceGetMigDeviceHandleByIndex, gpu.handle, j)  # NotFound: an empty slot
            if h is None:
                continue
            name = _optional(nv.nvmlDeviceGetName, h)
            uuid = _optional(nv.nvmlDeviceGetUUID, h)
            gi = _optional(nv.nvmlDeviceGetGpuInstanceId, h)
            ci = _optional(nv.nvmlDeviceGetComputeInstanceId, h)
            out.append(_Handle(j, h, _text(name) if name is not None else f"{gpu.name} MIG {j}",
                               _text(uuid) if uuid is not None else None, gpu.pci, v2,
                               mig_ids=(int(gi), int(ci)) if gi is not None and ci is not None else None))
        return out

    def _memory(self, dev: _Handle) -> tuple[int, int, int | None]:
        """(used, total, reserved). v2's ``used`` matches nvidia-smi; v1 counts the reservation as used."""
        nv, h = self._nvml, dev.handle
        if dev.mem_v2:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                return int(m.used), int(m.total), int(m.reserved)
            except Exception:  # old driver: FunctionNotFound, NotSupported, ArgumentVersionMismatch
                m = nv.nvmlDeviceGetMemoryInfo(h)  # raises on its own if the device itself failed
                dev.mem_v2 = False                 # v1 works where v2 did not: stop asking
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

    def _read(self, dev: _Handle, watch: _Watch, skipped: list[str]) -> GpuDevice:
        """One device's figures (raises when its memory cannot be read: the device is then left out). A MIG slice
        that cannot be read (destroyed since the start) is left out of its GPU's and named in ``skipped``."""
        used, total, reserved = self._memory(dev)
        util = self._util(dev.handle) if dev.mig_ids is None else None  # a MIG slice has no utilisation
        process_mem = watch.memory(self._processes(dev.handle)) if watch.pid is not None else None
        slices = []
        for s in dev.slices:
            try:
                slices.append(self._read(s, watch, skipped))
            except Exception as exc:
                skipped.append(f"GPU {dev.index} MIG {s.index}: {_error_text(exc)}")
        return GpuDevice(dev.index, dev.name, used, total, reserved, util, process_mem, dev.uuid, dev.pci,
                         tuple(slices), dev.mig_ids)

    def _sample(self) -> GpuSample:
        if not self._started:
            self._start()
        if self._failed is not None:
            return GpuSample((), self._failed)
        devices: list[GpuDevice] = []
        skipped = list(self._skipped)
        watch = _Watch(self._pid)
        for dev in self._devs:
            try:
                devices.append(self._read(dev, watch, skipped))
            except Exception as exc:  # the GPU fell off the bus, the driver was reloaded...
                skipped.append(f"GPU {dev.index}: {_error_text(exc)}")
        skipped.sort(key=_gpu_number)
        status = skipped[0].partition(": ")[2] if skipped else OK
        return GpuSample(tuple(devices), status, watch.note(), tuple(skipped))

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
        self._devs, self._skipped = [], []


def _gpu_number(text: str) -> int:
    """The NVML index a ``GPU 3: ...`` (or ``GPU 3 MIG 1: ...``) line names, for listing skipped devices in order."""
    number = text.partition(":")[0].split()[1:2]
    return int(number[0]) if number and number[0].isdigit() else -1


class _Watch:
    """The watched pid's GPU memory across one sample's devices, and why it is missing when it is."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.listed_any = False      # some device returned a process list
        self.others_listed = False   # ...holding processes, none of them ours
        self.found = False

    def memory(self, procs: list[Any] | None) -> int | None:
        """The pid's used memory on one device, from its process list (None: not listed, or not reported)."""
        if procs is None:
            return None
        self.listed_any = True
        mine = [p for p in procs if getattr(p, "pid", None) == self.pid]
        self.others_listed = self.others_listed or len(procs) > len(mine)
        if not mine:
            return None
        self.found = True
        known = [int(p.usedGpuMemory) for p in mine if getattr(p, "usedGpuMemory", None) is not None]
        return sum(known) if known else None

    def note(self) -> str | None:
        if self.pid is None or not self.listed_any or self.found:
            return None
        return PID_NOT_LISTED_CONTAINER if self.others_listed else PID_NOT_LISTED


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
