"""The joint guarantee of a Gaussian release under scramblers with sampling, against its exact δ.

`test_joint_release_exact` checks the Gaussian release where every tuple is delivered; here
the traffic's sampling decides which tuples are, as for its Laplace cases. One scrambler of n
sources (T = 2, d dummies, sampling σ), ``GROUP BY k`` over public keys a and c (on different
nodes), COUNT(*) and SUM(x) or AVG(x) released with `dpcomm.Gaussian`. For every replace-one
pair of tables, the joint law of (messages per node, released values) is computed exactly:

* the traffic and the delivered counts and sums by dynamic programming over the sources (R_σ
  sends a tuple home with probability 1 − σ + σ/2, where it is delivered; the d dummies go
  anywhere), its traffic marginal checked against `dpcomm.accounting.brute_force`;
* the noise with the standard deviation the library reports: discrete Gaussian for counts
  (the integer pmf), continuous for sums.

The hockey-stick δ(ε) = Σ_view ∫ (p − e^ε q)_+ at the claimed ε is bounded from above on a grid
of cells over ± `WINDOW` standard deviations: Σ_cells P(cell)·(1 − e^(ε − L(centre) − λ))_+ plus
the mass outside, with λ = Σ_j range_j · half-width_j / s_j² a bound on how much the log-ratio
L of two Gaussian mixtures moves within a cell (its gradient along j is a difference of two
conditional means over s_j², at most range_j / s_j²; the same bound holds for a unit step of
the discrete Gaussian, whose pmf is the continuous expression on the integers). Binning is
post-processing, so Σ_cells (P(cell) − e^ε Q(cell))_+ is a lower bound: with the noise a third of
the library's, it exceeds the claim (`test_a_noise_three_times_too_small_fails`).

From an independent audit's checker (2026-12-02), which found no pair above the claim at
n ≤ 4 and the default δ; here at larger plan δ, where the claims are tighter.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy.special import ndtr

import dpcomm
from dpcomm.accounting import ScramblerMechanism, brute_force
from dpcomm.data import table_from_arrays

KEYS = ("a", "c")  # on nodes 1 and 0 of T = 2 (`dpcomm.queries.groupby.node_of_key`)
NODE = {"a": 1, "c": 0}
#: Standard deviations each side of the means' range the grid covers.
WINDOW = 5.5


@dataclass(frozen=True)
class Config:
    query: str  # "count_sum" or "avg"
    n: int
    d: int
    sigma: float
    lo: int
    hi: int
    eps2: float
    delta2: float
    plan_delta: float = 1e-4
    cells: int = 12  # per released value: finer, the upper bound comes nearer the exact δ


def _claim(cfg: Config, noise_scale: float = 1.0) -> dict[str, Any]:
    """The library's (ε_total, δ_total) and each released aggregate's noise."""
    values = list(range(cfg.lo, cfg.hi + 1))
    table = table_from_arrays(
        "t",
        {
            "k": np.array([KEYS[i % 2] for i in range(cfg.n)], dtype=object),
            "x": np.array([float(values[i % len(values)]) for i in range(cfg.n)]),
        },
    )
    measure = "COUNT(*) AS c, SUM(x) AS s" if cfg.query == "count_sum" else "AVG(x) AS m"
    run = dpcomm.run_sql(
        f"SELECT k, {measure} FROM t GROUP BY k",
        table,
        countermeasure=dpcomm.Scramblers(
            sampling_rate=cfg.sigma, batch_size=cfg.n, num_dummies=cfg.d
        ),
        num_targets=2,
        release=dpcomm.Gaussian(cfg.eps2, cfg.delta2),
        bounds={"x": (float(cfg.lo), float(cfg.hi))},
        keys={"k": list(KEYS)},
        delta=cfg.plan_delta,
        seed=0,
    )
    release = run.report.release
    assert release is not None
    noises = {
        a.aggregate: (a.standard_deviation * noise_scale, a.noise) for a in release.aggregates
    }
    [count] = [v for k, v in noises.items() if k.startswith("COUNT")]
    [total] = [v for k, v in noises.items() if k.startswith("SUM")]
    assert "discrete" in count[1] and "discrete" not in total[1]
    return {"epsilon": release.epsilon_total, "delta": release.composed_delta,
            "count": count[0], "sum": total[0]}  # fmt: skip


def _add_source(state: dict, row: tuple[str, int], cfg: Config, centre: int) -> dict:
    """One more source: (messages to node 0, count and sum of each key delivered) -> P."""
    key, value = row
    home, index = NODE[key], KEYS.index(key)
    new: dict = {}
    for (to_zero, *cells), p in state.items():
        for node, q in ((home, 1 - cfg.sigma / 2), (1 - home, cfg.sigma / 2)):
            moved = list(cells)
            if node == home:
                moved[2 * index] += 1
                moved[2 * index + 1] += value - centre
            state_key = (to_zero + (node == 0), *moved)
            new[state_key] = new.get(state_key, 0.0) + p * q
    return new


def _add_dummies(state: dict, dummies: int) -> dict:
    for _ in range(dummies):
        new: dict = {}
        for (to_zero, *cells), p in state.items():
            for node in (0, 1):
                state_key = (to_zero + (node == 0), *cells)
                new[state_key] = new.get(state_key, 0.0) + p / 2
        state = new
    return state


def _axis(kind: str, deviation: float, low: int, high: int, cells: int) -> dict[str, Any]:
    """One released value's grid: cell masses and centre densities for every mean."""
    means = np.arange(low, high + 1, dtype=float)
    start, stop = low - WINDOW * deviation, high + WINDOW * deviation
    if kind == "count":
        first, last = math.floor(start), math.ceil(stop)
        width = max(1, math.ceil((last - first + 1) / cells))
        starts = np.arange(first, last + 1, width)
        ends = np.minimum(starts + width - 1, last)
        centres = (starts + ends) / 2.0
        spread = np.arange(-math.ceil(12 * deviation) - 2, math.ceil(12 * deviation) + 3)
        norm = np.exp(-(spread**2) / (2 * deviation**2)).sum()
        integers = np.arange(first, last + 1)
        pmf = np.exp(-((integers[None, :] - means[:, None]) ** 2) / (2 * deviation**2)) / norm
        owner = (integers - first) // width
        mass = np.stack([pmf[:, owner == c].sum(axis=1) for c in range(starts.size)], axis=1)
        half = float(((ends - starts) / 2.0).max())
    else:
        edges = np.linspace(start, stop, cells + 1)
        centres = (edges[:-1] + edges[1:]) / 2
        mass = np.diff(ndtr((edges[None, :] - means[:, None]) / deviation), axis=1)
        half = float((edges[1] - edges[0]) / 2)
    density = np.exp(-((centres[None, :] - means[:, None]) ** 2) / (2 * deviation**2))
    outside = max(float((1.0 - mass.sum(axis=1)).max()), 0.0)
    return {"mass": mass, "density": density, "lambda": (high - low) * half / deviation**2,
            "outside": outside, "low": low, "size": means.size}  # fmt: skip


