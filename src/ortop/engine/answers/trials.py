"""What a tuning run is made of: the racer's protocol, per-candidate trials and their figures, and the result.

Kept apart from the search (:mod:`ortop.engine.answers.tuner`) so the real racer (:mod:`ortop.engine.answers.racer`),
the CLI and the tests share these types without the search's machinery.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.answers.space import Candidate, describe
from ortop.measure.compare import HIGHER_IS_BETTER, Block, Comparison, pooled
from ortop.measure.stats import QUANTILE, median_ci, runs_needed
from ortop.measure.stats import json_num as _num

KEEP = "keep the baseline"
BETTER = "better"
NOT_MEASURED = "not measured"   # the search gave no answer: nothing was raced, or the best was never verified

STOPPED = "not built: the search was stopped"  # a racer's reason for a profile it left unbuilt on a stop


class RacerError(Exception):
    """Measuring cannot go on (the worker died and no candidate is to blame, the incumbent failed)."""


@dataclass
class RaceOutcome:
    """What one :meth:`Racer.race` call measured: blocks with ``config`` = index into the profiles given, ``seq``
    increasing across calls; ``failed``: index → why that profile could not be built or run."""

    blocks: list[Block] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)


class Racer(Protocol):
    """Measures profiles against each other in interleaved blocks, keeping their sessions between calls.

    The tuner also uses, when a racer has them: ``measure(profile, seconds) -> RaceOutcome`` (one profile alone,
    for its figures where nothing raced beside it), ``runs_per_s(profiles) -> float`` (the slowest one's pace, said
    when a rung does not fit) and ``default_threads(profile) -> int | None`` (the intra-op threads ORT's default
    gave it, counted)."""

    def prepare(self, profiles: Sequence[Profile]) -> dict[int, str]:
        """Build the sessions not built yet; return index → reason for those that failed."""
        ...

    def race(self, profiles: Sequence[Profile], seconds: float) -> RaceOutcome:
        """Alternate the profiles (building any not built yet) for ``seconds`` of measuring."""
        ...

    def block_seconds(self, profiles: Sequence[Profile]) -> float:
        """About how long one block of these profiles takes, settle included."""
        ...

    def build_seconds(self) -> float:
        """About how long one more session takes to build and warm up."""
        ...

    def release(self, profiles: Sequence[Profile]) -> None:
        """Free these profiles' sessions (they will not race again)."""
        ...

    def close(self) -> None:
        ...


# ---- figures ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Figures:
    """One profile's figures over its blocks: p50 and p99 of their runs pooled (:func:`ortop.measure.compare.pooled`,
    as compare reports them), total runs over total block time, run-weighted CPU per run."""

    p50_ms: float = math.nan
    p99_ms: float = math.nan
    throughput_per_s: float = math.nan
    cpu_ms_per_run: float = math.nan
    blocks: int = 0
    runs: int = 0
    arrived: int = -1             # open arrivals counted over its blocks' windows (-1: not counted)
    shed: int = 0
    window_s: float = math.nan    # those windows together
    fastest_ms: float = math.nan  # its fastest response: a lower bound of its service (:func:`ortop.measure.pace.kept`)

    def value(self, metric: str) -> float:
        return {"p50": self.p50_ms, "p99": self.p99_ms, "throughput": self.throughput_per_s,
                "cpu": self.cpu_ms_per_run}[metric]

    def as_dict(self) -> dict[str, Any]:
        return {"p50_ms": _num(self.p50_ms), "p99_ms": _num(self.p99_ms),
                "throughput_per_s": _num(self.throughput_per_s), "cpu_ms_per_run": _num(self.cpu_ms_per_run),
                "runs": self.runs, "blocks": self.blocks}


def figures(blocks: Sequence[Block]) -> Figures:
    """A profile's figures over its blocks; a percentile its runs do not resolve (a p99 needs 100 runs: see
    :func:`ortop.measure.stats.runs_needed`) is nan, never the slowest run under another name."""
    if not blocks:
        return Figures()
    runs = sum(b.runs for b in blocks)
    wall = sum(b.t_end - b.t_start for b in blocks)
    cpu = [b for b in blocks if math.isfinite(b.cpu_ms_per_run) and b.runs]
    cpu_per_run = sum(b.cpu_ms_per_run * b.runs for b in cpu) / sum(b.runs for b in cpu) if cpu else math.nan
    st = pooled(blocks)  # the percentiles compare reports for the same blocks
    p50 = st.p50 if runs >= runs_needed("p50") else math.nan
    p99 = st.p99 if runs >= runs_needed("p99") else math.nan
    counted = all(b.arrived >= 0 for b in blocks)
    return Figures(p50, p99, runs / wall if wall > 0 else math.nan, cpu_per_run, len(blocks), runs,
                   sum(b.arrived for b in blocks) if counted else -1, sum(b.shed for b in blocks),
                   sum(b.window_s for b in blocks) if counted else math.nan, st.min)


