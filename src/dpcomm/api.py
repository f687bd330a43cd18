"""The front door: run an Aggregate query or K-means with countermeasures in a few lines.

Examples:
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpcomm.calibration.calibrate import Calibration as Calibration
from dpcomm.calibration.calibrate import calibrate as calibrate
from dpcomm.calibration.query import query_shape as query_shape
from dpcomm.errors import InvalidParameterError, warn
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES
from dpcomm.validation import (
    MAX_COUNT,
    check_delta,
    check_int,
    check_number,
    check_seed,
)

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.engine.engines import Engine
    from dpcomm.engine.runs import AggregateRun, KMeansRun


#: The whole plan's δ when none is given (every front-door function and CLI command).
DEFAULT_DELTA = 1e-4


#: What ``data`` may be (every error about it says so).
DATA_ALLOWED = (
    "a pandas or polars DataFrame, a pyarrow Table, a DuckDB relation, a CSV/Parquet path, "
    "a dpcomm Table or a row source"
)


def _rows(data: Any, name: str) -> Any:
    """``data`` as dpcomm's table, or as a row source (Parquet files) read only when needed.

    A `dpcomm.data.table.Table` or a `dpcomm.data.partitioned.RowSource` is
    taken as it is; everything else is read through DuckDB (its types). What DuckDB cannot
    read as a table (a pandas Series, a DataFrame without columns, ...) is an
    `dpcomm.errors.InvalidParameterError` naming ``data``.
    """
    from dpcomm.data.partitioned import RowSource
    from dpcomm.data.table import Table

    if isinstance(data, Table | RowSource):
        return data
    import duckdb

    from dpcomm.data import read_table
    from dpcomm.data.table import table_from_relation

    if isinstance(data, str | Path):
        if str(data) == "":
            raise InvalidParameterError("data", "a CSV or Parquet path (not empty)", data)
        path = Path(data)
        if path.is_dir() or path.suffix.lower() == ".parquet":
            from dpcomm.data.partitioned import ParquetRows

            try:
                return ParquetRows(path, name=name)
            except InvalidParameterError as error:  # named after ParquetRows' own parameter
                raise InvalidParameterError("data", error.allowed, data) from error
        return read_table(path, name=name)
    if isinstance(data, duckdb.DuckDBPyRelation):
        return table_from_relation(data, name)
    readers = {
        "pandas": lambda: duckdb.from_df(data),
        "pyarrow": lambda: duckdb.from_arrow(data),
        "polars": lambda: duckdb.from_arrow(data.to_arrow()),
    }
    reader = readers.get(type(data).__module__.split(".")[0])
    if reader is None:
        raise InvalidParameterError("data", DATA_ALLOWED, type(data).__name__)
    try:
        relation = reader()
    except (duckdb.Error, TypeError, ValueError, AttributeError) as error:
        # DuckDB reads DataFrames and Arrow tables, not a Series, an Array, a frame without
        # columns, ...: what it says is kept as the cause.
        raise InvalidParameterError("data", DATA_ALLOWED, type(data).__name__) from error
    return table_from_relation(relation, name)


def _countermeasure(countermeasure: Any) -> Countermeasure:
    if not isinstance(countermeasure, Countermeasure):
        raise InvalidParameterError(
            "countermeasure",
            "dpcomm.NoCountermeasure(), LocalFlooding(...) or Scramblers(...)",
            countermeasure,
        )
    return countermeasure


def _flag(name: str, value: object) -> bool:
    """``value`` if it is True or False (a truthy DataFrame is not)."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(name, "True or False", value)
    return bool(value)


def _target_epsilon(value: object) -> float | None:
    """``target_epsilon``: None, or a finite number >= 0 (the plan's ε is compared with it)."""
    return None if value is None else check_number("target_epsilon", value, at_least=0.0)


# --------------------------------------------------------------- a budget across queries
#: Engines a budget can charge before they run: each reports a guarantee known beforehand
#: (a deployment's at worst: `dpcomm.engine.network.deploy.deployment_privacy`).
BUDGET_ENGINES = ("memory", "dask", "network")


def _budget(budget: object, engine: Engine) -> Budget | None:
    """``budget``: None or a `dpcomm.budget.Budget`, on an engine it can charge."""
    if budget is None:
        return None
    from dpcomm.budget.budget import Budget

    if not isinstance(budget, Budget):
        raise InvalidParameterError("budget", "None or a dpcomm.Budget(...)", budget)
    if engine.name not in BUDGET_ENGINES:
        raise InvalidParameterError(
            "engine", "'memory', 'dask' or 'network' with a budget", engine.name
        )
    return budget


