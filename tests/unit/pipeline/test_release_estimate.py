"""Estimates of a noisy release: intervals that cover both the sampling's and the noise's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.engine.engines import MemoryEngine
from dpcomm.errors import InvalidParameterError
from dpcomm.pipeline.estimate import (
    AVG_COUNT_TOO_SMALL,
    AVG_NO_FIT,
    _normal_laplace_tail,
    _two_laplace_tail,
    estimate_name,
    interval_names,
    no_interval_name,
    released_estimate,
    standard_error_name,
)
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.release.noise import noisy_program

SQL = "SELECT k, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS m FROM t GROUP BY k"
#: σ = 0.6 over T = 4 compute nodes: each tuple arrives with P = 1 − σ + σ/T = 0.55.
SAMPLED = dpcomm.Scramblers(sampling_rate=0.6, batch_size=50, num_dummies=2)


@pytest.fixture(scope="module")
def table() -> Any:
    rng = np.random.default_rng(0)
    keys = rng.choice(np.array(["a", "b", "c"], dtype=object), 300, p=[0.5, 0.3, 0.2])
    return table_from_arrays("t", {"k": keys, "v": rng.uniform(0.0, 10.0, 300)})


def released_program(table: Any, sql: str = SQL, release: Any = None) -> AggregateProgram:
    return noisy_program(
        sql, table, num_targets=4, release=release or dpcomm.Laplace(2.0),
        bounds={"v": (0.0, 10.0)} if "(v)" in sql else None, keys={"k": ["a", "b", "c"]},
    )  # fmt: skip


def test_intervals_cover_sampling_and_noise_over_200_seeds(table: Any) -> None:
    """Both errors matter here: Laplace noise (ε 2/3 per aggregate, a count's noise scale
    4.5, sd √2·4.5/P ≈ 11.6) and the sampling's (sd ≈ 11 for a group of 150 rows at
    P = 0.55). Over 1,000 seeds, intervals without the noise covered 88% (COUNT), 83% (SUM),
    70% (AVG), without the sampling's error 88% (COUNT), at a count noise scale of 3; with
    both, at 4.5, 96% (COUNT, SUM, and AVG's Fieller-type interval)."""
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
                # group c here) counts as a miss; it must say why.
                covered = low is not None and low <= truth[row["k"]][name] <= high
                inside[name] += covered
            assert (row["m (95% low)"] is None) == (row[no_interval_name("m")] is not None)
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


def small_groups() -> Any:
    """12 rows per key, 10 keys, values uniform in [0, 10]."""
    rng = np.random.default_rng(0)
    keys = np.array([f"k{i}" for i in range(10)], dtype=object).repeat(12)
    return table_from_arrays("t", {"k": keys, "v": rng.uniform(0.0, 10.0, keys.size)})


def test_avg_intervals_of_small_groups_cover_or_say_why_not() -> None:
    """12 rows per key at P = 0.4 (σ = 0.8, T = 4) with Laplace ε2 = 1: a group delivers ~5
    rows, its count's noise has scale 9 (sd 12.7) and its sum's 90. The delta method's
    ± 1.96 se covered 65% (no interval where the noisy count was ≤ 0, one time in three).
    Now an AVG either has an interval within [lo, hi] or says why not; over 1,000 seeds the
    given ones covered 97.5% (33.5% withheld: 32.5% noisy count ≤ 0, 1% no fit). OpenDP's
    noise is not seeded: the numbers move from run to run."""
    table = small_groups()
    program = noisy_program(
        SQL, table, num_targets=4, release=dpcomm.Laplace(1.0),
        bounds={"v": (0.0, 10.0)}, keys={"k": [f"k{i}" for i in range(10)]},
    )  # fmt: skip
    sampled = dpcomm.Scramblers(sampling_rate=0.8, batch_size=50, num_dummies=2)
    engine = MemoryEngine()
    truth = {row["k"]: row["m"] for row in engine.baseline(program.without_release()).result}
    given = covered = withheld = 0
    for seed in range(200):
        run = engine.execute(program, sampled, seed=seed, delta=None)
        estimate = released_estimate(program, run)
        assert estimate.report.delivery_probability == {"(k)": pytest.approx(0.4)}
        assert no_interval_name("m") in estimate.columns
        for released, row in zip(run.result, estimate.rows, strict=True):
            low, high = (row[c] for c in interval_names("m"))
            reason = row[no_interval_name("m")]
            if low is None:
                withheld += 1
                assert high is None and reason in (AVG_COUNT_TOO_SMALL, AVG_NO_FIT)
                if reason == AVG_COUNT_TOO_SMALL:  # the released AVG is NULL too
                    assert released["m"] is None and row[estimate_name("m")] is None
                continue
            assert reason is None and 0.0 <= low <= high <= 10.0
            given += 1
            covered += low <= truth[row["k"]] <= high
    assert covered / given >= 0.93, (covered, given)
    assert 0.05 <= withheld / (given + withheld) <= 0.6, (withheld, given)  # about 27%
    described = estimate.report.describe()
    assert "m (estimate): no interval (withheld in" in described or withheld == 0


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
