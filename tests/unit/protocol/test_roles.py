"""The role steps every engine calls (:mod:`dpcomm.protocol.roles`), over arrays of nodes,
and the array functions they are built on (:mod:`dpcomm.protocol.source`,
:mod:`dpcomm.protocol.scrambler`)."""

import tracemalloc

import numpy as np
import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import ConsecutiveBatches
from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.protocol.scrambler import scrambler_dummy_counts
from dpcomm.protocol.source import sample_targets


def send(truth, countermeasure, num_targets, *, seed=0, first=0, flow="(a)"):
    """The source step of sources first … first + len(truth) − 1, seeded."""
    truth = np.asarray(truth)
    return roles.source_messages(
        truth,
        countermeasure=countermeasure,
        num_targets=num_targets,
        randomness=Randomness(seed),
        flow=flow,
        sources=np.arange(first, first + truth.shape[0]),
    )


def sampling(sigma):
    return LocalFlooding(sampling_rate=sigma)


def flooding(sigma, dummies):
    return LocalFlooding(sampling_rate=sigma, num_dummies=dummies)


# --- the source step: R_σ -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("truth", "num_targets", "name"),
    [
        ([0, 1, 2], 0, "num_targets"),
        ([0, 1, 2], 2.5, "num_targets"),
        ([0, 5], 5, "true_targets"),
        ([-1, 0], 5, "true_targets"),
        ([0.0, 1.0], 5, "true_targets"),
        ([[0, 1]], 5, "true_targets"),
    ],
)
def test_source_step_rejects_bad_input(truth, num_targets, name):
    with pytest.raises(InvalidParameterError) as caught:
        roles.source_messages(
            truth,
            countermeasure=sampling(0.3),
            num_targets=num_targets,
            randomness=Randomness(0),
            flow="(a)",
            sources=[0, 1],
        )
    assert caught.value.name == name
    assert "\n" not in str(caught.value)


def test_source_step_needs_one_source_index_per_true_target():
    with pytest.raises(InvalidParameterError) as caught:
        roles.source_messages(
            [0, 1, 2],
            countermeasure=sampling(0.3),
            num_targets=3,
            randomness=Randomness(0),
            flow="(a)",
            sources=[0, 1],
        )
    assert caught.value.name == "sources"


@pytest.mark.parametrize("sigma", [-0.1, 1.5, float("nan")])
def test_sampling_rejects_a_bad_rate(sigma):
    with pytest.raises(InvalidParameterError) as caught:
        sample_targets([0, 1], num_targets=3, sampling_rate=sigma, uniforms=np.zeros((2, 2)))
    assert caught.value.name == "sampling_rate"
    with pytest.raises(InvalidParameterError) as caught:
        sample_targets([0, 1], num_targets=3, sampling_rate=0.5, uniforms=np.zeros((2, 3)))
    assert caught.value.name == "uniforms"


@pytest.mark.parametrize(
    "countermeasure",
    [sampling(0.5), Scramblers(sampling_rate=0.5, batch_size=3, num_dummies=4)],
)
def test_source_step_shapes_and_dtypes(countermeasure):
    messages = send(np.arange(10) % 4, countermeasure, 4, seed=1)
    assert messages.sent.dtype == np.int64 and messages.sent.shape == (10,)
    assert messages.is_real.dtype == np.bool_ and messages.is_real.shape == (10,)
    assert messages.flooding.shape == (10, 0)
    assert np.all((messages.sent >= 0) & (messages.sent < 4))
    assert messages.num_dummies == int((~messages.is_real).sum())


def test_no_countermeasure_sends_to_the_true_target():
    truth = np.arange(30) % 7
    messages = send(truth, NoCountermeasure(), 7)
    np.testing.assert_array_equal(messages.sent, truth)
    assert messages.is_real.all() and messages.num_dummies == 0


