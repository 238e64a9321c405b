"""Dotted profile keys (``session.intra_op_num_threads``): the flat form of a profile, where a key sits in TOML
text, and the nearest valid key for a slip.

Reading, validation and diffs all speak of a setting by its dotted key; these helpers sit below all three so each
can use them without importing another.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from typing import Any

Report = Callable[[str, str], None]  # (message, dotted key): how a reader or a check records one error


def suggest(key: str, valid: list[str]) -> str:
    """The did-you-mean suffix of an unknown-key error, or the valid keys when none is close."""
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (valid: {', '.join(sorted(valid))})"


def line_of(text: str | None, dotted: str) -> int | None:
    """Best-effort line number of a dotted key in TOML text: the key's line inside its table."""
    if not text:
        return None
    parts = dotted.split(".")
    table, key = parts[:-1], parts[-1]
    current: list[str] = []
    key_re = re.compile(r'^\s*(?:"([^"]+)"|\'([^\']+)\'|([A-Za-z0-9_\-]+))\s*=')
    table_re = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
    for no, line in enumerate(text.splitlines(), 1):
        m = table_re.match(line)
        if m:
            current = [p.strip().strip('"') for p in m.group(1).split(".")]
            if current == parts:
                return no
            continue
        m = key_re.match(line)
        if m:
            k = next(g for g in m.groups() if g is not None)
            if k == key and current == table:
                return no
    return None


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"session": {"x": 1}}`` → ``{"session.x": 1}``; maps like [session.config] flatten too."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