def _contract(weights: np.ndarray, matrices: list[np.ndarray]) -> np.ndarray:
    out = weights
    for axis, matrix in enumerate(matrices):
        out = np.moveaxis(np.tensordot(out, matrix, axes=([axis], [0])), -1, axis)
    return out


def _laws(state: dict, axes: list[dict], views: int) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Per traffic view: the released values' cell masses and centre densities (None: P = 0)."""
    weights = np.zeros((views, *(axis["size"] for axis in axes)))
    for (to_zero, *means), p in state.items():
        weights[(to_zero, *(m - axis["low"] for m, axis in zip(means, axes, strict=True)))] += p
    laws: list[tuple[np.ndarray, np.ndarray] | None] = []
    for view in range(views):
        if weights[view].sum() == 0.0:
            laws.append(None)
            continue
        laws.append(
            (
                _contract(weights[view], [axis["mass"] for axis in axes]),
                _contract(weights[view], [axis["density"] for axis in axes]),
            )
        )
    return laws


def _bounds(first: list, second: list, epsilon: float, spread: float) -> tuple[float, float]:
    """(lower, upper) bounds on δ(ε) of the first law against the second (module doc)."""
    lower = upper = 0.0
    for p, q in zip(first, second, strict=True):
        if p is None:
            continue
        if q is None:
            lower += float(p[0].sum())
            upper += float(p[0].sum())
            continue
        (p_mass, p_density), (q_mass, q_density) = p, q
        lower += float(np.maximum(p_mass - math.exp(epsilon) * q_mass, 0.0).sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(p_density > 0, q_density / p_density, 0.0)
        upper += float((p_mass * np.maximum(1.0 - math.exp(epsilon - spread) * ratio, 0.0)).sum())
    return lower, upper


def worst_bounds(cfg: Config, noise_scale: float = 1.0) -> tuple[float, float, float]:
    """(the largest lower bound, the largest upper bound, the claimed δ) over every pair."""
    claimed = _claim(cfg, noise_scale)
    centre = (cfg.lo + cfg.hi) // 2 if cfg.query == "avg" else 0
    contributions = [v - centre for v in range(cfg.lo, cfg.hi + 1)]
    low, high = cfg.n * min(0, *contributions), cfg.n * max(0, *contributions)
    axes = [
        _axis(kind, claimed[kind], *((0, cfg.n) if kind == "count" else (low, high)), cfg.cells)
        for _ in KEYS
        for kind in ("count", "sum")
    ]
    spread = sum(axis["lambda"] for axis in axes)
    outside = sum(axis["outside"] for axis in axes)
    rows = [(k, v) for k in KEYS for v in range(cfg.lo, cfg.hi + 1)]
    worst_lower = worst_upper = 0.0
    for others in itertools.combinations_with_replacement(rows, cfg.n - 1):
        base = {(0, 0, 0, 0, 0): 1.0}
        for row in others:
            base = _add_source(base, row, cfg, centre)
        laws = [
            _laws(_add_dummies(_add_source(base, row, cfg, centre), cfg.d), axes, cfg.n + cfg.d + 1)
            for row in rows
        ]
        for i, j in itertools.permutations(range(len(rows)), 2):
            lower, upper = _bounds(laws[i], laws[j], claimed["epsilon"], spread)
            worst_lower = max(worst_lower, lower)
            worst_upper = max(worst_upper, upper + outside)
    return worst_lower, worst_upper, claimed["delta"]


def test_the_traffic_law_is_the_enumerated_one():
    cfg = Config("count_sum", 3, 1, 0.7, -1, 1, 2.0, 1e-6)
    rows = [("a", 1), ("c", -1), ("a", 0)]
    state = {(0, 0, 0, 0, 0): 1.0}
    for row in rows:
        state = _add_source(state, row, cfg, 0)
    state = _add_dummies(state, cfg.d)
    mine: dict[int, float] = {}
    for (to_zero, *_), p in state.items():
        mine[to_zero] = mine.get(to_zero, 0.0) + p
    mechanism = ScramblerMechanism(num_targets=2, sampling_rate=0.7, batch_size=3, num_dummies=1)
    truth = brute_force.output_distribution(mechanism, [NODE[k] for k, _ in rows])
    assert set(mine) == {output[0] for output in truth}
    for output, p in truth.items():
        assert mine[output[0]] == pytest.approx(p, abs=1e-12)


@pytest.mark.parametrize(
    "cfg",
    [
        Config("count_sum", 2, 0, 0.3, -1, 1, 2.0, 1e-3, plan_delta=0.1),
        Config("count_sum", 2, 1, 0.7, -1, 1, 6.0, 1e-3, plan_delta=1e-2),
        # Tight: the exact δ is in [0.080, 0.089] (48 cells) against a claim of 0.1.
        Config("count_sum", 2, 1, 0.3, 0, 2, 0.5, 1e-6, plan_delta=0.1, cells=24),
        Config("avg", 2, 0, 0.3, -1, 1, 2.0, 1e-3, plan_delta=0.1),
        Config("avg", 2, 1, 0.7, 0, 2, 6.0, 1e-6, plan_delta=1e-2),
        Config("count_sum", 3, 1, 0.3, -1, 1, 2.0, 1e-3, plan_delta=0.1),
    ],
    ids=lambda c: f"{c.query}-n{c.n}-d{c.d}-s{c.sigma}-[{c.lo},{c.hi}]-e{c.eps2}-pd{c.plan_delta}",
)
def test_the_claim_holds_on_every_pair(cfg):
    lower, upper, claimed = worst_bounds(cfg)
    assert lower <= upper
    assert upper <= claimed, (lower, upper, claimed)


def test_a_noise_three_times_too_small_fails():
    """The check has the power to see a Gaussian calibrated too small."""
    lower, _, claimed = worst_bounds(
        Config("count_sum", 2, 1, 0.3, -1, 1, 6.0, 1e-3), noise_scale=0.3
    )
    assert lower > 2 * claimed
