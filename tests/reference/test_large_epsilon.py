"""Bounds at large ε and tiny σ, where e^ε is huge and cancellations lose every digit.

Found by a figure sweep: with σ = 0 the exact method used to report ε ≈ 37 ("exact") for
scramblers whose true δ(ε) stays above 0.2 for every ε (a target gets no dummy with
probability (1 − 1/T)^d), and δ(40) = 0. Every valid bound must stay above the enumerated
truth for every ε, and the lower bound below it.
"""

import math

import pytest

from dpcomm.accounting import ScramblerMechanism, account, brute_force as bf
from dpcomm.accounting.exact import ExactLemma2, Lemma2AtEpsilon, SizeTable
from dpcomm.accounting.lower_bound import ScramblerLowerBound

EPSILONS = [5.0, 10.0, 20.0, 30.0, 36.0, 37.0, 40.0, 60.0, 200.0]
CASES = [(4, 3, 4), (3, 2, 3), (2, 3, 5), (4, 2, 0)]


@pytest.mark.parametrize(("size", "n", "d"), CASES)
@pytest.mark.parametrize("sigma", [0.0, 1e-9, 1e-4])
def test_bounds_hold_at_large_epsilon(size, n, d, sigma):
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    truth = bf.exact_delta_curve(mechanism, EPSILONS)
    exact = ExactLemma2(mechanism)
    lower = ScramblerLowerBound(mechanism)
    for eps, true_delta in zip(EPSILONS, truth, strict=True):
        assert exact.delta(eps) >= true_delta - 1e-12, (eps, exact.delta(eps), true_delta)
        assert lower.delta(eps) <= true_delta + 1e-12, (eps, lower.delta(eps), true_delta)
        fast = Lemma2AtEpsilon(
            num_targets=size, sampling_rate=sigma, epsilon=eps, sizes=SizeTable(size)
        )
        assert fast.delta(batch_size=n, num_dummies=d) >= true_delta - 1e-12


def test_sigma_zero_without_enough_dummies_has_no_finite_epsilon():
    # P(no dummy on a given target) = (19/20)^30 ≈ 0.21 > δ: no ε works.
    mechanism = ScramblerMechanism(num_targets=20, sampling_rate=0.0, batch_size=10, num_dummies=30)
    report = account(mechanism, delta=1e-4, monte_carlo_samples=0)
    assert math.isinf(report.guarantee.epsilon)
    assert ExactLemma2(mechanism).delta(200.0) >= (19 / 20) ** 30 * 0.99


def test_sigma_zero_with_enough_dummies_is_finite():
    # (19/20)^400 ≈ 1.2e-9: the blanket of dummies alone gives a finite ε at δ = 1e-4.
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.0, batch_size=100, num_dummies=400
    )
    report = account(mechanism, delta=1e-4, monte_carlo_samples=0)
    assert math.isfinite(report.guarantee.epsilon)
    assert report.lower_bound <= report.guarantee.epsilon
