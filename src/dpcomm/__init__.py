"""dpcomm: differential privacy for data-dependent communication patterns.

Implements the system of "Mitigating Leakage from Data Dependent Communications in
Decentralized Computing using Differential Privacy" (Ladjel, Anciaux, Bellet, Scerri).

The front door (names imported on first use, so ``import dpcomm`` stays light):

* [`run_sql`][] runs an Aggregate query (GROUP BY, GROUPING SETS) over a DataFrame, an Arrow
  table, a DuckDB relation or a CSV/Parquet path; [`kmeans`][] runs K-means over points;
  both return the result and a typed report (privacy, utility, efficiency): an
  [`AggregateRun`][] or a [`KMeansRun`][], what the ``dpcomm`` command prints;
* [`calibrate`][] finds the countermeasure of least network load that makes a plan
  (ε, δ)-DP under limits on channels, consents and utility (the planner);
* the countermeasures [`NoCountermeasure`][], [`LocalFlooding`][] (sampling σ and d
  dummies per source, Section 3) and [`Scramblers`][] (n sources per scrambler, d dummies,
  Section 4);
* [`Budget`][]: an (ε, δ) across queries, kept in a ledger file that every run given
  ``budget=`` charges before it runs (a run beyond it raises [`BudgetExceededError`][]);
* [`account`][] and the mechanisms [`LocalRandomizer`][], [`ScramblerMechanism`][]:
  the (ε, δ) of one cluster's communication pattern (``dpcomm.accounting``);
* [`dpcomm.datasets`][]: synthetic tables, the diabetes table, MNIST-type digits.

Beneath: ``dpcomm.accounting`` (the accountant), ``dpcomm.plan`` (execution plans, costs,
Theorem 2 over a plan), ``dpcomm.calibration`` (the planner), ``dpcomm.protocol`` (the role
steps), ``dpcomm.queries`` (SQL and K-means programs), ``dpcomm.engine`` (in memory, Dask,
networked), ``dpcomm.experiments`` (figures, audits), ``dpcomm.cli`` (the ``dpcomm`` command);
``dpcomm.validation`` holds the parameter checks of every layer.

Examples:
    >>> import dpcomm
    >>> mechanism = dpcomm.ScramblerMechanism(
    ...     num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50)
    >>> round(dpcomm.account(mechanism, delta=1e-4).guarantee.epsilon, 2)
    2.33
"""

import importlib
from typing import TYPE_CHECKING, Any

from dpcomm._lazy import attach
from dpcomm.errors import DpcommError, InvalidParameterError

if TYPE_CHECKING:
    from dpcomm.accounting.accountant import account as account
    from dpcomm.accounting.mechanisms import (
        LocalRandomizer as LocalRandomizer,
        ScramblerMechanism as ScramblerMechanism,
    )
    from dpcomm.api import kmeans as kmeans, run_sql as run_sql
    from dpcomm.budget.budget import Budget as Budget, BudgetExceededError as BudgetExceededError
    from dpcomm.calibration.calibrate import Calibration as Calibration, calibrate as calibrate
    from dpcomm.pipeline.runs import (
        AggregateRun as AggregateRun,
        KMeansRun as KMeansRun,
        compare_with_exact as compare_with_exact,
    )
    from dpcomm.plan.countermeasures import (
        LocalFlooding as LocalFlooding,
        NoCountermeasure as NoCountermeasure,
        Scramblers as Scramblers,
    )
    from dpcomm.release.mechanisms import Gaussian as Gaussian, Laplace as Laplace

_exported, _ = attach(__name__, __file__)


def __getattr__(name: str) -> Any:
    """The front door's names, and the ``datasets`` module, imported on first use."""
    if name == "datasets":
        return importlib.import_module("dpcomm.datasets")
    return _exported(name)


def __dir__() -> list[str]:
    """What `__all__` lists, imported or not (tab completion in a notebook)."""
    return sorted(__all__)


__all__ = [
    "AggregateRun",
    "Budget",
    "BudgetExceededError",
    "Calibration",
    "DpcommError",
    "Gaussian",
    "InvalidParameterError",
    "KMeansRun",
    "Laplace",
    "LocalFlooding",
    "LocalRandomizer",
    "NoCountermeasure",
    "ScramblerMechanism",
    "Scramblers",
    "__version__",
    "account",
    "calibrate",
    "compare_with_exact",
    "datasets",
    "kmeans",
    "run_sql",
]
__version__ = "0.1.0"
