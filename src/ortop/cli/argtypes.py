"""Argument types and options that several commands share: positive durations and rates, an output bound that may be
'off', a cosine floor, a name to put in a metric's label, and another interpreter's onnxruntime for one configuration
(``--ort-python``).

A bad value is refused while parsing, as one line naming the flag (``argument --budget: must be > 0 seconds, got
-1``, exit 2), so a command never checks a parsed number again."""

from __future__ import annotations

import argparse
import math
from typing import Any


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def _finite(text: str, what: str, zero_ok: bool, rule: str) -> float:
    """``text`` as a finite number above 0 (or at 0 with ``zero_ok``); else an argparse error saying ``rule``."""
    x = _number(text, what)
    if not ((x >= 0 if zero_ok else x > 0) and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
    return x


def seconds(text: str) -> float:
    """A duration in seconds, > 0 and finite (argparse ``type=``)."""
    return _finite(text, "a number of seconds", False, "> 0 seconds")


def seconds_or_zero(text: str) -> float:
    """A duration in seconds, ≥ 0 and finite, where 0 skips what the time is for (argparse ``type=``)."""
    return _finite(text, "a number of seconds", True, "0 or more seconds")


def milliseconds(text: str) -> float:
    """A latency in milliseconds, > 0 and finite (argparse ``type=``)."""
    return _finite(text, "a number of milliseconds", False, "> 0 milliseconds")


def rate(text: str) -> float:
    """A rate in requests/s, > 0 and finite (argparse ``type=``)."""
    return _finite(text, "a rate in requests/s", False, "a rate > 0 requests/s")


def bound(text: str) -> float | None:
    """A bound ≥ 0, or None for 'off' / 'none' (argparse ``type=``)."""
    if text.strip().lower() in ("off", "none"):
        return None
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 or 'off', got {text!r}") from None
    if not (x >= 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"expected a number >= 0 or 'off', got {text!r}")
    return x


def cosine(text: str) -> float | None:
    """A cosine similarity floor between -1 and 1, or None for 'off' / 'none' (argparse ``type=``)."""
    x = bound(text) if text.strip().lower() in ("off", "none") else _float(text)
    if x is not None and not -1 <= x <= 1:
        raise argparse.ArgumentTypeError(f"a cosine floor is between -1 and 1, got {text!r}")
    return x


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'off', got {text!r}") from None


LABEL_MAX_CHARS = 128  # a label value a dashboard's legend and a variable's drop-down can still show whole


def label_value(text: str) -> str:
    """A name for a Prometheus label (``--node-type c6i-2xl``): not empty, no spaces at either end, no control
    characters, at most LABEL_MAX_CHARS. Prometheus takes any UTF-8, but a value with a newline or a trailing space
    reads as another name in every query that spells it (argparse ``type=``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a name, got {text!r}")
    if text != text.strip():
        raise argparse.ArgumentTypeError(f"no spaces at either end, got {text!r}")
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"no control characters (tab, newline, ...), got {text!r}")
    if len(text) > LABEL_MAX_CHARS:
        raise argparse.ArgumentTypeError(f"at most {LABEL_MAX_CHARS} characters, got {len(text)}")
    return text


def add_ort_python_arg(p: argparse.ArgumentParser, help_: str) -> None:
    p.add_argument("--ort-python", metavar="PATH", help=help_)


def with_ort_python(profile: Any, name: str, python: str) -> tuple[Any, str]:
    """``profile`` run by a worker under the interpreter ``python`` (checked first: exit 2 when it cannot), and
    ``name`` with that interpreter's onnxruntime version (``original@ort-1.22.0``)."""
    from ortop.config import profile as profile_mod
    from ortop.engine import PYTHON_VAR, check_python

    version = check_python(python).ort_version
    return profile_mod.merge(profile, env={**profile.env, PYTHON_VAR: python}), f"{name}@ort-{version}"