def test_source_step_is_reproducible_and_per_node():
    truth = np.arange(1000) % 7
    first = send(truth, sampling(0.4), 7, seed=42)
    np.testing.assert_array_equal(first.sent, send(truth, sampling(0.4), 7, seed=42).sent)
    assert not np.array_equal(first.sent, send(truth, sampling(0.4), 7, seed=43).sent)
    assert not np.array_equal(first.sent, send(truth, sampling(0.4), 7, seed=42, flow="(b)").sent)
    # A source draws the same whichever sources run with it (an engine runs any subset).
    part = send(truth[300:310], sampling(0.4), 7, seed=42, first=300)
    np.testing.assert_array_equal(part.sent, first.sent[300:310])


def test_sigma_zero_keeps_every_target():
    truth = np.arange(500) % 9
    messages = send(truth, sampling(0.0), 9)
    np.testing.assert_array_equal(messages.sent, truth)
    assert messages.is_real.all()


def test_sigma_one_is_independent_of_the_true_target():
    # With σ = 1 the sent target is a fresh uniform draw: the same seed gives the same sends
    # whatever the true targets, and each target gets about 1/T of them.
    count, size = 200_000, 5
    zeros = send(np.zeros(count, np.int64), sampling(1.0), size, seed=3)
    other = send(np.arange(count) % size, sampling(1.0), size, seed=3)
    np.testing.assert_array_equal(zeros.sent, other.sent)
    frequencies = np.bincount(zeros.sent, minlength=size) / count
    np.testing.assert_allclose(frequencies, 1.0 / size, atol=0.005)
    np.testing.assert_array_equal(zeros.is_real, zeros.sent == 0)


def test_true_target_keeps_probability_one_minus_sigma_plus_sigma_over_t():
    count, size, sigma = 400_000, 4, 0.6
    messages = send(np.zeros(count, np.int64), sampling(sigma), size, seed=5)
    assert messages.is_real.mean() == pytest.approx(1 - sigma + sigma / size, abs=0.004)


def test_single_target_sends_everything_to_target_zero():
    messages = send(np.zeros(50, np.int64), sampling(0.7), 1)
    assert np.all(messages.sent == 0) and messages.is_real.all()


def test_empty_input():
    messages = send(np.zeros(0, np.int64), flooding(0.5, 2), 3)
    assert messages.sent.shape == (0,) and messages.sent.dtype == np.int64
    assert messages.flooding.shape == (0, 2)


def test_results_are_read_only_and_input_is_untouched():
    truth = np.array([0, 1, 2], dtype=np.int64)
    messages = send(truth, flooding(0.5, 1), 3)
    assert truth.flags.writeable
    for array in (messages.sent, messages.is_real, messages.flooding):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_delivered_counts_real_messages_of_committed_batches():
    np.testing.assert_array_equal(
        roles.delivered([True, False, True, True], [True, True, False, True]),
        [True, False, False, True],
    )
    truth = np.arange(10_000) % 6
    messages = send(truth, sampling(0.5), 6, seed=8)
    counted = roles.delivered(messages.is_real, np.ones(truth.size, dtype=bool))
    np.testing.assert_array_equal(counted, messages.sent == truth)
    assert 0 < counted.sum() < truth.size


# --- the source step: R_σ^d's flooding -------------------------------------------------------


def test_flooding_more_than_the_other_targets_is_rejected():
    with pytest.raises(InvalidParameterError) as caught:
        send([0, 1], flooding(0.1, 5), 5)
    assert caught.value.name == "num_dummies"


def test_flooding_shape_distinct_and_never_the_first_message():
    messages = send(np.arange(3000) % 8, flooding(0.5, 3), 8)
    dummies = messages.flooding
    assert dummies.shape == (3000, 3) and dummies.dtype == np.int64
    assert np.all(dummies != messages.sent[:, None])
    ordered = np.sort(dummies, axis=1)
    assert np.all(ordered[:, 1:] != ordered[:, :-1])
    assert np.all((dummies >= 0) & (dummies < 8))
    assert messages.num_dummies == int((~messages.is_real).sum()) + 9000


