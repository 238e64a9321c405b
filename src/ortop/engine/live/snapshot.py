"""What views read: frozen snapshots of the monitor, a history row per configuration, and the one summary schema.

``summary()`` is the JSON object ``--headless --json`` prints and ``--summary FILE`` writes, from the headless
runner and from the TUI alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ortop import model as model_mod
from ortop.config.diff import Change, diff
from ortop.config.profile import Profile
from ortop.engine.live.memory import MemoryInfo
from ortop.engine.traffic import Traffic, summary_part
from ortop.measure import stats
from ortop.measure.stats import json_num
from ortop.present import mib


class State(str, Enum):
    """The monitor's state; a ``str`` so ``snap.state == "measuring"`` keeps working, and prints as its value."""

    STARTING = "starting"
    BUILDING = "building"
    WARMING = "warming"
    MEASURING = "measuring"
    VERIFYING = "verifying"    # an interleaved comparison runs in the worker (Monitor.verify)
    COMPARING = "comparing"    # the worker alternates sessions for another caller
    PAUSED = "paused"
    IDLE = "idle"              # a worker with nothing to run
    FAILED = "failed"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class Event:
    t: float          # seconds since the monitor started
    level: str        # "info" | "warning" | "error"
    text: str
    count: int = 1    # repeats of the same text are grouped


@dataclass(frozen=True)
class CpuCost:
    """What the worker's CPU time says: per run, between runs (spinning), and as a share of one core."""

    cpu_ms_per_run: float = math.nan
    cpu_ms_between_runs_per_s: float = math.nan
    process_cpu_percent: float = math.nan
    busy_percent: float = math.nan  # share of wall time spent inside Run()


ROW_KINDS = ("measuring", "unverified", "verifying", "faster", "slower", "no difference", "undecided",
             "not comparable")


@dataclass(frozen=True)
class RowVerdict:
    """How a history row compares with the row before it (or the one it was verified against).

    kind: ``measuring`` (too few runs yet), ``unverified`` (measured one after the other: drift and change are
    mixed, so no claim is made), ``verifying`` (an interleaved comparison is running), the interleaved
    comparison's ``faster`` | ``slower`` | ``no difference`` | ``undecided``, or ``not comparable`` (the
    workloads differ). ``short`` fits a table cell; ``text`` says it in full; ``comparisons`` holds every
    metric's :class:`ortop.measure.compare.Comparison` after a verification.
    """

    kind: str
    short: str
    text: str
    comparisons: tuple = ()
    metric: str = ""            # the metric the kind is about ("p50", "p99", "throughput", "cpu")
    against: int | None = None  # the config id compared with

    def __str__(self) -> str:
        return self.short

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "short": self.short, "text": self.text, "metric": self.metric or None,
                "against": self.against, "comparisons": [c.as_dict() for c in self.comparisons]}


@dataclass(frozen=True)
class VerifyProgress:
    """An interleaved verification under way (``Snapshot.verifying``)."""

    config_id: int
    against_id: int
    phase: str          # "building" | "measuring" | "finishing"
    elapsed_s: float    # measuring time so far (builds not counted)
    budget_s: float
    blocks: int         # blocks recorded so far, both configurations together


@dataclass(frozen=True)
class ConfigRecord:
    """One applied configuration: a row of the history table."""

    config_id: int
    label: str                  # its changes from the start profile, or "start"
    profile: Profile
    started: float              # seconds since monitor start
    create_ms: float
    first_run_ms: float
    providers_active: tuple[str, ...]
    latency: stats.LatencyStats
    throughput_per_s: float
    cpu: CpuCost
    verdict: RowVerdict | str = ""  # against the previous row; "" for the first
    best: bool = False
    changes: tuple[Change, ...] = ()
    rss_peak: int | None = None     # the worker's peak RSS (bytes) while this configuration ran, warm-up done
    rss_delta: int | None = None    # rss_peak against the previous row's (bytes)

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "config_id": self.config_id,
            "label": self.label,
            "changes": [c.as_dict() for c in self.changes],
            "runs": self.latency.runs,
            "p50_ms": json_num(self.latency.p50),
            "p99_ms": json_num(self.latency.p99),
            "throughput_per_s": json_num(self.throughput_per_s),
            "cpu_ms_per_run": json_num(self.cpu.cpu_ms_per_run),
            "rss_peak_mb": mib(self.rss_peak),
            "rss_delta_mb": mib(self.rss_delta, signed=True),
            "verdict": v.as_dict() if isinstance(v, RowVerdict) else None,
        }


