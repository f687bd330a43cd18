import tracemalloc

import numpy as np
import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.protocol import (
    EdgeCounts,
    RandomizedTargets,
    ScramblerAssignment,
    apply_local_randomizer,
    assign_scramblers,
    delivered_real,
    edge_counts,
    flood_targets,
    randomize_targets,
    scramble,
)

# --- R_σ: randomize_targets ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_targets": 0}, "num_targets"),
        ({"num_targets": 2.5}, "num_targets"),
        ({"sampling_rate": -0.1}, "sampling_rate"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"sampling_rate": float("nan")}, "sampling_rate"),
        ({"true_targets": [0, 5]}, "true_targets"),
        ({"true_targets": [-1, 0]}, "true_targets"),
        ({"true_targets": [0.0, 1.0]}, "true_targets"),
        ({"true_targets": [[0, 1]]}, "true_targets"),
    ],
)
def test_randomize_targets_rejects_bad_input(kwargs, name):
    base = {"true_targets": [0, 1, 2], "num_targets": 5, "sampling_rate": 0.3}
    base.update(kwargs)
    true_targets = base.pop("true_targets")
    with pytest.raises(InvalidParameterError) as caught:
        randomize_targets(true_targets, rng=0, **base)
    assert caught.value.name == name
    assert "\n" not in str(caught.value)


def test_randomize_targets_shapes_and_dtypes():
    result = randomize_targets(np.arange(10) % 4, num_targets=4, sampling_rate=0.5, rng=1)
    assert isinstance(result, RandomizedTargets)
    assert result.sent.dtype == np.int64 and result.sent.shape == (10,)
    assert result.is_real.dtype == np.bool_ and result.is_real.shape == (10,)
    assert len(result) == 10
    assert np.all((result.sent >= 0) & (result.sent < 4))


def test_randomize_targets_is_reproducible_from_a_seed():
    truth = np.arange(1000) % 7
    first = randomize_targets(truth, num_targets=7, sampling_rate=0.4, rng=42)
    second = randomize_targets(truth, num_targets=7, sampling_rate=0.4, rng=42)
    third = randomize_targets(truth, num_targets=7, sampling_rate=0.4, rng=43)
    np.testing.assert_array_equal(first.sent, second.sent)
    assert not np.array_equal(first.sent, third.sent)


def test_sigma_zero_keeps_every_target():
    truth = np.arange(500) % 9
    result = randomize_targets(truth, num_targets=9, sampling_rate=0.0, rng=0)
    np.testing.assert_array_equal(result.sent, truth)
    assert result.is_real.all()


def test_sigma_one_is_independent_of_the_true_target():
    # With σ = 1 the sent target is a fresh uniform draw: the same seed gives the same sends
    # whatever the true targets, and each target gets about 1/T of them.
    count, size = 200_000, 5
    zeros = randomize_targets(np.zeros(count, np.int64), num_targets=size, sampling_rate=1.0, rng=3)
    other = randomize_targets(np.arange(count) % size, num_targets=size, sampling_rate=1.0, rng=3)
    np.testing.assert_array_equal(zeros.sent, other.sent)
    frequencies = np.bincount(zeros.sent, minlength=size) / count
    np.testing.assert_allclose(frequencies, 1.0 / size, atol=0.005)
    np.testing.assert_array_equal(zeros.is_real, zeros.sent == 0)


def test_true_target_keeps_probability_one_minus_sigma_plus_sigma_over_t():
    count, size, sigma = 400_000, 4, 0.6
    result = randomize_targets(
        np.zeros(count, np.int64), num_targets=size, sampling_rate=sigma, rng=5
    )
    assert result.is_real.mean() == pytest.approx(1 - sigma + sigma / size, abs=0.004)


def test_single_target_sends_everything_to_target_zero():
    result = randomize_targets(np.zeros(50, np.int64), num_targets=1, sampling_rate=0.7, rng=0)
    assert np.all(result.sent == 0) and result.is_real.all()


def test_empty_input():
    result = randomize_targets([], num_targets=3, sampling_rate=0.5, rng=0)
    assert result.sent.shape == (0,) and result.sent.dtype == np.int64


def test_results_are_read_only_and_input_is_untouched():
    truth = np.array([0, 1, 2], dtype=np.int64)
    result = randomize_targets(truth, num_targets=3, sampling_rate=0.0, rng=0)
    assert truth.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        result.sent[0] = 1


