"""What the front door takes as data, read into what a program runs on.

A table for SQL (`table_of`: DataFrames, Arrow, DuckDB relations, CSV and Parquet paths, read
through DuckDB), and points for K-means (`points_of`, `usable_rows`, `label_codes`). Every
refusal names the parameter, what it allows and what it got.
"""

from __future__ import annotations

from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError, warn

#: What ``data`` may be (every error about it says so).
DATA_ALLOWED = (
    "a pandas or polars DataFrame, a pyarrow Table, a DuckDB relation, a CSV/Parquet path, "
    "a dpcomm Table or a row source"
)


def table_of(data: Any, name: str) -> Any:
    """``data`` as dpcomm's table, or as a row source (Parquet files) read only when needed.

    A `dpcomm.data.table.Table` or a `dpcomm.data.partitioned.RowSource` is
    taken as it is; everything else is read through DuckDB (its types). What DuckDB cannot
    read as a table (a pandas Series, a DataFrame without columns, ...) is an
    `dpcomm.errors.InvalidParameterError` naming ``data``.
    """
    from dpcomm.data.partitioned import RowSource
    from dpcomm.data.table import Table

    if isinstance(data, Table | RowSource):
        return data
    import duckdb

    from dpcomm.data import read_table
    from dpcomm.data.table import table_from_relation

    if isinstance(data, str | Path):
        if str(data) == "":
            raise InvalidParameterError("data", "a CSV or Parquet path (not empty)", data)
        path = Path(data)
        if path.is_dir() or path.suffix.lower() == ".parquet":
            from dpcomm.data.partitioned import ParquetRows

            try:
                return ParquetRows(path, name=name)
            except InvalidParameterError as error:  # named after ParquetRows' own parameter
                raise InvalidParameterError("data", error.allowed, data) from error
        return read_table(path, name=name)
    if isinstance(data, duckdb.DuckDBPyRelation):
        return table_from_relation(data, name)
    readers = {
        "pandas": lambda: duckdb.from_df(data),
        "pyarrow": lambda: duckdb.from_arrow(data),
        "polars": lambda: duckdb.from_arrow(data.to_arrow()),
    }
    reader = readers.get(type(data).__module__.split(".")[0])
    if reader is None:
        raise InvalidParameterError("data", DATA_ALLOWED, type(data).__name__)
    try:
        relation = reader()
    except (duckdb.Error, TypeError, ValueError, AttributeError) as error:
        # DuckDB reads DataFrames and Arrow tables, not a Series, an Array, a frame without
        # columns, ...: what it says is kept as the cause.
        raise InvalidParameterError("data", DATA_ALLOWED, type(data).__name__) from error
    try:
        return table_from_relation(relation, name)
    except duckdb.Error as error:  # e.g. an object column mixing numbers, text and bytes
        raise InvalidParameterError(
            "data",
            "columns whose values DuckDB reads as one type (an object column mixing numbers, "
            "text and bytes is not)",
            f"{type(data).__name__}: {str(error).splitlines()[0]}",
        ) from None


#: Largest magnitude of a coordinate: points travel as float32 (`dpcomm.queries.kmeans`).
FLOAT32_MAX = float(np.finfo(np.float32).max)


def points_of(name: str, values: Any) -> npt.NDArray[np.float64]:
    """``values`` as a non-empty 2-d float64 array (one row per point), or the error naming it."""
    allowed = "a non-empty 2-d array of numbers (one row per point)"
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as error:
        raise InvalidParameterError(name, allowed, values) from error
    if array.ndim != 2 or 0 in array.shape:
        raise InvalidParameterError(name, allowed, f"shape {array.shape}")
    return array


def _unusable_rows(array: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.bool_], int, int]:
    """Rows holding NaN or ±inf, or a value float32 cannot hold; how many of each."""
    non_finite = ~np.isfinite(array).all(axis=1)
    too_large = np.zeros(len(array), dtype=bool)
    finite_rows = ~non_finite
    too_large[finite_rows] = (np.abs(array[finite_rows]) > FLOAT32_MAX).any(axis=1)
    return non_finite | too_large, int(non_finite.sum()), int(too_large.sum())


def usable_rows(
    name: str, array: npt.NDArray[np.float64], *, drop: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The rows of ``array`` K-means can use, and which they are.

    A row with NaN or ±inf, or with a value beyond float32's range (points travel as float32:
    it would become ±inf), is refused, or dropped with a warning saying how many when
    ``drop`` (``drop_non_finite=True``).
    """
    unusable, non_finite, too_large = _unusable_rows(array)
    if not unusable.any():
        return array, ~unusable
    found = " and ".join(
        text
        for count, text in (
            (non_finite, f"{non_finite:,} rows with NaN or inf"),
            (too_large, f"{too_large:,} rows with a value beyond float32's range"),
        )
        if count
    )
    allowed = (
        f"finite numbers within float32's range (|x| <= {FLOAT32_MAX:.7g}); "
        "drop_non_finite=True drops the rows that are not"
    )
    if not drop:
        raise InvalidParameterError(name, allowed, f"{found} (of {len(array):,})")
    if unusable.all():
        raise InvalidParameterError(name, "at least one row of finite numbers", found)
    use = {
        "points": "K-means runs on",
        "init_points": "the initial centroids are chosen among",
    }.get(name, "the Rand index is measured on")
    warn(
        f"dropped {int(unusable.sum()):,} of {len(array):,} {name.replace('_', ' ')} ({found}): "
        f"{use} the other {int((~unusable).sum()):,}"
    )
    return array[~unusable], ~unusable


def label_codes(name: str, labels: Any, count: int, what: str) -> npt.NDArray[np.int64]:
    """One integer code per label: labels of any kind that sort (numbers, strings).

    The Rand index only asks whether two points share a label, so the codes (the labels'
    ranks) give the same index as the labels.
    """
    allowed = f"one label per {what} ({count:,}): numbers or strings"
    try:
        values = np.asarray(labels).reshape(-1)
        if values.dtype.kind == "O" and not all(isinstance(v, str | Real) for v in values):
            raise TypeError("labels of another kind than numbers and strings")
        _, codes = np.unique(values, return_inverse=True)
    except (TypeError, ValueError) as error:  # ragged, or text and numbers mixed in objects
        raise InvalidParameterError(name, allowed, labels) from error
    if len(values) != count:
        raise InvalidParameterError(name, allowed, f"{len(values):,} labels")
    return np.asarray(codes, dtype=np.int64).reshape(-1)


__all__ = [
    "DATA_ALLOWED",
    "FLOAT32_MAX",
    "label_codes",
    "points_of",
    "table_of",
    "usable_rows",
]
