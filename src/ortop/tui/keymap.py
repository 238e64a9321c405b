"""Every key of the main screen in one table: the bindings, the footer, the help screen and the command palette
are all built from it, so none of them can forget a key the others know.

htop's and mc's habits are kept beside ortop's own letters: F1 is help and F10 quits (``h`` stays the history). A
quick key's label is the short label of the knob it turns (:mod:`ortop.tui.quick`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ortop.config import knobs
from ortop.tui import quick


@dataclass(frozen=True)
class Key:
    """One main-screen key: Textual key names (comma-separated), the app action, what the user sees."""

    keys: str
    action: str          # an OrtopApp action name, without "action_"
    label: str           # short, for the footer
    help: str            # one line, for the help screen and the command palette
    display: str = ""    # how the key is written (defaults to the first key name)
    footer: bool = True
    short: str = ""      # the footer's label at 80 columns (defaults to label)
    narrow: bool = True  # shown in the footer at 80 columns too (the demo's keys must be)
    bar: str = ""        # how the footer writes the key, when not as the help does ("+/-" for two keys in one)
    rank: int = 99       # the footer's priority, 0 first: a narrow footer keeps the lowest ranks (ctrl+p has all)


MAIN_KEYS: tuple[Key, ...] = (
    Key("question_mark,f1", "help", "help", "this help", "? F1", rank=1),
    Key("s", "settings", "settings", "edit every knob of the profile and apply it", short="set", rank=2),
    Key("h", "history", "history", "the history of configurations (Enter re-applies a row)", short="hist",
        rank=15),
    Key("m", "shapes", "shapes", "shapes: each input shape of the running mix with its runs, its share of the "
        "requests, and queue, service and response p50/p99", footer=False),
    Key("d", "doctor", "doctor", "the doctor: what is wrong with this session, and the profile change that fixes "
        "it (Enter applies it)", short="doc", rank=14),
    Key("t", "tune", "tune", "tune: race candidate settings against the running ones for a budget and show a "
        "leaderboard (stop, apply or save any row)", rank=13),
    Key("c", "capacity", "capacity", "capacity: the most traffic the running profile and one alternative serve "
        "within a latency SLO, the latency–load curve drawn as points are measured (apply or save either, w writes "
        "the HTML report, C certifies 0.9 × the capacity found by MLPerf Server's rule)", short="cap", rank=12),
    Key("plus,equals_sign", "threads_up", quick.label(quick.THREADS), "intra-op threads up by one (from ORT's "
        "default: one more than the count ORT runs, counted in the worker)", "+", short="thr", bar="+/-", rank=3),
    Key("minus,underscore", "threads_down", "threads-", "intra-op threads down by one", "-", footer=False),
    Key("p", "toggle_spinning", quick.label(quick.SPIN),
        "toggle the intra-op pool's spinning (allow_spinning off / default)", rank=4),
    Key("R", "cycle_rate", quick.label(quick.RATE), "cycle the paced rate: closed loop → 50 % → 10 % of the "
        "throughput measured in a closed loop, or estimated from the service time under open arrivals (100 Hz → "
        "10 Hz until either is) → closed loop; another rate steps to the cycle's next rate below it (a closed loop "
        "while neither is measured). The arrival mode stays (Poisson stays Poisson); it ends with the closed loop "
        "and comes back after it", rank=5),
    Key("a", "cycle_affinity", quick.label(quick.AFFINITY), "pin the intra-op pool, one thread a core: on the last "
        "cores → on the first cores → unpinned (cores counted from 0, as htop does; from ORT's default the thread "
        "count it runs is set with the pin)", short="pin", rank=9),
    Key("w", "cycle_arrival", quick.label(quick.ARRIVAL), "arrivals: evenly paced ↔ Poisson, at the same rate; from "
        "a closed loop, Poisson near its measured throughput (at 80 % of it): the latency panel splits queue and "
        "service",
        short="arr", rank=10),
    Key("b", "toggle_block_base", quick.label(quick.BLOCK_BASE_KNOB),
        f"toggle {knobs.get(quick.BLOCK_BASE_KNOB).name} between unset and {quick.BLOCK_BASE}", rank=8),
    Key("v", "verify", "verify", "is the last change real? alternate it with the configuration before it for a "
        "few seconds and show the change with its 95 % interval", rank=7),
    Key("space", "toggle_pause", "pause", "pause or resume the measured loop", "space", bar="spc", rank=6),
    Key("r", "reset_stats", "reset", "reset the running configuration's statistics and the live series", rank=16),
    Key("ctrl+s", "save_profile", "save", "save the running profile as TOML (asks a name)", "^s", rank=11),
    Key("o", "open_profile", "open", "open a saved or shipped profile and apply it (sections it lacks keep "
        "their running values)", rank=17),
    Key("e", "export", "export", "export the running settings as Python, C++, C#, perf_test, Olive, env or JSON",
        short="exp", rank=18),
    Key("q,ctrl+c,f10", "quit", "quit", "quit (the settings are kept for ortop --resume)", "q F10", rank=0),
)

HISTORY_KEYS: tuple[tuple[str, str], ...] = (
    ("enter", "re-apply the selected row's profile"),
    ("v", "verify the selected row against the row before it (interleaved, a few seconds)"),
    ("ctrl+s", "save the selected row's profile"),
    ("e", "export the selected row's profile"),
    ("h / esc", "back to the live view"),
)

TUNE_KEYS: tuple[tuple[str, str], ...] = (
    ("o / l / b", "before the start: cycle the objective (p50, p99, throughput, CPU per run) / a p99 limit "
     "(none, then 1.2 … 4 × the closed loop's p99; 2 … 50 ms before one is measured) / the budget"),
    ("g", "start the search (the live session pauses while it runs, and resumes after)"),
    ("s", "stop the search: it ends with what it has measured"),
    ("enter / a", "apply the selected row's profile to the live session (once the search has ended)"),
    ("ctrl+s", "save the selected row's profile"),
    ("t / esc", "back to the live view (a search under way stops first)"),
)

CAPACITY_KEYS: tuple[tuple[str, str], ...] = (
    ("l / b", "cycle the SLO (p99 ≤ 1.5, 2, 4 × the p99 measured at no load, rounded; 5 … 100 ms until one is "
     "measured) / the budget (30, 60, 120 s); kept for the next opening"),
    ("L", "type the SLO: a limit in ms (p99), or METRIC=LIMIT (p95=30ms)"),
    ("a", "cycle the profile sized beside the running one: two pinned replicas, spinning off (or on), twice or "
     "half the intra-op threads"),
    ("g", "start the search (the live session pauses while it runs, and resumes after)"),
    ("s", "stop the search: what it has measured stays"),
    ("enter", "apply the highlighted profile to the live session (once the search has ended)"),
    ("ctrl+s", "save the highlighted profile"),
    ("w", "write the HTML report of the finished search (its full path is shown)"),
    ("c / esc / q", "back to the live view (a search under way stops first)"),
)

SETTINGS_KEYS: tuple[tuple[str, str], ...] = (
    ("tab / shift+tab", "move between fields"),
    ("ctrl+↓ / ctrl+↑", "next / previous section (also page down / page up)"),
    ("←/→ or space", "change a choice"),
    ("enter / ctrl+s", "apply, from any field, text or choice (the worker rebuilds; errors show beside their "
                       "field as you type)"),
    ("esc", "close without applying"),
)


def key_display(k: Key) -> str:
    """The key as the help screen writes it."""
    return k.display or k.keys.split(",")[0]


def bar_display(k: Key) -> str:
    """The key as the footer writes it (one name: ``?``, ``+/-``, ``spc``)."""
    return k.bar or key_display(k).split(" ")[0]
