"""The real racer of ``ortop tune``: candidate profiles raced in interleaved blocks in worker processes.

One worker per restart group (environment and global thread pools: :class:`ortop.engine.bench.pool.Worker`); every
candidate's session stays built between rungs, so a candidate that survives a rung does not pay its build again.
Blocks come from :class:`ortop.engine.ab.Interleaving`; the tuner (:mod:`ortop.engine.tuner`) sees only the
:class:`Racer` protocol.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ortop.config.profile import Profile
from ortop.engine.bench.plan import (
    BLOCK_TARGET_S,
    block_target_for,  # noqa: F401  (the tuner's callers ask the racer for it)
    race_blocks,
)
from ortop.engine.bench.pool import Worker
from ortop.engine.placement import build_message
from ortop.engine.space import describe, profile_key
from ortop.engine.trials import STOPPED, RaceOutcome, RacerError
from ortop.engine.tuner import relabel
from ortop.measure.compare import Block


class WorkerRacer:
    """The real racer: sessions built once in a worker process and kept between rungs; each race is an
    :class:`ortop.engine.ab.Interleaving` over the sessions already built (its builds are answered from the cache).

    Profiles that need a fresh process (another environment or global thread pool) get a worker of their own; the
    interleaving then runs one block at a time across workers. A candidate whose build fails, whose Run() raises,
    or whose build kills the worker is reported as failed (the worker is restarted); a worker that dies while only
    already-proven sessions run raises :class:`RacerError`.
    """

    TOKEN_BASE = -1000

    def __init__(self, model_path: str, *, block_s: float = BLOCK_TARGET_S, build_timeout_s: float = 600.0,
                 strict_providers: bool = True, stop: threading.Event | None = None):
        self.model_path = model_path
        self.stop = stop or threading.Event()  # set: the race under way ends with the blocks it has
        self.block_target = block_s
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
        from ortop.runtime import protocol as P

        if isinstance(msg, P.State) and msg.name == "idle" and msg.config_id <= WorkerRacer.TOKEN_BASE:
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
            from ortop.runtime import protocol as P

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
                g.send(P.Drop(cid))
                continue
            self._cache[key] = (g, cid, info)
        return failed

    def _short_of_memory(self) -> str:
        """Why one more session would not fit (the largest session so far, with headroom), or ""."""
        from ortop.engine.ab import MEMORY_HEADROOM, MiB, available_memory

        per = 0
        for _, _, info in self._cache.values():
            before, after = int(info.get("rss_before", -1)), int(info.get("rss_after", -1))
            if before >= 0 and after >= 0:
                per = max(per, after - before)
        available = available_memory()
        if per <= 0 or available is None or per <= MEMORY_HEADROOM * available:
            return ""
        return (f"not built: another session needs about {per / MiB:.0f} MiB and only {available / MiB:.0f} MiB "
                "is available beside the sessions already held")

    def release(self, profiles: Sequence[Profile]) -> None:
        from ortop.runtime import protocol as P

        for p in profiles:
            entry = self._cache.pop(profile_key(p), None)
            if entry is not None:
                g, cid, _ = entry
                g.send(P.Drop(cid))

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

    def _plan(self, profiles: Sequence[Profile]) -> tuple[float, float]:
        return race_blocks(self._run_s(profiles), self.block_target)

    def block_seconds(self, profiles: Sequence[Profile]) -> float:
        block, settle = self._plan(profiles)
        return block + settle + 0.002

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
        from ortop.engine import ab
        from ortop.runtime import protocol as P

        entries = [self._cache[profile_key(p)] for p in profiles]
        groups: list[Worker] = []
        for g, _, _ in entries:
            if g not in groups:
                groups.append(g)
        channel_of = [groups.index(g) for g, _, _ in entries]
        ids = [cid for _, cid, _ in entries]
        infos = {cid: info for _, cid, info in entries}
        holder: dict[str, Any] = {}

        def channel(ch: int) -> Callable[[Any], Any]:
            g = groups[ch]

            def send(msg: Any) -> None:
                if isinstance(msg, P.Build) and msg.config_id in infos:
                    # Built already: answer from the cache, without the memory figures (the sessions exist, so the
                    # interleaving's check of whether they would fit does not apply).
                    info = {**infos[msg.config_id], "rss_before": -1, "rss_after": -1}
                    holder["il"].deliver(P.Built(msg.config_id, info), ch)
                else:
                    g.send(msg)
            return send

        def finish(ch: int) -> None:
            # End the alternation and idle, then wait for the worker to say so: nothing of this race may reach the
            # next one's interleaving.
            g = groups[ch]
            self._token -= 1
            token = self._token
            acks = self._acks[id(g)]
            g.send(P.RunLive(token))
            g.wait(lambda: token in acks, 10.0)
            acks.discard(token)

        block, settle = self._plan(profiles)
        names = [describe(p, profiles[0]) if i else "incumbent" for i, p in enumerate(profiles)]
        il = ab.Interleaving(profiles, ids, [channel(k) for k in range(len(groups))], channel_of, budget_s=seconds,
                             names=names, finish=finish, block_s=block, settle_s=settle, stop=self.stop)
        holder["il"] = il
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
