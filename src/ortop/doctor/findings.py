"""A finding: what a check saw, what to do about it, and the profile change that does it.

Every check of the doctor (static or measured) returns these; the CLI prints them (text or JSON), the TUI lists them
and applies their patches, ``--save-fixed`` writes a profile with every patch applied. ``profile_patch`` uses the
dotted keys of ``ortop.config.profile.merge`` (``{"session.allow_spinning": False}``); a value of None removes
the key (back to ORT's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

SEVERITIES = ("info", "warning", "error")          # in rising order
RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Finding:
    """One thing a check found.

    Attributes:
        check: the check's name (``threads``, ``providers``, …).
        severity: ``info`` (worth knowing), ``warning`` (costs time, CPU or memory), ``error`` (does not work as
            asked: a provider that fell back, a CUDA graph that cannot be captured).
        message: one line: what is wrong.
        evidence: what was seen, by name: numbers, node names, ORT's log lines.
        fix: what to do, in words.
        profile_patch: the profile change that applies the fix (dotted keys), or None when no setting fixes it.
    """

    check: str
    severity: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""
    profile_patch: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.severity not in RANK:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, got {self.severity!r}")
        object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))
        if self.profile_patch is not None:
            object.__setattr__(self, "profile_patch", MappingProxyType(dict(self.profile_patch)))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: tuples as lists, the patch as a plain dict (or None)."""
        return {"check": self.check, "severity": self.severity, "message": self.message,
                "evidence": _plain(self.evidence), "fix": self.fix,
                "profile_patch": None if self.profile_patch is None else _plain(self.profile_patch)}


def _plain(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    if isinstance(v, float) and v != v:  # NaN has no JSON spelling
        return None
    return v


def by_severity(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; the checks' own order within a severity."""
    return sorted(findings, key=lambda f: -RANK[f.severity])


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``."""
    out = {s: 0 for s in reversed(SEVERITIES)}
    for f in findings:
        out[f.severity] += 1
    return out


def exit_code(findings: Iterable[Finding]) -> int:
    """0 when nothing is above info, else :data:`ortop.errors.EXIT_FINDINGS` (3: a result, not a failure)."""
    from ortop.errors import EXIT_FINDINGS, EXIT_OK

    return EXIT_FINDINGS if any(RANK[f.severity] > RANK["info"] for f in findings) else EXIT_OK


def patch_text(patch: Mapping[str, Any] | None) -> str:
    """``session.allow_spinning = false, session.dynamic_block_base = 4`` (TOML spelling; "default" for None)."""
    if not patch:
        return ""
    return ", ".join(f"{k} = {_toml_value(v)}" for k, v in patch.items())


def _toml_value(v: Any) -> str:
    if v is None:
        return "(ORT's default)"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, Mapping):
        return "{" + ", ".join(f'"{k}" = {_toml_value(x)}' for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


def apply_patches(profile: Any, findings: Iterable[Finding]) -> tuple[Any, list[str]]:
    """``profile`` with every finding's patch merged in, most severe first; when two patches set one key, the
    first (more severe) one's value is kept. Returns (profile, notes): a patch the profile refuses is left out,
    with a note saying why.
    """
    from ortop.config import profile as profile_mod
    from ortop.config.profile import ProfileError

    notes: list[str] = []
    done: set[str] = set()
    for f in by_severity(findings):
        if not f.profile_patch:
            continue
        patch = {k: v for k, v in f.profile_patch.items() if k not in done}
        if not patch:
            continue
        try:
            profile = profile_mod.merge(profile, **patch)
        except ProfileError as exc:
            notes.append(f"{f.check}: patch {patch_text(patch)} not applied: {exc}")
            continue
        done.update(patch)
    return profile, notes


SPIN_SAVING_PCT = 10.0    # a CPU saving below this is worth knowing, not worth a warning
SPIN_OFF: dict[str, Any] = {"session.allow_spinning": False}     # what the spinning check tries


def change_evidence(c: Any) -> dict[str, Any]:
    """A comparison as evidence: before, after, the change and its interval, the verdict, the pairs."""
    d = c.as_dict()
    return {k: d[k] for k in ("before", "after", "change_pct", "ci_low_pct", "ci_high_pct", "verdict", "pairs",
                              "text")}
