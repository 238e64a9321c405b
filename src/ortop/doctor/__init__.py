"""The doctor: checks that look at a model, a profile, the host and ORT's own words, and say what is wrong, what to
do, and the profile change that does it.

- :mod:`~ortop.doctor.findings`: the :class:`Finding` every check returns, and applying their patches;
- :mod:`~ortop.doctor.static`: checks that read what is known (model, profile, host, log, placement), pure;
- :mod:`~ortop.doctor.measured`: checks that run the model in an interleaved comparison;
- :mod:`~ortop.doctor.graph`: what the checks read from the graph, and the ``--fix-model`` copy;
- :mod:`~ortop.doctor.diagnose`: gathering a context (a probe session, or a live snapshot) and running the lists;
- :mod:`~ortop.doctor.report`: the readable report.

The CLI (``ortop doctor``) and the TUI's doctor screen run the same lists. Nothing here imports onnxruntime (a
session is built in a child process by :mod:`ortop.engine.ops`) or textual.
"""

from ortop.doctor.findings import SEVERITIES, Finding, apply_patches, by_severity, counts, exit_code, patch_text

__all__ = ["SEVERITIES", "Finding", "apply_patches", "by_severity", "counts", "exit_code", "patch_text"]
