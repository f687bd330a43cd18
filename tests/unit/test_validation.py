"""The shared parameter checks (dpcomm.validation): values through, one-line errors otherwise."""

import math

import numpy as np
import pytest

from dpcomm.errors import InvalidParameterError
from dpcomm.validation import (
    MAX_SEED,
    check_column_bounds,
    check_delta,
    check_epsilon,
    check_int,
    check_number,
    check_probability,
    check_seed,
    make_rng,
)


def message(check, *args, **kwargs):
    with pytest.raises(InvalidParameterError) as caught:
        check(*args, **kwargs)
    text = str(caught.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("bounds", "allowed"),
    [
        ({"above": 0.0}, "a finite number > 0"),
        ({"at_least": 0.0}, "a finite number >= 0"),
        ({"above": 0.0, "below": 1.0}, "a number in (0, 1)"),
        ({"above": 0.0, "at_most": 1.0}, "a number in (0, 1]"),
        ({"at_least": 0.0, "below": 1.0}, "a number in [0, 1)"),
        ({"at_most": 2.5}, "a finite number <= 2.5"),
        ({}, "a finite number"),
    ],
)
def test_check_number_says_its_range(bounds, allowed):
    for bad in (math.nan, math.inf, True, "1", None):
        assert message(check_number, "x", bad, **bounds) == (
            f"invalid x: expected {allowed}, got {bad!r}"
        )
    inside = 0.5 if "at_most" not in bounds or bounds["at_most"] > 0.5 else 0.0
    assert check_number("x", inside, **bounds) == inside
    assert isinstance(check_number("x", np.float32(0.5), **bounds), float)


def test_check_number_bounds_are_open_or_closed():
    assert check_number("x", 0.0, at_least=0.0) == 0.0
    message(check_number, "x", 0.0, above=0.0)
    assert check_number("x", 1.0, at_most=1.0) == 1.0
    message(check_number, "x", 1.0, below=1.0)
    with pytest.raises(TypeError):
        check_number("x", 0.5, above=0.0, at_least=0.0)


def test_the_named_checks_keep_their_messages():
    assert (
        message(check_delta, "delta", 1.0) == "invalid delta: expected a number in [0, 1), got 1.0"
    )
    assert message(check_epsilon, "epsilon", -1) == (
        "invalid epsilon: expected a number in [0, 200], got -1"
    )
    assert message(check_probability, "sampling_rate", 1e-13).startswith(
        "invalid sampling_rate: expected a number in [0, 1] (0, or at least 1e-12)"
    )
    assert check_int("n", 3.0, minimum=1) == 3
    assert message(check_int, "n", 0, minimum=1, maximum=5) == (
        "invalid n: expected an integer in [1, 5], got 0"
    )


@pytest.mark.parametrize("bad", [-1, MAX_SEED + 1, 1.5, True, "7", [1], None])
def test_one_seed_check_one_message(bad):
    expected = f"invalid seed: expected an integer in [0, 2^127 - 1], got {bad!r}"
    assert message(check_seed, bad) == expected


def test_seeds_in_range_pass_and_make_reproducible_generators():
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == MAX_SEED
    assert check_seed(np.int64(5)) == 5 and check_seed(5.0) == 5
    assert make_rng(3).random() == make_rng(3).random()
    generator = np.random.default_rng(1)
    assert make_rng(generator) is generator
    assert isinstance(make_rng(None), np.random.Generator)
    assert message(make_rng, -1) == "invalid rng: expected an integer in [0, 2^127 - 1], got -1"


@pytest.mark.parametrize("bad", [-1, 2**127, 1.5, True, "7"])
def test_every_seed_parameter_gives_the_same_message(bad):
    """One seed check: a run's randomness, the synthetic and diabetes tables, K-means' start
    and the Monte Carlo estimate of the accountant reject a bad seed in the same words."""
    from dpcomm.accounting import LocalRandomizer, account
    from dpcomm.data import synthetic_table
    from dpcomm.data.diabetes import generate_diabetes
    from dpcomm.data.synthetic import SyntheticRows
    from dpcomm.protocol.randomness import Randomness
    from dpcomm.queries.kmeans import KMeansProgram

    expected = message(check_seed, bad)
    points = np.arange(20, dtype=float).reshape(10, 2)
    entries = [
        lambda: Randomness(bad),
        lambda: synthetic_table(num_rows=10, seed=bad),
        lambda: SyntheticRows(10, seed=bad),
        lambda: generate_diabetes(num_rows=10, seed=bad),
        lambda: KMeansProgram(points, 2, 1, seed=bad),
        lambda: account(LocalRandomizer(num_targets=3, sampling_rate=0.5), seed=bad),
    ]
    for entry in entries:
        assert message(entry) == expected


@pytest.mark.parametrize(
    "bounds",
    [None, [(0.0, 1.0)], [(0.0, 1.0), (2.0, 2.0)], [(0.0, math.inf), (0.0, 1.0)], {"a": (0, 1)}],
)
def test_bad_bounds_are_refused_in_one_line(bounds) -> None:
    with pytest.raises(InvalidParameterError, match="bounds") as error:
        check_column_bounds(bounds, 2)
    assert "\n" not in str(error.value)
