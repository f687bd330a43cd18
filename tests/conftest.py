"""Fixtures every part of the suite shares (tests/unit, property, reference, integration).

Helpers are fixtures here rather than functions copied into each test module:

* ``cli``: runs ``dpcomm ARGV`` in process and returns its exit status, standard output and
  standard error (argparse's own exits included, arguments turned into text);
* ``same_table``: asserts that two :class:`dpcomm.data.table.Table` hold the same names, SQL
  types, numpy dtypes, NULL masks and values (of the same Python types);
* ``package_file``: a file shipped inside an installed package (located without importing the
  package), or a skip that says which is missing;
* ``csv_rows``: the rows of a CSV file as dictionaries of text;
* :func:`write_idx`: an array as an IDX file (MNIST's format), raw or gzipped;
* ``openml_table``: a table of scikit-learn's OpenML test data (the Palmer penguins are
  ``id_42585``, with NaN measurements and text species), as an Arrow table read by DuckDB;
* ``chromium``: a headless Chromium (Debian's package, ``make browser-tools``) driven by
  selenium through Debian's chromedriver, one per test session; a skip that says why where
  Chromium is not installed;
* ``iris_csv``: scikit-learn's iris as a CSV file (:data:`IRIS_COLUMNS` and a text ``species``);
* ``aggregate_program``: GROUPING SETS over random data (:func:`random_aggregate_program`);
* ``kmeans_program``: K-means over clustered points (:func:`clustered_kmeans_program`);
* ``plan_for``: the plan of such an Aggregate or K-means program (the planner's tests);
* :func:`released_program` over :func:`release_table`, run under :func:`release_sampling`: the
  noisy release whose estimates tests/unit/pipeline and tests/reference check;
* :func:`canonical`: a value for bit-exact comparison (floats by their bits, NaN payloads too);
* :func:`same`: equal values of the same types (floats by their bits, any NaN the same);
* :func:`canonical_rows`: result rows in one order whatever their own, for a multiset comparison.

The collector runs less often in the test processes (`pytest_configure`): a worker holds every
module the suite imports, and the default thresholds spent about a third of a network run's CPU
walking them. Dask's own monitoring, which no test reads, runs rarer in the test processes and in
every cluster or command they start (:data:`QUIET_DASK`, inherited through the environment).
"""

from __future__ import annotations

import csv
import datetime
import gc
import gzip
import importlib.util
import io
import math
import os
import shutil
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest


class CliOutcome(NamedTuple):
    """What ``dpcomm ARGV`` did: exit status, standard output, standard error."""

    status: int | str | None
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliOutcome]:
    """``cli(*argv)``: run ``dpcomm argv`` in this process, as the console script would."""
    from dpcomm.cli.main import main

    def run(*argv: Any) -> CliOutcome:
        try:
            status: int | str | None = main([str(a) for a in argv])
        except SystemExit as exit_:  # argparse's own errors and --help
            status = exit_.code
        captured = capsys.readouterr()
        return CliOutcome(status, captured.out, captured.err)

    return run


def assert_same_table(got: Any, expected: Any, *, names: bool = False) -> None:
    """Same names, SQL types, numpy dtypes, NULL masks, and values (of the same Python types).

    ``names``: also the tables' own names.
    """
    same_table_as(expected, names=names)(got)


def _compared_values(column: Any) -> Any:
    """The non-NULL values of ``column`` as `assert_same_table` compares them: numbers as
    they are, Python objects as their type and repr (``Decimal('1.0')`` is not ``1.00``)."""
    values = column.values[~column.is_null]
    if values.dtype.kind == "O":
        return list(zip(map(type, values), map(repr, values), strict=True))
    return values


def same_table_as(expected: Any, *, names: bool = False) -> Callable[[Any], None]:
    """`assert_same_table` of any table against ``expected``, whose side of the comparison is
    worked out once: to compare many tables with one (every split of a source, say)."""
    columns = [(b, _compared_values(b)) for b in expected.columns]

    def check(got: Any) -> None:
        if names:
            assert got.name == expected.name
        assert got.num_rows == expected.num_rows
        assert got.column_names == expected.column_names
        for a, (b, y) in zip(got.columns, columns, strict=True):
            assert a.sql_type == b.sql_type, a.name
            assert a.values.dtype == b.values.dtype, a.name
            assert np.array_equal(a.is_null, b.is_null), a.name
            x = _compared_values(a)
            if a.values.dtype.kind == "O":
                assert x == y, a.name
            else:
                assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), a.name

    return check


@pytest.fixture
def same_table() -> Callable[..., None]:
    """``same_table(got, expected, names=False)``: see :func:`assert_same_table`."""
    return assert_same_table


