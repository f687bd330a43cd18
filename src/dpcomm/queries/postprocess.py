"""The result node's last step: the union of the grouping sets' rows, post-processed.

A query in the core class gets its rows as the compute nodes computed them, in grouping-set
order, then key order, with a `dpcomm.queries.query.GROUPING_SET_COLUMN` naming each
row's grouping set when there are several. An analyst query's
`dpcomm.queries.query.PostProcessing` runs in DuckDB over those rows: expressions over
aggregates, GROUPING(), HAVING, ORDER BY, LIMIT, OFFSET, DuckDB's names and types. Only the
released result is read: no privacy number changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpcomm.data.frames import arrow_columns, typed_columns
from dpcomm.errors import DpcommError
from dpcomm.queries.query import GROUPING_SET_COLUMN, BoundAggregate, PostProcessing

Row = dict[str, Any]

#: Names the post-processing SQL reads (see `dpcomm.queries.analyst`).
_PREFIX = "__dpcomm_"
_RESULT_TABLE = f"{_PREFIX}result"
_ORDER_COLUMN = f"{_PREFIX}order"
_SET_COLUMN = f"{_PREFIX}set"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def grouping_value(columns: Sequence[str], grouping_set: Sequence[str]) -> int:
    """GROUPING(columns) for a row of ``grouping_set`` (DuckDB's and the SQL standard's).

    Bit i, from the left, is 1 when column i is not in the set.
    """
    inside = {c.lower() for c in grouping_set}
    value = 0
    for column in columns:
        value = (value << 1) | (column.lower() not in inside)
    return value


def finish(bound: BoundAggregate, rows_by_set: Sequence[Sequence[Row]]) -> list[Row]:
    """The final result from each grouping set's rows (in grouping-set order).

    Without post-processing the rows are returned in order, labelled with their grouping set
    when there are several; with it, DuckDB runs the post-processing SQL over them.
    """
    labels = bound.labels
    several = bound.num_grouping_sets > 1
    if bound.post is None:
        if not several:
            return [row for rows in rows_by_set for row in rows]
        return [
            {**row, GROUPING_SET_COLUMN: labels[index]}
            for index, rows in enumerate(rows_by_set)
            for row in rows
        ]
    return _post_process(bound, bound.post, rows_by_set)


def _post_process(
    bound: BoundAggregate, post: PostProcessing, rows_by_set: Sequence[Sequence[Row]]
) -> list[Row]:
    import duckdb

    from dpcomm.queries.sql import scratch_connection

    labels = bound.labels
    several = bound.num_grouping_sets > 1
    names = list(bound.output_names)
    groupings = [
        [grouping_value(columns, grouping_set) for grouping_set in bound.grouping_sets]
        for columns in post.groupings
    ]
    columns: list[list[Any]] = [[] for _ in names]
    order: list[int] = []
    sets: list[int] = []
    extra: list[list[int]] = [[] for _ in groupings]
    for index, rows in enumerate(rows_by_set):
        for row in rows:
            for values, name in zip(columns, names, strict=True):
                values.append(row[name])
            order.append(len(order))
            sets.append(index)
            for values, per_set in zip(extra, groupings, strict=True):
                values.append(per_set[index])
    hidden = [_ORDER_COLUMN, _SET_COLUMN, *(f"{_PREFIX}g{i}" for i in range(len(groupings)))]
    types = [*bound.output_types, "BIGINT", "INTEGER", *(["BIGINT"] * len(groupings))]
    arrow = arrow_columns([*columns, order, sets, *extra])
    selected = typed_columns([*names, *hidden], types)
    # The typed rows are the post-processing's table as a common table expression: one
    # statement over the registered rows (a table made of them first cost two more).
    typed = f"SELECT {selected} FROM {_quoted(f'{_PREFIX}arrow')}"
    with scratch_connection() as connection:
        try:
            connection.register(f"{_PREFIX}arrow", arrow)
            fetched = connection.execute(
                f"WITH {_quoted(_RESULT_TABLE)} AS ({typed}) {post.sql}"
            ).fetchall()
        except duckdb.Error as error:
            message = str(error).splitlines()[0]
            raise DpcommError(f"post-processing the result failed: {message}") from error
    result: list[Row] = []
    for record in fetched:
        row = dict(zip(post.names, record[:-1], strict=True))
        if several:
            row[GROUPING_SET_COLUMN] = labels[int(record[-1])]
        result.append(row)
    return result


__all__ = ["finish", "grouping_value"]
