"""Inverting δ(ε): valid answers within the tolerance, in few evaluations of a smooth bound."""

from __future__ import annotations

import math

import pytest

from dpcomm.accounting.search import epsilon_for_delta, lower_epsilon_for_delta

TOLERANCE = 1e-6


class Counted:
    """A δ(ε) curve that counts its evaluations."""

    def __init__(self, curve):
        self.curve = curve
        self.calls = 0

    def __call__(self, epsilon: float) -> float:
        self.calls += 1
        return self.curve(epsilon)


def gaussian_like(epsilon: float) -> float:
    return math.exp(-((epsilon + 0.3) ** 2) * 4.0)


def with_a_floor(epsilon: float) -> float:
    return 0.0 if epsilon >= 2.0 else 0.5 * (1.0 - epsilon / 2.0) ** 3


@pytest.mark.parametrize("curve", [gaussian_like, with_a_floor], ids=lambda c: c.__name__)
@pytest.mark.parametrize("target", [1e-12, 1e-6, 1e-3, 0.1])
@pytest.mark.parametrize("hints", [(None, None), (0.2, 5.0), (None, 3.0), (4.0, 5.0)])
def test_the_answer_is_valid_and_within_the_tolerance(curve, target, hints):
    counted = Counted(curve)
    answer = epsilon_for_delta(counted, target, upper=10.0, bracket=hints)
    assert curve(answer) <= target  # never optimistic, whatever the hints
    assert curve(answer - TOLERANCE) > target or answer == 0.0  # and within the tolerance


@pytest.mark.parametrize("target", [1e-12, 1e-6, 1e-3])
def test_a_smooth_curve_takes_far_fewer_evaluations_than_bisection(target):
    counted = Counted(gaussian_like)
    epsilon_for_delta(counted, target, upper=10.0)
    bisection = 2 + math.ceil(math.log2(10.0 / TOLERANCE))  # δ(0), δ(upper), then halvings
    assert counted.calls <= bisection // 2


@pytest.mark.parametrize("target", [0.0, 0.25])
def test_a_target_the_curve_reaches_exactly_takes_no_more_than_bisection(target):
    """δ(ε) = target from ε0 on (a pure ε: the target δ = 0, where an exact curve is 0 beyond
    ε0): the line through the ends crosses the target at the high end, whatever the weights;
    the search bisects instead of moving that end by tolerance/2 a step."""
    counted = Counted(lambda eps: max(target, 0.5 * (1.0 - eps / 2.0)))
    answer = epsilon_for_delta(counted, target, upper=10.0)
    edge = 2.0 * (1.0 - 2.0 * target)  # where δ reaches the target
    assert edge <= answer <= edge + TOLERANCE
    assert counted.calls <= 2 + math.ceil(math.log2(10.0 / TOLERANCE))


def test_a_curve_that_is_not_monotone_still_gets_a_valid_answer():
    def bumpy(epsilon: float) -> float:
        return gaussian_like(epsilon) * (1.0 + 0.9 * math.sin(40.0 * epsilon))

    for target in (1e-6, 1e-3):
        answer = epsilon_for_delta(bumpy, target, upper=10.0)
        assert bumpy(answer) <= target


def test_the_lower_bound_is_below_the_crossing():
    for target in (1e-9, 1e-4):
        crossing = epsilon_for_delta(gaussian_like, target, upper=math.inf)
        lower = lower_epsilon_for_delta(gaussian_like, target, upper=math.inf)
        assert gaussian_like(lower) > target
        assert crossing - 2 * TOLERANCE <= lower <= crossing
