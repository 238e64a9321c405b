"""The history table's cells and the verdict cell, for verdicts as text and as objects."""

from __future__ import annotations

import math

from ortop.config import profile as profile_mod
from ortop.config.profile import Profile
from ortop.engine.live.monitor import ConfigRecord, CpuCost
from ortop.measure.stats import LatencyStats
from ortop.tui.panels import history
from tests.fakes import FakeVerdict


def _record(cid: int, p50: float, verdict: str = "", best: bool = False, label: str = "start",
            profile: Profile | None = None) -> ConfigRecord:
    lat = LatencyStats(500, p50, p50, p50, p50, p50 * 2, p50 * 3, p50, p50 * 4)
    return ConfigRecord(cid, label, profile or Profile(), 0.0, 40.0, 3.0, ("CPUExecutionProvider",), lat, 1000 / p50,
                        CpuCost(2.5, math.nan, 100.0, 90.0), verdict, best)


def _p(**changes) -> Profile:
    return profile_mod.merge(Profile(), **changes)


THREADS4 = {"session.intra_op_num_threads": 4}
SPIN_OFF = {**THREADS4, "session.allow_spinning": False}


def test_history_rows_star_best_and_colour_verdicts() -> None:
    rows = history.history_rows([
        _record(0, 4.0),
        _record(1, 2.0, "50.0% faster", best=True, label="session.intra_op_num_threads: 0 → 4", profile=_p(**THREADS4)),
        _record(2, 2.1, "no real change (+5.0%, within noise)", label="session.allow_spinning: default → off",
                profile=_p(**SPIN_OFF)),
    ], current_id=2)
    assert [r[0].plain for r in rows] == ["", "★", "▶"]
    assert [r[2].plain for r in rows] == ["start", "threads 4", "spin off"]  # each row: its own step
    assert rows[1][4].plain == "2.00"
    assert "green" in str(rows[1][8].style)
    assert "dim" in str(rows[2][8].style) and rows[2][8].plain == "noise (+5.0%)"
    assert history.verdict_style("12.0% slower") == "bold red"
    assert len(rows[0]) == len(history.HISTORY_COLUMNS)


def test_history_rows_take_verdict_objects() -> None:
    v = FakeVerdict("faster", "−12% p50", "12.0% faster at p50 (interleaved, 8 blocks)")
    rows = history.history_rows([_record(0, 4.0), _record(1, 3.5, v)])
    assert rows[1][8].plain == "−12% p50" and "green" in str(rows[1][8].style)
    assert rows[0][8].plain == "—"


def test_verdict_cell_styles_by_kind() -> None:
    styles = {kind: str(history.verdict_cell(FakeVerdict(kind, kind, kind)).style) for kind in history.VERDICT_KINDS}
    assert styles["faster"] == "bold green" and styles["slower"] == "bold red"
    assert styles["no difference"] == ""
    for kind in ("unverified", "undecided", "not comparable", "measuring", "verifying"):
        assert styles[kind] in ("dim", "yellow"), kind
    assert history.verdict_cell(FakeVerdict("undecided", "", "")).plain == "—"


def test_verdict_cell_reads_the_text_form_the_same_way() -> None:
    assert history.verdict_parts("37.5% faster") == ("faster", "37.5% faster", "37.5% faster")
    assert history.verdict_parts("4.0% slower")[0] == "slower"
    assert history.verdict_parts("measuring…")[:2] == ("measuring", "measuring…")
    kind, short, text = history.verdict_parts("no real change (+3.0%, within noise)")
    assert (kind, short, text) == ("undecided", "noise (+3.0%)", "no real change (+3.0%, within noise)")
    assert history.verdict_cell("").plain == "—" and history.verdict_style("") == "dim"
    assert history.verdict_cell(None).plain == "—"


def test_detail_line_shows_the_full_verdict() -> None:
    rec = _record(3, 2.0, FakeVerdict("unverified", "−8%?", "8% faster, measured one after the other: not verified"),
                  label="session.allow_spinning: default → off")
    detail = history.history_detail(rec).plain.split("\n")
    assert detail[0] == "#3 allow_spinning: default → off"
    assert detail[1] == ("verdict: 8% faster, measured one after the other: not verified · providers "
                         "CPUExecutionProvider")
    assert history.history_detail(_record(0, 4.0)).plain.split("\n") == [
        "#0 the start profile", "verdict: — · providers CPUExecutionProvider",
        "500 runs · p50 4.00 · p99 8.00 ms · 250/s · CPU/run 2.50 ms"]  # every figure, whatever the width
    assert history.columns(80) == history.NARROW_COLUMNS and len(history.columns(120)) == len(history.HISTORY_COLUMNS)


