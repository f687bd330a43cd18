from __future__ import annotations

import duckdb
import numpy as np
import pytest

from dpcomm.data.table import Column, Table, table_from_arrays
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.queries.sql import (
    AggregateQuery,
    OutputColumn,
    SqlSyntaxError,
    UnsupportedQueryError,
    bind,
    bind_sql,
    parse_aggregate,
)


@pytest.fixture
def table() -> Table:
    return table_from_arrays(
        "D",
        {
            "A": np.array([1, 2, 2]),
            "B": np.array(["x", "y", "x"], dtype=object),
            "C": np.array([5, 6, 7]),
            "E": np.array([0, 1, 0]),
            "I": np.array([1.5, 2.5, 3.0]),
        },
        ["INTEGER", "VARCHAR", "BIGINT", "SMALLINT", "DOUBLE"],
    )


def duckdb_grouping_sets(group_by: str, columns: tuple[str, ...]) -> list[frozenset[str]]:
    """DuckDB's own expansion: over a one-row table, one output row per grouping set, in order."""
    connection = duckdb.connect()
    connection.execute("SET threads = 1")
    connection.execute("CREATE TABLE D (A INTEGER, B INTEGER, C INTEGER, E INTEGER)")
    connection.execute("INSERT INTO D VALUES (1, 1, 1, 1)")
    grouping = ", ".join(columns)
    rows = connection.execute(f"SELECT GROUPING({grouping}) FROM D GROUP BY {group_by}").fetchall()
    sets = []
    for (bits,) in rows:
        width = len(columns)
        sets.append(
            frozenset(c for i, c in enumerate(columns) if not (bits >> (width - 1 - i)) & 1)
        )
    return sets


def test_parse_running_example() -> None:
    query = parse_aggregate("SELECT A, B, AVG(I) FROM D GROUP BY GROUPING SETS ((A), (B))")
    assert query.table_name == "D"
    assert query.grouping_sets == (("A",), ("B",))
    assert query.grouping_columns == ("A", "B")
    assert query.num_grouping_sets == 2
    assert query.outputs == (
        OutputColumn("A", "group", "A", None),
        OutputColumn("B", "group", "B", None),
        OutputColumn("avg(I)", "aggregate", "I", "avg"),
    )


def test_parse_all_functions_and_aliases() -> None:
    query = parse_aggregate(
        "select a, count(*), count(I) as n, sum(I), avg(I) mean, min(C), max(C) AS top "
        "from D group by a"
    )
    assert [(o.kind, o.column, o.function) for o in query.outputs] == [
        ("group", "a", None),
        ("aggregate", None, "count_star"),
        ("aggregate", "I", "count"),
        ("aggregate", "I", "sum"),
        ("aggregate", "I", "avg"),
        ("aggregate", "C", "min"),
        ("aggregate", "C", "max"),
    ]
    assert [o.name for o in query.outputs][2] == "n"
    assert query.outputs[4].name == "mean"
    assert query.outputs[6].name == "top"
    assert query.sql.startswith("select a")


def test_plain_column_list_is_one_grouping_set() -> None:
    assert parse_aggregate("SELECT count(*) FROM D GROUP BY A, B").grouping_sets == (("A", "B"),)
    assert parse_aggregate("SELECT count(*) FROM D GROUP BY A, a").grouping_sets == (("A",),)
    assert parse_aggregate("SELECT count(*) FROM D GROUP BY ()").grouping_sets == ((),)
    assert parse_aggregate("SELECT count(*) FROM D GROUP BY (A, B), C").grouping_sets == (
        ("A", "B", "C"),
    )


@pytest.mark.parametrize(
    ("group_by", "expected"),
    [
        ("ROLLUP (A, B)", [(), ("A",), ("A", "B")]),
        ("CUBE (A, B)", [(), ("A",), ("A", "B"), ("B",)]),
        (
            "CUBE (A, B, C)",
            [(), ("A",), ("A", "B"), ("A", "B", "C"), ("A", "C"), ("B",), ("B", "C"), ("C",)],
        ),
        ("A, ROLLUP (B)", [("A",), ("A", "B")]),
        ("ROLLUP (A, B), CUBE (C)", [(), ("C",), ("A",), ("A", "C"), ("A", "B"), ("A", "B", "C")]),
        ("GROUPING SETS ((A), (A), ())", [("A",), ("A",), ()]),
        ("A, ROLLUP (A)", [("A",), ("A",)]),
        ("GROUPING SETS ((A, A), (B, a))", [("A",), ("B", "a")]),
        ("GROUPING SETS (ROLLUP (A, B), C, ())", [(), ("A",), ("A", "B"), ("C",), ()]),
        ("GROUPING SETS (CUBE (A, B), (C, (A)))", [(), ("A",), ("A", "B"), ("B",), ("C", "A")]),
        ("ROLLUP ((A, B), C)", [(), ("A", "B"), ("A", "B", "C")]),
        ("CUBE ((A, B), C)", [(), ("A", "B"), ("A", "B", "C"), ("C",)]),
        (
            "GROUPING SETS ((A), (B)), GROUPING SETS ((C), ())",
            [("A", "C"), ("A",), ("B", "C"), ("B",)],
        ),
        ("E, CUBE (A, B), ()", [("E",), ("E", "A"), ("E", "A", "B"), ("E", "B")]),
    ],
)
def test_expansion_matches_duckdb(group_by: str, expected: list[tuple[str, ...]]) -> None:
    query = parse_aggregate(f"SELECT count(*) FROM D GROUP BY {group_by}")
    assert list(query.grouping_sets) == expected
    mine = [frozenset(c.upper() for c in s) for s in query.grouping_sets]
    used = tuple(sorted({c.upper() for c in query.grouping_columns}))
    assert mine == duckdb_grouping_sets(group_by, used)


