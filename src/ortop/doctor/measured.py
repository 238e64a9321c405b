"""The doctor's checks that run the model: each proposes one change to try, all are tried in one interleaved
comparison against the start profile (``engine.bench.ab``: blocks alternating in one worker, paired, with intervals),
and each judges its own result.

- ``spinning``: the intra-op pool spins while it waits for work, burning CPU while nothing runs: between runs at a
  paced rate, and in a closed loop too, while the caller runs a graph's serial parts and after each run. Tried:
  ``allow_spinning = false``; judged on CPU per run (the saving) and p50 (the latency cost).
- ``variance``: a p99 more than :data:`P99_OVER_P50` times the p50 within one input shape. Under a shape mix the
  spread between shapes is the mix itself (16 tokens against 128), not jitter: each shape's p99 is judged against
  its own p50, and the evidence says so. Tried: ``dynamic_block_base = 4``; judged on p99, and offered as a patch (a
  warning) only when it helped; otherwise the variance is reported as info, since no setting the doctor knows acts
  on it (a shared host's noise often looks like this).

Every finding says what was measured to reach it (``measured``: the configurations compared, the traffic, the
block pairs and the seconds), and so does :meth:`MeasuredResult.summary`. A check with nothing to try (one thread,
the setting already there) says why in ``not_tried``; the variance is still judged on the start profile's own
figures. Runs the same list from the CLI and the TUI.
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
from ortop.doctor.findings import SPIN_OFF, SPIN_SAVING_PCT, Finding, change_evidence, patch_text
from ortop.doctor.static import intra_threads, pace_findings
from ortop.engine.bench.ab import ShapeFigures
from ortop.engine.traffic import offered_rate
from ortop.measure.pace import Pace, servers_of
from ortop.measure.stats import num_or_nan

P99_OVER_P50 = 2.0        # latency varies when p99 is more than this many times p50
SHAPE_MIN_RUNS = 100      # a shape's p99 from fewer runs is its slowest run or two, not a tail worth judging
BLOCK_BASE: dict[str, Any] = {"session.dynamic_block_base": 4}   # what the variance check tries


def _round(x: float, digits: int = 4) -> float | None:
    return round(x, digits) if math.isfinite(x) else None


def spread(s: ShapeFigures) -> float:
    """A shape's p99 over its own p50 (nan where either is unknown)."""
    return s.p99_ms / s.p50_ms if s.p50_ms > 0 and math.isfinite(s.p99_ms) else math.nan


def _shape_dict(s: ShapeFigures) -> dict[str, Any]:
    return {"runs": s.runs, "p50_ms": _round(s.p50_ms), "p99_ms": _round(s.p99_ms),
            "p99_over_p50": _round(spread(s), 2)}


@dataclass(frozen=True)
class Figures:
    """One configuration's figures over all its measured runs; ``shapes`` each input shape's under a mix (empty
    with one shape)."""

    runs: int
    p50_ms: float
    p99_ms: float
    cpu_ms_per_run: float
    shapes: tuple[ShapeFigures, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"runs": self.runs, "p50_ms": _round(self.p50_ms), "p99_ms": _round(self.p99_ms),
                               "cpu_ms_per_run": _round(self.cpu_ms_per_run)}
        if self.shapes:
            out["shapes"] = {s.label: _shape_dict(s) for s in self.shapes}
        return out


@dataclass(frozen=True)
class Trial:
    """What a measured check judges: the start profile's figures, and its candidate's comparisons by metric
    (``measure.compare.Comparison``; empty when nothing was tried, ``why_not`` then says why)."""

    profile: Profile
    baseline: Figures
    comparisons: Mapping[str, Any] = field(default_factory=dict)
    why_not: str = ""
    measured: str = ""   # what was measured to reach it, in words (:func:`measured_text`)


