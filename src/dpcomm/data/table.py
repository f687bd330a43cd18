"""A table held as numpy columns, read and written through DuckDB.

Source nodes each hold one row. The simulator needs the rows as arrays (no Python object per
row), and the reference results need the same rows back in DuckDB with their SQL types; a
`Table` keeps both views consistent: every column has its DuckDB type name, its values
and a NULL mask.
"""

from __future__ import annotations

import datetime
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from dpcomm.errors import DpcommError, InvalidParameterError

if TYPE_CHECKING:
    import duckdb

_SUPPORTED_SUFFIXES = ("CSV", "PARQUET")
#: File names `read_table` reads, and DuckDB's reader of each.
_READERS = {
    ".csv": "read_csv",
    ".tsv": "read_csv",
    ".csv.gz": "read_csv",
    ".tsv.gz": "read_csv",
    ".csv.zst": "read_csv",
    ".tsv.zst": "read_csv",
    ".parquet": "read_parquet",
}

#: How the values of each DuckDB type a query can read are held (see `value_kind`).
_KINDS = {
    **dict.fromkeys(
        ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"), "int"
    ),
    **dict.fromkeys(("UBIGINT", "HUGEINT", "UHUGEINT"), "wideint"),
    **dict.fromkeys(("FLOAT", "DOUBLE", "REAL"), "float"),
    "BOOLEAN": "bool",
    "VARCHAR": "text",
    "DATE": "date",
    "TIME": "time",
    **dict.fromkeys(("TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS"), "timestamp"),
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
#: numpy kinds of the values of the exact types (a DECIMAL as float64 would not be exact).
_HELD = {"decimal": "O", "wideint": "iuO", "int": "iu", "time": "O"}
#: What the error on a column of another type lists.
CARRIED_TYPES = "integer, decimal, floating-point, boolean, text, date, time, timestamp"


def value_kind(sql_type: str) -> str | None:
    """How values of ``sql_type`` are held, or None for a type no query can read.

    ``int``: int64; ``wideint`` (UBIGINT, HUGEINT, UHUGEINT): int64 when every value fits,
    else Python ints; ``decimal``: `decimal.Decimal` values with the type's scale;
    ``float``: float64; ``bool``; ``text``: str; ``date``: datetime64[D]; ``time``:
    `datetime.time`; ``timestamp``: datetime64 (s, ms or us). Every other type (BLOB,
    LIST, STRUCT, MAP, UUID, INTERVAL, TIMESTAMPTZ, TIMESTAMP_NS, ...) is held as DuckDB's text
    of its values, enough to write the table back, and refused by `check_carried`.
    """
    upper = sql_type.strip().upper()
    if _DECIMAL.fullmatch(upper):
        return "decimal"
    return _KINDS.get(upper)


def decimal_scale(sql_type: str) -> tuple[int, int]:
    """Precision and scale of a ``DECIMAL(p,s)`` type name."""
    match = _DECIMAL.fullmatch(sql_type.strip().upper())
    if match is None:
        raise InvalidParameterError("sql_type", "DECIMAL(p,s)", sql_type)
    return int(match.group(1)), int(match.group(2))


def decimal_of(scaled: int, scale: int) -> Decimal:
    """The DECIMAL value ``scaled`` × 10^-``scale``, exactly (no context rounding)."""
    digits = tuple(int(d) for d in str(abs(scaled)))
    return Decimal((1 if scaled < 0 else 0, digits, -scale))


def exact_integers(values: Sequence[int]) -> npt.NDArray[Any]:
    """``values`` as int64 when every one fits, else as an object array of Python ints."""
    if all(-(1 << 63) <= v < (1 << 63) for v in values):
        return np.array(values, dtype=np.int64).reshape(-1)
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


def check_carried(column: Column) -> None:
    """Raise `InvalidParameterError` unless a query can read ``column``'s type."""
    if value_kind(column.sql_type) is None:
        raise InvalidParameterError(
            f'column "{column.name}"',
            f"a type dpcomm can carry ({CARRIED_TYPES})",
            column.sql_type,
        )


@dataclass(frozen=True, eq=False)
class Column:
    """One column: its name, DuckDB type, values and NULL mask.

    Attributes:
        name: the column name as DuckDB reports it.
        sql_type: DuckDB's type name (``BIGINT``, ``DOUBLE``, ``VARCHAR``, ...).
        values: one value per row; a NULL slot holds a filler (0, NaN or '') that is never read.
        is_null: True where the value is SQL NULL.
    """

    name: str
    sql_type: str
    values: npt.NDArray[Any]
    is_null: npt.NDArray[np.bool_]

    def __post_init__(self) -> None:
        if self.values.ndim != 1 or self.is_null.shape != self.values.shape:
            raise InvalidParameterError(
                f"column {self.name!r}",
                "1-d values and a NULL mask of the same length",
                f"shapes {self.values.shape} and {self.is_null.shape}",
            )
        held = _HELD.get(value_kind(self.sql_type) or "")
        if held is not None and self.values.dtype.kind not in held:
            raise InvalidParameterError(
                f"values of column {self.name!r} ({self.sql_type})",
                "exact values (see dpcomm.data.table.value_kind)",
                f"numpy {self.values.dtype}",
            )

    @property
    def is_numeric(self) -> bool:
        """True for integer, floating-point and decimal columns."""
        return value_kind(self.sql_type) in ("int", "wideint", "float", "decimal")

    @property
    def is_integer(self) -> bool:
        """True for integer columns (values held as int64, or Python ints beyond int64)."""
        return value_kind(self.sql_type) in ("int", "wideint")

    def take(self, rows: npt.NDArray[Any]) -> Column:
        """The column restricted to ``rows`` (a boolean mask or integer indices)."""
        return Column(self.name, self.sql_type, self.values[rows], self.is_null[rows])


@dataclass(frozen=True, eq=False)
class Table:
    """A named table of equally long columns; one row per source node.

    Attributes:
        name: the table name (what a query's FROM is bound to).
        columns: the columns, in order.
        rows: the number of rows of a table without columns (a COUNT(*) over the empty
            grouping set carries no value, but every row still counts); None when the columns
            say it.
    """

    name: str
    columns: tuple[Column, ...]
    rows: int | None = None

    def __post_init__(self) -> None:
        lengths = {len(c.values) for c in self.columns}
        if len(lengths) > 1:
            raise InvalidParameterError("columns", "columns of equal length", sorted(lengths))
        if self.columns and self.rows is not None and lengths != {self.rows}:
            raise InvalidParameterError("rows", f"the columns' length {lengths}", self.rows)
        names = [c.name.lower() for c in self.columns]
        if len(set(names)) != len(names):
            raise InvalidParameterError("columns", "distinct column names", names)

    @property
    def num_rows(self) -> int:
        """Number of rows (source nodes)."""
        if self.columns:
            return len(self.columns[0].values)
        return self.rows or 0

    @property
    def column_names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        """The column called ``name`` (case-insensitive, like DuckDB's unquoted identifiers)."""
        wanted = name.lower()
        for column in self.columns:
            if column.name.lower() == wanted:
                return column
        raise InvalidParameterError(
            "column", f"one of {', '.join(self.column_names)} (table {self.name})", name
        )

    def take(self, rows: npt.NDArray[Any]) -> Table:
        """The table restricted to ``rows`` (a boolean mask or integer indices)."""
        if not self.columns:
            selected = np.arange(self.num_rows)[np.asarray(rows)]
            return Table(self.name, (), rows=len(selected))
        return Table(self.name, tuple(c.take(rows) for c in self.columns))

    def slice(self, start: int, stop: int) -> Table:
        """Rows ``start`` to ``stop - 1``, as views of this table's arrays (nothing copied)."""
        rows = len(range(self.num_rows)[start:stop])
        if not self.columns:
            return Table(self.name, (), rows=rows)
        return Table(
            self.name,
            tuple(
                Column(c.name, c.sql_type, c.values[start:stop], c.is_null[start:stop])
                for c in self.columns
            ),
        )

    def select(self, names: Sequence[str]) -> Table:
        """The columns called ``names`` (case-insensitive), in that order."""
        return Table(
            self.name,
            tuple(self.column(n) for n in names),
            rows=None if names else self.num_rows,
        )

    def renamed(self, name: str) -> Table:
        """The same columns under another table name."""
        return Table(name, self.columns, self.rows)

    def register(self, connection: duckdb.DuckDBPyConnection, name: str | None = None) -> None:
        """Create (or replace) this table in ``connection``, SQL types and NULLs preserved."""
        target = name or self.name
        quoted = _quote(target)
        if self.num_rows == 0 or not self.columns:
            definitions = ", ".join(f"{_quote(c.name)} {c.sql_type}" for c in self.columns)
            connection.execute(f"CREATE OR REPLACE TABLE {quoted} ({definitions})")
            return
        connection.register("__dpcomm_frame", _arrow_or_frame(self))
        selected = ", ".join(
            f"CAST(c{i} AS {c.sql_type}) AS {_quote(c.name)}" for i, c in enumerate(self.columns)
        )
        connection.execute(
            f"CREATE OR REPLACE TABLE {quoted} AS SELECT {selected} FROM __dpcomm_frame"
        )
        connection.unregister("__dpcomm_frame")


Rows = TypeVar("Rows", Table, npt.NDArray[Any])
"""The rows of a program's sources: a table, or an array with one row per source (points)."""


def select_rows(rows: Rows, mask: npt.NDArray[np.bool_]) -> Rows:
    """The rows where ``mask`` is True (``rows`` itself, not a copy, when every one is)."""
    if bool(mask.all()):
        return rows
    if isinstance(rows, np.ndarray):
        return rows[mask]
    return rows.take(np.flatnonzero(mask))


def concat_tables(tables: Sequence[Table], *, name: str | None = None) -> Table:
    """The rows of ``tables`` one after the other (e.g. the partitions of one table).

    The tables must have the same column names and types, in the same order. A wide-integer
    column that is int64 in one part and Python ints in another is Python ints throughout.

    Args:
        tables: at least one table.
        name: the result's name (default: the first table's).
    """
    if not tables:
        raise InvalidParameterError("tables", "at least one table", "none")
    first = tables[0]
    shape = [(c.name, c.sql_type) for c in first.columns]
    for table in tables[1:]:
        other = [(c.name, c.sql_type) for c in table.columns]
        if other != shape:
            raise InvalidParameterError("tables", f"tables of the columns {shape}", other)
    target = first.name if name is None else name
    if not first.columns:
        return Table(target, (), rows=sum(t.num_rows for t in tables))
    columns = []
    for index, column in enumerate(first.columns):
        parts = [t.columns[index] for t in tables]
        columns.append(
            Column(
                column.name,
                column.sql_type,
                np.concatenate([p.values for p in parts]),
                np.concatenate([p.is_null for p in parts]),
            )
        )
    return Table(target, tuple(columns))


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _nullable(column: Column) -> Any:
    """The column as a pandas array whose missing values DuckDB reads as NULL."""
    import pandas as pd

    values, mask = column.values, column.is_null
    if values.dtype.kind == "O" and value_kind(column.sql_type) != "time":
        # Text, and the exact values (DECIMAL, wide integers, other types' DuckDB text): the
        # INSERT casts the text to the column's type, exactly.
        texts = [None if m else str(v) for v, m in zip(values.tolist(), mask.tolist(), strict=True)]
        return pd.array(texts, dtype=object)
    if values.dtype.kind == "b":
        array = pd.array(values, dtype="boolean")
    elif values.dtype.kind in "iu":
        array = pd.array(values.astype(np.int64), dtype="Int64")
    elif values.dtype.kind == "f":
        array = pd.array(values.astype(np.float64), dtype="Float64")
    else:
        array = pd.array(values.astype(object), dtype=object)
    if mask.any():
        array[mask] = pd.NA if values.dtype.kind in "biuf" else None
    return array


def _frame(table: Table) -> Any:
    import pandas as pd

    return pd.DataFrame({f"c{i}": _nullable(c) for i, c in enumerate(table.columns)})


def _arrow_column(column: Column) -> Any:
    """The column as an Arrow array of what `_nullable` holds, or None for TIME values.

    A float NaN is NULL here too, as pandas' nullable floats make it; TIME values are Python
    objects that only the pandas frame carries as DuckDB reads them.
    """
    import pyarrow as pa

    values, mask = column.values, column.is_null
    kind = values.dtype.kind
    if kind == "O":
        if value_kind(column.sql_type) == "time":
            return None
        texts = [None if m else str(v) for v, m in zip(values.tolist(), mask.tolist(), strict=True)]
        return pa.array(texts, type=pa.string())
    if kind == "b":
        return pa.array(values, mask=mask)
    if kind in "iu":
        return pa.array(values.astype(np.int64), mask=mask)
    if kind == "f":
        floats = values.astype(np.float64)
        return pa.array(floats, mask=mask | np.isnan(floats))
    if kind == "M":  # DATE and TIMESTAMP (s, ms, us): the values exactly
        return pa.array(values, mask=mask)
    return None


def _arrow_or_frame(table: Table) -> Any:
    """What `register` creates the table from: Arrow columns ``c0, c1, ...``, or `_frame`.

    The pandas frame only when a column is of a kind only it carries (TIME): through Arrow, a
    table of a few hundred rows registers in about 2 ms of CPU, against 4 to 5 through pandas.
    """
    import pyarrow as pa

    arrays = []
    for column in table.columns:
        array = _arrow_column(column)
        if array is None:
            return _frame(table)
        arrays.append(array)
    return pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])


