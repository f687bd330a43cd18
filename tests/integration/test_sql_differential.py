"""Analyst SQL against DuckDB on four real public tables, in every engine and from the CLI.

Tables shipped by installed packages: the Palmer penguins (scikit-learn's OpenML test data:
text, NULL keys, missing measurements), mlxtend's Auto MPG (a text column, column names with
spaces), matplotlib's Stocks sample (dates, NULLs, names such as ``^GSPC``) and scikit-learn's
wine (a name with a slash). Each query runs with no countermeasure and with scramblers at
σ = 0 (both deliver every tuple, so the result is exact) and must equal DuckDB's result for the
same SQL on the same table: in order when the query has ORDER BY, as a multiset otherwise.
Every query runs in the memory engine, the Dask engine, the network engine's nodes (one event
loop) and from the CLI (``--out`` Parquet read back by DuckDB); one query per construct also
runs as a deployment over mutual TLS. (All 60 over TLS: 5 min on 2 cores, run by hand.)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date, datetime
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.conftest import find_package_file, local_dask_client, ordered_output

import dpcomm
from dpcomm.queries.query import GROUPING_SET_COLUMN

#: Balanced batches (n = 40 over a few hundred sources) are warned about; not the point here.
pytestmark = pytest.mark.filterwarnings("ignore::dpcomm.errors.DpcommWarning")

PENGUINS = [
    "SELECT species, STRING_AGG(DISTINCT island, '/' ORDER BY island DESC) AS islands, "
    "FIRST(species) AS sp, STRING_AGG(sex, ',' ORDER BY sex) FILTER (WHERE body_mass_g > 5700) "
    "AS heavy FROM penguins GROUP BY species",
    "SELECT species, COUNT(*) FROM penguins WHERE sex = 'MALE' GROUP BY species",
    "SELECT island, AVG(body_mass_g) FROM penguins "
    "WHERE body_mass_g IS NOT NULL AND species <> 'Gentoo' GROUP BY island",
    "SELECT species, sex, COUNT(*) AS n FROM penguins GROUP BY ROLLUP(species, sex)",
    "SELECT species, sex, COUNT(*) AS n, GROUPING(sex) AS g FROM penguins "
    "GROUP BY CUBE(species, sex)",
    "SELECT FLOOR(body_mass_g / 500) * 500 AS mass_bin, COUNT(*) FROM penguins "
    "GROUP BY FLOOR(body_mass_g / 500) * 500",
    "SELECT COALESCE(sex, 'unknown') AS sex2, COUNT(*), SUM(flipper_length_mm) FROM penguins "
    "GROUP BY COALESCE(sex, 'unknown')",
    "SELECT species, VAR_SAMP(culmen_length_mm), STDDEV_POP(body_mass_g) FROM penguins "
    "GROUP BY species",
    "SELECT species, COUNT(sex), COUNT_IF(sex = 'FEMALE') FROM penguins GROUP BY species",
    "SELECT island, MIN(species), MAX(species) FROM penguins GROUP BY island",
    "SELECT species, island, COUNT(*) AS n FROM penguins GROUP BY species, island "
    "HAVING COUNT(*) > 40 ORDER BY n DESC",
    "SELECT species, AVG(body_mass_g) AS m FROM penguins GROUP BY species ORDER BY m DESC LIMIT 2",
    "SELECT CASE WHEN body_mass_g > 4000 THEN 'heavy' ELSE 'light' END AS w, sex, COUNT(*) "
    "FROM penguins GROUP BY GROUPING SETS "
    "((CASE WHEN body_mass_g > 4000 THEN 'heavy' ELSE 'light' END), (sex))",
    "SELECT upper(island) AS isl, SUM(body_mass_g) / COUNT(body_mass_g) AS mean_mass "
    "FROM penguins GROUP BY upper(island) ORDER BY isl",
    "SELECT species, BOOL_OR(body_mass_g > 6000), BOOL_AND(flipper_length_mm > 170) "
    "FROM penguins GROUP BY species",
    "SELECT length(species) AS l, COUNT(*) FROM penguins WHERE island IN ('Biscoe', 'Dream') "
    "GROUP BY length(species)",
    "SELECT species, COUNT(*) FROM penguins GROUP BY species HAVING AVG(body_mass_g) > 4000",
    "SELECT species, sex IS NULL AS unknown_sex, COUNT(*) FROM penguins "
    "GROUP BY species, sex IS NULL",
    "SELECT COUNT(*), AVG(body_mass_g), COUNT(*) FILTER (WHERE sex = 'FEMALE') AS females, "
    "SUM(body_mass_g) FILTER (WHERE island = 'Dream') FROM penguins",
    "SELECT species AS s, island, COUNT(*) AS n, GROUPING_ID(species, island) AS g "
    "FROM penguins GROUP BY GROUPING SETS (ROLLUP (s), CUBE (island)) ORDER BY ALL",
]
CARS = [
    "SELECT origin, COUNT(*), AVG(mpg) FROM cars WHERE cylinders > 4 GROUP BY origin",
    'SELECT "model year", COUNT(*) AS n FROM cars GROUP BY "model year" ORDER BY "model year"',
    "SELECT split_part(\"car name\", ' ', 1) AS make, COUNT(*) AS n FROM cars "
    "GROUP BY split_part(\"car name\", ' ', 1) HAVING COUNT(*) >= 10 ORDER BY n DESC, make",
    "SELECT origin, cylinders, SUM(weight), GROUPING(origin, cylinders) AS g FROM cars "
    "GROUP BY ROLLUP(origin, cylinders)",
    'SELECT origin, MIN("car name"), MAX("car name") FROM cars GROUP BY origin',
    "SELECT CAST(horsepower AS INTEGER) // 50 AS hp_band, AVG(acceleration) FROM cars "
    "GROUP BY CAST(horsepower AS INTEGER) // 50",
    "SELECT origin, VAR_POP(mpg), STDDEV_SAMP(weight) FROM cars GROUP BY origin",
    "SELECT origin, SUM(mpg > 25) AS efficient, COUNT(*) FROM cars GROUP BY origin",
    "SELECT CASE origin WHEN 1 THEN 'usa' WHEN 2 THEN 'europe' ELSE 'japan' END AS region, "
    "AVG(mpg) FROM cars "
    "GROUP BY CASE origin WHEN 1 THEN 'usa' WHEN 2 THEN 'europe' ELSE 'japan' END",
    "SELECT cylinders, COUNT(*) FROM cars WHERE \"car name\" LIKE '%ford%' GROUP BY cylinders",
    "SELECT origin, SUM(weight * 2) AS w2, SUM(displacement) FROM cars GROUP BY origin "
    "ORDER BY origin LIMIT 2 OFFSET 1",
    'SELECT "model year" - 70 AS age, cylinders, COUNT(*) FROM cars '
    'GROUP BY CUBE("model year" - 70, cylinders) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST',
    "SELECT origin, COUNT(*) FROM cars GROUP BY origin HAVING MAX(mpg) > 40",
    "SELECT cylinders % 2 = 0 AS even, MIN(mpg), MAX(mpg) FROM cars GROUP BY cylinders % 2 = 0",
    "SELECT origin, ROUND(AVG(mpg), 1) AS r FROM cars GROUP BY origin",
    'SELECT lower(substr("car name", 1, 1)) AS initial, COUNT(*) FROM cars '
    'WHERE mpg BETWEEN 15 AND 30 GROUP BY lower(substr("car name", 1, 1)) '
    "ORDER BY initial LIMIT 5",
]
STOCKS = [
    'SELECT year("Date") AS y, COUNT(*), AVG(IBM) FROM stocks GROUP BY year("Date")',
    'SELECT date_trunc(\'year\', "Date") AS y, MIN("Date"), MAX("Date") FROM stocks '
    "GROUP BY date_trunc('year', \"Date\")",
    'SELECT year("Date") // 10 * 10 AS decade, COUNT(AMZN), AVG("^GSPC") FROM stocks '
    'GROUP BY year("Date") // 10 * 10',
    'SELECT month("Date") AS m, AVG(AAPL) FROM stocks WHERE "Date" >= DATE \'2000-01-01\' '
    'GROUP BY month("Date") ORDER BY m',
    'SELECT year("Date") AS y, MAX(MSFT) - MIN(MSFT) AS spread FROM stocks GROUP BY year("Date") '
    "HAVING COUNT(MSFT) = 12 ORDER BY spread DESC LIMIT 3",
    "SELECT GOOGL IS NULL AS before_google, COUNT(*) FROM stocks GROUP BY GOOGL IS NULL",
    'SELECT year("Date") > 2005 AS late, STDDEV_SAMP(IBM), VAR_SAMP(XRX) FROM stocks '
    'GROUP BY year("Date") > 2005',
    'SELECT quarter("Date") AS q, COUNT(*) FROM stocks GROUP BY ROLLUP(quarter("Date"))',
    'SELECT MIN("Date"), MAX("Date"), COUNT(*) FROM stocks GROUP BY ()',
    "SELECT strftime(\"Date\", '%Y') AS y4, SUM(DELL) FROM stocks WHERE DELL IS NOT NULL "
    "GROUP BY strftime(\"Date\", '%Y')",
    'SELECT year("Date") AS y, BOOL_AND(IBM > 50), BOOL_OR(AMZN > 100) FROM stocks '
    'GROUP BY year("Date") ORDER BY y DESC LIMIT 5',
    'SELECT "Date" < DATE \'2000-01-01\' AS old, MIN(ADBE), MAX("^IXIC") FROM stocks '
    "GROUP BY \"Date\" < DATE '2000-01-01'",
    'SELECT dayofweek("Date") AS dow, COUNT(*) FROM stocks GROUP BY dayofweek("Date")',
    'SELECT year("Date") AS y, month("Date") AS m, COUNT(*) FROM stocks '
    'WHERE year("Date") BETWEEN 2008 AND 2009 '
    'GROUP BY GROUPING SETS ((year("Date")), (year("Date"), month("Date")))',
    'SELECT year("Date") // 10 AS decade, AVG("Date"), fsum(IBM), GROUPING() AS g FROM stocks '
    "GROUP BY ROLLUP (1) ORDER BY decade NULLS LAST",
]
WINE = [
    "SELECT target, COUNT(*), AVG(alcohol) FROM wine GROUP BY target",
    'SELECT target, AVG("od280/od315_of_diluted_wines") FROM wine WHERE proline > 700 '
    "GROUP BY target",
    "SELECT ROUND(alcohol) AS a, COUNT(*) FROM wine GROUP BY ROUND(alcohol) ORDER BY a",
    "SELECT target, VAR_SAMP(magnesium), STDDEV_POP(color_intensity) FROM wine GROUP BY target",
    "SELECT target, hue > 1 AS high_hue, COUNT(*) FROM wine GROUP BY CUBE(target, (hue > 1))",
    "SELECT target, SUM(proline) / COUNT(*) AS mean_proline FROM wine GROUP BY target "
    "HAVING SUM(proline) > 30000 ORDER BY mean_proline",
    "SELECT CASE WHEN flavanoids > 2 THEN 'high' WHEN flavanoids > 1 THEN 'mid' ELSE 'low' END "
    "AS f, target, COUNT(*) AS n FROM wine GROUP BY CASE WHEN flavanoids > 2 THEN 'high' "
    "WHEN flavanoids > 1 THEN 'mid' ELSE 'low' END, target",
    "SELECT target, MIN(ash), MAX(ash), COUNT(ash) FROM wine GROUP BY target ORDER BY target DESC",
    "SELECT CAST(magnesium AS INTEGER) // 20 * 20 AS mg, SUM(CAST(proline AS INTEGER)) "
    "FROM wine GROUP BY CAST(magnesium AS INTEGER) // 20 * 20",
    "SELECT target, BOOL_AND(alcohol > 11), COUNT_IF(malic_acid > 3) FROM wine GROUP BY target",
    "SELECT target, COUNT(*) FROM wine WHERE NOT (ash > 2.5 OR hue < 0.7) GROUP BY ROLLUP(target)",
    "SELECT target, COUNT(*) AS n FROM wine GROUP BY target ORDER BY n DESC LIMIT 1",
    "SELECT target, VAR_POP(CAST(magnesium AS BIGINT)) FROM wine GROUP BY target",
]
QUERIES = [("penguins", q) for q in PENGUINS] + [("cars", q) for q in CARS]
QUERIES += [("stocks", q) for q in STOCKS] + [("wine", q) for q in WINE]
#: The constructs one query of each kind covers, for the slower engines.
SAMPLE = [
    ("penguins", PENGUINS[3]),  # CUBE, NULL keys, GROUPING()
    ("cars", CARS[2]),  # WHERE-free derived text key, HAVING, ORDER BY
    ("stocks", STOCKS[3]),  # WHERE on a date, month(), ORDER BY
    ("stocks", STOCKS[4]),  # expressions over aggregates, HAVING, LIMIT
    ("wine", WINE[9]),  # BOOL_AND, COUNT_IF
]
QUERY_IDS = [f"{name}-{index}" for index, (name, _) in enumerate(QUERIES)]
SAMPLE_IDS = [f"{name}-{index}" for index, (name, _) in enumerate(SAMPLE)]
_CARS_NAMES = [
    "cylinders", "displacement", "horsepower", "weight", "acceleration", "model year", "origin",
    "car name", "mpg",
]  # fmt: skip
_WINE_NAMES = [
    "alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols",
    "flavanoids", "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue",
    "od280/od315_of_diluted_wines", "proline",
]  # fmt: skip


@pytest.fixture(scope="session")
def tables(openml_table: Callable[[str], Any]) -> dict[str, Any]:
    """The four tables as Arrow tables (DuckDB's types: DATE stays DATE), read once per
    process: a module fixture would read them again each time a worker of ``pytest -n``
    comes back to this module."""
    connection = duckdb.connect()
    cars_file = resources.files("mlxtend").joinpath("data/data/autompg.csv.gz")
    stocks_file = resources.files("matplotlib").joinpath("mpl-data/sample_data/Stocks.csv")
    wine_file = find_package_file("sklearn", "datasets", "data", "wine_data.csv")
    # What load_wine(as_frame=True).frame holds (a first line of sizes and class names, then
    # 13 features as float64 and the class as int64), without importing scikit-learn.
    wine_columns = ", ".join(f"CAST({_quoted(n)} AS DOUBLE) AS {_quoted(n)}" for n in _WINE_NAMES)
    wine_names = [*_WINE_NAMES, "target"]
    return {
        "penguins": openml_table("id_42585"),
        "cars": connection.sql(
            f"SELECT * FROM read_csv('{cars_file}', header = false, names = {_CARS_NAMES!r})"
        ).to_arrow_table(),
        "stocks": connection.sql(f"SELECT * FROM read_csv('{stocks_file}')").to_arrow_table(),
        "wine": connection.sql(
            f"SELECT {wine_columns}, CAST(target AS BIGINT) AS target FROM read_csv("
            f"'{wine_file}', header = false, skip = 1, names = {wine_names!r})"
        ).to_arrow_table(),
    }


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DuckdbAnswers:
    """DuckDB's column names and rows for each query, over the whole table and over the
    thinned one (`_thinned`), each asked once: the memory and Dask engines and the CLI
    compare with the same answer. One connection (opening one costs more CPU than most of
    these queries); the table is registered under its name for each query, then dropped."""

    def __init__(self, tables: dict[str, Any]) -> None:
        self.connection = duckdb.connect()
        self.tables = tables
        self.thinned_tables: dict[str, Any] = {}
        self.parquet_files: dict[str, Path] = {}
        self._answers: dict[tuple[str, str, bool], tuple[list[str], list[tuple[Any, ...]]]] = {}

    def thinned(self, name: str) -> Any:
        if name not in self.thinned_tables:
            self.thinned_tables[name] = _thinned(self.tables[name])
        return self.thinned_tables[name]

    def result(
        self, sql: str, name: str, *, thinned: bool = False
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """DuckDB's column names and rows for ``sql`` over table ``name`` (or its thinning)."""
        key = (name, sql, thinned)
        if key not in self._answers:
            table = self.thinned(name) if thinned else self.tables[name]
            self.connection.register(name, table)
            try:
                cursor = self.connection.execute(sql)
                self._answers[key] = [d[0] for d in cursor.description], cursor.fetchall()
            finally:
                self.connection.unregister(name)
        return self._answers[key]

    def rows(self, sql: str, name: str, *, thinned: bool = False) -> list[tuple[Any, ...]]:
        return self.result(sql, name, thinned=thinned)[1]

    def parquet_file(self, name: str, folder: Path) -> Path:
        """Table ``name`` written to Parquet by DuckDB in ``folder`` (once)."""
        if name not in self.parquet_files:
            path = folder / f"{name}.parquet"
            self.connection.register("source_table", self.tables[name])
            try:
                self.connection.execute(f"COPY source_table TO '{path}' (FORMAT PARQUET)")
            finally:
                self.connection.unregister("source_table")
            self.parquet_files[name] = path
        return self.parquet_files[name]

    def read_parquet(self, path: Path) -> tuple[list[str], list[dict[str, Any]]]:
        """The column names of a Parquet file read by DuckDB, and its rows as dictionaries."""
        back = self.connection.execute(f"SELECT * FROM read_parquet('{path}')")
        names = [d[0] for d in back.description]
        return names, [dict(zip(names, row, strict=True)) for row in back.fetchall()]


@pytest.fixture(scope="session")
def parquet_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tables are written as Parquet for the CLI (each once)."""
    return tmp_path_factory.mktemp("differential-tables")


@pytest.fixture(scope="session")
def duckdb_answers(tables: dict[str, Any]) -> Iterator[DuckdbAnswers]:
    """DuckDB's answers, kept for the session like the tables (see `tables`)."""
    answers = DuckdbAnswers(tables)
    yield answers
    answers.connection.close()


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, Decimal):
        return float(value)
    return value


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, str(type(v).__name__), v if v is not None else 0) for v in row)


