"""``--to csharp``: a ``Microsoft.ML.OnnxRuntime.SessionOptions`` builder.

C# spells each SessionOptions attribute as a property or method, declared in :data:`SETTERS` by knob key; config
entry knobs need none (``AddSessionConfigEntry``), and a SessionOptions knob with no spelling here is named in a
comment.

What is process-wide is set up once, before the first session: the environment with the global thread pools, then
the shared CPU arena registered in it (``session.use_env_allocators``: the config entry alone shares nothing). A
profile with replicas gets ``CreateReplicas``; pinned, each replica's options size and pin its pool to the cores it
is given, while the split itself and pinning the callers are left to the program (they depend on its host).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ortop.config import knobs
from ortop.config.ort_names import EXEC_MODE_NAMES, OPT_LEVEL_NAMES
from ortop.config.profile import Profile
from ortop.config.providers import CPU, CUDA, TENSORRT
from ortop.export.common import code_lines, comment_header, global_pools, literal, shared_arena, spelled
from ortop.export.cpp import generic_ep_name
from ortop.export.literals import comment_str, cs_str
from ortop.export.replicas import ReplicaCode, replicas, replicas_section


def _bool(v: bool) -> str:
    """C#'s lowercase bool literal."""
    return "true" if v else "false"


def _opt_level(v: str) -> list[str]:
    """The level by enum name; layout by its number, since C# enums before onnxruntime 1.23 lack the name."""
    if v == "layout":
        return ["// ORT_ENABLE_LAYOUT (3) needs onnxruntime >= 1.23; older C# enums lack the name.",
                "so.GraphOptimizationLevel = (GraphOptimizationLevel)3;"]
    return [f"so.GraphOptimizationLevel = GraphOptimizationLevel.{OPT_LEVEL_NAMES[v]};"]


# The C# statements for a knob's value, by knob key (an empty list: nothing to write for that value).
SETTERS: dict[str, Callable[[Any], list[str]]] = {
    "session.intra_op_num_threads": lambda v: [f"so.IntraOpNumThreads = {v};"],
    "session.inter_op_num_threads": lambda v: [f"so.InterOpNumThreads = {v};"],
    "session.execution_mode": lambda v: [f"so.ExecutionMode = ExecutionMode.{EXEC_MODE_NAMES[v]};"],
    "session.graph_optimization_level": _opt_level,
    "session.enable_cpu_mem_arena": lambda v: [f"so.EnableCpuMemArena = {_bool(v)};"],
    "session.enable_mem_pattern": lambda v: [f"so.EnableMemoryPattern = {_bool(v)};"],
    "session.enable_mem_reuse": lambda v: [] if v else [
        "// enable_mem_reuse = false: the C# API has no setter for it; it stays on here."],
    "session.use_per_session_threads": lambda v: [] if v else ["so.DisablePerSessionThreads();"],
    "session.log_severity_level": lambda v: [f"so.LogSeverityLevel = (OrtLoggingLevel){v};"],
}


def _unknown(knob: knobs.Knob, value: Any) -> str:
    """A comment naming a SessionOptions knob C# has no spelling for, so the export never drops it silently."""
    return (f"// {knob.name} = {comment_str(literal(value))}: no C# setter is known for SessionOptions."
            f"{knob.ort_name}; it stays at ORT's default here.")


def _environment(pools: tuple[int, int]) -> list[str]:
    """CreateEnvironment(): the global pools exist only if the environment is created with them, first."""
    return [
        "    // The process-wide environment with the global thread pools every session here shares. It must",
        "    // exist before the first SessionOptions is created (that creates a default environment).",
        "    public static void CreateEnvironment()",
        "    {",
        "        if (OrtEnv.IsCreated) return;",
        "        var envOptions = new EnvironmentCreationOptions",
        "        {",
        "            threadOptions = new OrtThreadingOptions",
        "            {",
        f"                GlobalIntraOpNumThreads = {pools[0]},",
        f"                GlobalInterOpNumThreads = {pools[1]},",
        "            },",
        "        };",
        "        OrtEnv.CreateInstanceWithOptions(ref envOptions);",
        "    }",
        "",
    ]


def _shared_arena() -> list[str]:
    """RegisterSharedArena(): one CPU arena in the environment, registered once, before the first session."""
    return [
        "    // session.use_env_allocators: one CPU arena registered in the environment; every session created with",
        "    // the config entry (CreateOptions adds it) allocates from it instead of an arena of its own, so N",
        "    // sessions hold about one arena's memory. The entry alone shares nothing: the arena is registered here,",
        "    // once per process, before the first session.",
        "    private static readonly object arenaLock = new object();",
        "    private static bool arenaRegistered;",
        "",
        "    public static void RegisterSharedArena()",
        "    {",
        "        lock (arenaLock)",
        "        {",
        "            if (arenaRegistered) return;",
        '            using (var memoryInfo = new OrtMemoryInfo("Cpu", OrtAllocatorType.ArenaAllocator, 0,',
        "                                                      OrtMemType.Default))",
        "            using (var arenaCfg = new OrtArenaCfg(0, -1, -1, -1))  // 0 and -1: ORT's defaults",
        "            {",
        "                OrtEnv.Instance().CreateAndRegisterAllocator(memoryInfo, arenaCfg);",
        "            }",
        "            arenaRegistered = true;",
        "        }",
        "    }",
        "",
    ]


_CREATE_REPLICAS = """\
    public static InferenceSession[] CreateReplicas(string modelPath = $path)
    {
        var sessions = new InferenceSession[Replicas];
        for (int i = 0; i < Replicas; i++) sessions[i] = Create(modelPath);
        return sessions;
    }"""

