"""Algorithm 2 of the paper: Monte Carlo estimate of Lemma 2's bound for R_σ.

For each number m of blanket draws among the n − 1 other sources, R samples of
[Σ_{i≤N} L_i]_+ (N = m + d + 1) are drawn; the estimate of δ(ε) is their mixture over
m ~ Bin(n − 1, σ). It is an *estimate*: it is reported with a one-sided upper confidence
value (empirical Bernstein bound of Maurer and Pontil, 2009, union-bounded over the m's),
never as a guarantee. The same samples are reused for every ε (common random numbers).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpcomm.accounting import binomial as binom
from dpcomm.accounting.exact import MAX_EXACT_BATCH_SIZE
from dpcomm.accounting.mechanisms import ScramblerMechanism
from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_int, make_rng

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_NEGLIGIBLE_WEIGHT = 1e-30
#: Most samples held at once (R per kept m): a few arrays of this many numbers.
MAX_MONTE_CARLO_DRAWS = 1 << 24


class MonteCarloLemma2:
    """Algorithm 2 with R samples per m, for one uncapped scrambler."""

    def __init__(
        self,
        mechanism: ScramblerMechanism,
        *,
        num_samples: int = 5000,
        confidence: float = 0.99,
        rng: np.random.Generator | int | None = 0,
    ) -> None:
        self.mechanism = mechanism
        self.num_samples = check_int("monte_carlo_samples", num_samples, minimum=1)
        self.confidence = confidence
        n, d, sigma = mechanism.batch_size, mechanism.num_dummies, mechanism.sampling_rate
        size = mechanism.num_targets
        if n > MAX_EXACT_BATCH_SIZE:
            raise InvalidParameterError(
                "batch_size", f"at most {MAX_EXACT_BATCH_SIZE} for the Monte Carlo estimate", n
            )
        counts = np.arange(n)
        weights = binom.pmf(counts, n - 1, sigma) if n > 1 else np.ones(1)
        kept = weights > _NEGLIGIBLE_WEIGHT
        rows = int(np.count_nonzero(kept))
        if rows * self.num_samples > MAX_MONTE_CARLO_DRAWS:
            raise InvalidParameterError(
                "monte_carlo_samples",
                f"at most {MAX_MONTE_CARLO_DRAWS // rows} for n = {n}, σ = {sigma} "
                f"(R samples for each of {rows} likely m must fit in memory; 0 skips the "
                "estimate)",
                num_samples,
            )
        generator = make_rng(rng)
        self.sizes: IntArray = (counts[kept] + d + 1).astype(np.int64)
        self.weights: FloatArray = np.asarray(weights[kept], dtype=float)
        self.neglected = max(0.0, 1.0 - float(self.weights.sum()))
        hit = 1.0 / size
        probabilities = [hit, hit, max(0.0, 1.0 - 2.0 * hit)]
        draws = np.stack(
            [
                generator.multinomial(int(N), probabilities, size=num_samples)[:, :2]
                for N in self.sizes
            ]
        )
        self.hits_true: FloatArray = draws[:, :, 0].astype(float)
        self.hits_other: FloatArray = draws[:, :, 1].astype(float)

    def _samples(self, epsilon: float) -> tuple[FloatArray, float]:
        sigma, size = self.mechanism.sampling_rate, self.mechanism.num_targets
        exp_eps = math.exp(epsilon)
        c0, c1 = sigma * (1.0 - exp_eps), (1.0 - sigma) * size
        sums = self.sizes[:, None] * c0 + c1 * self.hits_true - c1 * exp_eps * self.hits_other
        per_sample = np.maximum(sums, 0.0) / self.sizes[:, None]
        return per_sample, max(0.0, c0 + c1)

    def estimate(self, epsilon: float) -> float:
        """The Monte Carlo estimate of Lemma 2's bound at ε (the paper's Algorithm 2)."""
        per_sample, _ = self._samples(epsilon)
        return float(np.dot(self.weights, per_sample.mean(axis=1)))

    def upper_confidence(self, epsilon: float) -> float:
        """A one-sided upper confidence value for Lemma 2's bound at the stated confidence."""
        per_sample, value_range = self._samples(epsilon)
        if value_range == 0.0:
            return 0.0
        samples = self.num_samples
        failure = (1.0 - self.confidence) / len(self.sizes)
        log_term = math.log(2.0 / failure)
        variance = per_sample.var(axis=1, ddof=1) if samples > 1 else np.zeros(len(self.sizes))
        slack = np.sqrt(2.0 * variance * log_term / samples) + 7.0 * value_range * log_term / (
            3.0 * max(samples - 1, 1)
        )
        upper = np.minimum(per_sample.mean(axis=1) + slack, value_range)
        return min(1.0, float(np.dot(self.weights, upper)) + self.neglected * value_range)
