"""Row sources: any range of a table's rows, read alone, is those rows of the whole table."""

import itertools
import pickle

import numpy as np
import pytest

from dpcomm.data import (
    InMemoryRows,
    RowSource,
    SyntheticRows,
    Table,
    concat_tables,
    partitioned,
    synthetic,
    synthetic_table,
    table_from_arrays,
)
from dpcomm.data.synthetic import BLOCK_ROWS
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


def split_reads(source: RowSource, bounds: list[int], columns=None) -> Table:
    return concat_tables([source.read(a, b, columns) for a, b in itertools.pairwise(bounds)])


# ---------------------------------------------------------------- the protocol and its checks


def test_every_source_is_a_row_source():
    table = synthetic_table(num_rows=5, seed=0)
    assert isinstance(InMemoryRows(table), RowSource)
    assert isinstance(SyntheticRows(5, seed=0), RowSource)
    assert not isinstance(table, RowSource)


def sources(tmp_path):
    table = synthetic_table(num_rows=10, seed=1, name="t")
    return [InMemoryRows(table), SyntheticRows(10, seed=1, name="t")]


@pytest.mark.parametrize(
    ("start", "stop", "name"),
    [
        (-1, 3, "start"),
        (11, 11, "start"),
        (True, 3, "start"),
        (1.0, 3, "start"),
        (4, 3, "stop"),
        (0, 11, "stop"),
        (0, None, "stop"),
        (0, np.int64(11), "stop"),
    ],
)
def test_ranges_out_of_bounds_are_refused(tmp_path, start, stop, name):
    for source in sources(tmp_path):
        with pytest.raises(InvalidParameterError) as caught:
            source.read(start, stop)
        assert caught.value.name == name
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("columns", "shown"), [(["g1", "nope"], "nope"), ("g1", "g1"), ([3], 3)])
def test_unknown_columns_are_refused(tmp_path, columns, shown):
    for source in sources(tmp_path):
        with pytest.raises(InvalidParameterError) as caught:
            source.read(0, 3, columns)
        assert caught.value.name == "columns"
        assert caught.value.given == shown
        assert "\n" not in str(caught.value)


def test_columns_are_matched_case_insensitively_and_kept_in_table_order(tmp_path):
    for source in sources(tmp_path):
        whole = source.read(0, 10)
        part = source.read(2, 7, ["M1", "g3", "G1", "g1"])
        assert part.column_names == ("g1", "g3", "m1")
        assert_same_table(part, whole.select(["g1", "g3", "m1"]).slice(2, 7))
        none = source.read(2, 7, [])
        assert none.columns == () and none.num_rows == 5
        empty = source.read(4, 4, ["m2"])
        assert empty.num_rows == 0 and empty.column("m2").sql_type == "DOUBLE"
        assert source.read(0, 0).column_names == whole.column_names
        schema = source.schema()
        assert schema.num_rows == 1 and schema.name == "t"
        assert_same_table(schema, whole.slice(0, 1))


def test_numpy_integers_are_accepted_as_bounds(tmp_path):
    for source in sources(tmp_path):
        assert source.read(np.int64(3), np.uint8(5)).num_rows == 2


# ---------------------------------------------------------------- in memory


def test_in_memory_rows_are_views_of_the_table():
    table = synthetic_table(num_rows=100, seed=2, name="t")
    source = InMemoryRows(table)
    assert (source.name, source.num_rows) == ("t", 100)
    part = source.read(10, 30)
    assert_same_table(part, table.take(np.arange(10, 30)))
    assert np.shares_memory(part.column("g1").values, table.column("g1").values)
    assert_same_table(split_reads(source, [0, 1, 50, 99, 100]), table)


def test_in_memory_rows_need_a_row():
    empty = synthetic_table(num_rows=3, seed=0).take(np.arange(0))
    with pytest.raises(InvalidParameterError, match="invalid table"):
        InMemoryRows(empty)


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


# ---------------------------------------------------------------- synthetic


@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_synthetic_ranges_are_rows_of_the_whole_table(distribution):
    rows = 2 * BLOCK_ROWS + 1000
    source = SyntheticRows(rows, seed=9, distribution=distribution, num_measures=3)
    whole = source.read(0, rows)
    assert whole.column_names == ("g1", "g2", "g3", "g4", "m1", "m2", "m3")
    edges = [0, 1, BLOCK_ROWS - 1, BLOCK_ROWS, BLOCK_ROWS + 1, 2 * BLOCK_ROWS, rows - 1, rows]
    for start, stop in [(a, b) for a in edges for b in edges if a <= b]:
        assert_same_table(source.read(start, stop), whole.slice(start, stop))
    assert_same_table(split_reads(source, [0, 7, 70_000, 70_001, rows]), whole)
    assert_same_table(
        split_reads(source, [0, BLOCK_ROWS, rows], ["m3", "g2"]), whole.select(["g2", "m3"])
    )


