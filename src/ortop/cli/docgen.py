"""The reference pages, written from the code: ``python -m ortop.cli.docgen`` writes them, ``--check`` says which
one is stale (exit 1, naming it) and writes nothing.

- ``docs/reference/cli.md``: every command's parser (groups, options, metavars, defaults, help, refused flags,
  examples and exit codes), from :func:`ortop.cli.main.build_parser`;
- ``docs/reference/profile-keys.md``: every profile key, from the knob declarations (:mod:`ortop.config.knobs`);
- ``docs/reference/metrics.md``: every metric the Prometheus endpoint exports (:mod:`ortop.metrics.families`);
- ``docs/reference/exit-codes.md``: the exit-code table (:mod:`ortop.errors`);
- and tables inside hand-written pages, between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` where a page has
  both markers: the exit codes in ``README.md``, the live view's keys in ``docs/live-view.md``
  (:data:`ortop.tui.keymap.MAIN_KEYS`, which also makes its bindings, footer, help and command palette).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ortop.errors import COMMAND_EXIT_CODES, EXIT_CODES, EXIT_INTERRUPTED, exit_codes

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

ROOT = Path(__file__).resolve().parents[3]  # the checkout: src/ortop/cli/docgen.py
REFERENCE = Path("docs/reference")
README = Path("README.md")
LIVE_VIEW = Path("docs/live-view.md")
START, END = "<!-- exit-codes:start -->", "<!-- exit-codes:end -->"
KEYS_START, KEYS_END = "<!-- keys:start -->", "<!-- keys:end -->"
WIDTH = 100  # the usage lines are wrapped as a terminal this wide would show them
GENERATED = "Generated from the code by `python -m ortop.cli.docgen`; edit the code, not this page."


def _cell(text: object) -> str:
    """Text safe inside a table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


@contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps usage to the terminal's width: make it the same on every machine."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# ---- cli.md ------------------------------------------------------------------------------------------------------
def _default(action: argparse.Action) -> str:
    d = action.default
    if d is None or d is False or d == [] or d is argparse.SUPPRESS:
        return ""
    if isinstance(d, float):
        return f"`{d:g}`"
    return f"`{d}`"


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return parser._get_formatter()._format_action_invocation(action)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return parser._get_formatter()._expand_help(action) if action.help else ""


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """The parser's arguments, a table per group, as the parser groups them (refused and hidden ones left out, and
    ``-h``, which every command takes)."""
    out: list[str] = []
    for group in parser._action_groups:
        rows = [a for a in group._group_actions if a.help is not argparse.SUPPRESS
                and not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]
        if not rows:
            continue
        out += ["", f"**{group.title}**", "", "| argument | default | what it does |", "|---|---|---|"]
        for a in rows:
            out.append(f"| `{_invocation(parser, a)}` | {_default(a)} | {_cell(_help(parser, a))} |")
    return out


def _example(line: str) -> str:
    """An example line of a help epilog as a shell line: its words of explanation become a comment."""
    command, _, said = line.strip().partition("  ")
    return f"{command}  # {said.strip()}" if said.strip() else command


def _exit_rows(command: str) -> list[str]:
    return ["| code | meaning |", "|---|---|"] + [f"| {c} | {_cell(m)} |" for c, m in exit_codes(command)]


