"""The windowed exact accountant (issue 12) against the former tables and the enumeration."""

import itertools
import math

import pytest

# A sibling module: pytest puts tests/unit on sys.path (no __init__.py there).
from _exact_tables import ExactLemma2Tables

from dpcomm.accounting import ScramblerMechanism, brute_force as bf
from dpcomm.accounting.exact import ExactLemma2, check_exact_size
from dpcomm.errors import InvalidParameterError

EPSILONS = [0.0, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 10.0, 40.0]
CASES = [
    # (T, σ, n, d)
    (20, 0.2, 100, 275),
    (20, 0.2, 3000, 100),
    (20, 0.05, 2000, 0),
    (20, 0.5, 5000, 100),
    (20, 0.0, 1, 0),
    (20, 0.0, 50, 400),
    (20, 1.0, 40, 5),
    (2, 0.3, 60, 3),
    (2, 0.0, 1, 7),
    (3, 0.9, 800, 0),
    (7, 0.6, 1, 30),
    (50, 0.1, 20000, 1000),
]


@pytest.mark.parametrize(("size", "sigma", "n", "d"), CASES)
def test_windowed_equals_the_former_tables(size, sigma, n, d):
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    windowed, tables = ExactLemma2(mechanism), ExactLemma2Tables(mechanism)
    for epsilon in EPSILONS:
        new, old = windowed.delta(epsilon), tables.delta(epsilon)
        assert new == pytest.approx(old, rel=1e-9, abs=1e-280), (epsilon, new, old)


TINY = list(itertools.product([2, 3, 4], [0.0, 0.3, 1.0], [1, 2, 3], [0, 2]))


@pytest.mark.parametrize(("size", "sigma", "n", "d"), TINY)
def test_windowed_bounds_the_enumeration(size, sigma, n, d):
    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    exact = ExactLemma2(mechanism)
    for epsilon in [0.0, 0.1, 0.5, 1.0, 2.0, 5.0]:
        assert exact.delta(epsilon) >= bf.exact_delta(mechanism, epsilon) - 1e-12


def test_a_million_sources_fit():
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=1_000_000, num_dummies=100
    )
    check_exact_size(mechanism)


def test_too_large_names_the_parameter():
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.5, batch_size=10_000_000, num_dummies=0
    )
    with pytest.raises(InvalidParameterError, match="batch_size") as error:
        check_exact_size(mechanism)
    assert "exact accountant's tables" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("size", "sigma", "n", "d"), [(20, 0.2, 1000, 100), (5, 0.5, 50, 3), (20, 0.0, 100, 40)]
)
def test_bracketed_search_agrees_with_plain_bisection(size, sigma, n, d):
    from dpcomm.accounting.pure import local_pure_epsilon
    from dpcomm.accounting.search import epsilon_for_delta

    mechanism = ScramblerMechanism(
        num_targets=size, sampling_rate=sigma, batch_size=n, num_dummies=d
    )
    exact = ExactLemma2(mechanism)
    limit = local_pure_epsilon(mechanism.local_randomizer)
    for delta in (1e-3, 1e-6):
        plain = epsilon_for_delta(exact.delta, delta, upper=limit)
        bracketed = exact.epsilon_for_delta(delta)
        if math.isinf(plain):
            assert math.isinf(bracketed)
            continue
        assert bracketed == pytest.approx(plain, abs=2e-6)
        assert exact.delta(bracketed) <= delta  # the answer is valid, not just close
        # A wrong hint is ignored: a "lower bound" above ε changes nothing but the cost.
        assert exact.epsilon_for_delta(delta, lower=plain + 0.5) == pytest.approx(plain, abs=2e-6)


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_sampling_next_to_one_is_accounted(n):
    """σ = 1 − 2^-53 once sized the threshold window by 1/(1 − σ) and refused n = 1 (hypothesis)."""
    mechanism = ScramblerMechanism(
        num_targets=2, sampling_rate=0.9999999999999999, batch_size=n, num_dummies=0
    )
    check_exact_size(mechanism)
    assert ExactLemma2(mechanism).delta(0.0) <= 1e-15
