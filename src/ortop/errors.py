"""One error hierarchy for everything a user can get wrong or a model can fail at, each carrying its exit code.

The CLI prints ``ortop: error: <message>`` and exits with :attr:`OrtopError.exit_code`; nothing else decides exit
codes. Every room raises these (or subclasses), so a bad profile, a bad model and a bad flag read alike.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUNTIME = 1     # the model or the run failed (a build error, Run() raising, the worker dying for good)
EXIT_USAGE = 2       # bad input: a flag, a profile, a model file, a path
EXIT_WORKER_LOST = 4 # a worker died and could not be restarted: what was measured is printed, as on ctrl-C


class OrtopError(Exception):
    """Base of every error ortop reports to a user as one line."""

    exit_code: int = EXIT_USAGE


class UsageError(OrtopError, ValueError):
    """Bad input from the user (a flag, a path, a value): exit 2."""

    exit_code = EXIT_USAGE


class RuntimeFailure(OrtopError):
    """The model failed at run time, or measuring could not go on: exit 1."""

    exit_code = EXIT_RUNTIME
