"""Waiting in tests: every wait has a deadline, fails naming what it waited for, and polls rather than sleeps a
fixed time (a loaded host takes longer; a fixed sleep is either too short there or wasted here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float = 10.0, what: str = "condition", interval: float = 0.02) -> T:
    """Poll ``cond()`` until it returns something truthy (returned) or ``timeout`` seconds pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


async def until(pilot: Any, cond: Callable[[], object], what: str = "condition", timeout: float = 20.0,
                interval: float = 0.05) -> None:
    """Let a Textual app under test run until ``cond()`` holds (its screens' checks and searches run on threads of
    their own), then one more pause so what it drew is settled; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(interval)
    await pilot.pause()