@dataclass(frozen=True)
class MeasuredCheck:
    """A check that runs the model: ``candidate`` proposes a patch to try (or None and why not), ``judge`` reads
    the trial, ``versus`` names the start profile against the candidate in words (``spinning on vs off``)."""

    name: str
    candidate: Callable[[Profile, HostFacts], tuple[dict[str, Any] | None, str]]
    judge: Callable[[Trial], list[Finding]]
    versus: Callable[[Profile], str]


# ---- spinning ------------------------------------------------------------------------------------------------------
def spin_candidate(profile: Profile, host: HostFacts) -> tuple[dict[str, Any] | None, str]:
    # Not only at a paced rate: in a closed loop the pool spins too, while the caller runs the graph's serial parts
    # and between one run and the next, and on a host whose CPUs other processes want that time is theirs. Whether
    # it costs CPU here is what the comparison measures.
    if profile.session.allow_spinning is False:
        return None, "spinning is already off"
    if intra_threads(profile, host)[0] <= 1:
        return None, "one intra-op thread: there is no pool to spin"
    return dict(SPIN_OFF), ""


def spin_versus(profile: Profile) -> str:
    return "spinning on vs off"


def judge_spinning(t: Trial) -> list[Finding]:
    cpu, p50 = t.comparisons.get("cpu"), t.comparisons.get("p50")
    if cpu is None or p50 is None:
        return []
    from ortop.measure.arrivals import CLOSED, mode_of

    rate = t.profile.workload.rate_hz
    evidence = {"measured": t.measured, "rate_hz": rate, "cpu_ms_per_run": change_evidence(cpu),
                "p50_ms": change_evidence(p50)}
    where = traffic_words(t.profile)
    closed = mode_of(t.profile.workload) == CLOSED
    waits = "while it waits for work (the graph's serial parts, between runs)" if closed else "between runs"
    if cpu.verdict == "faster" and -cpu.change_pct >= SPIN_SAVING_PCT:
        return [Finding("spinning", "warning",
                        f"{where} the intra-op pool spins {waits}: with spinning off, {cpu.text()}",
                        evidence, f"set {patch_text(SPIN_OFF)} (the pool's threads then sleep while they wait); "
                        f"what it costs in latency here: {p50.text()}", dict(SPIN_OFF))]
    return [Finding("spinning", "info", f"{where} turning spinning off saves no CPU worth having: {cpu.text()}",
                    evidence, "nothing needed")]


# ---- latency variance ------------------------------------------------------------------------------------------------
def dbb_candidate(profile: Profile, host: HostFacts) -> tuple[dict[str, Any] | None, str]:
    if profile.session.dynamic_block_base:
        return None, f"dynamic_block_base is already {profile.session.dynamic_block_base}"
    if intra_threads(profile, host)[0] <= 1:
        return None, "one intra-op thread: dynamic_block_base splits work between pool threads, and there are none"
    return dict(BLOCK_BASE), ""


def dbb_versus(profile: Profile) -> str:
    tried = BLOCK_BASE["session.dynamic_block_base"]
    return f"dynamic_block_base {profile.session.dynamic_block_base or 'unset'} vs {tried}"


