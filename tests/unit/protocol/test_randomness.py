"""One derivation of every draw: per-node draws, reproducibility, uniformity, validation."""

from __future__ import annotations

import hashlib
import itertools
import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

from dpcomm.errors import InvalidParameterError
from dpcomm.protocol.randomness import (
    Randomness,
    Stream,
    permutation_from,
    uniform_integers,
)
from dpcomm.validation import MAX_SEED

SAMPLE = Stream("source", "(a)", "sample", 2)
# Significance of the distribution tests: at a fixed seed they are deterministic, and a level
# this small only fails for a real departure from uniformity (or a changed derivation).
ALPHA = 1e-4


def reference_uniforms(seed: int, round_: int, stream: Stream, node: int) -> np.ndarray:
    """The documented derivation, written again from the module's docstring.

    key = SHA-256("dpcomm/randomness/v1" ‖ seed (16 bytes) ‖ round (8 bytes) ‖ each of role,
    flow, purpose as a 4-byte length and UTF-8); node i reads AES-256-CTR from block
    i·⌈per_node/2⌉, little-endian 64-bit words, u = (w >> 11)·2^-53.
    """
    digest = hashlib.sha256(b"dpcomm/randomness/v1")
    digest.update(seed.to_bytes(16, "big"))
    digest.update(struct.pack(">Q", round_))
    for part in (stream.role, stream.flow, stream.purpose):
        encoded = part.encode("utf-8")
        digest.update(struct.pack(">I", len(encoded)) + encoded)
    blocks = -(-stream.per_node // 2)
    counter = (node * blocks).to_bytes(16, "big")
    encryptor = Cipher(algorithms.AES(digest.digest()), modes.CTR(counter)).encryptor()
    data = encryptor.update(bytes(16 * blocks)) + encryptor.finalize()
    words = [int.from_bytes(data[8 * i : 8 * i + 8], "little") for i in range(stream.per_node)]
    return np.array([(w >> 11) * 2.0**-53 for w in words])


@pytest.mark.parametrize("per_node", [1, 2, 3, 8])
def test_node_alone_equals_its_row_among_contiguous_nodes(per_node):
    stream = Stream("scrambler", "(b)", "dummies", per_node)
    randomness = Randomness(5)
    everyone = randomness.uniforms(stream, np.arange(40))
    assert everyone.shape == (40, per_node)
    for node in range(40):
        alone = Randomness(5).uniforms(stream, [node])
        assert np.array_equal(alone, everyone[node : node + 1])
    # Any contiguous slice (not starting at 0) gives the same rows.
    assert np.array_equal(randomness.uniforms(stream, np.arange(17, 31)), everyone[17:31])


@pytest.mark.parametrize("per_node", [1, 2, 3])
def test_a_run_of_nodes_in_any_order_gives_their_rows(per_node):
    stream = Stream("scrambler", "(b)", "shuffle", per_node)
    randomness = Randomness(8)
    rows = randomness.uniforms(stream, np.arange(3, 13))
    for nodes in (np.arange(12, 2, -1), np.array([4, 3, 5, 6, 7, 8, 9, 10, 11, 12])):
        assert np.array_equal(randomness.uniforms(stream, nodes), rows[nodes - 3])
    # Each call returns a new array: changing one leaves the next draws alone.
    rows[:] = -1.0
    assert np.all(randomness.uniforms(stream, np.arange(3, 13)) >= 0.0)


@pytest.mark.parametrize("per_node", [1, 5])
def test_node_alone_equals_its_row_among_scattered_nodes(per_node):
    stream = Stream("source", "(a, b)", "flood", per_node)
    randomness = Randomness(123)
    # Far apart (one keystream per window) and unsorted with a repeat (one covering keystream).
    for nodes in ([0, 100_000, 7, 5_000_000_000], [9, 3, 4, 9, 5, 6]):
        together = randomness.uniforms(stream, nodes)
        assert together.shape == (len(nodes), per_node)
        for row, node in zip(together, nodes, strict=True):
            assert np.array_equal(row, Randomness(123).uniforms(stream, [node])[0])
    covering = randomness.uniforms(stream, np.arange(10))
    assert np.array_equal(
        randomness.uniforms(stream, [9, 3, 4, 9, 5, 6]), covering[[9, 3, 4, 9, 5, 6]]
    )


@pytest.mark.parametrize("per_node", [1, 2, 3])
def test_a_sparse_spread_of_nodes_equals_their_rows_among_all(per_node):
    # A Dask partition's sources: one in eight, spread over several keystream windows.
    stream = Stream("source", "(a)", "sample", per_node)
    randomness = Randomness(8)
    everyone = randomness.uniforms(stream, np.arange(300_000))
    nodes = np.random.default_rng(0).permutation(300_000)[:30_000]
    nodes[-1] = nodes[0]  # a repeat
    assert np.array_equal(randomness.uniforms(stream, nodes), everyone[nodes])


@pytest.mark.parametrize("per_node", [1, 2, 7])
def test_draws_follow_the_documented_derivation(per_node):
    stream = Stream("coordinator", "(é, 🙂)", "assign", per_node)
    for seed, round_, node in [(0, 0, 0), (2**100 + 3, 4, 9), (MAX_SEED, 1, 12_345)]:
        got = Randomness(seed, round=round_).uniforms(stream, [node])[0]
        assert np.array_equal(got, reference_uniforms(seed, round_, stream, node))


def test_seeded_draws_are_reproducible():
    nodes = np.arange(50)
    first = Randomness(2024).uniforms(SAMPLE, nodes)
    assert np.array_equal(first, Randomness(2024).uniforms(SAMPLE, nodes))
    # A numpy integer or an integral float is the same seed.
    assert np.array_equal(first, Randomness(np.int64(2024)).uniforms(SAMPLE, nodes))
    assert np.array_equal(first, Randomness(2024.0).uniforms(SAMPLE, nodes))
    # Asking twice from one object gives the same draws (a node asks again, same answer).
    randomness = Randomness(2024)
    assert np.array_equal(randomness.uniforms(SAMPLE, nodes), randomness.uniforms(SAMPLE, nodes))


@pytest.mark.parametrize(
    ("other", "stream"),
    [
        (Randomness(8), SAMPLE),  # another seed
        (Randomness(7, round=1), SAMPLE),  # another round
        (Randomness(7), Stream("scrambler", "(a)", "sample", 2)),  # another role
        (Randomness(7), Stream("source", "(b)", "sample", 2)),  # another flow
        (Randomness(7), Stream("source", "(a)", "flood", 2)),  # another purpose
    ],
    ids=["seed", "round", "role", "flow", "purpose"],
)
def test_draws_differ_between_seeds_rounds_roles_flows_and_purposes(other, stream):
    nodes = np.arange(20)
    base = Randomness(7).uniforms(SAMPLE, nodes)
    changed = other.uniforms(stream, nodes)
    # 40 uniforms with 53 random bits: any coincidence means the inputs were not all mixed in.
    assert not np.any(base == changed)


def test_names_are_length_prefixed_not_concatenated():
    # ("ab", "c") and ("a", "bc") must not give the same key.
    first = Randomness(1).uniforms(Stream("source", "ab", "c", 4), [0])
    second = Randomness(1).uniforms(Stream("source", "a", "bc", 4), [0])
    assert not np.any(first == second)


def test_unseeded_draws_differ_between_two_instances():
    nodes = np.arange(20)
    first = Randomness(None).uniforms(SAMPLE, nodes)
    second = Randomness().uniforms(SAMPLE, nodes)
    assert not np.any(first == second)


def test_uniforms_lie_in_unit_interval_on_a_53_bit_grid():
    draws = Randomness(99).uniforms(Stream("source", "f", "p", 9), np.arange(2_000))
    assert draws.dtype == np.float64
    assert draws.min() >= 0.0
    assert draws.max() < 1.0
    scaled = draws * 2.0**53
    assert np.array_equal(scaled, np.floor(scaled))


def test_empty_node_set_and_zero_width_streams():
    randomness = Randomness(3)
    assert randomness.uniforms(SAMPLE, []).shape == (0, 2)
    assert randomness.uniforms(Stream("source", "f", "none", 0), [0, 1, 2]).shape == (3, 0)


def test_uniforms_pass_kolmogorov_smirnov_and_chi_square_at_a_fixed_seed():
    draws = Randomness(31_415).uniforms(Stream("scrambler", "f", "shuffle", 5), np.arange(40_000))
    flat = draws.ravel()
    assert stats.kstest(flat, "uniform").pvalue > ALPHA
    counts = np.bincount((flat * 100).astype(np.int64), minlength=100)
    assert stats.chisquare(counts).pvalue > ALPHA
    # Columns are independent of each other: a 10 × 10 contingency table of two columns.
    table = np.zeros((10, 10), dtype=np.int64)
    np.add.at(table, ((draws[:, 0] * 10).astype(int), (draws[:, 3] * 10).astype(int)), 1)
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_uniform_integers_cover_their_range_uniformly():
    draws = Randomness(4).uniforms(Stream("source", "f", "sample", 1), np.arange(60_000))[:, 0]
    values = uniform_integers(draws, 7)
    assert values.dtype == np.int64
    counts = np.bincount(values, minlength=7)
    assert counts.shape == (7,)
    assert stats.chisquare(counts).pvalue > ALPHA
    # The largest uniform still maps below the bound, with a scalar or a per-draw bound.
    largest = 1.0 - 2.0**-53
    assert uniform_integers([largest], 3).tolist() == [2]
    assert uniform_integers([largest, 0.0, 0.5], [5, 5, 2]).tolist() == [4, 0, 1]
    assert uniform_integers([largest], 2**60).tolist() == [2**60 - 1 - 127]


def test_permutation_from_is_uniform_over_the_six_permutations_of_three():
    draws = Randomness(17).uniforms(Stream("scrambler", "f", "shuffle", 3), np.arange(60_000))
    index = {p: i for i, p in enumerate(itertools.permutations(range(3)))}
    observed = np.zeros(6, dtype=np.int64)
    for row in draws:
        observed[index[tuple(permutation_from(row).tolist())]] += 1
    assert observed.sum() == 60_000
    assert stats.chisquare(observed).pvalue > ALPHA
    assert np.all(np.abs(observed / 60_000 - 1 / 6) < 0.01)


def test_permutation_from_breaks_ties_by_index():
    assert permutation_from([0.5, 0.5, 0.1]).tolist() == [2, 0, 1]
    assert permutation_from([]).tolist() == []
    assert permutation_from([0.3, 0.2, 0.9, 0.0]).tolist() == [3, 1, 0, 2]


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 1.5, True, "7", [1]])
def test_invalid_seeds_are_rejected(seed):
    with pytest.raises(InvalidParameterError, match="seed"):
        Randomness(seed)


@pytest.mark.parametrize("round_", [-1, 0.5, False, None])
def test_invalid_rounds_are_rejected(round_):
    with pytest.raises(InvalidParameterError, match="round"):
        Randomness(1, round=round_)


@pytest.mark.parametrize(
    ("role", "per_node", "name"),
    [
        ("attacker", 2, "role"),
        ("Source", 2, "role"),
        ("source", -1, "per_node"),
        ("source", 1.5, "per_node"),
        ("source", True, "per_node"),
    ],
)
def test_invalid_streams_are_rejected(role, per_node, name):
    with pytest.raises(InvalidParameterError, match=name):
        Stream(role, "f", "p", per_node)


def test_negative_node_indices_are_rejected():
    with pytest.raises(InvalidParameterError, match="nodes"):
        Randomness(1).uniforms(SAMPLE, [3, -1])
    with pytest.raises(InvalidParameterError, match="nodes"):
        Randomness(1).uniforms(SAMPLE, [-5, 1_000_000])
