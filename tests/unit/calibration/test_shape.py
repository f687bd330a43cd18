"""What a calibration is made for: the plan's shape, read from the plan a query compiles to."""

from __future__ import annotations

import numpy as np
import pytest

from dpcomm.calibration import PlanRequest, PlanShape, plan_costs, request_plan
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import Scramblers, account_plan
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram


def rollup_program(rows: int = 60, num_targets: int = 4) -> AggregateProgram:
    rng = np.random.default_rng(0)
    table = table_from_arrays("t", {"a": rng.integers(0, 5, rows), "b": rng.integers(0, 3, rows)})
    sql = "SELECT a, b, COUNT(*) FROM t GROUP BY ROLLUP(a, b)"
    return AggregateProgram.from_sql(sql, table, num_targets=num_targets)


def test_the_empty_grouping_set_is_free_not_composed():
    shape = PlanShape.of_plan(rollup_program().plan, workload="aggregate")
    assert shape.num_sources == 60 and shape.num_targets == 4
    assert shape.clusters == ("(a)", "(a, b)") and shape.num_clusters == 2
    assert shape.free_clusters == ("()",)
    assert shape.describe() == (
        "60 sources, 2 data-dependent grouping sets of T = 4 ((a), (a, b)); "
        "() is free (one compute node)"
    )


def test_kmeans_iterations_are_its_clusters():
    points = np.random.default_rng(0).normal(size=(40, 2))
    shape = PlanShape.of_plan(KMeansProgram(points, 3, 2, seed=0).plan, workload="kmeans")
    assert (shape.num_sources, shape.num_targets, shape.num_clusters) == (40, 3, 2)
    assert shape.free_clusters == ()
    assert shape.describe() == "40 sources, 2 data-dependent iterations of T = 3"


def test_same_accounting_ignores_names_and_free_clusters():
    from_query = PlanShape.of_plan(rollup_program().plan, workload="aggregate")
    by_hand = PlanShape.of_plan(
        request_plan(workload="aggregate", num_sources=60, num_targets=4, num_clusters=2),
        workload="aggregate",
    )
    assert from_query.same_accounting(by_hand)
    other_size = PlanShape.of_plan(rollup_program(rows=61).plan, workload="aggregate")
    assert not from_query.same_accounting(other_size)


def test_the_planners_plan_with_free_clusters_is_the_querys():
    """Costed and accounted on the plan the query runs: the empty set's messages and its
    compute node's channels are counted; its ε is 0, so the guarantee is unchanged."""
    program = rollup_program()
    scramblers = Scramblers(sampling_rate=0.2, batch_size=30, num_dummies=5)
    costs = plan_costs(
        scramblers, num_sources=60, num_targets=4, workload="aggregate", num_clusters=2,
        free_clusters=1,
    )  # fmt: skip
    without = plan_costs(
        scramblers, num_sources=60, num_targets=4, workload="aggregate", num_clusters=2
    )
    from dpcomm.plan import transform

    ran = transform(program.plan, scramblers)
    assert costs.messages == ran.messages == without.messages + 60 + 1
    assert costs.max_channels == max(ran.channels_by_role().values())
    planned = request_plan(
        workload="aggregate", num_sources=60, num_targets=4, num_clusters=2, free_clusters=1
    )
    assert account_plan(planned, scramblers, delta=1e-4).guarantee.epsilon == pytest.approx(
        account_plan(program.plan, scramblers, delta=1e-4).guarantee.epsilon, rel=1e-12
    )


def test_free_clusters_are_for_aggregate_plans_only():
    common = {"num_sources": 10, "num_targets": 3, "num_clusters": 1, "epsilon": 1.0}
    with pytest.raises(InvalidParameterError, match="free_clusters"):
        PlanRequest(**common, workload="kmeans", delta=1e-4, free_clusters=1)
    with pytest.raises(InvalidParameterError, match="free_clusters"):
        PlanRequest(**common, workload="aggregate", delta=1e-4, free_clusters=-1)
