"""String literals of the export targets: every string taken from a profile is written through one of these, so a
value (a model path, a config entry, a provider option) can only ever end up as data, never as code.
"""

from __future__ import annotations

import json


def py_str(s: str) -> str:
    """A Python string literal for ``s`` (repr escapes quotes, backslashes, newlines and unprintables)."""
    return repr(s)


def cpp_str(s: str) -> str:
    """A C/C++ string literal holding the UTF-8 bytes of ``s``.

    Printable ASCII stays as is; everything else becomes a three-digit octal escape (octal escapes stop after
    three digits, unlike the greedy ``\\x``). ``?`` is escaped so no trigraph such as ``??/`` can form.
    """
    out = ['"']
    for b in s.encode("utf-8", "surrogatepass"):
        c = chr(b)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "?":
            out.append("\\?")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def comment_str(s: str) -> str:
    """``s`` quoted for a ``//`` comment of C++ or C#, readable as it was written: printable text stays as it is,
    UTF-8 included (``threads 2 · spin off``); a quote and a backslash are escaped, as is the second of two ``?``
    (no trigraph), and what is not printable (line breaks, controls, bidirectional overrides, U+2028) becomes a
    ``\\n``/``\\t``/``\\uXXXX`` escape, so the value can neither end the comment's line nor splice the next one
    into it, nor reorder how the line reads."""
    out = ['"']
    for i, ch in enumerate(s):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "?" and i and s[i - 1] == "?":
            out.append("\\?")
        elif ch in _COMMENT_ESCAPES:
            out.append(_COMMENT_ESCAPES[ch])
        elif ch == " " or ch.isprintable():
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


_COMMENT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def cs_str(s: str) -> str:
    """A C# regular string literal for ``s``: fixed-width ``\\uXXXX``/``\\UXXXXXXXX`` escapes for all non-ASCII
    and control characters (never the variable-length ``\\x``)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def json_str(s: str) -> str:
    """An ASCII-only JSON string: safe inside a shell or TOML comment (no line breaks can survive)."""
    return json.dumps(s, ensure_ascii=True)
