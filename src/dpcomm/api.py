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


Targets and calibrations:
    ``target_epsilon`` refuses, before anything runs, a plan whose ε exceeds it
    ([`InvalidParameterError`][]). ``countermeasure`` may be a
    [`Calibration`][dpcomm.Calibration] ([`calibrate`][dpcomm.calibrate]): its countermeasure
    runs, with its T and δ unless given, and its target ε is the ``target_epsilon``; on a
    table of another size or a query of another shape than it was made for
    (`Calibration.shape`) the plan is accounted again and refused (naming
    ``countermeasure``) if its ε exceeds the calibration's target.
    A calibration made with a release (``calibrate(..., release=...)``) releases with its
    mechanism, bounds and keys unless the call gives them. With a release, ``target_epsilon``
    (or the calibration's) refuses a run whose ε against an observer of traffic and release
    (``report.release.epsilon_total``) exceeds it.

Estimates:
    The result's values are exact over the tuples that arrived (not differentially private:
    the countermeasures hide the traffic). With ``estimate="unbiased"`` they are estimates
    over every tuple ([`dpcomm.pipeline.estimate`][]): COUNT and SUM divided by the known
    probability P that a tuple arrives, AVG their ratio, each in a column
    ``<name> (estimate)`` with ``<name> (se)``, ``<name> (95% low)`` and
    ``<name> (95% high)`` beside it; groups of the table that received no tuple are
    estimated as 0; MIN and MAX stay those of the delivered tuples. The report then
    describes the estimates (``report.estimate``, ``report.result_semantics``, and the
    utility's errors are the estimates').

Noisy releases:
    With ``release=dpcomm.Laplace(epsilon=...)`` or ``dpcomm.Gaussian(epsilon=...,
    delta=...)`` the result node releases the result with noise drawn by OpenDP
    ([`dpcomm.release.noise`][]): ``bounds`` clamp each column a SUM or AVG reads
    (``{"body_mass_g": (2500, 6500)}``, on each source's row), ``keys`` give grouping
    columns their public domains (every key released, absent ones too), and
    ``report.release`` gives the release's (ε, δ), each aggregate's noise and the guarantee
    against an observer of both traffic and release. Grouping sets with a column without a
    domain need ``key_selection_delta`` (δ_sel, e.g. 1e-6): their keys are those whose
    noisy count passes a threshold of OpenDP's (``report.release.key_selection``), and
    δ_sel is part of the release's δ. Published counts are non-negative integers (a noisy
    count below 0 is published as 0); ``run.raw_rows`` keeps the raw noisy values, unbiased,
    for sums over many cells. ``consistent_totals=True`` makes ROLLUP and CUBE totals equal
    the sum of their parts (least squares over the released cells,
    [`dpcomm.release.postprocess`][]); both are post-processing, free in privacy. With
    ``estimate="unbiased"`` the released values are
    estimated over every tuple, from released values only, each interval covering both the
    sampling's and the noise's errors ([`dpcomm.pipeline.estimate.released_estimate`][]); an
    AVG's interval is withheld where it would not be reliable, its column
    ``<name> (no interval)`` saying why (NULL where the interval is given).