def test_qualified_columns_and_table_alias() -> None:
    query = parse_aggregate("SELECT D.A, sum(D.I) FROM D GROUP BY D.A")
    assert query.grouping_sets == (("A",),)
    assert query.outputs[1].column == "I"
    aliased = parse_aggregate("SELECT x.A, count(*) FROM D AS x GROUP BY x.A")
    assert aliased.table_name == "D"
    with pytest.raises(UnsupportedQueryError, match="another table"):
        parse_aggregate("SELECT E.A, count(*) FROM D GROUP BY A")


def test_bind_takes_names_from_duckdb(table: Table) -> None:
    bound = bind_sql(
        'select a, "B", avg(  i ), count(*), COUNT(I), SUM(I) AS s, Min(i), max("I") '
        "from d group by grouping sets ((a), (b))",
        table,
    )
    assert bound.output_names == (
        "A",
        "B",
        "avg(i)",
        "count_star()",
        "count(I)",
        "s",
        "min(i)",
        "max(I)",
    )
    assert bound.grouping_sets == (("A",), ("B",))
    assert bound.grouping_columns == ("A", "B")
    assert [o.column for o in bound.outputs] == ["A", "B", "I", None, "I", "I", "I", "I"]
    assert bound.output_types[0] == "INTEGER"
    assert bound.output_types[3] == "BIGINT"
    assert bound.table_name == "d"
    assert bound.num_grouping_sets == 2
    connection = duckdb.connect()
    table.register(connection, "d")
    direct = connection.execute(bound.sql)
    assert tuple(d[0] for d in direct.description) == bound.output_names


def test_bind_group_alias(table: Table) -> None:
    bound = bind_sql("SELECT A AS age, count(*) AS n FROM D GROUP BY A", table)
    assert bound.output_names == ("age", "n")
    assert bound.outputs[0] == OutputColumn("age", "group", "A", None)


def test_bind_missing_column_lists_available(table: Table) -> None:
    with pytest.raises(InvalidParameterError, match=r"Z.*A, B, C, E, I"):
        bind_sql("SELECT Z, count(*) FROM D GROUP BY Z", table)
    with pytest.raises(InvalidParameterError, match=r"column W \(select list\)"):
        bind_sql("SELECT A, sum(W) FROM D GROUP BY A", table)


def test_bind_rejects_non_numeric_argument(table: Table) -> None:
    for function in ("SUM", "AVG"):
        with pytest.raises(InvalidParameterError, match=rf"{function}.*B of type VARCHAR"):
            bind_sql(f"SELECT A, {function}(B) FROM D GROUP BY A", table)
    assert bind_sql("SELECT A, count(B) FROM D GROUP BY A", table).output_names[1] == "count(B)"
    # MIN and MAX of text are DuckDB's (byte order of UTF-8).
    assert bind_sql("SELECT A, min(B), max(B) FROM D GROUP BY A", table).output_types[1:] == (
        "VARCHAR",
        "VARCHAR",
    )


def test_bind_rejects_duplicate_output_names(table: Table) -> None:
    with pytest.raises(InvalidParameterError, match="distinct output column names"):
        bind_sql("SELECT A, count(*) AS n, sum(I) AS n FROM D GROUP BY A", table)


def test_bind_reports_duckdb_errors(table: Table) -> None:
    query = parse_aggregate("SELECT A, count(*) FROM D GROUP BY A")
    broken = AggregateQuery(
        "SELECT A, count(*) FROM D GROUP BY A + ", "D", (("A",),), query.outputs
    )
    with pytest.raises(InvalidParameterError, match="SQL that DuckDB accepts"):
        bind(broken, table)


