"""The release's ε split among its aggregates to minimise the expected error."""

from __future__ import annotations

import math

import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.release.mechanisms import minimum_error_split, published_error_costs, rho_for


def _laplace_error(costs: list[float], shares: list[float]) -> float:
    return sum(c * 2.0 / e**2 for c, e in zip(costs, shares, strict=True))


def _gaussian_error(costs: list[float], shares: list[float], delta: float) -> float:
    k = len(costs)
    return sum(c / (2.0 * rho_for(e, delta / k)) for c, e in zip(costs, shares, strict=True))


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_the_split_sums_to_epsilon_and_beats_every_nearby_split(delta: float) -> None:
    costs = [16e6, 5.3e6, 4.0]
    shares = list(minimum_error_split(1.0, costs, delta=delta))
    assert math.fsum(shares) == pytest.approx(1.0, rel=1e-12) and all(e > 0 for e in shares)

    def error(split: list[float]) -> float:
        if delta == 0.0:
            return _laplace_error(costs, split)
        return _gaussian_error(costs, split, delta)

    best = error(shares)
    assert best < error([1.0 / 3.0] * 3)
    for i in range(3):
        for j in range(3):
            if i != j:
                moved = list(shares)
                moved[i] += 1e-3
                moved[j] -= 1e-3
                assert error(moved) >= best


def test_laplace_shares_follow_the_cube_roots() -> None:
    assert minimum_error_split(3.0, [1.0, 8.0, 27.0]) == pytest.approx((0.5, 1.0, 1.5))
    assert minimum_error_split(2.0, [5.0, 5.0]) == pytest.approx((1.0, 1.0))


def test_costs_of_an_average_and_its_shared_count() -> None:
    """AVG(x) = c + S/C over [2500, 6500] (own row: K_S = 4000², K_C = 2²), the COUNT also
    published: the COUNT's weight adds up over the two values that read it."""
    half = 2000.0
    average = [(0, 1.0), (1, half**2 / 3.0)]
    count = [(1, 1.0)]
    alone = published_error_costs([average], [4000.0**2, 4.0])
    shared = published_error_costs([average, count], [4000.0**2, 4.0])
    assert alone[0] + alone[1] == pytest.approx(1.0)
    assert shared[0] == alone[0] and shared[1] == pytest.approx(alone[1] + 1.0)
    split = minimum_error_split(1.0, list(alone))
    assert split[0] > 0.5  # the centred sum's noise dominates the average's error
    unused = published_error_costs([count], [4000.0**2, 4.0])
    assert unused[0] == 1.0  # an aggregate no value reads weighs as a value of its own


def test_invalid_costs_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="costs"):
        minimum_error_split(1.0, [1.0, 0.0])
    with pytest.raises(InvalidParameterError, match="costs"):
        minimum_error_split(1.0, [])
    with pytest.raises(InvalidParameterError, match="uses"):
        published_error_costs([[(0, -1.0)]], [1.0])


def test_the_query_records_what_each_published_value_reads():
    """COUNT(*) reads itself; SUM(v) beside AVG(v) is centred on c = 0.5 (the COUNT(v) with
    c²); AVG(v) the sum and the COUNT with (hi − lo)²/12; the split follows."""
    import numpy as np

    import dpcomm
    from dpcomm.data import table_from_arrays
    from dpcomm.release.noise import noisy_program

    table = table_from_arrays("t", {"k": np.arange(20) % 2, "v": np.linspace(0.0, 1.0, 20)})
    sql = "SELECT k, COUNT(*) AS c, SUM(v) AS s, AVG(v) AS a FROM t GROUP BY k"
    program = noisy_program(
        sql, table, release=dpcomm.Laplace(1.0), keys={"k": [0, 1]}, bounds={"v": (0.0, 1.0)}
    )
    assert program.release is not None
    star, total, count = (
        next(n.output for n in program.release.noises if n.function == function)
        for function in ("count_star", "sum", "count")
    )
    assert program.query.value_uses == (
        ((star, 1.0),),
        ((total, 1.0), (count, 0.25)),
        ((total, 1.0), (count, 1.0 / 12.0)),
    )
    shares = {n.output: n.epsilon for n in program.release.noises}
    assert math.fsum(shares.values()) <= 1.0
    assert shares[count] < shares[star] < shares[total]  # COUNT(v) is only a correction
