"""Estimates of a noisy release: intervals that cover both the sampling's and the noise's errors.

Their coverage over 200 seeds each (about 8 s of CPU) is checked in
tests/reference/test_release_coverage.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.conftest import RELEASE_SQL, release_sampling, release_table, released_program

import dpcomm
from dpcomm.engine.engines import MemoryEngine
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.estimate import (
    _normal_laplace_tail,
    _two_laplace_half_width,
    _two_laplace_tail,
    _two_laplace_tail_at,
    estimate_name,
    interval_names,
    no_interval_name,
    released_estimate,
    standard_error_name,
)

SQL = RELEASE_SQL
SAMPLED = release_sampling()


@pytest.fixture(scope="module")
def table() -> Any:
    return release_table()


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


def test_normal_and_laplace_tails_in_closed_form() -> None:
    """The tail at release.half_width's quantile is 5%; two Laplace errors' tail is their
    densities' signed mixture (equal scales: ½ (2 + h/b) e^(−h/b), met from above)."""
    from dpcomm.release.mechanisms import half_width

    for s, b in ((1.0, 1.0), (0.1, 5.0), (5.0, 0.1), (0.0, 2.0), (2.0, 0.0)):
        h = half_width(normal_sd=s, laplace_scale=b)
        assert _normal_laplace_tail(np.array(s), np.array(b), np.array(h)) == pytest.approx(0.05)
    h = np.array([0.5, 3.0, 6.0])
    equal = 0.5 * (2.0 + h / 2.0) * np.exp(-h / 2.0)
    tail = _two_laplace_tail(np.zeros(3), np.full(3, 2.0), np.full(3, 2.0), h)
    assert np.all(tail >= equal) and tail == pytest.approx(equal, rel=2e-3)
    lone = _two_laplace_tail(np.array(1.5), np.array(3.0), np.array(0.0), np.array(4.0))
    assert lone == pytest.approx(_normal_laplace_tail(np.array(1.5), np.array(3.0), 4.0))
    # Against a draw of 400,000: N(0, 1) + Laplace(2) + Laplace(3) beyond 6.
    rng = np.random.default_rng(0)
    draws = rng.normal(0, 1, 400_000) + rng.laplace(0, 2, 400_000) + rng.laplace(0, 3, 400_000)
    mixed = _two_laplace_tail(np.array(1.0), np.array(2.0), np.array(3.0), np.array(6.0))
    assert float(mixed) == pytest.approx(float(np.mean(np.abs(draws) > 6.0)), abs=3e-3)


def test_the_tail_of_one_point_is_the_arrays_bit_for_bit() -> None:
    """The root search of a centred sum's half-width evaluates the tail in numpy scalars: the
    same operations as the vectorized tail, so the same bits, edges included (zero, tiny and
    huge scales, h <= 0); the half-width is where that tail is 5%."""
    import itertools

    values = [0.0, 1e-300, 1e-3, 0.3, 1.0, 2.5, 9.0, 1e5, 1e200]
    with np.errstate(all="ignore"):
        for s, b1, b2, h in itertools.product(values, values, values, [*values, -1.0]):
            whole = _two_laplace_tail(np.array([s]), np.array([b1]), np.array([b2]), h)[0]
            one = _two_laplace_tail_at(*(np.float64(v) for v in (s, b1, b2, h)))
            assert whole == one or (np.isnan(whole) and np.isnan(one)), (s, b1, b2, h)
    for sd, first, second in ((0.0, 2.0, 3.0), (4.0, 9.0, 1.0), (10.0, 0.5, 0.0)):
        width = _two_laplace_half_width(sd, first, second)
        tail = _two_laplace_tail(np.array(sd), np.array(first), np.array(second), width)
        assert float(tail) == pytest.approx(0.05, abs=1e-9)


def test_one_p_value_of_an_avg_is_the_arrays_bit_for_bit() -> None:
    """The interval's ends are searched one candidate R at a time in numpy scalars: the same
    bits as the vectorized p-values (Laplace and Gaussian noise, integer or not)."""
    from dpcomm.pipeline.estimate import _Ratio
    from dpcomm.release.mechanisms import AggregateNoise, Sensitivity

    def noise(delta: float, integer: bool, scale: float) -> AggregateNoise:
        return AggregateNoise(
            epsilon=1.0, delta=delta, output="x", function="sum",
            sensitivity=Sensitivity(1.0, 1.0), scale=scale, integer=integer,
        )  # fmt: skip

    ratios = np.linspace(-3.0, 12.0, 61)
    for delta, integer in ((0.0, False), (0.0, True), (1e-6, False), (1e-6, True)):
        for total, count, p in ((40.0, 8.0, 0.4), (-5.0, 0.5, 0.9), (300.0, 31.0, 1.0)):
            test = _Ratio(total, count, p, noise(delta, False, 9.0), noise(delta, integer, 2.5),
                          0.0, 10.0)  # fmt: skip
            whole = test.p_values(ratios)
            with np.errstate(all="ignore"):
                one = [test.p_value_at(float(r)) for r in ratios]
            assert whole.tolist() == one, (delta, integer, total, count, p)


def test_large_groups_keep_a_delta_method_sized_avg_interval(table: Any) -> None:
    """With many delivered rows the Fieller-type interval is about estimate ± 1.96 se."""
    program = released_program(table, release=dpcomm.Laplace(50.0))
    run = MemoryEngine().execute(program, SAMPLED, seed=4, delta=None)
    for row in released_estimate(program, run).rows:
        value, error = row[estimate_name("m")], row[standard_error_name("m")]
        low, high = (row[c] for c in interval_names("m"))
        assert row[no_interval_name("m")] is None
        assert value - 2.5 * error < low < value - 1.2 * error
        assert value + 1.2 * error < high < value + 2.5 * error
