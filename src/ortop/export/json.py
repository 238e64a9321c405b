"""``--to json``: the whole profile with defaults filled in, every knob of the registry (``Profile.to_dict``)."""

from __future__ import annotations

import json

from ortop.config.profile import Profile


def render(profile: Profile, model_path: str) -> str:
    """The full profile as indented JSON; ``ortop.config.profile.from_dict`` reads it back."""
    return json.dumps(profile.to_dict(full=True), indent=2) + "\n"
