"""Interleaved comparison of two or more profiles: build every session, alternate them in short blocks, pair
neighbouring blocks, and say what differs (``ortop compare``, and ``Monitor.verify`` for a history row).

On a drifting host a before/after measured minutes (or seconds) apart reports drift as an effect; blocks of about
0.3 s that alternate (each round's order drawn at random) share the host's state pairwise, so the paired ratios
cancel it (see :mod:`ortop.measure.compare` for the statistics).

Profiles that can share a process (the same ``Profile.restart_key()``: environment and global thread pool) live
as sessions in one worker, which alternates them itself; profiles that cannot get one worker each, alternated
block by block by the parent. The alternation is :class:`ortop.engine.bench.interleave.Interleaver`'s, the one loop
every measuring question runs (the schedule, the seq numbers, the block and settle lengths it is given, a dead
worker's restart); :class:`Interleaving` builds the sessions, reads the workers' messages into blocks (their runs,
memory, idle gaps, traffic and input shapes) and makes the figures.

Holding several sessions costs memory: each build reports the worker's resident memory before and after, the
cost of the next sessions is predicted from the first, and a comparison that would not fit in the memory
available is refused before it builds them.

A block is served over the time its requests took (to its last completion, past its window when a queue drained
after it): a paced profile the host cannot keep reports what it served, not what it was offered, and is said not
to have kept its rate. ``compare_profiles`` runs its workers through :mod:`ortop.engine.bench.pool`: a worker that
dies is restarted with its sessions rebuilt and the alternation goes on; one that dies again before finishing a
block ends the comparison with what was measured (``AbResult.fault``). The stop rules (the budget, the sequential
looks) come from :mod:`ortop.engine.bench.deciders`.

Over ~670 lines: the figures a comparison reports (``ConfigFigures``, ``MemoryCost``, ``AbResult``) and the
:class:`Interleaving` that reads them from the blocks change together (a new figure is a field, what reads it and
its JSON key); the blocks themselves are collected by :class:`ortop.engine.bench.record.BlockRecord`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine.bench.deciders import Budget, GateLook, GateLooks, Looks
from ortop.engine.bench.interleave import Faults, Interleaver, SendChannel, WorkerLost
from ortop.engine.bench.plan import period_ms, plan_blocks
from ortop.engine.bench.pool import Pool, restart_groups  # noqa: F401  (restart_groups: ab's callers use it)
from ortop.engine.bench.record import BlockRecord, gap_figures
from ortop.engine.placement import build_message
from ortop.engine.traffic import offered_rate
from ortop.errors import EXIT_USAGE, RuntimeFailure
from ortop.measure import gate as G
from ortop.measure import sequential
from ortop.measure.agreement import Agreement, Tolerance, agreement
from ortop.measure.compare import METRICS, Block, Comparison, compare_all, pooled, usable_pairs
from ortop.measure.gate import Gate
from ortop.measure.pace import Pace, of_blocks, servers_of, words
from ortop.measure.stats import json_num as _num
from ortop.measure.stats import latency_stats
from ortop.model.feeds import note_level
from ortop.present import MIB, mib, size_text
from ortop.runtime import protocol as proto

BUILD_TIMEOUT_S = 600.0
MEMORY_HEADROOM = 0.85   # refuse when the predicted sessions need more than this share of the available memory


class AbError(RuntimeFailure):
    """The comparison could not run: a session failed to build, a run failed, a worker died (exit 1)."""


class NotEnoughMemory(AbError):
    """The sessions would not fit in the memory available: refused before building them (exit 2)."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class ShapeFigures:
    """One input shape of a mix (or a trace) over a configuration's recorded blocks: its runs' response times."""

    label: str          # the shape's dims, as the worker names it (``seq_len=16``)
    runs: int
    p50_ms: float
    p99_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "runs": self.runs, "p50_ms": _num(self.p50_ms), "p99_ms": _num(self.p99_ms)}


def shape_figures(latency_ms: np.ndarray, shape_ids: np.ndarray, labels: Sequence[str]) -> tuple[ShapeFigures, ...]:
    """Response p50 and p99 of each input shape (``shape_ids``: one per run, indexing ``labels``); () with fewer
    than two shapes, where the configuration's own figures say it all."""
    if len(labels) < 2:
        return ()
    out = []
    for k, label in enumerate(labels):
        st = latency_stats(latency_ms[shape_ids == k])
        out.append(ShapeFigures(str(label), st.runs, st.p50, st.p99))
    return tuple(out)


