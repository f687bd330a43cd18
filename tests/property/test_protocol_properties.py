import numpy as np
from hypothesis import given, settings, strategies as st

from dpcomm.plan.costs import ConsecutiveBatches
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness

seeds = st.integers(0, 2**32 - 1)
# σ below 1e-12 is rejected by design (dpcomm.validation.MIN_POSITIVE_RATE).
sigmas = st.one_of(st.just(0.0), st.floats(1e-12, 1.0))


@st.composite
def scrambler_instances(draw, capped):
    size = draw(st.integers(1, 8))
    num_sources = draw(st.integers(1, 60))
    batch_size = draw(st.integers(1, 15))
    smallest = min(ConsecutiveBatches.of(num_sources, batch_size).sizes)
    limit = (size - 1) * int(smallest) if capped else 40
    num_dummies = draw(st.integers(0, limit))
    sent = np.array(
        draw(st.lists(st.integers(0, size - 1), min_size=num_sources, max_size=num_sources))
    )
    return size, batch_size, num_dummies, sent, draw(seeds)


@settings(max_examples=80, deadline=None)
@given(
    st.booleans().flatmap(lambda capped: st.tuples(st.just(capped), scrambler_instances(capped)))
)
def test_scrambler_counts_sum_to_batch_size_plus_dummies(case):
    capped, (size, batch_size, num_dummies, sent, seed) = case
    batches = ConsecutiveBatches.of(sent.size, batch_size)
    sizes = np.array(batches.sizes)
    keys = batches.batch_of(np.arange(sent.size)) * size + sent
    received = np.bincount(keys, minlength=batches.num_batches * size).reshape(-1, size)
    chosen = Scramblers(
        sampling_rate=0.5, batch_size=batch_size, num_dummies=num_dummies, capped=capped
    )
    dummies = roles.scrambler_dummies(
        received,
        sizes,
        countermeasure=chosen,
        randomness=Randomness(seed),
        flow="f",
        scramblers=np.arange(batches.num_batches),
    )
    counts = received + dummies
    np.testing.assert_array_equal(counts.sum(axis=1), sizes + num_dummies)
    np.testing.assert_array_equal(dummies.sum(axis=1), num_dummies)
    assert np.all(dummies >= 0)
    assert counts.sum() == sent.size + num_dummies * batches.num_batches
    if capped:
        assert np.all(counts <= sizes[:, None])
    # Every scrambler forwards its n_k + d messages in a uniformly random order.
    for scrambler, batch in enumerate(batches.sizes):
        order = roles.scrambler_shuffle(
            batch + num_dummies,
            largest_batch=int(sizes.max()),
            countermeasure=chosen,
            randomness=Randomness(seed),
            flow="f",
            scrambler=scrambler,
        )
        np.testing.assert_array_equal(np.sort(order), np.arange(batch + num_dummies))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 200), st.integers(1, 50))
def test_consecutive_batches_are_a_balanced_partition(num_sources, batch_size):
    batches = ConsecutiveBatches.of(num_sources, batch_size)
    sizes = np.array(batches.sizes)
    assert batches.num_batches == -(-num_sources // batch_size)
    assert sizes.sum() == num_sources
    # Balanced: sizes differ by at most one and none exceeds n.
    assert sizes.max() - sizes.min() <= 1 and sizes.min() >= 1 and sizes.max() <= batch_size
    owner = batches.batch_of(np.arange(num_sources))
    np.testing.assert_array_equal(np.bincount(owner, minlength=batches.num_batches), sizes)
    assert np.all(np.diff(owner) >= 0)


@st.composite
def flood_instances(draw):
    size = draw(st.integers(1, 30))
    num_dummies = draw(st.integers(0, size - 1))
    truth = draw(st.lists(st.integers(0, size - 1), min_size=0, max_size=80))
    return size, num_dummies, np.array(truth, dtype=np.int64), draw(seeds)


@settings(max_examples=100, deadline=None)
@given(flood_instances(), sigmas)
def test_local_randomizer_sends_d_plus_one_distinct_targets(case, sigma):
    size, num_dummies, truth, seed = case
    messages = roles.source_messages(
        truth,
        countermeasure=LocalFlooding(sampling_rate=sigma, num_dummies=num_dummies),
        num_targets=size,
        randomness=Randomness(seed),
        flow="f",
        sources=np.arange(truth.size),
    )
    assert messages.flooding.shape == (truth.size, num_dummies)
    assert np.all((messages.sent >= 0) & (messages.sent < size))
    assert np.all((messages.flooding >= 0) & (messages.flooding < size))
    targets = np.sort(np.concatenate([messages.sent[:, None], messages.flooding], axis=1), axis=1)
    assert np.all(targets[:, 1:] != targets[:, :-1])
    np.testing.assert_array_equal(messages.is_real, messages.sent == truth)
    if sigma == 0.0:
        np.testing.assert_array_equal(messages.sent, truth)
    if truth.size:
        order = roles.source_send_order(
            num_dummies + 1, randomness=Randomness(seed), flow="f", source=truth.size - 1
        )
        np.testing.assert_array_equal(np.sort(order), np.arange(num_dummies + 1))
