"""What the tune and capacity screens share: a search run from the live view in worker processes of its own.

Five states: ready (its settings may change), running (after a moment starting, while the app pauses the live
session), stopping (s: the search ends with what it has), done and failed. The screen asks the app to pause the live
session (:class:`JobScreen.Start`, answered with :meth:`JobScreen.run_search`) and to resume it once the search's
workers are gone (:class:`JobScreen.Finished`), whatever ended the search: its result, s, esc, q, or an error. Rows
are applied and saved by the app too (:class:`JobScreen.ApplyRow`, :class:`JobScreen.SaveRow`). The app handles each
message once for both screens; the screen's ``JOB`` names it there.

The search runs on a thread and calls back there; the screen posts what it needs to itself and never waits for the
UI: a quit while the search runs must not leave that thread blocked on an event loop that has stopped.

A subclass says what its search is (:meth:`JobScreen._prepare`), what it shows once it ends (:meth:`JobScreen._done`),
and draws itself (``_title``, ``_elapsed``, ``refresh_rows``, ``show_message``). Textual calls a handler of every
class in the screen's MRO, so ``on_mount`` and ``on_unmount`` live here alone, with hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, ProgressBar, Static

from ortop.config.profile import Profile
from ortop.errors import OrtopError
from ortop.tui.screens._base import FromScreen, Offered, Responsive, Rows, post_from_thread, under_cursor
from ortop.tui.widgets import FitFooter


def job_bindings(close: str, settings: Sequence[Binding], apply: Binding, save: str, *, extra: Sequence[Binding] = (),
                 quit_keys: str = "f10") -> list[BindingType]:
    """A job screen's keys in the order the footer shows them: back, the settings, g start, s stop, apply, ctrl+s
    save (``save`` its label), ``extra``, and quit (hidden)."""
    return [Binding(close, "close", "back"), *settings, Binding("g", "start", "start"), Binding("s", "stop", "stop"),
            apply, Binding("ctrl+s", "save", save, key_display="^s"), *extra,
            Binding(quit_keys, "quit", "quit", show=False)]


R = TypeVar("R")  # what the search returns
W = TypeVar("W")  # one row of the screen's table
REFRESH_S = 0.5   # the clock and the bar between two callbacks of the search


class JobScreen(Responsive, Rows, Screen[None], Generic[R, W]):
    """A search started, stopped and followed from the live view; its rows applied or saved once it ends."""

    JOB: ClassVar[str]                     # the app's name for it: its hold on the live session, its events, files
    ORIGIN: ClassVar[str]                  # where a profile it offers comes from, as a saved profile says
    PREFIX: ClassVar[str]                  # the widgets' ids: PREFIX-title, PREFIX-detail, …
    COLUMNS: ClassVar[tuple[str, ...]]     # the table's columns
    SETTINGS: ClassVar[tuple[str, ...]]    # the actions that change what the next search does (and start it)
    INTRO: ClassVar[str]                   # what the keys do, before the start
    STOPPING: ClassVar[str]                # what s says
    budget_s: float                        # the search's budget (s): the title's clock and the bar count to it
    ZEBRA = False                          # the table's rows striped
    NOTE_AFTER = ""                        # between the row's detail and the note under it

    DEFAULT_CSS = """
    JobScreen .job-title { height: auto; padding: 0 1; }
    JobScreen .job-progress { height: 1; padding: 0 1; }
    JobScreen .job-verdict { height: auto; padding: 0 1; }
    JobScreen .job-detail-box { height: auto; border-top: solid $primary 60%; }
    JobScreen .job-detail { height: auto; padding: 0 1; }
    """

    class Start(FromScreen["JobScreen[Any, Any]"]):
        """Pause the live session and call :meth:`run_search` (the search runs workers of its own)."""

    class Finished(FromScreen["JobScreen[Any, Any]"]):
        """The search is over and its workers are gone: the live session may run again."""

    class ApplyRow(Offered["JobScreen[Any, Any]"]):
        """Apply a row's profile to the live session; the app answers with :meth:`show_message`."""

    class SaveRow(Offered["JobScreen[Any, Any]"]):
        """Save a row's profile (the app opens the save modal)."""

    class _Progress(Message):
        """The search moved on (posted from its thread, with a copy of what the screen shows of it)."""

        def __init__(self, shown: Any) -> None:
            super().__init__()
            self.shown = shown

    class _Ended(Message):
        """The search returned its result or failed (posted from the search's thread)."""

        def __init__(self, result: Any, error: str) -> None:
            super().__init__()
            self.result = result
            self.error = error

    def __init__(self) -> None:
        super().__init__()
        self.state = "ready"          # ready → starting → running → stopping → done / failed
        self.result: R | None = None
        self.error = ""
        self._stop = threading.Event()
        self._timer: Timer | None = None
        self._rows: tuple[W, ...] = ()
        self._note: Text | None = None

    def compose(self) -> ComposeResult:
        """The title and the budget's bar, what the subclass draws above the table (:meth:`_plot`), the table, the
        verdict and the highlighted row in full; ids ``PREFIX-…``, the shared style by class."""
        p = self.PREFIX
        yield Static(self._title(), id=f"{p}-title", classes="job-title")
        yield ProgressBar(total=self.budget_s, show_eta=False, id=f"{p}-progress", classes="job-progress")
        yield from self._plot()
        table: DataTable[Text] = DataTable(id=f"{p}-table", cursor_type="row", zebra_stripes=self.ZEBRA)
        yield table
        yield Static("", id=f"{p}-verdict", classes="job-verdict")
        with VerticalScroll(id=f"{p}-detail-box", classes="job-detail-box"):
            yield Static("", id=f"{p}-detail", classes="job-detail")
        yield FitFooter()

    def _plot(self) -> ComposeResult:
        """What the screen draws between the bar and the table (nothing, unless the subclass says)."""
        yield from ()

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        for name in self.COLUMNS:
            table.add_column(name, key=name)
        table.focus()
        self._mounted()
        self.refresh_rows()
        self.show_message(Text(self.INTRO, style="dim"))

    def on_resize(self) -> None:
        self.call_after_refresh(self.refresh_rows)  # the table's columns fit its new width once it has it

    def on_unmount(self) -> None:
        self._stop.set()  # however the screen goes (esc, q, the app ending), a search under way ends

    # ---- the search ------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.state in ("starting", "running", "stopping")

    def may_set(self) -> bool:
        """Whether the settings may change now (and a search start)."""
        return not self.running

    def run_search(self, model_path: str, profile: Profile) -> None:
        """Start the search from ``profile`` in a thread (the app has paused the live session)."""
        if self._stop.is_set() or not self.is_attached:
            self.app.post_message(self.Finished(self))  # closed before the app answered: nothing to wait for
            return
        search = self._prepare(model_path, profile)
        self.state = "running"
        self._timer = self.set_interval(REFRESH_S, self._tick, name=f"{self.PREFIX}-elapsed")
        self.refresh_rows()
        self.show_message(Text("the live session is paused while the search runs; s stops it", style="yellow"))
        self._run(self.app, search)

    @work(thread=True, exclusive=True, group="job-search")
    def _run(self, app: Any, search: Callable[[], R]) -> None:
        result: R | None = None
        error = ""
        try:
            result = search()
        except OrtopError as exc:  # a model that cannot be read, a profile it cannot take: one line
            error = str(exc)
        except Exception as exc:  # anything else is shown too, never as a traceback
            error = f"{type(exc).__name__}: {exc}"
        finally:
            post_from_thread(self, self._Ended(result, error))
            post_from_thread(app, self.Finished(self))

    def _moved_on(self, shown: Any) -> None:
        """From the search's thread, at each of its callbacks: hand a copy of what it shows to the screen."""
        post_from_thread(self, self._Progress(shown))

    @on(_Progress)
    def _on_progress(self, message: _Progress) -> None:
        if self.state in ("running", "stopping"):
            self._show_progress(message.shown)
            self.refresh_rows()

    @on(_Ended)
    def _on_ended(self, message: _Ended) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.error = message.error
        if message.result is None:
            self.state = "failed"
            self._failed()
            self.refresh_rows()
            self.show_message(Text("the live session resumes", style="dim"))
            return
        self.state = "done"
        self.result = message.result
        self._done(message.result)

    def _tick(self) -> None:
        if self.state in ("running", "stopping") and self.is_mounted:
            self._between()

    def save_name(self, model_stem: str, label: str) -> str:
        """The file name offered for a row's profile: the model, the job and the row (``mm-tune-spin us 100``)."""
        for symbol, plain in (("µ", "u"), ("×", "x"), ("÷", "div")):  # "spin µs 100", "threads ×2 (4)"
            label = label.replace(symbol, plain)
        return f"{model_stem}-{self.JOB}-{label}"

    def saved_origin(self, label: str) -> str | None:
        """Where the profile of the row ``label`` came from, for its saved file (None: the live one's)."""
        return self.ORIGIN

    def failure(self) -> Text:
        """The verdict of a search that failed."""
        return Text(f"✗ the search failed: {self.error}", style="bold red")

    # ---- what a subclass gives -------------------------------------------------------------------------------
    def _prepare(self, model_path: str, profile: Profile) -> Callable[[], R]:
        """Take in what the app answered, and return the search to run on the thread."""
        raise NotImplementedError

    def _done(self, result: R) -> None:
        """The search returned ``result`` (state done): show it."""
        raise NotImplementedError

    def _show_progress(self, shown: Any) -> None:
        """Take in what :meth:`_moved_on` handed over (the screen is drawn again next)."""
        raise NotImplementedError

    def _failed(self) -> None:
        """The search failed (state failed, ``error`` says why), before the screen is drawn again."""

    def _between(self) -> None:
        """The timer, while the search runs: the clock, and what it knows between two callbacks."""
        self._draw_title()

    def _mounted(self) -> None:
        """Once mounted, before the first drawing."""

    def _redraw(self) -> None:
        """The state changed (starting, stopping)."""
        self.refresh_rows()

    def _title(self) -> Text:
        raise NotImplementedError

    def _detail(self, row: W | None) -> Text:
        """The highlighted row in full (a new Text: the note is appended to it)."""
        raise NotImplementedError

    def _elapsed(self) -> float:
        raise NotImplementedError

    def refresh_rows(self) -> None:
        raise NotImplementedError

    # ---- drawing ---------------------------------------------------------------------------------------------
    def _draw_title(self) -> None:
        self.query_one(f"#{self.PREFIX}-title", Static).update(self._title())
        self.query_one(ProgressBar).update(total=self.budget_s, progress=0.0 if self.state == "ready" else
                                           min(self._elapsed(), self.budget_s))

    def show_message(self, message: Text | None = None) -> None:
        """The highlighted row in full (:meth:`_detail`), then the last ``message`` given (the outcome of an apply,
        what the keys do) under it."""
        if message is not None:
            self._note = message
        t = self._detail(self.selected())
        if self._note is not None:
            t.append(self.NOTE_AFTER)
            t.append_text(self._note)
        self.query_one(f"#{self.PREFIX}-detail", Static).update(t)

    def selected(self) -> W | None:
        """The row under the cursor, or None."""
        return under_cursor(self.query_one(DataTable), self._rows)

    def _refused_while_running(self, what: str) -> bool:
        """Say so and return True while the search runs: ``what`` is applied only from its result."""
        if self.running:
            self.show_message(Text(f"the search is running: stop it (s) or wait for its result before applying "
                                   f"{what}", style="yellow"))
        return self.running

    # ---- keys ------------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.SETTINGS:
            return self.may_set()
        if action == "stop":
            return True if self.state == "running" else (None if self.running else False)
        return True

    def action_start(self) -> None:
        if self.may_set():
            self.state, self.result, self.error = "starting", None, ""
            self._stop = threading.Event()
            self._redraw()
            self.post_message(self.Start(self))

    def action_stop(self) -> None:
        if self.state == "running":
            self._stop.set()
            self.state = "stopping"
            self._redraw()
            self.show_message(Text(self.STOPPING, style="yellow"))

    def action_close(self) -> None:
        self._stop.set()  # the search ends with what it has; the app resumes the live session once it has
        self.dismiss(None)

    async def action_quit(self) -> None:
        self._stop.set()
        await self.app.run_action("quit")
