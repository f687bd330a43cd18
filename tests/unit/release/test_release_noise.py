"""The release's sensitivities and noise, against OpenDP's own privacy maps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcomm.accounting.pld import epsilon_for_delta
from dpcomm.errors import InvalidParameterError
from dpcomm.release.mechanisms import (
    Gaussian,
    Laplace,
    aggregate_sensitivity,
    calibrate_noise,
    epsilon_of_rho,
    release_pld,
    rho_for,
)

dp = pytest.importorskip("dpcomm.release.opendp_core")
dp.enable_features("contrib")


# Per grouping set with keys, the coupled difference of the joint view (docs/accounting.md,
# "Noisy releases: the joint view"): the replaced row's old cell (c0, |c0| <= M) and new cell
# (c0', |c0'| <= M), or both in one cell (|c0 - c0'| <= W); in the scramblers' views one other
# source's c_j on the old or new key's node: in the same cell as the row's (|c0 - c_j| <= W
# next to |c0'| <= M) or, where a node owns several keys, in a third cell (M). The empty set
# is one cell changed by at most W. For [-5, 10]: M = 10, W = max(hi - lo, M) = 15.
SETS = [("a",), ("a", "b"), ()]


@pytest.mark.parametrize(
    ("view", "count_l1", "count_l2_squared", "sum_l1", "sum_l2_squared"),
    [
        # own row: COUNT 1 + 1 per keyed set; SUM max(2M, W) = 20 in L1, max(2M², W²) = 225
        # in L2² (the row keeps its key and moves from lo to hi: one cell by 15 > √2·10).
        ("own-row", 2 + 2 + 1, 2 + 2 + 1, 20 + 20 + 15, 225 + 225 + 225),
        # one other in the same cell: M + W = 25, M² + W² = 325.
        ("one-other", 2 + 2 + 1, 2 + 2 + 1, 25 + 25 + 15, 325 + 325 + 225),
        # one other in a third cell: 3M = 30, max(3M², M² + W²) = 325; COUNT 3 and 3.
        ("one-other-shared-node", 3 + 3 + 1, 3 + 3 + 1, 30 + 30 + 15, 325 + 325 + 225),
    ],
)
def test_sensitivities_of_one_row_replaced(
    view: str, count_l1: float, count_l2_squared: float, sum_l1: float, sum_l2_squared: float
) -> None:
    views = [view, view, "own-row"]
    count = aggregate_sensitivity("count_star", SETS, views=views)  # type: ignore[arg-type]
    assert count.l1 == count_l1
    assert count.l2 == pytest.approx(math.sqrt(count_l2_squared))
    total = aggregate_sensitivity("sum", SETS, bound=10.0, width=15.0, views=views)  # type: ignore[arg-type]
    assert total.l1 == sum_l1
    assert total.l2 == pytest.approx(math.sqrt(sum_l2_squared))


def test_default_view_is_the_largest() -> None:
    assert aggregate_sensitivity("sum", SETS, bound=10.0, width=15.0) == aggregate_sensitivity(
        "sum", SETS, bound=10.0, width=15.0, views=["one-other-shared-node"] * 2 + ["own-row"]
    )


def test_one_signed_bounds_keep_two_m() -> None:
    # [0, M]: W = M, so one other source in the same cell costs M + W = 2M, as the row alone.
    for view in ("own-row", "one-other"):
        sensitivity = aggregate_sensitivity(
            "sum",
            [("a",)],
            bound=4.0,
            width=4.0,
            views=[view],  # type: ignore[list-item]
        )
        assert sensitivity.l1 == 8.0
        assert sensitivity.l2 == pytest.approx(math.sqrt(32.0) if view == "own-row" else 32**0.5)


def test_unknown_view_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="view"):
        aggregate_sensitivity("count_star", [("a",)], views=["shuffled"])  # type: ignore[list-item]


def test_laplace_scale_is_what_opendp_accounts() -> None:
    sensitivity = aggregate_sensitivity("count_star", [("a",), ("b",)])
    (noise,) = calibrate_noise(Laplace(0.5), [("n", "count_star", sensitivity)])
    measurement = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=noise.scale
    )
    assert measurement.map(int(sensitivity.l1)) == pytest.approx(0.5)


def test_gaussian_scale_is_what_opendp_accounts() -> None:
    sensitivity = aggregate_sensitivity("sum", [("a",)], bound=100.0, width=100.0)
    noises = calibrate_noise(
        Gaussian(1.0, 1e-6), [("s", "sum", sensitivity), ("n", "count", sensitivity)]
    )
    for noise in noises:
        measurement = dp.m.make_gaussian(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.l2_distance(T=float),
            scale=noise.scale,
        )
        rho = measurement.map(sensitivity.l2)
        assert rho <= rho_for(0.5, 0.5e-6) * (1 + 1e-9)
        assert epsilon_of_rho(rho, 0.5e-6) <= 0.5 + 1e-9


def test_the_release_pld_is_no_better_than_its_parts() -> None:
    sensitivity = aggregate_sensitivity("count_star", [("a",)])
    noises = calibrate_noise(Laplace(1.0), [("n", "count_star", sensitivity)] * 2)
    pld = release_pld(noises)
    # Two ε/2-DP parts: at most ε = 1 at δ = 0 ... and at least their best single part.
    assert epsilon_for_delta(pld, 1e-9) <= 1.0 + 1e-6
    assert epsilon_for_delta(pld, 1e-9) >= 0.5 - 1e-6


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Laplace(0.0), "epsilon"),
        (lambda: Laplace(math.inf), "epsilon"),
        (lambda: Gaussian(1.0, 0.0), "delta"),
        (lambda: Gaussian(1.0, 1.0), "delta"),
    ],
)
def test_bad_release_parameters(make: object, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("normal_sd", "laplace_scale"), [(1.0, 1.0), (3.0, 0.5), (0.2, 2.0), (1.0, 0.0), (0.0, 2.0)]
)
def test_half_width_of_a_normal_plus_laplace_error(normal_sd: float, laplace_scale: float) -> None:
    """The closed-form convolution's 95% half-width against 400,000 draws of N + L."""
    from dpcomm.release.mechanisms import half_width

    width = half_width(normal_sd=normal_sd, laplace_scale=laplace_scale)
    rng = np.random.default_rng(7)
    draws = rng.normal(0.0, normal_sd, 400_000) + rng.laplace(0.0, laplace_scale, 400_000)
    assert np.mean(np.abs(draws) > width) == pytest.approx(0.05, abs=0.0015)
    # Between the two errors' own half-widths and their sum.
    alone = max(1.959963984540054 * normal_sd, laplace_scale * math.log(20.0))
    assert (
        alone - 1e-9
        <= width
        <= 1.959963984540054 * normal_sd + laplace_scale * math.log(20.0) + 1e-9
    )