def test_flooding_t_minus_one_reaches_every_other_target():
    size = 6
    messages = send(np.arange(600) % size, flooding(0.3, size - 1), size, seed=1)
    together = np.sort(np.concatenate([messages.sent[:, None], messages.flooding], axis=1), axis=1)
    np.testing.assert_array_equal(together, np.broadcast_to(np.arange(size), together.shape))
    # The order of the dummies is random, not sorted.
    assert not np.all(np.diff(messages.flooding, axis=1) > 0)


def test_flooding_is_uniform_over_the_other_targets():
    truth = np.zeros(120_000, dtype=np.int64)
    dummies = send(truth, flooding(0.0, 2), 5, seed=11).flooding
    frequencies = np.bincount(dummies.ravel(), minlength=5) / dummies.size
    np.testing.assert_allclose(frequencies, [0, 0.25, 0.25, 0.25, 0.25], atol=0.005)
    # Each of the two columns is itself uniform over the others (random order).
    for column in dummies.T:
        np.testing.assert_allclose(
            np.bincount(column, minlength=5)[1:] / truth.size, 0.25, atol=0.006
        )


def test_flooding_chunks_do_not_change_the_draws(monkeypatch):
    import dpcomm.protocol.source as source

    truth = np.arange(1000) % 4
    whole = send(truth, flooding(0.5, 2), 4, seed=2)
    monkeypatch.setattr(source, "FLOOD_CHUNK_ELEMENTS", 7)
    chunked = send(truth, flooding(0.5, 2), 4, seed=2)
    np.testing.assert_array_equal(chunked.flooding, whole.flooding)


