"""ONNX Runtime's CUDA rules as ortop applies them on a host without a GPU: what a profile may ask of the CUDA provider
(option names and values as ORT 1.31's parsers take them, one caller per graph-enabled session), what the tuner may
propose, what the doctor says about nodes left on CPU and about which GPU a CUDA device number is, how the GPU
collector carries on past a device NVML will not open, and the headless GPU figures following a restarted worker.

NVML is faked (no GPU here) with pynvml's own exception classes; everything else is real: profiles through the
command line, sessions in real workers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import psutil
import pynvml
import pytest

from ortop.cli.profiles import profiles_main
from ortop.collectors.cuda import cuda_device, cuda_visible
from ortop.collectors.gpu import GpuSample, NvmlGpuCollector
from ortop.collectors.host import HostFacts
from ortop.config import knobs
from ortop.config import profile as pm
from ortop.config.profile import Profile, ProfileError
from ortop.config.validate import CUDA_PROCESS_POINTERS, ORT_BOOLS, entry_error, option_int
from ortop.doctor.static import Context, run_static
from ortop.engine.answers.space import ModelFacts, Space
from ortop.engine.live import headless
from ortop.model import load_model
from tests.models import make_matmul_model

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

SPELLINGS = ("cuda", "CUDA", "CUDAExecutionProvider", "cudaexecutionprovider")
GiB = 1 << 30


def graph_profile(provider: str = "cuda", **workload: Any) -> str:
    lines = ["[provider]", f'name = "{provider}"', "io_binding = true", "[provider.options]",
             "enable_cuda_graph = true"]
    if workload:
        lines.append("[workload]")
        lines += [f"{k} = {v}" for k, v in workload.items()]
    return "\n".join(lines) + "\n"


def options_profile(provider: str, **options: str) -> str:
    return "\n".join(["[provider]", f'name = "{provider}"', "[provider.options]",
                      *(f"{k} = {v}" for k, v in options.items())]) + "\n"


def refused(text: str) -> list[str]:
    """The messages validation gives for a profile's TOML (empty: accepted)."""
    try:
        pm.loads(text)
    except ProfileError as exc:
        return [str(e) for e in getattr(exc, "errors", [exc])]
    return []


# ---- one caller per graph-enabled session ------------------------------------------------------------------------

@pytest.mark.parametrize("provider", SPELLINGS)
def test_cuda_graph_with_concurrent_callers_is_refused(provider: str) -> None:
    """ORT's CUDA provider documentation: Run() may not be invoked on one graph-enabled session from several
    threads. Replicas are separate sessions, one graph each: allowed."""
    [msg] = refused(graph_profile(provider, concurrency=2))
    assert "workload.concurrency = 2" in msg and "enable_cuda_graph" in msg
    assert refused(graph_profile(provider, concurrency=1)) == []
    assert refused(graph_profile(provider, replicas=3)) == []
    assert refused(graph_profile(provider, replicas=2, concurrency=1)) == []
    no_graph = graph_profile(provider, concurrency=4).replace("enable_cuda_graph = true", "enable_cuda_graph = false")
    assert refused(no_graph) == []


