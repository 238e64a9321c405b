"""Turn a profile into code or settings for other tools, so a tuned configuration leaves ortop intact.

Formats (``FORMATS``):

- ``python``: a module needing only onnxruntime, with ``make_session(model_path=..., providers=None)``.
- ``cpp``: an ``Ort::SessionOptions`` builder (onnxruntime_cxx_api.h).
- ``csharp``: a ``Microsoft.ML.OnnxRuntime.SessionOptions`` builder.
- ``perf-test``: an ``onnxruntime_perf_test`` command line (flags checked against its source, see PERF_TEST_FLAGS).
- ``olive``: the ``inference_settings`` JSON Olive's session-params tuning writes and its evaluator reads.
- ``env``: ``export NAME=VALUE`` lines for the profile's environment variables.
- ``json``: the whole profile with defaults filled in.

What a format cannot carry:

- ``perf-test`` refuses execution providers onnxruntime_perf_test has no ``-e`` name for (custom or plugin EPs,
  ROCm) and keys or values its ``"key|value key|value"`` lists cannot hold (whitespace; '|' in a key); knobs with
  no flag at all (mem reuse, global thread pools, log level, paced rate, .npy inputs) are listed as ``# note:``
  comment lines above the command, which stays runnable.
- ``olive`` refuses session settings Olive's evaluator cannot apply (CPU arena, memory pattern, memory reuse,
  global thread pools): a JSON file cannot carry a warning, and silently dropping them would measure something
  else. Custom provider names pass through, as Olive hands them to onnxruntime as they are. Environment variables
  are process settings, not session settings: export them with ``env``.
- ``cpp`` and ``csharp`` have no setter for ``enable_mem_reuse``; the code says so in a comment.

Every string taken from a profile (model path, description, config keys and values, provider options,
environment values) is written as an escaped literal of the target language, or shell-quoted, so no value can
become code. This module imports neither onnxruntime nor textual.
"""

from __future__ import annotations

import difflib
import json
import shlex
from typing import Any, Callable

from ortop.runtime.options import EXEC_MODE_NAMES, EXEC_MODE_VALUES, OPT_LEVEL_NAMES, OPT_LEVEL_VALUES, provider_list
from ortop.config.profile import EXECUTION_MODES, Profile

FORMATS = ("python", "cpp", "csharp", "perf-test", "olive", "env", "json")

DEFAULT_MODEL = "model.onnx"


class ExportError(ValueError):
    """The format is unknown, or the profile holds something the format cannot express."""


# ---- string literals ----------------------------------------------------------------------------------------

def py_str(s: str) -> str:
    """A Python string literal for ``s`` (repr escapes quotes, backslashes, newlines and unprintables)."""
    return repr(s)


