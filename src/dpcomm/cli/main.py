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
    DEFAULT_MONTE_CARLO_SAMPLES,
    MAX_ROUNDS,
    METHOD_DESCRIPTIONS,
    METHOD_NAMES,
    AccountingReport,
    LocalRandomizer,
    ScramblerMechanism,
    account,
    report_with_method,
)
from dpcomm.cli.mechanisms import declared_mechanism, mechanism_kind
from dpcomm.cli.output import bounded_int, non_negative_int, print_table, with_flags
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


#: What each status means, as the method table's legend says it.
_STATUS_MEANINGS = {
    "valid": "proven upper bound",
    "estimate": "Monte Carlo, holds with the stated confidence",
    "printed": "formula as printed in the paper, refuted (see docs/accounting.md)",
}
#: The Monte Carlo estimate's method names (shown whenever ``--mc-samples`` asks for it).
_MONTE_CARLO_METHODS = ("monte-carlo", "monte-carlo-upper")


def _print_single(report: AccountingReport, *, all_methods: bool) -> None:
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
    shown_methods = [r for r in report.methods if all_methods or r.name in _MONTE_CARLO_METHODS]
    if shown_methods:
        print()
        print(f"{'method':<16} {asked:>12}  {'status':<9} description")
        for result in shown_methods:
            print(
                f"{result.name:<16} {_format(result.value):>12}  {result.status:<9} "
                f"{METHOD_DESCRIPTIONS[result.name]}"
            )
    for note in report.notes:
        print(f"note: {note}")
    statuses = {r.status for r in shown_methods}
    if statuses:
        print()
    for status, meaning in _STATUS_MEANINGS.items():
        if status in statuses:
            print(f"{status} = {meaning}")


def _print_table(reports: Sequence[AccountingReport], *, all_methods: bool) -> None:
    names = [
        n
        for n in METHOD_NAMES
        if (all_methods or n in _MONTE_CARLO_METHODS)
        and any(r.name == n for rep in reports for r in rep.methods)
    ]
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
    batches: list[int | None] = [None]
    if args.batch is not None:
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
    # --method asks for one method's value: evaluate the printed formulas, and the Monte
    # Carlo estimate (with the paper's R unless --mc-samples says otherwise), if it names one.
    all_methods = args.all_methods or args.method is not None
    samples = args.mc_samples
    if samples is None:
        samples = DEFAULT_MONTE_CARLO_SAMPLES if args.method in _MONTE_CARLO_METHODS else 0
    reports = []
    for size, sigma, dummy, batch, delta, epsilon in itertools.product(
        targets, samplings, dummies, batches, deltas, epsilons
    ):
        mechanism = declared_mechanism(
            kind=args.kind,
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
            all_methods=all_methods,
            monte_carlo_samples=samples,
            seed=args.seed,
        )
        if args.method is not None:
            report = report_with_method(report, args.method)
        reports.append(report)
    if args.json:
        print(json.dumps([report.to_dict() for report in reports], indent=2))
    elif len(reports) == 1:
        _print_single(reports[0], all_methods=args.all_methods)
    else:
        _print_table(reports, all_methods=args.all_methods)
    return 0


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on standard error (exit status 2).

    Subparsers inherit the class, so every subcommand's errors are one line too.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see prog --help)`` and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(*, only_account: bool = False) -> argparse.ArgumentParser:
    """The argument parser of the ``dpcomm`` command.

    ``only_account``: the ``account`` command alone, which ``dpcomm account ...`` parses with, so
    that its start-up does not import the other commands' modules (engines, DuckDB, the PLD
    library): the accountant answers in milliseconds, and its import is most of the wait.
    """
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
            "Account the privacy of a cluster's communication pattern: the best valid bound "
            "and a certified lower bound (milliseconds for n, d <= 1,000). Every numeric option "
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
        "--all-methods",
        action="store_true",
        help=(
            "also print every method's value (valid bounds and the paper's printed formulas) "
            "beside the best one"
        ),
    )
    accounting.add_argument(
        "--method",
        help="report this method's value instead of the best valid one: " + ", ".join(METHOD_NAMES),
    )
    accounting.add_argument(
        "--mc-samples",
        type=non_negative_int,
        metavar="R",
        help=(
            "also estimate by Monte Carlo (Algorithm 2, R samples per m; an estimate, never "
            f"the answer; the paper's R is {DEFAULT_MONTE_CARLO_SAMPLES}; default: no estimate)"
        ),
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
    if only_account:
        return parser
    from dpcomm.cli.audit import add_audit_command
    from dpcomm.cli.budget import add_budget_command
    from dpcomm.cli.deploy import add_deploy_commands
    from dpcomm.cli.explore import add_explore_command
    from dpcomm.cli.figures import add_figures_command
    from dpcomm.cli.pki import add_pki_command
    from dpcomm.cli.plan import add_plan_commands
    from dpcomm.cli.run import add_run_commands

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
    parser = build_parser(only_account=arguments[:1] == ["account"])
    args = parser.parse_args(arguments)
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
