"""The replicas in a code export (``workload.replicas``, ``workload.pin_replicas``): the count, how pinning splits
the cores, what it cannot do for a profile, and the section each language fills with its own code
(:func:`replicas_section`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ortop.config.profile import Profile
from ortop.config.replicas import replica_profile
from ortop.export.common import comment_lines


def replicas(profile: Profile) -> int:
    """Sessions the profile serves at once (``workload.replicas``); a pinned single replica counts as one."""
    return profile.workload.replicas


def pinned_pools(profile: Profile) -> bool:
    """Whether pinning the replicas (``workload.pin_replicas``) also sizes and pins each replica's intra-op pool to
    its share, as ortop does (:func:`ortop.config.replicas.replica_profile`); False when only the callers can be
    pinned (global pools, or affinities of the profile's own) or nothing is pinned."""
    return profile.workload.pin_replicas and not pinning_notes(profile)


def pinning_notes(profile: Profile) -> list[str]:
    """What pinning the replicas cannot do for this profile, in ortop's words (empty when it does all of it)."""
    if not profile.workload.pin_replicas:
        return []
    return replica_profile(profile, (0,))[1]


def replicas_comment(profile: Profile, prefix: str) -> list[str]:
    """The comment over a code export's replica count, the same words in every language."""
    callers = profile.workload.concurrency
    return comment_lines(f"workload.replicas = {replicas(profile)}: sessions of the model served at once in one "
                         f"process, each by {callers} caller{'s' if callers > 1 else ''} of its own.", prefix)


def pinning_comment(profile: Profile, prefix: str, shares: str, pin_callers: str) -> list[str]:
    """The comment over a code export's pinned replicas, the same words in every language: how ortop splits the
    cores into ``shares`` (the constant naming the count), how the program pins its callers (``pin_callers``: the
    language's way), and what pinning cannot do for this profile (:func:`pinning_notes`)."""
    return [*_split_text(prefix, shares, pin_callers), *(f"{prefix}{note}." for note in pinning_notes(profile))]


def _split_text(prefix: str, shares: str, pin_callers: str) -> list[str]:
    return comment_lines(
        "workload.pin_replicas: each replica on its own share of the cores. ortop splits the cores the process may "
        f"use (sched_getaffinity on Linux) into {shares} shares: whole NUMA nodes when there are at least as many "
        "nodes as replicas, else contiguous runs with SMT siblings side by side, as even as the count allows. The "
        "split depends on the host the program runs on, so it is the program's: pass it as `shares`, and pin "
        f"{pin_callers} before its first Run(); the caller is thread 0 of the replica's intra-op pool.", prefix)


REPLICA_OPTIONS_TEXT = (
    "A replica's options for its `cores` (0-based): its intra-op pool sized to the share when the profile leaves the "
    "thread count to ORT (ORT sizes every pool to the whole host, and the replicas' pools would fight for the same "
    "cores), its pool threads after the first pinned one core each (ORT counts from 1).")


@dataclass(frozen=True)
class ReplicaCode:
    """One language's pieces of the replicas section (:func:`replicas_section`)."""

    prefix: str          # the comment marker, indented as the section is
    count: str           # the replica count's constant, declared as ``{count}``'s line says
    count_line: str      # its declaration, with ``{n}`` for the count
    pin_callers: str     # how the program pins a caller thread, in words
    unpinned: list[str]  # the replicas made without pinning
    replica_options: Callable[[str], list[str]]  # a replica's options for its cores; the thread count's expression
    default_threads: str  # that expression when the profile leaves the count to ORT: the share's size
    pinned: Callable[[bool], list[str]]  # the replicas made from their shares; with pinned pools or not


def replicas_section(profile: Profile, code: ReplicaCode) -> list[str]:
    """The replicas in a code export, the same steps in every language: the count with its comment; unpinned, the
    language's loop; pinned, how the cores are split, each replica's options where its pool is pinned too
    (:func:`pinned_pools`), and the replicas made from their shares."""
    out = ["", *replicas_comment(profile, code.prefix), code.count_line.format(n=replicas(profile)), ""]
    if not profile.workload.pin_replicas:
        return out + code.unpinned
    out += pinning_comment(profile, code.prefix, code.count, code.pin_callers)
    pools = pinned_pools(profile)
    if pools:
        threads = profile.session.intra_op_num_threads
        out += ["", *comment_lines(REPLICA_OPTIONS_TEXT, code.prefix),
                *code.replica_options(str(threads) if threads else code.default_threads)]
    return out + ["", *code.pinned(pools)]