def _charge(
    budget: Budget | None,
    program: Any,
    countermeasure: Countermeasure,
    *,
    delta: float,
    kind: str,
    query: str,
    engine: Engine,
) -> tuple[float, float] | None:
    """Charge the run's guarantee to ``budget`` before the run (refused: nothing runs).

    [`charge_run`][dpcomm.engine.charge.charge_run]: the plan's guarantee, the one the
    engine computes and the run reports (for a deployment, the weakest its round can report),
    with δ = 0 for traffic that is pure by Theorem 1; recorded with ``query`` (as the analyst
    wrote it), the countermeasure, the release and the engine. Returns the (ε, δ) the run may
    report (None without a budget).
    """
    if budget is None:
        return None
    from dpcomm.engine.charge import charge_run

    charged, _ = charge_run(
        budget,
        program,
        countermeasure,
        delta=delta,
        kind=kind,
        engine=engine.name,
        query=query,
        deployed=engine.name == "network",
    )
    return charged.reported_epsilon, charged.reported_delta


@dataclass(frozen=True)
class _Spent:
    """An (ε, δ) a run reports spending (the traffic's, or traffic and release composed)."""

    epsilon: float
    delta: float


def _charged_enough(charged: tuple[float, float] | None, privacy: Any) -> None:
    """Check that the run reported no more than its guarantee at its δ, computed with the charge.

    (Else the ledger's charge, derived from that same accounting, could undercount.)
    """
    if charged is not None and (privacy.epsilon > charged[0] or privacy.delta > charged[1]):
        from dpcomm.errors import DpcommError

        raise DpcommError(
            f"the run reports ε = {privacy.epsilon:.6g}, δ = {privacy.delta:.3g}, more than the "
            f"ε = {charged[0]:.6g}, δ = {charged[1]:.3g} accounted when its budget was charged "
            "before it ran"
        )


# ------------------------------------------------------------ end of a budget across queries
def _calibrated(
    countermeasure: object,
    *,
    num_targets: int | None,
    delta: float | None,
    target_epsilon: object,
) -> tuple[Countermeasure, int, float, float | None]:
    """The countermeasure, T, δ and target ε of a run: a calibration's, unless given.

    A `Calibration` gives its countermeasure, its T and δ (where the call gives none)
    and its target ε (the smaller, when the call gives one too).
    """
    target = _target_epsilon(target_epsilon)
    if isinstance(countermeasure, Calibration):
        num_targets = countermeasure.shape.num_targets if num_targets is None else num_targets
        delta = countermeasure.delta if delta is None else delta
        planned = countermeasure.target_epsilon
        target = planned if target is None else min(target, planned)
        chosen = countermeasure.countermeasure
    else:
        chosen = _countermeasure(countermeasure)
    targets = DEFAULT_NUM_TARGETS if num_targets is None else num_targets
    # The plan's δ (a run is always accounted).
    checked = check_delta("delta", DEFAULT_DELTA if delta is None else delta)
    return chosen, targets, checked, target


