import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcomm.protocol import (
    apply_local_randomizer,
    assign_scramblers,
    edge_counts,
    flood_targets,
    randomize_targets,
    scramble,
)

seeds = st.integers(0, 2**32 - 1)
# σ below 1e-12 is rejected by design (dpcomm.validation.MIN_POSITIVE_RATE).
sigmas = st.one_of(st.just(0.0), st.floats(1e-12, 1.0))


@st.composite
def scrambler_instances(draw, capped):
    size = draw(st.integers(1, 8))
    num_sources = draw(st.integers(1, 60))
    batch_size = draw(st.integers(1, 15))
    smallest = min(num_sources, batch_size)
    if num_sources > batch_size and num_sources % batch_size:
        smallest = num_sources % batch_size
    limit = (size - 1) * smallest if capped else 40
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
    assignment = assign_scramblers(sent.size, batch_size=batch_size, rng=seed)
    result = scramble(
        sent, assignment, num_targets=size, num_dummies=num_dummies, capped=capped, rng=seed
    )
    np.testing.assert_array_equal(result.counts.sum(axis=1), assignment.batch_sizes + num_dummies)
    np.testing.assert_array_equal(result.dummy_counts.sum(axis=1), num_dummies)
    assert np.all(result.dummy_counts >= 0)
    assert np.all(result.input_counts >= 0)
    assert result.counts.sum() == sent.size + num_dummies * assignment.num_scramblers
    if capped:
        assert np.all(result.counts <= assignment.batch_sizes[:, None])


@settings(max_examples=60, deadline=None)
@given(scrambler_instances(capped=True))
def test_shuffled_messages_agree_with_counts(case):
    size, batch_size, num_dummies, sent, seed = case
    assignment = assign_scramblers(sent.size, batch_size=batch_size, rng=seed)
    result = scramble(
        sent, assignment, num_targets=size, num_dummies=num_dummies, capped=True, rng=seed
    )
    for k in range(assignment.num_scramblers):
        targets, sources = result.shuffled_messages(k, rng=seed)
        np.testing.assert_array_equal(np.bincount(targets, minlength=size), result.counts[k])
        assert (sources == -1).sum() == num_dummies
        np.testing.assert_array_equal(
            np.sort(sources[sources >= 0]), np.sort(assignment.members(k))
        )


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 200), st.integers(1, 50), seeds)
def test_assignment_is_a_partition(num_sources, batch_size, seed):
    assignment = assign_scramblers(num_sources, batch_size=batch_size, rng=seed)
    assert assignment.num_scramblers == -(-num_sources // batch_size)
    assert assignment.batch_sizes.sum() == num_sources
    # Balanced: sizes differ by at most one and none exceeds n.
    assert assignment.batch_sizes.max() - assignment.batch_sizes.min() <= 1
    assert assignment.batch_sizes.min() >= 1 and assignment.batch_sizes.max() <= batch_size
    np.testing.assert_array_equal(
        np.bincount(assignment.scrambler_of_source, minlength=assignment.num_scramblers),
        assignment.batch_sizes,
    )
    members = np.concatenate([assignment.members(k) for k in range(assignment.num_scramblers)])
    np.testing.assert_array_equal(np.sort(members), np.arange(num_sources))


@st.composite
def flood_instances(draw):
    size = draw(st.integers(1, 30))
    num_dummies = draw(st.integers(0, size - 1))
    first = draw(st.lists(st.integers(0, size - 1), min_size=0, max_size=80))
    return size, num_dummies, np.array(first, dtype=np.int64), draw(seeds)


@settings(max_examples=100, deadline=None)
@given(flood_instances())
def test_flood_targets_are_distinct_and_never_the_first(case):
    size, num_dummies, first, seed = case
    dummies = flood_targets(first, num_targets=size, num_dummies=num_dummies, rng=seed)
    assert dummies.shape == (first.size, num_dummies)
    assert np.all((dummies >= 0) & (dummies < size))
    assert np.all(dummies != first[:, None])
    if num_dummies > 1:
        ordered = np.sort(dummies, axis=1)
        assert np.all(ordered[:, 1:] != ordered[:, :-1])


@settings(max_examples=80, deadline=None)
@given(flood_instances(), sigmas)
def test_local_randomizer_sends_d_plus_one_distinct_targets(case, sigma):
    size, num_dummies, truth, seed = case
    output = apply_local_randomizer(
        truth, num_targets=size, sampling_rate=sigma, num_dummies=num_dummies, rng=seed
    )
    targets = np.sort(output.targets, axis=1)
    assert np.all(targets[:, 1:] != targets[:, :-1])
    np.testing.assert_array_equal(output.first.is_real, output.first.sent == truth)
    if sigma == 0.0:
        np.testing.assert_array_equal(output.first.sent, truth)
    edges = output.edges(num_targets=size)
    assert edges.total_messages == truth.size * (num_dummies + 1)
    np.testing.assert_array_equal(edges.channels_per_sender(), np.full(truth.size, num_dummies + 1))


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 6), st.integers(1, 6), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)))
)
def test_edge_counts_match_a_naive_count(num_senders, num_receivers, pairs):
    pairs = [(s % num_senders, r % num_receivers) for s, r in pairs]
    senders = np.array([s for s, _ in pairs], dtype=np.int64)
    receivers = np.array([r for _, r in pairs], dtype=np.int64)
    edges = edge_counts(senders, receivers, num_senders=num_senders, num_receivers=num_receivers)
    naive = np.zeros((num_senders, num_receivers), dtype=np.int64)
    for s, r in pairs:
        naive[s, r] += 1
    np.testing.assert_array_equal(edges.to_dense(), naive)
    assert np.all(edges.counts >= 1)
    keys = edges.senders * num_receivers + edges.receivers
    assert np.all(np.diff(keys) > 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=50), sigmas, seeds)
def test_randomized_targets_stay_in_range(truth, sigma, seed):
    result = randomize_targets(
        np.array(truth, dtype=np.int64), num_targets=10, sampling_rate=sigma, rng=seed
    )
    assert np.all((result.sent >= 0) & (result.sent < 10))
    np.testing.assert_array_equal(result.is_real, result.sent == np.array(truth, dtype=np.int64))
