"""Group-by partials: any split of the rows, merged in any order, finalizes to the whole.

The pieces are disjoint masks of one table (the result is then the same bit for bit, keys
included) or tables of their own (keys equal with ``==``: a group of 0.0 and -0.0 takes the key
of its first row, which depends on the piece). Values cover NULLs, NaN, ±inf, -0.0, huge, tiny
and subnormal floats, integers near the int64 limits and beyond, DECIMALs and text.
"""

from __future__ import annotations

import decimal
import math
import pickle
from decimal import Decimal
from typing import Any

import numpy as np
from _float_reference import (
    NEGATIVE_NAN,
    PAYLOAD_NAN,
    loose,
    reference_mean,
    reference_sum,
)
from hypothesis import given, settings, strategies as st
from tests.conftest import canonical

from dpcomm.data.table import Column, Table, decimal_of, exact_integers
from dpcomm.queries.groupby import (
    empty_partials,
    evaluate_grouping_set,
    finalize_partials,
    grouping_set_partials,
    merge_partials,
)
from dpcomm.queries.query import AggregateQuery, BoundAggregate, OutputColumn

FLOATS = [0.0, -0.0, 5e-324, -5e-324, 1e-310, 1.7976931348623157e308, -1.7976931348623157e308]
FLOATS += [1e300, 2.5, -2.5, 0.1, 1e-300, 2.0**53, math.inf, -math.inf, math.nan]
FLOATS += [NEGATIVE_NAN, PAYLOAD_NAN]
INT64_EDGES = [2**63 - 1, -(2**63), 2**63 - 2, -(2**63) + 1, 0, 1, -1, 7]
SCHEMA = (
    ("k1", "BIGINT"),
    ("k2", "VARCHAR"),
    ("kf", "DOUBLE"),
    ("x", "DOUBLE"),
    ("y", "BIGINT"),
    ("w", "HUGEINT"),
    ("d", "DECIMAL(38,2)"),
    ("t", "VARCHAR"),
)
GROUPING_SETS = (("k1",), ("k2", "kf"), ("kf",), ())
AGGREGATES = [
    ("count_star", None, "BIGINT"),
    ("count", "x", "BIGINT"),
    ("sum", "x", "DOUBLE"),
    ("avg", "x", "DOUBLE"),
    ("min", "x", "DOUBLE"),
    ("max", "x", "DOUBLE"),
    ("sum", "y", "HUGEINT"),
    ("avg", "y", "DOUBLE"),
    ("min", "y", "BIGINT"),
    ("max", "y", "BIGINT"),
    ("sum", "w", "HUGEINT"),
    ("sum", "w", "DOUBLE"),  # DuckDB sums UHUGEINT as a DOUBLE: the exact sum rounded once
    ("avg", "w", "DOUBLE"),
    ("sum", "d", "DECIMAL(38,2)"),
    ("avg", "d", "DOUBLE"),
    ("min", "d", "DECIMAL(38,2)"),
    ("max", "d", "DECIMAL(38,2)"),
    ("min", "t", "VARCHAR"),
    ("max", "t", "VARCHAR"),
    ("count", "t", "BIGINT"),
]


def bound_query() -> BoundAggregate:
    outputs = [OutputColumn(c, "group", c, None) for c in ("k1", "k2", "kf")]
    types = ["BIGINT", "VARCHAR", "DOUBLE"]
    for index, (function, column, sql_type) in enumerate(AGGREGATES):
        outputs.append(OutputColumn(f"a{index}", "aggregate", column, function))  # type: ignore[arg-type]
        types.append(sql_type)
    query = AggregateQuery("SELECT ... FROM data", "data", GROUPING_SETS, tuple(outputs))
    return BoundAggregate(
        query, GROUPING_SETS, ("k1", "k2", "kf"), tuple(outputs), tuple(types), SCHEMA
    )


BOUND = bound_query()


def column(name: str, sql_type: str, values: list[Any], filler: Any) -> Column:
    nulls = np.array([v is None for v in values], dtype=bool)
    filled = [filler if v is None else v for v in values]
    if sql_type in ("BIGINT",):
        array = np.array(filled, dtype=np.int64)
    elif sql_type == "HUGEINT":
        array = exact_integers(filled)
    elif sql_type == "DOUBLE":
        array = np.array(filled, dtype=np.float64)
    else:
        array = np.empty(len(filled), dtype=object)
        array[:] = filled
    return Column(name, sql_type, array.reshape(-1), nulls.reshape(-1))


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy, strategy)


