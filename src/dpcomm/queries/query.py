"""The value of an Aggregate query once parsed and bound: plain data, no parser, no DuckDB.

:mod:`dpcomm.queries.sql` builds these from SQL text (sqlglot) and a table (DuckDB); a node of a
deployment rebuilds them from their JSON form (:meth:`BoundAggregate.from_dict`) without either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from dpcomm.data.table import Table
from dpcomm.errors import InvalidParameterError

OutputKind = Literal["group", "aggregate"]
AggregateFunction = Literal["count", "count_star", "sum", "avg", "min", "max"]

_SUPPORTED = (
    "supported: SELECT <grouping columns>, COUNT(*)|COUNT|SUM|AVG|MIN|MAX(<column>) [AS alias] "
    "FROM <table> GROUP BY <columns | GROUPING SETS | ROLLUP | CUBE>"
)


class UnsupportedQueryError(InvalidParameterError):
    """The SQL uses a construct outside the Aggregate query class; ``construct`` names it."""

    def __init__(self, construct: str, detail: str = "") -> None:
        super().__init__("sql", _SUPPORTED, detail or construct)
        self.construct = construct
        where = f" ({detail})" if detail else ""
        self.args = (f"unsupported in an Aggregate query: {construct}{where}; {_SUPPORTED}",)


class SqlSyntaxError(InvalidParameterError):
    """The SQL does not parse (sqlglot's first error, on one line)."""

    def __init__(self, message: str) -> None:
        super().__init__("sql", "syntactically valid SQL", message)
        self.args = (f"SQL syntax error: {message}",)


@dataclass(frozen=True)
class OutputColumn:
    """One column of the query result.

    Attributes:
        name: the result column's name. After :func:`bind` it is exactly DuckDB's name (the alias,
            or e.g. ``avg(I)``, ``count_star()``); after :func:`parse_aggregate` alone it is the
            alias or a guess of it.
        kind: ``"group"`` for a grouping column, ``"aggregate"`` for a statistical function.
        column: the column read (``None`` for ``COUNT(*)``).
        function: the statistical function (``None`` for a grouping column).
    """

    name: str
    kind: OutputKind
    column: str | None
    function: AggregateFunction | None

    def __post_init__(self) -> None:
        if self.kind == "group":
            if self.column is None or self.function is not None:
                raise InvalidParameterError(
                    "OutputColumn", "a group output with a column and no function", self
                )
        elif self.kind == "aggregate":
            if self.function is None:
                raise InvalidParameterError("OutputColumn", "an aggregate with a function", self)
            if (self.function == "count_star") != (self.column is None):
                raise InvalidParameterError(
                    "OutputColumn", "a column for every function except count_star", self
                )
        else:
            raise InvalidParameterError("OutputColumn.kind", "'group' or 'aggregate'", self.kind)


@dataclass(frozen=True)
class AggregateQuery:
    """A parsed Aggregate query: one sub-query per grouping set.

    Attributes:
        sql: the original SQL text.
        table_name: the table named in FROM.
        grouping_sets: the expanded grouping sets, in DuckDB's order, duplicates kept; each is a
            tuple of column names as written (a column repeated inside one set kept once).
        outputs: the select list, in order.
        grouping_columns: every column of some grouping set, in order of first appearance.
    """

    sql: str
    table_name: str
    grouping_sets: tuple[tuple[str, ...], ...]
    outputs: tuple[OutputColumn, ...]
    grouping_columns: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not self.grouping_sets:
            raise InvalidParameterError("grouping_sets", "at least one grouping set", ())
        if not self.outputs:
            raise InvalidParameterError("outputs", "at least one output column", ())
        columns: list[str] = []
        for grouping_set in self.grouping_sets:
            if len({c.lower() for c in grouping_set}) != len(grouping_set):
                raise InvalidParameterError(
                    "grouping_sets", "sets without repeated columns", grouping_set
                )
            for column in grouping_set:
                if column.lower() not in {c.lower() for c in columns}:
                    columns.append(column)
        object.__setattr__(self, "grouping_columns", tuple(columns))
        known = {c.lower() for c in columns}
        for output in self.outputs:
            if output.kind == "group" and (output.column or "").lower() not in known:
                raise UnsupportedQueryError(
                    "a selected column outside every grouping set",
                    f"column {output.column} must appear in the GROUP BY clause "
                    "or be used in an aggregate function",
                )

    @property
    def num_grouping_sets(self) -> int:
        """Number G of grouping sets (sub-queries)."""
        return len(self.grouping_sets)


@dataclass(frozen=True)
class BoundAggregate:
    """An :class:`AggregateQuery` checked against a table's schema.

    Column names are those of the table (DuckDB matches identifiers case-insensitively); output
    names and types are the ones DuckDB reports for the query.

    Attributes:
        query: the parsed query (names as written).
        grouping_sets: the grouping sets, with the table's column names.
        grouping_columns: the union of the grouping sets, with the table's column names.
        outputs: the output columns, names from DuckDB, columns with the table's names.
        output_types: DuckDB's type of each output column.
        schema: ``(name, DuckDB type)`` of every table column, to check tables given later.
    """

    query: AggregateQuery
    grouping_sets: tuple[tuple[str, ...], ...]
    grouping_columns: tuple[str, ...]
    outputs: tuple[OutputColumn, ...]
    output_types: tuple[str, ...]
    schema: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if len(self.grouping_sets) != len(self.query.grouping_sets):
            raise InvalidParameterError(
                "grouping_sets", f"{len(self.query.grouping_sets)} sets", len(self.grouping_sets)
            )
        if len(self.outputs) != len(self.query.outputs) or len(self.output_types) != len(
            self.outputs
        ):
            raise InvalidParameterError(
                "outputs", f"{len(self.query.outputs)} outputs with types", len(self.outputs)
            )

    @property
    def table_name(self) -> str:
        """The table named in FROM."""
        return self.query.table_name

    @property
    def sql(self) -> str:
        """The original SQL text."""
        return self.query.sql

    @property
    def num_grouping_sets(self) -> int:
        """Number G of grouping sets (sub-queries)."""
        return len(self.grouping_sets)

    @property
    def output_names(self) -> tuple[str, ...]:
        """DuckDB's names of the result columns, in order."""
        return tuple(o.name for o in self.outputs)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (a node rebuilds the bound query without parsing or DuckDB)."""
        return {
            "sql": self.query.sql,
            "table_name": self.query.table_name,
            "query_grouping_sets": [list(s) for s in self.query.grouping_sets],
            "query_outputs": [[o.name, o.kind, o.column, o.function] for o in self.query.outputs],
            "grouping_sets": [list(s) for s in self.grouping_sets],
            "grouping_columns": list(self.grouping_columns),
            "outputs": [[o.name, o.kind, o.column, o.function] for o in self.outputs],
            "output_types": list(self.output_types),
            "schema": [list(item) for item in self.schema],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BoundAggregate:
        """Inverse of :meth:`to_dict`; InvalidParameterError if malformed."""
        try:
            query = AggregateQuery(
                str(data["sql"]),
                str(data["table_name"]),
                tuple(tuple(str(c) for c in s) for s in data["query_grouping_sets"]),
                tuple(OutputColumn(*o) for o in data["query_outputs"]),
            )
            return cls(
                query,
                tuple(tuple(str(c) for c in s) for s in data["grouping_sets"]),
                tuple(str(c) for c in data["grouping_columns"]),
                tuple(OutputColumn(*o) for o in data["outputs"]),
                tuple(str(t) for t in data["output_types"]),
                tuple((str(n), str(t)) for n, t in data["schema"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidParameterError(
                "bound query", "a BoundAggregate.to_dict()", error
            ) from error

    def carried_columns(self, set_index: int) -> tuple[str, ...]:
        """The columns a source sends for grouping set ``set_index``.

        Its grouping columns, then the aggregated columns (each once, with the table's names).
        """
        names = list(self.grouping_sets[set_index])
        for output in self.outputs:
            if (
                output.function
                and output.column
                and output.column.lower() not in {n.lower() for n in names}
            ):
                names.append(output.column)
        return tuple(names)

    def check_table(self, table: Table, *, columns: Iterable[str] | None = None) -> None:
        """Raise :class:`InvalidParameterError` unless ``table`` has the bound schema.

        With ``columns`` (lower-case names), only those columns are required.
        """
        have = {c.name.lower(): c.sql_type for c in table.columns}
        wanted = None if columns is None else set(columns)
        for name, sql_type in self.schema:
            if wanted is not None and name.lower() not in wanted:
                continue
            if have.get(name.lower()) != sql_type:
                raise InvalidParameterError(
                    "table",
                    f"a table with column {name} {sql_type} (the schema the query was bound to)",
                    f"{table.name}({', '.join(f'{c.name} {c.sql_type}' for c in table.columns)})",
                )