def table_from_relation(relation: duckdb.DuckDBPyRelation, name: str) -> Table:
    """Materialize a DuckDB relation as a `Table` (types from DuckDB, NULLs kept).

    DECIMAL and wide integers are fetched as text and parsed exactly (DuckDB's numpy
    conversion makes them float64); an ENUM (a pandas ``category`` column) is read as its
    labels, VARCHAR; types no query can read are kept as DuckDB's text.
    """
    types = [str(t) for t in relation.types]
    enums = [i for i, sql_type in enumerate(types) if sql_type.upper().startswith("ENUM(")]
    if enums:
        relation = relation.project(
            ", ".join(
                f"CAST({_quote(c)} AS VARCHAR) AS {_quote(c)}" if i in enums else _quote(c)
                for i, c in enumerate(relation.columns)
            )
        )
        types = [str(t) for t in relation.types]
    names = list(relation.columns)
    projection = [
        f"{fetched_as(_quote(column_name), sql_type)} AS {_quote(column_name)}"
        for column_name, sql_type in zip(names, types, strict=True)
    ]
    fetched = relation.project(", ".join(projection)).fetchnumpy() if names else {}
    return table_from_fetched(name, names, types, fetched)


def fetched_as(expression: str, sql_type: str) -> str:
    """What `table_from_relation` fetches of a column of ``sql_type``.

    Its values, or their text when numpy would not hold them exactly (DECIMAL, wide integers)
    or at all.
    """
    if value_kind(sql_type) in (None, "wideint", "decimal"):
        return f"CAST({expression} AS VARCHAR)"
    return expression