_CREATE_REPLICA_OPTIONS = """\
    public static SessionOptions CreateReplicaOptions(int[] cores)
    {
        var so = CreateOptions();
        int threads = $threads;
        so.IntraOpNumThreads = threads;
        var affinities = new List<string>();
        for (int j = 1; j < threads; j++) affinities.Add((cores[j % cores.Length] + 1).ToString());
        if (affinities.Count > 0)
            so.AddSessionConfigEntry("session.intra_op_thread_affinities", string.Join(";", affinities));
        return so;
    }"""

_CREATE_PINNED_REPLICAS = """\
    // shares[i]: replica i's cores, 0-based and not empty (Replicas shares).
    public static InferenceSession[] CreateReplicas(int[][] shares, string modelPath = $path)
    {
        var sessions = new InferenceSession[shares.Length];
        for (int i = 0; i < shares.Length; i++)
        {
            using (var so = $options)
            {
                sessions[i] = new InferenceSession(modelPath, so);
            }
        }
        return sessions;
    }"""


def _replicas(profile: Profile, model_path: str) -> list[str]:
    """CreateReplicas(): the replicas; pinned, each from the options of its share of the cores."""
    path = cs_str(model_path)
    return replicas_section(profile, ReplicaCode(
        prefix="    // ", count="Replicas", count_line="    public const int Replicas = {n};",
        pin_callers="the OS thread of each caller of replica i to shares[i] (Linux: sched_setaffinity(0, ...) "
                    "through P/Invoke from that thread; .NET has no portable per-thread affinity)",
        unpinned=code_lines(_CREATE_REPLICAS, path=path),
        replica_options=lambda threads: code_lines(_CREATE_REPLICA_OPTIONS, threads=threads),
        default_threads="cores.Length",
        pinned=lambda pools: code_lines(_CREATE_PINNED_REPLICAS, path=path,
                                        options="CreateReplicaOptions(shares[i])" if pools else "CreateOptions()")))


def _provider(profile: Profile) -> list[str]:
    """Appending the provider: CUDA and TensorRT through their option classes, others by registration name."""
    name = profile.provider_name()
    options = profile.provider_options()
    dict_items = ", ".join(f"{{ {cs_str(k)}, {cs_str(v)} }}" for k, v in options.items())
    if name in (CUDA, TENSORRT):
        cls, append = (("OrtCUDAProviderOptions", "AppendExecutionProvider_CUDA") if name == CUDA
                       else ("OrtTensorRTProviderOptions", "AppendExecutionProvider_Tensorrt"))
        out = [f"using (var providerOptions = new {cls}())", "{"]
        if options:
            out.append(f"    providerOptions.UpdateOptions(new Dictionary<string, string> {{ {dict_items} }});")
        return out + [f"    so.{append}(providerOptions);", "}"]
    if name == CPU:
        return ["// CPU provider options have no C# setter; the CPU provider is always registered."] if options else []
    reg, known = generic_ep_name(name)
    out = [] if known else [f"// {comment_str(name)}: check the registration name your onnxruntime build expects."]
    return out + [f"so.AppendExecutionProvider({cs_str(reg)}, new Dictionary<string, string> {{ {dict_items} }});"]


def render(profile: Profile, model_path: str) -> str:
    """The C# source for ``profile``."""
    pools = global_pools(profile)
    arena = shared_arena(profile)
    many = replicas(profile) > 1 or profile.workload.pin_replicas
    usage = "using var session = OrtopSession.Create();"
    if many:
        usage = ("var sessions = OrtopSession.CreateReplicas(shares);" if profile.workload.pin_replicas
                 else "var sessions = OrtopSession.CreateReplicas();")
    out = comment_header(profile, "Microsoft.ML.OnnxRuntime")
    out += [
        "//",
        f"// Usage:  {usage}",
        "",
        "using System.Collections.Generic;",
        "using Microsoft.ML.OnnxRuntime;",
        "",
        "public static class OrtopSession",
        "{",
    ]
    if pools:
        out += _environment(pools)
    if arena:
        out += _shared_arena()
    # The process-wide set-up comes first in CreateOptions, the first use of ORT on every path: the environment
    # with its pools (a SessionOptions or OrtEnv.Instance() would create a default one), then the arena in it.
    setup = (["        CreateEnvironment();"] if pools else []) + (["        RegisterSharedArena();"] if arena else [])
    body = spelled(profile, SETTERS, _unknown)
    body += [f"so.AddSessionConfigEntry({cs_str(k)}, {cs_str(v)});" for k, v in profile.config_entries().items()]
    body += _provider(profile)
    if profile.provider.io_binding:
        body += ["// The profile runs through IO binding: use session.CreateIoBinding() and",
                 "// session.RunWithBinding(runOptions, binding) so tensors stay on the device."]
        if profile.cuda_graph():
            body.append("// enable_cuda_graph replays fixed device addresses: reuse the same bound OrtValues and "
                        "shapes.")
    out += [
        "    // SessionOptions carrying every setting of the profile; the caller disposes of it.",
        "    public static SessionOptions CreateOptions()",
        "    {",
        *setup,
        "        var so = new SessionOptions();",
    ]
    out += [f"        {line}" for line in body]
    out += [
        "        return so;",
        "    }",
        "",
        f"    public static InferenceSession Create(string modelPath = {cs_str(model_path)})",
        "    {",
        "        using (var so = CreateOptions())",
        "        {",
        "            return new InferenceSession(modelPath, so);",
        "        }",
        "    }",
    ]
    if many:
        out += _replicas(profile, model_path)
    out.append("}")
    return "\n".join(out) + "\n"
