"""``--ledger`` on ``dpcomm run``, and ``dpcomm budget``: parse, call, print.

A ledger file holds a privacy budget (ε, δ) for one population and every run charged to it
(`dpcomm.Budget`). ``dpcomm run aggregate|kmeans --ledger FILE`` charges the run's plan
guarantee before it runs (refused beyond the budget: nothing runs); with ``--engine
network``, and ``dpcomm node run --role coordinator --ledger FILE``, they charge a deployed
round the weakest guarantee it can report (`dpcomm.pipeline.charge`);
``--budget-epsilon E --budget-delta D`` create FILE with that budget when it does not exist.
``dpcomm budget --ledger FILE`` prints the budget, what is spent and every charge (its query as
written, countermeasure, release, engine and method); ``--accept-edits`` accepts a ledger whose
content was edited outside dpcomm (or of version 1) and signs it again.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpcomm.cli.output import non_negative_float
from dpcomm.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.budget.ledger import Charge

COMPOSITION_TEXT = "charges add up (basic composition, a filter valid for adaptive queries)"


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    """``--ledger FILE``, ``--budget-epsilon E``, ``--budget-delta D``."""
    group = parser.add_argument_group("budget across queries")
    group.add_argument(
        "--ledger",
        metavar="FILE",
        help="a budget's ledger (JSON) that this run charges its plan's (ε, δ) before it runs; "
        "a run beyond the budget is refused and the ledger left unchanged "
        f"({COMPOSITION_TEXT})",
    )
    group.add_argument(
        "--budget-epsilon",
        type=non_negative_float,
        metavar="E",
        help="with --ledger: the budget's ε, to create FILE (if it exists, its budget must be "
        "this one)",
    )
    group.add_argument(
        "--budget-delta",
        type=non_negative_float,
        metavar="D",
        help="with --ledger: the budget's δ, to create FILE (with --budget-epsilon)",
    )


def budget_from_options(args: argparse.Namespace) -> Budget | None:
    """The `dpcomm.Budget` of ``--ledger`` (created with ``--budget-*``), or None."""
    from dpcomm.budget.budget import Budget

    epsilon, delta = args.budget_epsilon, args.budget_delta
    if args.ledger is None:
        if epsilon is not None or delta is not None:
            flag = "--budget-epsilon" if epsilon is not None else "--budget-delta"
            raise InvalidParameterError(flag, "given with --ledger FILE", epsilon or delta)
        return None
    if (epsilon is None) != (delta is None):
        missing = "--budget-delta" if delta is None else "--budget-epsilon"
        raise InvalidParameterError(missing, "given with the other (the budget's ε and δ)", None)
    try:
        return Budget(epsilon=epsilon, delta=delta, ledger=args.ledger)
    except InvalidParameterError as error:  # named by the options that gave them
        name = re.sub(r"\b(epsilon|delta)\b", r"budget_\1", error.name)
        raise InvalidParameterError(name, error.allowed, error.given) from None


def print_charge(budget: Budget | None) -> None:
    """One line on standard error: what the run was charged and what is left."""
    if budget is None:
        return
    charge = budget.charges()[-1]
    epsilon, delta = budget.remaining()
    print(
        f"budget {budget.ledger}: charged ε = {charge.epsilon:.4g}, δ = {charge.delta:.3g}; "
        f"left ε = {epsilon:.4g}, δ = {delta:.3g} of ε = {budget.epsilon:g}, "
        f"δ = {budget.delta:g}",
        file=sys.stderr,
    )


def _countermeasure_text(record: Mapping[str, Any] | None) -> str:
    """A recorded countermeasure as ``dpcomm run`` describes it (per flow when they differ)."""
    from dpcomm.plan.codec import countermeasure_from_dict

    if record is None:
        return "(not recorded)"

    def one(spec: Any) -> str:
        try:
            return countermeasure_from_dict(spec).describe()
        except (TypeError, ValueError):  # an accepted hand edit: shown as stored
            return json.dumps(spec)

    if "mechanism" in record:
        return one(record)
    return "; ".join(f"{flow}: {one(spec)}" for flow, spec in record.items())


def _release_text(record: Mapping[str, Any] | None) -> str:
    """A recorded release: mechanism, ε2, δ2, bounds, keys or δ_sel."""
    if record is None:
        return "none"
    parts = [
        f"{record.get('mechanism')} ε2 = {record.get('epsilon'):g}, δ2 = {record.get('delta'):g}"
    ]
    bounds = record.get("bounds") or {}
    if bounds:
        parts.append(
            "bounds " + ", ".join(f"{c} in [{lo:g}, {hi:g}]" for c, (lo, hi) in bounds.items())
        )
    keys = record.get("keys") or {}
    if keys:
        parts.append("keys " + ", ".join(f"{c} ({len(v):,} values)" for c, v in keys.items()))
    if record.get("key_selection_delta") is not None:
        parts.append(f"keys selected at δ_sel = {record['key_selection_delta']:g}")
    return "; ".join(parts)


def _print_charges(charges: Sequence[Charge]) -> None:
    for number, charge in enumerate(charges, start=1):
        engine = f" on {charge.engine}" if charge.engine else ""
        when = charge.time[:19].replace("T", " ")
        print()
        print(
            f"  charge {number}, {when} UTC, {charge.kind}{engine}: "
            f"ε = {charge.epsilon:.6g}, δ = {charge.delta:.3g}"
        )
        print(f"    query:          {charge.query}")
        print(f"    countermeasure: {_countermeasure_text(charge.countermeasure)}")
        print(f"    release:        {_release_text(charge.release)}")
        if charge.seed is not None:
            print(f"    seed:           {charge.seed}")
        print(f"    method:         {charge.method}")


def command_budget(args: argparse.Namespace) -> int:
    """``dpcomm budget``: the budget of a ledger, what is spent and left, and its charges."""
    from dpcomm.budget.budget import Budget

    if args.accept_edits:
        from dpcomm.budget.ledger import VERSION

        epsilon, delta = args.budget_epsilon, args.budget_delta
        if epsilon is not None or delta is not None:
            flag = "--budget-epsilon" if epsilon is not None else "--budget-delta"
            raise InvalidParameterError(
                flag, "not given with --accept-edits (it accepts the ledger as it is)", epsilon
            )
        Budget(ledger=args.ledger, accept_edits=True)
        print(
            f"accepted ledger {args.ledger} as it is now: signed again (version {VERSION})",
            file=sys.stderr,
        )
    budget = budget_from_options(args)
    assert budget is not None  # --ledger is required
    ledger = budget.read()
    spent = budget.spent()
    left = budget.remaining()
    if args.json:
        document: dict[str, Any] = {
            **ledger.to_dict(),
            "spent": {"epsilon": spent.epsilon, "delta": spent.delta},
            "remaining": {"epsilon": left[0], "delta": left[1]},
        }
        print(json.dumps(document, indent=2))
        return 0
    print(f"ledger {budget.ledger}")
    print(f"  budget:    ε = {budget.epsilon:g}, δ = {budget.delta:g}; {COMPOSITION_TEXT}")
    print(f"  spent:     ε = {spent.epsilon:.6g}, δ = {spent.delta:.3g} by {spent.charges} runs")
    print(f"  remaining: ε = {left[0]:.6g}, δ = {left[1]:.3g}")
    _print_charges(ledger.charges)
    return 0


def add_budget_command(commands: Any) -> None:
    """Register ``dpcomm budget`` on the top-level subparsers."""
    parser = commands.add_parser(
        "budget",
        help="a privacy budget across queries: create a ledger, or show what it has spent",
        description="Show a budget's ledger: its (ε, δ), what the runs charged to it "
        "(dpcomm run ... --ledger FILE) have spent, what is left, and every charge. With "
        "--budget-epsilon and --budget-delta, create FILE with that budget when it does not "
        "exist. Charges compose by their sum (basic composition, a privacy filter valid "
        "when queries and their parameters are chosen adaptively).",
    )
    parser.add_argument("--ledger", metavar="FILE", required=True, help="the ledger (JSON)")
    parser.add_argument(
        "--budget-epsilon", type=non_negative_float, metavar="E", help="ε, to create FILE"
    )
    parser.add_argument(
        "--budget-delta", type=non_negative_float, metavar="D", help="δ, to create FILE"
    )
    parser.add_argument("--json", action="store_true", help="print the ledger as JSON")
    parser.add_argument(
        "--accept-edits",
        action="store_true",
        help="accept FILE as it is now although its content does not match its digest (it was "
        "edited outside dpcomm), or it is of version 1, and sign it again; check the edits "
        "first: the digest has no key, it detects accidental and naive edits only",
    )
    parser.set_defaults(handler=command_budget)
