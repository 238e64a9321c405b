"""The ortop terminal UI: a live view over one Monitor, keys that turn the knobs the demo needs, and screens for
everything else. Built by one factory, :func:`make_app`, shared by ``ortop``, the tests and the snapshot apps.

The refresh tick reads a frozen Snapshot from the monitor (on every frame, and on any tick where the monitor's
generation moved, so a rebuild or a pause shows at once) and the collectors (on frames, every other tick: they
report load since their last call, so that is an average, not a loss), then
redraws inside one ``batch_update``. Each panel draws only when what it shows changed, and then repaints only its
changed lines. The UI shares the machine with the model it measures, so its own cost is on screen (the CPU panel's
``ui``) and kept to a few percent of one core.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile, ProfileError
from ortop.tui import render
from ortop.tui.keymap import MAIN_KEYS
from ortop.tui.screens import ExportScreen, HelpScreen, HistoryScreen, OpenScreen, SaveScreen, SettingsScreen, list_profiles
from ortop.tui.widgets import Panel

GPU_HISTORY = 240       # samples kept for the GPU and worker-CPU sparklines
METER_TICKS = 2         # the collectors are read (and the meters drawn) every this many ticks
BUSY_STATES = ("building", "warming", "starting")  # a rebuild under way: its elapsed time counts every tick
SLOW_S = 1.0            # noisy per-thread figures and the spin figures are averaged and redrawn at this period
RATE_CYCLE = (0.0, 100.0, 10.0)
BLOCK_BASE = 4


class Column(Vertical):
    """A layout-only column. BLANK: Textual re-renders every widget under a dirty region on each frame, and a
    container with nothing to draw should cost a blank strip per line, not a pass through the styles cache."""

    BLANK = True


class Row(Horizontal):
    """A layout-only row (see Column)."""

    BLANK = True


class MainScreen(Screen[None]):
    """The live view: CPU, spin, GPU on the left; latency, model / session and events on the right."""

    BLANK = True  # the panels cover it; see Column

    BINDINGS = [
        Binding(k.keys, f"app.{k.action}", k.label, show=k.footer, key_display=k.display or None)
        for k in MAIN_KEYS
    ]

    def compose(self) -> ComposeResult:
        yield Panel(id="status")
        with Row(id="body"):
            with Column(id="left"):
                yield Panel("CPU", id="cpu")
                yield Panel("Spin · CPU the worker burns", id="spin")
                yield Panel("GPU", id="gpu")
            with Column(id="right"):
                yield Panel("Latency", id="latency")
                yield Panel("Model · session", id="model")
                yield Panel("Events", id="events")
        yield Footer()

    def on_mount(self) -> None:
        app = self.app
        self.query_one("#cpu", Panel).on_size = lambda: app.refit() if isinstance(app, OrtopApp) else None

    def on_screen_resume(self) -> None:
        """Back from a modal or the history: catch up at once rather than at the next tick."""
        app = self.app
        if isinstance(app, OrtopApp) and app.ticks:
            app.tick()


class OrtopApp(App[int]):
    """ortop's Textual app. Use :func:`make_app` to build one."""

    CSS_PATH = "ortop.tcss"
    TITLE = "ortop"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall"), (46, "-taller")]

    def __init__(self, monitor: Any, *, cpu: Any = None, gpu: Any = None, refresh_hz: float = 4.0,
                 profile_dir: str | os.PathLike = "profiles", summary_path: str | os.PathLike | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.monitor = monitor
        self.cpu = cpu
        self.gpu = gpu
        self.refresh_hz = refresh_hz
        self.profile_dir = Path(profile_dir)
        self.summary_path = summary_path
        self.clock = clock
        self.started = clock()
        self.mounted: tuple[float, float] | None = None  # (process CPU s, clock) once the UI is up
        self.last_driver: Any = None  # the terminal driver, kept for after the app ends (see run_app)
        self.snap: Any = None
        self.cpu_sample: Any = None
        self.gpu_sample: Any = None
        self.gpu_history: dict[int, tuple[deque[float], deque[float]]] = {}
        self.process_history: deque[float] = deque(maxlen=GPU_HISTORY)  # worker CPU %, one value per SLOW_S
        self._cpu_window: list[Any] = []  # CPU samples since the last slow period
        self._meter_epoch = -1  # the current frame (see draw_main)
        self._generation: int | None = None  # the monitor's generation the last drawing saw
        self.cpu_shown: Any = None  # what the CPU meters show
        self.threads_avg: tuple[Any, ...] = ()
        self._slow_epoch = -1
        self.ticks = 0
        self.install_signals = False
        self.finished = False
        self.finish_errors: list[str] = []
        self._watched: int | None = None
        self._main: MainScreen | None = None
        self._settings: SettingsScreen | None = None  # built on first use, then reopened (see SettingsScreen.load)
        self._fit_key: tuple = ()

    # ---- lifecycle ----------------------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        self._main = MainScreen(id="main")
        return self._main

    def on_mount(self) -> None:
        if self.install_signals:
            self._install_signal_handlers()
        self.mounted = (time.process_time(), self.clock())
        self.last_driver = self._driver
        self.tick()
        if self.refresh_hz > 0:
            self.set_interval(1.0 / self.refresh_hz, self.tick, name="ortop-refresh")

    def _install_signal_handlers(self) -> None:
        """SIGTERM and SIGHUP end the app the way ``q`` does (settings kept, terminal restored).

        A plain ``signal.signal`` handler rather than the event loop's: when a terminal hangs up, the kernel sends
        SIGHUP and then SIGCONT, and Textual's SIGCONT handler restarts its input thread on the dead terminal,
        where it spins at 100 % of a core and keeps the process alive after the app has ended. Python runs the
        handlers of pending signals in signal-number order, so this one (SIGHUP is 1) drops the SIGCONT and
        SIGTSTP handlers before SIGCONT's is looked at.
        """
        loop = asyncio.get_running_loop()

        def on_signal(signum: int, frame: Any) -> None:
            if signum == signal.SIGHUP:
                release_job_control_signals()
            try:
                loop.call_soon_threadsafe(self.handle_signal, signum)
            except RuntimeError:
                pass  # the loop has closed: the app is already on its way out

        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                signal.signal(sig, on_signal)
            except (ValueError, OSError):
                pass  # not on the main thread, or a platform without the signal

    def handle_signal(self, signum: int = signal.SIGHUP) -> None:
        """SIGTERM / SIGHUP (the SSH link dropped): keep the settings, then leave with the terminal restored."""
        if self.finished:
            return  # already quitting (q, then the terminal closed)
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        self.monitor.add_event("info", f"{name}: saving the settings and quitting")
        self.finish()
        self.exit(0)

    def finish(self) -> None:
        """Write last-session.toml and the --summary JSON once, whichever way the app ends."""
        if self.finished:
            return
        self.finished = True
        from ortop.config.store import save_last_session

        snap = self.monitor.snapshot()
        if snap.history:
            try:
                save_last_session(snap.profile)
            except OSError as exc:
                self.finish_errors.append(f"cannot save the last session: {exc.strerror or exc}")
        if self.summary_path:
            self.write_summary(snap)

    def write_summary(self, snap: Any) -> None:
        """The same JSON summary as headless mode, plus what this UI process itself cost."""
        from ortop.engine.monitor import summary
        from ortop.fsutil import atomic_write_text

        now, cpu = self.clock(), time.process_time()
        wall = now - self.started
        monitor = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
        if self.mounted is not None:
            # The same, from the first frame on: what the live view costs, without imports and start-up.
            monitor["live_cpu_s"] = round(cpu - self.mounted[0], 3)
            monitor["live_wall_s"] = round(now - self.mounted[1], 3)
        data = summary(snap, duration_s=wall, gpu=gpu_summary(self.gpu_sample), extra={"monitor": monitor})
        try:
            atomic_write_text(str(self.summary_path), json.dumps(data, indent=2) + "\n")
        except OSError as exc:
            self.finish_errors.append(f"cannot write summary {self.summary_path}: {exc.strerror or exc}")

    # ---- the refresh tick ---------------------------------------------------------------------------------
    def tick(self) -> None:
        """Read the monitor and the collectors, then redraw what changed."""
        if self._exit or self.finished:
            return  # shutting down: widgets are going away
        self.ticks += 1
        now = self.clock()
        meter_s = METER_TICKS / self.refresh_hz if self.refresh_hz > 0 else 0.0
        meter_epoch = int(now / meter_s) if meter_s else self.ticks
        frame = meter_epoch != self._meter_epoch
        generation = getattr(self.monitor, "generation", None)
        if (not frame and generation is not None and generation == self._generation and self.snap is not None
                and self.snap.state not in BUSY_STATES and self._main_visible()):
            return  # between two frames nothing happened: no snapshot, no drawing
        self._generation = generation
        snap = self.monitor.snapshot()
        self.snap = snap
        pid = snap.worker_pid
        if pid != self._watched:
            self._watched = pid
            for c in (self.cpu, self.gpu):
                if c is not None:
                    c.watch(pid)
        if frame:
            # The collectors report load since their previous call, so sampling every METER_TICKS ticks *is* the
            # average over those ticks: half the /proc reads and half the repaints of a per-tick meter, which
            # over a quarter second is mostly noise anyway. Between frames only a change of state is drawn.
            self._meter_epoch = meter_epoch
            self.sample_collectors()
        epoch = int(now / SLOW_S)
        if epoch != self._slow_epoch:
            # Per-thread load is averaged over SLOW_S and its rows redrawn once per period.
            self._slow_epoch = epoch
            if self._cpu_window:
                self.threads_avg = render.average_threads([c.threads for c in self._cpu_window])
                procs = [c.process_percent for c in self._cpu_window if c.process_percent is not None]
                self.process_history.append(sum(procs) / len(procs) if procs else math.nan)
            self._cpu_window = []
        try:
            with self.batch_update():
                if self._main_visible():
                    self.draw_main(snap, frame)
                top = self.screen_stack[-1] if self.screen_stack else None
                if isinstance(top, HistoryScreen) and top.is_mounted:
                    top.refresh_data(snap)
        except NoMatches:
            pass  # a screen being composed or torn down between two ticks

    def sample_collectors(self) -> None:
        """One CPU and one GPU sample (each covers the time since the previous one)."""
        if self.cpu is not None:
            self.cpu_sample = self.cpu_shown = self.cpu.sample()
            self._cpu_window.append(self.cpu_sample)
        if self.gpu is not None:
            self.gpu_sample = self.gpu.sample()
            for d in self.gpu_sample.devices:
                mem, util = self.gpu_history.setdefault(d.index, (deque(maxlen=GPU_HISTORY), deque(maxlen=GPU_HISTORY)))
                mem.append(float(d.mem_used))
                util.append(math.nan if d.util_percent is None else float(d.util_percent))

    def _main_visible(self) -> bool:
        """Only while the live view is the top screen. Under a modal it freezes: Textual repaints the modal over
        every change beneath it, and a settings form of a hundred widgets repainted at 4 Hz costs a third of a
        core, enough to make typing lag on a 2-core host. It catches up on the first tick after the modal closes."""
        stack = self.screen_stack
        return bool(stack) and stack[-1] is self._main

    def draw_main(self, snap: Any, frame: bool = True) -> None:
        """Hand each panel its drawing function; panels repaint only on change.

        Everything that moves by itself (meters, sparklines, figures, the elapsed seconds) is redrawn on frame
        ticks only, so that it all lands in one screen update; a tick between two frames repaints only what an
        event changed (a rebuild starting, a new event line). Each screen update has a fixed cost in Textual's
        compositor and in the terminal, so two updates a second instead of four is most of the UI's CPU.
        """
        main = self._main
        if main is None or not main.is_mounted:
            return
        cpu, gpu, monitor = self.cpu_shown, self.gpu_sample, self.monitor
        threads = self.threads_avg
        fatal = getattr(monitor, "fatal", None)
        q = main.query_one
        self._fit_heights(main, cpu, gpu)
        busy = snap.state in BUSY_STATES
        elapsed = round(snap.state_elapsed, 1) if busy else int(snap.state_elapsed)
        events = snap.events
        q("#status", Panel).show(lambda w, h: render.status_line(snap, w),
                                 (snap.state, elapsed if busy else self._meter_epoch, snap.config_id,
                                  len(snap.history)))
        q("#cpu", Panel).show(lambda w, h: render.cpu_panel(cpu, w, h), cpu)
        history = tuple(self.process_history)
        q("#spin", Panel).show(lambda w, h: render.spin_panel(snap.cpu, threads, w, h, history),
                               (self._slow_epoch, snap.config_id))
        q("#gpu", Panel).show(lambda w, h: render.gpu_panel(gpu, self.gpu_history, w, h), gpu)
        q("#latency", Panel).show(lambda w, h: render.latency_panel(
            snap.series, snap.window, snap.latency, snap.runs, snap.throughput_per_s, monitor.bucket_s, w, h,
            getattr(monitor, "window_s", 5.0)),
            (self._meter_epoch, snap.config_id, snap.state))
        q("#model", Panel).show(lambda w, h: render.model_panel(snap, w, h, fatal),
                                (snap.state, elapsed if busy else None, snap.config_id, snap.pending, fatal,
                                 snap.providers_active, snap.profile, snap.worker_pid, snap.restarts, snap.create_ms))
        q("#events", Panel).show(lambda w, h: render.events_panel(events, w, h),
                                 (len(events), events[-1] if events else None))

    def refit(self) -> None:
        """Re-fit the content-sized panels after a resize (the breakpoints change column widths too)."""
        if self._main is not None and self._main.is_mounted:
            try:
                self._fit_heights(self._main, self.cpu_shown, self.gpu_sample)
            except NoMatches:
                pass

    def _fit_heights(self, main: MainScreen, cpu: Any, gpu: Any) -> None:
        """Size the CPU and GPU panels to their content (core count, GPU count), leaving the rest to the spin panel.

        Only runs a layout when the inputs change (a resize, the first sample), not on every tick.
        """
        body = main.query_one("#body")
        cpu_panel = main.query_one("#cpu", Panel)
        gpu_panel = main.query_one("#gpu", Panel)
        n_cores = len(cpu.per_core) if cpu is not None else 0
        key = (n_cores, render.gpu_rows(gpu), cpu_panel.size.width, body.size.height, tuple(main.classes))
        if key == self._fit_key or body.size.height <= 0 or cpu_panel.size.width <= 0:
            return
        self._fit_key = key
        frame = cpu_panel.outer_size.height - cpu_panel.size.height
        gpu_h = render.gpu_rows(gpu) + frame
        max_cpu = max(3, (body.size.height - gpu_h) * 55 // 100 - frame)
        lines = render.cpu_panel(cpu, cpu_panel.size.width, max_cpu).plain.count("\n") + 1
        cpu_panel.styles.height = lines + frame
        gpu_panel.styles.height = gpu_h

    # ---- applying changes ---------------------------------------------------------------------------------
    def current_profile(self) -> Profile:
        """What the next change builds on: the profile being built if a rebuild is pending, else the running one.

        Two quick presses of ``+`` then stack (1 → 2 → 3) instead of both asking for 2.
        """
        snap = self.monitor.snapshot()
        return snap.pending or snap.profile

    def apply_profile(self, profile: Profile) -> int:
        """Hand a profile to the monitor (validates synchronously; raises ProfileError / ModelError)."""
        cid = self.monitor.apply(profile)
        self.tick()
        return cid

    def apply_changes(self, what: str, **changes: Any) -> bool:
        """Merge dotted-key changes into the current profile and apply; a refusal is shown, not raised."""
        from ortop.model import ModelError

        try:
            new = profile_mod.merge(self.current_profile(), **changes)
            self.apply_profile(new)
        except (ProfileError, ModelError) as exc:
            self.monitor.add_event("error", f"{what} refused: {exc}")
            self.notify(str(exc), title=f"{what} refused", severity="error")
            self.tick()
            return False
        return True

    # ---- actions (keys, footer, command palette) ----------------------------------------------------------
    def _threads_now(self, prof: Profile) -> int:
        n = prof.session.intra_op_num_threads
        if n:
            return n
        from ortop.collectors.cpu import physical_cores

        return physical_cores()

    def _thread_changes(self, n: int) -> dict[str, Any]:
        ch: dict[str, Any] = {"session.intra_op_num_threads": n}
        prof = self.current_profile()
        if prof.session.intra_op_thread_affinities is not None:
            ch["session.intra_op_thread_affinities"] = None  # pinned for another thread count
            self.monitor.add_event("info", "thread affinity cleared: it was set for another thread count")
        return ch

    def action_threads_up(self) -> None:
        n = min(os.cpu_count() or 1, self._threads_now(self.current_profile()) + 1)
        self.apply_changes("threads +", **self._thread_changes(n))

    def action_threads_down(self) -> None:
        n = max(1, self._threads_now(self.current_profile()) - 1)
        self.apply_changes("threads -", **self._thread_changes(n))

    def action_toggle_spinning(self) -> None:
        on = self.current_profile().session.allow_spinning
        self.apply_changes("spinning", **{"session.allow_spinning": None if on is False else False})

    def action_cycle_rate(self) -> None:
        rate = self.current_profile().workload.rate_hz
        nxt = RATE_CYCLE[(RATE_CYCLE.index(rate) + 1) % len(RATE_CYCLE)] if rate in RATE_CYCLE else 0.0
        self.apply_changes("rate", **{"workload.rate_hz": nxt})

    def action_toggle_block_base(self) -> None:
        cur = self.current_profile().session.dynamic_block_base
        self.apply_changes("dynamic_block_base", **{"session.dynamic_block_base": None if cur else BLOCK_BASE})

    def action_toggle_pause(self) -> None:
        if self.monitor.snapshot().state == "paused":
            self.monitor.resume()
        else:
            self.monitor.pause()
        self.tick()

    def action_reset_stats(self) -> None:
        self.monitor.reset_stats()
        self.tick()

    def action_history(self) -> None:
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen())

    def action_settings(self) -> None:
        if isinstance(self.screen, SettingsScreen):
            return
        if self._settings is None:
            self._settings = SettingsScreen(self.current_profile())
            self.install_screen(self._settings, "settings")
        else:
            self._settings.load(self.current_profile())
        self.push_screen("settings")

    def action_save_profile(self) -> None:
        self.ask_save(self.monitor.snapshot().profile)

    def action_open_profile(self) -> None:
        self.push_screen(OpenScreen(list_profiles(self.profile_dir)))

    def action_export(self) -> None:
        self.push_screen(ExportScreen(self.monitor.snapshot().profile))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self.finish()
        self.exit(0)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for k in MAIN_KEYS:
            if k.action == "quit":
                continue
            key = k.display or k.keys.split(",")[0]
            yield SystemCommand(f"{k.label} ({key})", k.help, getattr(self, f"action_{k.action}"))

    # ---- files ----------------------------------------------------------------------------------------------
    def ask_save(self, profile: Profile, default_name: str = "") -> None:
        """The save modal for ``profile`` (the running one, or a history row's)."""
        if not default_name:
            stem = Path(self.monitor.model_path).stem
            default_name = f"{stem}-config-{self.monitor.snapshot().config_id}"
        self.push_screen(SaveScreen(profile, default_name))

    def profile_path(self, name: str) -> Path | None:
        """Where a profile called ``name`` goes: the profile folder, a safe file name, ``.toml`` added."""
        clean = sanitize_name(name)
        return self.profile_dir / f"{clean}.toml" if clean else None

    def save_profile_to(self, profile: Profile, path: Path) -> Path:
        """Write a profile (atomically, via profile.save) and log it; the model path is made absolute so the
        file works from any folder."""
        if profile.model and not os.path.isabs(profile.model):
            profile = replace(profile, model=os.path.abspath(profile.model))
        out = profile_mod.save(profile, path, header="Saved by ortop from the live session.")
        self.monitor.add_event("info", f"profile saved: {out}")
        self.notify(f"saved {out}", title="profile")
        self.tick()
        return out

    def write_export(self, text: str, ext: str) -> Path:
        """Write exported text next to the profiles under a name not taken yet (never overwrites)."""
        from ortop.fsutil import atomic_write_text

        stem = sanitize_name(Path(self.monitor.model_path).stem) or "ortop"
        path = self.profile_dir / f"{stem}-export{ext}"
        n = 2
        while path.exists():
            path = self.profile_dir / f"{stem}-export-{n}{ext}"
            n += 1
        out = atomic_write_text(path, text if text.endswith("\n") else text + "\n")
        self.monitor.add_event("info", f"export written: {out}")
        return out


def sanitize_name(name: str) -> str:
    """A file-name-safe profile name: letters, digits, ``.``, ``-`` and ``_``; a ``.toml`` suffix is dropped."""
    name = name.strip()
    if name.lower().endswith(".toml"):
        name = name[:-5]
    name = os.path.basename(name)
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")
    return clean[:80]


def gpu_summary(sample: Any) -> Any:
    """GPU figures for the JSON summary, in the shape headless mode writes; None without a GPU."""
    if sample is None or not sample.devices:
        return None
    return [
        {"index": d.index, "name": d.name, "mem_used": d.mem_used, "mem_total": d.mem_total,
         "util_percent": d.util_percent, "worker_mem": d.process_mem}
        for d in sample.devices
    ]


def make_app(monitor: Any, *, cpu: Any = None, gpu: Any = None, refresh_hz: float = 4.0,
             profile_dir: str | os.PathLike = "profiles", summary_path: str | os.PathLike | None = None,
             clock: Callable[[], float] = time.monotonic) -> OrtopApp:
    """The one way an OrtopApp is built: by ``ortop``, the Pilot tests and the snapshot apps alike.

    ``refresh_hz`` 0 means no timer: the caller ticks (:meth:`OrtopApp.tick`), which keeps snapshots deterministic.
    """
    return OrtopApp(monitor, cpu=cpu, gpu=gpu, refresh_hz=refresh_hz, profile_dir=profile_dir,
                    summary_path=summary_path, clock=clock)


def release_job_control_signals() -> None:
    """Back to the default SIGCONT / SIGTSTP handling, which Textual's driver takes over for ctrl+z and never gives
    back; a SIGCONT after the app has stopped must not start its input thread again."""
    for sig in ("SIGCONT", "SIGTSTP"):
        if hasattr(signal, sig):
            try:
                signal.signal(getattr(signal, sig), signal.SIG_DFL)
            except (ValueError, OSError):
                pass  # not the main thread


def stop_input_thread(driver: Any) -> None:
    """Make sure no input thread of ``driver`` outlives the app (it would keep the process alive)."""
    event = getattr(driver, "exit_event", None)
    if event is not None:
        event.set()


def run_app(model_path: str, profile: Profile, args: Any) -> int:
    """Run the UI on a real Monitor until q, SIGTERM or SIGHUP; returns the exit code (1 if the model failed)."""
    from ortop.collectors.cpu import PsutilCpuCollector
    from ortop.collectors.gpu import make_gpu_collector
    from ortop.engine.monitor import Monitor

    monitor = Monitor(model_path, profile, strict_providers=getattr(args, "strict_providers", False))
    gpu = make_gpu_collector()
    hz = float(getattr(args, "refresh", 4.0) or 4.0)
    app = make_app(monitor, cpu=PsutilCpuCollector(), gpu=gpu, refresh_hz=min(30.0, max(0.5, hz)),
                   profile_dir=getattr(args, "profile_dir", "profiles") or "profiles",
                   summary_path=getattr(args, "summary", None))
    app.install_signals = True
    monitor.start()
    try:
        app.run()
    finally:
        release_job_control_signals()
        stop_input_thread(app.last_driver)
        try:
            app.finish()
        finally:
            monitor.stop()
            gpu.close()
    for msg in app.finish_errors:
        print(f"ortop: error: {msg}", file=sys.stderr)
    if monitor.fatal:
        print(f"ortop: error: {monitor.fatal}", file=sys.stderr)
        return 1
    return 1 if app.return_code else 0
