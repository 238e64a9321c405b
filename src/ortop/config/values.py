"""How knob values become ONNX Runtime's strings and back: one spelling for every place that writes them.

Session config entries and provider options are string maps in ORT, so bools, numbers and thread affinities all
need one agreed text form; keeping it here means the live session, the exporters and ``profiles show`` cannot
write the same value two ways.
"""

from __future__ import annotations

from typing import Any

from ortop.config.errors import ProfileError


def ort_str(value: Any) -> str:
    """The string ORT's config and provider-option maps take: bools as "1"/"0", whole floats without ".0"."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def truthy(value: Any) -> bool:
    """Whether a provider option means 'on': options arrive as bools, numbers or ORT's "1"/"true" strings."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def human(value: Any) -> str:
    """A value as a change line shows it: None is ORT's default, bools read on/off."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """``(0, 1, 2, 3, 6)`` → ``"0-3,6"`` (the kernel's cpulist form)."""
    s = sorted(set(cpus))
    out: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


# ---- how a value reads in one-line summaries (a knob's ``display``) ----
def zero_is_default(value: Any) -> str:
    """A thread count where 0 leaves ORT's default: ``default``, else the number."""
    return "default" if value == 0 and not isinstance(value, bool) else human(value)


def unset_text(value: Any) -> str:
    """An optional setting that is off unless set: ``unset`` for None."""
    return "unset" if value is None else human(value)




def callers_text(value: Any) -> str:
    """Concurrent callers: ``×2 callers``."""
    return f"×{value} callers"


def pinned_text(value: Any) -> str:
    """A thread affinity by the cores it pins the pool to: ``pinned 0-3``, or ``unpinned`` (the full lists, one
    per pool thread, are in the change's text)."""
    if not value:
        return "unpinned"
    return "pinned " + format_cpulist([c for thread in value for c in thread])


def env_text(value: Any) -> str:
    """Environment variables: ``A=1 B=2``, sorted."""
    return " ".join(f"{k}={v}" for k, v in sorted(dict(value).items()))


def affinity_string(cores: tuple[tuple[int, ...], ...]) -> str:
    """ORT's ``session.intra_op_thread_affinities`` text for 0-based cores: 1-based ids, ',' within a thread, ';'
    between.

    ORT counts logical processors from 1 (it subtracts one), while htop and psutil count from 0.
    """
    return ";".join(",".join(str(c + 1) for c in thread) for thread in cores)


def parse_affinity_string(text: str) -> tuple[tuple[int, ...], ...]:
    """The inverse of :func:`affinity_string`; accepts ORT's ranges (``1-3``) too. Returns 0-based cores."""
    threads = []
    for part in text.split(";"):
        cores: list[int] = []
        for item in part.split(","):
            item = item.strip()
            if not item:
                continue
            if "-" in item:
                lo, hi = item.split("-", 1)
                cores.extend(range(int(lo) - 1, int(hi)))
            else:
                cores.append(int(item) - 1)
        threads.append(tuple(cores))
    return tuple(threads)


# A core number above this is a typo, not a host: Linux builds for at most 8192 logical CPUs.
MAX_CORE_ID = 8191


def max_core_list(host_cpus: int | None = None) -> int:
    """The longest core list accepted: four entries per logical CPU of this host (repeats allowed, ranges counted
    before they are expanded, so ``0-99999999`` is refused at once instead of being built)."""
    import os

    return 4 * max(1, host_cpus if host_cpus is not None else (os.cpu_count() or 1))


def parse_core_list(text: str, host_cpus: int | None = None) -> tuple[int, ...]:
    """``"0-3,6"`` → ``(0, 1, 2, 3, 6)``: 0-based cores as a user types them.

    Bounded before anything is expanded: a core above :data:`MAX_CORE_ID`, or a list longer than
    :func:`max_core_list`, is a ProfileError (a form field typed into must never freeze on its size).
    """
    limit = max_core_list(host_cpus)
    spans: list[tuple[int, int]] = []
    total = 0
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            if "-" in item:
                lo, hi = (int(x) for x in item.split("-", 1))
                if hi < lo or lo < 0:
                    raise ValueError
            else:
                lo = hi = int(item)
                if lo < 0:
                    raise ValueError
        except ValueError:
            raise ProfileError(f"bad core list {text!r}: use 0-based numbers and ranges like 0-3,6") from None
        if hi > MAX_CORE_ID:
            raise ProfileError(f"core {hi} in {text!r} is beyond any host (cores are numbered 0 to at most "
                               f"{MAX_CORE_ID})")
        total += hi - lo + 1
        if total > limit:
            raise ProfileError(f"core list {text!r} is too long: more than {limit} cores (4 per logical CPU of "
                               "this host)")
        spans.append((lo, hi))
    return tuple(c for lo, hi in spans for c in range(lo, hi + 1))
