"""Result rows as a pandas DataFrame, with DuckDB's column types and conversions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def result_frame(rows: Sequence[Any], names: Iterable[str], types: Iterable[str]) -> Any:
    """``rows`` (mappings or sequences) as DuckDB's ``.df()`` of columns of ``types``.

    Each column goes to Arrow from its Python values (text when Arrow cannot hold them, e.g.
    a HUGEINT beyond 64 bits), then DuckDB casts it to its SQL type and converts the table as
    it converts its own results; row order is kept (DuckDB preserves insertion order).

    >>> from datetime import date
    >>> from dpcomm.data.frames import result_frame
    >>> frame = result_frame([(date(2024, 1, 2), None), (None, 3)], ["day", "n"],
    ...                      ["DATE", "BIGINT"])
    >>> [str(dtype) for dtype in frame.dtypes]
    ['datetime64[us]', 'Int64']
    """
    import duckdb
    import pyarrow as pa

    names, types = list(names), list(types)
    columns = [
        [row[name] if isinstance(row, Mapping) else row[i] for row in rows]
        for i, name in enumerate(names)
    ]
    arrays = []
    for values in columns:
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    positional = [f"c{index}" for index in range(len(names))]
    result_rows = pa.Table.from_arrays(arrays, names=positional)
    connection = duckdb.connect()
    connection.register("result_rows", result_rows)
    select = ", ".join(
        f'CAST({column} AS {sql_type}) AS "{name.replace(chr(34), chr(34) * 2)}"'
        for column, sql_type, name in zip(positional, types, names, strict=True)
    )
    return connection.sql(f"SELECT {select} FROM result_rows").df()
