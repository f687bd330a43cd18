"""A privacy budget across queries: a ledger on disk that every run on one population charges.

Each run of `dpcomm.run_sql`, `dpcomm.kmeans` or ``dpcomm run`` reports its own
(ε, δ); ten runs on the same population are ten separate guarantees. A `Budget` ties
them together: before a run executes, its plan's guarantee is charged to a ledger (a JSON file
holding the budget and every charge), and a run that would take the charges beyond the budget
is refused before anything runs. Charges compose by the basic composition filter
(`dpcomm.budget.composition`), valid when queries and their parameters are chosen
adaptively. Each charge records the query as written, its countermeasure, release, engine
and method, and the ledger carries a digest of its content, so that a ledger edited outside
dpcomm is refused until its edits are accepted (`dpcomm.budget.ledger`). This package does
I/O (the ledger); the mathematics below it is pure.
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget as Budget, BudgetExceededError as BudgetExceededError
    from dpcomm.budget.composition import COMPOSITION as COMPOSITION, Spent as Spent
    from dpcomm.budget.ledger import Charge as Charge, Ledger as Ledger, LedgerError as LedgerError

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "COMPOSITION",
    "Budget",
    "BudgetExceededError",
    "Charge",
    "Ledger",
    "LedgerError",
    "Spent",
]
