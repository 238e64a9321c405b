"""Where a configuration's replicas run: the cores each pinned replica gets on this host, and the Build message
that carries them to the worker (every place that builds a session sends it through :func:`build_message`).
"""

from __future__ import annotations

from ortop.collectors.host import HostFacts, read_host
from ortop.config.profile import Profile
from ortop.config.replicas import Share, split_cores
from ortop.runtime import protocol as proto


def core_order(host: HostFacts) -> list[int]:
    """The usable CPUs with SMT siblings side by side (physical core by physical core), so a contiguous share is
    whole physical cores."""
    usable = set(host.usable_cpus)
    order = [c for g in sorted(host.siblings) for c in g if c in usable]
    rest = sorted(usable.difference(order))
    return order + rest


def shares_for(profile: Profile, host: HostFacts | None = None) -> tuple[Share, ...] | None:
    """Each replica's cores when the profile pins them (``workload.pin_replicas``), else None."""
    if not profile.workload.pin_replicas:
        return None
    host = host or read_host()
    cores = core_order(host)
    if not cores:
        return None
    return tuple(split_cores(cores, profile.workload.replicas, host.usable_numa_nodes))


def build_message(config_id: int, profile: Profile, host: HostFacts | None = None) -> proto.Build:
    """Build ``profile`` under ``config_id``, with its replicas' cores when it pins them."""
    return proto.Build(config_id, profile.to_dict(full=True), shares_for(profile, host))