def test_profiles_validate_names_the_concurrency_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "graph.toml"
    path.write_text(graph_profile(concurrency=2))
    assert profiles_main(["validate", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"FAIL {path}"
    [line] = out[1:]
    assert line.strip().startswith(f"{path}:7:") and "workload.concurrency = 2" in line  # the concurrency line


@pytest.mark.slow
def test_run_with_a_concurrent_cuda_graph_profile_exits_2_in_one_line(tmp_path: Path) -> None:
    model = make_matmul_model(tmp_path / "m.onnx", n=8, batch=1)
    profile = tmp_path / "graph.toml"
    profile.write_text(graph_profile("CUDAExecutionProvider", concurrency=2))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"),
           "XDG_CONFIG_HOME": str(tmp_path / "k")}
    r = subprocess.run([sys.executable, "-m", "ortop.cli", model, "--profile", str(profile), "--headless",
                        "--duration", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ortop: error: ") and "Traceback" not in r.stderr
    assert "concurrency = 2" in lines[0]
    # the flag goes through the same rule
    profile.write_text(graph_profile())
    r = subprocess.run([sys.executable, "-m", "ortop.cli", model, "--profile", str(profile), "--concurrency", "3",
                        "--headless", "--duration", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "concurrency = 3" in r.stderr


def _host(cores: int = 4) -> HostFacts:
    return HostFacts(logical_cpus=cores, usable_cpus=tuple(range(cores)), physical_cores=cores,
                     siblings=tuple((c,) for c in range(cores)), numa_nodes=MappingProxyType({0: tuple(range(cores))}),
                     cpu_quota=None, cpu_model="Fake CPU")


def test_the_tuner_never_proposes_a_cuda_graph_to_concurrent_callers() -> None:
    facts = ModelFacts(ops=frozenset({"Conv", "MatMul"}))
    cuda = pm.merge(Profile(), **{"provider.name": "CUDAExecutionProvider"})
    assert "cuda_graph" in Space(cuda, _host(), facts).dimensions  # one caller: worth trying
    busy = pm.merge(cuda, **{"workload.concurrency": 4})
    assert "cuda_graph" not in Space(busy, _host(), facts).dimensions  # every dimension: the grid is too big to list
    space = Space(busy, _host(), facts, ["cuda_graph", "io_binding", "conv_algo"])
    assert "cuda_graph" not in space.dimensions
    assert not any(c.profile.cuda_graph() for c in space.grid())
    [why] = [n for n in Space(busy, _host(), facts, ["cuda_graph"]).pruned if n.startswith("cuda_graph")]
    assert "concurrency = 4" in why
    # replicas keep one caller per session: a graph is still a candidate, and it validates
    replicas = pm.merge(cuda, **{"workload.replicas": 2})
    graphs = [c.profile for c in Space(replicas, _host(), facts, ["cuda_graph"]).grid() if c.profile.cuda_graph()]
    assert graphs
    for p in graphs:
        pm.validate(p)


# ---- option names and values, as ORT 1.31's CUDA provider parses them ----------------------------------------------

def test_the_1_31_options_are_accepted_whatever_the_spelling() -> None:
    for provider in SPELLINGS:
        assert refused(options_profile(provider, sdpa_kernel="16", fuse_conv_bias="true", enable_cudnn="false")) == []
        assert refused(options_profile(provider, sdpa_kernel='"2"', fuse_conv_bias='"1"')) == []
        [msg] = refused(options_profile(provider, sdpa_kernal="2"))
        assert "unknown CUDA provider option 'sdpa_kernal'" in msg and "sdpa_kernel" in msg


@pytest.mark.slow
def test_declared_cuda_options_are_the_names_the_installed_provider_parses() -> None:
    """Every CUDA option ortop declares (and every pointer option it refuses by name) is a string in the installed
    libonnxruntime_providers_cuda.so, where CUDAExecutionProviderInfo::FromProviderOptions names them."""
    import onnxruntime

    lib = Path(onnxruntime.__file__).parent / "capi" / "libonnxruntime_providers_cuda.so"
    if not lib.exists():
        pytest.skip("this onnxruntime build has no CUDA provider library")
    data = lib.read_bytes()
    declared = [k.name for k in knobs.entries("provider.options", "cuda")]
    assert {"sdpa_kernel", "fuse_conv_bias", "enable_cudnn", "use_tf32", "enable_cuda_graph"} <= set(declared)
    missing = [n for n in [*declared, *CUDA_PROCESS_POINTERS] if n.encode() + b"\0" not in data]
    assert missing == []
    assert b"Unknown provider option: \"" in data  # ProviderOptionsParser refuses what it does not know


BOOL_VALUES_ORT_TAKES = ["true", "false", "1", "0", '"1"', '"0"', '"true"', '"false"', '"True"', '"False"']
BOOL_VALUES_ORT_REFUSES = ['"yes"', '"no"', '"on"', '"TRUE"', '" true"', '"1.0"', "2", '"2"', '""']


@pytest.mark.parametrize("provider", SPELLINGS)
@pytest.mark.parametrize("value", BOOL_VALUES_ORT_TAKES + BOOL_VALUES_ORT_REFUSES)
def test_bool_options_take_what_orts_parser_takes(provider: str, value: str) -> None:
    """parse_string.h's TryParseStringWithClassicLocale(bool&): exactly "0", "1", "true", "false", "True", "False"
    (ortop writes TOML true/false as "1"/"0")."""
    found = refused(graph_profile(provider).replace("enable_cuda_graph = true", f"enable_cuda_graph = {value}"))
    if value in BOOL_VALUES_ORT_TAKES:
        assert found == []
    else:
        [msg] = found
        assert msg.endswith(f"(ORT's CUDA provider takes only {', '.join(ORT_BOOLS)})")
        assert "enable_cuda_graph must be true or false" in msg


def test_profiles_validate_refuses_yes_for_either_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for provider in ("cuda", "CUDAExecutionProvider"):
        path = tmp_path / f"{provider}.toml"
        path.write_text(graph_profile(provider).replace("enable_cuda_graph = true", 'enable_cuda_graph = "yes"'))
        assert profiles_main(["validate", str(path)]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"FAIL {path}" and "enable_cuda_graph must be true or false, got 'yes'" in out[1]


@pytest.mark.parametrize(("option", "value", "ok"), [
    ("sdpa_kernel", "16", True), ("sdpa_kernel", '"16"', True), ("sdpa_kernel", '"0x10"', False),  # signed int
    ("sdpa_kernel", '" 16"', False), ("sdpa_kernel", '"+16"', False), ("sdpa_kernel", "2.5", False),
    ("sdpa_kernel", "true", False), ("sdpa_kernel", str(2**31), False),
    ("gpu_mem_limit", str(2 * GiB), True), ("gpu_mem_limit", '"0x80000000"', True),  # size_t: hex too
    ("gpu_mem_limit", "-1", False), ("gpu_mem_limit", '"2GB"', False),
    ("device_id", "0", True), ("device_id", str(2**15 - 1), True), ("device_id", str(2**15), False),  # int16_t
    ("device_id", "-1", False),
    ("cudnn_conv_algo_search", '"HEURISTIC"', True), ("cudnn_conv_algo_search", '"heuristic"', False),
    ("arena_extend_strategy", '"kSameAsRequested"', True), ("arena_extend_strategy", '"kSameasRequested"', False),
])
def test_number_and_choice_options_take_what_orts_parsers_take(option: str, value: str, ok: bool) -> None:
    """Integers through std::from_chars over the whole string (a '-' for signed types only, "0x" for unsigned ones,
    within the C type ORT parses into); enums by their exact names (EnumNameMapping)."""
    for provider in ("cuda", "CUDAExecutionProvider"):
        found = refused(options_profile(provider, **{option: value}))
        assert (found == []) is ok, found


def test_option_values_as_the_doctor_reads_them() -> None:
    assert option_int("0x40000000") == GiB and option_int("-3") == -3 and option_int(7) == 7 and option_int(8.0) == 8
    for bad in (True, " 5", "5 ", "+5", "1e3", "0x", 2.5):
        with pytest.raises(ValueError):
            option_int(bad)
    knob = knobs.get("provider.options.fuse_conv_bias")
    assert entry_error(knob, True) is None
    assert entry_error(knob, [1]) == "fuse_conv_bias must be a single value, got [1]"


@pytest.mark.parametrize("option", CUDA_PROCESS_POINTERS)
def test_process_pointer_options_are_refused_by_name(option: str) -> None:
    [msg] = refused(options_profile("CUDAExecutionProvider", **{option: "1"}))
    assert f"{option} holds a pointer into a running process" in msg


def test_other_providers_options_pass_verbatim() -> None:
    assert refused(options_profile("tensorrt", trt_fp16_enable='"yes"')) == []


# ---- the doctor: nodes left on CPU under a CUDA graph, by ORT's own rule ---------------------------------------

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def _node(name: str, op: str, ep: str) -> dict[str, str]:
    return {"name": name, "op_type": op, "domain": "", "ep": ep}


def cuda_graph_findings(tmp_path: Path, placement: tuple[dict[str, str], ...] | None = None,
                        session_error: str | None = None) -> list[Any]:
    model = make_matmul_model(tmp_path / "m.onnx", n=8, batch=1)
    profile = pm.loads(graph_profile())
    ctx = Context(model=load_model(model), profile=profile, host=_host(),
                  providers_active=None if session_error else (CUDA, CPU), placement=placement,
                  session_error=session_error)
    return [f for f in run_static(ctx) if f.check == "cuda-graph"]


def test_shape_nodes_on_cpu_do_not_rule_out_a_cuda_graph(tmp_path: Path) -> None:
    """InferenceSession::Initialize allows nodes on CPU with graph capture as long as no Memcpy node copies between
    CPU and CUDA (they are the shape computations it forces there) and warns (HasShapeSubgraphNodes)."""
    placement = (_node("shape", "Shape", CPU), _node("gather", "Gather", CPU), _node("concat", "Concat", CPU),
                 _node("mm", "MatMul", CUDA), _node("reshape", "Reshape", CUDA))
    [f] = cuda_graph_findings(tmp_path, placement)
    assert f.severity == "info" and f.profile_patch is None
    assert f.message.startswith("3 shape-computing nodes stay on CPU (Concat, Gather, Shape)")
    assert f.evidence["memcpy_nodes"] == 0 and f.evidence["nodes_on_cuda"] == 2
    assert cuda_graph_findings(tmp_path, placement[3:]) == []  # every node on CUDA: nothing to say


@pytest.mark.parametrize(("placement", "why"), [
    ((_node("mm", "MatMul", CPU), _node("copy", "MemcpyToHost", CUDA), _node("relu", "Relu", CUDA)),
     "1 Memcpy nodes copy tensors between CPU and CUDA"),
    ((_node("mm", "MatMul", CUDA), _node("trt", "TRTKernel_graph_0", "TensorrtExecutionProvider")),
     "1 run on TensorrtExecutionProvider"),
    ((_node("shape", "Shape", CPU), _node("mm", "MatMul", CPU)), "no node runs on CUDA"),
])
def test_compute_nodes_off_cuda_rule_out_a_cuda_graph(tmp_path: Path, placement: Any, why: str) -> None:
    [f] = cuda_graph_findings(tmp_path, placement)
    assert f.severity == "error" and why in f.message and f.message.endswith("ORT refuses the session")
    assert f.profile_patch == {"provider.options.enable_cuda_graph": False}


def test_orts_refusal_of_the_graph_is_explained(tmp_path: Path) -> None:
    error = ("[ONNXRuntimeError] : 1 : FAIL : This session cannot use the graph capture feature as requested by the "
             "user  as all compute graph nodes have not been partitioned to the CUDAExecutionProvider")
    found = cuda_graph_findings(tmp_path, session_error=error)
    [f] = [f for f in found if f.severity == "error"]
    assert "compute nodes run off CUDA" in f.message and f.evidence == {"error": error}


# ---- NVML: per-device errors, and CUDA's numbering mapped through UUIDs ---------------------------------------------

def _nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml hands back its subclass for the code (NVMLError_NoPermission, ...)


class FakeNvml:
    """A pynvml-shaped host: GPUs by NVML index (PCI bus order), each with a UUID, a PCI address and optionally MIG
    slices; a device listed in ``no_permission`` refuses nvmlDeviceGetHandleByIndex as NVML does for a GPU this
    process may not open."""

    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

    def __init__(self, gpus: list[dict[str, Any]], no_permission: tuple[int, ...] = ()) -> None:
        self.gpus = gpus
        self.no_permission = no_permission
        self.nvmlMemory_v2 = pynvml.nvmlMemory_v2
        self.opened: list[int] = []

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        if i in self.no_permission:
            raise _nvml_error(pynvml.NVML_ERROR_NO_PERMISSION)
        self.opened.append(i)
        return ("gpu", i)

    def _dev(self, h: Any) -> dict[str, Any]:
        gpu = self.gpus[h[1]]
        return gpu if h[0] == "gpu" else gpu["mig"][h[2]]

    def nvmlDeviceGetName(self, h: Any) -> str:
        return self._dev(h)["name"]

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return self._dev(h)["uuid"]

    def nvmlDeviceGetPciInfo(self, h: Any) -> SimpleNamespace:
        if h[0] != "gpu":
            raise _nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        domain, bus = self.gpus[h[1]]["pci"]
        return SimpleNamespace(domain=domain, bus=bus, device=0, busId=f"{domain:08X}:{bus:02X}:00.0".encode())

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> SimpleNamespace:
        d = self._dev(h)
        if d.get("gone"):
            raise _nvml_error(pynvml.NVML_ERROR_NOT_FOUND)  # a MIG slice destroyed since its handle was taken
        if version and h[0] != "gpu":
            raise _nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(total=d["total"], used=d.get("used", GiB), reserved=0, free=d["total"] - GiB)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> SimpleNamespace:
        if h[0] != "gpu" or self._dev(h).get("mig"):
            raise _nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)  # MIG: no utilisation
        return SimpleNamespace(gpu=30, memory=5)

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev(h).get("procs", [])]

    def nvmlDeviceGetMigMode(self, h: Any) -> list[int]:
        if "mig" not in self.gpus[h[1]]:
            raise _nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Any) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, j: int) -> Any:
        if j >= len(self.gpus[h[1]]["mig"]):
            raise _nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", h[1], j)

    def nvmlDeviceGetGpuInstanceId(self, h: Any) -> int:
        return self._dev(h)["gi"]

    def nvmlDeviceGetComputeInstanceId(self, h: Any) -> int:
        return 0


def three_gpus() -> list[dict[str, Any]]:
    """NVML index 0: an A100 at PCI 07; 1: an H100 at 0b; 2: an A100 in MIG mode at 48 with two slices."""
    return [
        {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-aaaa1111-0000-0000-0000-000000000000", "pci": (0, 0x07),
         "total": 40 * GiB},
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb2222-0000-0000-0000-000000000000", "pci": (0, 0x0B),
         "total": 80 * GiB, "procs": [(4242, 3 * GiB)]},
        {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-cccc3333-0000-0000-0000-000000000000", "pci": (0, 0x48),
         "total": 80 * GiB, "mig": [
             {"name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "uuid": "MIG-dddd4444-0000-0000-0000-000000000000",
              "total": 40 * GiB, "gi": 1},
             {"name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "uuid": "MIG-eeee5555-0000-0000-0000-000000000000",
              "total": 10 * GiB, "gi": 2}]},
    ]


def test_a_device_nvml_will_not_open_is_skipped_and_named() -> None:
    nv = FakeNvml(three_gpus(), no_permission=(1,))
    c = NvmlGpuCollector(nv, pid=4242)
    s = c.sample()
    assert [d.index for d in s.devices] == [0, 2] and nv.opened == [0, 2]
    assert s.skipped == ("GPU 1: NVML error: Insufficient Permissions",)
    assert s.status == "NVML error: Insufficient Permissions"
    a100, mig = s.devices
    assert (a100.uuid, a100.pci_bus_id, a100.mem_total, a100.util_percent) == (
        "GPU-aaaa1111-0000-0000-0000-000000000000", "0000:07:00.0", 40 * GiB, 30.0)
    assert [(x.uuid, x.mem_total, x.mig_ids, x.pci_bus_id) for x in mig.slices] == [
        ("MIG-dddd4444-0000-0000-0000-000000000000", 40 * GiB, (1, 0), "0000:48:00.0"),
        ("MIG-eeee5555-0000-0000-0000-000000000000", 10 * GiB, (2, 0), "0000:48:00.0")]
    assert mig.util_percent is None and a100.slices == ()
    nv.gpus[2]["mig"][1]["gone"] = True
    s = c.sample()
    assert [x.uuid[:8] for x in s.devices[1].slices] == ["MIG-dddd"]
    assert s.skipped == ("GPU 1: NVML error: Insufficient Permissions", "GPU 2 MIG 1: NVML error: Not Found")
    every = NvmlGpuCollector(FakeNvml(three_gpus(), no_permission=(0, 1, 2))).sample()
    assert every.devices == () and every.status == "NVML error: Insufficient Permissions (GPU 0, GPU 1, GPU 2)"


def test_the_headless_summary_names_a_skipped_gpu() -> None:
    nv = FakeNvml(three_gpus(), no_permission=(1,))
    warnings: list[str] = []
    rows = headless.gpu_summary(NvmlGpuCollector(nv), 4242, warnings)
    assert [r["index"] for r in rows] == [0, 2]
    assert warnings == ["GPU figures leave out GPU 1: NVML error: Insufficient Permissions"]


def devices(no_permission: tuple[int, ...] = ()) -> tuple[Any, ...]:
    return NvmlGpuCollector(FakeNvml(three_gpus(), no_permission)).sample().devices


@pytest.mark.parametrize(("visible", "order", "expected"), [
    (None, None, ["GPU-aaaa", "GPU-bbbb", "MIG-dddd"]),  # a process enumerates one MIG slice
    ("1,0", None, ["GPU-bbbb", "GPU-aaaa"]),
    ("GPU-bbbb2222-0000-0000-0000-000000000000,GPU-aaaa", None, ["GPU-bbbb", "GPU-aaaa"]),  # full and prefix
    ("GPU-bbbb,-1,0", None, ["GPU-bbbb"]),  # an invalid entry ends the list
    ("GPU-ffff,0", None, []),
    ("GPU-", None, []),  # a prefix naming several GPUs names none
    ("5,0", None, []),
    ("MIG-eeee5555-0000-0000-0000-000000000000", None, ["MIG-eeee"]),
    ("MIG-GPU-cccc3333-0000-0000-0000-000000000000/2/0", None, ["MIG-eeee"]),  # the older MIG form
    ("GPU-cccc", None, ["MIG-dddd"]),  # a GPU in MIG mode runs on its slice
    ("0,0", None, ["GPU-aaaa"]),
    ("", None, []),
])
def test_cuda_numbering_follows_cuda_visible_devices(visible: str | None, order: str | None,
                                                     expected: list[str]) -> None:
    got = [d.uuid[:8] for d, _ in cuda_visible(devices(), visible, order)]
    assert got == expected


def test_pci_bus_order_when_asked() -> None:
    gpus = list(devices())
    shuffled = [gpus[2], gpus[0], gpus[1]]  # a listing not in PCI order
    assert [d.uuid[:8] for d, _ in cuda_visible(shuffled, None, "PCI_BUS_ID")] == ["GPU-aaaa", "GPU-bbbb", "MIG-dddd"]
    found = cuda_device(gpus, 0, {})
    assert found.note.startswith("CUDA_DEVICE_ORDER is FASTEST_FIRST")  # the GPUs differ: CUDA may order them so
    assert cuda_device(gpus, 0, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).note == ""


def doctor_gpu(profile_text: str, gpus: tuple[Any, ...], environ: dict[str, str], tmp_path: Path) -> list[Any]:
    model = make_matmul_model(tmp_path / "m.onnx", n=8, batch=1)
    ctx = Context(model=load_model(model), profile=pm.loads(profile_text), host=_host(), gpus=gpus, environ=environ)
    return [f for f in run_static(ctx) if f.check == "gpu-memory"]


def test_the_doctor_judges_the_gpu_cuda_runs_on(tmp_path: Path) -> None:
    """gpu_mem_limit = 60 GiB on CUDA device 0: with CUDA_VISIBLE_DEVICES naming the H100 (NVML index 1) that is
    within its 80 GiB; NVML's device 0 (a 40 GiB A100) would call it too much."""
    limit = options_profile("cuda", gpu_mem_limit=str(60 * GiB))
    gpus = devices()
    assert doctor_gpu(limit, gpus, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, tmp_path) == []
    assert doctor_gpu(limit, gpus, {"CUDA_VISIBLE_DEVICES": "1"}, tmp_path) == []
    [f] = doctor_gpu(limit, gpus, {}, tmp_path)  # no CUDA_VISIBLE_DEVICES: CUDA 0 is the 40 GiB A100
    assert f.severity == "warning" and "more than the GPU has" in f.message and f.evidence["nvml_index"] == 0
    # no limit: the arena note names the GPU CUDA runs on
    [f] = doctor_gpu(options_profile("cuda"), gpus, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, tmp_path)
    assert f.severity == "info" and f.evidence["gpu"] == "NVIDIA H100 80GB HBM3"
    assert f.evidence["nvml_index"] == 1 and f.evidence["uuid"].startswith("GPU-bbbb")
    # the profile's own [env] wins over ortop's environment, as it does in the worker
    in_profile = options_profile("cuda") + '[env]\nCUDA_VISIBLE_DEVICES = "1"\n'
    [f] = doctor_gpu(in_profile, gpus, {"CUDA_VISIBLE_DEVICES": "0"}, tmp_path)
    assert f.evidence["gpu"] == "NVIDIA H100 80GB HBM3"
    # the hex form ORT takes for a size_t is read as the same number
    hexed = options_profile("cuda", gpu_mem_limit=f'"{hex(60 * GiB)}"')
    assert doctor_gpu(hexed, gpus, {"CUDA_VISIBLE_DEVICES": "1"}, tmp_path) == []
    [f] = doctor_gpu(hexed, gpus, {"CUDA_VISIBLE_DEVICES": "0"}, tmp_path)
    assert f.evidence["gpu_mem_limit"] == 60 * GiB and f.severity == "warning"


def test_under_mig_the_slice_is_judged(tmp_path: Path) -> None:
    limit = options_profile("cuda", gpu_mem_limit=str(20 * GiB))
    env = {"CUDA_VISIBLE_DEVICES": "MIG-eeee5555-0000-0000-0000-000000000000"}
    [f] = doctor_gpu(limit, devices(), env, tmp_path)
    assert f.severity == "warning" and f.evidence["mem_total_bytes"] == 10 * GiB  # the slice's, not the GPU's 80
    assert f.evidence["nvml_index"] == 2
    assert doctor_gpu(limit, devices(), {"CUDA_VISIBLE_DEVICES": "MIG-dddd"}, tmp_path) == []  # 40 GiB: fits
    [f] = doctor_gpu(options_profile("cuda"), devices(), {"CUDA_VISIBLE_DEVICES": "MIG-dddd"}, tmp_path)
    assert f.evidence["mem_total_bytes"] == 40 * GiB and f.evidence["uuid"].startswith("MIG-dddd")


def test_a_device_id_cuda_cannot_see_is_said(tmp_path: Path) -> None:
    text = options_profile("cuda", device_id="1")
    [f] = doctor_gpu(text, devices(), {"CUDA_VISIBLE_DEVICES": "GPU-bbbb,-1,GPU-aaaa"}, tmp_path)
    assert f.severity == "warning"
    assert f.message == ("device_id 1 names no GPU this process can see (1 CUDA device(s) visible with "
                         "CUDA_VISIBLE_DEVICES='GPU-bbbb,-1,GPU-aaaa')")
    # the inaccessible GPU is not there to be picked: the others keep their UUIDs
    [f] = doctor_gpu(options_profile("cuda"), devices(no_permission=(0,)), {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"},
                     tmp_path)
    assert f.severity == "info" and f.evidence["gpu"] == "NVIDIA H100 80GB HBM3"


# ---- headless GPU figures follow a restarted worker ------------------------------------------------------------

class LiveProcessGpu:
    """A GPU collector that, as NVML does, lists only processes that are alive: the watched pid gets 1 GiB while it
    runs, nothing once it is dead. Records the pid each sample was taken for."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.sampled_for: list[int | None] = []

    def watch(self, pid: int | None) -> None:
        self.pid = pid

    def sample(self) -> GpuSample:
        from ortop.collectors.gpu import GpuDevice

        self.sampled_for.append(self.pid)
        alive = self.pid is not None and psutil.pid_exists(self.pid) and \
            psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        dev = GpuDevice(0, "Fake GPU", 2 * GiB, 16 * GiB, None, 10.0, GiB if alive else None)
        return GpuSample((dev,), "ok", None if alive else "worker pid not among GPU processes")

    def close(self) -> None: ...


@pytest.mark.integration
def test_headless_gpu_figures_follow_the_restarted_worker(tmp_path: Path) -> None:
    model = make_matmul_model(tmp_path / "m.onnx", n=64, batch=1)
    gpu = LiveProcessGpu()
    killed: list[int] = []

    def kill_once(monitor: Any) -> None:
        def run() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                snap = monitor.snapshot()
                if snap.runs > 50 and monitor.worker_pid():
                    killed.append(monitor.worker_pid())
                    os.kill(killed[0], 9)
                    return
                time.sleep(0.05)

        threading.Thread(target=run, daemon=True).start()

    profile = pm.merge(Profile(), **{"session.intra_op_num_threads": 1})
    res = headless.measure(model, profile, duration_s=6.0, gpu=gpu, on_monitor=kill_once)
    assert killed, "the worker was never killed"
    assert res.summary["restarts"]["count"] == 1
    final = gpu.sampled_for[-1]
    assert final is not None and final != killed[0]
    assert res.summary["gpu"][0]["worker_mem"] == GiB  # read for the live worker, not the dead one