@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_synthetic_table_is_the_row_source_read_whole(distribution):
    kwargs = {
        "distribution": distribution,
        "num_grouping_columns": 2,
        "num_intervals": 7,
        "num_measures": 3,
        "zipf_exponent": 2.0,
        "name": "t",
    }
    table = synthetic_table(num_rows=BLOCK_ROWS + 5, seed=4, **kwargs)
    assert_same_table(
        table, SyntheticRows(BLOCK_ROWS + 5, seed=4, **kwargs).read(0, BLOCK_ROWS + 5)
    )


def test_synthetic_table_from_a_generator_draws_its_seed_first():
    drawn = int(np.random.default_rng(5).integers(1 << 63))
    assert_same_table(
        synthetic_table(num_rows=100, seed=np.random.default_rng(5)),
        synthetic_table(num_rows=100, seed=drawn),
    )
    a, b = synthetic_table(num_rows=100, seed=None), synthetic_table(num_rows=100, seed=None)
    assert not np.array_equal(a.column("m1").values, b.column("m1").values)


def test_synthetic_values_are_pinned():
    """The table of a seed: a change here changes every figure drawn from synthetic data."""
    table = synthetic_table(num_rows=BLOCK_ROWS + 3, seed=0)
    assert table.column("g1").values[:6].tolist() == [9, 18, 19, 8, 2, 13]
    assert table.column("g4").values[-3:].tolist() == [13, 2, 19]
    assert np.round(table.column("m1").values[:3], 6).tolist() == [60.328531, 115.41641, 112.845923]
    assert np.round(table.column("m2").values[-2:], 6).tolist() == [72.198708, 29.153757]
    zipf = synthetic_table(num_rows=5, seed=0, distribution="zipf")
    assert zipf.column("g2").values.tolist() == [5, 9, 0, 9, 9]


def test_synthetic_reads_draw_only_the_blocks_they_overlap(monkeypatch):
    drawn = []
    original = partitioned.block_generator

    def recording(seed, block):
        drawn.append(block)
        return original(seed, block)

    monkeypatch.setattr(partitioned, "block_generator", recording)
    source = SyntheticRows(10**12, seed=3)  # no size limit: only the read range is drawn
    part = source.read(10**12 - 5, 10**12)
    assert part.num_rows == 5 and drawn == [(10**12 - 1) // BLOCK_ROWS]
    drawn.clear()
    source.read(BLOCK_ROWS - 1, 3 * BLOCK_ROWS)
    assert drawn == [0, 1, 2]
    drawn.clear()
    source.read(BLOCK_ROWS, BLOCK_ROWS)
    assert drawn == []


def test_one_synthetic_read_is_limited_like_a_synthetic_table(monkeypatch):
    monkeypatch.setattr(synthetic, "MAX_SYNTHETIC_VALUES", 600)  # 100 rows of 6 columns
    source = SyntheticRows(1000, seed=0)
    assert source.read(900, 1000).num_rows == 100
    with pytest.raises(InvalidParameterError) as caught:
        source.read(0, 101)
    assert caught.value.name == "stop"
    with pytest.raises(InvalidParameterError) as caught:
        synthetic_table(num_rows=101, seed=0)
    assert caught.value.name == "rows"


def test_synthetic_rows_are_small_and_picklable():
    source = SyntheticRows(10**9, seed=12, distribution="zipf", name="big")
    data = pickle.dumps(source)
    assert len(data) < 1000
    again = pickle.loads(data)
    assert again == source
    assert_same_table(again.read(5 * 10**8, 5 * 10**8 + 10), source.read(5 * 10**8, 5 * 10**8 + 10))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_rows": 0}, "num_rows"),
        ({"num_rows": True}, "num_rows"),
        ({"num_rows": 2.0}, "num_rows"),
        ({"seed": -1}, "seed"),
        ({"seed": None}, "seed"),
        ({"seed": np.random.default_rng(0)}, "seed"),
        ({"distribution": "normal"}, "distribution"),
        ({"num_measures": -1}, "num_measures"),
        ({"zipf_exponent": float("inf")}, "zipf_exponent"),
    ],
)
def test_synthetic_rows_reject_bad_parameters(kwargs, name):
    arguments = {"num_rows": 10, "seed": 0, **kwargs}
    rows = arguments.pop("num_rows")
    with pytest.raises(InvalidParameterError) as caught:
        SyntheticRows(rows, **arguments)
    assert caught.value.name == name