def _tail(weights: np.ndarray, half_width: float) -> float:
    """P(|Z| > h) for a pmf ∝ weights over the integers -N..N."""
    support = np.arange(len(weights)) - len(weights) // 2
    return float(weights[np.abs(support) > half_width].sum() / weights.sum())


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.0, 10.0, 55.5])
def test_integer_noise_half_width_is_its_own_quantile(scale: float) -> None:
    """The discrete noise's 95% half-width: at most 5% outside, more than 5% one count in."""
    support = np.arange(-int(60 * scale) - 20, int(60 * scale) + 21)
    sensitivity = aggregate_sensitivity("count_star", [("a",)])
    shapes = {
        "laplace": (Laplace(1.0), np.exp(-np.abs(support) / scale)),
        "gaussian": (Gaussian(1.0, 1e-6), np.exp(-(support**2) / (2 * scale**2))),
    }
    for release, weights in shapes.values():
        (noise,) = calibrate_noise(release, [("n", "count_star", sensitivity)])
        noise = type(noise)(**{**noise.__dict__, "scale": scale})
        assert noise.integer
        half = noise.half_width_95
        assert half == int(half)
        assert _tail(weights, half) <= 0.05 < _tail(weights, half - 1)


def test_integer_noise_interval_covers_opendps_draws() -> None:
    draws = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=1.0
    )([0] * 20_000)
    (noise,) = calibrate_noise(
        Laplace(2.0),
        [("n", "count_star", aggregate_sensitivity("count_star", [("a",)], views=["one-other"]))],
    )
    assert noise.scale == pytest.approx(1.0)
    outside = np.mean(np.abs(np.asarray(draws)) > noise.half_width_95)
    assert outside <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / 20_000)


def test_the_composition_charges_each_share_its_allowances() -> None:
    """`charged_shares`: OpenDP's map tolerance on every share; a floating-point sum's one
    rounding on top, (1 + 2^-52·S) for Laplace and squared for a Gaussian's ρ; never less."""
    from dpcomm.release.compose import ROUNDING_PER_ROW, charged_shares
    from dpcomm.release.mechanisms import MAP_TOLERANCE, AggregateNoise, Sensitivity

    def noise(function: str, delta: float) -> AggregateNoise:
        return AggregateNoise(
            epsilon=0.5,
            delta=delta,
            output=function,
            function=function,
            sensitivity=Sensitivity(2.0, 2.0),
            scale=4.0,
            integer=function != "sum",
        )

    rows = 10**9
    count, laplace, gaussian = charged_shares(
        [noise("count", 0.0), noise("sum", 0.0), noise("sum", 1e-6)], rows
    )
    rounding = 1.0 + ROUNDING_PER_ROW * rows
    assert count.epsilon == pytest.approx(0.5 * (1 + MAP_TOLERANCE), rel=1e-15)
    assert laplace.epsilon == pytest.approx(0.5 * (1 + MAP_TOLERANCE) * rounding, rel=1e-15)
    assert gaussian.epsilon == pytest.approx(0.5 * (1 + MAP_TOLERANCE) * rounding**2, rel=1e-15)
    assert all(c.epsilon > 0.5 for c in (count, laplace, gaussian))
    assert (count.total_delta, gaussian.total_delta) == (0.0, 1e-6)
