"""Differential tests against DuckDB on real public data sets shipped by installed packages.

Data sets (none written by us), found next to the packages' code:

* matplotlib ``mpl-data/sample_data/Stocks.csv``: a ``# Data source`` comment line, a DATE
  column, DOUBLE columns full of NULLs (GOOGL is NULL on all the first 200 rows), names like
  ``^GSPC``; read with :func:`dpcomm.data.read_table`;
* matplotlib ``mpl-data/sample_data/msft.csv``: text dates (``19-Sep-03``), a BIGINT volume, a
  column named ``Adj. Close*``; read with :func:`dpcomm.data.read_table`;
* mlxtend ``data/data/autompg.csv.gz``: no header, a text column of car names with spaces;
* scikit-learn ``datasets/data/iris.csv`` and ``wine_data.csv``: a metadata first line (sizes and
  class names), no header.

For each: (a) with σ = 0, under scramblers and under local flooding, the engines return
DuckDB's result on the whole table (the user's SQL run by DuckDB itself); (b) under every
mechanism, the engines return :func:`reference_result` over the tuples they delivered; (c) with
the same seed, both engines give the same run: the same result (exactly), the same delivered
tuples and, per routed flow, the same messages, dummies and edges. The memory engine runs every
data set under every mechanism, the network engine a covering set of them (`NETWORK_PAIRS`):
one test per network run checks it all, (a) or (b) and (c), so that the run (seconds of CPU)
is made once even when the workers of ``pytest -n`` share out this module's tests.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from tests.conftest import find_package_file, without_grouping_set

from dpcomm.data import Table, read_table, table_from_relation
from dpcomm.engine.memory import simulate
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.engine.run import Run
from dpcomm.engine.traffic import FlowTraffic
from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, reference_result

pytestmark = pytest.mark.filterwarnings("ignore::dpcomm.errors.BalancedBatchesWarning")

#: Rows kept of each data set (the first ones), so that a networked round takes seconds.
ROWS = 200
COMPUTE_NODES = 4
DELTA = 1e-4


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


@dataclass(frozen=True)
class Dataset:
    """The first rows of a data set, a query over them, and DuckDB's own answer."""

    name: str
    table: Table
    sql: str
    duckdb_rows: list[tuple[Any, ...]]
    #: Columns whose NULLs, text, dates the query groups by (checked to be really there).
    checks: Callable[[Table], None]


def with_duckdb(create: str, name: str, sql: str) -> tuple[Table, list[tuple[Any, ...]]]:
    """Create table ``name`` in DuckDB by ``create``; its Table and DuckDB's result of ``sql``."""
    connection = duckdb.connect()
    try:
        connection.execute(f"CREATE TABLE {quote(name)} AS {create}")
        table = table_from_relation(connection.table(quote(name)), name)
        rows = connection.execute(sql).fetchall()
    finally:
        connection.close()
    return table, rows


def first_rows(table: Table, count: int) -> Table:
    return table.take(np.arange(min(count, table.num_rows)))


def load_stocks() -> Dataset:
    path = find_package_file("matplotlib", "mpl-data", "sample_data", "Stocks.csv")
    sql = (
        'SELECT "Date", "AMZN", COUNT(*) AS "lignes été", COUNT("IBM"), SUM("^IXIC"), '
        'AVG("IBM") AS "avg ibm 🙂", MIN("^GSPC"), MAX("GOOGL") '
        'FROM stocks GROUP BY GROUPING SETS (("Date"), ("AMZN"), ())'
    )
    table = first_rows(read_table(path, name="stocks"), ROWS)
    source = f"SELECT * FROM read_csv('{path}') LIMIT {ROWS}"
    _, rows = with_duckdb(source, "stocks", sql)

    def checks(table: Table) -> None:
        assert table.column_names[:2] == ("Date", "IBM")
        assert "^GSPC" in table.column_names
        assert table.column("Date").sql_type == "DATE"
        assert table.column("AMZN").is_null.any() and not table.column("AMZN").is_null.all()
        assert table.column("GOOGL").is_null.all()

    return Dataset("stocks", table, sql, rows, checks)


