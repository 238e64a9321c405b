"""The messages between the parent (the Monitor) and the inference worker: frozen, picklable dataclasses.

The worker holds several built sessions, each under a configuration id the parent chose, and runs the one it is
told to (``RunLive``) or alternates several in blocks (``Alternate``). A live rebuild is ``Build(new)``, then, on
``Built``, ``RunLive(new)`` and ``Drop(old)``; on ``BuildFailed`` the old session simply keeps running.

Parent → worker                                   Worker → parent
  Build(config_id, profile)  build + warm, keep      State(name, config_id)
  Drop(config_id)            free a session          Built(config_id, info) / BuildFailed(config_id, message)
  RunLive(config_id)         run it continuously     Samples(config_id, rows, wall_ns, cpu_ns, block)
  Alternate(ids, block_s, settle_s, rounds)          BlockDone(config_id, seq, t_start_ns, t_end_ns, cpu_ns,
  Pause / Resume / Stop                                        cpu_between_ns, runs)
                                                     AlternationDone(completed)
                                                     RunError(config_id, message) / Log(line)

``Samples.rows`` is an int64 array, one row per run, its columns named in :mod:`ortop.measure.rows` (``Col``:
start, service, cpu in/between, replica, queue, shape, idle; written by :mod:`ortop.runtime.serve`; response time
= queue + service is ``rows.response_ms``); ``Samples.traffic`` the open loop's queue counters;
``wall_ns``/``cpu_ns`` are the wall and process CPU time the batch covers; ``rss`` the worker's resident memory
read from ``/proc/self/statm`` at the flush (~250 ms: a file read of a few µs, and, sampled in the worker, it
follows a configuration's peak even when nobody asks for a snapshot).
Clocks are the worker's ``perf_counter_ns`` and ``process_time_ns``.

This module imports nothing heavy: the parent imports it without onnxruntime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LIVE = -1  # Samples.block of runs from the live loop


# ---- parent → worker ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Build:
    """Build and warm a session for ``profile`` (``Profile.to_dict(full=True)``) and keep it under ``config_id``.

    What runs does not change: the running loop pauses while the session builds (its figures would carry the
    build's CPU) and goes on afterwards.
    """

    config_id: int
    profile: dict
    shares: tuple[tuple[int, ...], ...] | None = None  # with workload.pin_replicas: each replica's cores
    feed_model: str = ""   # make the feeds from this model's inputs (a comparison's first model), not the profile's
    #                        own: every model of a comparison is fed the same arrays
    outputs: bool = False  # also send a compact copy of one run's outputs after the warm-up (Built.info["outputs"])


@dataclass(frozen=True)
class Drop:
    """Free a session (a running loop of it stops first)."""

    config_id: int


@dataclass(frozen=True)
class RunLive:
    """Run this session continuously (ends an alternation); paused stays paused."""

    config_id: int


@dataclass(frozen=True)
class Alternate:
    """Run the sessions in blocks, in the order of ``ortop.measure.compare.schedule(len(ids), rounds, order_seed)``.

    Each block first runs ``settle_s`` of runs that are not recorded (another session's pool threads may still
    be spin-waiting after its block), then records for ``block_s``. ``rounds=None`` goes on until another command
    (RunLive, Alternate, Pause) ends it. When it ends, the worker goes back to the live session it ran before.
    """

    config_ids: tuple[int, ...]
    block_s: float
    settle_s: float
    rounds: int | None = None
    rate_hz: float | None = None   # offer this rate in all (split among replicas) instead of each profile's own
    #                                (a capacity search's point)
    arrival: str | None = None     # with rate_hz: the arrival mode (fixed or poisson)
    first_round: int = 0           # round number of the first block: each round draws its own arrivals and shapes,
    #                                the same for every session in it (a later Alternate carries on the numbering)
    order_seed: int | None = None  # the schedule's seed (its pairs of rounds in random order); None: A B B A …


@dataclass(frozen=True)
class Pause:
    """Stop the callers; the sessions stay built."""


@dataclass(frozen=True)
class Resume:
    """Start the callers again (what was running before the pause)."""


@dataclass(frozen=True)
class Stop:
    """Exit the worker."""


# ---- worker → parent ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class State:
    """``building`` | ``warming`` | ``measuring`` | ``alternating`` | ``paused`` | ``idle`` (of ``config_id``)."""

    name: str
    config_id: int


@dataclass(frozen=True)
class Built:
    """The session is ready. ``info``: create_ms, first_run_ms, warmup_ms, providers_active, providers_requested,
    feeds, feeds_digest (a hash of the first shape's feeds: equal digests, the same inputs), model, ort_version,
    notes, pid, rss_before, rss_after (bytes, the worker's resident memory around the build); with
    ``Build.outputs``, ``outputs``: output name -> :func:`ortop.measure.agreement.compact` of one run's output."""

    config_id: int
    info: dict[str, Any]


@dataclass(frozen=True)
class BuildFailed:
    """The profile did not build (or its first runs failed); whatever ran before keeps running."""

    config_id: int
    message: str


@dataclass(frozen=True)
class Samples:
    """A batch of runs of one session; ``block`` is the schedule position in an alternation, ``LIVE`` (-1) else."""

    config_id: int
    rows: Any  # np.ndarray int64 (n, measure.rows.COLUMNS): one run a row, columns measure.rows.Col
    wall_ns: int
    cpu_ns: int
    block: int = LIVE
    rss: int = -1  # the worker's resident memory (bytes) when the batch was sent; -1 unknown
    traffic: tuple[int, int, int, int] | None = None  # open loop: arrived, dropped, queue now, longest queue


@dataclass(frozen=True)
class BlockDone:
    """One recorded block of an alternation: its runs arrived just before as ``Samples(block=seq)``.

    ``t_start_ns``..``t_end_ns`` is the recorded window (settle runs excluded); ``cpu_ns`` the process CPU over
    it; ``cpu_between_ns`` the CPU burned between runs (-1 with concurrent callers).
    """

    config_id: int
    seq: int
    t_start_ns: int
    t_end_ns: int
    cpu_ns: int
    cpu_between_ns: int
    runs: int


@dataclass(frozen=True)
class AlternationDone:
    """The alternation ended: all its rounds done (``completed``), or cut short by a command or a run error."""

    completed: bool = True


@dataclass(frozen=True)
class ScheduleEnded:
    """The live loop served its whole finite schedule (a trace that does not loop): nothing more will arrive."""

    config_id: int


@dataclass(frozen=True)
class RunError:
    """Run() raised: that session's loop stops (until the next RunLive or Resume)."""

    config_id: int
    message: str


@dataclass(frozen=True)
class Log:
    """A line ORT (or Python) wrote to stderr/stdout in the worker, ANSI colour stripped; ``level`` set when the
    worker itself says something with a known level (``warning``, ``error``, ``info``)."""

    line: str
    level: str = ""


ToWorker = Build | Drop | RunLive | Alternate | Pause | Resume | Stop
FromWorker = State | Built | BuildFailed | Samples | BlockDone | AlternationDone | ScheduleEnded | RunError | Log

__all__ = ["LIVE", "Build", "Drop", "RunLive", "Alternate", "Pause", "Resume", "Stop", "State", "Built",
           "BuildFailed", "Samples", "BlockDone", "AlternationDone", "ScheduleEnded", "RunError", "Log", "ToWorker",
           "FromWorker"]
