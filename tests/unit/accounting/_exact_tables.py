"""The exact accountant as it was before issue 12 (O(z²) tables), kept only as a reference.

Copied from ``src/dpcomm/accounting/exact.py`` (same project, same license) at commit c23df04;
the tests check that the windowed evaluation returns the same δ(ε) to 1e-9 relative.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom

from dpcomm.accounting.exact import (
    _SAFETY,
    _TAIL_PROBABILITY,
    FloatArray,
    IntArray,
    _kept_blanket_range,
    _tail_sum_table,
    _tail_table,
    _upper_quantile,
    expected_positive_part,
)
from dpcomm.accounting.mechanisms import ScramblerMechanism


class ExactLemma2Tables:
    """The pre-issue-12 ExactLemma2 (full z × k tables), kept as the tests' reference.

    The ε-independent tables (binomial weights over m and Z) are built once here, so that
    searching ε for a target δ costs a few array gathers per step.
    """

    def __init__(self, mechanism: ScramblerMechanism) -> None:
        self.mechanism = mechanism
        sigma, n, d, size = (
            mechanism.sampling_rate,
            mechanism.batch_size,
            mechanism.num_dummies,
            mechanism.num_targets,
        )
        self.hit = min(1.0, 2.0 / size)
        # Range of m (blanket draws among the n − 1 other sources) kept exactly.
        m_lo, m_hi = _kept_blanket_range(n, sigma)
        counts = np.arange(m_lo, m_hi + 1)
        self.sizes = (counts + d + 1).astype(np.int64)
        if n == 1:
            self.weights = np.ones(1)
        else:
            self.weights = np.asarray(binom.pmf(counts, n - 1, sigma), dtype=float)
        below = float(binom.cdf(m_lo - 1, n - 1, sigma)) if m_lo > 0 else 0.0
        above = float(binom.sf(m_hi, n - 1, sigma)) if m_hi < n - 1 else 0.0
        # Rows: the kept sizes, then N = d + 1 (charged for m < m_lo).
        self.row_sizes: IntArray = np.concatenate([self.sizes, [d + 1]]).astype(np.int64)
        self.row_weights: FloatArray = np.concatenate([self.weights, [below]])
        self.row_weights[len(self.sizes) - 1] += above  # charged at g(N_hi)
        z_hi = np.minimum(
            self.row_sizes, _upper_quantile(_TAIL_PROBABILITY, self.row_sizes, self.hit)
        )
        self.z_max = int(z_hi.max())
        z = np.arange(self.z_max + 1)
        self.z_grid: IntArray = np.broadcast_to(z, (len(self.row_sizes), self.z_max + 1)).copy()
        pmf = binom.pmf(z[None, :], self.row_sizes[:, None], self.hit)
        self.z_weights: FloatArray = np.where(z[None, :] <= z_hi[:, None], pmf, 0.0)
        # (c1/2) E[Z; Z > z_hi] / N = (c1 · hit / 2) P(Bin(N − 1, hit) ≥ z_hi + 1), per row.
        self.z_tail = np.asarray(
            binom.sf(z_hi, np.maximum(self.row_sizes - 1, 0), self.hit), dtype=float
        )
        self.tails = _tail_table(self.z_max + 3)
        self.tail_sums = _tail_sum_table(self.z_max + 3)

    def delta(self, epsilon: float) -> float:
        """The bound on δ(ε) (Lemma 2 with E[Σ L_i]_+ computed exactly)."""
        mechanism = self.mechanism
        sigma, size = mechanism.sampling_rate, mechanism.num_targets
        if math.isinf(epsilon):
            return 0.0
        exp_eps = math.exp(epsilon)
        c0 = sigma * (1.0 - exp_eps)
        c1 = (1.0 - sigma) * size
        c2 = c1 * exp_eps
        if c1 + c0 <= 0.0:  # L ≤ 0 surely (σ = 1, or ε beyond ε0)
            return 0.0
        sizes = self.row_sizes[:, None].astype(float)
        positive = expected_positive_part(
            self.z_grid,
            sizes,
            c0=c0,
            c1=c1,
            c2=c2,
            tails=self.tails,
            tail_sums=self.tail_sums,
        )
        per_size = (self.z_weights * positive).sum(axis=1) / self.row_sizes
        per_size += (c1 * self.hit / 2.0) * self.z_tail
        total = float(np.dot(self.row_weights, per_size))
        return min(1.0, total * _SAFETY)
