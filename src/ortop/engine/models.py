"""Several models in one comparison: their inputs checked against the first model's, before anything is built.

Configurations of different models (an original and its quantized or optimized copy, say) are interleaved like
profiles, and every session is fed the same seeded inputs: the worker makes every session's feeds from the first
model's inputs (``Build.feed_model``), so two models with the same inputs see the same arrays, and their outputs can
be compared (:mod:`ortop.measure.agreement`). That needs inputs that match: the same names, each of the same dtype
and rank, and where both models fix an axis, the same size; where only one fixes it, the size the first model's
inputs are fed with must be that one. Anything else is refused with one line naming the difference (exit 2).

A profile is checked against its model the same way, before a worker starts (:func:`check_profile`): the monitor,
the headless runner and the capacity search refuse what cannot be fed or scheduled.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ortop.config.profile import Profile
from ortop.errors import UsageError


class InputsDiffer(UsageError):
    """Two models of one comparison take different inputs: the same data cannot feed both (exit 2)."""


def model_infos(paths: Sequence[str]) -> dict[str, Any]:
    """Each distinct model path's ``ModelInfo`` (loaded once; a missing or broken model raises ModelError)."""
    from ortop.model import load_model

    out: dict[str, Any] = {}
    for path in paths:
        if path not in out:
            out[path] = load_model(path)
    return out


def input_difference(ref: Any, other: Any) -> str | None:
    """What keeps ``other``'s inputs from taking ``ref``'s feeds, as words; None when they match (free dims may
    differ: an axis free in one model and fixed in the other is checked against what is fed, by
    :func:`fed_difference`)."""
    a, b = os.path.basename(ref.path), os.path.basename(other.path)
    if a == b:
        a, b = ref.path, other.path
    mine = {t.name: t for t in ref.inputs}
    theirs = {t.name: t for t in other.inputs}
    for name in mine:
        if name not in theirs:
            return f"{a} has input '{name}', {b} has not (its inputs: {', '.join(theirs) or 'none'})"
    for name in theirs:
        if name not in mine:
            return f"{b} has input '{name}', {a} has not (its inputs: {', '.join(mine) or 'none'})"
    for name, t in mine.items():
        u = theirs[name]
        if t.dtype != u.dtype:
            return f"input '{name}' is {t.dtype} in {a} but {u.dtype} in {b}"
        if t.shape is None or u.shape is None:
            continue
        if len(t.shape) != len(u.shape):
            return f"input '{name}' has rank {len(t.shape)} in {a} but {len(u.shape)} in {b}"
        for axis, (x, y) in enumerate(zip(t.shape, u.shape)):
            if isinstance(x, int) and isinstance(y, int) and x != y:
                return f"input '{name}' axis {axis} is {x} in {a} but {y} in {b}"
    return None


def fed_difference(ref: Any, other: Any, feeds: dict[str, Any]) -> str | None:
    """Where ``other`` fixes an axis that ``ref`` leaves free, the size ``feeds`` (made from ``ref``) give it must
    be that one; the words to say it, or None."""
    b = os.path.basename(other.path)
    declared = {t.name: t for t in ref.inputs}
    for u in other.inputs:
        arr = feeds.get(u.name)
        if arr is None or u.shape is None or len(u.shape) != arr.ndim:
            continue
        for axis, want in enumerate(u.shape):
            if isinstance(want, int) and arr.shape[axis] != want:
                t = declared.get(u.name)
                free = t.shape[axis] if t is not None and t.shape is not None else None
                fix = f"--dim {free}={want}" if isinstance(free, str) else f"--shape {u.name}=..."
                return (f"input '{u.name}' axis {axis} is fixed at {want} in {b} but would be fed "
                        f"{arr.shape[axis]} (free in {os.path.basename(ref.path)}): set {fix}")
    return None


def check_inputs(profiles: Sequence[Profile], infos: dict[str, Any] | None = None) -> dict[str, Any]:
    """Refuse (:class:`InputsDiffer`) a comparison whose models cannot all take the first model's feeds.

    ``profiles`` each name their model; the first's is the reference. Returns the models' infos by path (none when
    every profile runs the same model).
    """
    from ortop import model as model_mod

    if infos is None:
        if len({p.model for p in profiles}) < 2:
            return {}  # one model: nothing to check against (and nothing loaded again)
        infos = model_infos([p.model for p in profiles])
    ref = infos[profiles[0].model]
    for path, info in infos.items():
        if path != ref.path:
            why = input_difference(ref, info)
            if why:
                raise InputsDiffer(f"the models take different inputs: {why}")
    fed: dict[str, dict[str, Any]] = {}
    for p in profiles:
        if p.model == ref.path:
            continue
        w = p.workload
        key = repr((sorted(w.dims.items()), sorted(w.shapes.items()), sorted(w.inputs.items()), w.batch))
        if key not in fed:
            fed[key], _ = model_mod.make_feeds(ref, dims=w.dims, shapes=w.shapes, values=w.values, inputs=w.inputs,
                                              batch=w.batch, seed=w.seed)
        why = fed_difference(ref, infos[p.model], fed[key])
        if why:
            raise InputsDiffer(f"the models take different inputs: {why}")
    return infos


def model_bytes(path: str) -> int | None:
    """The model file's size in bytes (None when it cannot be read)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def check_profile(model_info: Any, profile: Profile) -> None:
    """Refuse (ProfileError / ModelError) a profile that is invalid or cannot feed the model."""
    import os

    from ortop import model as model_mod
    from ortop.config import profile as profile_mod

    profile_mod.validate(profile, host_cpus=os.cpu_count())
    w = profile.workload
    model_mod.make_feeds(model_info, dims=w.dims, shapes=w.shapes, values=w.values, inputs=w.inputs,
                         batch=w.batch, seed=w.seed)
    check_traffic(model_info, profile)


def check_traffic(model_info: Any, profile: Profile) -> None:
    """Refuse (ProfileError / ModelError, exit 2) arrivals that cannot be scheduled, a bad mix or a bad trace."""
    from ortop.config.errors import ProfileError
    from ortop.measure.arrivals import FIXED, POISSON, TRACE, mode_of
    from ortop.model import mixes
    from ortop.model import trace as trace_mod

    w = profile.workload
    mode = mode_of(w)
    if mode in (FIXED, POISSON) and not w.rate_hz > 0:
        raise ProfileError(f"workload.arrival = {mode!r} needs an offered rate: set workload.rate_hz (--rate)")
    if mode == TRACE:
        if not w.trace:
            raise ProfileError("workload.arrival = 'trace' needs a trace: set workload.trace (--trace FILE.jsonl)")
        trace_mod.load(w.trace, model_info)
    elif w.trace:
        raise ProfileError(f"workload.trace is set but workload.arrival is {mode!r}: set arrival = 'trace' to "
                           "replay it")
    mixes.variants(model_info, w.dim_mix, w.shape_mix)
