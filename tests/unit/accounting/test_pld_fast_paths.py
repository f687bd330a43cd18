"""The PLD module's fast paths give dp_accounting's answers.

Sparse composition of few-atom pairs (`pld.compose_pairs`), composition by repeated squaring,
the vectorized scan for ε at δ (`pld.epsilon_for_delta`), and the shared half-binomial table
of `pld.scrambler_pld`: each against the slower computation it replaces.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import pld_pmf
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, pld

EPSILONS = [0.0, 0.05, 0.3, 1.0, 2.5, 6.0]
DELTAS = [1e-12, 1e-9, 1e-6, 1e-3, 0.05, 0.5]

LOCAL = [
    LocalRandomizer(num_targets=20, sampling_rate=0.3, num_dummies=0),
    LocalRandomizer(num_targets=20, sampling_rate=0.05, num_dummies=3),
    LocalRandomizer(num_targets=3, sampling_rate=0.9, num_dummies=1),
    LocalRandomizer(num_targets=2, sampling_rate=0.5, num_dummies=0),
]
SMALL_SCRAMBLER = ScramblerMechanism(num_targets=5, sampling_rate=0.4, batch_size=8, num_dummies=3)


def _dense(pair: pld.LossAtoms, pessimistic: bool) -> PrivacyLossDistribution:
    return pair.pld(pessimistic=pessimistic)


def _is_sparse(distribution: PrivacyLossDistribution) -> bool:
    return isinstance(distribution._pmf_remove, pld_pmf.SparsePLDPmf)


@pytest.mark.parametrize("mechanism", LOCAL, ids=repr)
@pytest.mark.parametrize("count", [1, 2, 4, 9, 30])
@pytest.mark.parametrize("pessimistic", [True, False])
def test_sparse_composition_of_few_atoms_is_the_dense_one(mechanism, count, pessimistic):
    pair = pld.dominating_pair(mechanism)
    fast = pld.compose_pairs([pair], counts=[count], pessimistic=pessimistic)
    slow = pld.compose([_dense(pair, pessimistic)], counts=[count])
    assert _is_sparse(fast)  # R_σ's three atoms stay sparse
    for epsilon in EPSILONS:
        assert float(fast.get_delta_for_epsilon(epsilon)) == pytest.approx(
            float(slow.get_delta_for_epsilon(epsilon)), rel=1e-9, abs=1e-13
        )


def test_pairs_of_many_atoms_and_mixed_counts_compose_as_before():
    pairs = [*pld.lower_bound_pairs(SMALL_SCRAMBLER), pld.dominating_pair(LOCAL[0])]
    counts = [2, 1, 3]
    for pessimistic in (True, False):
        fast = pld.compose_pairs(pairs, counts=counts, pessimistic=pessimistic)
        slow = pld.compose([_dense(p, pessimistic) for p in pairs], counts=counts)
        for epsilon in EPSILONS:
            assert float(fast.get_delta_for_epsilon(epsilon)) == pytest.approx(
                float(slow.get_delta_for_epsilon(epsilon)), rel=1e-9, abs=1e-13
            )


def test_a_pair_with_its_mass_at_infinity_composes_to_infinity():
    pair = pld.dominating_pair(LocalRandomizer(num_targets=3, sampling_rate=0.0, num_dummies=0))
    composed = pld.compose_pairs([pair], counts=[3])
    assert math.isinf(pld.epsilon_for_delta(composed, 1e-6))


def test_compose_pairs_refuses_an_empty_list():
    with pytest.raises(pld.InvalidParameterError, match="pairs"):
        pld.compose_pairs([])


@pytest.mark.parametrize("count", [2, 3, 4, 5, 7, 8])
def test_squaring_composes_like_dp_accountings_self_composition(count):
    one = pld.scrambler_pld(
        ScramblerMechanism(num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50)
    )
    squared = pld.compose([one], counts=[count])
    reference = one.self_compose(count, pld.TAIL_MASS_TRUNCATION)
    for epsilon in EPSILONS:
        assert float(squared.get_delta_for_epsilon(epsilon)) == pytest.approx(
            float(reference.get_delta_for_epsilon(epsilon)), rel=1e-7, abs=1e-13
        )


def _random_pmfs():
    rng = np.random.default_rng(7)
    for size, lowest, infinity in [
        (1, 0, 0.0),
        (50, -20, 0.0),
        (5_000, -3_000, 1e-8),
        (20_000, -500, 1e-4),
        (300, 10, 0.3),  # every loss positive, much mass at +∞
        (40, 80_000_000, 0.0),  # losses so large that e^{-L} is 0
    ]:
        probs = rng.random(size) ** 4
        probs *= (1.0 - infinity) / probs.sum()
        yield pld_pmf.DensePLDPmf(1e-4, lowest, probs, infinity, True)


@pytest.mark.parametrize("pmf", list(_random_pmfs()), ids=lambda p: f"size{p.size}")
def test_the_vectorized_scan_gives_dp_accountings_epsilon(pmf):
    distribution = PrivacyLossDistribution(pmf)
    for delta in DELTAS:
        expected = float(pmf.get_epsilon_for_delta(delta))
        got = pld.epsilon_for_delta(distribution, delta)
        if math.isinf(expected):
            assert math.isinf(got)
        else:
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-9), delta


def test_an_asymmetric_distribution_takes_the_larger_epsilon():
    pmfs = list(_random_pmfs())
    distribution = PrivacyLossDistribution(pmfs[2], pmfs[3])
    for delta in DELTAS:
        assert pld.epsilon_for_delta(distribution, delta) == pytest.approx(
            float(distribution.get_epsilon_for_delta(delta)), rel=1e-9, abs=1e-9
        )


def test_rows_read_from_the_shared_table_are_the_rows_computed_alone(monkeypatch):
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.3, batch_size=200, num_dummies=40
    )
    pld._ROWS.cache_clear()
    shared = pld.scrambler_pld(mechanism)
    pld._ROWS.cache_clear()
    monkeypatch.setattr(pld, "_HALF_TABLE_MAX", 0)  # every row computes its own block
    alone = pld.scrambler_pld(mechanism)
    pld._ROWS.cache_clear()
    for epsilon in EPSILONS:
        assert float(shared.get_delta_for_epsilon(epsilon)) == float(
            alone.get_delta_for_epsilon(epsilon)
        )


def test_the_row_cache_stays_within_its_budget(monkeypatch):
    monkeypatch.setattr(pld, "_ROWS", pld._RowCache(2_000_000))
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.05, batch_size=300, num_dummies=10
    )
    first = pld.scrambler_pld(mechanism)
    assert 0 < pld._ROWS._bytes <= 2_000_000
    again = pld.scrambler_pld(mechanism)  # rows dropped are computed again, the same
    assert float(first.get_delta_for_epsilon(1.0)) == float(again.get_delta_for_epsilon(1.0))


@pytest.mark.parametrize("pessimistic", [True, False])
def test_the_vectorized_tail_cut_is_dp_accountings(pessimistic):
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.05, batch_size=300, num_dummies=10
    )
    pairs = [pld.dominating_pair(mechanism), *pld.lower_bound_pairs(mechanism)]
    first, second = (pair.pld(pessimistic=pessimistic) for pair in pairs[:2])
    ours = pld._compose_two(first, second)._pmf_remove
    theirs = first.compose(second, pld.TAIL_MASS_TRUNCATION)._pmf_remove
    assert ours._lower_loss == theirs._lower_loss
    assert ours._infinity_mass == theirs._infinity_mass
    np.testing.assert_array_equal(ours._probs, theirs._probs)
