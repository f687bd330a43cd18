"""Exact output distributions of the joint mechanism: traffic view and noisy release.

Used by ``test_joint_release_exact.py``. One grouping set with keys; T compute nodes; each
key is owned by one node (``Layout``), released or not. A source holds one row (key k, a
contribution c: its clamped value for SUM, 1 or 0 for COUNT) and applies R_σ: with
probability 1 − σ its tuple goes to its home node t = node(k), with probability σ to a
uniform node u; the tuple is *delivered* iff it lands on t. What the observer sees:

* ``scrambler``: one batch of n sources and d dummies to uniform nodes (with replacement),
  shuffled: the count of messages per node;
* ``local``: R_σ^d, each source's first message and d dummies to distinct other nodes, in
  random order: each source's set of d + 1 nodes.

The release is, for every released key, the sum of the delivered tuples' contributions plus
independent noise. The joint law of (view, delivered sums) is computed exactly by dynamic
programming over the sources (dense arrays: view × one axis per released key); the noisy
release is then computed per cell:

* discrete Laplace of scale b (OpenDP's noise for counts), each noisy sum clamped to the box
  of the sums' possible values (`clamped_laplace_channel`): beyond the box's edges every
  output's probability is the edge's times q^k (q = e^(−1/b)) under both tables, so the
  clamped release has the same hockey-stick sums as the unbounded one: exact, nothing
  dropped;
* continuous Laplace (two released cells): `continuous_laplace_delta` integrates exactly in
  the first cell (on each unit interval the density is A e^(−y/b) + B e^(y/b), which changes
  sign at most once) and by composite Gauss–Legendre quadrature in the second; beyond the
  means' range both are closed forms.

Neighbouring tables: the others' rows as a multiset (the sources of a scrambler are
exchangeable; for the local randomizer permuting the others permutes the view, the same
bijection under both tables), row 0 replaced by any other row.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.ndimage import convolve1d

import dpcomm
from dpcomm.accounting import LocalRandomizer, ScramblerMechanism
from dpcomm.plan.privacy import paths_with as _paths_with
from dpcomm.release.mechanisms import (
    AggregateNoise,
    Gaussian,
    JointView,
    Laplace,
    aggregate_sensitivity,
    calibrate_noise,
    centred_sum_sensitivity,
    release_pld,
)
from dpcomm.release.quantile import calibrate_quantile, quantile_distance, quantile_law

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Instance:
    """One tiny joint mechanism: nodes, keys, the released function, the countermeasure.

    ``keys`` maps each key to (node, released). ``function`` is ``count`` (contributions
    {0, 1}: a row failing the WHERE adds 0) or ``sum`` (integers in [lo, hi]).
    """

    nodes: int
    keys: tuple[tuple[str, int, bool], ...]
    function: str
    lo: int
    hi: int
    mechanism: str  # "scrambler" or "local"
    sigma: float
    batch: int
    dummies: int
    epsilon2: float
    centred: bool = False  # a centred SUM: contributions in [lo − c, hi − c] ∪ {0}
    alpha: float = 0.5  # a quantile's α (``function`` "quantile")

    @property
    def cells(self) -> tuple[str, ...]:
        """The released keys, in order: one released cell each."""
        return tuple(k for k, _, released in self.keys if released)

    @property
    def contributions(self) -> tuple[int, ...]:
        if self.function == "count":
            return (0, 1)
        if self.function == "quantile":  # value lo + i encoded (n + 1)^i; 0: a NULL
            return (0, *((self.batch + 1) ** i for i in range(self.hi - self.lo + 1)))
        if self.centred:  # c = (lo + hi)/2, an integer here; 0 (a NULL) is in the range
            centre = (self.lo + self.hi) // 2
            return tuple(range(self.lo - centre, self.hi - centre + 1))
        return tuple(range(self.lo, self.hi + 1))

    @property
    def rows(self) -> tuple[tuple[int, int], ...]:
        """Every row (key index, contribution)."""
        return tuple((k, c) for k in range(len(self.keys)) for c in self.contributions)

    def home(self, key: int) -> int:
        return self.keys[key][1]

    def cell(self, key: int) -> int | None:
        name, _, released = self.keys[key]
        return self.cells.index(name) if released else None

    @property
    def shared_node(self) -> bool:
        """Whether a node owns two released keys."""
        owners = [node for _, node, released in self.keys if released]
        return len(owners) != len(set(owners))

    @property
    def view(self) -> JointView:
        """The sensitivity's `JointView` as the library chooses it for this countermeasure."""
        if self.mechanism == "scrambler" and self.sigma > 0.0:
            return "one-other-shared-node" if self.shared_node else "one-other"
        return "own-row"

    def traffic(self) -> ScramblerMechanism | LocalRandomizer:
        if self.mechanism == "scrambler":
            return ScramblerMechanism(
                num_targets=self.nodes,
                sampling_rate=self.sigma,
                batch_size=self.batch,
                num_dummies=self.dummies,
            )
        return LocalRandomizer(
            num_targets=self.nodes, sampling_rate=self.sigma, num_dummies=self.dummies
        )

    def label(self) -> str:
        layout = ",".join(f"{k}@{n}{'' if r else '(unreleased)'}" for k, n, r in self.keys)
        values = "count" if self.function == "count" else f"{self.function}[{self.lo},{self.hi}]"
        values += " centred" if self.centred else ""
        return (
            f"{self.mechanism} T={self.nodes} n={self.batch} d={self.dummies} σ={self.sigma} "
            f"{values} keys {layout} ε2={self.epsilon2}"
        )


