"""ParquetRows over real data sets shipped by installed packages, split every which way.

Each data set (none written by us) is read by DuckDB, written to Parquet by pyarrow with small
row groups, once whole and once split over several files of a directory tree (one of them
empty). Every split of either source into pieces, read piece by piece, concatenates to
:func:`dpcomm.data.read_table` of the whole file: the same column names, DuckDB types, NULL
masks and values, of the same Python types.

* matplotlib ``Stocks.csv``: a comment line, a DATE column, DOUBLE columns full of NULLs, names
  like ``^GSPC``; ``msft.csv``: text dates, a BIGINT volume, a column named ``Adj. Close*``;
* mlxtend ``autompg.csv.gz``: no header, car names with spaces;
* scikit-learn ``iris.csv`` and ``wine_data.csv``: a metadata first line, no header;
* scikit-learn's OpenML test files, Titanic (``id_40945``: NULL text and numbers, names with
  quotes and commas, a column named ``home.dest``) and the Palmer penguins (``id_42585``);
* pyarrow's ORC test files: timestamps to the nanosecond in 1900 and dates
  (``TestOrcFile.testDate1900.orc``, 70,000 rows), DECIMAL(10,5) with NULLs (``decimal.orc``);
* pyarrow's Parquet test files written by pyarrow 0.7.1 (pandas index columns, a zoned
  timestamp DuckDB reads as TIMESTAMP), read as they are;
* dpcomm's own ``diabetes.csv``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from tests.conftest import (
    assert_same_table,
    find_package_file,
    read_openml_arff,
    same_table_as,
)

from dpcomm.data import ParquetRows, RowSource, Table, concat_tables, read_table


def from_duckdb(sql: str) -> pa.Table:
    connection = duckdb.connect()
    try:
        return connection.sql(sql).to_arrow_table()
    finally:
        connection.close()


def csv_source(package: str, *parts: str) -> Callable[[Path], pa.Table]:
    def load(tmp: Path) -> pa.Table:
        path = find_package_file(package, *parts)
        return from_duckdb(f"SELECT * FROM read_csv('{path}')")

    return load


AUTOMPG_COLUMNS = (
    "cylinders",
    "displacement",
    "horsepower",
    "weight",
    "acceleration",
    "model year",
    "origin",
    "car name",
    "mpg",
)


def autompg(tmp: Path) -> pa.Table:
    path = find_package_file("mlxtend", "data", "data", "autompg.csv.gz")
    names = ", ".join(f"'{n}'" for n in AUTOMPG_COLUMNS)
    return from_duckdb(f"SELECT * FROM read_csv('{path}', header = false, names = [{names}])")


def sklearn_csv(file: str, features: int) -> Callable[[Path], pa.Table]:
    """A metadata line ``rows,features,class names...``, then rows without a header."""

    def load(tmp: Path) -> pa.Table:
        path = find_package_file("sklearn", "datasets", "data", file)
        names = ", ".join(f"'feature {i} (cm)'" for i in range(features))
        return from_duckdb(
            f"SELECT * FROM read_csv('{path}', header = false, skip = 1, "
            f"names = [{names}, 'target'])"
        )

    return load


def arff(dataset: str) -> Callable[[Path], pa.Table]:
    """An OpenML ARFF test file of scikit-learn (:func:`tests.conftest.read_openml_arff`)."""
    return lambda tmp: read_openml_arff(dataset, tmp)


def orc_file(name: str) -> Callable[[Path], pa.Table]:
    def load(tmp: Path) -> pa.Table:
        return orc.read_table(find_package_file("pyarrow", "tests", "data", "orc", name))

    return load


def diabetes(tmp: Path) -> pa.Table:
    with resources.as_file(resources.files("dpcomm.data").joinpath("diabetes.csv")) as path:
        return from_duckdb(f"SELECT * FROM read_csv('{path}')")


LOADERS: dict[str, Callable[[Path], pa.Table]] = {
    "stocks": csv_source("matplotlib", "mpl-data", "sample_data", "Stocks.csv"),
    "msft": csv_source("matplotlib", "mpl-data", "sample_data", "msft.csv"),
    "autompg": autompg,
    "iris": sklearn_csv("iris.csv", 4),
    "wine": sklearn_csv("wine_data.csv", 13),
    "titanic": arff("id_40945"),
    "penguins": arff("id_42585"),
    "date1900": orc_file("TestOrcFile.testDate1900.orc"),
    "decimal": orc_file("decimal.orc"),
    "diabetes": diabetes,
}


def load(name: str, tmp: Path) -> pa.Table:
    return LOADERS[name](tmp)


def write_sources(arrow: pa.Table, root: Path) -> tuple[Path, Path]:
    """``arrow`` as one file of small row groups, and over four files of a directory tree."""
    rows = arrow.num_rows
    group = max(1, rows // 23)
    whole = root / "whole.parquet"
    pq.write_table(arrow, whole, row_group_size=group)
    directory = root / "parts"
    (directory / "0-first").mkdir(parents=True)
    cuts = [0, rows // 5, rows // 5, rows // 2 + 1, rows]
    names = ["0-first/a.parquet", "0-first/b.parquet", "1.parquet", "2.parquet"]
    for name, (start, stop) in zip(names, itertools.pairwise(cuts), strict=True):
        pq.write_table(arrow.slice(start, stop - start), directory / name, row_group_size=group)
    return whole, directory


def split_points(num_rows: int, group_starts: list[int], seed: int) -> list[list[int]]:
    """Splits into pieces: equal ones, at row-group edges and one off, random, single rows."""
    splits = [[0, num_rows]]
    for pieces in (2, 3, 8, 17):
        splits.append(np.linspace(0, num_rows, pieces + 1).astype(int).tolist())
    for shift in (-1, 0, 1):
        edges = {min(max(s + shift, 0), num_rows) for s in group_starts}
        splits.append(sorted({0, num_rows} | edges))
    rng = np.random.default_rng(seed)
    for _ in range(5):
        inner = rng.integers(0, num_rows + 1, size=int(rng.integers(1, 12)))
        splits.append([0, *sorted(inner.tolist()), num_rows])
    head = list(range(min(6, num_rows)))
    tail = list(range(max(num_rows - 5, head[-1] + 1), num_rows + 1))
    splits.append([*head, *tail] if tail[0] > head[-1] else [*head, num_rows])
    return splits


def group_starts(source: ParquetRows) -> list[int]:
    starts = [0]
    for file in source.files:
        metadata = pq.ParquetFile(file).metadata
        for index in range(metadata.num_row_groups):
            starts.append(starts[-1] + metadata.row_group(index).num_rows)
    return starts


def check_every_split(source: RowSource, whole: Table, starts: list[int], seed: int) -> None:
    assert source.num_rows == whole.num_rows
    same_as_whole = same_table_as(whole)
    for bounds in split_points(whole.num_rows, starts, seed):
        pieces = [source.read(a, b) for a, b in itertools.pairwise(bounds)]
        same_as_whole(concat_tables(pieces))


#: What each data set must have, so that the test covers what it claims.
CHECKS: dict[str, Callable[[Table], Any]] = {
    "stocks": lambda t: (
        t.column("Date").sql_type == "DATE"
        and t.column("AMZN").is_null.any()
        and "^GSPC" in t.column_names
    ),
    "msft": lambda t: "Adj. Close*" in t.column_names and t.column("Volume").sql_type == "BIGINT",
    "autompg": lambda t: any(" " in v for v in t.column("car name").values.tolist()),
    "iris": lambda t: t.num_rows == 150,
    "wine": lambda t: t.num_rows == 178,
    "titanic": lambda t: (
        "home.dest" in t.column_names
        and t.column("home.dest").is_null.any()
        and t.column("age").is_null.any()
        and any("'" in v and "," in v for v in t.column("name").values.tolist())
    ),
    "penguins": lambda t: t.column("sex").is_null.any() and t.column("body_mass_g").is_null.any(),
    "date1900": lambda t: (
        t.num_rows == 70_000
        and t.column("time").sql_type == "TIMESTAMP_NS"
        and t.column("date").sql_type == "DATE"
    ),
    "decimal": lambda t: (
        t.column("_col0").sql_type == "DECIMAL(10,5)" and t.column("_col0").is_null.any()
    ),
    "diabetes": lambda t: t.num_rows == 10_000,
}


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_every_split_of_a_real_data_set_is_read_table_of_the_whole(tmp_path, name):
    arrow = load(name, tmp_path)
    whole_file, directory = write_sources(arrow, tmp_path)
    whole = read_table(whole_file)
    assert CHECKS[name](whole), f"{name} lacks what this test is about"
    for path in (whole_file, directory):
        source = ParquetRows(path)
        assert pq.ParquetFile(source.files[-1]).metadata.num_row_groups > 1 or whole.num_rows < 50
        check_every_split(source, whole, group_starts(source), seed=len(name))


@pytest.mark.parametrize("name", ["stocks", "titanic", "date1900"])
def test_columns_of_a_real_data_set(tmp_path, name):
    arrow = load(name, tmp_path)
    whole_file, directory = write_sources(arrow, tmp_path)
    whole = read_table(whole_file)
    source = ParquetRows(directory)
    names = list(whole.column_names)
    wanted = [names[-1].upper(), names[0].lower(), names[len(names) // 2]]
    expected = whole.select([n for n in names if n.lower() in {w.lower() for w in wanted}])
    bounds = [0, 3, whole.num_rows // 2, whole.num_rows]
    pieces = [source.read(a, b, wanted) for a, b in itertools.pairwise(bounds)]
    assert_same_table(concat_tables(pieces), expected)
    assert_same_table(source.schema(), whole.slice(0, 1))


@pytest.mark.parametrize(
    "file",
    [
        "v0.7.1.parquet",
        "v0.7.1.all-named-index.parquet",
        "v0.7.1.some-named-index.parquet",
        "v0.7.1.column-metadata-handling.parquet",
    ],
)
def test_old_pyarrow_files_read_as_read_table(file):
    path = find_package_file("pyarrow", "tests", "data", "parquet", file)
    whole = read_table(path)
    source = ParquetRows(path)
    check_every_split(source, whole, group_starts(source), seed=7)
