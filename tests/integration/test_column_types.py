"""Every column type DuckDB reads: exact values in both engines, or a one-line refusal.

Each table is made by DuckDB itself (SQL literals, or a file DuckDB reads back), the query's
answer is DuckDB's own on that table, and the engines' results must be the same values of the
same Python types (DECIMAL with the same scale), floats only for AVG (a DOUBLE) within 1e-12.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from tests.conftest import same, without_grouping_set

from dpcomm.data import Table, read_table, table_from_relation
from dpcomm.engine.memory import simulate
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import NoCountermeasure, Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import key_order, reference_result

DELTA = 1e-4
SEED = 77
UBIGINT_MAX = 18446744073709551615
#: Two 21-digit ids (HUGEINT in a CSV) that differ only in their last digit.
ID_A, ID_B = 123456789012345678901, 123456789012345678902

#: One table with every exactly supported type (and NULLs), plus columns of refused types.
ALL_TYPES = r"""
SELECT * FROM (VALUES
  (123456789012345678901::HUGEINT, 18446744073709551615::UBIGINT,
   340282366920938463463374607431768211455::UHUGEINT, 0.01::DECIMAL(18,2),
   1234567890123456789012345678.0123456789::DECIMAL(38,10), 7::TINYINT, 1.5::FLOAT,
   DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05.123456', TIMESTAMP_MS '2024-01-02 03:04:05.5',
   TIMESTAMP_S '2024-01-02 03:04:05', TIME '01:02:03.25', true, 'été',
   '\xAB'::BLOB, [1, 2], {'a': 1}, MAP {'k': 1}, INTERVAL 3 DAY,
   TIMESTAMP_NS '2024-01-02 03:04:05.123456789'),
  (123456789012345678902::HUGEINT, 18446744073709551614::UBIGINT, 1::UHUGEINT, 0.02::DECIMAL(18,2),
   (-0.0000000001)::DECIMAL(38,10), (-128)::TINYINT, -2.25::FLOAT,
   DATE '2024-01-03', TIMESTAMP '1969-12-31 23:59:59.999999', NULL,
   NULL, TIME '23:59:59.999999', false, '',
   NULL, [], NULL, NULL, NULL, NULL),
  (123456789012345678901::HUGEINT, 1::UBIGINT, NULL, 1234567890123456.78::DECIMAL(18,2),
   NULL, NULL, NULL,
   DATE '2024-01-02', NULL, TIMESTAMP_MS '2024-01-02 03:04:05.5',
   TIMESTAMP_S '2024-01-02 03:04:05', NULL, NULL, 'été',
   '\x00'::BLOB, [3], {'a': 2}, MAP {}, INTERVAL 1 SECOND, NULL),
  (NULL, 18446744073709551615::UBIGINT, 2::UHUGEINT, 0.01::DECIMAL(18,2),
   1234567890123456789012345678.0123456789::DECIMAL(38,10), 7::TINYINT, 1.5::FLOAT,
   NULL, TIMESTAMP '2024-01-02 03:04:05.123456', NULL,
   NULL, TIME '01:02:03.25', true, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL)
) v(h, u, uh, cents, d38, ti, fl, day, ts, tms, tss, tm, flag, txt,
    b, tags, st, mp, iv, tns)
"""
REFUSED = {
    "b": "BLOB",
    "tags": "INTEGER[]",
    "st": "STRUCT(a INTEGER)",
    "mp": "MAP(VARCHAR, INTEGER)",
    "iv": "INTERVAL",
    "tns": "TIMESTAMP_NS",
}
#: (query, whether its answer holds an AVG column) per exactly supported type.
QUERIES = {
    "hugeint": "SELECT h, COUNT(*), SUM(h), MIN(h), MAX(h), AVG(h) FROM t GROUP BY h",
    "ubigint": "SELECT u, COUNT(u), SUM(u), MIN(u), MAX(u), AVG(u) FROM t GROUP BY u",
    "uhugeint": "SELECT flag, SUM(uh), MIN(uh), MAX(uh) FROM t GROUP BY flag",
    "decimal(18,2)": "SELECT cents, COUNT(*), SUM(cents), MIN(cents), MAX(cents), AVG(cents) "
    "FROM t GROUP BY cents",
    "decimal(38,10)": "SELECT d38, SUM(d38), MIN(d38), MAX(d38), AVG(d38) FROM t "
    "GROUP BY GROUPING SETS ((d38), ())",
    "tinyint, float": "SELECT ti, SUM(fl), MIN(fl), MAX(ti), SUM(ti) FROM t GROUP BY ti",
    "date": "SELECT day, COUNT(*), SUM(cents) FROM t GROUP BY day",
    "timestamp": "SELECT ts, tms, tss, COUNT(*) FROM t GROUP BY ROLLUP (ts, tms, tss)",
    "time, boolean, text": "SELECT tm, flag, txt, COUNT(*) FROM t GROUP BY CUBE (tm, flag, txt)",
}
#: Every exactly supported column in one query (one deployed round carries them all).
EVERYTHING = (
    "SELECT h, u, day, ts, tm, txt, COUNT(*), SUM(uh), SUM(cents), MIN(d38), MAX(d38), "
    "SUM(d38), AVG(cents), SUM(ti), MIN(fl) "
    "FROM t GROUP BY GROUPING SETS ((h, day), (u, ts), (tm, txt), ())"
)


#: AVG's floats (DOUBLEs) are the same within this relative tolerance; every other value exactly.
AVG_TOLERANCE = 1e-12


def duckdb_table(create: str, sql: str) -> tuple[Table, list[dict[str, Any]]]:
    """Table ``t`` made by DuckDB from ``create``, and DuckDB's own answer to ``sql``."""
    connection = duckdb.connect()
    try:
        connection.execute(f"CREATE TABLE t AS {create}")
        table = table_from_relation(connection.table("t"), "t")
        cursor = connection.execute(sql)
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        connection.close()
    return table, rows


