"""Provider names read one way (:mod:`ortop.config.providers`): a short alias, a full name and any case name the
same provider, and every surface that looks at the name (the ORT provider list, the checks, the tuner's space, the
exporters) treats ``CUDAExecutionProvider`` exactly like ``cuda``."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from ortop.collectors.host import HostFacts
from ortop.config import profile as pm
from ortop.config.ort_names import provider_list
from ortop.config.profile import Profile, ProfileError
from ortop.config.providers import (
    ALIASES,
    CPU,
    CUDA,
    KNOWN,
    TENSORRT,
    ProviderName,
    name_error,
    ort_name,
    resolve,
    short_name,
)
from ortop.engine.answers.space import ModelFacts, Space
from ortop.export import FORMATS, render

# ---- the normaliser -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("alias, full", [("cpu", CPU), ("cuda", CUDA), ("tensorrt", TENSORRT), ("trt", TENSORRT),
                                         ("openvino", "OpenVINOExecutionProvider"), ("dml", "DmlExecutionProvider"),
                                         ("nvtensorrtrtx", "NvTensorRTRTXExecutionProvider")])
def test_an_alias_reads_as_its_full_name(alias: str, full: str) -> None:
    read = resolve(alias)
    assert read == ProviderName(full, short_name(full), True)
    assert ort_name(alias) == full
    assert name_error(alias) is None


def test_a_full_name_reads_as_its_alias() -> None:
    assert resolve(CUDA) == ProviderName(CUDA, "cuda", True)
    assert resolve(TENSORRT) == ProviderName(TENSORRT, "tensorrt", True)  # "trt" is an alias, not the short name
    for full in KNOWN:
        assert ort_name(short_name(full)) == full, full
        assert short_name(full) in ALIASES and name_error(full) is None


def test_every_provider_onnxruntime_knows_has_an_alias() -> None:
    for full in ort.get_all_providers():
        assert resolve(full).known, full
        assert ALIASES[short_name(full)] == full


@pytest.mark.parametrize("spelling", ["cuda", "CUDA", "Cuda", " cuda ", "CUDAExecutionProvider",
                                      "cudaexecutionprovider", "CudaExecutionProvider"])
def test_case_and_blanks_do_not_matter(spelling: str) -> None:
    assert resolve(spelling) == ProviderName(CUDA, "cuda", True)
    assert Profile(provider=pm.ProviderSettings(name=spelling)).providers() == [CUDA, CPU]


def test_an_unknown_full_name_passes_through_for_ort_to_judge() -> None:
    assert resolve("MyExecutionProvider") == ProviderName("MyExecutionProvider", "my", False)
    assert name_error("MyExecutionProvider") is None
    assert pm.loads('[provider]\nname = "MyExecutionProvider"\n').provider_name() == "MyExecutionProvider"


def test_an_unknown_short_name_is_a_clear_error() -> None:
    message = name_error("cudaa")
    assert message is not None
    assert message.startswith("provider.name 'cudaa' is not a provider ortop knows (did you mean 'cuda'?)")
    assert "ExecutionProvider" in message
    far = name_error("zzzz")
    assert far is not None and "did you mean" not in far and "use a short name (cpu, cuda" in far
    assert name_error("") == name_error("  ") == "provider.name must not be empty"


def test_an_unknown_short_name_fails_the_profile_at_its_line() -> None:
    with pytest.raises(ProfileError) as info:
        pm.loads('[session]\nintra_op_num_threads = 1\n\n[provider]\nname = "cudaa"\n', path="p.toml")
    assert info.value.key == "provider.name"
    assert str(info.value).startswith("p.toml:5: provider.name 'cudaa' is not a provider ortop knows")


# ---- every surface treats the full name as the alias --------------------------------------------------------------

def _pair(**options: object) -> tuple[Profile, Profile]:
    short = pm.merge(Profile(), **{"provider.name": "cuda", "provider.io_binding": True,
                                   **{f"provider.options.{k}": v for k, v in options.items()}})
    return short, pm.merge(short, **{"provider.name": "CUDAExecutionProvider"})


def test_the_full_name_validates_every_cuda_option_like_the_alias() -> None:
    for name in ("cuda", "CUDAExecutionProvider", "cudaExecutionProvider"):
        for option, bad in (("enable_cuda_graph", "yes"), ("gpu_mem_limit", -5), ("gpu_mem_limt", 1),
                            ("cudnn_conv_algo_search", "FAST")):
            with pytest.raises(ProfileError, match=option) as info:
                pm.merge(Profile(), **{"provider.name": name, "provider.io_binding": True,
                                       f"provider.options.{option}": bad})
            assert info.value.key == f"provider.options.{option}", (name, option)


def test_the_full_name_builds_the_same_providers_and_exports() -> None:
    short, full = _pair(device_id=0, enable_cuda_graph=True, cudnn_conv_algo_search="HEURISTIC")
    assert provider_list(full) == provider_list(short) == [(CUDA, {"device_id": "0", "enable_cuda_graph": "1",
                                                                    "cudnn_conv_algo_search": "HEURISTIC"}), CPU]
    for fmt in FORMATS:
        same = render(full, fmt)
        if fmt == "json":  # the profile itself, its name as written
            same = same.replace('"name": "CUDAExecutionProvider"', '"name": "cuda"')
        assert same == render(short, fmt), fmt


def test_the_full_name_opens_the_tuners_cuda_dimensions() -> None:
    host = HostFacts(logical_cpus=2, usable_cpus=(0, 1), physical_cores=2, siblings=((0,), (1,)),
                     numa_nodes={0: (0, 1)}, cpu_quota=None, cpu_model="Fake CPU")
    facts = ModelFacts(parallel_branches=False, ops=frozenset({"Conv", "MatMul"}))
    short, full = _pair()
    assert Space(full, host, facts).dimensions == Space(short, host, facts).dimensions
    assert "conv_algo" in Space(full, host, facts).dimensions
    assert "conv_algo" not in Space(Profile(), host, facts).dimensions
