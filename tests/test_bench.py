"""The measuring bench as its clients use it, on real workers and a real model: served is what was served, a
worker's death loses nothing measured, and every configuration is alternated block by block."""

from __future__ import annotations

import json

import pytest

from ortop.engine import headless
from tests.test_cli import ortop
from tests.test_compare import threads_profiles  # noqa: F401  (a fixture)
from tests.test_traffic import batch_model, env, prof  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


def closed_loop_per_s(model: str) -> float:
    """What the model serves in a closed loop on one thread, measured now, on this host as it is."""
    closed = headless.measure(model, prof(model, workload__dims={"batch": 64}), duration_s=1.5)
    return float(closed.summary["throughput_per_s"])


def test_compare_at_twice_what_the_model_serves_says_the_rate_was_not_kept(batch_model, threads_profiles, env):  # noqa: F811
    """Paced at 2× the closed-loop throughput the queue drains past every block's window: served is over the time
    the requests took (about what the model serves, well under the offered rate), and every verdict is marked."""
    ceiling = closed_loop_per_s(batch_model)
    rate = 2 * ceiling
    a, b = threads_profiles
    r = ortop("compare", batch_model, a, b, "--budget", 4, "--json", "--threads", 1, "--dim", "batch=64",
              "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for c in d["configs"]:
        assert c["offered_per_s"] == pytest.approx(rate, rel=0.25), c
        assert c["rate_kept"] is False, c
        # served is what was served: the model's own pace (two configurations share two cores with whatever else
        # runs), never the offered rate
        assert c["throughput_per_s"] < 0.8 * c["offered_per_s"], (c, ceiling)
        assert c["throughput_per_s"] > 0.25 * ceiling, (c, ceiling)
        assert c["blocks_ending_queued"] > 0, c
    assert all(comp["paced_answer"] is False and comp["note"].startswith("not a paced answer")
               for comp in d["comparisons"]), d["comparisons"]
    said = [w for w in d["warnings"] if "the rate was not kept" in w]
    assert len(said) == 2 and all("not a paced answer" in w for w in said), d["warnings"]
    text = ortop("compare", batch_model, a, b, "--budget", 2, "--threads", 1, "--dim", "batch=64",
                 "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "← rate not kept" in text.stdout and "[not a paced answer" in text.stdout, text.stdout
