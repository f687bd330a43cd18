"""Result rows as a pandas DataFrame, with DuckDB's column types and conversions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def result_frame(rows: Sequence[Any], names: Iterable[str], types: Iterable[str]) -> Any:
    """``rows`` (mappings or sequences) as DuckDB's ``.df()`` of columns of ``types``.

    Each column goes to Arrow from its Python values (text when Arrow cannot hold them, e.g.
    a HUGEINT beyond 64 bits), then DuckDB casts it to its SQL type and converts the table as
    it converts its own results; row order is kept (DuckDB preserves insertion order). The
    thread's DuckDB connection does it (`dpcomm.data.connections`), not a new one per call.

    Examples:
        >>> from datetime import date
        >>> from dpcomm.data.frames import result_frame
        >>> frame = result_frame([(date(2024, 1, 2), None), (None, 3)], ["day", "n"],
        ...                      ["DATE", "BIGINT"])
        >>> [str(dtype) for dtype in frame.dtypes]
        ['datetime64[us]', 'Int64']
    """
    from dpcomm.data.connections import thread_connection

    names, types = list(names), list(types)
    columns = [
        [row[name] if isinstance(row, Mapping) else row[i] for row in rows]
        for i, name in enumerate(names)
    ]
    with thread_connection() as connection:
        connection.register("result_rows", arrow_columns(columns))
        try:
            return connection.sql(f"SELECT {typed_columns(names, types)} FROM result_rows").df()
        finally:
            connection.unregister("result_rows")


def arrow_columns(columns: Sequence[Sequence[Any]]) -> Any:
    """Columns of Python values as an Arrow table of columns ``c0, c1, ...``.

    A column Arrow cannot hold (an integer beyond 64 bits, mixed values) goes as text, which
    `typed_columns` casts back to its SQL type in DuckDB.
    """
    import pyarrow as pa

    arrays = []
    for values in columns:
        try:
            arrays.append(pa.array(list(values)))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    return pa.Table.from_arrays(arrays, names=[f"c{index}" for index in range(len(arrays))])


def typed_columns(names: Sequence[str], types: Sequence[str]) -> str:
    """The select list that casts `arrow_columns`' ``c<i>`` to ``types`` as ``names``."""
    return ", ".join(
        f'CAST(c{index} AS {sql_type}) AS "{name.replace(chr(34), chr(34) * 2)}"'
        for index, (name, sql_type) in enumerate(zip(names, types, strict=True))
    )
