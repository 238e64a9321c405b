"""Open-loop traffic on real sessions: queueing theory holds, overload is said, shape mixes and traces replay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ortop.config import profile as P
from ortop.engine import headless
from tests.models import make_matmul_model
from tests.test_cli import one_error_line, ortop

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def batch_model(tmp_path_factory) -> str:
    """x [batch, 256] @ W: the service time grows with the free dim ``batch``."""
    return make_matmul_model(tmp_path_factory.mktemp("traffic") / "mm.onnx", n=256)


@pytest.fixture
def env(tmp_path):
    from tests.test_cli import env as cli_env

    return cli_env.__wrapped__(tmp_path)


def prof(model: str, **kw) -> P.Profile:
    changes = {"session.intra_op_num_threads": 1, "workload.warmup_runs": 20}
    changes.update({k.replace("__", "."): v for k, v in kw.items()})
    return P.merge(P.Profile(model=model), **changes)


def _wait_against_theory(model: str, base: P.Profile, rate: float) -> tuple[float, float, dict]:
    """One Poisson run at ``rate``: (measured mean wait, Pollaczek–Khinchine's from the same run, the summary)."""
    res = headless.measure(model, P.merge(base, **{"workload.arrival": "poisson", "workload.rate_hz": rate}),
                           duration_s=8.0)
    s = res.summary
    assert res.fatal is None and s["arrivals"]["mode"] == "poisson" and s["arrivals"]["dropped"] == 0
    lam = s["arrivals"]["offered_per_s"] / 1000.0                      # per ms
    es, sd = s["service_ms"]["mean"], s["service_ms"]["std"]
    rho = lam * es
    assert 0.3 < rho < 0.85, rho
    wq = lam * (sd**2 + es**2) / (2 * (1 - rho))
    # response = queue + service (means add up), in every run
    assert s["latency_ms"]["mean"] == pytest.approx(s["queue_ms"]["mean"] + es, rel=1e-3)
    assert not any("offered" in w for w in s["warnings"])
    return s["queue_ms"]["mean"], wq, s


def test_poisson_queue_wait_matches_pollaczek_khinchine(batch_model):
    """One server, Poisson arrivals at ~60 % of capacity: the mean wait is λ·E[S²] / (2(1 − ρ)) within ±35 %,
    with E[S], Var[S] and λ measured in the same run.

    A shared VM sometimes stalls for tens of ms; a stall inside an 8 s run piles a queue up that no service time
    explains, so the mean wait can only come out *above* the theory for the host's sake. Every run must therefore
    wait at least 0.65 × the theory (a dispatcher that lost waiting fails here), and one of at most three runs must
    land within ±35 % (a dispatcher that invents waiting fails all three; CI has seen two stalled runs in a row)."""
    base = prof(batch_model, workload__dims={"batch": 1024})  # ~1-2 ms a run: wake-ups are small beside it
    closed = headless.measure(batch_model, base, duration_s=2.0)
    rate = 0.6 * closed.summary["throughput_per_s"]
    seen = []
    for _ in range(3):
        got, wq, s = _wait_against_theory(batch_model, base, rate)
        seen.append((round(got, 3), round(wq, 3), s["queue_ms"]["max"]))
        assert got >= 0.65 * wq, seen
        if got == pytest.approx(wq, rel=0.35):
            break
    else:
        pytest.fail(f"mean wait against Pollaczek–Khinchine (measured, theory, longest wait) in three runs: {seen}")


def test_twice_the_capacity_is_said_loudly_and_exits_0(batch_model, env):
    closed = headless.measure(batch_model, prof(batch_model, workload__dims={"batch": 64}), duration_s=1.5)
    rate = 2 * closed.summary["throughput_per_s"]
    r = ortop(batch_model, "--headless", "--json", "--duration", "4", "--threads", "1", "--dim", "batch=64",
              "--rate", f"{rate:.0f}", "--arrival", "poisson", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    arr = d["arrivals"]
    assert arr["kept"] is False and arr["served_per_s"] < 0.7 * arr["offered_per_s"]
    assert arr["dropped"] > 0 or d["latency_ms"]["p99"] > 5 * d["service_ms"]["p99"]
    warning = next(w for w in d["warnings"] if w.startswith("offered "))
    assert f"served {arr['served_per_s']:.0f}/s" in warning and "queueing" in warning
    text = ortop(batch_model, "--headless", "--duration", "2", "--threads", "1", "--dim", "batch=64",
                 "--rate", f"{rate:.0f}", env=env)
    assert text.returncode == 0 and "warning     offered" in text.stdout and "arrivals    fixed" in text.stdout


def test_a_shape_mix_gives_one_row_per_shape_costing_more_as_it_grows(batch_model, env):
    r = ortop(batch_model, "--headless", "--json", "--duration", "3", "--threads", "1",
              "--dim", "batch=1,16,256", env=env)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["shapes"]
    assert [row["shape"] for row in rows] == [{"x": [1, 256]}, {"x": [16, 256]}, {"x": [256, 256]}]
    assert all(row["runs"] > 20 for row in rows)
    runs = [row["runs"] for row in rows]
    assert max(runs) - min(runs) > 0  # drawn at random per request, not cycled
    p50 = [row["service_ms"]["p50"] for row in rows]
    assert p50[0] < p50[1] < p50[2] and p50[2] > 4 * p50[0]


def test_a_trace_replays_every_request_at_its_recorded_rate(batch_model, env, tmp_path):
    rng = np.random.default_rng(0)
    sizes = rng.choice([1, 8, 32], 200)
    times = np.arange(200) / 100.0  # 100 requests/s for 2 s
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"t": round(float(t), 4), "dims": {"batch": int(b)}}) + "\n"
                            for t, b in zip(times, sizes)))
    r = ortop(batch_model, "--headless", "--json", "--threads", "1", "--trace", path, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["runs"] == 200 and d["arrivals"]["mode"] == "trace" and d["arrivals"]["dropped"] == 0
    # offered is arrivals over the run's wall time, which holds the last requests' service and the wind-down after
    # the trace's last arrival at 1.99 s: a replay can never read faster than recorded, a host stall there (CI has
    # seen 44 ms) reads a little slower
    assert 95.0 <= d["arrivals"]["offered_per_s"] <= 102.0, d["arrivals"]
    counts = {row["shape"]["x"][0]: row["runs"] for row in d["shapes"]}
    assert counts == {int(b): int((sizes == b).sum()) for b in (1, 8, 32)}


def test_a_bad_trace_or_a_refused_shape_is_exit_2_naming_it(batch_model, broadcast_model, env, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"t": 0}\n{"t": 0.5}\n{"t": 0.2}\n')
    line = one_error_line(ortop(batch_model, "--headless", "--trace", path, env=env))
    assert f"{path}:3: 't' goes backwards" in line
    # a + b with N = 1 broadcasts; N = 2 against M = 3 does not: the mix's second shape is refused, named
    line = one_error_line(ortop(broadcast_model, "--headless", "--duration", "1", "--dim", "N=1,2",
                                "--dim", "M=3", env=env))
    assert "N=2" in line and "the model refuses it" in line
    line = one_error_line(ortop(batch_model, "--headless", "--arrival", "poisson", env=env))
    assert "needs an offered rate" in line
