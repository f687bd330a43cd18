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
>>> run.report.privacy.epsilon == run.report.to_dict()["privacy"]["epsilon"]
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpcomm.calibration.configuration import PlanCandidate
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES

if TYPE_CHECKING:
    from dpcomm.engine.engines import Engine
    from dpcomm.engine.runs import AggregateRun, KMeansRun


#: The whole plan's δ when none is given (every front-door function and CLI command).
DEFAULT_DELTA = 1e-4


def _rows(data: Any, name: str) -> Any:
    """``data`` as dpcomm's table, or as a row source (Parquet files) read only when needed.

    A :class:`~dpcomm.data.table.Table` or a :class:`~dpcomm.data.partitioned.RowSource` is
    taken as it is; everything else is read through DuckDB (its types).
    """
    from dpcomm.data.partitioned import RowSource
    from dpcomm.data.table import Table

    if isinstance(data, Table | RowSource):
        return data
    import duckdb

    from dpcomm.data import read_table
    from dpcomm.data.table import table_from_relation

    if isinstance(data, str | Path):
        path = Path(data)
        if path.is_dir() or path.suffix.lower() == ".parquet":
            from dpcomm.data.partitioned import ParquetRows

            return ParquetRows(path, name=name)
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
        "a pandas or polars DataFrame, a pyarrow Table, a DuckDB relation, a CSV/Parquet path, "
        "a dpcomm Table or a row source",
        type(data).__name__,
    )


def _countermeasure(countermeasure: Any) -> Countermeasure:
    if not isinstance(countermeasure, Countermeasure):
        raise InvalidParameterError(
            "countermeasure",
            "dpcomm.NoCountermeasure(), LocalFlooding(...) or Scramblers(...)",
            countermeasure,
        )
    return countermeasure


def run_sql(
    sql: str,
    data: Any,
    *,
    countermeasure: Countermeasure,
    num_targets: int = DEFAULT_NUM_TARGETS,
    delta: float = DEFAULT_DELTA,
    seed: int | None = None,
    engine: str | Engine = "memory",
    max_groups: int | None = None,
    max_text_bytes: int = DEFAULT_TEXT_BYTES,
    estimate: str = "delivered",
    progress: bool = False,
    target_epsilon: float | None = None,
) -> AggregateRun:
    """Run an Aggregate query (GROUP BY, GROUPING SETS, ROLLUP, CUBE) decentralized.

    Every row of ``data`` is a source node (a pandas or polars DataFrame, a pyarrow Table, a
    DuckDB relation, a CSV or Parquet path, a :class:`~dpcomm.data.table.Table`, or a
    :class:`~dpcomm.data.partitioned.RowSource` that an engine reading row sources, such as
    ``engine="dask"``, reads partition by partition). Each non-empty grouping set's keys are
    split among ``num_targets`` (T) compute nodes; ``countermeasure`` protects every
    data-dependent cluster; ``delta`` is the whole plan's δ. ``engine``: ``"memory"``,
    ``"dask"``, ``"network"`` or an engine object
    (:func:`~dpcomm.engine.engines.make_engine`). ``max_groups`` and ``max_text_bytes`` are
    public bounds every output and text field is padded to. ``progress`` shows a progress bar;
    ``target_epsilon`` warns when the plan's ε exceeds it.

    The result's values are exact over the tuples that arrived (not differentially private:
    the countermeasures hide the traffic); with ``estimate="unbiased"`` COUNT and SUM are
    divided by the probability P that a tuple arrives (floats, labelled ``report.estimate``;
    AVG, MIN, MAX unchanged). Returns the :class:`~dpcomm.engine.runs.AggregateRun` that
    ``dpcomm run aggregate`` prints: ``result`` (a DataFrame), ``rows``, ``report``.

    >>> import dpcomm
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"city": ["a", "b", "a", "c"] * 50, "age": range(200)})
    >>> run = dpcomm.run_sql("SELECT city, COUNT(*) FROM frame GROUP BY city", frame,
    ...                      countermeasure=dpcomm.NoCountermeasure(), num_targets=2, seed=1)
    >>> run.result.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'city': 'a', 'count_star()': 100}, {'city': 'b', 'count_star()': 50},
     {'city': 'c', 'count_star()': 50}]
    >>> run.report.privacy.epsilon
    inf
    >>> run  # doctest: +ELLIPSIS
    AggregateRun(3 rows × 2 columns; ε = inf at δ = 0.0001 (...), 200 of 200 tuples used, ...)
    """
    from dpcomm.data.table import Table
    from dpcomm.engine.engines import make_engine
    from dpcomm.engine.runs import run_aggregate
    from dpcomm.queries.aggregate import AggregateProgram

    chosen = _countermeasure(countermeasure)
    if estimate not in ("delivered", "unbiased"):
        raise InvalidParameterError("estimate", "'delivered' or 'unbiased'", estimate)
    runner = make_engine(engine)
    source = _rows(data, "data")
    bounds: dict[str, Any] = {
        "num_targets": num_targets,
        "max_groups": max_groups,
        "max_text_bytes": max_text_bytes,
    }
    if not isinstance(source, Table) and not runner.reads_row_sources:
        source = source.read(0, source.num_rows)  # else its workers read it, never this process
    program = AggregateProgram.from_sql(sql, source, **bounds)
    outcome = run_aggregate(
        program,
        chosen,
        delta=delta,
        seed=seed,
        progress=progress,
        engine=runner,
        target_epsilon=target_epsilon,
    )
    return outcome.with_unbiased_estimate() if estimate == "unbiased" else outcome