@contextmanager
def local_dask_client(*, processes: bool = True) -> Iterator[Any]:
    """A client of a two-worker LocalCluster of its own (a free dashboard port), closed on exit."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as connected,
    ):
        yield connected


def without_grouping_set(rows: Any) -> list[dict[str, Any]]:
    """Result rows without dpcomm's ``grouping_set`` column, to compare with DuckDB's own."""
    from dpcomm.queries.query import GROUPING_SET_COLUMN

    return [{k: v for k, v in dict(row).items() if k != GROUPING_SET_COLUMN} for row in rows]


def find_package_file(package: str, *parts: str) -> Path:
    """A file shipped inside ``package`` (located without importing it), or skip."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pytest.skip(f"package {package} is not installed")
    path = Path(spec.origin).parent.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"{package} does not ship {'/'.join(parts)}")
    return path


@pytest.fixture(scope="session")
def package_file() -> Callable[..., Path]:
    """``package_file(package, *parts)``: see :func:`find_package_file`."""
    return find_package_file


@pytest.fixture(scope="session")
def csv_rows() -> Callable[[Path], list[dict[str, str]]]:
    """``csv_rows(path)``: the rows of a CSV file, as dictionaries of text."""

    def read(path: Path) -> list[dict[str, str]]:
        with Path(path).open(newline="") as handle:
            return list(csv.DictReader(handle))

    return read


def read_openml_arff(dataset: str, tmp: Path) -> Any:
    """An OpenML ARFF test file of scikit-learn as an Arrow table: its @data rows read by
    DuckDB, ``?`` as NULL (written to a CSV file in ``tmp`` first), or skip."""
    import duckdb

    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        pytest.skip("package sklearn is not installed")
    folder = Path(spec.origin).parent / "datasets" / "tests" / "data" / "openml" / dataset
    files = sorted(folder.glob("data-*.arff.gz"))
    if not files:
        pytest.skip(f"scikit-learn does not ship the ARFF data of {dataset}")
    names: list[str] = []
    rows: list[str] = []
    with gzip.open(files[0], "rt", encoding="utf-8") as lines:
        in_data = False
        for line in lines:
            if in_data:
                if line.strip() and not line.startswith("%"):
                    rows.append(line)
            elif line.lower().startswith("@attribute"):
                names.append(line.split(None, 2)[1].strip("'"))
            elif line.lower().startswith("@data"):
                in_data = True
    path = tmp / f"{dataset}.csv"
    path.write_text("".join(rows), encoding="utf-8")
    columns = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    connection = duckdb.connect()
    try:
        return connection.sql(
            f"SELECT * FROM read_csv('{path}', header = false, names = [{columns}], "
            "nullstr = '?', quote = '\"')"
        ).to_arrow_table()
    finally:
        connection.close()


