"""Central DP on the released result: sensitivities, noise scales, and their privacy loss.

The paper's Related Work ("Differentially private data analysis") notes that its guarantee on
the communication patterns composes with central DP on the released result: (ε1, δ1) for the
traffic and (ε2, δ2) for the release give (ε1 + ε2, δ1 + δ2) against an observer of both.

Neighbouring tables here are the traffic's: one source's row replaced by any other (bounded
DP). A source sends one tuple per grouping set, so in a grouping set with keys its row moves
from one group to another: a COUNT changes by 1 in two cells, a SUM clamped to [lo, hi] by at
most M = max(|lo|, |hi|) in two cells (or by hi − lo in one); in the empty grouping set (one
group) a COUNT changes by at most 1 (a row that fails a WHERE, or a NULL value, counts 0) and a
SUM by max(hi − lo, M). The released vector of one aggregate over every grouping set has the
sum of these as its L1 sensitivity and the root of the sum of squares as its L2 sensitivity.

Each aggregate's noise is calibrated to its share of the release's budget (equal shares):
Laplace noise of scale L1 / ε_i (pure ε_i-DP), or Gaussian noise whose zero-concentrated
divergence ρ = L2² / (2 s²) converts to ε_i at δ_i (Bun and Steinke 2016, Prop. 1.3:
ε = ρ + 2 √(ρ ln(1/δ))). The library that draws the noise (OpenDP) reports its own privacy map,
which the tests compare with these numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_delta

ReleasedFunction = Literal["count_star", "count", "sum"]


@dataclass(frozen=True)
class Laplace:
    """Laplace noise on the released aggregates: pure ε-DP for the release.

    Attributes:
        epsilon: the release's ε (ε2), split equally among its aggregates.

    Examples:
        >>> import dpcomm
        >>> release = dpcomm.Laplace(epsilon=1.0)
        >>> (release.name, release.epsilon, release.delta)
        ('laplace', 1.0, 0.0)
    """

    epsilon: float

    def __post_init__(self) -> None:
        _check_positive("epsilon", self.epsilon)

    @property
    def delta(self) -> float:
        """δ2 = 0."""
        return 0.0

    @property
    def name(self) -> str:
        """``laplace``."""
        return "laplace"


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise on the released aggregates: (ε, δ)-DP for the release.

    Attributes:
        epsilon: the release's ε (ε2), split equally among its aggregates.
        delta: the release's δ (δ2), split equally among its aggregates.

    Examples:
        >>> import dpcomm
        >>> release = dpcomm.Gaussian(epsilon=1.0, delta=1e-6)
        >>> (release.name, release.epsilon, release.delta)
        ('gaussian', 1.0, 1e-06)
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        _check_positive("epsilon", self.epsilon)
        check_delta("delta", self.delta)
        if not 0.0 < self.delta < 1.0:
            raise InvalidParameterError("delta", "a number in (0, 1)", self.delta)

    @property
    def name(self) -> str:
        """``gaussian``."""
        return "gaussian"


ReleaseMechanism = Laplace | Gaussian


def _check_positive(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0.0 < float(value) < math.inf
    ):
        raise InvalidParameterError(name, "a finite number > 0", value)


@dataclass(frozen=True)
class Sensitivity:
    """The L1 and L2 sensitivity of one aggregate's released vector (every grouping set)."""

    l1: float
    l2: float


def aggregate_sensitivity(
    function: ReleasedFunction,
    grouping_sets: Sequence[Sequence[str]],
    bound: float | None = None,
    width: float | None = None,
) -> Sensitivity:
    """Sensitivity of COUNT(*), COUNT(x) or SUM(x) over ``grouping_sets`` (module docstring).

    ``bound`` is M = max(|lo|, |hi|) and ``width`` hi − lo of a SUM's clamped values.
    """
    l1 = 0.0
    squares = 0.0
    for grouping_set in grouping_sets:
        if function == "sum":
            if bound is None or width is None:
                raise InvalidParameterError("bounds", "a (lo, hi) for every SUM", None)
            cells = (bound, bound) if grouping_set else (max(width, bound),)
        else:
            cells = (1.0, 1.0) if grouping_set else (1.0,)
        l1 += math.fsum(cells)
        squares += math.fsum(c * c for c in cells)
    return Sensitivity(l1, math.sqrt(squares))


