"""The front door: run an Aggregate query or K-means with countermeasures in a few lines.

>>> import dpcomm
>>> from dpcomm import datasets
>>> people = datasets.synthetic(rows=2000, seed=1)
>>> run = dpcomm.run_sql(
...     "SELECT g1, COUNT(*) FROM people GROUP BY g1",
...     people,
...     countermeasure=dpcomm.Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=20),
...     seed=7,
... )
>>> list(run.result.columns)
['g1', 'count_star()']
>>> round(run.report.privacy.epsilon, 3) == round(run.report.to_dict()["privacy"]["epsilon"], 3)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure


@dataclass(frozen=True)
class Privacy:
    """The plan's guarantee: (ε, δ) for the whole execution, its method and a lower bound."""

    epsilon: float
    delta: float
    method: str
    lower_bound: float | None


@dataclass(frozen=True, eq=False)
class Report:
    """A run's report, typed: ``privacy``, ``utility``, ``efficiency``; ``to_dict()`` for JSON."""

    privacy: Privacy
    utility: Mapping[str, Any]
    efficiency: Mapping[str, Any]
    document: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The report as the CLI's ``--json`` prints it (JSON-ready: ∞ is ``"inf"``)."""
        from dpcomm.cli.execute import json_ready

        ready: dict[str, Any] = json_ready(dict(self.document))
        return ready


def _report(document: Mapping[str, Any]) -> Report:
    privacy = document["privacy"]

    def number(value: Any) -> float:
        return float("inf") if value == "inf" else float(value)

    lower = privacy.get("epsilon_lower_bound")
    return Report(
        Privacy(
            number(privacy["epsilon"]),
            float(privacy["delta"]),
            str(privacy["method"]),
            None if lower is None else number(lower),
        ),
        document.get("utility", {}),
        document.get("efficiency", {}),
        document,
    )


@dataclass(frozen=True, eq=False)
class SqlRun:
    """An Aggregate run: ``result`` (a pandas DataFrame, DuckDB's column names), ``report``.

    The DataFrame is built as pandas builds one from rows (an integer column with NULLs
    becomes float with NaN, as DuckDB's ``.df()`` does); ``outcome.result`` keeps the exact
    Python values (None for NULL, Decimal, dates).
    """

    result: Any
    report: Report
    outcome: Any


@dataclass(frozen=True, eq=False)
class KMeansRun:
    """A K-means run: ``centroids``, ``assignments``, ``rand_index`` (with labels), ``report``."""

    centroids: npt.NDArray[np.float64]
    assignments: npt.NDArray[np.int64]
    rand_index: float | None
    report: Report
    outcome: Any


def _engine(engine: Any) -> Any:
    if engine is None or engine == "memory":
        return None
    if engine == "dask":
        from dpcomm.engine.dask_engine import DaskEngine

        return DaskEngine()
    if hasattr(engine, "execute"):
        return engine
    raise InvalidParameterError("engine", "'memory', 'dask' or an engine object", engine)


def _table(data: Any, name: str) -> Any:
    """``data`` as dpcomm's table, read through DuckDB (its types)."""
    import duckdb

    from dpcomm.data import read_table
    from dpcomm.data.table import table_from_relation

    if isinstance(data, str | Path):
        path = Path(data)
        if path.is_dir() or path.suffix.lower() == ".parquet":
            from dpcomm.data.partitioned import ParquetRows

            rows = ParquetRows(path, name=name)
            return rows.read(0, rows.num_rows)
        return read_table(path, name=name)
    if isinstance(data, duckdb.DuckDBPyRelation):
        return table_from_relation(data, name)
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return table_from_relation(duckdb.from_df(data), name)
    if module == "pyarrow":
        return table_from_relation(duckdb.from_arrow(data), name)
    if module == "polars":
        return table_from_relation(duckdb.from_arrow(data.to_arrow()), name)
    raise InvalidParameterError(
        "data",
        "a pandas or polars DataFrame, a pyarrow Table, a DuckDB relation or a CSV/Parquet path",
        type(data).__name__,
    )


