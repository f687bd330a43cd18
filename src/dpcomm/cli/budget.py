"""``--ledger`` on ``dpcomm run``, and ``dpcomm budget``: parse, call, print.

A ledger file holds a privacy budget (ε, δ) for one population and every run charged to it
(`dpcomm.Budget`). ``dpcomm run aggregate|kmeans --ledger FILE`` charges the run's plan
guarantee before it runs (refused beyond the budget: nothing runs); ``dpcomm deploy local
--ledger FILE`` and ``dpcomm node run --role coordinator --ledger FILE`` charge a deployed
round the weakest guarantee it can report (`dpcomm.engine.charge`);
``--budget-epsilon E --budget-delta D`` create FILE with that budget when it does not exist.
``dpcomm budget --ledger FILE`` prints the budget, what is spent and every charge.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dpcomm.budget.budget import Budget
from dpcomm.cli.output import non_negative_float, print_table

#: The flag of each parameter of `dpcomm.Budget`.
FLAGS = {
    "epsilon": "--budget-epsilon",
    "delta": "--budget-delta",
    "epsilon and delta": "--budget-epsilon and --budget-delta",
    "ledger": "--ledger",
}
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
    from dpcomm.errors import InvalidParameterError

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
    except InvalidParameterError as error:  # named by the flags that gave them
        name = FLAGS.get(error.name, error.name)
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


def command_budget(args: argparse.Namespace) -> int:
    """``dpcomm budget``: the budget of a ledger, what is spent and left, and its charges."""
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
    if ledger.charges:
        print()
        rows = [
            [c.time[:19], c.kind, f"{c.epsilon:.4g}", f"{c.delta:.3g}", c.method, c.query[:60]]
            for c in ledger.charges
        ]
        print_table(["time (UTC)", "kind", "ε", "δ", "method", "query"], rows, indent="  ")
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
    parser.set_defaults(handler=command_budget)
