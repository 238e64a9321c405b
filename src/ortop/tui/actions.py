"""Every file the UI writes, in one place: saved profiles, exports, the model's last session (for --resume) and the
--summary JSON.

The app calls these with what a screen returned; screens only compute names (:func:`profile_path`). Nothing here
imports Textual: each function is plain I/O over :mod:`ortop.config`, :mod:`ortop.engine` and
:mod:`ortop.fsutil`, and raises one of :data:`WRITE_ERRORS` for the caller to show (:func:`why_not`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ortop.config import profile as profile_mod
from ortop.config.files import shipped_profiles_dir
from ortop.config.profile import Profile
from ortop.errors import UsageError

WRITE_ERRORS = (OSError, UsageError)  # the system's refusals, and fsutil's own (a missing folder, the model itself)
SAVE_HEADER = "Saved by ortop from the live session."
# The sections a profile file may leave out: opening it then keeps the running values of each one it lacks.
OPEN_SECTIONS = ("session", "provider", "workload", "env")


def sanitize_name(name: str, suffix: str = ".toml") -> str:
    """A file-name-safe name: letters, digits, ``.``, ``-`` and ``_``; ``suffix`` (``.toml``) is dropped if typed."""
    name = name.strip()
    if suffix and name.lower().endswith(suffix.lower()):
        name = name[: -len(suffix)]
    name = os.path.basename(name)
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")
    return clean[:80]


def reason(exc: Exception) -> str:
    """Why a write failed, in a few words: an OSError's message, or fsutil's refusal (which names the file)."""
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    return str(exc)


def why_not(exc: Exception, path: str | os.PathLike) -> str:
    """``cannot write PATH: reason``; fsutil's refusals already read that way and are passed on as they are."""
    return f"cannot write {path}: {reason(exc)}" if isinstance(exc, OSError) else str(exc)


def profile_path(profile_dir: str | os.PathLike, name: str, suffix: str = ".toml") -> Path | None:
    """Where a file called ``name`` goes: the profile folder, a safe file name, ``suffix`` added (``.toml`` for a
    profile, the format's for an export)."""
    clean = sanitize_name(name, suffix)
    return Path(profile_dir) / f"{clean}{suffix}" if clean else None


# Where a saved profile came from, as its description says it ("…, ORIGIN on MODEL"): the live view's own
# settings (the start, keys, the settings form, an opened profile), a tuner's candidate, a capacity search's.
LIVE = "saved from the live view"
TUNED = "tuned"
SIZED = "sized by the capacity search"


def describe(profile: Profile, origin: str = LIVE) -> str:
    """A saved profile's one-line description (``ortop profiles list`` shows it): what it sets beyond ORT's and
    ortop's defaults, in compact form (``2 thr · spin off · 100 Hz``), then where it came from (``origin``: one of
    :data:`LIVE`, :data:`TUNED`, :data:`SIZED`) and on which model."""
    from ortop.tui.panels._format import compact_changes, compact_text

    base = Profile(model=profile.model, description=profile.description)
    what = compact_text(compact_changes(base, profile), "ORT's defaults")
    return f"{what}, {origin} on {Path(profile.model).name}" if profile.model else f"{what}, {origin}"


def save_profile(profile: Profile, path: str | os.PathLike, origin: str = LIVE) -> Path:
    """Write a profile (atomically, via profile.save), described by what it sets and where it came from
    (:func:`describe`); the model path is made absolute so the file works from any folder."""
    if profile.model and not os.path.isabs(profile.model):
        profile = replace(profile, model=os.path.abspath(profile.model))
    profile = replace(profile, description=describe(profile, origin))
    return profile_mod.save(profile, path, header=SAVE_HEADER)


def open_profile(path: str | os.PathLike, running: Profile) -> tuple[Profile, tuple[str, ...]]:
    """Load the profile at ``path`` for the live session: each section of :data:`OPEN_SECTIONS` the file does not
    have keeps the running values (a profile of session knobs leaves the paced rate alone rather than resetting
    it to a closed loop). Returns the profile and the sections kept. Raises ProfileError like ``profile.load``."""
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    loaded = profile_mod.load(path)
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):  # load() read it a moment ago: keep its view
        return loaded, ()
    kept = tuple(section for section in OPEN_SECTIONS if section not in raw)
    if kept:
        loaded = replace(loaded, **{section: getattr(running, section) for section in kept})
    return loaded, kept


def export_name(profile_dir: str | os.PathLike, model_path: str, ext: str) -> str:
    """The name an export is offered under: ``MODEL-export`` (the format's suffix is added), numbered when a file
    of that name is already next to the profiles."""
    folder = Path(profile_dir)
    stem = sanitize_name(Path(model_path).stem) or "ortop"
    name = f"{stem}-export"
    n = 2
    while (folder / f"{name}{ext}").exists():
        name = f"{stem}-export-{n}"
        n += 1
    return name


def write_export(path: str | os.PathLike, text: str) -> Path:
    """Write exported text to ``path`` (a file the user named and confirmed; ordinary permissions, see fsutil)."""
    from ortop.fsutil import atomic_write_text

    return atomic_write_text(path, text if text.endswith("\n") else text + "\n")


def list_profiles(profile_dir: str | os.PathLike) -> list[Path]:
    """``*.toml`` in the user's profile folder, then the shipped profiles (when this build ships any)."""
    dirs = [Path(profile_dir)]
    shipped = shipped_profiles_dir()
    if shipped is not None:
        dirs.append(shipped)
    out: list[Path] = []
    seen: set[Path] = set()
    for d in dirs:
        try:
            files = sorted(d.glob("*.toml"))
        except OSError:
            continue
        for p in files:
            rp = p.resolve()
            if rp not in seen:
                seen.add(rp)
                out.append(p)
    return out


def gpu_summary(sample: Any) -> Any:
    """GPU figures for the JSON summary, in the shape headless mode writes; None without a GPU."""
    if sample is None or not sample.devices:
        return None
    return [
        {"index": d.index, "name": d.name, "mem_used": d.mem_used, "mem_total": d.mem_total,
         "util_percent": d.util_percent, "worker_mem": d.process_mem}
        for d in sample.devices
    ]


def finish_session(snap: Any, *, summary_path: str | os.PathLike | None, duration_s: float, gpu_sample: Any,
                   ui_cost: dict[str, float]) -> list[str]:
    """What ending the app writes: the model's last session for --resume (once anything ran) and, when asked for, the
    same JSON summary as headless mode plus what the UI process itself cost. Returns one message per file that could
    not be written."""
    from ortop.config.files import save_last_session

    errors: list[str] = []
    if snap.history:
        try:
            save_last_session(snap.profile)
        except WRITE_ERRORS as exc:
            errors.append(f"cannot save the last session: {reason(exc)}")
    if summary_path:
        from ortop.engine import summary
        from ortop.fsutil import atomic_write_text

        data = summary(snap, duration_s=duration_s, gpu=gpu_summary(gpu_sample), extra={"monitor": ui_cost})
        try:
            atomic_write_text(str(summary_path), json.dumps(data, indent=2) + "\n")
        except WRITE_ERRORS as exc:
            errors.append(f"cannot write summary {summary_path}: {exc.strerror or exc}" if isinstance(exc, OSError)
                          else str(exc))
    return errors
