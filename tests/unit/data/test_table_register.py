"""Table.register: every kind of column in DuckDB as its values, types and NULLs."""

import datetime
import math
from decimal import Decimal

import duckdb
import numpy as np
import pytest

from dpcomm.data import table as table_module
from dpcomm.data.table import Column, Table, decimal_of

MASK = np.array([False, True, False, False])


def objects(values):
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def every_kind() -> Table:
    return Table(
        "Mixed Case",
        (
            Column("f", "DOUBLE", np.array([1.5, 2.0, np.nan, -0.0]), MASK),
            Column("i", "INTEGER", np.array([1, 0, -(2**31), 2**31 - 1]), MASK),
            Column("u", "UBIGINT", np.array([1, 0, 2**62, 7], dtype=np.uint64), MASK),
            Column("h", "HUGEINT", objects([2**100, 0, -(2**90), 5]), MASK),
            Column("s", "VARCHAR", objects(["a", "", "é🙂", "'q'"]), MASK),
            Column("b", "BOOLEAN", np.array([True, False, False, True]), MASK),
            Column(
                "d",
                "DATE",
                np.array(["2020-01-02", "1970-01-01", "1900-03-04", "9999-12-31"], "datetime64[D]"),
                MASK,
            ),
            Column(
                "ts",
                "TIMESTAMP_S",
                np.array(
                    ["2020-01-02T03:04:05", "1970-01-01", "1969-12-31T23:59:59", "2100-01-01"],
                    "datetime64[s]",
                ),
                MASK,
            ),
            Column(
                "dec",
                "DECIMAL(9,2)",
                objects([decimal_of(v, 2) for v in (1, 5, -250, 99999)]),
                MASK,
            ),
            Column("Iv", "INTERVAL", objects(["1 day", "", "00:00:01", "2 months"]), MASK),
        ),
    )


def test_register_puts_every_kind_of_column_in_duckdb():
    connection = duckdb.connect()
    table = every_kind()
    table.register(connection, "t")
    columns = connection.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 't'"
    ).fetchall()
    assert columns == [(c.name, c.sql_type) for c in table.columns]
    rows = connection.execute("SELECT * FROM t").fetchall()
    assert rows[1] == (None,) * len(table.columns)  # the NULL row
    first, third, fourth = rows[0], rows[2], rows[3]
    assert first == (
        1.5, 1, 1, 2**100, "a", True, datetime.date(2020, 1, 2),
        datetime.datetime(2020, 1, 2, 3, 4, 5), Decimal("0.01"), datetime.timedelta(days=1),
    )  # fmt: skip
    # A float NaN is NULL in DuckDB (as pandas' nullable floats make it); -0.0 stays -0.0.
    assert third[0] is None
    assert fourth[0] == 0.0 and math.copysign(1.0, fourth[0]) == -1.0
    assert third[1:4] == (-(2**31), 2**62, -(2**90))
    assert third[8] == Decimal("-2.50") and str(fourth[8]) == "999.99"
    assert fourth[6] == datetime.date(9999, 12, 31)
    assert third[7] == datetime.datetime(1969, 12, 31, 23, 59, 59)


def test_register_goes_through_arrow_and_through_pandas_for_times(monkeypatch):
    def no_pandas(table):
        raise AssertionError("registered through pandas")

    monkeypatch.setattr(table_module, "_frame", no_pandas)
    connection = duckdb.connect()
    every_kind().register(connection, "t")  # through Arrow: a few times faster
    times = Table("t", (Column("t", "TIME", objects([datetime.time(1, 2, 3)] * 4), MASK),))
    with pytest.raises(AssertionError, match="through pandas"):
        times.register(connection, "times")
    monkeypatch.undo()
    times.register(connection, "times")
    assert connection.execute("SELECT t FROM times").fetchall()[:2] == [
        (datetime.time(1, 2, 3),),
        (None,),
    ]


def test_an_empty_table_registers_its_columns():
    connection = duckdb.connect()
    every_kind().take(np.array([], dtype=np.int64)).register(connection, "empty")
    assert connection.execute("SELECT count(*) FROM empty").fetchall() == [(0,)]
    described = connection.execute("DESCRIBE empty").fetchall()
    assert [(r[0], r[1]) for r in described] == [(c.name, c.sql_type) for c in every_kind().columns]
