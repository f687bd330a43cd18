"""Exact float sums: rounded once (math.fsum, Fractions), and mergeable whatever the split.

Every path of :mod:`dpcomm.queries.exactsum` is forced in turn (float64 bins, int64 bins
sorted, Python-int bins, plain float64 sums of few-bit values, chunks): all give the same bits.
"""

from __future__ import annotations

import contextlib
import math
import pickle
from collections.abc import Iterator
from fractions import Fraction
from unittest import mock

import numpy as np
import pytest
from _float_reference import reference_mean, reference_sum
from hypothesis import given, settings, strategies as st
from tests.conftest import canonical

from dpcomm.errors import InvalidParameterError
from dpcomm.queries import exactsum
from dpcomm.queries.exactsum import exact_row_sums, exact_sums, merge_exact_sums

EDGES = [
    0.0,
    -0.0,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    -2.2250738585072009e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    8.98846567431158e307,
    1.0,
    -1.0,
    2.0**53,
    2.0**53 + 2,
    1e-300,
    1e300,
    math.inf,
    -math.inf,
    math.nan,
]
finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([v for v in EDGES if math.isfinite(v)]),
    st.integers(-(2**60), 2**60).map(float),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
)
any_floats = st.one_of(finite_floats, st.sampled_from(EDGES))
MODES = ("default", "sorted", "python", "bins", "chunks")


@contextlib.contextmanager
def forced(mode: str) -> Iterator[None]:
    """Force one computation path of exactsum."""
    never = {"_plain_sums_are_exact": lambda data, largest: False}
    patches = {
        "default": {},
        # Neither the float64 bins nor the plain float64 sums: int64 bins, sorted.
        "sorted": {"_FLOAT_VALUES": 0, **never},
        # Python-int bins (as beyond 2^36 values).
        "python": {"_FLOAT_VALUES": 0, "_INT64_VALUES": 0, **never},
        # Bins even for few-bit values.
        "bins": never,
        # Tiny chunks and scans, merged.
        "chunks": {"_CHUNK_VALUES": 3, "_SCAN_VALUES": 2},
    }[mode]
    with contextlib.ExitStack() as stack:
        for name, value in patches.items():
            stack.enter_context(mock.patch.object(exactsum, name, value))
        yield


def by_group(values: list[float], groups: list[int], count: int) -> list[list[float]]:
    members: list[list[float]] = [[] for _ in range(count)]
    for value, group in zip(values, groups, strict=True):
        members[group].append(value)
    return members


@st.composite
def grouped_values(draw: st.DrawFn, elements: st.SearchStrategy[float] = any_floats):
    count = draw(st.integers(1, 4))
    values = draw(st.lists(elements, max_size=40))
    groups = draw(st.lists(st.integers(0, count - 1), min_size=len(values), max_size=len(values)))
    return values, groups, count


@settings(max_examples=300, deadline=None)
@given(data=grouped_values(), mode=st.sampled_from(MODES))
def test_sums_and_means_are_the_exact_values_rounded_once(data, mode):
    values, groups, count = data
    with forced(mode):
        sums = exact_sums(np.array(values, dtype=np.float64), np.array(groups), count)
        rounded, means = sums.sums(), sums.means()
    members = by_group(values, groups, count)
    assert canonical(rounded) == canonical([reference_sum(m) for m in members])
    assert canonical(means) == canonical([reference_mean(m) for m in members])
    assert sums.counts.tolist() == [len(m) for m in members]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(finite_floats, min_size=1, max_size=40))
def test_a_finite_sum_is_math_fsum(values):
    try:
        expected = math.fsum(values)
    except OverflowError:
        expected = None  # fsum gives up; the exact sum rounds to ±inf (tested above)
    result = exact_sums(np.array(values), np.zeros(len(values), dtype=np.int64), 1).sums()[0]
    if expected is not None:
        assert result == expected  # 0.0 == -0.0: fsum of [-0.0] is 0.0 in Python 3.11


@st.composite
def splits(draw: st.DrawFn):
    values, groups, count = draw(grouped_values())
    pieces = draw(st.integers(1, 5))
    labels = draw(st.lists(st.integers(0, pieces - 1), min_size=len(values), max_size=len(values)))
    order = draw(st.permutations(range(pieces)))
    # Each piece numbers the groups its own way (a permutation of the merged groups).
    relabel = [draw(st.permutations(range(count))) for _ in range(pieces)]
    return values, groups, count, labels, order, relabel


