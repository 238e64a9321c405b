"""``--to csharp``: a ``Microsoft.ML.OnnxRuntime.SessionOptions`` builder.

C# spells each SessionOptions attribute as a property or method, declared in :data:`SETTERS` by knob key; config
entry knobs need none (``AddSessionConfigEntry``), and a SessionOptions knob with no spelling here is named in a
comment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ortop.config import knobs
from ortop.config.ort_names import EXEC_MODE_NAMES, OPT_LEVEL_NAMES
from ortop.config.profile import Profile
from ortop.export.common import comment_header, global_pools, literal, spelled
from ortop.export.cpp import generic_ep_name
from ortop.export.literals import cs_str


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
    return (f"// {knob.name} = {cs_str(literal(value))}: no C# setter is known for SessionOptions."
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


def _provider(profile: Profile) -> list[str]:
    """Appending the provider: CUDA and TensorRT through their option classes, others by registration name."""
    name = profile.provider_name()
    options = profile.provider_options()
    dict_items = ", ".join(f"{{ {cs_str(k)}, {cs_str(v)} }}" for k, v in options.items())
    if name in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
        cls, append = (("OrtCUDAProviderOptions", "AppendExecutionProvider_CUDA") if name == "CUDAExecutionProvider"
                       else ("OrtTensorRTProviderOptions", "AppendExecutionProvider_Tensorrt"))
        out = [f"using (var providerOptions = new {cls}())", "{"]
        if options:
            out.append(f"    providerOptions.UpdateOptions(new Dictionary<string, string> {{ {dict_items} }});")
        return out + [f"    so.{append}(providerOptions);", "}"]
    if name == "CPUExecutionProvider":
        return ["// CPU provider options have no C# setter; the CPU provider is always registered."] if options else []
    reg, known = generic_ep_name(name)
    out = [] if known else [f"// {cs_str(name)}: check the registration name your onnxruntime build expects."]
    return out + [f"so.AppendExecutionProvider({cs_str(reg)}, new Dictionary<string, string> {{ {dict_items} }});"]


def render(profile: Profile, model_path: str) -> str:
    """The C# source for ``profile``."""
    pools = global_pools(profile)
    out = comment_header(profile, "Microsoft.ML.OnnxRuntime", cs_str)
    out += [
        "//",
        "// Usage:  using var session = OrtopSession.Create();",
        "",
        "using System.Collections.Generic;",
        "using Microsoft.ML.OnnxRuntime;",
        "",
        "public static class OrtopSession",
        "{",
    ]
    if pools:
        out += _environment(pools)
    out += [f"    public static InferenceSession Create(string modelPath = {cs_str(model_path)})", "    {"]
    if pools:
        out.append("        CreateEnvironment();")
    body = spelled(profile, SETTERS, _unknown)
    body += [f"so.AddSessionConfigEntry({cs_str(k)}, {cs_str(v)});" for k, v in profile.config_entries().items()]
    body += _provider(profile)
    if profile.provider.io_binding:
        body += ["// The profile runs through IO binding: use session.CreateIoBinding() and",
                 "// session.RunWithBinding(runOptions, binding) so tensors stay on the device."]
        if profile.cuda_graph():
            body.append("// enable_cuda_graph replays fixed device addresses: reuse the same bound OrtValues and "
                        "shapes.")
    out += ["        using (var so = new SessionOptions())", "        {"]
    out += [f"            {line}" for line in body]
    out += [
        "            return new InferenceSession(modelPath, so);",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(out) + "\n"
