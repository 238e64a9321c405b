"""Units and number formats: milliseconds, rates, percentages, cores, seconds and sizes.

Each figure has one way of being written, whatever shows it:

- **milliseconds** with three significant figures (``0.123``, ``1.23``, ``12.3``, ``123``): a latency's precision is
  relative, and a fixed number of decimals either hides a fast model's figures or invents digits for a slow one's;
- **rates** of runs or requests per second: ``812/s``, ``12k/s`` in a meter, a bare ``812``, ``4.2`` or ``0.37`` in a
  table or a sentence that says the unit;
- **percentages**: whole in a meter (``45%``); a signed change with the true minus sign (``−12.5``), one decimal
  below 10 and none above where the caller asks for it;
- **sizes** in binary units, one decimal below 100 of the unit (``812 B``, ``64.7 KiB``, ``3.2 MiB``, ``123 MiB``,
  ``1.1 GiB``); the worker's RSS, a live meter, in whole MB of 2**20 bytes;
- **nothing to say** (None, nan, not a number) as ``—``, never ``nan``.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

DASH = "—"        # a figure with nothing to say
MINUS = "\u2212"  # the minus sign of a signed figure (a hyphen reads as a dash in a column)
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def finite(x: Any) -> TypeGuard[float]:
    """True for a real number (not None, NaN, ±inf, a bool or anything else)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def ms_text(x: Any) -> str:
    """Milliseconds with three significant figures: 0.123, 1.23, 12.3, 123; "—" for nothing to say."""
    if not finite(x):
        return DASH
    a = abs(x)
    if a < 0.9995:  # thresholds where rounding would add a digit: 0.9996 shows as 1.00, not 1.000
        return f"{x:.3f}"
    if a < 9.995:
        return f"{x:.2f}"
    if a < 99.95:
        return f"{x:.1f}"
    return f"{x:.0f}"


def rate_text(x: Any) -> str:
    """Runs per second in a meter: 812/s, 12.3k/s, 4.2/s."""
    if not finite(x):
        return DASH
    if x >= 9_995_000:
        return f"{x / 1e6:.0f}M/s"
    if x >= 999_500:
        return f"{x / 1e6:.1f}M/s"
    if x >= 10_000:
        return f"{x / 1000:.0f}k/s"
    if x >= 1000:
        return f"{x / 1000:.1f}k/s"
    if x >= 10:
        return f"{x:.0f}/s"
    return f"{x:.1f}/s"


def hz_text(value: Any) -> str:
    """A paced rate as a profile sets it: ``100 Hz``, or ``closed loop`` for 0 or none."""
    return f"{value:g} Hz" if value else "closed loop"


def rate_figure(x: Any) -> str:
    """A rate in a table or a sentence that gives its unit: whole from 10 up (812), one decimal from 1 (4.2, 6.0),
    two below (0.37); "?" when unknown."""
    if not finite(x):
        return "?"
    return f"{x:.0f}" if x >= 9.95 else f"{x:.1f}" if x >= 0.995 else f"{x:.2f}"


def pct_text(x: Any, width: int = 0) -> str:
    """A share without decimals (``45%``), right-aligned to ``width``."""
    return (f"{x:.0f}%" if finite(x) else DASH).rjust(width)


def signed(x: Any, decimals: int = 1, missing: str = DASH) -> str:
    """A signed change, without its unit: ``+3.1``, ``−12.5`` (the true minus sign); ``missing`` when there is no
    figure."""
    if not finite(x):
        return missing
    return f"{x:+.{decimals}f}".replace("-", MINUS)


def signed_pct(x: Any, decimals: int = 1, missing: str = DASH) -> str:
    """A signed change in per cent, without the unit (the caller writes `` %`` where its column does not):
    ``+3.1``, ``−12.5``."""
    return signed(x, decimals, missing)


def cores_text(pct: Any, unit: bool = True) -> str:
    """A process's CPU (in % of one core, as the collectors give it) as cores: ``1.10 cores``, ``0.05 cores``."""
    if not finite(pct):
        return f"{DASH} cores" if unit else DASH
    n = pct / 100.0
    s = f"{n:.1f}" if n >= 9.95 else (f"{n:.2f}" if n >= 0.00995 else f"{n:.3f}")
    return f"{s} cores" if unit else s


def secs_text(x: Any) -> str:
    """Elapsed seconds: 0.4 s, 12.3 s, 3m05s, 2h05m."""
    if not finite(x):
        return DASH
    if x < 60:
        return f"{x:.1f} s"
    m, s = divmod(int(x), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def size_text(n: Any) -> str:
    """A size in bytes, binary units, one decimal below 100 of the unit and whole above: ``812 B``, ``64.7 KiB``,
    ``3.2 MiB``, ``123 MiB``, ``1.1 GiB``; "—" when unknown."""
    if not finite(n) or n < 0:
        return DASH
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale:
            x = n / scale
            return f"{x:.1f} {unit}" if x < 99.95 else f"{x:.0f} {unit}"
    return f"{n:.0f} B"


def mb_text(n: Any) -> str:
    """The worker's memory in a live meter: whole MB of 2**20 bytes (``97 MB``); "—" when unknown or negative."""
    return f"{n / MIB:.0f} MB" if finite(n) and n >= 0 else DASH


def signed_mb(n: Any) -> str:
    """A change of memory in whole MB of 2**20 bytes, signed: ``+12 MB``, ``−3 MB``, ``±0 MB`` under half a MB."""
    if not finite(n):
        return DASH
    mbs = n / MIB
    if abs(mbs) < 0.5:
        return "±0 MB"
    return f"{mbs:+.0f} MB".replace("-", MINUS)


def pct_decimals(*xs: Any) -> int:
    """Decimals for signed percents shown side by side (a change and its interval): none when any is 10 or more in
    size, one below (``−12 … +31``, ``+1.2 … +3.4``)."""
    sizes = [abs(x) for x in xs if finite(x)]
    return 0 if sizes and max(sizes) >= 10 else 1


def change_pct(x: Any) -> str:
    """A change in per cent with its unit, as the gates print it: ``+1.2 %``, ``−12 %``; ``?`` when unknown."""
    return f"{signed_pct(x, pct_decimals(x))} %" if finite(x) else "?"


def mib(n: Any, signed: bool = False) -> float | None:
    """Bytes as MiB rounded to 0.1, the way a JSON figure carries a size (``rss_mb``: 97.3); None when unknown, and
    for a negative size unless ``signed`` (a change of memory)."""
    if not finite(n) or (n < 0 and not signed):
        return None
    return round(n / MIB, 1)


def pct_unit(x: Any, decimals: int = 1, missing: str = "?") -> str:
    """A share in per cent with its unit, as a sentence says it: ``2.5 %``, ``0.3 %``; ``missing`` when unknown."""
    return f"{x:.{decimals}f} %" if finite(x) else missing


def cell(x: Any, digits: int = 3) -> str:
    """A figure in a table cell whose header gives the unit: whole from 100, one decimal from 10, ``digits``
    decimals below; "—" for what was not measured."""
    if not finite(x):
        return DASH
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def figures_alike(*xs: Any) -> list[str]:
    """Figures side by side (a before and an after) with one number of decimals: three significant digits of the
    largest; "?" for one that is missing."""
    sizes = [abs(x) for x in xs if finite(x)]
    a = max(sizes) if sizes else 0.0
    decimals = 0 if a >= 100 else 1 if a >= 10 else 2 if a >= 1 else 3 if a >= 0.1 or a == 0 else 4
    return [f"{x:.{decimals}f}" if finite(x) else "?" for x in xs]