@settings(max_examples=300, deadline=None)
@given(split=splits(), mode=st.sampled_from(MODES))
def test_any_split_merged_in_any_order_gives_the_same_bits(split, mode):
    values, groups, count, labels, order, relabel = split
    array, owners = np.array(values, dtype=np.float64), np.array(groups, dtype=np.int64)
    with forced(mode):
        whole = exact_sums(array, owners, count)
        parts, maps = [], []
        for piece in order:
            rows = np.flatnonzero(np.array(labels, dtype=np.int64) == piece)
            local = np.argsort(relabel[piece])  # merged group -> the piece's own number
            parts.append(exact_sums(array[rows], local[owners[rows]], count))
            maps.append(np.array(relabel[piece]))
        merged = merge_exact_sums(parts, maps, count)
        # Associativity: the first two parts merged first, then the rest.
        if len(parts) > 2:
            identity = np.arange(count)
            first = merge_exact_sums(parts[:2], maps[:2], count)
            nested = merge_exact_sums([first, *parts[2:]], [identity, *maps[2:]], count)
        else:
            nested = merged
        outcomes = [(s.sums(), s.means(), s.counts.tolist()) for s in (whole, merged, nested)]
    assert canonical(outcomes[1]) == canonical(outcomes[0])
    assert canonical(outcomes[2]) == canonical(outcomes[0])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(finite_floats, min_size=0, max_size=30),
    centre=finite_floats,
    mode=st.sampled_from(MODES),
)
def test_centred_sums_are_the_exact_centred_sums_rounded_once(values, centre, mode):
    """Σ (x − c) = Σ x − n·c exactly, rounded once to the nearest double (Fractions)."""
    with forced(mode):
        sums = exact_sums(np.asarray(values, dtype=np.float64), np.zeros(len(values), int), 1)
        (centred,) = sums.centred_sums([centre])
    exact = sum((Fraction(v) for v in values), Fraction(0)) - len(values) * Fraction(centre)
    try:
        expected = float(exact)
    except OverflowError:
        expected = math.inf if exact > 0 else -math.inf
    assert centred == expected


def test_centred_sums_refuse_values_that_are_not_finite():
    sums = exact_sums(np.array([1.0, math.nan]), np.zeros(2, int), 1)
    with pytest.raises(InvalidParameterError, match="finite"):
        sums.centred_sums([0.0])
    with pytest.raises(InvalidParameterError, match="centres"):
        sums.centred_sums([0.0, 1.0])


def test_no_part_and_empty_parts_merge_to_no_value():
    empty = exact_sums(np.zeros(0), np.zeros(0, dtype=np.int64), 3)
    assert empty.sums() == [None, None, None]
    assert merge_exact_sums([], [], 2).means() == [None, None]
    merged = merge_exact_sums([empty, empty], [np.arange(3), np.array([2, 1, 0])], 3)
    assert merged.sums() == [None, None, None]


@settings(max_examples=100, deadline=None)
@given(
    rows=st.integers(0, 30),
    dimension=st.integers(1, 5),
    count=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["float32 grid", "float32 wide", "float64", "edges"]),
    mode=st.sampled_from(MODES),
)
def test_row_sums_are_the_sums_of_the_labelled_values(rows, dimension, count, seed, kind, mode):
    rng = np.random.default_rng(seed)
    if kind == "float32 grid":
        matrix = (rng.integers(0, 256, (rows, dimension)) / 255).astype(np.float32)
    elif kind == "float32 wide":
        matrix = rng.normal(size=(rows, dimension)) * 10.0 ** rng.integers(-30, 30, (rows, 1))
        matrix = matrix.astype(np.float32)
    elif kind == "float64":
        matrix = rng.normal(size=(rows, dimension)) * 10.0 ** rng.integers(-5, 5, (rows, 1))
    else:
        matrix = rng.choice(np.array(EDGES), size=(rows, dimension))
    owners = rng.integers(0, count, rows)
    labels = owners[:, None] * dimension + np.arange(dimension)[None, :]
    with forced(mode):
        by_rows = exact_row_sums(matrix, owners, count)
        by_values = exact_sums(matrix.reshape(-1), labels.reshape(-1), count * dimension)
        assert canonical(by_rows.sums()) == canonical(by_values.sums())
        assert canonical(by_rows.means()) == canonical(by_values.means())
    assert by_rows.counts.tolist() == by_values.counts.tolist()