ROW = st.tuples(
    nullable(st.integers(-2, 2)),
    nullable(st.sampled_from(["a", "b", "é"])),
    nullable(st.sampled_from([0.0, -0.0, 1.5, math.nan, NEGATIVE_NAN, -math.inf])),
    nullable(
        st.one_of(
            st.sampled_from(FLOATS),
            st.floats(allow_nan=False, allow_infinity=False),
            st.floats(width=32, allow_nan=False, allow_infinity=False),
        )
    ),
    nullable(st.one_of(st.sampled_from(INT64_EDGES), st.integers(-(2**63), 2**63 - 1))),
    nullable(st.one_of(st.integers(-(2**100), 2**100), st.integers(-5, 5))),
    nullable(st.integers(-(10**36), 10**36).map(lambda units: decimal_of(units, 2))),
    nullable(st.text(alphabet="ab é", max_size=3)),
)


def make_table(rows: list[tuple[Any, ...]]) -> Table:
    fillers = [0, "", 0.0, 0.0, 0, 0, decimal_of(0, 2), ""]
    columns = [
        column(name, sql_type, [row[i] for row in rows], fillers[i])
        for i, (name, sql_type) in enumerate(SCHEMA)
    ]
    return Table("data", tuple(columns))


@st.composite
def split_tables(draw: st.DrawFn):
    rows = draw(st.lists(ROW, max_size=25))
    pieces = draw(st.integers(1, 5))
    labels = draw(st.lists(st.integers(0, pieces - 1), min_size=len(rows), max_size=len(rows)))
    order = draw(st.permutations(range(pieces)))
    kept = draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    return make_table(rows), np.array(labels, dtype=np.int64), order, np.array(kept, dtype=bool)


def finalized(partials) -> tuple[list[dict[str, object]], list[tuple[object, ...]]]:
    return finalize_partials(BOUND, partials)


@settings(max_examples=150, deadline=None)
@given(split=split_tables(), set_index=st.integers(0, len(GROUPING_SETS) - 1))
def test_masks_merged_in_any_order_give_the_whole_bit_for_bit(split, set_index):
    table, labels, order, kept = split
    whole = grouping_set_partials(BOUND, table, set_index, kept)
    parts = [grouping_set_partials(BOUND, table, set_index, kept & (labels == p)) for p in order]
    merged = merge_partials(parts)
    expected = finalized(whole)
    assert canonical(finalized(merged)) == canonical(expected)
    assert merged.representatives.tolist() == whole.representatives.tolist()
    # Associative: the last two merged first; and through pickling (what travels).
    if len(parts) > 2:
        nested = merge_partials([*parts[:-2], merge_partials(parts[-2:])])
        assert canonical(finalized(nested)) == canonical(expected)
    travelled = [pickle.loads(pickle.dumps(p)) for p in parts]
    assert canonical(finalized(merge_partials(travelled))) == canonical(expected)
    # One path: what evaluate returns.
    assert canonical(evaluate_grouping_set(BOUND, table, set_index, kept)) == canonical(expected[0])


@settings(max_examples=100, deadline=None)
@given(split=split_tables(), set_index=st.integers(0, len(GROUPING_SETS) - 1))
def test_tables_of_their_own_merge_to_the_whole(split, set_index):
    table, labels, order, _ = split
    everything = np.ones(table.num_rows, dtype=bool)
    whole = finalized(grouping_set_partials(BOUND, table, set_index, everything))
    parts = []
    for piece in order:
        own = table.take(np.flatnonzero(labels == piece))
        parts.append(grouping_set_partials(BOUND, own, set_index, np.ones(own.num_rows, bool)))
    rows, keys = finalized(merge_partials(parts))
    assert loose((rows, keys)) == loose(whole)
    # Aggregates (not keys) are the same bits.
    names = [f"a{i}" for i in range(len(AGGREGATES))]
    aggregates = canonical([[row[n] for n in names] for row in rows])
    assert aggregates == canonical([[row[n] for n in names] for row in whole[0]])


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(ROW, max_size=25), set_index=st.integers(0, len(GROUPING_SETS) - 1))
def test_float_sums_and_means_are_exact_values_rounded_once(rows, set_index):
    table = make_table(rows)
    partials = grouping_set_partials(BOUND, table, set_index, np.ones(len(rows), dtype=bool))
    result, keys = finalized(partials)
    columns = [name for name, _ in SCHEMA]
    positions = [columns.index(c) for c in GROUPING_SETS[set_index]]
    for row, key in zip(result, keys, strict=True):
        members = [r for r in rows if loose(tuple(r[p] for p in positions)) == loose(key)]
        xs = [r[3] for r in members if r[3] is not None]
        ws = [r[5] for r in members if r[5] is not None]
        ds = [r[6] for r in members if r[6] is not None]
        assert canonical(row["a2"]) == canonical(reference_sum(xs))
        assert canonical(row["a3"]) == canonical(reference_mean(xs))
        if ws:
            assert row["a10"] == sum(ws)
            assert canonical(row["a11"]) == canonical(reference_sum([sum(ws)]))
        if ds:
            with decimal.localcontext() as context:
                context.prec = 100  # exact
                assert row["a13"] == sum(ds, Decimal(0))
        assert row["a0"] == len(members)


