"""The ``dpcomm`` command: parses arguments, calls the library, prints the answer."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NoReturn

from dpcomm import __version__
from dpcomm.cli.account import add_account_command
from dpcomm.cli.audit import add_audit_command
from dpcomm.cli.budget import add_budget_command
from dpcomm.cli.deploy import add_deploy_commands
from dpcomm.cli.explore import add_explore_command
from dpcomm.cli.figures import add_figures_command
from dpcomm.cli.output import command_flags, with_flags
from dpcomm.cli.pki import add_pki_command
from dpcomm.cli.plan import add_plan_commands
from dpcomm.cli.run import add_run_commands
from dpcomm.errors import BalancedBatchesWarning, DpcommError, DpcommWarning


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on standard error (exit status 2).

    Subparsers inherit the class, so every subcommand's errors are one line too.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see prog --help)`` and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``dpcomm`` command.

    Building it imports none of the library's heavy modules (numpy, scipy, DuckDB, ...): each
    command imports what it calls when it runs, so that ``--version``, ``--help`` and a
    usage error answer at once.
    """
    parser = OneLineArgumentParser(
        prog="dpcomm",
        description="Differential privacy for data-dependent communication patterns.",
    )
    parser.add_argument("--version", action="version", version=f"dpcomm {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_account_command(commands)
    add_run_commands(commands)
    add_figures_command(commands)
    add_audit_command(commands)
    add_plan_commands(commands)
    add_pki_command(commands)
    add_deploy_commands(commands)
    add_budget_command(commands)
    add_explore_command(commands)
    return parser


def _silence_stdout() -> None:
    """Point standard output at /dev/null (its reader is gone; nothing more can be written)."""
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (e.g. captured by a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpcomm`` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(arguments)
    # Errors name the library's parameters; they are printed with the flags of this command,
    # which its handler may read too (the planner's advice names them).
    flags = command_flags(parser, args)
    args.flags = flags
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DpcommWarning)
            status = handler(args)
        sys.stdout.flush()  # the notes follow the report, also in one merged stream
        said: set[str] = set()
        for warning in caught:
            if issubclass(warning.category, DpcommWarning):
                # One line each, said once; the balanced batches' ε is a note, not a fault.
                kind = "note" if issubclass(warning.category, BalancedBatchesWarning) else "warning"
                line = f"dpcomm: {kind}: {warning.message}"
                if line not in said:
                    said.add(line)
                    print(line, file=sys.stderr)
            else:
                warnings.showwarning(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return status
    except DpcommError as error:
        print(f"dpcomm: error: {with_flags(error, flags)}", file=sys.stderr)
        return 2
    except (OverflowError, MemoryError) as error:
        # A value too large for the computation that no parameter check caught.
        print(
            f"dpcomm: error: a value is too large for this computation ({error})", file=sys.stderr
        )
        return 2
    except BrokenPipeError:
        # The reader of standard output went away (e.g. ``dpcomm ... | head``): stop quietly.
        # Standard output is pointed at /dev/null so that the interpreter's final flush at exit
        # does not raise again.
        _silence_stdout()
        return 141
    except OSError as error:
        # A file could not be read or written (a full disk, a folder removed meanwhile, ...).
        where = f": {error.filename}" if error.filename is not None else ""
        print(f"dpcomm: error: {error.strerror or error}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dpcomm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
