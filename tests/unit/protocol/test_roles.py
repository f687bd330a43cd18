"""The role steps every engine calls (:mod:`dpcomm.protocol.roles`), over arrays of nodes."""

import numpy as np
import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Scramblers
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness

# --- the order of sending and of forwarding ------------------------------------------------


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
        assert sorted(order.tolist()) == list(range(num_messages))
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
        assert sorted(order.tolist()) == list(range(num_messages))
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
