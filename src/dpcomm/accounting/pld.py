"""Privacy loss distributions (PLDs) of explicit dominating pairs, composed with dp_accounting.

Beyond the paper, which composes by adding ε and δ (Theorem 2). A pair of distributions
(P, Q) *dominates* a mechanism when, for every pair of neighbouring inputs, the mechanism's
two output distributions are one randomized post-processing of P and of Q. Then for every
ε the mechanism's δ(ε) is at most the hockey-stick divergence H_{e^ε}(P ‖ Q), and the
product of dominating pairs dominates the composition of the mechanisms, adaptive or not
(Zhu, Dong and Wang, "Optimal accounting of differential privacy via characteristic
function", AISTATS 2022, Def. 7 and Thm. 10). A pair is handed to dp_accounting as its
privacy loss distribution: the law of L = ln(P(o)/Q(o)) for o ~ P, with the P-mass where
Q = 0 at +∞. Its pessimistic discretization rounds every loss *up* to the grid, which only
adds to every H_{e^ε}, and composition is an FFT convolution whose truncated tails go to +∞.

Pairs built here (each docstring says why it dominates):

* `local_randomizer_pair` — R_σ^d of Section 3 (App. B's output probabilities).
* `scrambler_pair` — the uncapped scrambler A_σ^{n,d}: the pair behind Lemma 2 (its
  hockey-stick curve is Lemma 2's δ(ε), evaluated exactly); the capped scrambler falls back on
  its sources' R_σ (post-processing).
* `lower_bound_pairs` — exact output distributions of explicit neighbouring inputs, for
  certified *lower* bounds (optimistic discretization).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from dp_accounting.pld import pld_pmf
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution
from scipy.special import gammaln

from dpcomm.accounting import binomial as binom
from dpcomm.accounting.exact import _kept_blanket_range, _lower_quantile, _upper_quantile
from dpcomm.accounting.lower_bound import own_target_lower_bound, scrambler_lower_bound
from dpcomm.accounting.mechanisms import LocalRandomizer, Mechanism, ScramblerMechanism
from dpcomm.errors import InvalidParameterError

FloatArray = npt.NDArray[np.float64]

#: Width of the grid the privacy losses are rounded to (dp_accounting's default).
DEFAULT_INTERVAL = 1e-4
#: Tail mass of each binomial window of `scrambler_pair`; what lies beyond is put at +∞.
_WINDOW_TAIL = 1e-30
#: Cells of `scrambler_pair` with a smaller P-mass are put at +∞ (they sum to < 1e-25).
_CELL_FLOOR = 1e-40
#: Cells of `scrambler_pair` above which its rows (values of m) are grouped (see there).
GROUPING_CELLS = 4_000_000
#: Fewest rows kept when rows are grouped.
MIN_PAIR_ROWS = 64
#: Most (m, Z, a) cells `scrambler_pair` evaluates (a few float64 arrays of this size).
MAX_PAIR_CELLS = 30_000_000
#: dp_accounting's bound on the tail mass dropped (pessimistic: put at +∞) per convolution.
TAIL_MASS_TRUNCATION = 1e-15
#: An ε beyond every finite loss of a pair (losses are at most ln of a ratio of floats).
_HUGE_EPSILON = 1e4
#: Up to this many copies a PLD is composed by repeated squaring, beyond by self_compose
#: (whose tail bounds cost more than the convolutions they save below it).
_DIRECT_COMPOSITIONS = 8
#: Most points of a composition `compose_pairs` keeps sparse (beyond: `compose`'s FFT).
_MAX_SPARSE_POINTS = 20_000
#: Most point-by-point products `compose_pairs` estimates (an overestimate: 1.5 million
#: estimated, 100 copies of R_σ's pair, take 50 ms).
_MAX_SPARSE_WORK = 2_000_000
#: Rounding allowance on a computed loss before it is rounded up to the grid.
_LOSS_GUARD = 1e-12
#: P-mass put at +∞ for the floating-point error of the masses of `scrambler_pair`.
_FLOAT_ALLOWANCE = 1e-13
#: Slack that a certified lower bound gives away for the floating-point error of an FFT.
_LOWER_SLACK = 1e-12


class PairUnavailableError(InvalidParameterError):
    """No dominating pair is built for this mechanism (callers fall back on (ε, δ) sums)."""


@dataclass(frozen=True, eq=False)
class LossAtoms:
    """A pair (P, Q) written as its privacy loss distribution.

    Attributes:
        losses: the finite values of ln(P(o)/Q(o)), one per atom.
        masses: P's mass on each atom.
        infinity_mass: P's mass where Q = 0 (and, for an upper-bound pair, every mass left out
            of the windows: putting P-mass at +∞ yields a pair that dominates the original, of
            which the original is a post-processing).
        description: what the pair is, for reports.
    """

    losses: FloatArray
    masses: FloatArray
    infinity_mass: float
    description: str

    def delta(self, epsilon: float) -> float:
        """H_{e^ε}(P ‖ Q) = E_P[(1 − e^{ε − L})_+] + P(L = ∞), without discretization."""
        if math.isinf(epsilon):
            return self.infinity_mass
        above = self.losses > epsilon
        gain = -np.expm1(epsilon - self.losses[above])
        return float(np.dot(self.masses[above], gain)) + self.infinity_mass

    def pld(
        self, *, interval: float = DEFAULT_INTERVAL, pessimistic: bool = True
    ) -> PrivacyLossDistribution:
        """The discretized PLD: losses rounded up (pessimistic) or down (optimistic)."""
        lowest, kept, infinity_mass = self._discretized(interval, pessimistic)
        pmf = pld_pmf.DensePLDPmf(interval, lowest, kept, infinity_mass, pessimistic)
        return PrivacyLossDistribution(pmf)

    def _discretized(self, interval: float, pessimistic: bool) -> tuple[int, FloatArray, float]:
        """The grid index of the first cell, the cells' masses and the mass at +∞."""
        if self.losses.size == 0:
            probs = np.zeros(1)
            lowest = 0
        else:
            if pessimistic:
                scaled = (self.losses + _LOSS_GUARD * (1.0 + np.abs(self.losses))) / interval
                index = np.ceil(scaled).astype(np.int64)
            else:
                scaled = (self.losses - _LOSS_GUARD * (1.0 + np.abs(self.losses))) / interval
                index = np.floor(scaled).astype(np.int64)
            lowest = int(index.min())
            probs = np.asarray(np.bincount(index - lowest, weights=self.masses), dtype=float)
        infinity_mass = self.infinity_mass
        # Tails of mass at most TAIL_MASS_TRUNCATION each are cut, as dp_accounting cuts them
        # after every convolution: pessimistic, the top tail goes to +∞ and the bottom tail
        # up to the lowest bin kept (raising a loss only adds to every δ(ε)); optimistic, both
        # are dropped. The grid then spans the losses that matter, not ±ε0.
        above = np.cumsum(probs[::-1])[::-1]  # mass at or above each bin
        below = np.cumsum(probs)  # mass at or below each bin
        top = int(np.searchsorted(-above, -TAIL_MASS_TRUNCATION, side="left"))
        top = max(top - 1, 0)  # the highest bin with more than the tail at or above it
        bottom = int(np.searchsorted(below, TAIL_MASS_TRUNCATION, side="right"))
        bottom = min(bottom, top)
        if pessimistic:
            infinity_mass += float(probs[top + 1 :].sum())
            kept = probs[bottom : top + 1].copy()
            kept[0] += float(probs[:bottom].sum())
        else:
            kept = probs[bottom : top + 1].copy()
        return lowest + bottom, kept, infinity_mass


