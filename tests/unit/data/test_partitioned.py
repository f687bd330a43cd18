"""Row sources: any range of a table's rows, read alone, is those rows of the whole table."""

import functools
import itertools
import os
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.conftest import assert_same_table as same_table

from dpcomm.data import (
    InMemoryRows,
    ParquetRows,
    RowSource,
    SyntheticRows,
    Table,
    concat_tables,
    read_table,
    synthetic,
    synthetic_table,
    table_from_arrays,
)
from dpcomm.data.synthetic import BLOCK_ROWS
from dpcomm.errors import DpcommError, InvalidParameterError

#: The tables' own names are compared too.
assert_same_table = functools.partial(same_table, names=True)


def split_reads(source: RowSource, bounds: list[int], columns=None) -> Table:
    return concat_tables([source.read(a, b, columns) for a, b in itertools.pairwise(bounds)])


# ---------------------------------------------------------------- the protocol and its checks


def test_every_source_is_a_row_source():
    table = synthetic_table(num_rows=5, seed=0)
    assert isinstance(InMemoryRows(table), RowSource)
    assert isinstance(SyntheticRows(5, seed=0), RowSource)
    assert not isinstance(table, RowSource)


def sources(tmp_path):
    table = synthetic_table(num_rows=10, seed=1, name="t")
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({c.name: c.values for c in table.columns}), path, row_group_size=3)
    return [InMemoryRows(table), SyntheticRows(10, seed=1, name="t"), ParquetRows(path, name="t")]


@pytest.mark.parametrize(
    ("start", "stop", "name"),
    [
        (-1, 3, "start"),
        (11, 11, "start"),
        (True, 3, "start"),
        (1.0, 3, "start"),
        (4, 3, "stop"),
        (0, 11, "stop"),
        (0, None, "stop"),
        (0, np.int64(11), "stop"),
    ],
)
def test_ranges_out_of_bounds_are_refused(tmp_path, start, stop, name):
    for source in sources(tmp_path):
        with pytest.raises(InvalidParameterError) as caught:
            source.read(start, stop)
        assert caught.value.name == name
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("columns", "shown"), [(["g1", "nope"], "nope"), ("g1", "g1"), ([3], 3)])
def test_unknown_columns_are_refused(tmp_path, columns, shown):
    for source in sources(tmp_path):
        with pytest.raises(InvalidParameterError) as caught:
            source.read(0, 3, columns)
        assert caught.value.name == "columns"
        assert caught.value.given == shown
        assert "\n" not in str(caught.value)


def test_columns_are_matched_case_insensitively_and_kept_in_table_order(tmp_path):
    for source in sources(tmp_path):
        whole = source.read(0, 10)
        part = source.read(2, 7, ["M1", "g3", "G1", "g1"])
        assert part.column_names == ("g1", "g3", "m1")
        assert_same_table(part, whole.select(["g1", "g3", "m1"]).slice(2, 7))
        none = source.read(2, 7, [])
        assert none.columns == () and none.num_rows == 5
        empty = source.read(4, 4, ["m2"])
        assert empty.num_rows == 0 and empty.column("m2").sql_type == "DOUBLE"
        assert source.read(0, 0).column_names == whole.column_names
        schema = source.schema()
        assert schema.num_rows == 1 and schema.name == "t"
        assert_same_table(schema, whole.slice(0, 1))


def test_numpy_integers_are_accepted_as_bounds(tmp_path):
    for source in sources(tmp_path):
        assert source.read(np.int64(3), np.uint8(5)).num_rows == 2


# ---------------------------------------------------------------- in memory


def test_in_memory_rows_are_views_of_the_table():
    table = synthetic_table(num_rows=100, seed=2, name="t")
    source = InMemoryRows(table)
    assert (source.name, source.num_rows) == ("t", 100)
    part = source.read(10, 30)
    assert_same_table(part, table.take(np.arange(10, 30)))
    assert np.shares_memory(part.column("g1").values, table.column("g1").values)
    assert_same_table(split_reads(source, [0, 1, 50, 99, 100]), table)