def cpp_str(s: str) -> str:
    """A C/C++ string literal holding the UTF-8 bytes of ``s``.

    Printable ASCII stays as is; everything else becomes a three-digit octal escape (octal escapes stop after
    three digits, unlike the greedy ``\\x``). ``?`` is escaped so no trigraph such as ``??/`` can form.
    """
    out = ['"']
    for b in s.encode("utf-8", "surrogatepass"):
        c = chr(b)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "?":
            out.append("\\?")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def cs_str(s: str) -> str:
    """A C# regular string literal for ``s``: fixed-width ``\\uXXXX``/``\\UXXXXXXXX`` escapes for all non-ASCII
    and control characters (never the variable-length ``\\x``)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def _json_str(s: str) -> str:
    """An ASCII-only JSON string: safe inside a shell or TOML comment (no line breaks can survive)."""
    return json.dumps(s, ensure_ascii=True)


# ---- helpers ------------------------------------------------------------------------------------------------

def _model(profile: Profile, model_path: str | None) -> str:
    return model_path if model_path is not None else (profile.model or DEFAULT_MODEL)


def _device(profile: Profile) -> tuple[str, int]:
    """The device IO binding places tensors on, and its id."""
    name = profile.provider_name()
    device = "cuda" if name in ("CUDAExecutionProvider", "TensorrtExecutionProvider") else "cpu"
    try:
        device_id = int(profile.provider.options.get("device_id", 0))
    except (TypeError, ValueError):
        device_id = 0
    return device, device_id


def _global_pools(profile: Profile) -> tuple[int, int] | None:
    s = profile.session
    if s.use_per_session_threads:
        return None
    return s.global_intra_op_num_threads, s.global_inter_op_num_threads


# ---- python -------------------------------------------------------------------------------------------------

def _render_python(profile: Profile, model_path: str) -> str:
    s = profile.session
    lines: list[str] = [
        '"""ONNX Runtime session settings exported from an ortop profile.',
        "",
        "make_session() builds an InferenceSession with exactly these settings; only onnxruntime is needed.",
        '"""',
    ]
    if profile.description:
        lines.append(f"# profile: {py_str(profile.description)}")
    if profile.env:
        lines += [
            "#",
            "# Environment variables this profile sets. Set them before the process starts (shell, service unit,",
            "# container spec): os.environ.setdefault(...) in this module is NOT enough for LD_PRELOAD, which the",
            "# dynamic loader reads only at process start, and thread settings such as OMP_NUM_THREADS are read once",
            "# when onnxruntime loads. 'ortop export PROFILE --to env' prints them as shell lines.",
        ]
        lines += [f"#   {k} = {py_str(v)}" for k, v in profile.env.items()]
    lines += ["", "import onnxruntime as ort", "", f"MODEL_PATH = {py_str(model_path)}"]
    entries = []
    for entry in provider_list(profile):
        if isinstance(entry, tuple):
            items = ", ".join(f"{py_str(k)}: {py_str(v)}" for k, v in entry[1].items())
            entries.append(f"({py_str(entry[0])}, {{{items}}})")
        else:
            entries.append(py_str(entry))
    lines.append(f"PROVIDERS = [{', '.join(entries)}]")
    pools = _global_pools(profile)
    if pools:
        lines += [
            f"GLOBAL_THREAD_POOL_SIZES = ({pools[0]}, {pools[1]})  # (intra, inter); 0 = ORT's default",
            "",
            "_global_pools_ready = False",
            "",
            "",
            "def _global_thread_pools():",
            '    """Create the process-wide thread pools every session here shares (use_per_session_threads = False).',
            "",
            "    ORT accepts the sizes once per process, before its first session; a second call fails.",
            '    """',
            "    global _global_pools_ready",
            "    if not _global_pools_ready:",
            "        from onnxruntime.capi import _pybind_state",
            "",
            "        _pybind_state.set_global_thread_pool_sizes(*GLOBAL_THREAD_POOL_SIZES)",
            "        _global_pools_ready = True",
        ]
    lines += [
        "",
        "",
        "def session_options():",
        '    """SessionOptions carrying every setting of the profile."""',
        "    so = ort.SessionOptions()",
        f"    so.intra_op_num_threads = {s.intra_op_num_threads}",
        f"    so.inter_op_num_threads = {s.inter_op_num_threads}",
        f"    so.execution_mode = ort.ExecutionMode.{EXEC_MODE_NAMES[s.execution_mode]}",
    ]
    if s.graph_optimization_level == "layout":
        lines.append("    # ORT_ENABLE_LAYOUT needs onnxruntime >= 1.23.")
    lines += [
        f"    so.graph_optimization_level = ort.GraphOptimizationLevel.{OPT_LEVEL_NAMES[s.graph_optimization_level]}",
        f"    so.enable_cpu_mem_arena = {s.enable_cpu_mem_arena}",
        f"    so.enable_mem_pattern = {s.enable_mem_pattern}",
        f"    so.enable_mem_reuse = {s.enable_mem_reuse}",
        f"    so.use_per_session_threads = {s.use_per_session_threads}",
        f"    so.log_severity_level = {s.log_severity_level}",
    ]
    lines += [f"    so.add_session_config_entry({py_str(k)}, {py_str(v)})" for k, v in profile.config_entries().items()]
    lines += [
        "    return so",
        "",
        "",
        "def make_session(model_path=MODEL_PATH, providers=None):",
        '    """An InferenceSession with the profile\'s settings; ``providers`` overrides PROVIDERS."""',
    ]
    if pools:
        lines.append("    _global_thread_pools()")
    lines += [
        "    return ort.InferenceSession(",
        "        model_path, sess_options=session_options(), providers=PROVIDERS if providers is None else providers",
        "    )",
    ]
    if profile.provider.io_binding:
        device, device_id = _device(profile)
        lines += [
            "",
            "",
            "# The profile runs through IO binding: inputs are copied to the device once and outputs stay there.",
            f"DEVICE = {py_str(device)}",
            f"DEVICE_ID = {device_id}",
            "",
            "",
            "def run_with_io_binding(session, feeds):",
        ]
        if profile.cuda_graph():
            lines += [
                '    """One run through IO binding; returns the outputs copied to numpy.',
                "",
                "    enable_cuda_graph replays fixed device addresses: for repeated runs build the binding once, keep",
                "    its OrtValues, refresh inputs with OrtValue.update_inplace(array) and call",
                "    session.run_with_iobinding(binding) again, with the same shapes every time.",
                '    """',
            ]
        else:
            lines.append('    """One run through IO binding; returns the outputs copied to numpy."""')
        lines += [
            "    binding = session.io_binding()",
            "    for name, array in feeds.items():",
            "        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, DEVICE, DEVICE_ID))",
            "    for output in session.get_outputs():",
            "        binding.bind_output(output.name, DEVICE, DEVICE_ID)",
            "    session.run_with_iobinding(binding)",
            "    return binding.copy_outputs_to_cpu()",
        ]
    return "\n".join(lines) + "\n"


