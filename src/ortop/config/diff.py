"""What changed between two profiles, computed once: every surface that shows a change reads :func:`diff`.

The history's labels (``session.intra_op_num_threads: 0 → 4``), the compact change lines (``threads 4 · spin off``),
the tuner's candidate labels, ``profiles diff``, a row's verdict metric and the summary's ``changes`` all come from
the same walk over the two profiles' settings, each change carrying its knob, so how a change reads and what it is
judged on are the knob's own (:mod:`ortop.config.knobs`), never a table kept beside it. :func:`glance_terms` is the
same face for one profile: the settings line.

Imports neither onnxruntime nor textual.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ortop.config import knobs
from ortop.config.keys import flatten
from ortop.config.knobs import Knob
from ortop.config.values import human

NOT_SETTINGS = ("model", "description")  # what a profile runs and says of itself, not how it runs


class Settings(Protocol):
    """A profile as the diff reads it (:class:`ortop.config.tree.Profile`, whose ``changes_from`` calls
    :func:`diff`): its settings as a nested dict."""

    def to_dict(self, *, full: bool = False) -> dict[str, Any]: ...


def _plain(v: Any) -> Any:
    """A JSON-ready value: tuples as lists."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _frozen(v: Any) -> Any:
    """A comparable, hashable value: lists as tuples."""
    if isinstance(v, list):
        return tuple(_frozen(x) for x in v)
    return v


@dataclass(frozen=True)
class Change:
    """One setting that differs: its dotted key, the value before and after (None: ORT's default or unset), and
    its knob (None for an entry no knob declares: a [session.config] entry, a free dimension)."""

    key: str
    before: Any
    after: Any
    knob: Knob | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        """The change in full, for the history and ``profiles diff``: ``session.allow_spinning: default → off``."""
        return f"{self.key}: {human(_plain(self.before))} → {human(_plain(self.after))}"

    @property
    def term(self) -> str:
        """The new value in a few words, as the knob spells it (``threads 4``, ``spin off``, ``100 Hz``)."""
        if self.knob is not None:
            return self.knob.term_text(self.after)
        name = self.key.rsplit(".", 1)[-1]
        return f"{name}={human(self.after)}" if self.after is not None else f"{name} unset"

    def metric(self, rate_hz: float, concurrency: int) -> str:
        """The metric this change is judged on under a workload (the knob's; the workload's own without one)."""
        if self.knob is not None:
            return self.knob.metric(rate_hz, concurrency)
        return "throughput" if concurrency > 1 else "p50"

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "before": _plain(self.before), "after": _plain(self.after)}


def diff(a: Settings, b: Settings, *, settings_only: bool = False) -> tuple[Change, ...]:
    """Every setting whose value differs from ``a`` to ``b``, by dotted key in sorted order; maps ([session.config],
    [env], provider options, input dims) entry by entry. ``settings_only`` leaves out the model path and the
    description."""
    before, after = flatten(a.to_dict(full=True)), flatten(b.to_dict(full=True))
    out = []
    for key in sorted(set(before) | set(after)):
        if settings_only and key in NOT_SETTINGS:
            continue
        old, new = _frozen(before.get(key)), _frozen(after.get(key))
        if old != new:
            out.append(Change(key, old, new, knobs.find(key)))
    return tuple(out)


def glance_order(changes: Iterable[Change]) -> list[Change]:
    """The changes as one-line summaries list them: the knobs shown at a glance first, then the rest, each in
    declaration order (undeclared entries last, by key)."""
    rank = {k.key: i for i, k in enumerate(knobs.registry())}

    def key(c: Change) -> tuple[int, int, str]:
        glance = c.knob is not None and bool(c.knob.glance)
        return (0 if glance else 1, rank.get(c.key, len(rank)), c.key)

    return sorted(changes, key=key)


def change_terms(changes: Iterable[Change]) -> list[str]:
    """One short term per change, in glance order (``threads 2``, ``spin off``, ``100 Hz``)."""
    return [c.term for c in glance_order(changes)]


def glance_terms(profile: Settings) -> list[str]:
    """What runs now, one term per knob shown at a glance: ``always`` ones always, ``set`` ones when they differ
    from their default (``threads 4 · spin off · dbb 4 · 100 Hz``)."""
    out = []
    for knob in knobs.registry():
        if not knob.glance:
            continue
        value = knob.read(profile)
        if knob.glance == "always" or value != knob.default:
            out.append(knob.term_text(value))
    return out
