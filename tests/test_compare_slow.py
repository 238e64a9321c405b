"""``ortop compare --fail-if`` on a model that runs about ten times a second (``make_slow_model``): a gate on a tail
is judged only on blocks that hold it (pooled neighbouring pairs, or "not judged"), never passed on blocks whose
"p99" is their slowest of a handful of runs; each verdict is named by its rule; ORT's defaults are named as a
profile. Every wait is for the command's end, never a wall-clock bound on the measuring."""

from __future__ import annotations

import json
import re

import pytest

from tests.models import make_slow_model
from tests.test_cli import env, ortop  # noqa: F401  (env is a fixture)
from tests.test_gates_cli import check_gates_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BUDGET_S = 20.0
VERDICT = re.compile(r"\b(pass|fail|FAIL|undecided|not judged)\b")


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory) -> str:
    """About ten runs a second on one thread here (x [512, 2048] @ W [2048, 2048])."""
    return make_slow_model(tmp_path_factory.mktemp("slow") / "slow.onnx")


@pytest.fixture(scope="module")
def mid_model(tmp_path_factory) -> str:
    """The same at batch 64: around a hundred runs a second, so a block of the budget holds tens of runs, not a
    hundred."""
    return make_slow_model(tmp_path_factory.mktemp("mid") / "mid.onnx", batch=64)


def gates_section(lines: list[str]) -> list[str]:
    at = next(k for k, line in enumerate(lines) if line.startswith("gates ("))
    return lines[at:]


def test_an_a_a_p99_gate_at_ten_runs_a_second_is_not_judged_and_never_passes(slow_model, env):  # noqa: F811
    """ORT's defaults (by name) against themselves, one thread, ~10 runs/s for 20 s: blocks of at most ~1 s hold a
    handful of runs, and all of them together about 200 a side, too few for even one pair of pooled 100-run blocks
    per six pairs an interval needs. So the p99 gate is not judged (one warning line saying why and what budget would
    judge it), the result is undecided (exit 6), never a pass nor a fail, and the p99 claims no difference.

    That no other metric claims one either is a rate, not a single run's outcome: at 95 % per interval and three
    metrics, an honest comparison claims a difference in a few A/A runs of a hundred, more while another test loads
    the second core. ``bench/aa_slow.py`` measures that rate (docs/benchmarks/slow.md)."""
    r = ortop("compare", slow_model, "--profile", "defaults", "--profile", "defaults", "--threads", 1,
              "--fail-if", "p99:+5%", "--budget", BUDGET_S, env=env, timeout=150)
    assert r.returncode == 6, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    table = [ln.split() for ln in lines if ln.strip().startswith(("0 ", "1 "))]
    assert [row[1] for row in table] == ["defaults", "defaults"], r.stdout  # ORT's defaults, named as a profile
    for row in table:  # a configuration's pooled p99 only from the 100 runs it needs; else "—", and said why
        runs, p99 = int(row[2]), row[4]
        assert (p99 == "\u2014") == (runs < 100), row
    if any(int(row[2]) < 100 for row in table):
        assert any(ln.strip().startswith("p99 \u2014: fewer than the 100 runs a p99 needs") for ln in lines), lines
    verdicts = [ln for ln in lines if ln.startswith((" *", "  ")) and "\u2192" in ln]
    p99 = next(ln for ln in lines if ln.startswith((" *", "  ")) and ln.strip().startswith("p99 ")
               and ("\u2192" in ln or "not judged yet" in ln))
    assert "\u2192 faster" not in p99 and "\u2192 slower" not in p99, verdicts
    # the comparison's p99 is judged on pooled pairs too (a block's own "p99" is its slowest run), and says so
    if "not judged yet" in p99:  # under 100 runs a side in all: not one pooled pair
        assert "cannot hold a p99 (needs 100), and together they make no pair" in p99, p99
    else:
        assert ", undecided (" in p99 and "cannot hold a p99 (needs 100): judged on" in p99, p99
        assert "too few for an interval]" in p99, p99
    warning = [ln for ln in lines if ln.startswith("warning  p99 gate: blocks of ~")]
    assert len(warning) == 1 and "cannot hold a p99 (needs 100 runs)" in warning[0], lines
    assert re.search(r"not judged; about \d+ s of --budget would judge it$", warning[0]), warning
    gates = gates_section(lines)
    assert gates[1].split()[:7] == ["p99", "gate", "p99", "\u2264", "+5.0", "%:", "not"], gates
    assert "not judged: blocks of ~" in gates[1], gates
    assert gates[2].split()[0] == "comparison:" and gates[2].split()[1] in ("undecided", "no"), gates
    assert gates[3].startswith("gate result: undecided (exit 6): the p99 gate was not judged"), gates
    # every verdict in the gates' section is named by its rule: the gate's, or the comparison's
    for line in gates[1:]:
        if VERDICT.search(line):
            assert line.lstrip().startswith(("p99  gate ", "comparison: ", "gate result: ")), line
    assert " pass" not in r.stdout.replace("not a pass", ""), r.stdout


def test_an_a_a_p99_gate_on_short_blocks_is_pooled_or_not_judged_and_says_which(mid_model, tmp_path,
                                                                               env):  # noqa: F811
    """At around a hundred runs a second the gate lengthens the blocks (a p99 needs 100 runs; 25 s allow about
    0.45 s with 48 blocks), and the p99 gate is judged on them, on pooled pairs that hold 100 runs a side, or not at
    all, as the JSON and the summary say; an A/A never fails its gates (a +50 % threshold no chance reaches), and
    "not judged" is never a pass. Whether a comparison's verdict claims a difference is a rate, measured by
    ``bench/aa_slow.py``, not asserted of one run."""
    md = tmp_path / "gate.md"
    r = ortop("compare", mid_model, "--profile", "defaults", "--profile", "defaults", "--threads", 1,
              "--fail-if", "p99:+50%", "--fail-if", "p50:+50%", "--budget", 25, "--json",
              "--summary-md", md, env=env, timeout=150)
    assert r.returncode in (0, 6), (r.stdout, r.stderr)
    d = json.loads(r.stdout)
    check_gates_json(d, ["p99:+50%", "p50:+50%"])
    assert [c["profile"] for c in d["configs"]] == ["defaults", "defaults"]
    assert d["gate_result"] != "fail" and all(g["result"] != "fail" for g in d["gates"]), d["gates"]
    assert d["block_s"] > 0.35, d["block_s"]  # longer than a comparison's 0.3 s: sized for the p99's runs
    p99 = d["gates"][0]
    on = p99["judged_on"]
    assert on["needs_runs"] == 100 and on["pairs"] > 0
    text = md.read_text()
    if not on["judged"]:
        assert p99["result"] == "not judged" and d["exit_code"] == 6, p99
        assert on["text"] in d["warnings"] and f"- {on['text']}." in text, (d["warnings"], text)
        assert "not judged" in d["gate_note"]
    elif on["pooled_blocks"] != [1, 1]:
        assert on["text"].startswith("p99 judged on pooled blocks of ~") and on["pooled_runs"] >= 100, on
        assert f"- {on['text']}." in text
    else:
        assert on["block_runs"] >= 100 and on["text"].startswith("p99 judged on blocks of ~"), on
    assert text.splitlines()[0].endswith(f": {d['gate_result']}"), text
