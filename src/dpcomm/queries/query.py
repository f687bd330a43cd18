"""The value of an Aggregate query once parsed and bound: plain data, no parser, no DuckDB.

`dpcomm.queries.sql` builds these from SQL text (sqlglot) and a table (DuckDB); a node of a
deployment rebuilds them from their JSON form (`BoundAggregate.from_dict`) without either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from dpcomm.data.table import Table
from dpcomm.errors import InvalidParameterError

OutputKind = Literal["group", "aggregate"]
AggregateFunction = Literal["count", "count_star", "sum", "avg", "min", "max", "list"]

_SUPPORTED = (
    "supported: SELECT <keys>, <aggregates> FROM <table> [WHERE <row condition>] [GROUP BY "
    "<keys | GROUPING SETS | ROLLUP | CUBE>] [HAVING] [ORDER BY] [LIMIT]; keys and aggregate "
    "arguments may be any per-row expression; aggregates: COUNT, COUNT_IF, SUM, AVG, MIN, MAX, "
    "BOOL_AND, BOOL_OR, VAR_*, STDDEV_*, FSUM, FAVG, STRING_AGG(x, sep ORDER BY x), each with "
    "FILTER (WHERE ...)"
)


#: The result column that names each row's grouping set when a query has several, so that a
#: subtotal (a key left out of the set, NULL) is never confused with a NULL key.
GROUPING_SET_COLUMN = "grouping_set"

#: The column a row projection reads DuckDB's ``rowid`` from: the row's position in the table
#: given (from 0), which `dpcomm.queries.sql.project` adds when the projection reads it.
ROWID_COLUMN = "__dpcomm_rowid"

#: What ``GROUPING()`` without arguments is read as: DuckDB's GROUPING of every grouping key.
EVERY_KEY = "__dpcomm_every_key"


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
        name: the result column's name. After `bind` it is exactly DuckDB's name (the alias,
            or e.g. ``avg(I)``, ``count_star()``); after `parse_aggregate` alone it is the
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
class SqlDerivation:
    """What an analyst query's SQL is derived from: the user's SQL, the schema, the bounds.

    A deployed node never runs the projection or post-processing SQL a config carries as
    given: it derives them again from these public inputs through the same checks as ``run``
    (`dpcomm.queries.sql.check_derived`) and refuses a config whose derived SQL differs.

    Attributes:
        sql: the SQL as the user wrote it.
        schema: ``(name, DuckDB type)`` of every column of the table it was bound to.
        bounds: under a noisy release, each bounded column's (lo, hi); None without one.
        count_rows: whether a hidden COUNT(*) was added (a release selecting keys).
    """

    sql: str
    schema: tuple[tuple[str, str], ...]
    bounds: tuple[tuple[str, float, float], ...] | None = None
    count_rows: bool = False

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "sql": self.sql,
            "schema": [list(item) for item in self.schema],
            "bounds": None if self.bounds is None else [list(b) for b in self.bounds],
            "count_rows": self.count_rows,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SqlDerivation:
        """Inverse of `to_dict`; InvalidParameterError if malformed."""
        try:
            bounds = data.get("bounds")
            return cls(
                str(data["sql"]),
                tuple((str(n), str(t)) for n, t in data["schema"]),
                None
                if bounds is None
                else tuple((str(c), float(lo), float(hi)) for c, lo, hi in bounds),
                bool(data.get("count_rows", False)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidParameterError(
                "program derivation", "a SqlDerivation.to_dict()", error
            ) from error


@dataclass(frozen=True)
class PostProcessing:
    """What the result node runs (DuckDB) on the compute nodes' rows: the final result.

    Attributes:
        sql: a SELECT over the core result's columns (table ``__dpcomm_result``, with the
            hidden columns ``__dpcomm_order`` and ``__dpcomm_g<i>`` of each GROUPING() call):
            expressions over aggregates, HAVING, ORDER BY, LIMIT, OFFSET.
        names: DuckDB's names of the final columns.
        types: DuckDB's types of the final columns.
        groupings: the core key columns each GROUPING() call reads, in order.
        key_names: the final columns that are grouping keys (printed as DuckDB prints keys).
    """

    sql: str
    names: tuple[str, ...]
    types: tuple[str, ...]
    groupings: tuple[tuple[str, ...], ...] = ()
    key_names: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "sql": self.sql,
            "names": list(self.names),
            "types": list(self.types),
            "groupings": [list(g) for g in self.groupings],
            "key_names": list(self.key_names),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PostProcessing:
        """Inverse of `to_dict`."""
        return cls(
            str(data["sql"]),
            tuple(str(n) for n in data["names"]),
            tuple(str(t) for t in data["types"]),
            tuple(tuple(str(c) for c in g) for g in data["groupings"]),
            tuple(str(n) for n in data.get("key_names", ())),
        )


@dataclass(frozen=True)
class BoundAggregate:
    """An `AggregateQuery` checked against a table's schema.

    Column names are those of the table (DuckDB matches identifiers case-insensitively); output
    names and types are the ones DuckDB reports for the query.

    Attributes:
        query: the parsed query (names as written).
        grouping_sets: the grouping sets, with the table's column names.
        grouping_columns: the union of the grouping sets, with the table's column names.
        outputs: the output columns, names from DuckDB, columns with the table's names.
        output_types: DuckDB's type of each output column.
        schema: ``(name, DuckDB type)`` of every table column, to check tables given later.
        filter_column: the boolean column of the WHERE condition (rows where it is false are
            sent as any row and left out by the compute node), or None.
        post: the result node's post-processing of an analyst query, or None.
        set_labels: each grouping set as the user wrote it (derived keys as their SQL).
        projection: the row projection an analyst query's sources evaluate (DuckDB) on their
            raw rows, or None; ``schema`` is then the projection's.
        user_sql: the SQL as the user wrote it (``query.sql`` is the core query's).
        clamps: under a noisy release, each clamped measure column, the column it reads
            and its (lo, hi).
        aggregate_labels: each hidden aggregate column of an analyst query and the user's
            aggregate it serves (``AVG(body_mass_g)``), to name it in reports.
        key_labels: each derived key column of an analyst query and the key as the user
            wrote it (its alias, or its SQL): how key domains (``keys=``) name it.
        centres: each centred measure column (a clamped one) and the midpoint c of its
            bounds, subtracted on the source's row: its values lie in [lo − c, hi − c].
        value_uses: per aggregate of the user's query, the hidden columns its published value
            reads with their coefficients in its error (what the release's ε split weighs,
            `dpcomm.release.mechanisms.release_shares`); empty: every column alike.
        quantiles: under a noisy release, each released quantile: the hidden column that
            carries it (NULL in the exact result), the column read, its (lo, hi), α, and
            the hidden COUNT of each candidate's bin (never published).
    """

    query: AggregateQuery
    grouping_sets: tuple[tuple[str, ...], ...]
    grouping_columns: tuple[str, ...]
    outputs: tuple[OutputColumn, ...]
    output_types: tuple[str, ...]
    schema: tuple[tuple[str, str], ...]
    filter_column: str | None = None
    post: PostProcessing | None = None
    set_labels: tuple[str, ...] = ()
    projection: str | None = None
    user_sql: str | None = None
    clamps: tuple[tuple[str, str, float, float], ...] = ()
    aggregate_labels: tuple[tuple[str, str], ...] = ()
    key_labels: tuple[tuple[str, str], ...] = ()
    centres: tuple[tuple[str, float], ...] = ()
    value_uses: tuple[tuple[tuple[str, float], ...], ...] = ()
    quantiles: tuple[tuple[str, str, float, float, float, tuple[str, ...]], ...] = ()

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
    def labels(self) -> tuple[str, ...]:
        """Each grouping set as the user wrote it: ``(species, sex)``, ``()``."""
        if self.set_labels:
            return self.set_labels
        return tuple("(" + ", ".join(s) + ")" for s in self.grouping_sets)

    def key_label(self, column: str) -> str:
        """How the user names grouping column ``column`` (a derived key's alias or SQL)."""
        return dict(self.key_labels).get(column, column)

    def output_label(self, name: str) -> str:
        """How reports name output ``name``: the user's aggregate for a hidden column."""
        return dict(self.aggregate_labels).get(name, name)

    @property
    def result_names(self) -> tuple[str, ...]:
        """The names of the final result's columns (the grouping-set column last when G > 1)."""
        names = self.post.names if self.post is not None else self.output_names
        return (*names, GROUPING_SET_COLUMN) if self.num_grouping_sets > 1 else names

    @property
    def result_key_types(self) -> dict[str, str]:
        """The final result's grouping-key columns and their types (the grouping set's too)."""
        if self.post is not None:
            types = dict(zip(self.post.names, self.post.types, strict=True))
            keys = {name: types[name] for name in self.post.key_names}
        else:
            keys = {
                o.name: sql_type
                for o, sql_type in zip(self.outputs, self.output_types, strict=True)
                if o.kind == "group"
            }
        if self.num_grouping_sets > 1:
            keys[GROUPING_SET_COLUMN] = "VARCHAR"
        return keys

    @property
    def result_types(self) -> tuple[str, ...]:
        """DuckDB's types of `result_names`."""
        types = self.post.types if self.post is not None else self.output_types
        return (*types, "VARCHAR") if self.num_grouping_sets > 1 else types

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
            "filter_column": self.filter_column,
            "post": None if self.post is None else self.post.to_dict(),
            "set_labels": list(self.set_labels),
            "projection": self.projection,
            "user_sql": self.user_sql,
            "clamps": [list(c) for c in self.clamps],
            "aggregate_labels": [list(item) for item in self.aggregate_labels],
            "key_labels": [list(item) for item in self.key_labels],
            "centres": [list(item) for item in self.centres],
            "value_uses": [[list(use) for use in value] for value in self.value_uses],
            "quantiles": [[*q[:5], list(q[5])] for q in self.quantiles],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BoundAggregate:
        """Inverse of `to_dict`; InvalidParameterError if malformed."""
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
                None if data.get("filter_column") is None else str(data["filter_column"]),
                None if data.get("post") is None else PostProcessing.from_dict(data["post"]),
                tuple(str(label) for label in data.get("set_labels", ())),
                None if data.get("projection") is None else str(data["projection"]),
                None if data.get("user_sql") is None else str(data["user_sql"]),
                tuple(
                    (str(n), str(c), float(lo), float(hi))
                    for n, c, lo, hi in data.get("clamps", ())
                ),
                tuple((str(n), str(label)) for n, label in data.get("aggregate_labels", ())),
                tuple((str(n), str(label)) for n, label in data.get("key_labels", ())),
                tuple((str(n), float(c)) for n, c in data.get("centres", ())),
                tuple(
                    tuple((str(n), float(a)) for n, a in value)
                    for value in data.get("value_uses", ())
                ),
                tuple(
                    (str(q), str(c), float(lo), float(hi), float(a), tuple(str(b) for b in bins))
                    for q, c, lo, hi, a, bins in data.get("quantiles", ())
                ),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidParameterError(
                "bound query", "a BoundAggregate.to_dict()", error
            ) from error

    def carried_columns(self, set_index: int) -> tuple[str, ...]:
        """The columns a source sends for grouping set ``set_index``.

        Its grouping columns, then the aggregated columns (each once, with the table's names),
        then the WHERE column if any.
        """
        names = list(self.grouping_sets[set_index])
        for output in self.outputs:
            if (
                output.function
                and output.column
                and output.column.lower() not in {n.lower() for n in names}
            ):
                names.append(output.column)
        if self.filter_column is not None:
            names.append(self.filter_column)
        return tuple(names)

    def check_table(self, table: Table, *, columns: Iterable[str] | None = None) -> None:
        """Raise `InvalidParameterError` unless ``table`` has the bound schema.

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
