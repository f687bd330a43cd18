"""How charges to a budget compose: the basic composition filter (pure, exact arithmetic).

A budget (ε, δ) admits a new charge (ε_i, δ_i) when, with it, Σ ε_i ≤ ε and Σ δ_i ≤ δ. This
stopping rule is a *privacy filter* (Rogers, Roth, Ullman and Vadhan, "Privacy Odometers and
Filters: Pay-as-you-Go Composition", NeurIPS 2016, basic composition filter): the interaction
that stops before the budget would be exceeded is (ε, δ)-DP even when each query, and its
(ε_i, δ_i), is chosen after seeing the results of the previous ones, which is how an analyst
uses a budget. Goes beyond the paper (which accounts one plan); valid by that theorem.

Tighter compositions are not used across queries: composing the runs' privacy loss
distributions (what `dpcomm.plan.privacy` does inside one plan) is valid only when every
mechanism is fixed in advance, and the natural PLD or f-DP filter is not valid in general
under adaptively chosen parameters; filters matching advanced composition (Whitehouse, Ramdas,
Rogers and Wu, ICML 2023) or for Rényi DP (Feldman and Zrnic, NeurIPS 2021) gain over the sum
only for many small charges, and are left for later. The sums are exact (fractions of the
floats): a rounding error never admits a charge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

#: The composition rule every ledger of this version uses (stored in the ledger).
COMPOSITION = "basic"


def exact_sum(values: Iterable[float]) -> Fraction:
    """The exact sum of finite floats (no rounding)."""
    return sum((Fraction(v) for v in values), Fraction(0))


@dataclass(frozen=True)
class Spent:
    """What charges have spent of a budget (basic composition: the sums).

    Attributes:
        epsilon: Σ ε_i, rounded up to a float (never below the exact sum).
        delta: Σ δ_i, rounded up likewise.
        charges: how many charges.
    """

    epsilon: float
    delta: float
    charges: int


def _rounded_up(value: Fraction) -> float:
    """The smallest float >= ``value``."""
    near = float(value)
    return near if Fraction(near) >= value else math.nextafter(near, math.inf)


def spent(charges: Iterable[tuple[float, float]]) -> Spent:
    """Σ ε_i and Σ δ_i of ``charges`` ((ε_i, δ_i) pairs), each rounded up."""
    pairs = list(charges)
    return Spent(
        epsilon=_rounded_up(exact_sum(e for e, _ in pairs)),
        delta=_rounded_up(exact_sum(d for _, d in pairs)),
        charges=len(pairs),
    )


def admits(
    budget: tuple[float, float], charges: Iterable[tuple[float, float]], new: tuple[float, float]
) -> bool:
    """Whether ``budget`` (ε, δ) admits the charge ``new`` after ``charges`` (basic filter).

    True iff Σ ε_i + ε_new ≤ ε and Σ δ_i + δ_new ≤ δ, exactly; an infinite or NaN charge is
    never admitted.
    """
    pairs = [*charges, new]
    if not all(math.isfinite(e) and math.isfinite(d) for e, d in pairs):
        return False
    epsilon, delta = budget
    return exact_sum(e for e, _ in pairs) <= Fraction(epsilon) and exact_sum(
        d for _, d in pairs
    ) <= Fraction(delta)
