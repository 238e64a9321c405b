"""Allocators to preload into the worker: where a mimalloc shared library is, and ``LD_PRELOAD = "mimalloc"``
turned into its path (or into a clear message when none is installed).

The worker's and the host's memory figures themselves come from the worker's samples and ``engine.memory``.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable, Mapping

MIMALLOC_HINT = ("no mimalloc shared library found: install one (Debian/Ubuntu: apt install libmimalloc2.0) or set "
                 "env.LD_PRELOAD to its path")

# Where distributions and pip wheels put it; the first match wins, newest version first.
MIMALLOC_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2*",
    "/usr/lib/aarch64-linux-gnu/libmimalloc.so.2*",
    "/usr/lib/*/libmimalloc.so*",
    "/usr/lib64/libmimalloc.so*",
    "/usr/lib/libmimalloc.so*",
    "/usr/local/lib/libmimalloc.so*",
    "/usr/local/lib64/libmimalloc.so*",
)


def _site_dirs() -> list[str]:
    """This interpreter's package directories (a pip-installed mimalloc, e.g. cmeel-mimalloc, lives under one)."""
    import site
    import sysconfig

    dirs = [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def find_mimalloc(globs: Iterable[str] | None = None, site_dirs: Iterable[str] | None = None) -> str | None:
    """The path of a mimalloc shared library on this host (in ``globs``, default :data:`MIMALLOC_GLOBS`, then
    under this interpreter's package directories), or None."""
    if not sys.platform.startswith("linux"):
        return None
    for pattern in MIMALLOC_GLOBS if globs is None else globs:
        hits = sorted((p for p in glob.glob(pattern) if os.path.isfile(p)), reverse=True)
        if hits:
            return hits[0]
    for d in _site_dirs() if site_dirs is None else site_dirs:
        hits = sorted(glob.glob(os.path.join(d, "**", "libmimalloc.so*"), recursive=True), reverse=True)
        if hits:
            return hits[0]
    return None


def resolve_allocator(env: Mapping[str, str], finder=find_mimalloc) -> tuple[dict[str, str], list[str]]:
    """The worker's environment with ``LD_PRELOAD``'s entry ``mimalloc`` replaced by the library's path.

    Returns (environment, warnings). With no mimalloc installed the entry is left out and the warning says how to
    get one; a path that does not exist is left out too, with a warning (ld.so would print its error at exec time,
    on ortop's own terminal, where the worker cannot catch it). A file that exists but does not load is caught
    by the worker itself (it is not in its memory map).
    """
    out = dict(env)
    preload = out.get("LD_PRELOAD")
    if not preload:
        return out, []
    said: list[str] = []
    entries = []
    for entry in preload.replace(":", " ").split():
        if entry == "mimalloc":
            found = finder()
            if found:
                entries.append(found)
            else:
                said.append(f"{MIMALLOC_HINT}: the allocator is not in effect")
        elif entry.startswith("/") and not os.path.isfile(entry):
            # Left out: ld.so would print its error on ortop's own terminal, before the worker catches stderr.
            said.append(f"LD_PRELOAD {entry} does not exist: the allocator is not in effect")
        else:
            entries.append(entry)
    if entries:
        out["LD_PRELOAD"] = " ".join(entries)
    else:
        out.pop("LD_PRELOAD", None)
    return out, said
