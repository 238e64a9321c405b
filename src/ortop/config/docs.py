"""The profile-key table, written from the knob registry so the documentation cannot drift from the code.

``python -m ortop.config.docs --markdown`` prints it; ``python -m ortop.cli.docgen`` writes it into
docs/reference/profile-keys.md, which a test checks for drift.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from ortop.config import knobs as K


def _literal(value: Any) -> str:
    """A default as it would be written in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _cell(text: str) -> str:
    """Text safe inside a table cell: a '|' would start a new column."""
    return text.replace("|", "\\|")


def _choices(knob: K.Knob) -> str:
    """The allowed strings as TOML spells them."""
    return " / ".join(f'"{c}"' for c in knob.choices)


def _entries(knob: K.Knob) -> str:
    """The declared entries of a map knob, grouped by provider: what ortop checks by name."""
    known = K.entries(knob.key)
    if not known:
        return ""
    if knob.target == K.PROVIDER_OPTION:
        parts = []
        for provider in dict.fromkeys(k.provider for k in known):
            names = ", ".join(f"`{k.name}`" + (f" ({' / '.join(k.choices)})" if k.choices else "")
                              for k in known if k.provider == provider)
            parts.append(f"for `{provider}` checked against: {names}")
        return "; " + "; ".join(parts)
    return ": " + ", ".join(f"`{k.name}`" for k in known) + ", …"


def _where(knob: K.Knob) -> str:
    """The ORT name column: where the value goes, then what it does."""
    if knob.is_map:
        text = knob.help + _entries(knob)
    else:
        text = _ort(knob)
    if knob.restarts:
        text += "; changing it restarts the worker"
    return text


def _ort(knob: K.Knob) -> str:
    """Where a single value goes, with its choices, then its help line."""
    if knob.target == K.SESSION_OPTION:
        ort = f"`SessionOptions.{knob.ort_name}`"
    elif knob.target == K.PROVIDER:
        ort = f"`InferenceSession({knob.ort_name}=…)`"
    elif knob.target in (K.CONFIG_ENTRY, K.GLOBAL_POOL, K.ENV):
        ort = f"`{knob.ort_name}`"
    else:
        ort = ""
    if knob.choices:
        ort += f" ({_choices(knob)})"
    return f"{ort} — {knob.help}" if ort else knob.help


def _key(knob: K.Knob) -> str:
    """The key column: maps are shown as the TOML table they are written as."""
    return f"`[{knob.key}]`" if knob.is_map else f"`{knob.key}`"


def markdown_table(registry: Iterable[K.Knob] | None = None) -> str:
    """One row per profile key (map entries are listed in their map's row), in declaration order; the knob registry
    (:func:`ortop.config.knobs.registry`) unless ``registry`` is given."""
    rows = ["| key | ORT name | default |", "|---|---|---|"]
    for knob in K.registry() if registry is None else registry:
        if K.is_entry(knob):
            continue
        default = (f"unset: {knob.unset}" if knob.unset else "ORT's") if knob.optional else _literal(knob.default)
        rows.append(f"| {_key(knob)} | {_cell(_where(knob))} | {_cell(default)} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m ortop.config.docs --markdown``: print the profile-key table."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["--markdown"]:
        print("usage: python -m ortop.config.docs --markdown", file=sys.stderr)
        return 2
    sys.stdout.write(markdown_table())
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess in the tests
    # Run the importable module's copy, so the registry read is the one every other module sees.
    from ortop.config import docs as _docs

    raise SystemExit(_docs.main())
