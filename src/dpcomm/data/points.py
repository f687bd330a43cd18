"""Points for K-means from a table's numeric columns, read by DuckDB.

``dpcomm run kmeans --data FILE --columns c1,c2,...`` and Python users reading a file both call
[`read_points`][]; [`dpcomm.kmeans`][] takes its ``points`` (and ``labels``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.data.table import Table, _quote, readable_file, table_from_relation, value_kind
from dpcomm.errors import DpcommError, InvalidParameterError

#: The value kinds a point's coordinate may have (``dpcomm.data.table.value_kind``).
NUMERIC_KINDS = ("int", "wideint", "float", "decimal")
#: Column names an error lists at most.
_LISTED = 30


@dataclass(frozen=True, eq=False)
class TablePoints:
    """Points read from a table: one row per point, one coordinate per chosen column.

    Attributes:
        points: float64, rows × columns; a NULL cell is NaN (refused by [`dpcomm.kmeans`][],
            or its row dropped with ``drop_non_finite=True``).
        labels: one label per row (numbers, or text for columns of other types), or None.
        columns: the coordinates' column names, as the table spells them.
        label_column: the labels' column name, or None.
        null_rows: rows with a NULL coordinate.
    """

    points: npt.NDArray[np.float64]
    labels: npt.NDArray[Any] | None
    columns: tuple[str, ...]
    label_column: str | None
    null_rows: int


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f", ... ({len(names)} columns)" if len(names) > _LISTED else "")


def _find(name: object, names: Sequence[str], parameter: str) -> str:
    """The table's spelling of column ``name`` (case-insensitive, like DuckDB's identifiers)."""
    lowered = [n.lower() for n in names]
    if not isinstance(name, str) or name.lower() not in lowered:
        raise InvalidParameterError(
            parameter, f"column names of the table ({_listed(names)})", name
        )
    return names[lowered.index(name.lower())]


def read_points(
    path: str | Path, columns: Sequence[str], *, label_column: str | None = None
) -> TablePoints:
    r"""The numeric ``columns`` of a CSV or Parquet file as points, and ``label_column``'s labels.

    The file is read by DuckDB as ``dpcomm.data.read_table`` reads it (``.csv``, ``.tsv``,
    compressed ``.gz`` or ``.zst``, ``.parquet``), only the named columns. A coordinate column
    must be integer, decimal or floating-point (cast to DOUBLE; NULL becomes NaN); the label
    column may be of any type a query reads (its values' text for other than numbers) and must
    not hold NULL, nor be a coordinate. Names match case-insensitively.

    Examples:
        >>> import dpcomm, tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "points.csv"
        >>> _ = path.write_text("x,y,kind\n0,0,a\n0,1,a\n9,9,b\n")
        >>> table = dpcomm.data.read_points(path, ["x", "Y"], label_column="kind")
        >>> table.points.tolist(), table.labels.tolist(), table.columns
        ([[0.0, 0.0], [0.0, 1.0], [9.0, 9.0]], ['a', 'a', 'b'], ('x', 'y'))

    Raises:
        InvalidParameterError: the file is missing or of another kind, a column is missing,
            named twice or not numeric, the label column holds NULL, the table has no rows.
        DpcommError: DuckDB could not read the file (its message, on one line).
    """
    file, reader = readable_file(path)
    if isinstance(columns, str) or not columns:
        raise InvalidParameterError("columns", "one or more column names", columns)
    import duckdb

    connection = duckdb.connect()
    try:
        relation = connection.sql(f"SELECT * FROM {reader}(?)", params=[str(file)])
        names = list(relation.columns)
        types = dict(zip(names, (str(t) for t in relation.types), strict=True))
        chosen = _coordinate_columns(columns, names, types)
        label = None if label_column is None else _find(label_column, names, "label_column")
        if label is not None and label in chosen:
            raise InvalidParameterError(
                "label_column", "a column that is not a coordinate", label_column
            )
        projection = ", ".join(f"CAST({_quote(n)} AS DOUBLE) AS {_quote(n)}" for n in chosen)
        fetched = relation.project(projection).fetchnumpy()
        labelled = (
            None if label is None else table_from_relation(relation.project(_quote(label)), "t")
        )
    except duckdb.Error as error:
        raise DpcommError(f"cannot read {path}: {str(error).splitlines()[0]}") from error
    finally:
        connection.close()
    points = _coordinates(fetched, chosen)
    if len(points) == 0:
        raise InvalidParameterError("data", "a table with at least one row", f"{path} (empty)")
    null_rows = int(
        np.column_stack([np.ma.getmaskarray(fetched[n]) for n in chosen]).any(axis=1).sum()
    )
    labels = None if labelled is None else _labels(labelled, label)
    return TablePoints(points, labels, tuple(chosen), label, null_rows)


def _coordinate_columns(
    columns: Sequence[str], names: Sequence[str], types: dict[str, str]
) -> list[str]:
    """The table's spelling of the coordinate ``columns``: distinct, each numeric."""
    chosen = [_find(name, names, "columns") for name in columns]
    if len(set(chosen)) != len(chosen):
        raise InvalidParameterError("columns", "distinct column names", list(columns))
    for name in chosen:
        if value_kind(types[name]) not in NUMERIC_KINDS:
            raise InvalidParameterError(
                "columns",
                "numeric columns (integer, decimal or floating-point)",
                f"{name} ({types[name]})",
            )
    return chosen


def _coordinates(fetched: dict[str, Any], chosen: Sequence[str]) -> npt.NDArray[np.float64]:
    """The fetched columns side by side, rows × columns, a NULL cell as NaN."""
    coordinates = []
    for name in chosen:
        raw = fetched[name]
        values = np.asarray(np.ma.getdata(raw), dtype=np.float64)
        coordinates.append(np.where(np.ma.getmaskarray(raw), np.nan, values))
    return np.column_stack(coordinates) if coordinates else np.zeros((0, 0))


def _labels(labelled: Table, label: str | None) -> npt.NDArray[Any]:
    """The label column's values (their text for other than numbers); NULL is refused."""
    column = labelled.columns[0]
    if column.is_null.any():
        raise InvalidParameterError(
            "label_column",
            "a column without NULL",
            f"{label} with {int(column.is_null.sum()):,} NULLs",
        )
    values = column.values
    return values if values.dtype.kind in "iufbM" else np.array([str(v) for v in values])