def identity_pair(description: str = "no leakage") -> LossAtoms:
    """P = Q: loss 0 with mass 1."""
    return LossAtoms(np.zeros(1), np.ones(1), 0.0, description)


def local_randomizer_pair(randomizer: LocalRandomizer) -> LossAtoms:
    """The pair of R_σ^d (Section 3): the output sets of a source at t and at t'.

    Exact (App. B, as `dpcomm.accounting.pure.local_delta`): the sets holding t but not
    t' have total mass s·m_t under t and s·m_o under t' (s = (T − 1 − d)/(T − 1),
    m_t = 1 − σ + (d + 1)σ/T, m_o = (d + 1)σ/T), the sets holding t' but not t the reverse, all
    others equal mass. Every pair of inputs is this one up to renaming targets, and the other
    sources' outputs are independent of the differing one (a post-processing), so it dominates.
    """
    share, mass_true, mass_other = randomizer.distinguishing_masses
    name = (
        f"R_σ^d pair (T={randomizer.num_targets}, σ={randomizer.sampling_rate:g}, "
        f"d={randomizer.num_dummies})"
    )
    if share == 0.0 or mass_true == mass_other:
        return identity_pair(name)
    rest = max(0.0, 1.0 - share * (mass_true + mass_other))
    if mass_other == 0.0:  # σ = 0: the true target is revealed
        return LossAtoms(np.zeros(1), np.array([rest]), share * mass_true, name)
    loss = math.log(mass_true) - math.log(mass_other)
    return LossAtoms(
        np.array([loss, -loss, 0.0]),
        np.array([share * mass_true, share * mass_other, rest]),
        0.0,
        name,
    )


def _log_binomial_pmf(k: FloatArray, trials: FloatArray, success: float) -> FloatArray:
    """The log of P(Bin(trials, success) = k) for 0 ≤ k ≤ trials (−∞ outside)."""
    valid = (k >= 0) & (k <= trials)
    kk = np.where(valid, k, 0.0)
    rest = np.where(valid, trials - kk, 0.0)
    log_comb = gammaln(trials + 1.0) - gammaln(kk + 1.0) - gammaln(rest + 1.0)
    if success >= 1.0:
        terms = np.where(rest == 0, 0.0, -np.inf)
    elif success <= 0.0:
        terms = np.where(kk == 0, 0.0, -np.inf)
    else:
        terms = kk * math.log(success) + rest * math.log1p(-success)
    result: FloatArray = np.where(valid, log_comb + terms, -np.inf)
    return result


def _lower_quantiles(
    probability: float, trials: npt.NDArray[np.int64], success: float
) -> npt.NDArray[np.int64]:
    """Largest z with P(Bin(N, p) < z) ≤ probability, per N (vectorized bisection on the cdf)."""
    low = np.zeros(len(trials), dtype=np.int64)
    high = np.ceil(trials * success).astype(np.int64) + 1
    while np.any(high - low > 1):
        middle = (low + high) // 2
        fits = binom.cdf(middle - 1, trials, success) <= probability
        low = np.where(fits, middle, low)
        high = np.where(fits, high, middle)
    return low


def _blanket_rows(
    batch_size: int, sampling_rate: float, *, max_rows: int | None = None
) -> tuple[FloatArray, FloatArray]:
    """Values of m kept (the smallest of each group) and their probabilities.

    m ~ Bin(n − 1, σ) counts the other sources that took the σ-branch. Its window is the one
    `dpcomm.accounting.exact.ExactLemma2` keeps; a wider window than
    `MAX_PAIR_ROWS` is cut into consecutive groups, each charged at its smallest m. That
    is valid: the pair for m + 1 is a post-processing of the pair for m (add one uniform draw
    to the counts and one to the announced m), so moving mass to a smaller m yields a pair
    that dominates. Rows are grouped only when there are more than ``max_rows``.
    """
    n, sigma = batch_size, sampling_rate
    m_lo, m_hi = _kept_blanket_range(n, sigma)
    counts = np.arange(m_lo, m_hi + 1)
    if n == 1 or sigma == 0.0 or sigma == 1.0:
        weights = np.ones(len(counts))
    else:
        weights = np.asarray(binom.pmf(counts, n - 1, sigma), dtype=float)
    if max_rows is not None and len(counts) > max_rows:
        groups = np.array_split(np.arange(len(counts)), max_rows)
        counts = np.array([counts[g[0]] for g in groups])
        weights = np.array([weights[g].sum() for g in groups])
    return counts.astype(float), weights


