"""One error hierarchy for everything a user can get wrong or a model can fail at, each carrying its exit code, and
the one table of exit codes every command's ``--help`` and the reference page are written from.

The CLI prints ``ortop: error: <message>`` and exits with :attr:`OrtopError.exit_code`; nothing else decides exit
codes. Every room raises these (or subclasses), so a bad profile, a bad model and a bad flag read alike.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUNTIME = 1     # the model or the run failed (a build error, Run() raising, the worker dying for good)
EXIT_USAGE = 2       # bad input: a flag, a profile, a model file, a path
EXIT_FINDINGS = 3    # ortop doctor found something above info (a result, not a failure)
EXIT_WORKER_LOST = 4  # a worker died and could not be restarted: what was measured is printed, as on ctrl-C
EXIT_GATE_FAILED = 5     # a check said no: compare --fail-if (a gate failed), capacity --certify (violated)
EXIT_GATE_UNDECIDED = 6  # a check could not tell within its budget (--fail-if, --certify): never a pass
EXIT_VIOLATED = EXIT_GATE_FAILED         # capacity --certify's name for 5 (ortop.measure.gate.EXIT_FAIL)
EXIT_UNDECIDED = EXIT_GATE_UNDECIDED     # capacity --certify's name for 6 (ortop.measure.gate.EXIT_UNDECIDED)
EXIT_INTERRUPTED = 130  # ctrl-C (SIGINT), as a shell reports a process ended by it

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success: the command gave its result, whatever the verdict",
    EXIT_RUNTIME: "run-time failure: the model failed to build or run, a worker died for good, or a file could not "
                  "be written",
    EXIT_USAGE: "bad input: a flag, a profile, a model file or a path (one 'ortop: error:' line on stderr)",
    EXIT_FINDINGS: "ortop doctor only: findings above info (warnings or errors) were reported",
    EXIT_WORKER_LOST: "compare, variants, capacity, tune: a worker was lost for good; everything measured before "
                      "was printed (JSON included), with the fault named",
    EXIT_GATE_FAILED: "a check said no: compare --fail-if (a gate failed: a regression beyond its threshold) or "
                      "capacity --certify (the rate was shown to break the SLO)",
    EXIT_GATE_UNDECIDED: "a check could not tell before its budget ended (compare --fail-if, capacity --certify), or "
                         "tune gave no answer in its budget: never a pass",
    EXIT_INTERRUPTED: "stopped by ctrl-C",
}
"""What each exit code means for every command; :data:`COMMAND_EXIT_CODES` says it more precisely per command."""

LOST = "a worker died again after its restart: everything measured before was printed, with the fault named"

COMMAND_EXIT_CODES: dict[str, dict[int, str]] = {
    "run": {EXIT_OK: "the live view was quit, or the headless run measured and printed its summary (an SLO "
                     "missed or a rate not kept included)",
            EXIT_RUNTIME: "the model failed to build or run, no run finished in --duration, or a requested "
                          "provider was not active with --strict-providers",
            EXIT_USAGE: "bad input"},
    "info": {EXIT_OK: "the model was read and described", EXIT_USAGE: "bad input: a missing or broken model"},
    "compare": {EXIT_OK: "a comparison, whatever the verdict; with --fail-if, every gate passed",
                EXIT_RUNTIME: "a session failed to build or run",
                EXIT_USAGE: "bad input (a --fail-if spec that does not parse, or more than two configurations with "
                            "it)",
                EXIT_WORKER_LOST: LOST + " (with --fail-if the gates are undecided)",
                EXIT_GATE_FAILED: "with --fail-if: a gate failed, its interval wholly beyond its threshold",
                EXIT_GATE_UNDECIDED: "with --fail-if: no gate failed but one was undecided when the budget ended, "
                                     "or a rate was not kept: never a pass"},
    "variants": {EXIT_OK: "a comparison, whatever the verdict",
                 EXIT_RUNTIME: "no variant could be made or run", EXIT_USAGE: "bad input",
                 EXIT_WORKER_LOST: LOST},
    "tune": {EXIT_OK: "a result (keeping the baseline included)", EXIT_RUNTIME: "the model failed at run time",
             EXIT_USAGE: "bad input",
             EXIT_GATE_UNDECIDED: "not measured: no candidate could be raced (or the best verified) in the budget, or "
                                  "with --objective capacity the baseline's knee was not found; the result was "
                                  "printed (JSON included) with the baseline's figures and the budget an answer "
                                  "needs, and nothing was saved (a baseline shown to meet the SLO at no rate is a "
                                  "result: exit 0)",
             EXIT_WORKER_LOST: "a worker died while only proven sessions raced: the result so far was printed, "
                               "with the fault named (a death while new candidates race fails those candidates)",
             EXIT_INTERRUPTED: "stopped by ctrl-C: the result so far was printed (and saved with --save); a second "
                               "ctrl-C aborts without one"},
    "capacity": {EXIT_OK: "a result, the SLO met or not; with --certify: the rate was certified", EXIT_RUNTIME: "a "
                 "session failed to build or run, or a requested provider was not active with --strict-providers",
                 EXIT_USAGE: "bad input",
                 EXIT_WORKER_LOST: LOST,
                 EXIT_VIOLATED: "--certify: violated, the share of requests over the SLO's bound was shown above "
                                "what its percentile allows",
                 EXIT_UNDECIDED: "--certify: undecided, the budget ran out before the rule could decide (or the "
                                 "minimum duration was not reached); the requests still needed were printed",
                 EXIT_INTERRUPTED: "stopped by ctrl-C: what was known was printed (a certification as undecided)"},
    "doctor": {EXIT_OK: "nothing above info", EXIT_RUNTIME: "the profiling process died or the model could not run",
               EXIT_USAGE: "bad input",
               EXIT_FINDINGS: "findings above info (warnings or errors); formerly exit 1, which now means only a "
                              "failure"},
    "ops": {EXIT_OK: "the tables were printed", EXIT_RUNTIME: "the model failed to build or run",
            EXIT_USAGE: "bad input"},
    "profiles": {EXIT_OK: "done (validate: every file is valid)", EXIT_RUNTIME: "validate: a file failed",
                 EXIT_USAGE: "bad input: an unknown profile or a file that cannot be read"},
    "export": {EXIT_OK: "the profile was written", EXIT_RUNTIME: "the output file could not be written",
               EXIT_USAGE: "bad input: an unknown profile or format"},
    "fleet": {EXIT_OK: "every node measured gave its answer (whatever the verdicts), or was refused on its own (a "
                       "provider it cannot give)",
              EXIT_RUNTIME: "no node gave an answer, or a node's command failed (its own exit 1)",
              EXIT_USAGE: "bad input, found before anything started on the cluster: a flag, a model missing here, "
                          "an unreachable --cluster, no node that can measure, a --price for a type no node has",
              EXIT_WORKER_LOST: "a node was lost mid-run (its raylet or host went away): the others' answers were "
                                "printed, with the lost node named",
              EXIT_VIOLATED: "a node's check said no (capacity --certify violated), as that command exits",
              EXIT_UNDECIDED: "a node's check could not tell (capacity --certify undecided, tune not measured), as "
                              "that command exits",
              EXIT_INTERRUPTED: "stopped by ctrl-C: every node was stopped and what they gathered was printed"},
}
"""Per command, the codes it returns and what each means there; every command may also end with
:data:`EXIT_INTERRUPTED` when ctrl-C stops it before a result."""


def exit_codes(command: str) -> list[tuple[int, str]]:
    """The codes ``command`` returns, in order, each with its meaning there (ctrl-C's 130 last)."""
    codes = dict(COMMAND_EXIT_CODES[command])
    codes.setdefault(EXIT_INTERRUPTED, "stopped by ctrl-C before a result")
    return sorted(codes.items())


class OrtopError(Exception):
    """Base of every error ortop reports to a user as one line."""

    exit_code: int = EXIT_USAGE


class UsageError(OrtopError, ValueError):
    """Bad input from the user (a flag, a path, a value): exit 2."""

    exit_code = EXIT_USAGE


class RuntimeFailure(OrtopError):
    """The model failed at run time, or measuring could not go on: exit 1."""

    exit_code = EXIT_RUNTIME


def one_line(exc: BaseException, limit: int = 500) -> str:
    """An exception's message on one line (whitespace runs as one space), at most ``limit`` characters; its type's
    name when it has none."""
    text = " ".join(str(exc).split())
    return text[:limit] if text else type(exc).__name__
