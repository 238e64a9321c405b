"""The host's record of its stalls: each capacity search's share of stalled runs, kept per host, model and profile,
so that the next search of the same profile reads how far that share moves between searches
(:func:`ortop.measure.rerun.between_searches`), which no single search can see from inside.

One JSON object a line in ``stall-shares.jsonl`` under the user state folder: ``{"key", "t", "share"}``, ``t`` in
seconds since the epoch. Only the last day's are read (MAX_AGE_S), the newest MOST of them: a host changes (a
neighbour leaves, a kernel is updated), and what it did last week says little of the next minutes. The file is
trimmed to KEEP lines when it grows past twice that. A line that does not parse is passed over (the record is a
cache of figures, never a user's settings); one that cannot be written is said in the search's warnings.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ortop.config.profile import Profile

MAX_AGE_S = 86_400.0   # only the last day's searches speak for the next
MOST = 20              # the newest this many of them
KEEP = 2_000           # lines kept when the file is trimmed


def record_path() -> Path:
    from ortop.config.files import state_dir

    return state_dir() / "stall-shares.jsonl"


def record_key(model_path: str, profile: Profile) -> str:
    """What names a profile's searches on this host: the host's name, the model's resolved path and the profile's
    settings but its arrivals' seed (a rerun draws other arrivals of the same host), hashed."""
    from ortop.config.files import model_key

    settings = replace(profile, model="", description="", workload=replace(profile.workload, seed=0))
    text = "\0".join((socket.gethostname(), model_key(model_path), json.dumps(settings.to_dict(), sort_keys=True,
                                                                                 default=str)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def past_shares(key: str, now: float | None = None, path: Path | None = None) -> list[float]:
    """The shares recorded under ``key`` in the last MAX_AGE_S, oldest first, the newest MOST of them."""
    path = path or record_path()
    now = time.time() if now is None else now
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            row = json.loads(line)
            if row["key"] == key and now - float(row["t"]) <= MAX_AGE_S:
                found.append(float(row["share"]))
        except (ValueError, KeyError, TypeError):
            continue  # a torn or foreign line: passed over (module docstring)
    return found[-MOST:]


def add_shares(rows: Sequence[tuple[str, float]], now: float | None = None, path: Path | None = None) -> str | None:
    """Append ``(key, share)`` rows; None, or why they could not be written (one line, for the warnings)."""
    path = path or record_path()
    now = time.time() if now is None else now
    text = "".join(json.dumps({"key": k, "t": round(now, 3), "share": round(s, 6)}) + "\n"
                   for k, s in rows if math.isfinite(s) and s >= 0)
    if not text:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
        _trim(path)
    except OSError as exc:
        return f"the host's record of its stalls ({path}) could not be written: {exc.strerror or exc}"
    return None


def _trim(path: Path) -> None:
    """Keep the file's last KEEP lines once it holds more than twice that (written whole, then moved over it)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) <= 2 * KEEP:
        return
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("".join(lines[-KEEP:]), encoding="utf-8")
    os.replace(tmp, path)
