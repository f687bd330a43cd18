"""Tables sliced into ranges of rows and concatenated back."""

import numpy as np
import pytest

from dpcomm.data import (
    Table,
    concat_tables,
    table_from_arrays,
)
from dpcomm.errors import InvalidParameterError


def assert_same_table(got: Table, expected: Table) -> None:
    """Same names, SQL types, numpy dtypes, NULL masks, and values (of the same Python types)."""
    assert got.name == expected.name
    assert got.num_rows == expected.num_rows
    assert got.column_names == expected.column_names
    for a, b in zip(got.columns, expected.columns, strict=True):
        assert a.sql_type == b.sql_type, a.name
        assert a.values.dtype == b.values.dtype, a.name
        assert np.array_equal(a.is_null, b.is_null), a.name
        x, y = a.values[~a.is_null], b.values[~b.is_null]
        if x.dtype.kind == "O":
            assert [(type(v), repr(v)) for v in x] == [(type(v), repr(v)) for v in y], a.name
        else:
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), a.name


def test_table_slice_and_concat():
    table = table_from_arrays("t", {"a": np.arange(5), "b": np.array(list("abcde"), object)})
    assert table.slice(1, 3).column("b").values.tolist() == ["b", "c"]
    assert table.slice(4, 10).num_rows == 1
    no_columns = Table("t", (), rows=7)
    assert no_columns.slice(2, 5).num_rows == 3
    assert concat_tables([no_columns, no_columns.slice(0, 2)]).num_rows == 9
    assert_same_table(concat_tables([table.slice(0, 2), table.slice(2, 5)]), table)
    with pytest.raises(InvalidParameterError, match="invalid tables"):
        concat_tables([table, table.select(["a"])])
    with pytest.raises(InvalidParameterError, match="invalid tables"):
        concat_tables([])