def kmeans(
    points: npt.ArrayLike,
    *,
    k: int,
    iterations: int,
    countermeasure: Countermeasure,
    labels: npt.ArrayLike | None = None,
    test_points: npt.ArrayLike | None = None,
    test_labels: npt.ArrayLike | None = None,
    seed: int | None = None,
    delta: float = DEFAULT_DELTA,
    engine: str | Engine = "memory",
    start_seed: int = 0,
    progress: bool = False,
    target_epsilon: float | None = None,
) -> KMeansRun:
    """K-means over ``points`` (one source per row), one cluster of the plan per iteration.

    K = ``k`` centroids (and compute nodes per iteration), I = ``iterations``.
    ``start_seed`` chooses the K initial centroids among the points; ``seed`` the run's
    draws. With ``labels`` (one per point), ``rand_index`` compares the final clusters with
    them; with ``test_points`` and ``test_labels`` (a held-out labelled set, as ``dpcomm run
    kmeans`` uses), it is measured on those instead. ``engine``, ``delta``, ``progress`` and
    ``target_epsilon`` are those of :func:`run_sql`. Returns the
    :class:`~dpcomm.engine.runs.KMeansRun` that ``dpcomm run kmeans`` prints.

    >>> import numpy as np, dpcomm
    >>> points = np.vstack([np.zeros((50, 2)), np.ones((50, 2)) * 10])
    >>> run = dpcomm.kmeans(points, k=2, iterations=2, seed=1,
    ...                     countermeasure=dpcomm.NoCountermeasure(), labels=[0] * 50 + [1] * 50)
    >>> run.rand_index
    1.0
    >>> sorted(run.centroids[:, 0].tolist())
    [0.0, 10.0]
    >>> run.assignments[:3].tolist(), run.assignments[-3:].tolist()
    ([0, 0, 0], [1, 1, 1])
    >>> run  # doctest: +ELLIPSIS
    KMeansRun(2 centroids in dimension 2, Rand index 1.0000; ε = inf at δ = 0.0001 (...), ...)
    """
    from dpcomm.engine.engines import make_engine
    from dpcomm.engine.runs import run_kmeans
    from dpcomm.queries.kmeans import KMeansProgram

    chosen = _countermeasure(countermeasure)
    runner = make_engine(engine)
    array = np.asarray(points, dtype=np.float64)
    program = KMeansProgram(array, k, iterations, seed=start_seed)
    tested: npt.NDArray[np.float64] | None = None
    truth: npt.NDArray[np.int64] | None = None
    if (test_points is None) != (test_labels is None):
        missing = "test_labels" if test_labels is None else "test_points"
        raise InvalidParameterError(missing, "given with the other (a labelled test set)", None)
    if test_points is not None and test_labels is not None:
        tested = np.asarray(test_points, dtype=np.float64)
        truth = np.asarray(test_labels, dtype=np.int64).reshape(-1)
        if tested.ndim != 2 or tested.shape[1:] != array.shape[1:]:
            raise InvalidParameterError(
                "test_points", f"points of dimension {array.shape[1]}", tested.shape
            )
        if truth.shape[0] != tested.shape[0]:
            raise InvalidParameterError(
                "test_labels", f"one label per test point ({len(tested)})", len(truth)
            )
    elif labels is not None:
        tested, truth = array, np.asarray(labels, dtype=np.int64).reshape(-1)
        if truth.shape[0] != array.shape[0]:
            raise InvalidParameterError("labels", f"one label per point ({len(array)})", len(truth))
    return run_kmeans(
        program,
        chosen,
        test_points=tested,
        test_labels=truth,
        delta=delta,
        seed=seed,
        progress=progress,
        engine=runner,
        target_epsilon=target_epsilon,
    )


