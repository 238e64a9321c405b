"""``ortop``: one parser built from the list of commands (:mod:`ortop.cli.commands`), one way errors end.

Bad input never shows a traceback: one ``ortop: error: ...`` line on stderr and the exit code the error carries
(:mod:`ortop.errors`: 2 for bad input, 1 when the model or the run fails). ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

from ortop import __version__
from ortop.cli.commands import COMMANDS, DEFAULT, NAMES
from ortop.errors import EXIT_CODES, EXIT_RUNTIME, OrtopError, UsageError, exit_codes

# Kept importable from here for the callers that knew them at this address.
EXIT_BAD_INPUT = 2
__all__ = ["EXIT_BAD_INPUT", "EXIT_RUNTIME", "UsageError", "build_parser", "main"]


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line (raised, so main() prints it like every other error)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def plain(text: str) -> str:
    """Text as a terminal shows it: the docstrings' markup (````x````, ``:mod:`x```, ```x```) left out."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"`+([^`]+?)`+", r"\1", text)


def _filled(text: str, width: int = 100) -> str:
    """Each paragraph of ``text`` filled to ``width`` columns (descriptions keep their paragraphs, not their lines)."""
    import textwrap

    return "\n\n".join(textwrap.fill(" ".join(par.split()), width) for par in text.split("\n\n"))


def exit_codes_text(command: str | None = None) -> str:
    """The ``exit codes:`` block of a ``--help`` (one command's, or what every code means)."""
    rows = exit_codes(command) if command else sorted(EXIT_CODES.items())
    return "exit codes:\n" + "".join(f"  {code:<4} {meaning}\n" for code, meaning in rows)


def _plain_helps(p: argparse.ArgumentParser) -> None:
    """Every help text and description of ``p`` and its sub-parsers as plain text."""
    for a in p._actions:
        if a.help and a.help is not argparse.SUPPRESS:
            a.help = plain(a.help)
        if isinstance(a, argparse._SubParsersAction):
            for choice in a._choices_actions:
                choice.help = plain(choice.help or "")
            for sub in a.choices.values():
                sub.description = plain(sub.description or "") or None
                _plain_helps(sub)


def build_parser() -> Parser:
    p = Parser(
        prog="ortop",
        description=_filled("A top for ONNX Runtime: run a model in a measured loop, tune its session live, and "
                            "get answers that hold on a noisy host."),
        epilog=_filled("ortop MODEL is ortop run MODEL; with no model (or --demo) ortop runs its built-in demo "
                       "model. ortop COMMAND --help for each command.") + "\n\n" + exit_codes_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"ortop {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for cmd in COMMANDS:
        module = importlib.import_module(cmd.module)
        doc = (getattr(module, cmd.description) if cmd.description
               else (module.__doc__ or cmd.help).strip().split("\n\n")[0])
        sp = sub.add_parser(cmd.name, help=cmd.help, description=_filled(plain(doc)),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        getattr(module, cmd.prepare)(sp)
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
        sp.set_defaults(_run=getattr(module, cmd.run))
        examples = getattr(module, cmd.examples, "")
        sp.epilog = "\n".join(x for x in (examples, _refused_text(sp), exit_codes_text(cmd.name)) if x)
    _plain_helps(p)
    return p


def _refused_text(p: argparse.ArgumentParser) -> str:
    """The ``not taken here:`` block: the shared flags this command refuses, grouped by reason."""
    from ortop.cli.flags import refused

    by_why: dict[str, list[str]] = {}
    for flag, why in refused(p).items():
        by_why.setdefault(why, []).append(flag)
    return "".join(f"not taken here (refused with one line): {', '.join(flags)}\n  {why}\n"
                   for why, flags in by_why.items())


def _with_command(argv: list[str]) -> list[str]:
    """``ortop MODEL …`` → ``ortop run MODEL …``; a command name or a top-level flag is left alone."""
    if argv and (argv[0] in NAMES or argv[0] in ("-h", "--help", "--version")):
        return argv
    return [DEFAULT, *argv]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        started = time.monotonic()  # commands with a wall-time budget count from here
        args = build_parser().parse_args(_with_command(argv))
        args.started = started
        return int(args._run(args))
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `ortop ... | head`: the reader left; stay quiet like other Unix tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if debug:
            raise
        if isinstance(exc, OrtopError):
            print(f"ortop: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return exc.exit_code
        print(f"ortop: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_RUNTIME


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
