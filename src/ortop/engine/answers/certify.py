"""Certifying a rate, as MLPerf Inference's Server scenario does: Poisson arrivals at the rate on one profile's
session, each request's response counted from its *scheduled* arrival (queue plus service, :mod:`ortop.measure.rows`),
and the early-stopping rule of :mod:`ortop.measure.certify` at the SLO's percentile, overs that come in clumps
counted once per clump.

The run is blocks of Poisson traffic on the bench's worker (:mod:`ortop.engine.bench.pool`, one worker, the blocks
of :func:`ortop.engine.bench.plan.capacity_blocks`, each drawing fresh arrivals), the rule taken after each block on
every request so far in scheduled order. It ends

* ``violated`` as soon as the rule proves the share over the bound above ``1 − p`` (waiting cannot help);
* ``certified`` once the rule certifies *and* the measured time has reached the minimum duration (MLPerf asks 600 s;
  a shorter minimum is a quicker, weaker statement about slow drift, not about the count);
* ``undecided`` when the budget would be overrun by another block, on ctrl-C, or when the worker is lost: with the
  requests still needed (or the time still missing from the minimum duration).

Clumps are read block by block (:func:`blocks_clump_factor`): a block's queue drains before the next block's
settling starts, so the last overs of one block and the first of the next are not one stall. Read across blocks, a
rate whose every request is over would be one clump as long as the run, one independent over however long it ran,
and never proven violated; read per block it is one clump per block, and two blocks prove it.

A shed request (``--max-queue``) got no answer within the bound: it counts as over, at the end of its block. The
measured duration is the blocks' offered windows added up; the settling before each block is not counted (its
requests are not recorded). A worker that dies is restarted with its session and the run goes on (the block it lost
runs again); one that dies again first ends the run with what was measured (``fault``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ortop.collectors.noise import NoiseSampler
from ortop.config.profile import Profile
from ortop.engine.answers.capacity import applied, label
from ortop.engine.bench.deciders import Budget
from ortop.engine.bench.interleave import BlockRun, Faults, WorkerLost, alternate
from ortop.engine.bench.plan import capacity_blocks
from ortop.engine.bench.pool import Pool
from ortop.errors import RuntimeFailure, UsageError
from ortop.measure import rows as R
from ortop.measure.certify import CONFIDENCE, Certification, clump_factor, early_stopping
from ortop.measure.noise import HostNoise
from ortop.measure.slo import Slo
from ortop.present import rate_figure

CERTIFY_MIN_DURATION_S = 60.0   # the default minimum duration (MLPerf's Server scenario asks 600 s)
BUDGET_S = 300.0        # the default budget of a certification (wall clock, the session's build included)
SEARCHED_SHARE = 0.9    # --certify without a rate certifies this share of the capacity found




def percentile_of(slo: Slo) -> float:
    """The SLO's percentile as a fraction (0.99 for p99); UsageError for a mean, which no count of overs can
    certify."""
    q = slo.quantile
    if q is None:
        raise UsageError(f"--certify needs a percentile SLO (p50 … p999), not {slo.metric}: the rule counts "
                         "requests over the bound")
    return q


@dataclass
class CertifyResult:
    """A certification run: the rule's verdict with what the run measured and how it ended."""

    model: str
    slo: Slo
    profile: str
    certification: Certification
    min_duration_s: float
    budget_s: float
    elapsed_s: float
    ended: str                         # why the run stopped, in words
    host_noise: HostNoise = field(default_factory=HostNoise)
    stopped: bool = False              # ctrl-C (or the view's stop)
    fault: str | None = None           # a worker lost for good
    restarts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    applied: str = ""                  # what the profile changes from ORT's defaults (``threads 1``); "" for none

    @property
    def verdict(self) -> str:
        return self.certification.verdict.status

    def label(self) -> str:
        """The profile certified as the result names it: ORT's defaults plus flags by what the flags applied
        (``threads 1``), never "defaults" for settings a user set; any other profile by its name."""
        return label(self.profile, self.applied)

    @property
    def short_s(self) -> float:
        """Measured time still missing from the minimum duration (0 once reached)."""
        return max(0.0, self.min_duration_s - self.certification.duration_s)

    def line(self) -> str:
        """``certified: p99 ≤ 20 ms at 150/s — 9,012 requests, 31 over (clump factor 1.4), 61 s``; ``violated: …``;
        ``undecided: needs N more requests, none of them over — …``."""
        c = self.certification
        v = c.verdict
        clump = f"{v.clump:.2g}" if v.clump < 10 else f"{v.clump:.0f}"
        what = (f"{self.slo.text()} at {rate_figure(c.rate_per_s)}/s — {v.requests:,} requests, {v.over:,} over "
                f"(clump factor {clump}), {c.duration_s:.0f} s")
        if v.status != "undecided":
            return f"{v.status}: {what}"
        needs = []
        if v.more:
            needs.append(f"needs {v.more:,} more requests, none of them over")
        if self.short_s > 0:
            needs.append(f"{self.short_s:.0f} s more to reach the minimum duration of {self.min_duration_s:g} s")
        return f"undecided: {' and '.join(needs) or 'the rule has not decided'} — {what}"

    def progress(self) -> str:
        """While it runs: ``certifying 150/s — 4,012 requests, 3 over, 1,130 needed, 27 s of 60 s minimum``."""
        c = self.certification
        v = c.verdict
        return (f"certifying {rate_figure(c.rate_per_s)}/s — {v.requests:,} requests, {v.over:,} over, {v.needed:,} "
                f"needed, {c.duration_s:.0f} s of {self.min_duration_s:g} s minimum")

    def as_dict(self) -> dict[str, Any]:
        v = self.certification.verdict
        cert = {**self.certification.as_dict(), "needed_more": v.more, "min_duration_s": self.min_duration_s,
                "ended": self.ended, "host_noise": self.host_noise.as_dict()}
        return {"model": self.model, "slo": self.slo.as_dict(), "profile": self.label(),
                "applied": self.applied or None, "certification": cert,
                "elapsed_s": round(self.elapsed_s, 3), "budget_s": self.budget_s, "stopped": self.stopped,
                "fault": self.fault, "restarts": list(self.restarts), "warnings": list(self.warnings)}


