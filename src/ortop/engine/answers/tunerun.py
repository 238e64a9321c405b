"""A tuning run put together, and its leaderboard: shared by ``ortop tune`` and the TUI's tune screen.

Both front ends race the same search (:class:`ortop.engine.answers.tuner.Tuner` over a
:class:`ortop.engine.answers.space.Space` and a :class:`ortop.engine.answers.racer.WorkerRacer`) and show the same
table, so neither has to import the other: the command line prints the rows with rich, the terminal UI puts them in a
DataTable.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ortop.config.profile import Profile
from ortop.engine.answers.racer import WorkerRacer
from ortop.engine.answers.space import profile_key
from ortop.engine.answers.trials import BETTER, Trial, TuneResult
from ortop.engine.answers.tuner import Tuner
from ortop.measure.compare import MIN_PAIRS
from ortop.measure.stats import QUANTILE, runs_needed
from ortop.present import signed_pct

LEADERBOARD_COLUMNS = ("candidate", "dimension", "status", "change %", "95 % CI", "pairs", "verdict / reason")
_ORDER = {"racing": 0, "ok": 1, "dropped": 2, "failed": 3}


# ---- assembling a run ---------------------------------------------------------------------------------------------
def build_tuner(model_path: str, profile: Profile, *, objective: str = "p50", max_p99_ms: float | None = None,
                budget_s: float = 60.0, dims: Sequence[str] | None = None,
                on_event: Callable[[str, Tuner], None] | None = None, stop: threading.Event | None = None,
                clock: Callable[[], float] = time.monotonic, started: float | None = None,
                info: Any = None, host: Any = None, no_race: str = "") -> tuple[Tuner, WorkerRacer]:
    """A Tuner over the space of ``profile`` on this host for this model, with a real racer sharing ``stop``.

    ``info`` (an ``ortop.model.ModelInfo``) and ``host`` (``HostFacts``) are read when not given. Raises ValueError
    for an unknown dimension in ``dims``, ModelError for a model that cannot be read. No worker starts before
    :meth:`Tuner.run`; the racer is returned too, for its warnings after the run. The racer's blocks hold the runs
    the objective's percentile needs (a p99: 100); ``no_race`` (see :class:`Tuner`) measures the baseline alone.
    """
    from ortop.collectors.host import read_host
    from ortop.engine.answers.space import ModelFacts, Space
    from ortop.engine.bench.plan import block_target_for
    from ortop.model import load_model

    if info is None:
        info = load_model(model_path)
    space = Space(profile, host if host is not None else read_host(), ModelFacts.from_model(info, profile), dims)
    stop = stop if stop is not None else threading.Event()
    # a block holds the runs its own percentile needs; under a p99 limit, enough that a first rung's blocks pooled
    # (MIN_PAIRS of them at least) hold the runs a p99 needs
    per_block = runs_needed(objective) if objective in QUANTILE else 0
    if max_p99_ms is not None:
        per_block = max(per_block, math.ceil(runs_needed("p99") / MIN_PAIRS))
    racer = WorkerRacer(model_path, block_s=block_target_for(budget_s), stop=stop, runs_per_block=per_block)
    tuner = Tuner(space, racer, objective=objective, max_p99_ms=max_p99_ms, budget_s=budget_s, clock=clock,
                  started=started, on_event=on_event, stop=stop, no_race=no_race)
    return tuner, racer


# ---- the leaderboard ----------------------------------------------------------------------------------------------


def leaderboard(trials: Iterable[Trial]) -> list[Trial]:
    """Racing and finished candidates best first (by their gain on the objective), then the dropped, then the
    failed."""
    def key(t: Trial) -> tuple[int, float]:
        imp = t.improvement_pct()
        return _ORDER.get(t.status, 9), -(imp if math.isfinite(imp) else -1e9)

    return sorted(trials, key=key)


def is_winner(t: Trial, result: TuneResult | None = None) -> bool:
    """Whether a row reads "winner": the tuner marked it the verified best, and (given the result) the verdict is
    "better" and names its profile. A row never reads "winner" above a verdict that keeps the baseline."""
    if not t.winner:
        return False
    return result is None or (result.verdict == BETTER and t.candidate.key == profile_key(result.best))


def trial_cells(t: Trial, result: TuneResult | None = None) -> tuple[str, ...]:
    """One trial's cells, in the order of :data:`LEADERBOARD_COLUMNS` (``result``: the run's, once it ended)."""
    c = t.comparison
    change = signed_pct(c.change_pct, missing="") if c is not None else ""
    ci = (f"{signed_pct(c.ci_low_pct)}…{signed_pct(c.ci_high_pct)}" if c is not None and math.isfinite(c.ci_low_pct)
          else "")
    winner = is_winner(t, result)
    what = t.reason if t.status in ("dropped", "failed") or (t.reason and not winner) else \
        (c.verdict if c is not None else "")
    pace = t.pace()
    if pace:  # never silently compared as if paced
        what = f"{what}; {pace}" if what else pace
    return (t.label, t.candidate.stage, "winner" if winner else t.status, change, ci,
            str(c.pairs) if c is not None else "", what)


def leaderboard_rows(trials: Iterable[Trial], result: TuneResult | None = None) -> list[tuple[str, ...]]:
    """The leaderboard's rows (see :func:`leaderboard`), as text cells."""
    return [trial_cells(t, result) for t in leaderboard(trials)]


def figures_text(d: Mapping[str, Any]) -> str:
    """A profile's figures in one line, from ``Figures.as_dict()`` (None where not measured); a p99 its runs do not
    resolve says how many runs there were and how many it needs."""
    def f(x: Any, unit: str = "") -> str:
        return "?" if x is None else f"{x:.3g}{unit}"

    runs = d.get("runs")
    p99 = f(d.get("p99_ms"), " ms")
    if d.get("p99_ms") is None and runs:
        p99 = f"? ({runs} runs: a p99 needs {runs_needed('p99')})"
    return (f"p50 {f(d.get('p50_ms'), ' ms')}, p99 {p99}, "
            f"{f(d.get('throughput_per_s'))} runs/s, CPU {f(d.get('cpu_ms_per_run'), ' ms')}/run")
