"""``--to perf-test``: an ``onnxruntime_perf_test`` command line.

perf_test has dedicated flags for some knobs, declared in :data:`KNOB_FLAGS` by knob key. Every other config entry
knob goes through ``-C``, every other provider option through ``-i``, and a SessionOptions knob it has no flag for
is listed as a ``# note:`` line above the command, which stays runnable. It refuses execution providers with no
``-e`` name, and keys or values its ``"key|value key|value"`` lists cannot hold.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from ortop.config import knobs
from ortop.config.ort_names import OPT_LEVEL_VALUES
from ortop.config.profile import Profile
from ortop.config.providers import short_name
from ortop.config.values import affinity_string, truthy
from ortop.export.common import ExportError, input_shapes, literal, plain_name, unnamed_dim
from ortop.export.literals import json_str
from ortop.measure.arrivals import CLOSED, mode_of

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

# perf_test's own flags for a knob's value, by knob key: the arguments to add ([] = nothing, the value is
# perf_test's default), or None when no flag says that value, so the knob takes the generic route (-C, -i, a
# note). perf_test warns when -C sets a key a flag also sets, so each key goes one way. Provider options get the
# value as written in the profile.
KNOB_FLAGS: dict[str, Callable[[Any], list[str] | None]] = {
    "session.intra_op_num_threads": lambda v: ["-x", str(v)],
    "session.inter_op_num_threads": lambda v: ["-y", str(v)] if v else [],
    "session.execution_mode": lambda v: ["-P"] if v == "parallel" else [],
    "session.graph_optimization_level": lambda v: ["-o", str(OPT_LEVEL_VALUES[v])],
    "session.enable_cpu_mem_arena": lambda v: [] if v else ["-A"],
    "session.enable_mem_pattern": lambda v: [] if v else ["-M"],
    "session.allow_spinning": lambda v: ["-D"] if v is False else None,
    "session.intra_op_thread_affinities": lambda v: ["-T", affinity_string(v)],
    "provider.options.cudnn_conv_algo_search": lambda v: ["-d", _CONV_ALGO[str(v)]],
    "provider.options.do_copy_in_default_stream": lambda v: [] if truthy(v) else ["-q"],
}

# The note for a knob perf_test has no flag for, by knob key, where there is more to say than _NO_FLAG.
_NO_FLAG = "{name} = {value} has no perf_test flag"
_NO_FLAG_NOTES = {
    "session.enable_mem_reuse": "{name} = {value} has no perf_test flag; it stays on",
    "session.use_per_session_threads": "{name} = {value} (global thread pools) has no perf_test flag",
    "session.log_severity_level": "{name} = {value} has no perf_test flag (-v is verbose)",
}
_VALUE_NOTES = {("session.graph_optimization_level", "layout"):
                "-o 3 (layout) needs an onnxruntime_perf_test of onnxruntime >= 1.23"}


def _pairs(entries: dict[str, str], what: str, flag: str) -> str:
    """perf_test's 'key|value key|value' list: whitespace splits pairs and the first '|' splits key from value."""
    for k, v in entries.items():
        if not k or any(c.isspace() for c in k) or "|" in k:
            raise ExportError(f"perf-test cannot express {what} key {k!r} in {flag} (no whitespace or '|' allowed)")
        if any(c.isspace() for c in v):
            raise ExportError(f"perf-test cannot express {what} {k!r} = {v!r} in {flag} (its values cannot "
                              "hold whitespace)")
    return " ".join(f"{k}|{v}" for k, v in entries.items())


def _session(profile: Profile, args: list[str], notes: list[str]) -> None:
    """SessionOptions knobs (and the global pools): their flags, or a note naming the ones perf_test cannot set."""
    for knob in knobs.settings(knobs.SESSION_OPTION, knobs.GLOBAL_POOL):
        value = knob.read(profile)
        if value is None or (knob.target == knobs.GLOBAL_POOL and profile.session.use_per_session_threads):
            continue
        flag = KNOB_FLAGS.get(knob.key)
        carried = flag(value) if flag else None
        if carried is not None:
            args += carried
        elif value != knob.default:
            notes.append(_NO_FLAG_NOTES.get(knob.key, _NO_FLAG).format(name=knob.name, value=literal(value)))
        if (knob.key, value) in _VALUE_NOTES:
            notes.append(_VALUE_NOTES[(knob.key, value)])
    config = profile.config_entries()
    for knob in knobs.settings(knobs.CONFIG_ENTRY):
        value = knob.read(profile)
        flag = KNOB_FLAGS.get(knob.key)
        carried = flag(value) if flag and value is not None else None
        if carried is not None:
            del config[knob.ort_name]
            args += carried
    if config:
        args += ["-C", _pairs(config, "session config", "-C")]
    if profile.session.use_env_allocators:
        notes.append("use_env_allocators = true: perf_test registers no allocator in its environment, so "
                     "session.use_env_allocators|1 in -C shares nothing (its one session keeps an arena of its own)")


