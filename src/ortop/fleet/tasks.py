"""What runs on a node: its facts (the probe), and one measurement, the single-host command run as it is.

These functions run inside Ray tasks on the node (:mod:`ortop.fleet.cluster` wraps them) but know nothing of Ray:
the measurement is ``python -m ortop COMMAND MODEL … --json`` in a child process, so a node's answer is exactly
what ``ortop COMMAND --json`` prints on that host, and the fleet never measures differently from one host. Only the
model's bytes (checked by sha256 here), the profile files named on the command line and the arguments come in; the
command's JSON, its exit code, the tail of its stderr and its own start and end times go back.

A child is told to stop (SIGTERM, which every command takes as ctrl-C) when the Ray worker running it dies (Linux's
parent-death signal), so a node lost or a task cancelled leaves no measurement running on the host. A cancel
(Ray raises it in the task as a ctrl-C) is only noted while a measurement runs (:class:`Cancelled`) and acted on
at the next look, so the fleet can send it again and again until the node answers: none of them can break off the
measurement halfway and lose what it gathered.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

DIR_MARK = "@ORTOP_FLEET_DIR@"  # stands for the node's temporary folder in the arguments shipped
STDERR_TAIL = 20                # lines of a child's stderr kept in its node result
POLL_S = 0.2                    # how often a waiting task looks up (a cancel arrives between two looks)
STOP_WAIT_S = 60.0              # how long a stopped child has to print what it gathered


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _gpu_names() -> list[str]:
    """The GPUs the host's NVML lists, by name; none without NVML or a GPU."""
    from ortop.collectors.gpu import make_gpu_collector

    collector = make_gpu_collector()
    try:
        return [d.name for d in collector.sample().devices]
    finally:
        collector.close()


def _providers() -> list[str]:
    """The execution providers this host's onnxruntime offers, asked of a child (the fleet room never imports
    onnxruntime); empty when it cannot be asked."""
    code = "import onnxruntime, json; print(json.dumps(onnxruntime.get_available_providers()))"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        return list(json.loads(out.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return []


def probe() -> dict[str, Any]:
    """The node's host facts, as the single-host commands read them: CPU model, usable cores, GPU models, and the
    providers onnxruntime offers here."""
    import ortop
    from ortop.collectors.host import read_host

    host = read_host()
    return {"hostname": socket.gethostname(), "cpu_model": host.cpu_model, "logical_cpus": host.logical_cpus,
            "usable_cpus": len(host.usable_cpus), "physical_cores": host.physical_cores,
            "cpu_quota": host.cpu_quota, "gpus": _gpu_names(), "providers": _providers(),
            "ortop": ortop.__version__, "python": sys.version.split()[0]}


def _child_setup() -> None:
    """In the child, before exec: ctrl-C at its default, so that the command's own handler takes it (a process that
    starts with SIGINT ignored keeps ignoring it, and a stop would never reach the command: a test process whose
    SIGINT an earlier test left ignored showed it); and on Linux SIGTERM when the parent (the Ray worker) dies."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _last_json(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object (a command's ``--json`` prints one)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


class StopFlag:
    """Set once the fleet is told to stop (a Ray actor of no resources; every node's measurement looks at it about
    once a second). A ``ray.cancel`` alone can be lost: one that reaches a task the moment it starts leaves it
    running to its end, as a busy cluster showed."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


FLAG_POLL_S = 1.0               # how often a measurement looks at the fleet's StopFlag


def _asked_to_stop(flag: Any) -> Callable[[], bool]:
    """Whether the fleet's ``flag`` (a StopFlag actor handle; None: none) is set: a question sent once a
    FLAG_POLL_S at most, its answer read when it has come. Never ``ray.get``: a task blocked in it gives its node's
    CPUs back to Ray meanwhile, and another fleet's measurement would start on the node beside this one (a busy CI
    caught two overlapping). A flag that cannot be read (its node gone) reads as not set: the cancel still reaches
    the task."""
    if flag is None:
        return lambda: False
    import ray

    asking: list[Any] = []   # the question under way, as a concurrent.futures.Future
    last = [time.monotonic()]

    def asked() -> bool:
        if asking and asking[0].done():
            answer = asking.pop()
            try:
                return bool(answer.result())
            except ray.exceptions.RayError:
                return False
        now = time.monotonic()
        if not asking and now - last[0] >= FLAG_POLL_S:
            last[0] = now
            asking.append(flag.is_set.remote().future())
        return False

    return asked


class Cancelled:
    """A cancel noted, not raised: inside ``with Cancelled() as c``, SIGINT in this process (how Ray's cancel
    reaches a running task: ``_thread.interrupt_main``) sets ``c.event`` instead of raising KeyboardInterrupt at
    whatever line runs. A first cancel that came as the task started and was lost, or one sent again, then does no
    harm; the measurement looks at the event between two waits. Off the main thread (no handler can be set there)
    it notes nothing and a cancel raises as before. With ``restore=False`` the handler stays after the block, so
    that a cancel sent again just as the block ended is noted too, not raised in the Ray code that sends the
    task's result back (which would lose it): what the fleet's task does (its worker runs nothing else)."""

    def __init__(self, restore: bool = True) -> None:
        self.event = threading.Event()
        self.restore = restore
        self._before: Any = None

    def __enter__(self) -> Cancelled:
        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGINT, lambda *_: self.event.set())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._before is not None and self.restore:
            signal.signal(signal.SIGINT, self._before)


def _run(argv: Sequence[str], cwd: str, asked: Callable[[], bool] = lambda: False) -> tuple[int | None, str, str, bool]:
    """Run one child to its end; on a cancel (KeyboardInterrupt, from Ray) or once ``asked()`` says the fleet is
    stopping (a cancel noted by :class:`Cancelled` among it), tell it to stop and wait for what it prints.
    (exit code, stdout, stderr, stopped); a stop asked before the child starts starts none (exit code None)."""
    if asked():
        return None, "", "", True
    child = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=_child_setup if os.name == "posix" else None)
    while True:
        try:
            o, e = child.communicate(timeout=POLL_S)
            return child.returncode, o or "", e or "", False
        except subprocess.TimeoutExpired:
            if asked():
                break
        except KeyboardInterrupt:  # ray.cancel, where no Cancelled notes it
            break
    # the command prints what it gathered, as on ctrl-C; a cancel repeated meanwhile asks for what is under way
    child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_WAIT_S
    while True:
        try:
            o, e = child.communicate(timeout=max(0.01, deadline - time.monotonic()))
            break
        except KeyboardInterrupt:
            continue
        except subprocess.TimeoutExpired:
            child.kill()
            o, e = child.communicate()
            break
    return child.returncode, o or "", e or "", True


