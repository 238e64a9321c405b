"""ortop on a Ray cluster: the single-host commands run on every node, one measurement per node at a time, and
their answers gathered into one per node and per type.

The only room that imports ray (as :mod:`ortop.runtime` is the only one that imports onnxruntime); ortop without the
``fleet`` extra never imports it. This face imports nothing heavy: :func:`available` says whether Ray is installed,
and :func:`run_fleet` (in :mod:`ortop.fleet.run`) is imported when a fleet runs.
"""

from __future__ import annotations

import importlib.util

INSTALL = "ortop fleet needs Ray: pip install 'ortop[fleet]'"


def available() -> bool:
    """Whether Ray can be imported here (the ``fleet`` extra is installed)."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or hidden install reads as none
        return False