@pytest.fixture(scope="session")
def openml_table(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    """``openml_table(dataset)``: see :func:`read_openml_arff`."""
    return lambda dataset: read_openml_arff(dataset, tmp_path_factory.mktemp(dataset))


def idx_bytes(array: Any, type_code: int = 0x08, dtype: str = ">u1") -> bytes:
    """``array`` as the bytes of an IDX file with element type ``type_code`` (``dtype``)."""
    array = np.asarray(array)
    header = bytes([0, 0, type_code, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    return header + np.asarray(array, dtype=dtype).tobytes()


def write_idx(path: Path, array: Any, **kwargs: Any) -> None:
    """``array`` as an IDX file at ``path`` (gzipped when its suffix is ``.gz``)."""
    data = idx_bytes(array, **kwargs)
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)


#: The browser window of ``chromium`` (its screenshots have this size).
BROWSER_WINDOW = (1500, 1000)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by selenium (a ``WebDriver``), shared by the session.

    Debian's ``chromium`` and ``chromium-driver`` (installed by ``make browser-tools``, which
    ``make test`` runs); the test skips, saying so, where they are not installed. Nothing is
    downloaded: the driver is the system's, so selenium's own driver manager never runs.
    """
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip(
            "Chromium is not installed (make browser-tools installs Debian's chromium and "
            "chromium-driver, as root)"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    width, height = BROWSER_WINDOW
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    session = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield session
    finally:
        session.quit()


#: The numeric columns of the ``iris_csv`` file.
IRIS_COLUMNS = ("sepal_length", "sepal_width", "petal_length", "petal_width")


@pytest.fixture(scope="session")
def iris_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn's iris (the 150 flowers it ships) as ``iris.csv``: four measurements in cm
    (:data:`IRIS_COLUMNS`) and the ``species`` as text, in the file's order."""
    from sklearn.datasets import load_iris

    iris = load_iris()
    path = tmp_path_factory.mktemp("iris") / "iris.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*IRIS_COLUMNS, "species"])
        for row, target in zip(iris.data.tolist(), iris.target.tolist(), strict=True):
            writer.writerow([*row, iris.target_names[target]])
    return path


#: Largest difference of one colour channel between two screenshots of the same page.
SAME_PIXEL = 40


def same_picture(old: bytes, new: bytes) -> bool:
    """Whether two PNG screenshots show the same page (anti-aliasing differs run to run)."""
    from PIL import Image, ImageChops

    with Image.open(io.BytesIO(old)) as first, Image.open(io.BytesIO(new)) as second:
        if first.size != second.size:
            return False
        difference = ImageChops.difference(first.convert("RGB"), second.convert("RGB"))
        return max(high for _, high in difference.getextrema()) <= SAME_PIXEL


def keep_screenshot(path: Path, png: bytes) -> None:
    """Write ``png`` to ``path`` unless the file already shows the same page, so that a run
    leaves no new binary in the checkout for nothing."""
    if not (path.exists() and same_picture(path.read_bytes(), png)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)


def random_aggregate_program(rows: int, grouping_sets: int, compute: int, seed: int = 0) -> Any:
    """``COUNT(*), AVG(x)`` by ``grouping_sets`` single-column grouping sets of random keys (3
    per compute node each), over ``rows`` sources, with ``compute`` compute nodes."""
    from dpcomm.data import table_from_arrays
    from dpcomm.queries.aggregate import AggregateProgram

    rng = np.random.default_rng(seed)
    columns = {f"g{i}": rng.integers(0, 3 * compute, rows) for i in range(grouping_sets)}
    columns["x"] = rng.normal(size=rows)
    sets = ", ".join(f"(g{i})" for i in range(grouping_sets))
    sql = f"SELECT COUNT(*), AVG(x) FROM t GROUP BY GROUPING SETS ({sets})"
    return AggregateProgram.from_sql(sql, table_from_arrays("t", columns), num_targets=compute)


@pytest.fixture
def aggregate_program() -> Callable[..., Any]:
    """``aggregate_program(rows, grouping_sets, compute, seed=0)``: see
    :func:`random_aggregate_program`."""
    return random_aggregate_program


def clustered_kmeans_program(rows: int, centroids: int, iterations: int, seed: int = 0) -> Any:
    """K-means of ``centroids`` centroids and ``iterations`` iterations over ``rows`` points in
    four clusters of the plane."""
    from dpcomm.queries.kmeans import KMeansProgram

    rng = np.random.default_rng(seed)
    points = rng.normal(size=(rows, 2)) + rng.integers(0, 4, (rows, 1)) * 3.0
    return KMeansProgram(points, centroids, iterations, seed=seed)


@pytest.fixture
def kmeans_program() -> Callable[..., Any]:
    """``kmeans_program(rows, centroids, iterations)``: see :func:`clustered_kmeans_program`."""
    return clustered_kmeans_program


@pytest.fixture
def plan_for() -> Callable[..., Any]:
    """``plan_for(sources=, targets=, clusters=, workload=)``: the program's own plan (an
    Aggregate of :func:`random_aggregate_program` or a K-means of
    :func:`clustered_kmeans_program`)."""

    def plan(*, sources: int, targets: int, clusters: int, workload: str) -> Any:
        if workload == "aggregate":
            program = random_aggregate_program(sources, clusters, targets)
        else:
            program = clustered_kmeans_program(sources, targets, clusters)
        return program.plan

    return plan


def canonical(value: object) -> object:
    """A value for bit-exact comparison (``canonical(a) == canonical(b)``), with its type:
    floats by their bits (NaNs by theirs, payload and sign included), Decimals by their digits
    and exponent, datetimes with their zone, numpy arrays by dtype, shape and bytes; tuples,
    lists and dicts (keys in any order) value by value."""
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    if isinstance(value, Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, datetime.datetime):
        return ("datetime", value, value.tzinfo, value.utcoffset())
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, tuple):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return (type(value).__name__, value)


def same(a: object, b: object, *, rel_tol: float = 0.0) -> bool:
    """Equal values of the same types, as :func:`canonical` compares them, except that any NaN
    is the same as any other, dicts have their keys in the same order and, with ``rel_tol``,
    floats are the same within that relative tolerance (``math.isclose``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if rel_tol:
            return math.isclose(a, b, rel_tol=rel_tol)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            same(x, y, rel_tol=rel_tol) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k], rel_tol=rel_tol) for k in a)
    return canonical(a) == canonical(b)


def canonical_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Result rows in one order whatever their own (for a multiset comparison): sorted by their
    values, NaNs then NULLs last, floats and Decimals rounded to 6 decimals so that two results
    that differ only by float rounding sort alike."""

    def key(row: dict[str, object]) -> tuple[tuple[int, Any], ...]:
        parts: list[tuple[int, Any]] = []
        for value in row.values():
            if value is None:
                parts.append((2, 0))
            elif isinstance(value, float | Decimal) and math.isnan(value):
                parts.append((1, 0))
            elif isinstance(value, float | Decimal):
                parts.append((0, round(float(value), 6)))
            else:
                parts.append((0, value))
        return tuple(parts)

    return sorted(rows, key=key)