def test_flooding_a_million_sources_stays_within_memory():
    truth = np.random.default_rng(0).integers(0, 20, size=1_000_000)
    tracemalloc.start()
    try:
        messages = send(truth, flooding(0.5, 5), 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert messages.flooding.shape == (1_000_000, 5)
    assert peak < 200 * 2**20  # output 40 MB, the sampling draws, bounded chunk temporaries


# --- the scrambler step: dummies (Algorithm 1) ------------------------------------------------


def received_counts(sent, batches, size):
    """(K, T) messages each scrambler received: the sources' targets by consecutive batch."""
    keys = batches.batch_of(np.arange(len(sent))) * size + np.asarray(sent)
    return np.bincount(keys, minlength=batches.num_batches * size).reshape(-1, size)


def add_dummies(received, batch_sizes, dummies, *, capped, seed=0, first=0):
    received = np.asarray(received)
    return roles.scrambler_dummies(
        received,
        batch_sizes,
        countermeasure=Scramblers(
            sampling_rate=0.2,
            batch_size=int(np.max(batch_sizes)),
            num_dummies=dummies,
            capped=capped,
        ),
        randomness=Randomness(seed),
        flow="(b)",
        scramblers=np.arange(first, first + received.shape[0]),
    )


def setup(num_sources=12, batch_size=4, size=3, seed=0):
    """Received counts of the engines' batches for random targets, and the batch sizes."""
    batches = ConsecutiveBatches.of(num_sources, batch_size)
    sent = np.random.default_rng(seed).integers(0, size, size=num_sources)
    return received_counts(sent, batches, size), np.array(batches.sizes)


def test_scrambler_step_rejects_bad_input():
    received, sizes = setup()
    chosen = Scramblers(sampling_rate=0.2, batch_size=4, num_dummies=2)
    with pytest.raises(InvalidParameterError) as caught:
        roles.scrambler_dummies(
            received[:2],
            sizes,
            countermeasure=chosen,
            randomness=Randomness(0),
            flow="(b)",
            scramblers=[0, 1, 2],
        )
    assert caught.value.name == "received"
    with pytest.raises(InvalidParameterError) as caught:
        add_dummies(received, [4, 4], 2, capped=True)
    assert caught.value.name == "batch_sizes"
    with pytest.raises(InvalidParameterError) as caught:
        scrambler_dummy_counts(
            received, [4, 4, 4], num_dummies=2, capped=False, uniforms=np.zeros((3, 1))
        )
    assert caught.value.name == "uniforms"


def test_capped_limit_uses_the_smallest_scrambler():
    received, sizes = setup(num_sources=10, batch_size=4)  # balanced batches 4, 3, 3
    add_dummies(received, sizes, 6, capped=True)
    with pytest.raises(InvalidParameterError) as caught:
        add_dummies(received, sizes, 7, capped=True)  # (T − 1)·n = 6
    assert caught.value.name == "num_dummies"
    # The uncapped scrambler has no limit.
    add_dummies(received, sizes, 50, capped=False)


@pytest.mark.parametrize("capped", [False, True])
def test_dummies_shapes_and_totals(capped):
    received, sizes = setup(num_sources=10, batch_size=4)
    dummies = add_dummies(received, sizes, 3, capped=capped, seed=1)
    assert dummies.shape == (3, 3) and dummies.dtype == np.int64
    assert np.all(dummies >= 0)
    np.testing.assert_array_equal(dummies.sum(axis=1), [3, 3, 3])
    np.testing.assert_array_equal((received + dummies).sum(axis=1), [7, 6, 6])


def test_zero_dummies():
    received, sizes = setup()
    for capped in (False, True):
        assert not add_dummies(received, sizes, 0, capped=capped).any()


@pytest.mark.parametrize("capped", [False, True])
def test_dummies_are_reproducible_and_per_node(capped):
    received, sizes = setup(num_sources=300, batch_size=10, size=5)
    whole = add_dummies(received, sizes, 7, capped=capped, seed=3)
    again = add_dummies(received, sizes, 7, capped=capped, seed=3)
    np.testing.assert_array_equal(whole, again)
    part = add_dummies(received[12:15], sizes[12:15], 7, capped=capped, seed=3, first=12)
    np.testing.assert_array_equal(part, whole[12:15])


def test_capped_cap_is_never_exceeded_even_at_the_limit():
    # d = (T − 1)·n: every target ends with exactly n messages.
    size, n = 4, 5
    batches = ConsecutiveBatches.of(200 * n, n)
    received = received_counts(np.zeros(200 * n, dtype=np.int64), batches, size)
    sizes = np.array(batches.sizes)
    dummies = add_dummies(received, sizes, (size - 1) * n, capped=True, seed=1)
    np.testing.assert_array_equal(received + dummies, np.full((200, size), n))
    np.testing.assert_array_equal(dummies[:, 0], 0)


def test_capped_respects_the_short_scramblers_own_cap():
    # A scrambler left with 2 of its sources (the others missed the deadline) caps at 2.
    received = np.array([[5, 0, 0], [2, 0, 0]])
    dummies = add_dummies(received, [5, 2], 4, capped=True, seed=2)
    assert np.all(received + dummies <= np.array([5, 2])[:, None])
    np.testing.assert_array_equal(received[1] + dummies[1], [2, 2, 2])


def test_uncapped_can_exceed_the_cap():
    batches = ConsecutiveBatches.of(3000, 3)
    received = received_counts(np.zeros(3000, dtype=np.int64), batches, 3)
    sizes = np.array(batches.sizes)
    dummies = add_dummies(received, sizes, 6, capped=False)
    assert (received + dummies).max() > 3


def test_single_target_scrambler():
    received = np.array([[3], [3]])
    np.testing.assert_array_equal(received + add_dummies(received, [3, 3], 2, capped=False), 5)
    assert not add_dummies(received, [3, 3], 0, capped=True).any()


# --- the order of sending and of forwarding ------------------------------------------------


def test_shuffle_is_a_reproducible_permutation_per_scrambler():
    chosen = Scramblers(sampling_rate=0.2, batch_size=4, num_dummies=3)
    common = {"largest_batch": 4, "countermeasure": chosen, "flow": "(b)"}
    order = roles.scrambler_shuffle(6, randomness=Randomness(1), scrambler=2, **common)
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(6))
    again = roles.scrambler_shuffle(6, randomness=Randomness(1), scrambler=2, **common)
    np.testing.assert_array_equal(order, again)
    orders = {
        tuple(roles.scrambler_shuffle(7, randomness=Randomness(1), scrambler=k, **common))
        for k in range(20)
    }
    assert len(orders) > 15
    assert roles.scrambler_shuffle(0, randomness=Randomness(1), scrambler=0, **common).size == 0


