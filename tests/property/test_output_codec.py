"""Compute nodes' outputs: exact round trip at one public size, overflow said, never longer."""

from __future__ import annotations

import decimal

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tests.conftest import same

from dpcomm.data.table import Column, Table
from dpcomm.queries.aggregate import AggregateOutput, AggregateProgram, OutputOverflowError
from dpcomm.queries.codec import CodecError

SQL = (
    "SELECT region, COUNT(*), SUM(amount), AVG(amount), MIN(amount), SUM(price) "
    "FROM t GROUP BY region"
)


def _program(max_groups: int | None = None, text_bytes: int = 12) -> AggregateProgram:
    regions = np.array(["a", "bb", "ccc", "dddd"] * 5, dtype=object)
    amounts = np.arange(20, dtype=np.int64)
    prices = np.array([decimal.Decimal(f"{i}.25") for i in range(20)], dtype=object)
    nulls = np.zeros(20, dtype=bool)
    table = Table(
        "t",
        (
            Column("region", "VARCHAR", regions, nulls),
            Column("amount", "BIGINT", amounts, nulls),
            Column("price", "DECIMAL(18,2)", prices, nulls),
        ),
    )
    return AggregateProgram.from_sql(
        SQL, table, num_targets=3, max_groups=max_groups, max_text_bytes=text_bytes
    )


int64s = st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1))
wide = st.one_of(st.none(), st.integers(min_value=-(2**127), max_value=2**127))
floats = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
decimals = st.one_of(
    st.none(),
    st.decimals(allow_nan=False, allow_infinity=False, places=2).filter(
        lambda d: abs(d) < decimal.Decimal(10) ** 30
    ),
)
groups = st.lists(
    st.tuples(st.one_of(st.none(), st.text(max_size=3)), int64s, wide, floats, decimals),
    max_size=20,
)


def _output(program: AggregateProgram, items: list[tuple[object, ...]]) -> AggregateOutput:
    names = program.query.output_names
    keys = tuple((region,) for region, *_ in items)
    rows = tuple(
        dict(zip(names, (region, count, total, mean, count, price), strict=True))
        for region, count, total, mean, price in items
    )
    return AggregateOutput(keys, rows)


@settings(max_examples=150, deadline=None)
@given(groups)
def test_outputs_round_trip_exactly_at_one_size(items):
    program = _program()
    flow = program.flow_names[0]
    output = _output(program, items)
    fits = all(len((r or "").encode()) <= 12 for r, *_ in items)
    data = program.codec.outputs(flow).encode(output)
    assert len(data) == program.codec.outputs(flow).size
    if not fits:
        with pytest.raises(OutputOverflowError):
            program.codec.outputs(flow).decode(data)
        return
    back = program.codec.outputs(flow).decode(data)
    assert back.keys == output.keys
    for got, want in zip(back.rows, output.rows, strict=True):
        assert all(same(got[n], want[n]) for n in want)


def test_more_groups_than_the_bound_fail_with_a_blob_of_the_same_size():
    program = _program(max_groups=2)
    flow = program.flow_names[0]
    items = [("a", 1, 2, 2.0, None), ("b", 1, 3, 3.0, None), ("c", 1, 4, 4.0, None)]
    output = _output(program, items)
    data = program.codec.outputs(flow).encode(output)
    assert len(data) == program.codec.outputs(flow).size
    with pytest.raises(OutputOverflowError, match="3 groups, more than the public bound of 2"):
        program.codec.outputs(flow).decode(data)
    with pytest.raises(OutputOverflowError):
        program.codec.outputs(flow).check(output)


def test_malformed_outputs_are_codec_errors():
    program = _program()
    flow = program.flow_names[0]
    data = bytearray(program.codec.outputs(flow).encode(_output(program, [("a", 1, 2, 2.0, None)])))
    with pytest.raises(CodecError):
        program.codec.outputs(flow).decode(bytes(data[:-1]))
    data[9 + 4] = ord("X")  # the first value's tag
    with pytest.raises(CodecError):
        program.codec.outputs(flow).decode(bytes(data))


def test_the_empty_grouping_set_is_padded_to_one_group():
    program = _program()
    total = AggregateProgram.from_sql(
        "SELECT COUNT(*) FROM t GROUP BY ()", program.table, num_targets=3, max_text_bytes=12
    )
    flow = total.flow_names[0]
    assert total.codec.groups_bound(flow) == 1
    assert total.codec.outputs(flow).size < program.codec.outputs(program.flow_names[0]).size


def test_a_row_longer_than_its_bound_overflows_and_never_lengthens_the_output():
    program = _program()
    flow = program.flow_names[0]
    # Text where COUNT's BIGINT goes: 9 bytes are planned for it, the row has no room.
    items = [("a", "x" * 200, 2, float("-inf"), decimal.Decimal("1.25"))]
    data = program.codec.outputs(flow).encode(_output(program, items))
    assert len(data) == program.codec.outputs(flow).size
    with pytest.raises(OutputOverflowError, match="result row"):
        program.codec.outputs(flow).decode(data)


def test_decimals_and_infinities_survive():
    program = _program()
    flow = program.flow_names[0]
    items = [("a", 3, 2**100, float("-inf"), decimal.Decimal("12.30"))]
    back = program.codec.outputs(flow).decode(
        program.codec.outputs(flow).encode(_output(program, items))
    )
    row = back.rows[0]
    assert row["sum(price)"] == decimal.Decimal("12.30") and str(row["sum(price)"]) == "12.30"
    assert row["avg(amount)"] == float("-inf") and row["sum(amount)"] == 2**100
