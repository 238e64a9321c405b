"""The pictures of a report, drawn by matplotlib as inline SVG: a forest plot of changes, and capacity curves.

matplotlib (imported inside the functions, so ``import ortop.cli`` stays fast and a user who never writes a report
never loads it) draws each figure through its SVG backend alone: no display, no browser and no JavaScript at
write time. ``svg.fonttype = "none"`` writes text as text, in whatever sans-serif font the reader's browser has,
instead of embedding or fetching a font; ``svg.hashsalt`` fixed and the date left out make the same result give the
same bytes, so two reports can be diffed. What matplotlib writes before the ``<svg>`` element (the XML prolog and
a DOCTYPE naming a DTD by URL) and its ``<metadata>`` block (RDF namespaces and its home page) are cut off: a page
must hold no URL a browser could fetch. Each figure's ids get a prefix of their own, so several figures on one
page never share one (a clip path or marker of one figure used by another).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from ortop.report.curve import BY_ESTIMATE

MARGIN_PCT = 2.0  # the comparison's margin (ortop.measure.compare.MARGIN_PCT): inside ±2 % is "no difference"
VERDICT_COLOUR = {"faster": "#1e7a34", "better": "#1e7a34", "slower": "#b3261e", "no difference": "#5b6671",
                  "undecided": "#c27c0e"}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
# Any: matplotlib types rc_context's argument as a dict keyed by the Literal names of its settings
RC: Any = {"svg.fonttype": "none", "svg.hashsalt": "ortop-report", "font.family": "sans-serif", "font.size": 10,
      "axes.spines.top": False, "axes.spines.right": False}

_ID = re.compile(r'\bid="([^"]+)"')


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def svg_of(fig: Any, prefix: str) -> str:
    """The figure as an ``<svg>`` element for inlining: no prolog, no DOCTYPE, no metadata, ids under ``prefix``."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    ids = set(_ID.findall(text))
    if ids:
        def rename(m: re.Match[str]) -> str:
            return f'{m.group(1)}{prefix}-{m.group(2)}{m.group(3)}'

        names = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
        text = re.sub(rf'(\bid="|href="#|url\(#)({names})(["\)])', rename, text)
    return text.strip()


def _new_figure(width: float, height: float) -> Any:
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasSVG(fig)
    return fig


def _short(label: str, most: int = 48) -> str:
    """A row's label cut to fit beside the plot (its end kept: it names the metric and what was compared)."""
    return label if len(label) <= most else "…" + label[-(most - 1):]


