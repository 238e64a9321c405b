"""``--to python``: a module needing only onnxruntime, with ``make_session(model_path=..., providers=None)`` and
``example_feeds(session)``: inputs of the shapes the profile was measured with (``workload.shapes``, ``dims``,
``batch``, its .npy files and constants; a shape mix's typical shape, the mix named in a comment).

Python's SessionOptions takes every attribute by its ORT name, so each SessionOptions knob of the registry is
written generically (choices as their ORT enum member); config entries go through ``add_session_config_entry``.

What is process-wide is set up once, before the first session: the global thread pools, then the shared CPU arena
(``session.use_env_allocators``: the config entry alone shares nothing). A profile with replicas gets
``make_sessions()``, N sessions served at once; pinned, it gets the split of the cores worked out where the module
runs (``replica_cores()``, ortop's rule: whole NUMA nodes, else whole physical cores), each replica's pool sized and
pinned to its share (``replica_options``) and ``pin_caller`` for the threads that run it.

Over ~550 lines: most of it is the generated module's own text (the session, the global pools, the IO binding
and CUDA graph runner, the example feeds), kept as one template so what is pasted into serving code reads whole.
"""

from __future__ import annotations

from typing import Any

from ortop.config import knobs
from ortop.config.ort_names import ENUM_NAMES, provider_list
from ortop.config.profile import Profile
from ortop.config.providers import CPU, CUDA, TENSORRT
from ortop.export.common import (
    VERSION_NOTES,
    comment_lines,
    device,
    global_pools,
    input_shapes,
    session_settings,
    shared_arena,
    workload_text,
)
from ortop.export.literals import py_str
from ortop.export.replicas import pinned_pools, pinning_notes, replicas


def _value(knob: knobs.Knob, value: Any) -> str:
    """A knob value as Python source: enum members by name, strings escaped."""
    if knob.ort_enum:
        return f"ort.{knob.ort_enum}.{ENUM_NAMES[knob.ort_enum][value]}"
    if isinstance(value, str):
        return py_str(value)
    return repr(value)


def _header(profile: Profile, model_path: str) -> list[str]:
    """Docstring, env variables as comments (they must be set before the process starts), model and providers."""
    lines: list[str] = [
        '"""ONNX Runtime session settings exported from an ortop profile.',
        "",
        "make_session() builds an InferenceSession with exactly these settings; only onnxruntime is needed.",
        "example_feeds(session) makes inputs of the shapes the profile was measured with.",
    ]
    if replicas(profile) > 1 or profile.workload.pin_replicas:
        lines.append(f"make_sessions() builds the {replicas(profile)} replicas the profile serves at once"
                     + (", each on its own share of the cores." if profile.workload.pin_replicas else "."))
    said = workload_text(profile)
    if said:
        lines += ["", said]
    lines.append('"""')
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
    stdlib = (["import os"] if profile.workload.pin_replicas else []) + (
        ["import weakref"] if profile.provider.io_binding and profile.cuda_graph() else [])
    lines += [""] + ([*stdlib, ""] if stdlib else [])
    lines += ["import onnxruntime as ort", "", f"MODEL_PATH = {py_str(model_path)}"]
    entries = []
    for entry in provider_list(profile):
        if isinstance(entry, tuple):
            items = ", ".join(f"{py_str(k)}: {py_str(v)}" for k, v in entry[1].items())
            entries.append(f"({py_str(entry[0])}, {{{items}}})")
        else:
            entries.append(py_str(entry))
    lines.append(f"PROVIDERS = [{', '.join(entries)}]")
    return lines


