"""Tables read by ranges of rows: the sources of an engine that never holds the whole table.

A [`RowSource`][] knows how many rows its table has and reads any contiguous range of them,
``[start, stop)`` of the table's row order, optionally only some columns. A Dask task ships the
(small, picklable) source to a worker and reads one partition there; the in-memory engine reads
the whole table through the same method, so both see the same rows, values, types and order.

* [`ParquetRows`][]: a Parquet file, or a directory of them, read one row group range at a
  time with pyarrow and converted by DuckDB, so that the values and types are exactly those
  `dpcomm.data.read_table` gives for the whole file;
* `SyntheticRows`: the synthetic table of `dpcomm.data.synthetic`, drawn block by
  block (`dpcomm.data.synthetic.BLOCK_ROWS` rows per block);
* [`InMemoryRows`][]: a `Table` already in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from dpcomm.data.connections import thread_connection
from dpcomm.data.table import (
    Table,
    check_range,
    column_positions,
    fetched_as,
    table_from_fetched,
)
from dpcomm.errors import DpcommError, InvalidParameterError

if TYPE_CHECKING:
    import duckdb


@runtime_checkable
class RowSource(Protocol):
    """A table read by ranges of rows (see the module docstring).

    Implementations are small and picklable (a Dask task carries one to a worker), and ``read``
    is deterministic: the same range gives the same rows, whichever process reads it.
    """

    @property
    def name(self) -> str:
        """The table name (what a query's FROM is bound to)."""
        ...

    @property
    def num_rows(self) -> int:
        """Number of rows of the whole table."""
        ...

    def read(self, start: int, stop: int, columns: Sequence[str] | None = None) -> Table:
        """Rows ``start`` to ``stop - 1`` of the table, in table order.

        Args:
            start: first row, in ``[0, num_rows]``.
            stop: one past the last row, in ``[start, num_rows]``.
            columns: only these columns (names matched case-insensitively, kept in the
                table's column order); None for every column.

        Raises:
            InvalidParameterError: ``start``, ``stop`` or ``columns`` is out of range.
        """
        ...

    def schema(self) -> Table:
        """Every column, with its type, and its first row (for binding SQL without data)."""
        ...


@dataclass(frozen=True)
class RowRange:
    """Rows [start, stop) of a row source, as a row source of their own (read from row 0).

    What an engine ships to another process for one partition: the source's own description
    (a few bytes for files or synthetic rows) and the range. A table in memory is cut instead
    ([`row_range`][]), so that only the range's rows travel.
    """

    source: RowSource
    start: int
    stop: int

    @property
    def name(self) -> str:
        """The table name."""
        return self.source.name

    @property
    def num_rows(self) -> int:
        """The range's number of rows."""
        return self.stop - self.start

    def read(self, start: int, stop: int, columns: Sequence[str] | None = None) -> Table:
        """Rows [start, stop) of the range (see [`RowSource.read`][])."""
        start, stop = check_range(start, stop, self.num_rows)
        return self.source.read(self.start + start, self.start + stop, columns)

    def schema(self) -> Table:
        """The source's schema."""
        return self.source.schema()


def row_range(source: RowSource, start: int, stop: int) -> RowSource:
    """Rows [start, stop) of ``source`` as a small row source (see [`RowRange`][])."""
    start, stop = check_range(start, stop, source.num_rows)
    if isinstance(source, InMemoryRows):
        return InMemoryRows(source.table.slice(start, stop))
    return RowRange(source, start, stop)


# ----------------------------------------------------------------------------- in memory


class InMemoryRows:
    """A `Table` already in memory, read by ranges (slices share its arrays)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    @property
    def name(self) -> str:
        """The table's name."""
        return self.table.name

    @property
    def num_rows(self) -> int:
        """The table's number of rows."""
        return self.table.num_rows

    @property
    def column_names(self) -> tuple[str, ...]:
        """The table's column names."""
        return self.table.column_names

    def read(self, start: int, stop: int, columns: Sequence[str] | None = None) -> Table:
        """Rows ``[start, stop)`` (see [`RowSource.read`][]), as views of the table's arrays."""
        start, stop = check_range(start, stop, self.num_rows)
        positions = column_positions(self.table.column_names, columns)
        if columns is not None:
            selected = self.table.select([self.table.column_names[p] for p in positions])
        else:
            selected = self.table
        if not selected.columns:
            return Table(self.name, (), rows=stop - start)
        return selected.slice(start, stop)

    def schema(self) -> Table:
        """The first row (none of a table without rows)."""
        return self.read(0, min(1, self.num_rows))

    def __repr__(self) -> str:
        return f"InMemoryRows({self.name!r}, {self.num_rows} rows)"


# ----------------------------------------------------------------------------- synthetic


# ----------------------------------------------------------------------------- Parquet


def _parquet_files(path: Path) -> tuple[Path, ...]:
    """``path`` itself (a ``.parquet`` file), or the ``*.parquet`` files under it, sorted."""
    allowed = "a .parquet file or a directory holding .parquet files"
    if path.is_file():
        if not path.name.lower().endswith(".parquet"):
            raise InvalidParameterError("path", allowed, str(path))
        return (path,)
    if not path.is_dir():
        raise InvalidParameterError("path", f"{allowed} (no such file or directory)", str(path))
    files = sorted(
        (f for f in path.rglob("*") if f.is_file() and f.name.lower().endswith(".parquet")),
        key=lambda f: f.relative_to(path).as_posix(),
    )
    if not files:
        raise InvalidParameterError("path", f"{allowed} (no .parquet file in it)", str(path))
    return tuple(files)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class ParquetRows:
    """A Parquet file, or a directory of Parquet files, read by ranges of rows.

    The files of a directory are the ``*.parquet`` files under it (recursively), in the order
    of their paths relative to it; their rows follow each other in that order, each file's in
    its own order. They must all have the same columns, of the same types.

    Construction reads only metadata: the rows of every row group of every file (hence the
    global row offsets), and DuckDB's column names and types (those of ``read_parquet``). A
    read opens only the files and reads only the row groups and columns its range needs, with
    pyarrow, and converts them with DuckDB to exactly the values and types that
    `dpcomm.data.read_table` gives for the whole file.

    Args:
        path: a ``.parquet`` file or a directory.
        name: the table name.

    Raises:
        InvalidParameterError: ``path`` is not a Parquet file or a directory holding some, or
            the files differ in their columns.
        DpcommError: a file cannot be read as Parquet.
    """

    def __init__(self, path: str | Path, *, name: str = "data") -> None:
        self.path = Path(path)
        self.name = str(name)
        files = _parquet_files(self.path)
        self.files: tuple[str, ...] = tuple(str(f) for f in files)
        import pyarrow.parquet as pq

        starts: list[int] = []
        file_of: list[int] = []
        group_of: list[int] = []
        total = 0
        first_schema: Any = None
        for index, file in enumerate(self.files):
            try:
                metadata = pq.ParquetFile(file).metadata
            except Exception as error:  # pyarrow raises OSError and ArrowException subclasses
                raise DpcommError(f"cannot read {file}: {_first_line(error)}") from error
            if index == 0:
                first_schema = metadata.schema
                self._arrow_names: tuple[str, ...] = tuple(metadata.schema.to_arrow_schema().names)
                self.column_names, self.sql_types = _duckdb_columns(file)
                if len(self.column_names) != len(self._arrow_names):
                    raise DpcommError(
                        f"cannot read {file}: DuckDB reads {len(self.column_names)} columns, "
                        f"pyarrow {len(self._arrow_names)}"
                    )
            elif not metadata.schema.equals(first_schema) and _duckdb_columns(file) != (
                self.column_names,
                self.sql_types,
            ):
                raise InvalidParameterError(
                    "path",
                    f"Parquet files with the same columns as {self.files[0]}",
                    f"{file}: {_duckdb_columns(file)}",
                )
            for group in range(metadata.num_row_groups):
                rows = metadata.row_group(group).num_rows
                if rows > 0:
                    starts.append(total)
                    file_of.append(index)
                    group_of.append(group)
                    total += rows
        self.num_rows = total
        #: Global index of each row group's first row (empty row groups left out), then the
        #: number of rows; the file and the row group index of each.
        self._starts = np.array([*starts, total], dtype=np.int64)
        self._file_of = np.array(file_of, dtype=np.int64)
        self._group_of = np.array(group_of, dtype=np.int64)

    def __repr__(self) -> str:
        return (
            f"ParquetRows({str(self.path)!r}, {len(self.files)} file(s), "
            f"{self.num_rows} rows, name={self.name!r})"
        )

    def schema(self) -> Table:
        """The first row (none of files without rows)."""
        return self.read(0, min(1, self.num_rows))

    def read(self, start: int, stop: int, columns: Sequence[str] | None = None) -> Table:
        """Rows ``[start, stop)`` (see [`RowSource.read`][]).

        Raises:
            InvalidParameterError: ``start``, ``stop`` or ``columns`` is out of range.
            DpcommError: a file cannot be read, or has changed since this source was made.
        """
        start, stop = check_range(start, stop, self.num_rows)
        positions = column_positions(self.column_names, columns)
        if not positions:
            return Table(self.name, (), rows=stop - start)
        if start == stop and self.num_rows == 0:  # the columns of the first file, no row
            empty = self._read_groups(0, [], positions)
            return self._convert(empty, positions)
        if start == stop:
            return self.read(0, 1, columns).slice(0, 0)
        first = int(np.searchsorted(self._starts, start, side="right")) - 1
        last = int(np.searchsorted(self._starts, stop, side="left"))
        pieces = []
        for file_index in sorted(set(self._file_of[first:last].tolist())):
            in_file = self._file_of[first:last] == file_index
            groups = self._group_of[first:last][in_file].tolist()
            pieces.append(self._read_groups(file_index, groups, positions))
        import pyarrow as pa

        try:
            arrow = pa.concat_tables(pieces, promote_options="permissive")
        except pa.ArrowException as error:
            raise DpcommError(
                f"cannot read {self.path}: its files' columns differ ({_first_line(error)})"
            ) from error
        expected = int(self._starts[last] - self._starts[first])
        if arrow.num_rows != expected:
            raise DpcommError(
                f"cannot read {self.path}: {arrow.num_rows} rows where its metadata said "
                f"{expected} (has it changed since it was opened?)"
            )
        arrow = arrow.slice(start - int(self._starts[first]), stop - start)
        return self._convert(arrow, positions)

    def _read_groups(self, file_index: int, groups: list[int], positions: tuple[int, ...]) -> Any:
        """Row groups ``groups`` of one file, columns at ``positions``, as an Arrow table."""
        import pyarrow.parquet as pq

        file = self.files[file_index]
        names = self._arrow_names
        try:
            parquet = pq.ParquetFile(file, coerce_int96_timestamp_unit="us")
            if len(set(names)) == len(names):
                # Read by name, then keep the top-level columns by name: a name may also be
                # the path of a nested field ("a.b"), which pyarrow reads too.
                wanted = [names[p] for p in positions]
                read = parquet.read_row_groups(groups, columns=wanted)
                return read.select(wanted)
            return parquet.read_row_groups(groups).select(list(positions))
        except Exception as error:  # pyarrow raises OSError and ArrowException subclasses
            raise DpcommError(f"cannot read {file}: {_first_line(error)}") from error

    def _convert(self, arrow: Any, positions: tuple[int, ...]) -> Table:
        """The Arrow columns at ``positions`` as a Table of DuckDB's values and types."""
        import duckdb

        arrow = _ingestible(
            arrow.rename_columns([f"c{i}" for i in range(len(positions))]),
            [self.sql_types[p] for p in positions],
        )
        try:
            with thread_connection() as connection:
                return self._converted(connection, arrow, positions)
        except duckdb.Error as error:
            raise DpcommError(f"cannot read {self.path}: {_first_line(error)}") from error

    def _converted(
        self, connection: duckdb.DuckDBPyConnection, arrow: Any, positions: tuple[int, ...]
    ) -> Table:
        """The columns cast to their types and fetched as `table_from_relation` fetches them.

        One projection does both (each costs DuckDB's binder about half a millisecond). The
        types are ``read_parquet``'s, never an ENUM (which `table_from_relation` reads as
        VARCHAR).
        """
        wanted = [self.sql_types[p] for p in positions]
        relation = connection.from_arrow(arrow)
        projection, converted = [], {}
        for index, (position, got) in enumerate(zip(positions, relation.types, strict=True)):
            value = f"c{index}"
            if str(got) != wanted[index]:
                value = f"CAST({value} AS {wanted[index]})"
            fetched = fetched_as(value, wanted[index])
            if fetched != value:
                # Fetched as text: the type the values convert to is Arrow's (no cast), or
                # the cast's, the one parsed from its name.
                cast = value != f"c{index}"
                converted[index] = str(connection.sqltype(wanted[index]) if cast else got)
            projection.append(f"{fetched} AS {_quote(self.column_names[position])}")
        relation = relation.project(", ".join(projection))
        for index, got in enumerate(relation.types):
            self._check_type(positions[index], converted.get(index, str(got)), wanted[index])
        return table_from_fetched(self.name, relation.columns, wanted, relation.fetchnumpy())

    def _check_type(self, position: int, got: str, wanted: str) -> None:
        if got != wanted:
            raise DpcommError(
                f"cannot read column {self.column_names[position]!r} of {self.path}: "
                f"pyarrow's values convert to {got}, not to {wanted}"
            )


def _duckdb_columns(file: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """DuckDB's column names and types of a Parquet file (``read_parquet``; metadata only)."""
    import duckdb

    try:
        with thread_connection() as connection:
            relation = connection.sql("SELECT * FROM read_parquet(?)", params=[file])
            return tuple(relation.columns), tuple(str(t) for t in relation.types)
    except duckdb.Error as error:
        raise DpcommError(f"cannot read {file}: {_first_line(error)}") from error


#: The Arrow timestamp (unit, with a time zone) of each DuckDB timestamp type.
_TIMESTAMPS = {
    "TIMESTAMP": ("us", False),
    "TIMESTAMP_S": ("s", False),
    "TIMESTAMP_MS": ("ms", False),
    "TIMESTAMP_NS": ("ns", False),
    "TIMESTAMP WITH TIME ZONE": ("us", True),
    "TIMESTAMPTZ_NS": ("ns", True),
}


def _ingestible(arrow: Any, sql_types: Sequence[str]) -> Any:
    """Arrow columns DuckDB would not take, or would type otherwise, made like DuckDB's reads.

    pyarrow restores some types from the Arrow schema a writer stored (float16, decimal256,
    durations, time zones, timestamp units), and reads Parquet INTERVALs as 12-byte binaries;
    DuckDB's ``read_parquet`` reads the Parquet types (FLOAT, DECIMAL or DOUBLE, BIGINT,
    TIMESTAMP in microseconds, INTERVAL). Timestamps are converted here, not by a DuckDB CAST,
    which would shift them by the session's time zone: an Arrow timestamp is a UTC instant
    whatever its zone, exactly what DuckDB reads from the file.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column, sql_type in zip(arrow.columns, sql_types, strict=True):
        kind = column.type
        if pa.types.is_float16(kind):
            column = pc.cast(column, pa.float32())
        elif pa.types.is_decimal256(kind):
            if kind.precision <= 38:
                column = pc.cast(column, pa.decimal128(kind.precision, kind.scale))
            else:
                # DuckDB reads a DECIMAL wider than 38 digits as DOUBLE: through its text.
                column = pc.cast(column, pa.string())
        elif pa.types.is_duration(kind):
            column = pc.cast(column, pa.int64())
        elif pa.types.is_timestamp(kind) and sql_type in _TIMESTAMPS:
            unit, zoned = _TIMESTAMPS[sql_type]
            if kind.unit != unit or (kind.tz is not None) != zoned:
                zone = (kind.tz or "UTC") if zoned else None
                column = pc.cast(column, pa.timestamp(unit, tz=zone))
        elif sql_type == "INTERVAL" and pa.types.is_fixed_size_binary(kind):
            column = _interval(column)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=arrow.column_names)


def _interval(column: Any) -> Any:
    """Parquet INTERVALs (12 bytes: months, days, milliseconds) as Arrow month_day_nano."""
    import pyarrow as pa

    chunk = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    size = chunk.offset + len(chunk)  # the buffers start before a slice's offset
    raw = np.frombuffer(chunk.buffers()[1], dtype="<u4", count=3 * size).reshape(size, 3)
    packed = np.zeros(size, dtype=[("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])
    packed["months"] = raw[:, 0].astype(np.int32)
    packed["days"] = raw[:, 1].astype(np.int32)
    packed["nanos"] = raw[:, 2].astype(np.int64) * 1_000_000
    return pa.Array.from_buffers(
        pa.month_day_nano_interval(),
        len(chunk),
        [chunk.buffers()[0], pa.py_buffer(packed.tobytes())],
        null_count=chunk.null_count,
        offset=chunk.offset,
    )