@dataclass(frozen=True)
class ConfigFigures:
    """One configuration's figures over all its recorded blocks."""

    index: int
    name: str
    profile: Profile
    runs: int
    p50_ms: float
    p99_ms: float
    throughput_per_s: float
    cpu_ms_per_run: float
    blocks: int
    create_ms: float = math.nan
    providers_active: tuple[str, ...] = ()
    offered_per_s: float = math.nan  # open arrivals: what was offered over its blocks (nan: a closed loop)
    dropped: int = 0                 # requests shed on a full queue
    gap_p99_ms: float = math.nan     # service p99 of the runs that followed an idle gap ≥ LONG_GAP_NS
    gap_runs: int = 0                # ... and how many there were
    model: str = ""                  # the model the session ran
    model_bytes: int | None = None   # its file's size
    first_run_ms: float = math.nan
    rss_mib: float = math.nan        # the worker's resident memory with this session built
    session_mib: float = math.nan    # ... and what building it added
    ort_version: str | None = None   # the onnxruntime the worker ran
    agreement: Mapping[str, Agreement | str] | None = None  # its outputs against the first's (None: not compared)
    differs: tuple[str, ...] = ()    # why its outputs differ beyond the tolerance (empty: within it)
    agreement_note: str = ""         # why the outputs were not compared, when they were not
    rss_growth_mib: float = math.nan # the worker's resident memory at its last measured block less at its first
    queued_blocks: int = 0           # open arrivals: blocks whose window ended with requests still waiting
    fastest_ms: float = math.nan     # its fastest response: a lower bound of its service (measure.pace.kept)
    shapes: tuple[ShapeFigures, ...] = ()  # per input shape of a mix or trace (() with one shape)

    def pace(self) -> Pace:
        """What its blocks' arrivals and runs say of the pace (:mod:`ortop.measure.pace`). Each block records the
        requests that arrived in its window (runs + shed, the window's length at the offered rate), each to its
        response, so its runs end up to a response time after the window: the arrivals are judged at their rate
        over the time the runs took, less a median response per block (:func:`ortop.measure.pace.block_span`)."""
        arrived = self.runs + self.dropped
        window = arrived / self.offered_per_s if self.offered_per_s > 0 else math.nan
        return of_blocks(arrived, window, self.runs, self.throughput_per_s, self.blocks, self.p50_ms, self.dropped,
                         offered_rate(self.profile), self.fastest_ms, servers_of(self.profile.workload))

    def kept(self) -> bool:
        """The requests that arrived were served at their pace (:func:`ortop.measure.pace.kept`): its figures
        answer a paced question."""
        if not self.offered_per_s > 0:
            return True
        return self.pace().kept()

    def pace_text(self) -> str:
        queued = (f", {self.queued_blocks} of {self.blocks} blocks ended with a queue" if self.queued_blocks else "")
        said = words(self.offered_per_s, self.throughput_per_s, self.dropped, offered_rate(self.profile))
        return (f"{said}{queued}: the rate was not kept; its latencies include queueing, and its verdicts are not "
                "a paced answer")

    def agreement_text(self) -> str:
        """Its outputs against the first configuration's, in words ("" when not compared)."""
        if self.agreement is None:
            return self.agreement_note
        if all(isinstance(a, Agreement) and a.exact() for a in self.agreement.values()) and self.agreement:
            return "outputs identical"
        return "; ".join(f"{name}: {a.text() if isinstance(a, Agreement) else a}"
                         for name, a in self.agreement.items())

    def as_dict(self) -> dict[str, Any]:
        ag = None if self.agreement is None else {
            name: a.as_dict() if isinstance(a, Agreement) else {"note": a} for name, a in self.agreement.items()}
        return {"profile": self.name, "runs": self.runs, "p50_ms": _num(self.p50_ms), "p99_ms": _num(self.p99_ms),
                "throughput_per_s": _num(self.throughput_per_s), "cpu_ms_per_run": _num(self.cpu_ms_per_run),
                "blocks": self.blocks, "providers_active": list(self.providers_active),
                "offered_per_s": _num(self.offered_per_s), "dropped": self.dropped, "rate_kept": self.kept(),
                "blocks_ending_queued": self.queued_blocks,
                "model": self.model, "model_bytes": self.model_bytes, "ort_version": self.ort_version,
                "create_ms": _num(self.create_ms), "first_run_ms": _num(self.first_run_ms),
                "rss_mib": _num(self.rss_mib), "session_mib": _num(self.session_mib),
                "rss_growth_mib": _num(self.rss_growth_mib),
                "agreement": ag, "outputs_differ": list(self.differs),
                **({"shapes": [s.as_dict() for s in self.shapes]} if self.shapes else {}),
                **({"agreement_note": self.agreement_note} if self.agreement_note else {})}


