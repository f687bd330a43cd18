"""Inversion of a privacy profile: ε for a target δ, given any valid δ(ε) bound."""

from __future__ import annotations

import math
from collections.abc import Callable

_ABSOLUTE_TOLERANCE = 1e-6


def _crossing(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    *,
    upper: float,
    tolerance: float,
) -> tuple[float, float] | None:
    """Bisection: ``(low, high)`` within ``tolerance``, δ(low) > target ≥ δ(high).

    Assumes δ(0) > target. None when no end point in (0, upper] has δ ≤ target (for an
    infinite ``upper``, doubling from 1 up to 256, beyond which e^(2ε) would overflow).
    """
    if math.isinf(upper):
        upper = 1.0
        while delta_of_epsilon(upper) > target_delta:
            upper *= 2.0
            if upper > 256.0:
                return None
    elif delta_of_epsilon(upper) > target_delta:
        return None
    low, high = 0.0, upper
    while high - low > tolerance:
        middle = 0.5 * (low + high)
        if delta_of_epsilon(middle) <= target_delta:
            high = middle
        else:
            low = middle
    return low, high


def epsilon_for_delta(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    *,
    upper: float,
    tolerance: float = _ABSOLUTE_TOLERANCE,
) -> float:
    """Smallest ε (up to ``tolerance``, rounded up) in [0, upper] with δ(ε) ≤ target.

    Returns ``math.inf`` when δ(upper) > target. Bisection keeps an ε whose bound is at most
    the target as its upper end, so the answer is valid even if the bound is not monotone.
    """
    if delta_of_epsilon(0.0) <= target_delta:
        return 0.0
    crossing = _crossing(delta_of_epsilon, target_delta, upper=upper, tolerance=tolerance)
    return math.inf if crossing is None else crossing[1]


def lower_epsilon_for_delta(
    lower_delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    *,
    upper: float,
    tolerance: float = _ABSOLUTE_TOLERANCE,
) -> float:
    """Largest ε (rounded down) in [0, upper] with a *lower* bound on δ(ε) above the target.

    Any mechanism whose true δ(ε) exceeds the target at ε cannot be (ε, target)-DP, so the
    true ε for the target is at least the returned value.
    """
    if lower_delta_of_epsilon(0.0) <= target_delta:
        return 0.0
    crossing = _crossing(lower_delta_of_epsilon, target_delta, upper=upper, tolerance=tolerance)
    if crossing is None:
        return math.inf if math.isinf(upper) else upper
    return crossing[0]
