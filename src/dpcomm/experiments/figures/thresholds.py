"""Thresholds stated in the figures' notes, computed by the accountant, not read off a grid.

A note such as "ε ≤ 1 from d = 275" must hold whatever grid the figure plots (``--quick`` plots
few points): the least value is found by galloping and bisection on the accountant's own
numbers, and the note gives the accountant's value at the threshold and one step below it.
Bisection finds *the* least value when the predicate is monotone in the parameter; for the
dummies d this holds for the mechanism (one more dummy is a post-processing of the output,
`dpcomm.accounting.accountant.explain_infinite`), and the value one step below is checked
explicitly, so the stated threshold is exact wherever the computed bound is monotone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from dpcomm.accounting import ScramblerMechanism, account
from dpcomm.accounting.search import integer_crossing
from dpcomm.calibration import least_satisfying
from dpcomm.plan import ExecutionPlan, Scramblers, account_plan

#: The largest number of dummies per scrambler searched for a threshold.
MAX_DUMMIES = 20_000


@dataclass(frozen=True)
class Threshold:
    """The least parameter value meeting a predicate, with the accountant's numbers around it.

    Attributes:
        value: the least value found (an integer for d or n, a multiple of the tolerance for σ).
        epsilon: the accountant's ε at ``value``.
        below: the value one step below (None when ``value`` is the search's lower end).
        epsilon_below: the accountant's ε at ``below`` (None with ``below``).
    """

    value: float
    epsilon: float
    below: float | None
    epsilon_below: float | None


def least_integer(
    epsilon_of: Callable[[int], float],
    predicate: Callable[[int, float], bool],
    *,
    low: int,
    high: int,
    guess: int | None = None,
    below: int | None = None,
) -> Threshold | None:
    """Least integer x in [low, high] with ``predicate(x, epsilon_of(x))``, None if not at high.

    ``guess`` (e.g. a plotted point) only says where the galloping starts. ``below`` (a plotted
    point below ``guess`` that seemed to fail) is checked with ``guess``: when the predicate
    holds at ``guess`` and fails at ``below``, the search bisects between them instead of
    galloping from ``guess``: about log2(guess − below) evaluations instead of twice log2 of
    the answer's distance from ``guess``, fewer when the answer is far from it (a coarse
    grid's points). Otherwise the hint is ignored.
    """
    values: dict[int, float] = {}

    def epsilon(x: int) -> float:
        if x not in values:
            values[x] = epsilon_of(x)
        return values[x]

    def holds(x: int) -> bool:
        return predicate(x, epsilon(x))

    if (
        guess is not None
        and below is not None
        and low <= below < guess <= high
        and holds(guess)
        and not holds(below)
    ):
        found: int | None = integer_crossing(holds, guess, below)
    else:
        found = least_satisfying(holds, low=low, high=high, guess=guess)
    if found is None:
        return None
    below = found - 1 if found > low else None
    return Threshold(
        float(found),
        epsilon(found),
        None if below is None else float(below),
        None if below is None else epsilon(below),
    )


def least_real(
    epsilon_of: Callable[[float], float],
    predicate: Callable[[float, float], bool],
    *,
    low: float,
    high: float,
    tolerance: float,
) -> Threshold | None:
    """Least multiple of ``tolerance`` in [low, high] with the predicate (`least_integer`)."""
    first, last = math.ceil(low / tolerance - 1e-9), math.floor(high / tolerance + 1e-9)

    def scaled(step: int) -> float:
        return round(step * tolerance, 12)

    found = least_integer(
        lambda step: epsilon_of(scaled(step)),
        lambda step, value: predicate(scaled(step), value),
        low=first,
        high=last,
    )
    if found is None:
        return None
    return Threshold(
        scaled(int(found.value)),
        found.epsilon,
        None if found.below is None else scaled(int(found.below)),
        found.epsilon_below,
    )


def least_dummies_for_plan(
    plan: ExecutionPlan,
    *,
    sampling_rate: float,
    batch_size: int,
    target_epsilon: float,
    delta: float,
    maximum: int = MAX_DUMMIES,
    guess: int | None = None,
    below: int | None = None,
) -> Threshold | None:
    """Least d per scrambler whose plan ε (what a run reports) is at most ``target_epsilon``.

    ε is `dpcomm.plan.account_plan`'s for the plan with uncapped scramblers (σ, n, d) at
    the whole plan's ``delta``, exactly the number the run's report prints. ``guess`` and
    ``below`` are hints (`least_integer`).
    """

    def epsilon(dummies: int) -> float:
        countermeasure = Scramblers(
            sampling_rate=sampling_rate, batch_size=batch_size, num_dummies=dummies
        )
        return account_plan(plan, countermeasure, delta=delta).guarantee.epsilon

    return least_integer(
        epsilon,
        lambda _d, value: value <= target_epsilon,
        low=0,
        high=maximum,
        guess=guess,
        below=below,
    )


def scrambler_epsilon(
    *, num_targets: int, sampling_rate: float, batch_size: int, num_dummies: int, delta: float
) -> dict[str, float | None]:
    """Every accounting method's ε for one uncapped scrambler (no Monte Carlo)."""
    mechanism = ScramblerMechanism(
        num_targets=num_targets,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        num_dummies=num_dummies,
    )
    return account(mechanism, delta=delta, all_methods=True).method_values()