@dataclass(frozen=True)
class MemoryCost:
    """What holding the sessions cost (bytes; None where not measured)."""

    rss_one: int | None          # the first worker with its first session built
    rss_all: int | None          # all workers with all their sessions built
    per_session: int | None      # the first session's own cost (rss after − before its build)
    available: int | None        # memory available on the host when the comparison started
    workers: int

    def text(self) -> str:
        where = f"{self.workers} workers" if self.workers > 1 else "the worker"
        return (f"memory: {where} {size_text(self.rss_all)} with every session built vs {size_text(self.rss_one)} "
                f"with one (a session ≈ {size_text(self.per_session)}; {size_text(self.available)} available)")

    def as_dict(self) -> dict[str, Any]:
        return {"rss_one_mib": mib(self.rss_one), "rss_all_mib": mib(self.rss_all),
                "per_session_mib": mib(self.per_session), "available_mib": mib(self.available),
                "workers": self.workers}


@dataclass(frozen=True)
class AbResult:
    configs: tuple[ConfigFigures, ...]
    comparisons: tuple[Comparison, ...]
    blocks: tuple[Block, ...]
    elapsed_s: float             # measuring time (builds not counted)
    block_s: float
    settle_s: float
    memory: MemoryCost
    workers: int
    stopped: bool                # cut short by the stop flag
    warnings: tuple[str, ...] = ()
    decided_s: float | None = None  # with ``decide_on``: the measuring time at which every verdict on it was settled
    stopped_early: bool = False     # ... and that was before the budget was spent, so the comparison ended there
    restarts: tuple[str, ...] = ()  # workers that died and were restarted, their sessions rebuilt
    fault: str | None = None        # a worker lost for good: measuring ended there (``stopped`` is set)
    gate_looks: tuple[GateLook, ...] = ()  # with ``gates``: every look the rule took, each gate judged at it

    def comparison(self, other: int, metric: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.other == other and c.metric == metric), None)



def available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        return None


GATE_BLOCK_MAX_S = 2.0   # gates on a tail: blocks grow to hold its runs up to this; pairs of 4 s still follow drift
GATE_RUNS_MARGIN = 1.25  # ... planned for this many times the runs needed: a block's runs vary with the host
GATE_MIN_BLOCKS = 48     # ... and only while this many fit in the budget (24 pairs: the looks at 8, 12, 16, 24)


def gate_block_s(block_s: float, settle_s: float, run_ms: float, budget_s: float, need: int,
                 n_configs: int = 2) -> float:
    """The block length for gates whose metrics need ``need`` runs a block (a p99: 100): long enough to hold them
    at ``run_ms`` a run where the budget allows, never shorter than ``block_s``. The budget allows a block up to
    GATE_BLOCK_MAX_S while GATE_MIN_BLOCKS still fit: longer blocks would leave the other gates (a p50, a
    throughput, judged on pairs) too few pairs. Where that falls short of ``need`` runs, the gates pool
    neighbouring pairs instead (:func:`ortop.measure.gate.judge_blocks`), which gives the tail the same runs and
    keeps the pairs."""
    if need <= 1 or not (math.isfinite(run_ms) and run_ms > 0):
        return block_s
    wanted = GATE_RUNS_MARGIN * need * run_ms / 1e3
    fit = budget_s / (GATE_MIN_BLOCKS * max(2, n_configs) / 2) - settle_s if budget_s > 0 else GATE_BLOCK_MAX_S
    return max(block_s, min(wanted, GATE_BLOCK_MAX_S, fit))


