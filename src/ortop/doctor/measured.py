"""The doctor's checks that run the model: each proposes one change to try, all are tried in one interleaved
comparison against the start profile (``engine.ab``: blocks alternating in one worker, paired, with intervals), and
each judges its own result.

- ``spinning``: at a paced rate the intra-op pool spins between runs, burning CPU while nothing runs. Tried:
  ``allow_spinning = false``; judged on CPU per run (the saving) and p50 (the latency cost).
- ``variance``: a p99 more than :data:`P99_OVER_P50` times the p50. Tried: ``dynamic_block_base = 4``; judged on
  p99, and offered as a patch (a warning) only when it helped; otherwise the variance is reported as info, since
  no setting the doctor knows acts on it (a shared host's noise often looks like this).

A check with nothing to try (a closed loop, one thread, the setting already there) says why in ``not_tried``; the
variance is still judged on the start profile's own figures. Runs the same list from the CLI and the TUI.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ortop.collectors.host import HostFacts
from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.doctor.findings import Finding, patch_text
from ortop.doctor.static import intra_threads, pace_findings
from ortop.measure.stats import num_or_nan

P99_OVER_P50 = 2.0        # latency varies when p99 is more than this many times p50
SPIN_SAVING_PCT = 10.0    # a CPU saving below this is worth knowing, not worth a warning
SPIN_OFF: dict[str, Any] = {"session.allow_spinning": False}     # what the spinning check tries
BLOCK_BASE: dict[str, Any] = {"session.dynamic_block_base": 4}   # what the variance check tries


@dataclass(frozen=True)
class Figures:
    """One configuration's figures over all its measured runs."""

    runs: int
    p50_ms: float
    p99_ms: float
    cpu_ms_per_run: float

    def as_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return round(x, 4) if math.isfinite(x) else None

        return {"runs": self.runs, "p50_ms": num(self.p50_ms), "p99_ms": num(self.p99_ms),
                "cpu_ms_per_run": num(self.cpu_ms_per_run)}


@dataclass(frozen=True)
class Trial:
    """What a measured check judges: the start profile's figures, and its candidate's comparisons by metric
    (``measure.compare.Comparison``; empty when nothing was tried, ``why_not`` then says why)."""

    profile: Profile
    baseline: Figures
    comparisons: Mapping[str, Any] = field(default_factory=dict)
    why_not: str = ""


@dataclass(frozen=True)
class MeasuredCheck:
    """A check that runs the model: ``candidate`` proposes a patch to try (or None and why not), ``judge`` reads
    the trial."""

    name: str
    candidate: Callable[[Profile, HostFacts], tuple[dict[str, Any] | None, str]]
    judge: Callable[[Trial], list[Finding]]


def change_evidence(c: Any) -> dict[str, Any]:
    """A comparison as evidence: before, after, the change and its interval, the verdict, the pairs."""
    d = c.as_dict()
    return {k: d[k] for k in ("before", "after", "change_pct", "ci_low_pct", "ci_high_pct", "verdict", "pairs",
                              "text")}


# ---- spinning ------------------------------------------------------------------------------------------------------
def spin_candidate(profile: Profile, host: HostFacts) -> tuple[dict[str, Any] | None, str]:
    if profile.workload.rate_hz <= 0:
        return None, "a closed loop (--rate 0): runs follow each other, so nothing spins between them"
    if profile.session.allow_spinning is False:
        return None, "spinning is already off"
    if intra_threads(profile, host)[0] <= 1:
        return None, "one intra-op thread: there is no pool to spin"
    return dict(SPIN_OFF), ""


def judge_spinning(t: Trial) -> list[Finding]:
    cpu, p50 = t.comparisons.get("cpu"), t.comparisons.get("p50")
    if cpu is None or p50 is None:
        return []
    rate = t.profile.workload.rate_hz
    evidence = {"rate_hz": rate, "cpu_ms_per_run": change_evidence(cpu), "p50_ms": change_evidence(p50)}
    if cpu.verdict == "faster" and -cpu.change_pct >= SPIN_SAVING_PCT:
        return [Finding("spinning", "warning",
                        f"at {rate:g} Hz the intra-op pool spins between runs: with spinning off, {cpu.text()}",
                        evidence, f"set {patch_text(SPIN_OFF)} (the pool's threads then sleep between "
                        f"runs); what it costs in latency here: {p50.text()}", dict(SPIN_OFF))]
    return [Finding("spinning", "info", f"at {rate:g} Hz turning spinning off saves no CPU worth having: {cpu.text()}",
                    evidence, "nothing needed")]


# ---- latency variance ------------------------------------------------------------------------------------------------
def dbb_candidate(profile: Profile, host: HostFacts) -> tuple[dict[str, Any] | None, str]:
    if profile.session.dynamic_block_base:
        return None, f"dynamic_block_base is already {profile.session.dynamic_block_base}"
    if intra_threads(profile, host)[0] <= 1:
        return None, "one intra-op thread: dynamic_block_base splits work between pool threads, and there are none"
    return dict(BLOCK_BASE), ""


