"""The help screen: every key, from the same tables the bindings are built from, and how each panel's figures read.

The legend (:func:`legend`) goes panel by panel through the live view, then the history: each figure as the panel
writes it, what it means, and the span of time or runs it covers. The spans are the running app's own (the latency
bucket, the recent window, the meters' period), handed in by the app, so the help says what the screen does.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ortop.measure.compare import MARGIN_PCT
from ortop.measure.stats import WINDOW_MAX_S, WINDOW_MIN_RUNS, runs_needed
from ortop.tui.keymap import CAPACITY_KEYS, HISTORY_KEYS, MAIN_KEYS, SETTINGS_KEYS, TUNE_KEYS, key_display
from ortop.tui.panels import cpu, memory, replicas, spin
from ortop.tui.screens._base import Responsive

UNITS: tuple[tuple[str, str], ...] = (
    ("cores", "a process's CPU time: 1.10 cores is htop's 110 % (the worker's, the UI's)"),
    ("w/all %", "a core meter: the worker's share of that core / the core's whole load (other processes too)"),
    ("%", "a share: of the host (host), of the wall time (in Run()), of one core (a thread)"),
)

Rows = tuple[tuple[str | Text, str], ...]
FIGURE_W = 24  # the legend's figure column, the same in every panel's table so they read as one

# The engine's figures the legend quotes (kept equal to engine.store.CONFIG_RING and engine.verdicts.MIN_VERDICT_RUNS
# by a test: the TUI reaches the engine through its face alone).
CONFIG_RING = 50_000     # runs kept per configuration for its percentiles and verdicts
MIN_VERDICT_RUNS = 20    # runs a row needs before it gets a verdict or the ★


def _s(seconds: float) -> str:
    return f"{seconds:g} s"


def legend(bucket_s: float = 0.5, window_s: float = 5.0, meter_s: float = 0.5,
           slow_s: float = 1.0) -> tuple[tuple[str, Rows], ...]:
    """Each panel's title and its figures: (as the panel writes it, what it means and the span it covers).

    ``bucket_s``: one sparkline column of the latency panel; ``window_s``: its "last N s" line; ``meter_s``: the
    period the CPU meters cover (they are read every frame); ``slow_s``: the period the per-thread and worker-CPU
    figures are averaged over.
    """
    return (*_meter_sections(meter_s, slow_s), *_figure_sections(bucket_s, window_s, meter_s),
            *_list_sections())


SINCE = "this configuration since its build or the last reset (r)"
KEPT = f"its last {CONFIG_RING:,} runs at most"


def _meter_sections(meter_s: float, slow_s: float) -> tuple[tuple[str, Rows], ...]:
    """The status line, the CPU meters and the spin panel."""
    since, kept = SINCE, KEPT
    return (
        ("Status line (top)", (
            ("● measuring 12 s", "the state and how long it has lasted: ⟳ building / warming (a rebuild under way), "
             "⇄ verifying, ‖ paused, ✗ failed"),
            ("#3 threads 2 · spin off", "the running configuration (its number in the history) and what it changes "
             "from the start"),
            ("! saturated …", "a paced rate the model cannot keep (runs go back to back); with open arrivals "
             "\"offered …, served …: queueing\""),
        )),
        (cpu.TITLE, (
            ("3▕███▌  40/57", f"core 3 (0-based, as htop counts): the worker's share of it, cyan, / its whole load, "
             f"other processes too, in % of the core, over the last {_s(meter_s)}; the worker's share is its "
             "threads' load summed by the core each last ran on"),
            (Text.assemble(("3", "reverse bold cyan"), " (reversed)"), "a core the worker's threads ran on"),
            ("bar colours", "the core's load: green below 50 %, yellow below 80 %, red above (htop's bands)"),
            ("3 r1▕", "pinned replicas: the replica whose share holds the core (r1+: more than one)"),
            ("▁…█ ·", "many cores: one cell per core, its height the load, · idle, cyan the worker's cores"),
            ("worker 1.19 cores", f"the worker process's CPU time, all its threads, over the last {_s(meter_s)}"),
            ("host 97%", "the whole host's load, all cores, every process"),
            ("ui 0.02 cores", "ortop's own process (this screen and the monitor reading the worker), apart from "
             "what it measures"),
        )),
        ("Spin · CPU the worker burns", (
            ("CPU/run 0.98 ms", f"the worker's CPU time per run, spinning included, over {since}"),
            ("1.22 cores avg", "the worker's CPU over the same span"),
            ("in Run 56%", "the share of wall time a Run() was in flight (the duty cycle), same span: "
             "near 100 % in a closed loop"),
            ("between runs N ms/s", f"CPU the worker burned while no Run() was in flight, per second of wall time "
             f"(idle pool threads spinning), over {kept}; = X% of its CPU: that share of all it burned; "
             "n/a with concurrent callers, whose runs overlap; a new session shows it from its "
             f"{spin.SPIN_MIN_RUNS}th run"),
            ("in ███▒▒▒ between", "the same split as a bar: █ CPU inside Run(), ▒ CPU between runs"),
            ("p99 after idle (ms)", "open arrivals: service p99 (ms) by the idle gap before a run (< 1, 1–10, "
             "10–100, ≥ 100 ms); a slow long-gap bucket is a pool waking from sleep"),
            ("worker ▁▅▆█ 1.06 cores", f"the worker's CPU, one value per {_s(slow_s)}, newest at the right (the "
             "figure is the newest)"),
            ("thread core % of a core", f"the worker's busiest threads: OS thread id, the core it last ran on, its "
             f"load in % of one core averaged over the last {_s(slow_s)}, and its role:"),
            ("  caller N", "runs the model (caller N of rR: replica R's callers)"),
            ("  main", "the worker's main thread: builds sessions, answers ortop"),
            ("  reader", "forwards ORT's log lines to the events panel"),
            ("  library", "started by numpy or onnxruntime at import, before any session: idle while the model runs"),
            ("  pool", "ORT's intra-op thread pool (and any other thread a session starts): spinning shows here; a "
             "pins it, one thread a core"),
        )),
    )


def _figure_sections(bucket_s: float, window_s: float, meter_s: float) -> tuple[tuple[str, Rows], ...]:
    """The latency, replicas, model, GPU and memory panels."""
    since, kept = SINCE, KEPT
    return (
        ("Latency", (
            ("p50 ▁▂█ 0.345 ms", f"one column per {_s(bucket_s)}, newest at the right, a gap where no run ended "
             f"(a pause, a rebuild); the figure at the right is the median over the span headed above it (last "
             f"{_s(window_s)}, widened at low rates up to {_s(WINDOW_MAX_S)} to hold {WINDOW_MIN_RUNS} runs; "
             "\"12 s·7 runs\" when fewer)"),
            ("p99 ▇▇█ 7.71 ms", f"the same for the 99th percentile of each {_s(bucket_s)}; the figure over that span"),
            ("thr ▂▄▃ 1.1k/s", f"runs finished per second in each {_s(bucket_s)}; the figure: runs served per second "
             "over that span, \"paused\" while paused"),
            ("own scale · from 0", "p50 and p99 each span their own lowest…highest on screen (shape, not level); "
             "thr starts at 0, so a dip is a real one"),
            ("▼ rebuild", "a configuration change landed in the column under it"),
            (f"last {window_s:g} s: N runs", f"the runs that ended in the last {_s(window_s)} (the "
             "same span as the figures above): their count, p90 and max"),
            ("all 8,413 runs: p50…", f"{since}: its run count, p50, p99, p99.9 over {kept}, and "
             f"runs/s over its whole measured time; p99 shows from {runs_needed('p99'):,} runs and p99.9 from "
             f"{runs_needed('p999'):,} (with fewer, "
             "no run lies beyond them)"),
            ("queue a/b + service c/d", "open arrivals (poisson, fixed, trace): response = wait in the queue + service "
             "(inside Run()), p50/p99 ms over all runs (q, svc when narrow); the sparklines are then response "
             "time, counted from each arrival; N shed: requests dropped past the queue limit"),
        )),
        (replicas.TITLE, (
            ("r0 cores 0-1", "a replica: one session of the model in the one worker, with its own callers; its cores "
             "when pinned"),
            ("runs/s p50 p99", f"that replica's throughput and latency (ms) over {kept}"),
            ("total · RSS", "all replicas together, and the memory of the one process they share"),
        )),
        ("Model · session", (
            ("model … IR 10 · 12 nodes", "the model file, its IR version, node count and most frequent operators"),
            ("inputs", "the shapes and types fed to it (free dims as set)"),
            ("providers", "the active execution providers; red \"requested: silent fallback\" when one asked for "
             "is not running"),
            ("create · first run", "building the session, and its first Run() (allocation, kernels)"),
            ("pid · N restarts", "the worker process, and how often it was restarted after a crash"),
            ("settings", "every knob shown at a glance, as the running profile sets it"),
            ("shape 1x3x224 …", "a shape mix: each shape's runs, service p50/p99 and response p99 (ms)"),
            ("! … / note …", "a warning (a free dim left at 1) or a note about the inputs"),
        )),
        ("GPU", (
            ("no NVIDIA GPU", "a CPU host (or no NVML): normal, not an error"),
            ("#0 NAME util 45%", f"per device: NVML's utilisation, with its sparkline (one value per {_s(meter_s)})"),
            ("mem used/total worker", "memory in use on the device, and the worker's own share (cyan)"),
        )),
        (memory.TITLE, (
            ("RSS 97 MB peak 97", "the worker's resident memory now, and its peak in this configuration"),
            ("±0 since build", f"growth since the session was built (yellow above {memory.GROWTH_MB} MB)"),
            ("host used · available", f"the host's memory (available in red below {memory.LOW_AVAILABLE * 100:g} "
             "%); GPU: the worker's"),
            ("RSS ▂▅███", "this configuration's RSS, one value a second (the highest), the last two minutes"),
            ("⚠ RSS rising steadily", "RSS kept growing over the last minutes: how much and how fast, a slow leak?"),
            ("#0 peak 97 MB +3 MB", "each configuration's peak RSS, its change from the row before, and what "
             "the configuration changed"),
        )),
    )


def _list_sections() -> tuple[tuple[str, Rows], ...]:
    """The events panel, the history screen and tune's leaderboard."""
    kept = KEPT
    return (
        ("Events", (
            ("12.3 · text ×4", "seconds since ortop started; · info, ! warning, ✗ error; ×4: repeated four times "
             "(grouped); ORT's own log lines start with ORT:"),
        )),
        ("History (h)", (
            ("★", f"the best p50 among the rows with at least {MIN_VERDICT_RUNS} runs"),
            ("▶", "the running configuration"),
            ("runs p50 p99 thr CPU/run", f"each configuration over {kept} (CPU/run in ms)"),
            ("verdict", "how the row compares with the row before it, on the metric its change is about:"),
            ("  measuring…", f"fewer than {MIN_VERDICT_RUNS} runs yet"),
            ("  too few runs", f"replaced before it (or the row before it) had {MIN_VERDICT_RUNS} runs"),
            ("  p50 +3.1 % unverified", "the p50 change measured one after the other: drift on a shared host moves "
             "figures as much, so it is no verdict yet; v verifies it"),
            ("  verifying…", "the two configurations alternate in short blocks, paired block by block"),
            ("  −12 % faster / slower", f"verified: the 95 % interval of the paired change lies wholly beyond "
             f"±{MARGIN_PCT:g} % (green faster, red slower); p99 …, runs/s …, CPU/run … when judged on that "
             "metric (a spin knob at a paced rate is judged on CPU per run)"),
            ("  no difference", f"verified: the interval lies within ±{MARGIN_PCT:g} %"),
            ("  undecided", "neither yet: within noise, more measuring could decide"),
            ("  not comparable", "the workloads differ (rate, callers, inputs): the runs do different work"),
        )),
        ("Tune (t): the leaderboard's status", (
            ("baseline", "the profile the live session was running, measured beside the candidates"),
            ("racing", "still alternating with the best so far"),
            ("ok · winner", "raced to the end; the winner is the search's result"),
            ("dropped", "stopped early: significantly worse, unable to win, or not raced before the stop"),
            ("failed", "did not build or run (the reason is in its row)"),
        )),
    )


