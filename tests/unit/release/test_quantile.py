"""The quantile release's distances, calibration, bins and OpenDP draws."""

from __future__ import annotations

import dataclasses

import pytest

from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.release.mechanisms import release_pld
from dpcomm.release.quantile import (
    bin_of,
    calibrate_quantile,
    candidate_grid,
    expected_squared_error,
    quantile_distance,
    quantile_law,
    quantile_measurement,
    quantile_scores,
    released_quantile,
    representatives,
)


def test_distance_per_view():
    assert quantile_distance([("k",)], ["own-row"]) == 2
    assert quantile_distance([("k",)], ["one-other"]) == 3
    assert quantile_distance([("k",)], ["one-other-shared-node"]) == 3
    assert quantile_distance([()], ["one-other"]) == 2
    assert quantile_distance([("k",), ("k", "j"), ()]) == 8
    with pytest.raises(InvalidParameterError, match="views"):
        quantile_distance([("k",)], [])


@pytest.mark.parametrize("alpha", [0.5, 0.25, 0.9])
def test_calibration_is_opendps_map(alpha):
    candidates = candidate_grid(0.0, 10.0, 11)
    noise = calibrate_quantile("m", 0.7, alpha, candidates, 3)
    assert quantile_measurement(candidates, alpha, noise.scale).map(3) <= 0.7
    assert noise.scale == pytest.approx(2 * max(alpha, 1 - alpha) * 3 / 0.7, rel=1e-9)


def test_bins_keep_the_scores():
    candidates = (0.0, 1.0, 2.5, 4.0)
    values = [-1.0, 0.0, 0.3, 1.0, 2.0, 2.5, 3.9, 4.0, 7.0]
    counts = [0] * 7
    for value in values:
        counts[bin_of(value, candidates)] += 1
    rebuilt = [
        v for v, c in zip(representatives(candidates), counts, strict=True) for _ in range(c)
    ]
    clamped = [min(max(v, 0.0), 4.0) for v in values]
    for alpha in (0.5, 0.25):
        from dpcomm.release import opendp_core as dp

        dp.enable_features("contrib")
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        score = dp.t.make_quantile_score_candidates(
            domain, dp.symmetric_distance(), list(candidates), alpha
        )
        assert score(rebuilt) == score(clamped)
        denominator = 2 if alpha == 0.5 else 4
        assert [s / denominator for s in score(clamped)] == list(quantile_scores(counts, alpha))


def test_release_refuses_a_noise_above_its_map_and_bad_counts():
    candidates = candidate_grid(0.0, 1.0, 2)
    noise = calibrate_quantile("m", 1.0, 0.5, candidates, 2)
    assert released_quantile(noise, [3, 0, 1]) in candidates
    with pytest.raises(InvalidParameterError, match="counts"):
        released_quantile(noise, [1, 2])
    loose = dataclasses.replace(noise, distance=3)  # the scale is for d = 2
    with pytest.raises(DpcommError, match="refusing"):
        released_quantile(loose, [3, 0, 1])


def test_grid_and_composition():
    with pytest.raises(InvalidParameterError, match="bounds"):
        candidate_grid(1.0, 1.0, 3)
    with pytest.raises(InvalidParameterError, match="candidates"):
        candidate_grid(0.0, 1.0, 1)
    noise = calibrate_quantile("m", 1.0, 0.5, candidate_grid(0.0, 1.0, 3), 3)
    assert release_pld([noise]) is not None


def test_expected_error_of_the_model_column():
    """No values: every candidate equally likely; many: the grid's rounding alone; between:
    the exact law's error, falling with the cell's size and growing with the noise."""
    candidates = candidate_grid(0.0, 8.0, 9)
    noise = calibrate_quantile("m", 1.0, 0.25, candidates, 3)
    rounding = 1.0 / 12.0
    uniform = sum((c - 2.0) ** 2 for c in candidates) / 9 + rounding
    assert expected_squared_error(noise, 0.0) == pytest.approx(uniform, rel=1e-12)
    assert expected_squared_error(noise, 1e6) == pytest.approx(rounding, rel=1e-9)
    errors = [expected_squared_error(noise, n) for n in (5.0, 20.0, 80.0)]
    assert errors[0] > errors[1] > errors[2] > rounding
    louder = calibrate_quantile("m", 0.5, 0.25, candidates, 3)
    assert expected_squared_error(louder, 20.0) > errors[1]
    with pytest.raises(InvalidParameterError, match="count"):
        expected_squared_error(noise, -1.0)


def test_the_law_sums_to_one_and_favours_the_true_quantile():
    counts = [0, 3, 0, 1, 0, 4, 0, 0, 2]
    law = quantile_law(counts, 0.5, 0.7)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    assert int(law.argmax()) == int(quantile_scores(counts, 0.5).argmin())