def measure(spec: Mapping[str, Any], model: bytes, flag: Any = None, *, keep_noting: bool = False) -> dict[str, Any]:
    """One measurement on this node: the model written to a temporary folder (its sha256 checked against
    ``spec["sha256"]``), ``python -m ortop COMMAND MODEL ARGS --json`` run there, and with ``spec["service_s"]``
    a headless run of that many seconds for the service times sizing simulates from. ``flag``: the fleet's
    :class:`StopFlag`, looked at while the commands run; a cancel is noted (:class:`Cancelled`; ``keep_noting``:
    after the measurement too) and acted on as the flag is."""
    with Cancelled(restore=not keep_noting) as cancel:
        flagged = _asked_to_stop(flag)

        def asked() -> bool:
            return cancel.event.is_set() or flagged()

        return _measure(spec, model, asked)


def _measure(spec: Mapping[str, Any], model: bytes, asked: Callable[[], bool]) -> dict[str, Any]:
    started = time.time()
    base: dict[str, Any] = {"started_at": started, "pid": os.getpid()}
    digest = sha256(model)
    if digest != spec["sha256"]:
        return {**base, "status": "failed", "ended_at": time.time(),
                "line": f"the model arrived with sha256 {digest[:12]}…, not {spec['sha256'][:12]}…"}
    with tempfile.TemporaryDirectory(prefix="ortop-fleet-") as folder:
        path = os.path.join(folder, spec["model_name"])
        with open(path, "wb") as f:
            f.write(model)
        for name, data in (spec.get("files") or {}).items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)

        def here(args: Sequence[str]) -> list[str]:
            return [a.replace(DIR_MARK, folder) for a in args]

        argv = [sys.executable, "-m", "ortop", spec["command"], path, *here(spec["args"]), "--json"]
        code, out, err, stopped = _run(argv, folder, asked)
        ended = time.time()
        service = None
        if spec.get("service_s") and not stopped and code in (0, None):
            run_argv = [sys.executable, "-m", "ortop", "run", path, "--headless", "--json", "--duration",
                        str(spec["service_s"]), *here(spec.get("run_args") or [])]
            _, run_out, _, _ = _run(run_argv, folder, asked)
            summary = _last_json(run_out) or {}
            if summary.get("service_ms"):
                workload = (summary.get("profile") or {}).get("workload") or {}
                service = {"service_ms": summary["service_ms"], "replicas": workload.get("replicas") or 1}
    result = _last_json(out)
    tail = err.strip().splitlines()[-STDERR_TAIL:]
    status = "interrupted" if stopped else "done" if result is not None else "failed"
    line = None
    if result is None:
        line = ("stopped before its command started" if stopped and code is None else tail[-1] if tail
                else f"ortop {spec['command']} exited {code} with no JSON")
    return {**base, "status": status, "ended_at": ended, "exit_code": code, "result": result, "service": service,
            "stderr_tail": tail, "line": line}
