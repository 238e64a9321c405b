"""The page around the figures: one HTML document, its style inline, every value escaped.

A report is mailed, attached to a ticket or opened years later from an archive, often on a machine without network
access: so nothing in it is fetched. The style is one inline ``<style>``, the pictures are inline SVG
(:mod:`ortop.report.figures`), and there is no script, font, stylesheet or image reference at all. The only URLs in a
page are the SVG namespace names (``xmlns``), which a browser never requests.

Every text taken from a result (a profile name, a model path, a warning, a TOML value) goes through
:func:`esc`: a profile named ``<script>`` is a name, not markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ortop.config.values import format_cpulist

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1d232a; background: #fff; margin: 0 auto; max-width: 1180px; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d8dde3; padding-bottom: 3px; }
h3 { font-size: 14px; margin: 16px 0 6px; }
.sub { color: #5b6671; margin: 0 0 14px; }
.verdict { background: #f3f6f9; border-left: 4px solid #3b7dd8; padding: 8px 12px; margin: 12px 0; }
table { border-collapse: collapse; margin: 6px 0 10px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e6e9ed; text-align: left; vertical-align: top; }
th { background: #f3f6f9; font-weight: 600; }
td.n, th.n { text-align: right; white-space: nowrap; }
tr.best td { font-weight: 600; background: #eef7ee; }
tr.dim td { color: #7a848e; }
.bad { color: #b3261e; } .good { color: #1e7a34; } .warn { color: #9a6400; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.facts dt { color: #5b6671; } dl.facts dd { margin: 0; }
pre { background: #f6f8fa; border: 1px solid #e1e4e8; padding: 8px 10px; overflow-x: auto; font-size: 12.5px; }
details { margin: 4px 0; } summary { cursor: pointer; }
figure { margin: 8px 0 4px; } figcaption { color: #5b6671; font-size: 12.5px; margin-top: 2px; }
figure svg { max-width: 100%; height: auto; }
footer { margin-top: 36px; color: #7a848e; font-size: 12px; }
"""


def esc(value: Any) -> str:
    """Any value as HTML text, quotes included (so it is safe in an attribute too)."""
    return html.escape("" if value is None else str(value), quote=True)






def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Sequence[int] = (),
          classes: Sequence[str] | None = None) -> str:
    """A table from plain cells (escaped here); ``numeric`` columns align right; ``classes`` one per row."""
    right = set(numeric)
    head = "".join(f'<th class="n">{esc(h)}</th>' if i in right else f"<th>{esc(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        cls = classes[r] if classes is not None and r < len(classes) and classes[r] else ""
        cells = "".join(f'<td class="n">{esc(c)}</td>' if i in right else f"<td>{esc(c)}</td>"
                        for i, c in enumerate(row))
        body.append(f'<tr class="{esc(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def facts(pairs: Iterable[tuple[str, Any]]) -> str:
    """A definition list of label → value (values escaped; empty ones left out)."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs if v not in (None, ""))
    return f'<dl class="facts">{items}</dl>'


def host_section(host: Mapping[str, Any] | None) -> str:
    """Where it was measured, from ``HostFacts.as_dict()`` (plus ``gpus`` where the caller knows them)."""
    if not host:
        return "<h2>Host</h2><p>not recorded</p>"
    logical, physical = host.get("logical_cpus"), host.get("physical_cores")
    usable = host.get("usable_cpus") or []
    quota = host.get("cpu_quota")
    numa = host.get("numa_nodes") or {}
    gpus = host.get("gpus")
    return "<h2>Host</h2>" + facts([
        ("CPU", host.get("cpu_model") or "unknown"),
        ("cores", f"{logical} logical / {physical} physical" + (", SMT" if host.get("smt") else "")),
        ("usable CPUs", format_cpulist([int(c) for c in usable]) if usable and len(usable) < (logical or 0) else ""),
        ("cgroup quota", f"{quota:g} CPUs" if isinstance(quota, (int, float)) else "none"),
        ("NUMA nodes", str(len(numa)) if len(numa) > 1 else ""),
        ("GPUs", ", ".join(map(str, gpus)) if gpus else ("none" if gpus is not None else "")),
    ])


def profiles_section(profiles: Sequence[tuple[str, str]], *, title: str = "Profiles") -> str:
    """Each profile's TOML (or its changes) in a fold, open for the first few."""
    if not profiles:
        return ""
    parts = [f"<h2>{esc(title)}</h2>"]
    for i, (name, text) in enumerate(profiles):
        body = text.strip() or "# ORT's defaults: nothing set"
        parts.append(f"<details{' open' if i < 4 else ''}><summary>{esc(name)}</summary>"
                     f"<pre>{esc(body)}</pre></details>")
    return "".join(parts)


def notes_section(warnings: Iterable[str], title: str = "Warnings") -> str:
    items = [f"<li>{esc(w)}</li>" for w in warnings if w]
    return f"<h2>{esc(title)}</h2><ul>{''.join(items)}</ul>" if items else ""


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def page(title: str, subtitle: str, body: Sequence[str]) -> str:
    """The document: the title, a line under it, the sections in order, and the version that wrote it."""
    from ortop import __version__

    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            f"<h1>{esc(title)}</h1><p class=\"sub\">{esc(subtitle)}</p>\n"
            + "\n".join(s for s in body if s)
            + f"\n<footer>written by ortop {esc(__version__)}</footer>\n</body></html>\n")
