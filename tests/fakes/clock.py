"""A clock that moves only when the test says so."""

from __future__ import annotations


class StepClock:
    """A clock that moves only when the test says so: per-second averages and redraws happen at fixed ticks."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
