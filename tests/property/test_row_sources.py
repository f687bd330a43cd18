"""Row sources under random splits: the pieces, one after the other, are the whole table."""

from __future__ import annotations

import itertools
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from tests.conftest import assert_same_table

from dpcomm.data import (
    InMemoryRows,
    ParquetRows,
    RowSource,
    SyntheticRows,
    Table,
    concat_tables,
    read_table,
    synthetic_table,
)
from dpcomm.data.synthetic import BLOCK_ROWS


@st.composite
def splits(draw: st.DrawFn, num_rows: int) -> list[int]:
    """Sorted bounds from 0 to ``num_rows``: pieces of any size, empty ones included."""
    inner = draw(st.lists(st.integers(0, num_rows), max_size=8))
    return [0, *sorted(inner), num_rows]


@st.composite
def column_subsets(draw: st.DrawFn, names: tuple[str, ...]) -> list[str] | None:
    """None (every column) or some names, in any order and case, maybe repeated."""
    if draw(st.booleans()):
        return None
    chosen = draw(st.lists(st.sampled_from(names), max_size=len(names) + 1))
    return [name.upper() if draw(st.booleans()) else name for name in chosen]


def check(source: RowSource, whole: Table, bounds: list[int], columns: list[str] | None) -> None:
    pieces = [source.read(a, b, columns) for a, b in itertools.pairwise(bounds)]
    expected = whole
    if columns is not None:
        wanted = {c.lower() for c in columns}
        expected = whole.select([n for n in whole.column_names if n.lower() in wanted])
    if not expected.columns:
        assert all(not p.columns for p in pieces)
        assert sum(p.num_rows for p in pieces) == whole.num_rows
        return
    assert_same_table(concat_tables(pieces), expected)


@st.composite
def synthetic_cases(draw: st.DrawFn) -> tuple[dict[str, object], list[int], list[str] | None]:
    num_rows = draw(st.one_of(st.integers(1, 300), st.integers(1, 2 * BLOCK_ROWS + 300)))
    kwargs: dict[str, object] = {
        "num_rows": num_rows,
        "seed": draw(st.integers(0, 2**64)),
        "distribution": draw(st.sampled_from(["uniform", "zipf"])),
        "num_grouping_columns": draw(st.integers(1, 3)),
        "num_intervals": draw(st.integers(1, 30)),
        "num_measures": draw(st.integers(0, 3)),
    }
    groups, measures = kwargs["num_grouping_columns"], kwargs["num_measures"]
    assert isinstance(groups, int) and isinstance(measures, int)
    names = tuple(f"g{i + 1}" for i in range(groups)) + tuple(f"m{i + 1}" for i in range(measures))
    return kwargs, draw(splits(num_rows)), draw(column_subsets(names))


@settings(max_examples=40, deadline=None)
@given(synthetic_cases())
def test_synthetic_splits_are_the_synthetic_table(case):
    kwargs, bounds, columns = case
    whole = synthetic_table(**kwargs)
    num_rows = kwargs.pop("num_rows")
    source = SyntheticRows(num_rows, **kwargs)
    check(source, whole, bounds, columns)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_in_memory_splits_are_the_table(data):
    whole = synthetic_table(num_rows=data.draw(st.integers(1, 500)), seed=1)
    bounds = data.draw(splits(whole.num_rows))
    check(InMemoryRows(whole), whole, bounds, data.draw(column_subsets(whole.column_names)))


#: Text with NULLs, dates, timestamps, DECIMAL, and odd column names, made by DuckDB.
TYPED = """
SELECT i AS "Row #",
       CASE WHEN i % 7 = 3 THEN NULL ELSE 'name ' || (i * 37 % 101)::VARCHAR END AS "nom été",
       DATE '1999-12-25' + (i * 13 % 4000)::INTEGER AS "day",
       CASE WHEN i % 5 = 0 THEN NULL
            ELSE TIMESTAMP '1969-12-31 23:00:00' + to_microseconds(i * 7919) END AS ts,
       CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 1.25 - 300)::DECIMAL(9,2) END AS "Price.€",
       CASE WHEN i % 13 = 0 THEN NULL ELSE i / 7 END AS ratio,
       i % 3 = 0 AS flag
FROM range(1000) t(i)
"""


@pytest.fixture(scope="module")
def parquet_sources(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[ParquetRows, Table]]:
    """The shipped diabetes table and the typed table, each over files of small row groups."""
    root = tmp_path_factory.mktemp("parquet")
    made = []
    diabetes = resources.files("dpcomm.data").joinpath("diabetes.csv")
    with resources.as_file(diabetes) as csv:
        sources = {
            "diabetes": f"SELECT * FROM read_csv('{csv}')",
            "typed": TYPED,
        }
        for name, sql in sources.items():
            arrow = duckdb.sql(sql).to_arrow_table()
            whole = root / f"{name}.parquet"
            pq.write_table(arrow, whole)
            directory = root / name
            directory.mkdir()
            cuts = [0, arrow.num_rows // 3, arrow.num_rows // 3, arrow.num_rows - 1, arrow.num_rows]
            for index, (start, stop) in enumerate(itertools.pairwise(cuts)):
                part = directory / f"part-{index:02d}.parquet"
                pq.write_table(arrow.slice(start, stop - start), part, row_group_size=97)
            made.append((ParquetRows(directory, name=name), read_table(whole, name=name)))
    return made


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_parquet_splits_are_read_table_of_the_whole(parquet_sources, data):
    source, whole = data.draw(st.sampled_from(parquet_sources))
    assert source.num_rows == whole.num_rows
    bounds = data.draw(splits(whole.num_rows))
    check(source, whole, bounds, data.draw(column_subsets(whole.column_names)))


def test_the_typed_table_has_what_it_claims(parquet_sources):
    whole = parquet_sources[1][1]
    types = {c.name: c.sql_type for c in whole.columns}
    assert types == {
        "Row #": "BIGINT",
        "nom été": "VARCHAR",
        "day": "DATE",
        "ts": "TIMESTAMP",
        "Price.€": "DECIMAL(9,2)",
        "ratio": "DOUBLE",
        "flag": "BOOLEAN",
    }
    assert all(whole.column(n).is_null.any() for n in ("nom été", "ts", "Price.€", "ratio"))
    assert Path(parquet_sources[1][0].files[0]).name == "part-00.parquet"
