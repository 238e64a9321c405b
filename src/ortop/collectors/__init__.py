"""What ortop reads from the machine besides the worker's own samples: CPU cores, threads and GPUs.

Each collector is a small Protocol with a real implementation at the hardware edge and a seeded fake beside it,
so the screens can be tested and snapshotted with fixed data on any host, GPU or not.
"""

from __future__ import annotations

from ortop.collectors.cpu import (
    CpuCollector,
    CpuSample,
    FakeCpuCollector,
    PsutilCpuCollector,
    ThreadSample,
    numa_nodes,
    physical_cores,
)
from ortop.collectors.gpu import (
    FakeGpuCollector,
    GpuCollector,
    GpuDevice,
    GpuSample,
    NvmlGpuCollector,
    make_gpu_collector,
)

__all__ = [
    "CpuCollector",
    "CpuSample",
    "FakeCpuCollector",
    "FakeGpuCollector",
    "GpuCollector",
    "GpuDevice",
    "GpuSample",
    "NvmlGpuCollector",
    "PsutilCpuCollector",
    "ThreadSample",
    "make_gpu_collector",
    "numa_nodes",
    "physical_cores",
]
