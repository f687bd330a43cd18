"""What a user may pass as ``data``: a DataFrame, an Arrow table, a DuckDB relation, a path, ...

[`read_rows`][] turns each into dpcomm's table, or into a row source read only when needed;
every error about ``data`` says what it may be ([`DATA_ALLOWED`][]).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpcomm.errors import InvalidParameterError

#: What ``data`` may be (every error about it says so).
DATA_ALLOWED = (
    "a pandas or polars DataFrame, a pyarrow Table, a DuckDB relation, a CSV/Parquet path, "
    "a dpcomm Table or a row source"
)


def read_rows(data: Any, name: str) -> Any:
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
    return table_from_relation(relation, name)
