"""Exact numerical evaluation of Lemma 2's bound for R_σ (no sampling, no concentration).

Algorithm 2 of the paper estimates E[Σ_{i≤N} L_i]_+ by Monte Carlo; here it is computed
exactly. For R_σ, Σ_{i≤N} L_i = N c0 + c1 H − c2 (Z − H), where Z ~ Bin(N, 2/T) counts the
blanket draws that hit t or t', H | Z ~ Bin(Z, 1/2) those that hit t, c0 = σ(1 − e^ε),
c1 = (1 − σ)T and c2 = (1 − σ)T e^ε. Then

    E[(ΣL)_+ | Z] = (N c0 − c2 Z) P(H ≥ k) + (c1 + c2) (Z/2) P(H' ≥ k − 1),
    k = ⌊(c2 Z − N c0)/(c1 + c2)⌋ + 1,  H' ~ Bin(Z − 1, 1/2).

Truncations only ever *add* to the result, so the value stays an upper bound:

* Z above a quantile: (ΣL)_+ ≤ c1 H, so the dropped part is at most (c1/2) E[Z; Z > z].
* Z below a (1e-100) quantile z_lo: the same bound, (c1/2) E[Z; Z < z_lo], charged unless
  c1 (z_lo − 1) + N c0 ≤ 0, when every dropped cell is exactly 0 (H ≤ Z).
* Pairs (block of N, Z) with c1 Z + N c0 ≤ 0 are skipped: their value is exactly 0.

ExactLemma2 evaluates these cells by blocks of 64 rows (see its docstring); memory is
O(blocks × Z window), about 5 million entries at n = 10^6.
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

from dpcomm.accounting import binomial as binom
from dpcomm.accounting.mechanisms import ScramblerMechanism
from dpcomm.accounting.search import integer_crossing
from dpcomm.errors import InvalidParameterError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Reads (T_k, S_{k+1}) of Bin(z, 1/2) at cells (z, k) (`_RowGroup._window_lookup`).
_Lookup = Callable[[IntArray, IntArray], tuple[FloatArray, FloatArray]]
#: The (block, Z) pairs where k changes within the block: blocks, Z columns, pair indices.
_Mixed = tuple[list[IntArray], list[IntArray], list[IntArray]]

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
    chosen, chosen_margin = _threshold(z_grid, sizes, c0=c0, c1=c1, c2=c2)
    at_threshold = tails[z_grid, chosen]
    beyond = tail_sums[z_grid, chosen + 1]
    result: FloatArray = chosen_margin * at_threshold + (c1 + c2) * beyond
    return result


def _threshold(
    z_grid: IntArray, sizes: FloatArray, *, c0: float, c1: float, c2: float
) -> tuple[IntArray, FloatArray]:
    """The k of `expected_positive_part` per cell and its margin a k − b rounded up.

    k is the smallest of three candidates around ⌊b/a⌋ + 1 whose margin plus a rounding
    allowance is positive (Z + 1, margin 0, when none is). For fixed Z it is non-decreasing in
    N (the margin plus allowance decreases in N when c0 ≤ 0), which `ExactLemma2` uses.
    """
    a = c1 + c2
    zf = z_grid.astype(float)
    first = np.floor((c2 * zf - sizes * c0) / a).astype(np.int64) + 1
    chosen = z_grid + 1  # beyond Z: P(H ≥ Z + 1) = 0, the value 0
    chosen_margin = np.zeros(np.broadcast_shapes(z_grid.shape, np.shape(sizes)))
    for offset in (1, 0, -1):  # the smallest possibly-positive candidate wins
        candidate = np.clip(first + offset, 0, z_grid + 1)
        hf = candidate.astype(float)
        margin = c1 * hf - c2 * (zf - hf) + sizes * c0
        allowance = _ROUNDING * (c1 * hf + c2 * np.abs(zf - hf) + sizes * abs(c0))
        possible = margin + allowance > 0.0
        chosen = np.where(possible, candidate, chosen)
        chosen_margin = np.where(possible, margin + allowance, chosen_margin)
    return chosen, chosen_margin


def _fast_threshold(
    z: IntArray, sizes: FloatArray, *, c0: float, c1: float, c2: float
) -> tuple[IntArray, FloatArray]:
    """`_threshold`'s k and margin, with its three-candidate search only near integers.

    Away from an integer by more than the rounding of x = (c2 Z − N c0)/a, k = ⌊x⌋ + 1
    (clipped to [0, Z + 1]) is the only candidate whose margin plus allowance is positive and
    is the smallest: the same k as `_threshold`, and the same margin formula.
    """
    a = c1 + c2
    zf = z.astype(float)
    x = (c2 * zf - sizes * c0) / a
    tolerance = 1e-12 * (np.abs(x) + 2.0 * zf + 4.0)
    k = np.minimum(np.maximum(np.floor(x - tolerance).astype(np.int64) + 1, 0), z + 1)
    upper = np.minimum(np.maximum(np.floor(x + tolerance).astype(np.int64) + 1, 0), z + 1)
    hf = k.astype(float)
    margin = (
        c1 * hf
        - c2 * (zf - hf)
        + sizes * c0
        + _ROUNDING * (c1 * hf + c2 * np.abs(zf - hf) + sizes * abs(c0))
    )
    margin = np.where(k > z, 0.0, margin)
    near = np.nonzero(k != upper)
    if near[0].size:
        sizes_near = np.broadcast_to(sizes, np.shape(x))[near]
        k[near], margin[near] = _threshold(z[near], sizes_near, c0=c0, c1=c1, c2=c2)
    return k, margin


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
#: Largest number of entries of each ε-independent block table and of the per-ε (Z, k) window
#: tables (float64; a few such tables: about 200 MiB each at the limit).
MAX_EXACT_CELLS = 1 << 23
#: Consecutive sizes N summed together in the ε-independent block tables.
_BLOCK_ROWS = 64
#: Z below the lower quantile of this probability is not evaluated (charged, see _RowGroup).
_LOWER_TAIL_PROBABILITY = 1e-100
#: Cells per chunk of the evaluation (bounds the temporaries' memory).
_CHUNK_CELLS = 1 << 18
#: Most (pair, row) cells a row group keeps across ε (two float64 tables: 16 MiB at most).
_CACHED_CELLS = 1 << 20


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


def _lower_quantiles(probability: float, trials: IntArray, success: float) -> IntArray:
    """Largest z with P(Bin(N, p) < z) ≤ probability, per N (bisection on the exact cdf)."""
    low = np.zeros(len(trials), dtype=np.int64)  # P(Bin < 0) = 0
    high = np.minimum(np.ceil(trials * success).astype(np.int64) + 1, trials + 1)
    active = np.flatnonzero(high - low > 1)
    while active.size:
        middle = (low[active] + high[active]) // 2
        small = binom.cdf(middle - 1, trials[active], success) <= probability
        low[active] = np.where(small, middle, low[active])
        high[active] = np.where(small, high[active], middle)
        active = active[high[active] - low[active] > 1]
    return low


def _z_windows(sizes: IntArray, hit: float) -> tuple[IntArray, IntArray]:
    """The Z kept exactly per N: [z_lo, z_hi], cut at the lower and upper tail probabilities."""
    z_hi = np.minimum(sizes, _upper_quantile(_TAIL_PROBABILITY, sizes, hit))
    z_lo = np.minimum(_lower_quantiles(_LOWER_TAIL_PROBABILITY, sizes, hit), z_hi)
    return z_lo, z_hi


def _exact_cells(
    num_targets: int, sampling_rate: float, batch_size: int, num_dummies: int
) -> tuple[int, int]:
    """Estimated entries of ExactLemma2's block tables and of its largest (Z, k) window table."""
    m_lo, m_hi = _kept_blanket_range(batch_size, sampling_rate)
    rows = m_hi - m_lo + 1
    hit = min(1.0, 2.0 / num_targets)
    n_min, n_max = m_lo + num_dummies + 1, m_hi + num_dummies + 1
    ends = np.array([n_min, max(n_min, n_max - _BLOCK_ROWS), n_max], dtype=np.int64)
    z_lo, z_hi = _z_windows(ends, hit)
    width = int(z_hi[2] - z_lo[1]) + 1
    single_rows = hit >= 1.0 or int(z_hi[2]) > n_min
    blocks = rows + 1 if single_rows else rows // _BLOCK_ROWS + 3
    span = 8
    if sampling_rate < 1.0:  # k spans (N_max − N_min)|c0|/a + a few; |c0|/a < σ/((1 − σ)T)
        span += math.ceil(rows * sampling_rate / ((1.0 - sampling_rate) * num_targets))
    span = min(span, int(z_hi[2]) + 3)  # k ∈ [0, Z + 1] whatever σ (σ → 1 made it unbounded)
    return blocks * width, (int(z_hi[2] - z_lo[0]) + 1) * span


