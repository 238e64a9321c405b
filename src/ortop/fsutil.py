"""Writing the files a user names (summaries, exports, profiles) without ever clobbering what they did not mean.

Rules, each from a case a user met:
- A regular file is replaced atomically (a temp file in the same folder, fsynced, then ``os.replace``): readers see
  the old file or the new one, never half of either; a crash mid-write leaves the old one.
- A symlink is followed: its target is written (atomically when it is a regular file), the link stays a link.
- A character device or a FIFO (``/dev/stdout``, ``/dev/null``, a pipe) is written through, never replaced by a file.
- A missing folder is an error, not created silently; a folder, or a socket, is refused.
- Files that must not be overwritten (the model being measured, a profile in use) are refused by identity, however
  the path is spelled.
- New files get ordinary permissions (0666 less the umask), not the temp file's 0600; a replaced file keeps its mode.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ortop.errors import UsageError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same_file(a: str, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_writable(path: str | os.PathLike, *, protect: Iterable[str | os.PathLike] = (), what: str = "file") -> str:
    """Check that ``path`` can be written under the rules above, before any work is done; return the real target.

    Raises:
        UsageError: one line saying why not (a missing folder, a directory, a protected file, no permission).
    """
    raw = os.fspath(path)
    if not raw:
        raise UsageError(f"the {what} path is empty")
    real = os.path.realpath(raw)
    for other in protect:
        if other and os.path.exists(real) and _same_file(real, other):
            raise UsageError(f"refusing to write the {what} over {os.fspath(other)}, which ortop is using")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"cannot write the {what} {raw}: {exc.strerror}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"cannot write the {what} {raw}: it is a directory")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            if not os.access(real, os.W_OK):
                raise UsageError(f"cannot write the {what} {raw}: permission denied")
            return real
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"cannot write the {what} {raw}: not a regular file, device or pipe")
    parent = os.path.dirname(real) or "."
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write the {what} {raw}: the folder {os.path.dirname(raw) or parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write the {what} {raw}: no permission to write in {parent}")
    if st is not None and not os.access(real, os.W_OK):
        raise UsageError(f"cannot write the {what} {raw}: permission denied")
    return real


def write_text(path: str | os.PathLike, text: str, *, protect: Iterable[str | os.PathLike] = (),
               what: str = "file", make_parents: bool = False) -> Path:
    """Write ``text`` to ``path`` under the rules above.

    ``make_parents`` is for ortop's own folders (its state folder, the profile folder ctrl+s saves into), never for
    a path the user typed.

    Raises:
        UsageError: the path cannot be written (checked first), or writing failed (a full disk, ``/dev/full``).
    """
    if make_parents:
        Path(os.path.realpath(os.fspath(path))).parent.mkdir(parents=True, exist_ok=True)
    real = check_writable(path, protect=protect, what=what)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    try:
        if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            with open(real, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
            return Path(os.fspath(path))
        replace_file(real, text, mode=stat.S_IMODE(st.st_mode) if st is not None else None)
    except OSError as exc:
        raise UsageError(f"cannot write the {what} {os.fspath(path)}: {exc.strerror or exc}") from None
    return Path(os.fspath(path))


def replace_file(real: str, data: str | bytes, *, mode: int | None = None) -> None:
    """Write ``data`` (text as UTF-8) beside ``real`` and move it into place, so a failed write never leaves half a
    file; ``mode``: the file's permissions, 0o666 less the umask unless given. OSError when it cannot."""
    folder = os.path.dirname(real) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=folder)
    mode = 0o666 & ~_umask() if mode is None else mode
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write one of ortop's own files (last session, a saved profile), making its folder when missing."""
    return write_text(path, text, make_parents=True)
