"""``ortop tune MODEL``: find the session settings that serve an objective best, and say how sure that is.

    ortop tune MODEL [--budget 60] [--objective p50|p99|throughput|cpu] [--max-p99 MS] [--space threads,spinning,…]
                     [--save FILE] [--json] [--profile PROFILE] [workload and input flags]

Candidates race against the incumbent in interleaved blocks inside one worker (see :mod:`ortop.engine.answers.tuner`);
the winner is verified against the start profile, and "no detectable gain: keep the baseline" is a result too.
"Not measured" is not: when no candidate could be raced in the budget (a slow model's rung needs more time than
was left), or the best could not be verified, the result says so, with the baseline's own figures and the budget
an answer needs, and nothing is saved as best. Progress goes to stderr (a live bar and leaderboard on a terminal,
one line per step otherwise); the result goes to stdout, as text or, with ``--json``, as one JSON object and
nothing else, whatever the verdict: the same inputs give the same exit code either way.

Exit codes: 0 with a result (keeping the baseline included), 6 when the budget gave no answer ("not measured":
nothing raced or the best unverified, or with ``--objective capacity`` the baseline meets the SLO at no rate; the
result is printed all the same), 2 for bad input (one ``ortop: error:`` line), 1 when the model fails at run time,
4 when a worker was lost while only proven sessions raced (the result so far is printed, with the fault), 130 when
ctrl-C stopped the search (the result so far is printed, and saved with ``--save``; a second ctrl-C aborts
without one).

Over ~500 lines: the command's flags and their checks, its progress line and its result in words all speak of one
result object; the method itself lives in :mod:`ortop.engine.answers.tuner`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ortop.cli.argtypes import milliseconds, seconds
from ortop.cli.flags import BUDGET_WALL, add_budget_arg, add_json, add_workload_args, apply_flags
from ortop.cli.stopping import stop_on_signals
from ortop.errors import EXIT_GATE_UNDECIDED, EXIT_OK, EXIT_WORKER_LOST, UsageError

EXIT_INTERRUPTED = 130  # stopped by ctrl-C: the result so far was printed
EXIT_NOT_MEASURED = EXIT_GATE_UNDECIDED  # the budget gave no answer: the result says what one needs
NOT_MEASURED = "not measured"  # ortop.engine.answers.trials.NOT_MEASURED (the CLI reads the engine through its face)
NO_RATE = "no rate meets the SLO"  # ortop.engine.answers.tuner.NO_RATE: a no_race decided, a result (exit 0)

EXAMPLES = """examples:
  ortop tune model.onnx                                   lowest p50, 60 s
  ortop tune model.onnx --objective cpu --max-p99 5       least CPU per run with p99 <= 5 ms
  ortop tune model.onnx --objective throughput --max-p99 20 --concurrency 4
  ortop tune model.onnx --rate 6 --objective cpu --save paced.toml
  ortop tune model.onnx --budget 300 --space threads,spinning --profile serving.toml --report tune.html
