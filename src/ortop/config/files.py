"""Where profiles live: the last sessions' settings (``--resume``), ./profiles, and the profiles shipped with ortop.

A profile NAME is a path when one exists, else ``profiles/NAME(.toml)`` in the current directory, else a profile
shipped with ortop. The CLI and the UI resolve names here, so they always find the same file.

The last session is kept per model, in ``sessions/STEM-HASH.toml`` under the user state folder (HASH: of the
model's absolute, resolved path), with that path inside: ``ortop MODEL --resume`` works from any folder, and two
ortops on two models never overwrite each other's (on one model the later end wins). The single
``last-session.toml`` older versions wrote is still read, as one more saved session.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ortop.config.errors import ProfileError
from ortop.config.io import load, loads, save
from ortop.config.tree import Profile


def state_dir() -> Path:
    """``$XDG_STATE_HOME/ortop`` (platformdirs' user state dir)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("ortop"))


def sessions_dir() -> Path:
    """The folder of the saved last sessions, one file per model."""
    return state_dir() / "sessions"


def legacy_session_path() -> Path:
    """The single last-session file older versions wrote for every model (read, never written)."""
    return state_dir() / "last-session.toml"


def model_key(model: str | os.PathLike[str]) -> str:
    """The model's absolute, resolved path: what names its saved session, however the path was typed."""
    if not str(model):
        return ""
    try:
        return str(Path(model).resolve())
    except (OSError, RuntimeError):  # a link loop: the absolute path as written
        return os.path.abspath(model)


def last_session_path(model: str | os.PathLike[str]) -> Path:
    """The file that keeps ``model``'s last session: ``sessions/STEM-HASH.toml``."""
    key = model_key(model)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(key).stem).strip(".-")[:60] or "model"
    digest = hashlib.sha256(os.fsencode(key)).hexdigest()[:12]
    return sessions_dir() / f"{stem}-{digest}.toml"


def save_last_session(profile: Profile) -> Path:
    """Write the current settings for ``ortop MODEL --resume``, the model as its absolute path, in the model's own
    file (atomically: a crash never leaves half a file)."""
    profile = replace(profile, model=model_key(profile.model))
    return save(profile, last_session_path(profile.model),
                header="The settings of the last ortop session on this model; `ortop MODEL --resume` starts from "
                       "them (`ortop --resume` from the latest of any model).")


@dataclass(frozen=True)
class SavedSession:
    """One saved last session: its file, its settings (the model an absolute path) and when it was written."""

    path: Path
    profile: Profile
    saved: float  # the file's modification time, seconds since the epoch

    @property
    def model(self) -> str:
        return self.profile.model

    def when(self) -> str:
        """When it was saved, local time to the minute (``2026-11-28 10:41``)."""
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.saved))


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _read_legacy(path: Path, saved: float) -> SavedSession | None:
    """The old single file, or None when it cannot be used: unreadable, invalid, or naming a model by a relative
    path that does not exist here (it was relative to a folder no one recorded)."""
    try:
        prof = loads(path.read_text(encoding="utf-8"))  # no path: a relative model is not taken as the file's
    except (OSError, UnicodeDecodeError, ProfileError):
        return None
    if not prof.model or not (os.path.isabs(prof.model) or os.path.exists(prof.model)):
        return None
    return SavedSession(path, replace(prof, model=model_key(prof.model)), saved)


def _read(path: Path, saved: float) -> SavedSession | None:
    """A saved session (ProfileError when the file is broken); the old single file as :func:`_read_legacy`."""
    if path == legacy_session_path():
        return _read_legacy(path, saved)
    prof = load(path)
    return SavedSession(path, replace(prof, model=model_key(prof.model) if prof.model else ""), saved)


def last_session(model: str | os.PathLike[str] | None = None) -> SavedSession | None:
    """``model``'s last session, or with no model the most recently written one of any model; None when there is
    none. A broken session file of the one asked for raises ProfileError (one line, naming the file)."""
    if model is not None:
        key = model_key(model)
        found = []
        for path in (last_session_path(model), legacy_session_path()):
            saved = _mtime(path)
            s = _read(path, saved) if saved is not None else None
            if s is not None and s.model == key:
                found.append(s)
        return max(found, key=lambda s: s.saved, default=None)
    try:
        saved_files = sorted(sessions_dir().glob("*.toml"))
    except OSError:
        saved_files = []
    files = []
    for path in [*saved_files, legacy_session_path()]:
        saved = _mtime(path)
        if saved is not None and path.is_file():
            files.append((saved, path))
    for saved, path in sorted(files, key=lambda f: f[0], reverse=True):
        s = _read(path, saved)
        if s is not None and s.model:
            return s
    return None


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