def test_in_memory_rows_of_a_table_without_rows_keep_its_columns():
    table = synthetic_table(num_rows=3, seed=0)
    source = InMemoryRows(table.take(np.arange(0)))
    assert source.num_rows == 0
    for read in (source.schema(), source.read(0, 0)):
        assert read.num_rows == 0
        assert [(c.name, c.sql_type) for c in read.columns] == [
            (c.name, c.sql_type) for c in table.columns
        ]
    with pytest.raises(InvalidParameterError, match="stop"):
        source.read(0, 1)


def test_table_slice_and_concat():
    table = table_from_arrays("t", {"a": np.arange(5), "b": np.array(list("abcde"), object)})
    assert table.slice(1, 3).column("b").values.tolist() == ["b", "c"]
    assert table.slice(4, 10).num_rows == 1
    no_columns = Table("t", (), rows=7)
    assert no_columns.slice(2, 5).num_rows == 3
    assert concat_tables([no_columns, no_columns.slice(0, 2)]).num_rows == 9
    assert_same_table(concat_tables([table.slice(0, 2), table.slice(2, 5)]), table)
    with pytest.raises(InvalidParameterError, match="invalid tables"):
        concat_tables([table, table.select(["a"])])
    with pytest.raises(InvalidParameterError, match="invalid tables"):
        concat_tables([])


# ---------------------------------------------------------------- synthetic


@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_synthetic_ranges_are_rows_of_the_whole_table(distribution):
    rows = 2 * BLOCK_ROWS + 1000
    source = SyntheticRows(rows, seed=9, distribution=distribution, num_measures=3)
    whole = source.read(0, rows)
    assert whole.column_names == ("g1", "g2", "g3", "g4", "m1", "m2", "m3")
    edges = [0, 1, BLOCK_ROWS - 1, BLOCK_ROWS, BLOCK_ROWS + 1, 2 * BLOCK_ROWS, rows - 1, rows]
    for start, stop in [(a, b) for a in edges for b in edges if a <= b]:
        assert_same_table(source.read(start, stop), whole.slice(start, stop))
    assert_same_table(split_reads(source, [0, 7, 70_000, 70_001, rows]), whole)
    assert_same_table(
        split_reads(source, [0, BLOCK_ROWS, rows], ["m3", "g2"]), whole.select(["g2", "m3"])
    )


@pytest.mark.parametrize("distribution", ["uniform", "zipf"])
def test_synthetic_table_is_the_row_source_read_whole(distribution):
    kwargs = {
        "distribution": distribution,
        "num_grouping_columns": 2,
        "num_intervals": 7,
        "num_measures": 3,
        "zipf_exponent": 2.0,
        "name": "t",
    }
    table = synthetic_table(num_rows=BLOCK_ROWS + 5, seed=4, **kwargs)
    assert_same_table(
        table, SyntheticRows(BLOCK_ROWS + 5, seed=4, **kwargs).read(0, BLOCK_ROWS + 5)
    )


def test_synthetic_table_from_a_generator_draws_its_seed_first():
    drawn = int(np.random.default_rng(5).integers(1 << 63))
    assert_same_table(
        synthetic_table(num_rows=100, seed=np.random.default_rng(5)),
        synthetic_table(num_rows=100, seed=drawn),
    )
    a, b = synthetic_table(num_rows=100, seed=None), synthetic_table(num_rows=100, seed=None)
    assert not np.array_equal(a.column("m1").values, b.column("m1").values)


def test_synthetic_values_are_pinned():
    """The table of a seed: a change here changes every figure drawn from synthetic data."""
    table = synthetic_table(num_rows=BLOCK_ROWS + 3, seed=0)
    assert table.column("g1").values[:6].tolist() == [9, 18, 19, 8, 2, 13]
    assert table.column("g4").values[-3:].tolist() == [13, 2, 19]
    assert np.round(table.column("m1").values[:3], 6).tolist() == [60.328531, 115.41641, 112.845923]
    assert np.round(table.column("m2").values[-2:], 6).tolist() == [72.198708, 29.153757]
    zipf = synthetic_table(num_rows=5, seed=0, distribution="zipf")
    assert zipf.column("g2").values.tolist() == [5, 9, 0, 9, 9]