def test_delivered_real():
    truth = np.array([0, 1, 2, 3])
    randomized = RandomizedTargets(
        sent=np.array([0, 2, 2, 0]), is_real=np.array([True, False, True, False])
    )
    np.testing.assert_array_equal(delivered_real(truth, randomized), [True, False, True, False])
    with pytest.raises(InvalidParameterError) as caught:
        delivered_real(truth[:3], randomized)
    assert caught.value.name == "true_targets"


def test_delivered_real_matches_truth_after_randomization():
    truth = np.arange(10_000) % 6
    randomized = randomize_targets(truth, num_targets=6, sampling_rate=0.5, rng=8)
    mask = delivered_real(truth, randomized)
    np.testing.assert_array_equal(mask, randomized.sent == truth)
    assert 0 < mask.sum() < truth.size


# --- flooding: flood_targets / apply_local_randomizer -------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_dummies": 5}, "num_dummies"),
        ({"num_dummies": -1}, "num_dummies"),
        ({"num_targets": 0}, "num_targets"),
        ({"first_targets": [5]}, "first_targets"),
    ],
)
def test_flood_targets_rejects_bad_input(kwargs, name):
    base = {"first_targets": [0, 1], "num_targets": 5, "num_dummies": 2}
    base.update(kwargs)
    first = base.pop("first_targets")
    with pytest.raises(InvalidParameterError) as caught:
        flood_targets(first, rng=0, **base)
    assert caught.value.name == name


def test_flood_targets_shape_distinct_and_never_first():
    first = np.arange(3000) % 8
    dummies = flood_targets(first, num_targets=8, num_dummies=3, rng=0)
    assert dummies.shape == (3000, 3) and dummies.dtype == np.int64
    assert np.all(dummies != first[:, None])
    ordered = np.sort(dummies, axis=1)
    assert np.all(ordered[:, 1:] != ordered[:, :-1])
    assert np.all((dummies >= 0) & (dummies < 8))


def test_flood_zero_dummies():
    dummies = flood_targets([0, 1, 2], num_targets=3, num_dummies=0, rng=0)
    assert dummies.shape == (3, 0) and dummies.dtype == np.int64


def test_flood_t_minus_one_reaches_every_other_target():
    size = 6
    first = np.arange(600) % size
    dummies = flood_targets(first, num_targets=size, num_dummies=size - 1, rng=1)
    together = np.sort(np.concatenate([first[:, None], dummies], axis=1), axis=1)
    np.testing.assert_array_equal(together, np.broadcast_to(np.arange(size), together.shape))
    # The order of the dummies is random, not sorted.
    assert not np.all(np.diff(dummies, axis=1) > 0)


def test_flood_targets_is_reproducible_and_uniform():
    first = np.zeros(120_000, dtype=np.int64)
    dummies = flood_targets(first, num_targets=5, num_dummies=2, rng=11)
    np.testing.assert_array_equal(
        dummies, flood_targets(first, num_targets=5, num_dummies=2, rng=11)
    )
    frequencies = np.bincount(dummies.ravel(), minlength=5) / dummies.size
    np.testing.assert_allclose(frequencies, [0, 0.25, 0.25, 0.25, 0.25], atol=0.005)
    # Each of the two columns is itself uniform over the others (random order).
    for column in dummies.T:
        np.testing.assert_allclose(
            np.bincount(column, minlength=5)[1:] / first.size, 0.25, atol=0.006
        )


def test_flood_chunks_do_not_change_semantics(monkeypatch):
    import dpcomm.protocol.source as source

    first = np.arange(1000) % 4
    monkeypatch.setattr(source, "FLOOD_CHUNK_ELEMENTS", 7)
    dummies = source.flood_targets(first, num_targets=4, num_dummies=2, rng=0)
    assert np.all(dummies != first[:, None]) and np.all(dummies[:, 0] != dummies[:, 1])