#: The released query of the release-estimate tests.
RELEASE_SQL = "SELECT k, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS m FROM t GROUP BY k"


def release_table() -> Any:
    """300 rows: keys a, b, c (probabilities 0.5, 0.3, 0.2), values uniform in [0, 10]."""
    from dpcomm.data import table_from_arrays

    rng = np.random.default_rng(0)
    keys = rng.choice(np.array(["a", "b", "c"], dtype=object), 300, p=[0.5, 0.3, 0.2])
    return table_from_arrays("t", {"k": keys, "v": rng.uniform(0.0, 10.0, 300)})


def release_sampling() -> Any:
    """σ = 0.6 over T = 4 compute nodes: each tuple arrives with P = 1 − σ + σ/T = 0.55."""
    import dpcomm

    return dpcomm.Scramblers(sampling_rate=0.6, batch_size=50, num_dummies=2)


def released_program(table: Any, sql: str = RELEASE_SQL, release: Any = None) -> Any:
    """``sql`` over ``table`` on T = 4, released with ``release`` (Laplace ε2 = 2), v in [0, 10]."""
    import dpcomm
    from dpcomm.release.noise import noisy_program

    return noisy_program(
        sql, table, num_targets=4, release=release or dpcomm.Laplace(2.0),
        bounds={"v": (0.0, 10.0)} if "(v)" in sql else None, keys={"k": ["a", "b", "c"]},
    )  # fmt: skip


#: Dask settings of the test processes and of what they start (environment variables: the
#: worker processes of a LocalCluster, `dask scheduler`, `dask worker` and ``dpcomm`` inherit
#: them). By default every worker samples its threads' stacks every 10 ms (the dashboard's
#: profile), every process times its event loop every 20 ms and the scheduler and nannies read
#: the system's and workers' memory 2 and 10 times a second: an idle 2-worker LocalCluster
#: spent 2.2 s of CPU per 20 s doing so, 0.3 s with these. Nothing a test asserts reads them.
QUIET_DASK = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}


def pytest_configure(config: pytest.Config) -> None:
    """Collect young objects every 10,000 allocations rather than 700 (the older generations
    every 10 young collections, as by default): the same garbage found, far fewer walks of a
    large heap. Dask's monitoring as :data:`QUIET_DASK` says (unless the environment sets it)."""
    gc.set_threshold(10_000, 10, 10)
    for variable, value in QUIET_DASK.items():
        os.environ.setdefault(variable, value)
    if "dask" in sys.modules:  # imported before this hook: read the environment again
        sys.modules["dask"].config.refresh()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep what collection built (test modules, parametrizations) out of every later collection."""
    gc.collect()
    gc.freeze()


def ordered_output(sql: str) -> bool:
    """Whether the query orders its output: an ORDER BY outside every parenthesis (not one
    inside an aggregate such as ``STRING_AGG(x, ',' ORDER BY x)``), string literals and
    quoted names aside. Only then is the row order compared."""
    import re

    text = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "''", sql)
    depth = 0
    for token in re.finditer(r"\(|\)|\bORDER\s+BY\b", text, re.IGNORECASE):
        if token.group() == "(":
            depth += 1
        elif token.group() == ")":
            depth -= 1
        elif depth == 0:
            return True
    return False


def written_credentials(configs: Any, pki: Path) -> dict[str, Any]:
    """Each node's credentials as ``dpcomm deploy configs`` writes them under ``pki``."""
    from dpcomm.engine.network.pki import NodeCredentials

    return {
        c.name: NodeCredentials(
            name=c.name,
            cert_path=pki / f"{c.name}.pem",
            key_path=pki / f"{c.name}.key",
            ca_path=pki / "ca.pem",
        )
        for c in configs
    }


def messages_per_target(run: Any, flow: str, counted: Callable[[str], bool]) -> list[int]:
    """Messages each compute node of ``flow`` received in ``run``, in target order (what an
    observer of the traffic counts), over the traffic entries whose flow name ``counted``
    accepts."""
    from dpcomm.plan.routes import Routes

    receiver = run.transformed.plan.flow(flow).receiver
    computes = Routes(run.transformed).node_ids(receiver).tolist()
    received = dict.fromkeys(computes, 0)
    for traffic in run.traffic:
        for node, count in zip(traffic.receivers.tolist(), traffic.counts.tolist(), strict=True):
            if node in received and counted(traffic.flow):
                received[node] += count
    return [received[node] for node in computes]
