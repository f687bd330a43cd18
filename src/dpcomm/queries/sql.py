"""Parse and bind the SQL of an Aggregate query (Section 2.1 of the paper).

An Aggregate query ``Q = {q}`` is a set of sub-queries ``q = (G_q, V_q, F_q)``: statistical
functions ``F_q`` over aggregate attributes ``V_q`` grouped by attributes ``G_q``. In SQL this is
``SELECT <grouping columns>, <aggregates> FROM <table> GROUP BY GROUPING SETS (...)``; each
grouping set is one sub-query. `parse_aggregate` reads such SQL with sqlglot (DuckDB
dialect), expands ROLLUP, CUBE and their cross products into grouping sets in DuckDB's order, and
rejects every construct outside this class with an error naming it. `bind` checks the query
against a `dpcomm.data.table.Table` and asks DuckDB for the output column names.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache

import duckdb
import numpy as np
import sqlglot
from sqlglot import exp

from dpcomm.data.table import Column, Table, check_carried, value_kind
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.queries.query import (
    EVERY_KEY,
    GROUPING_SET_COLUMN,
    ROWID_COLUMN,
    AggregateFunction,
    AggregateQuery,
    BoundAggregate,
    OutputColumn,
    OutputKind,
    SqlDerivation,
    SqlSyntaxError,
    UnsupportedQueryError,
)

_FUNCTIONS: dict[type[exp.Expression], AggregateFunction] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    # the core query's LIST: a group's non-NULL values, in no order (`dpcomm.queries.analyst`
    # sorts them for an ordered STRING_AGG); a user's LIST is rewritten, never read as this
    exp.ArrayAgg: "list",
}
_NUMERIC_FUNCTIONS = frozenset({"sum", "avg"})
#: Limit on the number of grouping sets after expansion (DuckDB's own limit is 65535).
MAX_GROUPING_SETS = 4096
#: Clauses of a SELECT and the construct they are named by in error messages.
_CLAUSES = {
    "with_": "WITH (common table expression)",
    "joins": "JOIN",
    "where": "WHERE",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "distinct": "SELECT DISTINCT",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "laterals": "LATERAL",
    "sample": "TABLESAMPLE",
    "into": "SELECT INTO",
    "kind": "SELECT AS STRUCT/VALUE",
    "settings": "SETTINGS",
    "format": "FORMAT",
    "options": "OPTIONS",
    "locks": "FOR UPDATE",
    "connect": "CONNECT BY",
    "prewhere": "PREWHERE",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "match": "MATCH_RECOGNIZE",
    "operation_modifiers": "query modifiers",
}
_IGNORED_CLAUSES = frozenset({"expressions", "from_", "group", "hint"})


def parse_aggregate(sql: str) -> AggregateQuery:
    """Parse the SQL of an Aggregate query (sqlglot, DuckDB dialect).

    Raises:
        SqlSyntaxError: the text does not parse.
        UnsupportedQueryError: a construct outside the Aggregate query class (named in the
            message): joins, subqueries, WITH, window functions, WHERE, HAVING, ORDER BY, LIMIT,
            DISTINCT, set operations, expressions, COUNT(DISTINCT ...), GROUPING(), FILTER, several
            tables, ``SELECT *``, a GROUP BY alias or position, unknown functions (the analyst
            rewrite, `bind_sql`, answers several of these). A query without GROUP BY is
            the empty grouping set.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidParameterError("sql", "a non-empty SQL string", sql)
    _check_nesting(sql)
    try:
        return _parse_aggregate(sql)
    except RecursionError:
        raise SqlSyntaxError(f"expressions nested too deeply (at most {MAX_SQL_NESTING})") from None


#: Deepest nesting of parentheses accepted (sqlglot's recursive parser would overflow the stack).
MAX_SQL_NESTING = 100


def _check_nesting(sql: str) -> None:
    """Refuse parentheses nested deeper than `MAX_SQL_NESTING` (outside quoted text)."""
    depth = deepest = 0
    quote: str | None = None
    for character in sql:
        if quote is not None:
            if character == quote:
                quote = None
        elif character in "'\"":
            quote = character
        elif character == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif character == ")":
            depth -= 1
    if deepest > MAX_SQL_NESTING:
        raise SqlSyntaxError(f"parentheses nested {deepest} deep (at most {MAX_SQL_NESTING})")


def _parse_aggregate(sql: str) -> AggregateQuery:
    statements = _parse(sql)
    if len(statements) != 1:
        raise UnsupportedQueryError("several statements", f"{len(statements)} statements")
    select = statements[0]
    table_name, qualifiers = _from_table(select)
    outputs = tuple(_output(item, qualifiers) for item in select.expressions)
    if select.find(exp.Subquery) is not None or any(
        node is not select for node in select.find_all(exp.Select)
    ):
        raise UnsupportedQueryError("subquery")
    from dpcomm.queries.analyst import global_group

    group = global_group(select)
    _check_no_alias(group, select)
    grouping_sets = _grouping_sets(group, qualifiers)
    return AggregateQuery(sql, table_name, grouping_sets, outputs)


