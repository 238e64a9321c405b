"""``--to olive``: the ``inference_settings`` JSON Olive's session-params tuning writes and its evaluator reads.

Olive's evaluator applies only some SessionOptions attributes (:data:`CARRIED`); a profile setting any other one
away from its default is refused, because a JSON file cannot carry a warning and silently dropping the setting
would measure something else. Config-entry knobs all travel in ``extra_session_config``. Replicas and the shared
arena are refused for the same reason: Olive's evaluator builds one session with no process-wide set-up, so
``session.use_env_allocators`` would reach it with no arena registered to share, and one session is not N served
at once.
"""

from __future__ import annotations

import json
from typing import Any

from ortop.config.ort_names import ENUM_VALUES
from ortop.config.profile import Profile
from ortop.export.common import ExportError, literal, session_settings

# SessionOptions knobs olive/common/ort_inference.py applies, by knob key: True when always written, False when
# written only away from the default. Choices are written as ORT's integer enum values.
CARRIED: dict[str, bool] = {
    "session.intra_op_num_threads": True,
    "session.inter_op_num_threads": True,
    "session.execution_mode": True,
    "session.graph_optimization_level": True,
    "session.log_severity_level": True,  # else Olive shows -1 and sets its own 3
}


def olive_settings(profile: Profile) -> dict[str, Any]:
    """Olive's ``inference_settings`` (olive/passes/onnx/session_params_tuning.py writes it and
    olive/common/ort_inference.py reads it): execution_mode and graph_optimization_level are ORT's integer enum
    values, provider options are strings, and intra/inter threads of 0 leave ORT's default."""
    always: dict[str, Any] = {}
    when_set: dict[str, Any] = {}
    refused = []
    for knob, value in session_settings(profile):
        if knob.key not in CARRIED:
            if value != knob.default:
                refused.append(f"{knob.name} = {literal(value)}")
            continue
        if knob.ort_enum:
            value = ENUM_VALUES[knob.ort_enum][value]
        if CARRIED[knob.key]:
            always[knob.ort_name] = value
        elif value != (ENUM_VALUES[knob.ort_enum][knob.default] if knob.ort_enum else knob.default):
            when_set[knob.ort_name] = value
    if refused:
        raise ExportError(
            "Olive's inference settings cannot carry " + ", ".join(refused)
            + " (its evaluator never sets them); export with --to python or cpp instead"
        )
    w = profile.workload
    alone = ([f"replicas = {w.replicas}"] if w.replicas > 1 else []) + (
        ["pin_replicas = true"] if w.pin_replicas else []) + (
        ["use_env_allocators = true"] if profile.session.use_env_allocators else [])
    if alone:
        raise ExportError(
            "Olive's inference settings cannot carry " + ", ".join(alone)
            + " (its evaluator builds one session, with no allocator registered to share); export with "
            "--to python, cpp or csharp instead"
        )
    return {
        "execution_provider": [profile.provider_name()],
        "provider_options": [profile.provider_options()],
        "io_bind": profile.provider.io_binding,
        "session_options": {**always, "extra_session_config": profile.config_entries(), **when_set},
    }


def render(profile: Profile, model_path: str) -> str:
    """The Olive JSON for ``profile`` (the model path is not part of Olive's inference settings).

    Where it goes: the object is the ``inference_settings`` of an Olive evaluator or of the model
    (``"inference_settings": {...}``); Olive reads ``io_bind`` only at the model level
    (``input_model.config.io_bind`` in recent versions), so a profile with IO binding needs that key there too.
    """
    return json.dumps(olive_settings(profile), indent=2) + "\n"