def judge_variance(t: Trial) -> list[Finding]:
    b = t.baseline
    if not (b.p50_ms > 0 and math.isfinite(b.p99_ms)):
        return []
    ratio = b.p99_ms / b.p50_ms
    evidence: dict[str, Any] = {"measured": t.measured, "p50_ms": round(b.p50_ms, 4), "p99_ms": round(b.p99_ms, 4),
                                "p99_over_p50": round(ratio, 2), "runs": b.runs}
    if b.shapes:
        # A mix: p99 against p50 over every run measures how far apart the shapes are. Jitter is the spread of one
        # shape's runs around its own p50.
        judged = [s for s in b.shapes if s.runs >= SHAPE_MIN_RUNS and math.isfinite(spread(s))]
        evidence["per_shape"] = {s.label: _shape_dict(s) for s in b.shapes}
        if not judged:
            if ratio <= P99_OVER_P50:
                return []
            evidence["judged"] = f"no shape ran {SHAPE_MIN_RUNS} times: the spread within each cannot be told"
            return [Finding("variance", "info",
                            f"p99 is {ratio:.1f}× p50 over the shape mix, which is mostly the shapes' own sizes; too "
                            f"few runs of each shape (fewer than {SHAPE_MIN_RUNS}) to judge the spread within one",
                            evidence, "a longer --budget gives each shape enough runs")]
        worst = max(judged, key=spread)
        evidence["judged"] = (f"within each shape ({len(judged)} of {len(b.shapes)} with {SHAPE_MIN_RUNS}+ runs): "
                              "the spread between shapes is the mix itself, not variance")
        if spread(worst) <= P99_OVER_P50:
            if ratio <= P99_OVER_P50:
                return []
            fast, slow = min(judged, key=lambda s: s.p50_ms), max(judged, key=lambda s: s.p50_ms)
            return [Finding("variance", "info",
                            f"p99 is {ratio:.1f}× p50 over the shape mix, but within each shape at most "
                            f"{spread(worst):.1f}×: the spread is the mix (p50 {fast.p50_ms:.3g} ms at {fast.label}, "
                            f"{slow.p50_ms:.3g} ms at {slow.label}), not jitter",
                            evidence, "nothing needed: each shape runs steadily")]
        msg = (f"latency varies within a shape: at {worst.label} p99 is {spread(worst):.1f}× p50 ({worst.p99_ms:.3g} "
               f"vs {worst.p50_ms:.3g} ms)")
    elif ratio <= P99_OVER_P50:
        return []
    else:
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
    MeasuredCheck("spinning", spin_candidate, judge_spinning, spin_versus),
    MeasuredCheck("variance", dbb_candidate, judge_variance, dbb_versus),
)


def traffic_words(profile: Profile) -> str:
    """The traffic a measurement ran under, in a few words: ``at 10 Hz``, ``in a closed loop, 2 callers``, with
    the shape mix when there is one."""
    from ortop.measure.arrivals import CLOSED, POISSON, mode_of

    w = profile.workload
    mode = mode_of(w)
    if mode == CLOSED:
        out = "in a closed loop" + (f", {w.concurrency} callers" if w.concurrency > 1 else "")
    elif w.rate_hz > 0:
        out = f"at {w.rate_hz:g} Hz" + (" (Poisson)" if mode == POISSON else "")
    else:
        out = "replaying a trace"
    mixes = [f"{k}={v}" for k, v in {**w.dim_mix, **w.shape_mix}.items()]
    return out + (f" over a shape mix ({', '.join(mixes)})" if mixes else "")


def measured_text(what: str, profile: Profile, pairs: int | None, runs: int, elapsed_s: float) -> str:
    """What a measured finding rests on: ``spinning on vs off at 10 Hz, 12 block pairs, 15.1 s`` (the profile
    alone: its runs instead of pairs)."""
    counted = f"{pairs} block pair{'s' if pairs != 1 else ''}" if pairs is not None else f"{runs} runs"
    return f"{what} {traffic_words(profile)}, {counted}, {elapsed_s:.1f} s"


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
    compared: str = ""                      # what was measured, in words (:meth:`summary`)

    def summary(self) -> str:
        """One line saying what was measured: ``measured spinning on vs off; dynamic_block_base unset vs 4 at 10
        Hz, 12 block pairs, 15.1 s`` (or why nothing was)."""
        return f"measured {self.compared}" if self.compared else "nothing measured"

    def as_dict(self) -> dict[str, Any]:
        return {"checks": list(self.checks), "tried": {k: patch_text(v) for k, v in self.tried.items()},
                "not_tried": dict(self.not_tried), "baseline": self.baseline.as_dict() if self.baseline else None,
                "compared": self.compared or None, "elapsed_s": round(self.elapsed_s, 2),
                "warnings": list(self.warnings)}


