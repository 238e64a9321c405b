"""Nothing a screen's table shows is cut mid-word: the doctor, tune and capacity screens' lines, as drawn at 80×24
(and after a resize), hold only whole words of what their rows say, a cell that does not fit ending with the one
rule's "…" after a whole word (``_format.fit``), and no table is wider than the screen (the terminal would cut it
anywhere: "mem-p  the inp").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable

from ortop.collectors.cpu import FakeCpuCollector, PsutilCpuCollector
from ortop.collectors.gpu import FakeGpuCollector
from ortop.collectors.host import read_host
from ortop.config.profile import Profile
from ortop.doctor import evidence_text, patch_text
from ortop.engine.live.monitor import Monitor
from ortop.tui.app import make_app
from ortop.tui.panels._format import fit_columns, lead_forms
from ortop.tui.screens import TuneScreen
from ortop.tui.screens.doctor import DoctorScreen
from tests.fakes import FakeMonitor, StepClock
from tests.models import make_conv_model
from tests.poll import until
from tests.test_tui import started

TOKEN = re.compile(r"\S+")
TRIM = " ;,·:→()[]{}…"


def words_of(texts: Iterable[str]) -> set[str]:
    return {w.strip(TRIM) for t in texts for w in TOKEN.findall(t)}


def screen_lines(screen, top: int = 0, bottom: int | None = None) -> list[str]:
    """The screen's lines as the terminal gets them, from ``top`` to ``bottom``."""
    return [strip.text for strip in screen._compositor.render_strips()][top:bottom]


def table_lines(screen) -> list[str]:
    table = screen.query_one(DataTable)
    return screen_lines(screen, table.region.y, table.region.bottom)


def cut_words(lines: Iterable[str], words: set[str]) -> list[str]:
    """Each token of ``lines`` that is not a whole word of ``words`` (a drawing character aside): cut mid-word,
    by a clip or by the screen's edge."""
    bad = []
    for line in lines:
        for token in TOKEN.findall(line):
            w = token.strip(TRIM)
            if w and any(ch.isalnum() for ch in w) and w not in words:
                bad.append(f"{token!r} in {line.rstrip()!r}")
    return bad


def table_fits(screen) -> None:
    table = screen.query_one(DataTable)
    assert table.virtual_size.width <= table.size.width, (table.virtual_size, table.size)


# ---- the rule for columns -------------------------------------------------------------------------------------------
def test_lead_forms_are_the_text_then_its_leads_each_ending_after_a_whole_clause() -> None:
    assert lead_forms("cannot win: p50 2.31 → 2.34 ms, no detectable difference (95 % CI −1…+1 %)") == [
        "cannot win: p50 2.31 → 2.34 ms, no detectable difference (95 % CI −1…+1 %)",
        "cannot win: p50 2.31 → 2.34 ms, no detectable difference", "cannot win: p50 2.31 → 2.34 ms", "cannot win"]
    assert lead_forms("dims (a: b, c) and more; then: c") == [  # nothing inside brackets; "(a: b, c)" is a word
        "dims (a: b, c) and more; then: c", "dims (a: b, c) and more; then", "dims (a: b, c) and more"]
    assert lead_forms("halved: ranked 3 of 3 on p50 (-0.5 %: x)") == [
        "halved: ranked 3 of 3 on p50 (-0.5 %: x)", "halved: ranked 3 of 3 on p50", "halved"]
    assert lead_forms("no clauses") == ["no clauses"]


@pytest.mark.parametrize("width", [30, 44, 60, 80, 120])
def test_fit_columns_keeps_figures_whole_and_cuts_only_the_flexible_column_at_a_word(width: int) -> None:
    message = "3 intra-op threads but 2 physical cores: the extra threads queue for CPU time instead of working"
    rows = [[("warning", "warn"), ("threads",), lead_forms(message)],
            [("info",), ("mem-pattern",), lead_forms("the inputs have free dims (batch, height, width)")]]
    widths, headers, cells = fit_columns(width, [("severity", "sev"), ("check",), ("finding",)], rows, 2)
    assert sum(widths) + 2 * len(widths) <= max(width, 2 + 11 + 4 + 2 * 3)  # what cannot shrink still shows
    for row in cells:
        for w, cell in zip(widths, row):
            assert cell.cell_len <= w
    assert [c.plain for c in cells[0][:2]] in (["warning", "threads"], ["warn", "threads"])
    assert not cut_words([c.plain for row in cells for c in row] + [h.plain for h in headers],
                         words_of([message, "the inputs have free dims (batch, height, width)", "severity sev check "
                                   "finding warning warn info threads mem-pattern"]))


