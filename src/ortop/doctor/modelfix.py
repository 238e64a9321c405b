"""The doctor's model-level findings, measured: write the fixed copy of the model, run the original and the copy
interleaved (``engine.bench.ab``, the same profile, the same inputs), and say the gain with its interval, or that there
is none.

- ``initializer-inputs``: initializers listed as graph inputs keep ORT from folding constants; the copy lists them
  no more (:func:`ortop.doctor.graph.write_without_initializer_inputs`, what ``--fix-model`` writes).
- ``unoptimized-graph``: the profile turns ORT's graph optimizations off (or to basic), so the graph runs as
  written; the copy is the graph ORT optimized offline at ``extended`` (``ortop variants``' ``opt-extended``),
  which runs optimized under the same profile without paying for the optimization at each session start. Such a
  file is tied to this onnxruntime.

Run only in the doctor's measured tier (``ortop doctor`` with a budget, on a session that works): writing a copy
and building two more sessions is not for the quick path. The copies live in a temporary folder, removed after.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ortop.config.profile import Profile
from ortop.doctor.findings import Finding

MODEL_FIX_BUDGET_S = 8.0   # most measuring time for the copies, whatever the doctor's budget (it stops once decided)
LOW_LEVELS = ("disable", "basic")


@dataclass(frozen=True)
class ModelFix:
    """A model-level finding whose fix is a copy of the model: ``applies`` says whether the finding holds for the
    model (a ``ModelInfo``) and profile, ``write`` writes the copy into a folder and returns its path."""

    check: str
    copy: str                                          # what the copy is, in words
    applies: Callable[[Any, Profile], bool]
    write: Callable[[str, Profile, str], str]


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _without_initializer_inputs(model_path: str, profile: Profile, folder: str) -> str:
    from ortop.doctor.graph import write_without_initializer_inputs

    dst = os.path.join(folder, f"{_stem(model_path)}-fixed.onnx")
    write_without_initializer_inputs(model_path, dst)
    return dst


def _optimized_offline(model_path: str, profile: Profile, folder: str) -> str:
    from ortop.engine.answers.variants import make_variants

    (v,) = make_variants(model_path, profile, folder, ["opt-extended"]).variants
    if not v.ok:
        raise RuntimeError(f"ORT could not write its optimized graph: {v.error}")
    return v.path


MODEL_FIXES: tuple[ModelFix, ...] = (
    ModelFix("initializer-inputs", "the copy without initializers in the graph inputs",
             lambda m, p: bool(m.initializer_inputs) and m.ir_version >= 4, _without_initializer_inputs),
    ModelFix("unoptimized-graph", "the graph ORT optimized offline (extended)",
             lambda m, p: p.session.graph_optimization_level in LOW_LEVELS, _optimized_offline),
)


@dataclass(frozen=True)
class FixMeasured:
    """One fix's copy against the original: the comparisons by metric, the copy's outputs against the original's
    (words, "" when not compared), or why it could not be measured."""

    check: str
    copy: str
    comparisons: Mapping[str, Any] = field(default_factory=dict)
    outputs: str = ""
    outputs_differ: tuple[str, ...] = ()
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        from ortop.doctor.findings import change_evidence

        return {"copy": self.copy, "error": self.error or None, "outputs": self.outputs or None,
                "outputs_differ": list(self.outputs_differ),
                **{m: change_evidence(c) for m, c in self.comparisons.items()}}

    def evidence(self) -> dict[str, Any]:
        """What a finding shows of it: the copy, p50 and throughput in words, and its outputs."""
        if self.error:
            return {"copy": self.copy, "error": self.error}
        out: dict[str, Any] = {"copy": self.copy,
                               "measured": [self.comparisons[m].text() for m in ("p50", "throughput")
                                            if m in self.comparisons]}
        if self.outputs:
            out["agreement"] = self.outputs
        return out

    def gain_text(self) -> str:
        """The gain (p50 and throughput) in words, or why it is not known."""
        if self.error:
            return f"could not be measured: {self.error}"
        p50 = self.comparisons.get("p50")
        if p50 is None:
            return "not measured"
        if p50.verdict == "faster":
            head = f"the copy runs faster here: {p50.text()}"
        elif p50.verdict == "slower":
            head = f"the copy runs slower here: {p50.text()}"
        elif p50.verdict == "no difference":
            head = f"no gain measured here: {p50.text()}"
        else:
            head = f"no gain shown yet: {p50.text()}"
        if self.outputs_differ:
            head += f"; its outputs differ ({'; '.join(self.outputs_differ)})"
        return head


def applicable(model: Any, profile: Profile) -> list[ModelFix]:
    return [f for f in MODEL_FIXES if f.applies(model, profile)]


def measure_model_fixes(model_path: str, profile: Profile, *, budget_s: float, stop: threading.Event | None = None,
                        on_start: Callable[[str], None] | None = None,
                        fixes: Sequence[ModelFix] | None = None) -> dict[str, FixMeasured]:
    """Write each applicable fix's copy and compare them all with the original in one interleaved comparison of at
    most ``budget_s`` seconds (it stops once the p50 verdicts are settled). By check name; empty when none applies.
    A copy that cannot be written, or a comparison that cannot run, is that fix's ``error``."""
    from ortop.engine.bench import ab
    from ortop.engine.live import headless
    from ortop.errors import OrtopError
    from ortop.measure.agreement import Tolerance
    from ortop.model import load_model

    model = load_model(model_path)
    todo = list(fixes) if fixes is not None else applicable(model, profile)
    if not todo or not budget_s > 0:
        return {}
    out: dict[str, FixMeasured] = {}
    with tempfile.TemporaryDirectory(prefix="ortop-doctor-fix-") as folder:
        copies: dict[str, str] = {}
        for f in todo:
            try:
                copies[f.check] = f.write(model_path, profile, folder)
            except (OrtopError, OSError, RuntimeError) as exc:
                out[f.check] = FixMeasured(f.check, f.copy, error=f"the copy could not be written: {exc}")
        if not copies:
            return out
        what = {f.check: f.copy for f in todo}
        if on_start is not None:
            on_start(f"interleaving the model with {'; '.join(what[c] for c in copies)} for at most "
                     f"{budget_s:g} s")
        original = replace(profile, model=model_path)
        profiles = [original, *(replace(profile, model=p) for p in copies.values())]
        try:
            res = headless.compare(model_path, profiles, budget_s=budget_s, names=["original", *copies], stop=stop,
                                   decide_on="p50", tolerance=Tolerance())
        except (ab.AbError, OrtopError) as exc:
            for check in copies:
                out[check] = FixMeasured(check, what[check], error=str(exc))
            return out
        for i, check in enumerate(copies, start=1):
            fig = res.configs[i]
            out[check] = FixMeasured(check, what[check], {c.metric: c for c in res.comparisons if c.other == i},
                                     fig.agreement_text(), tuple(fig.differs))
    return out


