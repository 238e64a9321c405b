"""The doctor's readable report: a header (model, session, host, what was measured), then each finding, most severe
first, with what was seen, what to do and the profile change that does it. ``--json`` prints
:meth:`ortop.doctor.diagnose.Diagnosis.as_dict` instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from ortop.doctor.findings import Finding, counts, patch_text
from ortop.present import ms_text

LABEL = {"error": "ERROR", "warning": "WARNING", "info": "info"}
INDENT = 9          # the column where a finding's text starts, after its severity


FIGURES = ("runs", "p50_ms", "p99_ms")   # the keys of one shape's figures (measured._shape_dict) ...
IMPLIED = ("p99_over_p50",)             # ... and one the text leaves out: the message names the spread it judged


def is_figures(v: Any) -> bool:
    """Whether ``v`` is one shape's figures and nothing else (other keys would be lost in words)."""
    return isinstance(v, Mapping) and all(k in v for k in FIGURES) and set(v) <= {*FIGURES, *IMPLIED}


def figures_text(v: Mapping[str, Any]) -> str:
    """Runs and percentiles in words: ``12 runs, p50 18.1 ms, p99 72.3 ms`` (not ``runs 12, p50_ms 18.1, …``)."""
    runs = v["runs"]
    parts = [f"{runs:,} runs" if isinstance(runs, int) else f"{runs} runs"]
    for key in ("p50", "p99"):
        ms = ms_text(v[f"{key}_ms"])
        parts.append(f"{key} {ms}" + ("" if ms == "—" else " ms"))
    return ", ".join(parts)


def evidence_text(v: Any) -> str:
    """An evidence value as text: a comparison as its sentence, figures in words, figures by name (per shape) as
    ``seq_len=53: 12 runs, p50 18.1 ms, p99 72.3 ms; …``, other lists and maps inline, empty lists as a dash."""
    if isinstance(v, Mapping) and "text" in v:  # a comparison: its sentence says it all
        return str(v["text"])
    if is_figures(v):
        return figures_text(v)
    if isinstance(v, Mapping) and v and all(is_figures(x) for x in v.values()):
        return "; ".join(f"{k}: {figures_text(x)}" for k, x in v.items())
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {evidence_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(evidence_text(x) for x in v) if v else "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    if v is None:
        return "—"
    return str(v)


def _wrap(text: str, first: str, width: int) -> list[str]:
    pad = " " * len(first)
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=pad,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def format_finding(f: Finding, width: int = 110) -> list[str]:
    """One finding as lines: severity and check, the message, then ``seen`` (evidence), ``fix`` and ``patch``."""
    head = f"{LABEL[f.severity]:<{INDENT - 1}} "
    lines = _wrap(f"{f.check}: {f.message}", head, width)
    pad = " " * INDENT
    for i, (k, v) in enumerate(f.evidence.items()):
        lead = f"{pad}{'seen' if i == 0 else '':<7}{k}: "
        if k == "log" and isinstance(v, (list, tuple)):  # ORT's lines, one paragraph each
            lines.append(f"{pad}{'seen' if i == 0 else '':<7}log:")
            for line in v:
                lines.extend(textwrap.wrap(str(line), width=width, initial_indent=f"{pad}{'':<9}",
                                           subsequent_indent=f"{pad}{'':<11}") or [""])
            continue
        lines.extend(_wrap(evidence_text(v), lead, width))
    if f.fix:
        lines.extend(_wrap(f.fix, f"{pad}{'fix':<7}", width))
    if f.profile_patch:
        lines.extend(_wrap(patch_text(f.profile_patch), f"{pad}{'patch':<7}", width))
    return lines


def format_report(d: Any, width: int = 110) -> str:
    """The whole report for a :class:`ortop.doctor.diagnose.Diagnosis`."""
    s = d.session
    active = s.get("providers_active")
    requested = s.get("providers_requested") or d.profile.providers()
    if active is None:
        session = "not built"
    else:
        session = ", ".join(active) + (f" (requested {', '.join(requested)})" if set(requested) - set(active) else "")
        if s.get("create_ms") is not None:
            session += f"; created in {s['create_ms']:.0f} ms"
    lines = [f"ortop doctor  {d.model_path}", f"session       {session}"]
    if s.get("feeds"):
        lines.extend(_wrap(", ".join(s["feeds"]), "inputs        ", width))
    load = d.host_load
    busy = (f"; other processes {load.others_pct:.0f} % of the CPUs while the doctor ran (ortop "
            f"{load.ours_pct:.0f} %)" if load is not None else "")
    lines.extend(_wrap(f"{d.host.describe()}{busy}", "host          ", width))
    m = d.measured
    if m is None:
        lines.append(f"measured      not run ({d.skipped_measured})")
    else:
        # what was compared, under what traffic, how many block pairs, how long
        what = m.compared or "nothing: the comparison could not run"
        b = m.baseline
        figs = (f"; the profile: p50 {b.p50_ms:.3g} ms, p99 {b.p99_ms:.3g} ms, CPU {b.cpu_ms_per_run:.3g} ms per run"
                if b is not None else "")
        lines.extend(_wrap(f"{what}{figs}", "measured      ", width))
    lines.append("")
    for f in d.findings:
        lines.extend(format_finding(f, width))
        lines.append("")
    c = counts(d.findings)
    parts = [f"{n} {k}{'s' if n != 1 and k != 'info' else ''}" for k, n in c.items() if n]
    summary = (", ".join(parts) if parts else "nothing found") + f" ({len(d.checks)} checks)"
    patched = sum(1 for f in d.findings if f.profile_patch)
    if patched:
        summary += (f". {patched} finding{'s carry' if patched != 1 else ' carries'} a profile patch: "
                    f"--save-fixed FIXED.toml writes the profile with {'them' if patched != 1 else 'it'} applied")
    lines.extend(_wrap(summary + ".", "", width))
    return "\n".join(lines)
