"""A tuning run put together, and its leaderboard: shared by ``ortop tune`` and the TUI's tune screen.

Both front ends race the same search (:class:`ortop.engine.tuner.Tuner` over a :class:`ortop.engine.space.Space`
and a :class:`ortop.engine.racer.WorkerRacer`) and show the same table, so neither has to import the other: the
command line prints the rows with rich, the terminal UI puts them in a DataTable.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ortop.config.profile import Profile
from ortop.engine.racer import WorkerRacer
from ortop.engine.trials import Trial
from ortop.engine.tuner import Tuner

LEADERBOARD_COLUMNS = ("candidate", "dimension", "status", "change %", "95 % CI", "pairs", "verdict / reason")
_ORDER = {"racing": 0, "ok": 1, "dropped": 2, "failed": 3}


# ---- assembling a run ---------------------------------------------------------------------------------------------
def build_tuner(model_path: str, profile: Profile, *, objective: str = "p50", max_p99_ms: float | None = None,
                budget_s: float = 60.0, dims: Sequence[str] | None = None,
                on_event: Callable[[str, Tuner], None] | None = None, stop: threading.Event | None = None,
                clock: Callable[[], float] = time.monotonic, started: float | None = None,
                info: Any = None, host: Any = None) -> tuple[Tuner, WorkerRacer]:
    """A Tuner over the space of ``profile`` on this host for this model, with a real racer sharing ``stop``.

    ``info`` (an ``ortop.model.ModelInfo``) and ``host`` (``HostFacts``) are read when not given. Raises ValueError
    for an unknown dimension in ``dims``, ModelError for a model that cannot be read. No worker starts before
    :meth:`Tuner.run`; the racer is returned too, for its warnings after the run.
    """
    from ortop.collectors.host import read_host
    from ortop.engine.bench.plan import block_target_for
    from ortop.engine.space import ModelFacts, Space
    from ortop.model import load_model

    if info is None:
        info = load_model(model_path)
    space = Space(profile, host if host is not None else read_host(), ModelFacts.from_model(info, profile), dims)
    stop = stop if stop is not None else threading.Event()
    racer = WorkerRacer(model_path, block_s=block_target_for(budget_s), stop=stop)
    tuner = Tuner(space, racer, objective=objective, max_p99_ms=max_p99_ms, budget_s=budget_s, clock=clock,
                  started=started, on_event=on_event, stop=stop)
    return tuner, racer


# ---- the leaderboard ----------------------------------------------------------------------------------------------
def fmt_pct(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:+.1f}"


def leaderboard(trials: Iterable[Trial]) -> list[Trial]:
    """Racing and finished candidates best first (by their gain on the objective), then the dropped, then the
    failed."""
    def key(t: Trial) -> tuple[int, float]:
        imp = t.improvement_pct()
        return _ORDER.get(t.status, 9), -(imp if math.isfinite(imp) else -1e9)

    return sorted(trials, key=key)


def trial_cells(t: Trial) -> tuple[str, ...]:
    """One trial's cells, in the order of :data:`LEADERBOARD_COLUMNS`."""
    c = t.comparison
    change = fmt_pct(c.change_pct) if c is not None else ""
    ci = f"{fmt_pct(c.ci_low_pct)}…{fmt_pct(c.ci_high_pct)}" if c is not None and math.isfinite(c.ci_low_pct) \
        else ""
    what = t.reason if t.status in ("dropped", "failed") else (c.verdict if c is not None else "")
    pace = t.pace()
    if pace:  # never silently compared as if paced
        what = f"{what}; {pace}" if what else pace
    return (t.label, t.candidate.stage, "winner" if t.winner else t.status, change, ci,
            str(c.pairs) if c is not None else "", what)


def leaderboard_rows(trials: Iterable[Trial]) -> list[tuple[str, ...]]:
    """The leaderboard's rows (see :func:`leaderboard`), as text cells."""
    return [trial_cells(t) for t in leaderboard(trials)]


def figures_text(d: Mapping[str, Any]) -> str:
    """A profile's figures in one line, from ``Figures.as_dict()`` (None where not measured)."""
    def f(x: Any, unit: str = "") -> str:
        return "?" if x is None else f"{x:.3g}{unit}"

    return (f"p50 {f(d.get('p50_ms'), ' ms')}, p99 {f(d.get('p99_ms'), ' ms')}, "
            f"{f(d.get('throughput_per_s'))} runs/s, CPU {f(d.get('cpu_ms_per_run'), ' ms')}/run")
