"""Closed-form bounds: the local randomizer (Theorem 1, App. B) and pure-DP conversions.

Every function is pure and works on floats; ``epsilon`` may be ``math.inf``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from dpcomm.accounting.mechanisms import GenericLocalRandomizer, LocalRandomizer


def local_pure_epsilon(randomizer: LocalRandomizer) -> float:
    """Pure ε of R_σ^d (Theorem 1, Eq. 5): ln(1 + (1 − σ) T / (σ (d + 1))).

    d = T − 1 is a broadcast (ε = 0); σ = 0 with d < T − 1 gives ∞. Exact: the ratio is
    attained by any output holding the true target and not the other one (App. B).
    """
    num_targets, sigma, dummies = (
        randomizer.num_targets,
        randomizer.sampling_rate,
        randomizer.num_dummies,
    )
    if dummies >= num_targets - 1:
        return 0.0
    if sigma == 0.0:
        return math.inf
    return math.log1p((1.0 - sigma) * num_targets / (sigma * (dummies + 1)))


def local_delta(randomizer: LocalRandomizer, epsilon: float) -> float:
    """Exact δ(ε) of R_σ^d: the hockey-stick divergence of the worst neighbouring pair.

    δ(ε) = (T − 1 − d)/(T − 1) · [1 − σ + (d+1)σ/T − e^ε (d+1)σ/T]_+ (beyond the paper's
    Theorem 1, which gives only the pure ε; derived from the same output probabilities).
    The other sources of a cluster are independent and identical under both neighbours, so
    the cluster-level divergence equals the single-source one.
    """
    share, mass_true, mass_other = randomizer.distinguishing_masses
    if math.isinf(epsilon):
        return 0.0
    return max(0.0, share * (mass_true - math.exp(epsilon) * mass_other))


def local_epsilon_for_delta(randomizer: LocalRandomizer, delta: float) -> float:
    """Smallest ε with `local_delta` ≤ δ (exact inversion of the formula above)."""
    share, mass_true, mass_other = randomizer.distinguishing_masses
    if share == 0.0 or mass_true - mass_other <= 0.0:
        return 0.0
    if share * (mass_true - mass_other) <= delta:
        return 0.0
    if mass_other == 0.0:
        return math.inf
    return max(0.0, math.log((mass_true - delta / share) / mass_other))


def pure_to_delta(epsilon0: float, epsilon: float) -> float:
    """δ(ε) implied by ε0-DP alone: [e^ε0 − e^ε]_+ / (1 + e^ε0).

    Any ε0-DP mechanism's privacy profile is dominated by binary randomized response with
    parameter ε0 (Kairouz, Oh and Viswanath, 2015), whose profile is this expression.
    """
    if math.isinf(epsilon0):
        return 1.0 if not math.isinf(epsilon) else 0.0
    if epsilon >= epsilon0:
        return 0.0
    return (math.exp(epsilon0) - math.exp(epsilon)) / (1.0 + math.exp(epsilon0))


def pure_to_epsilon(epsilon0: float, delta: float) -> float:
    """Smallest ε with `pure_to_delta` ≤ δ."""
    if math.isinf(epsilon0):
        return math.inf
    value = math.exp(epsilon0) - delta * (1.0 + math.exp(epsilon0))
    if value <= 1.0:
        return 0.0
    return min(epsilon0, math.log(value))


def generic_delta(randomizer: GenericLocalRandomizer, epsilon: float) -> float:
    """Exact δ(ε) of a generic local randomizer: max over input pairs of Σ_y [μ_x − e^ε μ_x']_+."""
    matrix = randomizer.matrix
    if math.isinf(epsilon):
        return 0.0
    differences = matrix[:, None, :] - math.exp(epsilon) * matrix[None, :, :]
    return float(np.clip(differences, 0.0, None).sum(axis=2).max())


def capped_theorem_epsilon(
    *, num_targets: int, lie_rate: float, batch_size: int, num_dummies: int
) -> float:
    """The printed formula of Theorem "theorem-exact" (capped scrambler Ā_σ^{n,d}).

    PRINTED IN THE PAPER, NOT A VALID BOUND: exhaustive enumeration finds larger ε for
    T >= 3 (see docs/accounting.md). ``lie_rate`` is the theorem's σ (probability of going
    to another target); from R_σ use `LocalRandomizer.lie_rate`. Defined for
    d ∈ {1, …, n − 1}; evaluated in log space so that large n does not underflow.
    """
    n, d = batch_size, num_dummies
    if lie_rate <= 0.0:
        return math.inf
    truth = 1.0 - lie_rate
    lie = lie_rate / (num_targets - 1)
    k = np.arange(d + 1, dtype=float)
    log_binomials = (
        gammaln(d + 1)
        - gammaln(k + 1)
        - gammaln(d - k + 1)
        + gammaln(n)
        - gammaln(k + 1)
        - gammaln(n - k)
    )
    valid = k <= n - 1
    log_common = log_binomials + k * math.log(truth) + (n - k - 1) * math.log(lie)
    extra = k * lie * lie / truth
    log_numerator = logsumexp(np.where(valid, log_common + np.log(truth + extra), -np.inf))
    log_denominator = logsumexp(np.where(valid, log_common + np.log(lie + extra), -np.inf))
    return float(log_numerator - log_denominator)
