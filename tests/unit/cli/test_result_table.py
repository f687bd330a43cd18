"""How a result table prints: grouping keys as DuckDB prints them, aggregates as the report."""

from __future__ import annotations

import datetime
from decimal import Decimal

import duckdb
import pytest

from dpcomm.cli.execute import _fmt, _key, _print_rows


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("2007::BIGINT", 2007),
        ("12345678901234::BIGINT", 12345678901234),
        ("-98765::INTEGER", -98765),
        ("170141183460469231731687303715884105727::HUGEINT", 2**127 - 1),
        ("true", True),
        ("false", False),
        ("2.5::DOUBLE", 2.5),
        ("3.0::DOUBLE", 3.0),
        ("1e20::DOUBLE", 1e20),
        ("1e-5::DOUBLE", 1e-5),
        ("123456789.123::DOUBLE", 123456789.123),
        ("'inf'::DOUBLE", float("inf")),
        ("0.1::FLOAT", float.fromhex("0x1.99999ap-4")),  # float32's 0.1, widened
        ("1.50::DECIMAL(9,2)", Decimal("1.50")),
        ("DATE '2007-01-02'", datetime.date(2007, 1, 2)),
        ("'Paris'", "Paris"),
        ("NULL::BIGINT", None),
    ],
)
def test_a_key_prints_as_duckdb_prints_it(sql, value):
    relation = duckdb.sql(f"SELECT {sql} AS k")
    sql_type = str(relation.types[0])
    assert relation.fetchall() == [(value,)]
    # DuckDB's own table shows the value on the fifth line: │ value │
    shown = str(relation).splitlines()[4].strip("│ ")
    assert _key(value, sql_type) == shown


def test_keys_have_no_thousands_separators_and_aggregates_keep_theirs(capsys):
    rows = [
        {"year": 2007, "zip": 75001, "count_star()": 12345, "avg(x)": 1234.5},
        {"year": None, "zip": 10115, "count_star()": 7, "avg(x)": 0.25},
    ]
    _print_rows(rows, 10, {"year": "BIGINT", "zip": "INTEGER"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["year", "zip", "count_star()", "avg(x)"]
    assert lines[1].split() == ["2007", "75001", "12,345", "1234.5000"]
    assert lines[2].split() == ["NULL", "10115", "7", "0.2500"]


def test_without_keys_every_column_prints_as_the_report(capsys):
    _print_rows([{"k": 2007}], 10)
    assert capsys.readouterr().out.split() == ["k", _fmt(2007)] == ["k", "2,007"]
