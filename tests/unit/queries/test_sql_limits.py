"""Analyst SQL runs bounded: no files, no extensions, no reconfiguration, a memory and a time
limit, and only the allow-list's functions: deterministic functions of the rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from dpcomm.data.table import Table, table_from_arrays
from dpcomm.errors import InvalidParameterError
from dpcomm.queries.analyst import UNSTABLE_FUNCTIONS
from dpcomm.queries.functions import ALLOWED_FUNCTIONS
from dpcomm.queries.sql import (
    SqlLimitError,
    SqlLimits,
    UnsupportedQueryError,
    bind_sql,
    project,
    scratch_connection,
    set_sql_limits,
)


@pytest.fixture
def table() -> Table:
    return table_from_arrays(
        "D",
        {"A": np.arange(4), "I": np.array([1.5, 2.5, 3.0, -1.0])},
        ["INTEGER", "DOUBLE"],
    )


@pytest.fixture
def tight() -> Iterator[None]:
    previous = set_sql_limits(SqlLimits(memory_limit="16MB", seconds=0.05))
    try:
        yield
    finally:
        set_sql_limits(previous)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT A, COUNT(*) FROM D WHERE uuid() IS NOT NULL GROUP BY A",
        "SELECT A, COUNT(*) FROM D WHERE gen_random_uuid() IS NOT NULL GROUP BY A",
        "SELECT A, COUNT(*) FROM D GROUP BY A HAVING now() > TIMESTAMP '2020-01-01'",
        "SELECT A, COUNT(*) FROM D GROUP BY A HAVING current_timestamp > TIMESTAMP '2020-01-01'",
        "SELECT A, COUNT(*) FROM D WHERE setseed(0.5) IS NULL GROUP BY A",
        "SELECT A, COUNT(*) FROM D GROUP BY A HAVING random() < 2",
        "SELECT A, COUNT(*) AS c FROM D GROUP BY A ORDER BY uuid()",
        "SELECT A, COUNT(*) FROM D WHERE current_setting('memory_limit') <> '' GROUP BY A",
        "SELECT A, current_query() AS q, COUNT(*) FROM D GROUP BY A",
        "SELECT A || current_setting('threads') AS k, COUNT(*) FROM D GROUP BY k",
    ],
)
def test_non_deterministic_and_session_functions_are_refused(table: Table, sql: str) -> None:
    with pytest.raises(UnsupportedQueryError) as raised:
        bind_sql(sql, table)
    message = str(raised.value)
    assert "\n" not in message
    assert "deterministic" in message or "every node" in message


def test_every_volatile_duckdb_function_is_refused() -> None:
    with scratch_connection() as connection:
        volatile = connection.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() "
            "WHERE stability = 'VOLATILE' AND function_type = 'scalar'"
        ).fetchall()
    assert {name for (name,) in volatile} <= UNSTABLE_FUNCTIONS


@pytest.mark.parametrize(
    ("sql", "function"),
    [
        ("SELECT A, COUNT(*) FROM D WHERE pg_typeof(A) <> '' GROUP BY A", "pg_typeof"),
        ("SELECT parse_filename(CAST(A AS VARCHAR)) AS k, COUNT(*) FROM D GROUP BY k", "parse_"),
        (
            "SELECT A, COUNT(*) AS n FROM D GROUP BY A HAVING json_serialize_sql('SELECT 1') <> ''",
            "json_serialize_sql",
        ),
        ("SELECT A, COUNT(*) AS n FROM D GROUP BY A ORDER BY format_bytes(n)", "format_bytes"),
        ("SELECT A, to_json(COUNT(*)) AS j FROM D GROUP BY A", "to_json"),
    ],
    ids=["where", "key", "having", "order-by", "select-list"],
)
def test_a_function_off_the_allow_list_is_refused(table: Table, sql: str, function: str) -> None:
    with pytest.raises(UnsupportedQueryError, match=function) as raised:
        bind_sql(sql, table)
    message = str(raised.value)
    assert "\n" not in message
    assert "allow-list" in message


def test_age_of_now_is_refused_as_not_deterministic(table: Table) -> None:
    with pytest.raises(UnsupportedQueryError, match="deterministic"):
        bind_sql(
            "SELECT A, COUNT(*) FROM D WHERE age(TIMESTAMP '2020-01-01') IS NOT NULL GROUP BY A",
            table,
        )


def test_the_allow_list_holds_deterministic_duckdb_functions_only() -> None:
    with scratch_connection() as connection:
        stability = dict(
            connection.execute(
                "SELECT function_name, string_agg(DISTINCT coalesce(stability, 'MACRO'), ',') "
                "FROM duckdb_functions() WHERE function_type IN ('scalar', 'macro') GROUP BY 1"
            ).fetchall()
        )
    # Functions sqlglot spells with a keyword or a literal ([1, 2], {'a': 1}, CASE, CAST).
    spelled = {"array", "case", "cast", "coalesce", "extract", "ifnull", "interval", "struct"}
    assert {name for name in ALLOWED_FUNCTIONS if name not in stability} <= spelled | {"try_cast"}
    assert not any("VOLATILE" in stability.get(name, "") for name in ALLOWED_FUNCTIONS)
    assert not ALLOWED_FUNCTIONS & UNSTABLE_FUNCTIONS


def test_docs_list_every_allowed_function() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "execution.md").read_text()
    assert {name for name in ALLOWED_FUNCTIONS if f"`{name}`" not in docs} == set()


def test_the_allowed_functions_of_each_category_bind(table: Table) -> None:
    bind_sql(
        "SELECT CAST(floor(I) AS INTEGER) % 2 AS b, upper(left(CAST(A AS VARCHAR), 1)) AS s, "
        "year(DATE '2020-01-01' + A) AS y, len(list_transform(range(3), lambda x: x + A)) AS n, "
        "COALESCE(round(SUM(abs(I)), 1), 0) AS total FROM D "
        "WHERE if(A > 0, regexp_matches(CAST(A AS VARCHAR), '[0-9]'), false) GROUP BY b, s, y, n",
        table,
    )


def test_the_memory_bomb_in_having_is_refused_at_once(table: Table) -> None:
    with pytest.raises(UnsupportedQueryError, match=r"range\(\) with the size 200000000"):
        bind_sql(
            "SELECT A, COUNT(*) AS n FROM D GROUP BY A "
            "HAVING len(list_transform(range(200000000), lambda x: x + n)) > 0",
            table,
        )
    nested = (
        "SELECT A, COUNT(*) AS n FROM D GROUP BY A HAVING len(list_transform(range(1000), "
        "lambda x: list_transform(range(1000), lambda y: x * y))) > 0"
    )
    with pytest.raises(UnsupportedQueryError, match="product"):
        bind_sql(nested, table)


def test_a_small_literal_range_is_accepted(table: Table) -> None:
    bind_sql("SELECT A, COUNT(*) AS n FROM D GROUP BY A HAVING len(range(3)) = 3", table)


def test_a_long_projection_stops_at_the_time_limit(table: Table, tight: None) -> None:
    rows = table_from_arrays("D", {"A": np.arange(200_000)}, ["INTEGER"])
    bound = bind_sql(
        "SELECT list_sum(list_transform(range(5000), lambda x: x * A)) % 7 AS k, COUNT(*) "
        "FROM D GROUP BY k",
        rows,
    )
    with pytest.raises(SqlLimitError, match=r"time limit of 0.05 s") as raised:
        project(bound, rows)
    assert "\n" not in str(raised.value)


def test_memory_past_the_limit_is_one_line(tight: None) -> None:
    set_sql_limits(SqlLimits(memory_limit="16MB", seconds=30))
    with pytest.raises(SqlLimitError, match="memory limit of 16MB"), scratch_connection() as db:
        db.execute("SELECT count(*) FROM (SELECT x, list(x) FROM range(3000000) t(x) GROUP BY x)")


def test_the_connection_reads_no_file_and_cannot_be_reconfigured() -> None:
    with scratch_connection() as connection:
        with pytest.raises(duckdb.PermissionException):
            connection.execute("SELECT * FROM read_text('/etc/hostname')")
        with pytest.raises(duckdb.Error, match="locked"):
            connection.execute("SET memory_limit = '100GB'")
        with pytest.raises(duckdb.Error, match="locked"):
            connection.execute("SET enable_external_access = true")
        # One time zone on every node, whatever the host's.
        assert connection.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
        with pytest.raises(duckdb.Error, match="locked"):
            connection.execute("SET TimeZone = 'Asia/Tokyo'")


def test_an_extension_function_is_not_installed(table: Table) -> None:
    with pytest.raises(InvalidParameterError, match="excel") as raised:
        bind_sql("SELECT A, COUNT(*) FROM D WHERE excel_text(I, '0.0') <> '' GROUP BY A", table)
    assert "\n" not in str(raised.value)


def test_limits_are_validated() -> None:
    with pytest.raises(InvalidParameterError, match="seconds"):
        SqlLimits(seconds=0)
    with pytest.raises(InvalidParameterError, match="memory_limit"):
        SqlLimits(memory_limit="lots")
