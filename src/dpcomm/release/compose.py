"""Traffic and a noisy release composed: the guarantee against an observer of both.

The release reads the tuples the traffic delivered, so the two are not independent
mechanisms; the composition below holds for the sensitivities of the joint view
(`dpcomm.release.mechanisms.JointView`; the theorem and its proof are in
docs/accounting.md, "The joint view: theorem and proof").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from dpcomm.accounting import ScramblerMechanism, pld
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import shares_blanket
from dpcomm.plan.privacy import PathMechanisms, PlanGuarantee, paths_with
from dpcomm.release.mechanisms import MAP_TOLERANCE, AggregateNoise, Charged, release_pld

#: The largest ε_i of a released aggregate the PLD composition takes: dp_accounting's pair of
#: an (ε_i, δ_i)-DP mechanism computes e^ε_i, which overflows a float beyond ε_i ≈ 709.8. A
#: release with a larger share (an ε2 of thousands, as in tests that make the noise
#: negligible) is composed by the sum ε1 + ε2 alone, which holds whatever ε_i.
PLD_MAX_EPSILON = 700.0


#: A released floating-point sum is the exact sum rounded once to a double: at most half a
#: unit in the last place, 2^-53 of its magnitude, in each of two neighbouring tables.
ROUNDING_PER_ROW = 2.0**-52


@dataclass(frozen=True)
class ChargedShare:
    """A released aggregate as the composition charges it: its share, allowances added.

    A `Charged` (`charged_shares`).
    """

    output: str
    epsilon: float
    total_delta: float
    shared_blanket: bool


def charged_shares(noises: Sequence[Charged], num_rows: int) -> tuple[Charged, ...]:
    """Each share ε_i raised by what its calibration leaves out.

    docs/accounting.md, "Released sums in floating point". Every share by `MAP_TOLERANCE`.
    A floating-point sum's also by its one rounding: the rounded sums of two neighbours
    differ by at most Δ + 2^-52·S·B, and B ≤ Δ for every released sum (B the largest value
    a source sends), so the Laplace loss is at most ε_i (1 + 2^-52·S); a Gaussian's ρ grows
    by (1 + 2^-52·S)², and its ε at δ_i (ρ + 2√(ρ ln 1/δ_i)) by at most as much.
    S = ``num_rows`` bounds the rows of any sum.
    """
    rounding = 1.0 + ROUNDING_PER_ROW * max(num_rows, 0)
    charged: list[Charged] = []
    for noise in noises:
        factor = 1.0 + MAP_TOLERANCE
        if isinstance(noise, AggregateNoise) and not noise.integer:
            factor *= rounding**2 if noise.delta > 0.0 else rounding
        charged.append(
            ChargedShare(
                noise.output,
                math.nextafter(noise.epsilon * factor, math.inf),
                noise.total_delta,
                noise.shared_blanket,
            )
        )
    return tuple(charged)


def _num_rows(plan: PlanGuarantee) -> int:
    """S: the most senders of any cluster, a bound on the rows of any released sum."""
    return max((item.cluster.num_senders for item in plan.clusters), default=0)


@lru_cache(maxsize=64)
def _traffic_with_release(
    path_mechanisms: PathMechanisms, noises: tuple[Charged, ...], delta: float
) -> float | None:
    """`dpcomm.plan.privacy.paths_with` of the release of ``noises``, cached.

    A run's target check, its budget's charge and its report ask for the same composition.
    """
    return paths_with(path_mechanisms, release_pld(noises), delta)


@dataclass(frozen=True)
class ReleaseComposition:
    """Traffic and a noisy release composed: the guarantee against an observer of both.

    Attributes:
        release_epsilon: ε2, the sum of the release's aggregates' shares.
        release_delta: δ2, likewise.
        composed_epsilon: the PLD composition's ε at ``delta`` (None where unavailable).
        summed_epsilon: ε1 + ε2, the paper's (basic) composition, each share with its
            allowances (`charged_shares`).
        epsilon: the guarantee, the smaller of the two.
        delta: δ1 + δ2.
    """

    release_epsilon: float
    release_delta: float
    composed_epsilon: float | None
    summed_epsilon: float
    epsilon: float
    delta: float


#: Scrambler methods whose bound holds for the view the joint theorem augments: Lemma 2's
#: (the blanket told) and R_σ's (every source's output told).
JOINT_VIEW_METHODS = frozenset({"exact", "hoeffding", "bennett", "post-processing"})


def _check_bound_for(plan: PlanGuarantee, noises: Sequence[Charged]) -> None:
    """Refuse a release calibrated without the scramblers' shared blanket on traffic with it.

    Its sensitivities cover the replaced row only (`AggregateNoise.shared_blanket` False), a
    bound that does not hold when scramblers with sampling deliver the tuples.
    """
    if all(n.shared_blanket for n in noises):
        return
    for item in plan.clusters:
        accounted = item.cluster.data_dependent and item.cluster.num_targets > 1
        if accounted and shares_blanket(item.countermeasure):
            raise InvalidParameterError(
                "countermeasure",
                "the countermeasure the release was bound for (its noise covers traffic that "
                "delivers each tuple independently; bind the release with this countermeasure)",
                item.countermeasure.describe(),
            )


def _joint_traffic_epsilon(plan: PlanGuarantee) -> float:
    """The traffic's ε at its δ for an observer who also reads the release.

    The joint theorem (docs/accounting.md, "the joint view") composes the release with a
    traffic guarantee that holds for a view in which the observer is also told which sources
    took R_σ's uniform branch (Lemma 2's pair) or every source's R_σ output (the
    post-processing pair): every accountant's method is of that kind except the exact
    enumeration of a (tiny) scrambler, which bounds the scrambler's output alone. A plan with
    such a cluster is therefore accounted here through its paths' pairs: Lemma 2's for an
    uncapped scrambler, its sources' R_σ for a capped one (`dpcomm.accounting.pld.scrambler_pair`).
    """
    traffic = plan.guarantee
    enumerated = any(
        isinstance(part.mechanism, ScramblerMechanism)
        and part.guarantee.method not in JOINT_VIEW_METHODS
        for cluster in plan.clusters
        for part in cluster.parts
    )
    if not enumerated or math.isinf(traffic.epsilon):
        return traffic.epsilon
    alone = paths_with(plan.path_mechanisms, pld.identity_pair().pld(), traffic.delta)
    return math.inf if alone is None else alone


def compose_release(plan: PlanGuarantee, noises: Sequence[Charged]) -> ReleaseComposition:
    """The plan's traffic guarantee (ε1, δ1) and the release of ``noises`` (ε2, δ2) composed.

    ``noises``: every released aggregate (a release's `charged`: its noisy aggregates and
    its quantiles).

    At δ = δ1 + δ2, the smaller ε of two valid compositions: the paper's sum ε1 + ε2 (Related
    Work, "Differentially private data analysis") and the PLD composition of every data path's
    dominating pairs with the release's (`dpcomm.plan.privacy.paths_with`,
    `dpcomm.release.mechanisms.release_pld`). What a run reports (``report.release``), a
    budget is charged and `dpcomm.calibrate` plans for: one function, one number. A share
    above `PLD_MAX_EPSILON` leaves the sum alone.
    """
    _check_bound_for(plan, noises)
    traffic = plan.guarantee
    release_epsilon = math.fsum(n.epsilon for n in noises)
    release_delta = math.fsum(n.total_delta for n in noises)  # δ_i and a threshold's δ_sel
    total_delta = traffic.delta + release_delta
    charged = charged_shares(noises, _num_rows(plan))
    composed = None
    representable = all(n.epsilon <= PLD_MAX_EPSILON for n in charged)
    if math.isfinite(traffic.epsilon) and total_delta > 0.0 and representable:
        composed = _traffic_with_release(plan.path_mechanisms, charged, total_delta)
    summed = _joint_traffic_epsilon(plan) + math.fsum(n.epsilon for n in charged)
    return ReleaseComposition(
        release_epsilon=release_epsilon,
        release_delta=release_delta,
        composed_epsilon=composed,
        summed_epsilon=summed,
        epsilon=summed if composed is None else min(summed, composed),
        delta=total_delta,
    )


__all__ = ["JOINT_VIEW_METHODS", "PLD_MAX_EPSILON", "ReleaseComposition", "compose_release"]