def forest(rows: Sequence[Mapping[str, Any]], *, prefix: str, xlabel: str = "change, % (95 % interval)") -> str:
    """A forest plot: one row per change, its estimate and 95 % interval, a line at 0 and the ±2 % band shaded.

    Each row: ``label``, ``change_pct``, ``ci_low_pct``, ``ci_high_pct`` (None where not measured), ``verdict``
    (its colour) and ``bold`` (the objective, or the verified winner). A row without a figure keeps its place with
    "not measured", so the rows line up with the table.
    """
    import matplotlib
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = max(1, len(rows))
    estimates = [abs(r["change_pct"]) for r in rows if _finite(r.get("change_pct"))]
    ends = [abs(x) for r in rows for x in (r.get("ci_low_pct"), r.get("ci_high_pct")) if _finite(x)]
    # The axis serves the estimates and the margin; an interval far wider than them runs off the edge (an arrow
    # there) rather than squeezing every estimate and the ±2 % band into a few pixels.
    base = max(3 * MARGIN_PCT, 1.3 * max(estimates, default=0.0))
    lim = min(max([base, *ends]) * 1.08, 3 * base)
    with matplotlib.rc_context(RC):
        fig = _new_figure(9.0, 1.1 + 0.34 * n)
        ax = fig.add_subplot()
        ax.axvspan(-MARGIN_PCT, MARGIN_PCT, color="#d8dde3", alpha=0.7, lw=0)
        ax.axvline(0.0, color="#1d232a", lw=0.9)
        seen: list[str] = []
        for i, r in enumerate(rows):
            y = n - 1 - i
            est, lo, hi = r.get("change_pct"), r.get("ci_low_pct"), r.get("ci_high_pct")
            verdict = str(r.get("verdict"))
            colour = VERDICT_COLOUR.get(verdict, "#5b6671")
            if verdict in VERDICT_COLOUR and verdict not in seen:
                seen.append(verdict)
            if _finite(lo) and _finite(hi):
                ax.plot([max(lo, -lim), min(hi, lim)], [y, y], color=colour, lw=2.2 if r.get("bold") else 1.4,
                        solid_capstyle="butt")
                if lo < -lim:
                    ax.plot([-lim], [y], "<", color=colour, ms=6, clip_on=False)
                if hi > lim:
                    ax.plot([lim], [y], ">", color=colour, ms=6, clip_on=False)
            if _finite(est):
                ax.plot([min(max(est, -lim), lim)], [y], "D" if r.get("bold") else "o", color=colour,
                        ms=6.5 if r.get("bold") else 5)
            else:
                ax.text(0.02, y, "not measured", transform=ax.get_yaxis_transform(), va="center", color="#7a848e",
                        fontsize=9)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_yticks(range(n))
        ax.set_yticklabels([_short(str(r.get("label", ""))) for r in reversed(rows)])
        for tick, r in zip(ax.get_yticklabels(), reversed(rows)):
            if r.get("bold"):
                tick.set_fontweight("bold")
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", color="#eceff2", lw=0.6)
        ax.set_axisbelow(True)
        keys: list[Any] = [Patch(color="#d8dde3", label=f"±{MARGIN_PCT:g} %: no difference")]
        keys += [Line2D([], [], color=VERDICT_COLOUR[v], marker="o", lw=1.4, label=v) for v in seen]
        fig.legend(handles=keys, loc="outside lower center", ncols=len(keys), fontsize=8, frameon=False)
        return svg_of(fig, prefix)


MARKER = {"met": dict(marker="o"), "not met": dict(marker="X"), "undecided": dict(marker="o", mfc="white")}
MEASURED_MS, ESTIMATED_MS = 6.5, 4.0  # a point's marker size: decided by what it measured, or by the queue model's
                                      # long-run estimate (small, as in the text curve: ortop.report.curve)


def capacity_curves(data: Mapping[str, Any], *, prefix: str = "cap") -> str:
    """Response time (the SLO's metric, p50 dashed) against offered rate for each profile, every point marked by its
    decision (small when the queue model's long-run estimate decided it, not what it measured), the SLO as a
    horizontal line, each capacity as a dotted vertical line in its interval's shaded band; beside it, served (and,
    dotted, served within the SLO: goodput) against offered rate with the line y = x (points under it were not
    served: the queue grew or requests were shed)."""
    import matplotlib

    slo = data.get("slo") or {}
    metric, limit = str(slo.get("metric", "p99")), slo.get("ms")
    with matplotlib.rc_context(RC):
        fig = _new_figure(11.0, 4.8)
        ax, ax2 = fig.subplots(1, 2, width_ratios=(2.3, 1))
        values: list[float] = []
        top_rate = 0.0
        for i, p in enumerate(data.get("profiles") or []):
            shown, top = _capacity_profile(ax, ax2, i, p, metric)
            values += shown
            top_rate = max(top_rate, top)
        if _finite(limit):
            ax.axhline(limit, color="#1d232a", lw=1.1, ls="-.", label=f"SLO: {metric} ≤ {limit:g} ms")
            values.append(limit)
        _response_axes(ax, values, metric)
        edge = top_rate * 1.05 if top_rate > 0 else 1.0
        ax2.plot([0, edge], [0, edge], color="#7a848e", lw=0.9, ls="--", label="served = offered")
        ax2.set_xlim(0, edge)
        ax2.set_ylim(0, edge)
        ax2.set_xlabel("offered, requests/s")
        ax2.set_ylabel("served, requests/s")
        ax2.set_title("served against offered", fontsize=10)
        ax2.grid(color="#eceff2", lw=0.6)
        ax2.legend(fontsize=8, frameon=False, loc="upper left")
        return svg_of(fig, prefix)