class TailGateLooks(GateLooks):
    """The looks of :class:`ortop.engine.bench.deciders.GateLooks`, each gate judged on blocks that hold its metric
    (:func:`ortop.measure.gate.judge_blocks`: pooled neighbouring pairs where the blocks are short, "not judged"
    where even pooling gives no interval). The looks come at the pairs of blocks as they ran, as before: each
    look's interval keeps its level whatever pairs it is taken on, so the union bound over the looks holds."""

    def _decides(self, used: Sequence[Block], elapsed_s: float) -> float | None:
        fewest = min(len(usable_pairs(used, 0, 1, m)) for m in self.metrics)
        level = self.looks.due(fewest)
        if level is None:
            return None
        look = GateLook(fewest, level, elapsed_s, G.judge_blocks(self.gates, used, level=level))
        self.taken.append(look)
        return None if look.result == "undecided" else level

    def settled_on(self, blocks: Sequence[Block], comparisons: Sequence[Comparison], level: float | None) -> bool:
        """Whether the result's blocks (at the last look, the budget spent) decide the gates."""
        results = G.judge_blocks(self.gates, blocks, level=level, comparisons=comparisons)
        return G.overall([r.result for r in results]) != "undecided"


@dataclass(frozen=True)
class Routes:
    """Where an interleaving's sessions live: ``config_ids[i]``, the worker-side id of profile i, built on
    ``channels[channel_of[i]]`` (a send function per worker). ``restart(channel)`` starts that channel's worker
    again with its sessions (True once built): with it a dead worker's alternation goes on, without it the
    comparison fails. ``finish(channel)`` ends an alternation on a worker (default: ``Pause``). ``built``: sessions
    that already exist in their workers (config id -> their Built info, as tune's racer keeps them): not built
    again."""

    config_ids: Sequence[int]
    channels: Sequence[Callable[[Any], Any]]
    channel_of: Sequence[int]
    restart: Callable[[int], bool] | None = None
    finish: Callable[[int], None] | None = None
    built: Mapping[int, dict] | None = None


@dataclass(frozen=True)
class Ending:
    """When an interleaving may end before its budget, and what it adds to.

    ``decide_on`` (a metric) makes the budget the most it may take: after each round of blocks the look due by
    :mod:`ortop.measure.sequential` (``looks``: a schedule resumed from an earlier run's) is taken, and once every
    verdict on that metric is settled the alternation ends and the result holds the blocks and the intervals of
    that look. ``gates`` (:class:`ortop.measure.gate.Gate`, instead of ``decide_on``; two profiles) end it the same
    way once a look decides them (:class:`TailGateLooks`: ``compare --fail-if``); the result keeps the looks taken
    (``AbResult.gate_looks``). With neither the budget is always spent. ``prior``: an earlier run's blocks this one
    adds to, measured over ``prior_elapsed_s``."""

    decide_on: str | None = None
    gates: Sequence[Gate] = ()
    looks: sequential.Looks | None = None
    prior: Sequence[Block] = ()
    prior_elapsed_s: float = 0.0


