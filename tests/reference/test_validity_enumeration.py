"""Every valid upper bound is >= the exact δ(ε) from exhaustive enumeration (tiny instances).

Reference values come from :mod:`dpcomm.accounting.brute_force`, which enumerates every
neighbouring pair of inputs and every output of the mechanism as implemented.
"""

import itertools
import math

import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account, brute_force as bf
from dpcomm.accounting.concentration import bennett_delta, hoeffding_delta
from dpcomm.accounting.exact import ExactLemma2
from dpcomm.accounting.lower_bound import (
    CappedLowerBound,
    OwnTargetLowerBound,
    ScramblerLowerBound,
)
from dpcomm.accounting.pure import (
    capped_theorem_epsilon,
    local_delta,
    local_pure_epsilon,
    pure_to_delta,
)

EPSILONS = [0.0, 0.05, 0.2, 0.5, 1.0, 1.5, 2.5, 4.0]
SIGMAS = [0.0, 0.1, 0.5, 0.9, 1.0]
TOLERANCE = 1e-12


def _instances(limit_nd):
    for size, n, d in itertools.product(range(2, 6), range(1, 6), range(5)):
        if (size, n, d) in limit_nd:
            yield size, n, d


# A cover of T <= 5, n <= 5, d <= 4 whose enumeration takes seconds, not minutes; the full
# cube runs under the slow marker below.
FAST = [
    (2, 1, 0), (2, 3, 2), (2, 5, 4), (3, 2, 1), (3, 3, 3), (3, 4, 2), (4, 2, 4),
    (4, 3, 1), (4, 4, 0), (5, 2, 2), (5, 3, 1), (5, 1, 4),
]  # fmt: skip


def _check_scrambler(size, n, d, sigma):
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    truth = bf.exact_delta_curve(mechanism, EPSILONS)
    exact = ExactLemma2(mechanism)
    lower = ScramblerLowerBound(mechanism)
    own = OwnTargetLowerBound(mechanism) if size >= 3 else None
    local = mechanism.local_randomizer
    for eps, true_delta in zip(EPSILONS, truth, strict=True):
        for name, bound in [
            ("exact", exact.delta(eps)),
            ("bennett", bennett_delta(mechanism, eps)),
            ("hoeffding", hoeffding_delta(mechanism, eps)),
            ("post-processing", local_delta(local, eps)),
        ]:
            assert bound >= true_delta - TOLERANCE, (name, size, n, d, sigma, eps)
        assert lower.delta(eps) <= true_delta + TOLERANCE, (size, n, d, sigma, eps)
        if own is not None:
            assert own.delta(eps) <= true_delta + TOLERANCE, ("own", size, n, d, sigma, eps)
    pure_truth = bf.exact_pure_epsilon(mechanism)
    assert pure_truth <= local_pure_epsilon(local) + 1e-9


def _check_capped(size, n, d, sigma):
    if d > (size - 1) * n:
        return
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d, capped=True
    )
    truth = bf.exact_delta_curve(mechanism, EPSILONS)
    lower = CappedLowerBound(mechanism)
    local = mechanism.local_randomizer
    for eps, true_delta in zip(EPSILONS, truth, strict=True):
        assert local_delta(local, eps) >= true_delta - TOLERANCE
        assert lower.delta(eps) <= true_delta + TOLERANCE
    pure_truth = bf.exact_pure_epsilon(mechanism)
    assert pure_truth <= local_pure_epsilon(local) + 1e-9
    assert lower.pure_epsilon() <= pure_truth + 1e-9


def _check_local(size, d, sigma):
    if d > size - 1:
        return
    randomizer = LocalRandomizer(num_targets=size, sampling_rate=sigma, num_dummies=d)
    truth = bf.exact_delta_curve(randomizer, EPSILONS)
    pure = local_pure_epsilon(randomizer)
    assert bf.exact_pure_epsilon(randomizer) == pytest.approx(pure, abs=1e-9) or (
        math.isinf(pure) and math.isinf(bf.exact_pure_epsilon(randomizer))
    )
    for eps, true_delta in zip(EPSILONS, truth, strict=True):
        assert local_delta(randomizer, eps) == pytest.approx(true_delta, abs=1e-12)
        assert pure_to_delta(pure, eps) >= true_delta - TOLERANCE


@pytest.mark.parametrize(("size", "n", "d"), FAST)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_uncapped_bounds_hold(size, n, d, sigma):
    _check_scrambler(size, n, d, sigma)


@pytest.mark.parametrize(("size", "n", "d"), FAST)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_capped_bounds_hold(size, n, d, sigma):
    _check_capped(size, n, d, sigma)


@pytest.mark.parametrize("size", range(2, 6))
@pytest.mark.parametrize("d", range(5))
@pytest.mark.parametrize("sigma", SIGMAS)
def test_local_randomizer_is_exact(size, d, sigma):
    _check_local(size, d, sigma)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.0, 0.8])
def test_full_tiny_cube(sigma):
    """All of T <= 5, n <= 5, d <= 4, both scrambler variants (σ = 0: the deterministic
    route; 0.8: a heavy lie rate; the cover above takes every σ of SIGMAS)."""
    for size, n, d in itertools.product(range(2, 6), range(1, 6), range(5)):
        _check_scrambler(size, n, d, sigma)
        _check_capped(size, n, d, sigma)


def test_theorem_exact_is_refuted():
    """Counter-example in docs/accounting.md: T = 3, n = 3, d = 1, σ = 0.5."""
    mechanism = ScramblerMechanism(
        num_targets=3, sampling_rate=0.5, batch_size=3, num_dummies=1, capped=True
    )
    printed = capped_theorem_epsilon(
        num_targets=3,
        lie_rate=mechanism.local_randomizer.lie_rate,
        batch_size=3,
        num_dummies=1,
    )
    truth = bf.exact_pure_epsilon(mechanism)
    assert printed == pytest.approx(1.2397, abs=1e-4)
    assert truth == pytest.approx(1.3122, abs=1e-4)
    assert printed < truth


def test_accountant_uses_enumeration_on_tiny_instances():
    mechanism = ScramblerMechanism(
        num_targets=3, sampling_rate=0.5, batch_size=3, num_dummies=1, capped=True
    )
    report = account(mechanism)
    assert report.guarantee.method == "enumeration"
    assert report.value == pytest.approx(bf.exact_pure_epsilon(mechanism), abs=1e-6)
    assert report.lower_bound is not None and report.lower_bound <= report.value + 1e-9
