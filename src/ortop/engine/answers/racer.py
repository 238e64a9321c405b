"""The real racer of ``ortop tune``: candidate profiles raced in interleaved blocks in worker processes.

One worker per restart group (environment and global thread pools: :class:`ortop.engine.bench.pool.Worker`); every
candidate's session stays built between rungs, so a candidate that survives a rung does not pay its build again.
Blocks come from :class:`ortop.engine.bench.ab.Interleaving`; the tuner (:mod:`ortop.engine.answers.tuner`) sees only
the
:class:`Racer` protocol.

Blocks are sized in requests, not only in seconds: a race judged on a percentile (``runs_per_block``: a p99 needs
100 runs, :func:`ortop.measure.stats.runs_needed`) gets blocks long enough to hold that many runs at the model's
pace, so each block's own figure is the percentile it is named after. On a model that runs ten times a second
that is ten seconds a block: the tuner then sees from :meth:`WorkerRacer.block_seconds` that a rung does not fit
its budget, and says so, instead of judging the slowest of a handful of runs as a p99.

Over ~450 lines: the racer owns its workers for a whole tune (built, restarted, their pools counted, their
sessions kept between rungs) and turns each rung's blocks into the tuner's figures; the two share the workers'
state.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ortop.config.profile import Profile
from ortop.engine.answers.space import describe, profile_key
from ortop.engine.answers.trials import STOPPED, RaceOutcome, RacerError
from ortop.engine.answers.tuner import relabel
from ortop.engine.bench.plan import (
    BLOCK_TARGET_S,
    block_target_for,  # noqa: F401  (the tuner's callers ask the racer for it)
    race_blocks,
)
from ortop.engine.bench.pool import Worker
from ortop.engine.placement import build_message
from ortop.measure.compare import Block

RUNS_MARGIN = 1.25  # a block sized for N runs plans for N × this: a run slower than its warm-up must not cut it short


class WorkerRacer:
    """The real racer: sessions built once in a worker process and kept between rungs; each race is an
    :class:`ortop.engine.bench.ab.Interleaving` over the sessions already built (its builds are answered from the
    cache).

    Profiles that need a fresh process (another environment or global thread pool) get a worker of their own; the
    interleaving then runs one block at a time across workers. A candidate whose build fails, whose Run() raises,
    or whose build kills the worker is reported as failed (the worker is restarted); a worker that dies while only
    already-proven sessions run raises :class:`RacerError`.
    """

    TOKEN_BASE = -1000

    def __init__(self, model_path: str, *, block_s: float = BLOCK_TARGET_S, build_timeout_s: float = 600.0,
                 strict_providers: bool = True, stop: threading.Event | None = None, runs_per_block: int = 0):
        self.model_path = model_path
        self.stop = stop or threading.Event()  # set: the race under way ends with the blocks it has
        self.block_target = block_s
        self.runs_per_block = runs_per_block  # each block holds at least this many runs (the judged percentile's)
        self.build_timeout_s = build_timeout_s
        self.strict_providers = strict_providers
        self._groups: dict[tuple, Worker] = {}
        self._acks: dict[int, set[int]] = {}            # per worker (by id): the idle tokens it answered
        self._route: dict[int, tuple[Any, int]] = {}    # per worker (by id): the interleaving reading it, its channel
        self._cache: dict[str, tuple[Worker, int, dict]] = {}
        self._proven: set[str] = set()
        self._next_id = 1
        self._token = WorkerRacer.TOKEN_BASE
        self._seq = 0
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        """A warning of the race (an allocator left out of a worker's environment), said once."""
        if text not in self.warnings and len(self.warnings) < 50:
            self.warnings.append(text)

    # ---- sessions ----
    def _group(self, p: Profile) -> Worker:
        key = p.restart_key()
        g = self._groups.get(key)
        if g is None:
            g = Worker(self.model_path, dict(p.env), name="ortop-tune-worker", warn=self.warn)
            g.listener = partial(self._on_message, g)
            g.on_death = partial(self._on_death, g)
            self._acks[id(g)] = set()
            self._groups[key] = g
        if not g.started:
            self._restart(g)
        return g

    def _on_message(self, g: Worker, msg: Any) -> None:
        from ortop.runtime import protocol as proto

        if isinstance(msg, proto.State) and msg.name == "idle" and msg.config_id <= WorkerRacer.TOKEN_BASE:
            with g.cv:
                self._acks[id(g)].add(msg.config_id)
                g.cv.notify_all()
        route = self._route.get(id(g))
        if route is not None:
            route[0].deliver(msg, route[1])

    def _on_death(self, g: Worker, why: str) -> None:
        route = self._route.get(id(g))
        if route is not None:
            route[0].abort(why)

    def _restart(self, g: Worker) -> None:
        """A fresh process for ``g``, holding nothing: its candidates are built again when next raced."""
        g.close()
        for k in [k for k, (gg, _, _) in self._cache.items() if gg is g]:
            del self._cache[k]
        g.builds.clear()
        g.start()

    def prepare(self, profiles: Sequence[Profile]) -> dict[int, str]:
        failed: dict[int, str] = {}
        for i, p in enumerate(profiles):
            key = profile_key(p)
            if key in self._cache:
                continue
            g = self._group(p)
            short = self._short_of_memory()
            if short:
                failed[i] = short
                continue
            cid = self._next_id
            self._next_id += 1
            from ortop.runtime import protocol as proto

            g.send(build_message(cid, p))
            settled = _settled(g, cid, self.stop)
            ok = g.wait(settled, self.build_timeout_s)
            if self.stop.is_set() and not _settled(g, cid)():
                # Stopped mid-build (a quit, s, esc): not waited for; close() ends the worker with the build.
                failed.update({j: STOPPED for j in range(i, len(profiles))
                               if profile_key(profiles[j]) not in self._cache})
                break
            if g.dead is not None and cid not in g.built:
                failed[i] = f"{g.dead} while building it"
                self._restart(g)
                continue
            if not ok:
                failed[i] = f"the session did not finish building in {self.build_timeout_s:.0f} s"
                self._restart(g)
                continue
            if cid in g.failed:
                failed[i] = f"the session failed to build: {g.failed[cid]}"
                continue
            info = g.built[cid]
            requested = [x for x in info.get("providers_requested", ()) if x != "CPUExecutionProvider"]
            missing = [x for x in requested if x not in info.get("providers_active", ())]
            if missing and self.strict_providers:
                failed[i] = (f"{', '.join(missing)} requested but not active (ORT fell back to "
                             f"{', '.join(info.get('providers_active', ())) or 'nothing'})")
                g.send(proto.Drop(cid))
                continue
            self._cache[key] = (g, cid, info)
        return failed

    def _short_of_memory(self) -> str:
        """Why one more session would not fit (the largest session so far, with headroom), or ""."""
        from ortop.engine.bench.ab import MEMORY_HEADROOM, available_memory
        from ortop.present import MIB

        per = 0
        for _, _, info in self._cache.values():
            before, after = int(info.get("rss_before", -1)), int(info.get("rss_after", -1))
            if before >= 0 and after >= 0:
                per = max(per, after - before)
        available = available_memory()
        if per <= 0 or available is None or per <= MEMORY_HEADROOM * available:
            return ""
        return (f"not built: another session needs about {per / MIB:.0f} MiB and only {available / MIB:.0f} MiB "
                "is available beside the sessions already held")

    def release(self, profiles: Sequence[Profile]) -> None:
        from ortop.runtime import protocol as proto

        for p in profiles:
            entry = self._cache.pop(profile_key(p), None)
            if entry is not None:
                g, cid, _ = entry
                g.send(proto.Drop(cid))

    def close(self) -> None:
        for g in self._groups.values():
            g.close()
        self._groups.clear()
        self._cache.clear()

    # ---- blocks ----
    def _run_s(self, profiles: Sequence[Profile]) -> float:
        lat = 0.0
        for p in profiles:
            entry = self._cache.get(profile_key(p))
            if entry is None:
                continue
            info = entry[2]
            ms = float(info.get("warmup_ms", math.nan))
            if not (math.isfinite(ms) and ms > 0):
                ms = float(info.get("first_run_ms", 1.0))
            lat = max(lat, ms / 1e3)
            rate = p.workload.rate_hz
            if rate > 0:
                lat = max(lat, p.workload.concurrency / rate)
        return lat or 0.001

    def _request_s(self, profiles: Sequence[Profile]) -> float:
        """Seconds between two requests served, for the slowest of ``profiles``: its run time shared by its callers
        in a closed loop, its rate's period when paced (or its run time, when it cannot keep the rate)."""
        out = 0.0
        for p in profiles:
            entry = self._cache.get(profile_key(p))
            if entry is None:
                continue
            ms = float(entry[2].get("warmup_ms", math.nan))
            if not (math.isfinite(ms) and ms > 0):
                ms = float(entry[2].get("first_run_ms", 1.0))
            w = p.workload
            each = ms / 1e3 / max(1, w.concurrency)
            out = max(out, max(each, 1.0 / w.rate_hz) if w.rate_hz > 0 else each)
        return out or 0.001

    def _plan(self, profiles: Sequence[Profile]) -> tuple[float, float]:
        target = self.block_target
        if self.runs_per_block > 0:
            target = max(target, RUNS_MARGIN * self.runs_per_block * self._request_s(profiles))
        return race_blocks(self._run_s(profiles), target)

    def block_seconds(self, profiles: Sequence[Profile]) -> float:
        block, settle = self._plan(profiles)
        return block + settle + 0.002

    def runs_per_s(self, profiles: Sequence[Profile]) -> float:
        """The pace of the slowest of ``profiles``: requests served per second (from its warm-up)."""
        return 1.0 / self._request_s(profiles)

    def default_threads(self, profile: Profile) -> int | None:
        """The intra-op threads ORT's default gave ``profile``'s session, counted in its worker as the live view
        counts them (:func:`ortop.collectors.cpu.thread_role`: the pool's threads, and the caller that runs with
        them); None where that count cannot be told apart (another session in the worker, an inter-op pool, the
        global pools, replicas, another provider's threads, or no /proc)."""
        from ortop.config.providers import CPU

        s, w = profile.session, profile.workload
        entry = self._cache.get(profile_key(profile))
        if (entry is None or profile.provider_name() != CPU or s.intra_op_num_threads
                or s.execution_mode != "sequential" or not s.use_per_session_threads or w.replicas != 1
                or sum(1 for g, _, _ in self._cache.values() if g is entry[0]) != 1):
            return None
        pid = entry[0].pid
        if pid is None:
            return None
        return count_pool_threads(pid)

    def build_seconds(self) -> float:
        """The slowest build so far (session creation, first run, warm-up runs), plus the messages around it."""
        worst = 0.0
        for _, _, info in self._cache.values():
            ms = 0.0
            for k in ("create_ms", "first_run_ms"):
                v = float(info.get(k, math.nan))
                ms += v if math.isfinite(v) else 0.0
            warm = float(info.get("warmup_ms", math.nan))
            ms += warm * 10 if math.isfinite(warm) else 0.0
            worst = max(worst, ms / 1e3)
        return worst + 0.05

    # ---- racing ----
    def measure(self, profile: Profile, seconds: float) -> RaceOutcome:
        """``profile`` alone, in blocks as a race would give it, for about ``seconds`` (at least one block): its
        figures where nothing could race beside it. Raises RacerError when its worker is lost."""
        from ortop.engine.bench.interleave import WorkerLost, alternate
        from ortop.errors import RuntimeFailure
        from ortop.measure import rows as R
        from ortop.measure.compare import block_from_runs

        out = RaceOutcome()
        out.failed.update(self.prepare([profile]))
        if out.failed or self.stop.is_set():
            return out
        g, cid, _ = self._cache[profile_key(profile)]
        # short blocks: these figures are pooled across them, and judge nothing against another profile
        block, settle = race_blocks(self._run_s([profile]), self.block_target)
        rounds = max(1, int(seconds // (block + settle + 0.002)))
        try:
            runs = alternate([g], [cid], rounds, block, settle, stop=self.stop, names=["baseline"])
        except WorkerLost as exc:
            raise RacerError(str(exc)) from None
        except RuntimeFailure as exc:  # a run failed: the profile is to blame
            out.failed[0] = str(exc)
            return out
        finally:
            g.listener = partial(self._on_message, g)  # the alternation borrowed them
            g.on_death = partial(self._on_death, g)
        self._idle(g)
        for b in sorted(runs, key=lambda r: r.seq):
            last = int(R.end_ns(b.rows).max()) if len(b.rows) else b.t_end_ns
            between = b.cpu_between_ns / 1e6 if b.cpu_between_ns >= 0 else math.nan
            arrived, shed = (int(b.traffic[0]), int(b.traffic[1])) if b.traffic is not None else (-1, 0)
            out.blocks.append(block_from_runs(0, self._seq + b.seq, R.response_ms(b.rows), t_start=b.t_start_ns / 1e9,
                                              t_end=max(b.t_end_ns, last) / 1e9, cpu_ms=b.cpu_ns / 1e6,
                                              cpu_between_ms=between, arrived=arrived, shed=shed,
                                              window_s=(b.t_end_ns - b.t_start_ns) / 1e9))
        if runs:
            self._seq += max(b.seq for b in runs) + 2
        self._proven.add(profile_key(profile))
        return out

    def _idle(self, g: Worker) -> None:
        """End whatever ``g`` runs and wait for it to say so: nothing of one measurement may reach the next."""
        from ortop.runtime import protocol as proto

        self._token -= 1
        token = self._token
        acks = self._acks[id(g)]
        g.send(proto.RunLive(token))
        g.wait(lambda: token in acks, 10.0)
        acks.discard(token)

    def race(self, profiles: Sequence[Profile], seconds: float) -> RaceOutcome:
        out = RaceOutcome()
        end = time.monotonic() + seconds
        out.failed.update(self.prepare(profiles))
        while True:
            ok = [i for i in range(len(profiles)) if i not in out.failed]
            left = end - time.monotonic()
            if len(ok) < 2 or left <= 0 or self.stop.is_set():
                return out
            try:
                blocks = self._interleave([profiles[i] for i in ok], left)
            except _RunFailed as exc:
                for j, why in exc.failed.items():
                    out.failed[ok[j]] = why
                    self.release([profiles[ok[j]]])
                out.failed.update({ok[j]: why for j, why in self.prepare([profiles[i] for i in ok]).items()})
                continue
            for b in blocks:
                out.blocks.append(relabel(b, ok[b.config]))
            for i in ok:
                self._proven.add(profile_key(profiles[i]))
            return out

    def _interleave(self, profiles: list[Profile], seconds: float) -> list[Block]:
        from ortop.engine.bench import ab

        entries = [self._cache[profile_key(p)] for p in profiles]
        groups: list[Worker] = []
        for g, _, _ in entries:
            if g not in groups:
                groups.append(g)
        channel_of = [groups.index(g) for g, _, _ in entries]
        ids = [cid for _, cid, _ in entries]
        infos = {cid: info for _, cid, info in entries}  # every session is built already: none is built again
        def finish(ch: int) -> None:
            # End the alternation and idle, then wait for the worker to say so: nothing of this race may reach the
            # next one's interleaving.
            self._idle(groups[ch])

        block, settle = self._plan(profiles)
        names = [describe(p, profiles[0]) if i else "incumbent" for i, p in enumerate(profiles)]
        routes = ab.Routes(ids, [g.send for g in groups], channel_of, finish=finish, built=infos)
        il = ab.Interleaving(profiles, routes, budget_s=seconds, names=names, block_s=block, settle_s=settle,
                             stop=self.stop)
        for k, g in enumerate(groups):
            with g.cv:
                g.run_errors.clear()
            self._route[id(g)] = (il, k)
        try:
            result = il.run()
        except ab.AbError as exc:
            failed = {}
            for j, (g, cid, _) in enumerate(entries):
                if cid in g.run_errors:
                    failed[j] = f"Run() failed: {g.run_errors[cid]}"
            dead = [g for g in groups if g.dead is not None]
            if dead:
                suspects = [j for j, p in enumerate(profiles) if j and profile_key(p) not in self._proven]
                for g in dead:
                    self._restart(g)
                if not failed and suspects:
                    failed = {j: f"{dead[0].dead} while it ran" for j in suspects}
            if failed and 0 not in failed:
                raise _RunFailed(failed) from None
            raise RacerError(str(exc)) from None
        finally:
            for g in groups:
                self._route.pop(id(g), None)
        for w in result.warnings:
            if w not in self.warnings and len(self.warnings) < 50:
                self.warnings.append(w)
        blocks = sorted(result.blocks, key=lambda b: b.seq)
        out = []
        for b in blocks:
            out.append(_reseq(b, self._seq + b.seq))
        if blocks:
            self._seq += max(b.seq for b in blocks) + 2
        return out


def count_pool_threads(pid: int) -> int | None:
    """The intra-op threads a worker holding one session runs: its pool's threads (named by none of ortop's own
    names: :func:`ortop.collectors.cpu.thread_role`) plus the caller that runs with them; None without /proc."""
    import os

    from ortop.collectors.cpu import thread_role

    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    roles = []
    for tid in tids:
        try:
            with open(f"{base}/{tid}/comm", encoding="utf-8", errors="replace") as f:
                roles.append(thread_role(int(tid), f.read().strip(), pid))
        except (OSError, ValueError):
            continue  # ended between the listing and the read
    if not any(r.startswith("caller") for r in roles):
        return None  # not a worker that names its threads
    return 1 + sum(1 for r in roles if r == "pool")


def _settled(g: Worker, cid: int, stop: threading.Event | None = None) -> Callable[[], bool]:
    """Whether a build has an answer (or the worker died, or ``stop`` is set: nothing more is waited for)."""
    return lambda: cid in g.built or cid in g.failed or g.dead is not None or (stop is not None and stop.is_set())


class _RunFailed(Exception):
    def __init__(self, failed: dict[int, str]):
        super().__init__("; ".join(failed.values()))
        self.failed = failed


def _reseq(b: Block, seq: int) -> Block:
    from dataclasses import replace

    return replace(b, seq=seq)