def _exact_fits(num_targets: int, sampling_rate: float, batch_size: int, num_dummies: int) -> bool:
    """Whether `ExactLemma2`'s tables for (T, σ, n, d) stay within the limits above."""
    if batch_size > MAX_EXACT_BATCH_SIZE:
        return False
    blocks, window = _exact_cells(num_targets, sampling_rate, batch_size, num_dummies)
    return blocks <= MAX_EXACT_CELLS and window <= MAX_EXACT_CELLS


def check_exact_size(mechanism: ScramblerMechanism) -> None:
    """Refuse a scrambler whose exact accounting would not fit in memory.

    The windowed evaluation keeps tables of (rows/64 blocks) × (Z window) entries, the window
    growing like √((2/T)(σ n + d)) and the rows like √n (about a million entries at n = 10^6,
    σ = 0.5, T = 20). The error names the parameter to reduce and its largest allowed value
    (the others fixed): ``num_dummies`` when a smaller d fits, else ``batch_size``.
    """
    size, sigma = mechanism.num_targets, mechanism.sampling_rate
    n, d = mechanism.batch_size, mechanism.num_dummies
    if _exact_fits(size, sigma, n, d):
        return
    why = "(the exact accountant's tables must fit in memory)"
    if n <= MAX_EXACT_BATCH_SIZE and _exact_fits(size, sigma, n, 0):
        largest = integer_crossing(lambda dummies: _exact_fits(size, sigma, n, dummies), 0, d)
        raise InvalidParameterError(
            "num_dummies", f"at most {largest} with T = {size}, σ = {sigma}, n = {n} {why}", d
        )
    high = min(n, MAX_EXACT_BATCH_SIZE + 1)
    largest = integer_crossing(lambda batch: _exact_fits(size, sigma, batch, 0), 1, high)
    raise InvalidParameterError(
        "batch_size", f"at most {largest} with T = {size}, σ = {sigma}, d = 0 {why}", n
    )