def _capacity_profile(ax: Any, ax2: Any, i: int, p: Mapping[str, Any], metric: str) -> tuple[list[float], float]:
    """One profile's curves, points, capacity and interval on the response axes, and its served and goodput on the
    served axes. Returns the response times drawn (for the scale) and the highest rate drawn."""
    colour = PALETTE[i % len(PALETTE)]
    pts = sorted((q for q in p.get("points") or [] if _finite(q.get("rate_per_s"))), key=lambda q: q["rate_per_s"])
    top_rate = max([0.0, *(q["rate_per_s"] for q in pts)])
    line = [(q["rate_per_s"], q["slo_ms"]) for q in pts if _finite(q.get("slo_ms"))]
    if line:
        ax.plot(*zip(*line), color=colour, lw=1.6, label=f"{p.get('profile', i)} {metric}")
    p50 = [(q["rate_per_s"], q["p50_ms"]) for q in pts if _finite(q.get("p50_ms"))]
    if p50:
        ax.plot(*zip(*p50), color=colour, lw=1.0, ls="--", alpha=0.8, marker="_", ms=8)
    for q in pts:
        if _finite(q.get("slo_ms")):
            style = MARKER.get(str(q.get("decision")), MARKER["undecided"])
            size = ESTIMATED_MS if q.get("decided_by") == BY_ESTIMATE else MEASURED_MS
            ax.plot([q["rate_per_s"]], [q["slo_ms"]], ls="none", color=colour, ms=size, mec=colour, **style)
    cap = p.get("capacity_per_s")
    if p.get("met") and _finite(cap) and cap > 0:
        ax.axvline(cap, color=colour, ls=":", lw=1.6, label=f"{p.get('profile', i)} knee: {cap:.3g}/s")
        span = p.get("interval") or [None, None]
        if _finite(span[0]) and _finite(span[1]):  # where a rerun is expected to land
            conf = p.get("interval_confidence") or 0.9
            ax.axvspan(span[0], span[1], color=colour, alpha=0.12, lw=0,
                       label=f"{p.get('profile', i)}: {conf * 100:g} % interval {span[0]:.3g}–{span[1]:.3g}/s")
            top_rate = max(top_rate, span[1])
    good = [(q["rate_per_s"], q["goodput_per_s"]) for q in pts if _finite(q.get("goodput_per_s"))]
    if good:
        ax2.plot(*zip(*good), color=colour, lw=1.0, ls=":", marker="v", ms=4,
                 label=f"{p.get('profile', i)} within the SLO")
    served = [(q["rate_per_s"], q["served_per_s"]) for q in pts if _finite(q.get("served_per_s"))]
    if served:
        ax2.plot(*zip(*served), color=colour, lw=1.2, marker="o", ms=4, label=str(p.get("profile", i)))
    return [v for _, v in line + p50], top_rate


def _response_axes(ax: Any, values: list[float], metric: str) -> None:
    """The response axes' scale (log where the times span over 20×), labels, grid and legend with its markers."""
    from matplotlib.lines import Line2D

    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

        ax.set_yscale("log")  # past the knee response times grow tenfold: milliseconds on a log axis, in plain
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # numbers (1, 2, 5, 10, 20 …)
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(left=0)
    ax.set_xlabel("offered rate, requests/s (Poisson)")
    ax.set_ylabel("response time, ms")
    ax.set_title(f"{metric} (solid) and p50 (dashed) against offered rate", fontsize=10)
    ax.grid(color="#eceff2", lw=0.6)
    keys = [Line2D([], [], ls="none", color="#1d232a", ms=6, **MARKER[d], label=d)  # type: ignore[arg-type]
            for d in ("met", "not met", "undecided")]
    sizes = ((MEASURED_MS, "measured"),
             (ESTIMATED_MS, f"queue-model long-run estimate (too few requests to measure its {metric})"))
    keys += [Line2D([], [], ls="none", color="#1d232a", marker="o", ms=ms, label=label) for ms, label in sizes]
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + keys, fontsize=8, frameon=False, loc="upper left")
