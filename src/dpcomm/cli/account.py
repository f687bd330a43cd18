"""``dpcomm account local|scrambler``: the (ε, δ) of one cluster's communication pattern."""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from dpcomm.cli.defaults import DEFAULT_MONTE_CARLO_SAMPLES, MAX_ROUNDS, METHOD_NAMES
from dpcomm.cli.output import bounded_int, non_negative_int, print_table
from dpcomm.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpcomm.accounting import AccountingReport

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
    from dpcomm.accounting import METHOD_DESCRIPTIONS, LocalRandomizer, ScramblerMechanism
    from dpcomm.cli.mechanisms import mechanism_kind

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
    from dpcomm.accounting import LocalRandomizer, ScramblerMechanism

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


def command_account(args: argparse.Namespace) -> int:
    """``dpcomm account local|scrambler``: one report, or a table of one row per combination."""
    from dpcomm.accounting import account, report_with_method
    from dpcomm.cli.mechanisms import declared_mechanism

    targets = _parse_list("targets", args.num_targets, _as_int)
    samplings = _parse_list("sampling", args.sampling_rate, float)
    dummies = _parse_list("dummies", args.num_dummies, _as_int)
    batches: list[int | None] = [None]
    if args.batch_size is not None:
        batches = list(_parse_list("batch", args.batch_size, _as_int))
    if args.delta is not None and args.epsilon is not None:
        raise InvalidParameterError("--epsilon", "unset when --delta is given", args.epsilon)
    deltas: list[float | None] = [None]
    epsilons: list[float | None] = [None]
    if args.epsilon is not None:
        epsilons = list(_parse_list("epsilon", args.epsilon, float))
    else:
        deltas = [0.0] if args.delta is None else list(_parse_list("delta", args.delta, float))
    if args.method is not None and args.method not in METHOD_NAMES:
        raise InvalidParameterError("method", f"one of {', '.join(METHOD_NAMES)}", args.method)
    # --method asks for one method's value: evaluate the printed formulas, and the Monte
    # Carlo estimate (with the paper's R unless --mc-samples says otherwise), if it names one.
    all_methods = args.all_methods or args.method is not None
    samples = args.monte_carlo_samples
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


def _add_mechanism_options(parser: argparse.ArgumentParser) -> None:
    """The mechanism (``local|scrambler``, T, σ, d, n, capped) and the (ε or δ) asked for."""
    parser.add_argument("kind", choices=["local", "scrambler"], help="mechanism family")
    parser.add_argument(
        "--targets",
        dest="num_targets",
        metavar="TARGETS",
        required=True,
        help="T, number of targets (>= 2)",
    )
    parser.add_argument(
        "--sampling",
        dest="sampling_rate",
        metavar="SAMPLING",
        required=True,
        help="σ, sampling rate in [0, 1]",
    )
    parser.add_argument(
        "--dummies",
        dest="num_dummies",
        metavar="DUMMIES",
        default="0",
        help="d, dummies per source (local) or per scrambler",
    )
    parser.add_argument(
        "--batch",
        dest="batch_size",
        metavar="BATCH",
        help="n, sources per scrambler (scrambler only)",
    )
    parser.add_argument(
        "--capped", action="store_true", help="cap messages per target at n (scrambler S̄_d)"
    )
    query = parser.add_mutually_exclusive_group()
    query.add_argument("--delta", help="target δ in [0, 1): report ε")
    query.add_argument("--epsilon", help="target ε >= 0: report δ")


def _add_method_options(parser: argparse.ArgumentParser) -> None:
    """How the answer is computed: the methods, the Monte Carlo estimate, the rounds."""
    parser.add_argument(
        "--all-methods",
        action="store_true",
        help=(
            "also print every method's value (valid bounds and the paper's printed formulas) "
            "beside the best one"
        ),
    )
    parser.add_argument(
        "--method",
        help="report this method's value instead of the best valid one: " + ", ".join(METHOD_NAMES),
    )
    parser.add_argument(
        "--mc-samples",
        dest="monte_carlo_samples",
        type=non_negative_int,
        metavar="R",
        help=(
            "also estimate by Monte Carlo (Algorithm 2, R samples per m; an estimate, never "
            f"the answer; the paper's R is {DEFAULT_MONTE_CARLO_SAMPLES}; default: no estimate)"
        ),
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the Monte Carlo estimate"
    )
    parser.add_argument(
        "--rounds",
        type=bounded_int(1, MAX_ROUNDS),
        default=1,
        help=(
            "R, identical rounds composed (a source in every round, fresh randomness): ε and δ "
            "are the whole composition's; methods are summed by Theorem 2 and the 'pld' method "
            f"composes privacy loss distributions (1 to {MAX_ROUNDS:,}; default 1)"
        ),
    )


def add_account_command(commands: Any) -> None:
    """Register ``account`` on the top-level subparsers."""
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
    _add_mechanism_options(accounting)
    _add_method_options(accounting)
    accounting.add_argument("--json", action="store_true", help="print a JSON list of rows")
    accounting.set_defaults(handler=command_account)
