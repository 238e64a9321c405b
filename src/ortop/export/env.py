"""``--to env``: ``export NAME=VALUE`` lines for the profile's environment variables, shell-quoted."""

from __future__ import annotations

import shlex

from ortop.config.profile import Profile
from ortop.export.literals import json_str


def render(profile: Profile, model_path: str) -> str:
    """The shell lines setting the profile's environment (a comment when it sets none)."""
    lines = []
    if profile.description:
        lines.append(f"# environment of profile {json_str(profile.description)}")
    if not profile.env:
        lines.append("# this profile sets no environment variables")
    lines += [f"export {k}={shlex.quote(v)}" for k, v in profile.env.items()]
    return "\n".join(lines) + "\n"