# --- The library's claim ---------------------------------------------------------------


def claim(instance: Instance, delta: float, view: JointView | None = None) -> tuple[float, float]:
    """(ε, b): the library's reported ε at ``delta`` and the Laplace scale b it calibrates.

    As `dpcomm.release.compose.compose_release` does for one cluster and a Laplace release
    (δ2 = 0): the smaller of the PLD composition of the traffic's dominating pair with the
    release's (`_paths_with`, `release_pld`) and the sum ε1 + ε2 (ε1 from `dpcomm.account`).
    ``view`` overrides the sensitivity's `JointView` (the power checks).
    """
    chosen = instance.view if view is None else view
    if instance.function == "quantile":
        return quantile_claim(instance, delta, chosen)
    function = "count_star" if instance.function == "count" else "sum"
    bound = max(abs(instance.lo), abs(instance.hi)) if function == "sum" else None
    width = instance.hi - instance.lo if function == "sum" else None
    if instance.centred:
        sensitivity = centred_sum_sensitivity([("k",)], instance.lo, instance.hi, views=[chosen])
    else:
        sensitivity = aggregate_sensitivity(function, [("k",)], bound, width, views=[chosen])
    noises = calibrate_noise(Laplace(epsilon=instance.epsilon2), [("v", function, sensitivity)])
    mechanism = instance.traffic()
    composed = _paths_with((((mechanism, 1),),), release_pld(noises), delta)
    summed = dpcomm.account(mechanism, delta=delta).guarantee.epsilon + instance.epsilon2
    epsilon = summed if composed is None else min(summed, composed)
    return epsilon, noises[0].scale


def quantile_claim(instance: Instance, delta: float, view: JointView) -> tuple[float, float]:
    """(ε, s): the reported ε at ``delta`` and the quantile's noise scale s, as `claim`.

    The release is OpenDP's quantile over the candidates lo, …, hi (pure ε2), calibrated
    to `quantile_distance` of ``view``.
    """
    candidates = tuple(float(v) for v in range(instance.lo, instance.hi + 1))
    distance = quantile_distance([("k",)], [view])
    noise = calibrate_quantile("q", instance.epsilon2, instance.alpha, candidates, distance)
    mechanism = instance.traffic()
    composed = _paths_with((((mechanism, 1),),), release_pld([noise]), delta)
    summed = dpcomm.account(mechanism, delta=delta).guarantee.epsilon + instance.epsilon2
    epsilon = summed if composed is None else min(summed, composed)
    return epsilon, noise.scale


# --- Exact joint law of (view, delivered sums) -------------------------------------------


def _shift(array: FloatArray, axis: int, by: int) -> FloatArray:
    """``array`` moved by ``by`` along ``axis`` (zeros enter; callers size axes so nothing
    leaves)."""
    if by == 0:
        return array
    out = np.zeros_like(array)
    source = [slice(None)] * array.ndim
    target = [slice(None)] * array.ndim
    if by > 0:
        source[axis], target[axis] = slice(0, -by), slice(by, None)
    else:
        source[axis], target[axis] = slice(-by, None), slice(0, by)
    out[tuple(target)] = array[tuple(source)]
    return out


