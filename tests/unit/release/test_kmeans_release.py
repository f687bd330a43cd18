"""K-means released: noisy centred sums and counts per cluster, every iteration."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcomm
from dpcomm.data import table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import NoCountermeasure, Scramblers
from dpcomm.queries.exactsum import exact_row_sums
from dpcomm.queries.kmeans import KMeansProgram
from dpcomm.release import kmeans as released
from dpcomm.release.kmeans import bind_kmeans_release
from dpcomm.release.noise import noisy_program

BOUNDS = [(0.0, 2.0), (-1.0, 5.0)]


def _release(mechanism=None, *, iterations=3, shared_blanket=True):
    return bind_kmeans_release(
        mechanism or dpcomm.Laplace(3.0),
        BOUNDS,
        dimension=2,
        num_iterations=iterations,
        shared_blanket=shared_blanket,
    )


def test_sensitivities_are_the_joint_views_per_cluster_key() -> None:
    """Sums: M = W/2, so one-other is 1.5 W in L1 and √5/2 W in L2, own-row W; counts 2, √2."""
    release = _release()
    assert len(release.noises) == 3 * 3
    for iteration in (1, 2, 3):
        first, second, count = release.iteration_noises(iteration)
        assert (first.sensitivity.l1, first.sensitivity.l2) == (3.0, math.sqrt(5.0))
        assert second.sensitivity.l1 == pytest.approx(9.0)
        assert second.sensitivity.l2 == pytest.approx(3.0 * math.sqrt(5.0))
        assert (count.function, count.integer) == ("count_star", True)
        assert (count.sensitivity.l1, count.sensitivity.l2) == (2.0, math.sqrt(2.0))
        assert first.scale == pytest.approx(first.sensitivity.l1 / first.epsilon)
        assert [n.epsilon for n in release.iteration_noises(iteration)] == [
            n.epsilon for n in release.iteration_noises(1)
        ]  # every iteration alike
    assert release.epsilon == pytest.approx(3.0)
    # The minimum-error split: each sum alike (relative to its own error), the count apart.
    first, second, count = release.iteration_noises(1)
    assert first.epsilon == pytest.approx(second.epsilon)
    assert count.epsilon != pytest.approx(first.epsilon)
    own = _release(shared_blanket=False).iteration_noises(1)
    assert [n.sensitivity.l1 for n in own] == [2.0, 6.0, 2.0]


def test_one_iteration_is_the_sql_release_of_a_centred_sum_and_a_count_per_cluster() -> None:
    """A 1-iteration K-means releases SUM(x − c) and COUNT GROUP BY cluster, one key per node."""
    table = table_from_arrays("t", {"cluster": np.array([0, 1, 0]), "x": np.array([0.5, 1.5, 2.0])})
    program = noisy_program(
        "SELECT cluster, SUM(x), COUNT(x) FROM t GROUP BY cluster",
        table,
        release=dpcomm.Laplace(1.0),
        bounds={"x": (0.0, 2.0)},
        keys={"cluster": [0, 1]},
        num_targets=2,
        countermeasure=Scramblers(sampling_rate=0.3, batch_size=3, num_dummies=1),
    )
    sql = {n.function: n.sensitivity for n in program.release.noises}
    kmeans = bind_kmeans_release(
        dpcomm.Laplace(1.0), [(0.0, 2.0)], dimension=1, num_iterations=1
    ).iteration_noises(1)
    assert (kmeans[0].sensitivity, kmeans[1].sensitivity) == (sql["sum"], sql["count"])


def _sums(points: np.ndarray):
    data = np.asarray(points, dtype=np.float64)
    return exact_row_sums(data, np.zeros(len(data), dtype=np.int64), 1)


def test_noisy_centroid_is_the_clamped_centred_mean_plus_noise(monkeypatch) -> None:
    release = _release()
    points = release.clamp([[3.0, 0.0], [1.0, 4.0], [-1.0, 9.0]])  # clamped: [2, 0] [1, 4] [0, 5]
    monkeypatch.setattr(released, "_noisy", lambda noise, values: values)  # no noise
    monkeypatch.setattr(released, "_noisy_each", lambda noises, values: list(values))
    centroid = release.noisy_centroid(1, _sums(points), np.zeros(2))
    # The centre (1, 2) plus the centred mean (0, 1), shrunk by w_kj (Ñ = 3).
    weights = release.shrinkage(1, 3)
    assert centroid.tolist() == pytest.approx([1.0, 2.0 + weights[1]])
    # A noisy count ≤ 0 keeps the previous centroid.
    monkeypatch.setattr(
        released, "_noisy", lambda noise, values: [v - 10 if noise.integer else v for v in values]
    )
    previous = np.array([0.25, 0.5])
    assert release.noisy_centroid(2, _sums(points), previous).tolist() == [0.25, 0.5]


def test_the_centred_sums_of_neighbours_differ_by_the_sensitivity_near_large_bounds(
    monkeypatch,
) -> None:
    """Σ (x − c) is computed exactly and rounded once, not from the sum rounded first.

    An independent audit's counterexample: bounds m ± 256 at m = 2^60 + 2^36, 257 points at lo
    and 768 at hi against one of the low ones replaced by a high one. The exact centred sums
    are 130,816 and 131,328 (512 apart, within the sensitivity); the sum rounded to a double
    first (a multiple of 2^18 there) gave 0 and 262,144, and the published centroid told the
    two tables apart every time at a claimed ε of 1.
    """
    middle = 2.0**60 + 2.0**36
    release = bind_kmeans_release(
        dpcomm.Laplace(1.0), [(middle - 256.0, middle + 256.0)], dimension=1, num_iterations=1
    )
    drawn: list[list[float]] = []
    monkeypatch.setattr(released, "_noisy", lambda noise, values: values)
    monkeypatch.setattr(
        released, "_noisy_each", lambda noises, values: drawn.append(list(values)) or values
    )
    low, high = 2.0**60, 2.0**60 + 2.0**37
    for num_low in (257, 256):
        points = release.clamp([[low]] * num_low + [[high]] * (1025 - num_low))
        release.noisy_centroid(1, _sums(points), np.array([middle]))
    assert drawn == [[130816.0], [131328.0]]
    sensitivity = release.iteration_noises(1)[0].sensitivity.l1
    assert abs(drawn[0][0] - drawn[1][0]) <= sensitivity


def test_shrinkage_is_the_posterior_weight_of_the_noisy_mean() -> None:
    """w_kj = τ_j² / (τ_j² + (Var Z_S + τ_j² Var Z_N) / Ñ²), τ_j = (hi_j − lo_j)/6."""
    release = _release(iterations=1)
    *sums, count = release.iteration_noises(1)
    prior = np.array([(2.0 / 6.0) ** 2, 1.0])
    assert release.prior_variances.tolist() == pytest.approx(prior.tolist())
    for noisy_count in (1, 7, 1000):
        measured = np.array([s.variance for s in sums]) + prior * count.variance
        expected = prior / (prior + measured / noisy_count**2)
        assert release.shrinkage(1, noisy_count).tolist() == pytest.approx(expected.tolist())
    # Almost no noise: the raw mean; much noise: close to the centre.
    assert _release(dpcomm.Laplace(1e7)).shrinkage(1, 10).min() > 0.999
    assert _release(dpcomm.Laplace(1e-3)).shrinkage(1, 10).max() < 1e-3


def test_coordinates_are_drawn_together_after_each_privacy_map_is_checked() -> None:
    """`_noisy_each`: one noise per value, in order, refused when OpenDP's map exceeds it."""
    from dataclasses import replace

    from dpcomm.errors import DpcommError
    from dpcomm.release.noise import _noisy_each

    first, second, _ = _release(dpcomm.Laplace(1e7), iterations=1).iteration_noises(1)
    assert first.scale != second.scale  # two scales: two draws, the order kept
    drawn = _noisy_each([first, second, first], [1.0, -2.0, 3.0])
    assert drawn == pytest.approx([1.0, -2.0, 3.0], abs=1e-4)
    with pytest.raises(DpcommError, match="refusing to release"):
        _noisy_each([first, replace(second, scale=second.scale / 2)], [0.0, 0.0])


