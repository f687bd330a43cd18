"""The accountant's binomial functions are scipy.stats.binom's, to the bit."""

import itertools

import numpy as np
import pytest
from scipy.stats import binom as scipy_binom

from dpcomm.accounting import binomial


@pytest.mark.parametrize("name", ["pmf", "cdf", "sf"])
def test_random_arguments_in_the_support(name):
    rng = np.random.default_rng(7)
    n = rng.integers(0, 5000, 20_000)
    p = rng.random(20_000)
    k = rng.integers(0, 5001, 20_000) % (n + 1)
    ours, theirs = getattr(binomial, name), getattr(scipy_binom, name)
    assert np.array_equal(ours(k, n, p), theirs(k, n, p))
    assert np.array_equal(ours(k, n[:, None][:5], 0.3), theirs(k, n[:, None][:5], 0.3))


@pytest.mark.parametrize("name", ["pmf", "cdf", "sf"])
def test_edges_and_invalid_arguments(name):
    ks = [-np.inf, -3, -1, 0, 0.5, 1, 2.5, 3, 9, 10, 11, 1e9, np.inf, np.nan]
    ns = [0, 1, 3, 10, 2.5, -1, np.nan]
    ps = [0.0, 1e-12, 0.5, 1.0, 1.5, -0.1, np.nan]
    k, n, p = (np.array(v, dtype=float) for v in zip(*itertools.product(ks, ns, ps), strict=True))
    ours, theirs = getattr(binomial, name), getattr(scipy_binom, name)
    with np.errstate(invalid="ignore"):
        expected = theirs(k, n, p)
    got = ours(k, n, p)
    assert np.array_equal(got, expected, equal_nan=True)


@pytest.mark.parametrize("name", ["pmf", "cdf", "sf"])
def test_scalars_give_scalars(name):
    ours, theirs = getattr(binomial, name), getattr(scipy_binom, name)
    got, expected = ours(3, 10, 0.2), theirs(3, 10, 0.2)
    assert type(got) is type(expected) and got == expected
    assert ours(np.int64(4), 10, 0.5) == theirs(np.int64(4), 10, 0.5)


def test_numpys_namespace_is_whole_after_the_import():
    """scipy.special imports with f2py and testing hidden from numpy's namespace (they cost
    0.1 s of a ``dpcomm account``); numpy is given back whole."""
    assert {"f2py", "testing"} <= set(np.__all__)
    assert {"f2py", "testing"} <= set(dir(np))
    assert np.testing.assert_equal is not None