# ---- the doctor, on a real model -------------------------------------------------------------------------------------
@pytest.fixture
def conv_monitor(tmp_path: Path):
    """A real worker on a conv model with free dims (the mem-pattern finding), with one intra-op thread more than
    the host's cores (the threads finding): two findings whose messages are longer than 80 columns."""
    with started(make_conv_model(tmp_path / "conv.onnx"), threads=read_host().thread_cap + 1, rate_hz=100.0) as m:
        yield m


def doctor_words(screen: DoctorScreen) -> set[str]:
    """Every word the doctor screen may show whole: the title, the headers, each finding in full."""
    texts = [screen._title().plain, "severity sev check finding applied done warn err"]
    for f in screen.findings():
        texts += [f.severity, f.check, f.message, f.fix, patch_text(f.profile_patch)]
        texts += [f"{k}: {evidence_text(v)}" for k, v in f.evidence.items()]
    return words_of(texts) | words_of([str(screen.query_one("#doctor-detail").render())])


@pytest.mark.slow
@pytest.mark.integration
async def test_the_doctor_screen_cuts_no_word_at_80x24_and_after_a_resize(conv_monitor: Monitor,
                                                                           tmp_path: Path) -> None:
    app = make_app(conv_monitor, cpu=PsutilCpuCollector(), gpu=FakeGpuCollector(seed=1), refresh_hz=10.0,
                   profile_dir=tmp_path / "profiles")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: conv_monitor.snapshot().runs >= 5, "the first runs", timeout=30)
        await pilot.press("d")
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        await until(pilot, lambda: screen.static is not None, "the static checks", timeout=30)
        assert {f.check for f in screen.findings()} >= {"threads", "mem-pattern"}
        for size in ((80, 24), (60, 24), (120, 40), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            table_fits(screen)
            footer = screen.query_one("Footer").region.y
            lines = screen_lines(screen, 0, footer)
            assert not cut_words(lines, doctor_words(screen)), "\n".join([*cut_words(lines, doctor_words(screen)),
                                                                         *lines])
            shown = "\n".join(table_lines(screen))
            assert "threads" in shown and "mem-pattern" in shown, shown
        # at 80 columns the threads finding's headline is there whole
        assert "intra-op threads but" in "\n".join(table_lines(screen))


# ---- the tune and capacity screens, over fakes -----------------------------------------------------------------------
@pytest.mark.slow
async def test_the_tune_leaderboard_cuts_no_word_at_80x24() -> None:
    """The reasons a candidate was dropped ("cannot win: p50 …", "halved: ranked 3 of 4 …") ran off the screen's
    edge at 80 columns: now each is its headline, whole."""
    from tests.test_tui_tune import Factory

    app = make_app(FakeMonitor(n_configs=1), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3),
                   refresh_hz=0, profile_dir="/nonexistent/profiles", clock=StepClock())
    app.tuner_factory = Factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t", "g")
        screen = app.screen
        assert isinstance(screen, TuneScreen)
        await until(pilot, lambda: screen.state == "done", "the search's result", timeout=30)
        texts = ["candidate dimension dim status change % Δ 95 % CI pairs n verdict / reason"]
        texts += [c for r in screen.board.rows for c in r.cells]
        lines = table_lines(screen)
        table_fits(screen)
        assert not cut_words(lines, words_of(texts)), "\n".join([*cut_words(lines, words_of(texts)), *lines])
        assert any("cannot win" in line or "halved" in line for line in lines), "\n".join(lines)


