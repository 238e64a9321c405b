"""Names a package's face loads on first use (PEP 562), so importing the face costs nothing until a name is read.

The engine's and the doctor's faces (``ortop.engine``, ``ortop.doctor``) gather names from modules that pull in
numpy, the monitor or the A/B runner; the TUI imports both at start-up but needs most of those names only when a
screen opens. A face lists where each name lives and installs :func:`face_getattr` as its ``__getattr__`` (under
``if not TYPE_CHECKING``: a type checker reads the face's ``TYPE_CHECKING`` imports instead, which keeps each
name's type).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def face_getattr(package: str, face: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that loads ``face[name]`` on first use.

    Each value is the module of ``package`` defining the name (``"space"``), or ``"module:attribute"`` where the face
    spells it otherwise (a name spelled as a module of the package would be replaced by that module once imported).
    Once loaded, a name is an ordinary attribute of the package.
    """

    def __getattr__(name: str) -> Any:
        where = face.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
