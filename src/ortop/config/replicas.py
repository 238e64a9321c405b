"""Replicas: N sessions of one model served at once (``workload.replicas``), and how the cores are split between
them when ``workload.pin_replicas`` is on.

ONNX Runtime's threading guide names the case: several sessions in one process whose intra-op pools fight for the
same cores unless each gets its own (separate cores per session pool, one NUMA node per pool). Pinning a replica
means two things here: its callers (the threads that call ``Run()``, which are also thread 0 of its intra-op pool)
are pinned to its share, and its pool's other threads are pinned there through
``session.intra_op_thread_affinities``, one core each, with the pool sized to the share when the profile leaves the
thread count to ORT (ORT's default sizes every pool to the whole host, which is exactly the fight to avoid).

A profile that pins the pool threads itself keeps its own affinities, and the process-wide global pools cannot be
split: in those cases only the callers are pinned, and :func:`replica_profile` says so in its notes.

Pure functions: the engine reads the host (cores it may use, NUMA nodes) and the worker applies the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ortop.config.profile import Profile

Share = tuple[int, ...]


def split_cores(cores: Sequence[int], n: int, numa_nodes: Mapping[int, Sequence[int]] | None = None) -> list[Share]:
    """``n`` shares of ``cores`` (0-based logical CPUs), one per replica.

    With at least ``n`` NUMA nodes holding usable cores, each replica gets whole nodes (nodes dealt out in order,
    as evenly as their count allows), so no pool crosses a node. Otherwise the cores are cut into ``n`` contiguous
    runs as even as the count allows, in the order given (list SMT siblings next to each other and a replica gets
    whole physical cores). With more replicas than cores, replicas share cores round-robin (one core
    each): pinning cannot give them disjoint cores then, and :func:`overlap_note` says so.
    """
    if n < 1:
        raise ValueError(f"replicas must be >= 1, got {n}")
    cores = list(dict.fromkeys(cores))  # the order given (SMT siblings side by side), once each
    if not cores:
        raise ValueError("no cores to split")
    nodes = [sorted(c for c in cpus if c in cores) for _, cpus in sorted((numa_nodes or {}).items())]
    nodes = [c for c in nodes if c]
    if n > 1 and len(nodes) >= n:
        per, extra = divmod(len(nodes), n)
        out, at = [], 0
        for i in range(n):
            take = per + (1 if i < extra else 0)
            out.append(tuple(sorted(c for node in nodes[at:at + take] for c in node)))
            at += take
        return out
    if n >= len(cores):
        return [(cores[i % len(cores)],) for i in range(n)]
    size, extra = divmod(len(cores), n)
    out, at = [], 0
    for i in range(n):
        k = size + (1 if i < extra else 0)
        out.append(tuple(cores[at:at + k]))
        at += k
    return out


def overlap_note(shares: Sequence[Share]) -> str:
    """A note when shares overlap (more replicas than cores), else ""."""
    cores: set[int] = set()
    for share in shares:
        cores |= set(share)
    if sum(len(share) for share in shares) <= len(cores):
        return ""
    return (f"{len(shares)} replicas on {len(cores)} cores: pinned replicas share cores, so they still compete "
            "for them")


def replica_profile(profile: Profile, share: Share | None) -> tuple[Profile, list[str]]:
    """The profile one replica's session is built with, for its ``share`` of the cores (None: not pinned), and
    notes on what pinning could not do.

    With per-session pools and no affinity of the profile's own, the pool is sized to the share when the profile
    leaves the thread count at 0, and its threads after the first (the caller) are pinned one core each, dealt
    round-robin over the share.
    """
    if share is None:
        return profile, []
    s = profile.session
    if not s.use_per_session_threads:
        return profile, ["pin_replicas: the global thread pools are shared by every replica, so only the callers "
                         "are pinned"]
    if s.intra_op_thread_affinities is not None:
        return profile, ["pin_replicas: the profile pins the pool threads itself (intra_op_thread_affinities), so "
                         "only the callers are pinned"]
    threads = s.intra_op_num_threads or len(share)
    affinities = tuple((share[j % len(share)],) for j in range(1, threads)) or None
    session = replace(s, intra_op_num_threads=threads, intra_op_thread_affinities=affinities)
    return replace(profile, session=session), []


def describe_share(share: Share | None) -> str:
    """``cores 0-3`` / ``core 2`` / ``all cores``: how a replica's placement reads in a panel or a summary."""
    if share is None:
        return "all cores"
    if len(share) == 1:
        return f"core {share[0]}"
    runs: list[str] = []
    start = prev = share[0]
    for c in share[1:]:
        if c == prev + 1:
            prev = c
            continue
        runs.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = c
    runs.append(f"{start}-{prev}" if prev > start else str(start))
    return "cores " + ",".join(runs)