"""


def prepare_parser(p: argparse.ArgumentParser) -> None:
    from ortop.engine import DIMENSIONS, NOT_DEFAULT, OBJECTIVES

    p.add_argument("model", metavar="MODEL", help="the .onnx model")
    add_budget_arg(p, 60.0, BUDGET_WALL, kind=seconds)
    p.add_argument("--objective", choices=(*OBJECTIVES, "capacity"), default="p50",
                   help="what to optimise: p50/p99 latency, throughput, CPU per run, or capacity within --slo "
                        "(default p50)")
    p.add_argument("--slo", metavar="METRIC=LIMIT",
                   help="with --objective capacity: the SLO, p99=50ms or p50=10ms (see ortop capacity)")
    p.add_argument("--max-p99", type=milliseconds, metavar="MS", help="constraint: p99 latency at most MS milliseconds")
    p.add_argument("--space", metavar="DIM,…",
                   help=f"dimensions to search (default: all that apply but {', '.join(sorted(NOT_DEFAULT))}): "
                        f"{', '.join(DIMENSIONS)}")
    p.add_argument("--save", metavar="FILE", help="write the best profile to FILE (TOML), with what was measured")
    add_json(p, "print only the result as JSON on stdout")
    p.add_argument("--report", metavar="FILE",
                   help="also write a self-contained HTML page to FILE: the leaderboard, a forest plot of the "
                        "candidates' changes, the host and the profiles")
    p.add_argument("--profile", metavar="PROFILE", help="start from this profile (a TOML path or a profile name)")
    add_workload_args(p)


# ---- input --------------------------------------------------------------------------------------------------------
def start_profile(args: argparse.Namespace, model_path: str) -> Any:
    """The start profile (the baseline): ``--profile`` or the defaults, with the flags on top; and the model path
    the profile itself named (kept in a saved profile)."""
    from ortop.config import profile as P
    from ortop.config.files import resolve_profile

    prof = P.load(resolve_profile(args.profile)) if args.profile else P.Profile()
    return apply_flags(prof, args, model_path), prof.model


def _check_args(args: argparse.Namespace) -> list[str] | None:
    if args.space is None:
        return None
    dims = [d.strip() for d in args.space.split(",") if d.strip()]
    if not dims:
        raise UsageError("--space is empty: name one or more dimensions, e.g. --space threads,spinning")
    return dims


def _kept(args: argparse.Namespace, model_path: str) -> tuple[str, ...]:
    """The files a report must never be written over: the model and the start profile."""
    from ortop.config.files import resolve_profile

    return (model_path, *([str(resolve_profile(args.profile))] if args.profile else []))


def _check_feeds(info: Any, profile: Any) -> None:
    """Refuse (ProfileError / ModelError) a start profile that is invalid or cannot feed the model."""
    from ortop.engine import check_profile

    check_profile(info, profile)


KNEE_SHARE = 0.25   # of the budget, for finding the baseline's capacity
KNEE_RATE = 0.9     # candidates race at this share of it
KNEE_POINTS = 4     # points a capacity search typically decides on, each near the knee (~0.7 × the ceiling)


def knee_needs_s(ceiling_per_s: float, runs_needed: int) -> float | None:
    """About the seconds a capacity search needs at a model's pace: a closed loop that holds the SLO metric's runs,
    then KNEE_POINTS points that each hold its requests at about 0.7 × the closed loop's ceiling; None unmeasured.
    At ten runs a second and a p99 (100 requests a point) that is about 50 s."""
    if not ceiling_per_s > 0 or not math.isfinite(ceiling_per_s):
        return None
    return runs_needed / ceiling_per_s + KNEE_POINTS * runs_needed / (0.7 * ceiling_per_s)


def _at_the_knee(args: argparse.Namespace, model_path: str, profile: Any) -> tuple[Any, str, dict[str, Any], str]:
    """``--objective capacity``: find the baseline's capacity within the SLO (a quarter of the budget), then race the
    candidates on the SLO's percentile under Poisson arrivals at 90 % of it. Returns the profile to race, the
    percentile, what the capacity search found (for the JSON), and why nothing is to be raced ("" when there is a
    knee): a baseline that meets the SLO at no rate is a result ("not measured"), not a failure.

    Why not race capacities themselves: each would need a search of its own (a dozen points), so a budget fits a
    handful of candidates at most. Near the knee the percentile rises steeply with load, so a candidate that lowers
    it there is one that moves the knee right: the ranking is the same, and the tuner's interleaved race decides it
    in seconds per candidate.
    """
    from ortop.config import profile as P
    from ortop.engine import find_capacity
    from ortop.measure.slo import parse_slo

    if not args.slo:
        raise UsageError("--objective capacity needs --slo, e.g. --slo p99=50ms")
    slo = parse_slo(args.slo)
    if slo.metric not in ("p50", "p99"):
        raise UsageError(f"--objective capacity races on p50 or p99; --slo {args.slo} names {slo.metric}")
    budget = max(15.0, KNEE_SHARE * args.budget)
    found = find_capacity(model_path, [profile], slo, budget_s=budget, names=["baseline"])
    base = found.searches[0]
    knee: dict[str, Any] = {"slo": slo.text(), "met": base.met, "elapsed_s": round(found.elapsed_s, 2),
                            "bracket_per_s": [base.lo, base.hi if math.isfinite(base.hi) else None]}
    if not base.met:
        why = base.note or base.failed or "see ortop capacity"
        outcome = base.outcome(slo)
        knee["result"] = outcome
        if outcome == "no rate meets":  # decided (the no-load interval lies above the SLO): a result, not a gap
            no_race = f"{NO_RATE}: the baseline meets {slo.text()} at no rate here ({why}); nothing to race at its knee"
        else:
            no_race = f"the baseline's knee under {slo.text()} was not found ({outcome}: {why}): nothing to race at it"
            need = knee_needs_s(base.ceiling_per_s, slo.runs_needed())
            if need is not None and need > budget:  # said in requests: the knee's points could not hold them
                more = math.ceil(need / KNEE_SHARE / 10) * 10
                knee["needs_s"], knee["needs_budget_s"] = round(need), more
                no_race += (f"; at this model's pace ({base.ceiling_per_s:.3g} runs/s) a knee needs about {need:.0f} s "
                            f"of the {budget:.0f} s it had: --budget {more:.0f} would find it")
        knee["note"] = no_race
        print(f"ortop tune: {no_race}", file=sys.stderr)
        return profile, slo.metric, knee, no_race
    rate = KNEE_RATE * base.lo
    knee.update(capacity_per_s=round(base.capacity(slo), 3), rate_per_s=round(rate, 3))
    print(f"ortop tune: the baseline serves {base.capacity(slo):.3g}/s within {slo.text()} (bracket {base.lo:.3g}…"
          f"{base.hi:.3g}/s, {found.elapsed_s:.0f} s); racing on {slo.metric} under Poisson arrivals at "
          f"{rate:.3g}/s", file=sys.stderr)
    raced = P.merge(profile, **{"workload.arrival": "poisson", "workload.rate_hz": round(rate, 1)})
    return raced, slo.metric, knee, ""


# ---- the host line ------------------------------------------------------------------------------------------------
def gpu_names() -> list[str]:
    """Names of the NVIDIA GPUs NVML reports ([] without a GPU or a driver)."""
    try:
        from ortop.collectors.gpu import make_gpu_collector

        collector = make_gpu_collector()
        try:
            return [d.name for d in collector.sample().devices]
        finally:
            collector.close()
    except Exception:
        return []


def objective_text(objective: str, max_p99: float | None) -> str:
    from ortop.engine import OBJECTIVE_TEXT

    text = OBJECTIVE_TEXT[objective]
    return f"{text} with p99 ≤ {max_p99:g} ms" if max_p99 is not None else text


def workload_text(profile: Any) -> str:
    w = profile.workload
    parts = [f"paced at {w.rate_hz:g} Hz" if w.rate_hz > 0 else "closed loop"]
    if w.concurrency > 1:
        parts.append(f"{w.concurrency} concurrent callers")
    parts.append(f"provider {profile.provider.name}")
    return ", ".join(parts)


def runs_text(d: dict[str, Any]) -> str:
    """How many runs a profile's figures come from: ``over 240 runs pooled from 48 blocks``."""
    runs, blocks = d.get("runs") or 0, d.get("blocks") or 0
    if not blocks:
        return "not measured"
    return f"over {runs} run{'s' if runs != 1 else ''} pooled from {blocks} block{'s' if blocks != 1 else ''}"