def rho_for(epsilon: float, delta: float) -> float:
    """The largest zCDP ρ whose (ε, δ) conversion ρ + 2√(ρ ln(1/δ)) is at most ``epsilon``."""
    log_term = math.log(1.0 / delta)
    return (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2


def epsilon_of_rho(rho: float, delta: float) -> float:
    """ε at δ of a ρ-zCDP mechanism (Bun and Steinke 2016, Proposition 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@dataclass(frozen=True)
class AggregateNoise:
    """How one released aggregate is perturbed.

    Attributes:
        output: the aggregate's column (the core query's).
        function: COUNT(*), COUNT or SUM.
        sensitivity: its released vector's L1 and L2 sensitivity.
        scale: the noise's scale (Laplace b, or the Gaussian's standard deviation).
        integer: whether the noise is integer (counts: discrete Laplace or Gaussian).
        epsilon: its share ε_i of the release's ε.
        delta: its share δ_i of the release's δ (0 for Laplace).
    """

    output: str
    function: ReleasedFunction
    sensitivity: Sensitivity
    scale: float
    integer: bool
    epsilon: float
    delta: float

    @property
    def standard_deviation(self) -> float:
        """The noise's standard deviation (√2 b for Laplace; a bound for discrete noise)."""
        return math.sqrt(2.0) * self.scale if self.delta == 0.0 else self.scale

    @property
    def half_width_95(self) -> float:
        """Half-width of the noise's central 95% interval: b ln 20 (Laplace), 1.96 s."""
        return self.scale * math.log(20.0) if self.delta == 0.0 else 1.959963984540054 * self.scale


def calibrate_noise(
    mechanism: ReleaseMechanism,
    aggregates: Sequence[tuple[str, ReleasedFunction, Sensitivity]],
) -> tuple[AggregateNoise, ...]:
    """Each aggregate's noise for its equal share of ``mechanism``'s budget."""
    if not aggregates:
        raise InvalidParameterError("release", "a query with COUNT or SUM to release", "none")
    share = mechanism.epsilon / len(aggregates)
    noises = []
    for output, function, sensitivity in aggregates:
        integer = function != "sum"
        if isinstance(mechanism, Laplace):
            scale = sensitivity.l1 / share
            noises.append(AggregateNoise(output, function, sensitivity, scale, integer, share, 0.0))
        else:
            delta_share = mechanism.delta / len(aggregates)
            rho = rho_for(share, delta_share)
            scale = sensitivity.l2 / math.sqrt(2.0 * rho)
            noises.append(
                AggregateNoise(output, function, sensitivity, scale, integer, share, delta_share)
            )
    return tuple(noises)


def release_pld(noises: Sequence[AggregateNoise]) -> object:
    """The release's privacy loss distribution (dp_accounting): its aggregates composed.

    Each aggregate is represented by the dominating pair of an (ε_i, δ_i)-DP mechanism
    (``from_privacy_parameters``), valid for any mechanism with that guarantee, whatever the
    shape of its noise or of its sensitivity (a vector's, integer or floating-point noise);
    pessimistic, so δ(ε) is an upper bound.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_module
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    result = None
    for noise in noises:
        part = pld_module.from_privacy_parameters(
            DifferentialPrivacyParameters(noise.epsilon, noise.delta),
            value_discretization_interval=1e-4,
        )
        result = part if result is None else result.compose(part)
    if result is None:
        raise InvalidParameterError("noises", "at least one released aggregate", 0)
    return result


__all__ = [
    "AggregateNoise",
    "Gaussian",
    "Laplace",
    "ReleaseMechanism",
    "Sensitivity",
    "aggregate_sensitivity",
    "calibrate_noise",
    "epsilon_of_rho",
    "release_pld",
    "rho_for",
]