def test_synthetic_reads_draw_only_the_blocks_they_overlap(monkeypatch):
    drawn = []
    original = synthetic.block_generator

    def recording(seed, block):
        drawn.append(block)
        return original(seed, block)

    monkeypatch.setattr(synthetic, "block_generator", recording)
    source = SyntheticRows(10**12, seed=3)  # no size limit: only the read range is drawn
    part = source.read(10**12 - 5, 10**12)
    assert part.num_rows == 5 and drawn == [(10**12 - 1) // BLOCK_ROWS]
    drawn.clear()
    source.read(BLOCK_ROWS - 1, 3 * BLOCK_ROWS)
    assert drawn == [0, 1, 2]
    drawn.clear()
    source.read(BLOCK_ROWS, BLOCK_ROWS)
    assert drawn == []


def test_one_synthetic_read_is_limited_like_a_synthetic_table(monkeypatch):
    monkeypatch.setattr(synthetic, "MAX_SYNTHETIC_VALUES", 600)  # 100 rows of 6 columns
    source = SyntheticRows(1000, seed=0)
    assert source.read(900, 1000).num_rows == 100
    with pytest.raises(InvalidParameterError) as caught:
        source.read(0, 101)
    assert caught.value.name == "stop"
    with pytest.raises(InvalidParameterError) as caught:
        synthetic_table(num_rows=101, seed=0)
    assert caught.value.name == "rows"


def test_synthetic_rows_are_small_and_picklable():
    source = SyntheticRows(10**9, seed=12, distribution="zipf", name="big")
    data = pickle.dumps(source)
    assert len(data) < 1000
    again = pickle.loads(data)
    assert again == source
    assert_same_table(again.read(5 * 10**8, 5 * 10**8 + 10), source.read(5 * 10**8, 5 * 10**8 + 10))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_rows": 0}, "num_rows"),
        ({"num_rows": True}, "num_rows"),
        ({"num_rows": 2.0}, "num_rows"),
        ({"seed": -1}, "seed"),
        ({"seed": None}, "seed"),
        ({"seed": np.random.default_rng(0)}, "seed"),
        ({"distribution": "normal"}, "distribution"),
        ({"num_measures": -1}, "num_measures"),
        ({"zipf_exponent": float("inf")}, "zipf_exponent"),
    ],
)
def test_synthetic_rows_reject_bad_parameters(kwargs, name):
    arguments = {"num_rows": 10, "seed": 0, **kwargs}
    rows = arguments.pop("num_rows")
    with pytest.raises(InvalidParameterError) as caught:
        SyntheticRows(rows, **arguments)
    assert caught.value.name == name


# ---------------------------------------------------------------- Parquet

#: Every DuckDB type DuckDB writes to Parquet with its logical type (INTERVAL, UUID, TIME,
#: timestamps of every unit, ENUM), NULLs in every column, over three row groups.
DUCKDB_TYPES = r"""
COPY (SELECT v.*, r FROM (VALUES
  (18446744073709551615::UBIGINT, 0.01::DECIMAL(18,2),
   1234567890123456789012345678.0123456789::DECIMAL(38,10), 7::TINYINT, 1.5::FLOAT,
   DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05.123456', TIMESTAMP_MS '2024-01-02 03:04:05.5',
   TIMESTAMP_S '1969-12-31 23:59:59', TIME '01:02:03.25', true, 'été', '\xAB'::BLOB, [1, 2],
   {'a': 1}, MAP {'k': 1}, INTERVAL 3 DAY, TIMESTAMP_NS '2024-01-02 03:04:05.123456789',
   TIMESTAMPTZ '2024-01-02 03:04:05+00', 5::UTINYINT, 'a'::ENUM('a', 'b'), 1.5::DECIMAL(4,1),
   'b4a7c1f6-5a2c-4e7e-9d3c-0f1e2d3c4b5a'::UUID),
  (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, INTERVAL '1 month 2 days 3.5 seconds', NULL, NULL, NULL, NULL, NULL, NULL)
) v(u, cents, d38, ti, fl, day, ts, tms, tss, tm, flag, "Été ", b, tags, st, mp, iv, tns, tstz,
    ut, en, d4, id), range(2500) t(r)) TO '{path}' (FORMAT PARQUET, ROW_GROUP_SIZE 2048)
"""