class Interleaving:
    """One interleaved comparison over workers reached as ``routes`` says (:class:`Routes`), alternated by an
    :class:`ortop.engine.bench.interleave.Interleaver`, ended as ``ending`` says (:class:`Ending`).

    The owner routes every worker message to :meth:`deliver` (with its channel index) and calls
    :meth:`worker_died` if a worker dies. ``run()`` blocks until the budget is spent (or ``stop`` is set, or the
    ending decides) and returns the result; it raises AbError / NotEnoughMemory. A gate on a percentile also
    lengthens the blocks so that each holds its runs where the budget allows (:func:`gate_block_s`).
    """

    def __init__(self, profiles: Sequence[Profile], routes: Routes, *, budget_s: float,
                 names: Sequence[str] | None = None, stop: threading.Event | None = None,
                 per_session_hint: int | None = None, block_s: float | None = None, settle_s: float | None = None,
                 metrics: Sequence[str] = METRICS, feed_model: str = "", tolerance: Tolerance | None = None,
                 ending: Ending = Ending()):
        config_ids, channels, channel_of = routes.config_ids, routes.channels, routes.channel_of
        restart, finish, built = routes.restart, routes.finish, routes.built
        decide_on, gates, looks = ending.decide_on, ending.gates, ending.looks
        prior, prior_elapsed_s = ending.prior, ending.prior_elapsed_s
        if len(profiles) < 2:
            raise ValueError("a comparison needs at least two profiles")
        self.profiles = list(profiles)
        self.ids = list(config_ids)
        self.names = list(names) if names else [f"config {i}" for i in range(len(profiles))]
        self.channels = list(channels)
        self.channel_of = list(channel_of)
        self.budget_s = budget_s
        self.stop = stop or threading.Event()
        self.finish = finish
        self.per_session_hint = per_session_hint
        self.block_s, self.settle_s = block_s, settle_s
        self.metrics = tuple(metrics)
        if decide_on is not None and decide_on not in self.metrics:
            raise ValueError(f"decide_on {decide_on!r} is not one of the metrics compared")
        if gates and decide_on is not None:
            raise ValueError("give decide_on or gates, not both")
        self.decide_on = decide_on
        self.feed_model = feed_model    # every session fed from this model's inputs ("": each from its own)
        self.tolerance = tolerance      # set: each session's outputs are compared with the first's
        self._looks: Looks | GateLooks | None = \
            TailGateLooks(gates, len(self.profiles)) if gates else \
            Looks(decide_on, len(self.profiles), looks) if decide_on is not None else None
        self._budget = Budget(budget_s, self.stop)
        self._gate_runs = max((G.runs_for(g.metric) for g in gates), default=1)  # runs a gated metric needs
        self._index = {cid: i for i, cid in enumerate(self.ids)}
        self._cv = threading.Condition()
        self._built: dict[int, dict] = {}
        # ``built``: sessions that already exist in their workers (config id -> what their Built said): not built
        # again, and without memory figures (the sessions exist, so whether they would fit does not apply)
        self._prebuilt = {cid: {**info, "rss_before": -1, "rss_after": -1} for cid, info in (built or {}).items()}
        self._failed: dict[int, str] = {}
        # what the workers measured, block by block, after ``prior`` (an earlier run's blocks this one adds to,
        # measured over ``prior_elapsed_s``)
        self.record = BlockRecord(len(self.profiles), prior)
        self._prior_s = prior_elapsed_s
        # The schedule, the seq numbers and a dead worker's restart are the interleaver's. A worker that dies: with
        # ``restart`` (start it again with its sessions; True once built) the alternation goes on; without, the
        # comparison fails (AbError). ``faults`` says what happened to the workers.
        self.faults = Faults()
        self._il = Interleaver(
            [SendChannel(send, restart=None if restart is None else partial(restart, ch))
             for ch, send in enumerate(self.channels)], self.channel_of, self.ids, names=self.names, stop=self.stop,
            faults=self.faults, recover=restart is not None, cv=self._cv, error=AbError)
        self._closed = False
        self._phase = "building"
        self.warnings: list[str] = []

    # ---- progress ----------------------------------------------------------------------------------------------
    @property
    def phase(self) -> str:
        return self._phase

    def elapsed(self) -> float:
        """This run's measuring time (an earlier run's it adds to not counted)."""
        return self._budget.elapsed()

    def blocks_so_far(self) -> int:
        return self.record.new_blocks()

    # ---- messages ------------------------------------------------------------------------------------------------
    def deliver(self, msg: Any, channel: int = 0) -> None:
        with self._cv:
            decided = self._looks is not None and self._looks.decision is not None
            if self._closed or (decided and isinstance(msg, (proto.Samples, proto.BlockDone))):
                return  # decided: what runs until the alternation ends is not part of the comparison
            if isinstance(msg, proto.Built) and msg.config_id in self._index:
                self._built[msg.config_id] = msg.info
            elif isinstance(msg, proto.BuildFailed) and msg.config_id in self._index:
                self._failed[msg.config_id] = msg.message
            elif isinstance(msg, proto.Samples) and msg.config_id in self._index and msg.block >= 0:
                self.record.samples(self._index[msg.config_id], msg)
            elif isinstance(msg, proto.BlockDone) and msg.config_id in self._index:
                gseq = self._il.block_done(channel, msg.seq) + self.record.seq0
                self.record.block_done(self._index[msg.config_id], msg, gseq)
            elif isinstance(msg, proto.AlternationDone):
                self._il.alternation_done(channel)
            elif isinstance(msg, proto.RunError) and msg.config_id in self._index:
                self._il.fail(f"{self.names[self._index[msg.config_id]]}: Run() failed: {msg.message}")
            elif isinstance(msg, proto.Log):
                self._log(msg.line)
            else:
                return
            self._cv.notify_all()

    def _log(self, line: str) -> None:
        if len(self.warnings) < 200 and line not in self.warnings:
            self.warnings.append(line)

    def worker_died(self, channel: int, why: str) -> None:
        """The worker behind ``channel`` died: restarted by the alternation when ``restart`` was given, else the
        comparison fails (:meth:`abort`)."""
        self._il.died(channel, why)

    def abort(self, message: str) -> None:
        self._il.fail(message)

    def _wait(self, cond: Callable[[], bool], timeout: float) -> bool:
        """Wait for ``cond`` (under the lock) until timeout; raises on an error; False on timeout or stop."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                if self._il.error is not None:
                    raise AbError(self._il.error)
                if cond():
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self.stop.is_set():
                    return False
                self._cv.wait(min(left, 0.05))

    # ---- the run -------------------------------------------------------------------------------------------------
    def run(self) -> AbResult:
        try:
            memory = self._build_all()
            if self.stop.is_set():
                return self._result(memory, stopped=True)
            lat = max(self._latency_estimate(i) for i in range(len(self.profiles)))
            block, settle = plan_blocks(lat, self.budget_s, len(self.profiles), period_ms(self.profiles))
            # gates on a tail: blocks that hold its runs, where the budget allows
            block = gate_block_s(block, settle, max(lat, period_ms(self.profiles)), self.budget_s, self._gate_runs,
                                 len(self.profiles))
            block = self.block_s or block
            settle = self.settle_s if self.settle_s is not None else settle
            self.block_s, self.settle_s = block, settle
            self._phase = "measuring"
            self._budget.start()
            try:
                self._il.run(block, settle, should_stop=self._should_stop)
            except WorkerLost:
                pass  # self.faults says why; what was measured before stands
            stopped = self.stop.is_set() or self.faults.lost is not None
            self._phase = "finishing"
            return self._result(memory, stopped=stopped)
        finally:
            with self._cv:
                self._closed = True
            self._end_all()

    def _end_all(self) -> None:
        for ch in range(len(self.channels)):
            if self.finish is not None:
                self.finish(ch)
            else:
                self.channels[ch](proto.Pause())

    def _build_all(self) -> MemoryCost:
        available = available_memory()
        per = self.per_session_hint
        rss_one: int | None = None
        last_rss: dict[int, int] = {}
        n = len(self.profiles)
        for i, (prof, cid) in enumerate(zip(self.profiles, self.ids)):
            if per is not None and per > 0 and available is not None:
                need = per * (n - i)
                if need > MEMORY_HEADROOM * available:
                    raise NotEnoughMemory(
                        f"the {n - i} session{'s' if n - i > 1 else ''} still to build need about {need / MIB:.0f} "
                        f"MiB ({per / MIB:.0f} MiB each, as a build measured it) but only "
                        f"{available / MIB:.0f} MiB of memory is available: compare fewer profiles at once")
            if cid in self._prebuilt:
                with self._cv:
                    self._built[cid] = self._prebuilt[cid]
            else:
                self._send_build(i, prof, cid)
            ok = self._wait(partial(self._answered, cid), BUILD_TIMEOUT_S)
            if not ok:
                if self.stop.is_set():
                    return MemoryCost(rss_one, None, per, available, len(self.channels))
                raise AbError(f"{self.names[i]}: the session did not finish building in {BUILD_TIMEOUT_S:.0f} s")
            if cid in self._failed:
                raise AbError(f"{self.names[i]}: the session failed to build: {self._failed[cid]}")
            info = self._built[cid]
            before, after = int(info.get("rss_before", -1)), int(info.get("rss_after", -1))
            if before >= 0 and after >= 0:
                last_rss[self.channel_of[i]] = after
                if rss_one is None:
                    rss_one = after
                cost = max(0, after - before)
                per = cost if per is None else max(per, cost)
            self._check_providers(i, info)
            for note in info.get("notes", ()):  # what the inputs rest on: a warning among them (model.feeds), once
                if note_level(str(note)) == "warning" and str(note) not in self.warnings:
                    self.warnings.append(str(note))
        rss_all = sum(last_rss.values()) if last_rss else None
        return MemoryCost(rss_one, rss_all, per, available, len(self.channels))

    def _send_build(self, i: int, prof: Profile, cid: int) -> None:
        msg = build_message(cid, prof)
        if self.feed_model or self.tolerance is not None:
            msg = replace(msg, feed_model=self.feed_model, outputs=self.tolerance is not None)
        self.channels[self.channel_of[i]](msg)

    def _answered(self, cid: int) -> bool:
        return cid in self._built or cid in self._failed

    def _check_providers(self, i: int, info: dict) -> None:
        requested = [p for p in info.get("providers_requested", ()) if p != "CPUExecutionProvider"]
        missing = [p for p in requested if p not in info.get("providers_active", ())]
        if missing:
            self.warnings.append(f"{self.names[i]}: {', '.join(missing)} requested but not active: running on "
                                 f"{', '.join(info.get('providers_active', ()))} (silent fallback)")

    def _latency_estimate(self, i: int) -> float:
        """About how long one run takes (ms), or the pacing interval when that is longer."""
        info = self._built.get(self.ids[i], {})
        warm = float(info.get("warmup_ms", math.nan))
        lat = warm if math.isfinite(warm) and warm > 0 else float(info.get("first_run_ms", 1.0))
        rate = self.profiles[i].workload.rate_hz
        return max(lat, 1000.0 / rate) if rate > 0 else lat

    def _should_stop(self, ahead_s: float) -> bool:
        """Under the lock, whenever blocks may have come in (``ahead_s``: what the next block would take): the
        budget is spent, or the sequential rule's look, if one is due (with ``decide_on`` or gates), settled what
        it waits for."""
        return self._budget.spent(ahead_s) or (self._looks is not None and
                                               self._looks.after(self.record.blocks, self.elapsed() + self._prior_s))

    def _result(self, memory: MemoryCost, stopped: bool) -> AbResult:
        with self._cv:
            decision = self._looks.decision if self._looks is not None else None
            blocks, windows, ids = self.record.upto(decision.blocks if decision is not None else None)
            elapsed = self.elapsed() + self._prior_s if decision is None else decision.elapsed_s
        figures = []
        for i, prof in enumerate(self.profiles):
            mine = [b for b in blocks if b.config == i]
            st = pooled(mine)  # one definition of a configuration's percentiles: its blocks' runs pooled
            lat = np.concatenate([b.latency_ms for b in mine if b.latency_ms is not None] or [np.zeros(0)])
            shape_of = np.concatenate([x for b, x in zip(blocks, ids) if b.config == i and b.latency_ms is not None]
                                      or [np.zeros(0, np.int32)])
            wall = sum(b.t_end - b.t_start for b in mine)  # each to its last completion: served over it
            offered_s = sum(w for b, w in zip(blocks, windows) if b.config == i)
            cpu_known = [b for b in mine if math.isfinite(b.cpu_ms_per_run) and b.runs]
            cpu = (sum(b.cpu_ms_per_run * b.runs for b in cpu_known) / sum(b.runs for b in cpu_known)
                   if cpu_known else math.nan)
            info = self._built.get(self.ids[i], {})
            arrived, dropped = self.record.offered[i]
            fig = ConfigFigures(i, self.names[i], prof, st.runs, st.p50, st.p99,
                                st.runs / wall if wall > 0 else math.nan, cpu, len(mine),
                                float(info.get("create_ms", math.nan)), tuple(info.get("providers_active", ())),
                                arrived / offered_s if arrived and offered_s > 0 else math.nan, dropped,
                                *gap_figures(self.record.long_gap[i]), **self._model_figures(i, info),
                                queued_blocks=self.record.queued[i], fastest_ms=st.min,
                                shapes=shape_figures(lat, shape_of, info.get("shape_labels") or ()))
            figures.append(fig)
            if not fig.kept():
                self._log(f"{fig.name}: {fig.pace_text()}")
            if fig.differs:
                self._log(f"{fig.name}: outputs differ from {self.names[0]}'s: {'; '.join(fig.differs)}")
        # with decide_on, every interval is the one of the look the rule ended at: the deciding one, or the last
        level = self._looks.level() if self._looks is not None else None
        comps = tuple(compare_all(blocks, len(self.profiles), self.metrics, elapsed_s=elapsed or None, level=level)) \
            if blocks else ()
        decided_s = decision.elapsed_s if decision is not None else None
        if decision is None and self._looks is not None and (
                self._looks.settled_on(blocks, comps, level) if isinstance(self._looks, TailGateLooks)
                else self._looks.settled(comps)):
            decided_s = elapsed  # settled at the last look, when the budget was spent
        return AbResult(tuple(figures), comps, tuple(blocks), elapsed, self.block_s or math.nan,
                        self.settle_s if self.settle_s is not None else math.nan, memory, len(self.channels),
                        stopped, tuple(self.warnings), decided_s, decision is not None, tuple(self.faults.said),
                        self.faults.lost,
                        tuple(self._looks.taken) if isinstance(self._looks, GateLooks) else ())


    def _model_figures(self, i: int, info: Mapping[str, Any]) -> dict[str, Any]:
        """The model's side of configuration i: which model, its size, first run, memory, onnxruntime, and its
        outputs against the first configuration's on the same inputs."""
        from ortop.engine.models import model_bytes

        model = str(info.get("model") or self.profiles[i].model)
        before, after = int(info.get("rss_before", -1)), int(info.get("rss_after", -1))
        out: dict[str, Any] = {
            "model": model, "model_bytes": model_bytes(model) if model else None,
            "first_run_ms": float(info.get("first_run_ms", math.nan)),
            "rss_mib": after / MIB if after >= 0 else math.nan,
            "session_mib": max(0, after - before) / MIB if before >= 0 and after >= 0 else math.nan,
            "ort_version": info.get("ort_version"),
            "rss_growth_mib": (rss[1] - rss[0]) / MIB if (rss := self.record.rss[i])[0] >= 0 else math.nan,
        }
        if self.tolerance is None or i == 0:
            return out
        ref = self._built.get(self.ids[0], {})
        if "outputs" not in ref or "outputs" not in info:
            out["agreement_note"] = "outputs not compared: not received"
        elif ref.get("feeds_digest") != info.get("feeds_digest"):
            out["agreement_note"] = f"outputs not compared: its inputs differ from {self.names[0]}'s"
        else:
            ag = agreement(ref["outputs"], info["outputs"])
            out["agreement"] = ag
            out["differs"] = tuple(self.tolerance.breaches(ag))
        return out