def table_from_fetched(
    name: str, names: Sequence[str], types: Sequence[str], fetched: Mapping[str, Any]
) -> Table:
    """The `Table` of columns ``names`` of ``types`` from DuckDB's ``fetchnumpy``.

    Each column of ``fetched`` was fetched as `fetched_as` says.
    """
    return Table(
        name,
        tuple(
            _column_from_numpy(column_name, sql_type, fetched[column_name])
            for column_name, sql_type in zip(names, types, strict=True)
        ),
    )


def _column_from_numpy(name: str, sql_type: str, raw: Any) -> Column:
    """One fetched column as a `Column` (filler 0, NaN or '' in NULL slots).

    DATE values are kept as ``datetime64[D]``: DuckDB's ``fetchnumpy`` gives them as
    ``datetime64[us]``, whose Python values are ``datetime.datetime`` at midnight, while
    DuckDB's own rows (``fetchall``) give ``datetime.date``, and ``datetime(y, m, d) !=
    date(y, m, d)`` in Python: a result grouped by a DATE column would then differ from
    DuckDB's on every key. Day resolution is exactly DATE's, so nothing is lost.
    """
    mask = np.asarray(np.ma.getmaskarray(raw), dtype=bool)
    data = np.ma.getdata(raw)
    kind = value_kind(sql_type)
    values: npt.NDArray[Any]
    if kind == "wideint":
        values = exact_integers(
            [0 if m else int(v) for v, m in zip(data.tolist(), mask.tolist(), strict=True)]
        )
    elif kind == "decimal":
        _, scale = decimal_scale(sql_type)
        values = np.empty(len(data), dtype=object)
        values[:] = [
            decimal_of(0, scale) if m else Decimal(str(v))
            for v, m in zip(data.tolist(), mask.tolist(), strict=True)
        ]
    elif kind == "time":
        values = np.empty(len(data), dtype=object)
        values[:] = [
            datetime.time() if m else v for v, m in zip(data.tolist(), mask.tolist(), strict=True)
        ]
    elif data.dtype.kind in "iu":
        values = np.asarray(data, dtype=np.int64)
    elif data.dtype.kind == "f":
        values = np.asarray(data, dtype=np.float64)
    elif data.dtype.kind == "b":
        values = np.asarray(data, dtype=bool)
    elif data.dtype.kind == "O":
        values = np.array(
            ["" if m else str(v) for v, m in zip(data, mask, strict=True)], dtype=object
        )
    elif data.dtype.kind == "M" and kind == "date":
        values = np.asarray(data).astype("datetime64[D]")
    else:
        values = np.asarray(data)
    if values.dtype.kind == "f":
        values = np.where(mask, 0.0, values)
    elif values.dtype.kind in "iu":
        values = np.where(mask, 0, values)
    return Column(name, sql_type, values, mask)