# ---- C++ ----------------------------------------------------------------------------------------------------

# Registration names the generic AppendExecutionProvider(name, options) takes, per ORT provider name.
_GENERIC_EP_NAMES = {
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


def _generic_ep_name(name: str) -> tuple[str, bool]:
    """(registration name, whether it is a known one)."""
    if name in _GENERIC_EP_NAMES:
        return _GENERIC_EP_NAMES[name], True
    return (name[: -len("ExecutionProvider")] if name.endswith("ExecutionProvider") else name), False


def _comment_header(profile: Profile, api: str, quote) -> list[str]:
    """The ``//`` comment lines C++ and C# exports open with: origin, profile description, env vars to set."""
    out = [f"// ONNX Runtime session settings exported from an ortop profile ({api})."]
    if profile.description:
        out.append(f"// profile: {quote(profile.description)}")
    if profile.env:
        out.append("// Environment variables to set before the process starts (LD_PRELOAD is read only then):")
        out += [f"//   {k}={quote(v)}" for k, v in profile.env.items()]
    return out


def _render_cpp(profile: Profile, model_path: str) -> str:
    s = profile.session
    name = profile.provider_name()
    options = profile.provider_options()
    pools = _global_pools(profile)
    out = _comment_header(profile, "onnxruntime_cxx_api.h", cpp_str)
    out += [
        "//",
        "// Usage:  Ort::Env env = MakeEnv();  Ort::Session session = MakeSession(env);",
        "",
        "#include <onnxruntime_cxx_api.h>",
        "",
        "#include <memory>",
        "#include <string>",
        "#include <unordered_map>",
        "#include <vector>",
        "",
    ]
    if pools:
        out += [
            "// One Env per process, created with the global thread pools every session here shares.",
            "inline Ort::Env MakeEnv() {",
            "  Ort::ThreadingOptions threading;",
            f"  threading.SetGlobalIntraOpNumThreads({pools[0]});",
            f"  threading.SetGlobalInterOpNumThreads({pools[1]});",
            '  return Ort::Env(threading, ORT_LOGGING_LEVEL_WARNING, "ortop");',
            "}",
        ]
    else:
        out += [
            "inline Ort::Env MakeEnv() {",
            '  return Ort::Env(ORT_LOGGING_LEVEL_WARNING, "ortop");',
            "}",
        ]
    out += [
        "",
        "inline Ort::SessionOptions MakeSessionOptions() {",
        "  Ort::SessionOptions so;",
        f"  so.SetIntraOpNumThreads({s.intra_op_num_threads});",
        f"  so.SetInterOpNumThreads({s.inter_op_num_threads});",
        f"  so.SetExecutionMode(ExecutionMode::{EXEC_MODE_NAMES[s.execution_mode]});",
    ]
    if s.graph_optimization_level == "layout":
        out.append("  // ORT_ENABLE_LAYOUT needs onnxruntime >= 1.23.")
    out += [
        f"  so.SetGraphOptimizationLevel(GraphOptimizationLevel::{OPT_LEVEL_NAMES[s.graph_optimization_level]});",
        "  so.EnableCpuMemArena();" if s.enable_cpu_mem_arena else "  so.DisableCpuMemArena();",
        "  so.EnableMemPattern();" if s.enable_mem_pattern else "  so.DisableMemPattern();",
        f"  so.SetLogSeverityLevel({s.log_severity_level});",
    ]
    if not s.enable_mem_reuse:
        out.append("  // enable_mem_reuse = false: the C/C++ API has no setter for it (Python's "
                   "SessionOptions.enable_mem_reuse); it stays on here.")
    if pools:
        out.append("  so.DisablePerSessionThreads();  // use the Env's global pools (see MakeEnv)")
    out += [f"  so.AddConfigEntry({cpp_str(k)}, {cpp_str(v)});" for k, v in profile.config_entries().items()]
    keys = ", ".join(cpp_str(k) for k in options)
    values = ", ".join(cpp_str(v) for v in options.values())
    if name in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
        short, struct = ("CUDA", "OrtCUDAProviderOptionsV2") if name == "CUDAExecutionProvider" else (
            "TensorRT", "OrtTensorRTProviderOptionsV2")
        var = "cuda_options" if short == "CUDA" else "trt_options"
        out += [
            f"  // {name}: the V2 options take every key as a string, as the Python API does.",
            "  const OrtApi& api = Ort::GetApi();",
            f"  {struct}* {var} = nullptr;",
            f"  Ort::ThrowOnError(api.Create{short}ProviderOptions(&{var}));",
            f"  std::unique_ptr<{struct}, decltype(api.Release{short}ProviderOptions)> {var}_guard(",
            f"      {var}, api.Release{short}ProviderOptions);",
        ]
        if options:
            out += [
                f"  const std::vector<const char*> keys{{{keys}}};",
                f"  const std::vector<const char*> values{{{values}}};",
                f"  Ort::ThrowOnError(api.Update{short}ProviderOptions({var}, keys.data(), values.data(), "
                "keys.size()));",
            ]
        out.append(f"  so.AppendExecutionProvider_{'CUDA' if short == 'CUDA' else 'TensorRT'}_V2(*{var});")
    elif name == "CPUExecutionProvider":
        if options:
            out.append("  // CPU provider options have no C++ setter; the CPU provider is always registered.")
    else:
        reg, known = _generic_ep_name(name)
        if not known:
            out.append(f"  // {cpp_str(name)}: check the registration name your onnxruntime build expects.")
        pairs = ", ".join(f"{{{cpp_str(k)}, {cpp_str(v)}}}" for k, v in options.items())
        out.append(f"  so.AppendExecutionProvider({cpp_str(reg)}, {{{pairs}}});")
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
    return "\n".join(out) + "\n"


# ---- C# -----------------------------------------------------------------------------------------------------

def _render_csharp(profile: Profile, model_path: str) -> str:
    s = profile.session
    name = profile.provider_name()
    options = profile.provider_options()
    pools = _global_pools(profile)
    out = _comment_header(profile, "Microsoft.ML.OnnxRuntime", cs_str)
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
        out += [
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
    out += [
        f"    public static InferenceSession Create(string modelPath = {cs_str(model_path)})",
        "    {",
    ]
    if pools:
        out.append("        CreateEnvironment();")
    out += [
        "        using (var so = new SessionOptions())",
        "        {",
        f"            so.IntraOpNumThreads = {s.intra_op_num_threads};",
        f"            so.InterOpNumThreads = {s.inter_op_num_threads};",
        f"            so.ExecutionMode = ExecutionMode.{EXEC_MODE_NAMES[s.execution_mode]};",
    ]
    if s.graph_optimization_level == "layout":
        out += ["            // ORT_ENABLE_LAYOUT (3) needs onnxruntime >= 1.23; older C# enums lack the name.",
                "            so.GraphOptimizationLevel = (GraphOptimizationLevel)3;"]
    else:
        out.append(f"            so.GraphOptimizationLevel = "
                   f"GraphOptimizationLevel.{OPT_LEVEL_NAMES[s.graph_optimization_level]};")
    out += [
        f"            so.EnableCpuMemArena = {'true' if s.enable_cpu_mem_arena else 'false'};",
        f"            so.EnableMemoryPattern = {'true' if s.enable_mem_pattern else 'false'};",
        f"            so.LogSeverityLevel = (OrtLoggingLevel){s.log_severity_level};",
    ]
    if not s.enable_mem_reuse:
        out.append("            // enable_mem_reuse = false: the C# API has no setter for it; it stays on here.")
    if pools:
        out.append("            so.DisablePerSessionThreads();")
    out += [f"            so.AddSessionConfigEntry({cs_str(k)}, {cs_str(v)});"
            for k, v in profile.config_entries().items()]
    dict_items = ", ".join(f"{{ {cs_str(k)}, {cs_str(v)} }}" for k, v in options.items())
    if name in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
        cls, append = (("OrtCUDAProviderOptions", "AppendExecutionProvider_CUDA") if name == "CUDAExecutionProvider"
                       else ("OrtTensorRTProviderOptions", "AppendExecutionProvider_Tensorrt"))
        out += [
            f"            using (var providerOptions = new {cls}())",
            "            {",
        ]
        if options:
            out.append("                providerOptions.UpdateOptions("
                       f"new Dictionary<string, string> {{ {dict_items} }});")
        out += [
            f"                so.{append}(providerOptions);",
            "            }",
        ]
    elif name == "CPUExecutionProvider":
        if options:
            out.append("            // CPU provider options have no C# setter; the CPU provider is always registered.")
    else:
        reg, known = _generic_ep_name(name)
        if not known:
            out.append(f"            // {cs_str(name)}: check the registration name your onnxruntime build expects.")
        out.append(f"            so.AppendExecutionProvider({cs_str(reg)}, "
                   f"new Dictionary<string, string> {{ {dict_items} }});")
    if profile.provider.io_binding:
        out.append("            // The profile runs through IO binding: use session.CreateIoBinding() and")
        out.append("            // session.RunWithBinding(runOptions, binding) so tensors stay on the device.")
        if profile.cuda_graph():
            out.append("            // enable_cuda_graph replays fixed device addresses: reuse the same bound "
                       "OrtValues and shapes.")
    out += [
        "            return new InferenceSession(modelPath, so);",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(out) + "\n"


# ---- onnxruntime_perf_test ----------------------------------------------------------------------------------

# Flags of onnxruntime_perf_test, checked against onnxruntime/test/perftest/command_args_parser.cc (its ABSL_FLAG
# definitions, usage text and ParseArguments) and their use in ort_test_session.cc and test_configuration.h.
# flag -> (takes a value, meaning). Positional arguments: model_path [result_file].
PERF_TEST_FLAGS: dict[str, tuple[bool, str]] = {
    "-A": (False, "disable the CPU memory arena"),
    "-M": (False, "disable the memory pattern (also off with -P)"),
    "-P": (False, "parallel executor instead of sequential"),
    "-c": (True, "number of concurrent Run() calls"),
    "-e": (True, "execution provider: cpu, cuda, dnnl, tensorrt, nvtensorrtrtx, openvino, dml, acl, nnapi, "
                 "coreml, qnn, snpe, migraphx, xnnpack, vitisai, webgpu, vsinpu"),
    "-i": (True, "provider options 'key|value key|value' (CUDA: UpdateCUDAProviderOptions)"),
    "-C": (True, "session config entries 'key|value key|value'"),
    "-x": (True, "intra-op threads (0 = ORT's default)"),
    "-y": (True, "inter-op threads, applied with -P (0 = ORT's default)"),
    "-o": (True, "graph optimization level: 0 disable, 1 basic, 2 extended, 3 layout, 99 all"),
    "-T": (True, "intra-op thread affinity string (session.intra_op_thread_affinities, 1-based)"),
    "-D": (False, "disable intra-op spinning (session.intra_op.allow_spinning = 0)"),
    "-Z": (False, "stop spinning between runs (session.force_spinning_stop = 1)"),
    "-z": (False, "flush denormals to zero"),
    "-d": (True, "cuDNN conv algo search: 0 EXHAUSTIVE (default), 1 HEURISTIC, 2 DEFAULT"),
    "-q": (False, "CUDA copies on a separate stream (do_copy_in_default_stream = 0)"),
    "-g": (False, "IO binding on the device (CUDA, TensorRT, TensorRT RTX)"),
    "-m": (True, "test mode: duration or times"),
    "-t": (True, "seconds to run in duration mode (default 600)"),
    "-r": (True, "repetitions in times mode (default 1000)"),
    "-I": (False, "generate input tensors (free dims are 1 unless -f)"),
    "-f": (True, "free dimension override by name, 'name:value' (repeatable)"),
    "-F": (True, "free dimension override by denotation, 'denotation:value' (repeatable)"),
    "-S": (True, "seed for generated inputs (-1: not initialised)"),
    "-s": (False, "print statistics (on by default without a result file)"),
    "-p": (True, "enable profiling, write to this file"),
    "-v": (False, "verbose"),
    "-u": (True, "save the optimized model to this path"),
    "-l": (False, "load the model from memory"),
    "-n": (False, "exit after session creation"),
    "-R": (True, "register a custom op library"),
    "-X": (False, "register onnxruntime-extensions custom ops"),
    "--spin_duration_us": (True, "intra-op spin duration in microseconds (newer builds)"),
    "--spin_backoff_max": (True, "intra-op spin exponential-backoff cap (newer builds)"),
}

PERF_TEST_EP_NAMES = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "DnnlExecutionProvider": "dnnl",
    "TensorrtExecutionProvider": "tensorrt",
    "NvTensorRTRTXExecutionProvider": "nvtensorrtrtx",
    "OpenVINOExecutionProvider": "openvino",
    "DmlExecutionProvider": "dml",
    "ACLExecutionProvider": "acl",
    "NnapiExecutionProvider": "nnapi",
    "CoreMLExecutionProvider": "coreml",
    "QNNExecutionProvider": "qnn",
    "SNPEExecutionProvider": "snpe",
    "MIGraphXExecutionProvider": "migraphx",
    "XnnpackExecutionProvider": "xnnpack",
    "VitisAIExecutionProvider": "vitisai",
    "WebGpuExecutionProvider": "webgpu",
    "VSINPUExecutionProvider": "vsinpu",
}

_CONV_ALGO = {"EXHAUSTIVE": "0", "HEURISTIC": "1", "DEFAULT": "2"}
PERF_TEST_SECONDS = 10
PERF_TEST_RESULT_FILE = "perf_result.txt"


def _pairs(entries: dict[str, str], what: str, flag: str) -> str:
    """perf_test's 'key|value key|value' list: whitespace splits pairs and the first '|' splits key from value."""
    for k, v in entries.items():
        if not k or any(c.isspace() for c in k) or "|" in k:
            raise ExportError(f"perf-test cannot express {what} key {k!r} in {flag} (no whitespace or '|' allowed)")
        if any(c.isspace() for c in v):
            raise ExportError(f"perf-test cannot express {what} {k!r} = {v!r} in {flag} (its values cannot "
                              "hold whitespace)")
    return " ".join(f"{k}|{v}" for k, v in entries.items())


def _render_perf_test(profile: Profile, model_path: str) -> str:
    s, p, w = profile.session, profile.provider, profile.workload
    name = profile.provider_name()
    if name not in PERF_TEST_EP_NAMES:
        raise ExportError(
            f"onnxruntime_perf_test has no -e name for provider {p.name!r} ({name}); it knows: "
            + ", ".join(sorted(set(PERF_TEST_EP_NAMES.values())))
        )
    ep = PERF_TEST_EP_NAMES[name]
    notes: list[str] = []
    args: list[str] = ["-e", ep, "-m", "duration", "-t", str(PERF_TEST_SECONDS), "-s"]
    args += ["-x", str(s.intra_op_num_threads)]
    if s.inter_op_num_threads:
        args += ["-y", str(s.inter_op_num_threads)]
    if s.execution_mode == "parallel":
        args.append("-P")
    args += ["-o", str(OPT_LEVEL_VALUES[s.graph_optimization_level])]
    if s.graph_optimization_level == "layout":
        notes.append("-o 3 (layout) needs an onnxruntime_perf_test of onnxruntime >= 1.23")
    if not s.enable_cpu_mem_arena:
        args.append("-A")
    if not s.enable_mem_pattern:
        args.append("-M")
    if not s.enable_mem_reuse:
        notes.append("enable_mem_reuse = false has no perf_test flag; it stays on")
    if not s.use_per_session_threads:
        notes.append("use_per_session_threads = false (global thread pools) has no perf_test flag")
    if s.log_severity_level != 2:
        notes.append(f"log_severity_level = {s.log_severity_level} has no perf_test flag (-v is verbose)")

    config = profile.config_entries()
    # Dedicated flags where perf_test has them; it warns when -C sets the same key, so each key goes one way.
    if config.get("session.intra_op.allow_spinning") == "0":
        del config["session.intra_op.allow_spinning"]
        args.append("-D")
    affinity = config.pop("session.intra_op_thread_affinities", None)
    if affinity is not None:
        args += ["-T", affinity]
    if config:
        args += ["-C", _pairs(config, "session config", "-C")]

    options = profile.provider_options()
    if ep == "cuda":
        algo = options.pop("cudnn_conv_algo_search", None)
        if algo is not None:
            args += ["-d", _CONV_ALGO[algo]]
        copy_default = options.pop("do_copy_in_default_stream", None)
        if copy_default == "0":
            args.append("-q")
    if options:
        if ep == "cpu":
            notes.append("perf_test passes no provider options to the CPU provider: "
                         + ", ".join(f"{k}={_json_str(v)}" for k, v in options.items()))
        else:
            args += ["-i", _pairs(options, "provider option", "-i")]
    if p.io_binding:
        if ep in ("cuda", "tensorrt", "nvtensorrtrtx"):
            args.append("-g")
        else:
            notes.append(f"io_binding has no perf_test flag for -e {ep} (-g binds on CUDA devices only)")

    if w.concurrency > 1:
        args += ["-c", str(w.concurrency)]
    if w.rate_hz > 0:
        notes.append(f"rate_hz = {w.rate_hz:g}: perf_test runs closed loop, back to back")
    if w.inputs:
        notes.append("inputs from .npy files are not carried over: without -I perf_test reads test_data_set_* "
                     "folders next to the model")
    else:
        args += ["-I", "-S", str(w.seed)]
    for dim, value in w.dims.items():
        if not dim or any(c.isspace() for c in dim) or ":" in dim:
            raise ExportError(f"perf-test cannot express free dimension {dim!r} in -f (no whitespace or ':')")
        args += ["-f", f"{dim}:{value}"]
    if w.batch:
        notes.append(f"batch = {w.batch}: perf_test has no batch flag; name the dimension with -f NAME:{w.batch}")
    if w.shapes:
        notes.append("whole input shapes are not carried over; use -f for their free dimensions")
    if w.values:
        notes.append("constant input values are not carried over (-I generates random inputs)")

    lines = ["# onnxruntime_perf_test command for an ortop profile. perf_test times Run() only, warms up with "
             "one run and runs closed loop; -t sets the seconds."]
    if profile.description:
        lines.append(f"# profile: {_json_str(profile.description)}")
    lines += [f"# note: {n}" for n in notes]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in profile.env.items())
    command = " ".join(shlex.quote(a) for a in ["onnxruntime_perf_test", *args, model_path, PERF_TEST_RESULT_FILE])
    lines.append(f"{env} {command}" if env else command)
    return "\n".join(lines) + "\n"


# ---- Olive --------------------------------------------------------------------------------------------------

def olive_settings(profile: Profile) -> dict[str, Any]:
    """Olive's ``inference_settings`` (olive/passes/onnx/session_params_tuning.py writes it and
    olive/common/ort_inference.py reads it): execution_mode and graph_optimization_level are ORT's integer enum
    values, provider options are strings, and intra/inter threads of 0 leave ORT's default."""
    s, p = profile.session, profile.provider
    refused = []
    if not s.enable_cpu_mem_arena:
        refused.append("enable_cpu_mem_arena = false")
    if not s.enable_mem_pattern:
        refused.append("enable_mem_pattern = false")
    if not s.enable_mem_reuse:
        refused.append("enable_mem_reuse = false")
    if not s.use_per_session_threads:
        refused.append("use_per_session_threads = false")
    if refused:
        raise ExportError(
            "Olive's inference settings cannot carry " + ", ".join(refused)
            + " (its evaluator never sets them); export with --to python or cpp instead"
        )
    session_options: dict[str, Any] = {
        "intra_op_num_threads": s.intra_op_num_threads,
        "inter_op_num_threads": s.inter_op_num_threads,
        "execution_mode": EXEC_MODE_VALUES[s.execution_mode],
        "graph_optimization_level": OPT_LEVEL_VALUES[s.graph_optimization_level],
        "extra_session_config": profile.config_entries(),
    }
    if s.log_severity_level != 2:
        session_options["log_severity_level"] = s.log_severity_level
    return {
        "execution_provider": [profile.provider_name()],
        "provider_options": [profile.provider_options()],
        "io_bind": p.io_binding,
        "session_options": session_options,
    }


def _render_olive(profile: Profile, model_path: str) -> str:
    return json.dumps(olive_settings(profile), indent=2) + "\n"


# ---- env, json ----------------------------------------------------------------------------------------------

def _render_env(profile: Profile, model_path: str) -> str:
    lines = []
    if profile.description:
        lines.append(f"# environment of profile {_json_str(profile.description)}")
    if not profile.env:
        lines.append("# this profile sets no environment variables")
    lines += [f"export {k}={shlex.quote(v)}" for k, v in profile.env.items()]
    return "\n".join(lines) + "\n"


def _render_json(profile: Profile, model_path: str) -> str:
    return json.dumps(profile.to_dict(full=True), indent=2) + "\n"


_RENDERERS: dict[str, Callable[[Profile, str], str]] = {
    "python": _render_python,
    "cpp": _render_cpp,
    "csharp": _render_csharp,
    "perf-test": _render_perf_test,
    "olive": _render_olive,
    "env": _render_env,
    "json": _render_json,
}
assert tuple(_RENDERERS) == FORMATS
assert set(EXECUTION_MODES) == set(EXEC_MODE_NAMES)


def render(profile: Profile, fmt: str, *, model_path: str | None = None) -> str:
    """The profile as text in ``fmt`` (one of FORMATS). ``model_path`` defaults to the profile's model or
    ``model.onnx``. Raises ExportError for an unknown format or a profile the format cannot express."""
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        close = difflib.get_close_matches(fmt, FORMATS, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ExportError(f"unknown export format {fmt!r}{hint}; valid formats: {', '.join(FORMATS)}")
    return renderer(profile, _model(profile, model_path))
