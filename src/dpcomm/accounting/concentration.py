"""Concentration bounds on Lemma 2 (App. E): Hoeffding (Theorem "main_amplification") and Bennett.

Lemma 2 (first form, valid for every σ including 0):

    δ(ε) ≤ Σ_{m=0}^{n−1} Bin(m; n − 1, γ) · E[Σ_{i=1}^{N} L_i]_+ / N,   N = m + d + 1,

where L is the privacy amplification random variable (Eq. 6) and γ the total variation
similarity of the local randomizer (γ = σ for R_σ). Each function here bounds E[Σ L_i]_+
by a concentration inequality. The printed Bennett formula of Lemma 3 is kept, labelled,
in `bennett_printed_delta`: it is not a valid bound (docs/accounting.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpcomm.accounting import binomial as binom
from dpcomm.accounting.mechanisms import GenericScrambler, ScramblerMechanism
from dpcomm.accounting.pure import local_pure_epsilon

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class AmplificationVariable:
    """Facts about L = L_ε^{x,x'} used by the bounds.

    Attributes:
        mean_gap: a = −E[L] = e^ε − 1 (Lemma 4.1).
        upper: b_+, an upper bound on L.
        lower: b_−, a lower bound on L.
        second_moment: c ≥ E[L²].
    """

    mean_gap: float
    upper: float
    lower: float
    second_moment: float


def randomized_response_variable(
    *, num_targets: int, sampling_rate: float, epsilon: float
) -> AmplificationVariable:
    """L for R_σ: L = σ(1 − e^ε) + (1 − σ) T (I[W = t] − e^ε I[W = t']) (Eq. 6, Lemma 5).

    b_+ and b_− are the exact extreme values (tighter than Lemma 5's, still valid);
    E[L²] = σ(2 − σ)(1 − e^ε)² + (1 − σ)² T (1 + e^{2ε}) is exact (Lemma 5).
    """
    sigma, size, exp_eps = sampling_rate, num_targets, math.exp(epsilon)
    base = sigma * (1.0 - exp_eps)
    return AmplificationVariable(
        mean_gap=exp_eps - 1.0,
        upper=base + (1.0 - sigma) * size,
        lower=base - (1.0 - sigma) * size * exp_eps,
        second_moment=sigma * (2.0 - sigma) * (1.0 - exp_eps) ** 2
        + (1.0 - sigma) ** 2 * size * (1.0 + exp_eps**2),
    )


def generic_variables(mechanism: GenericScrambler, epsilon: float) -> list[AmplificationVariable]:
    """L_ε^{x,x'} for every ordered pair x ≠ x' of a generic randomizer (exact moments).

    Requires a finite ε0 (every output either impossible or possible under all inputs), so
    that the blanket ω covers the support of every μ_x and Lemma 2 applies.
    """
    randomizer = mechanism.randomizer
    matrix, blanket = randomizer.matrix, randomizer.blanket
    support = blanket > 0
    exp_eps = math.exp(epsilon)
    variables = []
    for x in range(randomizer.num_targets):
        for x_other in range(randomizer.num_targets):
            if x == x_other:
                continue
            values = (matrix[x, support] - exp_eps * matrix[x_other, support]) / blanket[support]
            variables.append(
                AmplificationVariable(
                    mean_gap=exp_eps - 1.0,
                    upper=float(values.max()),
                    lower=float(values.min()),
                    second_moment=float(np.dot(blanket[support], values**2)),
                )
            )
    return variables


@lru_cache(maxsize=32)
def mixture_weights(
    batch_size: int, gamma: float, num_dummies: int
) -> tuple[FloatArray, FloatArray]:
    """Sizes N = m + d + 1 and weights Bin(m; n − 1, γ) of Lemma 2's first form (read-only).

    Independent of ε, so cached: a search over ε evaluates them once (n = 10^6: 0.3 s each).
    """
    counts = np.arange(batch_size, dtype=float)
    weights = binom.pmf(counts, batch_size - 1, gamma) if batch_size > 1 else np.ones(1)
    sizes = counts + num_dummies + 1
    weights = np.asarray(weights, dtype=float)
    sizes.setflags(write=False)
    weights.setflags(write=False)
    return sizes, weights


def hoeffding_expectation(sizes: FloatArray, mean_gap: float, value_range: float) -> FloatArray:
    """E[Σ_{i≤N} L_i]_+ ≤ b²/(4a) · exp(−2 N a² / b²) (Lemma 3, Hoeffding)."""
    if value_range <= 0.0:
        return np.zeros_like(sizes)
    if mean_gap <= 0.0:
        return np.full_like(sizes, math.inf)
    result: FloatArray = (value_range**2 / (4.0 * mean_gap)) * np.exp(
        -2.0 * sizes * mean_gap**2 / value_range**2
    )
    return result


def bennett_expectation(sizes: FloatArray, variable: AmplificationVariable) -> FloatArray:
    """E[Σ_{i≤N} L_i]_+ ≤ b_+ / ln(1 + u) · exp(−N (c / b_+²) φ(u)), u = a b_+ / c.

    Derived from Bennett's moment bound E e^{λL} ≤ exp(−λa + c(e^{λb_+} − 1 − λb_+)/b_+²)
    (valid for L ≤ b_+, E L = −a, E L² ≤ c), integrating the tail ∫_0^∞ P(ΣL > s) ds with
    λ = ln(1 + u)/b_+. This corrects Lemma 3's printed statement, which divides by a·N.
    """
    a, upper, moment = variable.mean_gap, variable.upper, variable.second_moment
    if upper <= 0.0:
        return np.zeros_like(sizes)
    if a <= 0.0:
        return np.full_like(sizes, math.inf)
    ratio = a * upper / moment
    phi = (1.0 + ratio) * math.log1p(ratio) - ratio
    result: FloatArray = (upper / math.log1p(ratio)) * np.exp(-sizes * moment / upper**2 * phi)
    return result


def _mixture_delta(sizes: FloatArray, weights: FloatArray, expectations: FloatArray) -> float:
    positive = weights > 0
    terms = weights[positive] * expectations[positive] / sizes[positive]
    return float(min(1.0, float(np.sum(terms))))


def beyond_epsilon0(mechanism: ScramblerMechanism | GenericScrambler, epsilon: float) -> bool:
    """True when ε ≥ ε0 of one source's randomizer, where every valid δ(ε) is exactly 0.

    The scrambler's output is a post-processing of the differing source's randomized message
    (the other messages and the dummies do not depend on it), so it is ε0-DP: δ(ε) = 0 for
    ε ≥ ε0. The concentration bounds are evaluated in floating point, and at ε = ε0 their
    b₊ is a rounding residue instead of 0; returning 0 there keeps ε searches from reporting ∞.
    """
    if isinstance(mechanism, ScramblerMechanism):
        epsilon0 = local_pure_epsilon(mechanism.local_randomizer)
    else:
        epsilon0 = mechanism.randomizer.epsilon0
    return epsilon >= epsilon0


def hoeffding_delta(mechanism: ScramblerMechanism | GenericScrambler, epsilon: float) -> float:
    """δ(ε) of the uncapped scrambler by Theorem "main_amplification" (Hoeffding).

    For R_σ the range is the theorem's b = (1 − σ)T(1 + e^ε) + 2σ(e^ε − 1) and a = e^ε − 1
    (the theorem prints a = 1 − e^ε, whose sign makes its δ negative; |a| is meant). The first
    form of Lemma 2 used here equals the printed sum for σ > 0 and its σ = 0 case.
    """
    if beyond_epsilon0(mechanism, epsilon):
        return 0.0
    if isinstance(mechanism, ScramblerMechanism):
        sigma, size = mechanism.sampling_rate, mechanism.num_targets
        exp_eps = math.exp(epsilon)
        value_range = (1.0 - sigma) * size * (1.0 + exp_eps) + 2.0 * sigma * (exp_eps - 1.0)
        sizes, weights = mixture_weights(mechanism.batch_size, sigma, mechanism.num_dummies)
        return _mixture_delta(
            sizes, weights, hoeffding_expectation(sizes, exp_eps - 1, value_range)
        )
    gamma = mechanism.randomizer.total_variation_similarity
    sizes, weights = mixture_weights(mechanism.batch_size, gamma, mechanism.num_dummies)
    return max(
        _mixture_delta(sizes, weights, hoeffding_expectation(sizes, v.mean_gap, v.upper - v.lower))
        for v in generic_variables(mechanism, epsilon)
    )


def bennett_delta(mechanism: ScramblerMechanism | GenericScrambler, epsilon: float) -> float:
    """δ(ε) of the uncapped scrambler from Lemma 2 with the corrected Bennett bound."""
    if beyond_epsilon0(mechanism, epsilon):
        return 0.0
    if isinstance(mechanism, ScramblerMechanism):
        variable = randomized_response_variable(
            num_targets=mechanism.num_targets,
            sampling_rate=mechanism.sampling_rate,
            epsilon=epsilon,
        )
        sizes, weights = mixture_weights(
            mechanism.batch_size, mechanism.sampling_rate, mechanism.num_dummies
        )
        return _mixture_delta(sizes, weights, bennett_expectation(sizes, variable))
    gamma = mechanism.randomizer.total_variation_similarity
    sizes, weights = mixture_weights(mechanism.batch_size, gamma, mechanism.num_dummies)
    return max(
        _mixture_delta(sizes, weights, bennett_expectation(sizes, v))
        for v in generic_variables(mechanism, epsilon)
    )


def bennett_printed_delta(mechanism: ScramblerMechanism, epsilon: float) -> float:
    """Lemma 3's Bennett bound exactly as printed, with Lemma 5's constants. NOT VALID.

    Printed: E[Σ L]_+ ≤ b_+ / (a (m+d) ln(1 + a b_+/c)) · exp(−(m+d) c/b_+² φ(a b_+/c)),
    b_+ = (1 − σ)T − σ(1 − e^ε). The extra 1/(a(m+d)) makes it optimistic; kept for the
    paper's figures and for the counter-example tests only.
    """
    sigma, size = mechanism.sampling_rate, mechanism.num_targets
    exp_eps = math.exp(epsilon)
    a = exp_eps - 1.0
    upper = (1.0 - sigma) * size - sigma * (1.0 - exp_eps)
    moment = sigma * (2.0 - sigma) * (1.0 - exp_eps) ** 2 + (1.0 - sigma) ** 2 * size * (
        1.0 + exp_eps**2
    )
    if upper <= 0.0:
        return 0.0
    if a <= 0.0:
        return 1.0
    ratio = a * upper / moment
    phi = (1.0 + ratio) * math.log1p(ratio) - ratio
    sizes, weights = mixture_weights(mechanism.batch_size, sigma, mechanism.num_dummies)
    expectations = (upper / (a * sizes * math.log1p(ratio))) * np.exp(
        -sizes * moment / upper**2 * phi
    )
    return _mixture_delta(sizes, weights, expectations)