def _close(x: Any, y: Any) -> bool:
    x, y = _comparable(x), _comparable(y)
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, bool) or isinstance(y, bool):
        return x == y
    if isinstance(x, int | float) and isinstance(y, int | float):
        return math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(x, date | datetime) or isinstance(y, date | datetime):
        return x == y
    return bool(x == y)


def assert_same_result(sql: str, got: list[dict[str, Any]], expected: list[tuple[Any, ...]]):
    rows = [tuple(v for k, v in row.items() if k != GROUPING_SET_COLUMN) for row in got]
    assert len(rows) == len(expected), f"{sql}: {len(rows)} rows against DuckDB's {len(expected)}"
    if not ordered_output(sql):
        rows = sorted(rows, key=lambda r: _sort_key(tuple(_comparable(v) for v in r)))
        expected = sorted(expected, key=lambda r: _sort_key(tuple(_comparable(v) for v in r)))
    for index, (left, right) in enumerate(zip(rows, expected, strict=True)):
        assert len(left) == len(right), f"{sql}: row {index}: {left} against {right}"
        for x, y in zip(left, right, strict=True):
            assert _close(x, y), f"{sql}: row {index}: {left} against DuckDB's {right}"


def _mechanisms() -> Iterator[Any]:
    yield dpcomm.NoCountermeasure()
    yield dpcomm.Scramblers(sampling_rate=0.0, batch_size=40, num_dummies=5)


