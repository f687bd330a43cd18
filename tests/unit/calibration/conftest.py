"""Fixtures of the planner's tests: query programs whose own plans the planner's costs match.

``aggregate_program`` is the suite's (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.conftest import random_aggregate_program

from dpcomm.queries.kmeans import KMeansProgram


def _kmeans_program(rows, centroids, iterations, seed=0):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(rows, 2)) + rng.integers(0, 4, (rows, 1)) * 3.0
    return KMeansProgram(points, centroids, iterations, seed=seed)


@pytest.fixture
def kmeans_program() -> Callable[..., KMeansProgram]:
    """``kmeans_program(rows, centroids, iterations)``: K-means over clustered points."""
    return _kmeans_program


@pytest.fixture
def plan_for() -> Callable[..., Any]:
    """``plan_for(sources=, targets=, clusters=, workload=)``: the program's own plan."""

    def plan(*, sources, targets, clusters, workload):
        if workload == "aggregate":
            program = random_aggregate_program(sources, clusters, targets)
        else:
            program = _kmeans_program(sources, targets, clusters)
        return program.plan

    return plan