@dataclass(frozen=True)
class ReplicaFigures:
    """One replica of the running configuration (``workload.replicas``): its cores when pinned, its runs."""

    index: int
    cores: tuple[int, ...] | None   # None: not pinned (every core)
    runs: int
    throughput_per_s: float
    latency: stats.LatencyStats

    def as_dict(self) -> dict[str, Any]:
        return {"replica": self.index, "cores": list(self.cores) if self.cores else None, "runs": self.runs,
                "throughput_per_s": json_num(self.throughput_per_s), "p50_ms": json_num(self.latency.p50),
                "p99_ms": json_num(self.latency.p99)}


@dataclass(frozen=True)
class Snapshot:
    """Everything a view needs, frozen at one instant."""

    t: float
    state: str                  # a State: starting | building | warming | measuring | verifying | paused | …
    state_elapsed: float
    model_path: str
    model: model_mod.ModelInfo | None
    profile: Profile            # the profile of the running session (last good)
    pending: Profile | None     # a profile being built
    config_id: int
    runs: int                   # measured runs of the running configuration (warm-up excluded)
    feeds: tuple[str, ...]
    notes: tuple[str, ...]
    providers_requested: tuple[str, ...]
    providers_active: tuple[str, ...]
    fallback: bool              # a requested provider is not active
    create_ms: float
    first_run_ms: float
    latency: stats.LatencyStats   # the running configuration, all runs since it was built (capped)
    window: stats.LatencyStats    # the last few seconds
    throughput_per_s: float
    cpu: CpuCost
    series: tuple[Any, ...]       # measure.series.Bucket
    events: tuple[Event, ...]
    history: tuple[ConfigRecord, ...]
    worker_pid: int | None
    restarts: int
    verifying: VerifyProgress | None = None
    memory: MemoryInfo = MemoryInfo()
    replicas: tuple[ReplicaFigures, ...] = ()  # per replica, when the configuration serves several
    traffic: Traffic | None = None  # the workload: offered vs served, queue, service, idle gaps, shapes
    window_span_s: float = math.nan     # the span ``window`` covers (widened at low rates, see Readout.snapshot)
    window_rate_per_s: float = math.nan  # runs served per second over that span


# ---- changes -----------------------------------------------------------------------------------------------------
def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def changes_between(base: Profile, profile: Profile) -> tuple[Change, ...]:
    """Every setting whose value differs, by dotted key in sorted order (the model path and the description are
    not settings): :func:`ortop.config.diff.diff`."""
    return diff(base, profile, settings_only=True)


def label_of(changes: tuple[Change, ...]) -> str:
    """A history row's label: its changes in full (``session.allow_spinning: default → off``), or "start"."""
    return "; ".join(c.text for c in changes) if changes else "start"


WORKLOAD_KEYS = ("rate_hz", "concurrency", "batch", "dims", "shapes", "values", "inputs")


def workload_difference(a: Profile, b: Profile) -> list[str]:
    """The workload fields that differ (what is run, not how): such configurations are not comparable."""
    return [k for k in WORKLOAD_KEYS if _plain_map(getattr(a.workload, k)) != _plain_map(getattr(b.workload, k))]