def summary_pace(summary: Mapping[str, Any], profile: Profile, window_s: float) -> Pace | None:
    """What arrived, was served and was shed over a headless measurement (its summary's ``arrivals``, rates over
    about ``window_s``), with its mean service and the profile's servers; None in a closed loop."""
    arr = summary.get("arrivals") or {}
    offered = num_or_nan(arr.get("offered_per_s"))
    if not offered > 0 or not window_s > 0:
        return None
    service = num_or_nan((summary.get("service_ms") or {}).get("mean"))
    return Pace.of_rates(offered, num_or_nan(arr.get("served_per_s")), int(arr.get("dropped") or 0), window_s,
                         service, servers_of(profile.workload), offered_rate(profile))


def run_measured(model_path: str, profile: Profile, host: HostFacts, *, budget_s: float,
                 checks: Sequence[str] | None = None, stop: threading.Event | None = None,
                 on_start: Callable[[str], None] | None = None) -> MeasuredResult:
    """Try every applicable check's candidate against ``profile`` in one interleaved comparison of ``budget_s``
    seconds (builds not counted), or, with nothing to try, measure ``profile`` alone; then let each check judge.

    ``checks`` limits the run to those names. A comparison that cannot run (a build or run failure, not enough
    memory for the sessions side by side) becomes a ``measure`` finding. ``on_start`` gets a line saying what is
    being measured.
    """
    from ortop.engine.bench import ab
    from ortop.engine.live import headless

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
    versus = {c.name: c.versus(profile) for c in chosen}
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
            baseline = Figures(c0.runs, c0.p50_ms, c0.p99_ms, c0.cpu_ms_per_run, c0.shapes)
            pace = c0.pace() if c0.offered_per_s > 0 else None  # what arrived in its blocks, and was served
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
            shapes = tuple(ShapeFigures(str(s["label"]), int(s["runs"]), num_or_nan(s["latency_ms"].get("p50")),
                                        num_or_nan(s["latency_ms"].get("p99"))) for s in r.summary.get("shapes", ()))
            baseline = Figures(r.summary["runs"], num_or_nan(lat.get("p50")), num_or_nan(lat.get("p99")),
                               num_or_nan(cpu.get("cpu_ms_per_run")), shapes)
            pace = summary_pace(r.summary, profile, r.duration_s)
            elapsed, warnings = r.duration_s, tuple(r.summary.get("warnings", ()))
    except ab.AbError as exc:
        f = Finding("measure", "warning", f"the measured checks could not run: {exc}", {"error": str(exc)},
                    "fix what the error names, or run the doctor with --budget 0 for the other checks")
        return MeasuredResult((f,), tuple(names), tried, not_tried, None, 0.0)

    def said(name: str | None) -> str:
        """What the finding of check ``name`` rests on (None, or a check that tried nothing: the profile's own
        runs, measured alone or in the interleaving the others' candidates ran in)."""
        if name is not None and name in tried:
            pairs = max((c.pairs for c in comparisons.get(name, {}).values()), default=None)
            return measured_text(versus[name], profile, pairs, baseline.runs, elapsed)
        what = "the profile's own runs, interleaved with the candidates," if tried else "the profile alone"
        return measured_text(what, profile, None, baseline.runs, elapsed)

    compared = said(None) if not tried else measured_text(
        "; ".join(versus[n] for n in tried), profile,
        max((c.pairs for cs in comparisons.values() for c in cs.values()), default=None), baseline.runs, elapsed)
    findings: list[Finding] = pace_findings(profile, pace, said(None))
    for c in chosen:
        trial = Trial(profile, baseline, comparisons.get(c.name, {}), not_tried.get(c.name, ""), said(c.name))
        findings.extend(c.judge(trial))
    return MeasuredResult(tuple(findings), tuple(names), tried, not_tried, baseline, elapsed, warnings, compared)

