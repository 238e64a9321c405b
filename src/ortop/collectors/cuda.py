"""CUDA's device numbers on this host, read against NVML's devices (:mod:`ortop.collectors.gpu`).

NVML numbers GPUs in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``; CUDA numbers the devices a process may
see, in the order that variable lists them (indices or ``GPU-``/``MIG-`` UUIDs), and under MIG it runs on a slice.
:func:`cuda_device` maps a CUDA device number to the NVML device (or slice) it is, through UUIDs and PCI bus ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortop.collectors.gpu import GpuDevice


@dataclass(frozen=True)
class CudaDevice:
    """What a CUDA device number is on this host: the NVML device (a GPU, or a MIG slice of ``gpu``), or None with
    ``note`` saying why it cannot be told."""

    device: GpuDevice | None
    gpu: GpuDevice | None = None     # the physical GPU (the slice's parent under MIG)
    note: str = ""


def _visible_default(gpus: Sequence[GpuDevice], order: str | None) -> list[tuple[GpuDevice, GpuDevice]]:
    """(device, its GPU) in the order CUDA numbers them with no ``CUDA_VISIBLE_DEVICES``: GPUs by PCI bus id with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (NVML's own order is PCI order too), and a GPU in MIG mode stands for its
    slices."""
    ordered = list(gpus)
    if (order or "").strip().upper() == "PCI_BUS_ID" and all(g.pci_bus_id for g in ordered):
        ordered.sort(key=lambda g: g.pci_bus_id or "")
    out: list[tuple[GpuDevice, GpuDevice]] = []
    for g in ordered:
        out += [(s, g) for s in g.slices] if g.slices else [(g, g)]
    return out


def _by_uuid(token: str, gpus: Sequence[GpuDevice]) -> list[tuple[GpuDevice, GpuDevice]] | None:
    """The devices a ``GPU-…`` or ``MIG-…`` entry names: a full UUID or a prefix that names one device only (as
    CUDA allows), or the older ``MIG-GPU-<uuid>/<gi>/<ci>`` form; None when it names none, or several."""
    t = token.strip()
    if t.upper().startswith("MIG-GPU-") and t.count("/") == 2:
        parent, gi, ci = t[4:].split("/")
        for g in gpus:
            if g.uuid and g.uuid.lower() == parent.lower():
                hit = [(s, g) for s in g.slices if s.mig_ids == (int(gi), int(ci))] if gi.isdigit() and \
                    ci.isdigit() else []
                return hit or None
        return None
    low = t.lower()
    found: list[tuple[GpuDevice, GpuDevice]] = []
    for g in gpus:
        if g.uuid and g.uuid.lower().startswith(low):
            found.append((g, g))
        found += [(s, g) for s in g.slices if s.uuid and s.uuid.lower().startswith(low)]
    if len(found) != 1:
        return None
    dev, gpu = found[0]
    if dev is gpu and gpu.slices:  # a GPU in MIG mode named by its own UUID: CUDA runs on its slices
        return [(s, gpu) for s in gpu.slices]
    return found


def cuda_visible(gpus: Sequence[GpuDevice], visible: str | None, order: str | None = None
                 ) -> list[tuple[GpuDevice, GpuDevice]]:
    """(device, its GPU) for each CUDA device number, 0 first, as a process with this ``CUDA_VISIBLE_DEVICES``
    (None: unset) and ``CUDA_DEVICE_ORDER`` numbers them.

    CUDA's rules (the CUDA C Programming Guide, "CUDA Environment Variables"): the variable is a comma-separated
    list of indices (into CUDA's own numbering, not NVML's) or UUIDs (``GPU-…``, ``MIG-…``, or a prefix naming one
    device); the devices are numbered in the list's order, and an entry that names no device (``-1``, an index
    past the last GPU, an unknown UUID) ends the list: only the entries before it are visible. A process
    enumerates one MIG slice only.
    """
    default = _visible_default(gpus, order)
    if visible is None:
        out = default
    else:
        out = []
        for token in visible.split(","):
            t = token.strip()
            if t.lstrip("-").isdigit():
                n = int(t)
                picked = [default[n]] if 0 <= n < len(default) else None
            elif t.upper().startswith(("GPU-", "MIG-")):
                picked = _by_uuid(t, gpus)
            else:
                picked = None
            if picked is None or any(any(d is seen for seen, _ in out) for d, _ in picked):
                break
            out += picked
    mig = [i for i, (d, g) in enumerate(out) if d is not g]
    return [p for i, p in enumerate(out) if i not in mig[1:]]


def cuda_device(gpus: Sequence[GpuDevice], device_id: int, env: Mapping[str, str]) -> CudaDevice:
    """The NVML device (or MIG slice) that CUDA device ``device_id`` is for a process with environment ``env``."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    numbered = cuda_visible(gpus, visible, order)
    if 0 <= device_id < len(numbered):
        dev, gpu = numbered[device_id]
        note = ""
        if visible is None and (order or "").strip().upper() != "PCI_BUS_ID" and len({g.name for g in gpus}) > 1:
            note = ("CUDA_DEVICE_ORDER is FASTEST_FIRST (CUDA's default) and the GPUs differ: CUDA may number "
                    "them otherwise than by PCI bus id; set CUDA_DEVICE_ORDER=PCI_BUS_ID to be sure")
        return CudaDevice(dev, gpu, note)
    seen = f"CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "no CUDA_VISIBLE_DEVICES"
    return CudaDevice(None, None, f"{len(numbered)} CUDA device(s) visible with {seen}")