def _check_no_alias(group: exp.Group, select: exp.Select) -> None:
    """Refuse (to the analyst rewrite, which resolves it) a GROUP BY naming a select alias."""
    aliases = {
        item.alias.lower()
        for item in select.expressions
        if isinstance(item, exp.Alias)
        and not (isinstance(item.this, exp.Column) and item.this.name.lower() == item.alias.lower())
    }
    for column in group.find_all(exp.Column):
        if not column.table and column.name.lower() in aliases:
            raise UnsupportedQueryError("GROUP BY an alias", column.name)


#: ``GROUPING()`` / ``GROUPING_ID()`` without arguments (outside quoted text), which sqlglot
#: refuses: DuckDB's GROUPING of every grouping key, read as ``GROUPING(<EVERY_KEY>)``.
_EMPTY_GROUPING = re.compile(
    r"(\bgrouping(?:_id)?\s*\(\s*\))|('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")", re.I
)


def _parse(sql: str) -> list[exp.Select]:
    try:
        parsed = sqlglot.parse(
            _EMPTY_GROUPING.sub(
                lambda m: f"GROUPING({EVERY_KEY})" if m.group(1) else m.group(0), sql
            ),
            read="duckdb",
        )
    except sqlglot.errors.ParseError as error:
        first = error.errors[0] if error.errors else {}
        description = str(first.get("description") or str(error).splitlines()[0])
        line, col = first.get("line"), first.get("col")
        position = f" (line {line}, column {col})" if line is not None else ""
        raise SqlSyntaxError(f"{description}{position}") from error
    except sqlglot.errors.SqlglotError as error:
        raise SqlSyntaxError(str(error).splitlines()[0]) from error
    statements: list[exp.Select] = []
    for statement in parsed:
        if statement is None:
            continue
        if isinstance(statement, exp.Union):
            raise UnsupportedQueryError("UNION", statement.sql(dialect="duckdb")[:80])
        if isinstance(statement, exp.Intersect):
            raise UnsupportedQueryError("INTERSECT")
        if isinstance(statement, exp.Except):
            raise UnsupportedQueryError("EXCEPT")
        if isinstance(statement, exp.Subquery):
            raise UnsupportedQueryError("subquery")
        if not isinstance(statement, exp.Select):
            raise UnsupportedQueryError(
                f"{type(statement).__name__.upper()} statement", "only SELECT is supported"
            )
        statements.append(statement)
    if not statements:
        raise InvalidParameterError("sql", "a SELECT statement", sql)
    return statements


def _from_table(
    select: exp.Select, allowed: frozenset[str] = frozenset()
) -> tuple[str, frozenset[str]]:
    """The FROM table's name and the lower-case names a column may be qualified with.

    Clauses other than SELECT, FROM and GROUP BY are refused, except those in ``allowed``.
    """
    for key, value in select.args.items():
        if key in _IGNORED_CLAUSES or key in allowed:
            continue
        if value is None or value is False or value == []:
            continue
        construct = _CLAUSES.get(key, key.upper().replace("_", " "))
        if key == "joins":
            join = value[0]
            comma = (
                not join.args.get("on")
                and not join.args.get("kind")
                and not (join.args.get("side") or join.args.get("using") or join.args.get("method"))
            )
            construct = "multiple tables in FROM" if comma else "JOIN"
            raise UnsupportedQueryError(
                construct,
                f"{join.sql(dialect='duckdb')[:80]}: a source holds one row of one table; join "
                "first (a DuckDB view, a DataFrame) and give dpcomm the joined table",
            )
        detail = value.sql(dialect="duckdb")[:80] if isinstance(value, exp.Expression) else ""
        raise UnsupportedQueryError(construct, detail)
    source = select.args.get("from_")
    if source is None:
        raise UnsupportedQueryError("a query without FROM")
    table = source.this
    if isinstance(table, exp.Subquery | exp.Select):
        raise UnsupportedQueryError(
            "subquery", "in FROM: give dpcomm the subquery's result as the table"
        )
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise UnsupportedQueryError(
            "a FROM that is not a plain table name", table.sql(dialect="duckdb")[:80]
        )
    for key, value in table.args.items():
        if key in ("this", "alias") or value is None or value == []:
            continue
        if key in ("db", "catalog"):
            raise UnsupportedQueryError("a qualified table name", table.sql(dialect="duckdb"))
        if key == "joins":
            raise UnsupportedQueryError("JOIN")
        construct = "TABLESAMPLE" if key == "sample" else key.upper()
        raise UnsupportedQueryError(construct, "in FROM")
    alias = table.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        raise UnsupportedQueryError("column aliases on the table", alias.sql(dialect="duckdb"))
    name = table.name
    qualifiers = {name.lower()}
    if table.alias:
        qualifiers = {table.alias.lower()}
    return name, frozenset(qualifiers)


