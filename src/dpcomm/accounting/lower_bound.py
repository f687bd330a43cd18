"""Certified lower bounds: exact divergences of explicit neighbouring pairs.

The privacy of a mechanism is a maximum over neighbouring pairs, so the exact δ(ε) (or the
exact log-ratio of one output) of any explicit pair is a lower bound on what any valid
accountant can report. Dropping part of the observation (post-processing) or omitting
non-negative terms of a hockey-stick sum only lowers the value, so it stays a lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpcomm.accounting import binomial as binom
from dpcomm.accounting.exact import _lower_quantile
from dpcomm.accounting.mechanisms import ScramblerMechanism

FloatArray = npt.NDArray[np.float64]

_TAIL_PROBABILITY = 1e-30
# Absolute slack that covers floating-point error in the sums below (each cell's error is
# ~1e-16 of its mass; masses sum to at most 1 + e^ε).
_ROUNDING_SLACK = 1e-12


def _support_end(trials: int, success: float) -> int:
    """An index past which Bin(trials, success) has mass below 1e-30 (or ``trials``)."""
    if trials == 0 or success == 0.0:
        return 0
    high = trials
    low = int(trials * success)
    while high - low > 1:
        middle = (low + high) // 2
        if binom.sf(middle, trials, success) <= _TAIL_PROBABILITY:
            high = middle
        else:
            low = middle
    return high


#: Most counts per side of `ScramblerLowerBound`'s (α, γ) window (2 float64 tables of
#: this size squared).
_MAX_WINDOW = 3000


def _count_window(
    blanket: int, blanket_rate: float, dummies: int, dummy_rate: float, end: int
) -> tuple[int, int]:
    """A window [low, high] ⊆ [0, end] holding the likely counts of one target.

    The count is Bin(blanket, blanket_rate) + Bin(dummies, dummy_rate); the window spans 12
    standard deviations around the mean (all of [0, end] when small), at most _MAX_WINDOW wide.
    """
    mean = blanket * blanket_rate + dummies * dummy_rate
    spread = math.sqrt(
        blanket * blanket_rate * (1.0 - blanket_rate) + dummies * dummy_rate * (1.0 - dummy_rate)
    )
    half = max(12.0 * spread + 10.0, 10.0)
    low = max(0, math.floor(mean - half))
    high = min(end + 1, math.ceil(mean + half))
    if high - low + 1 > _MAX_WINDOW:
        low = max(0, round(mean) - _MAX_WINDOW // 2)
        high = min(end + 1, low + _MAX_WINDOW - 1)
    if low < 20:  # small counts: keep everything from 0 (exact, as before)
        low = 0
    return low, high


def _support_start(trials: int, success: float) -> int:
    """An index below which Bin(trials, success) has mass below 1e-30 (or 0)."""
    if trials == 0 or success == 0.0:
        return 0
    return _lower_quantile(_TAIL_PROBABILITY, trials, success)


def _binomial_window(trials: int, success: float, start: int, end: int) -> FloatArray:
    """P(Bin(trials, success) = k) for k from ``start`` to min(trials, its support end, end)."""
    stop = min(trials, _support_end(trials, success), end)
    values = np.arange(start, max(start, stop) + 1)
    return np.asarray(binom.pmf(values, trials, success), dtype=float)


def _binomial_pmf(trials: int, success: float, length: int) -> FloatArray:
    values = np.arange(length)
    return np.asarray(binom.pmf(values, trials, success), dtype=float)


def pair_delta(first: FloatArray, second: FloatArray, epsilon: float) -> float:
    """Max of H_{e^ε}(P ‖ Q) and H_{e^ε}(Q ‖ P) for two exact (sub-)distributions, less the slack.

    The slack covers floating-point error, so the value stays a lower bound on the pair's.
    """
    if math.isinf(epsilon):
        return 0.0
    exp_eps = math.exp(epsilon)
    return max(
        0.0,
        max(_hockey_stick(first, second, exp_eps), _hockey_stick(second, first, exp_eps))
        - _ROUNDING_SLACK * (1.0 + exp_eps),
    )


def _hockey_stick(first: FloatArray, second: FloatArray, exp_eps: float) -> float:
    """Σ (first − e^ε second)_+ in one scratch array (the values of the written-out expression)."""
    scratch = np.multiply(second, -exp_eps)
    scratch += first
    np.maximum(scratch, 0.0, out=scratch)
    return float(scratch.sum())


class ScramblerLowerBound:
    """Exact δ(ε) of an explicit neighbouring pair of the uncapped scrambler A_σ^{n,d}.

    T ≥ 3: the other n − 1 sources all hold a third target t''; the distinguished source holds
    t or t'. The observation is reduced to the counts (α, γ) received by t and t' (a
    post-processing of the full output). By symmetry the blanket draws and dummies that land
    in {t, t'} split evenly: (α₀, γ₀) = (H, Z − H), Z ~ Bin(n − 1, 2σ/T) + Bin(d, 2/T),
    H | Z ~ Bin(Z, 1/2); the distinguished message adds e_t w.p. 1 − σ + σ/T, e_t' w.p. σ/T.

    T = 2: the others hold t; the observation is the count at t.
    """

    def __init__(self, mechanism: ScramblerMechanism) -> None:
        if mechanism.capped:
            raise ValueError("ScramblerLowerBound covers the uncapped scrambler")
        self.mechanism = mechanism
        size, sigma = mechanism.num_targets, mechanism.sampling_rate
        n, d = mechanism.batch_size, mechanism.num_dummies
        truth = 1.0 - sigma + sigma / size
        other = sigma / size
        if size >= 3:
            blanket_hit = 2.0 * sigma / size
            dummy_hit = 2.0 / size
            end = _support_end(n - 1, blanket_hit) + _support_end(d, dummy_hit) + 1
            # Each binomial on its window (tails below 1e-30 left out); the P and Q masses
            # of a cell may then be short by ~1e-30, which the hockey-stick's rounding slack
            # (1e-12 · (1 + e^ε)) covers many times over.
            first_low = _support_start(n - 1, blanket_hit)
            second_low = _support_start(d, dummy_hit)
            z_pmf = np.zeros(end + 1)
            window = np.convolve(
                _binomial_window(n - 1, blanket_hit, first_low, end),
                _binomial_window(d, dummy_hit, second_low, end),
            )
            z_from = first_low + second_low
            z_to = min(end + 1, z_from + len(window))
            z_pmf[z_from:z_to] = window[: z_to - z_from]
            # Counts (α, γ) are kept in a window around their mean (each the count of one
            # target, Bin(n − 1, σ/T) + Bin(d, 1/T)); the cells left out only lower the
            # hockey-stick sums, so the bound stays a lower bound at any n.
            low, high = _count_window(n - 1, sigma / size, d, 1.0 / size, end)
            alpha = np.arange(low, high + 1)[:, None]
            gamma = np.arange(low, high + 1)[None, :]
            total = alpha + gamma
            inside = total <= end
            base = np.where(
                inside,
                z_pmf[np.minimum(total, end)] * binom.pmf(alpha, total, 0.5),
                0.0,
            )
            # Shifted by one count at t (or t'): the value at (α − 1, γ); the first row (and
            # column) would need α = low − 1, outside the window: those cells are dropped.
            shifted_alpha = np.zeros_like(base)
            shifted_alpha[1:, :] = base[:-1, :]
            shifted_gamma = np.zeros_like(base)
            shifted_gamma[:, 1:] = base[:, :-1]
            edge = np.zeros_like(base, dtype=bool)
            if low > 0:
                edge[0, :] = True
                edge[:, 0] = True
            rest = 1.0 - truth - other
            keep = inside & ~edge  # every P_0 value used by these cells is exact
            self.first: FloatArray = np.where(
                keep, truth * shifted_alpha + other * shifted_gamma + rest * base, 0.0
            ).ravel()
            self.second: FloatArray = np.where(
                keep, other * shifted_alpha + truth * shifted_gamma + rest * base, 0.0
            ).ravel()
        else:
            stay = 1.0 - sigma / 2.0
            end = n + d
            others = np.convolve(_binomial_pmf(n - 1, stay, n), _binomial_pmf(d, 0.5, d + 1))
            self.first = np.convolve(others, [1.0 - stay, stay])[: end + 1]
            self.second = np.convolve(others, [1.0 - other, other])[: end + 1]

    def delta(self, epsilon: float) -> float:
        """A lower bound on the mechanism's δ(ε)."""
        return pair_delta(self.first, self.second, epsilon)


class OwnTargetLowerBound:
    """Exact δ(ε) of a second explicit pair of the uncapped scrambler: others at the victim's t.

    The other n − 1 sources all hold t; the victim holds t (input D) or t' (D'). The observer
    keeps only the count at t: Bin(n − 1, 1 − σ + σ/T) (others) + Bin(d, 1/T) (dummies) + the
    victim's message (at t w.p. 1 − σ + σ/T under D, σ/T under D'), a post-processing of the
    output for these inputs. With few sources the victim's message stands out at t more than
    at a third target, so this pair is the stronger lower bound at small n.
    """

    def __init__(self, mechanism: ScramblerMechanism) -> None:
        if mechanism.capped:
            raise ValueError("OwnTargetLowerBound covers the uncapped scrambler")
        size, sigma = mechanism.num_targets, mechanism.sampling_rate
        n, d = mechanism.batch_size, mechanism.num_dummies
        truth, other = 1.0 - sigma + sigma / size, sigma / size
        others_low = _support_start(n - 1, truth)
        others = _binomial_window(n - 1, truth, others_low, n - 1)
        dummies_low = _support_start(d, 1.0 / size)
        dummies = _binomial_window(d, 1.0 / size, dummies_low, d)
        # Masses left out by the windows (< 1e-30) are covered by the rounding slack.
        base = np.convolve(others, dummies)
        self.first: FloatArray = np.convolve(base, [1.0 - truth, truth])
        self.second: FloatArray = np.convolve(base, [1.0 - other, other])

    def delta(self, epsilon: float) -> float:
        """A lower bound on the mechanism's δ(ε)."""
        return pair_delta(self.first, self.second, epsilon)


@lru_cache(maxsize=4)
def scrambler_lower_bound(mechanism: ScramblerMechanism) -> ScramblerLowerBound:
    """`ScramblerLowerBound` of ``mechanism``, shared (the accountant at each δ, the PLDs).

    A few are kept, as for `dpcomm.accounting.exact.exact_lemma2`: one holds ~150 MB at
    n = 10^6.
    """
    return ScramblerLowerBound(mechanism)


@lru_cache(maxsize=4)
def own_target_lower_bound(mechanism: ScramblerMechanism) -> OwnTargetLowerBound:
    """`OwnTargetLowerBound` of ``mechanism``, shared likewise."""
    return OwnTargetLowerBound(mechanism)


def _rescaled(values: FloatArray, log_scale: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each row divided by its peak (rows without mass unchanged), the peak's log added."""
    peak = values.max(axis=1)
    divisor = np.where(peak > 0.0, peak, 1.0)
    return values / divisor[:, None], log_scale + np.log(divisor)


def capped_two_target_outputs(
    families: Sequence[tuple[tuple[float, float], tuple[float, float], tuple[float, float]]],
    *,
    num_targets: int,
    batch_size: int,
    num_dummies: int,
) -> tuple[FloatArray, FloatArray]:
    """P(output puts a messages on u, n + d − a on v and none elsewhere), capped scrambler S̄_d.

    Each family is ``(others, first, second)``: the (to u, to v) probabilities of each of the
    n − 1 other sources' messages, and of the distinguished source's message under the two
    neighbouring inputs. Dummies are then added one by one, uniform over the targets holding
    fewer than n = ``batch_size`` messages. Only outputs with every message on u or v are
    followed, so after s messages a + b = s: the state is one anti-diagonal of the (a, b) table,
    n + 1 entries, and each message or dummy costs O(n) (the same sums, term by term, as the
    full (n + 1) x (n + 1) table, which cost O(n²)). Rows are rescaled by their peak at each
    step so that large n does not underflow.

    Returns ``(scaled, log_scale)``: row 2i (first) and 2i + 1 (second) of family i, entry j
    for a = d + j (j = 0..n − d; none when d > n), equal to ``scaled * exp(log_scale)``.
    """
    n, d = batch_size, num_dummies
    rows = len(families)
    state = np.zeros((rows, n + 1))
    state[:, 0] = 1.0
    log_scale = np.zeros(rows)

    def message(values: FloatArray, to_u: FloatArray, to_v: FloatArray) -> FloatArray:
        # (a, b) -> (a + 1, b) with to_u, (a, b + 1) with to_v; indexed by a.
        moved = np.zeros_like(values)
        moved[:, 1:] = to_u[:, None] * values[:, :-1]
        moved += to_v[:, None] * values
        return moved

    others_u = np.array([f[0][0] for f in families], dtype=float)
    others_v = np.array([f[0][1] for f in families], dtype=float)
    for _ in range(n - 1):
        state = message(state, others_u, others_v)
        state, log_scale = _rescaled(state, log_scale)
    state = np.repeat(state, 2, axis=0)
    log_scale = np.repeat(log_scale, 2)
    last_u = np.array([p[0] for f in families for p in f[1:]], dtype=float)
    last_v = np.array([p[1] for f in families for p in f[1:]], dtype=float)
    state = message(state, last_u, last_v)
    state, log_scale = _rescaled(state, log_scale)
    # A dummy goes to each open target of u, v w.p. 1/(T − the full ones among u, v). Before
    # the k-th dummy (k = 1..d) a + b = n + k − 1, so v = n + k − 1 − a is full iff a < k.
    both_open, one_full = 1.0 / max(float(num_targets), 1.0), 1.0 / max(num_targets - 1.0, 1.0)
    u_steps = np.full(n + 1, both_open)
    u_steps[n] = 0.0  # u full
    v_steps = np.full(n + 1, both_open)
    v_steps[n] = one_full
    for k in range(1, d + 1):
        step_u = u_steps.copy()
        step_u[: min(k, n)] = one_full
        step_v = v_steps.copy()
        step_v[:k] = 0.0
        moved = np.zeros_like(state)
        moved[:, 1:] = (step_u * state)[:, :-1]
        moved += step_v * state
        state, log_scale = _rescaled(moved, log_scale)
    if d > n:
        return np.zeros((2 * rows, 0)), log_scale
    return state[:, d:], log_scale


#: Largest (n + d) * n for which the capped lower bound is computed (tens of milliseconds).
CAPPED_COST_LIMIT = 4e6


class CappedLowerBound:
    """Lower bounds for the capped scrambler Ā_σ^{n,d} from explicit neighbouring pairs.

    Exact probabilities, under the mechanism's own output distribution, of the outputs that
    put every message on two targets, for three explicit pairs (the others at t'' or at t).
    Restricting a hockey-stick sum, or a maximum of log-ratios, to some outputs can only lower
    it. Outputs whose probability underflows (below 1e-250 of the family's largest) are
    skipped, which also only lowers the value. When (n + d) n exceeds
    `CAPPED_COST_LIMIT` no pair is evaluated and both bounds are 0.
    """

    def __init__(self, mechanism: ScramblerMechanism) -> None:
        self.mechanism = mechanism
        size, sigma = mechanism.num_targets, mechanism.sampling_rate
        n, d = mechanism.batch_size, mechanism.num_dummies
        truth, other = 1.0 - sigma + sigma / size, sigma / size
        # (others' (to u, to v)), distinguished under D, under D'
        families: list[tuple[tuple[float, float], tuple[float, float], tuple[float, float]]]
        families = [((truth, other), (truth, other), (other, truth))]  # u=t, v=t', others at t
        if size >= 3:
            families.append(((other, truth), (truth, other), (other, other)))  # u=t, v=t''
            families.append(((other, other), (truth, other), (other, truth)))  # u=t, v=t'
        self.evaluated = (n + d) * n <= CAPPED_COST_LIMIT
        self.pairs: list[tuple[FloatArray, FloatArray]] = []  # log-probabilities per output
        self.structural_gap = False
        if not self.evaluated:
            return
        scaled, log_scale = capped_two_target_outputs(
            families, num_targets=size, batch_size=n, num_dummies=d
        )
        for index in range(len(families)):
            p_out, q_out = scaled[2 * index], scaled[2 * index + 1]
            log_p, log_q = log_scale[2 * index], log_scale[2 * index + 1]
            visible_p, visible_q = p_out > 1e-250, q_out > 1e-250
            if sigma == 0.0 and np.any((visible_p & (q_out == 0)) | (visible_q & (p_out == 0))):
                self.structural_gap = True  # with σ = 0 zeros are structural, not underflow
            with np.errstate(divide="ignore"):
                log_first = np.where(visible_p, np.log(p_out) + log_p, -np.inf)
                log_second = np.where(visible_q, np.log(q_out) + log_q, -np.inf)
            self.pairs.append((log_first, log_second))

    def pure_epsilon(self) -> float:
        """A lower bound on the pure ε."""
        if self.structural_gap:
            return math.inf
        best = 0.0
        for log_first, log_second in self.pairs:
            both = np.isfinite(log_first) & np.isfinite(log_second)
            if np.any(both):
                best = max(best, float(np.abs(log_first[both] - log_second[both]).max()))
        return max(0.0, best - 1e-9)

    def delta(self, epsilon: float) -> float:
        """A lower bound on δ(ε)."""
        if math.isinf(epsilon):
            return 0.0
        best = 0.0
        exp_eps = math.exp(epsilon)
        for log_first, log_second in self.pairs:
            first, second = np.exp(log_first), np.exp(log_second)
            forward = _hockey_stick(first, second, exp_eps)
            backward = _hockey_stick(second, first, exp_eps)
            best = max(best, forward, backward)
        return max(0.0, best - _ROUNDING_SLACK * (1.0 + exp_eps))
