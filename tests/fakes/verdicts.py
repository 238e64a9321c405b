"""A stand-in for the engine's per-row verdict object: the three attributes the UI reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FakeVerdict:
    """``kind`` (measuring, unverified, verifying, faster, slower, no difference, undecided, not comparable),
    ``short`` for the table cell and ``text`` for the detail line."""

    kind: str
    short: str
    text: str
