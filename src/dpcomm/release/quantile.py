"""MEDIAN and quantiles under a noisy release: OpenDP's quantile mechanism over a public grid.

A quantile of a bounded column is released per cell (each key of each grouping set) by
OpenDP's ``make_private_quantile`` (Smith 2011's exponential-mechanism quantile, drawn as report
noisy max with exponential noise, i.e. permute-and-flip, McKenna and Sheldon 2020) over a public
grid of candidates c_0 = lo < … < c_{k−1} = hi. Candidate c scores
|(1 − α)·#{x < c} − α·#{x > c}| over the cell's delivered values (clamped to [lo, hi]; NULLs
and rows failing the WHERE left out) and the least noisy score wins. The scores read only the
counts of the 2k − 1 bins {c_0}, (c_0, c_1), {c_1}, …, {c_{k−1}} (`bin_of`): a mergeable
partial state, the bins' counts, which the result node turns back into a multiset of bin
representatives (each candidate, and the midpoints between them) with the same scores.

Privacy (docs/accounting.md, "Quantiles"): adding or removing one value changes every score by
at most max(α, 1 − α), and OpenDP's privacy map gives ε = 2·max(α, 1 − α)·d / s for d values
added or removed in a cell (s the noise's scale). In the joint view of traffic and release a
row's replacement adds or removes at most d values in the cells of one grouping set
(`quantile_distance`): 2 where each tuple arrives independently (``own-row``: the row leaves
its old cell and enters its new one, or changes in one cell) and in the empty grouping set,
3 under scramblers with sampling (``one-other``, ``one-other-shared-node``: one other
source's tuple is delivered in one world only). Cells are released independently, so the
release of every grouping set costs the map at Σ d.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.release.mechanisms import JOINT_VIEWS, MAP_TOLERANCE, JointView, NoiseShare

#: Values a row's replacement adds to or removes from the cells of one grouping set with keys,
#: per `JointView` (Σ over its cells of the symmetric distance).
QUANTILE_SET_DISTANCE: dict[JointView, int] = {
    "own-row": 2,
    "one-other": 3,
    "one-other-shared-node": 3,
}

#: The empty grouping set: one cell, every tuple delivered; the row's value leaves and enters.
EMPTY_SET_DISTANCE = 2


def quantile_distance(
    grouping_sets: Sequence[Sequence[str]], views: Sequence[JointView] | None = None
) -> int:
    """d: the values one row's replacement adds or removes over every released cell.

    Per grouping set with keys `QUANTILE_SET_DISTANCE` of its view (default
    ``one-other-shared-node``, valid for every countermeasure), 2 for the empty set.

    Examples:
        >>> quantile_distance([("species",), ()], ["one-other", "own-row"])
        5
    """
    if views is None:
        views = ["one-other-shared-node"] * len(grouping_sets)
    if len(views) != len(grouping_sets):
        raise InvalidParameterError(
            "views", f"one per grouping set ({len(grouping_sets)})", len(views)
        )
    total = 0
    for grouping_set, view in zip(grouping_sets, views, strict=True):
        if view not in JOINT_VIEWS:
            raise InvalidParameterError("view", f"one of {', '.join(JOINT_VIEWS)}", view)
        total += QUANTILE_SET_DISTANCE[view] if grouping_set else EMPTY_SET_DISTANCE
    return total


def candidate_grid(low: float, high: float, size: int) -> tuple[float, ...]:
    """The public candidates: ``size`` evenly spaced points from lo to hi, both included.

    Examples:
        >>> candidate_grid(0.0, 10.0, 3)
        (0.0, 5.0, 10.0)
    """
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InvalidParameterError("bounds", "finite (lo, hi) with lo < hi", (low, high))
    if isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= 100_000:
        raise InvalidParameterError("candidates", "an integer in [2, 100000]", size)
    return tuple(float(v) for v in np.linspace(low, high, size))


def check_alpha(alpha: object) -> float:
    """α checked: a number in [0, 1] (0.5: the median)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 <= alpha <= 1.0:
        raise InvalidParameterError("q", "a number in [0, 1] (0.5: the median)", alpha)
    return float(alpha)


def bin_of(value: float | None, candidates: Sequence[float]) -> int | None:
    """The bin of ``value`` clamped to the grid: 2i for c_i, 2i + 1 for (c_i, c_{i+1}).

    None stays None (a NULL adds nothing).

    Examples:
        >>> [bin_of(v, (0.0, 5.0, 10.0)) for v in (-3.0, 0.0, 2.0, 5.0, 7.5, 99.0, None)]
        [0, 0, 1, 2, 3, 4, None]
    """
    if value is None:
        return None
    clamped = min(max(float(value), candidates[0]), candidates[-1])
    index = bisect.bisect_left(candidates, clamped)
    return 2 * index if candidates[index] == clamped else 2 * index - 1


