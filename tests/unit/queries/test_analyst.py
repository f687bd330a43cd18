"""Analyst SQL: how a query splits into a row projection, a core query and post-processing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dpcomm.data.table import Table, table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.analyst import FILTER_COLUMN
from dpcomm.queries.postprocess import grouping_value
from dpcomm.queries.query import GROUPING_SET_COLUMN, BoundAggregate
from dpcomm.queries.sql import UnsupportedQueryError, bind_sql, project


@pytest.fixture
def table() -> Table:
    return table_from_arrays(
        "D",
        {
            "A": np.array([1, 2, 2, 3]),
            "B": np.array(["x", "y", "x", "z"], dtype=object),
            "I": np.array([1.5, 2.5, 3.0, -1.0]),
            "F": np.array([True, False, True, True]),
        },
        ["INTEGER", "VARCHAR", "DOUBLE", "BOOLEAN"],
    )


def test_a_core_query_is_not_rewritten(table: Table) -> None:
    bound = bind_sql("SELECT A, COUNT(*) FROM D GROUP BY A", table)
    assert bound.projection is None and bound.post is None and bound.filter_column is None
    assert project(bound, table) is table


def test_where_becomes_a_carried_boolean_column(table: Table) -> None:
    bound = bind_sql("SELECT B, COUNT(*) FROM D WHERE I > 0 GROUP BY B", table)
    assert bound.filter_column == FILTER_COLUMN
    assert FILTER_COLUMN in bound.carried_columns(0)
    derived = project(bound, table)
    assert derived.column(FILTER_COLUMN).values.tolist() == [True, True, True, False]
    # Every row stays a source: the filtered-out row is sent, and left out at the compute node.
    program = AggregateProgram.from_sql("SELECT B, COUNT(*) FROM D WHERE I > 0 GROUP BY B", table)
    assert program.num_sources == 4
    assert program.nonprivate_result() == [
        {"B": "x", "count_star()": 2},
        {"B": "y", "count_star()": 1},
    ]


def test_a_null_condition_does_not_pass(table: Table) -> None:
    bound = bind_sql("SELECT B, COUNT(*) FROM D WHERE NULLIF(A, 2) > 0 GROUP BY B", table)
    assert project(bound, table).column(FILTER_COLUMN).values.tolist() == [
        True,
        False,
        False,
        True,
    ]


def test_derived_keys_are_labelled_as_written(table: Table) -> None:
    bound = bind_sql("SELECT FLOOR(I) AS f, B, COUNT(*) FROM D GROUP BY ROLLUP(FLOOR(I), B)", table)
    assert bound.labels == ("()", "(FLOOR(I))", "(FLOOR(I), B)")
    assert bound.result_names == ("f", "B", "count_star()", GROUPING_SET_COLUMN)


def test_the_bound_query_travels_with_its_post_processing(table: Table) -> None:
    bound = bind_sql(
        "SELECT B, SUM(I) / COUNT(*) AS m FROM D WHERE F GROUP BY B HAVING COUNT(*) > 1 "
        "ORDER BY m DESC LIMIT 1",
        table,
    )
    again = BoundAggregate.from_dict(bound.to_dict())
    assert again == bound
    assert bound.post is not None and "LIMIT 1" in bound.post.sql


def test_grouping_value_is_duckdbs() -> None:
    assert grouping_value(("a", "b"), ("a", "b")) == 0
    assert grouping_value(("a", "b"), ("a",)) == 1
    assert grouping_value(("a", "b"), ("b",)) == 2
    assert grouping_value(("a", "b"), ()) == 3


@pytest.mark.parametrize(
    ("sql", "construct", "why"),
    [
        ("SELECT A, COUNT(DISTINCT B) FROM D GROUP BY A", "DISTINCT", "GROUP BY the column"),
        ("SELECT A, MEDIAN(I) FROM D GROUP BY A", "MEDIAN", "binned column"),
        ("SELECT A, MODE(B) FROM D GROUP BY A", "MODE", "largest COUNT"),
        ("SELECT A, STRING_AGG(B, ',') FROM D GROUP BY A", "STRING_AGG", "GROUP BY the column"),
        ("SELECT A, SUM(I) OVER () FROM D GROUP BY A", "window function", "its row"),
        ("SELECT A, COUNT(*) FROM D WHERE random() < 0.5 GROUP BY A", "random", "deterministic"),
        (
            "SELECT A, COUNT(*) FROM D WHERE current_date > DATE '2020-01-01' GROUP BY A",
            "current date",
            "every node",
        ),
        ("SELECT D.A, COUNT(*) FROM D JOIN D E ON D.A = E.A GROUP BY D.A", "JOIN", "join first"),
        ("SELECT A, COUNT(*) FROM D GROUP BY A HAVING COUNT(DISTINCT B) > 1", "DISTINCT", ""),
    ],
)
def test_refusals_say_why(table: Table, sql: str, construct: str, why: str) -> None:
    with pytest.raises(UnsupportedQueryError) as raised:
        bind_sql(sql, table)
    message = str(raised.value)
    assert construct.lower() in message.lower()
    assert why.lower() in message.lower()
    assert "\n" not in message


def test_a_column_with_dpcomms_prefix_is_refused() -> None:
    odd = table_from_arrays("D", {"__dpcomm_k0": np.array([1, 2])})
    with pytest.raises(InvalidParameterError, match="__dpcomm_"):
        bind_sql("SELECT __dpcomm_k0 + 1 AS k, COUNT(*) FROM D GROUP BY __dpcomm_k0 + 1", odd)


def test_an_output_named_grouping_set_is_refused_with_several_sets(table: Table) -> None:
    with pytest.raises(InvalidParameterError, match="grouping_set"):
        bind_sql("SELECT A AS grouping_set, COUNT(*) FROM D GROUP BY ROLLUP(A)", table)
    assert bind_sql("SELECT A AS grouping_set, COUNT(*) FROM D GROUP BY A", table)


def test_sum_of_booleans_and_min_max_of_text(table: Table) -> None:
    program = AggregateProgram.from_sql("SELECT A, SUM(F), MIN(B), MAX(B) FROM D GROUP BY A", table)
    rows = program.nonprivate_result()
    assert [(r["A"], r["sum(F)"], r["min(B)"], r["max(B)"]) for r in rows] == [
        (1, 1, "x", "x"),
        (2, 1, "x", "y"),
        (3, 1, "z", "z"),
    ]


def test_a_pandas_category_column_is_read_as_text() -> None:
    import pandas as pd

    import dpcomm

    frame = pd.DataFrame({"c": pd.Categorical(["a", "b", "a", None]), "v": [1, 2, 3, 4]})
    run = dpcomm.run_sql(
        "SELECT c, COUNT(*), SUM(v) FROM frame GROUP BY c",
        frame,
        countermeasure=dpcomm.NoCountermeasure(),
    )
    assert run.rows == [
        {"c": "a", "count_star()": 2, "sum(v)": 4},
        {"c": "b", "count_star()": 1, "sum(v)": 2},
        {"c": None, "count_star()": 1, "sum(v)": 4},
    ]


def test_reports_name_hidden_aggregates_as_the_user_wrote_them(table: Table) -> None:
    import dpcomm

    run = dpcomm.run_sql(
        "SELECT B, SUM(I) / COUNT(*) AS m, MAX(I) FROM D WHERE A > 0 GROUP BY B",
        table,
        countermeasure=dpcomm.NoCountermeasure(),
    )
    assert set(run.report.utility.mean_relative_error) == {"SUM(I)", "COUNT(*)", "MAX(I)"}


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT CAST(I AS INTERVAL) AS v, COUNT(*) FROM D GROUP BY v", 'column "v"'),
        ("SELECT B || 'x' AS k, COUNT(*) FROM D GROUP BY GROUPING SETS ((k), (CAST(A AS UUID)))",
         "CAST(A AS UUID)"),
    ],
)  # fmt: skip
def test_refusals_name_the_users_sql_never_a_hidden_column(
    table: Table, sql: str, named: str
) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        bind_sql(sql, table)
    assert named in str(caught.value) and "__dpcomm_" not in str(caught.value)


def test_a_derived_key_is_labelled_by_its_sql_and_its_alias(table: Table) -> None:
    bound = bind_sql("SELECT A % 2 AS parity, COUNT(*) FROM D GROUP BY A % 2", table)
    (column,) = bound.grouping_columns
    assert dict(bound.key_labels)[column] in ("parity", "(A % 2)", "A % 2")
    assert {label for c, label in bound.key_labels if c == column} >= {"parity"}
    again = BoundAggregate.from_dict(bound.to_dict())
    assert again.key_labels == bound.key_labels


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*), SUM(I) FROM D",
        "SELECT B AS b2, COUNT(*) FROM D GROUP BY b2",
        "SELECT B, A, COUNT(*) FROM D GROUP BY 1, 2",
        "SELECT A, B, COUNT(*) FROM D GROUP BY GROUPING SETS (ROLLUP (A), CUBE (B))",
        "SELECT A, GROUPING_ID(A), GROUPING(), COUNT(*) FROM D GROUP BY ROLLUP (A)",
        "SELECT B, SUM(I) FILTER (WHERE A > 1), COUNT(*) FILTER (F) FROM D GROUP BY B",
        "SELECT fsum(I), sumKahan(I), kahan_sum(A), favg(I) FROM D",
        "SELECT sum(I ORDER BY A DESC), COUNT(*) FROM D",
        "SELECT B, COUNT(*) FROM D GROUP BY B ORDER BY ALL DESC",
        "SELECT 1, COUNT(*) FROM D",
    ],
)
def test_constructs_of_duckdbs_own_tests_are_answered(table: Table, sql: str) -> None:
    import duckdb

    program = AggregateProgram.from_sql(sql, table, num_targets=2)  # results: the suite module
    connection = duckdb.connect()
    table.register(connection, "D")
    names = [d[0] for d in connection.execute(sql).description]
    assert list(program.query.result_names[: len(names)]) == names


#: A table of every kind of value the order-free aggregates read (tiny: DuckDB answers too).
_VALUES = """
SELECT * FROM (VALUES
  (1, 'b', 10, INTERVAL '1 month 3 days', TIMETZ '02:30:00+04', [2, 1]),
  (1, 'a', 9, INTERVAL '-14 months 2 hours', TIMETZ '23:00:00-05', NULL),
  (2, NULL, NULL, NULL, NULL, [3]),
  (2, 'a', 100, INTERVAL '5 days 7 seconds', TIMETZ '00:00:00+1559', []),
  (NULL, 'é', -1, INTERVAL '1 microsecond', TIMETZ '24:00:00-1559', [NULL, 1])
) v(g, s, i, iv, tz, l)
"""


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT g, AVG(iv), AVG(tz), MIN(l), MAX(l), COUNT(l), MIN(iv) FROM v GROUP BY g",
        "SELECT g, STRING_AGG(DISTINCT s ORDER BY s DESC), STRING_AGG(i, '-' ORDER BY i), "
        "STRING_AGG(s, NULL ORDER BY s), STRING_AGG(s ORDER BY s) FILTER (WHERE i > 9) "
        "FROM v GROUP BY ROLLUP(g)",
        "SELECT g, FIRST(g * 2), LAST('x'), ANY_VALUE(NULL), STRING_AGG(g::VARCHAR, ';'), "
        "STRING_AGG(DISTINCT 'k') FILTER (WHERE s = 'a') FROM v GROUP BY g",
        "SELECT rowid // 2 AS r, COUNT(*), MIN(rowid) FROM v WHERE rowid <> 1 GROUP BY r",
        "SELECT g % 2 AS k, FIRST(g % 2), LAST((g % 2) * 10 + 1), ANY_VALUE(-(g % 2)) "
        "FROM v GROUP BY g % 2",
    ],
)
def test_order_free_aggregates_and_other_types_are_duckdbs(sql: str) -> None:
    import duckdb

    import dpcomm

    connection = duckdb.connect()
    connection.execute(f"CREATE TABLE v AS {_VALUES}")
    expected = sorted(map(repr, connection.execute(sql).fetchall()))
    for countermeasure in (
        dpcomm.NoCountermeasure(),
        dpcomm.Scramblers(sampling_rate=0.0, batch_size=2, num_dummies=1),
    ):
        run = dpcomm.run_sql(
            sql, connection.table("v"), countermeasure=countermeasure, num_targets=2, seed=3
        )
        names = [c for c in run.columns if c != GROUPING_SET_COLUMN]
        assert sorted(repr(tuple(row[n] for n in names)) for row in run.rows) == expected


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT STRING_AGG(B, ',' ORDER BY A) FROM D", "without ORDER BY that value"),
        ("SELECT A, STRING_AGG(B) FROM D GROUP BY A", "without ORDER BY that value"),
        ("SELECT LIST(B ORDER BY B) FROM D", "LIST()/ARRAY_AGG()"),
        ("SELECT A, FIRST(B) FROM D GROUP BY A", "varies within a group"),
        ("SELECT A, FIRST(A) FROM D GROUP BY ROLLUP(A)", "varies within a group"),
        ("SELECT A % 2 AS k, LAST(A) FROM D GROUP BY A % 2", "varies within a group"),
    ],
)
def test_aggregates_whose_order_no_node_knows_are_refused(
    table: Table, sql: str, said: str
) -> None:
    with pytest.raises(UnsupportedQueryError, match=re.escape(said)) as caught:
        bind_sql(sql, table)
    assert "__dpcomm_" not in str(caught.value)


def test_collected_values_merge_whatever_the_split(table: Table) -> None:
    from dpcomm.queries.groupby import finalize_partials, grouping_set_partials, merge_partials

    bound = bind_sql("SELECT A, STRING_AGG(B, '' ORDER BY B) FROM D GROUP BY A", table)
    rows = project(bound, table)
    whole = finalize_partials(bound, grouping_set_partials(bound, rows, 0, np.ones(4, bool)))
    for mask in (np.array([1, 0, 1, 0], bool), np.array([0, 0, 1, 1], bool)):
        parts = [grouping_set_partials(bound, rows, 0, m) for m in (mask, ~mask)]
        assert finalize_partials(bound, merge_partials(parts[::-1])) == whole


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT STRING_AGG(B, ',' ORDER BY B) FROM D",
        "SELECT STRING_AGG('x', ',') FROM D",
        "SELECT A, FIRST(A), SUM(I) FROM D GROUP BY A",
    ],
)
def test_no_value_is_published_exactly_under_a_noisy_release(table: Table, sql: str) -> None:
    with pytest.raises(UnsupportedQueryError):
        bind_sql(sql, table, bounds={"I": (0.0, 4.0)})
