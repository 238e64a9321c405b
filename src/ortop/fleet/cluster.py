"""The cluster: connect, list the nodes and their types, probe them, and run one measurement per node, exclusively.

Exclusivity. Each measurement is a Ray task pinned to its node (``NodeAffinitySchedulingStrategy``, ``soft=False``)
that asks for *all* the node's CPUs (and GPUs): Ray then runs no second such task there until the first ends, and
no other Ray work that needs a CPU either. A per-node custom resource of capacity 1 would keep two ortop
measurements apart as well, but it needs every node started with it, and it would let any other Ray task share the
host; two programs on one host measure each other whatever their names, so the node is taken whole. A node that
offers Ray no CPU (a head node started with ``--num-cpus 0``, as KubeRay's are) is not measured: nothing there
could be made exclusive.

A node's type is the Ray resource ``ortop-type:NAME`` it was started with, else its host facts: the GPU model when
it has one, else the CPU model and its usable cores.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ortop.collectors.host import facts_type  # shared with the metrics endpoint, which names its host alike
from ortop.errors import UsageError, one_line
from ortop.fleet import tasks

TYPE_PREFIX = "ortop-type:"
CONNECT_TIMEOUT_S = 5.0   # a TCP connect to the cluster's address: an unreachable one fails fast
PROBE_TIMEOUT_S = 20.0    # every node's probe (a worker started, ortop imported, its facts read): within 30 s in all
GATHER_AFTER_STOP_S = 90.0  # after ctrl-C, how long the nodes have to print what they gathered
CANCEL_AGAIN_S = 2.0       # ... and how often the cancel is sent again meanwhile (one that met a task as it started
#                            was lost: the task ran to its end); a measurement notes a cancel, never breaks on it


@dataclass
class Node:
    """One node of the cluster: Ray's id and address, its resources, and what the probe read there."""

    id: str
    address: str
    resources: dict[str, float]
    facts: dict[str, Any] = field(default_factory=dict)
    problem: str = ""   # why the node cannot measure (the probe failed, no CPU offered)

    @property
    def cpus(self) -> float:
        return float(self.resources.get("CPU", 0.0))

    @property
    def gpus(self) -> float:
        return float(self.resources.get("GPU", 0.0))

    @property
    def type(self) -> str:
        declared = sorted(k[len(TYPE_PREFIX):] for k in self.resources if k.startswith(TYPE_PREFIX))
        if declared:
            return declared[0]
        return facts_type(self.facts)

    @property
    def type_from(self) -> str:
        return "resource" if any(k.startswith(TYPE_PREFIX) for k in self.resources) else "host facts"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "address": self.address, "type": self.type, "type_from": self.type_from,
                "cpus": self.cpus, "gpus": self.gpus, "facts": dict(self.facts)}