class JointLaw:
    """Exact law of (view, delivered sums) for every table of an instance.

    Arrays have one view axis (flattened) and one axis per released cell, the sum s at index
    s − n·min(C).
    """

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        size, n = instance.nodes, instance.batch
        low, high = min(instance.contributions), max(instance.contributions)
        self.offset = -n * low
        self.width = n * (high - low) + 1
        self.cells = len(instance.cells)
        sigma = instance.sigma
        self.truth = 1.0 - sigma + sigma / size
        self.other = sigma / size
        if instance.mechanism == "scrambler":
            total = n + instance.dummies
            grid = np.indices((total + 1,) * size).reshape(size, -1)
            self._final = np.flatnonzero(grid.sum(axis=0) == total)
        else:
            self._sets = [
                frozenset(s) for s in itertools.combinations(range(size), instance.dummies + 1)
            ]

    # Scrambler: a count axis per node, sized n + 1 while the sources are added.
    def _start(self) -> FloatArray:
        instance = self.instance
        if instance.mechanism == "scrambler":
            shape = (instance.batch + 1,) * instance.nodes + (self.width,) * self.cells
        else:
            shape = (self.width,) * self.cells
        state = np.zeros(shape)
        state[(0,) * (len(shape) - self.cells) + (self.offset,) * self.cells] = 1.0
        return state

    def _source_outcomes(self, key: int) -> list[tuple[int, bool, float]]:
        """(view coordinate, delivered, probability) of one source holding ``key``."""
        instance = self.instance
        home = instance.home(key)
        if instance.mechanism == "scrambler":
            return [
                (m, m == home, self.truth if m == home else self.other)
                for m in range(instance.nodes)
                if (self.truth if m == home else self.other) > 0.0
            ]
        subsets = math.comb(instance.nodes - 1, instance.dummies)
        outcomes: dict[tuple[int, bool], float] = {}
        for first in range(instance.nodes):
            p_first = self.truth if first == home else self.other
            if p_first == 0.0:
                continue
            rest = [j for j in range(instance.nodes) if j != first]
            for extra in itertools.combinations(rest, instance.dummies):
                index = self._sets.index(frozenset((first, *extra)))
                outcome = (index, first == home)
                outcomes[outcome] = outcomes.get(outcome, 0.0) + p_first / subsets
        return [(v, delivered, p) for (v, delivered), p in outcomes.items()]

    def add(self, state: FloatArray, row: tuple[int, int]) -> FloatArray:
        """The law after one more source holding ``row``."""
        instance = self.instance
        key, contribution = row
        cell = instance.cell(key)
        sum_axis = None if cell is None else state.ndim - self.cells + cell
        if instance.mechanism == "scrambler":
            new = np.zeros_like(state)
            for node, delivered, p in self._source_outcomes(key):
                moved = _shift(state, node, 1)
                if delivered and sum_axis is not None:
                    moved = _shift(moved, sum_axis, contribution)
                new += p * moved
            return new
        parts = []
        by_set: dict[int, FloatArray] = {}
        for index, delivered, p in self._source_outcomes(key):
            moved = state
            if delivered and sum_axis is not None:
                moved = _shift(state, sum_axis, contribution)
            by_set[index] = by_set.get(index, 0.0) + p * moved
        for index in range(len(self._sets)):
            parts.append(by_set.get(index, np.zeros_like(state)))
        return np.stack(parts, axis=0)  # the newest source's set first

    def others(self, rows: Sequence[tuple[int, int]]) -> FloatArray:
        """The law of the other sources' messages and delivered sums."""
        state = self._start()
        for row in rows:
            state = self.add(state, row)
        return state

    def finish(self, state: FloatArray) -> FloatArray:
        """(views, cells...) after every source: dummies added, the view axis flattened."""
        instance = self.instance
        if instance.mechanism == "local":
            return state.reshape((-1, *state.shape[state.ndim - self.cells :]))
        size, total = instance.nodes, instance.batch + instance.dummies
        pad = [(0, instance.dummies)] * size + [(0, 0)] * self.cells
        state = np.pad(state, pad)
        for _ in range(instance.dummies):
            state = sum(_shift(state, node, 1) for node in range(size)) / size
        flat = state.reshape(((total + 1) ** size, *state.shape[size:]))
        return flat[self._final]

    def table(self, others: FloatArray, row: tuple[int, int]) -> FloatArray:
        """The law for the table (others, row 0 = ``row``)."""
        return self.finish(self.add(others, row))


def view_marginal(law: JointLaw, joint: FloatArray) -> dict[object, float]:
    """The traffic view's law (for the cross-check with `dpcomm.accounting.brute_force`)."""
    instance = law.instance
    masses = joint.reshape(joint.shape[0], -1).sum(axis=1)
    if instance.mechanism == "scrambler":
        size, total = instance.nodes, instance.batch + instance.dummies
        grid = np.indices((total + 1,) * size).reshape(size, -1)[:, law._final]
        return {tuple(int(v) for v in grid[:, k]): float(m) for k, m in enumerate(masses)}
    sets = law._sets
    views = itertools.product(range(len(sets)), repeat=instance.batch)
    return {tuple(sets[v] for v in view): float(m) for view, m in zip(views, masses, strict=True)}


# --- Noise ---------------------------------------------------------------------------------