def test_shuffle_order_is_uniform():
    # A scrambler of 2 sources and 1 dummy: each of the 3 messages is first with probability
    # 1/3 (over many scramblers).
    chosen = Scramblers(sampling_rate=0.2, batch_size=2, num_dummies=1)
    randomness = Randomness(0)
    firsts = np.array(
        [
            roles.scrambler_shuffle(
                3,
                largest_batch=2,
                countermeasure=chosen,
                randomness=randomness,
                flow="f",
                scrambler=k,
            )[0]
            for k in range(6000)
        ]
    )
    np.testing.assert_allclose(np.bincount(firsts, minlength=3) / 6000, 1 / 3, atol=0.03)


def test_send_order_is_a_permutation():
    order = roles.source_send_order(4, randomness=Randomness(3), flow="(a)", source=11)
    assert order.dtype == np.int64 and sorted(order.tolist()) == [0, 1, 2, 3]
    with pytest.raises(InvalidParameterError) as caught:
        roles.source_send_order(0, randomness=Randomness(3), flow="(a)", source=11)
    assert caught.value.name == "num_messages"


@pytest.mark.parametrize("num_messages", [1, 2, 5, 21])
def test_first_sent_is_the_first_of_each_sources_send_order(num_messages):
    randomness = Randomness(4)
    sources = np.array([0, 1, 2, 50, 7, 8])
    first = roles.source_first_sent(
        num_messages, randomness=randomness, flow="(a)", sources=sources
    )
    assert first.dtype == np.int64 and first.shape == (6,)
    for source, leading in zip(sources.tolist(), first.tolist(), strict=True):
        order = roles.source_send_order(
            num_messages, randomness=randomness, flow="(a)", source=source
        )
        assert order[0] == leading


@pytest.mark.parametrize(("batch", "dummies", "num_messages"), [(3, 0, 1), (3, 2, 5), (10, 4, 9)])
def test_first_forwarded_is_the_first_of_each_scramblers_shuffle(batch, dummies, num_messages):
    chosen = Scramblers(sampling_rate=0.1, batch_size=batch, num_dummies=dummies)
    randomness = Randomness(9, round=2)
    scramblers = np.arange(5, 25)
    common = {
        "largest_batch": batch,
        "countermeasure": chosen,
        "randomness": randomness,
        "flow": "(b)",
    }
    first = roles.scrambler_first_forwarded(num_messages, scramblers=scramblers, **common)
    assert first.dtype == np.int64 and first.shape == (20,)
    for scrambler, leading in zip(scramblers.tolist(), first.tolist(), strict=True):
        order = roles.scrambler_shuffle(num_messages, scrambler=scrambler, **common)
        assert order[0] == leading


def test_first_message_is_a_uniform_pick():
    randomness = Randomness(1)
    first = roles.source_first_sent(4, randomness=randomness, flow="f", sources=np.arange(80_000))
    np.testing.assert_allclose(np.bincount(first, minlength=4) / 80_000, 0.25, atol=0.006)


def test_orders_reject_too_many_messages():
    chosen = Scramblers(sampling_rate=0.1, batch_size=3, num_dummies=2)
    common = {"largest_batch": 3, "countermeasure": chosen, "randomness": Randomness(0)}
    for call in (
        lambda: roles.scrambler_shuffle(6, flow="f", scrambler=0, **common),
        lambda: roles.scrambler_first_forwarded(6, flow="f", scramblers=[0], **common),
        lambda: roles.source_first_sent(0, randomness=Randomness(0), flow="f", sources=[0]),
    ):
        with pytest.raises(InvalidParameterError) as caught:
            call()
        assert caught.value.name == "num_messages"
