"""The ortop terminal UI: a live view over one Monitor, keys that turn the knobs the demo needs, and screens for
everything else. Built by one factory, :func:`make_app`, shared by ``ortop``, the tests and the snapshot apps.

The refresh tick reads a frozen Snapshot from the monitor (on every frame, and on any tick where the monitor's
generation moved, so a rebuild or a pause shows at once) and the collectors (on frames, every other tick: they
report load since their last call, so that is an average, not a loss), then
redraws inside one ``batch_update``. Each panel draws only when what it shows changed, and then repaints only its
changed lines. The UI shares the machine with the model it measures, so its own cost is on screen (the CPU panel's
``ui``) and kept to a few percent of one core.

Screens hand back what the user chose (a modal's ``dismiss(result)`` to the callback given here, or a message from
:mod:`ortop.tui.messages`); the app acts on it: the monitor for profiles, :mod:`ortop.tui.actions` for files.

Over ~680 lines: composition, the key actions (a quick key that changes nothing says so, one that drops a setting
asks first), what the screens hand back (each answer a small callback: the save, open and export-name modals) and
the snapshot loop; every panel, screen and file action is in a module of its own.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events, on
from textual.app import App, SystemCommand
from textual.css.query import NoMatches
from textual.screen import Screen

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile, ProfileError
from ortop.measure.arrivals import FIXED, POISSON, mode_of
from ortop.model import ModelError
from ortop.tui import actions, messages, quick
from ortop.tui._compat import (
    install_hangup_handlers,
    release_before_stop,
    release_job_control_signals,
    resume_only_after_suspend,
    stop_input_thread,
)
from ortop.tui.keymap import MAIN_KEYS
from ortop.tui.meters import MeterState
from ortop.tui.noload import NoLoad, measured
from ortop.tui.panels._format import BUSY_STATES  # a rebuild under way: its elapsed time counts every tick
from ortop.tui.screens.capacity import CapacityScreen, SearchFactory
from ortop.tui.screens.capacity import Choices as CapacityChoices
from ortop.tui.screens.confirm import ConfirmScreen
from ortop.tui.screens.doctor import DoctorScreen
from ortop.tui.screens.export import ExportScreen
from ortop.tui.screens.help import HelpScreen
from ortop.tui.screens.history import HistoryScreen
from ortop.tui.screens.job import JobScreen
from ortop.tui.screens.main import MainScreen
from ortop.tui.screens.open import OpenScreen
from ortop.tui.screens.save import SaveAs, SaveScreen
from ortop.tui.screens.settings import SettingsScreen
from ortop.tui.screens.shapes import ShapesScreen
from ortop.tui.screens.tune import TunerFactory, TuneScreen

if TYPE_CHECKING:
    from ortop.engine import Monitor, MonitorView, Snapshot

METER_TICKS = 2         # the collectors are read (and the meters drawn) every this many ticks
KEY_HOLD_MAX_S = 3.0    # keys are held at most this long while a screen opens (see _hold_keys)
SLOW_S = 1.0            # noisy per-thread figures and the spin figures are averaged and redrawn at this period


class OrtopApp(App[int]):
    """ortop's Textual app. Use :func:`make_app` to build one."""

    CSS_PATH = "ortop.tcss"
    TITLE = "ortop"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall"), (46, "-taller")]

    def __init__(self, monitor: MonitorView, *, cpu: Any = None, gpu: Any = None, refresh_hz: float = 2.0,
                 profile_dir: str | os.PathLike = "profiles", summary_path: str | os.PathLike | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.monitor = monitor
        self.refresh_hz = refresh_hz
        self.profile_dir = Path(profile_dir)
        self.summary_path = summary_path
        self.clock = clock
        self.started = clock()
        self.mounted: tuple[float, float] | None = None  # (process CPU s, clock) once the UI is up
        self.last_driver: Any = None  # the terminal driver, kept for after the app ends (see run_app)
        self.snap: Snapshot | None = None
        self.meters = MeterState(cpu, gpu)
        self._meter_epoch = -1  # the current frame (see MainScreen.draw)
        self._generation: int | None = None  # the monitor's generation the last drawing saw
        self._slow_epoch = -1
        self.ticks = 0
        self.install_signals = False
        self.finished = False
        self.finish_errors: list[str] = []
        self._main: MainScreen | None = None
        self._settings: SettingsScreen | None = None  # built on first use, then reopened (see SettingsScreen.load)
        self._live_held_by: set[str] = set()  # screens running workers (doctor, tune, capacity): the live one waits
        self._held_paused = False  # the live session was running when the first of them took hold, and is paused
        self.tuner_factory: TunerFactory | None = None  # the tune screen's search (None: the real one)
        self.capacity_factory: SearchFactory | None = None  # the capacity screen's search (None: the real one)
        self.capacity_choices = CapacityChoices()  # the capacity screen's SLO, budget, alternative, kept
        self._origins: dict[str, str] = {}  # profile_key -> where a profile applied from a screen came from
        self._keys_held: tuple[float, float | None] | None = None  # (since, ready) while a screen opens
        self.keys_dropped = 0
        self.objective: str | None = None  # the objective the user picked (tune's o): what v judges; None: the change's

    # ---- lifecycle ----------------------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        self._main = MainScreen(id="main")
        return self._main

    def on_mount(self) -> None:
        if self.install_signals:
            install_hangup_handlers(self.handle_signal)
            release_before_stop(self._driver)
            resume_only_after_suspend(self._driver)
        self.mounted = (time.process_time(), self.clock())
        self.last_driver = self._driver
        self.tick()
        if self.refresh_hz > 0:
            self.set_interval(1.0 / self.refresh_hz, self.tick, name="ortop-refresh")

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
        """Keep the last session (for --resume) and write the --summary JSON once, whichever way the app ends."""
        if self.finished:
            return
        self.finished = True
        now, cpu = self.clock(), time.process_time()
        wall = now - self.started
        ui_cost = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
        if self.mounted is not None:
            # The same, from the first frame on: what the live view costs, without imports and start-up.
            ui_cost["live_cpu_s"] = round(cpu - self.mounted[0], 3)
            ui_cost["live_wall_s"] = round(now - self.mounted[1], 3)
        self.finish_errors += actions.finish_session(self.monitor.snapshot(), summary_path=self.summary_path,
                                                     duration_s=wall, gpu_sample=self.meters.gpu_sample,
                                                     ui_cost=ui_cost)

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
        generation = self.monitor.generation
        if (not frame and generation is not None and generation == self._generation and self.snap is not None
                and self.snap.state not in BUSY_STATES and self._main_visible()):
            return  # between two frames nothing happened: no snapshot, no drawing
        self._generation = generation
        snap = self.monitor.snapshot()
        self.snap = snap
        self.meters.watch(snap.worker_pid)
        self.meters.follow(building=snap.pending is not None, verifying=snap.verifying is not None)
        if frame:
            # The collectors report load since their previous call, so sampling every METER_TICKS ticks *is* the
            # average over those ticks: half the /proc reads and half the repaints of a per-tick meter, which
            # over a quarter second is mostly noise anyway. Between frames only a change of state is drawn.
            self._meter_epoch = meter_epoch
            self.meters.sample()
        epoch = int(now / SLOW_S)
        if epoch != self._slow_epoch:
            # Per-thread load is averaged over SLOW_S and its rows redrawn once per period.
            self._slow_epoch = epoch
            self.meters.close_period()
        try:
            with self.batch_update():
                if self._main_visible():
                    self.draw_main(snap)
                top = self.screen_stack[-1] if self.screen_stack else None
                if isinstance(top, (HistoryScreen, ShapesScreen)) and top.is_mounted:
                    top.refresh_data(snap)
        except NoMatches:
            pass  # a screen being composed or torn down between two ticks

    def _main_visible(self) -> bool:
        """Only while the live view is the top screen. Under a modal it freezes: Textual repaints the modal over
        every change beneath it, and a settings form of a hundred widgets repainted at 4 Hz costs a third of a
        core, enough to make typing lag on a 2-core host. It catches up on the first tick after the modal closes."""
        stack = self.screen_stack
        return bool(stack) and stack[-1] is self._main

    def draw_main(self, snap: Snapshot) -> None:
        """Hand the live view the snapshot and what the collectors showed (see MainScreen.draw)."""
        if self._main is None:
            return
        monitor, meters = self.monitor, self.meters.view(self._meter_epoch, self._slow_epoch)
        self._main.draw(snap, meters, bucket_s=monitor.bucket_s, window_s=monitor.window_s, fatal=monitor.fatal)

    @on(messages.CatchUp)
    def _catch_up(self) -> None:
        if self.ticks:
            self.tick()

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
        """Merge dotted-key changes into the current profile and apply; a refusal is shown, not raised, and a change
        that leaves the profile as it is says so and rebuilds nothing."""
        try:
            current = self.current_profile()
            new = profile_mod.merge(current, **changes)
            if new == current:
                self.notify("the profile already has it: nothing rebuilt", title=what)
                return False
            self.apply_profile(new)
        except (ProfileError, ModelError) as exc:
            self.monitor.add_event("error", f"{what} refused: {exc}")
            self.notify(str(exc), title=f"{what} refused", severity="error")
            self.tick()
            return False
        return True

    # ---- actions (keys, footer, command palette) ----------------------------------------------------------
    def _quick(self, q: quick.Quick) -> None:
        """Apply a quick key's change; one that changes nothing says why, one that drops a setting asks first."""
        what = q.what
        if q.noop:  # said in the events too: a toast alone is gone in seconds, and easily missed
            self.monitor.add_event("info", f"{what}: {q.message}")
            self.notify(q.message, title=what, severity="warning")
            self.tick()
            return

        def go(yes: bool | None = True) -> None:
            if not yes:
                self.notify("nothing changed", title=what)
                return
            if not self.apply_changes(what, **q.changes):
                return
            if q.message:
                self.monitor.add_event("warning", q.message)
                self.notify(q.message, title=what, severity="warning")
            if q.info:
                self.monitor.add_event("info", f"{what}: {q.info}")
                self.notify(q.info, title=what)

        if q.confirm:
            self.push_screen(ConfirmScreen(q.confirm), go)
        else:
            go()

    def action_threads_up(self) -> None:
        self._quick(quick.threads(self.current_profile(), +1, running=self.meters.intra_op_threads()))

    def action_threads_down(self) -> None:
        self._quick(quick.threads(self.current_profile(), -1, running=self.meters.intra_op_threads()))

    def action_toggle_spinning(self) -> None:
        self._quick(quick.spinning(self.current_profile()))

    def _no_load(self, profile: Profile) -> NoLoad | None:
        """These settings at no load in this session: their closed loop, else the running open arrivals' service
        time (None: neither measured yet)."""
        return measured(self.monitor.snapshot(), profile)

    def _open_arrivals(self, profile: Profile) -> str:
        """The open arrival mode R comes back to from a closed loop: the latest this session ran (``profile``, then
        the history's rows, newest first), fixed when none."""
        profiles = (profile, *(r.profile for r in reversed(self.monitor.snapshot().history)))
        return next((m for m in (mode_of(p.workload) for p in profiles) if m in (FIXED, POISSON)), FIXED)

    def action_cycle_rate(self) -> None:
        profile = self.current_profile()
        m = self._no_load(profile)
        self._quick(quick.rate(profile, m.ceiling_per_s if m else None, arrivals=self._open_arrivals(profile),
                               estimate=m.estimate() if m else ""))

    def action_cycle_arrival(self) -> None:
        profile = self.current_profile()
        m = self._no_load(profile)
        self._quick(quick.arrival(profile, m.ceiling_per_s if m else None, estimate=m.estimate() if m else ""))

    def action_cycle_affinity(self) -> None:
        sample = self.meters.cpu_sample  # the cores the CPU panel shows (None before the first sample: this host's)
        logical = len(sample.per_core) if sample is not None and sample.per_core else None
        self._quick(quick.affinity(self.current_profile(), logical=logical, running=self.meters.intra_op_threads()))

    def action_toggle_block_base(self) -> None:
        self._quick(quick.block_base(self.current_profile()))

    def action_toggle_pause(self) -> None:
        if self.monitor.snapshot().state == "paused":
            self.monitor.resume()
        else:
            self.monitor.pause()
        self.tick()

    def action_verify(self) -> None:
        rows: tuple[Any, ...] = self.snap.history if self.snap is not None else ()
        if len(rows) < 2:
            self.notify("nothing to verify yet: change a setting first, then v compares it with the one before",
                        severity="warning")
            return
        note = self.start_verify(rows[-1].config_id)
        self.notify(note, severity="error" if note.startswith("✗") else "information")

    def action_reset_stats(self) -> None:
        self.monitor.reset_stats()
        self.tick()

    def action_history(self) -> None:
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen(self.snap))

    def action_shapes(self) -> None:
        if not isinstance(self.screen, ShapesScreen):
            self.push_screen(ShapesScreen(self.monitor.snapshot()))

    def action_doctor(self) -> None:
        if not isinstance(self.screen, DoctorScreen):
            gpus = getattr(self.meters.gpu_sample, "devices", ())
            self.push_screen(DoctorScreen(self.monitor.snapshot(), gpus=gpus, cpu=self.meters.cpu_sample))

    def action_tune(self) -> None:
        if not isinstance(self.screen, TuneScreen):
            profile = self.current_profile()
            self.push_screen(TuneScreen(profile, tuner_factory=self.tuner_factory, no_load=self._no_load(profile)))

    def action_capacity(self) -> None:
        if not isinstance(self.screen, CapacityScreen):
            profile = self.current_profile()
            self.push_screen(CapacityScreen(profile, search_factory=self.capacity_factory,
                                            no_load=self._no_load(profile),
                                            choices=self.capacity_choices))

    def action_settings(self) -> None:
        if isinstance(self.screen, SettingsScreen):
            return
        if self._settings is None:
            self._settings = SettingsScreen(self.current_profile())
            self.install_screen(self._settings, "settings")
        else:
            self._settings.load(self.current_profile())
        settings, profile = self._settings, self.current_profile()
        # keys typed before the form was up may have reached its first field through the live view's queue: the
        # form shows the profile again once it is ready (values set through set_value meanwhile stay)
        self._hold_keys(settings, lambda: settings.load(profile, keep=settings.set_keys))
        self.push_screen("settings", self._settings_closed)

    def _hold_keys(self, screen: Screen, on_ready: Callable[[], None] | None = None) -> None:
        """Drop the keys typed while ``screen`` opens (a settings form of a hundred fields takes half a second of
        CPU to build on a busy host): meant for the live view, they would land in its first field. The screen is
        ready once it has drawn (its first refresh after mounting)."""
        self._keys_held = (time.monotonic(), None)  # textual stamps events with time.monotonic on Linux

        def ready() -> None:
            if self._keys_held is not None:
                self._keys_held = (self._keys_held[0], time.monotonic())
            if on_ready is not None:
                on_ready()

        screen.call_after_refresh(ready)

    async def on_event(self, event: events.Event) -> None:
        held = self._keys_held
        if held is not None and isinstance(event, events.Key):  # forwarded too: the live view hands keys back
            since, ready = held
            if ready is None and event.time - since > KEY_HOLD_MAX_S:
                ready = since  # the screen never said it was drawn: stop holding keys
            if ready is None or event.time < ready:
                self.keys_dropped += 1
                return  # typed before the screen could show where it would go
            self._keys_held = None
        await super().on_event(event)

    def action_save_profile(self) -> None:
        self.ask_save(self.monitor.snapshot().profile)

    def action_open_profile(self) -> None:
        self.ask_open()

    def action_export(self) -> None:
        self.push_screen(ExportScreen(self.monitor.snapshot().profile))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            meter_s = METER_TICKS / self.refresh_hz if self.refresh_hz > 0 else 0.5
            self.push_screen(HelpScreen(bucket_s=self.monitor.bucket_s, window_s=self.monitor.window_s,
                                        meter_s=meter_s, slow_s=SLOW_S))

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

    # ---- what the screens hand back -----------------------------------------------------------------------
    def _settings_closed(self, profile: Profile | None) -> None:
        """Apply what the settings form built. A refusal by the monitor (a core this host lacks, inputs the model
        cannot take) reopens the same form, what the user typed still in it, with each error beside its field."""
        if profile is None or self._settings is None:
            return
        try:
            self.apply_profile(profile)
        except (ProfileError, ModelError) as exc:
            self.push_screen("settings", self._settings_closed)
            self._settings.show_errors(exc)

    def origin(self, profile: Profile) -> str:
        """Where ``profile`` came from, as a saved file's description says it: tuned or sized when the live
        session got it from the tune or capacity screen, else the live view's own."""
        from ortop.engine import profile_key

        return self._origins.get(profile_key(profile), actions.LIVE)

    def ask_save(self, profile: Profile, default_name: str = "", message: Text | None = None,
                 origin: str | None = None) -> None:
        """The save modal for ``profile`` (the running one, a history row's, one a screen offers); the file is
        written on its answer, described by ``origin`` (left out: :meth:`origin`)."""
        said = origin or self.origin(profile)
        if not default_name:
            stem = Path(self.monitor.model_path).stem
            default_name = f"{stem}-config-{self.monitor.snapshot().config_id}"

        def answered(choice: SaveAs | None) -> None:
            if choice is None:
                return
            try:
                out = actions.save_profile(profile, choice.path, said)
            except actions.WRITE_ERRORS as exc:
                self.ask_save(profile, choice.name, Text(f"✗ {actions.why_not(exc, choice.path)}", style="bold red"),
                              said)
                return
            self.monitor.add_event("info", f"profile saved: {out}")
            self.notify(f"saved {out}", title="profile")
            self.tick()

        self.push_screen(SaveScreen(self.profile_dir, default_name, message), answered)

    def ask_open(self, message: Text | None = None, highlight: Path | None = None) -> None:
        """The open modal; the chosen profile is loaded and applied, and a refusal asks again with the reason.

        Sections the file lacks keep their running values (see :func:`actions.open_profile`), and the event says
        which were kept, so a profile of session knobs does not silently reset a paced rate."""
        def answered(path: Path | None) -> None:
            if path is None:
                return
            try:
                profile, kept = actions.open_profile(path, self.current_profile())
                self.apply_profile(profile)
            except (ProfileError, ModelError) as exc:
                self.ask_open(Text(f"✗ {exc}", style="bold red"), path)
                return
            note = f"profile opened: {path.name}"
            if kept:
                note += f" (no [{'], ['.join(kept)}] in it: running values kept)"
            self.monitor.add_event("info", note)
            self.tick()

        screen = OpenScreen(actions.list_profiles(self.profile_dir), self.profile_dir, message=message,
                            highlight=highlight)
        self.push_screen(screen, answered)

    @on(TuneScreen.ObjectiveChosen)
    def _objective_chosen(self, message: TuneScreen.ObjectiveChosen) -> None:
        self.objective = message.objective

    @on(HistoryScreen.VerifyRow)
    def _verify_row(self, message: HistoryScreen.VerifyRow) -> None:
        note = self.start_verify(message.record.config_id)
        message.screen.show_message(Text(note, style="green" if note.startswith("verifying") else "bold red"))

    def start_verify(self, config_id: int) -> str:
        """Ask the monitor to verify a row against the one before it; what happened, in one line.

        On a key, not after every rebuild: a verification builds both configurations again and alternates them for
        seconds, which would hijack the live view after each quick key on stage; the sequential figure shows at
        once, marked "unverified", and the user asks for the proof when it matters.
        """
        try:
            self.monitor.verify(config_id, metric=self.objective)
        except ValueError as exc:
            return f"✗ {exc}"
        self.tick()
        return f"verifying #{config_id} against the row before it: the two alternate for a few seconds"

    @on(HistoryScreen.ApplyRow)
    def _apply_row(self, message: HistoryScreen.ApplyRow) -> None:
        rec = message.record
        try:
            self.apply_profile(rec.profile)
        except (ProfileError, ModelError) as exc:
            message.screen.show_message(Text(f"✗ {exc}", style="bold red"))
            return
        message.screen.show_message(Text(f"re-applying #{rec.config_id}: the session rebuilds", style="green"))

    @on(HistoryScreen.SaveRow)
    def _save_row(self, message: HistoryScreen.SaveRow) -> None:
        self.ask_save(message.record.profile, default_name=f"config-{message.record.config_id}")

    @on(HistoryScreen.ExportRow)
    def _export_row(self, message: HistoryScreen.ExportRow) -> None:
        self.push_screen(ExportScreen(message.record.profile))

    @on(DoctorScreen.ApplyPatch)
    def _doctor_apply(self, message: DoctorScreen.ApplyPatch) -> None:
        f = message.finding
        message.screen.patch_applied(f, self.apply_changes(f"doctor {f.check}", **(f.profile_patch or {})))

    def hold_live(self, who: str) -> None:
        """Pause the live session while ``who`` runs worker processes of its own (they must not compete for the
        cores); a session the user had paused stays paused, and nothing resumes until every holder lets go."""
        if not self._live_held_by and self.monitor.snapshot().state != "paused":
            self._held_paused = True
            self.monitor.pause()
        self._live_held_by.add(who)

    def release_live(self, who: str) -> None:
        """``who``'s workers are gone: the live session resumes once no one holds it (if holding paused it)."""
        self._live_held_by.discard(who)
        if not self._live_held_by and self._held_paused:
            self._held_paused = False
            self.monitor.resume()
            self.tick()

    @on(DoctorScreen.Measure)
    def _doctor_measure(self, message: DoctorScreen.Measure) -> None:
        """The measured checks run workers of their own: the live one waits, paused, until they are done."""
        self.hold_live("doctor")
        message.screen.run_measured(self.monitor.model_path, self.current_profile())

    @on(DoctorScreen.Measured)
    def _doctor_measured(self) -> None:
        self.release_live("doctor")

    @on(JobScreen.Start)
    def _job_start(self, message: JobScreen.Start) -> None:
        """A tune or capacity search runs worker processes of its own: the live one waits, paused, until they are
        gone."""
        self.hold_live(message.screen.JOB)
        message.screen.run_search(self.monitor.model_path, self.current_profile())

    @on(JobScreen.Finished)
    def _job_finished(self, message: JobScreen.Finished) -> None:
        self.release_live(message.screen.JOB)

    @on(JobScreen.ApplyRow)
    def _job_apply(self, message: JobScreen.ApplyRow) -> None:
        self._apply_offered(message.screen, message.profile, message.label)

    def _apply_offered(self, screen: JobScreen, profile: Profile, label: str) -> None:
        """Apply a profile a screen offers (a leaderboard row, a sized profile), and tell that screen what
        happened; the one the live session already runs is not rebuilt."""
        from ortop.engine import profile_key

        if profile_key(profile) == profile_key(self.current_profile()):
            screen.show_message(Text(f"{label}: the live session already runs this profile, nothing rebuilt",
                                     style="yellow"))
            return
        try:
            self.apply_profile(profile)
        except (ProfileError, ModelError) as exc:
            screen.show_message(Text(f"✗ {exc}", style="bold red"))
            return
        self._origins[profile_key(profile)] = screen.ORIGIN
        self.monitor.add_event("info", f"{screen.JOB}: applied {label}")
        screen.show_message(Text(f"applied {label}: the live session rebuilds with it", style="green"))

    @on(JobScreen.SaveRow)
    def _job_save(self, message: JobScreen.SaveRow) -> None:
        name = message.screen.save_name(Path(self.monitor.model_path).stem, message.label)
        self.ask_save(message.profile, default_name=actions.sanitize_name(name),
                      origin=message.screen.saved_origin(message.label))

    @on(ExportScreen.WriteExport)
    def _write_export(self, message: ExportScreen.WriteExport) -> None:
        """Ask a name for the export (the model's ``…-export`` offered), then write it next to the profiles."""
        screen, text, ext = message.screen, message.text, message.ext
        self.ask_export_name(screen, text, ext, actions.export_name(self.profile_dir, self.monitor.model_path, ext))

    def ask_export_name(self, screen: ExportScreen, text: str, ext: str, name: str,
                        note: Text | None = None) -> None:
        def answered(choice: SaveAs | None) -> None:
            if choice is None:
                screen.show_message(Text("not written", style="dim"))
                return
            try:
                out = actions.write_export(choice.path, text)
            except actions.WRITE_ERRORS as exc:
                self.ask_export_name(screen, text, ext, choice.name,
                                     Text(f"✗ {actions.why_not(exc, choice.path)}", style="bold red"))
                return
            self.monitor.add_event("info", f"export written: {out}")
            screen.show_message(Text(f"written to {out}", style="green"))

        self.push_screen(SaveScreen(self.profile_dir, name, note, suffix=ext, title=f"Export as {ext}"), answered)


