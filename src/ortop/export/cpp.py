"""``--to cpp``: an ``Ort::SessionOptions`` builder (onnxruntime_cxx_api.h).

The C++ API has a named setter per SessionOptions attribute, declared in :data:`SETTERS` by knob key; config-entry
knobs need none (``AddConfigEntry``), and a SessionOptions knob with no setter here is named in a comment.

What is process-wide belongs to the ``Ort::Env`` (``MakeEnv``): the global thread pools it is created with, and the
shared CPU arena registered in it (``session.use_env_allocators``: the config entry alone shares nothing). A profile
with replicas gets ``MakeSessions``; pinned, each replica's options size and pin its pool to the cores it is given
(``MakeReplicaSessionOptions``), while the split itself and pinning the callers are left to the program, as they
depend on the host it runs on (the Python export works the split out at run time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ortop.config import knobs
from ortop.config.ort_names import EXEC_MODE_NAMES, OPT_LEVEL_NAMES
from ortop.config.profile import Profile
from ortop.config.providers import CPU, CUDA, TENSORRT
from ortop.export.common import VERSION_NOTES, code_lines, comment_header, global_pools, literal, shared_arena, spelled
from ortop.export.literals import comment_str, cpp_str
from ortop.export.replicas import ReplicaCode, replicas, replicas_section


def _opt_level(v: str) -> list[str]:
    """The level by enum name, with the onnxruntime version a newer level needs."""
    note = VERSION_NOTES.get(("session.graph_optimization_level", v))
    return ([f"// {note}"] if note else []) + [
        f"so.SetGraphOptimizationLevel(GraphOptimizationLevel::{OPT_LEVEL_NAMES[v]});"]


# The C++ statements for a knob's value, by knob key (an empty list: nothing to write for that value).
SETTERS: dict[str, Callable[[Any], list[str]]] = {
    "session.intra_op_num_threads": lambda v: [f"so.SetIntraOpNumThreads({v});"],
    "session.inter_op_num_threads": lambda v: [f"so.SetInterOpNumThreads({v});"],
    "session.execution_mode": lambda v: [f"so.SetExecutionMode(ExecutionMode::{EXEC_MODE_NAMES[v]});"],
    "session.graph_optimization_level": _opt_level,
    "session.enable_cpu_mem_arena": lambda v: ["so.EnableCpuMemArena();" if v else "so.DisableCpuMemArena();"],
    "session.enable_mem_pattern": lambda v: ["so.EnableMemPattern();" if v else "so.DisableMemPattern();"],
    "session.enable_mem_reuse": lambda v: [] if v else [
        "// enable_mem_reuse = false: the C/C++ API has no setter for it (Python's SessionOptions.enable_mem_reuse); "
        "it stays on here."],
    "session.use_per_session_threads": lambda v: [] if v else [
        "so.DisablePerSessionThreads();  // use the Env's global pools (see MakeEnv)"],
    "session.log_severity_level": lambda v: [f"so.SetLogSeverityLevel({v});"],
}

# Registration names the generic AppendExecutionProvider(name, options) takes, per ORT provider name.
GENERIC_EP_NAMES = {
    "QNNExecutionProvider": "QNN",
    "XnnpackExecutionProvider": "XNNPACK",
    "SNPEExecutionProvider": "SNPE",
    "OpenVINOExecutionProvider": "OpenVINO",
    "WebGpuExecutionProvider": "WebGPU",
    "CoreMLExecutionProvider": "CoreML",
    "DmlExecutionProvider": "DML",
    "VitisAIExecutionProvider": "VitisAI",
    "AzureExecutionProvider": "AZURE",
}


def generic_ep_name(name: str) -> tuple[str, bool]:
    """(registration name, whether it is a known one)."""
    if name in GENERIC_EP_NAMES:
        return GENERIC_EP_NAMES[name], True
    return (name[: -len("ExecutionProvider")] if name.endswith("ExecutionProvider") else name), False


def _unknown(knob: knobs.Knob, value: Any) -> str:
    """A comment naming a SessionOptions knob C++ has no setter for, so the export never drops it silently."""
    return (f"// {knob.name} = {comment_str(literal(value))}: no C++ setter is known for SessionOptions."
            f"{knob.ort_name}; it stays at ORT's default here.")


def _env(pools: tuple[int, int] | None, arena: bool) -> list[str]:
    """MakeEnv(): the global pools exist only if the Env is created with them, and the shared arena only once
    registered in it, before the first session."""
    if not pools and not arena:
        return ["inline Ort::Env MakeEnv() {", '  return Ort::Env(ORT_LOGGING_LEVEL_WARNING, "ortop");', "}"]
    out = []
    if pools:
        out.append("// One Env per process, created with the global thread pools every session here shares.")
    if arena:
        out += [
            "// session.use_env_allocators: one CPU arena registered in the Env; every session created with the",
            "// config entry (MakeSessionOptions adds it) allocates from it instead of an arena of its own, so N",
            "// sessions hold about one arena's memory. The entry alone shares nothing: the arena is registered here,",
            "// before the first session.",
        ]
    out.append("inline Ort::Env MakeEnv() {")
    if pools:
        out += [
            "  Ort::ThreadingOptions threading;",
            f"  threading.SetGlobalIntraOpNumThreads({pools[0]});",
            f"  threading.SetGlobalInterOpNumThreads({pools[1]});",
        ]
    if not arena:
        return out + ['  return Ort::Env(threading, ORT_LOGGING_LEVEL_WARNING, "ortop");', "}"]
    out.append('  Ort::Env env(threading, ORT_LOGGING_LEVEL_WARNING, "ortop");' if pools else
               '  Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "ortop");')
    return out + [
        "  Ort::MemoryInfo memory_info = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);",
        "  Ort::ArenaCfg arena_cfg(0, -1, -1, -1);  // 0 and -1: ORT's defaults",
        "  env.CreateAndRegisterAllocator(memory_info, arena_cfg);",
        "  return env;",
        "}",
    ]


_MAKE_SESSIONS = """\
inline std::vector<Ort::Session> MakeSessions(Ort::Env& env, int n = kReplicas,
                                              const ORTCHAR_T* model_path = $path) {
  std::vector<Ort::Session> sessions;
  sessions.reserve(n);
  for (int i = 0; i < n; ++i) sessions.push_back(MakeSession(env, model_path));
  return sessions;
}"""

_MAKE_REPLICA_OPTIONS = """\
inline Ort::SessionOptions MakeReplicaSessionOptions(const std::vector<int>& cores) {
  Ort::SessionOptions so = MakeSessionOptions();
  const int threads = $threads;
  so.SetIntraOpNumThreads(threads);
  std::string affinities;
  for (int j = 1; j < threads; ++j) {
    if (j > 1) affinities += ";";
    affinities += std::to_string(cores[j % cores.size()] + 1);
  }
  if (!affinities.empty()) so.AddConfigEntry("session.intra_op_thread_affinities", affinities.c_str());
  return so;
}"""

_MAKE_PINNED_SESSIONS = """\
// shares[i]: replica i's cores, 0-based and not empty (kReplicas shares).
inline std::vector<Ort::Session> MakeSessions(Ort::Env& env, const std::vector<std::vector<int>>& shares,
                                              const ORTCHAR_T* model_path = $path) {
  std::vector<Ort::Session> sessions;
  sessions.reserve(shares.size());
$each
  return sessions;
}"""

_EACH_FROM_ITS_OPTIONS = """\
  for (const std::vector<int>& cores : shares) {
    Ort::SessionOptions so = MakeReplicaSessionOptions(cores);
    sessions.emplace_back(env, model_path, so);
  }"""

_EACH_CALLERS_PINNED_ONLY = """\
  for (std::size_t i = 0; i < shares.size(); ++i) {
    sessions.push_back(MakeSession(env, model_path));
  }"""


def _replicas(profile: Profile, model_path: str) -> list[str]:
    """MakeSessions(): the replicas; pinned, each from the options of its share of the cores."""
    path = f"ORT_TSTR({cpp_str(model_path)})"
    return replicas_section(profile, ReplicaCode(
        prefix="// ", count="kReplicas", count_line="constexpr int kReplicas = {n};",
        pin_callers="each caller thread of replica i to shares[i] (pthread_setaffinity_np on Linux)",
        unpinned=code_lines(_MAKE_SESSIONS, path=path),
        replica_options=lambda threads: code_lines(_MAKE_REPLICA_OPTIONS, threads=threads),
        default_threads="static_cast<int>(cores.size())",
        pinned=lambda pools: code_lines(_MAKE_PINNED_SESSIONS, path=path,
                                        each=_EACH_FROM_ITS_OPTIONS if pools else _EACH_CALLERS_PINNED_ONLY)))


def _provider(profile: Profile) -> list[str]:
    """Appending the provider: CUDA and TensorRT through their V2 option structs, others by registration name."""
    name = profile.provider_name()
    options = profile.provider_options()
    if name in (CUDA, TENSORRT):
        short, struct = ("CUDA", "OrtCUDAProviderOptionsV2") if name == CUDA else (
            "TensorRT", "OrtTensorRTProviderOptionsV2")
        var = "cuda_options" if short == "CUDA" else "trt_options"
        out = [
            f"// {name}: the V2 options take every key as a string, as the Python API does.",
            "const OrtApi& api = Ort::GetApi();",
            f"{struct}* {var} = nullptr;",
            f"Ort::ThrowOnError(api.Create{short}ProviderOptions(&{var}));",
            f"std::unique_ptr<{struct}, decltype(api.Release{short}ProviderOptions)> {var}_guard(",
            f"    {var}, api.Release{short}ProviderOptions);",
        ]
        if options:
            keys = ", ".join(cpp_str(k) for k in options)
            values = ", ".join(cpp_str(v) for v in options.values())
            out += [
                f"const std::vector<const char*> keys{{{keys}}};",
                f"const std::vector<const char*> values{{{values}}};",
                f"Ort::ThrowOnError(api.Update{short}ProviderOptions({var}, keys.data(), values.data(), keys.size()));",
            ]
        return out + [f"so.AppendExecutionProvider_{short}_V2(*{var});"]
    if name == CPU:
        return ["// CPU provider options have no C++ setter; the CPU provider is always registered."] if options else []
    reg, known = generic_ep_name(name)
    out = [] if known else [f"// {comment_str(name)}: check the registration name your onnxruntime build expects."]
    pairs = ", ".join(f"{{{cpp_str(k)}, {cpp_str(v)}}}" for k, v in options.items())
    return out + [f"so.AppendExecutionProvider({cpp_str(reg)}, {{{pairs}}});"]


def render(profile: Profile, model_path: str) -> str:
    """The C++ source for ``profile``."""
    out = comment_header(profile, "onnxruntime_cxx_api.h")
    many = replicas(profile) > 1 or profile.workload.pin_replicas
    usage = "Ort::Session session = MakeSession(env);"
    if many:
        usage = ("std::vector<Ort::Session> sessions = MakeSessions(env, shares);" if profile.workload.pin_replicas
                 else "std::vector<Ort::Session> sessions = MakeSessions(env);")
    out += [
        "//",
        f"// Usage:  Ort::Env env = MakeEnv();  {usage}",
        "",
        "#include <onnxruntime_cxx_api.h>",
        "",
        "#include <memory>",
        "#include <string>",
        "#include <unordered_map>",
        "#include <vector>",
        "",
    ]
    out += _env(global_pools(profile), shared_arena(profile))
    body = spelled(profile, SETTERS, _unknown)
    body += [f"so.AddConfigEntry({cpp_str(k)}, {cpp_str(v)});" for k, v in profile.config_entries().items()]
    body += _provider(profile)
    out += ["", "inline Ort::SessionOptions MakeSessionOptions() {", "  Ort::SessionOptions so;"]
    out += [f"  {line}" for line in body]
    out += ["  return so;", "}", ""]
    if profile.provider.io_binding:
        out += [
            "// The profile runs through IO binding: bind inputs and outputs on the device with Ort::IoBinding",
            "// (session.Run(Ort::RunOptions{}, binding)) so tensors are not copied on every run.",
        ]
        if profile.cuda_graph():
            out.append("// enable_cuda_graph replays fixed device addresses: reuse the same bound buffers and shapes.")
    out += [
        "inline Ort::Session MakeSession(Ort::Env& env,",
        f"                                const ORTCHAR_T* model_path = ORT_TSTR({cpp_str(model_path)})) {{",
        "  Ort::SessionOptions so = MakeSessionOptions();",
        "  return Ort::Session(env, model_path, so);",
        "}",
    ]
    if many:
        out += _replicas(profile, model_path)
    return "\n".join(out) + "\n"
