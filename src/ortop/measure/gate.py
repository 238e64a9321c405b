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
      decides nothing either way.

    ``overall``: fail if any gate fails, pass only if every gate passes, else undecided.

Exit codes (``EXIT_PASS``, ``EXIT_FAIL``, ``EXIT_UNDECIDED``)
    pass 0, fail 5, undecided 6. Undecided is never a pass: a gate that cannot see a regression has not shown
    there is none, and a CI step that exits 0 on "could not tell" would let every regression through on a noisy
    runner. It is not a fail either: a pipeline may retry it, or treat it as a warning, by its exit code. The codes
    sit above ortop's usage (2), findings (3) and lost-worker (4) codes, so "the gate failed" is never mistaken
    for "the command was wrong".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ortop.errors import EXIT_GATE_FAILED, EXIT_GATE_UNDECIDED, EXIT_OK

EXIT_PASS = EXIT_OK
EXIT_FAIL = EXIT_GATE_FAILED          # 5: a gate's whole interval is beyond its threshold: a regression shown
EXIT_UNDECIDED = EXIT_GATE_UNDECIDED  # 6: no gate failed but one could not tell: never a pass

GATE_METRICS = ("p50", "p99", "throughput", "cpu")
HIGHER_IS_BETTER = frozenset({"throughput"})
FORMS = "p50:+X%, p99:+X%, cpu:+X% (a rise is worse) or throughput:-X% (a fall is worse), e.g. p99:+5%"

Result = Literal["pass", "fail", "undecided"]
_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "undecided": EXIT_UNDECIDED}
_SPEC = re.compile(r"\s*([A-Za-z0-9_]+)\s*:\s*([+-])\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*")
_MINUS = "\u2212"


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
    """Fail if any gate fails; pass only if every gate passes (no gates: nothing can fail, pass); else undecided."""
    if "fail" in judgements:
        return "fail"
    return "pass" if all(j == "pass" for j in judgements) else "undecided"


def exit_code(result: Result) -> int:
    """The process exit code for an overall result: pass 0, fail 5, undecided 6."""
    return _EXIT[result]


@dataclass(frozen=True)
class GateResult:
    """One gate judged on one comparison's change and interval."""

    gate: Gate
    change_pct: float     # the estimate of the change NEW vs BASE, %
    ci_low_pct: float
    ci_high_pct: float
    result: Result

    def interval_text(self) -> str:
        """``−0.8 % … +3.1 %``, or ``no interval yet``."""
        if not (math.isfinite(self.ci_low_pct) and math.isfinite(self.ci_high_pct)):
            return "no interval yet"
        return f"{pct_text(self.ci_low_pct)} \u2026 {pct_text(self.ci_high_pct)}"

    def threshold_text(self) -> str:
        """What fails it: ``> +5.0 %`` (a rise is worse), ``< −5.0 %`` (a fall is)."""
        return f"{'<' if self.gate.metric in HIGHER_IS_BETTER else '>'} {pct_text(self.gate.threshold_pct)}"

    def as_dict(self) -> dict:
        def num(x: float) -> float | None:
            return round(float(x), 2) if x is not None and math.isfinite(x) else None

        return {"metric": self.gate.metric, "threshold_pct": self.gate.threshold_pct, "spec": self.gate.spec,
                "change_pct": num(self.change_pct), "ci_low_pct": num(self.ci_low_pct),
                "ci_high_pct": num(self.ci_high_pct), "result": self.result}


def evaluate_all(gates: Sequence[Gate], comparisons: Sequence[Any]) -> tuple[GateResult, ...]:
    """Each gate judged on the comparison of its metric (anything with ``metric``, ``change_pct``, ``ci_low_pct`` and
    ``ci_high_pct``, such as :class:`ortop.measure.compare.Comparison`, of NEW against BASE); undecided, with no
    interval, for a metric none of them has."""
    by_metric = {c.metric: c for c in comparisons}
    nan = float("nan")
    return tuple(evaluate(g, by_metric[g.metric].change_pct, by_metric[g.metric].ci_low_pct,
                          by_metric[g.metric].ci_high_pct) if g.metric in by_metric else evaluate(g, nan, nan, nan)
                 for g in gates)


def evaluate(spec: Gate | str, change_pct: float, ci_low_pct: float, ci_high_pct: float) -> GateResult:
    """:func:`judge`, kept with the numbers it was judged on (for the report and the markdown summary)."""
    gate = _as_gate(spec)
    return GateResult(gate, change_pct, ci_low_pct, ci_high_pct, judge(gate, ci_low_pct, ci_high_pct))


def pct_text(x: float) -> str:
    """A change in %, as the gates' tables print it: ``+1.2 %``, ``−12 %`` (a true minus), ``?`` when unknown."""
    if x is None or not math.isfinite(x):
        return "?"
    return (f"{x:+.0f}" if abs(x) >= 10 else f"{x:+.1f}").replace("-", _MINUS) + " %"


_MARK = {"pass": "pass", "fail": "**FAIL**", "undecided": "undecided"}


def summary_markdown(results: Sequence[GateResult], *, confidence: float = 0.95, title: str = "ortop gates",
                     note: str = "", code: int | None = None) -> str:
    """A short markdown table (metric, change, interval, threshold, result) and the overall result with its exit
    code, for ``--summary-md`` (a CI job summary). ``note``: why the result is undecided when the intervals alone do
    not say (a lost worker, a rate not kept), said in place of the usual reason; ``code``: the exit code when it is
    not the result's own (a lost worker's 4)."""
    verdict = overall([r.result for r in results])
    lines = [f"### {title}: {verdict}", "",
             f"| metric | change | {confidence * 100:g} % interval | fail if | result |",
             "| --- | ---: | ---: | ---: | --- |"]
    for r in results:
        lines.append(f"| {r.gate.metric} | {pct_text(r.change_pct)} | {r.interval_text()} | {r.threshold_text()} "
                     f"| {_MARK[r.result]} |")
    if not results:
        lines.append("| (no gates) | | | | pass |")
    reason = note or {"pass": "every interval lies on the good side of its threshold",
                      "fail": "an interval lies wholly beyond its threshold",
                      "undecided": "an interval straddles its threshold: more pairs or a quieter host would decide; "
                                   "undecided is not a pass"}[verdict]
    lines += ["", f"Exit {exit_code(verdict) if code is None else code}: {reason}."]
    return "\n".join(lines) + "\n"
