"""The split of (ε, δ) between traffic and release: the error model and the search."""

from __future__ import annotations

import math

import pytest

from dpcomm.calibration import plan_countermeasures
from dpcomm.calibration.split import (
    ReleaseShape,
    expected_relative_error,
    split_budget,
)
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.release.compose import compose_release
from dpcomm.release.mechanisms import Laplace, Sensitivity, calibrate_noise

# COUNT(*) and SUM(x clamped to [0, 10]) over GROUP BY k (4 keys, T = 5) of 400 rows.
SHAPE = ReleaseShape(
    num_rows=400,
    aggregates=(
        ("n", "count_star", Sensitivity(2.0, math.sqrt(2.0))),
        ("s", "sum", Sensitivity(20.0, math.sqrt(200.0))),
    ),
    magnitudes=(1.0, 5.0),
    grouping_sets=((4, 5),),
)


def test_the_error_of_noise_alone_is_its_deviation_over_the_typical_cell():
    noises = calibrate_noise(Laplace(1.0), SHAPE.aggregates)
    # Laplace scale L1 / (ε/2): 4 for the COUNT, 40 for the SUM; 100 rows per cell.
    count, total = math.sqrt(2.0) * 4.0 / 100.0, math.sqrt(2.0) * 40.0 / (100.0 * 5.0)
    expected = math.sqrt((count**2 + total**2) / 2.0)
    got = expected_relative_error(SHAPE, noises, sampling_rate=0.0)
    assert got == pytest.approx(expected, rel=1e-12)


def test_sampling_adds_the_lost_tuples_bias_and_variance():
    noises = calibrate_noise(Laplace(1.0), SHAPE.aggregates)
    arrives = 1.0 - 0.5 + 0.5 / 5  # P = 1 − σ + σ/T
    sampling = (1.0 - arrives) ** 2 + arrives * (1.0 - arrives) / 100.0
    noise_only = expected_relative_error(SHAPE, noises, sampling_rate=0.0)
    got = expected_relative_error(SHAPE, noises, sampling_rate=0.5)
    assert got == pytest.approx(math.sqrt(noise_only**2 + sampling), rel=1e-12)


def test_a_grouping_set_of_one_target_loses_nothing_to_sampling():
    shape = ReleaseShape(
        num_rows=400,
        aggregates=SHAPE.aggregates[:1],
        magnitudes=(1.0,),
        grouping_sets=((1, 1),),
    )
    noises = calibrate_noise(Laplace(1.0), shape.aggregates)
    assert expected_relative_error(shape, noises, sampling_rate=0.9) == pytest.approx(
        math.sqrt(2.0) * 2.0 / 400.0
    )


def test_a_shape_without_aggregates_is_refused():
    with pytest.raises(InvalidParameterError, match="magnitudes"):
        ReleaseShape(num_rows=10, aggregates=(), magnitudes=(), grouping_sets=((1, 1),))


def _planner(**limits):
    def plan(epsilon, delta):
        return plan_countermeasures(
            num_sources=400,
            num_targets=5,
            epsilon=epsilon,
            delta=delta,
            grouping_sets=1,
            max_extra_consents=0,
            **limits,
        )

    return plan


def test_the_split_is_within_the_target_and_spends_it():
    split = split_budget(
        shape=SHAPE, release="laplace", epsilon=1.0, delta=1e-4, plan_traffic=_planner()
    )
    both = split.composition
    assert both.epsilon <= 1.0 and both.delta <= 1e-4
    assert both.epsilon > 0.99  # the release took what the traffic left (to 0.1% of ε)
    # The guarantee is the one compose_release gives for the traffic's own account.
    again = compose_release(split.traffic.privacy, calibrate_noise(split.release, SHAPE.aggregates))
    assert again == both


def test_a_load_limit_moves_the_split_towards_the_traffic_and_the_error_up():
    free = split_budget(
        shape=SHAPE, release="laplace", epsilon=1.0, delta=1e-4, plan_traffic=_planner()
    )
    load = free.traffic.network_load_messages
    limited = split_budget(
        shape=SHAPE,
        release="laplace",
        epsilon=1.0,
        delta=1e-4,
        plan_traffic=_planner(max_messages=load // 2),
    )
    assert limited.traffic.network_load_messages <= load // 2
    assert limited.chosen.traffic_share > free.chosen.traffic_share
    assert limited.release.epsilon < free.release.epsilon
    assert limited.expected_relative_error > free.expected_relative_error
    # The shares below the chosen one are infeasible, and say why.
    below = [p for p in limited.points if p.traffic_share < limited.chosen.traffic_share]
    assert below and all(p.traffic is None and "max_messages" in p.infeasible for p in below)


def test_the_gaussian_split_shares_delta():
    split = split_budget(
        shape=SHAPE, release="gaussian", epsilon=1.0, delta=1e-4, plan_traffic=_planner()
    )
    both = split.composition
    assert split.traffic.delta + both.release_delta == both.delta <= 1e-4
    assert both.release_delta == pytest.approx(5e-5, rel=1e-6)
    assert both.epsilon <= 1.0


def test_no_feasible_share_says_why():
    with pytest.raises(DpcommError, match=r"even ε1 ≤ 0\.95.*max_messages"):
        split_budget(
            shape=SHAPE,
            release="laplace",
            epsilon=1.0,
            delta=1e-4,
            plan_traffic=_planner(max_messages=10),
        )