def clamped_laplace_channel(scale: float, width: int) -> FloatArray:
    """P(clamp(s + Z) = c), Z discrete Laplace of ``scale``, for s, c in 0, …, width − 1
    (rows s, columns c): a noisy sum clamped to the box of the sums' possible values.

    Clamping loses nothing: beyond an edge e of the box, P(s + Z = e ± k) = q^k P(s + Z = e)
    (q = e^(−1/b), k ≥ 0, the same factor for every s in the box), so under both tables
    every output clamped to e has the ratio P/Q of e itself, and Σ (P − e^ε Q)_+ over the
    clamped release equals the sum over every output (the noises of the cells being
    independent, the same holds axis by axis). An edge's column is K(e − s)/(1 − q), K the
    pmf; each row sums to 1.
    """
    if width == 1:
        return np.ones((1, 1))
    q = math.exp(-1.0 / scale)
    index = np.arange(width)
    channel = (1.0 - q) / (1.0 + q) * q ** np.abs(index[:, None] - index[None, :])
    channel[:, [0, -1]] /= 1.0 - q
    return channel


def through_channels(joint: FloatArray, channels: Sequence[FloatArray]) -> FloatArray:
    """The release's law: trailing axis i of ``joint`` (a cell's value) mapped through
    ``channels[i]`` (rows the value, columns the released output)."""
    released = joint
    for axis, channel in enumerate(channels, start=joint.ndim - len(channels)):
        released = np.moveaxis(np.tensordot(released, channel, axes=([axis], [0])), -1, axis)
    return released


def with_laplace(joint: FloatArray, scales: Sequence[float]) -> FloatArray:
    """The clamped noisy release's law: trailing axis i with discrete Laplace of
    ``scales[i]`` (`clamped_laplace_channel` of the axis's size)."""
    first = joint.ndim - len(scales)
    channels = [
        clamped_laplace_channel(scale, joint.shape[axis])
        for axis, scale in enumerate(scales, start=first)
    ]
    return through_channels(joint, channels)


def discrete_laplace_kernel(scale: float, tail: float) -> tuple[FloatArray, float]:
    """The discrete Laplace pmf of ``scale`` on |z| ≤ t, the smallest t leaving out at most
    ``tail``, and the mass it leaves out (the cross-check of `clamped_laplace_channel`)."""
    q = math.exp(-1.0 / scale)
    reach = 0
    while 2.0 * q ** (reach + 1) / (1.0 + q) > tail:
        reach += 1
    z = np.arange(-reach, reach + 1)
    kernel = (1.0 - q) / (1.0 + q) * q ** np.abs(z)
    return kernel, 2.0 * q ** (reach + 1) / (1.0 + q)


def with_noise(joint: FloatArray, kernel: FloatArray) -> FloatArray:
    """Each cell axis convolved with a cut ``kernel`` (direct sums) on a window padded by its
    reach: the unclamped release, less the kernel's left-out mass."""
    reach = kernel.size // 2
    pad = [(0, 0)] + [(reach, reach)] * (joint.ndim - 1)
    noisy = np.pad(joint, pad)
    for axis in range(1, noisy.ndim):
        noisy = convolve1d(noisy, kernel, axis=axis, mode="constant", cval=0.0)
    return noisy


def hockey_stick(first: FloatArray, second: FloatArray, epsilon: float) -> float:
    """Σ (P − e^ε Q)_+ over every output."""
    return float(np.maximum(first - math.exp(epsilon) * second, 0.0).sum())


# --- Enumeration of neighbouring pairs -----------------------------------------------------


@dataclass
class Worst:
    """The largest exact δ found at one ε, with its pair."""

    epsilon: float
    delta: float = 0.0
    pair: tuple[object, ...] = ()


def every_ordered_pair(
    worst: Sequence[Worst], others: object, rows: Sequence[object], laws: Sequence[FloatArray]
) -> int:
    """Σ (P − e^ε Q)_+ of every ordered pair of different rows' ``laws`` (row 0 ``rows[i]``
    in D, ``rows[j]`` in D′) at each ε of ``worst``, all pairs in one array; a larger δ
    replaces an entry's (the first pair in `itertools.permutations` order on ties). Returns
    the number of pairs."""
    stacked = np.stack([law.ravel() for law in laws])
    count = len(laws)
    same_row = np.eye(count, dtype=bool)
    for entry in worst:
        factor = math.exp(entry.epsilon)
        values = np.maximum(stacked[:, None, :] - factor * stacked[None, :, :], 0.0).sum(axis=2)
        values[same_row] = -np.inf
        i, j = np.unravel_index(int(np.argmax(values)), values.shape)
        if values[i, j] > entry.delta:
            entry.delta, entry.pair = float(values[i, j]), (others, rows[i], rows[j])
    return count * (count - 1)