def test_selected_column_must_be_grouped() -> None:
    with pytest.raises(UnsupportedQueryError, match="column B must appear in the GROUP BY"):
        parse_aggregate("SELECT A, B, count(*) FROM D GROUP BY A")
    with pytest.raises(UnsupportedQueryError, match="column B must appear"):
        parse_aggregate("SELECT B, count(*) FROM D GROUP BY GROUPING SETS ((A), ())")
    assert (
        parse_aggregate("SELECT b, count(*) FROM D GROUP BY ROLLUP (A, B)").outputs[0].column == "b"
    )


def test_dataclass_validation() -> None:
    with pytest.raises(InvalidParameterError):
        OutputColumn("x", "group", None, None)
    with pytest.raises(InvalidParameterError):
        OutputColumn("x", "aggregate", "A", None)
    with pytest.raises(InvalidParameterError):
        OutputColumn("x", "aggregate", "A", "count_star")
    with pytest.raises(InvalidParameterError):
        OutputColumn("x", "aggregate", None, "sum")
    with pytest.raises(InvalidParameterError):
        OutputColumn("x", "other", "A", None)  # type: ignore[arg-type]
    output = OutputColumn("n", "aggregate", None, "count_star")
    with pytest.raises(InvalidParameterError):
        AggregateQuery("", "D", (), (output,))
    with pytest.raises(InvalidParameterError):
        AggregateQuery("", "D", (("A", "a"),), (output,))


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT A, count(*) FROM D JOIN E ON D.A = E.A GROUP BY A", "JOIN"),
        ("SELECT A, count(*) FROM D LEFT JOIN E USING (A) GROUP BY A", "JOIN"),
        ("SELECT A, count(*) FROM D, E GROUP BY A", "multiple tables"),
        ("SELECT A, count(*) FROM (SELECT * FROM D) GROUP BY A", "subquery"),
        ("SELECT A, (SELECT 1) FROM D GROUP BY A", "subquery"),
        ("WITH t AS (SELECT * FROM D) SELECT A, count(*) FROM t GROUP BY A", "WITH"),
        ("SELECT A, sum(I) OVER () FROM D GROUP BY A", "window function"),
        ("SELECT A, count(*) FROM D WHERE I > 1 GROUP BY A", "WHERE"),
        ("SELECT A, count(*) FROM D GROUP BY A HAVING count(*) > 1", "HAVING"),
        ("SELECT A, count(*) FROM D GROUP BY A ORDER BY A", "ORDER BY"),
        ("SELECT A, count(*) FROM D GROUP BY A LIMIT 3", "LIMIT"),
        ("SELECT DISTINCT A FROM D GROUP BY A", "DISTINCT"),
        ("SELECT A FROM D GROUP BY A UNION SELECT A FROM D GROUP BY A", "UNION"),
        ("SELECT A FROM D GROUP BY A INTERSECT SELECT A FROM D GROUP BY A", "INTERSECT"),
        ("SELECT A, sum(I + 1) FROM D GROUP BY A", "expression inside SUM()"),
        ("SELECT A, avg(-I) FROM D GROUP BY A", "expression inside AVG()"),
        ("SELECT A, sum(count(*)) FROM D GROUP BY A", "nested aggregate"),
        ("SELECT A + 1, count(*) FROM D GROUP BY A", "expression in the select list"),
        ("SELECT 1 AS one, count(*) FROM D GROUP BY A", "constant in the select list"),
        ("SELECT A, count(*) FROM D GROUP BY A + 1", "expression in GROUP BY"),
        ("SELECT A, count(DISTINCT B) FROM D GROUP BY A", "COUNT(DISTINCT"),
        ("SELECT A, sum(DISTINCT I) FROM D GROUP BY A", "SUM(DISTINCT"),
        ("SELECT A, GROUPING(A) FROM D GROUP BY A", "GROUPING()"),
        ("SELECT A, count(*) FILTER (WHERE I > 1) FROM D GROUP BY A", "FILTER"),
        ("SELECT * FROM D GROUP BY A", "SELECT *"),
        ("SELECT D.* FROM D GROUP BY A", "SELECT *"),
        ("SELECT A FROM D", "without aggregate or GROUP BY"),
        ("SELECT A, foo(I) FROM D GROUP BY A", "unknown function foo()"),
        ("SELECT A, median(I) FROM D GROUP BY A", "unsupported aggregate function median()"),
        ("SELECT A, abs(I) FROM D GROUP BY A", "unsupported function abs()"),
        ("SELECT A, count(1) FROM D GROUP BY A", "constant inside COUNT()"),
        ("SELECT A, min(I, 2) FROM D GROUP BY A", "extra arguments of MIN"),
        ("SELECT A, count(*) FROM D GROUP BY 1", "positional GROUP BY"),
        ("SELECT A, count(*) FROM D GROUP BY ALL", "GROUP BY ALL"),
        ("SELECT A, count(*) FROM D GROUP BY A, count(*)", "aggregate in GROUP BY"),
        ("SELECT count(*) FROM D GROUP BY GROUPING SETS ((A, ROLLUP (B)))", "in GROUP BY"),
        ("SELECT A, count(*) FROM main.D GROUP BY A", "qualified table name"),
        ("SELECT A, count(*) FROM read_csv('x.csv') GROUP BY A", "plain table name"),
        ("SELECT A, count(*) FROM D GROUP BY A QUALIFY A > 1", "QUALIFY"),
        ("SELECT 1 GROUP BY ()", "without FROM"),
        ("SELECT A, count(*) FROM D GROUP BY A; SELECT 1", "several statements"),
        ("INSERT INTO D VALUES (1)", "INSERT statement"),
    ],
)
def test_unsupported_constructs_are_named(sql: str, construct: str) -> None:
    with pytest.raises(UnsupportedQueryError) as caught:
        parse_aggregate(sql)
    message = str(caught.value)
    assert construct in message
    assert "\n" not in message
    assert isinstance(caught.value, InvalidParameterError)
    assert isinstance(caught.value, DpcommError)