@dataclass(frozen=True, eq=False, kw_only=True)
class Calibration(PlanCandidate):
    """The cheapest countermeasure meeting (ε, δ) under limits (:func:`calibrate`).

    Attributes:
        countermeasure: the chosen countermeasure, usable as is in :func:`run_sql` or
            :func:`kmeans` on ``sources_recruited`` rows.
        sources_recruited: S_t, the sources to recruit so that ``sources`` tuples are used in
            expectation (Section 2.5); ``extra_consents`` = S_t − S.
        epsilon: the plan's ε with the chosen countermeasure at ``delta`` (what a run reports),
            at most the target.
        delta: the plan's δ.
        network_load_messages: every message of the plan, dummies included.
        max_channels_per_node: the most secure channels of one node (an upper bound).
        extra_consents: S_t − S.
        utility: expected tuples used / S.
        pareto: the Pareto front over (network load, channels, extra consents), one row per
            configuration, cheapest load first (the chosen one is the first row); its ``epsilon``
            is the accountant's for the first row and the target (met) for the others.
        details: the planner's full answer (:class:`dpcomm.calibration.PlannerResult`).

    >>> import dpcomm
    >>> plan = dpcomm.calibrate(sources=1000, num_targets=10, iterations=2, epsilon=2.0,
    ...                         delta=1e-4)
    >>> plan.describe()
    '1 scrambler of n=1000, d=..., sampling σ=...: ε = ... at δ = 0.0001, ... messages, ...'
    >>> plan.pareto[["mechanism", "network_load_messages"]].shape[1]
    2
    """

    pareto: Any
    details: Any

    @property
    def countermeasure(self) -> Countermeasure:
        """The chosen countermeasure."""
        return self.configuration.countermeasure

    @property
    def sources_recruited(self) -> int:
        """S_t, the sources to recruit."""
        return self.num_sources

    def __repr__(self) -> str:
        return f"Calibration({self.describe()})"

    def describe(self) -> str:
        """One line: the configuration, its ε and its costs."""
        return (
            f"{self.details.configuration.describe()}: ε = {self.epsilon:.4g} at δ = "
            f"{self.delta:g}, {self.network_load_messages:,} messages, "
            f"{self.sources_recruited:,} sources recruited"
        )


def _pareto_frame(result: Any) -> Any:
    import pandas as pd

    rows = []
    for candidate in result.pareto:
        configuration = candidate.configuration
        rows.append(
            {
                "mechanism": configuration.mechanism,
                "sampling_rate": configuration.sampling_rate,
                "batch_size": configuration.batch_size,
                "num_scramblers": configuration.num_scramblers,
                "num_dummies": configuration.num_dummies,
                "sources_recruited": candidate.num_sources,
                "epsilon": candidate.epsilon,
                "delta": candidate.delta,
                "network_load_messages": candidate.network_load_messages,
                "max_channels_per_node": candidate.max_channels_per_node,
                "extra_consents": candidate.extra_consents,
                "utility": candidate.utility,
                "description": configuration.describe(),
            }
        )
    frame = pd.DataFrame(rows)
    for column in ("batch_size", "num_scramblers"):
        frame[column] = frame[column].astype("Int64")
    return frame


def calibrate(
    *,
    sources: int,
    num_targets: int,
    epsilon: float,
    delta: float,
    grouping_sets: int | None = None,
    iterations: int | None = None,
    max_channels: int | None = None,
    max_extra_consents: int | None = None,
    min_utility: float | None = None,
    progress: bool = False,
) -> Calibration:
    """The countermeasure of least network load whose plan is (ε, δ)-DP, under limits.

    ``sources`` (S) tuples must be used, by an Aggregate query of ``grouping_sets`` (G,
    default 1) grouping sets over ``num_targets`` (T) compute nodes, or by K-means of
    ``iterations`` (I) with K = ``num_targets`` centroids. Limits: ``max_channels`` per node,
    ``max_extra_consents`` (S_t − S), ``min_utility`` (expected tuples used / S, default 1).
    Searches σ on a 0.01 grid, every number of scramblers and every d
    (:func:`dpcomm.calibration.plan_countermeasures`, exact and valid accounting);
    raises :class:`~dpcomm.DpcommError` naming the limit to relax when none is feasible.

    >>> import dpcomm
    >>> plan = dpcomm.calibrate(sources=1000, num_targets=10, epsilon=1.0, delta=1e-4)
    >>> plan.epsilon <= 1.0, plan.sources_recruited >= 1000
    (True, True)
    >>> plan.countermeasure  # doctest: +ELLIPSIS
    Scramblers(sampling_rate=0.0, batch_size=1000, num_dummies=240, capped=False, ...)
    >>> list(plan.pareto.columns[:5])
    ['mechanism', 'sampling_rate', 'batch_size', 'num_scramblers', 'num_dummies']
    """
    from dpcomm.calibration import plan_countermeasures

    if grouping_sets is None and iterations is None:
        grouping_sets = 1
    result = plan_countermeasures(
        num_sources=sources,
        num_targets=num_targets,
        epsilon=epsilon,
        delta=delta,
        grouping_sets=grouping_sets,
        iterations=iterations,
        max_channels=max_channels,
        max_extra_consents=max_extra_consents,
        min_utility=1.0 if min_utility is None else min_utility,
        progress=progress,
    )
    return Calibration(**result.candidate_fields(), pareto=_pareto_frame(result), details=result)