def _column_name(node: exp.Expression, qualifiers: frozenset[str], where: str) -> str:
    """The name of a plain column reference, or an error naming what ``node`` is instead."""
    if isinstance(node, exp.Paren):
        return _column_name(node.this, qualifiers, where)
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        if node.args.get("db") or node.args.get("catalog"):
            raise UnsupportedQueryError("a qualified column name", node.sql(dialect="duckdb"))
        if node.table and node.table.lower() not in qualifiers:
            raise UnsupportedQueryError(
                "a column of another table", f"{node.sql(dialect='duckdb')} {where}"
            )
        return str(node.name)
    _reject_expression(node, where)
    raise UnsupportedQueryError(f"expression {where}", node.sql(dialect="duckdb")[:80])


def _reject_expression(node: exp.Expression, where: str) -> None:
    """Raise the most specific error for a node that is not a plain column."""
    text = node.sql(dialect="duckdb")[:80]
    if isinstance(node, exp.Star):
        raise UnsupportedQueryError("SELECT *" if where == "in the select list" else "*", where)
    if isinstance(node, exp.Subquery | exp.Select | exp.Exists):
        raise UnsupportedQueryError("subquery", f"{where}: {text}")
    if isinstance(node, exp.Window):
        raise UnsupportedQueryError("window function", text)
    if isinstance(node, exp.Filter):
        raise UnsupportedQueryError("FILTER", text)
    if isinstance(node, exp.Grouping | exp.GroupingId):
        raise UnsupportedQueryError("GROUPING()", text)
    if isinstance(node, exp.Distinct):
        raise UnsupportedQueryError("DISTINCT", f"{where}: {text}")
    if isinstance(node, exp.Literal | exp.Null | exp.Boolean):
        raise UnsupportedQueryError(f"constant {where}", text)
    if isinstance(node, exp.Anonymous):
        raise UnsupportedQueryError(f"unknown function {node.name}()", text)
    if isinstance(node, exp.AggFunc) and type(node) not in _FUNCTIONS:
        name = node.sql_name() if hasattr(node, "sql_name") else type(node).__name__
        raise UnsupportedQueryError(f"unsupported aggregate function {name.lower()}()", text)
    if isinstance(node, exp.Func) and type(node) not in _FUNCTIONS:
        raise UnsupportedQueryError(f"unsupported function {node.sql_name().lower()}()", text)


def _output(item: exp.Expression, qualifiers: frozenset[str]) -> OutputColumn:
    alias: str | None = None
    node = item
    if isinstance(node, exp.Alias):
        alias = node.alias
        node = node.this
    where = "in the select list"
    if isinstance(node, exp.Column | exp.Paren) and not isinstance(node, exp.Star):
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            raise UnsupportedQueryError("SELECT *", node.sql(dialect="duckdb"))
        column = _column_name(node, qualifiers, where)
        return OutputColumn(alias or column, "group", column, None)
    _reject_expression(node, where)
    function = _FUNCTIONS.get(type(node))
    if function is None:
        raise UnsupportedQueryError(f"expression {where}", node.sql(dialect="duckdb")[:80])
    argument = node.this
    extra = [k for k, v in node.args.items() if k not in ("this", "big_int") and v]
    if extra:
        raise UnsupportedQueryError(
            f"extra arguments of {function.upper()}", node.sql(dialect="duckdb")[:80]
        )
    if isinstance(argument, exp.Distinct):
        raise UnsupportedQueryError(f"{function.upper()}(DISTINCT ...)", node.sql("duckdb"))
    if function == "count" and (argument is None or isinstance(argument, exp.Star)):
        return OutputColumn(alias or "count_star()", "aggregate", None, "count_star")
    if argument is None:
        raise UnsupportedQueryError(f"{function.upper()}() without argument")
    for inner in argument.walk():
        if isinstance(inner, exp.AggFunc):
            raise UnsupportedQueryError("nested aggregate", node.sql(dialect="duckdb")[:80])
    column = _column_name(argument, qualifiers, f"inside {function.upper()}()")
    return OutputColumn(alias or f"{function}({column})", "aggregate", column, function)


def _grouping_sets(group: exp.Group, qualifiers: frozenset[str]) -> tuple[tuple[str, ...], ...]:
    """Expand GROUP BY into grouping sets as DuckDB does (cross product of its elements)."""
    if group.args.get("all"):
        raise UnsupportedQueryError("GROUP BY ALL", "list the grouping columns")
    for key, value in group.args.items():
        if key not in ("expressions", "all") and value:
            raise UnsupportedQueryError(f"GROUP BY {key.upper()}", group.sql(dialect="duckdb"))
    elements = list(group.expressions)
    if not elements:
        raise UnsupportedQueryError("an empty GROUP BY")
    result = _element_sets(elements[0], qualifiers)
    for element in elements[1:]:
        result = _product(result, _element_sets(element, qualifiers))
        if len(result) > MAX_GROUPING_SETS:
            raise UnsupportedQueryError(
                "too many grouping sets", f"more than {MAX_GROUPING_SETS} after expansion"
            )
    return tuple(result)


def _merge(left: Iterable[str], right: Iterable[str]) -> tuple[str, ...]:
    """Union of two grouping sets, order of first appearance, case-insensitive."""
    merged: list[str] = []
    seen: set[str] = set()
    for column in itertools.chain(left, right):
        if column.lower() not in seen:
            seen.add(column.lower())
            merged.append(column)
    return tuple(merged)