def test_empty_partials_are_those_of_no_rows():
    table = make_table([])
    for set_index in range(len(GROUPING_SETS)):
        nothing = grouping_set_partials(BOUND, table, set_index, np.zeros(0, dtype=bool))
        empty = empty_partials(BOUND, set_index)
        assert canonical(finalized(empty)) == canonical(finalized(nothing))
    rows, keys = finalized(empty_partials(BOUND, 3))
    assert keys == [()] and rows[0]["a0"] == 0 and rows[0]["a2"] is None


def test_merging_a_group_across_parts_with_every_kind_of_value():
    rows = [
        (1, "a", -0.0, -0.0, 2**63 - 1, 2**90, decimal_of(5, 2), "b"),
        (1, "a", 0.0, math.nan, 2**63 - 1, -(2**90), decimal_of(-7, 2), "a"),
        (1, "a", -0.0, 1e308, -(2**63), 3, None, None),
        (1, "a", 0.0, 1e308, 5, None, decimal_of(1, 2), "ab"),
    ]
    table = make_table(rows)
    labels = np.array([0, 1, 0, 2])
    parts = [grouping_set_partials(BOUND, table, 0, labels == p) for p in (2, 0, 1)]
    (row,), keys = finalized(merge_partials(parts))
    assert keys == [(1,)]
    assert math.isnan(row["a2"]) and math.isnan(row["a5"])
    assert row["a4"] == -0.0 and math.copysign(1, row["a4"]) < 0
    assert row["a6"] == 2**63 - 1 + 2**63 - 1 - 2**63 + 5
    assert row["a10"] == 3 and row["a11"] == 3.0
    assert row["a13"] == Decimal("-0.01")
    assert (row["a17"], row["a18"]) == ("a", "b")
    # Keys: 0.0 and -0.0 are one group, whose key is its first row's (-0.0).
    keys = finalized(grouping_set_partials(BOUND, table, 2, labels >= 0))[1]
    assert keys == [(0.0,)] and math.copysign(1, keys[0][0]) < 0


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, -0.0, NEGATIVE_NAN, PAYLOAD_NAN, math.nan]), max_size=8),
    labels=st.lists(st.integers(0, 2), min_size=8, max_size=8),
    order=st.permutations(range(3)),
)
def test_min_and_max_of_zeros_and_nans_do_not_depend_on_the_split(values, labels, order):
    rows = [(0, "a", 0.0, v, 0, 0, decimal_of(0, 2), "") for v in values]
    table = make_table(rows)
    split = np.array(labels[: len(rows)], dtype=np.int64)
    whole = finalized(grouping_set_partials(BOUND, table, 0, np.ones(len(rows), dtype=bool)))
    parts = [grouping_set_partials(BOUND, table, 0, split == p) for p in order]
    assert canonical(finalized(merge_partials(parts))) == canonical(whole)
    if values:
        (row,) = whole[0]
        numbers = [v for v in values if not math.isnan(v)]
        if numbers:
            negative = any(math.copysign(1, v) < 0 for v in numbers)
            assert canonical(row["a4"]) == canonical(-0.0 if negative else 0.0)
        else:
            assert canonical(row["a4"]) == canonical(math.nan)
        if len(numbers) < len(values):
            assert canonical(row["a5"]) == canonical(math.nan)
        else:
            positive = any(math.copysign(1, v) > 0 for v in numbers)
            assert canonical(row["a5"]) == canonical(0.0 if positive else -0.0)