K-means:
    The K initial centroids are chosen once, by ``start_seed``, before anything runs (every
    engine starts from the same ones): ``init="k-means++"`` (D² seeding, the default: fewer
    empty or split clusters) or ``init="random"`` (K distinct points drawn uniformly, the
    paper's start), among ``init_points`` when given
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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpcomm._kmeans_inputs import compiled_kmeans, kmeans_described, test_set
from dpcomm.calibration.calibrate import Calibration as Calibration, calibrate as calibrate
from dpcomm.calibration.query import query_shape as query_shape
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES
from dpcomm.validation import (
    check_delta,
    check_flag,
    check_number,
)

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.engine.engines import Engine
    from dpcomm.pipeline.job import ReleaseSpec
    from dpcomm.pipeline.runs import AggregateRun, KMeansRun
    from dpcomm.queries.kmeans import KMeansProgram
    from dpcomm.release.mechanisms import Gaussian, Laplace


#: The whole plan's δ when none is given (every front-door function and CLI command).
DEFAULT_DELTA = 1e-4


def _countermeasure(countermeasure: Any) -> Countermeasure:
    if not isinstance(countermeasure, Countermeasure):
        raise InvalidParameterError(
            "countermeasure",
            "dpcomm.NoCountermeasure(), LocalFlooding(...) or Scramblers(...)",
            countermeasure,
        )
    return countermeasure


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
    target = (
        None
        if target_epsilon is None
        else check_number("target_epsilon", target_epsilon, at_least=0.0)
    )
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


def _release_asked(countermeasure: object, release: object, **given: Any) -> ReleaseSpec | None:
    """The release a run makes: the call's, else its calibration's (with its bounds and keys)."""
    from dpcomm.pipeline.job import ReleaseSpec

    if isinstance(countermeasure, Calibration) and countermeasure.release is not None:
        release = countermeasure.release if release is None else release
        calibrated = {
            "bounds": countermeasure.bounds,
            "keys": countermeasure.keys,
            "key_selection_delta": countermeasure.key_selection_delta,
        }
        given = {name: calibrated[name] if v is None else v for name, v in given.items()}
    return ReleaseSpec.of(release, **given)


def _run_flags(estimate: object, progress: object) -> bool:
    """``estimate`` checked ('delivered' or 'unbiased'), and ``progress`` as a flag."""
    if not isinstance(estimate, str) or estimate not in ("delivered", "unbiased"):
        raise InvalidParameterError("estimate", "'delivered' or 'unbiased'", estimate)
    return check_flag("progress", progress)


def _source_for(data: Any, runner: Engine) -> Any:
    """``data`` as a table or row source; read whole unless the engine's workers read it."""
    from dpcomm.data.inputs import table_of
    from dpcomm.data.table import Table

    source = table_of(data, "data")
    if not isinstance(source, Table) and not runner.reads_row_sources:
        source = source.read(0, source.num_rows)  # else its workers read it, never this process
    return source


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
    consistent_totals: bool = False,
) -> AggregateRun:
    """Run an Aggregate query (GROUP BY, GROUPING SETS, ROLLUP, CUBE) decentralized.

    Every row of ``data`` is a source node (a DataFrame, a pyarrow Table, a DuckDB relation, a
    CSV or Parquet path, a `dpcomm.data.table.Table`, or a
    [`RowSource`][dpcomm.data.partitioned.RowSource] an engine such as ``engine="dask"`` reads
    partition by partition). Each grouping set's keys are split among ``num_targets`` (T,
    default 20) compute nodes; ``countermeasure`` protects every data-dependent cluster;
    ``delta`` is the whole plan's δ (default 10⁻⁴); ``engine``: ``"memory"``, ``"dask"``,
    ``"network"`` or an engine object ([`make_engine`][dpcomm.engine.engines.make_engine]);
    ``max_groups`` and ``max_text_bytes`` are public bounds every output is padded to;
    ``budget`` (a [`Budget`][]) is charged before anything runs ([`BudgetExceededError`][]
    beyond it). ``target_epsilon``, a [`Calibration`][] as ``countermeasure``, ``estimate``
    and ``release`` (``bounds``, ``keys``, ``key_selection_delta``): this module's sections.
    Returns the [`dpcomm.pipeline.runs.AggregateRun`][] that ``dpcomm run aggregate`` prints.

    Examples:
        >>> import dpcomm
        >>> import pandas as pd
        >>> frame = pd.DataFrame({"city": ["a", "b", "a", "c"] * 50, "age": range(200)})
        >>> run = dpcomm.run_sql("SELECT city, COUNT(*) FROM frame GROUP BY city", frame,
        ...                      countermeasure=dpcomm.NoCountermeasure(), num_targets=2, seed=1)
        >>> run.result.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
        [{'city': 'a', 'count_star()': 100}, {'city': 'b', 'count_star()': 50},
         {'city': 'c', 'count_star()': 50}]
        >>> run  # doctest: +ELLIPSIS
        AggregateRun(3 rows × 2 columns; ε = inf at δ = 0.0001 (...), 200 of 200 rows used, ...)
    """
    from dpcomm.engine.engines import make_engine
    from dpcomm.pipeline.job import Job, check_budget, compile_aggregate, prepare
    from dpcomm.pipeline.runs import execute_aggregate

    chosen, num_targets, delta, target_epsilon = _calibrated(
        countermeasure, num_targets=num_targets, delta=delta, target_epsilon=target_epsilon
    )
    asked = _release_asked(
        countermeasure,
        release,
        bounds=bounds,
        keys=keys,
        key_selection_delta=key_selection_delta,
        consistent_totals=consistent_totals,
    )
    progress = _run_flags(estimate, progress)
    runner = make_engine(engine)
    budget = check_budget(budget, runner)
    program = compile_aggregate(
        sql,
        _source_for(data, runner),
        release=asked,
        countermeasure=chosen,
        num_targets=num_targets,
        max_groups=max_groups,
        max_text_bytes=max_text_bytes,
    )
    calibration = countermeasure if isinstance(countermeasure, Calibration) else None
    job = Job(program, chosen, delta, runner, "aggregate", sql, seed, progress, target_epsilon)
    job = replace(job, budget=budget, calibration=calibration, estimate=estimate)
    return execute_aggregate(prepare(job))


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
    init: str = "k-means++",
    init_points: npt.ArrayLike | None = None,
    release: Laplace | Gaussian | None = None,
    bounds: Sequence[tuple[float, float]] | None = None,
    columns: Sequence[str] | None = None,
    scale: bool = False,
) -> KMeansRun:
    """K-means over ``points`` (one source per row), one cluster of the plan per iteration.

    K = ``k`` centroids (and compute nodes per iteration, at most one per point),
    I = ``iterations`` (at most 10^6). ``seed`` chooses the run's draws. With ``labels`` (one
    per point, numbers or strings), ``rand_index``, ``adjusted_rand_index`` and
    ``normalized_mutual_info`` compare the final clusters with them; with ``test_points`` and
    ``test_labels`` (a held-out labelled set, as ``dpcomm run kmeans`` uses), they are measured
    on those instead. ``engine``, ``delta``, ``progress``, ``target_epsilon`` and ``budget`` are
    those of [`run_sql`][], and ``countermeasure`` may be a [`Calibration`][] as there
    (made by ``calibrate(data=points, iterations=I, num_targets=K, ...)``). ``start_seed``,
    ``init``, ``init_points`` and ``drop_non_finite``: this module's section "K-means". Returns
    the [`KMeansRun`][] that ``dpcomm run kmeans`` prints.

    ``release`` (Laplace or Gaussian) with ``bounds`` (a public (lo, hi) per column) publishes
    every iteration's centroids from noisy clamped, centred sums and noisy counts per cluster
    (`dpcomm.release.kmeans`), composed with every iteration's traffic. ``columns`` name the
    coordinates (default: a DataFrame's columns); ``run.input_rows`` is each source's row.
    ``scale=True`` maps each column from its public ``bounds`` onto [0, 1] before clustering,
    a release then bound over [0, 1], and ``run.centroids`` back (`_scaled`, ``run.scaling``).

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
    from dpcomm.pipeline.job import Job, check_budget, prepare
    from dpcomm.pipeline.runs import execute_kmeans

    chosen, _, delta, target_epsilon = _calibrated(
        countermeasure, num_targets=None, delta=delta, target_epsilon=target_epsilon
    )
    drop = check_flag("drop_non_finite", drop_non_finite)
    progress = check_flag("progress", progress)
    runner = make_engine(engine)
    budget = check_budget(budget, runner)
    program, array, truth, kept, names, scaling = compiled_kmeans(
        points, k, iterations, labels, init, init_points, start_seed=start_seed, drop=drop,
        countermeasure=countermeasure, chosen=chosen, release=release, bounds=bounds,
        columns=columns, scale=scale,
    )  # fmt: skip
    tested, truth = test_set(test_points, test_labels, array, truth, kept, drop, scaling)
    described = kmeans_described(program, array)
    job = Job(program, chosen, delta, runner, "kmeans", described, seed, progress, target_epsilon)
    job = replace(job, budget=budget, calibration=_calibration_of(countermeasure))
    run = execute_kmeans(prepare(job), test_points=tested, test_labels=truth)
    return replace(run, input_rows=np.flatnonzero(kept), columns=names, scaling=scaling)


def compile_kmeans(
    points: npt.ArrayLike,
    *,
    k: int,
    iterations: int,
    countermeasure: Countermeasure | Calibration,
    start_seed: int = 0,
    drop_non_finite: bool = False,
    init: str = "k-means++",
    init_points: npt.ArrayLike | None = None,
    release: Laplace | Gaussian | None = None,
    bounds: Sequence[tuple[float, float]] | None = None,
    columns: Sequence[str] | None = None,
    scale: bool = False,
) -> KMeansProgram:
    """The program [`kmeans`][] runs with these arguments, compiled and not run.

    What ``dpcomm deploy kmeans-configs`` writes into every node's config (the public part:
    its initial centroids, K, I and its release); the arguments are [`kmeans`][]'s (with
    ``scale``, the nodes hold and publish the scaled coordinates).

    Examples:
        >>> import numpy as np, dpcomm
        >>> from dpcomm.api import compile_kmeans
        >>> points = np.vstack([np.zeros((20, 2)), np.ones((20, 2))])
        >>> program = compile_kmeans(points, k=2, iterations=3,
        ...                          countermeasure=dpcomm.NoCountermeasure())
        >>> program.num_centroids, program.num_iterations, program.dimension, program.release
        (2, 3, 2, None)
    """
    chosen, _, _, _ = _calibrated(countermeasure, num_targets=None, delta=None, target_epsilon=None)
    return compiled_kmeans(
        points,
        k,
        iterations,
        None,
        init,
        init_points,
        start_seed=start_seed,
        drop=check_flag("drop_non_finite", drop_non_finite),
        countermeasure=countermeasure,
        chosen=chosen,
        release=release,
        bounds=bounds,
        columns=columns,
        scale=scale,
    )[0]


def _calibration_of(countermeasure: object) -> Calibration | None:
    """``countermeasure`` if it is a calibration (whose plan a run checks), else None."""
    return countermeasure if isinstance(countermeasure, Calibration) else None