def run_sql(
    sql: str,
    data: Any,
    *,
    countermeasure: Countermeasure | Calibration,
    num_targets: int | None = None,
    delta: float | None = None,
    seed: int | None = None,
    engine: str | Engine = "memory",
    max_groups: int | None = None,
    max_text_bytes: int = DEFAULT_TEXT_BYTES,
    estimate: str = "delivered",
    progress: bool = False,
    target_epsilon: float | None = None,
    budget: Budget | None = None,
    release: Any = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    keys: Mapping[str, Sequence[Any]] | None = None,
    key_selection_delta: float | None = None,
) -> AggregateRun:
    """Run an Aggregate query (GROUP BY, GROUPING SETS, ROLLUP, CUBE) decentralized.

    Every row of ``data`` is a source node (a pandas or polars DataFrame, a pyarrow Table, a
    DuckDB relation, a CSV or Parquet path, a `dpcomm.data.table.Table`, or a
    [`RowSource`][dpcomm.data.partitioned.RowSource] that an engine reading row sources, such as
    ``engine="dask"``, reads partition by partition). Each non-empty grouping set's keys are
    split among ``num_targets`` (T) compute nodes; ``countermeasure`` protects every
    data-dependent cluster; ``delta`` is the whole plan's δ. ``engine``: ``"memory"``,
    ``"dask"``, ``"network"`` or an engine object
    ([`make_engine`][dpcomm.engine.engines.make_engine]). ``max_groups`` and ``max_text_bytes`` are
    public bounds every output and text field is padded to. ``progress`` shows a progress bar.
    ``num_targets`` defaults to 20 and ``delta`` to 10⁻⁴ (or the calibration's). ``budget``
    (a [`Budget`][]) is charged the plan's (ε, δ) before the run executes; a
    run beyond it raises [`BudgetExceededError`][] before anything runs.

    ``target_epsilon`` refuses, before anything runs, a plan whose ε exceeds it
    ([`InvalidParameterError`][]). ``countermeasure`` may be a
    [`Calibration`][] ([`calibrate`][]): its countermeasure runs, with its T and δ unless
    given, and its target ε is the ``target_epsilon``; on a table of another size or a query
    of another shape than it was made for (`Calibration.shape`) the plan is accounted
    again and refused (naming ``countermeasure``) if its ε exceeds the calibration's target.
    A calibration made with a release (``calibrate(..., release=...)``) releases with its
    mechanism, bounds and keys unless the call gives them. With a release, ``target_epsilon``
    (or the calibration's) refuses a run whose ε against an observer of traffic and release
    (``report.release.epsilon_total``) exceeds it.

    The result's values are exact over the tuples that arrived (not differentially private:
    the countermeasures hide the traffic). With ``estimate="unbiased"`` they are estimates
    over every tuple ([`dpcomm.engine.estimate`][]): COUNT and SUM divided by the known
    probability P that a tuple arrives, AVG their ratio, each in a column
    ``<name> (estimate)`` with ``<name> (se)``, ``<name> (95% low)`` and
    ``<name> (95% high)`` beside it; groups of the table that received no tuple are
    estimated as 0; MIN and MAX stay those of the delivered tuples. The report then
    describes the estimates (``report.estimate``, ``report.result_semantics``, and the
    utility's errors are the estimates').

    With ``release=dpcomm.Laplace(epsilon=...)`` or ``dpcomm.Gaussian(epsilon=...,
    delta=...)`` the result node releases the result with noise drawn by OpenDP
    ([`dpcomm.queries.release`][]): ``bounds`` clamp each column a SUM or AVG reads
    (``{"body_mass_g": (2500, 6500)}``, on each source's row), ``keys`` give grouping
    columns their public domains (every key released, absent ones too), and
    ``report.release`` gives the release's (ε, δ), each aggregate's noise and the guarantee
    against an observer of both traffic and release. Grouping sets with a column without a
    domain need ``key_selection_delta`` (δ_sel, e.g. 1e-6): their keys are those whose
    noisy count passes a threshold of OpenDP's (``report.release.key_selection``), and
    δ_sel is part of the release's δ. With ``estimate="unbiased"`` the released values are
    estimated over every tuple, from released values only, each interval covering both the
    sampling's and the noise's errors ([`dpcomm.engine.estimate.released_estimate`][]); an
    AVG's interval is withheld where it would not be reliable, its column
    ``<name> (no interval)`` saying why (NULL where the interval is given).
    Returns the
    [`dpcomm.engine.runs.AggregateRun`][] that ``dpcomm run aggregate`` prints:
    ``result`` (a DataFrame), ``rows``, ``report``.

    Examples:
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
        AggregateRun(3 rows × 2 columns; ε = inf at δ = 0.0001 (...), 200 of 200 rows used, ...)
    """
    from dpcomm.data.table import Table
    from dpcomm.engine.engines import make_engine
    from dpcomm.engine.runs import run_aggregate
    from dpcomm.queries.aggregate import AggregateProgram

    chosen, num_targets, delta, target_epsilon = _calibrated(
        countermeasure, num_targets=num_targets, delta=delta, target_epsilon=target_epsilon
    )
    if isinstance(countermeasure, Calibration) and countermeasure.release is not None:
        release = countermeasure.release if release is None else release
        bounds = countermeasure.bounds if bounds is None else bounds
        keys = countermeasure.keys if keys is None else keys
        if key_selection_delta is None:
            key_selection_delta = countermeasure.key_selection_delta
    if not isinstance(estimate, str) or estimate not in ("delivered", "unbiased"):
        raise InvalidParameterError("estimate", "'delivered' or 'unbiased'", estimate)
    progress = _flag("progress", progress)
    runner = make_engine(engine)
    budget = _budget(budget, runner)
    source = _rows(data, "data")
    shape: dict[str, Any] = {
        "num_targets": num_targets,
        "max_groups": max_groups,
        "max_text_bytes": max_text_bytes,
        "release": _release(release),
        "bounds": bounds,
        "keys": keys,
        "key_selection_delta": key_selection_delta,
    }
    if not isinstance(source, Table) and not runner.reads_row_sources:
        source = source.read(0, source.num_rows)  # else its workers read it, never this process
    program = AggregateProgram.from_sql(sql, source, countermeasure=chosen, **shape)
    if isinstance(countermeasure, Calibration):
        countermeasure.check_plan(program.plan, workload="aggregate", delta=delta)
    _refuse_release_above_target(program, chosen, delta=delta, target_epsilon=target_epsilon)
    charged = _charge(
        budget,
        program,
        chosen,
        delta=delta,
        kind="aggregate",
        query=sql,
        engine=runner,
    )
    outcome = run_aggregate(
        program,
        chosen,
        delta=delta,
        seed=seed,
        progress=progress,
        engine=runner,
        target_epsilon=target_epsilon,
    )
    release_report = outcome.report.release
    _charged_enough(
        charged,
        outcome.report.privacy
        if release_report is None
        else _Spent(release_report.epsilon_total, release_report.composed_delta),
    )
    return outcome.with_unbiased_estimate() if estimate == "unbiased" else outcome