def two_columns(rows: Iterable[tuple[str | Text, str]], *, legend: bool = False) -> Table:
    """Keys (or, with ``legend``, a panel's figures as the panel writes them) and what each means, in two columns:
    a long line wraps under its own text. A legend's first column is as wide in every panel's table, so the
    panels read as one list; a key column is as wide as its longest key."""
    table = Table.grid(padding=(0, 1))
    if legend:
        table.add_column(style="bold", width=FIGURE_W)
    else:
        table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(ratio=1)
    for first, text in rows:
        table.add_row(first, text)
    return table


class HelpScreen(Responsive, ModalScreen[None]):
    """Every key, from the same table the bindings are built from, and a legend of every panel's figures."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "close")]

    def __init__(self, *, bucket_s: float = 0.5, window_s: float = 5.0, meter_s: float = 0.5,
                 slow_s: float = 1.0) -> None:
        super().__init__()
        self.spans = (bucket_s, window_s, meter_s, slow_s)

    def compose(self) -> ComposeResult:
        parts: list[RenderableType] = [
            Text.assemble(("ortop — a top for ONNX Runtime", "bold"), ("   esc / ? / F1 closes · ↑↓ PgUp PgDn scroll",
                                                                        "dim")),
            Text("\nLive view", style="bold underline"),
            two_columns((key_display(k), k.help) for k in MAIN_KEYS),
        ]
        parts.append(Text("\nWhat the live view shows, panel by panel", style="bold underline"))
        for title, rows in legend(*self.spans):
            parts += [Text(f"\n{title}", style="bold cyan"), two_columns(rows, legend=True)]
        parts += [
            Text("\nHistory keys", style="bold underline"),
            two_columns(HISTORY_KEYS),
            Text("\nTune", style="bold underline"),
            two_columns(TUNE_KEYS),
            Text("\nCapacity", style="bold underline"),
            two_columns(CAPACITY_KEYS),
            Text("\nSettings", style="bold underline"),
            two_columns(SETTINGS_KEYS),
            Text("\nHow the figures read", style="bold underline"),
            two_columns(UNITS),
            Text("\nctrl+p opens the command palette: every action by name", style="dim"),
        ]
        with VerticalScroll(id="help-box"):
            yield Static(Group(*parts), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