def _half_binomial_window(
    z: IntArray, k_low: IntArray, width: int
) -> tuple[FloatArray, FloatArray]:
    """P(H ≥ k) and Σ_{j ≥ k} P(H ≥ j) = E[(H − k + 1)_+], H ~ Bin(z, 1/2), k = k_low + 0..width−1.

    Per z: the pmf from scipy at k_low and the ratio (z − k + 1)/k upwards; the tail and the
    tail sum beyond the window exactly (sf, and E[(H − top)_+] = (z/2) P(Bin(z − 1, 1/2) ≥ top)
    − top P(H > top), both terms at most a few ulps apart relative to the result since k ≥ z/2
    − 2); then sums of non-negative terms downwards, as the former z × k tables did.
    """
    steps = np.arange(width)
    top = k_low + width - 1
    zf = z.astype(float)
    kk = (k_low[:, None] + steps[None, 1:]).astype(float)
    factors = np.maximum(zf[:, None] - kk + 1.0, 0.0) / kk
    pmf = np.empty((len(z), width))
    pmf[:, 0] = binom.pmf(k_low, z, 0.5)
    pmf[:, 1:] = pmf[:, :1] * np.cumprod(factors, axis=1)
    del factors, kk
    beyond = np.asarray(binom.sf(top, z, 0.5), dtype=float)
    tails = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
    tails += beyond[:, None]
    del pmf
    smaller = np.asarray(binom.sf(top - 1, np.maximum(z - 1, 0), 0.5), dtype=float)
    after = np.where(z > 0, np.maximum(0.5 * zf * smaller - top * beyond, beyond), 0.0)
    sums = np.cumsum(tails[:, ::-1], axis=1)[:, ::-1]
    sums += after[:, None]
    return tails, sums


