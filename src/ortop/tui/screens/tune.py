"""The tune screen: ``ortop tune``'s search run from the live view, its leaderboard filling in as candidates race;
once it ends (or is stopped) any row can be applied to the live session or saved.

Before the start, o, l and b pick the objective, a p99 limit and the budget, and g starts. The search runs worker
processes of its own, so the screen asks the app to pause the live session first and to resume it once those
workers are gone, whatever ended the search; rows are applied and saved by the app too (the job screen's messages);
the screen holds no monitor.

The tuner calls back on its own thread at each step. The screen copies the rows there (the tuner is between two
steps, so the copy is whole) and posts them, never waiting for the UI: a quit while the search runs must not leave
the tuning thread blocked on an event loop that has stopped.

The screen's five states (ready, running, stopping, done, failed) and the search's thread are the job screen's
(:mod:`ortop.tui.screens.job`), shared with the capacity screen; the rows are plain functions of a trial, run on the
tuning thread (:mod:`ortop.tui.panels.tune`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from ortop.config.profile import Profile
from ortop.engine import (
    BETTER,
    LEADERBOARD_COLUMNS,
    OBJECTIVE_TEXT,
    OBJECTIVES,
    Tuner,
    TuneResult,
    describe,
    figures_text,
    profile_key,
)
from ortop.tui import actions
from ortop.tui.noload import NoLoad, slo_presets
from ortop.tui.panels._format import Cell, lead_forms, term_forms
from ortop.tui.panels.tune import STYLE, Board, Row, baseline_row, board_rows, tuner_board
from ortop.tui.screens._base import fill_table
from ortop.tui.screens.job import JobScreen, job_bindings

BUDGETS_S = (30.0, 60.0, 120.0, 300.0)
P99_LIMITS_MS: tuple[float | None, ...] = (None, 2.0, 5.0, 10.0, 20.0, 50.0)  # "least CPU with p99 ≤ 5 ms"
LIMIT_FACTORS = (1.2, 1.5, 2.0, 4.0)  # with a p99 at no load measured: these × it, rounded up to readable values
DEFAULT_BUDGET_S = 60.0
HEADER_FORMS = {"dimension": ("dimension", ""), "change %": ("change %", "Δ %"), "pairs": ("pairs", "n"),
                "verdict / reason": ("verdict / reason", "verdict")}
HEADERS: tuple[Cell, ...] = tuple(HEADER_FORMS.get(name, (name,)) for name in LEADERBOARD_COLUMNS)
GIVE_UP = (1, 3, 5, 0)  # on a narrow screen: the dimension goes, "change %" and "pairs" shorten, then the names
FLEX_MIN = 19           # "significantly worse", whole


class TunerFactory(Protocol):
    """Builds the Tuner for a search (the real one: :func:`real_tuner`; the tests give a fake racer and clock)."""

    def __call__(self, model_path: str, profile: Profile, *, objective: str, budget_s: float,
                 on_event: Callable[[str, Tuner], None], stop: threading.Event,
                 max_p99_ms: float | None = None) -> Tuner: ...


def real_tuner(model_path: str, profile: Profile, *, objective: str, budget_s: float,
               on_event: Callable[[str, Tuner], None], stop: threading.Event,
               max_p99_ms: float | None = None) -> Tuner:
    """The search ``ortop tune`` runs: every dimension that applies, worker processes racing in blocks."""
    from ortop.engine import build_tuner

    return build_tuner(model_path, profile, objective=objective, max_p99_ms=max_p99_ms, budget_s=budget_s,
                       on_event=on_event, stop=stop)[0]


def default_objective(profile: Profile) -> str:
    """CPU per run for a paced caller (its latency is set by the rate; what it costs is not), else p50."""
    return "cpu" if profile.workload.rate_hz > 0 else "p50"


# ---- the screen ---------------------------------------------------------------------------------------------------
class TuneScreen(JobScreen[TuneResult, Row]):
    """Race candidate settings against the running ones for a budget; stop, apply or save any row."""

    DEFAULT_CSS = """
    TuneScreen #tune-table { height: 1fr; }
    TuneScreen #tune-detail-box { max-height: 45%; }
    """

    BINDINGS = job_bindings("t,escape", [Binding("o", "objective", "objective"), Binding("l", "limit", "p99 limit"),
                                         Binding("b", "budget", "budget")],
                            Binding("a", "apply", "apply row"), "save row", quit_keys="q,f10")
    JOB = "tune"
    ORIGIN = actions.TUNED
    PREFIX = "tune"
    ZEBRA = True
    COLUMNS = LEADERBOARD_COLUMNS
    SETTINGS = ("objective", "limit", "budget", "start")
    INTRO = ("o picks the objective, l a p99 limit, b the budget, g starts: the live session pauses while the search "
             "runs")
    STOPPING = "stopping: the race under way ends, and the result so far follows"

    def __init__(self, profile: Profile, *, tuner_factory: TunerFactory | None = None,
                 budget_s: float = DEFAULT_BUDGET_S, no_load: NoLoad | None = None) -> None:
        super().__init__()
        self.start_profile = profile
        # p99 limits that fit the model: a few times the running settings' p99 at no load, when measured (their
        # closed loop's, or their service p99 under the running open arrivals: :func:`ortop.tui.noload.measured`)
        self.limits: tuple[float | None, ...] = ((None, *slo_presets(no_load.p99_ms, LIMIT_FACTORS))
                                                 if no_load is not None else P99_LIMITS_MS)
        self.objective = default_objective(profile)
        self.budget_s = budget_s
        self.max_p99_ms: float | None = None
        self.board = Board("not started", 0.0, (baseline_row(profile),))
        self._factory: TunerFactory = tuner_factory or real_tuner
        self._tuner: Tuner | None = None
        self._verdict = Text()

    def saved_origin(self, label: str) -> str | None:
        return None if label == "baseline" else self.ORIGIN  # the baseline is the live one's

    def may_set(self) -> bool:
        return self.state == "ready"  # one search a screen: its leaderboard stays

    # ---- the search ------------------------------------------------------------------------------------------
    def _prepare(self, model_path: str, profile: Profile) -> Callable[[], TuneResult]:
        self.start_profile = profile
        self.board = Board("starting", 0.0, (baseline_row(profile),))
        objective, budget_s, max_p99_ms, stop = self.objective, self.budget_s, self.max_p99_ms, self._stop

        def search() -> TuneResult:
            self._tuner = self._factory(model_path, profile, objective=objective, budget_s=budget_s,
                                        on_event=self._stepped, stop=stop, max_p99_ms=max_p99_ms)
            return self._tuner.run()

        return search

    def _stepped(self, kind: str, tuner: Tuner) -> None:
        """The tuner's callback, on its thread: copy what it shows and hand it over."""
        self._moved_on(tuner_board(tuner))

    def _show_progress(self, shown: Board) -> None:
        self.board = shown

    def _failed(self) -> None:
        self._verdict = self.failure()

    def _done(self, res: TuneResult) -> None:
        rows = board_rows(res.trials, res.baseline, res.baseline_figures, res.objective)
        self.board = Board("stopped" if res.stopped else "done", res.elapsed_s, rows)
        racer = self._tuner.racer if self._tuner is not None else None
        self._verdict = self._verdict_text(res, list(getattr(racer, "warnings", ())))
        best = profile_key(res.best)
        self.refresh_rows(select=next((r.key for r in rows if profile_key(r.profile) == best), None))
        self.show_message(Text("enter or a applies the selected row to the live session, ctrl+s saves it",
                               style="dim"))

    def _verdict_text(self, res: TuneResult, warnings: Sequence[str]) -> Text:
        t = Text(no_wrap=False)
        if res.stopped:
            t.append(f"stopped after {res.elapsed_s:.1f} s · ", style="bold yellow")
        t.append("verdict  ", style="bold")
        t.append(res.text, style="bold green" if res.verdict == BETTER else "yellow")
        if res.verdict == BETTER:
            t.append(f"\nbest  {describe(res.best, res.baseline)}: {figures_text(res.best_figures.as_dict())}")
        if res.not_tried:  # each reason once, with how many it left out: "a rung needs ~183 s at this model's pace"
            reasons: dict[str, int] = {}
            for _, why in res.not_tried:
                reasons[why] = reasons.get(why, 0) + 1
            for why, n in reasons.items():
                t.append(f"\n{n} candidate{'s' if n != 1 else ''} not raced: {why} (b gives a longer budget next "
                         "time)", style="dim")
        for w in warnings[:2]:
            t.append(f"\nwarning: {w}", style="yellow")
        return t

    def _between(self) -> None:
        """Between two steps of the tuner the clock moves (the title and the bar), and a dimension that has just
        started lists its candidates as racing: its first step comes only after its first rung, seconds later."""
        tuner = self._tuner
        if tuner is not None and len(tuner.trials) > len(self.board.rows) - 1:
            self.board = tuner_board(tuner)  # new trials only get added, each whole, between the tuner's steps
            self.refresh_rows()
        else:
            self._draw_title()

    def _elapsed(self) -> float:
        tuner = self._tuner
        return tuner.elapsed() if tuner is not None and self.running else self.board.elapsed_s

    # ---- drawing ---------------------------------------------------------------------------------------------
    def _title(self) -> Text:
        t = Text.assemble(("Tune", "bold"), "  ")
        goal = f"{self.objective} ({OBJECTIVE_TEXT[self.objective]}"
        goal += f" with p99 ≤ {self.max_p99_ms:g} ms)" if self.max_p99_ms is not None else ")"
        if self.state == "ready":
            t.append(f"objective {goal} · budget {self.budget_s:g} s", style="bold")
            t.append("  ·  o objective · l p99 limit · b budget · g start · t/esc back", style="dim")
            return t
        elapsed = min(self._elapsed(), self.budget_s)
        phase = {"stopping": "stopping: the result so far follows", "failed": "failed"}.get(self.state,
                                                                                            self.board.phase)
        t.append(f"{phase} — {elapsed:.0f}/{self.budget_s:g} s", style="bold")
        t.append(f"  ·  {goal}", style="dim")
        if self.running:
            t.append("  ·  s stops · t/esc stops and goes back", style="dim")
        else:
            t.append("  ·  enter/a applies a row · ^s saves it · t/esc back", style="dim")
        return t

    def refresh_rows(self, select: str | None = None) -> None:
        """Rebuild the table (a few dozen rows at most), keeping the selected row (by its candidate) selected."""
        table = self.query_one(DataTable)
        current = select or (self._rows[table.cursor_row].key
                             if self._rows and 0 <= table.cursor_row < len(self._rows) else None)
        self._rows = self.board.rows
        fill_table(table, HEADERS, [self._cells(r) for r in self._rows], [str(i) for i in range(len(self._rows))],
                   flex=len(HEADERS) - 1, flex_min=FLEX_MIN, order=GIVE_UP)
        keys = [r.key for r in self._rows]
        if current in keys:
            table.move_cursor(row=keys.index(current))
        self.query_one("#tune-verdict", Static).update(self._verdict)
        self._draw_title()
        self.refresh_bindings()
        self.show_message()

    @staticmethod
    def _cells(row: Row) -> tuple[Cell, ...]:
        """A row's cells in the row's style: a long candidate's name also by its first terms (``threads 1,
        inter-op 2…``), the dimension also left out (the detail says it), the verdict or reason also by its
        headline (``cannot win``)."""
        style = STYLE.get(row.status, "")
        name, dimension, *figures, why = row.cells
        return (tuple(Text(f, style=style) for f in term_forms(name)), (Text(dimension, style=style), Text("")),
                *((Text(c, style=style),) for c in figures), tuple(Text(w, style=style) for w in lead_forms(why)))

    def _detail(self, row: Row | None) -> Text:
        t = Text(no_wrap=False)
        if row is not None:
            t.append_text(row.detail)
        return t

    # ---- keys ------------------------------------------------------------------------------------------------
    def _redraw(self) -> None:
        self._draw_title()
        self.refresh_bindings()

    class ObjectiveChosen(Message):
        """The user picked an objective: the live view's verifications judge it too."""

        def __init__(self, objective: str) -> None:
            super().__init__()
            self.objective = objective

    def action_objective(self) -> None:
        if self.may_set():
            self.objective = OBJECTIVES[(OBJECTIVES.index(self.objective) + 1) % len(OBJECTIVES)]
            self._draw_title()
            self.post_message(self.ObjectiveChosen(self.objective))

    def action_limit(self) -> None:
        """Cycle the p99 limit: a constrained objective ("least CPU per run with p99 ≤ 5 ms")."""
        if self.may_set():
            self.max_p99_ms = self.limits[(self.limits.index(self.max_p99_ms) + 1) % len(self.limits)]
            self._draw_title()

    def action_budget(self) -> None:
        if self.may_set():
            later = [b for b in BUDGETS_S if b > self.budget_s]
            self.budget_s = later[0] if later else BUDGETS_S[0]
            self._draw_title()

    def action_apply(self) -> None:
        row = self.selected()
        if row is None:
            return
        if row.status == "failed":
            self.show_message(Text(f"✗ {row.key} failed, so it cannot be applied (see why above)", style="bold red"))
            return
        if self._refused_while_running("a row"):
            return
        self.post_message(self.ApplyRow(self, row.profile, row.key))

    def action_save(self) -> None:
        row = self.selected()
        if row is None:
            return
        if row.status == "failed":
            self.show_message(Text(f"✗ {row.key} failed, so it is not worth saving (see why above)",
                                   style="bold red"))
            return
        self.post_message(self.SaveRow(self, row.profile, row.key))
