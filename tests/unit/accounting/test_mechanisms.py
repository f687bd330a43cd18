import math

import numpy as np
import pytest

from dpcomm.accounting import (
    GenericLocalRandomizer,
    GenericScrambler,
    LocalRandomizer,
    PrivacyGuarantee,
    ScramblerMechanism,
    compose_parallel,
    compose_sequential,
)
from dpcomm.errors import InvalidParameterError


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_targets": 1, "sampling_rate": 0.2}, "num_targets"),
        ({"num_targets": 20, "sampling_rate": -0.1}, "sampling_rate"),
        ({"num_targets": 20, "sampling_rate": 1.5}, "sampling_rate"),
        ({"num_targets": 20, "sampling_rate": math.nan}, "sampling_rate"),
        ({"num_targets": 20, "sampling_rate": math.inf}, "sampling_rate"),
        ({"num_targets": 20, "sampling_rate": 0.2, "num_dummies": 20}, "num_dummies"),
        ({"num_targets": 20, "sampling_rate": 0.2, "num_dummies": -1}, "num_dummies"),
        ({"num_targets": 2.5, "sampling_rate": 0.2}, "num_targets"),
    ],
)
def test_local_randomizer_rejects_bad_input(kwargs, name):
    with pytest.raises(InvalidParameterError) as caught:
        LocalRandomizer(**kwargs)
    assert caught.value.name == name
    message = str(caught.value)
    assert name in message and "expected" in message and "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"num_dummies": -3}, "num_dummies"),
        ({"num_targets": 1}, "num_targets"),
        ({"sampling_rate": 2.0}, "sampling_rate"),
        ({"capped": True, "num_dummies": 10**6}, "num_dummies"),
    ],
)
def test_scrambler_rejects_bad_input(kwargs, name):
    base = {"num_targets": 20, "sampling_rate": 0.2, "batch_size": 100, "num_dummies": 50}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError) as caught:
        ScramblerMechanism(**base)
    assert caught.value.name == name


def test_mechanisms_are_immutable():
    mechanism = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
    )
    with pytest.raises(AttributeError):
        mechanism.num_dummies = 3  # type: ignore[misc]


def test_sigma_convention_and_conversion():
    randomizer = LocalRandomizer(num_targets=20, sampling_rate=0.2)
    assert randomizer.truth_probability == pytest.approx(1 - 0.2 + 0.2 / 20)
    assert randomizer.other_probability == pytest.approx(0.2 / 20)
    # σ' of the capped theorem: probability of going to one of the T − 1 others in total.
    assert randomizer.lie_rate == pytest.approx(19 * 0.2 / 20)
    matrix = randomizer.transition_matrix()
    assert np.allclose(matrix.sum(axis=1), 1.0)


def test_generic_randomizer_blanket_of_randomized_response():
    randomizer = LocalRandomizer(num_targets=5, sampling_rate=0.3)
    generic = GenericLocalRandomizer.from_matrix(randomizer.transition_matrix())
    assert generic.total_variation_similarity == pytest.approx(0.3)
    assert np.allclose(generic.blanket, 0.2)
    assert generic.epsilon0 == pytest.approx(math.log1p(0.7 * 5 / 0.3))


def test_generic_randomizer_validation():
    with pytest.raises(InvalidParameterError):
        GenericLocalRandomizer.from_matrix([[0.5, 0.6], [0.5, 0.5]])
    with pytest.raises(InvalidParameterError):
        GenericLocalRandomizer.from_matrix([[1.0]])
    with pytest.raises(InvalidParameterError):
        GenericLocalRandomizer.from_matrix([[1.5, -0.5], [0.5, 0.5]])
    generic = GenericLocalRandomizer.from_matrix([[1.0, 0.0], [0.0, 1.0]])
    assert math.isinf(generic.epsilon0)
    assert generic.total_variation_similarity == 0.0
    with pytest.raises(InvalidParameterError):
        GenericScrambler(randomizer=generic, batch_size=0, num_dummies=1)


def test_composition_along_paths_and_across_clusters():
    first = PrivacyGuarantee(0.5, 1e-5, "exact")
    second = PrivacyGuarantee(0.25, 2e-5, "bennett")
    path = compose_sequential([first, second])
    assert path.epsilon == pytest.approx(0.75) and path.delta == pytest.approx(3e-5)
    across = compose_parallel([first, second])
    assert across.epsilon == 0.5 and across.delta == 2e-5
    assert compose_sequential([]).epsilon == 0.0
    with pytest.raises(InvalidParameterError):
        PrivacyGuarantee(-1.0, 0.0, "x")
    with pytest.raises(InvalidParameterError):
        PrivacyGuarantee(1.0, 1.5, "x")
