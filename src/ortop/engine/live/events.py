"""The monitor's event log: what it, the worker and ORT said, with repeats grouped into one counted event.

ORT logs one warning per initializer listed as a graph input, say: a few hundred identical lines that would push
everything else out of a view. :func:`worker_line` reads one line of the worker's stderr (ORT's own format, or
anything else a library printed) as a level and a text.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from ortop.config.profile import Profile
from ortop.engine.live.snapshot import Event, changes_between

ORT_LOG = re.compile(r"^\S+ \S+ \[([VIWEF]):onnxruntime:[^\]]*\]\s*(.*)$")
LEVELS = {"V": "debug", "I": "info", "W": "warning", "E": "error", "F": "error"}
GROUP_WINDOW = 50   # a repeat of one of the last this many events is counted on it, not appended
KEEP = 500          # past this many events the oldest hundred go


# ORT warnings that say nothing about the session they come with, read as info. onnxruntime-gpu 1.31.1 prints
# the first for every session made with providers=["CUDAExecutionProvider", …] on an H100 where CUDA then runs
# (its plugin-EP device registry is empty in that case); a CUDA provider that did not load says so separately
# (ortop warns "requested but not active").
ORT_NOT_WARNINGS = (re.compile(r"^No registered plugin EP device found for '[^']+' with device_id=\d+$"),)


def worker_line(line: str) -> tuple[str, str]:
    """(level, text) of a line the worker's stderr carried: ORT's level and message, or a plain line."""
    m = ORT_LOG.match(line)
    if m:
        text = m.group(2).strip()
        level = LEVELS.get(m.group(1), "info")
        if level == "warning" and any(r.match(text) for r in ORT_NOT_WARNINGS):
            level = "info"
        return level, "ORT: " + text
    return ("warning" if "warn" in line.lower() else "info"), "worker: " + line


def seconds_text(s: float) -> str:
    """A duration an event states, rounded as one reads it: ``11 s`` from 10 s up, ``6.5 s`` below, ``0.25 s``
    under a second (``interleaving them for 10.9423 s`` read as a measurement to a tenth of a millisecond)."""
    if not math.isfinite(s):
        return "? s"
    if abs(s) >= 9.95:
        return f"{s:.0f} s"
    if abs(s) >= 0.995:
        return f"{s:.1f}".removesuffix(".0") + " s"
    return f"{s:.2g} s"


def built_text(info: dict, before: Profile | None, after: Profile, why: str = "") -> str:
    """The event of a session built: its times, and what changed from the configuration it replaced (not from
    the start: turning spinning back on reads ``allow_spinning: off → default``). A rebuild that changed no setting
    says why it rebuilt: ``why`` (the worker was restarted), else the same settings were applied again. The change
    comes first: ``rebuilt: session.allow_spinning: off → default (in 41 ms, first run 5.8 ms)``."""
    create, first = info.get("create_ms", float("nan")), info.get("first_run_ms", float("nan"))
    times = f"in {create:.0f} ms, first run {first:.1f} ms"
    if before is None:
        return f"session built {times}"
    changes = changes_between(before, after)
    # the change first: a narrow events panel cuts the end of a long line, and the times matter less
    what = "; ".join(c.text for c in changes) if changes else \
        f"no setting changed ({why or 'the same settings applied again'})"
    return f"rebuilt: {what} ({times})"


class EventLog:
    """Events in order; not thread-safe (the monitor adds under its lock)."""

    def __init__(self) -> None:
        self._events: list[Event] = []

    def add(self, t: float, level: str, text: str) -> None:
        """Add an event at ``t``, or count it on a recent one with the same level and text, which moves to ``t``
        and so to the end: the log stays in time order (a repeat left where it first came read 145.6 before
        118.9)."""
        events = self._events
        for i in range(len(events) - 1, max(-1, len(events) - GROUP_WINDOW), -1):
            e = events[i]
            if e.text == text and e.level == level:
                del events[i]
                events.append(replace(e, count=e.count + 1, t=max(t, e.t)))
                return
        events.append(Event(t, level, text))
        if len(events) > KEEP:
            del events[:100]

    def items(self) -> tuple[Event, ...]:
        return tuple(self._events)