def worst_pairs(
    instance: Instance, epsilons: Sequence[float], scale: float
) -> tuple[list[Worst], int]:
    """The exact worst δ at each ε over every neighbouring pair, and the number of pairs.

    Discrete Laplace of ``scale`` on every cell, the release clamped to the box of sums
    (`with_laplace`: exact, nothing left out).
    """
    law = JointLaw(instance)
    worst = [Worst(e) for e in epsilons]
    pairs = 0
    rows = instance.rows
    scales = [scale] * law.cells
    for others in itertools.combinations_with_replacement(rows, instance.batch - 1):
        base = law.others(others)
        laws = [with_laplace(law.table(base, row), scales) for row in rows]
        pairs += every_ordered_pair(worst, others, rows, laws)
    return worst, pairs


# --- Continuous Laplace on two cells --------------------------------------------------------


def trimmed(*laws: FloatArray) -> tuple[FloatArray, ...]:
    """The laws cut to the box of sums where any has mass (hockey-stick sums are unchanged:
    the sums of both tables are translated alike)."""
    nonzero = np.argwhere(sum(np.abs(law) for law in laws) != 0.0)
    low, high = nonzero[:, 1:].min(axis=0), nonzero[:, 1:].max(axis=0)
    box = (slice(None), *(slice(lo, hi + 1) for lo, hi in zip(low, high, strict=True)))
    return tuple(law[box] for law in laws)


def _gauss_legendre(panels: int, order: int) -> tuple[FloatArray, FloatArray]:
    """Nodes and weights of the composite Gauss–Legendre rule on [0, 1]."""
    x, w = np.polynomial.legendre.leggauss(order)
    starts = np.arange(panels) / panels
    nodes = (starts[:, None] + (x[None, :] + 1.0) / (2.0 * panels)).ravel()
    weights = np.tile(w / (2.0 * panels), panels)
    return nodes, weights


def _positive_line_integral(weights: FloatArray, scale: float) -> FloatArray:
    """∫ (Σ_s α_s f(y − s))_+ dy over the real line, exactly, for rows of ``weights``.

    ``weights[r, s]`` is α at s = 0, …, S − 1; f is the Laplace density of ``scale``. On
    [j, j + 1], the sum is A e^{−v/b} + B e^{v/b} with v = y − j: one sign change at most.
    """
    b = scale
    rows, span = weights.shape
    positions = np.arange(span)
    # Tails: left of 0 the sum is e^{y/b} Σ α e^{−s/b}/(2b); right of S − 1, mirrored.
    left = (weights * np.exp(-positions / b)).sum(axis=1) / (2.0 * b)
    right = (weights * np.exp(-(span - 1 - positions) / b)).sum(axis=1) / (2.0 * b)
    total = np.maximum(left, 0.0) * b + np.maximum(right, 0.0) * b
    for j in range(span - 1):
        below = positions <= j
        a = (weights * np.where(below, np.exp(-(j - positions) / b), 0.0)).sum(axis=1)
        c = (weights * np.where(~below, np.exp(-(positions - j) / b), 0.0)).sum(axis=1)
        a, c = a / (2.0 * b), c / (2.0 * b)

        # ∫_u^w of A e^{−v/b} + C e^{v/b} dv
        def piece(u: FloatArray, w: FloatArray, a: FloatArray = a, c: FloatArray = c) -> FloatArray:
            return a * b * (np.exp(-u / b) - np.exp(-w / b)) + c * b * (
                np.exp(w / b) - np.exp(u / b)
            )

        zero, one = np.zeros(rows), np.ones(rows)
        with np.errstate(divide="ignore", invalid="ignore"):
            root = np.clip(0.5 * b * np.log(-a / c), 0.0, 1.0)
        both = (a >= 0.0) & (c >= 0.0)
        rising = (a < 0.0) & (c > 0.0)  # positive right of the root
        falling = (a > 0.0) & (c < 0.0)  # positive left of it
        value = np.where(both, piece(zero, one), 0.0)
        value = np.where(rising, piece(np.where(rising, root, 0.0), one), value)
        value = np.where(falling, piece(zero, np.where(falling, root, 0.0)), value)
        total = total + np.maximum(value, 0.0)
    return total


def continuous_laplace_delta(
    difference: FloatArray, scale: float, *, panels: int = 64, order: int = 12
) -> float:
    """Σ_views ∫∫ (Σ_s D(s) f(y1 − s1) f(y2 − s2))_+ dy, D on a 2-D integer grid (Laplace f).

    ``difference[view, s1, s2]`` is P − e^ε Q of (view, delivered sums), the sums' indices
    shifted alike in both tables. Exact in y1 (`_positive_line_integral`); in y2 composite
    Gauss–Legendre (``panels`` × ``order`` nodes) on each unit interval of the means' range,
    and exact beyond it (there every kernel in y2 has the same slope, so the inner integral is
    its value at the edge times e^{−distance/b}).
    """
    b = scale
    (difference,) = trimmed(difference)
    views, span1, span2 = difference.shape
    positions2 = np.arange(span2)
    edges = np.array([0.0, span2 - 1.0])
    points = edges
    weights = np.array([b, b])
    if span2 > 1:
        nodes, rule = _gauss_legendre(panels, order)
        inside = (np.arange(span2 - 1)[:, None] + nodes[None, :]).ravel()
        points = np.concatenate([edges, inside])
        weights = np.concatenate([weights, np.tile(rule, span2 - 1)])
    kernels = np.exp(-np.abs(points[:, None] - positions2[None, :]) / b) / (2.0 * b)
    alphas = np.einsum("pk,vjk->vpj", kernels, difference).reshape(-1, span1)
    inner = _positive_line_integral(alphas, b).reshape(views, -1)
    return float((inner * weights[None, :]).sum())