def not_raced(result: Any) -> int:
    """Candidates never raced: left out for lack of time (listed, or built and then left out), or by a stop."""
    return len(result.not_tried) + sum(not t.raced and t.status != "failed" for t in result.trials)


def save_description(result: Any, model_path: str) -> str:
    """What ``profiles list`` shows for a saved result whose start profile had no description of its own."""
    c = result.comparison
    gain = (f"{c.change_pct:+.1f} % against the start profile" if result.verdict == "better" and c is not None
            else "no gain found: the start profile" if any(t.raced for t in result.trials)
            else "nothing raced: the start profile")
    what = objective_text(result.objective, result.max_p99_ms)
    return f"ortop tune on {os.path.basename(model_path)}: {what}, {gain}"


def save_header(result: Any, model_path: str, host: Any, gpus: list[str], when: _dt.datetime) -> str:
    """The saved profile's header comment: what was measured, where, when, and with what confidence."""
    c = result.comparison
    if result.verdict == "better" and c is not None:
        what = {"p50": "p50 latency", "p99": "p99 latency", "throughput": "throughput",
                "cpu": "CPU per run"}[result.objective]
        gain = (f"gain: {what} {c.change_pct:+.1f} % (95 % CI {c.ci_low_pct:+.1f}…{c.ci_high_pct:+.1f} %) against "
                f"the start profile, from {c.pairs} pairs of interleaved blocks")
    elif any(t.raced for t in result.trials):
        gain = "gain: none detected; this is the start profile (keep the baseline)"
    else:
        gain = "gain: none measured (no candidate raced); this is the start profile"
    raced = sum(t.raced for t in result.trials)
    failed = sum(t.status == "failed" for t in result.trials)
    lines = [
        f"ortop tune result for {os.path.basename(model_path)}",
        f"host: {host.describe()}; GPU: {', '.join(gpus) if gpus else 'none'}",
        f"date: {when.strftime('%Y-%m-%d %H:%M %Z').strip()}",
        f"objective: {objective_text(result.objective, result.max_p99_ms)}; workload: {workload_text(result.best)}",
        gain,
        f"verdict: {result.text}",
        f"search: {raced} candidates raced, {failed} failed, {not_raced(result)} not raced, budget "
        f"{result.budget_s:g} s "
        f"(took {result.elapsed_s:.1f} s{_ended(result, ', stopped by the user')}); "
        f"space: {', '.join(result.dimensions) or 'none'}",
    ]
    return "\n".join(lines)