def _provider(profile: Profile, ep: str, args: list[str], notes: list[str]) -> None:
    """Provider options: their own flags where perf_test has them, the rest through -i; IO binding via -g."""
    options = profile.provider_options()
    for knob in knobs.entries("provider.options", short_name(profile.provider.name)):
        flag = KNOB_FLAGS.get(knob.key)
        if flag is None or knob.name not in options:
            continue
        carried = flag(profile.provider.options[knob.name])
        if carried is not None:
            del options[knob.name]
            args += carried
    if options:
        if ep == "cpu":
            notes.append("perf_test passes no provider options to the CPU provider: "
                         + ", ".join(f"{k}={json_str(v)}" for k, v in options.items()))
        else:
            args += ["-i", _pairs(options, "provider option", "-i")]
    if profile.provider.io_binding:
        if ep in ("cuda", "tensorrt", "nvtensorrtrtx"):
            args.append("-g")
        else:
            notes.append(f"io_binding has no perf_test flag for -e {ep} (-g binds on CUDA devices only)")


def _workload(profile: Profile, model_path: str, args: list[str], notes: list[str]) -> None:
    """ortop's own workload knobs: the few perf_test can carry (callers, seed, free dims), notes for the rest."""
    w = profile.workload
    if w.concurrency > 1:
        args += ["-c", str(w.concurrency)]
    if w.replicas > 1:
        notes.append(f"replicas = {w.replicas}: perf_test serves one session (-c K is K concurrent Run() calls of "
                     f"it), not {w.replicas} sessions served at once")
    if w.pin_replicas:
        notes.append("pin_replicas = true: perf_test pins no callers (-T pins one session's pool threads; "
                     "taskset -c CORES pins the whole process)")
    if mode_of(w) != CLOSED:
        notes.append(f"arrival = {mode_of(w)}" + (f", rate_hz = {w.rate_hz:g}" if w.rate_hz > 0 else "")
                     + ": perf_test cannot pace requests or queue them; it runs closed loop, back to back")
    if w.dim_mix or w.shape_mix:
        notes.append("shape mixes (" + ", ".join(input_shapes(profile).mixed) + "): perf_test feeds one shape; -f "
                     "fixes each named free dim to one size (a mixed one to its typical size, the weighted median)")
    if w.inputs:
        notes.append("inputs from .npy files are not carried over: without -I perf_test reads test_data_set_* "
                     "folders next to the model")
    else:
        args += ["-I", "-S", str(w.seed)]
    named, unset, ran = _free_dims(profile, model_path)
    for dim, value in named.items():
        if not dim or any(c.isspace() for c in dim) or ":" in dim:
            raise ExportError(f"perf-test cannot express free dimension {dim!r} in -f (no whitespace or ':')")
        args += ["-f", f"{dim}:{value}"]
    if unset and not w.inputs:
        notes.append(_another_shape(unset, ran))
    if w.batch:
        notes.append(f"batch = {w.batch}: perf_test has no batch flag; name the dimension with -f NAME:{w.batch}")
    if w.values:
        notes.append("constant input values are not carried over (-I generates random inputs)")


def _free_dims(profile: Profile, model_path: str) -> tuple[dict[str, int], list[str], list[str]]:
    """The profile's input shapes as perf_test can take them: (named free dims for -f, what -f cannot set, the
    shapes the command would then run as ``x=1x3x1x1``).

    -f sets a free dimension by its ``dim_param`` name; -I makes every other free dimension 1. An unnamed dimension
    (``x[2]``, as PP-OCR's height) has no name to give, and a whole shape (``workload.shapes``) reaches -f only
    through the names the model gives its axes, so the model is read when the profile has whole shapes.
    """
    ins = input_shapes(profile)
    w = profile.workload
    named: dict[str, int] = {}
    unset: list[str] = []
    for key, value in ins.dims.items():
        if unnamed_dim(key):
            unset.append(f"{plain_name(key)}={value} (an unnamed dim)")
        else:
            named[key] = value
    if not ins.shapes:
        return named, unset, []
    info = _model_info(model_path)
    inputs = {t.name: t for t in info.inputs} if info is not None else {}
    ran: list[str] = []
    for name, shape in ins.shapes.items():
        t = inputs.get(name)
        said = f"{plain_name(name)}={'x'.join(map(str, shape))}"
        if t is None or t.shape is None or len(t.shape) != len(shape):
            why = "the model could not be read here" if info is None else "the model declares no such shape"
            unset.append(f"{said} ({why}, so no dim of it can be named in -f)")
            continue
        out = []
        for axis, (declared, size) in enumerate(zip(t.shape, shape)):
            if isinstance(declared, str) and named.setdefault(declared, size) != size:
                unset.append(f"{said} (its dim {plain_name(declared)} is {named[declared]} elsewhere)")
            elif declared is None:
                unset.append(f"{plain_name(name)}[{axis}]={size} (an unnamed dim of {said})")
            out.append(declared if isinstance(declared, int) else named.get(declared, 1) if declared else 1)
        if out != list(shape):
            ran.append(f"{plain_name(name)}={'x'.join(map(str, out))}")
    if w.inputs:
        return named, [], []
    return named, unset, ran