def _product(
    left: Sequence[tuple[str, ...]], right: Sequence[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    return [_merge(a, b) for a in left for b in right]


def _columns_of(node: exp.Expression, qualifiers: frozenset[str]) -> tuple[str, ...]:
    """The columns of a composite element ``(a, b)``, a single column, or ``()``."""
    if isinstance(node, exp.Tuple):
        return _merge((_column_name(e, qualifiers, "in GROUP BY") for e in node.expressions), ())
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.Tuple):
        return _columns_of(node.this, qualifiers)
    return (_grouping_column(node, qualifiers),)


def _grouping_column(node: exp.Expression, qualifiers: frozenset[str]) -> str:
    if isinstance(node, exp.Literal) and not node.is_string:
        raise UnsupportedQueryError("positional GROUP BY", f"GROUP BY {node.sql()}")
    if isinstance(node, exp.AggFunc):
        raise UnsupportedQueryError("aggregate in GROUP BY", node.sql(dialect="duckdb"))
    return _column_name(node, qualifiers, "in GROUP BY")


def _element_sets(node: exp.Expression, qualifiers: frozenset[str]) -> list[tuple[str, ...]]:
    """Grouping sets of one GROUP BY element (DuckDB's transform_group_by order)."""
    if isinstance(node, exp.GroupingSets):
        sets: list[tuple[str, ...]] = []
        for inner in node.expressions:
            if isinstance(inner, exp.Rollup | exp.Cube | exp.GroupingSets):
                # nested: DuckDB appends the inner element's sets in place
                sets.extend(_element_sets(inner, qualifiers))
            else:
                sets.append(_flat_columns(inner, qualifiers))
        return sets
    if isinstance(node, exp.Rollup):
        parts = [_columns_of(e, qualifiers) for e in node.expressions]
        rollup: list[tuple[str, ...]] = [()]
        for part in parts:
            rollup.append(_merge(rollup[-1], part))
        return rollup
    if isinstance(node, exp.Cube):
        parts = [_columns_of(e, qualifiers) for e in node.expressions]
        cube: list[tuple[str, ...]] = []
        _cube_sets((), parts, 0, cube)
        return cube
    return [_flat_columns(node, qualifiers)]


def _cube_sets(
    current: tuple[str, ...],
    parts: Sequence[tuple[str, ...]],
    start: int,
    out: list[tuple[str, ...]],
) -> None:
    """DuckDB's AddCubeSets: depth-first subsets, so CUBE(a, b) is (), (a), (a, b), (b)."""
    out.append(current)
    if len(out) > MAX_GROUPING_SETS:
        raise UnsupportedQueryError("too many grouping sets", f"CUBE of {len(parts)} elements")
    for k in range(start, len(parts)):
        _cube_sets(_merge(current, parts[k]), parts, k + 1, out)


def _flat_columns(node: exp.Expression, qualifiers: frozenset[str]) -> tuple[str, ...]:
    """Columns of a grouping set written with any nesting of parentheses."""
    if isinstance(node, exp.Tuple):
        columns: tuple[str, ...] = ()
        for inner in node.expressions:
            columns = _merge(columns, _flat_columns(inner, qualifiers))
        return columns
    if isinstance(node, exp.Paren):
        return _flat_columns(node.this, qualifiers)
    if isinstance(node, exp.Rollup | exp.Cube | exp.GroupingSets):
        raise UnsupportedQueryError(
            "ROLLUP/CUBE/GROUPING SETS inside a grouping set", node.sql(dialect="duckdb")
        )
    return (_grouping_column(node, qualifiers),)


def bind(query: AggregateQuery, table: Table) -> BoundAggregate:
    """Check ``query`` against ``table`` and take the output names and types from DuckDB.

    A zero-row copy of ``table`` is registered under the FROM name in an in-memory DuckDB and the
    SQL is run on it, so names (``avg(I)``, ``count_star()``, aliases) are DuckDB's own.

    Raises:
        InvalidParameterError: a column is missing (the message lists the table's columns), a
            column the query reads has a type no query can carry (BLOB, LIST, ...), an
            argument of SUM/AVG/MIN/MAX is not numeric, output names repeat, or DuckDB rejects
            the SQL.
    """
    resolved: dict[str, str] = {}

    def resolve(name: str, where: str) -> str:
        key = name.lower()
        if key not in resolved:
            try:
                resolved[key] = table.column(name).name
            except InvalidParameterError:
                raise InvalidParameterError(
                    f"column {name} ({where})",
                    f"a column of table {query.table_name}: {', '.join(table.column_names)}",
                    name,
                ) from None
            check_carried(table.column(name))
        return resolved[key]

    grouping_sets = tuple(
        tuple(resolve(c, "GROUP BY") for c in grouping_set) for grouping_set in query.grouping_sets
    )
    grouping_columns = tuple(resolve(c, "GROUP BY") for c in query.grouping_columns)
    outputs: list[OutputColumn] = []
    for output in query.outputs:
        column = None if output.column is None else resolve(output.column, "select list")
        if output.function in _NUMERIC_FUNCTIONS and column is not None:
            data = table.column(column)
            if not data.is_numeric:
                raise InvalidParameterError(
                    f"argument of {output.function.upper()}",
                    "a numeric column",
                    f"{data.name} of type {data.sql_type}",
                )
        outputs.append(replace(output, column=column))
    names, types = _duckdb_outputs(query, table)
    if len(names) != len(outputs):
        raise DpcommError(
            f"DuckDB returned {len(names)} columns for {len(outputs)} select items: {names}"
        )
    lowered = [n.lower() for n in names]
    duplicates = sorted({n for n in names if lowered.count(n.lower()) > 1})
    if duplicates:
        raise InvalidParameterError(
            "select list", "distinct output column names (use AS aliases)", duplicates
        )
    outputs = [replace(o, name=n) for o, n in zip(outputs, names, strict=True)]
    schema = tuple((c.name, c.sql_type) for c in table.columns)
    return BoundAggregate(
        query, grouping_sets, grouping_columns, tuple(outputs), tuple(types), schema
    )


def _duckdb_outputs(query: AggregateQuery, table: Table) -> tuple[list[str], list[str]]:
    """Run the SQL on a zero-row copy of ``table``; DuckDB's output names and types."""
    with scratch_connection() as connection:
        try:
            empty = table.take(np.zeros(table.num_rows, dtype=bool))
            empty.register(connection, query.table_name)
            relation = connection.sql(query.sql)
            if relation is None:
                raise InvalidParameterError("sql", "a query returning rows", query.sql)
            return list(relation.columns), [str(t) for t in relation.types]
        except duckdb.Error as error:
            message = str(error).splitlines()[0]
            raise InvalidParameterError("sql", "SQL that DuckDB accepts", message) from error


@dataclass(frozen=True)
class SqlLimits:
    """The bounds on every DuckDB evaluation of analyst SQL (`scratch_connection`).

    Attributes:
        memory_limit: DuckDB's ``memory_limit`` of the process-wide scratch database (its
            buffer manager's bound: hash tables, sorts; not every list allocation).
        seconds: the wall-clock time one `scratch_connection` may run statements for; past
            it the statement is interrupted (DuckDB has no statement timeout).
    """

    memory_limit: str = "4GB"
    seconds: float = 120.0

    def __post_init__(self) -> None:
        if not (isinstance(self.seconds, int | float) and 0 < self.seconds < 1e6):
            raise InvalidParameterError("seconds", "a time limit in (0, 1e6) seconds", self.seconds)
        if not (isinstance(self.memory_limit, str) and _MEMORY.fullmatch(self.memory_limit)):
            raise InvalidParameterError(
                "memory_limit", "a size such as '512MB' or '4GB'", self.memory_limit
            )


_MEMORY = re.compile(r"[0-9]+(\.[0-9]+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.I)
_limits = SqlLimits()
_shared: tuple[int, SqlLimits, duckdb.DuckDBPyConnection] | None = None
_shared_lock = threading.Lock()


def set_sql_limits(limits: SqlLimits) -> SqlLimits:
    """Bound every later `scratch_connection` by ``limits``; returns the limits replaced."""
    global _limits
    with _shared_lock:
        previous, _limits = _limits, limits
    return previous


def _hardened_database(limits: SqlLimits) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reads no file, loads no extension, and cannot be reconfigured.

    Its time zone is UTC and its calendar Gregorian on every node, whatever the host's: the
    date and time functions of the allow-list give the same value everywhere (a time zone
    taken from the host would make a derived key depend on where the node runs).
    """
    database = duckdb.connect(
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "memory_limit": limits.memory_limit,
        }
    )
    database.execute("SET GLOBAL TimeZone = 'UTC'")
    database.execute("SET GLOBAL Calendar = 'gregorian'")
    database.execute("SET GLOBAL lock_configuration = true")
    return database


#: Seconds between two interrupts of a connection past its time limit.
_INTERRUPT_PERIOD = 0.02


class SqlLimitError(DpcommError):
    """DuckDB's evaluation of the SQL ran past its time or memory limit (`SqlLimits`)."""


@contextmanager
def scratch_connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection whose unqualified tables live in a private, temporary schema.

    Opening a DuckDB database costs about 50 ms, a cursor on an open one microseconds: the
    connection is a cursor on a process-wide in-memory database (reopened after a fork), with
    its own schema, dropped on exit, so concurrent users never see each other's tables. The
    database reads and writes no file, installs and loads no extension and cannot be
    reconfigured by the SQL; its memory and the time its statements run are bounded
    (`SqlLimits`, `set_sql_limits`): past them, `SqlLimitError` in one line.

    Raises:
        SqlLimitError: the statements ran past the time or memory limit.
    """
    global _shared
    with _shared_lock:
        limits = _limits
        if _shared is None or _shared[0] != os.getpid() or _shared[1] != limits:
            _shared = (os.getpid(), limits, _hardened_database(limits))
        cursor = _shared[2].cursor()
    schema = f"dpcomm_scratch_{uuid.uuid4().hex}"
    expired, done = threading.Event(), threading.Event()

    def interrupt() -> None:  # again and again: an interrupt between statements is lost
        if done.wait(limits.seconds):
            return
        expired.set()
        while True:
            cursor.interrupt()
            if done.wait(_INTERRUPT_PERIOD):
                return

    timer = threading.Thread(target=interrupt, name="dpcomm-sql-time-limit", daemon=True)
    try:
        cursor.execute(f'CREATE SCHEMA "{schema}"')
        cursor.execute(f"SET schema = '{schema}'")
        timer.start()
        yield cursor
    except Exception as error:
        limited = _limit_error(error, limits, expired.is_set())
        if limited is error:
            raise
        raise limited from error
    finally:
        done.set()
        if timer.is_alive():
            timer.join()
        try:
            cursor.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            cursor.close()


def _limit_error(error: Exception, limits: SqlLimits, expired: bool) -> Exception:
    """``error``, or the `SqlLimitError` it stands for (an interrupt, DuckDB out of memory)."""
    text = str(error)
    if expired or isinstance(error, duckdb.InterruptException) or "INTERRUPT" in text:
        return SqlLimitError(
            f"DuckDB's evaluation of the SQL ran past its time limit of {limits.seconds:g} s "
            "and was interrupted"
        )
    if isinstance(error, duckdb.OutOfMemoryException) or "Out of Memory Error" in text:
        return SqlLimitError(
            f"DuckDB's evaluation of the SQL ran past its memory limit of {limits.memory_limit}: "
            + text.splitlines()[0]
        )
    return error


#: Bound queries kept (`bind_sql`): the most recently used, by SQL, schema and options.
_BOUND_QUERIES = 256
_bound: dict[tuple[object, ...], BoundAggregate] = {}
_bound_lock = threading.Lock()


def bind_sql(
    sql: str,
    table: Table,
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    count_rows: bool = False,
) -> BoundAggregate:
    """Parse ``sql`` and bind it to ``table`` (`parse_aggregate` then `bind`).

    A query outside the core class (WHERE, derived keys, HAVING, ORDER BY, LIMIT, GROUPING(),
    variances, SUM of booleans) is rewritten (`dpcomm.queries.analyst`): the bound query
    then holds its row projection, and reads the projection's rows (`project`).
    ``bounds`` (a noisy release: each bounded column's (lo, hi)) always rewrites, clamping the
    values a SUM or AVG reads on each source's row; ``count_rows`` (a release that selects
    keys by a threshold on a COUNT) adds a hidden COUNT(*) if the query has no COUNT.

    The bound query depends on the SQL, the table's name and schema (column names and types)
    and the options alone, never on the rows (DuckDB types the SQL over a copy of no rows): the
    last `_BOUND_QUERIES` are kept, so the same query over the same schema (run again with
    another seed, over a neighbouring table, under another countermeasure) is not parsed,
    rewritten and typed anew. A refusal is never kept: it is raised again each time.
    """
    try:
        key = (
            sql,
            table.name,
            tuple((c.name, c.sql_type) for c in table.columns),
            None if bounds is None else repr(tuple(bounds.items())),
            count_rows,
        )
        hash(key)
    except (AttributeError, TypeError):  # an argument of the wrong type: the binding refuses it
        return _bind_sql(sql, table, bounds=bounds, count_rows=count_rows)
    with _bound_lock:
        bound = _bound.pop(key, None)
        if bound is not None:
            _bound[key] = bound  # the most recently used last
            return bound
    bound = _bind_sql(sql, table, bounds=bounds, count_rows=count_rows)
    with _bound_lock:
        _bound[key] = bound
        while len(_bound) > _BOUND_QUERIES:
            del _bound[next(iter(_bound))]
    return bound


def forget_bound_queries() -> None:
    """Forget the bound queries `bind_sql` keeps (for code that replaces the binding's own)."""
    with _bound_lock:
        _bound.clear()


def _bind_sql(
    sql: str,
    table: Table,
    *,
    bounds: Mapping[str, tuple[float, float]] | None,
    count_rows: bool,
) -> BoundAggregate:
    """`bind_sql` without the bound queries kept."""
    if bounds is not None:
        return _bind_analyst(sql, table, bounds, count_rows=count_rows)
    try:
        query = parse_aggregate(sql)
    except UnsupportedQueryError:
        return _bind_analyst(sql, table)
    if any(o.function == "list" for o in query.outputs):
        return _bind_analyst(sql, table)  # DuckDB's LIST keeps NULLs, in the rows' order
    if any(
        o.column is not None
        and (
            (o.function in ("sum", "avg") and _column_type(table, o.column) in _REWRITTEN_SUM_TYPES)
            or (o.function in ("count", "avg", "min", "max") and _uncarried(table, o.column))
            or (o.column.lower() == "rowid" and _column_type(table, o.column) is None)
        )
        for o in query.outputs
    ):
        return _bind_analyst(sql, table)
    bound = bind(query, table)
    _check_result_names(bound)
    return bound


#: Column types whose SUM or AVG the analyst rewrite computes (booleans as integers; the
#: mean of dates and times from their ticks).
_REWRITTEN_SUM_TYPES = frozenset(
    {"BOOLEAN", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS"}
)


def _uncarried(table: Table, name: str) -> bool:
    """Whether ``name`` is a column of a type no source carries.

    Its COUNT, AVG, MIN and MAX are rewritten (`dpcomm.queries.analyst`).
    """
    sql_type = _column_type(table, name)
    return sql_type is not None and value_kind(sql_type) is None


def _column_type(table: Table, name: str) -> str | None:
    try:
        return table.column(name).sql_type
    except InvalidParameterError:
        return None


def _check_result_names(bound: BoundAggregate) -> None:
    names = [n.lower() for n in (bound.post.names if bound.post else bound.output_names)]
    if bound.num_grouping_sets > 1 and GROUPING_SET_COLUMN in names:
        raise InvalidParameterError(
            "select list",
            f"no output named {GROUPING_SET_COLUMN} in a query with several grouping sets "
            "(dpcomm adds that column; use an AS alias)",
            GROUPING_SET_COLUMN,
        )


def _bind_analyst(
    sql: str,
    table: Table,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    *,
    count_rows: bool = False,
) -> BoundAggregate:
    """Bind an analyst query: its projection, core query and post-processing."""
    from dpcomm.queries.analyst import rewrite

    _check_nesting(sql)
    statements = _parse(sql)
    if len(statements) != 1:
        raise UnsupportedQueryError("several statements", f"{len(statements)} statements")
    select = statements[0]
    table_name, qualifiers = _from_table(
        select, frozenset({"where", "having", "order", "limit", "offset"})
    )
    if select.find(exp.Subquery) is not None or any(
        node is not select for node in select.find_all(exp.Select)
    ):
        raise UnsupportedQueryError("subquery", "a source sees only its own row")
    window = select.find(exp.Window)
    if window is not None:
        raise UnsupportedQueryError(
            "window function", f"{window.sql(dialect='duckdb')[:80]}: a source sees only its row"
        )
    raw = table.renamed(table_name)
    names, types = _duckdb_result(sql, table_name, raw)
    lowered = [n.lower() for n in names]
    duplicates = sorted({n for n in names if lowered.count(n.lower()) > 1})
    if duplicates:
        raise InvalidParameterError(
            "select list", "distinct output column names (use AS aliases)", duplicates
        )
    empty = raw.take(np.zeros(raw.num_rows, dtype=bool))

    @cache  # an expression is typed once per query (each typing opens a DuckDB connection)
    def typer(expression: str) -> str:
        return _duckdb_result(f"SELECT {expression} FROM {_quoted(table_name)}", table_name, empty)[
            1
        ][0]

    rewritten = rewrite(
        select,
        raw,
        qualifiers,
        output_names=names,
        output_types=types,
        typer=typer,
        bounds=bounds,
        count_rows=count_rows,
    )
    try:
        derived = _run_projection(rewritten.projection, empty)
        core = bind(parse_aggregate(rewritten.core), derived)
    except InvalidParameterError as error:
        raise _named_by_user(error, rewritten.column_labels) from None
    labels = rewritten.key_labels
    bound = replace(
        core,
        filter_column=rewritten.filter_column,
        post=rewritten.post,
        set_labels=tuple(
            "(" + ", ".join(labels.get(c, c) for c in s) + ")" for s in core.grouping_sets
        ),
        projection=rewritten.projection,
        user_sql=sql,
        clamps=tuple((name, *clamp) for name, clamp in rewritten.clamps.items()),
        aggregate_labels=tuple(rewritten.aggregate_labels.items()),
        key_labels=_key_labels(core.grouping_columns, labels, rewritten.key_aliases),
        centres=tuple(rewritten.centres.items()),
        value_uses=rewritten.value_uses,
        quantiles=rewritten.quantiles,
    )
    _check_result_names(bound)
    return bound


def _key_labels(
    columns: Sequence[str], labels: Mapping[str, str], aliases: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """Each derived key column's names for the user: its SQL (or GROUP BY alias), its alias."""
    named: list[tuple[str, str]] = []
    for column in columns:
        for label in (labels.get(column, column), aliases.get(column, column)):
            if label != column and (column, label) not in named:
                named.append((column, label))
    return tuple(named)


_HIDDEN_NAME = re.compile(r"__dpcomm_[a-z]+[0-9]*")


def _named_by_user(error: InvalidParameterError, labels: Mapping[str, str]) -> Exception:
    """``error`` with each of dpcomm's own column names replaced by the user's SQL."""

    def named(text: str) -> str:
        return _HIDDEN_NAME.sub(lambda m: labels.get(m.group(0), m.group(0)), text)

    if not _HIDDEN_NAME.search(str(error)):
        return error
    given = named(error.given) if isinstance(error.given, str) else error.given
    return InvalidParameterError(named(error.name), named(error.allowed), given)


def _duckdb_result(sql: str, table_name: str, table: Table) -> tuple[list[str], list[str]]:
    """DuckDB's output names and types of ``sql`` over a zero-row copy of ``table``."""
    with scratch_connection() as connection:
        try:
            table.take(np.zeros(table.num_rows, dtype=bool)).register(connection, table_name)
            relation = connection.sql(sql)
            if relation is None:
                raise InvalidParameterError("sql", "a query returning rows", sql)
            return list(relation.columns), [str(t) for t in relation.types]
        except duckdb.Error as error:
            message = str(error).splitlines()[0]
            raise InvalidParameterError("sql", "SQL that DuckDB accepts", message) from error


def _run_projection(projection: str, table: Table, first_row: int = 0) -> Table:
    """The projection's rows over ``table`` (registered under its name), by DuckDB.

    A projection reading `ROWID_COLUMN` reads each row's position: ``first_row`` plus its
    position in ``table`` (the rows of a table read by ranges start at their range's first).
    """
    from dpcomm.data.table import table_from_relation

    with scratch_connection() as connection:
        try:
            if ROWID_COLUMN in projection:
                stored = f"{ROWID_COLUMN}_rows"
                table.register(connection, stored)
                connection.execute(
                    f"CREATE VIEW {_quoted(table.name)} AS SELECT *, rowid + {int(first_row)} "
                    f"AS {_quoted(ROWID_COLUMN)} FROM {_quoted(stored)}"
                )
            else:
                table.register(connection, table.name)
            return table_from_relation(connection.sql(projection), table.name)
        except duckdb.Error as error:
            message = str(error).splitlines()[0]
            raise InvalidParameterError(
                "data", "rows on which DuckDB evaluates the query's expressions", message
            ) from error


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def derivation_of(
    sql: str,
    table: Table,
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    count_rows: bool = False,
) -> SqlDerivation:
    """The public inputs `bind_sql` derived a query's SQL from (what a node derives it from)."""
    return SqlDerivation(
        sql,
        tuple((c.name, c.sql_type) for c in table.columns),
        None
        if bounds is None
        else tuple((c, float(lo), float(hi)) for c, (lo, hi) in bounds.items()),
        count_rows,
    )


_EDITED = "(an edited config?); a node runs only the SQL it derives itself"


def check_derived(bound: BoundAggregate, derivation: SqlDerivation | None) -> None:
    """Refuse ``bound`` unless its SQL is what ``derivation`` derives through `bind_sql`.

    A deployed node never runs the row projection or the post-processing a config carries as
    given: it binds the user's SQL to the public schema again, through every check of ``run``
    (the analyst rewrite, its allow-list of functions, its size limits), and the whole bound
    query must come out the same. A query without derived SQL needs no derivation.

    Raises:
        InvalidParameterError: no derivation for derived SQL, a different bound query, or
            the user's SQL refused by the checks of ``run`` (their own message).
    """
    if bound.projection is None and bound.post is None:
        return
    if derivation is None:
        raise InvalidParameterError(
            "program query", f"derived SQL with the user's SQL it comes from {_EDITED}", None
        )
    bounds = None if derivation.bounds is None else {c: (lo, hi) for c, lo, hi in derivation.bounds}
    # The user's SQL goes through every check of run: a refusal is run's own one line.
    derived = bind_sql(
        derivation.sql,
        _schema_table(derivation.schema),
        bounds=bounds,
        count_rows=derivation.count_rows,
    )
    if derived.to_dict() != bound.to_dict():
        raise InvalidParameterError(
            "program query",
            f"the SQL dpcomm derives from the user's SQL {_EDITED}",
            "a config whose derived SQL differs",
        )


def _schema_table(schema: Sequence[tuple[str, str]]) -> Table:
    """A table of no rows with ``schema``: each type must be DuckDB's own name of a type."""
    columns = []
    for name, sql_type in schema:
        try:
            canonical = str(duckdb.sqltype(sql_type))
        except (duckdb.Error, ValueError, TypeError):
            canonical = None
        if canonical != sql_type:
            raise InvalidParameterError(
                f"program derivation: column {name!r}", "a DuckDB type name", sql_type
            )
        dtype = np.int64 if value_kind(sql_type) == "int" else object
        columns.append(Column(name, sql_type, np.empty(0, dtype), np.empty(0, dtype=bool)))
    return Table("t", tuple(columns))


def project(bound: BoundAggregate, table: Table, first_row: int = 0) -> Table:
    """The rows the bound query reads: ``table`` itself, or its row projection (DuckDB).

    Each derived row is a deterministic function of the raw row alone (what a source
    evaluates on its own row; DuckDB's ``rowid`` is the row's position in the table given,
    ``first_row`` for the first of ``table``); DuckDB evaluates them for all rows at once.
    """
    if bound.projection is None:
        return table
    return _run_projection(bound.projection, table.renamed(bound.table_name), first_row)


__all__ = [
    "AggregateFunction",
    "AggregateQuery",
    "BoundAggregate",
    "OutputColumn",
    "OutputKind",
    "SqlLimitError",
    "SqlLimits",
    "SqlSyntaxError",
    "UnsupportedQueryError",
    "bind",
    "bind_sql",
    "check_derived",
    "derivation_of",
    "parse_aggregate",
    "project",
    "scratch_connection",
    "set_sql_limits",
]
