"""The simulated protocol has exactly the output distribution the accountant analyses.

Reference distributions come from :func:`dpcomm.accounting.brute_force.output_distribution`,
which enumerates every output of the mechanism described in :mod:`dpcomm.accounting.mechanisms`
(the count vector of a scrambler, the set of targets of R_σ^d). The protocol layer is run
RUNS times, vectorized (RUNS scramblers or RUNS sources at once), and compared with Pearson's
chi-square goodness-of-fit test at level ALPHA with a fixed seed. Each test is paired with a
deliberately wrong variant that the same check must reject, which shows that the check has power.
"""

import numpy as np
import pytest
from scipy.stats import chisquare

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism
from dpcomm.accounting.brute_force import output_distribution
from dpcomm.protocol import (
    apply_local_randomizer,
    assign_scramblers,
    flood_targets,
    randomize_targets,
    scramble,
)

RUNS = 200_000
ALPHA = 1e-4
MIN_EXPECTED = 5.0


def _p_value(observed_keys, exact):
    """Chi-square p-value of observed outputs (hashable keys) against an exact distribution.

    Bins with expected count below MIN_EXPECTED are pooled; an output outside the exact
    support gives p = 0.
    """
    keys, observed = np.unique(observed_keys, return_counts=True)
    table = dict(zip(keys.tolist(), observed.tolist(), strict=True))
    if not set(table) <= set(exact):
        return 0.0
    support = sorted(exact, key=exact.get)
    probabilities = np.array([exact[key] for key in support])
    probabilities /= probabilities.sum()
    counts = np.array([table.get(key, 0) for key in support], dtype=float)
    expected = probabilities * len(observed_keys)
    small = expected < MIN_EXPECTED
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        counts = np.append(counts[~small], counts[small].sum())
    assert len(expected) >= 2
    return float(chisquare(counts, expected).pvalue)


def _count_key(counts, total):
    """Encode each row of a count matrix (entries in [0, total]) as one integer."""
    base = total + 1
    return counts @ (base ** np.arange(counts.shape[-1])[::-1])


def _exact_count_keys(mechanism, inputs):
    total = mechanism.batch_size + mechanism.num_dummies
    distribution = output_distribution(mechanism, inputs)
    return {int(_count_key(np.array(key), total)): p for key, p in distribution.items() if p > 0}


def _set_key(targets):
    """Encode the set of targets of each row as a bit mask."""
    return np.bitwise_or.reduce(np.left_shift(1, targets), axis=1)


def _exact_set_keys(randomizer, target):
    distribution = output_distribution(randomizer, target)
    return {sum(1 << t for t in key): p for key, p in distribution.items() if p > 0}


# --- scramblers: A_σ^{n,d} = S_d ∘ R_σ and its capped variant (Section 4.1, Eq. 1) ---------

SIZE, BATCH, DUMMIES, SIGMA = 3, 3, 2, 0.3
INPUTS = [(0, 0, 0), (0, 1, 2), (0, 0, 1)]


def _simulate_scramblers(inputs, *, sampling_rate, capped, seed, cap_dummies=None):
    """RUNS scramblers of n = len(inputs) sources each, through the protocol layer."""
    generator = np.random.default_rng(seed)
    n = len(inputs)
    assignment = assign_scramblers(RUNS * n, batch_size=n, rng=generator)
    truth = np.empty(RUNS * n, dtype=np.int64)
    truth[assignment.source_order] = np.tile(np.array(inputs, dtype=np.int64), RUNS)
    sent = randomize_targets(truth, num_targets=SIZE, sampling_rate=sampling_rate, rng=generator)
    result = scramble(
        sent.sent,
        assignment,
        num_targets=SIZE,
        num_dummies=DUMMIES,
        capped=capped if cap_dummies is None else cap_dummies,
        rng=generator,
    )
    return _count_key(result.counts, n + DUMMIES)


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("inputs", INPUTS)
def test_scrambler_matches_exact_distribution(inputs, capped):
    mechanism = ScramblerMechanism(
        num_targets=SIZE,
        sampling_rate=SIGMA,
        batch_size=BATCH,
        num_dummies=DUMMIES,
        capped=capped,
    )
    exact = _exact_count_keys(mechanism, inputs)
    observed = _simulate_scramblers(inputs, sampling_rate=SIGMA, capped=capped, seed=2024)
    assert _p_value(observed, exact) > ALPHA


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("inputs", INPUTS)
def test_scrambler_check_rejects_a_wrong_sampling_rate(inputs, capped):
    mechanism = ScramblerMechanism(
        num_targets=SIZE,
        sampling_rate=SIGMA,
        batch_size=BATCH,
        num_dummies=DUMMIES,
        capped=capped,
    )
    exact = _exact_count_keys(mechanism, inputs)
    observed = _simulate_scramblers(inputs, sampling_rate=0.35, capped=capped, seed=2024)
    assert _p_value(observed, exact) < ALPHA