def _model_info(model_path: str) -> Any:
    """The model's inputs (``ortop.model.ModelInfo``), or None where the file cannot be read here (an export
    may name a path on another machine)."""
    from ortop.model import ModelError, load_model

    try:
        return load_model(model_path)
    except (ModelError, OSError):
        return None


# What to do when -f cannot set a shape: feed perf_test real tensors. Without -I it reads test_data_set_*/input_N.pb
# (TensorProto files) from the model's folder; the Python export's example_feeds() makes arrays of the profile's
# shapes, and onnx.numpy_helper writes them.
_TEST_DATA = ("python -c \"import os, onnx.numpy_helper as nh, ort_session as s; os.makedirs('test_data_set_0', "
              "exist_ok=True); [open(f'test_data_set_0/input_{i}.pb', 'wb').write(nh.from_array(a, n)"
              ".SerializeToString()) for i, (n, a) in enumerate(s.example_feeds(s.make_session()).items())]\"")


def _another_shape(unset: list[str], ran: list[str]) -> str:
    runs = f" ({', '.join(ran)})" if ran else ""
    return (f"perf_test cannot set {'; '.join(unset)}: -f sets free dims by name only and -I makes every other one "
            f"1, so this command runs another shape{runs} than the profile was measured with. To run the profile's "
            "shape, give perf_test real inputs: in the model's folder, `ortop export PROFILE --to python -o "
            f"ort_session.py`, then {_TEST_DATA}, and run the command without -I and -S (perf_test then reads "
            "test_data_set_0/input_N.pb)")


# Flags newer than perf_test itself, and the first builds that take them: -C arrived with onnxruntime 1.17, -g in
# 2025 builds, the spin flags in 2026 builds. -A/-M were no-ops in some earlier builds (their defaults were inverted
# there, fixed since).
FLAG_SINCE: dict[str, str] = {
    "-C": "onnxruntime_perf_test >= 1.17 for -C",
    "-g": "a 2025 or later build for -g",
    "--spin_duration_us": "a 2026 or later build for --spin_duration_us",
    "--spin_backoff_max": "a 2026 or later build for --spin_backoff_max",
    "-A": "a build where -A disables the arena (some older ones had the default inverted)",
    "-M": "a build where -M disables the memory pattern (some older ones had the default inverted)",
}


def _minimum_versions(args: list[str]) -> list[str]:
    return [FLAG_SINCE[a] for a in dict.fromkeys(args) if a in FLAG_SINCE]


def render(profile: Profile, model_path: str) -> str:
    """The perf_test command for ``profile``, with ``# note:`` lines for what it cannot carry."""
    name = profile.provider_name()
    if name not in PERF_TEST_EP_NAMES:
        raise ExportError(
            f"onnxruntime_perf_test has no -e name for provider {profile.provider.name!r} ({name}); it knows: "
            + ", ".join(sorted(set(PERF_TEST_EP_NAMES.values())))
        )
    ep = PERF_TEST_EP_NAMES[name]
    notes: list[str] = []
    args: list[str] = ["-e", ep, "-m", "duration", "-t", str(PERF_TEST_SECONDS), "-s"]
    _session(profile, args, notes)
    _provider(profile, ep, args, notes)
    _workload(profile, model_path, args, notes)
    lines = ["# onnxruntime_perf_test command for an ortop profile. perf_test times Run() only, warms up with "
             "one run and runs closed loop; -t sets the seconds."]
    needs = _minimum_versions(args)
    if needs:
        lines.append("# needs: " + "; ".join(needs) + " (older builds reject or ignore these flags)")
    if profile.description:
        lines.append(f"# profile: {json_str(profile.description)}")
    lines += [f"# note: {n}" for n in notes]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in profile.env.items())
    command = " ".join(shlex.quote(a) for a in ["onnxruntime_perf_test", *args, model_path, PERF_TEST_RESULT_FILE])
    lines.append(f"{env} {command}" if env else command)
    return "\n".join(lines) + "\n"