@pytest.mark.parametrize(("name", "sql"), QUERIES, ids=QUERY_IDS)
def test_memory_engine_matches_duckdb(
    tables: dict[str, Any], duckdb_answers: DuckdbAnswers, name: str, sql: str
) -> None:
    names, expected = duckdb_answers.result(sql, name)
    # Scramblers at σ = 0 run for every query through the network engine's nodes below.
    mechanisms = list(_mechanisms()) if (name, sql) in SAMPLE else [dpcomm.NoCountermeasure()]
    for countermeasure in mechanisms:
        run = dpcomm.run_sql(sql, tables[name], countermeasure=countermeasure, seed=7)
        assert_same_result(sql, run.rows, expected)
        assert [c for c in run.result.columns if c != GROUPING_SET_COLUMN] == names


def test_at_least_sixty_queries_on_four_tables() -> None:
    assert len(QUERIES) >= 60
    assert {name for name, _ in QUERIES} == {"penguins", "cars", "stocks", "wine"}


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    with local_dask_client(processes=False) as client:
        yield client


@pytest.mark.parametrize(("name", "sql"), QUERIES, ids=QUERY_IDS)
def test_dask_engine_matches_duckdb(
    tables: dict[str, Any], duckdb_answers: DuckdbAnswers, dask_client: Any, name: str, sql: str
) -> None:
    from dpcomm.engine.dask_engine import DaskEngine

    engine = DaskEngine(dask_client, partitions=2)
    run = dpcomm.run_sql(
        sql, tables[name], countermeasure=dpcomm.NoCountermeasure(), seed=7, engine=engine
    )
    assert_same_result(sql, run.rows, duckdb_answers.rows(sql, name))


