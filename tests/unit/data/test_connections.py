"""The thread's DuckDB connection: opened once per thread, dropped after an error."""

import threading
from datetime import date

import duckdb
import numpy as np
import pytest

from dpcomm.data import read_table, result_frame, write_table
from dpcomm.data.connections import thread_connection
from dpcomm.data.table import Column, Table


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the DuckDB databases opened from here on (one entry per ``duckdb.connect``)."""
    with thread_connection() as connection:  # opened before counting, if it was not yet
        connection.execute("SELECT 1").fetchall()
    opened: list[int] = []
    connect = duckdb.connect

    def counted(*args, **kwargs):
        opened.append(1)
        return connect(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counted)
    return opened


def test_a_thread_reuses_its_connection_and_another_thread_has_its_own(connects):
    with thread_connection() as first, thread_connection() as second:
        assert first is second
    others = []

    def use():
        with thread_connection() as connection:
            others.append(connection)

    worker = threading.Thread(target=use)
    worker.start()
    worker.join()
    assert others[0] is not first
    assert len(connects) == 1  # the other thread's


def test_an_error_drops_the_connection(connects):
    with thread_connection() as before:
        pass
    with pytest.raises(duckdb.Error), thread_connection() as connection:
        connection.execute("SELECT * FROM no_such_table")
    with thread_connection() as after:
        assert after is not before
        assert after.execute("SELECT 41 + 1").fetchall() == [(42,)]
    # Any error: one mid-fetch may leave an unfinished result that blocks the connection.
    with pytest.raises(ZeroDivisionError), thread_connection() as connection:
        connection.execute("SELECT * FROM range(10)")
        _ = 1 / 0
    with thread_connection() as last:
        assert last is not after
        assert last.execute("SELECT 1").fetchall() == [(1,)]
    assert len(connects) == 2


def test_result_frames_and_reads_open_no_database_each(connects, tmp_path):
    frame = result_frame([(date(2024, 1, 2), 1), (None, None)], ["day", "n"], ["DATE", "BIGINT"])
    again = result_frame([{"x": "a"}], ["x"], ["VARCHAR"])
    assert [str(t) for t in frame.dtypes] == ["datetime64[us]", "Int64"]
    assert frame["n"].isna().tolist() == [False, True]
    assert again["x"].tolist() == ["a"]
    assert connects == []
    table = Table("t", (Column("a", "BIGINT", np.array([1, 0]), np.array([False, True])),))
    write_table(table, tmp_path / "t.parquet")
    written = len(connects)
    back = read_table(tmp_path / "t.parquet")
    assert back.column("a").is_null.tolist() == [False, True]
    assert len(connects) == written
    # The names the conversions registered are gone: the connection holds no view of them.
    with thread_connection() as connection:
        views = connection.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal")
        assert views.fetchall() == []