def cli_page() -> str:
    from ortop.cli.commands import COMMANDS
    from ortop.cli.flags import refused
    from ortop.cli.main import build_parser

    with _columns(WIDTH):
        top = build_parser()
        subs = _subparsers(top)
        assert subs is not None
        lines = ["# Command-line reference", "", GENERATED, "", _cell(top.description), "",
                 "`ortop MODEL` is `ortop run MODEL`; with no model (or `--demo`) ortop runs its built-in demo "
                 "model. Every command also takes `--debug` (show tracebacks) and `-h`/`--help`.", "",
                 "| command | what it does |", "|---|---|"]
        lines += [f"| [`{c.name}`](#ortop-{c.name}) | {_cell(a.help or '')} |"
                  for c, a in zip(COMMANDS, subs._choices_actions)]
        for cmd in COMMANDS:
            p = subs.choices[cmd.name]
            lines += ["", f"## ortop {cmd.name}", "", "```text", p.format_usage().strip(), "```", "",
                      (p.description or "").replace("\n", " ")]
            lines += _options(p)
            inner = _subparsers(p)
            if inner is not None:
                for name, sp in inner.choices.items():
                    lines += ["", f"### ortop {cmd.name} {name}", "", "```text", sp.format_usage().strip(), "```"]
                    what = next((a.help for a in inner._choices_actions if a.dest == name), "")
                    lines += ["", what or ""]
                    lines += _options(sp)
            by_why: dict[str, list[str]] = {}
            for flag, why in refused(p).items():
                by_why.setdefault(why, []).append(f"`{flag}`")
            if by_why:
                lines += ["", "**not taken here** (refused with one `ortop: error:` line)", ""]
                lines += [f"- {', '.join(flags)}: {why}" for why, flags in by_why.items()]
            module = sys.modules[cmd.module]
            examples = getattr(module, cmd.examples, "").strip().splitlines()[1:]  # the "examples:" line left out
            if examples:
                lines += ["", "**examples**", "", "```sh", *(_example(x) for x in examples), "```"]
            lines += ["", "**exit codes**", "", *_exit_rows(cmd.name)]
    return "\n".join(lines) + "\n"


# ---- profile-keys.md ---------------------------------------------------------------------------------------------
def profile_keys_page() -> str:
    from ortop.config import knobs
    from ortop.config.docs import markdown_table

    reg = knobs.registry()
    lines = ["# Profile keys", "", GENERATED, "",
             "A profile is a TOML (or JSON) file; every key is optional. Dotted keys are `table.key`: "
             "`session.intra_op_num_threads` is `intra_op_num_threads` under `[session]`. Maps (`[env]`, "
             "`[session.config]`, `[provider.options]`, `[workload.dims]` …) hold entries of their own.", "",
             markdown_table(reg).rstrip(), "", "## Keys with a command-line flag", "",
             "A flag overrides the profile's value; which commands take each is in [cli.md](cli.md).", "",
             "| key | flag |", "|---|---|"]
    from ortop.cli.flags import add_flag

    for knob in reg:
        flag = knob.cli_flag
        if flag is not None:
            scratch = argparse.ArgumentParser(add_help=False)  # the flag as the commands declare it
            add_flag(scratch, knob, flag)
            lines.append(f"| `{knob.key}` | `{_invocation(scratch, scratch._actions[-1])}` |")
    return "\n".join(lines) + "\n"


# ---- metrics.md --------------------------------------------------------------------------------------------------
def _exported_as(f: Metric) -> str:
    """A family's name as a scrape shows it (a counter's ``_total``, an info's ``_info``)."""
    return {"counter": f"{f.name}_total", "info": f"{f.name}_info"}.get(f.type, f.name)


def metrics_page() -> str:
    from ortop.metrics.families import families

    lines = ["# Metrics", "", GENERATED, "",
             "What `--metrics-port PORT` serves at `/metrics`, in the live view and headless alike. A figure that "
             "does not exist yet (no run, no worker, no GPU, a closed loop's queue) is left out of a scrape rather "
             "than reported as zero. A histogram is exported as `NAME_bucket`, `NAME_sum` and `NAME_count`.", "",
             "| name | type | unit | labels | what it is |", "|---|---|---|---|---|"]
    for f in families():
        labels = sorted({k for s in f.samples for k in s.labels} - {"le"})
        lines.append(f"| `{_exported_as(f)}` | {f.type} | {f.unit or ''} | "
                     f"{', '.join(f'`{x}`' for x in labels)} | {_cell(f.documentation)} |")
    return "\n".join(lines) + "\n"


