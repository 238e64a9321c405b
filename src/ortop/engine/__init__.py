"""The engine's face: what the CLI and the TUI may use of it, and nothing else (import-linter keeps them to it).

- the live session: :class:`Monitor`, the :class:`MonitorView` the TUI holds it as, the :class:`Snapshot` it
  reads, and :func:`summary` (the one summary schema);
- without a screen: :func:`measure` and :func:`compare` (the headless runner; profiles may each name their model),
  :func:`check_profile`, :func:`workload_difference`, :func:`profile_ops` (per-operator time); models in a
  comparison: :func:`check_inputs` (refuses models whose inputs differ: :class:`InputsDiffer`);
- capacity: :func:`find_capacity` under an SLO (:func:`ortop.measure.slo.parse_slo`), its :class:`CapacityResult`;
  a rate certified under it: :func:`certify_rate` / :class:`CertifyRun`, its :class:`CertifyResult`;
- the tuner: :class:`Tuner`, :func:`build_tuner`, its objectives, dimensions, trials and leaderboard;
- a model's variants: :func:`make_variants` (optimized, int8, fp16, in a child), :func:`plan_kinds`;
- another onnxruntime: :func:`check_python` (an interpreter a worker may run under, named by ``PYTHON_VAR``).

Behind the face the engine keeps three rooms and the parts they share: :mod:`ortop.engine.live` (the live
session), :mod:`ortop.engine.answers` (capacity, certification, the tuner, variants, operators) and
:mod:`ortop.engine.bench` (workers, interleaved blocks, the A/B runner), over the worker launcher, the models'
inputs, placement and the traffic figures at this level (import-linter keeps the order).

Every name is imported on first use (see :mod:`ortop.lazy`), from the module that defines it: the TUI's start-up
pays for the tuner's modules it draws with, not for the monitor, the A/B runner or the worker launcher behind them.
A type checker reads the ``TYPE_CHECKING`` imports below, so each name keeps its real type; ``_FACE`` says where
each lives at run time, and the layering tests keep the two lists and ``__all__`` the same.

No name here may be spelled as a module of this package: importing that module would replace the name with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortop.lazy import face_getattr

if TYPE_CHECKING:
    from ortop.engine.answers.capacity import CapacityResult
    from ortop.engine.answers.capacity_search import CapacitySearch, find_capacity
    from ortop.engine.answers.certify import (
        CERTIFY_MIN_DURATION_S,
        SEARCHED_SHARE,
        CertifyResult,
        CertifyRun,
        certify_rate,
        percentile_of,
    )
    from ortop.engine.answers.ops import profile_ops
    from ortop.engine.answers.space import DIMENSIONS, NOT_DEFAULT, describe, profile_key
    from ortop.engine.answers.trials import BETTER, Figures, Trial, TuneResult
    from ortop.engine.answers.tuner import OBJECTIVE_TEXT, OBJECTIVES, Tuner
    from ortop.engine.answers.tunerun import (
        LEADERBOARD_COLUMNS,
        build_tuner,
        figures_text,
        leaderboard,
        leaderboard_rows,
        trial_cells,
    )
    from ortop.engine.answers.variants import VariantsError, check_out_dir, default_out_dir, make_variants, plan_kinds
    from ortop.engine.live.headless import compare, measure
    from ortop.engine.live.monitor import Monitor
    from ortop.engine.live.snapshot import Snapshot, summary, workload_difference
    from ortop.engine.live.view import MonitorView
    from ortop.engine.models import InputsDiffer, check_inputs, check_profile
    from ortop.engine.workerproc import PYTHON_VAR, check_python

__all__ = [
    "CapacityResult", "CapacitySearch", "find_capacity",
    "CERTIFY_MIN_DURATION_S", "SEARCHED_SHARE", "CertifyResult", "CertifyRun", "certify_rate", "percentile_of",
    "InputsDiffer", "check_inputs",
    "BETTER", "DIMENSIONS", "LEADERBOARD_COLUMNS", "NOT_DEFAULT", "OBJECTIVES", "OBJECTIVE_TEXT", "Figures", "Monitor",
    "MonitorView", "Snapshot", "Trial", "TuneResult", "Tuner", "build_tuner", "check_profile", "compare", "describe",
    "figures_text", "leaderboard", "leaderboard_rows", "measure", "profile_key", "profile_ops", "summary",
    "trial_cells", "workload_difference",
    "VariantsError", "check_out_dir", "default_out_dir", "make_variants", "plan_kinds",
    "PYTHON_VAR", "check_python",
]

_FACE: dict[str, str] = {  # name -> the module of this package that defines it
    "CapacityResult": "answers.capacity", "CapacitySearch": "answers.capacity_search",
    "find_capacity": "answers.capacity_search", "CERTIFY_MIN_DURATION_S": "answers.certify",
    "SEARCHED_SHARE": "answers.certify", "CertifyResult": "answers.certify", "CertifyRun": "answers.certify",
    "certify_rate": "answers.certify", "percentile_of": "answers.certify", "compare": "live.headless",
    "measure": "live.headless", "InputsDiffer": "models", "check_inputs": "models", "check_profile": "models",
    "Monitor": "live.monitor", "profile_ops": "answers.ops", "Snapshot": "live.snapshot", "summary": "live.snapshot",
    "workload_difference": "live.snapshot", "DIMENSIONS": "answers.space", "NOT_DEFAULT": "answers.space",
    "describe": "answers.space", "profile_key": "answers.space", "BETTER": "answers.trials",
    "Figures": "answers.trials", "Trial": "answers.trials", "TuneResult": "answers.trials",
    "OBJECTIVE_TEXT": "answers.tuner", "OBJECTIVES": "answers.tuner", "Tuner": "answers.tuner",
    "LEADERBOARD_COLUMNS": "answers.tunerun", "build_tuner": "answers.tunerun", "figures_text": "answers.tunerun",
    "leaderboard": "answers.tunerun", "leaderboard_rows": "answers.tunerun", "trial_cells": "answers.tunerun",
    "VariantsError": "answers.variants", "check_out_dir": "answers.variants", "default_out_dir": "answers.variants",
    "make_variants": "answers.variants", "plan_kinds": "answers.variants", "MonitorView": "live.view",
    "PYTHON_VAR": "workerproc", "check_python": "workerproc",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; a module __getattr__ would make every name Any
    __getattr__ = face_getattr(__name__, _FACE)