def _reader(file: Path) -> str | None:
    """DuckDB's reader of ``file`` by its name (``.csv``, ``.csv.gz``, ``.parquet``, ...)."""
    lowered = file.name.lower()
    for ending, reader in _READERS.items():
        if lowered.endswith(ending):
            return reader
    return None


def readable_file(path: str | Path) -> tuple[Path, str]:
    """``path`` and DuckDB's reader of it; an unsupported suffix or no such file is an error."""
    file = Path(path)
    reader = _reader(file)
    if reader is None:
        raise InvalidParameterError(
            "data", "a .csv, .tsv (optionally .gz or .zst) or .parquet file", str(path)
        )
    if not file.is_file():
        raise InvalidParameterError("data", "an existing file", str(path))
    return file, reader


def read_table(path: str | Path, *, name: str = "data") -> Table:
    """Read a CSV (``.csv``, ``.tsv``, compressed ``.gz`` or ``.zst``) or Parquet file with DuckDB.

    Raises:
        InvalidParameterError: the file is missing or its suffix unsupported.
    """
    file, reader = readable_file(path)
    import duckdb

    from dpcomm.data.connections import thread_connection

    try:
        with thread_connection() as connection:
            relation = connection.sql(f"SELECT * FROM {reader}(?)", params=[str(file)])
            table = table_from_relation(relation, name)
    except duckdb.Error as error:
        raise DpcommError(f"cannot read {path}: {str(error).splitlines()[0]}") from error
    return table


