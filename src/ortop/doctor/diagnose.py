"""Gathering what the checks read, and running them: for ``ortop doctor`` from a probe session, for the TUI from
the live monitor's snapshot.

``ortop doctor`` builds the profile once in a child process (``engine.ops.probe``, a few traced runs): which
providers the session got and ORT's log while it tried, where each node was placed, and how much time the
Transposes left after ORT's optimizer take. The static checks read that with the model, the profile and the host;
the measured checks then run the model for the budget, and the model-level findings measure their fixed copy
against the original (:mod:`ortop.doctor.modelfix`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ortop.collectors.host import HostFacts, read_host
from ortop.collectors.load import HostLoad, LoadSampler
from ortop.config.profile import Profile
from ortop.doctor.findings import Finding, by_severity, counts, exit_code
from ortop.doctor.graph import GraphFacts, scan_graph
from ortop.doctor.measured import MeasuredResult, run_measured
from ortop.doctor.modelfix import MODEL_FIX_BUDGET_S, measure_model_fixes, merge
from ortop.doctor.static import CUDA, STATIC_CHECKS, Context, Verified, check_host_load, run_static
from ortop.engine.bench.ab import available_memory
from ortop.model import ModelInfo, load_model

PROBE_WARMUP = 1
PROBE_RUNS = 3     # traced runs of the probe session: enough to see which Transposes are left and what they cost


@dataclass(frozen=True)
class Diagnosis:
    """Everything one doctor run found, most severe first."""

    model_path: str
    profile: Profile
    host: HostFacts
    findings: tuple[Finding, ...]
    checks: tuple[str, ...]
    session: dict[str, Any] = field(default_factory=dict)   # what the probe session reported, for the header
    measured: MeasuredResult | None = None
    skipped_measured: str = ""                              # why the measured checks did not run
    model_fixes: Mapping[str, Any] = field(default_factory=dict)  # check -> modelfix.FixMeasured
    host_load: HostLoad | None = None                       # the host's CPUs over the run (None: not readable)

    @property
    def exit_code(self) -> int:
        return exit_code(self.findings)

    def as_dict(self) -> dict[str, Any]:
        measured: dict[str, Any] | None = self.measured.as_dict() if self.measured is not None else None
        return {
            "model": self.model_path,
            "profile": self.profile.to_dict(),
            "host": self.host.as_dict(),
            "providers_requested": self.session.get("providers_requested", self.profile.providers()),
            "providers_active": self.session.get("providers_active"),
            "checks": list(self.checks),
            "counts": counts(self.findings),
            "findings": [f.as_dict() for f in self.findings],
            "measured": measured,
            "measured_skipped": self.skipped_measured or None,
            "model_fixes": {k: v.as_dict() for k, v in self.model_fixes.items()},
            "host_load": self.host_load.as_dict() if self.host_load is not None else None,
            "exit_code": self.exit_code,
        }


def gpu_devices(profile: Profile) -> tuple[Any, ...]:
    """The GPUs NVML sees, when the profile asks for CUDA (NVML is not started otherwise)."""
    if profile.provider_name() != CUDA:
        return ()
    from ortop.collectors.gpu import make_gpu_collector

    gpu = make_gpu_collector()
    try:
        return tuple(gpu.sample().devices)
    finally:
        gpu.close()


def graph_facts(model: ModelInfo) -> GraphFacts | None:
    """The Transposes of the model file, read only when it has some."""
    return scan_graph(model.path) if model.op_histogram.get("Transpose", 0) else GraphFacts()


def context_from_probe(model: ModelInfo, profile: Profile, host: HostFacts, report: dict[str, Any]) -> Context:
    """A context from a probe session's report (``engine.ops.probe``)."""
    def tup(key: str) -> tuple | None:
        v = report.get(key)
        return tuple(v) if v is not None else None

    return Context(model=model, profile=profile, host=host, log=tuple(report.get("log", ())),
                   providers_active=tup("providers_active"), providers_available=tup("providers_available"),
                   placement=tup("placement"), ops=report.get("ops"), session_error=report.get("error"),
                   graph=graph_facts(model), available_memory=available_memory(), gpus=gpu_devices(profile))


