"""Where ONNX Runtime placed each node: the execution provider that runs it, as ORT itself recorded it.

ORT 1.31 records the partitioning when the session config entry ``session.record_ep_graph_assignment_info`` is
"1"; ``InferenceSession.get_provider_graph_assignment_info()`` then returns one ``OrtEpAssignedSubgraph`` per
subgraph (``ep_name``, ``get_nodes()``), each node with ``name``, ``op_type`` and ``domain``. The nodes are those
of the partitioned graph (original names, before layout rewrites fuse them), which is what a user can find in
their model. Older onnxruntime versions have no such method: placement is then unknown (None), never an error.
"""

from __future__ import annotations

from typing import Any

RECORD_KEY = "session.record_ep_graph_assignment_info"


def record(so: Any) -> None:
    """Ask ORT to keep the assignment of nodes to providers (before the session is created)."""
    so.add_session_config_entry(RECORD_KEY, "1")


def assignment(sess: Any) -> list[dict[str, str]] | None:
    """``[{"name", "op_type", "domain", "ep"}, …]`` for every placed node; None where ORT cannot tell."""
    get = getattr(sess, "get_provider_graph_assignment_info", None)
    if get is None:
        return None
    try:
        subgraphs = get()
    except Exception:  # recording was off, or this build refuses: placement unknown
        return None
    return [{"name": n.name, "op_type": n.op_type, "domain": n.domain, "ep": sg.ep_name}
            for sg in subgraphs for n in sg.get_nodes()]
