"""A SUM beyond its SQL type (DECIMAL(38, s), HUGEINT) is refused, as DuckDB refuses it.

Sums are exact, so they can exceed 10^38 or 2^127; DuckDB says "Overflow in HUGEINT addition"
and the result could not be a DataFrame (Arrow has no 39-digit DECIMAL): a one-line error
naming the query, in every engine, instead of a traceback when the result is read.
"""

import duckdb
import pytest

import dpcomm
from dpcomm.errors import InvalidParameterError

NINES = "9" * 37  # 10^37 − 1: four of them fit DECIMAL(38, 0), eleven do not


def relation(sql_type: str, value: str, rows: int):
    return duckdb.sql(
        f"SELECT (i % 2) AS g, CAST('{value}' AS {sql_type}) AS v FROM range({rows}) t(i)"
    )


def run(data, sql="SELECT g, SUM(v) FROM t GROUP BY g"):
    return dpcomm.run_sql(sql, data, countermeasure=dpcomm.NoCountermeasure(), num_targets=2,
                          seed=1)  # fmt: skip


@pytest.mark.parametrize(
    ("sql_type", "value"),
    [("DECIMAL(38,0)", NINES), ("DECIMAL(38,2)", "9" * 35 + ".99"), ("HUGEINT", str(2**126))],
)
def test_a_sum_duckdb_refuses_is_refused(sql_type, value):
    data = relation(sql_type, value, 22)  # 11 values per group
    with pytest.raises(duckdb.OutOfRangeException):
        duckdb.sql("SELECT g, SUM(v) FROM data GROUP BY g").fetchall()
    with pytest.raises(InvalidParameterError) as caught:
        run(data)
    assert caught.value.name == "sql"
    assert f"sums that fit their type {sql_type}" in str(caught.value)
    assert "give column v as DOUBLE" in str(caught.value) and "\n" not in str(caught.value)


def test_a_sum_that_fits_is_duckdbs_and_a_cast_sums_beyond():
    fits = relation("DECIMAL(38,0)", NINES, 8)  # 4 per group
    expected = dict(duckdb.sql("SELECT g, SUM(v) FROM fits GROUP BY g").fetchall())
    result = run(fits)
    assert {row["g"]: row["sum(v)"] for row in result.rows} == expected
    assert len(result.result) == 2
    as_double = relation("DECIMAL(38,0)", NINES, 22).project("g, CAST(v AS DOUBLE) AS v")
    assert run(as_double).result["sum(v)"].tolist() == pytest.approx([1.1e38, 1.1e38])