def test_noisy_centroids_are_clamped_and_drawn_by_opendp() -> None:
    release = _release(dpcomm.Laplace(1e-3), iterations=1)  # huge noise
    centroid = release.noisy_centroid(1, _sums([[1.0, 1.0]] * 5), np.zeros(2))
    assert 0.0 <= centroid[0] <= 2.0 and -1.0 <= centroid[1] <= 5.0
    precise = _release(dpcomm.Laplace(1e7), iterations=1)
    centroid = precise.noisy_centroid(1, _sums([[1.0, 1.0], [2.0, 3.0]]), np.zeros(2))
    assert centroid.tolist() == pytest.approx([1.5, 2.0], abs=1e-4)


def test_program_spec_round_trip_rebinds_the_release() -> None:
    points = np.random.default_rng(0).uniform(0.0, 2.0, (12, 2))
    release = _release(dpcomm.Gaussian(2.0, 1e-6), iterations=2)
    program = KMeansProgram(points, 2, 2, seed=1, release=release)
    again = KMeansProgram.from_spec(program.to_spec())
    assert again.release == release
    assert program.without_release().release is None
    assert "released (gaussian)" in program.name


def test_a_release_without_the_shared_blanket_refuses_scramblers_with_sampling() -> None:
    program = KMeansProgram(np.zeros((6, 2)), 2, 1, release=_release(shared_blanket=False))
    program.check_countermeasures(NoCountermeasure())
    with pytest.raises(InvalidParameterError, match="countermeasure"):
        program.check_countermeasures(Scramblers(sampling_rate=0.5, batch_size=3))


def test_a_huge_release_epsilon_is_composed_by_the_sum_alone() -> None:
    # Shares beyond what dp_accounting's pairs can represent (e^ε overflows): the sum holds.
    from dpcomm.plan.privacy import account_plan
    from dpcomm.release.compose import PLD_MAX_EPSILON, compose_release

    release = bind_kmeans_release(
        dpcomm.Laplace(1e9), [(-1.0, 1.0)] * 2, dimension=2, num_iterations=2
    )
    assert max(n.epsilon for n in release.noises) > PLD_MAX_EPSILON
    program = KMeansProgram(np.zeros((20, 2)), 2, 2, initial=np.array([[0.0, 0.0], [1.0, 1.0]]))
    plan = account_plan(program.plan, Scramblers(sampling_rate=0.5, batch_size=10), delta=1e-4)
    both = compose_release(plan, release.noises)
    assert both.composed_epsilon is None
    assert both.epsilon == both.summed_epsilon == pytest.approx(plan.guarantee.epsilon + 1e9)
