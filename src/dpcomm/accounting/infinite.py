"""Why a mechanism's ε is infinite, and the smallest changes that make it finite.

An infinite ε is a correct answer (the traffic of neighbouring inputs can be told apart with
probability above δ), but a useless one without its reason. :func:`explain_infinite` says why
and searches, with the accountant itself (never a formula read elsewhere), the least sampling
rate σ and the least number of dummies d that give a finite valid ε, the other parameters
unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from dpcomm.accounting.accountant import account
from dpcomm.accounting.mechanisms import LocalRandomizer, ScramblerMechanism

#: Sampling rates tried, smallest first: the least one giving a finite ε is reported.
SAMPLING_GRID: tuple[float, ...] = (0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 0.9, 1.0)
#: Largest number of dummies searched.
MAX_DUMMIES_SEARCHED = 1 << 20


@dataclass(frozen=True)
class FiniteChange:
    """One change of one parameter that makes ε finite.

    Attributes:
        parameter: ``"sampling_rate"`` (σ) or ``"num_dummies"`` (d).
        value: its new value.
        epsilon: the valid ε the accountant gives with it (same δ).
        least: True when no smaller value of the parameter gives a finite ε (d: the exact
            least; σ: the least of :data:`SAMPLING_GRID`, any σ > 0 being finite when
            ``least`` is False).
    """

    parameter: str
    value: float
    epsilon: float
    least: bool

    def describe(self) -> str:
        """One line, e.g. ``"d = 40 dummies (ε = 3.21)"``."""
        if self.parameter == "num_dummies":
            what = f"d = {int(self.value):,} dummies"
        else:
            what = f"σ = {self.value:g}"
        return f"{what} (ε = {self.epsilon:.4g})"


@dataclass(frozen=True)
class InfiniteExplanation:
    """Why ε = ∞, and what would make it finite.

    Attributes:
        reason: one sentence.
        changes: the least change of each parameter found (may be empty).
    """

    reason: str
    changes: tuple[FiniteChange, ...]

    def describe(self) -> str:
        """The reason and the changes, on one line."""
        if not self.changes:
            return self.reason
        options = " or ".join(c.describe() for c in self.changes)
        return f"{self.reason}; the smallest changes that make it finite: {options}"


def _epsilon(mechanism: LocalRandomizer | ScramblerMechanism, delta: float) -> float:
    return account(mechanism, delta=delta, monte_carlo_samples=0).guarantee.epsilon


def _least_dummies(
    mechanism: LocalRandomizer | ScramblerMechanism, delta: float
) -> FiniteChange | None:
    """The least d giving a finite ε, by doubling then bisection.

    Valid because ε can only fall as d grows: one more dummy (uniform, capped, or to a new
    other target under R_σ^d) is a randomized function of the output with d dummies, a
    post-processing.
    """
    upper = (
        mechanism.num_targets - 1 if isinstance(mechanism, LocalRandomizer) else None
    )  # R_σ^d floods at most the T − 1 other targets
    low, high = mechanism.num_dummies, max(1, mechanism.num_dummies * 2)
    found: float | None = None
    while True:
        if upper is not None:
            high = min(high, upper)
        if high > MAX_DUMMIES_SEARCHED:
            return None
        try:
            value = _epsilon(replace(mechanism, num_dummies=high), delta)
        except ValueError:
            return None
        if math.isfinite(value):
            found = value
            break
        if upper is not None and high >= upper:
            return None
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        value = _epsilon(replace(mechanism, num_dummies=middle), delta)
        if math.isfinite(value):
            high, found = middle, value
        else:
            low = middle
    assert found is not None
    return FiniteChange("num_dummies", high, found, True)


def _least_sampling(
    mechanism: LocalRandomizer | ScramblerMechanism, delta: float
) -> FiniteChange | None:
    for rate in SAMPLING_GRID:
        if rate <= mechanism.sampling_rate:
            continue
        value = _epsilon(replace(mechanism, sampling_rate=rate), delta)
        if math.isfinite(value):
            return FiniteChange("sampling_rate", rate, value, rate == SAMPLING_GRID[0])
    return None


def explain_infinite(
    mechanism: LocalRandomizer | ScramblerMechanism, *, delta: float
) -> InfiniteExplanation:
    """Why ``mechanism`` has ε = ∞ at ``delta``, and the least σ and d that make it finite.

    Only for a mechanism whose best valid ε is ∞ (the accountant's answer).
    """
    if isinstance(mechanism, LocalRandomizer):
        reason = (
            f"σ = {mechanism.sampling_rate:g}: a source's message always goes to its own "
            f"target and its {mechanism.num_dummies} dummies to other targets, so an input's "
            "target always receives a message that a neighbouring input's may not"
        )
    else:
        reason = (
            f"σ = {mechanism.sampling_rate:g} and d = {mechanism.num_dummies} dummies per "
            f"scrambler: the counts per target of neighbouring inputs differ by one message "
            f"that the dummies hide with probability below 1 − δ (δ = {delta:g})"
        )
    changes = [
        change
        for change in (_least_sampling(mechanism, delta), _least_dummies(mechanism, delta))
        if change is not None
    ]
    return InfiniteExplanation(reason, tuple(changes))