def pyarrow_types() -> pa.Table:
    """Arrow types pyarrow restores from its stored schema, which DuckDB reads otherwise."""
    columns = {
        "large text": pa.array(["x", None, "yy"], pa.large_string()),
        "dictionary": pa.array(["a", "b", None]).dictionary_encode(),
        "duration": pa.array([1, -2, None], pa.duration("ms")),
        "paris": pa.array([1, -2, None], pa.timestamp("ms", tz="Europe/Paris")),
        "nanos": pa.array([1, -2, None], pa.timestamp("ns")),
        "seconds": pa.array([1, -2, None], pa.timestamp("s")),
        "half": pa.array(np.array([1.5, -2, 65504], dtype=np.float16)),
        "date64": pa.array([0, 86_400_000, None], pa.date64()),
        "time32": pa.array([1, 2, None], pa.time32("s")),
        "fixed": pa.array([b"ab", None, b"cd"], pa.binary(2)),
        "u64": pa.array([1, 2**64 - 1, None], pa.uint64()),
        "nothing": pa.array([None, None, None], pa.null()),
        "wide": pa.array([Decimal("1.5"), None, Decimal("-2.25")], pa.decimal256(40, 2)),
        "wide20": pa.array([Decimal("1.5"), None, Decimal("-2.25")], pa.decimal256(20, 2)),
        "view": pa.array(["a", None, "b"], pa.string_view()),
        "A": pa.array([1, 2, 3]),
        "a.b": pa.array([4, 5, 6]),
        "a": pa.array([{"b": 1}, None, {"b": 3}]),
    }
    return pa.table({name: pa.concat_arrays([array] * 7) for name, array in columns.items()})


def check_splits(path, **kwargs) -> Table:
    whole = read_table(path)
    source = ParquetRows(path)
    assert source.num_rows == whole.num_rows
    assert source.column_names == whole.column_names
    assert_same_table(source.read(0, source.num_rows), whole)
    rows = source.num_rows
    for pieces in (2, 3, 7):
        bounds = np.linspace(0, rows, pieces + 1).astype(int).tolist()
        assert_same_table(split_reads(source, bounds), whole)
    assert_same_table(split_reads(source, [0, 1, 2, rows - 1, rows]), whole)
    return whole


def test_parquet_of_duckdb_types_reads_as_read_table(tmp_path):
    path = tmp_path / "duck.parquet"
    duckdb.sql(DUCKDB_TYPES.replace("{path}", str(path)))
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    whole = check_splits(path)
    assert whole.column("iv").sql_type == "INTERVAL" and whole.column("id").sql_type == "UUID"
    assert whole.column("tms").sql_type == "TIMESTAMP"


@pytest.mark.parametrize("int96", [False, True])
def test_parquet_of_arrow_types_reads_as_read_table(tmp_path, int96):
    path = tmp_path / "arrow.parquet"
    pq.write_table(pyarrow_types(), path, row_group_size=4, use_deprecated_int96_timestamps=int96)
    whole = check_splits(path)
    types = dict(zip(whole.column_names, (c.sql_type for c in whole.columns), strict=True))
    assert types["duration"] == "BIGINT" and types["half"] == "FLOAT"
    assert types["wide"] == "DOUBLE" and types["wide20"] == "DECIMAL(20,2)"
    assert types["a_1"] == "STRUCT(b BIGINT)"  # DuckDB's name for the second "a"
    assert types["seconds"] == "TIMESTAMP"
    source = ParquetRows(path)
    assert source.read(3, 9, ["A.B"]).column("a.b").values.tolist() == [4, 5, 6, 4, 5, 6]


