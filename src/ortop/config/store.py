"""Where ortop keeps what must survive a session: the last settings, for ``--resume`` and after a dropped SSH link."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ortop.config.profile import Profile


def state_dir() -> Path:
    """``$XDG_STATE_HOME/ortop`` (platformdirs' user state dir)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("ortop"))


def last_session_path() -> Path:
    """The file ``--resume`` reads and every session end writes."""
    return state_dir() / "last-session.toml"


def save_last_session(profile: Profile) -> Path:
    """Write the current settings for ``ortop MODEL --resume`` (atomically: a crash never leaves half a file)."""
    from ortop.config.profile import save

    return save(profile, last_session_path(),
                header="The settings of the last ortop session; `ortop MODEL --resume` starts from them.")
