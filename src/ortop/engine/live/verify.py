"""Live verification, a part of the :class:`~ortop.engine.live.monitor.Monitor` kept in a module of its own: a history
row's change measured again by interleaving both configurations for a few seconds, in the running worker (or in
fresh workers when they cannot share one process), and the row's verdict set from that comparison.

:class:`Verification` is a mixin: it runs under the monitor's lock and uses its stores, its worker and its events,
all in the one :class:`~ortop.engine.live.monitor_state.MonitorState` the monitor makes (a verification under way is its
:class:`~ortop.engine.live.monitor_state.Verifying`; what earlier ones measured, its :class:`Pooled` per pair of rows).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import numpy as np

from ortop.config.profile import Profile
from ortop.engine import traffic as T
from ortop.engine.bench import ab
from ortop.engine.bench.plan import period_ms, verify_seconds
from ortop.engine.bench.record import LONG_GAP_NS
from ortop.engine.live.events import seconds_text
from ortop.engine.live.monitor_state import MonitorState, Pooled, Verifying
from ortop.engine.live.snapshot import RowVerdict, State, VerifyProgress
from ortop.engine.live.store import ConfigStore
from ortop.engine.live.verdicts import not_comparable, objective_metric, verdict_from
from ortop.measure import sequential
from ortop.measure.compare import METRICS, SECONDS_MORE_CAP, Block, compare, pairs
from ortop.runtime import protocol as proto

POOLS_KEPT = 8         # pairs of rows whose verification runs are kept to add to (the most recent)
PRESS_MAX_S = SECONDS_MORE_CAP  # a press measures at most this long: beyond it the verdict says "more than"
MORE_MARGIN = 3.0      # "about N s more" is this many times the plain estimate (see _keep_for_next)


def whole_pairs(blocks: Sequence[Block]) -> tuple[Block, ...]:
    """Blocks of two configurations kept as the neighbour pairs they form, in order, numbered 0 … 2k−1 (an
    unpaired block at the end is dropped: the next run's first block must not pair with it across the gap)."""
    kept = sorted((b for pair in pairs(blocks, 0, 1) for b in pair), key=lambda b: b.seq)
    return tuple(replace(b, seq=k) for k, b in enumerate(kept))


class Verification:
    """The monitor's verification (see the module docstring)."""

    # What of the monitor this part reads and writes (``st``, made in Monitor.__init__).
    model_path: str
    st: MonitorState

    # The monitor's methods this part calls.
    now: Callable[[], float]
    _send: Callable[[Any], None]
    _event: Callable[[str, str], None]
    _new_id: Callable[[], int]
    _set_state: Callable[[State], None]

    def verify(self, config_id: int, against_id: int | None = None, seconds: float | None = None,
               metric: str | None = None) -> Future:
        """Compare history row ``config_id`` with ``against_id`` (default: the row before it) by interleaving.

        ``metric`` (one of :data:`ortop.measure.compare.METRICS`) is what the verification judges and stops on: the
        objective the user set; by default the change's own metric, CPU per run for a paced or open caller
        (:func:`ortop.engine.live.verdicts.objective_metric`). Pressed again for the same two rows, a verification adds
        to the pairs the earlier ones measured (each run spending its own share of α), and by default measures as
        long as the last one said more would decide (at most ``PRESS_MAX_S``).

        Both configurations are rebuilt as sessions in the running worker and alternate in short blocks for
        ``seconds`` (builds not counted); ``Snapshot.verifying`` shows the progress; the row's verdict becomes
        the comparison's (its kind from the metric the change is about, every metric in ``comparisons``), and
        the worker goes back to the configuration that was live. Rows whose workloads differ get "not
        comparable" at once. Configurations that cannot share one process (environment, global thread pool) are
        compared in fresh workers of their own while the live one is paused.

        Returns a Future of the RowVerdict (None when cancelled by an apply, a pause or stop). Raises ValueError
        for an unknown row, a first row with nothing before it, or while another verification runs.
        """
        with self.st.lock:
            rows = [c for c in self.st.stores.values() if c.row]
            row = self.st.stores.get(config_id)
            if row is None or not row.row:
                raise ValueError(f"no configuration #{config_id} in the history")
            if against_id is None:
                ids = [c.config_id for c in rows]
                k = ids.index(config_id)
                if k == 0:
                    raise ValueError(f"configuration #{config_id} is the first: nothing to verify it against")
                against_id = ids[k - 1]
            base = self.st.stores.get(against_id)
            if base is None or not base.row:
                raise ValueError(f"no configuration #{against_id} in the history")
            if against_id == config_id:
                raise ValueError("a configuration cannot be verified against itself")
            if self.st.verify is not None:
                raise ValueError("a verification is already running")
            if self.st.current is None or self.st.fatal is not None or self.st.worker is None:
                raise ValueError("nothing is running to verify with")
            if self.st.state == State.PAUSED:
                raise ValueError("paused: resume before verifying")
            fut: Future = Future()
            rv = not_comparable(base.profile, row.profile, against_id)
            if rv is not None:
                row.verdict = rv
                row.verdict_gen += 1
                self.st.generation += 1
                fut.set_result(rv)
                return fut
            if metric is not None and metric not in METRICS:
                raise ValueError(f"unknown metric {metric!r}: expected one of {', '.join(METRICS)}")
            pooled = self.st.verify_pool.get((against_id, config_id)) or Pooled()
            if seconds is None:  # 6 s, or longer where blocks are long (a paced or slow model): ~8 pairs
                lat = [float(np.median(c.ring.view()[:, T.RESPONSE])) for c in (base, row) if len(c.ring)]
                seconds = verify_seconds(max(lat) if lat else math.nan, period_ms([base.profile, row.profile]))
                if pooled.more_s is not None:  # what the last press said would decide it
                    seconds = max(seconds, min(PRESS_MAX_S, pooled.more_s))
            v = Verifying(config_id, against_id, seconds, fut, metric or objective_metric(base.profile, row.profile),
                        pooled)
            self.st.verify = v
            row.verdict_gen += 1
            self.st.generation += 1
            self._set_state(State.VERIFYING)
            more = (f", adding to the {len(pooled.blocks) // 2} pairs measured before" if pooled.blocks else "")
            self._event("info", f"verifying #{config_id} against #{against_id}: interleaving them for "
                                f"{seconds_text(seconds)}{more}")
            v.thread = threading.Thread(target=self._verify_run, args=(v, base.profile, row.profile), daemon=True,
                                        name="ortop-verify")
            v.thread.start()
            return fut

    def _verify_run(self, v: Verifying, before: Profile, after: Profile) -> None:
        result: RowVerdict | None = None
        error: str | None = None
        try:
            same_worker = (before.restart_key() == after.restart_key() == self.st.worker_key)
            names = [f"#{v.against_id}", f"#{v.config_id}"]
            metric = v.metric  # the one whose settled verdict ends the interleaving
            if same_worker:
                res = self._verify_in_worker(v, before, after, names, metric)
            else:
                res = self._verify_in_fresh_workers(v, before, after, names, metric)
            if res is not None and not v.cancel.is_set():
                comps, more_s = self._keep_for_next(v, res, metric)
                result = with_long_gaps(verdict_from(comps, metric, v.against_id), res, metric)
        except ab.NotEnoughMemory as exc:
            error = f"verification refused: {exc}"
        except Exception as exc:  # a build or run failure of a temporary session: the live one is untouched
            error = f"verification failed: {exc}"
        with self.st.lock:
            row = self.st.stores.get(v.config_id)
            if result is not None and row is not None:
                row.verdict = result
                self._event("info", f"verified #{v.config_id} against #{v.against_id}: {result.text}")
            elif error:
                self._event("error", error)
            elif v.cancel.is_set():
                self._event("info", f"verification of #{v.config_id} cancelled ({v.why})")
            if row is not None:
                row.verdict_gen += 1
            self.st.verify = None
            self.st.generation += 1
            if self.st.state == State.VERIFYING:
                self._set_state(State.PAUSED if v.paused else State.MEASURING)
            self.st.changed.notify_all()
        v.future.set_result(result)

    def _verify_in_worker(self, v: Verifying, before: Profile, after: Profile, names: list[str], metric: str):
        with self.st.lock:
            ids = (self._new_id(), self._new_id())
            v.temp_ids = ids
            for cid, prof, name in zip(ids, (before, after), names):
                self.st.stores[cid] = ConfigStore(cid, prof, label=f"verifying {name}", row=False, started=self.now())
            hint = max((c.session_bytes() or 0 for c in self.st.stores.values() if c.info), default=0) or None

        def finish(ch: int) -> None:
            with self.st.lock:
                live = self.st.current.config_id if self.st.current is not None else None
                if live is not None:
                    self._send(proto.RunLive(live))
                for cid in ids:
                    self._send(proto.Drop(cid))
                    self.st.in_worker.discard(cid)

        il = ab.Interleaving([before, after], ab.Routes(ids, [self._send], [0, 0], finish=finish),
                             budget_s=v.seconds, names=names, stop=v.cancel, per_session_hint=hint,
                             **self._resume_args(v, metric))
        with self.st.lock:
            v.interleaving = il
            self.st.in_worker.update(ids)
        try:
            return il.run()
        finally:
            with self.st.lock:
                for cid in ids:
                    self.st.stores.pop(cid, None)
                    self.st.record_cache.pop(cid, None)

    def _verify_in_fresh_workers(self, v: Verifying, before: Profile, after: Profile, names: list[str], metric: str):
        self._send(proto.Pause())  # the live worker waits, blocked; the comparison runs in workers of its own

        def on_start(il: ab.Interleaving) -> None:
            with self.st.lock:
                v.interleaving = il

        try:
            return ab.compare_profiles(self.model_path, [before, after], budget_s=v.seconds, names=names,
                                       stop=v.cancel, on_start=on_start, **self._resume_args(v, metric))
        finally:
            if not v.paused and not self.st.stopping:
                self._send(proto.Resume())

    @staticmethod
    def _resume_args(v: Verifying, metric: str) -> dict[str, Any]:
        """How an interleaving ends and what it adds to: decided on ``metric``, after the earlier runs' whole pairs
        and their time, with this run's looks; the earlier runs' block sizes."""
        p = v.pooled
        same = {"block_s": p.block_s, "settle_s": p.settle_s} if p.block_s is not None else {}
        ending = ab.Ending(decide_on=metric, looks=sequential.resumed(len(p.blocks) // 2, p.times), prior=p.blocks,
                           prior_elapsed_s=p.elapsed_s)
        return {"ending": ending, **same}

    def _keep_for_next(self, v: Verifying, res: Any, metric: str) -> tuple[tuple, float | None]:
        """Keep this run's pairs for the next press on the same rows, and say what more would decide: an undecided
        verdict's "about N s more" is estimated at the level the next press will judge at (stricter: it spends
        a smaller share of α), which is what it has to come true at, and tripled: the plain estimate assumes the
        change stays where it is. Simulated (half the changes within ±1 % of none, half 3–30 %, pairs of 1–6 %
        spread, 8–15 pairs before), the next press decides within the plain estimate 69 % of the time, within
        twice it 79 %, within three times 86 %. The next press measures N with the blocks of the first (so "N s"
        buys the pairs it counted) and stops as soon as it is decided, so the margin costs nothing it does not
        need. Only a change measured beyond the ±2 % margin gets an N: see the note below. Returns the comparisons
        to judge by and N."""
        blocks = whole_pairs(res.blocks)
        comps = tuple(res.comparisons)
        main = next((c for c in comps if c.metric == metric and c.other == 1), None)
        more_s = None
        # a change measured within the margin heads for "no difference", which a change of a percent or two (two
        # sessions of the same settings differ that much) never reaches: no time is promised for it (measured: each
        # "about N s" shown for one came untrue, 0 of 3); its interval says what was ruled out
        heading = main is not None and abs(main.change_pct) > main.margin_pct
        if main is not None and main.verdict == "undecided" and blocks and heading:
            nxt = sequential.resumed(len(blocks) // 2, v.pooled.times + 1)
            level = 1 - nxt.alpha * (1 - sequential.FIRST_SHARE)  # its last look, after one look inside it
            again = compare(blocks, 0, 1, metric, level=level, elapsed_s=res.elapsed_s)
            more_s = None if again.seconds_more is None else min(SECONDS_MORE_CAP, MORE_MARGIN * again.seconds_more)
            comps = tuple(replace(c, seconds_more=more_s) if c is main else c for c in comps)
        elif main is not None and main.verdict == "undecided":
            comps = tuple(replace(c, seconds_more=None) if c is main else c for c in comps)
        with self.st.lock:
            key = (v.against_id, v.config_id)
            block_s = v.pooled.block_s if v.pooled.block_s is not None else res.block_s
            settle_s = v.pooled.settle_s if v.pooled.settle_s is not None else res.settle_s
            self.st.verify_pool[key] = Pooled(blocks, float(res.elapsed_s), v.pooled.times + 1, more_s,
                                            block_s if math.isfinite(block_s) else None,
                                            settle_s if math.isfinite(settle_s) else None)
            self.st.verify_pool.move_to_end(key)
            while len(self.st.verify_pool) > POOLS_KEPT:
                self.st.verify_pool.popitem(last=False)
        return comps, more_s

    def _cancel_verify(self, why: str, wait: bool = True) -> None:
        v = self.st.verify
        if v is None:
            return
        v.why = why
        if why == "paused":
            v.paused = True
        v.cancel.set()
        if wait and v.thread is not None and v.thread is not threading.current_thread():
            v.thread.join(10)

    def _progress(self) -> VerifyProgress | None:
        v = self.st.verify
        if v is None:
            return None
        il = v.interleaving
        return VerifyProgress(v.config_id, v.against_id, il.phase if il is not None else "building",
                              il.elapsed() if il is not None else 0.0, v.seconds,
                              il.blocks_so_far() if il is not None else 0)


def with_long_gaps(verdict: RowVerdict, res: Any, metric: str) -> RowVerdict:
    """A change judged on CPU per run (spinning at a paced rate) also says what it did to latency after a long idle
    gap: the service p99 of the runs that followed one, before and after (spinning's whole point is a pool that has
    not gone to sleep)."""
    if metric != "cpu" or len(res.configs) < 2:
        return verdict
    a, b = res.configs[0], res.configs[1]
    if not (math.isfinite(a.gap_p99_ms) and math.isfinite(b.gap_p99_ms)):
        return verdict
    said = (f"; service p99 after ≥ {LONG_GAP_NS // 1_000_000} ms idle {a.gap_p99_ms:.3g} → {b.gap_p99_ms:.3g} ms "
            f"({a.gap_runs} and {b.gap_runs} runs)")
    return replace(verdict, text=verdict.text + said)
