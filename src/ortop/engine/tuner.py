"""``ortop tune``: race candidate profiles against the incumbent in interleaved blocks, and verify the winner.

Why racing, and why interleaved
    On a shared host two back-to-back measurements of one configuration differ by ±10 %, so ranking candidates by
    one short measurement each (as Olive's session-params tuning does) ranks noise. Here every candidate runs in
    the same worker as the incumbent, alternating in short blocks, and is judged only by its paired comparison with
    the incumbent (:func:`ortop.measure.compare.compare`: neighbouring blocks, a Hodges–Lehmann estimate and an exact
    signed-rank interval, a 2 % margin).

The search (coordinate-wise, one dimension of :class:`ortop.engine.space.Space` at a time)
    For each dimension, its candidates around the incumbent race in one worker together with the incumbent:

    * rung 0 gives every candidate enough rounds for an interval (at least ``ROUNDS_FIRST`` blocks each), and is a
      first look: a dimension whose candidates are all decided by then ends early, its time going to the next;
    * after each rung a candidate is dropped when it is significantly worse on the objective, when its difference
      is confidently inside the margin (it cannot win), or when its p99 interval lies wholly above ``max_p99``;
    * with three or more left, the half ranked behind by their estimate is dropped too (successive halving), and
      the survivors race on with more blocks each;
    * the dimension ends when one candidate is left and decided, or its share of the budget is spent. Its winner
      is the candidate significantly better than the incumbent with the best estimate (under a p99 limit the
      incumbent must also be beaten by a candidate that meets it, and a candidate that meets the limit replaces an
      incumbent that does not); the winner becomes the incumbent of the next dimension.

    A candidate that fails to build or run is recorded with its reason and never ranked.

The verdict
    The final incumbent is raced once more against the start profile, on fresh blocks (the candidate that won a race
    is, by selection, one whose noise fell its way: reusing the race's blocks would overstate its gain). Unless that
    comparison says "better", the result says so plainly: no detectable gain, keep the baseline.

Budget accounting
    ``budget_s`` is wall time from ``started`` to the result, builds included, on the injected clock. A reserve for
    the verification is set aside first; the rest is shared among the dimensions in proportion to their candidate
    counts, recomputed as each ends (time a dimension did not need goes to the next). Before a dimension starts, the
    candidates that cannot get a first rung in its share (measured build time per session + their blocks) are left
    out, listed as not tried. A small margin is kept for closing the worker.

The measuring is behind :class:`Racer`, so the logic is tested with a fake racer and a fake clock;
:class:`WorkerRacer` is the real one, over :class:`ortop.engine.ab.Interleaving` and one worker process that keeps
every candidate's session built between rungs.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.space import Candidate, Space, describe, profile_key
from ortop.errors import RuntimeFailure
from ortop.measure.compare import HIGHER_IS_BETTER, MIN_PAIRS, Block, Comparison, compare
from ortop.measure.stats import median_ci

OBJECTIVES = ("p50", "p99", "throughput", "cpu")
OBJECTIVE_TEXT = {"p50": "lowest p50 latency", "p99": "lowest p99 latency", "throughput": "most throughput",
                  "cpu": "least CPU per run"}
ROUNDS_FIRST = MIN_PAIRS + 2   # rung 0: rounds per candidate, enough for a first interval
ROUNDS_MIN = 2                 # a later rung shorter than this is not worth starting
VERIFY_SHARE = 0.2             # of the budget, set aside to verify the winner against the start profile
VERIFY_MAX_SHARE = 0.35
VERIFY_BLOCKS = 2 * (MIN_PAIRS + 6)  # the verification wants at least this many blocks (two configurations)
KEEP = "keep the baseline"
BETTER = "better"


class RacerError(Exception):
    """Measuring cannot go on (the worker died and no candidate is to blame, the incumbent failed)."""


@dataclass
class RaceOutcome:
    """What one :meth:`Racer.race` call measured: blocks with ``config`` = index into the profiles given, ``seq``
    increasing across calls; ``failed``: index → why that profile could not be built or run."""

    blocks: list[Block] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)


class Racer(Protocol):
    """Measures profiles against each other in interleaved blocks, keeping their sessions between calls."""

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
    """One profile's figures over its blocks: medians of the blocks' p50 and p99, total runs over total block
    time, run-weighted CPU per run."""

    p50_ms: float = math.nan
    p99_ms: float = math.nan
    throughput_per_s: float = math.nan
    cpu_ms_per_run: float = math.nan
    blocks: int = 0
    runs: int = 0

    def value(self, metric: str) -> float:
        return {"p50": self.p50_ms, "p99": self.p99_ms, "throughput": self.throughput_per_s,
                "cpu": self.cpu_ms_per_run}[metric]

    def as_dict(self) -> dict[str, Any]:
        return {"p50_ms": _num(self.p50_ms), "p99_ms": _num(self.p99_ms),
                "throughput_per_s": _num(self.throughput_per_s), "cpu_ms_per_run": _num(self.cpu_ms_per_run)}


def _num(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def figures(blocks: Sequence[Block]) -> Figures:
    if not blocks:
        return Figures()
    runs = sum(b.runs for b in blocks)
    wall = sum(b.t_end - b.t_start for b in blocks)
    cpu = [b for b in blocks if math.isfinite(b.cpu_ms_per_run) and b.runs]
    cpu_per_run = sum(b.cpu_ms_per_run * b.runs for b in cpu) / sum(b.runs for b in cpu) if cpu else math.nan
    p50 = [b.p50_ms for b in blocks if math.isfinite(b.p50_ms)]
    p99 = [b.p99_ms for b in blocks if math.isfinite(b.p99_ms)]
    return Figures(float(np.median(p50)) if p50 else math.nan, float(np.median(p99)) if p99 else math.nan,
                   runs / wall if wall > 0 else math.nan, cpu_per_run, len(blocks), runs)


def p99_interval(blocks: Sequence[Block]) -> tuple[float, float, float]:
    """(estimate, low, high) of a profile's p99 in ms: the median of its blocks' p99 with its order-statistic
    interval (distribution-free; wide with few blocks)."""
    vals = np.array([b.p99_ms for b in blocks if math.isfinite(b.p99_ms)], dtype=np.float64)
    if vals.size == 0:
        return math.nan, math.nan, math.nan
    lo, hi = median_ci(vals)
    return float(np.median(vals)), lo, hi


# ---- trials -------------------------------------------------------------------------------------------------------
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
    winner: bool = False

    @property
    def profile(self) -> Profile:
        return self.candidate.profile

    @property
    def label(self) -> str:
        return self.candidate.label

    def improvement_pct(self) -> float:
        """How much better than the incumbent on the objective (positive = better), nan without pairs yet."""
        c = self.comparison
        if c is None or not math.isfinite(c.change_pct):
            return math.nan
        return c.change_pct if c.metric in HIGHER_IS_BETTER else -c.change_pct

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
    verdict: str                          # BETTER or KEEP
    text: str                             # one line for people
    comparison: Comparison | None         # the verification: best (or the final candidate) vs baseline
    candidate: Profile | None             # what was verified (== best when the verdict is BETTER)
    trials: list[Trial]
    not_tried: list[tuple[Candidate, str]]
    pruned: list[str]
    dimensions: tuple[str, ...]
    host: dict[str, Any] = field(default_factory=dict)

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
            "host": self.host,
            "space": list(self.dimensions),
            "pruned": list(self.pruned),
            "baseline": {"profile": _profile_dict(self.baseline), **self.baseline_figures.as_dict()},
            "trials": [t.as_dict() for t in self.trials],
            "not_tried": [{"label": c.label, "stage": c.stage, "reason": why} for c, why in self.not_tried],
            "best": best,
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False)


# ---- the tuner ----------------------------------------------------------------------------------------------------
class Tuner:
    """One tuning run; :meth:`run` returns a :class:`TuneResult`. ``on_event(kind, tuner)`` is called on the tuning
    thread at each step (``start``, ``stage``, ``rung``, ``verify``, ``done``): read :attr:`trials`, :attr:`phase`,
    :meth:`elapsed` from it, never block in it."""

    def __init__(self, space: Space, racer: Racer, *, objective: str = "p50", max_p99_ms: float | None = None,
                 budget_s: float = 60.0, clock: Callable[[], float] = time.monotonic, started: float | None = None,
                 on_event: Callable[[str, Tuner], None] | None = None, verify_share: float = VERIFY_SHARE,
                 stop: threading.Event | None = None):
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r} (one of {', '.join(OBJECTIVES)})")
        if not (budget_s > 0 and math.isfinite(budget_s)):
            raise ValueError(f"budget must be > 0 seconds, got {budget_s}")
        self.space = space
        self.racer = racer
        self.metric = objective
        self.max_p99 = max_p99_ms
        self.budget_s = float(budget_s)
        self.clock = clock
        self.t0 = clock() if started is None else started
        self.deadline = self.t0 + self.budget_s
        self.margin = max(0.3, 0.02 * self.budget_s)
        self.verify_share = verify_share
        self.stop = stop or threading.Event()
        self.on_event = on_event
        self.start = space.start
        self.incumbent = space.start
        self.trials: list[Trial] = []
        self.not_tried: list[tuple[Candidate, str]] = []
        self.phase = "starting"
        self.stage = ""
        self.base_blocks: list[Block] = []      # the start profile's blocks, wherever it raced
        self._builds = 0
        self._build_s = 0.0
        self._tried: set[str] = {profile_key(space.start)}

    # ---- time ----
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def left(self) -> float:
        return self.deadline - self.clock()

    def _emit(self, kind: str) -> None:
        if self.on_event is not None:
            self.on_event(kind, self)

    def _build_estimate(self) -> float:
        if self._builds:
            return self._build_s / self._builds
        return self.racer.build_seconds()

    def _prepare(self, profiles: Sequence[Profile]) -> dict[int, str]:
        t = self.clock()
        failed = self.racer.prepare(profiles)
        took = self.clock() - t
        if profiles:
            self._builds += len(profiles)
            self._build_s += took
        return failed

    # ---- the run ----
    def run(self) -> TuneResult:
        try:
            return self._run()
        except RacerError as exc:
            raise RuntimeFailure(str(exc)) from None
        finally:
            self.racer.close()

    def _run(self) -> TuneResult:
        self.phase = "building the baseline"
        self._emit("start")
        failed = self.racer.prepare([self.start])
        if failed:
            raise RuntimeFailure(f"the start profile failed: {failed[0]}")
        bc = self.racer.block_seconds([self.start])
        verify_s = min(VERIFY_MAX_SHARE * self.budget_s, max(self.verify_share * self.budget_s, VERIFY_BLOCKS * bc))
        stages = list(self.space.dimensions)
        for i, stage in enumerate(stages):
            if self.stop.is_set():
                break
            cands = self._order([c for c in self.space.candidates(stage, self.incumbent) if c.key not in self._tried])
            if not cands:
                continue
            avail = self.left() - self.margin - verify_s
            weights = [len(cands) + 1]
            for later in stages[i + 1:]:
                n = len(self.space.candidates(later, self.incumbent))
                if n:
                    weights.append(n + 1)
            stage_s = max(0.0, avail * weights[0] / sum(weights))
            bc = self.racer.block_seconds([self.incumbent] + [c.profile for c in cands])
            per_cand = self._build_estimate() + ROUNDS_FIRST * bc
            n_fit = int((stage_s - ROUNDS_FIRST * bc) // per_cand) if per_cand > 0 else len(cands)
            if n_fit < 1 and avail - ROUNDS_FIRST * bc >= per_cand:
                n_fit = 1  # a short share still tries the first (most promising) candidate when the budget allows
                stage_s = min(avail, ROUNDS_FIRST * 2 * bc + self._build_estimate())
            for c in cands[max(n_fit, 0):]:
                self.not_tried.append((c, "no time left in the budget"))
                self._tried.add(c.key)
            cands = cands[:max(n_fit, 0)]
            if not cands:
                continue
            self.stage = stage
            self.phase = f"racing {stage}"
            self._emit("stage")
            winner = self._race_stage(stage, cands, self.clock() + stage_s)
            if winner is not None:
                old = self.incumbent
                self.incumbent = winner.profile
                if profile_key(old) != profile_key(self.start):
                    self.racer.release([old])
        return self._verify()

    def _order(self, cands: list[Candidate]) -> list[Candidate]:
        """Candidates most likely to serve the objective first (a short budget races only the first few): for CPU
        per run, fewer pool threads and no spinning; otherwise the space's own order."""
        if self.metric != "cpu":
            return cands
        return sorted(cands, key=lambda c: (self.space.spinning(c.profile) and self.space.pool_threads(c.profile) > 1,
                                            self.space.pool_threads(c.profile)))

    # ---- one dimension ----
    def _race_stage(self, stage: str, cands: list[Candidate], stage_end: float) -> Trial | None:
        inc = self.incumbent
        inc_label = describe(inc, self.start) if profile_key(inc) != profile_key(self.start) else "baseline"
        trials = [Trial(c, inc_label) for c in cands]
        for c in cands:
            self._tried.add(c.key)
        self.trials.extend(trials)
        failed = self._prepare([c.profile for c in cands])
        for i, why in failed.items():
            self._fail(trials[i], why)
        alive = [t for t in trials if t.status == "racing"]
        index = {id(t): k + 1 for k, t in enumerate(trials)}   # stage-local config numbers; 0 = incumbent
        blocks: list[Block] = []
        rung = 0
        while alive and not self.stop.is_set():
            n = len(alive) + 1
            bc = self.racer.block_seconds([inc] + [t.profile for t in alive])
            left = min(stage_end, self.deadline - self.margin) - self.clock()
            # Successive halving: as many rungs as halvings to one survivor, plus one first look that can end the
            # dimension early when it already decides (a single candidate gets half its share, then the rest).
            rungs_left = 1 + math.ceil(math.log2(len(alive))) + (1 if rung == 0 else 0)
            want = max((ROUNDS_FIRST if rung == 0 else ROUNDS_MIN) * n * bc, left / rungs_left)
            rounds = int(min(want, left) // (n * bc))
            if rounds < ROUNDS_MIN:
                break
            seconds = rounds * n * bc + 0.5 * bc  # the half block keeps the last round's last block from being cut
            outcome = self.racer.race([inc] + [t.profile for t in alive], seconds)
            if 0 in outcome.failed:
                raise RuntimeFailure(f"the incumbent ({inc_label}) failed while racing: {outcome.failed[0]}")
            for j, why in outcome.failed.items():
                self._fail(alive[j - 1], why)
            mapping = {0: 0, **{j + 1: index[id(t)] for j, t in enumerate(alive)}}
            for b in outcome.blocks:
                if b.config in mapping:
                    blocks.append(_relabel(b, mapping[b.config]))
                    if mapping[b.config] == 0 and profile_key(inc) == profile_key(self.start):
                        self.base_blocks.append(b)
            alive = [t for t in alive if t.status == "racing"]
            self._judge(alive, blocks, index)
            alive = [t for t in alive if t.status == "racing"]
            rung += 1
            for t in alive:
                t.rungs = rung
            more_time = min(stage_end, self.deadline - self.margin) - self.clock() >= ROUNDS_MIN * (len(alive) + 1) * bc
            if len(alive) >= 3 and more_time and all(t.comparison is not None and t.comparison.pairs >= MIN_PAIRS
                                                     for t in alive):
                self._halve(alive)
                alive = [t for t in alive if t.status == "racing"]
            self._emit("rung")
            if not alive:
                break
            if len(alive) == 1 and alive[0].comparison is not None and alive[0].comparison.verdict != "undecided":
                break
        for t in alive:
            t.status = "ok"
        winner = self._pick(alive, blocks)
        losers = [t.profile for t in trials if t is not winner and t.status != "failed"]
        self.racer.release(losers)
        if winner is not None:
            winner.winner = True
        self._emit("rung")
        return winner

    def _fail(self, t: Trial, why: str) -> None:
        t.status = "failed"
        t.reason = why
        self.racer.release([t.profile])

    def _judge(self, alive: list[Trial], blocks: list[Block], index: dict[int, int]) -> None:
        inc_p99 = p99_interval([b for b in blocks if b.config == 0])[0]
        inc_violates = self.max_p99 is not None and math.isfinite(inc_p99) and inc_p99 > self.max_p99
        for t in alive:
            k = index[id(t)]
            mine = [b for b in blocks if b.config == k]
            t.figures = figures(mine)
            t.p99 = p99_interval(mine)
            c = compare(blocks, 0, k, self.metric)
            t.comparison = c
            if self.max_p99 is not None and math.isfinite(t.p99[1]) and t.p99[1] > self.max_p99 \
                    and t.figures.blocks >= MIN_PAIRS:
                t.status = "dropped"
                t.reason = (f"p99 above the limit: {t.p99[0]:.3g} ms (interval {t.p99[1]:.3g}…{t.p99[2]:.3g} ms) "
                            f"> {self.max_p99:g} ms")
            elif inc_violates:
                continue  # the incumbent misses the limit: one that meets it may win even at a higher cost
            elif c.verdict == "slower":
                t.status, t.reason = "dropped", f"significantly worse: {c.text()}"
            elif c.verdict == "no difference":
                t.status, t.reason = "dropped", f"cannot win: {c.text()}"

    def _rank_key(self, t: Trial) -> tuple[int, float]:
        infeasible = int(self.max_p99 is not None and math.isfinite(t.p99[0]) and t.p99[0] > self.max_p99)
        imp = t.improvement_pct()
        return infeasible, -(imp if math.isfinite(imp) else -math.inf)

    def _halve(self, alive: list[Trial]) -> None:
        ranked = sorted(alive, key=self._rank_key)
        keep = math.ceil(len(ranked) / 2)
        for pos, t in enumerate(ranked[keep:], start=keep + 1):
            imp = t.improvement_pct()
            t.status = "dropped"
            t.reason = (f"halved: ranked {pos} of {len(ranked)} on {self.metric} "
                        f"({'n/a' if not math.isfinite(imp) else f'{imp:+.1f} % better'} than the incumbent)")

    def _pick(self, alive: list[Trial], blocks: list[Block]) -> Trial | None:
        if not alive:
            return None
        if self.max_p99 is not None:
            inc_p99 = p99_interval([b for b in blocks if b.config == 0])[0]
            meets = [t for t in alive if math.isfinite(t.p99[0]) and t.p99[0] <= self.max_p99]
            if math.isfinite(inc_p99) and inc_p99 > self.max_p99:
                return min(meets, key=self._rank_key) if meets else None
            alive = meets
        better = [t for t in alive if t.comparison is not None and t.comparison.verdict == "faster"]
        return min(better, key=self._rank_key) if better else None

    # ---- the verdict ----
    def _verify(self) -> TuneResult:
        start, best = self.start, self.incumbent
        changed = profile_key(best) != profile_key(start)
        comparison: Comparison | None = None
        best_figs = Figures()
        if not changed:
            verdict, text = KEEP, self._nothing_won_text()
        else:
            self.phase = "verifying the best against the baseline"
            self.stage = "verify"
            self._emit("verify")
            bc = self.racer.block_seconds([start, best])
            rounds = int((self.left() - self.margin) // (2 * bc))
            blocks: list[Block] = []
            if rounds >= MIN_PAIRS and not self.stop.is_set():
                outcome = self.racer.race([start, best], rounds * 2 * bc + 0.5 * bc)
                if outcome.failed:
                    raise RuntimeFailure(f"the verification could not run: {'; '.join(outcome.failed.values())}")
                blocks = outcome.blocks
            if blocks:
                comparison = compare(blocks, 0, 1, self.metric)
                self.base_blocks = [b for b in blocks if b.config == 0]  # fresh, side by side with the best
                best_figs = figures([b for b in blocks if b.config == 1])
            verdict, text = self._verdict(comparison, blocks)
        base_figs = figures(self.base_blocks)
        chosen, chosen_figs = (best, best_figs) if verdict == BETTER else (start, base_figs)
        self.phase = "done"
        result = TuneResult(self.metric, self.max_p99, self.budget_s, self.elapsed(), start, base_figs, chosen,
                            chosen_figs, verdict, text, comparison, best if changed else None, self.trials,
                            self.not_tried, list(self.space.pruned), self.space.dimensions)
        self._emit("done")
        return result

    def _nothing_won_text(self) -> str:
        raced = [t for t in self.trials if t.status in ("ok", "dropped")]
        if not raced:
            failed = sum(t.status == "failed" for t in self.trials)
            if failed:
                return f"no detectable gain: keep the baseline (every candidate tried failed: {failed})"
            return "no detectable gain: keep the baseline (no candidate could be raced in the budget)"
        return (f"no detectable gain: keep the baseline (none of {len(raced)} candidate"
                f"{'s' if len(raced) != 1 else ''} raced was significantly better on {self.metric})")

    def _verdict(self, c: Comparison | None, blocks: list[Block]) -> tuple[str, str]:
        if c is None or c.verdict == "undecided" and c.pairs < MIN_PAIRS:
            return KEEP, "no detectable gain: keep the baseline (no time left to verify the best candidate)"
        base_p99 = p99_interval([b for b in blocks if b.config == 0])[0]
        best_p99 = p99_interval([b for b in blocks if b.config == 1])[0]
        if self.max_p99 is not None:
            meets_best = math.isfinite(best_p99) and best_p99 <= self.max_p99
            meets_base = math.isfinite(base_p99) and base_p99 <= self.max_p99
            if meets_best and not meets_base:
                return BETTER, (f"{c.text()}; p99 {best_p99:.3g} ms meets the {self.max_p99:g} ms limit where the "
                                f"baseline's {base_p99:.3g} ms does not")
            if not meets_best:
                return KEEP, (f"no detectable gain: keep the baseline (the best candidate's p99 {best_p99:.3g} ms "
                              f"does not meet {self.max_p99:g} ms when verified)")
        if c.verdict == "faster":
            return BETTER, c.text()
        if c.verdict == "slower":
            return KEEP, f"no detectable gain: keep the baseline (verified, the best candidate was worse: {c.text()})"
        return KEEP, f"no detectable gain: keep the baseline ({c.text()})"


def _relabel(b: Block, config: int) -> Block:
    from dataclasses import replace

    return replace(b, config=config)


# ---- the real racer -----------------------------------------------------------------------------------------------
BLOCK_TARGET_S = 0.15   # blocks of a tuning run: shorter than a comparison's, so that many candidates fit


def block_target_for(budget_s: float) -> float:
    """Block length for a budget: about 1/400 of it, between 0.05 and 0.3 s."""
    return min(0.3, max(0.05, budget_s / 400))


class _Group:
    """One worker process (one restart group: environment and global thread pools) and what it holds."""

    def __init__(self, racer: WorkerRacer, key: tuple, env: dict[str, str]):
        self.racer = racer
        self.key = key
        self.env = env
        self.cv = threading.Condition()
        self.built: dict[int, dict] = {}
        self.failed: dict[int, str] = {}
        self.run_errors: dict[int, str] = {}
        self.acks: set[int] = set()
        self.dead: str | None = None
        self.il: Any = None
        self.channel = 0
        self.wp: Any = None

    def start(self) -> None:
        from ortop.engine.workerproc import WorkerProc

        self.dead = None
        self.built.clear()
        self.failed.clear()
        self.run_errors.clear()
        self.wp = WorkerProc(self.racer.model_path, self.env, self.on_message, self.on_exit, name="ortop-tune-worker")
        self.wp.start()

    def on_message(self, msg: Any) -> None:
        from ortop.runtime import protocol as P

        with self.cv:
            if isinstance(msg, P.Built):
                self.built[msg.config_id] = msg.info
            elif isinstance(msg, P.BuildFailed):
                self.failed[msg.config_id] = msg.message
            elif isinstance(msg, P.RunError):
                self.run_errors[msg.config_id] = msg.message
            elif isinstance(msg, P.State) and msg.name == "idle" and msg.config_id <= WorkerRacer.TOKEN_BASE:
                self.acks.add(msg.config_id)
            il, ch = self.il, self.channel
            self.cv.notify_all()
        if il is not None:
            il.deliver(msg, ch)

    def on_exit(self, wp: Any) -> None:
        if wp is not self.wp:
            return
        code = wp.exitcode
        why = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        with self.cv:
            self.dead = f"the worker process died ({why})"
            il = self.il
            self.cv.notify_all()
        if il is not None:
            il.abort(self.dead)

    def wait(self, cond: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self.cv:
            while not cond():
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.1))
            return True

    def send(self, msg: Any) -> None:
        if self.wp is not None:
            self.wp.send(msg)

    def stop(self) -> None:
        if self.wp is not None:
            self.wp.stop(graceful=True, timeout=2.0)
            self.wp = None


class WorkerRacer:
    """The real racer: sessions built once in a worker process and kept between rungs; each race is an
    :class:`ortop.engine.ab.Interleaving` over the sessions already built (its builds are answered from the cache).

    Profiles that need a fresh process (another environment or global thread pool) get a worker of their own; the
    interleaving then runs one block at a time across workers. A candidate whose build fails, whose Run() raises,
    or whose build kills the worker is reported as failed (the worker is restarted); a worker that dies while only
    already-proven sessions run raises :class:`RacerError`.
    """

    TOKEN_BASE = -1000

    def __init__(self, model_path: str, *, block_s: float = BLOCK_TARGET_S, build_timeout_s: float = 600.0,
                 strict_providers: bool = True):
        self.model_path = model_path
        self.block_target = block_s
        self.build_timeout_s = build_timeout_s
        self.strict_providers = strict_providers
        self._groups: dict[tuple, _Group] = {}
        self._cache: dict[str, tuple[_Group, int, dict]] = {}
        self._proven: set[str] = set()
        self._next_id = 1
        self._token = WorkerRacer.TOKEN_BASE
        self._seq = 0
        self.warnings: list[str] = []

    # ---- sessions ----
    def _group(self, p: Profile) -> _Group:
        key = p.restart_key()
        g = self._groups.get(key)
        if g is None:
            g = _Group(self, key, dict(p.env))
            self._groups[key] = g
        if g.wp is None or g.dead:
            self._restart(g)
        return g

    def _restart(self, g: _Group) -> None:
        g.stop()
        for k in [k for k, (gg, _, _) in self._cache.items() if gg is g]:
            del self._cache[k]
        g.start()

    def prepare(self, profiles: Sequence[Profile]) -> dict[int, str]:
        failed: dict[int, str] = {}
        for i, p in enumerate(profiles):
            key = profile_key(p)
            if key in self._cache:
                continue
            g = self._group(p)
            short = self._short_of_memory()
            if short:
                failed[i] = short
                continue
            cid = self._next_id
            self._next_id += 1
            from ortop.runtime import protocol as P

            g.send(P.Build(cid, p.to_dict(full=True)))
            ok = g.wait(_settled(g, cid), self.build_timeout_s)
            if g.dead is not None and cid not in g.built:
                failed[i] = f"{g.dead} while building it"
                self._restart(g)
                continue
            if not ok:
                failed[i] = f"the session did not finish building in {self.build_timeout_s:.0f} s"
                self._restart(g)
                continue
            if cid in g.failed:
                failed[i] = f"the session failed to build: {g.failed[cid]}"
                continue
            info = g.built[cid]
            requested = [x for x in info.get("providers_requested", ()) if x != "CPUExecutionProvider"]
            missing = [x for x in requested if x not in info.get("providers_active", ())]
            if missing and self.strict_providers:
                failed[i] = (f"{', '.join(missing)} requested but not active (ORT fell back to "
                             f"{', '.join(info.get('providers_active', ())) or 'nothing'})")
                g.send(P.Drop(cid))
                continue
            self._cache[key] = (g, cid, info)
        return failed

    def _short_of_memory(self) -> str:
        """Why one more session would not fit (the largest session so far, with headroom), or ""."""
        from ortop.engine.ab import MEMORY_HEADROOM, MiB, available_memory

        per = 0
        for _, _, info in self._cache.values():
            before, after = int(info.get("rss_before", -1)), int(info.get("rss_after", -1))
            if before >= 0 and after >= 0:
                per = max(per, after - before)
        available = available_memory()
        if per <= 0 or available is None or per <= MEMORY_HEADROOM * available:
            return ""
        return (f"not built: another session needs about {per / MiB:.0f} MiB and only {available / MiB:.0f} MiB "
                "is available beside the sessions already held")

    def release(self, profiles: Sequence[Profile]) -> None:
        from ortop.runtime import protocol as P

        for p in profiles:
            entry = self._cache.pop(profile_key(p), None)
            if entry is not None:
                g, cid, _ = entry
                g.send(P.Drop(cid))

    def close(self) -> None:
        for g in self._groups.values():
            g.stop()
        self._groups.clear()
        self._cache.clear()

    # ---- blocks ----
    def _run_s(self, profiles: Sequence[Profile]) -> float:
        lat = 0.0
        for p in profiles:
            entry = self._cache.get(profile_key(p))
            if entry is None:
                continue
            info = entry[2]
            ms = float(info.get("warmup_ms", math.nan))
            if not (math.isfinite(ms) and ms > 0):
                ms = float(info.get("first_run_ms", 1.0))
            lat = max(lat, ms / 1e3)
            rate = p.workload.rate_hz
            if rate > 0:
                lat = max(lat, p.workload.concurrency / rate)
        return lat or 0.001

    def _plan(self, profiles: Sequence[Profile]) -> tuple[float, float]:
        from ortop.engine.schedule import MIN_BLOCK_RUNS, SETTLE_RUNS, SETTLE_S

        run_s = self._run_s(profiles)
        return max(self.block_target, MIN_BLOCK_RUNS * run_s), max(SETTLE_S, SETTLE_RUNS * run_s)

    def block_seconds(self, profiles: Sequence[Profile]) -> float:
        block, settle = self._plan(profiles)
        return block + settle + 0.002

    def build_seconds(self) -> float:
        """The slowest build so far (session creation, first run, warm-up runs), plus the messages around it."""
        worst = 0.0
        for _, _, info in self._cache.values():
            ms = 0.0
            for k in ("create_ms", "first_run_ms"):
                v = float(info.get(k, math.nan))
                ms += v if math.isfinite(v) else 0.0
            warm = float(info.get("warmup_ms", math.nan))
            ms += warm * 10 if math.isfinite(warm) else 0.0
            worst = max(worst, ms / 1e3)
        return worst + 0.05

    # ---- racing ----
    def race(self, profiles: Sequence[Profile], seconds: float) -> RaceOutcome:
        out = RaceOutcome()
        end = time.monotonic() + seconds
        out.failed.update(self.prepare(profiles))
        while True:
            ok = [i for i in range(len(profiles)) if i not in out.failed]
            left = end - time.monotonic()
            if len(ok) < 2 or left <= 0:
                return out
            try:
                blocks = self._interleave([profiles[i] for i in ok], left)
            except _RunFailed as exc:
                for j, why in exc.failed.items():
                    out.failed[ok[j]] = why
                    self.release([profiles[ok[j]]])
                out.failed.update({ok[j]: why for j, why in self.prepare([profiles[i] for i in ok]).items()})
                continue
            for b in blocks:
                out.blocks.append(_relabel(b, ok[b.config]))
            for i in ok:
                self._proven.add(profile_key(profiles[i]))
            return out

    def _interleave(self, profiles: list[Profile], seconds: float) -> list[Block]:
        from ortop.engine import ab
        from ortop.runtime import protocol as P

        entries = [self._cache[profile_key(p)] for p in profiles]
        groups: list[_Group] = []
        for g, _, _ in entries:
            if g not in groups:
                groups.append(g)
        channel_of = [groups.index(g) for g, _, _ in entries]
        ids = [cid for _, cid, _ in entries]
        infos = {cid: info for _, cid, info in entries}
        holder: dict[str, Any] = {}

        def channel(ch: int) -> Callable[[Any], Any]:
            g = groups[ch]

            def send(msg: Any) -> None:
                if isinstance(msg, P.Build) and msg.config_id in infos:
                    # Built already: answer from the cache, without the memory figures (the sessions exist, so the
                    # interleaving's check of whether they would fit does not apply).
                    info = {**infos[msg.config_id], "rss_before": -1, "rss_after": -1}
                    holder["il"].deliver(P.Built(msg.config_id, info), ch)
                else:
                    g.send(msg)
            return send

        def finish(ch: int) -> None:
            # End the alternation and idle, then wait for the worker to say so: nothing of this race may reach the
            # next one's interleaving.
            g = groups[ch]
            self._token -= 1
            token = self._token
            g.send(P.RunLive(token))
            g.wait(lambda: token in g.acks or g.dead is not None, 10.0)
            g.acks.discard(token)

        block, settle = self._plan(profiles)
        names = [describe(p, profiles[0]) if i else "incumbent" for i, p in enumerate(profiles)]
        il = ab.Interleaving(profiles, ids, [channel(k) for k in range(len(groups))], channel_of, budget_s=seconds,
                             names=names, finish=finish, block_s=block, settle_s=settle)
        holder["il"] = il
        for k, g in enumerate(groups):
            with g.cv:
                g.run_errors.clear()
                g.il, g.channel = il, k
        try:
            result = il.run()
        except ab.AbError as exc:
            failed = {}
            for j, (g, cid, _) in enumerate(entries):
                if cid in g.run_errors:
                    failed[j] = f"Run() failed: {g.run_errors[cid]}"
            dead = [g for g in groups if g.dead is not None]
            if dead:
                suspects = [j for j, p in enumerate(profiles) if j and profile_key(p) not in self._proven]
                for g in dead:
                    self._restart(g)
                if not failed and suspects:
                    failed = {j: f"{dead[0].dead} while it ran" for j in suspects}
            if failed and 0 not in failed:
                raise _RunFailed(failed) from None
            raise RacerError(str(exc)) from None
        finally:
            for g in groups:
                with g.cv:
                    g.il = None
        for w in result.warnings:
            if w not in self.warnings and len(self.warnings) < 50:
                self.warnings.append(w)
        blocks = sorted(result.blocks, key=lambda b: b.seq)
        out = []
        for b in blocks:
            out.append(_reseq(b, self._seq + b.seq))
        if blocks:
            self._seq += max(b.seq for b in blocks) + 2
        return out


def _settled(g: _Group, cid: int) -> Callable[[], bool]:
    """Whether a build has an answer (or the worker died)."""
    return lambda: cid in g.built or cid in g.failed or g.dead is not None


class _RunFailed(Exception):
    def __init__(self, failed: dict[int, str]):
        super().__init__("; ".join(failed.values()))
        self.failed = failed


def _reseq(b: Block, seq: int) -> Block:
    from dataclasses import replace

    return replace(b, seq=seq)
