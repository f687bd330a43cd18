"""The release numbers of ``dpcomm explore``: a noisy release beside the traffic, and a budget.

The explorer's Aggregate workload (G grouping sets of the synthetic table's columns over S
rows, `dpcomm.data.synthetic.synthetic_sql`) published with central DP: ``COUNT(*)`` and
``AVG(m1)`` for every key of each grouping set (every column's 20 intervals are its public
domain), ``m1`` clamped to the release's bounds [lo, hi]. `release_numbers` binds that
release as `dpcomm.run_sql` does (the two steps of `dpcomm.pipeline.job.compile_aggregate`:
the query compiled with the bounds, then `dpcomm.pipeline.job.ReleaseSpec.bind` with the
configuration's countermeasure, which sets the sensitivities of its joint view) and reports
it as a run would before drawing any noise (`dpcomm.pipeline.runs.planned_release`: ε2 and
each aggregate's noise, and the guarantee of traffic and release together, what a run reports
and a budget is charged), with the expected relative error of the published values
(`dpcomm.calibration.split.expected_relative_error`, the model `dpcomm.calibrate` minimises).

`ledger_numbers` reads a budget's ledger (`dpcomm.budget.Budget`): what it has spent, what
is left, and whether a run of a given guarantee would be charged or refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from dpcomm.budget.budget import Budget
from dpcomm.budget.composition import Spent, admits
from dpcomm.calibration.split import expected_relative_error, release_shape
from dpcomm.data.synthetic import SYNTHETIC_GROUPING_COLUMNS, SyntheticRows, synthetic_sql
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.explore import ExplorerSettings
from dpcomm.pipeline.job import ReleaseSpec
from dpcomm.pipeline.runs import planned_release
from dpcomm.validation import check_delta, check_number

if TYPE_CHECKING:
    from dpcomm.release.report import ReleaseReport

ReleaseKind = Literal["none", "laplace", "gaussian"]

#: The measure the released AVG reads (N(50 + 50·g/19, 10²) in the synthetic table).
RELEASED_MEASURE = "m1"
#: Each synthetic grouping column's public key domain: its intervals 0..19.
SYNTHETIC_KEYS = tuple(range(20))
#: The largest ε2 the explorer takes (as `dpcomm.Laplace`).
MAX_RELEASE_EPSILON = 200.0


@dataclass(frozen=True, kw_only=True)
class ReleaseSettings:
    """The explorer's release controls.

    Attributes:
        mechanism: ``"none"`` (the exact result, not published with DP), ``"laplace"`` or
            ``"gaussian"``.
        epsilon: ε2 of the release.
        delta: δ2 of the release (the Gaussian's; a Laplace release has δ2 = 0).
        low: lo, the lower bound each source clamps ``m1`` to.
        high: hi, the upper bound.
    """

    mechanism: ReleaseKind = "laplace"
    epsilon: float = 1.0
    delta: float = 1e-6
    low: float = 0.0
    high: float = 150.0

    def __post_init__(self) -> None:
        if self.mechanism not in ("none", "laplace", "gaussian"):
            raise InvalidParameterError(
                "release mechanism", "'none', 'laplace' or 'gaussian'", self.mechanism
            )
        set_field = object.__setattr__
        epsilon = check_number("ε2", self.epsilon, above=0.0, at_most=MAX_RELEASE_EPSILON)
        set_field(self, "epsilon", epsilon)
        delta = check_delta("δ2", self.delta)
        if self.mechanism == "gaussian" and delta <= 0.0:
            raise InvalidParameterError("δ2", "a number in (0, 1) for a Gaussian release", delta)
        set_field(self, "delta", delta)
        low = check_number("lo", self.low)
        high = check_number("hi", self.high)
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise InvalidParameterError("bounds", "finite lo <= hi", f"[{low}, {high}]")
        set_field(self, "low", low)
        set_field(self, "high", high)


@dataclass(frozen=True)
class ReleaseNumbers:
    """The release of one configuration, as a run would report it before drawing noise.

    Attributes:
        sql: the query released (COUNT(*) and AVG(m1) for every key).
        traffic_epsilon: ε1, the traffic's guarantee at the plan's δ1.
        report: the release's report, as a run gives it: ε2, δ2,
            every aggregate's sensitivity, share of ε2 and noise, and the guarantee of traffic
            and release together (``epsilon_total`` at ``composed_delta``).
        expected_relative_error: the root mean square relative error of the published
            COUNT and SUM values, noise and sampling (`expected_relative_error`).
    """

    sql: str
    traffic_epsilon: float
    report: ReleaseReport
    expected_relative_error: float


def release_sql(num_grouping_sets: int) -> str | None:
    """The released query: the Run-it query with ``AVG(m1)`` (None beyond 15 grouping sets)."""
    sql = synthetic_sql(num_grouping_sets)
    if sql is None:
        return None
    return sql.replace(
        "COUNT(*) AS n_rows", f"COUNT(*) AS n_rows, AVG({RELEASED_MEASURE}) AS mean_m1", 1
    )


@lru_cache(maxsize=64)
def _compiled(sql: str, num_sources: int, num_targets: int, low: float, high: float) -> Any:
    """The released query compiled over S synthetic rows, ``m1`` clamped (no release bound).

    The first step of `dpcomm.pipeline.job.compile_aggregate`, cached: moving a traffic control
    or ε2 binds the release again (its second step), not the query.
    """
    from dpcomm.queries.aggregate import AggregateProgram

    return AggregateProgram.from_sql(
        sql,
        SyntheticRows(num_sources, seed=0, name="t"),
        bounds={RELEASED_MEASURE: (low, high)},
        num_targets=num_targets,
    )


@lru_cache(maxsize=256)
def release_numbers(settings: ExplorerSettings, release: ReleaseSettings) -> ReleaseNumbers:
    """The release of ``settings``' Aggregate under ``release`` (module doc), cached.

    Raises `InvalidParameterError` for K-means, more than 15 grouping sets or no release.
    """
    if settings.workload != "aggregate":
        raise InvalidParameterError(
            "workload", "aggregate (a release publishes its result)", "kmeans"
        )
    if release.mechanism == "none":
        raise InvalidParameterError("release mechanism", "'laplace' or 'gaussian'", "none")
    sql = release_sql(settings.num_clusters)
    if sql is None:
        raise InvalidParameterError(
            "G grouping sets", "at most 15 (the synthetic table's)", settings.num_clusters
        )
    import dpcomm

    mechanism = (
        dpcomm.Laplace(release.epsilon)
        if release.mechanism == "laplace"
        else dpcomm.Gaussian(release.epsilon, release.delta)
    )
    spec = ReleaseSpec(
        mechanism,
        bounds={RELEASED_MEASURE: (release.low, release.high)},
        keys={c: SYNTHETIC_KEYS for c in SYNTHETIC_GROUPING_COLUMNS if c in sql},
    )
    compiled = _compiled(sql, settings.num_sources, settings.num_targets, release.low, release.high)
    program = spec.bind(compiled, settings.countermeasure)
    guarantee, report = planned_release(program, settings.countermeasure, delta=settings.delta)
    assert program.release is not None  # bound with a mechanism above
    return ReleaseNumbers(
        sql=sql,
        traffic_epsilon=guarantee.traffic.guarantee.epsilon,
        report=report,
        expected_relative_error=expected_relative_error(
            release_shape(program),
            (*program.release.noises, *program.release.quantiles),
            sampling_rate=settings.sampling_rate,
        ),
    )


@dataclass(frozen=True)
class LedgerNumbers:
    """A budget's ledger as the explorer shows it.

    Attributes:
        path: the ledger file.
        budget: its budget (ε, δ).
        spent: what its charges have spent (`dpcomm.budget.composition.Spent`).
        remaining: the (ε, δ) left.
        admits: whether a run of the guarantee asked about would be charged (None: none asked).
    """

    path: str
    budget: tuple[float, float]
    spent: Spent
    remaining: tuple[float, float]
    admits: bool | None


def ledger_numbers(path: str, run: tuple[float, float] | None = None) -> LedgerNumbers:
    """The ledger at ``path`` (opened, never written) and whether ``run`` = (ε, δ) fits it."""
    budget = Budget(ledger=path)
    charges = budget.charges()
    fits = None
    if run is not None:
        fits = admits((budget.epsilon, budget.delta), [(c.epsilon, c.delta) for c in charges], run)
    return LedgerNumbers(
        path=str(budget.ledger),
        budget=(budget.epsilon, budget.delta),
        spent=budget.spent(),
        remaining=budget.remaining(),
        admits=fits,
    )
