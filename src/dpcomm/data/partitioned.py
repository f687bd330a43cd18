"""Tables read by ranges of rows: the sources of an engine that never holds the whole table.

A :class:`RowSource` knows how many rows its table has and reads any contiguous range of them,
``[start, stop)`` of the table's row order, optionally only some columns. A Dask task ships the
(small, picklable) source to a worker and reads one partition there; the in-memory engine reads
the whole table through the same method, so both see the same rows, values, types and order.

* :class:`SyntheticRows`: the synthetic table of :mod:`dpcomm.data.synthetic`, drawn block by
  block (:data:`dpcomm.data.synthetic.BLOCK_ROWS` rows per block);
* :class:`InMemoryRows`: a :class:`Table` already in memory.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from dpcomm.data.synthetic import (
    BLOCK_ROWS,
    SyntheticShape,
    block_generator,
    check_int_seed,
    check_shape,
    fill_block,
    zipf_rankings,
)
from dpcomm.data.table import Column, Table
from dpcomm.errors import InvalidParameterError


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
        """Every column, with its type, and at least one row (for binding SQL without data)."""
        ...


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


# ----------------------------------------------------------------------------- in memory


class InMemoryRows:
    """A :class:`Table` already in memory, read by ranges (slices share its arrays)."""

    def __init__(self, table: Table) -> None:
        if table.num_rows == 0:
            raise InvalidParameterError("table", "a table with at least one row", "0 rows")
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
        """Rows ``[start, stop)`` (see :meth:`RowSource.read`), as views of the table's arrays."""
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
        """The first row."""
        return self.read(0, 1)

    def __repr__(self) -> str:
        return f"InMemoryRows({self.name!r}, {self.num_rows} rows)"


# ----------------------------------------------------------------------------- synthetic


@dataclass(frozen=True)
class SyntheticRows:
    """The synthetic table of :func:`dpcomm.data.synthetic_table`, read by ranges.

    Block ``b`` of the table (rows ``b·BLOCK_ROWS`` up to ``(b+1)·BLOCK_ROWS``, 65,536 rows) is
    drawn by its own generator, ``default_rng(SeedSequence(seed, spawn_key=(1, b)))``, column
    after column; the Zipf rankings of the intervals (per grouping column) come from
    ``SeedSequence(seed, spawn_key=(0,))``. A range of rows draws only the blocks it overlaps,
    and equals the same rows of the whole table, for any split. The table has no size limit;
    one read holds at most :data:`dpcomm.data.synthetic.MAX_SYNTHETIC_VALUES` values.

    Args: as :func:`dpcomm.data.synthetic_table`, but ``seed`` is a non-negative integer.
    """

    num_rows: int
    _: KW_ONLY
    seed: int
    distribution: str = "uniform"
    num_grouping_columns: int = 4
    num_intervals: int = 20
    num_measures: int = 2
    zipf_exponent: float = 1.2
    name: str = "synthetic"
    _shape: SyntheticShape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = self.num_rows
        if isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 1:
            raise InvalidParameterError("num_rows", "an integer >= 1", rows)
        shape = check_shape(
            distribution=self.distribution,
            num_grouping_columns=self.num_grouping_columns,
            num_intervals=self.num_intervals,
            num_measures=self.num_measures,
            zipf_exponent=self.zipf_exponent,
        )
        object.__setattr__(self, "num_rows", int(rows))
        object.__setattr__(self, "seed", check_int_seed(self.seed))
        object.__setattr__(self, "distribution", shape.distribution)
        object.__setattr__(self, "num_grouping_columns", shape.num_grouping_columns)
        object.__setattr__(self, "num_intervals", shape.num_intervals)
        object.__setattr__(self, "num_measures", shape.num_measures)
        object.__setattr__(self, "zipf_exponent", shape.zipf_exponent)
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "_shape", shape)

    @property
    def column_names(self) -> tuple[str, ...]:
        """``g1..gG`` then ``m1..mM``."""
        return self._shape.column_names

    def read(self, start: int, stop: int, columns: Sequence[str] | None = None) -> Table:
        """Rows ``[start, stop)`` (see :meth:`RowSource.read`).

        Every block overlapping the range is drawn whole (all its columns: the draws of a block
        follow each other), and nothing else.

        Raises:
            InvalidParameterError: also when the range holds more than ``MAX_SYNTHETIC_VALUES``
                values (rows × columns).
        """
        start, stop = check_range(start, stop, self.num_rows)
        positions = column_positions(self.column_names, columns)
        shape = self._shape
        if stop - start > shape.max_rows:
            raise InvalidParameterError(
                "stop",
                f"at most start + {shape.max_rows} (one read must fit in memory)",
                stop,
            )
        groups = [np.empty(stop - start, dtype=np.int64) for _ in range(shape.num_grouping_columns)]
        measures = [np.empty(stop - start, dtype=np.float64) for _ in range(shape.num_measures)]
        rankings = zipf_rankings(self.seed, shape) if shape.distribution == "zipf" else None
        first_block, last_block = start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS
        for block in range(first_block, last_block + 1 if stop > start else first_block):
            block_start = block * BLOCK_ROWS
            block_stop = min(block_start + BLOCK_ROWS, self.num_rows)
            lo, hi = max(start, block_start), min(stop, block_stop)
            rng = block_generator(self.seed, block)
            if lo == block_start and hi == block_stop:
                # The whole block is wanted: draw it straight into the result.
                fill_block(
                    rng,
                    shape,
                    rankings,
                    [g[lo - start : hi - start] for g in groups],
                    [m[lo - start : hi - start] for m in measures],
                )
                continue
            size = block_stop - block_start
            block_groups = [np.empty(size, dtype=np.int64) for _ in groups]
            block_measures = [np.empty(size, dtype=np.float64) for _ in measures]
            fill_block(rng, shape, rankings, block_groups, block_measures)
            for out, drawn in zip(
                [*groups, *measures], [*block_groups, *block_measures], strict=True
            ):
                out[lo - start : hi - start] = drawn[lo - block_start : hi - block_start]
        arrays: list[npt.NDArray[Any]] = [*groups, *measures]
        if not positions:
            return Table(self.name, (), rows=stop - start)
        return Table(
            self.name,
            tuple(_column(shape.column_names[p], shape.sql_types[p], arrays[p]) for p in positions),
        )

    def schema(self) -> Table:
        """The first row."""
        return self.read(0, 1)


def _column(name: str, sql_type: str, values: npt.NDArray[Any]) -> Column:
    """A column without NULLs, built without copying ``values`` (10M rows stay cheap)."""
    return Column(name, sql_type, values, np.zeros(len(values), dtype=np.bool_))