@pytest.mark.parametrize("inputs", INPUTS)
def test_capped_check_rejects_dummies_drawn_without_the_cap(inputs):
    mechanism = ScramblerMechanism(
        num_targets=SIZE,
        sampling_rate=SIGMA,
        batch_size=BATCH,
        num_dummies=DUMMIES,
        capped=True,
    )
    exact = _exact_count_keys(mechanism, inputs)
    observed = _simulate_scramblers(
        inputs, sampling_rate=SIGMA, capped=True, seed=2024, cap_dummies=False
    )
    assert _p_value(observed, exact) < ALPHA


def test_one_source_capped_scramblers_match_exact_distribution():
    # n = 1 (what a short last scrambler of size 1 is), capped: the cap is 1 message per target.
    mechanism = ScramblerMechanism(
        num_targets=SIZE, sampling_rate=SIGMA, batch_size=1, num_dummies=1, capped=True
    )
    exact = _exact_count_keys(mechanism, (1,))
    generator = np.random.default_rng(7)
    assignment = assign_scramblers(RUNS, batch_size=1, rng=generator)
    sent = randomize_targets(
        np.ones(RUNS, dtype=np.int64), num_targets=SIZE, sampling_rate=SIGMA, rng=generator
    )
    result = scramble(
        sent.sent, assignment, num_targets=SIZE, num_dummies=1, capped=True, rng=generator
    )
    assert result.counts.max() == 1
    assert _p_value(_count_key(result.counts, 2), exact) > ALPHA
    # d = (T − 1)·n is a broadcast, as the exact distribution says.
    broadcast = ScramblerMechanism(
        num_targets=SIZE, sampling_rate=SIGMA, batch_size=1, num_dummies=2, capped=True
    )
    assert output_distribution(broadcast, (1,)) == pytest.approx({(1, 1, 1): 1.0})
    full = scramble(
        sent.sent, assignment, num_targets=SIZE, num_dummies=2, capped=True, rng=generator
    )
    np.testing.assert_array_equal(full.counts, 1)


# --- the local randomizer R_σ^d: the observer sees the SET of targets (Section 3.1) --------

LOCAL_SIZE = 4


def _simulate_local(target, *, sampling_rate, num_dummies, seed):
    truth = np.full(RUNS, target, dtype=np.int64)
    output = apply_local_randomizer(
        truth,
        num_targets=LOCAL_SIZE,
        sampling_rate=sampling_rate,
        num_dummies=num_dummies,
        rng=seed,
    )
    return _set_key(output.targets)


@pytest.mark.parametrize("num_dummies", [0, 1, 2])
@pytest.mark.parametrize("target", [0, 3])
def test_local_randomizer_matches_exact_distribution(target, num_dummies):
    randomizer = LocalRandomizer(
        num_targets=LOCAL_SIZE, sampling_rate=SIGMA, num_dummies=num_dummies
    )
    exact = _exact_set_keys(randomizer, target)
    observed = _simulate_local(target, sampling_rate=SIGMA, num_dummies=num_dummies, seed=99)
    assert _p_value(observed, exact) > ALPHA


@pytest.mark.parametrize("num_dummies", [1, 2])
def test_local_check_rejects_a_wrong_sampling_rate(num_dummies):
    randomizer = LocalRandomizer(
        num_targets=LOCAL_SIZE, sampling_rate=SIGMA, num_dummies=num_dummies
    )
    exact = _exact_set_keys(randomizer, 0)
    observed = _simulate_local(0, sampling_rate=0.33, num_dummies=num_dummies, seed=99)
    assert _p_value(observed, exact) < ALPHA


def test_local_check_rejects_flooding_that_avoids_the_true_target():
    # A plausible bug: dummies avoid the TRUE target instead of the first message's target.
    randomizer = LocalRandomizer(num_targets=LOCAL_SIZE, sampling_rate=SIGMA, num_dummies=1)
    exact = _exact_set_keys(randomizer, 0)
    generator = np.random.default_rng(99)
    truth = np.zeros(RUNS, dtype=np.int64)
    first = randomize_targets(truth, num_targets=LOCAL_SIZE, sampling_rate=SIGMA, rng=generator)
    dummies = flood_targets(truth, num_targets=LOCAL_SIZE, num_dummies=1, rng=generator)
    targets = np.concatenate([first.sent[:, None], dummies], axis=1)
    assert _p_value(_set_key(targets), exact) < ALPHA
