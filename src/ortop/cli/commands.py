"""The list of ortop's commands: each names the module that prepares its parser and runs it.

A command module has ``prepare_parser(parser)`` (add its arguments to the sub-parser it is given), ``run(args) ->
int`` (the exit code) and ``EXAMPLES`` (command lines for its ``--help``); each name can be overridden per command.
The help's description is the module docstring's first paragraph unless ``description`` names the module's
attribute that holds one (a module serving two commands). Nothing here
imports a command module: ``ortop --help`` and the parser are built from this list, the modules are imported when
the parser is.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "run"  # `ortop MODEL` means `ortop run MODEL`


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    module: str
    prepare: str = "prepare_parser"
    run: str = "run"
    examples: str = "EXAMPLES"
    description: str = ""  # the module attribute holding the help's description; "": its docstring's first paragraph


COMMANDS: tuple[Command, ...] = (
    Command("run", "the live view of a model (the default: `ortop MODEL`), or --headless", "ortop.cli.run"),
    Command("info", "a model's inputs, free dims, opsets and ops, read from the file", "ortop.cli.info"),
    Command("compare", "profiles compared in interleaved blocks, each against the first, with intervals",
            "ortop.cli.compare"),
    Command("variants", "the model's optimized, int8 and fp16 variants, made by onnxruntime and compared with it",
            "ortop.cli.variants"),
    Command("tune", "race session settings and keep the best for an objective, verified", "ortop.cli.tune"),
    Command("capacity", "the most traffic each profile serves within a latency SLO, with the curve",
            "ortop.cli.capacity"),
    Command("doctor", "what is wrong, with evidence and a fix", "ortop.cli.doctor"),
    Command("ops", "where the time goes, operator by operator (ORT's profiler)", "ortop.cli.ops"),
    Command("fleet", "tune, capacity, compare or doctor on every node of a Ray cluster, per node and per node type",
            "ortop.cli.fleet"),
    Command("profiles", "list, show, diff and validate profiles", "ortop.cli.profiles", prepare="prepare_profiles",
            run="run_profiles", examples="PROFILES_EXAMPLES", description="PROFILES_DESCRIPTION"),
    Command("export", "a profile as Python, C++, C#, perf_test, Olive JSON or env", "ortop.cli.profiles",
            prepare="prepare_export", run="run_export", examples="EXPORT_EXAMPLES", description="EXPORT_DESCRIPTION"),
)

NAMES = frozenset(c.name for c in COMMANDS)