def load_msft() -> Dataset:
    path = find_package_file("matplotlib", "mpl-data", "sample_data", "msft.csv")
    sql = (
        'SELECT "Open", "Date", COUNT(*), SUM("Volume") AS "volume total", '
        'AVG("Adj. Close*"), MIN("Low"), MAX("High") AS "plus haut ↑" '
        'FROM msft GROUP BY ROLLUP ("Open", "Date")'
    )
    table = first_rows(read_table(path, name="msft"), ROWS)
    _, rows = with_duckdb(f"SELECT * FROM read_csv('{path}') LIMIT {ROWS}", "msft", sql)

    def checks(table: Table) -> None:
        assert table.column("Date").sql_type == "VARCHAR"
        assert table.column("Volume").sql_type == "BIGINT"
        assert "Adj. Close*" in table.column_names

    return Dataset("msft", table, sql, rows, checks)


AUTOMPG_COLUMNS = (
    "cylinders",
    "displacement",
    "horsepower",
    "weight",
    "acceleration",
    "model year",
    "origin",
    "car name",
    "mpg",
)


def load_autompg() -> Dataset:
    path = find_package_file("mlxtend", "data", "data", "autompg.csv.gz")
    names = ", ".join(f"'{n}'" for n in AUTOMPG_COLUMNS)
    sql = (
        'SELECT "car name", cylinders, origin, COUNT(*), AVG(mpg) AS "mpg moyen", '
        'SUM(weight), MIN(horsepower), MAX("model year") '
        'FROM autompg GROUP BY GROUPING SETS (("car name"), ROLLUP (cylinders, origin))'
    )
    source = f"SELECT * FROM read_csv('{path}', header = false, names = [{names}]) LIMIT {ROWS}"
    table, rows = with_duckdb(source, "autompg", sql)

    def checks(table: Table) -> None:
        assert table.column("car name").sql_type == "VARCHAR"
        assert any(" " in v for v in table.column("car name").values.tolist())
        assert table.column("cylinders").sql_type == "BIGINT"

    return Dataset("autompg", table, sql, rows, checks)


def sklearn_source(path: Path, features: int, names: list[str]) -> str:
    """A metadata line ``rows,features,class names...``, then rows; class names as text."""
    header = path.read_text().splitlines()[0].split(",")
    assert int(header[1]) == features
    classes = "[" + ", ".join(f"'{c}'" for c in header[2:]) + "]"
    columns = ", ".join(f"'{n}'" for n in [*names, "target"])
    return (
        f"SELECT *, {classes}[target + 1] AS species FROM read_csv('{path}', header = false, "
        f"skip = 1, names = [{columns}]) LIMIT {ROWS}"
    )


def load_iris() -> Dataset:
    path = find_package_file("sklearn", "datasets", "data", "iris.csv")
    names = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]
    sql = (
        'SELECT species, "petal width (cm)", COUNT(*), AVG("sepal length (cm)"), '
        'MIN("petal width (cm)"), MAX("petal length (cm)"), SUM("sepal width (cm)") AS "Σ width" '
        'FROM iris GROUP BY CUBE (species, "petal width (cm)")'
    )
    table, rows = with_duckdb(sklearn_source(path, 4, names), "iris", sql)

    def checks(table: Table) -> None:
        assert table.num_rows == 150
        assert set(table.column("species").values.tolist()) == {
            "setosa",
            "versicolor",
            "virginica",
        }

    return Dataset("iris", table, sql, rows, checks)


WINE_FEATURES = [
    "alcohol",
    "malic_acid",
    "ash",
    "alcalinity_of_ash",
    "magnesium",
    "total_phenols",
    "flavanoids",
    "nonflavanoid_phenols",
    "proanthocyanins",
    "color_intensity",
    "hue",
    "od280/od315_of_diluted_wines",
    "proline",
]


def load_wine() -> Dataset:
    path = find_package_file("sklearn", "datasets", "data", "wine_data.csv")
    sql = (
        "SELECT species, magnesium, COUNT(*), SUM(proline), AVG(alcohol), "
        'MIN("od280/od315_of_diluted_wines") AS "od min", MAX(hue) '
        "FROM wine GROUP BY GROUPING SETS ((species), (magnesium), ())"
    )
    table, rows = with_duckdb(sklearn_source(path, 13, WINE_FEATURES), "wine", sql)

    def checks(table: Table) -> None:
        assert table.num_rows == 178
        assert table.column("magnesium").sql_type == "BIGINT"

    return Dataset("wine", table, sql, rows, checks)


LOADERS: dict[str, Callable[[], Dataset]] = {
    "stocks": load_stocks,
    "msft": load_msft,
    "autompg": load_autompg,
    "iris": load_iris,
    "wine": load_wine,
}
SEEDS = {"stocks": 101, "msft": 202, "autompg": 303, "iris": 404, "wine": 505}