def _row_cells(mechanism: ScramblerMechanism) -> tuple[int, int]:
    """(rows of m before grouping, an upper bound on the (Z, a) cells of one row)."""
    size, n, d = mechanism.num_targets, mechanism.batch_size, mechanism.num_dummies
    m_lo, m_hi = _kept_blanket_range(n, mechanism.sampling_rate)
    largest = m_hi + d + 1
    hit = min(1.0, 2.0 / size)
    z_hi = min(largest, int(_upper_quantile(_WINDOW_TAIL, np.array([largest]), hit)[0]))
    z_lo = _lower_quantile(_WINDOW_TAIL, m_lo + d + 1, hit)
    return m_hi - m_lo + 1, (z_hi - z_lo + 1) * (z_hi + 1)


def _pair_rows(mechanism: ScramblerMechanism) -> int:
    """The most rows of m the pair keeps (grouping beyond); refuses pairs that are too large.

    Raises:
        PairUnavailableError: the pair would take more than `MAX_PAIR_CELLS` cells.
    """
    rows, per_row = _row_cells(mechanism)
    max_rows = max(MIN_PAIR_ROWS, GROUPING_CELLS // max(per_row, 1))
    cells = min(rows, max_rows) * per_row
    if cells > MAX_PAIR_CELLS:
        raise PairUnavailableError(
            "mechanism",
            f"a scrambler whose Lemma 2 pair has at most {MAX_PAIR_CELLS:,} cells",
            f"{cells:,} cells (T={mechanism.num_targets}, σ={mechanism.sampling_rate:g}, "
            f"n={mechanism.batch_size}, d={mechanism.num_dummies})",
        )
    return max_rows


def scrambler_pair(mechanism: ScramblerMechanism) -> LossAtoms:
    """A dominating pair of the scrambler A_σ^{n,d} (Section 4).

    Uncapped (App. E, proof of Lemma 2): R_σ is the mixture (1 − σ)·e_x + σ·U(T). Tell the
    observer which of the n − 1 other sources took the σ-branch (m of them, m ~ Bin(n − 1, σ))
    and where the others sent their true targets; what is left is N = m + d + 1 messages: m + d
    uniform draws and the differing source's message, which goes to t w.p. 1 − σ + σ/T under
    input t. Only the counts (a, b) at t and t' matter, and with W the law of N uniform draws

        P(m, a, b) = P(m) · W_N(a, b) · ((1 − σ) T a/N + σ),  Q: a and b exchanged,

    so that P − e^ε Q = P(m) W_N (Σ_{i≤N} L_i)/N with Lemma 2's Σ L_i: the hockey-stick curve of
    this pair is Lemma 2's δ(ε) exactly (tested against `ExactLemma2`). Z = a + b ~
    Bin(N, 2/T) and a | Z ~ Bin(Z, 1/2) under W; windows of each law with tails below 1e-30
    are kept and every mass outside them goes to +∞.

    Capped (S̄_d): no such pair is derived here; the scrambler's output is a post-processing
    of one source's R_σ, whose pair is returned.

    Raises:
        PairUnavailableError: the pair would take more than `MAX_PAIR_CELLS` cells.
    """
    size, sigma = mechanism.num_targets, mechanism.sampling_rate
    n, d = mechanism.batch_size, mechanism.num_dummies
    if mechanism.capped:
        local = local_randomizer_pair(mechanism.local_randomizer)
        return LossAtoms(
            local.losses,
            local.masses,
            local.infinity_mass,
            f"capped scrambler: post-processing of {local.description}",
        )
    return _scrambler_pair_cached(size, sigma, n, d)


@lru_cache(maxsize=512)
def _scrambler_pair_cached(size: int, sigma: float, n: int, d: int) -> LossAtoms:
    name = f"Lemma 2 pair (T={size}, σ={sigma:g}, n={n}, d={d})"
    if sigma == 1.0:
        return identity_pair(name)
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    max_rows = _pair_rows(mechanism)
    hit = min(1.0, 2.0 / size)
    scale = (1.0 - sigma) * size  # c1 of Lemma 2
    counts, weights = _blanket_rows(n, sigma, max_rows=max_rows)
    losses: list[FloatArray] = []
    masses: list[FloatArray] = []
    infinite = 0.0
    trials = (counts + d + 1).astype(np.int64)  # N per row
    z_high = np.minimum(trials, _upper_quantile(_WINDOW_TAIL, trials, hit))
    z_low = _lower_quantiles(_WINDOW_TAIL, trials, hit)
    for m, weight, z_lo, z_hi in zip(counts, weights, z_low, z_high, strict=True):
        if weight <= 0.0:
            continue
        total = m + d + 1.0  # N
        z = np.arange(z_lo, z_hi + 1, dtype=float)[:, None]
        a = np.arange(0, z_hi + 1, dtype=float)[None, :]
        inside = a <= z
        log_w = _log_binomial_pmf(z, np.array(total), hit) + _log_binomial_pmf(
            a, np.broadcast_to(z, (len(z), a.shape[1])), 0.5
        )
        factor = (scale * a + total * sigma) / total
        with np.errstate(divide="ignore"):
            log_p = np.where(inside, log_w + np.log(factor), -np.inf) + math.log(weight)
        p = np.exp(log_p)
        keep = p >= _CELL_FLOOR
        numerator = scale * a + total * sigma
        denominator = np.where(inside, scale * (z - a) + total * sigma, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.log(numerator) - np.log(np.maximum(denominator, 0.0))
        finite = keep & (denominator > 0.0)
        infinite += float(p[keep & (denominator <= 0.0)].sum())
        losses.append(np.broadcast_to(loss, p.shape)[finite])
        masses.append(p[finite])
    all_losses = np.concatenate(losses)
    all_masses = np.concatenate(masses)
    # Everything the windows and the floor left out, and any rounding deficit, goes to +∞.
    # The sum below cannot resolve masses of 1e-30, so the windows' tails are also bounded
    # analytically: the m window leaves out at most 2e-30; per row, Z outside its window has
    # W-mass at most 2e-30 and P = W·f with f ≤ (1 − σ)T + σ; each dropped cell is < 1e-40.
    tails = 2.0 * _WINDOW_TAIL * (1.0 + float(weights.sum()) * (scale + sigma))
    tails += _CELL_FLOOR * float(len(counts)) * float(int(z_high.max()) + 1) ** 2
    # The masses themselves carry relative errors of ~1e-13 (log-gamma); _FLOAT_ALLOWANCE at
    # +∞ covers what they could take from the hockey-stick sums.
    left_out = max(1.0 - math.fsum(all_masses.tolist()) - infinite, tails) + _FLOAT_ALLOWANCE
    return LossAtoms(all_losses, all_masses, min(1.0, infinite + left_out), name)


@dataclass(frozen=True, eq=False)
class _Row:
    """One row N = m + d + 1 of `scrambler_pair`, discretized, before its weight P(m).

    Attributes:
        lowest: grid index of the row's lowest loss.
        cells: each kept cell's grid index (its loss rounded up), less ``lowest``; cells may
            share an index (a row's few thousand cells can spread over ~10^5 grid points at
            small σ: only the cells are kept, not the grid between them). None for a dense
            row, whose ``masses`` are then those of the grid points from ``lowest`` on.
        masses: the P-mass (without the factor P(m)) of each of ``cells``.
        infinity: the P-mass where Q = 0.
        kept: every P-mass of the row that was kept (finite or at +∞).
        z_high: the upper end of the row's Z window.
    """

    lowest: int
    cells: npt.NDArray[np.int32] | None
    masses: FloatArray
    infinity: float
    kept: float
    z_high: int

    @property
    def nbytes(self) -> int:
        """Memory of the row's arrays."""
        return int(self.masses.nbytes + (0 if self.cells is None else self.cells.nbytes))

    @property
    def end(self) -> int:
        """One past the grid index of the row's highest loss."""
        last = self.masses.size - 1 if self.cells is None else int(self.cells.max())
        return self.lowest + last + 1


#: Largest Z whose half-binomial log-masses are kept in one shared table (every cell a ≤ z of
#: every z below it, 16 bytes per cell: 32 MiB at 2,048); a row with a larger Z window
#: computes its own.
_HALF_TABLE_MAX = 2_048


@dataclass(frozen=True, eq=False)
class _HalfCells:
    """The cells (z, a) with a ≤ z of consecutive z, row by row, and ln P(a | Z = z).

    P(a | Z = z) = C(z, a) 2^−z: how many of the z messages of the two targets in question
    go to the first (`scrambler_pair`).
    """

    z: npt.NDArray[np.int32]
    a: npt.NDArray[np.int32]
    log_half: FloatArray


def _half_cells_block(z_lo: int, z_hi: int) -> _HalfCells:
    """`_HalfCells` of z = z_lo..z_hi, computed."""
    log_factorial = gammaln(np.arange(z_hi + 1, dtype=float) + 1.0)
    values = np.arange(z_lo, z_hi + 1)
    z = np.repeat(values, values + 1)
    starts = np.cumsum(values + 1) - (values + 1)
    a = np.arange(z.size) - np.repeat(starts, values + 1)
    log_half = log_factorial[z] - log_factorial[a] - log_factorial[z - a] - z * math.log(2.0)
    return _HalfCells(z.astype(np.int32), a.astype(np.int32), log_half)


#: The shared table: z = 0, 1, ..., its first element − 1.
_half_table: tuple[int, _HalfCells] = (0, _half_cells_block(0, -1))


def _half_cells(z_lo: int, z_hi: int) -> _HalfCells:
    """`_HalfCells` of z = z_lo..z_hi, read from a table shared by the rows of `scrambler_pld`.

    The table grows on demand up to `_HALF_TABLE_MAX`; its values are the same gammaln values,
    combined in the same order, as a row computing its own.
    """
    global _half_table
    if z_hi >= _HALF_TABLE_MAX:
        return _half_cells_block(z_lo, z_hi)
    size, table = _half_table
    if size <= z_hi:
        size = min(_HALF_TABLE_MAX, max(2 * size, z_hi + 1, 64))
        table = _half_cells_block(0, size - 1)
        _half_table = (size, table)
    start, end = z_lo * (z_lo + 1) // 2, (z_hi + 1) * (z_hi + 2) // 2  # z_lo..z_hi, row by row
    return _HalfCells(table.z[start:end], table.a[start:end], table.log_half[start:end])


class _RowCache:
    """Rows of `scrambler_pld` by their arguments; the least recently used beyond a budget go.

    Rows have from one to tens of thousands of cells, so the cache is bounded by bytes, not
    by a count of rows.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._rows: OrderedDict[tuple[int, float, int, float, int, int], _Row] = OrderedDict()
        self._bytes = 0

    def row(
        self, size: int, sigma: float, total: int, interval: float, z_lo: int, z_hi: int
    ) -> _Row:
        """`_pessimistic_row` of these arguments, from the cache if there."""
        key = (size, sigma, total, interval, z_lo, z_hi)
        found = self._rows.get(key)
        if found is not None:
            self._rows.move_to_end(key)
            return found
        found = _pessimistic_row(*key)
        self._rows[key] = found
        self._bytes += found.nbytes
        while self._bytes > self.budget_bytes and len(self._rows) > 1:
            _, dropped = self._rows.popitem(last=False)
            self._bytes -= dropped.nbytes
        return found

    def cache_clear(self) -> None:
        """Forget every row."""
        self._rows.clear()
        self._bytes = 0


def _pessimistic_row(
    size: int, sigma: float, total: int, interval: float, z_lo: int, z_hi: int
) -> _Row:
    """The cells of one row of `scrambler_pair`, rounded up to the grid (cached: `_ROWS`).

    The row depends on (T, σ, N) only, not on n or d: pairs of neighbouring (n, d), which the
    planner evaluates one after the other, share most of their rows. Same windows and
    formulas as `scrambler_pair`; a cell is dropped when its mass before the factor
    P(m) ≤ 1 is below 1e-40, so its mass in the pair is too (the tail bound holds).
    ``z_lo`` and ``z_hi`` are the row's Z window (functions of N, computed for many rows at
    once by the caller). The loss of cell (z, a) is ln(scale·a + Nσ) − ln(scale·(z − a) + Nσ),
    from two vectors indexed by a and by z − a, evaluated on the kept cells only.
    """
    hit = min(1.0, 2.0 / size)
    scale = (1.0 - sigma) * size
    z = np.arange(z_lo, z_hi + 1, dtype=float)
    a = np.arange(0, z_hi + 1, dtype=float)
    numerator = scale * a + total * sigma
    half = _half_cells(z_lo, z_hi)
    log_w = _log_binomial_pmf(z, np.array(float(total)), hit)[half.z - z_lo] + half.log_half
    with np.errstate(divide="ignore"):
        p = np.exp(log_w + np.log(numerator / total)[half.a])
        log_numerator = np.log(numerator)
        denominator = scale * a + total * sigma  # of k = z − a, the same values as numerator
        log_denominator = np.log(np.maximum(denominator, 0.0))
    kept_cells = np.flatnonzero(p >= _CELL_FLOOR)
    masses = p[kept_cells]
    columns = half.a[kept_cells]
    others = half.z[kept_cells] - columns  # z − a
    finite = denominator[others] > 0.0
    infinity = float(masses[~finite].sum())
    losses = log_numerator[columns[finite]] - log_denominator[others[finite]]
    masses_finite = masses[finite]
    if losses.size == 0:
        return _Row(0, None, np.zeros(1), infinity, infinity, z_hi)
    scaled = (losses + _LOSS_GUARD * (1.0 + np.abs(losses))) / interval
    index = np.ceil(scaled).astype(np.int64)
    lowest = int(index.min())
    offsets = index - lowest
    # Pairwise summation: its error (~1e-16 relative) is far inside _FLOAT_ALLOWANCE.
    kept = float(np.sum(masses_finite)) + infinity
    if int(offsets.max()) < 2 * offsets.size:  # dense: the grid points, summed
        dense = np.asarray(np.bincount(offsets, weights=masses_finite), dtype=float)
        return _Row(lowest, None, dense, infinity, kept, z_hi)
    return _Row(lowest, offsets.astype(np.int32), masses_finite, infinity, kept, z_hi)


#: Rows kept for `scrambler_pld` (256 MiB of cells).
_ROWS = _RowCache(256 * 2**20)


@lru_cache(maxsize=1024)
def _cached_blanket_rows(
    batch_size: int, sampling_rate: float, max_rows: int
) -> tuple[FloatArray, FloatArray]:
    """`_blanket_rows`, cached (the planner asks for the same (n, σ) at many d)."""
    return _blanket_rows(batch_size, sampling_rate, max_rows=max_rows)


_WINDOWS: dict[tuple[int, int], tuple[int, int]] = {}


def _row_windows(
    size: int, counts: FloatArray, dummies: int
) -> tuple[list[int], list[int], list[int]]:
    """Per row m: N = m + d + 1 and its Z window (as `scrambler_pair`), memoized per N."""
    hit = min(1.0, 2.0 / size)
    totals = [int(m) + dummies + 1 for m in counts]
    missing = sorted({t for t in totals if (size, t) not in _WINDOWS})
    if missing:
        trials = np.array(missing, dtype=np.int64)
        highs = np.minimum(trials, _upper_quantile(_WINDOW_TAIL, trials, hit))
        lows = _lower_quantiles(_WINDOW_TAIL, trials, hit)
        if len(_WINDOWS) > 1_000_000:
            _WINDOWS.clear()
        for total, low, high in zip(missing, lows, highs, strict=True):
            _WINDOWS[(size, total)] = (int(low), int(high))
    windows = [_WINDOWS[(size, t)] for t in totals]
    return totals, [w[0] for w in windows], [w[1] for w in windows]


def scrambler_pld(
    mechanism: ScramblerMechanism, *, interval: float = DEFAULT_INTERVAL
) -> PrivacyLossDistribution:
    """The pessimistic PLD of `scrambler_pair` (uncapped), built from cached rows.

    The same pair, discretized the same way (every loss rounded up to the grid), summed row
    by row: each row N = m + d + 1 is discretized once per (T, σ, N, grid) and weighted by
    P(m). Every mass left out (windows, dropped cells, rounding) goes to +∞ with the same
    bounds as `scrambler_pair`, so the result dominates the mechanism. Equal to
    ``scrambler_pair(mechanism).pld(interval=interval)`` up to floating-point summation order
    (tested); much faster when many neighbouring (n, d) are evaluated, as the planner does.

    Raises:
        PairUnavailableError: the pair would take more than `MAX_PAIR_CELLS` cells.
    """
    size, sigma = mechanism.num_targets, mechanism.sampling_rate
    n, d = mechanism.batch_size, mechanism.num_dummies
    if mechanism.capped or sigma == 1.0:
        return scrambler_pair(mechanism).pld(interval=interval)
    max_rows = _pair_rows(mechanism)
    scale = (1.0 - sigma) * size
    counts, weights = _cached_blanket_rows(n, sigma, max_rows)
    totals, z_lows, z_highs = _row_windows(size, counts, d)
    parts = [
        (float(weight), _ROWS.row(size, sigma, total, interval, z_lo, z_hi))
        for weight, total, z_lo, z_hi in zip(weights, totals, z_lows, z_highs, strict=True)
        if weight > 0.0
    ]
    lowest = min(row.lowest for _, row in parts)
    highest = max(row.end for _, row in parts)
    probs = np.zeros(highest - lowest)
    for weight, row in parts:
        if row.cells is None:
            start = row.lowest - lowest
            probs[start : start + row.masses.size] += weight * row.masses
    positions = [row.cells + (row.lowest - lowest) for _, row in parts if row.cells is not None]
    if positions:
        values = [weight * row.masses for weight, row in parts if row.cells is not None]
        probs += np.bincount(
            np.concatenate(positions), weights=np.concatenate(values), minlength=highest - lowest
        )
    infinite = math.fsum(weight * row.infinity for weight, row in parts)
    kept = math.fsum(weight * row.kept for weight, row in parts)
    z_high = max(z_highs)
    # As in scrambler_pair: the windows' tails bounded analytically, the dropped cells, and the
    # floating-point allowance, all at +∞.
    tails = 2.0 * _WINDOW_TAIL * (1.0 + float(weights.sum()) * (scale + sigma))
    tails += _CELL_FLOOR * float(len(counts)) * float(z_high + 1) ** 2
    left_out = max(1.0 - kept, tails) + _FLOAT_ALLOWANCE
    infinity = min(1.0, infinite + left_out)
    pmf = pld_pmf.DensePLDPmf(interval, lowest, probs, infinity, True)
    return PrivacyLossDistribution(pmf)


def dominating_pair(mechanism: Mechanism) -> LossAtoms:
    """The dominating pair of ``mechanism`` (see the pair functions).

    Raises:
        PairUnavailableError: no pair is built for this mechanism or size.
    """
    if isinstance(mechanism, LocalRandomizer):
        return local_randomizer_pair(mechanism)
    if isinstance(mechanism, ScramblerMechanism):
        return scrambler_pair(mechanism)
    raise PairUnavailableError(
        "mechanism",
        "a LocalRandomizer or ScramblerMechanism (generic randomizers have no explicit pair)",
        type(mechanism).__name__,
    )


# --- Lower bounds ------------------------------------------------------------------------


def _atoms_from_masses(first: FloatArray, second: FloatArray, description: str) -> LossAtoms:
    """The PLD of two (sub-)probability vectors over the same outputs."""
    both = (first > 0.0) & (second > 0.0)
    only_first = (first > 0.0) & (second <= 0.0)
    losses = np.log(first[both]) - np.log(second[both])
    return LossAtoms(losses, first[both], float(first[only_first].sum()), description)


def lower_bound_pairs(mechanism: Mechanism) -> tuple[LossAtoms, ...]:
    """Exact PLDs of explicit neighbouring inputs (for certified lower bounds).

    Each is the exact output law (or a post-processing of it) for one pair of neighbouring
    inputs, so any composition of them is a lower bound on the composed mechanism's δ(ε).
    Masses dropped by the windows only lower the hockey-stick sums.
    """
    if isinstance(mechanism, LocalRandomizer):
        return (local_randomizer_pair(mechanism),)
    if not isinstance(mechanism, ScramblerMechanism):
        return ()
    if mechanism.capped:
        return ()
    third = scrambler_lower_bound(mechanism)
    pairs = [_atoms_from_masses(third.first, third.second, "others at a third target")]
    if mechanism.num_targets >= 3:
        own = own_target_lower_bound(mechanism)
        pairs.append(_atoms_from_masses(own.first, own.second, "others at the victim's target"))
    return tuple(pairs)


# --- Composition -------------------------------------------------------------------------


def compose(
    plds: Sequence[PrivacyLossDistribution],
    *,
    counts: Sequence[int] | None = None,
    interval: float = DEFAULT_INTERVAL,
) -> PrivacyLossDistribution:
    """The PLD of the composition: ``plds[i]`` taken ``counts[i]`` times (default once each).

    ``interval`` is the PLDs' grid (that of the answer when every mass is at +∞).
    """
    if not plds:
        raise InvalidParameterError("plds", "at least one PLD", 0)
    times = [1] * len(plds) if counts is None else list(counts)
    infinite = [float(pld.get_delta_for_epsilon(_HUGE_EPSILON)) for pld in plds]
    if _all_at_infinity(infinite, times):
        return _at_infinity(interval)
    result: PrivacyLossDistribution | None = None
    # dp_accounting's tail bounds try moment orders whose exponentials overflow (harmlessly:
    # those orders are simply not the minimizer); numpy would warn about them.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for pld, count in zip(plds, times, strict=True):
            if count <= 0:
                continue
            if count <= _DIRECT_COMPOSITIONS:  # avoids self_compose's costly tail bounds
                part = _power(pld, count)
            else:
                part = pld.self_compose(count, TAIL_MASS_TRUNCATION)
            result = part if result is None else _compose_two(result, part)
    if result is None:
        raise InvalidParameterError("counts", "at least one count >= 1", times)
    return result


def _all_at_infinity(infinity_masses: Sequence[float], counts: Sequence[int]) -> bool:
    """Whether (almost) all of a composition's mass is at +∞ (σ = 0 without dummies).

    dp_accounting cannot convolve an empty grid, and δ(ε) = 1 for every ε is then the answer.
    """
    finite = 1.0
    for infinity_mass, count in zip(infinity_masses, counts, strict=True):
        if count > 0:
            finite *= (1.0 - infinity_mass) ** count
    return finite <= 1e-9


def _at_infinity(interval: float) -> PrivacyLossDistribution:
    """The PLD with all its mass at +∞."""
    return PrivacyLossDistribution(pld_pmf.DensePLDPmf(interval, 0, np.zeros(1), 1.0, True))


def _power(pld: PrivacyLossDistribution, count: int) -> PrivacyLossDistribution:
    """``count`` copies of ``pld`` composed by repeated squaring (each step's tails to +∞)."""
    result: PrivacyLossDistribution | None = None
    power = pld
    while True:
        if count & 1:
            result = power if result is None else _compose_two(result, power)
        count >>= 1
        if not count:
            break
        power = _compose_two(power, power)
    assert result is not None
    return result


def _compose_two(
    first: PrivacyLossDistribution, second: PrivacyLossDistribution
) -> PrivacyLossDistribution:
    """``first.compose(second, TAIL_MASS_TRUNCATION)``, its tail scan vectorized.

    dp_accounting convolves two dense PMFs, then finds the tails to truncate element by
    element in Python; here it convolves without truncating and `_truncate_tails` cuts the
    same tails with cumulative sums.
    """
    if _dense_pmf(first) is None or _dense_pmf(second) is None:
        return first.compose(second, TAIL_MASS_TRUNCATION)
    composed = _dense_pmf(first.compose(second, 0.0))
    if composed is None:
        return first.compose(second, TAIL_MASS_TRUNCATION)
    lowest, probs, infinity_mass, discretization, pessimistic = composed
    offset, kept, right_tail = _truncate_tails(probs, TAIL_MASS_TRUNCATION, pessimistic)
    pmf = pld_pmf.DensePLDPmf(
        discretization, lowest + offset, kept, infinity_mass + right_tail, pessimistic
    )
    return PrivacyLossDistribution(pmf)


def _dense_pmf(
    distribution: PrivacyLossDistribution,
) -> tuple[int, FloatArray, float, float, bool] | None:
    """A symmetric PLD's dense PMF: its first grid index, masses, mass at +∞, grid, rounding.

    None for any other PLD (sparse, asymmetric), or if dp_accounting's private attributes
    (it has no public accessor for a PLD's PMF) are not where they were: callers then use
    dp_accounting's own, slower, functions.
    """
    try:
        pmf = distribution._pmf_remove
        if not (distribution._symmetric and isinstance(pmf, pld_pmf.DensePLDPmf)):
            return None
        return (
            int(pmf._lower_loss),
            np.asarray(pmf._probs, dtype=float),
            float(pmf._infinity_mass),
            float(pmf._discretization),
            bool(pmf._pessimistic_estimate),
        )
    except AttributeError:  # pragma: no cover - another dp_accounting
        return None


def _truncate_tails(
    probs: FloatArray, tail_mass_truncation: float, pessimistic: bool
) -> tuple[int, FloatArray, float]:
    """dp_accounting's ``pld_pmf._truncate_tails``, with cumulative sums.

    Cuts the longest prefix and suffix whose running sums stay at most half the truncation
    each (the same sequential sums); pessimistic, the prefix's mass moves to the first cell
    kept and the suffix's goes to +∞; optimistic, the suffix's moves to the last cell kept.
    """
    threshold = tail_mass_truncation / 2
    size = probs.size
    rising = np.cumsum(probs) > threshold
    left = int(np.argmax(rising)) if rising.any() else size
    falling = np.cumsum(probs[::-1]) > threshold
    right = size - (int(np.argmax(falling)) if falling.any() else size)
    right = max(right, left + 1)
    left_mass = float(np.sum(probs[:left]))
    right_mass = float(np.sum(probs[right:]))
    kept = probs[left:right].copy()
    if pessimistic:
        kept[0] += left_mass
        return left, kept, right_mass
    kept[-1] += right_mass
    return left, kept, 0.0


def _sparse(
    lowest: int, kept: FloatArray, infinity_mass: float, interval: float, pessimistic: bool
) -> pld_pmf.SparsePLDPmf:
    """A discretized PMF (`LossAtoms._discretized`) as dp_accounting's sparse PMF."""
    (points,) = np.nonzero(kept)
    masses = dict(zip((points + lowest).tolist(), kept[points].tolist(), strict=True))
    return pld_pmf.SparsePLDPmf(masses, interval, infinity_mass, pessimistic)


def compose_pairs(
    pairs: Sequence[LossAtoms],
    *,
    counts: Sequence[int] | None = None,
    interval: float = DEFAULT_INTERVAL,
    pessimistic: bool = True,
) -> PrivacyLossDistribution:
    """``compose([pair.pld() for pair in pairs], counts=counts)``, sparse when that is cheap.

    A pair with a few atoms spread over a wide range of losses (R_σ's three atoms span
    ε0 / interval grid points) is composed point by point, as dp_accounting's sparse PMFs
    compose: the same grid points, the same per-convolution tail truncation, without the
    FFT over the whole span and its tail bounds. Pairs whose composition would have too
    many points go to `compose`.
    """
    if not pairs:
        raise InvalidParameterError("pairs", "at least one pair", 0)
    times = [1] * len(pairs) if counts is None else list(counts)
    cells = [pair._discretized(interval, pessimistic) for pair in pairs]
    sizes = [int(np.count_nonzero(kept)) for _, kept, _ in cells]
    # The k-fold composition of an a-point PMF has at most C(k + a − 1, a − 1) points.
    points = 1
    for size, count in zip(sizes, times, strict=True):
        points *= math.comb(max(count, 0) + size - 1, size - 1) if size else 1
    work = points * max(sizes) * max(sum(times), 1)
    if _all_at_infinity([inf for _, _, inf in cells], times):
        return _at_infinity(interval)
    if points > _MAX_SPARSE_POINTS or work > _MAX_SPARSE_WORK or any(t < 0 for t in times):
        plds = [
            PrivacyLossDistribution(pld_pmf.DensePLDPmf(interval, low, kept, inf, pessimistic))
            for low, kept, inf in cells
        ]
        return compose(plds, counts=times, interval=interval)
    pmfs = [_sparse(low, kept, inf, interval, pessimistic) for low, kept, inf in cells]
    result: pld_pmf.SparsePLDPmf | None = None
    for pmf, count in zip(pmfs, times, strict=True):
        for _ in range(count):
            result = pmf if result is None else result.compose(pmf, TAIL_MASS_TRUNCATION)
    if result is None:
        raise InvalidParameterError("counts", "at least one count >= 1", times)
    return PrivacyLossDistribution(result)


def epsilon_for_delta(pld: PrivacyLossDistribution, delta: float) -> float:
    """The smallest ε with the PLD's δ(ε) ≤ δ (inf if none).

    dp_accounting's answer, with its scan of a dense grid done by `_dense_epsilon_for_delta`
    rather than point by point in Python.
    """
    dense = _dense_pmf(pld)
    if dense is None:
        return float(pld.get_epsilon_for_delta(delta))
    lowest, probs, infinity_mass, discretization, _ = dense
    losses = np.asarray((np.arange(probs.size) + lowest) * discretization, dtype=np.float64)
    return _dense_epsilon_for_delta(infinity_mass, losses, probs, delta)


def _dense_epsilon_for_delta(
    infinity_mass: float, losses: FloatArray, probs: FloatArray, delta: float
) -> float:
    """dp_accounting's ``_get_epsilon_for_delta`` over ascending ``losses``, vectorized.

    The smallest ε ≥ 0 with δ(ε) = U(ε) − e^ε W(ε) ≤ δ, where U(ε) is the P-mass of the losses
    above ε (+∞ included) and W(ε) = Σ_{L > ε} e^{−L} P(L): scanning the losses from the top,
    the first loss L_k with ln((U − δ)/W) ≥ L_k (U, W over the losses above it) brackets ε,
    which solves δ(ε) = δ there. The same running sums, accumulated in the same order
    (``np.cumsum`` is sequential), so the same answer up to the last bits of exp.
    """
    if infinity_mass > delta:
        return math.inf
    down_losses = losses[::-1]
    down_probs = probs[::-1]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        upper = np.cumsum(np.concatenate(([infinity_mass], down_probs)))
        lower = np.cumsum(np.concatenate(([0.0], np.exp(-down_losses) * down_probs)))
        before_upper, before_lower = upper[:-1], lower[:-1]
        usable = (before_upper > delta) & (before_lower > 0.0)
        bracket = np.log((before_upper - delta) / np.where(usable, before_lower, 1.0))
        stops = usable & (bracket >= down_losses)
    # A loss so large that e^{−L} is 0: dp_accounting answers L once U reaches δ there.
    huge = (upper[1:] >= delta) & (lower[1:] == 0.0)
    stop = int(np.argmax(stops)) if stops.any() else probs.size
    first_huge = int(np.argmax(huge)) if huge.any() else probs.size
    if first_huge < stop:
        return max(0.0, float(down_losses[first_huge]))
    mass_upper, mass_lower = float(upper[stop]), float(lower[stop])
    if mass_upper <= mass_lower + delta:
        return 0.0
    return math.log((mass_upper - delta) / mass_lower)


def lower_epsilon_for_delta(pld: PrivacyLossDistribution, delta: float) -> float:
    """A lower bound on the true ε at δ from an *optimistic* PLD of an explicit pair.

    The optimistic PLD's δ(ε) is at most the pair's; the slack covers the FFT's rounding.
    """
    return epsilon_for_delta(pld, delta + _LOWER_SLACK)


def composed_lower_epsilon(
    mechanism: Mechanism, *, rounds: int, delta: float, interval: float = DEFAULT_INTERVAL
) -> float | None:
    """A certified lower bound on ε of ``rounds`` compositions at δ (None without a pair)."""
    return _best_composed_pair(
        mechanism, rounds, interval, lambda pld: lower_epsilon_for_delta(pld, delta)
    )


def composed_lower_delta(
    mechanism: Mechanism, *, rounds: int, epsilon: float, interval: float = DEFAULT_INTERVAL
) -> float | None:
    """A certified lower bound on δ(ε) of ``rounds`` compositions (None without a pair)."""
    return _best_composed_pair(
        mechanism,
        rounds,
        interval,
        lambda pld: max(0.0, float(pld.get_delta_for_epsilon(epsilon)) - _LOWER_SLACK),
    )


def _best_composed_pair(
    mechanism: Mechanism,
    rounds: int,
    interval: float,
    value_of: Callable[[PrivacyLossDistribution], float],
) -> float | None:
    """The largest ``value_of`` the ``rounds``-fold composition of any lower-bound pair."""
    values = [
        value_of(compose_pairs([pair], counts=[rounds], interval=interval, pessimistic=False))
        for pair in lower_bound_pairs(mechanism)
    ]
    return max(values, default=None)