def write_table(table: Table, path: str | Path) -> None:
    """Write ``table`` as CSV or Parquet (chosen by the suffix) with DuckDB.

    Raises:
        DpcommError: DuckDB could not write the file (its message, on one line).
    """
    file = Path(path)
    suffix = file.suffix.lstrip(".").upper()
    if suffix not in _SUPPORTED_SUFFIXES:
        raise InvalidParameterError("out", "a .csv or .parquet file", str(path))
    import duckdb

    connection = duckdb.connect()
    try:
        table.register(connection, "__dpcomm_out")
        options = "(FORMAT CSV, HEADER)" if suffix == "CSV" else "(FORMAT PARQUET)"
        connection.execute(f"COPY __dpcomm_out TO '{_escape(str(file))}' {options}")
    except duckdb.Error as error:  # e.g. a folder where nothing can be created (/proc)
        raise DpcommError(f"cannot write {path}: {str(error).splitlines()[0]}") from error
    finally:
        connection.close()


def _escape(text: str) -> str:
    return text.replace("'", "''")


def table_from_arrays(
    name: str, arrays: dict[str, npt.NDArray[Any]], types: Sequence[str] | None = None
) -> Table:
    """Build a table from plain numpy arrays (no NULLs); types inferred when not given.

    datetime64 arrays become DATE (day unit) or TIMESTAMP (microseconds) columns.
    """
    columns = []
    for index, (column_name, values) in enumerate(arrays.items()):
        array = np.asarray(values)
        if types is not None:
            sql_type = types[index]
        elif array.dtype.kind in "iu":
            sql_type = "BIGINT"
        elif array.dtype.kind == "f":
            sql_type = "DOUBLE"
        elif array.dtype.kind == "b":
            sql_type = "BOOLEAN"
        elif array.dtype.kind == "M":
            sql_type = "DATE" if np.datetime_data(array.dtype)[0] == "D" else "TIMESTAMP"
        else:
            sql_type = "VARCHAR"
        if array.dtype.kind == "M":
            unit = "D" if value_kind(sql_type) == "date" else "us"
            columns.append(
                Column(
                    column_name,
                    sql_type,
                    array.astype(f"datetime64[{unit}]"),
                    np.zeros(len(array), dtype=bool),
                )
            )
            continue
        if array.dtype.kind in "iu":
            array = array.astype(np.int64)
        elif array.dtype.kind == "f":
            array = array.astype(np.float64)
            if np.any(~np.isfinite(array)):
                raise InvalidParameterError(
                    f"column {column_name}", "finite numbers", "NaN or infinity"
                )
        elif array.dtype.kind not in "b":
            array = array.astype(object)
        columns.append(Column(column_name, sql_type, array, np.zeros(len(array), dtype=bool)))
    return Table(name, tuple(columns))