# ---- exit codes --------------------------------------------------------------------------------------------------
def exit_codes_table() -> str:
    """Every exit code, what it means, and which commands return it."""
    rows = ["| code | meaning | returned by |", "|---|---|---|"]
    every = list(COMMAND_EXIT_CODES)
    for code, meaning in sorted(EXIT_CODES.items()):
        who = [c for c in every if code in COMMAND_EXIT_CODES[c]]
        text = "every command" if code == EXIT_INTERRUPTED or who == every else ", ".join(f"`{c}`" for c in who)
        rows.append(f"| {code} | {_cell(meaning)} | {text} |")
    return "\n".join(rows) + "\n"


def exit_codes_page() -> str:
    lines = ["# Exit codes", "", GENERATED, "",
             "Bad input never shows a traceback: one `ortop: error: …` line on stderr and the code below "
             "(`--debug` shows the traceback).", "", exit_codes_table().rstrip(), "", "## By command"]
    for command in COMMAND_EXIT_CODES:
        lines += ["", f"### ortop {command}", "", *_exit_rows(command)]
    return "\n".join(lines) + "\n"


def keys_table() -> str:
    """Every key of the live view's main screen, as its help screen says it."""
    from ortop.tui.keymap import MAIN_KEYS, key_display

    # where the help screen's own words read oddly on a page: its first line, and the pair of thread keys in one row
    own = {"help": ("`?` `F1`", "help: every key, and how each panel's figures read"),
           "threads_up": ("`+` / `-`", "intra-op threads up / down by one (from ORT's default: from the count ORT "
                                       "runs, counted in the worker)"),
           "quit": ("`q` `F10` `ctrl+c`", "quit (the settings are kept for `ortop --resume`)")}
    rows = ["| key | does |", "|---|---|"]
    for k in MAIN_KEYS:
        if k.action == "threads_down":
            continue
        shown = " ".join(f"`{part}`" for part in key_display(k).replace("^", "ctrl+").split(" "))
        shown, does = own.get(k.action, (shown, k.help))
        rows.append(f"| {shown} | {_cell(does)} |")
    rows.append("| `ctrl+p` | the command palette: every action by name |")
    return "\n".join(rows) + "\n"


def region(text: str, start_mark: str, end_mark: str, make: Callable[[], str]) -> str | None:
    """``text`` with what lies between two markers made anew by ``make``; None without both markers."""
    start, end = text.find(start_mark), text.find(end_mark)
    if start < 0 or end < start:
        return None
    return text[:start + len(start_mark)] + "\n" + make() + text[end:]


REGIONS: dict[Path, tuple[str, str, Callable[[], str]]] = {
    README: (START, END, exit_codes_table),
    LIVE_VIEW: (KEYS_START, KEYS_END, keys_table),
}


# ---- drift in hand-written pages -----------------------------------------------------------------------------
PLACEHOLDERS = ("…", "...", "<", ">")
_COMMAND = re.compile(r"(?:^|[\s(;&|$])(?:[\w./~-]*/)?ortop[ \t]+(\S)")
_METRIC = re.compile(r"\bortop_[a-z_]+")


def code_spans(text: str) -> list[str]:
    """The code of a Markdown page: each line of its fenced blocks (a line ending in a backslash joined to the next)
    and each inline code span (a paragraph's lines joined, so a span may wrap)."""
    out: list[str] = []
    fenced, held, prose = False, "", []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("```"):
            fenced, held = not fenced, ""
            continue
        if fenced:
            if line.rstrip().endswith("\\"):
                held += line.rstrip()[:-1] + " "
                continue
            out.append(held + line)
            held = ""
        elif line.strip():
            prose.append(line)
        else:
            out += re.findall(r"`([^`]+)`", " ".join(prose))
            prose = []
    return out