def p99_interval(blocks: Sequence[Block]) -> tuple[float, float, float]:
    """(estimate, low, high) of a profile's p99 in ms; nan until its runs resolve a p99 (100 of them).

    Blocks that carry their runs are pooled, so a slow model's short blocks (a handful of runs each, whose own
    "p99" is their slowest run) add up to one p99 over every run: the estimate is that percentile, the interval the
    order statistics that cover the 99th percentile with about 95 % confidence (distribution-free; its upper end
    is inf until the runs reach past it). Blocks without their runs fall back to the median of the blocks' own
    p99, from those blocks that each resolve one, with its order-statistic interval."""
    need = runs_needed("p99")
    runs = [b.latency_ms for b in blocks if b.latency_ms is not None and len(b.latency_ms)]
    if runs:
        a = np.sort(np.concatenate(runs))
        n = int(a.size)
        if n < need:
            return math.nan, math.nan, math.nan
        q = QUANTILE["p99"]
        half = 1.96 * math.sqrt(n * q * (1 - q))
        lo_rank = max(1, math.floor(n * q - half))
        hi_rank = math.ceil(n * q + half) + 1
        hi = float(a[hi_rank - 1]) if hi_rank <= n else math.inf
        return float(np.percentile(a, 99)), float(a[lo_rank - 1]), hi
    vals = np.array([b.p99_ms for b in blocks if math.isfinite(b.p99_ms) and b.runs >= need], dtype=np.float64)
    if vals.size == 0:
        return math.nan, math.nan, math.nan
    lo, hi = median_ci(vals)
    return float(np.median(vals)), lo, hi


# ---- trials -------------------------------------------------------------------------------------------------------
def pace_of(f: Figures, profile: Profile) -> str:
    """"" when a profile measured over blocks (``f``) served the requests its rate offered; else a word that its
    figures are not a paced answer. Judged on the requests that arrived in its blocks' windows where they were
    counted (:func:`ortop.measure.pace.of_blocks`, as compare judges them); else on the rate asked over the time its
    blocks' arrivals were served in (:func:`ortop.measure.pace.block_span`), allowing for that count's own Poisson
    spread (:func:`ortop.measure.pace.kept`). A closed loop has nothing to keep."""
    from ortop.engine.traffic import offered_rate
    from ortop.measure.pace import Pace, block_span, of_blocks, servers_of, words

    asked = offered_rate(profile)
    if not f.blocks or not asked > 0 or not f.throughput_per_s > 0:
        return ""
    servers = servers_of(profile.workload)
    if f.arrived > 0 and f.window_s > 0:
        pace = of_blocks(f.arrived, f.window_s, f.runs, f.throughput_per_s, f.blocks, f.p50_ms, f.shed, asked,
                         f.fastest_ms, servers)
        return "" if pace.kept() else f"rate not kept: {pace.text()}"
    wall = f.runs / f.throughput_per_s
    # never below half the wall time: a block's drain past its window as long as the window is a backlog's
    span = block_span(wall, f.blocks, f.p50_ms, wall / 2)
    if Pace(asked * span, f.runs, 0, span, servers=servers, asked_per_s=asked, counted=False,
            service_floor_ms=f.fastest_ms).kept():
        return ""
    return f"rate not kept: {words(math.nan, f.throughput_per_s, 0, asked)}"


