"""Estimates of a noisy release: intervals that cover both the sampling's and the noise's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.engine.engines import MemoryEngine
from dpcomm.engine.estimate import (
    estimate_name,
    interval_names,
    released_estimate,
    standard_error_name,
)
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT k, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS m FROM t GROUP BY k"
#: σ = 0.6 over T = 4 compute nodes: each tuple arrives with P = 1 − σ + σ/T = 0.55.
SAMPLED = dpcomm.Scramblers(sampling_rate=0.6, batch_size=50, num_dummies=2)


@pytest.fixture(scope="module")
def table() -> Any:
    rng = np.random.default_rng(0)
    keys = rng.choice(np.array(["a", "b", "c"], dtype=object), 300, p=[0.5, 0.3, 0.2])
    return table_from_arrays("t", {"k": keys, "v": rng.uniform(0.0, 10.0, 300)})


def released_program(table: Any, sql: str = SQL, release: Any = None) -> AggregateProgram:
    return AggregateProgram.from_sql(
        sql, table, num_targets=4, release=release or dpcomm.Laplace(2.0),
        bounds={"v": (0.0, 10.0)} if "(v)" in sql else None, keys={"k": ["a", "b", "c"]},
    )  # fmt: skip


def test_intervals_cover_sampling_and_noise_over_200_seeds(table: Any) -> None:
    """Both errors matter here: Laplace noise (ε 2/3 per aggregate, a count's noise sd
    √2·3/P ≈ 7.7) and the sampling's (sd ≈ 11 for a group of 150 rows at P = 0.55). Over
    1,000 seeds, intervals without the noise covered 88% (COUNT), 83% (SUM), 70% (AVG);
    without the sampling's error 88% (COUNT); with both, 96%."""
    program = released_program(table)
    engine = MemoryEngine()
    exact = engine.baseline(program.without_release(), seed=0)
    truth = {row["k"]: row for row in exact.result}
    inside = {"n": 0, "s": 0, "m": 0}
    trials = 0
    for seed in range(200):
        run = engine.execute(program, SAMPLED, seed=seed, delta=None)
        estimate = released_estimate(program, run)
        for row in estimate.rows:
            trials += 1
            for name in inside:
                low, high = (row[c] for c in interval_names(name))
                # No interval (an AVG whose noisy count is ≤ 0: about once in 10^5 rows of
                # group c here) counts as a miss.
                covered = low is not None and low <= truth[row["k"]][name] <= high
                inside[name] += covered
    coverage = {name: count / trials for name, count in inside.items()}
    assert all(value >= 0.93 for value in coverage.values()), coverage
    assert sum(inside.values()) / (3 * trials) <= 0.99, coverage  # not needlessly wide


def test_estimates_are_the_released_values_over_p(table: Any) -> None:
    """Only released values enter: COUNT and SUM are the released ones over P, AVG the
    released ratio, and the standard error is at least the noise's over P."""
    program = released_program(table)
    run = MemoryEngine().execute(program, SAMPLED, seed=1, delta=None)
    estimate = released_estimate(program, run)
    assert estimate.report.delivery_probability == {"(k)": pytest.approx(0.55)}
    release = program.release
    assert release is not None
    noises = {n.function: n for n in release.noises}
    for released, row in zip(run.result, estimate.rows, strict=True):
        assert row[estimate_name("n")] == pytest.approx(released["n"] / 0.55)
        assert row[estimate_name("s")] == pytest.approx(released["s"] / 0.55)
        assert row[estimate_name("m")] == pytest.approx(released["m"])
        assert row[standard_error_name("n")] >= noises["count_star"].standard_deviation / 0.55
        assert row[standard_error_name("s")] >= noises["sum"].standard_deviation / 0.55
    assert estimate.report.noise is not None and "noise" in estimate.report.describe()


def test_gaussian_errors_and_an_expression_left_as_released(table: Any) -> None:
    program = released_program(
        table, "SELECT k, COUNT(*) AS n, SUM(v) / COUNT(*) AS r FROM t GROUP BY k",
        dpcomm.Gaussian(2.0, 1e-6),
    )  # fmt: skip
    run = MemoryEngine().execute(program, SAMPLED, seed=2, delta=None)
    estimate = released_estimate(program, run)
    assert estimate.columns == ("k", "n (estimate)", "n (se)", "n (95% low)", "n (95% high)", "r")
    assert estimate.report.delivered_columns == ("r",)
    for released, row in zip(run.result, estimate.rows, strict=True):
        assert row["r"] == released["r"]
        _, high = (row[c] for c in interval_names("n"))
        error = row[standard_error_name("n")]
        # The normal with both variances, one count (1/P) wider for the discrete Gaussian.
        assert high - row[estimate_name("n")] == pytest.approx(1.959964 * error + 1 / 0.55)


def test_filtered_or_ordered_releases_are_not_estimated(table: Any) -> None:
    program = released_program(table, "SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY n")
    run = MemoryEngine().execute(program, SAMPLED, seed=3, delta=None)
    with pytest.raises(InvalidParameterError, match="ORDER BY"):
        released_estimate(program, run)
