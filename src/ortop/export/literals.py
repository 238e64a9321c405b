"""String literals of the export targets: every string taken from a profile is written through one of these, so a
value (a model path, a config entry, a provider option) can only ever end up as data, never as code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable


def py_str(s: str) -> str:
    """A Python string literal for ``s`` (repr escapes quotes, backslashes, newlines and unprintables)."""
    return repr(s)


_QUOTE = {"\\": "\\\\", '"': '\\"'}  # a backslash and a double quote, escaped alike in C, C++ and C#


def _quoted(pieces: Iterable[str]) -> str:
    return '"' + "".join(pieces) + '"'


def _unicode_escape(ch: str) -> str:
    """``\\uXXXX`` or ``\\UXXXXXXXX``: fixed width, never the variable-length ``\\x``."""
    o = ord(ch)
    return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"


def cpp_str(s: str) -> str:
    """A C/C++ string literal holding the UTF-8 bytes of ``s``.

    Printable ASCII stays as is; everything else becomes a three-digit octal escape (octal escapes stop after
    three digits, unlike the greedy ``\\x``). ``?`` is escaped so no trigraph such as ``??/`` can form.
    """
    def byte(b: int) -> str:
        c = chr(b)
        if c in _QUOTE:
            return _QUOTE[c]
        if c == "?":
            return "\\?"
        return c if 0x20 <= b < 0x7F else f"\\{b:03o}"

    return _quoted(byte(b) for b in s.encode("utf-8", "surrogatepass"))


def comment_str(s: str) -> str:
    """``s`` quoted for a ``//`` comment of C++ or C#, readable as it was written: printable text stays as it is,
    UTF-8 included (``threads 2 · spin off``); a quote and a backslash are escaped, as is the second of two ``?``
    (no trigraph), and what is not printable (line breaks, controls, bidirectional overrides, U+2028) becomes a
    ``\\n``/``\\t``/``\\uXXXX`` escape, so the value can neither end the comment's line nor splice the next one
    into it, nor reorder how the line reads."""
    def char(i: int, ch: str) -> str:
        if ch in _QUOTE:
            return _QUOTE[ch]
        if ch == "?" and i and s[i - 1] == "?":
            return "\\?"
        if ch in _COMMENT_ESCAPES:
            return _COMMENT_ESCAPES[ch]
        return ch if ch == " " or ch.isprintable() else _unicode_escape(ch)

    return _quoted(char(i, ch) for i, ch in enumerate(s))


_COMMENT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def cs_str(s: str) -> str:
    """A C# regular string literal for ``s``: fixed-width ``\\uXXXX``/``\\UXXXXXXXX`` escapes for all non-ASCII
    and control characters (never the variable-length ``\\x``)."""
    return _quoted(_QUOTE.get(ch) or (ch if 0x20 <= ord(ch) < 0x7F else _unicode_escape(ch)) for ch in s)


def json_str(s: str) -> str:
    """An ASCII-only JSON string: safe inside a shell or TOML comment (no line breaks can survive)."""
    return json.dumps(s, ensure_ascii=True)
