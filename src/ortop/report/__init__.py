"""Reports: one self-contained HTML page per result (``ortop compare``, ``ortop tune``, ``ortop capacity``).

A page is made from the dict the command prints with ``--json`` (never from the engine's objects: this room sits
beside the exporters, over nothing but plain data), and holds everything itself: an inline ``<style>``, the
figures' tables, and the pictures as inline SVG. Nothing in it is fetched (no script, stylesheet, font or image, no
CDN), so it opens the same offline, from a mail attachment or an archive, years later.

Why matplotlib draws the pictures: it is the best kept plotting library in Python, its SVG backend writes a file
with no display, no browser and no JavaScript (the plotting libraries that build interactive pages ship a script
bundle to inline or fetch), it writes text as text (``svg.fonttype = "none"``) rather than fetching or embedding a
font, and with ``svg.hashsalt`` fixed and no date it writes the same bytes for the same result. It is imported
inside the drawing functions only, so neither ``import ortop.cli`` nor a command run without ``--report`` loads it.
"""

from __future__ import annotations

import os

from ortop.report.pages import capacity_page, certify_page, compare_page, tune_page

__all__ = ["capacity_page", "certify_page", "check_report", "compare_page", "tune_page", "write_report"]


def check_report(path: str | os.PathLike, *, protect: tuple[str | os.PathLike, ...] = ()) -> str:
    """Check, before anything is measured, that the report can be written there (UsageError, exit 2, if not)."""
    from ortop.fsutil import check_writable

    return check_writable(path, protect=protect, what="report")


def write_report(path: str | os.PathLike, html: str, *, protect: tuple[str | os.PathLike, ...] = ()) -> None:
    """Write the page atomically (readers see the old file or the new one, never half).

    Raises:
        UsageError: the path cannot be written (exit 2): a missing folder, a directory, no permission.
        RuntimeFailure: the path could be written but writing failed (a full disk): exit 1.
    """
    from ortop.errors import RuntimeFailure, UsageError
    from ortop.fsutil import write_text

    check_report(path, protect=protect)
    try:
        write_text(path, html, protect=protect, what="report")
    except UsageError as exc:  # the path was fine a moment ago: this is the write itself failing
        raise RuntimeFailure(str(exc)) from None