# --- Identical others, T = 2, d = 0, in closed form --------------------------------------


def identical_others_laws(
    instance: Instance,
    other: tuple[int, int],
    first: tuple[int, int],
    second: tuple[int, int],
    *,
    floor: float = 1e-40,
) -> tuple[FloatArray, FloatArray, float]:
    """Laws of (count at node 1, delivered sums) when the n − 1 others all hold ``other``.

    T = 2 and d = 0: the count at node 1 is the view. X ~ Bin(n − 1, σ/2) of the others
    stray from their home h_o (undelivered); row 0 stays home with p = 1 − σ/2 (delivered)
    or strays with q = σ/2. At count g the pair (row 0's node m, X) is determined by m:
    X = g − [m = 1] when h_o = 0, X = n − 1 − g + [m = 1] when h_o = 1. The others' sum
    v (n − 1 − X) is kept relative to its value at m = 0 (the same reference in both
    tables), so each view's sums lie in a small box: shape (views, box, ...). Views whose
    weights are all below ``floor`` in both tables are left out; the first table's mass left
    out (returned) only lowers the hockey-stick sums.
    """
    from scipy.stats import binom

    if instance.nodes != 2 or instance.dummies != 0 or instance.mechanism != "scrambler":
        raise ValueError("closed form for one scrambler, T = 2, d = 0")
    n, sigma = instance.batch, instance.sigma
    p, q = 1.0 - sigma / 2.0, sigma / 2.0
    reach = 2 * max(*(abs(c) for c in instance.contributions), 1)
    box = 2 * reach + 1
    cells = len(instance.cells)
    g = np.arange(n + 1)
    other_key, value = other
    other_home = instance.home(other_key)
    other_cell = instance.cell(other_key)

    def strays(m: int) -> npt.NDArray[np.int64]:
        return g - m if other_home == 0 else n - 1 - g + m

    laws = []
    for key, contribution in (first, second):
        law = np.zeros((g.size,) + (box,) * cells)
        home, cell = instance.home(key), instance.cell(key)
        for m in (0, 1):
            weight = (p if m == home else q) * binom.pmf(strays(m), n - 1, q)
            index = [reach] * cells
            if other_cell is not None:
                index[other_cell] += value * (strays(0) - strays(m))[0]
            if m == home and cell is not None:
                index[cell] += contribution
            law[(slice(None), *index)] += weight
        laws.append(law)
    largest = np.maximum(
        laws[0].reshape(g.size, -1).max(axis=1), laws[1].reshape(g.size, -1).max(axis=1)
    )
    keep = largest > floor
    left_out = max(0.0, 1.0 - float(laws[0][keep].sum()))
    return laws[0][keep], laws[1][keep], left_out


# --- A centred SUM and the COUNT of the same values, released together --------------------


@dataclass(frozen=True)
class PairInstance(Instance):
    """A centred SUM and the COUNT of the same values, both released per key (an AVG, or a
    SUM beside its COUNT): a row adds (x − c, 1) to its key's two cells, a NULL or a row
    failing the WHERE (0, 0). The traffic is that of `Instance` (it never reads the value).
    """

    centred: bool = True

    @property
    def rows(self) -> tuple[tuple[int, int | None], ...]:  # type: ignore[override]
        """Every row (key index, centred value), None for a NULL (or a filtered row)."""
        values = (None, *self.contributions)
        return tuple((k, v) for k in range(len(self.keys)) for v in values)

    def label(self) -> str:
        return super().label() + " + COUNT"


