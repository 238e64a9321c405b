"""The live view: CPU, spin, GPU and memory on the left; latency, replicas, model / session and events on the right.

The replicas panel is there only while the running configuration serves several sessions (``workload.replicas``).

The app reads the monitor and the collectors on its tick and hands the screen what it read (:meth:`MainScreen.draw`);
the screen gives each panel its drawing function from :mod:`ortop.tui.panels`, and the panels repaint only what
changed.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen

from ortop.present import finite
from ortop.tui.keymap import MAIN_KEYS
from ortop.tui.messages import CatchUp
from ortop.tui.meters import Meters
from ortop.tui.panels import cpu, events, gpu, latency, memory, model, replicas, spin, status
from ortop.tui.panels._format import BUSY_STATES, pace_shortfall
from ortop.tui.widgets import KeyBar, Panel


class Column(Vertical):
    """A layout-only column. BLANK: Textual re-renders every widget under a dirty region on each frame, and a
    container with nothing to draw should cost a blank strip per line, not a pass through the styles cache."""

    BLANK = True


class Row(Horizontal):
    """A layout-only row (see Column)."""

    BLANK = True


EVENTS_MIN = 2  # lines the events panel keeps when the replicas panel takes room from it


class MainScreen(Screen[None]):
    """The live view: CPU, spin, GPU on the left; latency, replicas, model / session and events on the right."""

    BLANK = True  # the panels cover it; see Column

    BINDINGS = [
        Binding(k.keys, f"app.{k.action}", k.label, show=k.footer, key_display=k.display or None)
        for k in MAIN_KEYS
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._meters = Meters()
        self._fit_key: tuple = ()
        self._replicas: tuple[Any, ...] = ()  # the running configuration's replicas, as the last snapshot had them
        self._owners: dict[int, tuple[int, ...]] = {}  # core -> the pinned replicas holding it
        self._head: tuple[tuple, list[Any]] = ((), [])  # the model panel's head lines and what they were drawn from

    def compose(self) -> ComposeResult:
        yield Panel(id="status")
        with Row(id="body"):
            with Column(id="left"):
                yield Panel(cpu.TITLE, id="cpu")
                yield Panel("Spin · CPU the worker burns", id="spin")
                yield Panel("GPU", id="gpu")
                yield Panel(memory.TITLE, id="memory")
            with Column(id="right"):
                yield Panel("Latency", id="latency")
                rep = Panel(replicas.TITLE, id="replicas")
                rep.display = False  # shown while the configuration has replicas (see _fit_heights)
                yield rep
                yield Panel("Model · session", id="model")
                yield Panel("Events", id="events")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#cpu", Panel).on_size = self.refit

    def on_screen_resume(self) -> None:
        """Back from a modal or the history: ask the app to catch up at once rather than at the next tick."""
        self.post_message(CatchUp())

    def draw(self, snap: Any, meters: Meters, *, bucket_s: float, window_s: float, fatal: str | None) -> None:
        """Hand each panel its drawing function; panels repaint only on change.

        Everything that moves by itself (meters, sparklines, figures, the elapsed seconds) is redrawn on frame
        ticks only, so that it all lands in one screen update; a tick between two frames repaints only what an
        event changed (a rebuild starting, a new event line). Each screen update has a fixed cost in Textual's
        compositor and in the terminal, so two updates a second instead of four is most of the UI's CPU.
        """
        self._meters = m = meters  # kept for a refit on resize, even before the first drawing
        if not self.is_mounted:
            return
        q = self.query_one
        reps = tuple(snap.replicas)
        shares = replicas.shares_key(reps)
        if shares != replicas.shares_key(self._replicas):
            self._owners = replicas.core_owners(reps)
        self._replicas = reps
        owners = self._owners
        self._fit_heights(m.cpu, m.gpu)
        busy = snap.state in BUSY_STATES
        elapsed = round(snap.state_elapsed, 1) if busy else int(snap.state_elapsed)
        evs = snap.events
        q("#status", Panel).show(lambda w, h: status.status_line(snap, w),
                                 (snap.state, elapsed if busy else m.frame, snap.config_id, len(snap.history)))
        q("#cpu", Panel).show(lambda w, h: cpu.cpu_panel(m.cpu, w, h, owners), (m.cpu, shares))
        gaps = snap.traffic.idle_gaps if snap.traffic is not None else ()
        q("#spin", Panel).show(lambda w, h: spin.spin_panel(snap.cpu, m.threads, w, h, m.process_history, gaps,
                                                                   snap.runs),
                               (m.slow, snap.config_id, snap.runs >= spin.SPIN_MIN_RUNS))
        q("#gpu", Panel).show(lambda w, h: gpu.gpu_panel(m.gpu, m.gpu_history, w, h), m.gpu)
        mem = snap.memory
        q("#memory", Panel).show(lambda w, h: memory.memory_panel(mem, snap.history, m.gpu, w, h),
                                 (mem.rss, mem.rss_peak, (mem.host_available or 0) >> 24, mem.leak, mem.rebuild,
                                  mem.rss_low, mem.series[-1:], len(mem.series),
                                  tuple((h.config_id, h.rss_peak, h.rss_delta) for h in snap.history), m.gpu))
        q("#latency", Panel).show(lambda w, h: latency.latency_panel(
            snap.series, snap.window, snap.latency, snap.runs, snap.throughput_per_s, bucket_s, w, h,
            snap.window_span_s if finite(snap.window_span_s) else window_s, snap.traffic,
            snap.window_rate_per_s, snap.state == "paused"),
            (m.frame, snap.config_id, snap.state))
        if reps:  # per-replica figures move like the latency panel's: redrawn on frame ticks
            rss = mem.rss
            q("#replicas", Panel).show(lambda w, h: replicas.replicas_panel(reps, snap.throughput_per_s, rss, w, h),
                                       (m.frame, snap.config_id, snap.state, shares))
        traffic = snap.traffic
        pace = pace_shortfall(snap.profile, snap.throughput_per_s, snap.runs, traffic)  # not kept: said at once
        by_shape = (m.frame, len(traffic.shapes)) if traffic is not None and traffic.shapes else None
        q("#model", Panel).show(lambda w, h: model.model_panel(snap, w, h, fatal, self._model_head(snap, w, fatal)),
                                (snap.state, elapsed if busy else None, snap.config_id, snap.pending, fatal,
                                 snap.providers_active, snap.profile, snap.worker_pid, snap.restarts, snap.create_ms,
                                 snap.notes, pace, by_shape))
        q("#events", Panel).show(lambda w, h: events.events_panel(evs, w, h),
                                 (len(evs), evs[-1] if evs else None))

    def _model_head(self, snap: Any, width: int, fatal: str | None) -> list[Any]:
        """The model panel's lines that change only with a rebuild, drawn again only when what they show changed:
        with a shape mix the panel is redrawn every frame for its figures, and these were most of its cost."""
        key = model.head_key(snap, width, fatal)
        if key != self._head[0]:
            self._head = (key, model.model_head(snap, width, fatal))
        return self._head[1]

    def refit(self) -> None:
        """Re-fit the content-sized panels after a resize (the breakpoints change column widths too)."""
        if self.is_mounted:
            try:
                self._fit_heights(self._meters.cpu, self._meters.gpu)
            except NoMatches:
                pass

    def _fit_heights(self, cpu_sample: Any, gpu_sample: Any) -> None:
        """Size the CPU and GPU panels to their content (core count, GPU count), leaving the rest to the spin panel
        (the memory panel's height is fixed by the stylesheet); show the replicas panel while there are replicas,
        sized to them, taking room from the events panel down to EVENTS_MIN lines.

        Only runs a layout when the inputs change (a resize, the first sample, a configuration with other
        replicas), not on every tick.
        """
        body = self.query_one("#body")
        cpu_panel = self.query_one("#cpu", Panel)
        gpu_panel = self.query_one("#gpu", Panel)
        latency_panel = self.query_one("#latency", Panel)
        n_cores = len(cpu_sample.per_core) if cpu_sample is not None else 0
        model_panel = self.query_one("#model", Panel)
        shares = replicas.shares_key(self._replicas)
        # the right column's fixed panels come in too: their heights settle with the first layout after a resize
        key = (n_cores, gpu.gpu_rows(gpu_sample), cpu_panel.size.width, body.size.height, tuple(self.classes),
               shares, latency_panel.size.width, latency_panel.outer_size.height, model_panel.outer_size.height)
        if key == self._fit_key or body.size.height <= 0 or cpu_panel.size.width <= 0:
            return
        self._fit_key = key
        frame = cpu_panel.outer_size.height - cpu_panel.size.height
        gpu_h = gpu.gpu_rows(gpu_sample) + frame
        mem_h = self.query_one("#memory", Panel).outer_size.height
        max_cpu = max(3, (body.size.height - gpu_h - mem_h) * 55 // 100 - frame)
        lines = cpu.cpu_panel(cpu_sample, cpu_panel.size.width, max_cpu, self._owners).plain.count("\n") + 1
        cpu_panel.styles.height = lines + frame
        gpu_panel.styles.height = gpu_h
        rep_panel = self.query_one("#replicas", Panel)
        rep_panel.display = bool(shares)
        if shares:
            taken = latency_panel.outer_size.height + model_panel.outer_size.height
            room = max(1, body.size.height - taken - (EVENTS_MIN + frame) - frame)
            rep_panel.styles.height = replicas.replicas_rows(self._replicas, latency_panel.size.width, room) + frame