@pytest.mark.slow
async def test_the_capacity_table_fits_80_columns_at_thousands_of_requests_a_second(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """A model serving thousands a second: "12.0k/s (11.6k–12.4k)" beside "▲ threads ×2 (4)" made the table wider
    than 80 columns; the capacity then drops its interval (it is in the verdict and the detail) before the state
    is cut."""
    from tests import test_tui_capacity as tc

    monkeypatch.setattr(tc.screen_mod, "_host", lambda: tc.HOST)
    factory = tc.Factory(ceilings=(12_400.0, 24_800.0), floor_ms=0.05)
    app = tc.capacity_app(tmp_path, factory, FakeMonitor(n_configs=1, p50_ms=0.05))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await tc.opened(pilot, app)
        while screen.alternative is None or not screen.alternative.label.startswith("threads"):
            await pilot.press("a")
        await pilot.press("g")
        await until(pilot, lambda: screen.state == "done", "the search's result", timeout=60)
        texts = [*(form for header in tc.screen_mod.HEADERS for form in header),
                 *(c for r in screen._rows for c in r.cells)]
        for width in (80, 64):
            await pilot.resize_terminal(width, 24)
            await pilot.pause(0.2)
            lines = table_lines(screen)
            table_fits(screen)
            assert not cut_words(lines, words_of(texts)), "\n".join([*cut_words(lines, words_of(texts)), *lines])
            assert "▲ threads ×2" in "\n".join(lines)
            # the curve's legend shortens its title before it cuts a profile's name
            curve = screen.query_one("#cap-curve")
            legend = screen_lines(screen, curve.region.y, curve.region.y + 1)[0]
            assert re.search(r"● running  ▲ threads ×2 \(\d+\)", legend), legend


@pytest.mark.slow
async def test_the_settings_hints_at_80x24_are_whole_leads_or_cut_after_a_word() -> None:
    """At 80 columns a hint has one line beside its field: the terminal's ellipsis cut them mid-word ("0 = ORT's
    default (physical cor…", "parallel m…"); each is now a whole lead of itself or cut after a whole word."""
    from ortop.tui import form
    from ortop.tui.screens.settings import Hint

    app = make_app(FakeMonitor(n_configs=1), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3),
                   refresh_hz=0, profile_dir="/nonexistent/profiles", clock=StepClock())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        await pilot.pause(0.2)
        screen = app.screen
        words = words_of([f.hint for f in form.FIELDS] + ["not pinned"])
        lines = screen_lines(screen)
        box = screen.query_one("#settings-form").region
        shown = []
        for hint in screen.query(Hint):
            r = hint.region
            if r.height and box.y <= r.y < box.bottom:
                shown.append(lines[r.y][r.x:r.right])
        assert len(shown) >= 8, shown
        assert not cut_words(shown, words), "\n".join([*cut_words(shown, words), *shown])
        assert any(line.strip() == "0 = ORT's default" for line in shown), shown


WALKED_BOARD = [  # ppocr_v4_det at 1x3x224x224, objective cpu with p99 ≤ 20 ms, as the tune screen showed it
    ("baseline", "", "start", "", "", "", "10.5 ms CPU/run"),
    ("threads 1", "threads", "winner", "-48.6", "-62.0…-36.2", "9", "faster"),
    ("threads 2, spin off", "threads", "ok", "-39.7", "-50.5…-22.9", "9", "faster"),
    ("threads 1, mem pattern off", "mem_pattern", "ok", "+1.7", "+0.8…+2.6", "52", "undecided"),
    ("threads 2", "threads", "dropped", "-1.7", "-49.5…+51.9", "7", "halved: ranked 4 of 4 on cpu (-1.7 % better)"),
    ("threads 1, inter-op 2, parallel", "execution_mode", "dropped", "+147.4", "+107.6…+375.1", "7",
     "significantly worse: CPU/run 5.6 → 13.9 ms, +147 %"),
]


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_leaderboard_of_long_candidates_keeps_every_figure_on_an_80_column_screen(size) -> None:
    """The walk at 80×24: "threads 1, inter-op 2, parallel" and "execution_mode" pushed the pairs and the verdict
    off the screen (the table scrolled sideways). Now the dimension goes first (the detail says it), then the names
    shorten to their first terms, marked cut; every figure stays whole."""
    from ortop.tui.panels.tune import Board, Row

    app = make_app(FakeMonitor(n_configs=1), cpu=FakeCpuCollector(8, seed=3), gpu=FakeGpuCollector(seed=3),
                   refresh_hz=0, profile_dir="/nonexistent/profiles", clock=StepClock())
    async with app.run_test(size=size) as pilot:
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TuneScreen)
        screen.state = "done"
        screen.board = Board("done", 60.0, tuple(Row(c[0], c, "winner" if c[2] == "winner" else c[2], Profile(),
                                                      Text(c[0])) for c in WALKED_BOARD))
        screen.refresh_rows()
        await pilot.pause(0.2)
        table_fits(screen)
        lines = table_lines(screen)
        shown = "\n".join(lines)
        words = words_of(["candidate dimension status change % Δ 95 % CI pairs n verdict / reason",
                          *(c for row in WALKED_BOARD for c in row)])
        assert not cut_words(lines, words), "\n".join([*cut_words(lines, words), *lines])
        for figure in ("+107.6…+375.1", "-62.0…-36.2", "+147.4", "52", "10.5 ms CPU/run"):
            assert figure in shown, shown
        assert "significantly" in shown and "halved" in shown, shown
        if size == (120, 40):
            assert "execution_mode" in shown and "threads 1, inter-op 2, parallel" in shown, shown


