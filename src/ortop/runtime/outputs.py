"""One run's outputs of a built session, for comparing a model's outputs with another's on the same inputs.

The run is made after the warm-up, on the session's first caller thread (where its IO binding lives), with the
first input shape's feeds; the outputs go to the parent as :func:`ortop.measure.agreement.compact` copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def run_outputs(session: Any) -> dict[str, Any]:
    """Output name -> value (numpy arrays for tensors) of one run of ``session`` (a Session or Replicas: its first
    member) on its first shape's feeds."""
    m = session.members[0]

    def one() -> list[Any]:
        if m.io_binding:
            # Through the caller's own runner: with CUDA graphs it replays the graph captured at warm-up (a bare
            # run_with_iobinding would capture another, outside the capture lock).
            m.runner(0, 0)()
            return list(m.binding(0, 0).copy_outputs_to_cpu())
        values = m.runner(0, 0)()
        return [v if isinstance(v, np.ndarray) or not hasattr(v, "numpy") else v.numpy() for v in values]

    return dict(zip(m.output_names, m.servers[0].call(one)))


def compact_outputs(session: Any) -> dict[str, dict[str, Any]]:
    """:func:`run_outputs`, each output as :func:`ortop.measure.agreement.compact` (small enough to send)."""
    from ortop.measure.agreement import compact, output_cap

    outputs = run_outputs(session)
    cap = output_cap(len(outputs))
    return {name: compact(value, cap) for name, value in outputs.items()}


def feeds_digest(feeds: dict[str, Any]) -> str:
    """A hash of the feeds' names, dtypes, shapes and bytes: two sessions with equal digests got the same inputs."""
    import hashlib

    h = hashlib.blake2b(digest_size=12)
    for name in sorted(feeds):
        arr = feeds[name]
        h.update(f"{name}|{arr.dtype.name}|{arr.shape}|".encode())
        if arr.dtype == object:
            h.update(repr(arr.tolist()).encode())
        else:
            h.update(np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data)  # the buffer, not a copy
    return h.hexdigest()