def representatives(candidates: Sequence[float]) -> tuple[float, ...]:
    """One value per bin (`bin_of`): each candidate, and the midpoint between neighbours."""
    values: list[float] = []
    for left, right in itertools.pairwise(candidates):
        values += [left, (left + right) / 2.0]
    return (*values, candidates[-1])


@dataclass(frozen=True, kw_only=True)
class QuantileNoise(NoiseShare):
    """How one released quantile is drawn, in every cell.

    Attributes:
        output: the released column.
        alpha: α, the quantile (0.5: the median).
        candidates: the public grid over [lo, hi].
        distance: d (`quantile_distance`): values one row's replacement moves over all cells.
        scale: s, OpenDP's noise scale (in units of values counted).
        epsilon: its share ε_i of the release's ε: OpenDP's map at d.
        delta: its share δ_i (unused: the mechanism is pure ε-DP; reported as assigned).
        selection_delta: 0 (a quantile selects no keys).
        shared_blanket: whether d covers scramblers with sampling (the ``one-other`` views);
            False: only traffic that delivers each tuple independently (``own-row``).
    """

    output: str
    alpha: float
    candidates: tuple[float, ...]
    distance: int
    scale: float


@functools.lru_cache(maxsize=64)
def quantile_measurement(candidates: tuple[float, ...], alpha: float, scale: float) -> Any:
    """OpenDP's ``make_private_quantile`` (pure ε) on vectors of floats, ``scale`` s."""
    from dpcomm.release import opendp_core as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    return dp.m.make_private_quantile(
        domain, dp.symmetric_distance(), dp.max_divergence(), list(candidates), alpha, scale
    )


def calibrate_quantile(
    output: str,
    epsilon: float,
    alpha: float,
    candidates: tuple[float, ...],
    distance: int,
    delta: float = 0.0,
    *,
    shared_blanket: bool = True,
) -> QuantileNoise:
    """The noise whose OpenDP map at d = ``distance`` is at most ``epsilon``.

    s = 2·max(α, 1 − α)·d / ε_i, raised by ulps while OpenDP's map (α as its fraction)
    is above ε_i.

    Examples:
        >>> noise = calibrate_quantile("m", 1.0, 0.5, (0.0, 1.0, 2.0), 3)
        >>> (noise.scale, noise.epsilon)
        (3.0, 1.0)
    """
    alpha = check_alpha(alpha)
    if not (0.0 < epsilon < math.inf) or distance < 1:
        raise InvalidParameterError("epsilon", "a finite number > 0", epsilon)
    scale = 2.0 * max(alpha, 1.0 - alpha) * distance / epsilon
    for _ in range(64):
        if quantile_measurement(candidates, alpha, scale).map(distance) <= epsilon:
            return QuantileNoise(
                output=output,
                alpha=alpha,
                candidates=candidates,
                distance=distance,
                scale=scale,
                epsilon=epsilon,
                delta=delta,
                shared_blanket=shared_blanket,
            )
        scale = math.nextafter(scale, math.inf) * (1.0 + 1e-12)
    raise DpcommError(f"no scale found whose OpenDP map is at most {epsilon:.6g}")


def released_quantile(noise: QuantileNoise, counts: Sequence[int]) -> float:
    """One cell's released quantile from its bins' counts (`bin_of`), drawn by OpenDP.

    OpenDP's privacy map at d is checked against ε_i before drawing.
    """
    return released_quantiles(noise, counts, 1)[0]


#: The most draws one call of OpenDP's composition of copies of a quantile's measurement gives
#: (`released_quantiles`); fewer are drawn by compositions of 2^i copies.
DRAWS_PER_CALL = 256


@functools.lru_cache(maxsize=64)
def _composed_draws(candidates: tuple[float, ...], alpha: float, scale: float, copies: int) -> Any:
    """OpenDP's composition of ``copies`` copies of `quantile_measurement`: that many draws."""
    from opendp.combinators import make_composition

    return make_composition([quantile_measurement(candidates, alpha, scale)] * copies)


def released_quantiles(noise: QuantileNoise, counts: Sequence[int], draws: int) -> list[float]:
    """``draws`` independent releases of one cell's quantile (`released_quantile`'s draws).

    For many runs of cells with the same counts (an audit): the values are built once, and
    given to OpenDP once per call of its composition of copies of the measurement (each copy
    draws afresh; `DRAWS_PER_CALL` at most per call), rather than once per draw.
    """
    bins = 2 * len(noise.candidates) - 1
    if len(counts) != bins or any(int(c) < 0 for c in counts):
        raise InvalidParameterError("counts", f"{bins} counts >= 0, one per bin", counts)
    measurement = quantile_measurement(noise.candidates, noise.alpha, noise.scale)
    spent = float(measurement.map(noise.distance))
    if spent > noise.epsilon * (1.0 + MAP_TOLERANCE):
        raise DpcommError(
            f"OpenDP accounts {spent:.6g} for the quantile {noise.output}, above the "
            f"{noise.epsilon:.6g} it was calibrated to: refusing to release"
        )
    values = [
        value
        for value, count in zip(representatives(noise.candidates), counts, strict=True)
        for _ in range(int(count))
    ]
    if draws == 1:
        return [float(measurement(values))]
    drawn: list[float] = []
    while len(drawn) < draws:
        missing = draws - len(drawn)
        copies = DRAWS_PER_CALL if missing >= DRAWS_PER_CALL else 1 << (missing.bit_length() - 1)
        batch = _composed_draws(noise.candidates, noise.alpha, noise.scale, copies)
        drawn += [float(value) for value in batch(values)]
    return drawn


