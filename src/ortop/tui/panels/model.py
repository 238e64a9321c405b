"""The model / session panel: the model, its fed inputs, providers requested vs active, build times, settings."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ortop.config.diff import glance_terms
from ortop.model.feeds import note_level
from ortop.present import DASH, ms_text
from ortop.tui.keymap import MAIN_KEYS, key_display
from ortop.tui.panels._format import (
    BUSY_STATES,
    STATE_ICON,
    STATE_STYLE,
    clip_words,
    compact_changes,
    compact_text,
    fit,
    join_lines,
    lead_forms,
    pace_shortfall,
    state_text,
    wrap_words,
)


def settings_line(profile: Any) -> str:
    """What is running now, in one line: every knob shown at a glance, as the knob spells it
    (:func:`ortop.config.diff.glance_terms`)."""
    return " · ".join(glance_terms(profile))


def _provider_short(name: str) -> str:
    return name.replace("ExecutionProvider", "")


def mixed_feeds(feeds: Sequence[str], shapes: Sequence[Any]) -> list[str]:
    """The fed inputs, an input whose shape varies over a mix written as the span of each dim and named a mix
    (``input_ids: int64[1x16..128] mix``), not as the one shape the worker built its feeds with first."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for row in shapes:
        for name, dims in (getattr(row, "shape", None) or {}).items():
            cur = spans.setdefault(name, [(d, d) for d in dims])
            if len(cur) == len(dims):
                spans[name] = [(min(lo, d), max(hi, d)) for (lo, hi), d in zip(cur, dims)]
    out = []
    for feed in feeds:
        name, _, rest = feed.partition(": ")
        span = spans.get(name)
        if span is None or len(shapes) < 2 or "[" not in rest or all(lo == hi for lo, hi in span):
            out.append(feed)
            continue
        dtype = rest[: rest.index("[")]
        dims = "x".join(str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in span)
        out.append(f"{name}: {dtype}[{dims}] mix")
    return out


def shape_line(row: Any, width: int) -> Text:
    """One shape of a mix: its runs, service p50/p99 and response p99 (what a request of that size waits in all),
    in the longest wording that fits; the response is the last figure to go."""
    sv, resp = f"{ms_text(row.service.p50)}/{ms_text(row.service.p99)}", ms_text(row.response.p99)

    def form(*parts: tuple[str, str]) -> Text:
        t = Text(no_wrap=True, end="")
        for text, style in parts:
            t.append(text, style=style)
        return t

    label = (f"{row.label} ", "bold")
    wordings = (
        (("shape ", "dim"), label, (f"{row.runs} runs · service p50 {ms_text(row.service.p50)} p99 "
                                    f"{ms_text(row.service.p99)} ms · response p99 {resp} ms", "")),
        (("shape ", "dim"), label, (f"{row.runs} runs · service p50/p99 {sv} · response p99 {resp} ms", "")),
        (label, (f"{row.runs} runs · service {sv} · response p99 {resp} ms", "")),
        (label, (f"service {sv} · response p99 {resp} ms", "")),
        (label, (f"svc {sv} resp p99 {resp} ms", "")),
        (label, (f"resp p99 {resp} ms", "")),
    )
    return fit((form(*parts) for parts in wordings), width)  # a Text only for the wordings tried


SHAPES_KEY = next(key_display(k) for k in MAIN_KEYS if k.action == "shapes")  # the screen that lists them all


def shapes_summary(rows: Sequence[Any], width: int, more: bool) -> Text:
    """Shapes that get no line of their own, on one line: each one's response p99, the figure a request of that
    size waits in all (``resp p99 by batch: 1 10.0 · 8 21.3 · 32 45.1 ms``); ``more``: after shapes shown whole
    (``+2 more (m), resp p99 …``, naming the key of the screen that lists every shape). Shapes that do not fit are
    counted at the end, never dropped silently."""
    parts = [r.label.split("=", 1) for r in rows]
    one_dim = all(len(p) == 2 for p in parts) and len({p[0] for p in parts}) == 1
    items = [f"{p[1] if one_dim else r.label} {ms_text(r.response.p99)}" for p, r in zip(parts, rows)]
    by = f" by {parts[0][0]}" if one_dim else ""
    lead = f"+{len(rows)} more ({SHAPES_KEY}), " if more else ""
    forms = []
    for k in range(len(items), 0, -1):  # more shapes before longer words
        for head in (f"{lead}response p99{by}: ", f"{lead}resp p99{by}: ", f"{lead}p99{by}: "):
            rest = f" · +{len(items) - k}" + ("" if more else f" ({SHAPES_KEY})") if k < len(items) else ""
            forms.append(Text(head + " · ".join(items[:k]) + " ms" + rest, no_wrap=True, end=""))
    return fit(forms, width)