def library_pair_noises(
    lo: int,
    hi: int,
    mechanism: Laplace | Gaussian,
    views: Sequence[JointView],
    *,
    keys: Sequence[str] = ("a", "b"),
    group_by: str = "k",
) -> tuple[AggregateNoise, AggregateNoise]:
    """(centred SUM's noise, COUNT's noise) as the library binds and calibrates
    ``SELECT [k,] AVG(v), SUM(v), COUNT(v) FROM t GROUP BY <group_by>`` with bounds (lo, hi)
    and ``views`` (one per grouping set): `dpcomm.queries.sql.bind_sql`,
    `dpcomm.release.noise._released_aggregates`, `calibrate_noise`. Exactly one SUM and
    one COUNT: the COUNT that AVG divides by is COUNT(v).
    """
    import pandas as pd

    from dpcomm.data.inputs import table_of
    from dpcomm.queries.sql import bind_sql
    from dpcomm.release.noise import _released_aggregates

    frame = pd.DataFrame({"k": list(keys), "v": float(lo)})
    head = "k, " if "k" in group_by else ""
    bound = bind_sql(
        f"SELECT {head}AVG(v) AS m, SUM(v) AS s, COUNT(v) AS c FROM t GROUP BY {group_by}",
        table_of(frame, "t"),
        bounds={"v": (float(lo), float(hi))},
    )
    centre = (lo + hi) / 2.0
    if [c for _, c in bound.centres] != ([centre] if centre else []):
        raise AssertionError(f"expected v centred on {centre}, got {bound.centres}")
    noises = calibrate_noise(mechanism, _released_aggregates(bound, views))
    functions = [n.function for n in noises]
    if sorted(functions) != ["count", "sum"]:
        raise AssertionError(f"expected one centred SUM and one COUNT, got {functions}")
    by_function = {n.function: n for n in noises}
    return by_function["sum"], by_function["count"]


def pair_claims(
    instance: PairInstance, deltas: Sequence[float], view: JointView | None = None
) -> tuple[list[float], tuple[float, float]]:
    """The reported ε at each of ``deltas`` (PLD composition of the traffic's pair with both
    aggregates' shares, or ε1 + ε2) and the two Laplace scales (b_sum, b_count), the noises
    bound once as the library binds them once per query."""
    chosen = instance.view if view is None else view
    keys = [k for k, _, _ in instance.keys]
    noises = library_pair_noises(
        instance.lo, instance.hi, Laplace(epsilon=instance.epsilon2), [chosen], keys=keys
    )
    mechanism = instance.traffic()
    epsilons = []
    for delta in deltas:
        composed = _paths_with((((mechanism, 1),),), release_pld(noises), delta)
        summed = dpcomm.account(mechanism, delta=delta).guarantee.epsilon + instance.epsilon2
        epsilons.append(summed if composed is None else min(summed, composed))
    return epsilons, (noises[0].scale, noises[1].scale)


class PairLaw(JointLaw):
    """`JointLaw` with two axes per released key: the centred sum and the count."""

    def __init__(self, instance: PairInstance) -> None:
        super().__init__(instance)
        self.released = len(instance.cells)
        self.cells = 2 * self.released  # trailing axes: (sum, count) per released key
        self.count_width = instance.batch + 1

    def _start(self) -> FloatArray:
        instance = self.instance
        trailing = (self.width, self.count_width) * self.released
        if instance.mechanism == "scrambler":
            shape = (instance.batch + 1,) * instance.nodes + trailing
        else:
            shape = trailing
        state = np.zeros(shape)
        state[(0,) * (len(shape) - self.cells) + (self.offset, 0) * self.released] = 1.0
        return state

    def add(self, state: FloatArray, row: tuple[int, int | None]) -> FloatArray:
        instance = self.instance
        key, value = row
        cell = instance.cell(key)
        first = None if cell is None or value is None else state.ndim - self.cells + 2 * cell

        def delivered_at(array: FloatArray) -> FloatArray:
            if first is None or value is None:
                return array
            return _shift(_shift(array, first, value), first + 1, 1)

        if instance.mechanism == "scrambler":
            new = np.zeros_like(state)
            for node, delivered, p in self._source_outcomes(key):
                moved = _shift(state, node, 1)
                new += p * (delivered_at(moved) if delivered else moved)
            return new
        by_set: dict[int, FloatArray] = {}
        for index, delivered, p in self._source_outcomes(key):
            moved = delivered_at(state) if delivered else state
            by_set[index] = by_set.get(index, 0.0) + p * moved
        parts = [by_set.get(index, np.zeros_like(state)) for index in range(len(self._sets))]
        return np.stack(parts, axis=0)


def pair_worst(
    instance: PairInstance, epsilons: Sequence[float], scales: tuple[float, float]
) -> tuple[list[Worst], int]:
    """`worst_pairs` for a `PairInstance`: every neighbouring pair, discrete Laplace of
    ``scales`` (sum, count) on each key's two cells, clamped (exact: `with_laplace`)."""
    law = PairLaw(instance)
    rows = instance.rows
    worst = [Worst(e) for e in epsilons]
    pairs = 0
    for others in itertools.combinations_with_replacement(rows, instance.batch - 1):
        base = law.others(others)  # type: ignore[arg-type]
        laws = [with_laplace(law.table(base, row), scales * law.released) for row in rows]  # type: ignore[arg-type]
        pairs += every_ordered_pair(worst, others, rows, laws)
    return worst, pairs