#: Run in a process whose time zone is set by TZ (DuckDB reads it when it starts): one line
#: per file (argv[3:]).
ZONED_CHECK = """
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]  # this folder, and the repository (tests.conftest)
from pathlib import Path
from test_partitioned import check_splits
for path in sys.argv[3:]:
    whole = check_splits(Path(path))
    print(",".join(f"{c.name}:{c.sql_type}" for c in whole.columns if "TIMESTAMP" in c.sql_type))
"""


#: A file written by pyarrow 0.7.1 (shipped with pyarrow's tests), whose zoned timestamps
#: pyarrow reads as timestamp[us, tz=UTC] and DuckDB as TIMESTAMP.
OLD_ZONED = Path(pa.__file__).parent / "tests/data/parquet/v0.7.1.column-metadata-handling.parquet"


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "America/New_York"])
def test_time_zones_do_not_shift_timestamps(tmp_path, zone):
    """Zoned Arrow timestamps, as TIMESTAMP and TIMESTAMPTZ, under non-UTC session zones.

    A file of our own (TIMESTAMPTZ) and pyarrow's old file (TIMESTAMP), both checked in the one
    process the zone needs (a process each would cost a second of imports each).
    """
    path = tmp_path / "zoned.parquet"
    instants = pa.array([0, -1_500_000, None, 1_700_000_000_000], pa.timestamp("ms", tz="UTC"))
    pq.write_table(pa.table({"t": instants}), path, row_group_size=1)
    paths = [path, *([OLD_ZONED] if OLD_ZONED.is_file() else [])]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            ZONED_CHECK,
            str(Path(__file__).parent),
            str(Path(__file__).parents[3]),
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": zone},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    expected = [["t:TIMESTAMP WITH TIME ZONE"], ["c:TIMESTAMP", "__index_level_1__:TIMESTAMP"]]
    assert [line.split(",") for line in done.stdout.strip().splitlines()] == expected[: len(paths)]
    if not OLD_ZONED.is_file():
        pytest.skip(f"pyarrow does not ship {OLD_ZONED.name}: only our own file was checked")


def write_directory(tmp_path, table: pa.Table) -> tuple:
    """``table`` split over files of a directory tree, in the order of their relative paths."""
    root = tmp_path / "parts"
    (root / "b").mkdir(parents=True)
    (root / "a").mkdir()
    layout = [
        ("a/x.parquet", 0, 5),
        ("a/y.PARQUET", 5, 5),
        ("b/0.parquet", 5, 20),
        ("c.parquet", 20, None),
    ]
    for name, start, stop in layout:
        rows = table.slice(start, (stop if stop is not None else table.num_rows) - start)
        pq.write_table(rows, root / name, row_group_size=3)
    (root / "notes.txt").write_text("not Parquet")
    (root / "a" / "x.parquet.crc").write_text("not Parquet either")
    return root, [root / name for name, _, _ in layout]


def test_a_directory_reads_its_files_in_path_order(tmp_path):
    data = pa.table({"i": np.arange(40), "s": [f"row {i}" if i % 3 else None for i in range(40)]})
    root, files = write_directory(tmp_path, data)
    source = ParquetRows(root, name="parts")
    assert source.files == tuple(str(f) for f in files)
    assert source.num_rows == 40
    whole = source.read(0, 40)
    assert whole.column("i").values.tolist() == list(range(40))
    pq.write_table(data, tmp_path / "whole.parquet")
    assert_same_table(whole, read_table(tmp_path / "whole.parquet", name="parts"))
    for bounds in ([0, 40], [0, 5, 20, 40], [0, 4, 6, 19, 21, 39, 40], list(range(41))):
        assert_same_table(split_reads(source, bounds), whole)