def run_sql(
    sql: str,
    data: Any,
    *,
    countermeasure: Countermeasure,
    compute_nodes: int = 20,
    delta: float = 1e-4,
    seed: int | None = None,
    engine: Any = "memory",
    max_groups: int | None = None,
    max_text_bytes: int = 255,
) -> SqlRun:
    """Run an Aggregate query (GROUP BY, GROUPING SETS, ROLLUP, CUBE) decentralized.

    Every row of ``data`` is a source node; ``countermeasure`` protects every data-dependent
    cluster; ``delta`` is the whole plan's δ. The result's values are exact over the tuples
    that arrived (not differentially private: the countermeasures hide the traffic).

    >>> import dpcomm
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"city": ["a", "b", "a", "c"] * 50, "age": range(200)})
    >>> run = dpcomm.run_sql("SELECT city, COUNT(*) FROM frame GROUP BY city", frame,
    ...                      countermeasure=dpcomm.NoCountermeasure(), compute_nodes=2, seed=1)
    >>> run.result.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'city': 'a', 'count_star()': 100}, {'city': 'b', 'count_star()': 50},
     {'city': 'c', 'count_star()': 50}]
    >>> run.report.privacy.epsilon
    inf
    """
    import pandas as pd

    from dpcomm.engine.report import run_aggregate
    from dpcomm.queries.aggregate import AggregateProgram

    if not isinstance(countermeasure, Countermeasure):
        raise InvalidParameterError(
            "countermeasure",
            "dpcomm.NoCountermeasure(), LocalFlooding(...) or Scramblers(...)",
            countermeasure,
        )
    table = _table(data, "data")
    program = AggregateProgram.from_sql(
        sql,
        table,
        num_compute_nodes=compute_nodes,
        max_groups=max_groups,
        max_text_bytes=max_text_bytes,
    )
    outcome = run_aggregate(program, countermeasure, delta=delta, seed=seed, engine=_engine(engine))
    frame = pd.DataFrame(outcome.result, columns=list(program.query.output_names))
    return SqlRun(frame, _report(outcome.report), outcome)


def kmeans(
    points: npt.ArrayLike,
    *,
    k: int,
    iterations: int,
    countermeasure: Countermeasure,
    labels: npt.ArrayLike | None = None,
    seed: int | None = None,
    delta: float = 1e-4,
    engine: Any = "memory",
    start_seed: int = 0,
) -> KMeansRun:
    """K-means over ``points`` (one source per row), one cluster of the plan per iteration.

    ``start_seed`` chooses the K initial centroids among the points; ``seed`` the run's
    draws. With ``labels``, ``rand_index`` compares the final clusters with them.

    >>> import numpy as np, dpcomm
    >>> points = np.vstack([np.zeros((50, 2)), np.ones((50, 2)) * 10])
    >>> run = dpcomm.kmeans(points, k=2, iterations=2, seed=1,
    ...                     countermeasure=dpcomm.NoCountermeasure(), labels=[0] * 50 + [1] * 50)
    >>> run.rand_index
    1.0
    >>> sorted(run.centroids[:, 0].tolist())
    [0.0, 10.0]
    """
    from dpcomm.engine.report import run_kmeans
    from dpcomm.queries.kmeans import KMeansProgram

    array = np.asarray(points, dtype=np.float64)
    program = KMeansProgram(array, k, iterations, seed=start_seed)
    if labels is not None:
        truth = np.asarray(labels, dtype=np.int64).reshape(-1)
        if truth.shape[0] != array.shape[0]:
            raise InvalidParameterError("labels", f"one label per point ({len(array)})", len(truth))
    else:
        truth = np.zeros(len(array), dtype=np.int64)
    outcome = run_kmeans(
        program,
        countermeasure,
        test_points=array,
        test_labels=truth,
        delta=delta,
        seed=seed,
        engine=_engine(engine),
    )
    document = dict(outcome.report)
    if labels is None:
        utility = dict(document["utility"])
        for key in ("test_points", "rand_index", "rand_index_nonprivate"):
            utility.pop(key, None)
        document["utility"] = utility
    assignments = program.assign(outcome.run.state, array.astype(np.float32))
    return KMeansRun(
        np.asarray(outcome.centroids, dtype=np.float64),
        np.asarray(assignments, dtype=np.int64),
        None if labels is None else float(outcome.rand_index),
        _report(document),
        outcome,
    )
