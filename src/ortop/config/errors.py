"""The error a profile raises, kept apart so reading, validation and the registry can all raise it without importing
each other.
"""

from __future__ import annotations

from ortop.errors import OrtopError


class ProfileError(OrtopError, ValueError):
    """A profile that cannot be used. ``str()`` is one line naming the file, line and key where known.

    ``key`` is the dotted profile key, so a form can put the message beside the field it is about.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.key = key
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + message)


class ProfileErrors(ProfileError):
    """Several validation errors at once; ``errors`` holds each, ``str()`` joins them with '; '.

    A user fixing a profile sees every problem in one pass instead of one per attempt.
    """

    def __init__(self, errors: list[ProfileError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def raise_if_any(errors: list[ProfileError]) -> None:
    """Raise the one error as itself, or several as :class:`ProfileErrors`; nothing when the list is empty."""
    if errors:
        raise errors[0] if len(errors) == 1 else ProfileErrors(errors)
