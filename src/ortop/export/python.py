"""``--to python``: a module needing only onnxruntime, with ``make_session(model_path=..., providers=None)``.

Python's SessionOptions takes every attribute by its ORT name, so each SessionOptions knob of the registry is
written generically (choices as their ORT enum member); config entries go through ``add_session_config_entry``.
"""

from __future__ import annotations

from typing import Any

from ortop.config import knobs
from ortop.config.ort_names import ENUM_NAMES, provider_list
from ortop.config.profile import Profile
from ortop.export.common import VERSION_NOTES, device, global_pools, session_settings
from ortop.export.literals import py_str


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


def _io_binding(profile: Profile) -> list[str]:
    """run_with_io_binding(): how the profile's runs keep tensors on the device."""
    where, device_id = device(profile)
    lines = [
        "",
        "",
        "# The profile runs through IO binding: inputs are copied to the device once and outputs stay there.",
        f"DEVICE = {py_str(where)}",
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
    return lines + [
        "    binding = session.io_binding()",
        "    for name, array in feeds.items():",
        "        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(array, DEVICE, DEVICE_ID))",
        "    for output in session.get_outputs():",
        "        binding.bind_output(output.name, DEVICE, DEVICE_ID)",
        "    session.run_with_iobinding(binding)",
        "    return binding.copy_outputs_to_cpu()",
    ]


def render(profile: Profile, model_path: str) -> str:
    """The Python module for ``profile``."""
    lines = _header(profile, model_path)
    pools = global_pools(profile)
    if pools:
        lines += _global_pool_helper(pools)
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
    lines += [
        "    return so",
        "",
        "",
        "def make_session(model_path=MODEL_PATH, providers=None):",
        '    """An InferenceSession with the profile\'s settings; ``providers`` overrides PROVIDERS."""',
    ]
    if pools:
        lines.append("    _global_thread_pools()")
    if profile.provider_name() == "CPUExecutionProvider":
        lines += [
            "    return ort.InferenceSession(",
            "        model_path, sess_options=session_options(),",
            "        providers=PROVIDERS if providers is None else providers,",
            "    )",
        ]
    else:
        # ORT falls back to the CPU when the provider's libraries cannot load, with a log line and nothing else;
        # the C++ and C# exports throw there, so this one says it too.
        lines[-1] = ('    """An InferenceSession with the profile\'s settings; ``providers`` overrides PROVIDERS. '
                     'Warns (raises with strict=True) when the requested provider is not active."""')
        lines[-2] = "def make_session(model_path=MODEL_PATH, providers=None, strict=False):"
        lines += [
            "    session = ort.InferenceSession(",
            "        model_path, sess_options=session_options(),",
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
    if profile.provider.io_binding:
        lines += _io_binding(profile)
    return "\n".join(lines) + "\n"