# ---- progress -----------------------------------------------------------------------------------------------------
@dataclass
class _Display:
    """A rich renderable: the budget bar, the phase and the leaderboard (rows swapped in whole by events)."""

    budget: float
    clock: Any
    t0: float
    objective: str
    phase: str = "starting"
    rows: list[tuple[str, ...]] = field(default_factory=list)

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        from ortop.engine import LEADERBOARD_COLUMNS

        elapsed = min(self.clock() - self.t0, self.budget)
        head = Text(f"ortop tune — {self.phase} — {elapsed:.0f}/{self.budget:g} s")
        bar = ProgressBar(total=self.budget, completed=elapsed, width=60)
        table = Table(title=f"{self.objective}: change against the incumbent, % (lower is better"
                      f"{', higher for throughput' if self.objective == 'throughput' else ''})",
                      title_justify="left", expand=False)
        for col in LEADERBOARD_COLUMNS:
            table.add_column(col, overflow="fold", no_wrap=col != "verdict / reason")
        for row in self.rows[:18]:
            style = {"winner": "bold green", "dropped": "dim", "failed": "red"}.get(row[2], "")
            table.add_row(*[r[:70] for r in row], style=style)
        if len(self.rows) > 18:
            table.add_row(f"… {len(self.rows) - 18} more", "", "", "", "", "", "")
        return Group(head, bar, table)