def _refuse_release_above_target(
    program: Any, countermeasure: Countermeasure, *, delta: float, target_epsilon: float | None
) -> None:
    """Refuse, before anything runs, a release whose ε with the traffic's exceeds the target.

    The guarantee against an observer of traffic and release, as the run reports it
    ([`dpcomm.plan.privacy.compose_release`][] of the plan's guarantee at ``delta``): an
    [`InvalidParameterError`][] naming ``target_epsilon``.
    """
    if program.release is None or target_epsilon is None:
        return
    from dpcomm.plan.privacy import account_plan, compose_release

    both = compose_release(
        account_plan(program.plan, countermeasure, delta=delta), program.release.noises
    )
    if both.epsilon > target_epsilon:
        raise InvalidParameterError(
            "target_epsilon",
            f"at least the ε = {both.epsilon:.6g} at δ = {both.delta:g} of traffic and release "
            "together (nothing ran)",
            target_epsilon,
        )


#: Largest magnitude of a coordinate: points travel as float32 (`dpcomm.queries.kmeans`).
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _release(release: Any) -> Any:
    """``release`` checked: None, `Laplace` or `Gaussian`."""
    from dpcomm.accounting.release import Gaussian, Laplace

    if release is None or isinstance(release, Laplace | Gaussian):
        return release
    raise InvalidParameterError(
        "release", "dpcomm.Laplace(epsilon=...) or dpcomm.Gaussian(epsilon=..., delta=...)", release
    )


def _points(name: str, values: Any) -> npt.NDArray[np.float64]:
    """``values`` as a non-empty 2-d float64 array (one row per point), or the error naming it."""
    allowed = "a non-empty 2-d array of numbers (one row per point)"
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as error:
        raise InvalidParameterError(name, allowed, values) from error
    if array.ndim != 2 or 0 in array.shape:
        raise InvalidParameterError(name, allowed, f"shape {array.shape}")
    return array


def _unusable_rows(array: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.bool_], int, int]:
    """Rows holding NaN or ±inf, or a value float32 cannot hold; how many of each."""
    non_finite = ~np.isfinite(array).all(axis=1)
    too_large = np.zeros(len(array), dtype=bool)
    finite_rows = ~non_finite
    too_large[finite_rows] = (np.abs(array[finite_rows]) > FLOAT32_MAX).any(axis=1)
    return non_finite | too_large, int(non_finite.sum()), int(too_large.sum())