def _plain_map(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return v




# ---- the summary ---------------------------------------------------------------------------------------------------
def memory_summary(m: MemoryInfo, gpu: Any = None) -> dict[str, Any]:
    """The summary's ``memory`` block (MB): the worker's RSS at the end and its peak, its growth since the build,
    the host's memory, and the worker's GPU memory (summed over devices; None without a GPU or a figure)."""
    gpu_mb = None
    if gpu:
        per = [d.get("worker_mem") for d in gpu if isinstance(d, Mapping)]
        if any(x is not None for x in per):
            gpu_mb = mib(sum(x for x in per if x is not None))
    return {
        "rss_mb": mib(m.rss),
        "rss_peak_mb": mib(m.rss_peak),
        "rss_growth_mb": mib(m.growth, signed=True),
        "host_used_mb": mib(m.host_used),
        "host_available_mb": mib(m.host_available),
        "gpu_mb": gpu_mb,
        "leak": m.leak.text() if m.leak is not None else None,
        "rss_start_mb": mib(m.rss_start),
        "rss_low_mb": mib(m.rss_low),
        "rss_since_start_mb": mib(m.since_start, signed=True),
        "rebuild_growth": m.rebuild.text() if m.rebuild is not None else None,
    }


def group_warnings(texts: list[str], *, min_tokens: int = 5, shown: int = 3) -> list[str]:
    """Warnings that differ in one word only become one line: ORT warns once per initializer listed as an input,
    269 lines that say the same thing about 269 names read as
    ``ORT: Initializer {fc1_w, fc2_w, fc3_w, … 269 names} appears in graph inputs …``. Order is kept (each group
    where its first member was)."""
    groups: list[tuple[list[str], int | None, list[str]]] = []  # (tokens of the first, varying position, words)
    for text in texts:
        tokens = text.split(" ")
        for g in groups:
            first, pos, words = g
            if len(first) != len(tokens) or len(tokens) < min_tokens:
                continue
            diff = [k for k, (a, b) in enumerate(zip(first, tokens)) if a != b]
            if len(diff) == 1 and (pos is None or pos == diff[0]):
                if pos is None:
                    groups[groups.index(g)] = (first, diff[0], [first[diff[0]], tokens[diff[0]]])
                else:
                    words.append(tokens[diff[0]])
                break
        else:
            groups.append((tokens, None, []))
    out = []
    for first, pos, words in groups:
        if pos is None:
            out.append(" ".join(first))
            continue
        listed = ", ".join(words[:shown]) + (f", … {len(words)} names" if len(words) > shown else "")
        out.append(" ".join(first[:pos] + ["{" + listed + "}"] + first[pos + 1:]))
    return out


def summary(snap: Snapshot, *, duration_s: float, gpu: Any = None, extra: dict | None = None) -> dict[str, Any]:
    """The JSON object ``--json`` prints and ``--summary FILE`` writes (headless and TUI alike)."""
    warmup = snap.profile.workload.warmup_runs
    out: dict[str, Any] = {
        "model": snap.model_path,
        "profile": snap.profile.to_dict(full=True),
        "providers_requested": list(snap.providers_requested),
        "providers_active": list(snap.providers_active),
        "warnings": group_warnings([e.text + (f" (x{e.count})" if e.count > 1 else "") for e in snap.events
                                    if e.level in ("warning", "error")]),
        "notes": list(snap.notes),
        "runs": snap.runs,
        "warmup_runs": warmup,
        "duration_s": round(duration_s, 3),
        "latency_ms": snap.latency.as_dict(),
        "throughput_per_s": json_num(snap.throughput_per_s),
        "cpu": {
            "cpu_ms_per_run": json_num(snap.cpu.cpu_ms_per_run),
            "cpu_ms_between_runs_per_s": json_num(snap.cpu.cpu_ms_between_runs_per_s),
            "process_cpu_percent": json_num(snap.cpu.process_cpu_percent),
        },
        "session": {"create_ms": json_num(snap.create_ms), "first_run_ms": json_num(snap.first_run_ms)},
        "inputs": list(snap.feeds),
        "gpu": gpu,
        "memory": memory_summary(snap.memory, gpu),
        "history": [h.as_dict() for h in snap.history],
    }
    if snap.replicas:
        out["replicas"] = [r.as_dict() for r in snap.replicas]
    if snap.traffic is not None:
        out.update(summary_part(snap.traffic))
        said = snap.traffic.warning()
        if said and said not in out["warnings"]:
            out["warnings"].append(said)
    if extra:
        out.update(extra)
    return out
