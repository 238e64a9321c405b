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


_ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "arm64": 183, "ppc64le": 21, "s390x": 22, "riscv64": 243}


def not_a_shared_library(path: str, machine: str | None = None) -> str:
    """Why ld.so would refuse to preload ``path`` ("" when it looks loadable): not an ELF file, not a shared
    object, or built for another machine. Read from the ELF header (64 bytes), so the refusal is said here, in one
    line, rather than by ld.so on the terminal when the worker starts."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return "is not a shared library (not an ELF file)"
    little = head[5] == 1  # EI_DATA: 1 little-endian, 2 big-endian
    e_type = int.from_bytes(head[16:18], "little" if little else "big")
    e_machine = int.from_bytes(head[18:20], "little" if little else "big")
    if e_type != 3:  # ET_DYN
        return "is not a shared library (an ELF file of another kind)"
    want = _ELF_MACHINES.get(machine or os.uname().machine)
    if want is not None and e_machine != want:
        return f"is built for another machine (ELF machine {e_machine}, this host's is {want})"
    return ""


def resolve_allocator(env: Mapping[str, str], finder=find_mimalloc) -> tuple[dict[str, str], list[str]]:
    """The worker's environment with ``LD_PRELOAD``'s entry ``mimalloc`` replaced by the library's path.

    Returns (environment, warnings). With no mimalloc installed the entry is left out and the warning says how to
    get one; a path that does not exist, or a file that is not a shared library for this machine, is left out too,
    with a warning (ld.so would print its error at exec time, on ortop's own terminal, where the worker cannot catch
    it). A library that still does not load is caught by the worker itself (it is not in its memory map).
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
        elif entry.startswith("/") and (why := not_a_shared_library(entry)):
            said.append(f"LD_PRELOAD {entry} {why}: the allocator is not in effect")
        else:
            entries.append(entry)
    if entries:
        out["LD_PRELOAD"] = " ".join(entries)
    else:
        out.pop("LD_PRELOAD", None)
    return out, said