def compare_profiles(model_path: str, profiles: Sequence[Profile], *, budget_s: float,
                     names: Sequence[str] | None = None, stop: threading.Event | None = None,
                     on_start: Callable[[Interleaving], None] | None = None,
                     tolerance: Tolerance | None = None, **kw: Any) -> AbResult:
    """Compare ``profiles`` (two or more) in fresh workers: one per restart group.

    Each profile runs its own ``model``; one that names none runs ``model_path``. Sessions of different models
    share a worker like any others (the worker is one per environment, not per model), and every session is fed
    from the first profile's model's inputs, so each model sees the same arrays: models whose inputs cannot take
    them are refused (:class:`ortop.engine.models.InputsDiffer`, exit 2) before any worker starts. With
    ``tolerance`` each session's outputs of one run after its warm-up are compared with the first's
    (``ConfigFigures.agreement``; ``differs`` says what is beyond the tolerance).

    Profiles are compared as given (their workloads included); ``kw`` goes to :class:`Interleaving`.
    """
    from ortop.engine.models import check_inputs

    profiles = [p if p.model else replace(p, model=model_path) for p in profiles]
    check_inputs(profiles)
    model_path = profiles[0].model  # the reference: every worker starts with it, every session is fed from it
    said: list[str] = []
    pool = Pool(model_path, profiles, name="ortop-ab-worker",
                warn=lambda text: said.append(text) if text not in said else None)
    routes = Routes(list(range(len(profiles))), [w.send for w in pool.workers], pool.groups,
                    restart=lambda ch: pool.workers[ch].restart(BUILD_TIMEOUT_S, il.stop))
    il = Interleaving(profiles, routes, budget_s=budget_s, names=names, stop=stop, feed_model=model_path,
                      tolerance=tolerance, **kw)
    for ch, w in enumerate(pool.workers):
        w.listener = partial(il.deliver, channel=ch)
        w.on_death = partial(il.worker_died, ch)
    try:
        pool.start()
        for text in said:  # the profile's allocator, left out: said with the comparison's warnings
            il.deliver(proto.Log(text))
        if on_start is not None:
            on_start(il)
        return il.run()
    finally:
        pool.close()
