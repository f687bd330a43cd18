"""The role steps the engines run have exactly the output distribution the accountant analyses.

Reference distributions come from :func:`dpcomm.accounting.brute_force.output_distribution`,
which enumerates every output of the mechanism described in :mod:`dpcomm.accounting.mechanisms`
(the count vector of a scrambler, the set of targets of R_σ^d). The role steps
(:mod:`dpcomm.protocol.roles`) are run RUNS times, vectorized (RUNS scramblers or RUNS sources
of one flow at once, each drawing from its own streams of a seeded
:class:`~dpcomm.protocol.randomness.Randomness`), and compared with Pearson's chi-square
goodness-of-fit test at level ALPHA. Each test is paired with a deliberately wrong variant that
the same check must reject, which shows that the check has power.
"""

import numpy as np
import pytest
from scipy.stats import chisquare

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism
from dpcomm.accounting.brute_force import output_distribution
from dpcomm.plan.costs import ConsecutiveBatches
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.protocol.source import flood_in_chunks

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


def _run_scramblers(inputs, *, sampling_rate, num_dummies, capped, seed):
    """RUNS scramblers of n = len(inputs) sources each: their count vectors (RUNS, T)."""
    n = len(inputs)
    randomness = Randomness(seed)
    chosen = Scramblers(
        sampling_rate=sampling_rate, batch_size=n, num_dummies=num_dummies, capped=capped
    )
    messages = roles.source_messages(
        np.tile(np.array(inputs, dtype=np.int64), RUNS),
        countermeasure=chosen,
        num_targets=SIZE,
        randomness=randomness,
        flow="f",
        sources=np.arange(RUNS * n),
    )
    batches = ConsecutiveBatches.of(RUNS * n, n)
    keys = batches.batch_of(np.arange(RUNS * n)) * SIZE + messages.sent
    received = np.bincount(keys, minlength=RUNS * SIZE).reshape(RUNS, SIZE)
    dummies = roles.scrambler_dummies(
        received,
        np.array(batches.sizes),
        countermeasure=chosen,
        randomness=randomness,
        flow="f",
        scramblers=np.arange(RUNS),
    )
    return received + dummies


def _simulate_scramblers(inputs, *, sampling_rate, capped, seed):
    counts = _run_scramblers(
        inputs, sampling_rate=sampling_rate, num_dummies=DUMMIES, capped=capped, seed=seed
    )
    return _count_key(counts, len(inputs) + DUMMIES)


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
    observed = _simulate_scramblers(inputs, sampling_rate=SIGMA, capped=False, seed=2024)
    assert _p_value(observed, exact) < ALPHA


def test_one_source_capped_scramblers_match_exact_distribution():
    # n = 1 (what a short last scrambler of size 1 is), capped: the cap is 1 message per target.
    mechanism = ScramblerMechanism(
        num_targets=SIZE, sampling_rate=SIGMA, batch_size=1, num_dummies=1, capped=True
    )
    exact = _exact_count_keys(mechanism, (1,))
    counts = _run_scramblers((1,), sampling_rate=SIGMA, num_dummies=1, capped=True, seed=7)
    assert counts.max() == 1
    assert _p_value(_count_key(counts, 2), exact) > ALPHA
    # d = (T − 1)·n is a broadcast, as the exact distribution says.
    broadcast = ScramblerMechanism(
        num_targets=SIZE, sampling_rate=SIGMA, batch_size=1, num_dummies=2, capped=True
    )
    assert output_distribution(broadcast, (1,)) == pytest.approx({(1, 1, 1): 1.0})
    full = _run_scramblers((1,), sampling_rate=SIGMA, num_dummies=2, capped=True, seed=7)
    np.testing.assert_array_equal(full, 1)


# --- the local randomizer R_σ^d: the observer sees the SET of targets (Section 3.1) --------

LOCAL_SIZE = 4


def _simulate_local(target, *, sampling_rate, num_dummies, seed):
    messages = roles.source_messages(
        np.full(RUNS, target, dtype=np.int64),
        countermeasure=LocalFlooding(sampling_rate=sampling_rate, num_dummies=num_dummies),
        num_targets=LOCAL_SIZE,
        randomness=Randomness(seed),
        flow="f",
        sources=np.arange(RUNS),
    )
    return _set_key(np.concatenate([messages.sent[:, None], messages.flooding], axis=1))


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
    randomness = Randomness(99)
    truth = np.zeros(RUNS, dtype=np.int64)
    sources = np.arange(RUNS)
    sampled = roles.source_messages(
        truth,
        countermeasure=LocalFlooding(sampling_rate=SIGMA),
        num_targets=LOCAL_SIZE,
        randomness=randomness,
        flow="f",
        sources=sources,
    )
    # The flooding step given the true targets where the role gives the sent ones.
    dummies = np.empty((RUNS, 1), dtype=np.int64)
    stream = roles.flood_stream("f", LOCAL_SIZE)
    flood_in_chunks(
        truth,
        dummies,
        num_targets=LOCAL_SIZE,
        uniforms=lambda start, stop: randomness.uniforms(stream, sources[start:stop]),
    )
    targets = np.concatenate([sampled.sent[:, None], dummies], axis=1)
    assert _p_value(_set_key(targets), exact) < ALPHA