def context_from_snapshot(snap: Any, host: HostFacts | None = None, gpus: tuple[Any, ...] = (),
                          cpu: Any = None) -> Context:
    """A context from a live monitor (``engine.snapshot.Snapshot``): its profile, its providers, its events as
    the log, the changes its history verified by interleaving, and, given the CPU collector's latest sample
    (``cpu``), how busy other processes keep the host. No placement or per-op times: those need a probe session."""
    model = snap.model if snap.model is not None else load_model(snap.model_path)
    served = snap.throughput_per_s if getattr(snap, "runs", 0) else None
    return Context(model=model, profile=snap.profile, host=host or read_host(), served_per_s=served,
                   traffic=getattr(snap, "traffic", None),
                   log=tuple(e.text for e in snap.events),
                   providers_active=tuple(snap.providers_active) or None, graph=graph_facts(model),
                   available_memory=available_memory(), gpus=tuple(gpus), host_load=HostLoad.from_cpu_sample(cpu),
                   verified=verified_changes(getattr(snap, "history", ())))


def verified_changes(history: Any) -> tuple[Verified, ...]:
    """The history rows verified by interleaving (``engine.snapshot.ConfigRecord``), newest first: what each changed
    against the row it was verified against, and the comparisons."""
    from ortop.config.diff import diff

    rows = {r.config_id: r for r in history}
    out = []
    for row in reversed(tuple(history)):
        v = row.verdict
        against = rows.get(getattr(v, "against", None))
        if against is None or not getattr(v, "comparisons", ()):
            continue
        changes = {c.key: (c.before, c.after) for c in diff(against.profile, row.profile, settings_only=True)}
        out.append(Verified(changes, {c.metric: c for c in v.comparisons}, row.label))
    return tuple(out)


def diagnose(model_path: str, profile: Profile, *, budget_s: float = 15.0, host: HostFacts | None = None,
             stop: threading.Event | None = None, on_progress: Callable[[str], None] | None = None,
             load: Any = None) -> Diagnosis:
    """Probe, run the static checks, then (``budget_s`` > 0 and a working session) the measured ones; over all of
    it, how busy other processes keep the host (``load``: a :class:`~ortop.collectors.load.LoadSampler` or what
    reads like one; the host-load check judges its reading).

    Raises ModelError / ProfileError for bad input; a session that fails to build or run is a finding.
    """
    from ortop.engine.answers import ops

    say = on_progress or (lambda _line: None)
    profile = replace(profile, model=model_path)
    model = load_model(model_path)
    host = host or read_host()
    load = load if load is not None else LoadSampler()
    load.start()
    say("building the session in a child process")
    try:
        report = ops.probe(model_path, profile, runs=PROBE_RUNS, warmup=PROBE_WARMUP, trace=True, placement=True,
                           stop=stop)
    except ops.ProbeError as exc:
        report = {**exc.result, "error": str(exc), "stage": "build"}
    ctx = context_from_probe(model, profile, host, report)
    findings = run_static(ctx)
    checks = [name for name, _ in STATIC_CHECKS]
    measured: MeasuredResult | None = None
    fixes: dict[str, Any] = {}
    skipped = ""
    if budget_s <= 0:
        skipped = "--budget 0"
    elif ctx.session_error is not None:
        skipped = "the session does not work"
    elif stop is not None and stop.is_set():
        skipped = "stopped"
    else:
        measured = run_measured(model_path, profile, host, budget_s=budget_s, stop=stop, on_start=say)
        findings += measured.findings
        checks += [c for c in measured.checks if c not in checks]
        if not (stop is not None and stop.is_set()):
            fixes = measure_model_fixes(model_path, profile, budget_s=min(budget_s, MODEL_FIX_BUDGET_S), stop=stop,
                                        on_start=say)
            findings = merge(findings, fixes, profile)
            checks += [c for c in fixes if c not in checks]
    ctx = replace(ctx, host_load=load.stop())  # the whole run's reading: what the figures above were measured under
    if measured is not None:  # without measurements (--budget 0) the reading is shown, but nothing contended
        findings += check_host_load(ctx)
    return Diagnosis(model_path, profile, host, tuple(by_severity(findings)), tuple(checks), report, measured,
                     skipped, fixes, ctx.host_load)