def _usable(
    name: str, array: npt.NDArray[np.float64], *, drop: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The rows of ``array`` K-means can use, and which they are.

    A row with NaN or ±inf, or with a value beyond float32's range (points travel as float32:
    it would become ±inf), is refused, or dropped with a warning saying how many when
    ``drop`` (``drop_non_finite=True``).
    """
    unusable, non_finite, too_large = _unusable_rows(array)
    if not unusable.any():
        return array, ~unusable
    found = " and ".join(
        text
        for count, text in (
            (non_finite, f"{non_finite:,} rows with NaN or inf"),
            (too_large, f"{too_large:,} rows with a value beyond float32's range"),
        )
        if count
    )
    allowed = (
        f"finite numbers within float32's range (|x| <= {FLOAT32_MAX:.7g}); "
        "drop_non_finite=True drops the rows that are not"
    )
    if not drop:
        raise InvalidParameterError(name, allowed, f"{found} (of {len(array):,})")
    if unusable.all():
        raise InvalidParameterError(name, "at least one row of finite numbers", found)
    use = {
        "points": "K-means runs on",
        "init_points": "the initial centroids are chosen among",
    }.get(name, "the Rand index is measured on")
    warn(
        f"dropped {int(unusable.sum()):,} of {len(array):,} {name.replace('_', ' ')} ({found}): "
        f"{use} the other {int((~unusable).sum()):,}"
    )
    return array[~unusable], ~unusable


def _label_codes(name: str, labels: Any, count: int, what: str) -> npt.NDArray[np.int64]:
    """One integer code per label: labels of any kind that sort (numbers, strings).

    The Rand index only asks whether two points share a label, so the codes (the labels'
    ranks) give the same index as the labels.
    """
    allowed = f"one label per {what} ({count:,}): numbers or strings"
    try:
        values = np.asarray(labels).reshape(-1)
        if values.dtype.kind == "O" and not all(isinstance(v, str | Real) for v in values):
            raise TypeError("labels of another kind than numbers and strings")
        _, codes = np.unique(values, return_inverse=True)
    except (TypeError, ValueError) as error:  # ragged, or text and numbers mixed in objects
        raise InvalidParameterError(name, allowed, labels) from error
    if len(values) != count:
        raise InvalidParameterError(name, allowed, f"{len(values):,} labels")
    return np.asarray(codes, dtype=np.int64).reshape(-1)


def kmeans(
    points: npt.ArrayLike,
    *,
    k: int,
    iterations: int,
    countermeasure: Countermeasure | Calibration,
    labels: npt.ArrayLike | None = None,
    test_points: npt.ArrayLike | None = None,
    test_labels: npt.ArrayLike | None = None,
    seed: int | None = None,
    delta: float | None = None,
    engine: str | Engine = "memory",
    start_seed: int = 0,
    progress: bool = False,
    target_epsilon: float | None = None,
    drop_non_finite: bool = False,
    budget: Budget | None = None,
    init: str = "random",
    init_points: npt.ArrayLike | None = None,
) -> KMeansRun:
    """K-means over ``points`` (one source per row), one cluster of the plan per iteration.

    K = ``k`` centroids (and compute nodes per iteration, at most one per point),
    I = ``iterations`` (at most 10^6). ``seed`` chooses the run's draws. With ``labels`` (one
    per point, numbers or strings), ``rand_index``, ``adjusted_rand_index`` and
    ``normalized_mutual_info`` compare the final clusters with them; with ``test_points`` and
    ``test_labels`` (a held-out labelled set, as ``dpcomm run kmeans`` uses), they are measured
    on those instead. ``engine``, ``delta``, ``progress``, ``target_epsilon`` and ``budget`` are
    those of [`run_sql`][], and ``countermeasure`` may be a [`Calibration`][] as there
    (made by ``calibrate(data=points, iterations=I, num_targets=K, ...)``). Returns the
    [`KMeansRun`][] that ``dpcomm run kmeans`` prints.

    The K initial centroids are chosen once, by ``start_seed``, before anything runs (every
    engine starts from the same ones): ``init="random"`` (K distinct points drawn uniformly,
    the paper's start) or ``init="k-means++"`` (D² seeding), among ``init_points`` when given
    (public points of the same dimension; K of them given as ``init_points`` with
    ``init="random"`` are the initial centroids, in their order), else among ``points``. Every
    node receives the initial centroids, so chosen among ``points`` they are K sources' points
    released as they are, and k-means++ also reads every point to choose them: the privacy
    report then says that its guarantee does not cover them (a caveat). Chosen among public
    ``init_points`` they reveal nothing about the sources.

    Points travel as float32: a row with NaN or ±inf, or with a value beyond float32's range
    (about ±3.4e38), is refused ([`InvalidParameterError`][] saying how many
    rows); with ``drop_non_finite=True`` such rows of ``points`` and ``test_points`` are dropped
    with their labels, and a `dpcomm.errors.DpcommWarning` says how many.

    Examples:
        >>> import numpy as np, dpcomm
        >>> points = np.vstack([np.zeros((50, 2)), np.ones((50, 2)) * 10])
        >>> run = dpcomm.kmeans(points, k=2, iterations=2, seed=1, labels=[0] * 50 + [1] * 50,
        ...                     countermeasure=dpcomm.NoCountermeasure())
        >>> run.rand_index
        1.0
        >>> sorted(run.centroids[:, 0].tolist())
        [0.0, 10.0]
        >>> run.assignments[:3].tolist(), run.assignments[-3:].tolist()
        ([0, 0, 0], [1, 1, 1])
        >>> run  # doctest: +ELLIPSIS
        KMeansRun(2 centroids in dimension 2, Rand index 1.0000, adjusted 1.0000; ε = inf ...)
    """
    from dpcomm.engine.engines import make_engine
    from dpcomm.engine.runs import run_kmeans
    from dpcomm.queries.kmeans import INIT_METHODS, KMeansProgram, choose_initial_centroids

    chosen, _, delta, target_epsilon = _calibrated(
        countermeasure, num_targets=None, delta=delta, target_epsilon=target_epsilon
    )
    drop = _flag("drop_non_finite", drop_non_finite)
    progress = _flag("progress", progress)
    iterations = check_int("iterations", iterations, minimum=1, maximum=MAX_COUNT)
    start_seed = check_seed(start_seed, name="start_seed")
    runner = make_engine(engine)
    budget = _budget(budget, runner)
    array = _points("points", points)
    truth: npt.NDArray[np.int64] | None = None
    if labels is not None:
        truth = _label_codes("labels", labels, len(array), "point")
    array, kept = _usable("points", array, drop=drop)
    k = check_int("k", k, minimum=1)
    if k > len(array):
        raise InvalidParameterError("k", f"an integer in [1, {len(array):,}] (the points)", k)
    if not isinstance(init, str) or init not in INIT_METHODS:
        raise InvalidParameterError("init", " or ".join(repr(m) for m in INIT_METHODS), init)
    initial = None
    if init_points is not None:
        pool = _points("init_points", init_points)
        if pool.shape[1] != array.shape[1]:
            raise InvalidParameterError(
                "init_points", f"points of dimension {array.shape[1]}", f"shape {pool.shape}"
            )
        pool, _ = _usable("init_points", pool, drop=drop)
        if k > len(pool):
            raise InvalidParameterError(
                "k", f"an integer in [1, {len(pool):,}] (the init_points)", k
            )
        initial = choose_initial_centroids(pool, k, init=init, seed=start_seed)
    program = KMeansProgram(
        array,
        k,
        iterations,
        seed=start_seed,
        initial=initial,
        init=init,
        init_public=initial is not None,
    )
    if isinstance(countermeasure, Calibration):
        if countermeasure.release is not None:
            raise InvalidParameterError(
                "countermeasure",
                "a calibration without a release (K-means releases no aggregates)",
                countermeasure,
            )
        countermeasure.check_plan(program.plan, workload="kmeans", delta=delta)
    tested: npt.NDArray[np.float64] | None = None
    if (test_points is None) != (test_labels is None):
        missing = "test_labels" if test_labels is None else "test_points"
        raise InvalidParameterError(missing, "given with the other (a labelled test set)", None)
    if test_points is not None and test_labels is not None:
        tested = _points("test_points", test_points)
        if tested.shape[1] != array.shape[1]:
            raise InvalidParameterError(
                "test_points", f"points of dimension {array.shape[1]}", f"shape {tested.shape}"
            )
        truth = _label_codes("test_labels", test_labels, len(tested), "test point")
        tested, kept_tests = _usable("test_points", tested, drop=drop)
        truth = truth[kept_tests]
    elif truth is not None:
        tested, truth = array, truth[kept]
    described = f"K-means: k = {k}, {iterations} iterations, {array.shape[0]:,} points of "
    described += f"dimension {array.shape[1]}, start_seed = {start_seed}"
    if init != "random" or initial is not None:
        described += f", init = {init}" + (" among public points" if initial is not None else "")
    charged = _charge(
        budget, program, chosen, delta=delta, kind="kmeans", query=described, engine=runner
    )
    outcome = run_kmeans(
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
    _charged_enough(charged, outcome.report.privacy)
    return outcome