def _thinned(table: Any) -> Any:
    """Every sixth row, and the first three rows of each pattern of NULLs (which columns are
    NULL): the network engine's nodes cost about a millisecond of CPU per source, and these
    keep every type, NULL and construct of the query while the memory and Dask engines run
    the whole table. (Most of the Stocks rows hold a NULL: all of them would be 465 of 524.)"""
    patterns = zip(*(pc.is_null(column).to_pylist() for column in table.columns), strict=True)
    seen: Counter[tuple[bool, ...]] = Counter()
    kept = []
    for row, pattern in enumerate(patterns):
        seen[pattern] += any(pattern)
        kept.append(row % 6 == 0 or 0 < seen[pattern] <= 3)
    return table.filter(pa.array(kept))


def _network_run(name: str, sql: str, answers: DuckdbAnswers, transport: str) -> None:
    """The network engine's nodes (coordinator, scramblers, compute and result nodes), over
    ``transport``, on a thinned table: the result is DuckDB's over the same rows (over TLS,
    the memory engine's too, same seed)."""
    from dpcomm.engine.engines import make_engine

    table = answers.thinned(name)

    scramblers = dpcomm.Scramblers(sampling_rate=0.0, batch_size=60, num_dummies=2)
    engine = make_engine("network", transport=transport)
    run = dpcomm.run_sql(
        sql, table, countermeasure=scramblers, num_targets=3, seed=7, engine=engine
    )
    assert_same_result(sql, run.rows, answers.rows(sql, name, thinned=True))
    if transport == "tls":
        memory = dpcomm.run_sql(sql, table, countermeasure=scramblers, num_targets=3, seed=7)
        assert run.rows == memory.rows