def quantile_scores(counts: Sequence[float], alpha: float) -> npt.NDArray[np.float64]:
    """Each candidate's score |(1 − α)·#{x < c_i} − α·#{x > c_i}| from the bins' counts."""
    array = np.asarray(counts, dtype=np.float64)
    below = np.concatenate([[0.0], np.cumsum(array)])  # below[j]: values in bins < j
    total = below[-1]
    indices = np.arange(0, array.size, 2)  # candidate i is bin 2i
    return np.asarray(
        np.abs((1.0 - alpha) * below[indices] - alpha * (total - below[indices + 1])),
        dtype=np.float64,
    )


def quantile_law(counts: Sequence[float], alpha: float, scale: float) -> npt.NDArray[np.float64]:
    """The exact law of the released candidate: report noisy min with exponential noise.

    With u_i = −(score_i − min score)/s and a_i = e^{u_i} ≤ 1, candidate i wins with
    probability ∫_0^1 a_i Π_{j≠i} (1 − a_j y) dy (the noisy utilities u_i + Exp(1) compared,
    y = e^{−x}): a polynomial of degree k − 1 in y, integrated exactly by Gauss–Legendre
    quadrature with ⌈k/2⌉ nodes (exact up to degree k). Used for exact privacy checks and
    for `expected_squared_error`.
    """
    if len(counts) > 2 * 64 - 1:
        raise InvalidParameterError("counts", "the bins of at most 64 candidates", len(counts))
    scores = quantile_scores(counts, alpha)
    weights = np.exp(-(scores - scores.min()) / scale)
    nodes, node_weights = np.polynomial.legendre.leggauss(max(1, (weights.size + 1) // 2))
    y = 0.5 * (nodes + 1.0)  # on (0, 1): every factor 1 − a_j y is > 0
    factors = 1.0 - np.outer(weights, y)  # (candidates, nodes)
    products = np.prod(factors, axis=0) / factors  # Π_{j≠i}, node by node
    return np.asarray(weights * (products @ (0.5 * node_weights)), dtype=np.float64)


def expected_squared_error(noise: QuantileNoise, count: float) -> float:
    """E[(released − q)²] for a cell of ``count`` values spread evenly over [lo, hi].

    A model of public quantities only (`dpcomm.calibrate`'s error model): the values fill
    the open bins between the candidates equally (``count`` / (k − 1) each, a uniform
    column), so the true α-quantile is q = lo + α (hi − lo); the released candidate's law is
    the mechanism's exact one (`quantile_law`) at the scale s. A column's true quantile lies
    anywhere between two candidates: the grid's rounding, step²/12, is added. With no values
    every candidate scores 0 (the law is uniform).

    Examples:
        >>> noise = calibrate_quantile("m", 1.0, 0.5, candidate_grid(0.0, 10.0, 11), 3)
        >>> round(expected_squared_error(noise, 1000.0) ** 0.5, 3)
        0.289
    """
    if not (count >= 0.0 and math.isfinite(count)):
        raise InvalidParameterError("count", "a finite number of values >= 0", count)
    candidates = np.asarray(noise.candidates)
    low, high = candidates[0], candidates[-1]
    counts = np.zeros(2 * candidates.size - 1)
    counts[1::2] = count / (candidates.size - 1)
    law = quantile_law(counts.tolist(), noise.alpha, noise.scale)
    target = low + noise.alpha * (high - low)
    rounding = float(high - low) ** 2 / (candidates.size - 1) ** 2 / 12.0
    return float(np.dot(law, (candidates - target) ** 2)) + rounding


__all__ = [
    "DRAWS_PER_CALL",
    "EMPTY_SET_DISTANCE",
    "QUANTILE_SET_DISTANCE",
    "QuantileNoise",
    "bin_of",
    "calibrate_quantile",
    "candidate_grid",
    "check_alpha",
    "expected_squared_error",
    "quantile_distance",
    "quantile_law",
    "quantile_measurement",
    "quantile_scores",
    "released_quantile",
    "released_quantiles",
    "representatives",
]