def command_lines(text: str) -> list[str]:
    """Every ``ortop …`` command line in a page's code (``.venv/bin/ortop`` and ``$ ortop`` too, several on one line
    each on its own), cut at a shell comment, ``|``, ``&&`` or ``;``; lines with a placeholder (``…``, ``<FILE>``)
    are left out."""
    out = []
    for span in code_spans(text):
        span = re.sub(r"(^|\s)#.*$", "", span)
        starts = [m.start(1) for m in _COMMAND.finditer(span)]
        for a, b in zip(starts, starts[1:] + [len(span)]):
            rest = re.split(r"\s(?:\||&&|;|·|2?>)\s", " " + span[a:b] + " ")[0].strip()
            if rest and not any(p in rest for p in PLACEHOLDERS):
                out.append("ortop " + " ".join(rest.split()))
    return out


def _words(line: str) -> list[str]:
    import shlex

    try:
        return shlex.split(line)
    except ValueError:  # prose with an apostrophe
        return line.split()


def unknown_flags(line: str, parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The flags of ``line`` (an ``ortop …`` command) that its command's parser does not take: absent, or refused."""
    from ortop.cli.flags import refused
    from ortop.cli.main import build_parser

    top = parser or build_parser()
    words = [w.strip("[]") for w in _words(line)[1:]]
    subs = _subparsers(top)
    p = top
    if subs is not None and not (words and words[0] in ("-h", "--help", "--version")):
        from ortop.cli.commands import DEFAULT

        p = subs.choices[words.pop(0)] if words and words[0] in subs.choices else subs.choices[DEFAULT]
        inner = _subparsers(p)
        if inner is not None and words and words[0] in inner.choices:
            p = inner.choices[words.pop(0)]
    no = refused(p)
    bad = []
    for w in words:
        if not w.startswith("-") or w == "-" or re.fullmatch(r"-[\d.]+", w):
            continue
        flag = w.split("=", 1)[0].rstrip(":,.;)")
        if flag not in p._option_string_actions or flag in no:
            bad.append(flag)
    return bad


def flag_drift(text: str, parser: argparse.ArgumentParser | None = None) -> list[str]:
    """One line per command line of ``text`` that names a flag its command does not take."""
    from ortop.cli.main import build_parser

    parser = parser or build_parser()
    out = []
    for line in command_lines(text):
        bad = unknown_flags(line, parser)
        if bad:
            out.append(f"{line!r}: {', '.join(bad)} not taken by that command")
    return out


def metric_drift(text: str, names: set[str] | None = None) -> list[str]:
    """The ``ortop_…`` metric names ``text`` mentions that the endpoint does not export."""
    from ortop.metrics.families import exported_names, is_exported

    names = exported_names() if names is None else names
    return sorted({m for m in _METRIC.findall(text) if not is_exported(m, names)})


PAGES: dict[str, Callable[[], str]] = {
    "cli.md": cli_page,
    "profile-keys.md": profile_keys_page,
    "metrics.md": metrics_page,
    "exit-codes.md": exit_codes_page,
}


def expected(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file (relative to ``root``) and the text it should hold now."""
    out = {REFERENCE / name: make() for name, make in PAGES.items()}
    for rel, (start_mark, end_mark, make) in REGIONS.items():
        page = root / rel
        if page.exists():
            filled = region(page.read_text(encoding="utf-8"), start_mark, end_mark, make)
            if filled is not None:
                out[rel] = filled
    return out


def stale(root: Path = ROOT) -> list[Path]:
    """The generated files that differ from what the code makes now (or are missing)."""
    found = []
    for rel, text in expected(root).items():
        path = root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            found.append(rel)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in ([], ["--check"]):
        print("usage: python -m ortop.cli.docgen [--check]", file=sys.stderr)
        return 2
    if args == ["--check"]:
        old = stale()
        for rel in old:
            print(f"ortop docgen: {rel} is stale: run python -m ortop.cli.docgen", file=sys.stderr)
        return 1 if old else 0
    from ortop.fsutil import write_text

    for rel, text in expected().items():
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            write_text(str(path), text, what="reference page")
            print(f"wrote {rel}")
    return 0


if __name__ == "__main__":  # pragma: no cover - run as python -m ortop.cli.docgen
    sys.exit(main())