def blocks_clump_factor(flags: list[np.ndarray]) -> float:
    """The clump factor ``Σ L² / Σ L`` over the runs of consecutive overs of every block, a run never crossing from
    one block into the next (each block's queue drained before the next one's settling): ``f_b · t_b = Σ L²`` of
    block b, summed over the blocks and divided by all the overs."""
    over = [int(x.sum()) for x in flags]
    total = sum(over)
    if total == 0:
        return 1.0
    return sum(clump_factor(x) * t for x, t in zip(flags, over) if t) / total


class CertifyRun:
    """Certify ``rate_per_s`` for ``profile`` under ``slo`` (see the module docstring). ``on_block(result)`` after
    each block with the result so far (a view shows the requests, the overs and what is needed)."""

    def __init__(self, model_path: str, profile: Profile, slo: Slo, rate_per_s: float, *,
                 min_duration_s: float = CERTIFY_MIN_DURATION_S, budget_s: float = BUDGET_S, name: str = "defaults",
                 stop: threading.Event | None = None, on_block: Callable[[CertifyResult], None] | None = None,
                 strict_providers: bool = False, confidence: float = CONFIDENCE):
        for value, must in ((rate_per_s, "--certify must be a rate > 0 requests/s"),
                            (min_duration_s, "--min-duration must be > 0 seconds")):
            if not (value > 0 and math.isfinite(value)):
                raise UsageError(f"{must}, got {value:g}")
        self.model_path = model_path
        self.profile = profile
        self.slo = slo
        self.p = percentile_of(slo)
        self.rate = rate_per_s
        self.min_duration_s = min_duration_s
        self.budget_s = budget_s
        self.name = name
        self.applied = applied(profile)  # named in the result: "threads 1", not "defaults"
        self.stop = stop or threading.Event()
        self.on_block = on_block
        self.strict_providers = strict_providers
        self.confidence = confidence
        self.faults = Faults()
        self._budget = Budget(budget_s, self.stop)
        self._said: list[str] = []
        self._pool = Pool(model_path, [profile], name="ortop-certify-worker", warn=self._said.append)
        self._flags: list[np.ndarray] = []     # per block, over-the-bound flags in scheduled order
        self._service: list[np.ndarray] = []
        self._shapes: list[np.ndarray] = []
        self._measured_s = 0.0
        self._round = 0
        self._ended = "not started"
        self._noise = HostNoise()

    # ---- what is known ---------------------------------------------------------------------------------------
    def certification(self) -> Certification:
        """The rule on every request so far; certified only once the minimum duration is reached too."""
        n = sum(int(x.size) for x in self._flags)
        over = [int(x.sum()) for x in self._flags]
        v = early_stopping(n, sum(over), self.p, self.confidence, clump=blocks_clump_factor(self._flags))
        if v.status == "certified" and self._measured_s < self.min_duration_s:
            v = replace(v, status="undecided")
        return Certification(rate_per_s=self.rate, duration_s=self._measured_s, verdict=v)

    def result(self) -> CertifyResult:
        return CertifyResult(self.model_path, self.slo, self.name, self.certification(), self.min_duration_s,
                             self.budget_s, self._budget.elapsed(), self._ended, self._noise,
                             stopped=self.stop.is_set(), fault=self.faults.lost, restarts=list(self.faults.said),
                             applied=self.applied)

    # ---- the run ---------------------------------------------------------------------------------------------
    def run(self) -> CertifyResult:
        self._budget.start()
        sampler = NoiseSampler()
        warnings: list[str] = []
        try:
            warnings.extend(self._build())
            sampler.start()
            try:
                self._measure()
            finally:
                noise = sampler.stop()
                service = np.concatenate(self._service) if self._service else np.zeros(0)
                shapes = np.concatenate(self._shapes) if self._shapes else None
                self._noise = noise.judged(service, shapes, self.p) if service.size else noise
        finally:
            self._pool.close()
        logged = [x for w in self._pool.workers for x in w.log if "warn" in x.lower()]
        warnings.extend(x for x in [*self._said, *logged] if x not in warnings)
        warnings.extend(self.faults.said + ([self.faults.lost] if self.faults.lost else []))
        out = self.result()
        out.warnings = warnings[:20]
        return out

    def _build(self) -> list[str]:
        from ortop.engine.placement import build_message

        self._pool.start()
        w = self._pool.of(0)
        w.send(build_message(1, self.profile))
        w.wait(lambda: w.answered(1), max(1.0, self._budget.left()), self.stop)
        if 1 in w.failed:
            raise RuntimeFailure(f"{self.name}: the session failed to build: {w.failed[1]}")
        if 1 not in w.built:
            if self.stop.is_set():
                self._ended = "stopped before the session was built"
                return []
            raise RuntimeFailure(f"{self.name}: {w.dead or 'the session did not build within the budget'}")
        info = w.built[1]
        requested = [x for x in info.get("providers_requested", ()) if x != "CPUExecutionProvider"]
        missing = [x for x in requested if x not in info.get("providers_active", ())]
        if not missing:
            return []
        text = (f"{self.name}: {', '.join(missing)} requested but not active: running on "
                f"{', '.join(info.get('providers_active', ())) or 'nothing'} (silent fallback)")
        if self.strict_providers:
            raise RuntimeFailure(text + " — refused by --strict-providers")
        return [text]

    def _add(self, blocks: list[BlockRun]) -> None:
        for b in sorted(blocks, key=lambda b: b.t_start_ns):
            order = np.argsort(R.arrival_ns(b.rows), kind="stable")
            rows = b.rows[order]
            over = R.response_ms(rows) > self.slo.ms
            shed = int(b.traffic[1]) if b.traffic else 0
            self._flags.append(np.concatenate([over, np.ones(shed, dtype=bool)]))
            self._service.append(R.service_ms(rows))
            self._shapes.append(rows[:, R.Col.SHAPE] if rows.shape[1] > R.Col.SHAPE else np.zeros(len(rows)))
            self._measured_s += b.window_s

    def _measure(self) -> None:
        if self._ended.startswith("stopped"):
            return
        block_s, settle_s = capacity_blocks(self.rate)
        w = self._pool.of(0)
        while True:
            if self.stop.is_set():
                self._ended = "stopped (ctrl-C)"
                return
            if self._budget.left() < block_s + settle_s:
                self._ended = f"the budget of {self.budget_s:g} s ran out"
                return
            try:
                got = alternate([w], [1], 1, block_s, settle_s, rate_hz=self.rate, arrival="poisson",
                                first_round=self._round, stop=self.stop, faults=self.faults, names=[self.name])
            except WorkerLost as lost:
                self._add(lost.blocks)
                self._ended = "the worker was lost"
                return
            self._round += 1  # the next block draws fresh arrivals
            self._add(got)
            status = self.certification().verdict.status
            if self.on_block is not None:
                self.on_block(self.result())
            if status == "violated":
                self._ended = "a violation was proven"
                return
            if status == "certified":
                self._ended = "the rule certified and the minimum duration was reached"
                return


def certify_rate(model_path: str, profile: Profile, slo: Slo, rate_per_s: float, **kw: Any) -> CertifyResult:
    """Check the profile against the model (ProfileError / ModelError for bad input), then certify."""
    from ortop.engine.models import check_profile
    from ortop.model import load_model

    check_profile(load_model(model_path), profile)
    return CertifyRun(model_path, profile, slo, rate_per_s, **kw).run()
