"""On the paper's figure settings (T = 20), every valid bound is >= the certified lower bound.

The lower bound is the exact δ(ε) of an explicit neighbouring pair of the mechanism as
implemented (:class:`ScramblerLowerBound`); a method below it would be optimistic.
"""

import itertools
import math

import pytest

from dpcomm.accounting import ScramblerMechanism
from dpcomm.accounting.concentration import (
    bennett_delta,
    bennett_printed_delta,
    hoeffding_delta,
)
from dpcomm.accounting.exact import ExactLemma2
from dpcomm.accounting.lower_bound import ScramblerLowerBound
from dpcomm.accounting.pure import local_delta

BATCHES = [10, 50, 100, 300, 600]
DUMMIES = [0, 10, 50, 200, 500, 1000]
SIGMAS = [0.0, 0.05, 0.2, 0.5, 0.9, 1.0]
EPSILONS = [0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(("n", "sigma"), list(itertools.product(BATCHES, SIGMAS)))
def test_valid_methods_dominate_lower_bound(n, sigma):
    for d in DUMMIES:
        mechanism = ScramblerMechanism(
            num_targets=20, sampling_rate=sigma, batch_size=n, num_dummies=d
        )
        lower = ScramblerLowerBound(mechanism)
        exact = ExactLemma2(mechanism)
        for eps in EPSILONS:
            floor = lower.delta(eps)
            exact_value = exact.delta(eps)
            assert exact_value >= floor, (n, d, sigma, eps)
            # exact charges its truncated tails (<= ~1e-29) as a safe over-estimate
            assert bennett_delta(mechanism, eps) >= exact_value * (1 - 1e-9) - 1e-25
            assert hoeffding_delta(mechanism, eps) >= exact_value * (1 - 1e-9) - 1e-25
            assert local_delta(mechanism.local_randomizer, eps) >= floor


def test_exact_is_tight_against_lower_bound_at_paper_example():
    """T = 20, n = 100, σ = 0.2, d = 275: exact ε(1e-4) within 0.01 of the lower bound."""
    from dpcomm.accounting import account

    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=275
    )
    report = account(mechanism, delta=1e-4, monte_carlo_samples=0)
    assert report.guarantee.method == "exact"
    assert report.lower_bound is not None
    assert report.lower_bound <= report.value <= report.lower_bound + 0.01
    assert report.value <= 1.0


def test_printed_bennett_is_refuted():
    """Counter-example in docs/accounting.md: T = 20, n = 100, σ = 0.2, d = 275, ε = 0.8."""
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=275
    )
    eps = 0.8
    printed = bennett_printed_delta(mechanism, eps)
    floor = ScramblerLowerBound(mechanism).delta(eps)
    assert printed < floor
    assert math.isfinite(printed)