def test_flood_a_million_sources_stays_within_memory():
    first = np.random.default_rng(0).integers(0, 20, size=1_000_000)
    tracemalloc.start()
    try:
        dummies = flood_targets(first, num_targets=20, num_dummies=5, rng=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dummies.shape == (1_000_000, 5)
    assert peak < 200 * 2**20  # output 40 MB + bounded chunk temporaries


def test_apply_local_randomizer():
    truth = np.arange(2000) % 5
    output = apply_local_randomizer(truth, num_targets=5, sampling_rate=0.0, num_dummies=2, rng=4)
    assert output.num_dummies == 2
    assert output.targets.shape == (2000, 3)
    np.testing.assert_array_equal(output.targets[:, 0], truth)
    assert output.is_real[:, 0].all() and not output.is_real[:, 1:].any()
    assert np.all(output.dummies != truth[:, None])
    edges = output.edges(num_targets=5)
    assert edges.total_messages == 6000 and len(edges) == 6000
    np.testing.assert_array_equal(edges.channels_per_sender(), np.full(2000, 3))
    with pytest.raises(InvalidParameterError) as caught:
        apply_local_randomizer(truth, num_targets=5, sampling_rate=0.1, num_dummies=5)
    assert caught.value.name == "num_dummies"


def test_apply_local_randomizer_is_reproducible():
    truth = np.arange(500) % 5
    kwargs = {"num_targets": 5, "sampling_rate": 0.5, "num_dummies": 2, "rng": 9}
    first, second = apply_local_randomizer(truth, **kwargs), apply_local_randomizer(truth, **kwargs)
    np.testing.assert_array_equal(first.targets, second.targets)


# --- scrambler assignment -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_sources", "batch_size", "name"),
    [(0, 3, "num_sources"), (10, 0, "batch_size"), (10, -2, "batch_size"), (10, 1.5, "batch_size")],
)
def test_assign_scramblers_rejects_bad_input(num_sources, batch_size, name):
    with pytest.raises(InvalidParameterError) as caught:
        assign_scramblers(num_sources, batch_size=batch_size, rng=0)
    assert caught.value.name == name


def test_assignment_even_batches():
    assignment = assign_scramblers(12, batch_size=4, rng=0)
    assert assignment.num_scramblers == 3 and assignment.num_sources == 12
    np.testing.assert_array_equal(assignment.batch_sizes, [4, 4, 4])
    np.testing.assert_array_equal(np.bincount(assignment.scrambler_of_source), [4, 4, 4])
    assert assignment.scrambler_of_source.dtype == np.int64
    assert assignment.batch_sizes.dtype == np.int64


def test_assignment_batches_are_balanced():
    # ⌈10/4⌉ = 3 scramblers of 4, 3 and 3 sources, not 4, 4 and a short one of 2.
    assignment = assign_scramblers(10, batch_size=4, rng=0)
    np.testing.assert_array_equal(assignment.batch_sizes, [4, 3, 3])
    np.testing.assert_array_equal(np.bincount(assignment.scrambler_of_source), [4, 3, 3])
    for k in range(3):
        members = assignment.members(k)
        assert np.all(assignment.scrambler_of_source[members] == k)
    with pytest.raises(InvalidParameterError):
        assignment.members(3)


def test_assignment_batch_larger_than_sources_gives_one_scrambler():
    assignment = assign_scramblers(5, batch_size=100, rng=0)
    assert assignment.num_scramblers == 1 and assignment.batch_size == 100
    np.testing.assert_array_equal(assignment.batch_sizes, [5])
    assert np.all(assignment.scrambler_of_source == 0)


def test_assignment_is_random_and_reproducible():
    first = assign_scramblers(1000, batch_size=10, rng=1)
    second = assign_scramblers(1000, batch_size=10, rng=1)
    np.testing.assert_array_equal(first.scrambler_of_source, second.scrambler_of_source)
    assert not np.array_equal(first.scrambler_of_source, np.arange(1000) // 10)


def test_assignment_from_scrambler_of_source():
    assignment = ScramblerAssignment.from_scrambler_of_source([1, 0, 1, 2, 1])
    np.testing.assert_array_equal(assignment.batch_sizes, [1, 3, 1])
    assert assignment.batch_size == 3
    np.testing.assert_array_equal(assignment.members(1), [0, 2, 4])
    for labels in ([0, 2], [], [-1, 0], [0.0, 1.0]):
        with pytest.raises(InvalidParameterError) as caught:
            ScramblerAssignment.from_scrambler_of_source(labels)
        assert caught.value.name == "scrambler_of_source"


# --- scramble -----------------------------------------------------------------------------


def _setup(num_sources=12, batch_size=4, size=3, seed=0):
    assignment = assign_scramblers(num_sources, batch_size=batch_size, rng=seed)
    sent = np.random.default_rng(seed).integers(0, size, size=num_sources)
    return sent, assignment


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_dummies": -1}, "num_dummies"),
        ({"num_targets": 0}, "num_targets"),
        ({"capped": 1}, "capped"),
        ({"capped": True, "num_dummies": 9}, "num_dummies"),  # (T − 1)·n = 8
        ({"sent_targets": np.zeros(11, np.int64)}, "sent_targets"),
        ({"sent_targets": np.full(12, 3)}, "sent_targets"),
        ({"assignment": [0] * 12}, "assignment"),
    ],
)
def test_scramble_rejects_bad_input(kwargs, name):
    sent, assignment = _setup()
    base = {"sent_targets": sent, "assignment": assignment, "num_targets": 3, "num_dummies": 2}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError) as caught:
        scramble(base.pop("sent_targets"), base.pop("assignment"), rng=0, **base)
    assert caught.value.name == name