def merge(findings: Sequence[Finding], measured: Mapping[str, FixMeasured], profile: Profile) -> list[Finding]:
    """The findings with each measured fix in its evidence and fix text; a static finding whose copy measured no
    faster (a decided no difference, or slower) becomes info. A fix with no static finding of its own
    (``unoptimized-graph``) becomes one."""
    out = []
    for f in findings:
        m = measured.get(f.check)
        if m is None:
            out.append(f)
            continue
        p50 = m.comparisons.get("p50")
        severity = "info" if p50 is not None and p50.verdict in ("no difference", "slower") else f.severity
        out.append(replace(f, severity=severity, evidence={**f.evidence, "fixed_copy": m.evidence()},
                           fix=f"{f.fix}. Measured: {m.gain_text()}"))
    seen = {f.check for f in findings}
    for check, m in measured.items():
        if check not in seen and check == "unoptimized-graph":
            out.append(unoptimized_finding(m, profile))
    return out


def unoptimized_finding(m: FixMeasured, profile: Profile) -> Finding:
    level = profile.session.graph_optimization_level
    p50 = m.comparisons.get("p50")
    faster = p50 is not None and p50.verdict == "faster" and not m.outputs_differ
    msg = (f"graph_optimization_level is {level!r}: ORT runs the graph much as written, without the fusions and "
           "constant folding of the higher levels")
    fix = (f"run the graph ORT optimized offline (`ortop variants MODEL` writes it as MODEL.opt-extended.onnx; it is "
           f"tied to this onnxruntime), or raise graph_optimization_level if session start time allows. Measured: "
           f"{m.gain_text()}")
    return Finding("unoptimized-graph", "warning" if faster else "info", msg,
                   {"graph_optimization_level": level, "fixed_copy": m.evidence()}, fix)
