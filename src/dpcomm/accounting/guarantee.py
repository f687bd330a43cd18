"""The value of a privacy guarantee, and the compositions used by Theorem 2."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dpcomm.errors import InvalidParameterError


@dataclass(frozen=True)
class PrivacyGuarantee:
    """(ε, δ)-differential privacy, and the method that certified it.

    ``epsilon`` may be ``math.inf`` (no finite guarantee at this δ).
    """

    epsilon: float
    delta: float
    method: str

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, int | float):
            raise InvalidParameterError("epsilon", "a number >= 0 or inf", self.epsilon)
        if math.isnan(self.epsilon) or self.epsilon < 0:
            raise InvalidParameterError("epsilon", "a number >= 0 or inf", self.epsilon)
        if isinstance(self.delta, bool) or not isinstance(self.delta, int | float):
            raise InvalidParameterError("delta", "a number in [0, 1]", self.delta)
        if not 0.0 <= self.delta <= 1.0:
            raise InvalidParameterError("delta", "a number in [0, 1]", self.delta)
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))


def compose_sequential(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Sequential (basic) composition along one data path: ε and δ add up (Theorem 2)."""
    items = list(guarantees)
    if not items:
        return PrivacyGuarantee(0.0, 0.0, "sequential()")
    epsilon = math.fsum(g.epsilon for g in items)
    delta = min(1.0, math.fsum(g.delta for g in items))
    methods = "+".join(sorted({g.method for g in items}))
    return PrivacyGuarantee(epsilon, delta, f"sequential({methods})")


def compose_parallel(guarantees: Iterable[PrivacyGuarantee]) -> PrivacyGuarantee:
    """Parallel composition across clusters on disjoint data: the worst ε and δ (Theorem 2)."""
    items = list(guarantees)
    if not items:
        return PrivacyGuarantee(0.0, 0.0, "parallel()")
    epsilon = max(g.epsilon for g in items)
    delta = max(g.delta for g in items)
    methods = "|".join(sorted({g.method for g in items}))
    return PrivacyGuarantee(epsilon, delta, f"parallel({methods})")
