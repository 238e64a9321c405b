"""Per-operator profiles and node placement, from a session in a child process (``ortop ops``, ``ortop doctor``).

Neither the CLI nor the engine imports onnxruntime: the child (:func:`ortop.runtime.opprof.child_main`) is spawned
like the worker, with the profile's environment, builds one session, answers with one plain dict and exits. Its
fd 1 and 2 go to a log file in a temporary folder (with the profiler's trace), so ORT's log never reaches the
terminal or a TUI; the folder is removed afterwards. A child that dies (a segfault in a provider library) or
outlives its time is reported with the last lines of that log.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import replace
from typing import Any

from ortop.config.profile import Profile
from ortop.errors import RuntimeFailure


class ProbeError(RuntimeFailure):
    """The child could not build or run the model, or died (exit 1). ``result`` holds what it learnt before."""

    def __init__(self, message: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.result = result or {}


def probe(model_path: str, profile: Profile, *, runs: int = 0, warmup: int = 0, trace: bool = False,
          placement: bool = True, timeout_s: float | None = None,
          stop: threading.Event | None = None) -> dict[str, Any]:
    """Build ``profile`` on ``model_path`` in a child, run it ``warmup`` + ``runs`` times, and return its report.

    The dict has ``providers_requested`` / ``_active`` / ``_available``, ``create_ms``, ``placement`` (node dicts
    with their ``ep``, or None), with ``trace`` an ``ops`` table (see ``runtime.opprof.op_table``), ``log`` (ORT's
    lines), ``env_warnings`` (what the profile's environment asked for and did not get, as the live view says it:
    a mimalloc not installed) and, when the session failed to build or run, ``error`` and the ``stage`` it failed at.

    Raises:
        ProbeError: the child died, timed out, or was stopped.
    """
    from ortop.engine.workerproc import run_child, worker_env
    from ortop.runtime import opprof

    profile = replace(profile, model=model_path)
    with tempfile.TemporaryDirectory(prefix="ortop-ops-") as workdir:
        req = opprof.Request(model_path, profile.to_dict(full=True), workdir, runs=runs, warmup=warmup,
                             trace=trace, placement=placement)
        env, said = worker_env(profile.env)
        result, why = run_child(opprof.child_main, req, env, "ortop-ops", timeout_s, stop)
        if result is None:
            log = opprof.read_log(os.path.join(workdir, opprof.LOG_NAME))
            tail = f"; its last log line: {log[-1]}" if log else ""
            raise ProbeError(f"the profiling process {why}{tail}", {"log": log, "env_warnings": said})
    result["env_warnings"] = said
    return result


def profile_ops(model_path: str, profile: Profile, *, runs: int = 20, warmup: int | None = None,
                stop: threading.Event | None = None) -> dict[str, Any]:
    """Run the model ``runs`` times with ORT's profiler on (after ``warmup`` runs, by default the profile's) and
    return the probe's report, its ``ops`` table holding the nodes and op types by time.

    Raises:
        ProbeError: the session failed to build or run (the message says which, with ORT's reason).
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    warm = profile.workload.warmup_runs if warmup is None else warmup
    result = probe(model_path, profile, runs=runs, warmup=warm, trace=True, placement=True, stop=stop)
    if "error" in result:
        what = "build the session" if result.get("stage") in ("load", "build") else "run the model"
        raise ProbeError(f"could not {what}: {result['error']}", result)
    return result