def test_reads_open_only_the_row_groups_and_columns_they_need(tmp_path, monkeypatch):
    data = pa.table({"i": np.arange(40), "j": np.arange(40) * 2, "k": np.arange(40) * 3})
    root, _ = write_directory(tmp_path, data)
    opened = []
    original = pq.ParquetFile.read_row_groups

    def forbidden(self, *args, **kwargs):
        raise AssertionError("construction reads data")

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", forbidden)
    source = ParquetRows(root)

    def recording(self, row_groups, columns=None, **kwargs):
        opened.append((self.metadata.num_rows, list(row_groups), columns))
        return original(self, row_groups, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", recording)
    # b/0.parquet holds rows 5..19 in row groups of 3: rows 11..13 are in groups 2 and 2..3.
    assert source.read(11, 14, ["K", "i"]).column("k").values.tolist() == [33, 36, 39]
    assert opened == [(15, [2], ["i", "k"])]
    opened.clear()
    source.read(4, 21, ["j"])
    assert opened == [(5, [1], ["j"]), (15, [0, 1, 2, 3, 4], ["j"]), (20, [0], ["j"])]


def test_parquet_rows_are_small_and_picklable(tmp_path):
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"i": np.arange(200_000)}), path, row_group_size=10_000)
    source = ParquetRows(path, name="big")
    data = pickle.dumps(source)
    assert len(data) < 4000
    again = pickle.loads(data)
    assert (again.name, again.num_rows) == ("big", 200_000)
    assert_same_table(again.read(123_456, 150_001), source.read(123_456, 150_001))


def test_parquet_paths_are_checked(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("a\n1\n")
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "missing.parquet", csv, tmp_path / "empty"):
        with pytest.raises(InvalidParameterError) as caught:
            ParquetRows(path)
        assert caught.value.name == "path" and str(path) in str(caught.value)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 not really")
    with pytest.raises(DpcommError, match=r"cannot read .*garbage\.parquet") as caught:
        ParquetRows(garbage)
    assert "\n" not in str(caught.value)


def test_parquet_files_of_a_directory_must_agree(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), root / "0.parquet")
    pq.write_table(pa.table({"a": ["x"]}), root / "1.parquet")
    with pytest.raises(InvalidParameterError) as caught:
        ParquetRows(root)
    assert caught.value.name == "path" and "1.parquet" in str(caught.value)
    empty = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())}), empty)
    files = ParquetRows(empty)
    assert files.num_rows == 0
    for read in (files.schema(), files.read(0, 0), files.read(0, 0, ["s"])):
        assert read.num_rows == 0
    assert [(c.name, c.sql_type) for c in files.schema().columns] == [
        ("a", "BIGINT"),
        ("s", "VARCHAR"),
    ]


def test_a_file_changed_after_opening_is_an_error(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": np.arange(100)}), path, row_group_size=10)
    source = ParquetRows(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DpcommError, match="cannot read") as caught:
        source.read(0, 50)
    assert "\n" not in str(caught.value)
    pq.write_table(pa.table({"a": np.arange(50)}), path, row_group_size=5)  # 10 groups still
    with pytest.raises(DpcommError, match="changed"):
        source.read(0, 100)


def test_threads_read_a_parquet_source_at_once(tmp_path):
    """Each thread converts with its own DuckDB connection (a Dask worker runs tasks in threads)."""
    path = tmp_path / "t.parquet"
    data = pa.table(
        {"i": np.arange(5000), "s": [f"v{i % 17}" if i % 5 else None for i in range(5000)]}
    )
    pq.write_table(data, path, row_group_size=100)
    source = ParquetRows(path)
    whole = read_table(path)
    bounds = list(range(0, 5001, 125))
    with ThreadPoolExecutor(max_workers=4) as pool:
        pieces = list(pool.map(lambda ab: source.read(*ab), itertools.pairwise(bounds)))
    assert_same_table(concat_tables(pieces), whole)