@pytest.mark.parametrize(("name", "sql"), QUERIES, ids=QUERY_IDS)
def test_network_nodes_match_duckdb(duckdb_answers: DuckdbAnswers, name: str, sql: str) -> None:
    """Every query through the network engine's nodes and wire codec, one event loop."""
    _network_run(name, sql, duckdb_answers, "memory")


@pytest.mark.parametrize(("name", "sql"), SAMPLE, ids=SAMPLE_IDS)
def test_network_engine_over_tls_matches_duckdb(
    duckdb_answers: DuckdbAnswers, name: str, sql: str
) -> None:
    """One query per construct as a deployment: worker processes, mutual TLS on loopback."""
    _network_run(name, sql, duckdb_answers, "tls")


@pytest.mark.parametrize(("name", "sql"), QUERIES, ids=QUERY_IDS)
def test_cli_parquet_output_matches_duckdb(
    duckdb_answers: DuckdbAnswers,
    parquet_folder: Path,
    cli: Callable[..., Any],
    tmp_path: Path,
    name: str,
    sql: str,
) -> None:
    data = duckdb_answers.parquet_file(name, parquet_folder)
    out = tmp_path / "result.parquet"
    outcome = cli(
        "run", "aggregate", "--data", data, "--sql", sql, "--mechanism", "none",
        "--seed", 7, "--out", out,
    )  # fmt: skip
    assert outcome.status in (0, None), outcome.err
    names, got = duckdb_answers.read_parquet(out)
    assert_same_result(sql, got, duckdb_answers.rows(sql, name))
    # A result with rows (the CLI's, DuckDB's row for row above) names its grouping sets.
    if got and ("ROLLUP" in sql or "CUBE" in sql or "GROUPING SETS" in sql):
        assert names[-1] == GROUPING_SET_COLUMN