def test_sums_are_picklable_and_take_reorders_groups():
    sums = exact_sums(np.array([1.5, 2.0**-1074, -3.0, 1e300]), np.array([0, 1, 2, 1]), 3)
    again = pickle.loads(pickle.dumps(sums))
    assert canonical(again.sums()) == canonical(sums.sums())
    taken = sums.take([2, 0])
    assert taken.sums() == [-3.0, 1.5]
    assert sums.take([]).sums() == []


def test_many_copies_of_one_value_sum_exactly():
    # 3 · 2^21 copies of 0.1 (summed in chunks, merged): the exact sum rounded once.
    values = np.full(3 << 21, 0.1)
    total = exact_sums(values, np.zeros(len(values), dtype=np.int64), 1).sums()[0]
    assert total == float(Fraction(0.1) * (3 << 21))
    assert total != float(np.add.reduce(values))  # a float sum drifts


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.7976931348623157e308, 1.7976931348623157e308], math.inf),
        ([-1.7976931348623157e308, -1e300, -1.7976931348623157e308], -math.inf),
        (
            [1.7976931348623157e308, 1.7976931348623157e308, -1.7976931348623157e308],
            1.7976931348623157e308,
        ),
        ([math.inf, 1.0], math.inf),
        ([math.inf, -math.inf], math.nan),
        ([math.nan, 1.0], math.nan),
        ([-0.0, -0.0], -0.0),
        ([-0.0, 0.0], 0.0),
        ([1.0, -1.0], 0.0),
        ([0.1] * 10, 1.0),
        ([1e16, 1.0, -1e16], 1.0),
    ],
)
def test_special_values(values, expected):
    total = exact_sums(np.array(values), np.zeros(len(values), dtype=np.int64), 1).sums()[0]
    assert canonical(total) == canonical(expected)


def test_the_mean_of_an_overflowing_sum_is_finite():
    values = [1.7976931348623157e308] * 3
    sums = exact_sums(np.array(values), np.zeros(3, dtype=np.int64), 1)
    assert sums.sums() == [math.inf]
    assert sums.means() == [1.7976931348623157e308]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sums_keep_the_sign_of_negative_zeros(dtype):
    matrix = np.array([[-0.0, -0.0, 0.0], [-0.0, 0.0, -0.0]], dtype=dtype)
    sums = exact_row_sums(matrix, np.array([0, 0]), 1)
    assert canonical(sums.sums()) == canonical([-0.0, 0.0, 0.0])
    single = exact_row_sums(np.array([[-0.0]], dtype=dtype), np.array([0]), 1)
    assert canonical(single.means()) == canonical([-0.0])


def test_numpy_rounds_the_common_groups_and_leaves_the_edges_to_python():
    """K-means-like sums (float32 points: one bin per group) are all rounded by numpy; a mean
    below the normal range, a sum beyond it and a total over 2^53 are left to the Python
    integers (NaN in numpy's pass), and both passes give the exact value rounded once."""
    rng = np.random.default_rng(0)
    points = rng.normal(size=(500, 8)).astype(np.float32)
    sums = exact_row_sums(points, rng.integers(0, 4, 500), 4)
    assert not np.isnan(sums._rounded_by_numpy(divide=True)).any()
    columns = [points[:, c].astype(np.float64).tolist() for c in range(8)]
    whole = exact_row_sums(points, np.zeros(500, dtype=np.int64), 1).means()
    assert whole == [reference_mean(column) for column in columns]
    edges = [[5e-324, 0.0, 0.0], [8.98846567431158e307] * 2, [2.0**60, 1.0]]
    values = [v for group in edges for v in group]
    owners = [g for g, group in enumerate(edges) for _ in group]
    sums = exact_sums(np.array(values), np.array(owners), len(edges))
    assert np.isnan(sums._rounded_by_numpy(divide=True)[[0]]).all()
    assert np.isnan(sums._rounded_by_numpy(divide=False)[[1, 2]]).all()
    assert canonical(sums.means()) == canonical([reference_mean(g) for g in edges])
    assert canonical(sums.sums()) == canonical([reference_sum(g) for g in edges])
