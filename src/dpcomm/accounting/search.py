"""Inversion of a privacy profile: ε for a target δ, given any valid δ(ε) bound."""

from __future__ import annotations

import math
from collections.abc import Callable

_ABSOLUTE_TOLERANCE = 1e-6
#: Probes above a lower-bound hint (at 1, 8 and 64 tolerances) before bisecting.
_PROBES = 3


def _bisect(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    low: float,
    high: float,
    tolerance: float,
) -> tuple[float, float]:
    """Bisection keeping δ(low) > target ≥ δ(high), until high − low ≤ ``tolerance``."""
    while high - low > tolerance:
        middle = 0.5 * (low + high)
        if delta_of_epsilon(middle) <= target_delta:
            high = middle
        else:
            low = middle
    return low, high


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
    return _bisect(delta_of_epsilon, target_delta, 0.0, upper, tolerance)


def epsilon_for_delta(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    *,
    upper: float,
    tolerance: float = _ABSOLUTE_TOLERANCE,
    bracket: tuple[float | None, float | None] = (None, None),
) -> float:
    """Smallest ε (up to ``tolerance``, rounded up) in [0, upper] with δ(ε) ≤ target.

    Returns ``math.inf`` when δ(upper) > target. Bisection keeps an ε whose bound is at most
    the target as its upper end, so the answer is valid even if the bound is not monotone.

    ``bracket`` (low, high) are hints that shorten the bisection: a certified lower bound on ε
    and another valid method's ε. Each is checked (δ(low) > target, δ(high) ≤ target) and
    ignored if it fails, so a hint can only save evaluations, never change validity.
    """
    low_hint, high_hint = bracket
    if high_hint is not None and not 0.0 < high_hint < upper:
        high_hint = None
    # With both hints, the low one is checked first: δ(low) > target makes the check at 0
    # redundant for a monotone bound (and for any other, bisection keeps its answer valid).
    low = 0.0
    if (
        high_hint is not None
        and low_hint is not None
        and 0.0 < low_hint < high_hint
        and delta_of_epsilon(low_hint) > target_delta
    ):
        low = low_hint
    elif delta_of_epsilon(0.0) <= target_delta:
        return 0.0
    if high_hint is not None and delta_of_epsilon(high_hint) <= target_delta:
        return _bisect_from_hints(delta_of_epsilon, target_delta, low, high_hint, tolerance)
    crossing = _crossing(delta_of_epsilon, target_delta, upper=upper, tolerance=tolerance)
    return math.inf if crossing is None else crossing[1]


def _bisect_from_hints(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    low: float,
    high: float,
    tolerance: float,
) -> float:
    """Bisection on [low, high] with δ(high) ≤ target and δ(low) > target (or low = 0)."""
    if low > 0.0:
        # A few probes just above a lower bound, often within tolerances of ε.
        step = tolerance
        for _ in range(_PROBES):
            if low + step >= high:
                break
            if delta_of_epsilon(low + step) <= target_delta:
                high = low + step
                break
            low += step
            step *= 8.0
    return _bisect(delta_of_epsilon, target_delta, low, high, tolerance)[1]


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


def integer_crossing(predicate: Callable[[int], bool], true_at: int, false_at: int) -> int:
    """The last integer from ``true_at`` towards ``false_at`` where ``predicate`` holds.

    Given ``predicate(true_at)``, not ``predicate(false_at)`` and a predicate monotone between
    them (either ``true_at < false_at`` or the reverse), by bisection.
    """
    while abs(false_at - true_at) > 1:
        middle = (true_at + false_at) // 2
        if predicate(middle):
            true_at = middle
        else:
            false_at = middle
    return true_at
