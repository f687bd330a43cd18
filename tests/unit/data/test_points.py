"""Points for K-means read from a table's numeric columns (dpcomm.data.read_points)."""

import duckdb
import numpy as np
import pytest
from tests.conftest import IRIS_COLUMNS

from dpcomm.data import read_points
from dpcomm.errors import DpcommError, InvalidParameterError


def write(path, select):
    """The rows of ``select`` (DuckDB SQL) written to ``path`` (CSV or Parquet by its suffix)."""
    options = "(FORMAT PARQUET)" if path.suffix == ".parquet" else "(FORMAT CSV, HEADER)"
    duckdb.sql(f"COPY ({select}) TO '{path}' {options}")
    return path


MIXED = (
    "SELECT * FROM (VALUES (1, 2.5::DECIMAL(4,1), 10::HUGEINT, 0.25::FLOAT, 'a', true), "
    "(2, NULL, 20::HUGEINT, 'nan'::DOUBLE, 'b', false), (3, 7.0::DECIMAL(4,1), NULL, 1.5, "
    "'a', true)) AS t(Id, Price, Big, Ratio, Kind, Flag)"
)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_numeric_columns_become_float_coordinates_and_null_becomes_nan(tmp_path, suffix):
    path = write(tmp_path / f"t.{suffix}", MIXED)
    table = read_points(path, ["price", "BIG", "ratio"], label_column="kind")
    expected = [[2.5, 10.0, 0.25], [np.nan, 20.0, np.nan], [7.0, np.nan, 1.5]]
    assert np.array_equal(table.points, np.array(expected), equal_nan=True)
    assert table.points.dtype == np.float64
    assert table.columns == ("Price", "Big", "Ratio") and table.label_column == "Kind"
    assert table.labels.tolist() == ["a", "b", "a"]
    assert table.null_rows == 2  # NULL in rows 2 and 3 (the NaN of row 2 is a value, not NULL)


def test_numeric_and_boolean_labels_keep_their_values(tmp_path):
    path = write(tmp_path / "t.parquet", MIXED)
    assert read_points(path, ["id"], label_column="flag").labels.tolist() == [True, False, True]
    assert read_points(path, ["ratio"], label_column="id").labels.tolist() == [1, 2, 3]
    assert read_points(path, ["ratio"]).labels is None


def test_iris_as_the_csv_holds_it(iris_csv):
    from sklearn.datasets import load_iris

    table = read_points(iris_csv, list(IRIS_COLUMNS), label_column="species")
    iris = load_iris()
    assert np.array_equal(table.points, iris.data)
    assert table.labels.tolist() == iris.target_names[iris.target].tolist()


@pytest.mark.parametrize(
    ("columns", "label", "name", "words"),
    [
        (["price", "nope"], None, "columns", "Id, Price, Big, Ratio, Kind, Flag"),
        (["kind"], None, "columns", "Kind (VARCHAR)"),
        (["flag"], None, "columns", "Flag (BOOLEAN)"),
        (["price", "PRICE"], None, "columns", "distinct column names"),
        ([], None, "columns", "one or more column names"),
        ("price", None, "columns", "one or more column names"),
        (["price"], "price", "label_column", "not a coordinate"),
        (["price"], "missing", "label_column", "column names of the table"),
        (["id"], "big", "label_column", "Big with 1 NULLs"),
    ],
)
def test_bad_columns_are_refused_naming_the_parameter(tmp_path, columns, label, name, words):
    path = write(tmp_path / "t.csv", MIXED)
    with pytest.raises(InvalidParameterError, match=r"^invalid ") as caught:
        read_points(path, columns, label_column=label)
    assert caught.value.name == name and words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_files_that_cannot_be_read(tmp_path):
    with pytest.raises(InvalidParameterError, match="an existing file"):
        read_points(tmp_path / "absent.csv", ["x"])
    with pytest.raises(InvalidParameterError, match=r"\.csv, \.tsv"):
        read_points(tmp_path / "points.xlsx", ["x"])
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(DpcommError, match=r"^cannot read .*broken\.parquet"):
        read_points(broken, ["x"])
    empty = write(tmp_path / "empty.parquet", "SELECT 1.0 AS x WHERE false")
    with pytest.raises(InvalidParameterError, match="at least one row"):
        read_points(empty, ["x"])
