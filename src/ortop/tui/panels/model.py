"""The model / session panel: the model, its fed inputs, providers requested vs active, build times, settings."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text

from ortop.config.diff import glance_terms
from ortop.model.feeds import note_level
from ortop.tui.panels._format import (
    BUSY_STATES,
    DASH,
    STATE_ICON,
    STATE_STYLE,
    clip,
    clip_words,
    compact_changes,
    compact_text,
    fmt_ms,
    join_lines,
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


def model_panel(snap: Any, width: int, height: int, fatal: str | None = None) -> Text:
    """Model name and shape, the fed inputs, providers requested vs active, build times, state and settings."""
    lines: list[Text] = []
    st = Text(no_wrap=True, end="")
    busy = snap.state in BUSY_STATES
    if busy:  # elapsed time matters while a rebuild runs; otherwise the status line has it
        st.append_text(state_text(snap.state, snap.state_elapsed))
    else:
        st.append(f" {STATE_ICON.get(snap.state, '?')} {snap.state} ", style=STATE_STYLE.get(snap.state, "bold"))
    if snap.pending is not None and snap.state in BUSY_STATES:
        changes = compact_text(compact_changes(snap.profile, snap.pending))
        st.append(" → " + clip_words(changes, max(0, width - len(st.plain) - 3)), style="yellow")
    elif snap.config_id >= 0:
        st.append(f" config #{snap.config_id}", style="dim")
    lines.append(st)
    if fatal:
        lines.append(Text(clip(fatal, width * 2), style="bold red", end=""))

    info = snap.model
    line = Text(no_wrap=True, end="")
    line.append("model ", style="dim")
    line.append(os.path.basename(snap.model_path), style="bold")
    if info is not None:
        ops = sorted(info.op_histogram.items(), key=lambda kv: -kv[1])[:4]
        line.append(f"  IR {info.ir_version} · {info.num_nodes} nodes · " +
                    " ".join(f"{k}×{v}" for k, v in ops), style="dim")
    lines.append(line)

    feeds = snap.feeds or tuple(f"{t.name} {t.dtype}[{','.join(str(d) for d in (t.shape or ()))}]"
                                for t in (info.inputs if info is not None else ()))
    line = Text(no_wrap=True, end="")
    line.append("inputs ", style="dim")
    line.append("; ".join(feeds) if feeds else DASH)
    lines.append(line)

    line = Text(no_wrap=True, end="")
    line.append("providers ", style="dim")
    if snap.providers_active:
        line.append(", ".join(_provider_short(p) for p in snap.providers_active),
                    style="bold red" if snap.fallback else "bold")
        if snap.fallback:
            missing = [p for p in snap.providers_requested if p not in snap.providers_active]
            line.append(f"  ({', '.join(_provider_short(p) for p in missing)} requested: silent fallback)",
                        style="bold red")
    else:
        line.append(", ".join(_provider_short(p) for p in snap.providers_requested) + " (requested)", style="dim")
    lines.append(line)

    line = Text(no_wrap=True, end="")
    line.append("session ", style="dim")
    line.append(f"create {fmt_ms(snap.create_ms)} ms · first run {fmt_ms(snap.first_run_ms)} ms")
    if snap.restarts:
        line.append(f" · {snap.restarts} restart{'s' if snap.restarts > 1 else ''}", style="yellow")
    if snap.worker_pid:
        line.append(f" · pid {snap.worker_pid}", style="dim")
    lines.append(line)

    line = Text(no_wrap=True, end="")
    line.append("settings ", style="dim")
    line.append(settings_line(snap.profile), style="bold")
    lines.append(line)
    traffic = getattr(snap, "traffic", None)
    short = pace_shortfall(snap.profile, snap.throughput_per_s, snap.runs, traffic)
    if short:
        said = ("the latencies include the wait" if traffic is not None and traffic.open
                else "the model cannot keep this rate, runs go back to back")
        lines.append(Text(clip_words(f"! {short}: {said}", width), style="bold yellow", end=""))
    for row in (traffic.shapes if traffic is not None else ()):  # a shape mix: what each size costs
        line = Text(no_wrap=True, end="")
        line.append("shape ", style="dim")
        line.append(f"{row.label} ", style="bold")
        line.append(f"{row.runs} runs · service p50 {fmt_ms(row.service.p50)} p99 {fmt_ms(row.service.p99)} ms"
                    f" · response p99 {fmt_ms(row.response.p99)} ms")
        lines.append(line)
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