def head_key(snap: Any, width: int, fatal: str | None = None) -> tuple:
    """What :func:`model_head` draws from: its lines are the same while this is (the live view keeps them)."""
    busy = snap.state in BUSY_STATES
    traffic = getattr(snap, "traffic", None)
    shapes = tuple(str(getattr(r, "shape", None)) for r in traffic.shapes) if traffic is not None else ()
    return (width, snap.state, round(snap.state_elapsed, 1) if busy else None, snap.pending, snap.config_id, fatal,
            snap.model_path, id(snap.model), snap.feeds, shapes, snap.providers_active, snap.providers_requested,
            snap.fallback, snap.create_ms, snap.first_run_ms, snap.restarts, snap.worker_pid, snap.profile)


def model_head(snap: Any, width: int, fatal: str | None = None) -> list[Text]:
    """The panel's lines that change only with a rebuild: state, model, inputs, providers, session and settings."""
    lines = [_state_line(snap, width)]
    if fatal:
        lines.extend(Text(part, style="bold red", end="") for part in wrap_words(fatal, width, 2))
    lines += [_model_line(snap, width), _inputs_line(snap, width), _providers_line(snap, width),
              _session_line(snap, width)]
    line = Text(no_wrap=True, end="")
    line.append("settings ", style="dim")
    line.append(settings_line(snap.profile), style="bold")
    lines.append(fit([line], width))
    return lines


def _state_line(snap: Any, width: int) -> Text:
    """The state (with its elapsed time while a rebuild runs), then what is being built or the configuration's id."""
    st = Text(no_wrap=True, end="")
    if snap.state in BUSY_STATES:  # elapsed time matters while a rebuild runs; otherwise the status line has it
        st.append_text(state_text(snap.state, snap.state_elapsed))
    else:
        st.append(f" {STATE_ICON.get(snap.state, '?')} {snap.state} ", style=STATE_STYLE.get(snap.state, "bold"))
    if snap.pending is not None and snap.state in BUSY_STATES:
        changes = compact_text(compact_changes(snap.profile, snap.pending))
        st.append(" → " + clip_words(changes, max(0, width - len(st.plain) - 3)), style="yellow")
    elif snap.config_id >= 0:
        st.append(f" config #{snap.config_id}", style="dim")
    return st


def _model_line(snap: Any, width: int) -> Text:
    """The model's name, IR version, node count and as many of its commonest ops as fit whole."""
    info = snap.model
    name = os.path.basename(snap.model_path)
    forms = []
    ops = sorted(info.op_histogram.items(), key=lambda kv: -kv[1])[:4] if info is not None else []
    for k in range(len(ops), -1, -1):  # as many of the commonest ops as fit whole, then none, then no IR
        line = Text(no_wrap=True, end="")
        line.append("model ", style="dim")
        line.append(name, style="bold")
        if info is not None:
            more = len(info.op_histogram) - k
            tail = (" " + " ".join(f"{op}×{n}" for op, n in ops[:k]) if k else "") + (f" +{more}" if k and more else "")
            line.append(f"  IR {info.ir_version} · {info.num_nodes} nodes ·{tail}" if k else
                        f"  IR {info.ir_version} · {info.num_nodes} nodes", style="dim")
        forms.append(line)
    if info is not None:
        forms.append(Text.assemble(("model ", "dim"), (name, "bold"), (f" {info.num_nodes} nodes", "dim"),
                                   no_wrap=True, end=""))
    return fit(forms, width)


def _inputs_line(snap: Any, width: int) -> Text:
    """The fed inputs, a shape mix's dims said as a mix."""
    info = snap.model
    feeds = snap.feeds or tuple(f"{t.name} {t.dtype}[{','.join(str(d) for d in (t.shape or ()))}]"
                                for t in (info.inputs if info is not None else ()))
    traffic = getattr(snap, "traffic", None)
    feeds = mixed_feeds(feeds, traffic.shapes if traffic is not None else ())
    line = Text(no_wrap=True, end="")
    line.append("inputs ", style="dim")
    line.append("; ".join(feeds) if feeds else DASH)
    forms = [line]
    if any(f.endswith(" mix") for f in feeds):  # narrow: "mix" leads, so it is not the word cut off
        forms.append(Text.assemble(("mix ", "dim"), "; ".join(f.removesuffix(" mix") for f in feeds),
                                   no_wrap=True, end=""))
    return fit(forms, width)