class Progress:
    """Progress on stderr: a live display on a terminal, one line per step otherwise."""

    def __init__(self, budget: float, objective: str, clock: Any, t0: float, live: bool):
        self.live = None
        self.display = _Display(budget, clock, t0, objective)
        self.t0 = t0
        self.clock = clock
        self._last = ""
        if live:
            try:
                from rich.console import Console
                from rich.live import Live
            except ImportError:  # without rich: the plain lines
                return
            self.live = Live(self.display, console=Console(stderr=True), refresh_per_second=4, transient=False)
            self.live.start()

    def __call__(self, kind: str, tuner: Any) -> None:
        from ortop.engine import leaderboard_rows

        self.display.phase = tuner.phase
        self.display.rows = leaderboard_rows(tuner.trials)
        if self.live is not None:
            return
        if kind in ("stage", "verify", "start"):
            line = f"[{self.clock() - self.t0:5.1f} s] {tuner.phase}"
            if line != self._last:
                print(line, file=sys.stderr, flush=True)
                self._last = line

    def note(self, line: str) -> None:
        """A line for the user (on the live display's phase line, or on its own line)."""
        self.display.phase = line
        if self.live is None:
            print(f"[{self.clock() - self.t0:5.1f} s] {line}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()


# ---- output -------------------------------------------------------------------------------------------------------
def format_result(result: Any, model_path: str, saved: str | None, not_saved: str = "") -> str:
    """The result as text: the baseline's figures with their runs, the candidates (raced, failed, not raced and
    why), the verdict and what was saved. A row reads "winner" only when the verdict names it."""
    from ortop.engine import figures_text, trial_cells

    d = result.as_dict()
    lines = [f"ortop tune {os.path.basename(model_path)}: {objective_text(result.objective, result.max_p99_ms)} "
             f"(budget {result.budget_s:g} s, took {result.elapsed_s:.1f} s"
             f"{_ended(result, '; stopped by ctrl-C, these are the figures so far')})",
             f"baseline: {figures_text(d['baseline'])} — {runs_text(d['baseline'])}"]
    if result.baseline_pace():
        lines.append(f"   the baseline's {result.baseline_pace()}: its figures are not a paced answer")
    raced = sum(t.raced for t in result.trials)
    failed = sum(t.status == "failed" for t in result.trials)
    lines.append(f"candidates: {raced} raced, {failed} failed, {not_raced(result)} not raced")
    for t in result.trials:
        if not t.raced and t.status != "failed":
            continue  # said with the ones not raced, below
        label, _, status, change, ci, pairs, what = trial_cells(t, result)  # the table's own cells
        said = f"{change} % (95 % CI {ci} %, {pairs} pairs)" if ci else f"{change} % ({pairs} pairs)" if change \
            else ""
        said = "; ".join(x for x in (said, what) if x)
        lines.append(f" {'*' if status == 'winner' else ' '} {label:<40} {status:<8} {said}")
    groups: dict[str, list[str]] = {}  # why -> the dimension of each candidate left out for it
    for c, why in result.not_tried:
        groups.setdefault(why.removeprefix("not raced: "), []).append(c.stage)
    for t in result.trials:
        if not t.raced and t.status != "failed":
            groups.setdefault(t.reason.removeprefix("not raced: "), []).append(t.candidate.stage)
    for why, stages in groups.items():
        n = len(stages)
        lines.append(f"   not raced: {', '.join(dict.fromkeys(stages))} ({n} candidate{'s' if n != 1 else ''}): "
                     f"{why}")
    for note in result.pruned:
        lines.append(f"   pruned {note}")
    if result.verdict == "better":
        lines.append(f"best: {', '.join(d['best'].get('changes') or [])}")
        lines.append(f"      {figures_text(d['best'])} — {runs_text(d['best'])}")
    lines.append(f"verdict: {result.text}")
    if saved:
        lines.append(f"saved: {saved}")
    elif not_saved:
        lines.append(f"not saved: {not_saved}")
    return "\n".join(lines)


# ---- the command --------------------------------------------------------------------------------------------------
def tune_main(argv: Sequence[str]) -> int:
    """``ortop tune …``: returns the exit code (0 result, 6 no answer in the budget, 2 bad input, 1 run-time
    failure, 4 a worker lost, 130 ctrl-C)."""
    from ortop.cli.main import main

    return main(["tune", *argv])


def run(args: argparse.Namespace) -> int:
    clock = time.monotonic
    t0 = getattr(args, "started", None) or clock()  # the budget counts from the command's start
    dims = _check_args(args)

    from ortop import fsutil
    from ortop import model as model_mod
    from ortop.collectors.host import read_host
    from ortop.engine import build_tuner

    model_path = os.path.abspath(args.model)
    info = model_mod.load_model(model_path)
    profile, profile_model = start_profile(args, model_path)
    _check_feeds(info, profile)
    if args.report:  # an unwritable report is found now, before anything is measured
        from ortop.report import check_report

        if args.save and os.path.realpath(args.save) == os.path.realpath(args.report):
            raise UsageError(f"--report and --save name the same file ({args.report}): give each its own")
        check_report(args.report, protect=_kept(args, model_path))
    knee: dict[str, Any] | None = None
    no_race = ""
    if args.objective == "capacity":  # the budget still counts from t0
        profile, args.objective, knee, no_race = _at_the_knee(args, model_path, profile)
    if args.save:
        fsutil.check_writable(args.save, protect=[model_path], what="profile")
    host = read_host()
    gpus = gpu_names()  # before the clock's deadline is set against the rest of the run
    stop = threading.Event()
    try:
        tuner, racer = build_tuner(model_path, profile, objective=args.objective, max_p99_ms=args.max_p99,
                                   budget_s=args.budget, dims=dims, stop=stop, clock=clock, started=t0, info=info,
                                   host=host, no_race=no_race)
    except ValueError as exc:
        raise UsageError(f"--space: {exc}") from None
    progress = Progress(args.budget, args.objective, clock, t0, live=sys.stderr.isatty())
    tuner.on_event = progress  # set once the space is known good: a refused --space leaves no live display behind

    def stopping() -> None:
        progress.note("stopping: the result so far follows (ctrl-C again aborts)")

    try:
        # Ctrl-C once: the search stops where it is and the result so far is printed (and saved), exit 130.
        # Ctrl-C twice: abort at once, nothing printed. SIGTERM keeps its default.
        with stop_on_signals(stop, signals=(signal.SIGINT,), second_aborts=True, on_stop=stopping):
            result = tuner.run()
    finally:
        progress.close()
    result.host = {**host.as_dict(), "gpus": gpus}
    for w in racer.warnings[:5]:
        print(f"ortop: warning: {w}", file=sys.stderr)
    saved, not_saved = _save(args, result, model_path, profile_model, host, gpus)
    code = exit_code(result)
    out = result.as_dict()
    out.update(model=model_path, saved=saved, not_saved=not_saved or None, exit_code=code)
    if knee is not None:
        out["knee"] = knee
    base_pace = result.baseline_pace()
    out["warnings"] = [*racer.warnings,
                       *([f"baseline: {base_pace}; its figures are not a paced answer"] if base_pace else []),
                       *(f"{t.label}: {t.pace()}; its verdict is not a paced answer"
                         for t in result.trials if t.pace())]
    if args.json:
        import json

        print(json.dumps(out, indent=2, ensure_ascii=False), flush=True)
    else:
        print(format_result(result, model_path, saved, not_saved), flush=True)
    if args.report:  # after the result is printed: a report that fails to write loses nothing
        from ortop.report import tune_page, write_report

        write_report(args.report, tune_page(out), protect=_kept(args, model_path))
    return code


def _save(args: argparse.Namespace, result: Any, model_path: str, profile_model: str | None, host: Any,
          gpus: Any) -> tuple[str | None, str]:
    """Write the best profile to ``--save`` (with the search's header); a search that measured nothing writes
    nothing and says why. Returns (the path written or None, why not)."""
    from ortop import fsutil

    if not args.save:
        return None, ""
    if result.verdict == NOT_MEASURED:
        return None, (f"{args.save} was not written: the search gave no answer to save "
                      f"({result.text.split(': ')[0]}), and a saved profile claims what was measured")
    from dataclasses import replace

    best = replace(result.best, model=profile_model or "",
                   description=result.best.description or save_description(result, model_path))
    header = save_header(result, model_path, host, gpus, _dt.datetime.now(_dt.timezone.utc))
    fsutil.write_text(args.save, best.to_toml(header=header), protect=[model_path], what="profile")
    return args.save, ""


def exit_code(result: Any) -> int:
    """A result's exit code, the same with and without ``--json``: 4 a worker lost, 130 stopped, 6 no answer in
    the budget ("not measured"), else 0."""
    if result.fault:
        return EXIT_WORKER_LOST
    if result.stopped:
        return EXIT_INTERRUPTED
    return EXIT_NOT_MEASURED if result.verdict == NOT_MEASURED else EXIT_OK


def _ended(result: Any, stopped: str) -> str:
    """How the search ended early, said after its time: a worker lost for good, or ``stopped`` (ctrl-C)."""
    if result.fault:
        return f"; a worker was lost for good ({result.fault}): these are the figures so far"
    return stopped if result.stopped else ""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(tune_main(sys.argv[1:]))