@pytest.mark.parametrize("width", [80, 120])
def test_a_rate_not_kept_keeps_each_figure_with_its_label_and_the_status_line_says_it_at_80(width: int) -> None:
    """Poisson at 400/s on a model serving 273/s, at 80×24: the model panel read "! offered 396/s, served 273/s,
    1306…" (a count without what it counts) and the status line said nothing (the whole badge did not fit)."""
    from ortop.engine import traffic as T
    from ortop.tui.panels.model import model_panel
    from ortop.tui.panels.status import status_line

    lost = T.figures("poisson", 400.0, overloaded_rows(), T.Counters(arrived=4000, dropped=1306), 10.0, 2730)
    assert not lost.kept()
    monitor = FakeMonitor(n_configs=1)
    monitor.traffic = lost
    snap = monitor.snapshot()
    lines = model_panel(snap, width // 2, 12).plain.split("\n")
    assert all(len(line) <= width // 2 for line in lines), lines
    for line in lines + [status_line(snap, width).plain]:
        assert not re.search(r"\d…", line), line  # a figure is never the last thing before the "…"
    model = model_panel(snap, width // 2, 12).plain
    assert "! offered 400/s, served 273/s" in model, model
    assert "! offered 400/s, served 273/s" in status_line(snap, width).plain


def overloaded_rows():
    """Ring rows of a queue 1.4 s deep in front of a 3.5 ms service."""
    import numpy as np

    from ortop.engine import traffic as T

    rows = np.zeros((400, T.WIDTH))
    rows[:, T.SERVICE] = 3.5
    rows[:, T.QUEUE] = 1400.0
    rows[:, T.RESPONSE] = 1403.5
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (60, 24), (120, 40)])
async def test_each_screens_footer_shows_whole_keys_and_the_palette_key_at_any_width(tmp_path: Path, size) -> None:
    """Textual's footer draws every key and the terminal cut the last mid-word ("w r▏^p palette" at 80×24 on the
    capacity screen). Each screen's footer holds whole keys only: all of them, or those that fit and "^p more"
    (the palette lists the rest)."""
    from textual.widgets._footer import FooterKey

    from ortop.tui.widgets import FitFooter
    from tests.test_tui_tune import Factory, tune_app

    app = tune_app(tmp_path, Factory(), FakeMonitor(n_configs=2))
    async with app.run_test(size=size) as pilot:
        for key in ("t", "c", "h", "e"):
            await pilot.press(key)
            await pilot.pause()
            footer = app.screen.query_one(FitFooter)
            line = screen_lines(app.screen)[-1]
            labels = [k.description for k in footer.query(FooterKey)]
            assert labels and all(label in line for label in labels), (key, labels, line)
            assert line.rstrip().endswith(labels[-1]), (key, line)  # nothing after the last key: nothing cut
            every = [b.description for b, _, _ in footer._shown()]
            if labels[-1] == FitFooter.MORE:
                assert "^p more" in line and len(labels) - 1 < len(every), (key, line)
            else:
                assert set(every) <= set(labels), (key, every, line)
            await pilot.press("escape")
            await pilot.pause()
