"""Turn a profile into code or settings for other tools, so a tuned configuration leaves ortop intact.

Formats (``FORMATS``), one module each:

- ``python``: a module needing only onnxruntime, with ``make_session(model_path=..., providers=None)`` (and
  ``make_sessions()`` for replicas), and ``example_feeds(session)``: inputs of the shapes the profile was measured
  with. The C++ and C# exports name those shapes in a comment.
- ``cpp``: an ``Ort::SessionOptions`` builder (onnxruntime_cxx_api.h).
- ``csharp``: a ``Microsoft.ML.OnnxRuntime.SessionOptions`` builder.
- ``perf-test``: an ``onnxruntime_perf_test`` command line (flags checked against its source, see PERF_TEST_FLAGS).
- ``olive``: the ``inference_settings`` JSON Olive's session-params tuning writes and its evaluator reads.
- ``env``: ``export NAME=VALUE`` lines for the profile's environment variables.
- ``json``: the whole profile with defaults filled in.

Each exporter walks the knob registry (:mod:`ortop.config.knobs`): a config-entry knob reaches every format through
``Profile.config_entries()``, and a SessionOptions knob is written by Python generically and by the others through
their spelling tables keyed by knob key, or named in a comment or note where a format has no spelling for it.

What a format cannot carry:

- ``perf-test`` refuses execution providers onnxruntime_perf_test has no ``-e`` name for (custom or plugin EPs,
  ROCm) and keys or values its ``"key|value key|value"`` lists cannot hold (whitespace; '|' in a key); knobs with
  no flag at all (mem reuse, global thread pools, log level, paced rate, .npy inputs, replicas and their pinning,
  the shared arena) are listed as ``# note:`` comment lines above the command, which stays runnable. A shape
  reaches perf_test only through ``-f name:value``: a free dimension the model leaves unnamed has no name, and
  ``-I`` makes it 1, so a note says the command runs another shape and how to feed it the profile's.
- ``olive`` refuses session settings Olive's evaluator cannot apply (CPU arena, memory pattern, memory reuse,
  global thread pools), replicas and the shared arena: a JSON file cannot carry a warning, and silently dropping
  them would measure something else. Custom provider names pass through, as Olive hands them to onnxruntime as
  they are. Environment variables are process settings, not session settings: export them with ``env``.
- ``cpp`` and ``csharp`` have no setter for ``enable_mem_reuse``; the code says so in a comment. They build the
  replicas and size and pin each one's pool to the cores they are given, but leave the split of the cores and
  pinning the callers to the program (the Python export works the split out at run time).

Process-wide settings come before the first session in every code format: the global thread pools, then the
shared CPU arena (``session.use_env_allocators`` needs the allocator registered in ORT's environment; the config
entry alone shares nothing).

Every string taken from a profile (model path, description, config keys and values, provider options,
environment values) is written as an escaped literal of the target language, or shell-quoted, so no value can
become code; in a C++ or C# comment it is quoted readably (printable text as written, UTF-8 included, the rest
escaped: :func:`ortop.export.literals.comment_str`). This package imports neither onnxruntime nor textual.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ortop.config.ort_names import EXEC_MODE_NAMES
from ortop.config.profile import EXECUTION_MODES, Profile
from ortop.export import cpp, csharp, env, olive, perf_test, python
from ortop.export import json as json_format
from ortop.export.common import DEFAULT_MODEL, ExportError
from ortop.export.common import model_path as _model_path  # render's keyword of the same name shadows it
from ortop.export.literals import comment_str, cpp_str, cs_str, py_str
from ortop.export.olive import olive_settings
from ortop.export.perf_test import PERF_TEST_EP_NAMES, PERF_TEST_FLAGS, PERF_TEST_RESULT_FILE, PERF_TEST_SECONDS

__all__ = [
    "DEFAULT_MODEL", "FORMATS", "PERF_TEST_EP_NAMES", "PERF_TEST_FLAGS", "PERF_TEST_RESULT_FILE", "PERF_TEST_SECONDS",
    "ExportError", "Profile", "comment_str", "cpp_str", "cs_str", "olive_settings", "py_str", "render",
]

FORMATS = ("python", "cpp", "csharp", "perf-test", "olive", "env", "json")

_RENDERERS: dict[str, Callable[[Profile, str], str]] = {
    "python": python.render,
    "cpp": cpp.render,
    "csharp": csharp.render,
    "perf-test": perf_test.render,
    "olive": olive.render,
    "env": env.render,
    "json": json_format.render,
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
    return renderer(profile, _model_path(profile, model_path))

