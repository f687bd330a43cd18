"""The figures' thresholds: the least value meeting a predicate, whatever the hints."""

from __future__ import annotations

import pytest

from dpcomm.experiments.figures.thresholds import least_integer


def _counted(threshold: int) -> tuple[list[int], object]:
    """A decreasing ε(x) that is at most 1 from ``threshold`` on, and the xs it was asked."""
    asked: list[int] = []

    def epsilon(x: int) -> float:
        asked.append(x)
        return (threshold + 0.5) / (x + 0.5)  # exactly 1 at the threshold

    return asked, epsilon


@pytest.mark.parametrize("threshold", [1, 236, 378, 999])
def test_a_checked_bracket_gives_the_galloping_answer_in_fewer_evaluations(threshold) -> None:
    asked, epsilon = _counted(threshold)
    alone = least_integer(epsilon, lambda _x, value: value <= 1.0, low=0, high=20_000, guess=1000)
    galloping = len(asked)
    asked.clear()
    hinted = least_integer(
        epsilon, lambda _x, value: value <= 1.0, low=0, high=20_000, guess=1000, below=100
    )
    assert alone == hinted and hinted is not None and hinted.value == threshold
    assert hinted.epsilon <= 1.0 and (hinted.epsilon_below is None or hinted.epsilon_below > 1.0)
    if 100 < threshold < 900:  # far from the guess (a coarse grid): bisection is shorter
        assert len(asked) < galloping


@pytest.mark.parametrize("below", [50, 120])
def test_a_wrong_hint_is_ignored(below) -> None:
    """A point below the answer that already meets the predicate (or a guess that does not)
    is not a bracket: the search gallops as without it, and finds the same least value."""
    _asked, epsilon = _counted(40)
    found = least_integer(
        epsilon, lambda _x, value: value <= 1.0, low=0, high=20_000, guess=1000, below=below
    )
    assert found is not None and found.value == 40
    _asked, epsilon = _counted(5000)
    found = least_integer(
        epsilon, lambda _x, value: value <= 1.0, low=0, high=20_000, guess=1000, below=below
    )
    assert found is not None and found.value == 5000