def test_rows_with_long_changes_read_apart_and_the_detail_has_them_in_full() -> None:
    """Rows that each change several knobs no longer all begin with the same long prefix: a row shows its own step
    from the row before, compact; the detail under the table has the full text, from the start and from that row."""
    many = {**SPIN_OFF, "workload.rate_hz": 100.0, "session.dynamic_block_base": 4}
    recs = [_record(0, 4.0), _record(1, 3.0, profile=_p(**SPIN_OFF), label="x"),
            _record(2, 2.5, profile=_p(**many), label="session.allow_spinning: default → off; x"),
            _record(3, 2.5, profile=_p(**many), label="y")]
    cells = [r[2].plain for r in history.history_rows(recs, label_width=30)]
    assert cells == ["start", "threads 4 · spin off", "dbb 4 · 100 Hz", "same as #2"]
    assert history.history_rows(recs, label_width=11)[1][2].plain == "threads 4…"  # cut at a word
    detail = history.history_detail(recs[2], recs[1]).plain.split("\n")
    assert detail[0] == "#2 allow_spinning: default → off; x"
    assert detail[1] == "from #1: dbb 4 · 100 Hz"


def test_every_verdict_names_its_metric() -> None:
    """"−40.7 % unverified" sat beside "CPU/run +318 %" without saying it was p50."""
    from ortop.engine.live.snapshot import RowVerdict

    assert history.verdict_cell(RowVerdict("unverified", "−40.7 % unverified", "", metric="p50")).plain == \
        "p50 −40.7 % unverified"
    assert history.verdict_cell(RowVerdict("faster", "−37 % faster", "", metric="p50")).plain == "p50 −37 % faster"
    assert history.verdict_cell(RowVerdict("faster", "CPU/run −80 %", "", metric="cpu")).plain == "CPU/run −80 %"
    assert history.verdict_cell(RowVerdict("no difference", "no difference", "", metric="cpu")).plain == \
        "CPU/run no difference"
    assert history.verdict_cell(RowVerdict("measuring", "measuring…", "", metric="p50")).plain == "measuring…"


def test_a_row_replaced_before_it_had_runs_enough_settles() -> None:
    """A row left at "measuring…" forever: once another configuration replaced it, it gets no more runs."""
    import numpy as np

    from ortop.engine.live.monitor_state import MonitorState
    from ortop.engine.live.readout import Readout
    from ortop.engine.live.store import ConfigStore
    from ortop.measure.series import Series

    def store(cid: int, runs: int) -> ConfigStore:
        c = ConfigStore(cid, Profile())
        rows = np.zeros((runs, 9), dtype=np.int64)
        rows[:, 1] = 2_000_000
        c.add(rows, wall_ns=runs * 10_000_000, cpu_ns=0, t_s=np.arange(runs) * 0.01)
        return c

    r = Readout.__new__(Readout)
    r.st = MonitorState(Series(0.5, 10))
    first, short, last = store(0, 200), store(1, 5), store(2, 200)
    r.st.current = short
    assert r._row_verdict(short, first, short.ring.view()).kind == "measuring"  # still running: it may get more
    r.st.current = last
    settled = r._row_verdict(short, first, short.ring.view())
    assert settled.kind != "measuring" and settled.short == "too few runs"
    assert "5 runs" in settled.text and "20" in settled.text


def test_a_verdict_with_its_metric_fits_the_table_at_80_and_120_columns() -> None:
    """The change column gives way, so "p50 −40.7 % unverified" is not cut at the screen's edge."""
    from ortop.engine.live.snapshot import RowVerdict

    base = Profile()
    changed = profile_mod.merge(base, **{"session.intra_op_num_threads": 2, "session.allow_spinning": False,
                                         "workload.rate_hz": 100.0, "session.dynamic_block_base": 4})
    lat = LatencyStats(12_345, 2.0, 2.0, 2.5, 2.7, 3.0, 4.0, 1.0, 9.0)
    recs = [ConfigRecord(i, "start", p, 0.0, 1.0, 1.0, ("CPUExecutionProvider",), lat, 1234.0,
                         CpuCost(12.3, 1.0, 100.0, 50.0), v)
            for i, (p, v) in enumerate([(base, ""), (changed, RowVerdict("unverified", "−40.7 % unverified", "",
                                                                         metric="p50"))])]
    for width in (80, 120):
        rows = history.history_rows(recs, label_width=history.label_width(width))
        cols = history.columns(width)
        for row in rows:
            # the change column may take all of label_width: the rest must fit beside it
            used = history.label_width(width) + 2 + sum(
                max(len(row[i].plain), len(history.HISTORY_COLUMNS[i])) + 2 for i in cols if i != 2)
            assert used <= width, (width, used, [row[i].plain for i in cols])


def test_a_narrow_table_drops_columns_by_rank_and_says_which() -> None:
    """At 80 columns the table lost p99 and throughput and kept runs; now the lowest-ranked go first (runs, then
    CPU/run), and the title names what went, which the detail line under the table gives."""
    names = {w: [history.HISTORY_COLUMNS[i] for i in history.columns(w)] for w in (60, 70, 80, 120)}
    assert names[120] == list(history.HISTORY_COLUMNS)
    assert names[80] == ["", "#", "change from the row before", "p50 ms", "p99 ms", "thr", "verdict"]
    assert names[70] == ["", "#", "change from the row before", "p50 ms", "p99 ms", "verdict"]
    assert "p50 ms" in names[60] and "verdict" in names[60]
    assert history.hidden(80) == ("runs", "CPU/run") and history.hidden(120) == ()
    assert history.title_text(80).plain.endswith("· more (runs, CPU/run) below")
    assert history.title_text(120).plain.endswith("· the selected one in full below")
    assert history.label_width(120) == 46 and history.label_width(80) >= 20  # the change column keeps its room