def _providers_line(snap: Any, width: int) -> Text:
    """The providers active (red, with those missing, on a silent fallback), or those requested before a build."""
    forms = []
    for full in (True, False):
        line = Text(no_wrap=True, end="")
        line.append("providers ", style="dim")
        if snap.providers_active:
            line.append(", ".join(_provider_short(p) for p in snap.providers_active),
                        style="bold red" if snap.fallback else "bold")
            if snap.fallback:
                missing = [p for p in snap.providers_requested if p not in snap.providers_active]
                said = " requested: silent fallback" if full else " asked: fallback"
                line.append(f"  ({', '.join(_provider_short(p) for p in missing)}{said})", style="bold red")
        else:
            line.append(", ".join(_provider_short(p) for p in snap.providers_requested) + " (requested)", style="dim")
        forms.append(line)
    return fit(forms, width)


def _session_line(snap: Any, width: int) -> Text:
    """The session's build and first-run times, its restarts and the worker's pid where they fit."""
    forms = []
    for create, pid in ((f"create {ms_text(snap.create_ms)} ms · first run {ms_text(snap.first_run_ms)} ms", True),
                        (f"create {ms_text(snap.create_ms)} ms · first run {ms_text(snap.first_run_ms)} ms", False),
                        (f"create {ms_text(snap.create_ms)} · first run {ms_text(snap.first_run_ms)} ms", False),
                        (f"{ms_text(snap.create_ms)} ms · 1st run {ms_text(snap.first_run_ms)} ms", False)):
        line = Text(no_wrap=True, end="")
        line.append("session ", style="dim")
        line.append(create)
        if snap.restarts:
            line.append(f" · {snap.restarts} restart{'s' if snap.restarts > 1 else ''}", style="yellow")
        if pid and snap.worker_pid:
            line.append(f" · pid {snap.worker_pid}", style="dim")
        forms.append(line)
    return fit(forms, width)


def model_panel(snap: Any, width: int, height: int, fatal: str | None = None,
                head: Sequence[Text] | None = None) -> Text:
    """Model name and shape, the fed inputs, providers requested vs active, build times, state and settings, then
    what moves: the paced-rate shortfall, each shape of a mix, the notes. ``head``: :func:`model_head`'s lines for
    this snapshot, when the caller kept them."""
    lines = list(model_head(snap, width, fatal) if head is None else head)
    traffic = getattr(snap, "traffic", None)
    short = pace_shortfall(snap.profile, snap.throughput_per_s, snap.runs, traffic)
    if short:
        said = ("the latencies include the wait" if traffic is not None and traffic.open
                else "the model cannot keep this rate, runs go back to back")
        # a figure keeps its label: "1306 shed" whole or not at all (clipped, "1306…" named nothing)
        pace = lead_forms(f"! {short}: {said}")
        lines.append(fit([Text(f, style="bold yellow", end="") for f in pace], width))
    shapes = traffic.shapes if traffic is not None else ()
    room = height - len(lines)  # the shapes come before the notes (a mix's notes are about its first shape)
    shown = shapes if len(shapes) <= room else shapes[: max(0, room - 1)]
    for row in shown:  # a shape mix: what each size costs
        lines.append(shape_line(row, width))
    if len(shown) < len(shapes) and room >= 1:  # the others on one line: each one's response p99
        lines.append(shapes_summary(shapes[len(shown):], width, more=bool(shown)))
    # Warnings (a free dim left at an implausible 1) first and whole, wrapped at words; plain notes after, cut.
    notes = sorted(snap.notes, key=lambda n: note_level(n) != "warning")
    for note in notes:
        left = height - len(lines)
        if left <= 0:
            break
        if note_level(note) == "warning":
            for i, part in enumerate(wrap_words(note, max(1, width - 2), min(3, left))):
                lines.append(Text(("! " if i == 0 else "  ") + part, style="yellow", end=""))
        else:
            lines.append(Text(clip_words("note " + note, width), style="dim", end=""))
    return join_lines(lines, height)