def differences(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[str]:
    """Rows that differ (both sorted by their values, NULLs last); empty when they agree."""
    found = []
    mine, theirs = without_grouping_set(mine), without_grouping_set(theirs)
    if len(mine) != len(theirs):
        found.append(f"{len(mine)} rows against {len(theirs)}")
    ordered = [
        sorted(rows, key=lambda row: key_order(tuple(row.values()))) for rows in (mine, theirs)
    ]
    for left, right in zip(*ordered, strict=False):
        if list(left) != list(right):
            found.append(f"columns {list(left)} against {list(right)}")
            continue
        for name in left:
            tolerance = AVG_TOLERANCE if name.lower().startswith("avg") else 0.0
            if not same(left[name], right[name], rel_tol=tolerance):
                found.append(f"{name}: {left[name]!r} against {right[name]!r}")
    return found


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_memory_engine_gives_duckdbs_exact_values(case):
    table, expected = duckdb_table(ALL_TYPES, QUERIES[case])
    program = AggregateProgram.from_sql(QUERIES[case], table, num_targets=3)
    run = simulate(program, NoCountermeasure(), delta=DELTA, seed=SEED)
    assert differences(run.result, expected) == []
    # A private run is DuckDB's answer over the tuples it delivered.
    private = simulate(
        program, Scramblers(sampling_rate=0.5, batch_size=4, num_dummies=1), delta=DELTA, seed=SEED
    )
    masks = [private.delivered[flow] for flow in program.flow_names]
    reference = reference_result(program.query, program.table, masks)
    assert differences(private.result, reference) == []


def test_values_are_held_exactly():
    table, _ = duckdb_table(ALL_TYPES, "SELECT 1")
    assert table.column("h").values.tolist()[:3] == [ID_A, ID_B, ID_A]
    assert table.column("u").values.tolist()[0] == UBIGINT_MAX
    assert table.column("uh").values.tolist()[0] == 2**128 - 1
    assert [str(v) for v in table.column("cents").values.tolist()[:3]] == [
        "0.01",
        "0.02",
        "1234567890123456.78",
    ]
    assert str(table.column("d38").values[0]) == "1234567890123456789012345678.0123456789"
    assert table.column("day").values.tolist()[0] == datetime.date(2024, 1, 2)
    assert table.column("tm").values.tolist()[0] == datetime.time(1, 2, 3, 250000)
    assert table.column("ti").values.dtype == np.int64


def test_hugeint_ids_of_a_csv_stay_two_groups(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text(f"id,amount\n{ID_A},1\n{ID_B},2\n{ID_A},4\n")
    sql = "SELECT id, COUNT(*), SUM(amount), MAX(id) FROM t GROUP BY id"
    table = read_table(path, name="t")
    assert table.column("id").sql_type == "HUGEINT"
    expected = duckdb.sql(
        f"SELECT id, COUNT(*), SUM(amount), MAX(id) FROM read_csv('{path}') AS t GROUP BY id"
    ).fetchall()
    program = AggregateProgram.from_sql(sql, table, num_targets=2)
    result = simulate(program, NoCountermeasure(), delta=DELTA, seed=SEED).result
    names = list(program.query.output_names)
    assert differences(result, [dict(zip(names, r, strict=True)) for r in expected]) == []
    assert sorted(row["id"] for row in result) == [ID_A, ID_B]


@pytest.mark.parametrize("suffix", [".csv.gz", ".csv.zst", ".tsv", ".parquet"])
def test_files_duckdb_reads_are_read(tmp_path, suffix):
    path = tmp_path / f"cents{suffix}"
    options = {
        ".csv.gz": "FORMAT CSV, HEADER, COMPRESSION gzip",
        ".csv.zst": "FORMAT CSV, HEADER, COMPRESSION zstd",
        ".tsv": "FORMAT CSV, HEADER, DELIMITER '\t'",
        ".parquet": "FORMAT PARQUET",
    }[suffix]
    duckdb.execute(
        "COPY (SELECT * FROM (VALUES (0.01::DECIMAL(18,2), 1), (0.02, 2)) v(d, k)) "
        f"TO '{path}' ({options})"
    )
    table = read_table(path)
    assert table.num_rows == 2
    expected = duckdb.sql(f"SELECT * FROM '{path}'").fetchall()
    assert [tuple(c.values.tolist()[i] for c in table.columns) for i in range(2)] == expected


@pytest.mark.parametrize("column", sorted(REFUSED))
def test_a_query_reading_an_unsupported_column_is_refused(column):
    table, _ = duckdb_table(ALL_TYPES, "SELECT 1")
    assert table.column(column).sql_type == REFUSED[column]
    sql = f"SELECT {column}, COUNT(*) FROM t GROUP BY {column}"
    with pytest.raises(InvalidParameterError) as caught:
        AggregateProgram.from_sql(sql, table)
    message = str(caught.value)
    assert f'column "{column}"' in message and repr(REFUSED[column]) in message
    assert "integer, decimal, floating-point, boolean, text, date, time, timestamp" in message
    assert "\n" not in message


def test_count_min_and_max_of_a_column_no_source_carries_are_exact():
    """Each source carries such a value as text behind its sort key (LIST, MAP, BLOB, ...)."""
    columns = sorted(REFUSED)
    sql = (
        "SELECT flag, "
        + ", ".join(f"COUNT({c}), MIN({c}), MAX({c})" for c in columns)
        + " FROM t GROUP BY flag"
    )
    table, expected = duckdb_table(ALL_TYPES, sql)
    program = AggregateProgram.from_sql(sql, table, num_targets=2)
    assert not differences(program.nonprivate_result(), expected)


def test_timestamptz_is_refused_too():
    table, _ = duckdb_table("SELECT TIMESTAMPTZ '2024-01-02 03:04:05+00' AS z, 1 AS k", "SELECT 1")
    with pytest.raises(InvalidParameterError, match=r'column "z".*TIMESTAMP WITH TIME ZONE'):
        AggregateProgram.from_sql("SELECT z, COUNT(*) FROM t GROUP BY z", table)
    # The column is not read: the query runs.
    program = AggregateProgram.from_sql("SELECT k, COUNT(*) FROM t GROUP BY k", table)
    assert program.nonprivate_result() == [{"k": 1, "count_star()": 1}]


def test_both_engines_carry_every_exact_type_in_one_round():
    """The network engine (nodes exchanging encoded tuples) against the memory engine."""
    table, expected = duckdb_table(ALL_TYPES, EVERYTHING)
    program = AggregateProgram.from_sql(EVERYTHING, table, num_targets=3)
    network = NetworkEngine(transport="memory", timeout=60, idle_seconds=5)
    for countermeasure in (
        NoCountermeasure(),
        Scramblers(sampling_rate=0.0, batch_size=4, num_dummies=2),
    ):
        memory_run = simulate(program, countermeasure, delta=DELTA, seed=SEED)
        network_run = network.execute(program, countermeasure, delta=DELTA, seed=SEED)
        assert network_run.details.errors == {}
        assert differences(memory_run.result, expected) == []
        assert differences(network_run.result, expected) == []
        assert differences(network_run.result, memory_run.result) == []


def dpcomm(*args: str) -> subprocess.CompletedProcess[str]:
    """``dpcomm ARGS`` in a process of its own (a network run starts real processes: its
    launcher is run as the console script runs it); every other command runs in process
    (the suite's ``cli`` fixture: the same output, without importing dpcomm anew)."""
    code = "import sys; from dpcomm.cli.main import main; sys.argv[0] = 'dpcomm'; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def all_types_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("types") / "all.parquet"
    connection = duckdb.connect()
    connection.execute(f"CREATE TABLE t AS {ALL_TYPES}")
    # Parquet has no HUGEINT, UHUGEINT or INTERVAL columns of its own: keep the others.
    connection.execute(f"COPY (SELECT * EXCLUDE (h, uh, iv) FROM t) TO '{path}' (FORMAT PARQUET)")
    connection.close()
    return path


def test_a_network_run_prints_duckdbs_values(all_types_file, cli):
    """One real deployment (TLS between processes) of a table with every exact type."""
    sql = (
        "SELECT u, day, tm, COUNT(*), SUM(cents), MAX(d38), SUM(u) FROM t "
        "GROUP BY GROUPING SETS ((u), (day, tm))"
    )
    args = ["--data", str(all_types_file), "--sql", sql, "--mechanism", "none", "--seed", "1"]
    deployed = dpcomm("run", "aggregate", *args, "--targets", "2", "--engine", "network")
    assert deployed.returncode == 0, deployed.stderr
    ran = cli("run", "aggregate", *args, "--targets", "2")
    assert ran.status == 0, ran.err
    for output in (deployed.stdout, ran.out):
        assert "18,446,744,073,709,551,615" in output  # UBIGINT's maximum, not -1
        assert "36,893,488,147,419,103,230" in output  # its sum over two rows
        assert " 2024-01-02 " in output and "00:00:00" not in output  # DATE keys as dates
        assert "1234567890123456.78" in output  # cents kept
        assert "1234567890123456789012345678.0123456789" in output
        assert " 01:02:03.25 " in output  # TIME as DuckDB prints it
        assert " -0.0000000001 " in output  # DECIMAL as DuckDB prints it, not -1E-10
    result = deployed.stdout.split("Result", 1)[1].split("Privacy", 1)[0]
    assert result == ran.out.split("Result", 1)[1].split("Privacy", 1)[0]


def test_cli_refuses_an_unsupported_column_in_one_line(all_types_file, cli):
    sql = "SELECT tags, COUNT(*) FROM t GROUP BY tags"
    completed = cli("run", "aggregate", "--data", str(all_types_file), "--sql", sql)
    assert completed.status == 2
    lines = completed.err.strip().splitlines()
    assert len(lines) == 1 and 'column "tags"' in lines[0] and "INTEGER[]" in lines[0]


def test_json_tells_nan_and_infinities_from_null(tmp_path, cli):
    path = tmp_path / "floats.parquet"
    duckdb.execute(
        "COPY (SELECT * FROM (VALUES ('a', '-inf'::DOUBLE), ('b', 'nan'::DOUBLE), ('c', NULL), "
        f"('d', 'inf'::DOUBLE), ('e', 0.01::DECIMAL(18,2))) v(k, x)) TO '{path}' (FORMAT PARQUET)"
    )
    args = ["--data", str(path), "--sql", "SELECT k, MIN(x) FROM t GROUP BY k"]
    args += ["--mechanism", "none", "--seed", "1"]
    text = cli("run", "aggregate", *args)
    assert text.status == 0, text.err
    rows = {line.split()[0]: line.split()[1] for line in text.out.splitlines()[6:11]}
    assert rows == {"a": "-inf", "b": "nan", "c": "NULL", "d": "inf", "e": "0.0100"}
    document = json.loads(cli("run", "aggregate", *args, "--json").out)
    values = {row["k"]: row["min(x)"] for row in document["result"]}
    assert values == {"a": "-inf", "b": "NaN", "c": None, "d": "inf", "e": 0.01}


def test_json_writes_exact_values(all_types_file, cli):
    sql = "SELECT flag, SUM(cents), MAX(d38), MAX(u), tm FROM t GROUP BY flag, tm"
    completed = cli(
        "run", "aggregate", "--data", str(all_types_file), "--sql", sql,
        "--mechanism", "none", "--seed", "1", "--json",
    )  # fmt: skip
    assert completed.status == 0, completed.err
    rows = json.loads(completed.out)["result"]
    assert rows == [
        {
            "flag": False,
            "sum(cents)": "0.02",
            "max(d38)": "-0.0000000001",
            "max(u)": UBIGINT_MAX - 1,
            "tm": "23:59:59.999999",
        },
        {
            "flag": True,
            "sum(cents)": "0.02",
            "max(d38)": "1234567890123456789012345678.0123456789",
            "max(u)": UBIGINT_MAX,
            "tm": "01:02:03.250000",
        },
        {
            "flag": None,
            "sum(cents)": "1234567890123456.78",
            "max(d38)": None,
            "max(u)": 1,
            "tm": None,
        },
    ]


def test_run_reads_hugeint_ids_from_a_gzipped_csv(tmp_path, cli):
    path = tmp_path / "ids.csv.gz"
    duckdb.execute(
        f"COPY (SELECT * FROM (VALUES ({ID_A}::HUGEINT, 1), ({ID_B}::HUGEINT, 2), "
        f"({ID_A}::HUGEINT, 4)) v(id, amount)) TO '{path}' (FORMAT CSV, HEADER)"
    )
    sql = "SELECT id, COUNT(*), SUM(amount) FROM t GROUP BY id"
    completed = cli(
        "run", "aggregate", "--data", str(path), "--sql", sql, "--mechanism", "none", "--json"
    )
    assert completed.status == 0, completed.err
    rows = json.loads(completed.out)["result"]
    assert rows == [
        {"id": ID_A, "count_star()": 2, "sum(amount)": 5},
        {"id": ID_B, "count_star()": 1, "sum(amount)": 2},
    ]
