"""How ortop writes its figures: one place for units and number formats, read by every surface.

The live view, the headless tables, the answering commands' text, the HTML reports, the help legend and the docs
generator all write a millisecond, a rate, a percentage or a size through :mod:`ortop.present.units`, so the same
figure reads the same wherever it is shown. The room imports nothing of ortop's: every other room may use it.
"""

from ortop.present.units import (
    DASH,
    GIB,
    KIB,
    MIB,
    MINUS,
    cell,
    change_pct,
    cores_text,
    figures_alike,
    finite,
    hz_text,
    mb_text,
    mib,
    ms_text,
    pct_decimals,
    pct_text,
    pct_unit,
    rate_figure,
    rate_text,
    secs_text,
    signed,
    signed_mb,
    signed_pct,
    size_text,
)

__all__ = ["DASH", "GIB", "KIB", "MIB", "MINUS", "cell", "change_pct", "cores_text", "figures_alike", "finite",
           "hz_text", "mb_text", "mib", "ms_text", "pct_decimals", "pct_text", "pct_unit", "rate_figure", "rate_text",
           "secs_text", "signed", "signed_mb", "signed_pct", "size_text"]
