"""The tune screen's leaderboard as rows: the baseline first, then each candidate best first, each with its cells,
its status (which styles the row) and its detail in full, drawn from the tuner's trials.

The rows are built on the tuning thread at each step of the tuner (:func:`tuner_board`), where the tuner is
between two steps and its trials are whole, and handed to the screen as a frozen :class:`Board`; the screen
(:mod:`ortop.tui.screens.tune`) only puts them in its table. Nothing here imports Textual.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text

from ortop.config.profile import Profile
from ortop.engine import Figures, Trial, Tuner, figures_text, leaderboard, trial_cells

STYLE = {"winner": "bold green", "dropped": "dim", "failed": "red", "baseline": "bold"}  # by a row's status


@dataclass(frozen=True)
class Row:
    """One leaderboard row, copied off the tuning thread: its cells, the profile it stands for, its detail."""

    key: str                 # "baseline", or the candidate's label (unique in a run)
    cells: tuple[str, ...]
    status: str              # baseline, racing, ok, winner, dropped, failed
    profile: Profile
    detail: Text


@dataclass(frozen=True)
class Board:
    """What the tuner showed at one step."""

    phase: str
    elapsed_s: float
    rows: tuple[Row, ...]


def objective_figure(figures: Figures, objective: str) -> str:
    """A profile's figure on the objective, short enough for a cell (``p50 1.19 ms``); "" when not measured."""
    x = figures.value(objective)
    if not math.isfinite(x):
        return ""
    unit = {"throughput": " runs/s", "cpu": " ms CPU/run"}.get(objective, " ms")
    return f"{objective if objective in ('p50', 'p99') else ''} {x:.3g}{unit}".strip()


def baseline_row(start: Profile, figures: Figures | None = None, objective: str = "p50") -> Row:
    """The start profile: what every candidate is measured against, and what the live session ran."""
    detail = Text(no_wrap=False)
    detail.append("baseline · the profile the live session was running\n", style="bold")
    if figures is not None and figures.blocks:
        detail.append(f"{figures_text(figures.as_dict())} over {figures.blocks} blocks\n")
    else:
        detail.append("measured beside the candidates as the search goes\n")
    cell = objective_figure(figures, objective) if figures is not None else ""
    return Row("baseline", ("baseline", "", "start", "", "", "", cell), "baseline", start, detail)


def trial_row(t: Trial, start: Profile) -> Row:
    """A candidate's row, and in full: what it changes from the baseline, how it raced, why it stopped."""
    cells = trial_cells(t)
    status = cells[2]
    detail = Text(no_wrap=False)
    detail.append(f"{t.label} · {t.candidate.stage} · {status}\n", style=STYLE.get(status, "bold"))
    changes = t.profile.changes_from(start)
    detail.append("changes from the baseline  ", style="dim")
    detail.append(("; ".join(changes) if changes else "none") + "\n")
    detail.append("raced against  ", style="dim")
    detail.append(f"{t.incumbent}\n")
    c = t.comparison
    if c is not None:
        detail.append("verdict  ", style="dim")
        detail.append(f"{c.text()} ({c.pairs} pairs of blocks)\n")
    if t.figures.blocks:
        detail.append("figures  ", style="dim")
        detail.append(f"{figures_text(t.figures.as_dict())} over {t.figures.blocks} blocks\n")
    if t.reason:
        detail.append(f"{t.status}  ", style="dim")
        detail.append(f"{t.reason}\n", style=STYLE.get(t.status, ""))
    return Row(t.label, cells, status, t.profile, detail)


def board_rows(trials: Iterable[Trial], start: Profile, baseline_figures: Figures | None = None,
               objective: str = "p50") -> tuple[Row, ...]:
    """The baseline first, then every trial, best first (the leaderboard's order)."""
    return (baseline_row(start, baseline_figures, objective), *(trial_row(t, start) for t in leaderboard(trials)))


def tuner_board(tuner: Tuner) -> Board:
    """What the tuner shows now: its phase, its time, and its rows."""
    return Board(tuner.phase, tuner.elapsed(), board_rows(list(tuner.trials), tuner.start))