def _host_port(address: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (or ``ray://HOST:PORT``) of a cluster address; None when it has no port to try."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str) -> None:
    """An address whose port does not answer a TCP connect within CONNECT_TIMEOUT_S: one UsageError line."""
    hp = _host_port(address)
    if hp is None:
        raise UsageError(f"--cluster {address}: expected HOST:PORT (the head's GCS port, 6379 by default), "
                         "ray://HOST:PORT or auto")
    try:
        socket.create_connection(hp, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(f"--cluster {address}: cannot reach {hp[0]}:{hp[1]} ({one_line(exc)})") from None


def connect(cluster: str) -> str:
    """Join the cluster as a driver. ``auto``: RAY_ADDRESS, else a cluster running on this machine, else a new
    one-node cluster here. Returns the address joined."""
    address = None if cluster == "auto" else cluster
    if address is None and os.environ.get("RAY_ADDRESS"):
        address = os.environ["RAY_ADDRESS"]
    if address is not None and address != "auto":
        check_reachable(address)
    try:
        ctx = ray.init(address=address, log_to_driver=False, include_dashboard=False, logging_level=logging.ERROR,
                       namespace="ortop-fleet")
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise UsageError(f"--cluster {cluster}: {one_line(exc)}") from None
    return str(getattr(ctx, "address_info", {}).get("gcs_address") or address or "local")


def disconnect() -> None:
    if ray.is_initialized():
        ray.shutdown()


def nodes() -> list[Node]:
    """The cluster's live nodes."""
    return [Node(id=n["NodeID"], address=n.get("NodeManagerAddress", "?"), resources=dict(n.get("Resources") or {}))
            for n in ray.nodes() if n.get("Alive")]


def _pinned(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def probe(found: Sequence[Node], timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Read every node's facts in place (a task of no resources pinned to it); a node whose probe fails or does not
    answer in ``timeout_s`` gets its ``problem`` (ortop not importable there, no answer)."""
    remote = ray.remote(tasks.probe)
    refs = {remote.options(num_cpus=0, max_retries=0, scheduling_strategy=_pinned(n.id)).remote(): n for n in found}
    ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    for ref in ready:
        node = refs[ref]
        try:
            node.facts = ray.get(ref)
        except Exception as exc:  # a node without ortop: the task cannot be unpickled there
            node.problem = f"the probe failed: {one_line(exc, 200)}"
    for ref in pending:
        refs[ref].problem = f"no answer to the probe in {timeout_s:g} s"
        ray.cancel(ref, force=True)
    for n in found:
        if not n.problem and n.cpus <= 0:
            n.problem = "the node offers Ray no CPU: nothing there can be made exclusive to measure"


def put(data: bytes) -> Any:
    """The model's bytes into the object store once; every node's task reads them from there."""
    return ray.put(data)


def stop_flag() -> Any:
    """The fleet's :class:`ortop.fleet.tasks.StopFlag`: an actor of no resources that every measurement looks at."""
    return ray.remote(tasks.StopFlag).options(num_cpus=0).remote()


def start(node: Node, spec: Mapping[str, Any], model_ref: Any, flag: Any = None) -> Any:
    """One measurement on ``node``: pinned to it, holding all its CPUs and GPUs (the module docstring says why);
    ``flag``: the fleet's stop flag (:func:`stop_flag`)."""
    remote = ray.remote(tasks.measure)
    return remote.options(scheduling_strategy=_pinned(node.id), num_cpus=node.cpus, num_gpus=node.gpus,
                          max_retries=0).remote(dict(spec), model_ref, flag, keep_noting=True)


def lost_line(exc: BaseException, started: float) -> str:
    """Why a node's measurement never came back, in words, with how long the fleet had waited on it."""
    kind = type(exc).__name__
    what = {"NodeDiedError": "the node died (its raylet or host went away)",
            "WorkerCrashedError": "the Ray worker running the measurement died",
            "OwnerDiedError": "the driver's object was lost",
            "TaskUnschedulableError": "the node went away before its measurement could start"}.get(kind, kind)
    return (f"{what} {time.monotonic() - started:.0f} s into the run; nothing it measured came back "
            f"({one_line(exc, 160)})")


def wait_all(refs: Mapping[Any, Node], on_done: Callable[[Node, dict[str, Any]], None],
             stopping: Callable[[], bool], flag: Any = None) -> None:
    """Wait for every measurement, handing each node's result to ``on_done`` as it comes (a lost node as
    ``status: lost``); once ``stopping()`` says so, set ``flag`` (:func:`stop_flag`) and cancel those still running,
    again every CANCEL_AGAIN_S until they answer (each prints what it gathered), and wait up to GATHER_AFTER_STOP_S
    for them. A second ctrl-C while stopping ends the wait at once."""
    pending = dict(refs)
    started = time.monotonic()
    cancelled_at: float | None = None
    cancel_sent = -math.inf
    while pending:
        if stopping() and cancelled_at is None:
            cancelled_at = time.monotonic()
            if flag is not None:
                flag.set.remote()
        if cancelled_at is not None and time.monotonic() - cancel_sent >= CANCEL_AGAIN_S:
            cancel_sent = time.monotonic()
            for ref in pending:
                ray.cancel(ref, force=False)
        if cancelled_at is not None and time.monotonic() - cancelled_at > GATHER_AFTER_STOP_S:
            for ref, node in pending.items():
                ray.cancel(ref, force=True)
                on_done(node, {"status": "interrupted", "line": "stopped; it printed nothing in time"})
            return
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in ready:
            node = pending.pop(ref)
            value: dict[str, Any]
            try:
                value = dict(ray.get(ref))
            except ray.exceptions.TaskCancelledError:
                value = {"status": "interrupted", "line": "stopped before it printed anything"}
            except (ray.exceptions.NodeDiedError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.OwnerDiedError, ray.exceptions.TaskUnschedulableError) as exc:
                value = {"status": "lost", "line": lost_line(exc, started)}
            except ray.exceptions.RayError as exc:
                value = {"status": "failed", "line": one_line(exc, 300)}
            on_done(node, value)
