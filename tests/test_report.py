"""HTML reports: each page from its command's JSON, self-contained (no URL a browser could fetch), the ``--report``
flag end to end on a real model, and the capacity page rendered by a real headless Chromium.

Three tiers: pure tests of the pages from hand-made dicts of each command's JSON shape; ``ortop compare --report``
on a real small model (``integration``); and a browser tier (``integration``, skipped without a ``chromium`` or
``chromium-browser`` binary) that screenshots the pages and records every request the browser makes.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from ortop.errors import RuntimeFailure, UsageError
from ortop.report import capacity_page, certify_page, check_report, compare_page, tune_page, write_report
from ortop.report.fleet import fleet_page
from tests.test_cli import env, one_error_line, ortop  # noqa: F401  (env is a fixture)
from tests.test_compare import threads_profiles  # noqa: F401  (a fixture: one and two intra-op threads)
from tests.test_fleet_sizing import fleet_data

# These tests measure no time: they run beside others (the suite's first phase, see pyproject.toml).
pytestmark = pytest.mark.sharing

HOST = {"cpu_model": "Test CPU 3000", "logical_cpus": 4, "physical_cores": 2, "usable_cpus": [0, 1, 3],
        "smt": True, "numa_nodes": {"0": [0, 1, 2, 3]}, "cpu_quota": 1.5, "thread_cap": 2}
# The only URLs a page may hold: the SVG namespace names, which name a vocabulary and are never requested.
NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def _comparison(other: int, metric: str, change: float | None, lo: float | None, hi: float | None,
                verdict: str) -> dict:
    return {"baseline": 0, "other": other, "metric": metric, "before": 1.0, "after": 1.1, "change_pct": change,
            "ci_low_pct": lo, "ci_high_pct": hi, "significant": verdict in ("faster", "slower"), "verdict": verdict,
            "pairs": 12, "seconds_more": None, "look_confidence": 0.95, "text": "", "decided_after_s": 3.1}


COMPARE = {
    "model": "/models/net.onnx", "budget_s": 20.0, "objective": "p50",
    "configs": [
        {"profile": "one.toml", "runs": 4000, "p50_ms": 1.16, "p99_ms": 1.37, "throughput_per_s": 839.0,
         "cpu_ms_per_run": 1.22, "blocks": 12, "providers_active": ["CPUExecutionProvider"], "offered_per_s": None,
         "dropped": 0, "rate_kept": True},
        {"profile": "two.toml", "runs": 6000, "p50_ms": 0.59, "p99_ms": 3.03, "throughput_per_s": 1413.0,
         "cpu_ms_per_run": 1.32, "blocks": 12, "providers_active": ["CPUExecutionProvider"], "offered_per_s": 900.0,
         "dropped": 40, "rate_kept": False},
    ],
    "comparisons": [_comparison(1, "p50", -49.0, -50.2, -45.8, "faster"),
                    _comparison(1, "p99", 8.0, -52.0, 794.0, "undecided"),
                    _comparison(1, "throughput", 0.4, -1.0, 1.5, "no difference"),
                    _comparison(1, "cpu", None, None, None, "undecided")],
    "elapsed_s": 5.6, "decided_s": 5.6, "stopped_early": True, "block_s": 0.075, "settle_s": 0.05, "blocks": 16,
    "workers": 1, "memory": {"rss_one_mib": 95.5, "rss_all_mib": 113.0, "per_session_mib": 29.3,
                             "available_mib": 23602.0, "workers": 1},
    "stopped": False, "warnings": ["two.toml runs a different workload than one.toml (rate): <b>different</b>"],
}


def _trial(label: str, stage: str, status: str, change: float | None, lo: float | None, hi: float | None,
           verdict: str | None, winner: bool = False, reason: str = "") -> dict:
    return {"label": label, "stage": stage, "profile": {"session": {"intra_op_num_threads": 2}}, "p50_ms": 0.7,
            "p99_ms": 1.5, "throughput_per_s": 900.0, "cpu_ms_per_run": 1.4, "status": status, "reason": reason,
            "verdict": verdict, "against": "baseline", "change_pct": change, "ci_low_pct": lo, "ci_high_pct": hi,
            "pairs": 8 if change is not None else 0, "blocks": 16, "winner": winner, "rate_kept": True}


TUNE = {
    "objective": "p50", "max_p99_ms": 5.0, "budget_s": 60.0, "elapsed_s": 58.2, "stopped": False,
    "host": {**HOST, "gpus": []}, "space": ["threads", "spinning"], "pruned": ["affinity: one NUMA node"],
    "baseline": {"profile": {}, "p50_ms": 1.1, "p99_ms": 2.0, "throughput_per_s": 850.0, "cpu_ms_per_run": 1.2},
    "trials": [_trial("threads 2", "threads", "ok", -30.0, -35.0, -25.0, "faster", winner=True),
               _trial("spin off", "spinning", "dropped", 12.0, 4.0, 20.0, "slower", reason="significantly worse"),
               _trial("threads 8", "threads", "failed", None, None, None, None, reason="build failed: <oom>")],
    "not_tried": [{"label": "arena off", "stage": "arena", "reason": "no time left in the budget"}],
    "best": {"profile": {"session": {"intra_op_num_threads": 2}}, "p50_ms": 0.77, "p99_ms": 1.6,
             "throughput_per_s": 1200.0, "cpu_ms_per_run": 1.3, "verdict": "better",
             "text": "better: p50 −29 % (95 % CI −33…−24 %) with threads 2",
             "changes": ["session.intra_op_num_threads: default → 2"], "change_pct": -29.0, "ci_low_pct": -33.0,
             "ci_high_pct": -24.0, "comparison": {"verdict": "faster"}},
    "model": "/models/net.onnx", "saved": None,
}


def _point(rate: float, served: float, p50: float, p99: float | None, decision: str, dropped: int = 0) -> dict:
    return {"rate_per_s": rate, "served_per_s": served, "dropped": dropped, "p50_ms": p50, "p99_ms": p99,
            "slo_ms": p99, "decision": decision}


CAPACITY = {
    "model": "/models/net.onnx", "slo": {"metric": "p99", "ms": 20.0}, "arrival": "poisson",
    "profiles": [
        {"profile": "one-thread", "capacity_per_s": 180.0, "bracket": [180.0, 190.0], "met": True,
         "ceiling_per_s": 260.0, "interval": [166.0, 195.0], "interval_confidence": 0.9,
         "points": [_point(50, 50, 3.8, 5.0, "met"), _point(100, 100, 4.7, 5.5, "met"),
                    _point(150, 150, 5.5, 7.4, "met"), _point(180, 180, 6.0, 10.1, "met"),
                    _point(190, 189, 6.2, 21.0, "undecided"), _point(220, 214, 9.0, 48.0, "not met"),
                    _point(255, 231, 30.0, 260.0, "not met", dropped=120)]},
        {"profile": "two-threads", "capacity_per_s": 240.0, "bracket": [240.0, 250.0], "met": True,
         "ceiling_per_s": 330.0, "interval": [221.0, 261.0], "interval_confidence": 0.9,
         "points": [_point(100, 100, 2.9, 4.0, "met"), _point(200, 200, 3.6, 8.0, "met"),
                    _point(240, 240, 4.4, 14.0, "met"), _point(250, 248, 5.0, 24.0, "not met"),
                    _point(300, 270, 40.0, 400.0, "not met")]},
        {"profile": "<never>", "capacity_per_s": 0.0, "bracket": [0.0, None], "met": False, "ceiling_per_s": None,
         "note": "the SLO is under the bare service time", "points": [_point(10, 10, 30.0, None, "not met")]},
    ],
    "best": 1, "elapsed_s": 88.0, "budget_s": 120.0,
}
CERTIFY = {
    "model": "/models/net.onnx", "slo": {"metric": "p99", "ms": 20.0}, "elapsed_s": 131.0, "budget_s": 600.0,
    "stopped": False, "warnings": [], "fault": None,
    "capacity": {"elapsed_s": 41.0, "profiles": [{"profile": "two-threads", "met": True, "capacity_per_s": 240.0}]},
    "certification": {"verdict": "certified", "rate_per_s": 216.0, "requests": 27_000, "over_slo": 112,
                      "needed": 26_000, "needed_more": 0, "clump_factor": 1.4, "confidence": 0.99,
                      "percentile": 0.99, "duration_s": 125.0, "min_duration_s": 60.0, "ended": "decided",
                      "rule": "MLPerf Inference Server early stopping",
                      "host_noise": {"steal_pct": 0.4, "cpu_pressure_pct": 12.0, "slow_share": 0.002,
                                     "slow_k": 3.0}},
}
TOMLS = [("one.toml", "[session]\nintra_op_num_threads = 1\n"), ("two.toml", "[session]\nintra_op_num_threads = 2\n")]
PAGES = {
    "compare": lambda: compare_page(COMPARE, host=HOST, profiles=TOMLS),
    "tune": lambda: tune_page(TUNE),
    "capacity": lambda: capacity_page(CAPACITY, host=HOST),
    "certify": lambda: certify_page(CERTIFY, host=HOST, profiles=TOMLS[1:]),
    "fleet": lambda: fleet_page(fleet_data()),
}


class _Collect(HTMLParser):
    """Every start tag with its attributes, every id, and whether the tags nest (void and SVG self-closed aside)."""

    VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source", "area", "base"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.mismatched: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.mismatched.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Collect:
    p = _Collect()
    p.feed(page)
    p.close()
    return p


def assert_self_contained(page: str, figures: int = 1) -> None:
    """Valid nesting, ``figures`` inline SVGs at least, and no reference a browser would fetch: every URL is an
    xmlns namespace name, every href is a fragment of the page itself, and there is no script, stylesheet link,
    image or font."""
    assert page.startswith("<!DOCTYPE html>\n")
    p = _parse(page)
    assert not p.stack and not p.mismatched, (p.stack, p.mismatched)
    tags = [t for t, _ in p.tags]
    assert tags.count("svg") >= figures and "style" in tags
    assert not {"script", "link", "img", "iframe", "object", "embed", "image", "font"} & set(tags)
    ids = [a["id"] for _, a in p.tags if "id" in a]
    assert len(ids) == len(set(ids)), "an id is used twice"
    for tag, attrs in p.tags:
        for name, value in attrs.items():
            value = value or ""
            if name.startswith("xmlns"):
                assert value in NAMESPACES, (tag, name, value)
            elif name in ("href", "xlink:href", "src", "srcset", "action", "data", "poster"):
                assert value.startswith("#") and value[1:] in ids, (tag, name, value)
    for ref in re.findall(r"url\(([^)]*)\)", page):  # in style attributes and the inline style sheet
        assert ref.startswith("#") and ref[1:] in ids, ref
    assert "@import" not in page and "@font-face" not in page
    outside = re.sub(r'\sxmlns(:\w+)?="[^"]*"', "", page)
    assert not re.search(r"https?:|//cdn|ftp:|data:", outside, re.I), re.search(r".{40}(https?:|//cdn).{40}", outside)


# ---- pure tier ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(PAGES))
def test_each_page_is_one_self_contained_document(kind):
    page = PAGES[kind]()
    figures = 0 if kind in ("certify", "fleet") else 1  # a certification, a fleet: verdicts and tables, no figure
    assert_self_contained(page, figures)
    assert page.count("<svg") == figures and "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert "<metadata>" not in page  # matplotlib's RDF block names its home page
    assert "written by ortop " in page


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(PAGES))
def test_a_page_is_the_same_bytes_for_the_same_result(kind):
    assert PAGES[kind]() == PAGES[kind]()


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_the_compare_page_carries_the_figures_the_host_and_the_profiles():
    page = PAGES["compare"]()
    text = " ".join(_parse(page).text)
    for needle in ("one.toml", "two.toml", "1.16", "0.590", "839", "1413", "no: offered 900/s", "Test CPU 3000",
                   "4 logical / 2 physical", "0-1,3", "1.5 CPUs", "intra_op_num_threads = 2",
                   "\u221250.2 … \u221245.8", "faster", "no difference", "16 alternating blocks of 75 ms"):
        assert needle in text, needle
    # The warning's markup is text, never markup of the page.
    assert "&lt;b&gt;different&lt;/b&gt;" in page and "<b>different</b>" not in page
    # Each comparison is a row of the forest plot, the objective's in bold; the one without a figure says so.
    assert page.count("two.toml vs one.toml · ") == 4
    assert "not measured" in page


def test_the_tune_page_lists_the_leaderboard_and_the_best_profile():
    page = PAGES["tune"]()
    text = " ".join(_parse(page).text)
    for needle in ("threads 2", "spin off", "threads 8", "winner", "dropped", "failed", "build failed: <oom>",
                   "arena off", "no time left in the budget", "affinity: one NUMA node", "better: p50 −29 %",
                   "p99 ≤ 5 ms", "# session.intra_op_num_threads: default → 2", "verified: best vs baseline",
                   "Test CPU 3000"):
        assert needle in text, needle
    assert "<oom>" not in page
    # The winner first, then the dropped, the failed last (they have no change to plot).
    board = page[page.index("<h2>Leaderboard</h2>"):]
    board = board[:board.index("</table>")]
    assert board.index("threads 2") < board.index("spin off") < board.index("threads 8")
    assert "threads 8 (vs baseline)" not in page


@pytest.mark.slow
def test_the_capacity_page_draws_every_point_and_names_the_best():
    page = PAGES["capacity"]()
    text = " ".join(_parse(page).text)
    assert "Best within p99 ≤ 20 ms: two-threads, 240 requests/s (90 % interval 221–261/s)." in text
    assert "0 (met at no rate)" in text and "the SLO is under the bare service time" in text
    for needle in ("one-thread knee: 180/s", "two-threads knee: 240/s", "SLO: p99 ≤ 20 ms", "served = offered",
                   "met", "not met", "undecided"):
        assert needle in page, needle
    n_points = sum(len(p["points"]) for p in CAPACITY["profiles"])
    assert len(re.findall(r"<tr><td>(one-thread|two-threads|&lt;never&gt;)</td>", page)) == n_points
    assert "<never>" not in page
    # Response times span 4…400 ms here: the axis is logarithmic (ticks 5, 10, 20 … in plain numbers) so the
    # points under the SLO stay readable; a linear axis to 400 ms would have no tick at 5 or 20 ms.
    assert ">5</text>" in page and ">20</text>" in page and "mathdefault" not in page


@pytest.mark.slow
def test_the_capacity_curve_draws_a_point_the_queue_model_decided_small_and_says_so():
    """As in the text curve: a point is drawn at what it measured, small when the long-run estimate decided it."""
    from ortop.report.figures import capacity_curves

    measured = capacity_curves(CAPACITY)
    data = copy.deepcopy(CAPACITY)
    data["profiles"][0]["points"][3]["decided_by"] = "long-run estimate"  # 180/s: met, p99 10.1 ms
    estimated = capacity_curves(data)
    assert estimated != measured  # the one point's marker changed
    radius = r'<path id="cap[^"]*" d="M 0 ([\d.]+)'
    assert re.findall(radius, measured)[3:5] == ["3.25", "3.25"]  # profile 0's met points, full size …
    assert re.findall(radius, estimated)[3:5] == ["3.25", "2"]  # … and the estimated one small
    for svg in (measured, estimated):  # the legend says both sizes
        assert ">measured<" in svg and "queue-model long-run estimate (too few requests to measure its p99)" in svg


@pytest.mark.slow  # over half a second: left out of the quick tier
def test_a_capacity_page_whose_brackets_overlap_names_no_best():
    data = copy.deepcopy(CAPACITY)
    data["best_separated"] = False
    text = " ".join(_parse(capacity_page(data)).text)
    assert "Best within" not in text
    assert ("Ahead within p99 ≤ 20 ms: two-threads, 240 requests/s, but their rerun intervals or their brackets "
            "overlap (or lie within 10 %): not shown to serve more.") in text


def test_a_capacity_page_with_no_profile_meeting_the_slo_says_so():
    data = copy.deepcopy(CAPACITY)
    data["best"] = None
    for p in data["profiles"]:
        p["met"], p["capacity_per_s"] = False, 0.0
        for q in p["points"]:
            q["decision"] = "not met"
    page = capacity_page(data)
    assert_self_contained(page)
    assert "No profile meets p99 ≤ 20 ms at any rate measured here." in page
    assert "knee:" not in page  # no capacity line in the legend
    assert "<h2>Host</h2><p>not recorded</p>" in page


def test_importing_the_cli_and_the_reports_does_not_load_matplotlib():
    code = ("import sys, ortop.cli, ortop.cli.compare, ortop.cli.tune, ortop.report\n"
            "print(any(m == 'matplotlib' or m.startswith('matplotlib.') for m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_write_report_replaces_the_file_whole_and_refuses_bad_paths(tmp_path):
    target = tmp_path / "r.html"
    target.write_text("old")
    write_report(target, "<!DOCTYPE html>\n<p>new</p>")
    assert target.read_text() == "<!DOCTYPE html>\n<p>new</p>"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temp file left behind
    with pytest.raises(UsageError, match="does not exist"):
        check_report(tmp_path / "missing" / "r.html")
    with pytest.raises(UsageError, match="is a directory"):
        write_report(tmp_path, "x")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    with pytest.raises(UsageError, match="refusing to write the report over"):
        check_report(model, protect=(model,))
    assert model.read_bytes() == b"model"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_write_that_fails_after_the_check_is_a_run_time_failure():
    check_report("/dev/full")  # the path is fine: a device ortop writes through
    with pytest.raises(RuntimeFailure, match="cannot write the report /dev/full"):
        write_report("/dev/full", "x" * 100_000)


# ---- the flag, end to end -----------------------------------------------------------------------------------------
@pytest.mark.integration
def test_compare_writes_its_report_after_the_result(matmul_model, threads_profiles, tmp_path, env):  # noqa: F811
    a, b = threads_profiles
    out = tmp_path / "compare.html"
    r = ortop("compare", matmul_model, a, b, "--budget", 2, "--json", "--report", out, env=env)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr  # matplotlib's, say, when a figure's layout does not fit
    d = json.loads(r.stdout)
    page = out.read_text(encoding="utf-8")
    assert_self_contained(page)
    text = " ".join(_parse(page).text)
    for c in d["configs"]:
        assert str(c["runs"]) in text and str(a) in text and str(b) in text
    assert "intra_op_num_threads = 2" in text and "physical" in text
    # The page is the one the printed JSON makes (the host and profiles are the flag's additions).
    assert compare_page(d).split("<h2>Host</h2>")[0] == page.split("<h2>Host</h2>")[0]


@pytest.mark.integration
def test_an_unwritable_report_is_refused_before_measuring(matmul_model, threads_profiles, tmp_path, env):  # noqa: F811
    a, b = threads_profiles
    for cmd in (("compare", matmul_model, a, b, "--budget", 30), ("tune", matmul_model, "--budget", 30)):
        r = ortop(*cmd, "--report", tmp_path / "no" / "r.html", env=env, timeout=20)
        assert "the folder" in one_error_line(r, 2)
        assert r.stdout == ""
    r = ortop("tune", matmul_model, "--save", tmp_path / "x", "--report", tmp_path / "x", env=env, timeout=20)
    assert "name the same file" in one_error_line(r, 2)


@pytest.mark.integration
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_report_that_fails_to_write_keeps_the_printed_result(matmul_model, threads_profiles, env):  # noqa: F811
    a, b = threads_profiles
    r = ortop("compare", matmul_model, a, b, "--budget", 1, "--json", "--report", "/dev/full", env=env)
    assert "cannot write the report /dev/full" in one_error_line(r, 1)
    assert len(json.loads(r.stdout)["configs"]) == 2


# ---- in a browser -------------------------------------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _render(page_path: Path, tmp_path: Path, name: str) -> tuple[np.ndarray, list[str]]:
    """Load ``page_path`` in headless Chromium; return its screenshot (RGB, 0..1) and the URLs the page requested.

    How "requested nothing" is known: Chromium's NetLog (``--log-net-log``) records every request that reaches the
    network stack, with the URL and the network isolation key of the frame asking. Requests made on the page's
    behalf carry the key of its top frame, ``file://``; the browser's own background traffic (component updates,
    time queries, account checks that Debian's chromium makes on every start) carries another key or none, and is
    set aside. Host names resolve nowhere (``--host-resolver-rules``), so nothing leaves the machine either way.
    :func:`test_the_browser_check_sees_a_page_that_fetches` proves the method sees a page's own requests.
    """
    shot, netlog = tmp_path / f"{name}.png", tmp_path / f"{name}.netlog.json"
    cmd = [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
           f"--user-data-dir={tmp_path / f'{name}-profile'}", '--host-resolver-rules=MAP * ~NOTFOUND',
           f"--log-net-log={netlog}", f"--screenshot={shot}", "--window-size=1200,1600", page_path.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    from matplotlib.image import imread

    image = imread(shot)[..., :3]
    log = json.loads(netlog.read_text())
    kinds = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = [e["params"]["url"] for e in log["events"]
            if kinds.get(e["type"]) == "URL_REQUEST_START_JOB" and "file://" in str(e["params"].get(
                "network_isolation_key", "")) and not str(e["params"].get("url", "")).startswith("file:")]
    return image, urls


browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium or chromium-browser binary")


@pytest.mark.integration
@browser
def test_the_browser_check_sees_a_page_that_fetches(tmp_path):
    page = tmp_path / "fetches.html"
    page.write_text('<!DOCTYPE html>\n<html><head><link rel="stylesheet" href="https://cdn.invalid/s.css"></head>'
                    '<body><img src="http://images.invalid/x.png"></body></html>')
    _, urls = _render(page, tmp_path, "fetches")
    assert sorted(urls) == ["http://images.invalid/x.png", "https://cdn.invalid/s.css"]


@pytest.mark.integration
@browser
@pytest.mark.parametrize("kind", sorted(PAGES))
def test_a_page_renders_in_a_browser_and_fetches_nothing(kind, tmp_path):
    path = tmp_path / f"{kind}.html"
    path.write_text(PAGES[kind](), encoding="utf-8")
    image, urls = _render(path, tmp_path, kind)
    assert urls == []
    assert image.shape[:2] == (1600, 1200)
    pixels = (image * 255).round().astype(np.uint8).reshape(-1, 3)
    non_white = np.any(pixels < 245, axis=1).mean()
    colours = len(np.unique(pixels[::7], axis=0))
    assert non_white > 0.03 and colours > 40, (non_white, colours)
    if kind == "capacity":  # the curves were drawn: pixels of the first profile's colour (#1f77b4) are there
        blue = np.all(np.abs(pixels.astype(int) - (0x1F, 0x77, 0xB4)) <= 12, axis=1).sum()
        assert blue > 300, blue


@pytest.mark.integration
@browser
def test_the_browser_shows_each_capacitys_interval_and_the_certification(tmp_path):
    """What Chromium rendered (its DOM after layout, ``--dump-dom``) holds each capacity's 90 % interval and the
    certification's verdict line; the screenshots are kept beside them for a person to look at."""
    seen = {}
    for kind in ("capacity", "certify"):
        path = tmp_path / f"{kind}.html"
        path.write_text(PAGES[kind](), encoding="utf-8")
        r = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                            f"--user-data-dir={tmp_path / f'{kind}-dom'}", "--dump-dom", path.as_uri()],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        seen[kind] = r.stdout
    assert "166" in seen["capacity"] and "195" in seen["capacity"] and "90 % interval" in seen["capacity"]
    assert "221" in seen["capacity"] and "261" in seen["capacity"]
    assert "Certified: p99 ≤ 20 ms at 216 requests/s." in seen["certify"]
    assert "27,000" in seen["certify"] and "MLPerf" in seen["certify"]


@pytest.mark.integration
@browser
def test_the_browser_shows_the_fleets_types_its_flagged_and_lost_nodes_and_the_sizing(tmp_path):
    """The fleet's page as Chromium laid it out: each type with its pooled interval, the node whose interval left
    out its siblings' median flagged, the lost node named, the ranking by cost and the peak's sizing."""
    path = tmp_path / "fleet.html"
    path.write_text(PAGES["fleet"](), encoding="utf-8")
    r = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                        f"--user-data-dir={tmp_path / 'fleet-dom'}", "--dump-dom", path.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "c6i" in dom and "g5" in dom and "Xeon &lt;8375C&gt;" in dom
    assert "dddddddddddd flagged" in dom and "Lost nodes" in dom and "eeeeeeeeeeee (g5" in dom
    assert "Sizing a peak of 280/s" in dom and "Cost per million requests" in dom
