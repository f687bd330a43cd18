"""Exact numerical evaluation of Lemma 2's bound for R_σ (no sampling, no concentration).

Algorithm 2 of the paper estimates E[Σ_{i≤N} L_i]_+ by Monte Carlo; here it is computed
exactly. For R_σ, Σ_{i≤N} L_i = N c0 + c1 H − c2 (Z − H), where Z ~ Bin(N, 2/T) counts the
blanket draws that hit t or t', H | Z ~ Bin(Z, 1/2) those that hit t, c0 = σ(1 − e^ε),
c1 = (1 − σ)T and c2 = (1 − σ)T e^ε. Then

    E[(ΣL)_+ | Z] = (N c0 − c2 Z) P(H ≥ k) + (c1 + c2) (Z/2) P(H' ≥ k − 1),
    k = ⌊(c2 Z − N c0)/(c1 + c2)⌋ + 1,  H' ~ Bin(Z − 1, 1/2).

Truncations only ever *add* to the result, so the value stays an upper bound:

* Z above a quantile: (ΣL)_+ ≤ c1 H, so the dropped part is at most (c1/2) E[Z; Z > z].
* m outside [m_lo, m_hi]: g(N) = E[(ΣL)_+]/N is non-increasing in N (S_N/N is the average
  of the N leave-one-out means; (·)_+ is convex), so the dropped weights are charged at
  g(d + 1) below and at g(N_hi) above.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln
from scipy.stats import binom

from dpcomm.accounting.mechanisms import ScramblerMechanism
from dpcomm.errors import InvalidParameterError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_TAIL_PROBABILITY = 1e-30
_SAFETY = 1.0 + 1e-9


@lru_cache(maxsize=8)
def _half_binomial_tails(size: int) -> FloatArray:
    """Table T[z, k] = P(Bin(z, 1/2) ≥ k) for 0 ≤ z < size, 0 ≤ k ≤ size (read-only)."""
    z = np.arange(size, dtype=float)[:, None]
    k = np.arange(size + 1, dtype=float)[None, :]
    with np.errstate(invalid="ignore"):
        log_pmf = gammaln(z + 1) - gammaln(k + 1) - gammaln(z - k + 1) - z * math.log(2.0)
    pmf = np.where(k <= z, np.exp(np.where(k <= z, log_pmf, 0.0)), 0.0)
    tails: FloatArray = np.minimum(np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1], 1.0)
    tails.setflags(write=False)
    return tails


@lru_cache(maxsize=8)
def _half_binomial_tail_sums(size: int) -> FloatArray:
    """Table S[z, k] = Σ_{j ≥ k} P(Bin(z, 1/2) ≥ j) = E[(H − k + 1)_+] (read-only)."""
    tails = _half_binomial_tails(size)
    sums: FloatArray = np.cumsum(tails[:, ::-1], axis=1)[:, ::-1].copy()
    sums.setflags(write=False)
    return sums


#: Relative rounding allowance of one margin a·k − b (a few units in the last place).
_ROUNDING = 8.0 * np.finfo(float).eps


def expected_positive_part(
    z_grid: IntArray,
    sizes: FloatArray,
    *,
    c0: float,
    c1: float,
    c2: float,
    tails: FloatArray,
    tail_sums: FloatArray,
) -> FloatArray:
    """An upper bound on E[(N c0 + c1 H − c2 (Z − H))_+ | Z], H ~ Bin(Z, 1/2), per (row, z).

    With a = c1 + c2 and b = c2 Z − N c0 the sum is aH − b. For every integer k not above the
    threshold k* (the smallest h with a h > b), (aH − b)_+ ≤ (a k − b)_+ + a (H − k)_+, with
    equality at k = k*; hence E ≤ (a k − b)_+ P(H ≥ k) + a Σ_{j > k} P(H ≥ j), a sum of two
    non-negative terms. Written as (N c0 − c2 Z) P(H ≥ k) + a (Z/2) P(H' ≥ k − 1), the same
    value subtracts two terms of size e^ε that nearly cancel, which loses every digit when e^ε
    is large (σ = 0 needs ε up to ~37) and can even return 0. k* is located among three
    candidates around ⌊b/a⌋ + 1 with an allowance for rounding, so the k used is never above
    k*, and the margin a k − b is rounded up: the result is an upper bound.
    """
    a = c1 + c2
    zf = z_grid.astype(float)
    first = np.floor((c2 * zf - sizes * c0) / a).astype(np.int64) + 1
    chosen = z_grid + 1  # beyond Z: P(H ≥ Z + 1) = 0, the value 0
    chosen_margin = np.zeros(z_grid.shape)
    for offset in (1, 0, -1):  # the smallest possibly-positive candidate wins
        candidate = np.clip(first + offset, 0, z_grid + 1)
        hf = candidate.astype(float)
        margin = c1 * hf - c2 * (zf - hf) + sizes * c0
        allowance = _ROUNDING * (c1 * hf + c2 * np.abs(zf - hf) + sizes * abs(c0))
        possible = margin + allowance > 0.0
        chosen = np.where(possible, candidate, chosen)
        chosen_margin = np.where(possible, margin + allowance, chosen_margin)
    at_threshold = tails[z_grid, chosen]
    beyond = tail_sums[z_grid, chosen + 1]
    result: FloatArray = chosen_margin * at_threshold + a * beyond
    return result


def _upper_quantile(probability: float, trials: IntArray, success: float) -> IntArray:
    """Smallest z with P(Bin(N, p) > z) ≤ probability, per N (bisection on the exact sf).

    scipy's ``isf`` loses accuracy for probabilities far below machine epsilon; ``sf`` does not.
    """
    low = np.floor(trials * success).astype(np.int64) - 1
    high = trials.astype(np.int64)
    while np.any(high - low > 1):
        middle = (low + high) // 2
        small = binom.sf(middle, trials, success) <= probability
        high = np.where(small, middle, high)
        low = np.where(small, low, middle)
    return high


def _lower_quantile(probability: float, trials: int, success: float) -> int:
    """Largest z with P(Bin(N, p) < z) ≤ probability (bisection on the exact cdf)."""
    low, high = 0, math.ceil(trials * success) + 1
    while high - low > 1:
        middle = (low + high) // 2
        if binom.cdf(middle - 1, trials, success) <= probability:
            low = middle
        else:
            high = middle
    return low


def _tail_table(size: int) -> FloatArray:
    rounded = 1 << max(6, math.ceil(math.log2(size + 1)))
    return _half_binomial_tails(rounded)


def _tail_sum_table(size: int) -> FloatArray:
    rounded = 1 << max(6, math.ceil(math.log2(size + 1)))
    return _half_binomial_tail_sums(rounded)


#: Largest batch size n the exact accountant takes (its rows span the likely m of Bin(n − 1, σ)).
MAX_EXACT_BATCH_SIZE = 10_000_000
#: Largest side of the binomial tail tables (two float64 tables of this size squared: 512 MiB).
MAX_EXACT_TABLE = 8192
#: Largest number of (m, Z) cells evaluated per ε (a few float64 arrays of this many entries).
MAX_EXACT_CELLS = 1 << 22


def _kept_blanket_range(batch_size: int, sampling_rate: float) -> tuple[int, int]:
    """The range [m_lo, m_hi] of blanket draws among the n − 1 other sources kept exactly."""
    n, sigma = batch_size, sampling_rate
    if n == 1 or sigma == 0.0:
        return 0, 0
    if sigma == 1.0:
        return n - 1, n - 1
    m_lo = _lower_quantile(_TAIL_PROBABILITY, n - 1, sigma)
    m_hi = int(_upper_quantile(_TAIL_PROBABILITY, np.array([n - 1]), sigma)[0])
    return max(0, m_lo), min(n - 1, max(m_hi, m_lo))


def _exact_fits(num_targets: int, sampling_rate: float, batch_size: int, num_dummies: int) -> bool:
    """Whether :class:`ExactLemma2`'s tables for (T, σ, n, d) stay within the limits above."""
    if batch_size > MAX_EXACT_BATCH_SIZE:
        return False
    m_lo, m_hi = _kept_blanket_range(batch_size, sampling_rate)
    largest = m_hi + num_dummies + 1
    hit = min(1.0, 2.0 / num_targets)
    z_max = min(largest, int(_upper_quantile(_TAIL_PROBABILITY, np.array([largest]), hit)[0]))
    rows = m_hi - m_lo + 2
    return z_max + 3 <= MAX_EXACT_TABLE and rows * (z_max + 1) <= MAX_EXACT_CELLS


def _largest(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest x in [low, high] with fits(x), given fits(low) and not fits(high)."""
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low


def check_exact_size(mechanism: ScramblerMechanism) -> None:
    """Refuse a scrambler whose exact accounting would not fit in memory.

    The exact evaluation of Lemma 2 builds tables whose side grows like (2/T)(σ n + d) and whose
    rows grow like √n. The error names the parameter to reduce and its largest allowed value
    (the others fixed): ``num_dummies`` when a smaller d fits, else ``batch_size``.
    """
    size, sigma = mechanism.num_targets, mechanism.sampling_rate
    n, d = mechanism.batch_size, mechanism.num_dummies
    if _exact_fits(size, sigma, n, d):
        return
    why = "(the exact accountant's tables must fit in memory)"
    if n <= MAX_EXACT_BATCH_SIZE and _exact_fits(size, sigma, n, 0):
        largest = _largest(lambda dummies: _exact_fits(size, sigma, n, dummies), 0, d)
        raise InvalidParameterError(
            "num_dummies", f"at most {largest} with T = {size}, σ = {sigma}, n = {n} {why}", d
        )
    high = min(n, MAX_EXACT_BATCH_SIZE + 1)
    largest = _largest(lambda batch: _exact_fits(size, sigma, batch, 0), 1, high)
    raise InvalidParameterError(
        "batch_size", f"at most {largest} with T = {size}, σ = {sigma}, d = 0 {why}", n
    )


class ExactLemma2:
    """Evaluates Lemma 2's bound exactly for one uncapped scrambler; reusable across ε.

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
        check_exact_size(mechanism)
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


def exact_delta(mechanism: ScramblerMechanism, epsilon: float) -> float:
    """δ(ε) of the uncapped scrambler: Lemma 2's bound evaluated exactly (see module doc)."""
    return ExactLemma2(mechanism).delta(epsilon)


# --- Lemma 2 at one ε for many (n, d): the planner's fast path ---------------------------


class SizeTable:
    """σ- and ε-independent parts of ExactLemma2's rows, per N: z_hi and the Z-tail weight."""

    def __init__(self, num_targets: int) -> None:
        self.hit = min(1.0, 2.0 / num_targets)
        self.z_high = np.full(0, -1, dtype=np.int64)
        self.z_tail = np.zeros(0)

    def get(self, sizes: IntArray) -> tuple[IntArray, FloatArray]:
        """z_hi and the Z-tail weight of every size in ``sizes`` (extends the table)."""
        largest = int(sizes.max())
        if largest >= len(self.z_high):
            grown = max(largest + 1, 2 * len(self.z_high), 64)
            self.z_high = np.concatenate(
                [self.z_high, np.full(grown - len(self.z_high), -1, dtype=np.int64)]
            )
            self.z_tail = np.concatenate([self.z_tail, np.zeros(grown - len(self.z_tail))])
        wanted = np.unique(sizes[self.z_high[sizes] < 0])
        if wanted.size:
            # Whole blocks of 256 sizes at once: few scipy calls, each on a long array.
            blocks = np.unique(wanted // 256)
            missing = (blocks[:, None] * 256 + np.arange(256)[None, :]).ravel()
            missing = missing[missing < len(self.z_high)]
            high = np.minimum(missing, _upper_quantile(_TAIL_PROBABILITY, missing, self.hit))
            self.z_high[missing] = high
            self.z_tail[missing] = np.asarray(
                binom.sf(high, np.maximum(missing - 1, 0), self.hit), dtype=float
            )
        return self.z_high[sizes], self.z_tail[sizes]


def _binomial_pmf(z: IntArray, trials: IntArray, success: float) -> FloatArray:
    """P(Bin(trials, success) = z) from log-gamma.

    About 3 times faster than scipy's pmf; the relative difference is about 1e-11, and the
    tests bound the evaluator's difference with ExactLemma2.
    """
    if success >= 1.0:
        result: FloatArray = np.where(z == trials, 1.0, 0.0)
        return result
    zf = z.astype(float)
    nf = trials.astype(float)
    valid = zf <= nf
    with np.errstate(invalid="ignore"):
        log_pmf = (
            gammaln(nf + 1.0)
            - gammaln(zf + 1.0)
            - gammaln(np.where(valid, nf - zf, 0.0) + 1.0)
            + zf * math.log(success)
            + (nf - zf) * math.log1p(-success)
        )
    result = np.where(valid, np.exp(np.where(valid, log_pmf, -np.inf)), 0.0)
    return result


def _binomial_window(trials: int, success: float) -> tuple[int, int]:
    """ExactLemma2's kept range of m ~ Bin(trials, success), with two vectorized calls.

    Lower end: the largest z <= ⌈trials·p⌉ with P(Bin < z) <= 1e-30 (``_lower_quantile``);
    upper end: the smallest z >= ⌊trials·p⌋ − 1 with P(Bin > z) <= 1e-30 (``_upper_quantile``).
    The cdf and sf are monotone, so the first and last passing z equal the bisections' answers.
    """
    top = math.ceil(trials * success)
    low_z = np.arange(1, top + 1)
    passing = np.flatnonzero(binom.cdf(low_z - 1, trials, success) <= _TAIL_PROBABILITY)
    m_lo = int(low_z[passing[-1]]) if passing.size else 0
    if passing.size and passing[-1] != passing.size - 1:
        # Not monotone in floating point: fall back on the bisection itself.
        m_lo = _lower_quantile(_TAIL_PROBABILITY, trials, success)
    start = math.floor(trials * success) - 1
    high_z = np.arange(max(start + 1, 0), trials + 1)
    above = np.flatnonzero(binom.sf(high_z, trials, success) <= _TAIL_PROBABILITY)
    m_hi = int(high_z[above[0]]) if above.size else trials
    if start + 1 < 0 or (above.size and above[-1] != len(high_z) - 1):
        m_hi = int(_upper_quantile(_TAIL_PROBABILITY, np.array([trials]), success)[0])
    return m_lo, m_hi


class Lemma2AtEpsilon:
    """Lemma 2's bound as :class:`~dpcomm.accounting.exact.ExactLemma2` computes it, at one ε.

    ExactLemma2 builds, per mechanism, rows N = m + d + 1 and evaluates g(N) = E[Σ_{i≤N}
    L_i]_+/N exactly (App. E, Lemma 2). g depends only on (T, σ, ε, N), so for one (T, σ, ε)
    this class caches g per N and answers δ(n, d) for any n, d with a dot product, with the
    same truncations, tail charges and safety factor (the tests check equality with
    ExactLemma2 to 1e-9 relative). This is what makes the planner's search fast.
    """

    def __init__(
        self, *, num_targets: int, sampling_rate: float, epsilon: float, sizes: SizeTable
    ) -> None:
        self.num_targets = num_targets
        self.sampling_rate = sampling_rate
        self.epsilon = epsilon
        self._sizes = sizes
        exp_eps = math.exp(epsilon)
        self._c0 = sampling_rate * (1.0 - exp_eps)
        self._c1 = (1.0 - sampling_rate) * num_targets
        self._c2 = self._c1 * exp_eps
        self._zero = self._c1 + self._c0 <= 0.0
        self._values = np.full(0, np.nan)
        self._windows: dict[int, tuple[IntArray, FloatArray, float, float]] = {}

    def _window(self, batch: int) -> tuple[IntArray, FloatArray, float, float]:
        """The m kept exactly (counts, weights) and the charged tail masses below and above."""
        cached = self._windows.get(batch)
        if cached is not None:
            return cached
        sigma, n = self.sampling_rate, batch
        if n == 1 or sigma == 0.0:
            m_lo = m_hi = 0
        elif sigma == 1.0:
            m_lo = m_hi = n - 1
        else:
            m_lo, m_hi = _binomial_window(n - 1, sigma)
            m_lo, m_hi = max(0, m_lo), min(n - 1, max(m_hi, m_lo))
        counts = np.arange(m_lo, m_hi + 1, dtype=np.int64)
        weights = np.ones(1) if n == 1 else np.asarray(binom.pmf(counts, n - 1, sigma), dtype=float)
        below = float(binom.cdf(m_lo - 1, n - 1, sigma)) if m_lo > 0 else 0.0
        above = float(binom.sf(m_hi, n - 1, sigma)) if m_hi < n - 1 else 0.0
        window = (counts, weights, below, above)
        self._windows[batch] = window
        return window

    def _per_size(self, sizes: IntArray) -> FloatArray:
        """g(N) + the charged Z tail, per N (cached)."""
        largest = int(sizes.max())
        if largest >= len(self._values):
            grown = max(largest + 1, 2 * len(self._values), 64)
            self._values = np.concatenate(
                [self._values, np.full(grown - len(self._values), np.nan)]
            )
        missing = np.unique(sizes[np.isnan(self._values[sizes])])
        if missing.size:
            self._values[missing] = self._compute(missing)
        result: FloatArray = self._values[sizes]
        return result

    def _compute(self, rows: IntArray) -> FloatArray:
        """ExactLemma2.delta's per-row value for the sizes ``rows`` (same formulas)."""
        c0, c1, c2 = self._c0, self._c1, self._c2
        hit = self._sizes.hit
        z_hi, z_tail = self._sizes.get(rows)
        out = np.empty(len(rows))
        # Chunks bound the (rows x z) grid's memory.
        order = np.argsort(rows)
        chunk = max(1, 2_000_000 // (int(z_hi.max()) + 1))
        for start in range(0, len(rows), chunk):
            index = order[start : start + chunk]
            sizes_int = rows[index]
            high = z_hi[index]
            z_max = int(high.max())
            # Below z = N|c0|/c1 the threshold k exceeds z and the term is exactly 0.
            z_min = 0
            if c1 > 0.0:
                z_min = max(0, min(z_max, math.floor(int(sizes_int.min()) * -c0 / c1) - 2))
            z = np.arange(z_min, z_max + 1)
            z_grid = np.broadcast_to(z, (len(index), len(z)))
            pmf = _binomial_pmf(z[None, :], sizes_int[:, None], hit)
            z_weights = np.where(z[None, :] <= high[:, None], pmf, 0.0)
            sizes = sizes_int[:, None].astype(float)
            positive = expected_positive_part(
                np.ascontiguousarray(z_grid),
                sizes,
                c0=c0,
                c1=c1,
                c2=c2,
                tails=_tail_table(z_max + 3),
                tail_sums=_tail_sum_table(z_max + 3),
            )
            values = (z_weights * positive).sum(axis=1) / sizes_int
            values += (c1 * hit / 2.0) * z_tail[index]
            out[index] = values
        return out

    def delta(self, *, batch_size: int, num_dummies: int) -> float:
        """ExactLemma2(ScramblerMechanism(T, σ, n, d)).delta(ε)."""
        if math.isinf(self.epsilon) or self._zero:
            return 0.0
        counts, weights, below, above = self._window(batch_size)
        rows = np.concatenate([counts + num_dummies + 1, [num_dummies + 1]]).astype(np.int64)
        row_weights = np.concatenate([weights, [below]])
        row_weights[len(counts) - 1] += above
        total = float(np.dot(row_weights, self._per_size(rows)))
        return min(1.0, total * _SAFETY)