def test_capped_limit_uses_the_smallest_scrambler():
    sent, assignment = _setup(num_sources=10, batch_size=4)  # balanced batches 4, 3, 3
    scramble(sent, assignment, num_targets=3, num_dummies=6, capped=True, rng=0)
    with pytest.raises(InvalidParameterError) as caught:
        scramble(sent, assignment, num_targets=3, num_dummies=7, capped=True, rng=0)
    assert caught.value.name == "num_dummies"
    # The uncapped scrambler has no limit.
    scramble(sent, assignment, num_targets=3, num_dummies=50, capped=False, rng=0)


@pytest.mark.parametrize("capped", [False, True])
def test_scramble_shapes_and_totals(capped):
    sent, assignment = _setup(num_sources=10, batch_size=4)
    result = scramble(sent, assignment, num_targets=3, num_dummies=3, capped=capped, rng=1)
    assert result.counts.shape == (3, 3) and result.counts.dtype == np.int64
    assert result.dummy_counts.shape == (3, 3) and result.dummy_counts.dtype == np.int64
    np.testing.assert_array_equal(result.counts.sum(axis=1), [7, 6, 6])
    np.testing.assert_array_equal(result.dummy_counts.sum(axis=1), [3, 3, 3])
    expected_inputs = np.zeros((3, 3), np.int64)
    np.add.at(expected_inputs, (assignment.scrambler_of_source, sent), 1)
    np.testing.assert_array_equal(result.input_counts, expected_inputs)
    edges = result.edges()
    np.testing.assert_array_equal(edges.to_dense(), result.counts)


def test_scramble_zero_dummies_forwards_inputs():
    sent, assignment = _setup()
    for capped in (False, True):
        result = scramble(sent, assignment, num_targets=3, num_dummies=0, capped=capped, rng=0)
        assert not result.dummy_counts.any()
        np.testing.assert_array_equal(result.counts, result.input_counts)


def test_scramble_is_reproducible():
    sent, assignment = _setup(num_sources=300, batch_size=10, size=5)
    for capped in (False, True):
        runs = [
            scramble(sent, assignment, num_targets=5, num_dummies=7, capped=capped, rng=3)
            for _ in range(2)
        ]
        np.testing.assert_array_equal(runs[0].counts, runs[1].counts)


def test_capped_cap_is_never_exceeded_even_at_the_limit():
    # d = (T − 1)·n: every target ends with exactly n messages.
    size, n = 4, 5
    sent = np.zeros(200 * n, dtype=np.int64)  # all sources send to target 0
    assignment = assign_scramblers(sent.size, batch_size=n, rng=0)
    result = scramble(
        sent, assignment, num_targets=size, num_dummies=(size - 1) * n, capped=True, rng=1
    )
    np.testing.assert_array_equal(result.counts, np.full((200, size), n))
    np.testing.assert_array_equal(result.dummy_counts[:, 0], 0)


def test_capped_respects_the_short_scramblers_own_cap():
    size = 3
    sent = np.zeros(7, dtype=np.int64)
    # A scrambler left with 2 of its sources (the others missed the deadline) caps at 2.
    assignment = ScramblerAssignment.from_scrambler_of_source([0, 0, 0, 0, 0, 1, 1])
    result = scramble(sent, assignment, num_targets=size, num_dummies=4, capped=True, rng=2)
    assert np.all(result.counts <= assignment.batch_sizes[:, None])
    np.testing.assert_array_equal(result.counts[1], [2, 2, 2])