def shifted_laplace_delta(shifts: Sequence[tuple[int, float]], epsilon: float) -> float:
    """Exact δ(ε) between independent discrete Laplace noises at 0 and at integer shifts.

    ``shifts`` holds (k, b) per cell: Q's mean is k, both of scale b. The privacy loss
    ln P(y)/Q(y) = (|y − k| − |y|)/b of one cell takes |k|/b with probability 1/(1 + q)
    (y ≤ 0 for k > 0), (|k| − 2y)/b at 0 < y < |k| with the pmf, −|k|/b with
    q^|k|/(1 + q) (q = e^(−1/b)); the cells' losses add (independent noise), and
    δ(ε) = Σ_{L > ε} (P(L) − e^ε Q(L)), Q(L) = P(L) e^(−L). No truncation: exact.
    """
    losses: dict[float, float] = {0.0: 1.0}
    for k, b in shifts:
        k = abs(int(k))
        if k == 0:
            continue
        q = math.exp(-1.0 / b)
        one: dict[float, float] = {k / b: 1.0 / (1.0 + q), -k / b: q**k / (1.0 + q)}
        for y in range(1, k):
            one[(k - 2 * y) / b] = one.get((k - 2 * y) / b, 0.0) + (1 - q) / (1 + q) * q**y
        combined: dict[float, float] = {}
        for first, p in losses.items():
            for second, r in one.items():
                key = round(first + second, 12)
                combined[key] = combined.get(key, 0.0) + p * r
        losses = combined
    return sum(p * (1.0 - math.exp(epsilon - loss)) for loss, p in losses.items() if loss > epsilon)


def shifted_gaussian_delta(shifts: Sequence[tuple[float, float]], epsilon: float) -> float:
    """Exact δ(ε) between independent Gaussian noises at 0 and at ``shifts`` ((k, s) per
    cell: mean k, standard deviation s): one Gaussian of μ = √Σ (k/s)², δ(ε) =
    Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)."""
    from scipy.stats import norm

    mu = math.sqrt(sum((k / s) ** 2 for k, s in shifts))
    if mu == 0.0:
        return 0.0
    return float(
        norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu)
    )


# --- A quantile released per cell ---------------------------------------------------------


def quantile_kernel(instance: Instance, scale: float) -> FloatArray:
    """P(candidate | encoded delivered values) of one cell: rows the encoded sums 0, …, S.

    An encoded sum's base-(n + 1) digits are the counts of lo, …, hi (each at most n); the
    candidates are lo, …, hi, so value lo + i is candidate i's bin 2i and the open bins are
    empty. The row is `dpcomm.release.quantile.quantile_law` of those counts.
    """
    base, values = instance.batch + 1, instance.hi - instance.lo + 1
    width = instance.batch * base ** (values - 1) + 1
    kernel = np.zeros((width, values))
    for encoded in range(width):
        digits = [(encoded // base**i) % base for i in range(values)]
        counts = [0] * (2 * values - 1)
        counts[::2] = digits
        kernel[encoded] = quantile_law(counts, instance.alpha, scale)
    return kernel


def with_quantile(joint: FloatArray, kernel: FloatArray) -> FloatArray:
    """The released quantiles' law: each cell axis mapped through ``kernel``."""
    return through_channels(joint, [kernel] * (joint.ndim - 1))


def quantile_worst_pairs(
    instance: Instance, epsilons: Sequence[float], scale: float
) -> tuple[list[Worst], int]:
    """The worst exact δ at each ε over every neighbouring pair, and the number of pairs.

    Exact: the release's law is a finite sum (no kernel window, nothing dropped).
    """
    kernel = quantile_kernel(instance, scale)
    law = JointLaw(instance)
    worst = [Worst(e) for e in epsilons]
    pairs = 0
    rows = instance.rows
    for others in itertools.combinations_with_replacement(rows, instance.batch - 1):
        base = law.others(others)
        laws = [with_quantile(law.table(base, row), kernel) for row in rows]
        pairs += every_ordered_pair(worst, others, rows, laws)
    return worst, pairs


def quantile_pair_delta(
    instance: Instance,
    others: tuple[tuple[int, int], ...],
    rows: tuple[tuple[int, int], tuple[int, int]],
    epsilon: float,
    scale: float,
) -> float:
    """The exact δ at ``epsilon`` of one neighbouring pair: the other sources ``others``, row
    0 ``rows[0]`` in D and ``rows[1]`` in D′ (as `quantile_worst_pairs` names a pair)."""
    kernel = quantile_kernel(instance, scale)
    law = JointLaw(instance)
    base = law.others(others)
    first, second = (with_quantile(law.table(base, row), kernel) for row in rows)
    return hockey_stick(first, second, epsilon)
