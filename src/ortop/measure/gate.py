"""CI gates on a comparison: ``--fail-if p99:+5%`` fails a build only when the data show the regression.

What a gate is
    ``METRIC:±X%`` names a metric of the comparison (p50, p99, throughput, cpu: CPU ms per run) and how much worse
    NEW may be than BASE before the build fails. The sign says which way is worse, and must agree with the metric:
    a rise for latency and CPU (``p99:+5%``), a fall for throughput (``throughput:-5%``). A sign pointing the
    better way (``p99:-5%``: "fail if p99 improves by 5 %") is almost always a typo for the other, so it is refused
    rather than read as written; so is an unknown metric, with the forms that are valid.

Why a test on the interval, not on the estimate
    The comparison gives the change NEW vs BASE with a confidence interval (:mod:`ortop.measure.compare`: paired
    blocks, so the host's drift is in the interval's width, not in the estimate). A gate on the point estimate
    alone fails a good build whenever noise pushes the estimate past the threshold, and on a shared CI runner that
    is often: run-to-run noise of ±10 % dwarfs a 5 % threshold. So each gate is a non-inferiority test:

    * **pass** once the whole interval lies on the good side of the threshold (p99: high < +5 %): the data show
      the change is smaller than the tolerated regression, at the interval's confidence;
    * **fail** once the whole interval lies beyond it (p99: low > +5 %): the data show a regression larger than
      tolerated;
    * **undecided** while the interval straddles the threshold (or there is no interval yet): the measurement
      cannot tell, and needs more pairs, a quieter runner or a wider threshold. A point on the threshold itself
      decides nothing either way;
    * **not judged** when what was measured cannot give the metric an interval at all (below).

    ``overall``: fail if any gate fails, pass only if every gate passes, else undecided (a gate not judged
    included).

Judged on blocks that hold the metric (``judge_blocks``)
    A block's p99 is a percentile of its own runs, and a p99 needs 100 runs (:func:`ortop.measure.stats.
    runs_needed`): on a model that runs ten times a second a block of 0.4 s holds three, and its "p99" is its
    slowest run. A gate judged on such blocks judges another metric under the gate's name. So each gate is judged
    on blocks that hold its metric: the comparison makes its blocks long enough where the budget allows
    (:mod:`ortop.engine.bench.ab`); where they still fall short, neighbouring pairs are pooled whole
    (:func:`ortop.measure.compare.pooled_pairs`: BASE's blocks of pairs k … k+m against NEW's blocks of the same
    pairs) until each side holds the runs, and the gate is judged on the pooled pairs' interval, saying so
    (``Basis``). Where even pooling gives too few pairs for an interval, the gate is **not judged**: it has no
    interval of its metric at all, which is not a pass, and the overall result is undecided (exit 6), with the
    budget that would judge it.

Exit codes (``EXIT_PASS``, ``EXIT_FAIL``, ``EXIT_UNDECIDED``)
    pass 0, fail 5, undecided 6 (a gate not judged, too). Undecided is never a pass: a gate that cannot see a
    regression has not shown there is none, and a CI step that exits 0 on "could not tell" would let every
    regression through on a noisy runner. It is not a fail either: a pipeline may retry it, or treat it as a
    warning, by its exit code. The codes sit above ortop's usage (2), findings (3) and lost-worker (4) codes, so
    "the gate failed" is never mistaken for "the command was wrong".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from ortop.errors import EXIT_GATE_FAILED, EXIT_GATE_UNDECIDED, EXIT_OK
from ortop.measure.compare import Block, Comparison, compare, pool_groups, pooled_pairs, usable_pairs
from ortop.measure.stats import QUANTILE, json_num, runs_needed
from ortop.present import change_pct

EXIT_PASS = EXIT_OK
EXIT_FAIL = EXIT_GATE_FAILED          # 5: a gate's whole interval is beyond its threshold: a regression shown
EXIT_UNDECIDED = EXIT_GATE_UNDECIDED  # 6: no gate failed but one could not tell: never a pass

GATE_METRICS = ("p50", "p99", "throughput", "cpu")
HIGHER_IS_BETTER = frozenset({"throughput"})
FORMS = "p50:+X%, p99:+X%, cpu:+X% (a rise is worse) or throughput:-X% (a fall is worse), e.g. p99:+5%"

Result = Literal["pass", "fail", "undecided", "not judged"]
# not judged: the metric could not be read from what was measured; like undecided, never a pass
_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "undecided": EXIT_UNDECIDED, "not judged": EXIT_UNDECIDED}
JUDGE_PAIRS = 8  # pooled pairs a budget estimate plans for: the sequential rule's first look
_SPEC = re.compile(r"\s*([A-Za-z0-9_]+)\s*:\s*([+-])\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*")


@dataclass(frozen=True)
class Gate:
    """One ``--fail-if`` spec: fail when ``metric`` is worse than BASE by more than ``threshold_pct`` (signed the
    way that is worse: +5 for p99, −5 for throughput)."""

    metric: str
    threshold_pct: float

    @property
    def spec(self) -> str:
        return f"{self.metric}:{self.threshold_pct:+g}%"


def parse_gate(spec: str) -> Gate:
    """``"p99:+5%"`` → ``Gate("p99", 5.0)``; ``"throughput:-5%"`` → ``Gate("throughput", -5.0)``. A ValueError
    naming the valid forms for anything else, a sign pointing the better way included."""
    m = _SPEC.fullmatch(spec)
    if not m:
        raise ValueError(f"--fail-if {spec!r}: expected METRIC:±X%; valid forms: {FORMS}")
    metric, sign, number = m[1].lower(), m[2], float(m[3])
    if metric not in GATE_METRICS:
        raise ValueError(f"--fail-if {spec!r}: unknown metric {m[1]!r}; valid forms: {FORMS}")
    worse = "-" if metric in HIGHER_IS_BETTER else "+"
    if sign != worse:
        better = "a fall" if worse == "+" else "a rise"
        raise ValueError(f"--fail-if {spec!r}: {better} in {metric} is an improvement, not a regression; "
                         f"write {metric}:{worse}{m[3]}%. Valid forms: {FORMS}")
    return Gate(metric, number if worse == "+" else -number)


def _as_gate(spec: Gate | str) -> Gate:
    return spec if isinstance(spec, Gate) else parse_gate(spec)


def judge(spec: Gate | str, ci_low_pct: float, ci_high_pct: float) -> Result:
    """The non-inferiority test of one gate on the interval of the change NEW vs BASE, in %: pass when the whole
    interval is on the good side of the threshold, fail when it is wholly beyond it, else undecided (a missing or
    non-finite interval included)."""
    gate = _as_gate(spec)
    lo, hi = ci_low_pct, ci_high_pct
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "undecided"
    if lo > hi:
        raise ValueError(f"interval low {lo} is above its high {hi}")
    th = gate.threshold_pct
    if gate.metric in HIGHER_IS_BETTER:  # worse = lower: pass above the threshold
        return "pass" if lo > th else "fail" if hi < th else "undecided"
    return "pass" if hi < th else "fail" if lo > th else "undecided"


def overall(judgements: Sequence[Result]) -> Result:
    """Fail if any gate fails; pass only if every gate passes (no gates: nothing can fail, pass); else undecided (a
    gate not judged included)."""
    if "fail" in judgements:
        return "fail"
    return "pass" if all(j == "pass" for j in judgements) else "undecided"


def exit_code(result: Result) -> int:
    """The process exit code for an overall result: pass 0, fail 5, undecided (or not judged) 6."""
    return _EXIT[result]


def runs_for(metric: str) -> int:
    """The runs a block must hold for ``metric`` to be read from it: a percentile's :func:`runs_needed` (p50 2,
    p99 100); one run for throughput and CPU per run."""
    return runs_needed(metric) if metric in QUANTILE else 1


@dataclass(frozen=True)
class Basis:
    """What a gate's metric was judged on: the blocks as they ran, pooled neighbouring pairs, or nothing.

    ``need``: runs a block must hold (:func:`runs_for`); ``block_runs``: a typical block's runs (the median pair's
    fewer side); ``pairs``: pairs of blocks; ``pooled``: the fewest and most blocks a pooled block holds ((1, 1):
    nothing pooled); ``pooled_pairs`` and ``pooled_runs``: the pairs judged on and a typical one's runs a side;
    ``judged``: whether they gave an interval of the metric; ``budget_s``: when not, about the ``--budget`` that
    would."""

    metric: str
    need: int
    block_runs: float
    pairs: int
    pooled: tuple[int, int] = (1, 1)
    pooled_pairs: int = 0
    pooled_runs: float = math.nan
    judged: bool = True
    budget_s: float | None = None

    @property
    def short(self) -> bool:
        """Some block holds fewer runs than the metric needs: it was pooled (or could not be judged)."""
        return self.pooled != (1, 1) or not self.judged

    def blocks_text(self) -> str:
        lo, hi = self.pooled
        return f"{lo} block{'s' if lo != 1 else ''}" if lo == hi else f"{lo}\u2013{hi} blocks"

    def text(self) -> str:
        """How the metric was judged, in words (``p99 judged on pooled blocks of ~100 runs (4 blocks each, 9
        pairs)``); for a gate not judged, why and what would judge it."""
        runs = _runs_text(self.block_runs)
        if not self.judged:
            return f"{self.metric} gate: {self.reason()}: not judged{self.more()}"
        if self.pooled == (1, 1):
            return f"{self.metric} judged on blocks of {runs} runs ({self.pairs} pairs)"
        return (f"{self.metric} judged on pooled blocks of {_runs_text(self.pooled_runs)} runs "
                f"({self.blocks_text()} each, {self.pooled_pairs} pairs)")

    def reason(self) -> str:
        """Why a gate was not judged: ``blocks of ~3 runs cannot hold a p99 (needs 100 runs), and pooled into blocks
        of at least 100 runs they make 1 pair, too few for an interval``."""
        return (f"blocks of {_runs_text(self.block_runs)} runs cannot hold a {self.metric} (needs {self.need} "
                f"runs), and pooled into blocks of at least {self.need} runs they make {self.pooled_pairs} "
                f"pair{'s' if self.pooled_pairs != 1 else ''}, too few for an interval")

    def more(self) -> str:
        """What would judge a gate not judged: ``; about 150 s of --budget would judge it`` ("" when unknown)."""
        return f"; about {self.budget_s:.0f} s of --budget would judge it" if self.budget_s else ""

    def as_dict(self) -> dict[str, Any]:
        return {"needs_runs": self.need, "block_runs": _json(self.block_runs), "pairs": self.pairs,
                "pooled_blocks": list(self.pooled), "pooled_pairs": self.pooled_pairs,
                "pooled_runs": _json(self.pooled_runs), "judged": self.judged,
                "budget_s": None if self.budget_s is None else round(self.budget_s), "text": self.text()}


def _runs_text(x: float) -> str:
    return f"~{x:.0f}" if math.isfinite(x) else "?"


def _json(x: float) -> float | None:
    return round(float(x), 1) if x is not None and math.isfinite(x) else None


@dataclass(frozen=True)
class GateResult:
    """One gate judged on one comparison's change and interval (and, from :func:`judge_blocks`, the blocks it was
    judged on)."""

    gate: Gate
    change_pct: float     # the estimate of the change NEW vs BASE, %
    ci_low_pct: float
    ci_high_pct: float
    result: Result
    basis: Basis | None = None

    def interval_text(self) -> str:
        """``−0.8 % … +3.1 %``, or ``no interval yet``."""
        if not (math.isfinite(self.ci_low_pct) and math.isfinite(self.ci_high_pct)):
            return "no interval yet"
        return f"{change_pct(self.ci_low_pct)} \u2026 {change_pct(self.ci_high_pct)}"

    def threshold_text(self) -> str:
        """What fails it: ``> +5.0 %`` (a rise is worse), ``< −5.0 %`` (a fall is)."""
        return f"{'<' if self.gate.metric in HIGHER_IS_BETTER else '>'} {change_pct(self.gate.threshold_pct)}"

    def rule_text(self) -> str:
        """What passes it, named as a gate: ``gate p99 ≤ +5.0 %``, ``gate throughput ≥ −5.0 %``."""
        sign = "\u2265" if self.gate.metric in HIGHER_IS_BETTER else "\u2264"
        return f"gate {self.gate.metric} {sign} {change_pct(self.gate.threshold_pct)}"

    def verdict_text(self) -> str:
        """The result with the end of the interval that decided it: ``pass (upper end +3.1 %)``, ``FAIL (lower end
        +12 %)``, ``undecided (−2.0 % … +8.0 % straddles +5.0 %)``, ``undecided (no interval yet)``, ``not
        judged``."""
        up = self.gate.metric in HIGHER_IS_BETTER
        lo, hi = change_pct(self.ci_low_pct), change_pct(self.ci_high_pct)
        if self.result == "pass":
            return f"pass ({'lower end ' + lo if up else 'upper end ' + hi})"
        if self.result == "fail":
            return f"FAIL ({'upper end ' + hi if up else 'lower end ' + lo})"
        if self.result == "undecided":
            if not (math.isfinite(self.ci_low_pct) and math.isfinite(self.ci_high_pct)):
                return "undecided (no interval yet)"
            return f"undecided ({self.interval_text()} straddles {change_pct(self.gate.threshold_pct)})"
        return str(self.result)

    def as_dict(self) -> dict:
        return {"metric": self.gate.metric, "threshold_pct": self.gate.threshold_pct, "spec": self.gate.spec,
                "change_pct": json_num(self.change_pct, 2), "ci_low_pct": json_num(self.ci_low_pct, 2),
                "ci_high_pct": json_num(self.ci_high_pct, 2), "result": self.result,
                **({"judged_on": self.basis.as_dict()} if self.basis is not None else {})}


def evaluate_all(gates: Sequence[Gate], comparisons: Sequence[Any]) -> tuple[GateResult, ...]:
    """Each gate judged on the comparison of its metric (anything with ``metric``, ``change_pct``, ``ci_low_pct`` and
    ``ci_high_pct``, such as :class:`ortop.measure.compare.Comparison`, of NEW against BASE); undecided, with no
    interval, for a metric none of them has. Whether the comparison's blocks hold the metric is not asked here:
    :func:`judge_blocks` asks it."""
    by_metric = {c.metric: c for c in comparisons}
    nan = float("nan")
    return tuple(evaluate(g, by_metric[g.metric].change_pct, by_metric[g.metric].ci_low_pct,
                          by_metric[g.metric].ci_high_pct) if g.metric in by_metric else evaluate(g, nan, nan, nan)
                 for g in gates)


def evaluate(spec: Gate | str, change_pct: float, ci_low_pct: float, ci_high_pct: float) -> GateResult:
    """:func:`judge`, kept with the numbers it was judged on (for the report and the markdown summary)."""
    gate = _as_gate(spec)
    return GateResult(gate, change_pct, ci_low_pct, ci_high_pct, judge(gate, ci_low_pct, ci_high_pct))


def on_blocks(blocks: Sequence[Block], metric: str, *, level: float | None = None,
              comparisons: Sequence[Comparison] = (), elapsed_s: float | None = None
              ) -> tuple[Comparison | None, Basis]:
    """NEW (configuration 1) against BASE (0) on ``metric``, on blocks that hold it: the comparison's own when
    every block holds :func:`runs_for` runs (taken from ``comparisons`` when it is there, else computed at
    ``level``), else on pooled neighbouring pairs (:func:`ortop.measure.compare.pooled_pairs`); and how it was
    judged. The comparison is None when nothing could be pooled."""
    need = runs_for(metric)
    used = usable_pairs(blocks, 0, 1, metric)
    fewer = [min(a.runs, b.runs) for a, b in used]
    block_runs = float(np.median(fewer)) if fewer else math.nan
    if all(n >= need for n in fewer):
        comp = next((c for c in comparisons if c.baseline == 0 and c.other == 1 and c.metric == metric), None)
        if comp is None:
            comp = compare(blocks, 0, 1, metric, level=level, elapsed_s=elapsed_s)
        return comp, Basis(metric, need, block_runs, len(used), (1, 1), len(used), block_runs)
    groups = pool_groups([(a.runs, b.runs) for a, b in used], need)
    try:
        pooled = pooled_pairs(used, need)
    except ValueError:  # blocks summarised elsewhere, without their runs: nothing to pool
        groups, pooled = [], []
    comp = compare([b for pair in pooled for b in pair], 0, 1, metric, level=level,
                   elapsed_s=elapsed_s if elapsed_s is not None else _span(blocks)) if pooled else None
    sizes = [len(g) for g in groups]
    pooled_runs = float(np.median([min(a.runs, b.runs) for a, b in pooled])) if pooled else math.nan
    judged = comp is not None and math.isfinite(comp.ci_low_pct) and math.isfinite(comp.ci_high_pct)
    budget = None if judged else _budget_to_judge(used, need, block_runs, elapsed_s or _span(blocks))
    return comp, Basis(metric, need, block_runs, len(used), (min(sizes), max(sizes)) if sizes else (0, 0),
                       len(pooled), pooled_runs, judged, budget)


def _span(blocks: Sequence[Block]) -> float:
    return max(b.t_end for b in blocks) - min(b.t_start for b in blocks) if blocks else 0.0


def _budget_to_judge(used: Sequence[tuple[Block, Block]], need: int, block_runs: float, elapsed_s: float
                     ) -> float | None:
    """About the measuring time (s, rounded up to 10) that would give JUDGE_PAIRS pooled pairs at the pace
    measured: that many pooled blocks of whole blocks a side, each block as long as these."""
    runs = min(sum(a.runs for a, _ in used), sum(b.runs for _, b in used)) if used else 0
    if runs <= 0 or not (elapsed_s > 0) or not block_runs > 0:
        return None
    per_pool = math.ceil(need / block_runs) * block_runs  # runs a side in a pooled block of whole blocks
    return float(math.ceil(elapsed_s * JUDGE_PAIRS * per_pool / runs / 10) * 10)


def judge_blocks(gates: Sequence[Gate], blocks: Sequence[Block], *, level: float | None = None,
                 comparisons: Sequence[Comparison] = (), elapsed_s: float | None = None) -> tuple[GateResult, ...]:
    """Each gate judged on blocks that hold its metric (:func:`on_blocks`), with how (``GateResult.basis``): the
    non-inferiority test on that interval, or "not judged" where even pooling gave none. ``level``: the look's
    level the intervals are taken at; ``comparisons``: the result's own, used as they are where nothing is
    pooled."""
    nan = float("nan")
    seen: dict[str, tuple[Comparison | None, Basis]] = {}
    out = []
    for g in gates:
        if g.metric not in seen:
            seen[g.metric] = on_blocks(blocks, g.metric, level=level, comparisons=comparisons, elapsed_s=elapsed_s)
        comp, basis = seen[g.metric]
        if comp is None or not basis.judged:
            out.append(GateResult(g, nan, nan, nan, "not judged", basis))
        else:
            out.append(replace(evaluate(g, comp.change_pct, comp.ci_low_pct, comp.ci_high_pct), basis=basis))
    return tuple(out)


def not_judged_text(results: Sequence[GateResult]) -> str:
    """Why gates were not judged, one clause each ("" when every gate was)."""
    return "; ".join(r.basis.text() for r in results if r.result == "not judged" and r.basis is not None)




_MARK = {"pass": "pass", "fail": "**FAIL**", "undecided": "undecided", "not judged": "not judged"}


def summary_markdown(results: Sequence[GateResult], *, confidence: float = 0.95, title: str = "ortop gates",
                     note: str = "", code: int | None = None) -> str:
    """A short markdown table (metric, change, interval, threshold, result), how each gate whose blocks were
    short was judged (pooled, or not judged), and the overall result with its exit code, for ``--summary-md`` (a CI
    job summary). ``note``: why the result is undecided when the intervals alone do not say (a lost worker, a rate
    not kept), said in place of the usual reason; ``code``: the exit code when it is not the result's own (a lost
    worker's 4)."""
    verdict = overall([r.result for r in results])
    lines = [f"### {title}: {verdict}", "",
             f"| metric | change | {confidence * 100:g} % interval | fail if | result |",
             "| --- | ---: | ---: | ---: | --- |"]
    for r in results:
        lines.append(f"| {r.gate.metric} | {change_pct(r.change_pct)} | {r.interval_text()} | {r.threshold_text()} "
                     f"| {_MARK[r.result]} |")
    if not results:
        lines.append("| (no gates) | | | | pass |")
    short = [r.basis.text() for r in results if r.basis is not None and r.basis.short]
    if short:
        lines += [""] + [f"- {text}." for text in dict.fromkeys(short)]
    unjudged = not_judged_text(results)
    reason = note or {"pass": "every interval lies on the good side of its threshold",
                      "fail": "an interval lies wholly beyond its threshold",
                      "undecided": ("a gate was not judged, and not judged is not a pass" if unjudged else
                                    "an interval straddles its threshold: more pairs or a quieter host would "
                                    "decide; undecided is not a pass")}[verdict]
    lines += ["", f"Exit {exit_code(verdict) if code is None else code}: {reason}."]
    return "\n".join(lines) + "\n"
