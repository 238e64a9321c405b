"""The doctor: checks that look at a model, a profile, the host and ORT's own words, and say what is wrong, what to
do, and the profile change that does it.

- :mod:`~ortop.doctor.findings`: the :class:`Finding` every check returns, and applying their patches;
- :mod:`~ortop.doctor.static`: checks that read what is known (model, profile, host, log, placement), pure;
- :mod:`~ortop.doctor.measured`: checks that run the model in an interleaved comparison;
- :mod:`~ortop.doctor.graph`: what the checks read from the graph, and the ``--fix-model`` copy;
- :mod:`~ortop.doctor.diagnose`: gathering a context (a probe session, or a live snapshot) and running the lists;
- :mod:`~ortop.doctor.report`: the readable report.

The CLI (``ortop doctor``) and the TUI's doctor screen run the same lists, through this face alone (import-linter
keeps them to it). Findings, the report and the model fix are light and imported here; the checks and the
gathering import the engine's monitor and A/B runner, so they load on first use (see :mod:`ortop.lazy`), and the
TUI's start-up does not pay for them. ``diagnose_model`` is :func:`ortop.doctor.diagnose.diagnose`, named apart
from its module, which would replace it once imported. Nothing here imports onnxruntime (a session is built in a
child process by :mod:`ortop.engine.answers.ops`) or textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortop.doctor.findings import SEVERITIES, Finding, apply_patches, by_severity, counts, exit_code, patch_text
from ortop.doctor.graph import write_without_initializer_inputs
from ortop.doctor.report import evidence_text, format_report
from ortop.lazy import face_getattr

if TYPE_CHECKING:
    from ortop.doctor.diagnose import context_from_snapshot
    from ortop.doctor.diagnose import diagnose as diagnose_model
    from ortop.doctor.measured import run_measured
    from ortop.doctor.static import run_static

__all__ = [
    "SEVERITIES", "Finding", "apply_patches", "by_severity", "context_from_snapshot", "counts",
    "diagnose_model", "evidence_text", "exit_code", "format_report", "patch_text", "run_measured", "run_static",
    "write_without_initializer_inputs",
]

_FACE: dict[str, str] = {  # name -> the module of this package that defines it ("module:name" where it differs)
    "context_from_snapshot": "diagnose", "diagnose_model": "diagnose:diagnose",
    "run_measured": "measured",
    "run_static": "static",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; a module __getattr__ would make every name Any
    __getattr__ = face_getattr(__name__, _FACE)
