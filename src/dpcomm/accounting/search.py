"""Inversion of a privacy profile: ε for a target δ, given any valid δ(ε) bound."""

from __future__ import annotations

import math
from collections.abc import Callable

_ABSOLUTE_TOLERANCE = 1e-6


def _secant_point(
    low: float,
    high: float,
    low_delta: float | None,
    high_delta: float | None,
    target: float,
    weights: tuple[float, float],
) -> float | None:
    """Where the line through the ends crosses the target (None without both ends' δ).

    In ln δ where both δ are positive, else in δ itself (a bound that reaches 0 at ε0).
    ``weights`` scale each end's distance to the target (the Illinois rule). None as well when
    the high end is exactly at the target (δ = 0 for a pure ε): the line then crosses it at
    that end whatever the weights, and each step would move it by tolerance/2 alone.
    """
    if low_delta is None or high_delta is None or not low_delta > target >= high_delta:
        return None
    if high_delta > 0.0 and target > 0.0:
        above = weights[0] * (math.log(low_delta) - math.log(target))
        below = weights[1] * (math.log(high_delta) - math.log(target))
    else:
        above = weights[0] * (low_delta - target)
        below = weights[1] * (high_delta - target)
    if not (math.isfinite(above) and math.isfinite(below)) or above <= below or below == 0.0:
        return None
    return low + (high - low) * above / (above - below)


def _narrow_bracket(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    low: float,
    high: float,
    tolerance: float,
    *,
    low_delta: float | None = None,
    high_delta: float | None = None,
) -> tuple[float, float]:
    """Shrinks [low, high] keeping δ(low) > target ≥ δ(high), until high − low ≤ ``tolerance``.

    Each step evaluates one point inside the bracket and replaces the end on its side, so the
    invariant holds for any bound, monotone or not. The point is where the line through the
    ends crosses the target (`_secant_point`; the Illinois rule halves the weight of an end
    kept twice in a row, so both ends converge), else the midpoint; it stays at least
    tolerance/2 inside the bracket. A smooth δ(ε) takes a handful of evaluations where
    bisection takes log2(width / tolerance). ``low_delta`` and ``high_delta`` are δ at the
    ends, when already evaluated.
    """
    weights = [1.0, 1.0]
    kept = 0  # +1: the low end was kept by the last step, −1: the high end
    while high - low > tolerance:
        point = _secant_point(
            low, high, low_delta, high_delta, target_delta, (weights[0], weights[1])
        )
        middle = low + 0.5 * (high - low) if point is None else point
        middle = min(max(middle, low + 0.5 * tolerance), high - 0.5 * tolerance)
        value = delta_of_epsilon(middle)
        if value <= target_delta:
            high, high_delta, weights[1] = middle, value, 1.0
            if kept == 1:
                weights[0] *= 0.5
            kept = 1
        else:
            low, low_delta, weights[0] = middle, value, 1.0
            if kept == -1:
                weights[1] *= 0.5
            kept = -1
    return low, high


def _crossing(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    *,
    upper: float,
    tolerance: float,
    low_delta: float | None = None,
) -> tuple[float, float] | None:
    """`_narrow_bracket` from 0: ``(low, high)`` within ``tolerance``, δ(low) > target ≥ δ(high).

    Assumes δ(0) > target (``low_delta``: δ(0), if evaluated). None when no end point in
    (0, upper] has δ ≤ target (for an infinite ``upper``, doubling from 1 up to 256, beyond
    which e^(2ε) would overflow).
    """
    low = 0.0
    if math.isinf(upper):
        upper = 1.0
        while (high_delta := delta_of_epsilon(upper)) > target_delta:
            low, low_delta = upper, high_delta
            upper *= 2.0
            if upper > 256.0:
                return None
    elif (high_delta := delta_of_epsilon(upper)) > target_delta:
        return None
    return _narrow_bracket(
        delta_of_epsilon,
        target_delta,
        low,
        upper,
        tolerance,
        low_delta=low_delta,
        high_delta=high_delta,
    )


def epsilon_for_delta(
    delta_of_epsilon: Callable[[float], float],
    target_delta: float,
    *,
    upper: float,
    tolerance: float = _ABSOLUTE_TOLERANCE,
    bracket: tuple[float | None, float | None] = (None, None),
) -> float:
    """Smallest ε (up to ``tolerance``, rounded up) in [0, upper] with δ(ε) ≤ target.

    Returns ``math.inf`` when δ(upper) > target. The search (`_narrow_bracket`) keeps an ε
    whose bound is at most the target as its upper end, so the answer is valid even if the
    bound is not monotone.

    ``bracket`` (low, high) are hints that shorten the search: a certified lower bound on ε
    and another valid method's ε. Each is checked (δ(low) > target, δ(high) ≤ target) and
    ignored if it fails, so a hint can only save evaluations, never change validity.
    """
    low_hint, high_hint = bracket
    if high_hint is not None and not 0.0 < high_hint < upper:
        high_hint = None
    # With both hints, the low one is checked first: δ(low) > target makes the check at 0
    # redundant for a monotone bound (and for any other, the search keeps its answer valid).
    low = 0.0
    low_delta: float | None = None
    if high_hint is not None and low_hint is not None and 0.0 < low_hint < high_hint:
        low_delta = delta_of_epsilon(low_hint)
        if low_delta > target_delta:
            low = low_hint
        else:
            low_delta = None
    if low_delta is None:
        low_delta = delta_of_epsilon(0.0)
        if low_delta <= target_delta:
            return 0.0
    if high_hint is not None:
        high_delta = delta_of_epsilon(high_hint)
        if high_delta <= target_delta:
            return _narrow_bracket(
                delta_of_epsilon,
                target_delta,
                low,
                high_hint,
                tolerance,
                low_delta=low_delta,
                high_delta=high_delta,
            )[1]
    if low > 0.0:  # the low hint held, but the high one did not: from 0 again
        low_delta = None
    crossing = _crossing(
        delta_of_epsilon, target_delta, upper=upper, tolerance=tolerance, low_delta=low_delta
    )
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
    at_zero = lower_delta_of_epsilon(0.0)
    if at_zero <= target_delta:
        return 0.0
    crossing = _crossing(
        lower_delta_of_epsilon, target_delta, upper=upper, tolerance=tolerance, low_delta=at_zero
    )
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