def batch_size(rows: int) -> int:
    """n giving four balanced batches, the largest of n sources.

    When n does not divide the rows some batches hold n − 1 and the run notes the ε that
    changes (a BalancedBatchesWarning, ignored in this module: results are what it checks).
    """
    return -(-rows // 4)


def mechanisms(rows: int) -> dict[str, Any]:
    return {
        "none": NoCountermeasure(),
        "local σ=0.3 d=2": LocalFlooding(sampling_rate=0.3, num_dummies=2),
        "scramblers σ=0.3 d=3": Scramblers(
            sampling_rate=0.3, batch_size=batch_size(rows), num_dummies=3
        ),
        "local σ=0 d=3": LocalFlooding(sampling_rate=0.0, num_dummies=3),
        "capped scramblers σ=0 d=4": Scramblers(
            sampling_rate=0.0, batch_size=batch_size(rows), num_dummies=4, capped=True
        ),
    }


PRIVATE = ["none", "local σ=0.3 d=2", "scramblers σ=0.3 d=3"]
SIGMA_ZERO = ["local σ=0 d=3", "capped scramblers σ=0 d=4"]


def _network_pairs() -> frozenset[tuple[str, str]]:
    """The (data set, mechanism) pairs the network engine runs: each data set under two
    mechanisms and each mechanism on two data sets (data set i, mechanisms i and i + 1). The
    memory engine runs every pair; a network run costs about ten times as much CPU, and what
    the network adds (the nodes, the wire codec of each column type) is the same under every
    mechanism, so each type and each mechanism meets it twice."""
    mechanisms = PRIVATE + SIGMA_ZERO
    names = sorted(LOADERS)
    return frozenset(
        (name, mechanisms[(index + shift) % len(mechanisms)])
        for index, name in enumerate(names)
        for shift in (0, 1)
    )


NETWORK_PAIRS = _network_pairs()


def memory_cases(mechanisms: list[str]) -> list[Any]:
    """(name, mechanism) for every data set and mechanism (the memory engine's runs)."""
    return [
        pytest.param(name, mechanism, id=f"{name}-{mechanism}-memory")
        for name in sorted(LOADERS)
        for mechanism in mechanisms
    ]


class Runs:
    """Every run of the module, made once: (data set, mechanism, engine) -> Run."""

    def __init__(self) -> None:
        self.datasets: dict[str, Dataset] = {}
        self.programs: dict[str, AggregateProgram] = {}
        self.runs: dict[tuple[str, str, str], Run] = {}

    def dataset(self, name: str) -> Dataset:
        if name not in self.datasets:
            self.datasets[name] = LOADERS[name]()
        return self.datasets[name]

    def program(self, name: str) -> AggregateProgram:
        if name not in self.programs:
            data = self.dataset(name)
            self.programs[name] = AggregateProgram.from_sql(
                data.sql, data.table, num_targets=COMPUTE_NODES
            )
        return self.programs[name]

    def run(self, name: str, mechanism: str, engine: str) -> Run:
        key = (name, mechanism, engine)
        if key not in self.runs:
            program = self.program(name)
            countermeasure = mechanisms(program.num_sources)[mechanism]
            if engine == "memory":
                run = simulate(program, countermeasure, delta=DELTA, seed=SEEDS[name])
            else:
                network = NetworkEngine(transport="memory", timeout=60, idle_seconds=5)
                run = network.execute(program, countermeasure, delta=DELTA, seed=SEEDS[name])
                # A node that failed or missed a deadline would explain any difference below.
                assert run.details.errors == {}
                assert run.details.lost_scramblers == ()
                assert run.details.left_out_sources == {}
            self.runs[key] = run
        return self.runs[key]


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    yield Runs()


def masks_of(run: Run, program: AggregateProgram) -> list[np.ndarray]:
    return [run.delivered[flow] for flow in program.flow_names]


def sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """A total order on result rows of one query (NULLs last, floats rounded)."""
    parts: list[Any] = []
    for value in row.values():
        if value is None:
            parts.append((1, 0, 0))
        elif isinstance(value, float):
            parts.append((0, math.isnan(value), 0.0 if math.isnan(value) else round(value, 6)))
        else:
            parts.append((0, False, value))
    return tuple(parts)


def identical(a: Any, b: Any) -> bool:
    """The same values of the same types, floats to the bit (results are exact across engines)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    return bool(a == b)


def edge_set(traffic: FlowTraffic) -> set[tuple[int, int, int]]:
    """The (sender, receiver, count) edges of one routed flow."""
    columns = (traffic.senders.tolist(), traffic.receivers.tolist(), traffic.counts.tolist())
    return set(zip(*columns, strict=True))


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_data_sets_are_what_the_queries_expect(runs, name):
    data = runs.dataset(name)
    data.checks(data.table)
    assert 60 <= data.table.num_rows <= ROWS
    program = runs.program(name)
    # DuckDB's own answer on the whole table, in canonical order, is the reference's.
    everything = [np.ones(data.table.num_rows, dtype=bool)] * program.query.num_grouping_sets
    reference = reference_result(program.query, program.table, everything)
    raw = [dict(zip(program.query.output_names, row, strict=True)) for row in data.duckdb_rows]
    plain = without_grouping_set(reference)
    assert compare_results(sorted(plain, key=sort_key), sorted(raw, key=sort_key)) == []
    assert compare_results(program.nonprivate_result(), reference) == []


def check_sigma_zero(runs: Runs, name: str, run: Run) -> None:
    """(a): every tuple delivered, DuckDB's result on the whole table."""
    data = runs.dataset(name)
    program = runs.program(name)
    assert all(mask.all() for mask in masks_of(run, program))
    # Dummies were sent (flooding or scramblers) and none was counted.
    assert run.efficiency.dummy_messages > 0
    raw = [dict(zip(program.query.output_names, row, strict=True)) for row in data.duckdb_rows]
    assert len(run.result) == len(raw)
    plain = without_grouping_set(run.result)
    assert compare_results(sorted(plain, key=sort_key), sorted(raw, key=sort_key)) == []
    # In canonical order too, against the result over all tuples.
    assert identical(run.result, program.nonprivate_result())


def check_over_delivered_tuples(runs: Runs, name: str, mechanism: str, run: Run) -> None:
    """(b): DuckDB's result over the tuples the run delivered."""
    program = runs.program(name)
    masks = masks_of(run, program)
    if mechanism != "none":
        # σ = 0.3 with T = 4 leaves out about 22% of the tuples of a grouping set with keys.
        assert any(not mask.all() for mask in masks)
    expected = reference_result(program.query, program.table, masks)
    assert compare_results(run.result, expected) == []


def check_same_run(memory: Run, network: Run) -> None:
    """(c): the same result (exactly), delivered tuples, messages, dummies and edges."""
    assert identical(memory.result, network.result)
    assert memory.delivered.keys() == network.delivered.keys()
    for flow, mask in memory.delivered.items():
        assert np.array_equal(mask, network.delivered[flow]), flow
    assert [f.flow for f in memory.traffic] == [f.flow for f in network.traffic]
    for left, right in zip(memory.traffic, network.traffic, strict=True):
        assert left.messages == right.messages, left.flow
        assert left.dummies == right.dummies, left.flow
        edges, other = edge_set(left), edge_set(right)
        assert edges == other, left.flow
        # No edge is repeated: each (sender, receiver) carries all its messages at once.
        assert len(edges) == len(left.counts) == len(right.counts)
    assert memory.efficiency == network.efficiency


@pytest.mark.parametrize(("name", "mechanism"), memory_cases(SIGMA_ZERO))
def test_sigma_zero_gives_duckdbs_result_on_the_whole_table(runs, name, mechanism):
    check_sigma_zero(runs, name, runs.run(name, mechanism, "memory"))


@pytest.mark.parametrize(("name", "mechanism"), memory_cases(PRIVATE))
def test_result_is_duckdbs_over_the_delivered_tuples(runs, name, mechanism):
    check_over_delivered_tuples(runs, name, mechanism, runs.run(name, mechanism, "memory"))


@pytest.mark.parametrize(("name", "mechanism"), sorted(NETWORK_PAIRS))
def test_network_run_is_duckdbs_result_and_the_memory_run_of_the_same_seed(runs, name, mechanism):
    """The network engine's run passes (a) or (b), as the memory engine's, and is the same
    run (c)."""
    network = runs.run(name, mechanism, "network")
    if mechanism in SIGMA_ZERO:
        check_sigma_zero(runs, name, network)
    else:
        check_over_delivered_tuples(runs, name, mechanism, network)
    check_same_run(runs.run(name, mechanism, "memory"), network)
