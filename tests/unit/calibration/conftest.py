"""Fixtures of the planner's tests: query programs whose own plans the planner's costs match."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpcomm.data import table_from_arrays
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.kmeans import KMeansProgram


def _aggregate_program(rows, grouping_sets, compute, seed=0):
    rng = np.random.default_rng(seed)
    columns = {f"g{i}": rng.integers(0, 3 * compute, rows) for i in range(grouping_sets)}
    columns["x"] = rng.normal(size=rows)
    sets = ", ".join(f"(g{i})" for i in range(grouping_sets))
    sql = f"SELECT COUNT(*), AVG(x) FROM t GROUP BY GROUPING SETS ({sets})"
    return AggregateProgram.from_sql(sql, table_from_arrays("t", columns), num_targets=compute)


def _kmeans_program(rows, centroids, iterations, seed=0):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(rows, 2)) + rng.integers(0, 4, (rows, 1)) * 3.0
    return KMeansProgram(points, centroids, iterations, seed=seed)


@pytest.fixture
def aggregate_program() -> Callable[..., AggregateProgram]:
    """``aggregate_program(rows, grouping_sets, compute)``: GROUPING SETS over random data."""
    return _aggregate_program


@pytest.fixture
def kmeans_program() -> Callable[..., KMeansProgram]:
    """``kmeans_program(rows, centroids, iterations)``: K-means over clustered points."""
    return _kmeans_program


@pytest.fixture
def plan_for() -> Callable[..., Any]:
    """``plan_for(sources=, targets=, clusters=, workload=)``: the program's own plan."""

    def plan(*, sources, targets, clusters, workload):
        if workload == "aggregate":
            program = _aggregate_program(sources, clusters, targets)
        else:
            program = _kmeans_program(sources, targets, clusters)
        return program.plan

    return plan