def judge_variance(t: Trial) -> list[Finding]:
    b = t.baseline
    if not (b.p50_ms > 0 and math.isfinite(b.p99_ms)):
        return []
    ratio = b.p99_ms / b.p50_ms
    if ratio <= P99_OVER_P50:
        return []
    evidence: dict[str, Any] = {"p50_ms": round(b.p50_ms, 4), "p99_ms": round(b.p99_ms, 4),
                                "p99_over_p50": round(ratio, 2), "runs": b.runs}
    msg = f"latency varies: p99 is {ratio:.1f}× p50 ({b.p99_ms:.3g} vs {b.p50_ms:.3g} ms)"
    others = ("other load on the host (the CPU panel of `ortop`), more threads than free cores, or unpinned threads "
              "moving between cores")
    p99 = t.comparisons.get("p99")
    if p99 is None:
        return [Finding("variance", "info", msg, evidence, f"dynamic_block_base was not tried ({t.why_not}); "
                        f"look for {others}")]
    evidence["dynamic_block_base_4"] = change_evidence(p99)
    if p99.verdict == "faster":
        return [Finding("variance", "warning", msg, evidence,
                        f"set {patch_text(BLOCK_BASE)} (parallel loops in shrinking blocks, so a slow thread "
                        f"holds up less): {p99.text()}", dict(BLOCK_BASE))]
    # Nothing the doctor tried is known to help: worth knowing, but no setting to act on (a shared host often
    # does this).
    if p99.verdict == "undecided":
        tried = (f"whether dynamic_block_base = 4 helps, this measurement cannot tell ({p99.text()}): a longer "
                 f"--budget can; else look for {others}")
    else:
        tried = f"dynamic_block_base = 4 did not help here ({p99.text()}); look for {others}"
    return [Finding("variance", "info", msg, evidence, tried)]


MEASURED_CHECKS: tuple[MeasuredCheck, ...] = (
    MeasuredCheck("spinning", spin_candidate, judge_spinning),
    MeasuredCheck("variance", dbb_candidate, judge_variance),
)


# ---- running them --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MeasuredResult:
    findings: tuple[Finding, ...]
    checks: tuple[str, ...]                 # the measured checks that ran
    tried: Mapping[str, Mapping[str, Any]]  # check -> the patch it tried
    not_tried: Mapping[str, str]            # check -> why nothing was tried
    baseline: Figures | None
    elapsed_s: float
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"checks": list(self.checks), "tried": {k: patch_text(v) for k, v in self.tried.items()},
                "not_tried": dict(self.not_tried), "baseline": self.baseline.as_dict() if self.baseline else None,
                "elapsed_s": round(self.elapsed_s, 2), "warnings": list(self.warnings)}


def run_measured(model_path: str, profile: Profile, host: HostFacts, *, budget_s: float,
                 checks: Sequence[str] | None = None, stop: threading.Event | None = None,
                 on_start: Callable[[str], None] | None = None) -> MeasuredResult:
    """Try every applicable check's candidate against ``profile`` in one interleaved comparison of ``budget_s``
    seconds (builds not counted), or, with nothing to try, measure ``profile`` alone; then let each check judge.

    ``checks`` limits the run to those names. A comparison that cannot run (a build or run failure, not enough
    memory for the sessions side by side) becomes a ``measure`` finding. ``on_start`` gets a line saying what is
    being measured.
    """
    from ortop.engine import ab, headless

    chosen = [c for c in MEASURED_CHECKS if checks is None or c.name in checks]
    profile = replace(profile, model=model_path)
    tried: dict[str, dict[str, Any]] = {}
    not_tried: dict[str, str] = {}
    for c in chosen:
        patch, why = c.candidate(profile, host)
        if patch:
            tried[c.name] = patch
        else:
            not_tried[c.name] = why
    names = [c.name for c in chosen]
    comparisons: dict[str, dict[str, Any]] = {}
    warnings: tuple[str, ...] = ()
    try:
        if tried:
            candidates = [profile_mod.merge(profile, **patch) for patch in tried.values()]
            if on_start is not None:
                on_start(f"interleaving the profile with {'; '.join(patch_text(p) for p in tried.values())} for "
                         f"{budget_s:g} s")
            res = headless.compare(model_path, [profile, *candidates], budget_s=budget_s,
                                   names=["start", *tried], stop=stop)
            c0 = res.configs[0]
            baseline = Figures(c0.runs, c0.p50_ms, c0.p99_ms, c0.cpu_ms_per_run)
            served = c0.throughput_per_s
            for i, name in enumerate(tried, start=1):
                comparisons[name] = {c.metric: c for c in res.comparisons if c.other == i}
            elapsed, warnings = res.elapsed_s, res.warnings
        else:
            if on_start is not None:
                on_start(f"measuring the profile for {budget_s:g} s")
            r = headless.measure(model_path, profile, duration_s=budget_s, stop=stop)
            if r.fatal:
                raise ab.AbError(r.fatal)
            lat, cpu = r.summary["latency_ms"], r.summary["cpu"]
            baseline = Figures(r.summary["runs"], num_or_nan(lat.get("p50")), num_or_nan(lat.get("p99")),
                               num_or_nan(cpu.get("cpu_ms_per_run")))
            served = num_or_nan(r.summary.get("throughput_per_s"))
            elapsed, warnings = r.duration_s, tuple(r.summary.get("warnings", ()))
    except ab.AbError as exc:
        f = Finding("measure", "warning", f"the measured checks could not run: {exc}", {"error": str(exc)},
                    "fix what the error names, or run the doctor with --budget 0 for the other checks")
        return MeasuredResult((f,), tuple(names), tried, not_tried, None, 0.0)
    findings: list[Finding] = pace_findings(profile, served)
    for c in chosen:
        trial = Trial(profile, baseline, comparisons.get(c.name, {}), not_tried.get(c.name, ""))
        findings.extend(c.judge(trial))
    return MeasuredResult(tuple(findings), tuple(names), tried, not_tried, baseline, elapsed, warnings)