def test_uncapped_can_exceed_the_cap():
    sent = np.zeros(3000, dtype=np.int64)
    assignment = assign_scramblers(3000, batch_size=3, rng=0)
    result = scramble(sent, assignment, num_targets=3, num_dummies=6, capped=False, rng=0)
    assert result.counts.max() > 3


def test_single_target_scrambler():
    sent = np.zeros(6, dtype=np.int64)
    assignment = assign_scramblers(6, batch_size=3, rng=0)
    result = scramble(sent, assignment, num_targets=1, num_dummies=2, capped=False, rng=0)
    np.testing.assert_array_equal(result.counts, [[5], [5]])
    capped = scramble(sent, assignment, num_targets=1, num_dummies=0, capped=True, rng=0)
    np.testing.assert_array_equal(capped.counts, [[3], [3]])


def test_shuffled_messages():
    sent, assignment = _setup(num_sources=10, batch_size=4)
    result = scramble(sent, assignment, num_targets=3, num_dummies=3, capped=True, rng=1)
    for k in range(assignment.num_scramblers):
        targets, sources = result.shuffled_messages(k, rng=5)
        assert targets.dtype == np.int64 and sources.dtype == np.int64
        np.testing.assert_array_equal(np.bincount(targets, minlength=3), result.counts[k])
        real = sources >= 0
        np.testing.assert_array_equal(np.sort(sources[real]), np.sort(assignment.members(k)))
        np.testing.assert_array_equal(targets[real], sent[sources[real]])
        np.testing.assert_array_equal(
            np.bincount(targets[~real], minlength=3), result.dummy_counts[k]
        )
    again = result.shuffled_messages(0, rng=5)
    np.testing.assert_array_equal(again[1], result.shuffled_messages(0, rng=5)[1])


def test_shuffled_messages_order_is_uniform():
    # Scrambler with 2 sources and 1 dummy: each of the 3 messages is first with prob. 1/3.
    assignment = ScramblerAssignment.from_scrambler_of_source([0, 0])
    result = scramble([0, 1], assignment, num_targets=2, num_dummies=1, rng=0)
    generator = np.random.default_rng(0)
    firsts = np.array([result.shuffled_messages(0, generator)[1][0] for _ in range(6000)])
    frequencies = np.array([(firsts == s).mean() for s in (-1, 0, 1)])
    np.testing.assert_allclose(frequencies, 1 / 3, atol=0.03)


# --- observation --------------------------------------------------------------------------


def test_edge_counts():
    edges = edge_counts([0, 0, 1, 2, 0, 2], [1, 1, 0, 1, 2, 1], num_senders=4, num_receivers=3)
    assert isinstance(edges, EdgeCounts)
    np.testing.assert_array_equal(edges.senders, [0, 0, 1, 2])
    np.testing.assert_array_equal(edges.receivers, [1, 2, 0, 1])
    np.testing.assert_array_equal(edges.counts, [2, 1, 1, 2])
    assert len(edges) == 4 and edges.total_messages == 6
    np.testing.assert_array_equal(edges.channels_per_sender(), [2, 1, 1, 0])
    np.testing.assert_array_equal(edges.channels_per_receiver(), [1, 2, 1])
    np.testing.assert_array_equal(edges.messages_per_sender(), [3, 1, 2, 0])
    np.testing.assert_array_equal(edges.messages_per_receiver(), [1, 4, 1])
    dense = edges.to_dense()
    assert dense.shape == (4, 3) and dense.sum() == 6
    round_trip = EdgeCounts.from_dense(dense)
    np.testing.assert_array_equal(round_trip.counts, edges.counts)
    np.testing.assert_array_equal(round_trip.senders, edges.senders)


def test_edge_counts_empty_and_errors():
    edges = edge_counts([], [], num_senders=0, num_receivers=0)
    assert len(edges) == 0 and edges.total_messages == 0
    with pytest.raises(InvalidParameterError) as caught:
        edge_counts([0, 1], [0], num_senders=2, num_receivers=2)
    assert caught.value.name == "receivers"
    with pytest.raises(InvalidParameterError) as caught:
        edge_counts([0, 2], [0, 0], num_senders=2, num_receivers=2)
    assert caught.value.name == "senders"
    with pytest.raises(InvalidParameterError) as caught:
        EdgeCounts.from_dense([[1, -1]])
    assert caught.value.name == "matrix"