def _global_pool_helper(pools: tuple[int, int]) -> list[str]:
    """A once-per-process helper: ORT takes the global pool sizes only before its first session."""
    return [
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


def _env_allocator_helper() -> list[str]:
    """A once-per-process helper: the shared arena exists only once registered, before the sessions that use it."""
    return [
        "",
        "_env_allocator_ready = False",
        "",
        "",
        "def _env_allocator():",
        '    """Register one CPU arena in onnxruntime\'s environment, once per process (session.use_env_allocators).',
        "",
        "    Every session created with the config entry session.use_env_allocators = \"1\" (session_options() adds",
        "    it) then allocates from this arena instead of an arena of its own, so N sessions hold about one arena's",
        "    memory, not N; the entry alone shares nothing. It comes before the first session, and after the global",
        "    thread pools where the profile has them (in C and C++ both belong to the environment, created with the",
        "    pools; this keeps the same order).",
        '    """',
        "    global _env_allocator_ready",
        "    if not _env_allocator_ready:",
        '        info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)',
        "        ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, -1, -1, -1))  # 0 and -1: ORT's defaults",
        "        _env_allocator_ready = True",
    ]


def _replica_helpers(profile: Profile) -> list[str]:
    """REPLICAS and, with pin_replicas, the split of the cores at run time and the per-replica options."""
    w = profile.workload
    lines = [
        "",
        "",
        "# workload.replicas: sessions of the model served at once in one process, each by callers of its own",
        f"# (workload.concurrency = {w.concurrency} each); make_sessions() builds them.",
        f"REPLICAS = {replicas(profile)}",
        f"CALLERS_PER_REPLICA = {w.concurrency}",
    ]
    if not w.pin_replicas:
        return lines
    lines += [
        "",
        "# workload.pin_replicas: each replica gets its own share of the cores. The split is worked out when this",
        "# module runs, on the host that runs it, not when the profile was exported: another host has other cores,",
        "# and a cpuset or taskset narrows them (os.sched_getaffinity). It is ortop's rule: whole NUMA nodes per",
        "# replica when there are at least as many nodes as replicas, else contiguous runs of the cores with SMT",
        "# siblings side by side (whole physical cores), as even as the count allows; with more replicas than cores",
        "# they share cores, one each, round robin.",
        "",
        "",
        "def _cpulist(path):",
        '    """The CPUs of a sysfs list such as "0-3,8-11"; () where there is none (not Linux, no such file)."""',
        "    try:",
        "        with open(path) as f:",
        "            text = f.read().strip()",
        "    except OSError:",
        "        return ()",
        "    cpus = []",
        '    for part in text.split(","):',
        "        if part:",
        '            lo, _, hi = part.partition("-")',
        "            cpus.extend(range(int(lo), int(hi or lo) + 1))",
        "    return tuple(cpus)",
        "",
        "",
        "def split_cores(cores, n, nodes=()):",
        '    """``n`` shares of ``cores`` (0-based, in the order given); ``nodes``: each NUMA node\'s cores."""',
        "    nodes = [node for node in nodes if node]",
        "    if n > 1 and len(nodes) >= n:",
        "        per, extra = divmod(len(nodes), n)",
        "        out, at = [], 0",
        "        for i in range(n):",
        "            take = per + (1 if i < extra else 0)",
        "            out.append(tuple(sorted(c for node in nodes[at:at + take] for c in node)))",
        "            at += take",
        "        return out",
        "    if n >= len(cores):",
        "        return [(cores[i % len(cores)],) for i in range(n)]",
        "    size, extra = divmod(len(cores), n)",
        "    out, at = [], 0",
        "    for i in range(n):",
        "        k = size + (1 if i < extra else 0)",
        "        out.append(tuple(cores[at:at + k]))",
        "        at += k",
        "    return out",
        "",
        "",
        "def replica_cores(n=REPLICAS):",
        '    """Each replica\'s cores on this host. Call it once, before pinning any thread: it reads the calling',
        '    thread\'s own affinity."""',
        '    getaffinity = getattr(os, "sched_getaffinity", None)',
        "    usable = sorted(getaffinity(0)) if getaffinity else list(range(os.cpu_count() or 1))",
        "    order = []  # SMT siblings side by side, so a contiguous share is whole physical cores",
        "    for c in usable:",
        '        for s in _cpulist(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") or (c,):',
        "            if s in usable and s not in order:",
        "                order.append(s)",
        '    base = "/sys/devices/system/node"',
        '    entries = os.listdir(base) if os.path.isdir(base) else []',
        '    ids = sorted(int(d[4:]) for d in entries if d.startswith("node") and d[4:].isdigit())',
        '    nodes = [tuple(c for c in _cpulist(f"{base}/node{i}/cpulist") if c in usable) for i in ids]',
        "    return split_cores(order, n, nodes)",
        "",
        "",
        "def pin_caller(cores):",
        '    """Pin the calling thread to a replica\'s cores: call it first in every thread that runs that replica\'s',
        "    session. The thread that calls run() is thread 0 of the session's intra-op pool, so it belongs on the",
        '    share too (Linux: os.sched_setaffinity(0, ...) pins this thread only)."""',
        '    if hasattr(os, "sched_setaffinity"):',
        "        os.sched_setaffinity(0, cores)",
    ]
    if pinned_pools(profile):
        threads = profile.session.intra_op_num_threads
        lines += [
            "",
            "",
            f"INTRA_OP_NUM_THREADS = {threads}  # the profile's; 0 = each replica's pool sized to its share",
            "",
            "",
            "def replica_options(cores):",
            '    """session_options() for the replica on ``cores``: its intra-op pool sized to its share when the',
            "    profile leaves the thread count to ORT (ORT sizes every pool to the whole host, and the replicas'",
            "    pools would fight for the same cores), its pool threads after the first pinned one core each, round",
            '    robin over the share (thread 0 is the caller: pin_caller)."""',
            "    so = session_options()",
            "    threads = INTRA_OP_NUM_THREADS or len(cores)",
            "    so.intra_op_num_threads = threads",
            "    if threads > 1:  # one core per pool thread after the first, ';' between threads; ORT counts from 1",
            "        affinities = ';'.join(str(cores[j % len(cores)] + 1) for j in range(1, threads))",
            '        so.add_session_config_entry("session.intra_op_thread_affinities", affinities)',
            "    return so",
        ]
    else:
        lines += ["", "", *[f"# {note}." for note in pinning_notes(profile)]]
    return lines


def _make_sessions(profile: Profile) -> list[str]:
    """make_sessions(): the REPLICAS sessions, each on its share when pinned."""
    lines = ["", ""]
    if not profile.workload.pin_replicas:
        return lines + [
            "def make_sessions(model_path=MODEL_PATH, providers=None, n=REPLICAS):",
            '    """``n`` sessions of the model with the profile\'s settings, served at once: give each its',
            '    CALLERS_PER_REPLICA threads that call its run()."""',
            "    return [make_session(model_path, providers) for _ in range(n)]",
        ]
    make = "make_session(model_path, providers, replica_options(share))" if pinned_pools(profile) else \
        "make_session(model_path, providers)"
    return lines + [
        "def make_sessions(model_path=MODEL_PATH, providers=None, cores=None):",
        '    """One session per replica, served at once; ``cores`` is replica_cores() unless given. Replica i runs on',
        "    cores[i]: each of its CALLERS_PER_REPLICA threads calls pin_caller(cores[i]) before its first run:",
        "",
        "        cores = replica_cores()",
        "        sessions = make_sessions(cores=cores)",
        '    """',
        "    cores = replica_cores() if cores is None else cores",
        f"    return [{make} for share in cores]",
    ]


def _io_binding(profile: Profile) -> list[str]:
    """run_with_io_binding(): how the profile's runs keep tensors on the device."""
    where, device_id = device(profile)
    lines = [
        "",
        "",
        "# The profile runs through IO binding: inputs are copied to the device once and outputs stay there.",
        f"DEVICE = {py_str(where)}",
        f"DEVICE_ID = {device_id}",
    ]
    if profile.cuda_graph():
        return lines + _graph_binding()
    return lines + [
        "",
        "",
        "def run_with_io_binding(session, feeds):",
        '    """One run through IO binding; returns the outputs copied to numpy."""',
        "    binding = session.io_binding()",
        "    for name, array in feeds.items():",
        "        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, DEVICE, DEVICE_ID))",
        "    for output in session.get_outputs():",
        "        binding.bind_output(output.name, DEVICE, DEVICE_ID)",
        "    session.run_with_iobinding(binding)",
        "    return binding.copy_outputs_to_cpu()",
    ]


def _graph_binding() -> list[str]:
    """GraphRunner and run_with_io_binding() for enable_cuda_graph: one binding per session, made once."""
    return [
        "",
        "# enable_cuda_graph: the first run_with_iobinding() captures the run as a CUDA graph (after the regular runs",
        "# ORT needs first, all inside that one call) and every later run replays it on the same device buffers. So",
        "# the binding is made once per session: inputs and outputs allocated on the device and bound once, new",
        "# inputs copied into the bound buffers in place (OrtValue.update_inplace), the shapes the same every time.",
        "# A plain session.run() would capture ORT's own copies and buffers instead. ORT keeps the graph per thread:",
        "# make all runs of a session from one thread.",
        "ELEMENT_TYPES = {  # ORT type -> ONNX element type, as OrtValue.ortvalue_from_shape_and_type takes it",
        '    "tensor(float)": 1, "tensor(uint8)": 2, "tensor(int8)": 3, "tensor(uint16)": 4, "tensor(int16)": 5,',
        '    "tensor(int32)": 6, "tensor(int64)": 7, "tensor(bool)": 9, "tensor(float16)": 10, "tensor(double)": 11,',
        '    "tensor(uint32)": 12, "tensor(uint64)": 13, "tensor(bfloat16)": 16, "tensor(float8e4m3fn)": 17,',
        '    "tensor(float8e4m3fnuz)": 18, "tensor(float8e5m2)": 19, "tensor(float8e5m2fnuz)": 20,',
        "}",
        "",
        "",
        "def _bits(array):",
        '    """``array`` as update_inplace takes it: numpy\'s own types as they are, others (ml_dtypes\' bfloat16,',
        '    float8) as unsigned integers of the same size (ORT copies the bytes)."""',
        '    return array if array.dtype.kind in "biufc" else array.view(f"u{array.dtype.itemsize}")',
        "",
        "",
        "class GraphRunner:",
        '    """One session\'s IO binding for CUDA graphs, made once: bound buffers on the device, refreshed in place.',
        "",
        "        runner = GraphRunner(session, feeds)   # allocates and binds; the first run() captures",
        "        outputs = runner.run(new_feeds)         # copies new_feeds in place, replays, returns numpy outputs",
        '    """',
        "",
        "    def __init__(self, session, feeds):",
        "        self.session = session",
        "        self.binding = session.io_binding()",
        "        types = {i.name: ELEMENT_TYPES[i.type] for i in session.get_inputs()}",
        "        self.inputs = {}",
        "        for name, array in feeds.items():",
        "            shape = list(array.shape)",
        "            value = ort.OrtValue.ortvalue_from_shape_and_type(shape, types[name], DEVICE, DEVICE_ID)",
        "            value.update_inplace(_bits(array))",
        "            self.binding.bind_ortvalue_input(name, value)",
        "            self.inputs[name] = value",
        "        shapes = self._output_shapes()",
        "        self.outputs = {}",
        "        for output in session.get_outputs():",
        "            shape, element = shapes[output.name], ELEMENT_TYPES[output.type]",
        "            value = ort.OrtValue.ortvalue_from_shape_and_type(shape, element, DEVICE, DEVICE_ID)",
        "            self.binding.bind_ortvalue_output(output.name, value)",
        "            self.outputs[output.name] = value",
        "",
        "    def _output_shapes(self):",
        '        """The outputs\' shapes: the model\'s own when fixed, else from one run that skips capture',
        '        (run config entry gpu_graph_id = -1), its outputs placed by ORT."""',
        "        outputs = self.session.get_outputs()",
        "        if all(isinstance(d, int) for o in outputs for d in o.shape):",
        "            return {o.name: list(o.shape) for o in outputs}",
        "        for o in outputs:",
        "            self.binding.bind_output(o.name, DEVICE, DEVICE_ID)",
        "        skip = ort.RunOptions()",
        '        skip.add_run_config_entry("gpu_graph_id", "-1")',
        "        self.session.run_with_iobinding(self.binding, skip)",
        "        shapes = {o.name: value.shape() for o, value in zip(outputs, self.binding.get_outputs())}",
        "        self.binding.clear_binding_outputs()",
        "        return shapes",
        "",
        "    def run(self, feeds=None):",
        '        """Copy ``feeds`` (any inputs, same shapes) into the bound buffers, run, return the outputs."""',
        "        for name, array in (feeds or {}).items():",
        "            value = self.inputs[name]",
        "            if list(array.shape) != value.shape():",
        "                raise ValueError(f'input {name}: shape {list(array.shape)}, bound as {value.shape()}: '",
        "                                 'a CUDA graph replays the shapes it captured')",
        "            value.update_inplace(_bits(array))",
        "        self.session.run_with_iobinding(self.binding)",
        "        return self.binding.copy_outputs_to_cpu()",
        "",
        "",
        "_runners = weakref.WeakKeyDictionary()  # session -> its GraphRunner",
        "",
        "",
        "def run_with_io_binding(session, feeds):",
        '    """One run through the session\'s GraphRunner (made on the first call); returns the outputs copied to',
        '    numpy. Later calls copy ``feeds`` into the bound inputs in place and replay the graph."""',
        "    runner = _runners.get(session)",
        "    if runner is None:",
        "        runner = _runners[session] = GraphRunner(session, feeds)",
        "        return runner.run()",
        "    return runner.run(feeds)",
    ]


def _preload_helper() -> list[str]:
    """A once-per-process helper: the CUDA libraries loaded before the first CUDA or TensorRT session."""
    return [
        "",
        "_cuda_libraries_ready = False",
        "",
        "",
        "def _preload_cuda_libraries():",
        '    """Load the CUDA and cuDNN libraries pip installs (onnxruntime-gpu[cuda,cudnn]) before the first session,',
        "    once per process: onnxruntime's CUDA provider library does not find them by itself and the session",
        "    runs on the CPU. onnxruntime.preload_dlls() exists from onnxruntime 1.21; it prints what it could not",
        '    load, and a failure here is a warning (make_session then says whether the provider is active)."""',
        "    global _cuda_libraries_ready",
        "    if not _cuda_libraries_ready:",
        "        _cuda_libraries_ready = True",
        '        preload = getattr(ort, "preload_dlls", None)',
        "        if preload is not None:",
        "            try:",
        "                preload()",
        "            except Exception as exc:",
        "                import warnings",
        "",
        '                warnings.warn(f"onnxruntime.preload_dlls() failed: {exc}", RuntimeWarning, stacklevel=3)',
    ]


def _feeds_helper(profile: Profile) -> list[str]:
    """INPUT_SHAPES, FREE_DIMS and example_feeds(): inputs of the shapes the profile was measured with."""
    ins = input_shapes(profile)
    w = profile.workload
    shapes = ", ".join(f"{py_str(k)}: {list(v)!r}" for k, v in ins.shapes.items())
    dims = ", ".join(f"{py_str(k)}: {v}" for k, v in ins.dims.items())
    files = ", ".join(f"{py_str(k)}: {py_str(v)}" for k, v in w.inputs.items())
    values = ", ".join(f"{py_str(k)}: {float(v)!r}" for k, v in w.values.items())
    lines = [
        "",
        "",
        "# The inputs of the profile's workload: a figure measured with these settings, if any was, came from",
        "# these shapes, so feed these (or your real data of the same shapes) when you check them. A free dimension",
        "# is keyed by its name, or as 'input[axis]' where the model leaves it unnamed; a dimension the profile",
        "# does not set is 1.",
    ]
    if ins.mixed:
        lines += comment_lines(
            "The profile's workload is a shape mix, one shape per request (" + ", ".join(ins.mixed) + "): "
            "this is its typical shape (the weighted median); pass dims=/shapes= to example_feeds() for the "
            "others.", "# ")
    lines += [
        f"INPUT_SHAPES = {{{shapes}}}",
        f"FREE_DIMS = {{{dims}}}",
        f"BATCH = {ins.batch}  # the leading free dimension of every input (0: as FREE_DIMS says, else 1)",
        f"INPUT_FILES = {{{files}}}  # .npy files by input name",
        f"INPUT_VALUES = {{{values}}}  # constant fills by input name",
        f"SEED = {int(w.seed)}",
        "NUMPY_TYPES = {",
        '    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",',
        '    "tensor(int8)": "int8", "tensor(int16)": "int16", "tensor(int32)": "int32", "tensor(int64)": "int64",',
        '    "tensor(uint8)": "uint8", "tensor(uint16)": "uint16", "tensor(uint32)": "uint32",',
        '    "tensor(uint64)": "uint64", "tensor(bool)": "bool",',
        "}",
        "",
        "",
        "def input_shape(model_input, dims=None, shapes=None):",
        '    """The shape to feed ``model_input`` (an entry of session.get_inputs()): its whole shape from',
        "    INPUT_SHAPES (or ``shapes``), else its declared dims with each free one from FREE_DIMS (or ``dims``):",
        '    by name, or as \'input[axis]\' where unnamed; BATCH on a free leading axis; 1 otherwise."""',
        "    shapes = {**INPUT_SHAPES, **(shapes or {})}",
        "    dims = {**FREE_DIMS, **(dims or {})}",
        "    if model_input.name in shapes:",
        "        return tuple(int(n) for n in shapes[model_input.name])",
        "    out = []",
        "    for axis, d in enumerate(model_input.shape):",
        "        if isinstance(d, int) and d >= 0:",
        "            out.append(d)",
        "        elif isinstance(d, str) and d in dims:",
        "            out.append(int(dims[d]))",
        '        elif f"{model_input.name}[{axis}]" in dims:',
        '            out.append(int(dims[f"{model_input.name}[{axis}]"]))',
        "        else:",
        "            out.append(BATCH if axis == 0 and BATCH > 0 else 1)",
        "    return tuple(out)",
        "",
        "",
        "def example_feeds(session, dims=None, shapes=None, seed=SEED):",
        '    """Inputs for ``session.run(None, example_feeds(session))`` of the shapes the profile was measured with',
        "    (input_shape()): INPUT_FILES loaded, INPUT_VALUES as constants, other floats uniform in [-1, 1) drawn",
        '    with ``seed``, integers 1 (valid as ids and masks alike), booleans True."""',
        "    import numpy as np",
        "",
        "    rng = np.random.default_rng(seed)",
        "    feeds = {}",
        "    for model_input in session.get_inputs():",
        "        name = model_input.name",
        "        if name in INPUT_FILES:",
        "            feeds[name] = np.load(INPUT_FILES[name], allow_pickle=False)",
        "            continue",
        "        if model_input.type not in NUMPY_TYPES:",
        "            raise ValueError(f'input {name}: no example data for {model_input.type}; feed your own')",
        "        dtype = np.dtype(NUMPY_TYPES[model_input.type])",
        "        shape = input_shape(model_input, dims, shapes)",
        "        if name in INPUT_VALUES:",
        "            feeds[name] = np.full(shape, INPUT_VALUES[name]).astype(dtype)",
        '        elif dtype.kind == "f":',
        "            feeds[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)",
        "        else:",
        "            feeds[name] = np.ones(shape, dtype=dtype)",
        "    return feeds",
    ]
    return lines


def render(profile: Profile, model_path: str) -> str:
    """The Python module for ``profile``."""
    lines = _header(profile, model_path)
    pools = global_pools(profile)
    if pools:
        lines += _global_pool_helper(pools)
    if shared_arena(profile):
        lines += _env_allocator_helper()
    gpu = profile.provider_name() in (CUDA, TENSORRT)
    if gpu:
        lines += _preload_helper()
    many = replicas(profile) > 1 or profile.workload.pin_replicas
    if many:
        lines += _replica_helpers(profile)
    lines += [
        "",
        "",
        "def session_options():",
        '    """SessionOptions carrying every setting of the profile."""',
        "    so = ort.SessionOptions()",
    ]
    for knob, value in session_settings(profile):
        note = VERSION_NOTES.get((knob.key, value))
        if note:
            lines.append(f"    # {note}")
        lines.append(f"    so.{knob.ort_name} = {_value(knob, value)}")
    lines += [f"    so.add_session_config_entry({py_str(k)}, {py_str(v)})" for k, v in profile.config_entries().items()]
    # a pinned replica brings its own options (replica_options); None is session_options()
    own = ", sess_options=None" if pinned_pools(profile) else ""
    options = "session_options() if sess_options is None else sess_options" if own else "session_options()"
    cpu = profile.provider_name() == CPU
    lines += ["    return so", "", ""]
    if cpu:
        lines += [
            f"def make_session(model_path=MODEL_PATH, providers=None{own}):",
            '    """An InferenceSession with the profile\'s settings; ``providers`` overrides PROVIDERS."""',
        ]
    else:
        # ORT falls back to the CPU when the provider's libraries cannot load, with a log line and nothing else;
        # the C++ and C# exports throw there, so this one says it too.
        lines += [
            f"def make_session(model_path=MODEL_PATH, providers=None{own}, strict=False):",
            '    """An InferenceSession with the profile\'s settings; ``providers`` overrides PROVIDERS. '
            'Warns (raises with strict=True) when the requested provider is not active."""',
        ]
    if gpu:
        lines.append("    _preload_cuda_libraries()")
    if pools:
        lines.append("    _global_thread_pools()")
    if shared_arena(profile):
        lines.append("    _env_allocator()")
    if cpu:
        lines += [
            "    return ort.InferenceSession(",
            f"        model_path, sess_options={options},",
            "        providers=PROVIDERS if providers is None else providers,",
            "    )",
        ]
    else:
        lines += [
            "    session = ort.InferenceSession(",
            f"        model_path, sess_options={options},",
            "        providers=PROVIDERS if providers is None else providers,",
            "    )",
            f"    if providers is None and {py_str(profile.provider_name())} not in session.get_providers():",
            f"        message = ({py_str(profile.provider_name())} + ' is not active (running on '",
            "                   + ', '.join(session.get_providers()) + '): its libraries did not load')",
            "        if strict:",
            "            raise RuntimeError(message)",
            "        import warnings",
            "",
            "        warnings.warn(message, RuntimeWarning, stacklevel=2)",
            "    return session",
        ]
    if many:
        lines += _make_sessions(profile)
    lines += _feeds_helper(profile)
    if profile.provider.io_binding:
        lines += _io_binding(profile)
    return "\n".join(lines) + "\n"