def make_app(monitor: MonitorView, *, cpu: Any = None, gpu: Any = None, refresh_hz: float = 2.0,
             profile_dir: str | os.PathLike = "profiles", summary_path: str | os.PathLike | None = None,
             clock: Callable[[], float] = time.monotonic) -> OrtopApp:
    """The one way an OrtopApp is built: by ``ortop``, the Pilot tests and the snapshot apps alike.

    ``refresh_hz`` 0 means no timer: the caller ticks (:meth:`OrtopApp.tick`), which keeps snapshots deterministic.
    """
    return OrtopApp(monitor, cpu=cpu, gpu=gpu, refresh_hz=refresh_hz, profile_dir=profile_dir,
                    summary_path=summary_path, clock=clock)


def run_app(model_path: str, profile: Profile, args: Any, *,
            on_monitor: Callable[[Monitor], None] | None = None) -> int:
    """Run the UI on a real Monitor until q, SIGTERM or SIGHUP; returns the exit code (1 if the model failed).

    ``on_monitor`` gets the monitor before it starts, for consumers that read it alongside the UI (a metrics
    endpoint, a stream).
    """
    from ortop.collectors.cpu import PsutilCpuCollector
    from ortop.collectors.gpu import make_gpu_collector
    from ortop.engine import Monitor

    monitor = Monitor(model_path, profile, strict_providers=getattr(args, "strict_providers", False))
    if on_monitor is not None:
        on_monitor(monitor)
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
