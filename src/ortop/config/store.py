"""Where profiles live: the last session's settings (``--resume``), ./profiles, and the profiles shipped with ortop.

A profile NAME is a path when one exists, else ``profiles/NAME(.toml)`` in the current directory, else a profile
shipped with ortop. The CLI and the UI resolve names here, so they always find the same file.
"""

from __future__ import annotations

from pathlib import Path

from ortop.config.errors import ProfileError
from ortop.config.io import load, save
from ortop.config.tree import Profile


def state_dir() -> Path:
    """``$XDG_STATE_HOME/ortop`` (platformdirs' user state dir)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("ortop"))


def last_session_path() -> Path:
    """The file ``--resume`` reads and every session end writes."""
    return state_dir() / "last-session.toml"


def save_last_session(profile: Profile) -> Path:
    """Write the current settings for ``ortop MODEL --resume`` (atomically: a crash never leaves half a file)."""
    return save(profile, last_session_path(),
                header="The settings of the last ortop session; `ortop MODEL --resume` starts from them.")


def shipped_profiles_dir() -> Path | None:
    """The profiles that come with ortop: the data package ``ortop/profiles`` (in a source checkout a link to the
    repository's ``profiles/``); None when this build ships none."""
    data = (Path(__file__).resolve().parents[1] / "profiles").resolve()
    return data if data.is_dir() else None


def _candidates(name: str) -> list[Path]:
    names = [name] if name.endswith(".toml") else [name, name + ".toml"]
    out = [Path("profiles") / n for n in names]
    shipped = shipped_profiles_dir()
    if shipped is not None:
        out += [shipped / n for n in names]
    return out


def resolve_profile(name: str) -> Path:
    """The file a profile NAME refers to (see the module docstring for the search order)."""
    direct = Path(name)
    if direct.exists():
        return direct
    for path in _candidates(name):
        if path.is_file():
            return path
    shipped = shipped_profiles_dir()
    where = "./profiles" + (f" and {shipped}" if shipped else "")
    raise ProfileError(f"profile not found: {name} (not a file, nor in {where}; see 'ortop profiles list')")


def load_profile(name: str) -> tuple[Path, Profile]:
    """Resolve a profile NAME and load it (parsed and validated)."""
    path = resolve_profile(name)
    return path, load(path)