def check_range(start: object, stop: object, num_rows: int) -> tuple[int, int]:
    """``(start, stop)`` as ints with ``0 <= start <= stop <= num_rows``, or a one-line error."""
    if (
        isinstance(start, bool)
        or not isinstance(start, numbers.Integral)
        or not 0 <= int(start) <= num_rows
    ):
        raise InvalidParameterError("start", f"an integer in [0, {num_rows}]", start)
    if (
        isinstance(stop, bool)
        or not isinstance(stop, numbers.Integral)
        or not int(start) <= int(stop) <= num_rows
    ):
        raise InvalidParameterError("stop", f"an integer in [{start}, {num_rows}]", stop)
    return int(start), int(stop)


def column_positions(names: Sequence[str], columns: Sequence[str] | None) -> tuple[int, ...]:
    """Positions, in table order, of the ``columns`` among ``names`` (all when None).

    Names are matched case-insensitively, like DuckDB's unquoted identifiers; a name given
    twice counts once.
    """
    if columns is None:
        return tuple(range(len(names)))
    if isinstance(columns, str):
        raise InvalidParameterError("columns", "a sequence of names (not one string)", columns)
    lowered = [n.lower() for n in names]
    wanted: set[int] = set()
    for column in columns:
        key = column.lower() if isinstance(column, str) else None
        if key not in lowered:
            raise InvalidParameterError("columns", f"names among {', '.join(names)}", column)
        wanted.add(lowered.index(key))
    return tuple(sorted(wanted))