@pytest.mark.parametrize("sql", ["SELEC A FROM D GROUP BY A", "SELECT A, FROM D GROUP BY (A"])
def test_syntax_error_is_one_line(sql: str) -> None:
    with pytest.raises(SqlSyntaxError) as caught:
        parse_aggregate(sql)
    assert str(caught.value).startswith("SQL syntax error")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("sql", ["", "   "])
def test_empty_sql(sql: str) -> None:
    with pytest.raises(InvalidParameterError):
        parse_aggregate(sql)


def test_check_table_rejects_other_schema(table: Table) -> None:
    bound = bind_sql("SELECT A, count(*) FROM D GROUP BY A", table)
    bound.check_table(table.renamed("other"))
    other = Table("D", (Column("A", "VARCHAR", np.array(["1"], dtype=object), np.zeros(1, bool)),))
    with pytest.raises(InvalidParameterError, match="schema"):
        bound.check_table(other)


def test_rowid_is_the_rows_position_in_the_table_also_when_read_by_ranges(tmp_path) -> None:
    """DuckDB's rowid: a range's rows keep their positions in the whole (Parquet, Dask)."""
    from dpcomm.data.partitioned import ParquetRows
    from dpcomm.queries.aggregate import AggregateProgram

    path = tmp_path / "t.parquet"
    duckdb.execute(f"COPY (SELECT range % 2 AS i FROM range(7)) TO '{path}' (FORMAT PARQUET)")
    sql = "SELECT rowid // 3 AS g, COUNT(*), SUM(rowid) FROM t WHERE rowid > 0 GROUP BY g"
    program = AggregateProgram.from_sql(sql, ParquetRows(path, name="t"))
    assert program.rows is not None
    part = program.rows.read(3, 7)
    held = {tuple(c.values.tolist()) for c in part.columns}
    assert (1, 1, 1, 2) in held and (3, 4, 5, 6) in held


def test_a_query_bound_again_over_the_same_schema_is_kept() -> None:
    """The bound query depends on the SQL, the table's name and schema and the options, never
    on the rows: bound again over other rows it is the one kept; any difference binds anew,
    and a refusal is raised each time."""
    import dpcomm
    from dpcomm.queries.sql import forget_bound_queries

    forget_bound_queries()
    sql = "SELECT k, SUM(v) AS s FROM t WHERE v > 0 GROUP BY k"
    first = table_from_arrays("t", {"k": np.array(["a", "b"], dtype=object), "v": np.array([1, 2])})
    other = table_from_arrays("t", {"k": np.array(["c"], dtype=object), "v": np.array([-5])})
    bound = bind_sql(sql, first)
    assert bind_sql(sql, other) is bound
    assert bind_sql(sql, first, bounds={"v": (0.0, 1.0)}) is not bound
    assert bind_sql(sql, first, bounds={"v": (0.0, 1.0)}) is not bind_sql(
        sql, first, bounds={"v": (0.0, 2.0)}
    )
    doubles = table_from_arrays("t", {"k": np.array(["a"], dtype=object), "v": np.array([1.5])})
    assert bind_sql(sql, doubles).output_types != bound.output_types  # DOUBLE, not HUGEINT
    assert bind_sql(sql, first.renamed("u")) is not bound
    for _ in range(2):
        with pytest.raises(InvalidParameterError, match="nothing"):
            bind_sql("SELECT k, SUM(nothing) FROM t GROUP BY k", first)
    # Each table's rows are its own: the projection runs over the rows given.
    rows = [
        dpcomm.run_sql(sql, data, countermeasure=dpcomm.NoCountermeasure(), num_targets=2).rows
        for data in (first, other)
    ]
    assert sorted(r["s"] for r in rows[0]) == [1, 2] and rows[1] == []