class _RowGroup:
    """Consecutive sizes N (weights W) of ExactLemma2, in blocks of up to 64 rows.

    ε-independent, per block b and Z = z: Q0 = Σ_N W_N P(Bin(N, 2/T) = z) and Q1 = Σ_N W_N
    P(Bin(N, 2/T) = z)/N over the block's rows whose window [z_lo(N), z_hi(N)] holds z, and the
    pmf of the block's first row (from which the other rows' pmfs follow by the exact ratio
    N (1 − p)/(N − z); a block only groups rows whose z_hi stays at most its first N).
    """

    def __init__(self, sizes: IntArray, weights: FloatArray, hit: float) -> None:
        self.hit = hit
        self.sizes = sizes
        z_lo, z_hi = _z_windows(sizes, hit)
        trials = np.maximum(sizes - 1, 0)
        # Per unit c1: (p/2) P(Bin(N − 1, p) > z_hi) (Z above z_hi) and (p/2) P(Bin(N − 1, p)
        # ≤ z_lo − 2) (Z below z_lo), each = (1/2) E[Z; tail]/N, see ExactLemma2.delta.
        self.upper_charge = float(
            np.dot(weights, (hit / 2.0) * np.asarray(binom.sf(z_hi, trials, hit), dtype=float))
        )
        below = np.asarray(binom.cdf(z_lo - 2, trials, hit), dtype=float)
        self.lower_charge = weights * (hit / 2.0) * np.where(z_lo >= 2, below, 0.0)
        self.z_lo = z_lo
        starts = [0]
        while starts[-1] < len(sizes):
            start, count = starts[-1], 1
            while (
                count < _BLOCK_ROWS
                and start + count < len(sizes)
                and z_hi[start + count] <= sizes[start]
            ):
                count += 1
            starts.append(start + count)
        first = np.array(starts[:-1], dtype=np.int64)
        counts = np.diff(np.array(starts, dtype=np.int64))
        rows = max(1, int(counts.max()))
        index = np.minimum(first[:, None] + np.arange(rows)[None, :], (first + counts - 1)[:, None])
        present = np.arange(rows)[None, :] < counts[:, None]
        self.row_sizes: FloatArray = sizes[index].astype(float)
        self.row_weights: FloatArray = np.where(present, weights[index], 0.0)
        self.row_z_lo: IntArray = z_lo[index]
        self.row_z_hi: IntArray = np.where(present, z_hi[index], -1)
        self.first_size = sizes[first]
        self.last_size = sizes[first + counts - 1]
        self.base: IntArray = z_lo[first]
        self.width: IntArray = z_hi[first + counts - 1] - self.base + 1
        columns = int(self.width.max())
        self.columns = columns
        z = self.base[:, None] + np.arange(columns)[None, :]
        inside = np.arange(columns)[None, :] < self.width[:, None]
        self.anchor: FloatArray = np.where(
            inside, binom.pmf(np.where(inside, z, 0), self.first_size[:, None], hit), 0.0
        )
        self.q0 = np.zeros_like(self.anchor)
        self.q1 = np.zeros_like(self.anchor)
        step = max(1, _CHUNK_CELLS // (rows * columns))
        for start in range(0, len(first), step):
            blocks = np.repeat(np.arange(start, min(start + step, len(first))), columns)
            column = np.tile(np.arange(columns), len(blocks) // columns)
            weighted, row_sizes = self._cells(blocks, column)
            self.q0[blocks, column] = weighted.sum(axis=1)
            self.q1[blocks, column] = (weighted / row_sizes).sum(axis=1)
        # Only the (block, z) pairs with weight, flattened (block-major, z ascending).
        pair_block, pair_column = np.nonzero(self.q0 > 0.0)
        self.pair_block = pair_block.astype(np.int64)
        self.pair_column = pair_column.astype(np.int64)
        self.pair_z: IntArray = self.base[pair_block] + pair_column
        self.pair_q0: FloatArray = self.q0[pair_block, pair_column]
        self.pair_q1: FloatArray = self.q1[pair_block, pair_column]
        del self.q0, self.q1
        # Small groups keep every pair's row cells (ε-independent), which the blocks where k
        # changes read at every ε instead of recomputing them.
        self.pair_cells: tuple[FloatArray, FloatArray] | None = None
        if len(self.pair_block) * rows <= _CACHED_CELLS:
            weighted, row_sizes = self._cells(self.pair_block, self.pair_column)
            self.pair_cells = (weighted / row_sizes, row_sizes)

    def _cells(self, blocks: IntArray, column: IntArray) -> tuple[FloatArray, FloatArray]:
        """W_N P(Bin(N, p) = z) (0 outside N's window) and N, per (block, z) pair and row."""
        z = (self.base[blocks] + column).astype(float)[:, None]
        row_sizes = self.row_sizes[blocks]
        pmf = np.empty(row_sizes.shape)
        pmf[:, 0] = self.anchor[blocks, column]
        if row_sizes.shape[1] > 1:  # z ≤ z_hi ≤ first N < N: the ratio is finite
            later = row_sizes[:, 1:]
            ratio = later * (1.0 - self.hit) / np.maximum(later - z, 1.0)
            pmf[:, 1:] = pmf[:, :1] * np.cumprod(ratio, axis=1)
        kept = (z >= self.row_z_lo[blocks]) & (z <= self.row_z_hi[blocks])
        weighted: FloatArray = np.where(kept, pmf * self.row_weights[blocks], 0.0)
        return weighted, row_sizes

    def total(self, c0: float, c1: float, c2: float) -> float:
        """Σ_N W_N g(N) over the kept (N, Z) cells, plus the charge for Z < z_lo, for ε ≥ 0."""
        a = c1 + c2
        # Cells with c1 z + N c0 ≤ 0 are exactly 0 (H ≤ z); below z_lo only others are charged.
        certain_zero = c1 * (self.z_lo - 1.0) * (1.0 + 1e-9) <= self.sizes * -c0
        total = c1 * float(self.lower_charge[~certain_zero].sum())
        lookup = self._window_lookup(c0, c2, a)
        total, mixed = self._add_constant_k_pairs(total, lookup, c0=c0, c1=c1, c2=c2)
        if mixed[0]:
            total = self._add_varying_k_pairs(total, lookup, mixed, c0=c0, c1=c1, c2=c2)
        return total + c1 * self.upper_charge

    def _window_lookup(self, c0: float, c2: float, a: float) -> _Lookup:
        """(T_k, S_{k+1}) of Bin(z, 1/2) at any cell's (z, k), from a window of k per z.

        k of any cell is within [⌊x⌋ − 2, ⌊x⌋ + 3] of x = (c2 z − N c0)/a, clipped to [0, z + 1].
        """
        z_min = int(self.base.min())
        z_all = np.arange(z_min, int((self.base + self.width).max()))
        low_x = np.floor((c2 * z_all - float(self.sizes.min()) * c0) / a).astype(np.int64)
        high_x = np.floor((c2 * z_all - float(self.sizes.max()) * c0) / a).astype(np.int64)
        k_low = np.clip(low_x - 2, 0, z_all + 1)
        span = int((np.clip(high_x + 3, 0, z_all + 1) - k_low).max()) + 2
        tails = np.empty((len(z_all), span))
        sums = np.empty((len(z_all), span))
        step = max(1, _CHUNK_CELLS // span)
        for start in range(0, len(z_all), step):
            part = slice(start, start + step)
            tails[part], sums[part] = _half_binomial_window(z_all[part], k_low[part], span)

        def lookup(z: IntArray, k: IntArray) -> tuple[FloatArray, FloatArray]:
            row = z - z_min
            flat = row * span + (k - k_low[row])
            return tails.ravel()[flat], sums.ravel()[flat + 1]

        return lookup

    def _add_constant_k_pairs(
        self, total: float, lookup: _Lookup, *, c0: float, c1: float, c2: float
    ) -> tuple[float, _Mixed]:
        """``total`` plus the (block, Z) pairs whose k is the same on every row of the block.

        Returns the new total and the pairs where k changes within the block (their blocks,
        Z columns and pair indices), left to `_add_varying_k_pairs`.
        """
        a = c1 + c2
        slope = c0 + _ROUNDING * abs(c0)  # the margin plus allowance, per unit of N
        # The margin plus allowance at k ≤ Z without its N term, c1 (1 + R) k − c2 (1 − R)(Z − k)
        # (not k·(c1 + c2) − c2 Z, which cancels catastrophically when e^ε is large).
        up = c1 * (1.0 + _ROUNDING)
        down = c2 * (1.0 - _ROUNDING)
        mixed: _Mixed = ([], [], [])
        # Pairs with c1 z + N c0 ≤ 0 (N the block's first; with a rounding margin) are 0 for
        # every row of the block: then (Σ L)_+ = 0 surely (H ≤ z), so skipping keeps the bound.
        for start in range(0, len(self.pair_z), _CHUNK_CELLS):
            part = slice(start, start + _CHUNK_CELLS)
            blocks, z = self.pair_block[part], self.pair_z[part]
            first = self.first_size[blocks].astype(float)
            zf = z.astype(float)
            live = np.nonzero(c1 * zf + first * c0 > -1e-12 * (c1 * zf - first * c0))[0]
            if live.size == 0:
                continue
            blocks, z, zf, first = blocks[live], z[live], zf[live], first[live]
            last = self.last_size[blocks].astype(float)
            base_x = (c2 / a) * zf
            first_x = base_x - (c0 / a) * first
            last_x = base_x - (c0 / a) * last
            tolerance = 1e-12 * (float(last_x.max()) + 2.0 * float(zf.max()) + 4.0)
            k = np.minimum(np.floor(first_x - tolerance).astype(np.int64) + 1, z + 1)
            k_last = np.minimum(np.floor(last_x + tolerance).astype(np.int64) + 1, z + 1)
            np.maximum(k, 0, out=k)
            np.maximum(k_last, 0, out=k_last)
            unsure = np.nonzero(k != k_last)[0]
            sure = np.ones(len(z), dtype=bool)
            if unsure.size:  # near an integer: the exact choice at both ends
                at_first, _ = _threshold(z[unsure], first[unsure], c0=c0, c1=c1, c2=c2)
                at_last, _ = _threshold(z[unsure], last[unsure], c0=c0, c1=c1, c2=c2)
                k[unsure] = at_first
                varies = unsure[at_first != at_last]
                sure[varies] = False
                mixed[0].append(blocks[varies])
                mixed[1].append(self.pair_column[part][live][varies])
                mixed[2].append(start + live[varies])
            at_k, beyond = lookup(z, k)
            intercept = up * k - down * (zf - k)
            q0, q1 = self.pair_q0[part][live], self.pair_q1[part][live]
            values = (intercept * at_k + a * beyond) * q1 + slope * at_k * q0
            total += float(np.sum(values[sure]))
        return total, mixed

    def _add_varying_k_pairs(
        self, total: float, lookup: _Lookup, mixed: _Mixed, *, c0: float, c1: float, c2: float
    ) -> float:
        """``total`` plus the pairs where k changes within the block, evaluated row by row."""
        a = c1 + c2
        blocks_all = np.concatenate(mixed[0])
        columns_all = np.concatenate(mixed[1])
        pairs_all = np.concatenate(mixed[2])
        step = max(1, _CHUNK_CELLS // self.row_sizes.shape[1])
        for start in range(0, len(blocks_all), step):
            blocks = blocks_all[start : start + step]
            column = columns_all[start : start + step]
            if self.pair_cells is None:
                weighted, row_sizes = self._cells(blocks, column)
                per_size = weighted / row_sizes
            else:
                pairs = pairs_all[start : start + step]
                per_size, row_sizes = (cells[pairs] for cells in self.pair_cells)
            z = np.broadcast_to((self.base[blocks] + column)[:, None], row_sizes.shape)
            k, margin = _fast_threshold(np.ascontiguousarray(z), row_sizes, c0=c0, c1=c1, c2=c2)
            at_k, beyond = lookup(z, k)
            total += float(np.sum(per_size * (margin * at_k + a * beyond)))
        return total


class ExactLemma2:
    """Evaluates Lemma 2's bound exactly for one uncapped scrambler; reusable across ε.

    Rows N = m + d + 1 over the kept m of Bin(n − 1, σ) (plus N = d + 1 for the m below, as
    before), each with its window of Z (see the module doc for the charges). The ε-independent
    part is built once here: per block of up to 64 consecutive N and per Z, the summed
    weights Q0 = Σ W_N P(Z | N) and Q1 = Σ W_N P(Z | N)/N. For ε, the threshold k(N, Z) is
    constant over most blocks (it moves by one every a/|c0| rows), where the block's
    contribution is (α T_k + a S_{k+1}) Q1 + β T_k Q0 with the margin α + β N of
    `expected_positive_part`; the few blocks where k changes are evaluated row by row.
    Both give the cell values of the former full-table evaluation (same k, same rounded-up
    margin), so the result is the same bound; memory stays O(blocks × Z window).
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
        sizes = (counts + d + 1).astype(np.int64)
        weights = np.ones(1) if n == 1 else np.asarray(binom.pmf(counts, n - 1, sigma), dtype=float)
        below = float(binom.cdf(m_lo - 1, n - 1, sigma)) if m_lo > 0 else 0.0
        above = float(binom.sf(m_hi, n - 1, sigma)) if m_hi < n - 1 else 0.0
        weights[-1] += above  # charged at g(N_hi)
        self.groups = [_RowGroup(sizes, weights, self.hit)]
        if below > 0.0:  # charged at g(d + 1)
            self.groups.append(
                _RowGroup(np.array([d + 1], dtype=np.int64), np.array([below]), self.hit)
            )

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
        total = sum(group.total(c0, c1, c2) for group in self.groups)
        return min(1.0, total * _SAFETY)

    def epsilon_for_delta(self, delta: float, *, lower: float | None = None) -> float:
        """The smallest ε (to 1e-6, rounded up) with `delta` ≤ ``delta``.

        The search is bracketed by Hoeffding's ε (Lemma 2 with Hoeffding's inequality bounds
        the same expectation this class computes exactly, so δ here is at most Hoeffding's at
        every ε) and by ``lower`` (a certified lower bound on ε, if known); both are checked
        before use. Large ε are the costly ones at large n (the threshold k moves with every
        few rows), and the bracket avoids them.
        """
        from dpcomm.accounting import concentration
        from dpcomm.accounting.pure import local_pure_epsilon
        from dpcomm.accounting.search import epsilon_for_delta

        limit = local_pure_epsilon(self.mechanism.local_randomizer)
        hoeffding = epsilon_for_delta(
            lambda eps: concentration.hoeffding_delta(self.mechanism, eps), delta, upper=limit
        )
        high = hoeffding if math.isfinite(hoeffding) else None
        return epsilon_for_delta(self.delta, delta, upper=limit, bracket=(lower, high))


@lru_cache(maxsize=4)
def exact_lemma2(mechanism: ScramblerMechanism) -> ExactLemma2:
    """`ExactLemma2` of ``mechanism``, shared (its ε-independent part is built once).

    A few are kept (one round at δ and Theorem 2's δ/G ask for the same mechanisms one after
    the other): at n = 10^6 one holds 30–60 MB.
    """
    return ExactLemma2(mechanism)


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
    """Lemma 2's bound as `dpcomm.accounting.exact.ExactLemma2` computes it, at one ε.

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
