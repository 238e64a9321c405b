"""The GPU panel as plain strings."""

from __future__ import annotations

from ortop.collectors.gpu import NO_GPU, GpuDevice, GpuSample
from ortop.tui.panels import gpu


def lines(text) -> list[str]:
    return text.plain.split("\n")


def test_gpu_panel_no_gpu_is_a_state_not_an_error() -> None:
    text = gpu.gpu_panel(GpuSample((), NO_GPU), {}, 40, 3)
    assert text.plain.startswith("no NVIDIA GPU / NVML not available")
    assert "red" not in " ".join(str(s.style) for s in text.spans)


def test_gpu_panel_memory_worker_and_util() -> None:
    dev = GpuDevice(0, "NVIDIA H100", 6 * 2 ** 30, 80 * 2 ** 30, None, 45.0, 3 * 2 ** 30)
    text = gpu.gpu_panel(GpuSample((dev,), "ok"), {0: ([1.0, 2.0, 3.0], [10.0, 50.0, 45.0])}, 60, 2)
    out = lines(text)
    assert out[0].startswith("#0 NVIDIA H100") and "util  45%" in out[0]
    assert "6.0 GiB/80.0 GiB" in out[1] and "worker 3.0 GiB" in out[1]
    assert gpu.gpu_rows(GpuSample((dev,), "ok")) == 2
