"""``ortop tune``: race candidate profiles against the incumbent in interleaved blocks, and verify the winner.

Why racing, and why interleaved
    On a shared host two back-to-back measurements of one configuration differ by ±10 %, so ranking candidates by
    one short measurement each (as Olive's session-params tuning does) ranks noise. Here every candidate runs in
    the same worker as the incumbent, alternating in short blocks, and is judged only by its paired comparison with
    the incumbent (:func:`ortop.measure.compare.compare`: neighbouring blocks, a Hodges–Lehmann estimate and an exact
    signed-rank interval, a 2 % margin).

The search (coordinate-wise, one dimension of :class:`ortop.engine.answers.space.Space` at a time)
    For each dimension, its candidates around the incumbent race in one worker together with the incumbent:

    * rung 0 gives every candidate enough rounds for an interval (at least ``ROUNDS_FIRST`` blocks each, never fewer
      than ``MIN_PAIRS``), and is a first look: a dimension whose candidates are all decided by then ends early, its
      time going to the next;
    * after each rung a candidate is dropped when it is significantly worse on the objective, when its difference
      is confidently inside the margin (it cannot win), or when its p99 interval lies wholly above ``max_p99``;
    * with three or more left, the half ranked behind by their estimate is dropped too (successive halving), and
      the survivors race on with more blocks each;
    * the dimension ends when one candidate is left and decided, or its share of the budget is spent. Its winner
      is the candidate significantly better than the incumbent with the best estimate (under a p99 limit the
      incumbent must also be beaten by a candidate that meets it, and a candidate that meets the limit replaces an
      incumbent that does not); the winner becomes the incumbent of the next dimension.

    A candidate that fails to build or run is recorded with its reason and never ranked.

Decisions sized in requests
    A block's own figure must be the statistic it is named after: the racer sizes a race's blocks to hold the runs
    the judged percentile needs (a p99: 100, :func:`ortop.measure.stats.runs_needed`), and a figure over fewer runs
    is nan, never the slowest run under another name (:func:`ortop.engine.answers.trials.figures`; a p99 limit is judged
    on every run of a candidate pooled across its blocks, :func:`ortop.engine.answers.trials.p99_interval`). On a model
    that runs ten times a second a p99 rung takes minutes: a dimension whose first rung does not fit the time left is
    not raced, and says so with what a rung needs at the model's pace, never as "no detectable gain".

The verdict
    The final incumbent is raced once more against the start profile, on fresh blocks (the candidate that won a race
    is, by selection, one whose noise fell its way: reusing the race's blocks would overstate its gain). A
    candidate is the ``winner`` only once that comparison says "better", and the verdict names it; until then it is
    the ``stage_winner`` of its dimension. Otherwise the result says which of three it is: no detectable gain, keep
    the baseline (candidates raced, none better); "not measured" (no candidate could be raced, or the best could not
    be verified, in the budget: the result says the budget an answer needs); or, stopped, what was leading. The
    baseline's figures are always measured: beside the candidates, or alone when nothing raced.

Budget accounting
    ``budget_s`` is wall time from ``started`` to the result, builds included, on the injected clock. A reserve for
    the verification is set aside first; the rest is shared among the dimensions in proportion to their candidate
    counts, recomputed as each ends (time a dimension did not need goes to the next). Before a dimension starts, the
    candidates that cannot get a first rung in its share (measured build time per session + their blocks) are left
    out, listed as not tried; when not even one fits the time left, each is listed as not raced, with what a rung
    needs. A small margin is kept for closing the worker.

The measuring is behind :class:`Racer`, so the logic is tested with a fake racer and a fake clock;
:class:`ortop.engine.answers.racer.WorkerRacer` is the real one, over :class:`ortop.engine.bench.ab.Interleaving` and
one worker process that keeps every candidate's session built between rungs.

Over ~600 lines, a quarter of them this note: the race (rungs, survivors, the budget's split) and the verification
of its winner are one state machine over one budget and one racer; split, each half would need the other's state.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ortop.config.profile import Profile
from ortop.engine.answers.space import Candidate, Space, describe, profile_key
from ortop.engine.answers.trials import (  # noqa: F401  (re-exported: the tuner's public face)
    BETTER,
    KEEP,
    NOT_MEASURED,
    STOPPED,
    Figures,
    RaceOutcome,
    Racer,
    RacerError,
    Trial,
    TuneResult,
    figures,
    p99_interval,
)
from ortop.errors import RuntimeFailure
from ortop.measure.compare import MIN_PAIRS, Block, Comparison, compare
from ortop.measure.stats import runs_needed
from ortop.present import signed_pct

OBJECTIVES = ("p50", "p99", "throughput", "cpu")
OBJECTIVE_TEXT = {"p50": "lowest p50 latency", "p99": "lowest p99 latency", "throughput": "most throughput",
                  "cpu": "least CPU per run"}
ROUNDS_FIRST = MIN_PAIRS + 2   # rung 0: rounds per candidate, enough for a first interval
ROUNDS_MIN = 2                 # a later rung shorter than this is not worth starting
VERIFY_SHARE = 0.2             # of the budget, set aside to verify the winner against the start profile
VERIFY_MAX_SHARE = 0.35
VERIFY_BLOCKS = 2 * (MIN_PAIRS + 6)  # the verification wants at least this many blocks (two configurations)
BASELINE_RUNS = 1.25 * runs_needed("p99")  # measured alone (nothing raced): runs enough for its p99, time allowing
NO_RATE = "no rate meets the SLO"  # a no_race that was decided: a result (the CLI writes it)
METRIC_LABEL = {"p50": "p50", "p99": "p99", "throughput": "runs/s", "cpu": "CPU/run"}




def change_text(c: Comparison) -> str:
    """A comparison's change on its metric with its interval and its pairs, e.g. ``p50 −19.0 %, better (95 % CI
    −22.1…−16.0 %, 12 pairs)``: no figures before and after (a profile's figures are its own line, over every run
    pooled; the medians of paired blocks would be a second figure for the same thing)."""
    label = METRIC_LABEL.get(c.metric, c.metric)
    pairs = f"{c.pairs} pair{'s' if c.pairs != 1 else ''}"
    if not (math.isfinite(c.ci_low_pct) and math.isfinite(c.ci_high_pct)):
        return f"{label} undecided ({pairs}: too few for an interval)"
    word = {"faster": "better", "slower": "worse"}.get(c.verdict, c.verdict)
    ci = f"{signed_pct(c.ci_low_pct)}…{signed_pct(c.ci_high_pct)}"
    return f"{label} {signed_pct(c.change_pct)} %, {word} (95 % CI {ci} %, {pairs})"


# ---- the tuner ----------------------------------------------------------------------------------------------------
class Tuner:
    """One tuning run; :meth:`run` returns a :class:`TuneResult`. ``on_event(kind, tuner)`` is called on the tuning
    thread at each step (``start``, ``stage``, ``rung``, ``verify``, ``done``): read :attr:`trials`, :attr:`phase`,
    :meth:`elapsed` from it, never block in it.

    ``no_race``: why nothing is to be raced (the baseline meets an SLO at no rate: there is no knee to race at);
    the run then measures the baseline alone. Starting with NO_RATE (decided: the no-load figure's interval lies
    above the SLO) its verdict is KEEP, a result; otherwise (the knee was not found) "not measured"."""

    def __init__(self, space: Space, racer: Racer, *, objective: str = "p50", max_p99_ms: float | None = None,
                 budget_s: float = 60.0, clock: Callable[[], float] = time.monotonic, started: float | None = None,
                 on_event: Callable[[str, Tuner], None] | None = None, verify_share: float = VERIFY_SHARE,
                 stop: threading.Event | None = None, no_race: str = ""):
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
        self.no_race = no_race
        self.fault: str | None = None  # a worker lost with only proven sessions racing: the search ended there
        self.on_event = on_event
        self.start = space.start
        self.incumbent = space.start
        self.trials: list[Trial] = []
        self.not_tried: list[tuple[Candidate, str]] = []
        self.phase = "starting"
        self.stage = ""
        self.base_blocks: list[Block] = []      # the start profile's blocks, wherever it raced
        self.needs: dict[str, Any] = {}         # what the first rung that did not fit needed (see _short)
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

    def _pace(self, profiles: Sequence[Profile]) -> float:
        """Requests per second the slowest of ``profiles`` serves (nan when the racer cannot tell)."""
        fn = getattr(self.racer, "runs_per_s", None)
        return float(fn(profiles)) if fn is not None else math.nan

    def _rung_seconds(self, n_cands: int, bc: float) -> float:
        """A first rung of ``n_cands`` candidates beside the incumbent: their builds and ``ROUNDS_FIRST`` rounds."""
        return n_cands * self._build_estimate() + ROUNDS_FIRST * (n_cands + 1) * bc + 0.5 * bc

    @staticmethod
    def _verify_min(bc: float) -> float:
        """The shortest verification that can decide: ``MIN_PAIRS`` rounds of the two."""
        return MIN_PAIRS * 2 * bc + 0.5 * bc

    def _verify_reserve(self, budget_s: float, bc: float) -> float:
        """Time set aside to verify a winner: a share of the budget, never less than a verification can decide in."""
        share = min(VERIFY_MAX_SHARE * budget_s, max(self.verify_share * budget_s, VERIFY_BLOCKS * bc))
        return max(self._verify_min(bc), share)

    def _budget_for(self, rung_s: float, bc: float) -> float:
        """The budget (a round number of seconds) whose time left now would fit ``rung_s`` and the verification."""
        spent = self.elapsed()
        b = 10.0 * math.ceil(max(self.budget_s, spent + rung_s) / 10.0)
        while b - spent - max(0.3, 0.02 * b) - self._verify_reserve(b, bc) < rung_s and b < 1e6:
            b += 10.0 if b < 300 else 60.0
        return b

    def _short(self, rung_s: float, bc: float, profiles: Sequence[Profile]) -> str:
        """Why a rung is not raced: what it and its winner's verification need at the model's pace; the first
        such rung is kept in :attr:`needs`."""
        pace = self._pace(profiles)
        at = f" at this model's pace ({pace:.3g} runs/s)" if math.isfinite(pace) else ""
        verify_s = self._verify_min(bc)
        if not self.needs:
            self.needs = {"rung_s": round(rung_s, 1), "verify_s": round(verify_s, 1),
                          "runs_per_s": round(pace, 3) if math.isfinite(pace) else None,
                          "left_s": round(max(0.0, self.left() - self.margin), 1),
                          "budget_s": self._budget_for(rung_s, bc)}
        return f"not raced: a rung needs ~{rung_s:.0f} s{at}, and verifying its winner ~{verify_s:.0f} s more"

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
        if failed and failed[0] == STOPPED:
            raise RuntimeFailure("the search was stopped before the start profile was built")
        if failed:
            raise RuntimeFailure(f"the start profile failed: {failed[0]}")
        counted = getattr(self.racer, "default_threads", None)
        threads = counted(self.start) if counted is not None else None
        if threads:
            self.space.set_default_threads(threads)  # ORT's default races once, as the count it resolves to
        bc = self.racer.block_seconds([self.start])
        verify_s = self._verify_reserve(self.budget_s, bc)
        stages = list(self.space.dimensions) if not self.no_race else []
        for i, stage in enumerate(stages):
            if self.stop.is_set() or self.fault is not None:
                break
            cands = self._order([c for c in self.space.candidates(stage, self.incumbent) if c.key not in self._tried])
            if not cands:
                continue
            avail = self.left() - self.margin - verify_s
            bc = self.racer.block_seconds([self.incumbent] + [c.profile for c in cands])
            rung1 = self._rung_seconds(1, bc)
            if avail < rung1:  # not even one candidate gets a first rung: none is raced, and the result says why
                why = self._short(rung1, bc, [self.incumbent])
                for c in cands:
                    self.not_tried.append((c, why))
                    self._tried.add(c.key)
                continue
            weights = [len(cands) + 1]
            for later in stages[i + 1:]:
                n = len(self.space.candidates(later, self.incumbent))
                if n:
                    weights.append(n + 1)
            stage_s = max(0.0, avail * weights[0] / sum(weights))
            per_cand = self._build_estimate() + ROUNDS_FIRST * bc
            n_fit = int((stage_s - ROUNDS_FIRST * bc) // per_cand) if per_cand > 0 else len(cands)
            if n_fit < 1:
                n_fit = 1  # a short share still tries the first (most promising) candidate when the budget allows
                stage_s = min(avail, rung1)
            for c in cands[n_fit:]:
                self.not_tried.append((c, "no time left in the budget"))
                self._tried.add(c.key)
            cands = cands[:n_fit]
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
            if why == STOPPED:  # never built, so never measured: not a failure of the candidate
                trials[i].status, trials[i].reason = "dropped", "not raced: the search was stopped"
                self.racer.release([trials[i].profile])
            else:
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
            if rung == 0 and rounds < MIN_PAIRS:
                # A first rung shorter than an interval needs decides nothing: fewer candidates, or none.
                if len(alive) > 1:
                    self._not_raced(alive.pop(), "no time left in the budget")
                    continue
                why = self._short(self._rung_seconds(1, bc) - self._build_estimate(), bc, [inc])
                self._not_raced(alive.pop(), why)
                break
            if rounds < ROUNDS_MIN:
                break
            seconds = rounds * n * bc + 0.5 * bc  # the half block keeps the last round's last block from being cut
            try:
                outcome = self.racer.race([inc] + [t.profile for t in alive], seconds)
            except RacerError as exc:  # a worker lost with only proven sessions in it: end with what was measured
                self.fault = str(exc)
                break
            if 0 in outcome.failed:
                raise RuntimeFailure(f"the incumbent ({inc_label}) failed while racing: {outcome.failed[0]}")
            for j, why in outcome.failed.items():
                self._fail(alive[j - 1], why)
            mapping = {0: 0, **{j + 1: index[id(t)] for j, t in enumerate(alive)}}
            for b in outcome.blocks:
                if b.config in mapping:
                    blocks.append(relabel(b, mapping[b.config]))
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
            winner.stage_winner = True  # the verdict makes it the winner, once verified
        self._emit("rung")
        return winner

    def _fail(self, t: Trial, why: str) -> None:
        t.status = "failed"
        t.reason = why
        self.racer.release([t.profile])

    def _not_raced(self, t: Trial, why: str) -> None:
        """A candidate built but left out of its dimension's race for lack of time: listed, never judged."""
        t.status, t.reason = "dropped", why if why.startswith("not raced") else f"not raced: {why}"
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
            if self.max_p99 is not None and not math.isfinite(t.p99[0]):
                t.reason = (f"p99 not resolved yet ({t.figures.runs} runs of the {runs_needed('p99')} a p99 needs): "
                            f"the {self.max_p99:g} ms limit is not checked")
            elif t.reason.startswith("p99 not resolved"):
                t.reason = ""
            if self.max_p99 is not None and math.isfinite(t.p99[1]) and t.p99[1] > self.max_p99 \
                    and t.figures.blocks >= MIN_PAIRS:
                t.status = "dropped"
                t.reason = (f"p99 above the limit: {t.p99[0]:.3g} ms (interval {t.p99[1]:.3g}…{t.p99[2]:.3g} ms, "
                            f"{t.figures.runs} runs pooled across {t.figures.blocks} blocks) > {self.max_p99:g} ms")
            elif inc_violates:
                continue  # the incumbent misses the limit: one that meets it may win even at a higher cost
            elif c.verdict == "slower":
                t.status, t.reason = "dropped", f"significantly worse: {change_text(c)}"
            elif c.verdict == "no difference":
                t.status, t.reason = "dropped", f"cannot win: {change_text(c)}"

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
        label = describe(best, start)
        if not changed:
            verdict, text = self._nothing_won()
        elif self.stop.is_set() or self.fault is not None:
            why = "stopped" if self.fault is None else f"a worker was lost ({self.fault})"
            verdict, text = KEEP, (f"{why} before the best candidate ({label}) was verified: keep "
                                   "the baseline, or verify that candidate with ortop compare")
        else:
            self.phase = "verifying the best against the baseline"
            self.stage = "verify"
            self._emit("verify")
            bc = self.racer.block_seconds([start, best])
            left = self.left() - self.margin
            rounds = int(left // (2 * bc))
            blocks: list[Block] = []
            if rounds >= MIN_PAIRS and not self.stop.is_set():
                try:
                    outcome = self.racer.race([start, best], rounds * 2 * bc + 0.5 * bc)
                except RacerError as exc:
                    self.fault = str(exc)
                    outcome = RaceOutcome()
                if outcome.failed:
                    raise RuntimeFailure(f"the verification could not run: {'; '.join(outcome.failed.values())}")
                blocks = outcome.blocks
            if blocks:
                comparison = compare(blocks, 0, 1, self.metric)
                self.base_blocks = [b for b in blocks if b.config == 0]  # fresh, side by side with the best
                best_figs = figures([b for b in blocks if b.config == 1])
            if (comparison is None or comparison.pairs < MIN_PAIRS) and (self.stop.is_set() or self.fault):
                why = "stopped" if self.fault is None else f"a worker was lost ({self.fault})"
                verdict, text = KEEP, (f"{why} before the best candidate ({label}) was verified: keep the baseline, "
                                       "or verify that candidate with ortop compare")
            elif comparison is None or comparison.pairs < MIN_PAIRS:
                need = self._verify_min(bc)
                if not self.needs:
                    self.needs = {"verify_s": round(need, 1), "budget_s": self._budget_for(0.0, bc)}
                pace = self._pace([start, best])
                at = f" at this model's pace ({pace:.3g} runs/s)" if math.isfinite(pace) else ""
                verdict, text = NOT_MEASURED, (
                    f"not verified: {label} won its race, but verifying it against the baseline needs ~{need:.0f} s"
                    f"{at} and {max(0.0, left):.0f} s were left: keep the baseline for now, give --budget "
                    f"{self.needs['budget_s']:.0f} or verify it with ortop compare")
            else:
                verdict, text = self._verdict(comparison, blocks, label)
        if not self.base_blocks:
            self._measure_baseline()
        base_figs = figures(self.base_blocks)
        chosen, chosen_figs = (best, best_figs) if verdict == BETTER else (start, base_figs)
        self._mark(verdict, best)
        self.phase = "done"
        result = TuneResult(self.metric, self.max_p99, self.budget_s, self.elapsed(), start, base_figs, chosen,
                            chosen_figs, verdict, text, comparison, best if changed else None, self.trials,
                            self.not_tried, list(self.space.pruned), self.space.dimensions,
                            stopped=self.stop.is_set() or self.fault is not None, fault=self.fault,
                            needs=dict(self.needs) if verdict == NOT_MEASURED else {})
        self._emit("done")
        return result

    def _measure_baseline(self) -> None:
        """Nothing raced beside the baseline: measure it alone, for as long as its p99 needs (BASELINE_RUNS runs)
        within the budget, and at least one block: its figures are always printed."""
        measure = getattr(self.racer, "measure", None)
        if measure is None or self.stop.is_set() or self.fault is not None:
            return
        self.phase = "measuring the baseline"
        self._emit("stage")
        pace = self._pace([self.start])
        first = True
        while first or (sum(b.runs for b in self.base_blocks) < BASELINE_RUNS and not self.stop.is_set()
                        and self.left() - self.margin > 1.0):
            runs = sum(b.runs for b in self.base_blocks)
            want = (BASELINE_RUNS - runs) / pace if math.isfinite(pace) and pace > 0 else self.left()
            try:
                outcome = measure(self.start, max(0.0, min(self.left() - self.margin, want)))
            except RacerError as exc:
                self.fault = str(exc)
                return
            if outcome.failed:
                raise RuntimeFailure(f"the start profile failed: {'; '.join(outcome.failed.values())}")
            if not outcome.blocks:
                return
            self.base_blocks.extend(outcome.blocks)
            first = False

    def _mark(self, verdict: str, best: Profile) -> None:
        """The table agrees with the verdict: the verified best is the ``winner``; a dimension's winner the verdict
        did not confirm says so."""
        key = profile_key(best)
        for t in self.trials:
            t.winner = verdict == BETTER and t.candidate.key == key
            if t.stage_winner and not t.winner and t.status == "ok":
                if verdict == BETTER:
                    t.reason = "won its race: part of the best"
                else:
                    against = "the baseline" if t.incumbent == "baseline" else t.incumbent
                    t.reason = f"won its race against {against}; not confirmed when verified (see the verdict)"

    def _nothing_won(self) -> tuple[str, str]:
        raced = [t for t in self.trials if t.raced]
        if raced:
            return KEEP, (f"no detectable gain: keep the baseline (none of {len(raced)} candidate"
                          f"{'s' if len(raced) != 1 else ''} raced was significantly better on {self.metric})")
        if self.fault is not None:
            return KEEP, f"a worker was lost ({self.fault}) before any candidate was raced: keep the baseline"
        if self.stop.is_set():
            return KEEP, "stopped before any candidate was raced: keep the baseline"
        failed = sum(t.status == "failed" for t in self.trials)
        unraced = len(self.not_tried) + sum(t.status != "failed" for t in self.trials)
        if self.no_race.startswith(NO_RATE):  # the SLO cannot be met here, decided: a result, keep the baseline
            return KEEP, f"keep the baseline: {self.no_race}"
        if self.no_race:
            return NOT_MEASURED, f"not measured: {self.no_race}"
        if not unraced:
            if failed:
                return KEEP, f"no detectable gain: keep the baseline (every candidate tried failed: {failed})"
            return KEEP, "nothing to race: the space holds no candidate for this model and host: keep the baseline"
        text = f"not measured: no candidate could be raced in {self.budget_s:g} s"
        if failed:
            text += f" ({failed} failed to build or run)"
        if not self.needs:
            return NOT_MEASURED, text
        pace = self.needs.get("runs_per_s")
        at = f" at this model's pace ({pace:.3g} runs/s)" if pace else ""
        return NOT_MEASURED, (f"{text}: a rung needs ~{self.needs['rung_s']:.0f} s{at} and verifying its winner ~"
                              f"{self.needs['verify_s']:.0f} s more, {self.needs['left_s']:.0f} s were left; give "
                              f"--budget {self.needs['budget_s']:.0f}")

    def _verdict(self, c: Comparison, blocks: list[Block], label: str) -> tuple[str, str]:
        base_p99 = p99_interval([b for b in blocks if b.config == 0])[0]
        best_p99 = p99_interval([b for b in blocks if b.config == 1])[0]
        change = f"{change_text(c)} with {label}, against the baseline"
        if self.max_p99 is not None:
            meets_best = math.isfinite(best_p99) and best_p99 <= self.max_p99
            meets_base = math.isfinite(base_p99) and base_p99 <= self.max_p99
            if meets_best and not meets_base and math.isfinite(base_p99):
                return BETTER, (f"{change}; p99 {best_p99:.3g} ms meets the {self.max_p99:g} ms limit where the "
                                f"baseline's {base_p99:.3g} ms does not")
            if not math.isfinite(best_p99):
                runs = sum(b.runs for b in blocks if b.config == 1)
                return NOT_MEASURED, (f"not measured: {label}'s p99 over its {runs} runs when verified is not "
                                      f"resolved (a p99 needs {runs_needed('p99')}), so the {self.max_p99:g} ms "
                                      "limit cannot be checked: keep the baseline for now")
            if not meets_best:
                return KEEP, (f"no detectable gain: keep the baseline (the best candidate's p99 {best_p99:.3g} ms "
                              f"does not meet {self.max_p99:g} ms when verified)")
        if c.verdict == "faster":
            return BETTER, change
        if c.verdict == "slower":
            return KEEP, f"no detectable gain: keep the baseline (verified, {label} was worse: {change_text(c)})"
        return KEEP, f"no detectable gain: keep the baseline (verified, {label}: {change_text(c)})"


def relabel(b: Block, config: int) -> Block:
    from dataclasses import replace

    return replace(b, config=config)
