"""The command line: one parser built from a list of commands (see :mod:`ortop.cli.main`)."""

from ortop.cli.main import main

__all__ = ["main"]
