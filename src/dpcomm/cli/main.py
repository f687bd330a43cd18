"""The ``dpcomm`` command: parses arguments, calls the library, prints the answer."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

from dpcomm import __version__
from dpcomm.accounting import (
    MAX_ROUNDS,
    METHOD_DESCRIPTIONS,
    METHOD_NAMES,
    AccountingReport,
    LocalRandomizer,
    ScramblerMechanism,
    account,
    report_with_method,
)
from dpcomm.cli.audit import add_audit_command
from dpcomm.cli.budget import add_budget_command
from dpcomm.cli.deploy import add_deploy_commands
from dpcomm.cli.figures import add_figures_command
from dpcomm.cli.mechanisms import check_family_options, declared_mechanism, mechanism_kind
from dpcomm.cli.output import bounded_int, non_negative_int, print_table, with_flags
from dpcomm.cli.pki import add_pki_command
from dpcomm.cli.plan import add_plan_commands
from dpcomm.cli.run import add_run_commands
from dpcomm.errors import BalancedBatchesWarning, DpcommError, DpcommWarning, InvalidParameterError

T = TypeVar("T")


def _parse_list(name: str, text: str, convert: Callable[[str], T]) -> list[T]:
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            values.append(convert(item))
        except ValueError as error:
            raise InvalidParameterError(name, "a comma-separated list of numbers", text) from error
    return values


def _as_int(text: str) -> int:
    value = float(text)
    if not value.is_integer():
        raise ValueError(text)
    return int(value)


def _format(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:.{digits - 1}e}"  # ∞ prints as inf
    return f"{value:.{digits}f}"


def _print_single(report: AccountingReport) -> None:
    mechanism = report.mechanism
    assert isinstance(mechanism, LocalRandomizer | ScramblerMechanism)
    batch = (
        f", n={mechanism.batch_size} sources per scrambler"
        if isinstance(mechanism, ScramblerMechanism)
        else ""
    )
    title = (
        f"{mechanism_kind(mechanism)}: T={mechanism.num_targets} targets{batch}, "
        f"d={mechanism.num_dummies} dummies, sampling σ={mechanism.sampling_rate}"
    )
    asked = "ε" if report.query == "epsilon" else "δ"
    fixed = f"δ = {report.fixed:g}" if report.query == "epsilon" else f"ε = {report.fixed:g}"
    rounds = ""
    if report.rounds > 1:
        rounds = (
            f", {report.rounds} rounds composed (methods other than pld: Theorem 2, "
            f"{report.rounds} × the one-round value at {'δ' if asked == 'ε' else 'ε'}"
            f"/{report.rounds})"
        )
    print(f"Privacy of the {title}{rounds}")
    shown = next((r for r in report.methods if r.name == report.guarantee.method), None)
    label = ""
    if shown is not None and shown.status == "printed":
        label = ": the formula as printed in the paper, refuted by enumeration, not a valid bound"
    elif shown is not None and shown.status == "estimate":
        label = ": a Monte Carlo estimate, not a proven bound"
    print(
        f"{asked} at {fixed}: {_format(report.value)}   (method: {report.guarantee.method}{label})"
    )
    why = report.why_infinite()
    if why is not None:
        print(f"why ε = ∞: {why.describe()}")
    print(f"certified lower bound on {asked}: {_format(report.lower_bound)}")
    print()
    print(f"{'method':<16} {asked:>12}  {'status':<9} description")
    for result in report.methods:
        print(
            f"{result.name:<16} {_format(result.value):>12}  {result.status:<9} "
            f"{METHOD_DESCRIPTIONS[result.name]}"
        )
    for note in report.notes:
        print(f"note: {note}")
    print()
    print("valid = proven upper bound; estimate = Monte Carlo, holds with stated confidence;")
    print("printed = formula as printed in the paper, refuted (see docs/accounting.md).")


def _print_table(reports: Sequence[AccountingReport]) -> None:
    names = [n for n in METHOD_NAMES if any(r.name == n for rep in reports for r in rep.methods)]
    asked = "epsilon" if reports[0].query == "epsilon" else "delta"
    fixed = "delta" if asked == "epsilon" else "epsilon"
    header = ["T", "sigma", "n", "d", "capped", fixed, asked, "method", "lower", *names]
    rows = []
    for report in reports:
        mechanism = report.mechanism
        assert isinstance(mechanism, LocalRandomizer | ScramblerMechanism)
        batch = mechanism.batch_size if isinstance(mechanism, ScramblerMechanism) else None
        capped = mechanism.capped if isinstance(mechanism, ScramblerMechanism) else None
        values = report.method_values()
        rows.append(
            [
                str(mechanism.num_targets),
                f"{mechanism.sampling_rate:g}",
                "-" if batch is None else str(batch),
                str(mechanism.num_dummies),
                "-" if capped is None else ("yes" if capped else "no"),
                f"{report.fixed:g}",
                _format(report.value),
                report.guarantee.method + ("" if report.method_is_valid_bound else " *"),
                _format(report.lower_bound),
                *[_format(values[n]) for n in names],
            ]
        )
    print_table(header, rows)
    shown = {
        result.name: result.status
        for report in reports
        for result in report.methods
        if result.name == report.guarantee.method and result.status != "valid"
    }
    for name, status in sorted(shown.items()):
        what = (
            "the formula as printed in the paper, refuted by enumeration (docs/accounting.md)"
            if status == "printed"
            else "a Monte Carlo estimate, not a proven bound"
        )
        print(f"* {name}: not a valid bound: {what}")


def _command_account(args: argparse.Namespace) -> int:
    targets = _parse_list("targets", args.targets, _as_int)
    samplings = _parse_list("sampling", args.sampling, float)
    dummies = _parse_list("dummies", args.dummies, _as_int)
    check_family_options(args, "account")
    batches: list[int | None] = [None]
    if args.kind == "scrambler":
        batches = list(_parse_list("batch", args.batch, _as_int))
    if args.delta is not None and args.epsilon is not None:
        raise InvalidParameterError("--epsilon", "unset when --delta is given", args.epsilon)
    deltas: list[float | None] = [None]
    epsilons: list[float | None] = [None]
    if args.epsilon is not None:
        epsilons = list(_parse_list("epsilon", args.epsilon, float))
    else:
        deltas = list(_parse_list("delta", args.delta, float)) if args.delta else [0.0]
    if args.method is not None and args.method not in METHOD_NAMES:
        raise InvalidParameterError("method", f"one of {', '.join(METHOD_NAMES)}", args.method)
    reports = []
    for size, sigma, dummy, batch, delta, epsilon in itertools.product(
        targets, samplings, dummies, batches, deltas, epsilons
    ):
        mechanism = declared_mechanism(
            num_targets=size,
            sampling_rate=sigma,
            num_dummies=dummy,
            batch_size=batch,
            capped=args.capped,
        )
        report = account(
            mechanism,
            delta=delta,
            epsilon=epsilon,
            rounds=args.rounds,
            monte_carlo_samples=args.mc_samples,
            seed=args.seed,
        )
        if args.method is not None:
            report = report_with_method(report, args.method)
        reports.append(report)
    if args.json:
        print(json.dumps([report.to_dict() for report in reports], indent=2))
    elif len(reports) == 1:
        _print_single(reports[0])
    else:
        _print_table(reports)
    return 0


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on standard error (exit status 2).

    Subparsers inherit the class, so every subcommand's errors are one line too.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see prog --help)`` and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``dpcomm`` command."""
    parser = OneLineArgumentParser(
        prog="dpcomm",
        description="Differential privacy for data-dependent communication patterns.",
    )
    parser.add_argument("--version", action="version", version=f"dpcomm {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    accounting = commands.add_parser(
        "account",
        help="(ε, δ) of a communication pattern under sampling, flooding and scramblers",
        description=(
            "Account the privacy of a cluster's communication pattern. Every numeric option "
            "takes a comma-separated list; one row is printed per combination. With neither "
            "--delta nor --epsilon (or with --delta 0) the answer is pure ε."
        ),
    )
    accounting.add_argument("kind", choices=["local", "scrambler"], help="mechanism family")
    accounting.add_argument("--targets", required=True, help="T, number of targets (>= 2)")
    accounting.add_argument("--sampling", required=True, help="σ, sampling rate in [0, 1]")
    accounting.add_argument(
        "--dummies", default="0", help="d, dummies per source (local) or per scrambler"
    )
    accounting.add_argument("--batch", help="n, sources per scrambler (scrambler only)")
    accounting.add_argument(
        "--capped", action="store_true", help="cap messages per target at n (scrambler S̄_d)"
    )
    query = accounting.add_mutually_exclusive_group()
    query.add_argument("--delta", help="target δ in [0, 1): report ε")
    query.add_argument("--epsilon", help="target ε >= 0: report δ")
    accounting.add_argument(
        "--method",
        help="report this method's value instead of the best valid one: " + ", ".join(METHOD_NAMES),
    )
    accounting.add_argument(
        "--mc-samples",
        type=int,
        default=5000,
        help="R, Monte Carlo samples per m for Algorithm 2 (0 to skip; default 5000)",
    )
    accounting.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the Monte Carlo estimate"
    )
    accounting.add_argument(
        "--rounds",
        type=bounded_int(1, MAX_ROUNDS),
        default=1,
        help=(
            "R, identical rounds composed (a source in every round, fresh randomness): ε and δ "
            "are the whole composition's; methods are summed by Theorem 2 and the 'pld' method "
            f"composes privacy loss distributions (1 to {MAX_ROUNDS:,}; default 1)"
        ),
    )
    accounting.add_argument("--json", action="store_true", help="print a JSON list of rows")
    accounting.set_defaults(handler=_command_account)
    add_run_commands(commands)
    add_figures_command(commands)
    add_audit_command(commands)
    add_plan_commands(commands)
    add_pki_command(commands)
    add_deploy_commands(commands)
    add_budget_command(commands)
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
    parser = build_parser()
    args = parser.parse_args(argv)
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
        print(f"dpcomm: error: {with_flags(error)}", file=sys.stderr)
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


#: The generated module of help texts the console script's front answers from.
HELP_TEXTS_MODULE = Path(__file__).with_name("help_texts.py")


def help_texts(parser: argparse.ArgumentParser | None = None) -> dict[tuple[str, ...], str]:
    """Every (sub)command's ``--help`` text, by its path of subcommand names (``()`` the top)."""
    texts: dict[tuple[str, ...], str] = {}

    def walk(current: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        texts[path] = current.format_help()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(parser or build_parser(), ())
    return texts


def help_texts_source() -> str:
    """The source of `dpcomm.cli.help_texts` (``make help-texts`` writes it)."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        texts = help_texts()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    lines = [
        '"""Generated by ``make help-texts`` from the parser (80 columns): do not edit.',
        "",
        "The console script's front (`dpcomm.cli.entry`) prints these without importing",
        "the library; ``tests/integration/test_fast_start.py`` checks them against the parser.",
        '"""',
        "",
        "HELP: dict[tuple[str, ...], str] = {",
    ]
    for path, text in texts.items():
        lines.append(f"    {path!r}: (")
        lines += [f"        {line!r}" for line in text.splitlines(keepends=True)]
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"