@dataclass
class Trial:
    """One candidate's race: its status (``racing`` while it runs, then ``ok``, ``failed`` or ``dropped``)."""

    candidate: Candidate
    incumbent: str                       # label of the profile it raced against
    status: str = "racing"
    reason: str = ""
    comparison: Comparison | None = None  # on the objective, against the incumbent
    figures: Figures = field(default_factory=Figures)
    p99: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    rungs: int = 0
    winner: bool = False                 # the verified best: the verdict names it (never set before the verdict)
    stage_winner: bool = False           # won its dimension's race and raced on as the incumbent

    @property
    def profile(self) -> Profile:
        return self.candidate.profile

    @property
    def label(self) -> str:
        return self.candidate.label

    @property
    def raced(self) -> bool:
        """Whether it was measured against its incumbent (a candidate left out for lack of time never was)."""
        return self.figures.blocks > 0 or (self.comparison is not None and self.comparison.pairs > 0)

    def improvement_pct(self) -> float:
        """How much better than the incumbent on the objective (positive = better), nan without pairs yet."""
        c = self.comparison
        if c is None or not math.isfinite(c.change_pct):
            return math.nan
        return c.change_pct if c.metric in HIGHER_IS_BETTER else -c.change_pct

    def pace(self) -> str:
        """"" when the candidate served the requests its rate offered; else why its figures are not a paced answer
        (:func:`pace_of`)."""
        return pace_of(self.figures, self.profile)

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "label": self.label,
            "stage": self.candidate.stage,
            "profile": _profile_dict(self.profile),
            **self.figures.as_dict(),
            "status": self.status,
            "reason": self.reason,
            "verdict": c.verdict if c is not None else None,
            "against": self.incumbent,
            "change_pct": _num(c.change_pct, 2) if c is not None else None,
            "ci_low_pct": _num(c.ci_low_pct, 2) if c is not None else None,
            "ci_high_pct": _num(c.ci_high_pct, 2) if c is not None else None,
            "pairs": c.pairs if c is not None else 0,
            "blocks": self.figures.blocks,
            "winner": self.winner,
            "stage_winner": self.stage_winner,
            "runs": self.figures.runs,
            "rate_kept": not self.pace(),
            # a candidate that did not keep its offered rate was measured queueing: its verdict answers another
            # question than the paced one asked
            "paced_answer": not self.pace(),
            **({"note": f"not a paced answer: {self.pace()}"} if self.pace() else {}),
        }


def _profile_dict(p: Profile) -> dict[str, Any]:
    d = p.to_dict()
    d.pop("model", None)
    return d


@dataclass
class TuneResult:
    objective: str
    max_p99_ms: float | None
    budget_s: float
    elapsed_s: float
    baseline: Profile
    baseline_figures: Figures
    best: Profile
    best_figures: Figures
    verdict: str                          # BETTER, KEEP or NOT_MEASURED
    text: str                             # one line for people
    comparison: Comparison | None         # the verification: best (or the final candidate) vs baseline
    candidate: Profile | None             # what was verified (== best when the verdict is BETTER)
    trials: list[Trial]
    not_tried: list[tuple[Candidate, str]]
    pruned: list[str]
    dimensions: tuple[str, ...]
    stopped: bool = False                 # cut short by the user: the figures are those measured until then
    host: dict[str, Any] = field(default_factory=dict)
    fault: str | None = None              # a worker lost for good: the search ended there, with what it measured
    needs: dict[str, Any] = field(default_factory=dict)  # NOT_MEASURED: what an answer needs (rung_s, runs_per_s,
    #                                                      budget_s: a budget that would give one)

    def baseline_pace(self) -> str:
        """"" when the baseline served the requests its rate offered; else why its figures are not a paced answer."""
        return pace_of(self.baseline_figures, self.baseline)

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        best = {"profile": _profile_dict(self.best), **self.best_figures.as_dict(), "verdict": self.verdict,
                "text": self.text, "changes": self.best.changes_from(self.baseline),
                "change_pct": _num(c.change_pct, 2) if c is not None else None,
                "ci_low_pct": _num(c.ci_low_pct, 2) if c is not None else None,
                "ci_high_pct": _num(c.ci_high_pct, 2) if c is not None else None,
                "comparison": c.as_dict() if c is not None else None}
        if self.candidate is not None and self.verdict != BETTER:
            best["candidate"] = _profile_dict(self.candidate)
            best["candidate_label"] = describe(self.candidate, self.baseline)
        return {
            "objective": self.objective,
            "max_p99_ms": self.max_p99_ms,
            "budget_s": self.budget_s,
            "elapsed_s": round(self.elapsed_s, 2),
            "stopped": self.stopped,
            "fault": self.fault,
            "host": self.host,
            "space": list(self.dimensions),
            "pruned": list(self.pruned),
            "baseline": {"profile": _profile_dict(self.baseline), **self.baseline_figures.as_dict(),
                         "rate_kept": not self.baseline_pace(),
                         **({"note": f"not a paced answer: {self.baseline_pace()}"} if self.baseline_pace() else {})},
            "trials": [t.as_dict() for t in self.trials],
            "not_tried": [{"label": c.label, "stage": c.stage, "reason": why} for c, why in self.not_tried],
            "best": best,
            "verdict": self.verdict,
            "measured": self.verdict != NOT_MEASURED,
            "needs": {k: _num(v, 2) if isinstance(v, float) else v for k, v in self.needs.items()} or None,
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False)


