"""The worker under another Python interpreter: ``python -m ortop.runtime.foreign FD MODEL`` (a venv with another
onnxruntime, to compare two versions on one host).

:mod:`ortop.engine.workerproc` starts this with ``subprocess`` instead of multiprocessing's spawn (which would
hand the child this interpreter's ``sys.path``, and so this venv's onnxruntime): the command connection is one end
of a socket pair whose descriptor ``FD`` the child inherits, and ortop's own package is on ``PYTHONPATH`` through
a folder holding only a link to it. That interpreter is asked for onnxruntime and numpy alone; what else the
worker's modules would import is provided here:

- the model's summary (``ortop.model.ModelInfo``) is read by onnx, which that venv need not have: the parent
  reads it and sends it, first for the worker's own model (the first message, before the worker starts) and then
  before each ``Build`` that names another model (as :class:`Models`); ``ortop.model.load_model`` answers from
  what was sent;
- ``tomli_w`` (writing TOML, which the worker never does) is a stub when missing;
- psutil is already optional in the worker (its memory is read from ``/proc``).

Everything else is :func:`ortop.runtime.worker.worker_main`, unchanged: the same protocol, the same loops.
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from typing import Any

MODULE = "ortop.runtime.foreign"


@dataclass(frozen=True)
class Models:
    """Model summaries by path (``os.path.abspath``), sent ahead of the messages that need them."""

    infos: dict[str, Any]


_KNOWN: dict[str, Any] = {}


def _load_model(path: Any, _real: Any = None) -> Any:
    info = _KNOWN.get(os.path.abspath(os.fspath(path)))
    if info is not None:
        return info
    if _real is not None:
        return _real(path)
    raise RuntimeError(f"no summary of {path} was sent to this worker")


def install(infos: dict[str, Any]) -> None:
    """Answer ``ortop.model.load_model`` from ``infos`` (falling back to the real reader when onnx is there), and
    stub what the worker imports but never uses here."""
    _KNOWN.update(infos)
    try:
        import tomli_w  # noqa: F401
    except ImportError:
        stub = types.ModuleType("tomli_w")

        def dumps(*_a: Any, **_k: Any) -> str:
            raise RuntimeError("tomli_w is not installed under this interpreter")

        stub.dumps = dumps  # type: ignore[attr-defined]
        sys.modules["tomli_w"] = stub
    import importlib.util

    from ortop import model as model_mod
    from ortop.model import inspect

    real = inspect.load_model if importlib.util.find_spec("onnx") is not None else None

    def load_model(path: Any) -> Any:
        return _load_model(path, real)

    model_mod.load_model = load_model
    inspect.load_model = load_model


class ModelsConn:
    """The command connection, taking in the :class:`Models` messages the parent sends ahead of a ``Build``."""

    def __init__(self, conn: Any):
        self.conn = conn

    def recv(self) -> Any:
        while True:
            msg = self.conn.recv()
            if isinstance(msg, Models):
                _KNOWN.update(msg.infos)
                continue
            return msg

    def poll(self, timeout: float | None = 0.0) -> bool:
        return bool(self.conn.poll(timeout))

    def send(self, msg: Any) -> None:
        self.conn.send(msg)

    def close(self) -> None:
        self.conn.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit():
        print(f"usage: python -m {MODULE} FD MODEL", file=sys.stderr)
        return 2
    from multiprocessing.connection import Connection

    conn = Connection(int(argv[0]))
    first = conn.recv()
    if not isinstance(first, Models):
        print("ortop worker: the first message was not the model's summary", file=sys.stderr)
        return 2
    install(first.infos)
    from ortop.runtime.worker import worker_main

    worker_main(ModelsConn(conn), argv[1])
    return 0


if __name__ == "__main__":
    # run as the module's real name, so the Models the parent pickles are this module's class, not __main__'s
    from ortop.runtime.foreign import main as _main

    sys.exit(_main(sys.argv[1:]))
