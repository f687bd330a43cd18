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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpcomm.calibration.configuration import PlanCandidate
from dpcomm.calibration.shape import PlanShape
from dpcomm.data.inputs import DATA_ALLOWED, points_of, table_of
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES
from dpcomm.validation import (
    MAX_COUNT,
    MAX_SOURCES,
    check_delta,
    check_int,
    check_number,
    check_seed,
)

if TYPE_CHECKING:
    from dpcomm.budget.budget import Budget
    from dpcomm.calibration.request import Workload
    from dpcomm.calibration.split import BudgetSplit, ReleaseName
    from dpcomm.engine.engines import Engine
    from dpcomm.pipeline.job import ReleaseSpec
    from dpcomm.pipeline.runs import AggregateRun, KMeansRun
    from dpcomm.plan.model import ExecutionPlan
    from dpcomm.queries.kmeans import KMeansProgram
    from dpcomm.release.mechanisms import ReleaseMechanism


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


def _flag(name: str, value: object) -> bool:
    """``value`` if it is True or False (a truthy DataFrame is not)."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(name, "True or False", value)
    return bool(value)


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
    over every tuple ([`dpcomm.pipeline.estimate`][]): COUNT and SUM divided by the known
    probability P that a tuple arrives, AVG their ratio, each in a column
    ``<name> (estimate)`` with ``<name> (se)``, ``<name> (95% low)`` and
    ``<name> (95% high)`` beside it; groups of the table that received no tuple are
    estimated as 0; MIN and MAX stay those of the delivered tuples. The report then
    describes the estimates (``report.estimate``, ``report.result_semantics``, and the
    utility's errors are the estimates').

    With ``release=dpcomm.Laplace(epsilon=...)`` or ``dpcomm.Gaussian(epsilon=...,
    delta=...)`` the result node releases the result with noise drawn by OpenDP
    ([`dpcomm.release.noise`][]): ``bounds`` clamp each column a SUM or AVG reads
    (``{"body_mass_g": (2500, 6500)}``, on each source's row), ``keys`` give grouping
    columns their public domains (every key released, absent ones too), and
    ``report.release`` gives the release's (ε, δ), each aggregate's noise and the guarantee
    against an observer of both traffic and release. Grouping sets with a column without a
    domain need ``key_selection_delta`` (δ_sel, e.g. 1e-6): their keys are those whose
    noisy count passes a threshold of OpenDP's (``report.release.key_selection``), and
    δ_sel is part of the release's δ. With ``estimate="unbiased"`` the released values are
    estimated over every tuple, from released values only, each interval covering both the
    sampling's and the noise's errors ([`dpcomm.pipeline.estimate.released_estimate`][]); an
    AVG's interval is withheld where it would not be reliable, its column
    ``<name> (no interval)`` saying why (NULL where the interval is given).
    Returns the
    [`dpcomm.pipeline.runs.AggregateRun`][] that ``dpcomm run aggregate`` prints:
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
    from dpcomm.data.inputs import table_of
    from dpcomm.data.table import Table
    from dpcomm.engine.engines import make_engine
    from dpcomm.pipeline.job import Job, check_budget, compile_aggregate, prepare
    from dpcomm.pipeline.runs import execute_aggregate

    chosen, num_targets, delta, target_epsilon = _calibrated(
        countermeasure, num_targets=num_targets, delta=delta, target_epsilon=target_epsilon
    )
    asked = _release_asked(
        countermeasure, release, bounds=bounds, keys=keys, key_selection_delta=key_selection_delta
    )
    if not isinstance(estimate, str) or estimate not in ("delivered", "unbiased"):
        raise InvalidParameterError("estimate", "'delivered' or 'unbiased'", estimate)
    progress = _flag("progress", progress)
    runner = make_engine(engine)
    budget = check_budget(budget, runner)
    source = table_of(data, "data")
    if not isinstance(source, Table) and not runner.reads_row_sources:
        source = source.read(0, source.num_rows)  # else its workers read it, never this process
    program = compile_aggregate(
        sql,
        source,
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
    from dpcomm.pipeline.job import Job, check_budget, prepare
    from dpcomm.pipeline.runs import execute_kmeans

    chosen, _, delta, target_epsilon = _calibrated(
        countermeasure, num_targets=None, delta=delta, target_epsilon=target_epsilon
    )
    drop = _flag("drop_non_finite", drop_non_finite)
    progress = _flag("progress", progress)
    iterations = check_int("iterations", iterations, minimum=1, maximum=MAX_COUNT)
    start_seed = check_seed(start_seed, name="start_seed")
    runner = make_engine(engine)
    budget = check_budget(budget, runner)
    program, array, truth, kept = _kmeans_program(
        points, k, iterations, labels, init, init_points, start_seed=start_seed, drop=drop
    )
    if isinstance(countermeasure, Calibration) and countermeasure.release is not None:
        raise InvalidParameterError(
            "countermeasure",
            "a calibration without a release (K-means releases no aggregates)",
            countermeasure,
        )
    calibration = countermeasure if isinstance(countermeasure, Calibration) else None
    tested, truth = _test_set(test_points, test_labels, array, truth, kept, drop=drop)
    described = _kmeans_described(program, array)
    job = Job(program, chosen, delta, runner, "kmeans", described, seed, progress, target_epsilon)
    job = replace(job, budget=budget, calibration=calibration)
    return execute_kmeans(prepare(job), test_points=tested, test_labels=truth)


def _kmeans_program(
    points: npt.ArrayLike,
    k: int,
    iterations: int,
    labels: npt.ArrayLike | None,
    init: str,
    init_points: npt.ArrayLike | None,
    *,
    start_seed: int,
    drop: bool,
) -> tuple[
    KMeansProgram, npt.NDArray[np.float64], npt.NDArray[np.int64] | None, npt.NDArray[np.bool_]
]:
    """K-means over the usable ``points``: the program, those points, labels' codes, kept."""
    from dpcomm.data.inputs import label_codes, points_of, usable_rows
    from dpcomm.queries.kmeans import INIT_METHODS, KMeansProgram, choose_initial_centroids

    array = points_of("points", points)
    truth = None if labels is None else label_codes("labels", labels, len(array), "point")
    array, kept = usable_rows("points", array, drop=drop)
    k = check_int("k", k, minimum=1)
    if k > len(array):
        raise InvalidParameterError("k", f"an integer in [1, {len(array):,}] (the points)", k)
    if not isinstance(init, str) or init not in INIT_METHODS:
        raise InvalidParameterError("init", " or ".join(repr(m) for m in INIT_METHODS), init)
    initial = None
    if init_points is not None:
        pool = points_of("init_points", init_points)
        if pool.shape[1] != array.shape[1]:
            raise InvalidParameterError(
                "init_points", f"points of dimension {array.shape[1]}", f"shape {pool.shape}"
            )
        pool, _ = usable_rows("init_points", pool, drop=drop)
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
    return program, array, truth, kept


def _test_set(
    test_points: npt.ArrayLike | None,
    test_labels: npt.ArrayLike | None,
    array: npt.NDArray[np.float64],
    truth: npt.NDArray[np.int64] | None,
    kept: npt.NDArray[np.bool_],
    *,
    drop: bool,
) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.int64] | None]:
    """The labelled points the Rand index is measured on: the test set, else the points."""
    from dpcomm.data.inputs import label_codes, points_of, usable_rows

    if (test_points is None) != (test_labels is None):
        missing = "test_labels" if test_labels is None else "test_points"
        raise InvalidParameterError(missing, "given with the other (a labelled test set)", None)
    if test_points is not None and test_labels is not None:
        tested = points_of("test_points", test_points)
        if tested.shape[1] != array.shape[1]:
            raise InvalidParameterError(
                "test_points", f"points of dimension {array.shape[1]}", f"shape {tested.shape}"
            )
        codes = label_codes("test_labels", test_labels, len(tested), "test point")
        tested, kept_tests = usable_rows("test_points", tested, drop=drop)
        return tested, codes[kept_tests]
    if truth is not None:
        return array, truth[kept]
    return None, None


def _kmeans_described(program: KMeansProgram, array: npt.NDArray[np.float64]) -> str:
    """The K-means run as a ledger records it (k, I, the points, the start)."""
    described = f"K-means: k = {program.num_centroids}, {program.num_iterations} iterations, "
    described += f"{array.shape[0]:,} points of dimension {array.shape[1]}, "
    described += f"start_seed = {program.seed}"
    if program.init != "random" or program.init_public:
        public = " among public points" if program.init_public else ""
        described += f", init = {program.init}{public}"
    return described


@dataclass(frozen=True, eq=False, kw_only=True)
class Calibration(PlanCandidate):
    """The cheapest countermeasure meeting (ε, δ) under limits ([`calibrate`][]).

    A calibration runs as it is: ``run_sql(sql, data, countermeasure=calibration)`` (or
    ``kmeans(points, ..., countermeasure=calibration)``) runs its countermeasure with its T and
    δ and refuses, before running, a plan whose ε would exceed the target it was made for.

    Attributes:
        countermeasure: the chosen countermeasure.
        shape: what it was made for ([`dpcomm.calibration.PlanShape`][]): the table's rows
            (S_t), T, the data-dependent grouping sets or iterations that compose, and the free
            ones (the empty grouping set).
        target_epsilon: the ε asked for.
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
        details: the planner's full answer ([`dpcomm.calibration.PlannerResult`][]).
        release: with ``calibrate(..., release=)``, the release a run makes
            (``dpcomm.Laplace(ε2)`` or ``dpcomm.Gaussian(ε2, δ2)``); None without.
        bounds: the release's bounds (as given to [`calibrate`][]).
        keys: the release's key domains (as given to [`calibrate`][]).
        key_selection_delta: δ_sel of the release's DP key selection (as given to
            [`calibrate`][]; None without).
        split: how (ε, δ) was split between traffic and release
            ([`dpcomm.calibration.split.BudgetSplit`][]: the composed guarantee, the expected
            relative error, every share evaluated); `target_epsilon` is then the ε of
            both together, `epsilon` and `delta` the traffic's (ε1, δ1).

    Examples:
        >>> import dpcomm
        >>> plan = dpcomm.calibrate(sources=1000, num_targets=10, iterations=2, epsilon=2.0,
        ...                         delta=1e-4)
        >>> plan.describe()
        '1 scrambler of n=1000, d=..., sampling σ=...: ε = ... at δ = 0.0001, ... messages, ...'
        >>> plan.pareto[["mechanism", "network_load_messages"]].shape[1]
        2
        >>> plan.shape.describe()
        '1,000 sources, 2 data-dependent iterations of T = 10'
    """

    shape: PlanShape
    pareto: Any
    details: Any
    release: ReleaseMechanism | None = None
    bounds: Mapping[str, tuple[float, float]] | None = None
    keys: Mapping[str, Sequence[Any]] | None = None
    key_selection_delta: float | None = None
    split: BudgetSplit | None = None

    @property
    def countermeasure(self) -> Countermeasure:
        """The chosen countermeasure."""
        return self.configuration.countermeasure

    @property
    def sources_recruited(self) -> int:
        """S_t, the sources to recruit."""
        return self.num_sources

    @property
    def target_epsilon(self) -> float:
        """The ε asked for: the plan's ε is at most it (with a release, traffic and release's)."""
        if self.split is not None:
            return self.split.epsilon
        return float(self.details.request.epsilon)

    @property
    def splits(self) -> Any:
        """With a release, every traffic share evaluated, one row each (a DataFrame; else None).

        Columns: ``traffic_share`` f, the traffic's ``epsilon1`` (accounted) and ``delta1``,
        the release's ``epsilon2`` and ``delta2``, the guarantee of both (``epsilon``, PLD
        composition or sum, at ``delta``), ``expected_relative_error``, the countermeasure
        (``description``, ``network_load_messages``), ``chosen``, and why a share is
        ``infeasible``.
        """
        if self.split is None:
            return None
        import pandas as pd

        rows = []
        for point in self.split.points:
            traffic, release, both = point.traffic, point.release, point.composition
            rows.append(
                {
                    "traffic_share": point.traffic_share,
                    "epsilon1": traffic.epsilon if traffic is not None else None,
                    "delta1": traffic.delta if traffic is not None else None,
                    "epsilon2": release.epsilon if release is not None else None,
                    "delta2": both.release_delta if both is not None else None,
                    "epsilon": both.epsilon if both is not None else None,
                    "delta": both.delta if both is not None else None,
                    "expected_relative_error": point.expected_relative_error,
                    "description": (
                        traffic.configuration.describe() if traffic is not None else None
                    ),
                    "network_load_messages": (
                        traffic.network_load_messages if traffic is not None else None
                    ),
                    "chosen": point is self.split.chosen,
                    "infeasible": point.infeasible,
                }
            )
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"Calibration({self.describe()})"

    def describe(self) -> str:
        """One line: the configuration, its ε and its costs (and the split, with a release)."""
        text = (
            f"{self.details.configuration.describe()}: ε = {self.epsilon:.4g} at δ = "
            f"{self.delta:g}, {self.network_load_messages:,} messages, "
            f"{self.sources_recruited:,} sources recruited"
        )
        if self.split is not None:
            text += f"; {self.split.describe()}"
        return text

    def check_plan(self, plan: ExecutionPlan, *, workload: Workload, delta: float) -> None:
        """Refuse ``plan`` at ``delta`` if the calibration's countermeasure misses its target.

        On the plan it was made for (same S, T, composed clusters, δ) the ε is the calibrated
        one. On another (a table of another size, another query, T or δ) the plan is
        accounted (`dpcomm.plan.account_plan`) and an
        [`InvalidParameterError`][] naming ``countermeasure`` says both
        shapes and the ε when it exceeds [`target_epsilon`][].
        """
        shape = PlanShape.of_plan(plan, workload=workload)
        if shape.same_accounting(self.shape) and delta == self.delta:
            return
        from dpcomm.plan.privacy import account_plan

        epsilon = account_plan(plan, self.countermeasure, delta=delta).guarantee.epsilon
        if epsilon > self.target_epsilon:
            raise InvalidParameterError(
                "countermeasure",
                f"a calibration run on the plan it was made for ({self.shape.describe()}, "
                f"δ = {self.delta:g}: ε ≤ {self.target_epsilon:g}), or on one where its ε "
                f"stays within {self.target_epsilon:g}; calibrate again for this one",
                f"{shape.describe()}, δ = {delta:g}: ε = {epsilon:.4g} (nothing ran)",
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


def query_shape(
    sql: object, data: Any, *, num_targets: int | None = None, iterations: int | None = None
) -> PlanShape:
    """The shape of the plan ``sql`` over ``data`` compiles to (what [`run_sql`][] runs).

    What [`calibrate`][] and ``dpcomm plan --sql --data`` calibrate for: S = the table's
    rows, T = ``num_targets`` (default 20), the non-empty grouping sets (composed) and the
    empty one (free). Without ``sql``: K-means over the points ``data`` (what [`kmeans`][]
    runs) with ``iterations`` and K = ``num_targets``. A query whose only grouping set is the
    empty one is refused (naming ``sql``): its traffic needs no countermeasure.

    Examples:
        >>> from dpcomm import datasets
        >>> from dpcomm.api import query_shape
        >>> people = datasets.synthetic(rows=300, seed=1)
        >>> shape = query_shape("SELECT g1, COUNT(*) FROM t GROUP BY CUBE(g1, g2)", people)
        >>> shape.num_sources, shape.num_clusters, shape.free_clusters
        (300, 3, ('()',))
    """
    if sql is None:
        if iterations is None:
            raise InvalidParameterError(
                "data",
                "given with sql= (an Aggregate query over this table) or with iterations= and "
                "num_targets= (K-means over these points)",
                data,
            )
        if num_targets is None:
            raise InvalidParameterError("num_targets", "K, the centroids (K-means)", None)
        points = points_of("data", data)
        iterations = check_int("iterations", iterations, minimum=1, maximum=MAX_COUNT)
        return PlanShape(
            workload="kmeans",
            num_sources=len(points),
            num_targets=check_int("num_targets", num_targets, minimum=2, maximum=MAX_COUNT),
            clusters=tuple(f"iteration {i + 1}" for i in range(iterations)),
        )
    if iterations is not None:
        raise InvalidParameterError("iterations", "None with sql= (an Aggregate query)", iterations)
    return _query_shape(_query_program(sql, data, num_targets=num_targets), sql)


def _query_program(sql: object, data: Any, *, num_targets: int | None, **release: Any) -> Any:
    """The `dpcomm.queries.aggregate.AggregateProgram` of ``sql`` over ``data``.

    ``release`` (``release``, ``bounds``, ``keys``) as `run_sql` takes them.
    """
    from dpcomm.pipeline.job import ReleaseSpec, compile_aggregate

    if not isinstance(sql, str):
        raise InvalidParameterError("sql", "an Aggregate query (text)", sql)
    if data is None:
        raise InvalidParameterError("data", f"with sql=: {DATA_ALLOWED}", data)
    source = table_of(data, "data")  # a row source is bound to its schema, S its rows: not read
    asked = ReleaseSpec.of(release.pop("release", None), **release)
    return compile_aggregate(
        sql,
        source,
        release=asked,
        countermeasure=None,
        num_targets=DEFAULT_NUM_TARGETS if num_targets is None else num_targets,
    )


def _query_shape(program: Any, sql: object) -> PlanShape:
    """The `PlanShape` of a query's program; refused (naming ``sql``) without clusters."""
    shape = PlanShape.of_plan(program.plan, workload="aggregate")
    if not shape.clusters:
        raise InvalidParameterError(
            "sql",
            "a query with a non-empty grouping set (the empty one's traffic is independent of "
            "the data: run it with dpcomm.NoCountermeasure(), ε = 0)",
            sql,
        )
    return shape


def calibrate(
    sql: str | None = None,
    data: Any = None,
    *,
    epsilon: float,
    delta: float,
    sources: int | None = None,
    num_targets: int | None = None,
    grouping_sets: int | None = None,
    iterations: int | None = None,
    max_channels: int | None = None,
    max_extra_consents: int | None = None,
    min_utility: float | None = None,
    max_messages: int | None = None,
    release: Any = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    keys: Mapping[str, Sequence[Any]] | None = None,
    key_selection_delta: float | None = None,
    progress: bool = False,
) -> Calibration:
    """The countermeasure of least network load whose plan is (ε, δ)-DP, under limits.

    From the query (the usual way): ``calibrate(sql, data, epsilon=..., delta=...)`` compiles
    ``sql`` over ``data`` as [`run_sql`][] does (``num_targets`` T compute nodes per
    grouping set, default 20) and reads the plan's shape ([`PlanShape`][]):
    S = the table's rows, G = its non-empty grouping sets. The empty grouping set ``()`` (of
    ``ROLLUP`` or ``CUBE``) is free: its one compute node hears every source whatever its
    data (ε = 0), so it is costed but not composed. With ``data`` the table is fixed:
    ``max_extra_consents`` defaults to 0 (no source recruited beyond its rows). K-means:
    ``calibrate(data=points, iterations=I, num_targets=K, ...)`` (S = the points).

    By hand (the keyword form): ``sources`` (S) tuples must be used, by an Aggregate query of
    ``grouping_sets`` (G, default 1, the non-empty grouping sets only) over ``num_targets``
    (T) compute nodes, or by K-means of ``iterations`` (I) with K = ``num_targets`` centroids.

    Limits: ``max_channels`` per node, ``max_extra_consents`` (S_t − S), ``min_utility``
    (expected tuples used / S, default 1), ``max_messages`` (the plan's network load, dummies
    included). Searches σ on a 0.01 grid, every number of scramblers and every d
    ([`dpcomm.calibration.plan_countermeasures`][], exact and valid accounting); raises
    [`DpcommError`][] naming the limit to relax when none is feasible. The
    [`Calibration`][] records the shape it was made for and runs as it is:
    ``run_sql(sql, data, countermeasure=calibration)``.

    With ``release="laplace"`` or ``"gaussian"`` (or the class ``dpcomm.Laplace`` or
    ``dpcomm.Gaussian``), ``bounds`` and ``keys`` as [`run_sql`][] takes them, the result is
    released with noise too, and (ε, δ) is the guarantee against an observer of both traffic and
    release: it is split between the traffic (ε1, δ1) and the release (ε2, δ2) for the least
    expected relative error of the released values, under the limits
    ([`dpcomm.calibration.split.split_budget`][]: the traffic's share on a grid of 5% steps,
    the release's ε2 the largest whose composition with the traffic, as the run reports it, is
    at most ε). The calibration carries the release (`Calibration.release`, ``bounds``,
    ``keys``, `Calibration.split`) and ``run_sql(sql, data, countermeasure=calibration)``
    releases with it. Grouping sets without a key domain in ``keys`` need
    ``key_selection_delta`` (δ_sel), as in [`run_sql`][]: their keys are selected by a DP
    threshold whose δ_sel is set aside from δ first (δ1 + δ2 = δ − δ_sel).

    ``delta=0`` plans a pure ε-DP plan: local flooding (R_σ^d, pure by Theorem 1), or
    scramblers without dummies whose ε is that of their sources' R_σ (post-processing);
    scramblers that need dummies are infeasible at δ = 0 (`dpcomm.calibration.feasibility`).
    With a release, δ = 0 takes ``release="laplace"``; a Gaussian release (δ2 > 0) or a DP
    key selection (δ_sel > 0) is refused, naming ``delta``. A run of such a calibration
    reports, and a [`Budget`][] is charged, δ = 0.

    Examples:
        >>> import dpcomm
        >>> plan = dpcomm.calibrate(sources=1000, num_targets=10, epsilon=1.0, delta=1e-4)
        >>> plan.epsilon <= 1.0, plan.sources_recruited >= 1000
        (True, True)
        >>> plan.countermeasure  # doctest: +ELLIPSIS
        Scramblers(sampling_rate=0.0, batch_size=1000, num_dummies=240, capped=False, ...)
        >>> list(plan.pareto.columns[:5])
        ['mechanism', 'sampling_rate', 'batch_size', 'num_scramblers', 'num_dummies']
        >>> from dpcomm import datasets
        >>> people = datasets.synthetic(rows=500, seed=1)
        >>> sql = "SELECT g1, g2, COUNT(*) FROM people GROUP BY ROLLUP(g1, g2)"
        >>> plan = dpcomm.calibrate(sql, people, epsilon=1.0, delta=1e-4)
        >>> plan.shape.describe()
        '500 sources, 2 data-dependent grouping sets of T = 20 ((g1), (g1, g2)); () is free (one compute node)'
        >>> plan.extra_consents, plan.epsilon <= 1.0
        (0, True)
        >>> run = dpcomm.run_sql(sql, people, countermeasure=plan, seed=1)
        >>> run.report.privacy.epsilon == plan.epsilon
        True
        >>> sql = "SELECT g1, COUNT(*) AS n FROM people GROUP BY g1"
        >>> plan = dpcomm.calibrate(sql, people, epsilon=1.0, delta=1e-4, release="laplace",
        ...                         keys={"g1": list(range(20))})
        >>> plan.countermeasure.describe()  # no limit: flooding every compute node, ε1 = 0
        'local sampling σ=0, flooding d=19'
        >>> plan.split.describe()
        'traffic ε1 = 0 at δ1 = 0.0001, laplace release ε2 = 1 at δ2 = 0: together ε = 1 at δ = 0.0001, expected relative error 11.3%'
        >>> run = dpcomm.run_sql(sql, people, countermeasure=plan)
        >>> run.report.release.epsilon_total == plan.split.composition.epsilon <= 1.0
        True
    """  # noqa: E501
    from dpcomm.calibration import plan_countermeasures
    from dpcomm.calibration.costs import request_plan

    progress = _flag("progress", progress)
    kind = _release_kind(release)
    if check_delta("delta", delta) == 0.0 and (kind == "gaussian" or key_selection_delta):
        what = "a Gaussian release" if kind == "gaussian" else "a DP key selection (δ_sel)"
        raise InvalidParameterError(
            "delta",
            f"> 0 with {what}, which is never pure; δ = 0 (a pure plan) takes "
            "release='laplace' with public keys",
            delta,
        )
    if kind is None:
        for name, given in (
            ("bounds", bounds),
            ("keys", keys),
            ("key_selection_delta", key_selection_delta),
        ):
            if given is not None:
                raise InvalidParameterError(name, "None without release=", given)
    shape: PlanShape | None = None
    program: Any = None
    free = 0
    if sql is not None or data is not None:
        for name, value in (("sources", sources), ("grouping_sets", grouping_sets)):
            if value is not None:
                raise InvalidParameterError(name, "None with data= (read from the data)", value)
        if kind is not None and sql is not None:
            if iterations is not None:
                raise InvalidParameterError(
                    "iterations", "None with sql= (an Aggregate query)", iterations
                )
            placeholder = _release_placeholder(kind, delta)
            program = _query_program(
                sql,
                data,
                num_targets=num_targets,
                release=placeholder,
                bounds=bounds,
                keys=keys,
                key_selection_delta=key_selection_delta,
            )
            shape = _query_shape(program, sql)
        else:
            shape = query_shape(sql, data, num_targets=num_targets, iterations=iterations)
        sources, num_targets = shape.num_sources, shape.num_targets
        free = len(shape.free_clusters)
        if shape.workload == "aggregate":
            grouping_sets = shape.num_clusters
        max_extra_consents = 0 if max_extra_consents is None else max_extra_consents
    else:
        if sources is None:
            raise InvalidParameterError("sources", "S, the tuples used (or sql= and data=)", None)
        if num_targets is None:
            raise InvalidParameterError("num_targets", "T, the targets per cluster", None)
        sources = check_int("sources", sources, minimum=1, maximum=MAX_SOURCES)
        if grouping_sets is None and iterations is None:
            grouping_sets = 1
    if kind is not None and program is None:
        raise InvalidParameterError(
            "release",
            "None without sql= and data= (a release is calibrated from the query's aggregates)",
            release,
        )

    def plan_traffic(epsilon: float, delta: float) -> Any:
        return plan_countermeasures(
            num_sources=sources,
            num_targets=num_targets,
            epsilon=epsilon,
            delta=delta,
            grouping_sets=grouping_sets,
            iterations=iterations,
            free_grouping_sets=free,
            max_channels=max_channels,
            max_extra_consents=max_extra_consents,
            min_utility=1.0 if min_utility is None else min_utility,
            max_messages=max_messages,
            progress=progress,
        )

    split = None
    if kind is None:
        result = plan_traffic(epsilon, delta)
    else:
        split = _split(kind, program, epsilon, delta, plan_traffic)
        result = split.traffic
    request = result.request
    if request is None:
        raise DpcommError("the planner answered without its request")  # never: it sets it
    if shape is None:
        planned = request_plan(
            workload=request.workload,
            num_sources=result.num_sources,
            num_targets=request.num_targets,
            num_clusters=request.num_clusters,
        )
        shape = PlanShape.of_plan(planned, workload=request.workload)
    else:
        shape = replace(shape, num_sources=result.num_sources)  # S_t: the rows a run needs
    return Calibration(
        **result.candidate_fields(),
        shape=shape,
        pareto=_pareto_frame(result),
        details=result,
        release=None if split is None else split.release,
        bounds=None if split is None or bounds is None else dict(bounds),
        keys=None if split is None or keys is None else {k: list(v) for k, v in keys.items()},
        key_selection_delta=None if split is None else key_selection_delta,
        split=split,
    )


#: What ``release=`` of `calibrate` takes.
RELEASE_KINDS = "'laplace' or 'gaussian' (or the class dpcomm.Laplace or dpcomm.Gaussian)"


def _release_kind(release: object) -> ReleaseName | None:
    """``release`` of `calibrate` as ``"laplace"``, ``"gaussian"`` or None.

    A mechanism with its ε (``dpcomm.Laplace(epsilon=1)``) is refused: its ε is what the
    calibration chooses.
    """
    from dpcomm.release.mechanisms import Gaussian, Laplace

    if release is None:
        return None
    if release is Laplace or (isinstance(release, str) and release.lower() == "laplace"):
        return "laplace"
    if release is Gaussian or (isinstance(release, str) and release.lower() == "gaussian"):
        return "gaussian"
    if isinstance(release, Laplace | Gaussian):
        raise InvalidParameterError("release", f"{RELEASE_KINDS}: calibrate chooses its ε", release)
    raise InvalidParameterError("release", RELEASE_KINDS, release)


def _release_placeholder(kind: ReleaseName, delta: float) -> Any:
    """A release of the right kind to bind the query with (its ε is replaced by the split's)."""
    from dpcomm.calibration.split import release_mechanism

    checked = check_delta("delta", delta)
    return release_mechanism(kind, epsilon=1.0, delta=0.5 * checked)


def _split(
    kind: ReleaseName,
    program: Any,
    epsilon: float,
    delta: float,
    plan_traffic: Any,
) -> BudgetSplit:
    """`dpcomm.calibration.split.split_budget` for the release of ``program``."""
    import math

    from dpcomm.calibration.split import ReleaseShape, split_budget
    from dpcomm.release.mechanisms import aggregate_sensitivity

    release = program.release
    query = program.query
    clamps = {name: (low, high) for name, _, low, high in query.clamps}
    outputs = {o.name: o for o in query.outputs}
    magnitudes = []
    for noise in release.noises:
        column = outputs[noise.output].column
        if noise.function == "sum" and column in clamps:
            low, high = clamps[column]
            magnitudes.append(0.5 * (abs(low) + abs(high)))
        else:
            magnitudes.append(1.0)
    domains = dict(release.domains)
    grouping_sets = tuple(
        (
            math.prod(len(domains[c]) for c in columns)
            if all(c in domains for c in columns)
            else program.targets_of(index),  # keys selected by a threshold: not public
            program.targets_of(index),
        )
        for index, columns in enumerate(query.grouping_sets)
    )
    selection = release.selection
    independent = []
    for noise in release.noises:
        column = outputs[noise.output].column
        low, high = clamps.get(column, (0.0, 0.0)) if noise.function == "sum" else (0.0, 0.0)
        sensitivity = aggregate_sensitivity(
            noise.function,
            query.grouping_sets,
            bound=max(abs(low), abs(high)),
            width=high - low,
            views=["own-row"] * len(query.grouping_sets),
        )
        independent.append((noise.output, noise.function, sensitivity))
    shape = ReleaseShape(
        num_rows=program.num_sources,
        aggregates=tuple((n.output, n.function, n.sensitivity) for n in release.noises),
        independent_aggregates=tuple(independent),
        magnitudes=tuple(magnitudes),
        grouping_sets=grouping_sets,
        selection=None if selection is None else (selection.count_output, selection.delta),
    )
    return split_budget(
        shape=shape,
        release=kind,
        epsilon=check_number("epsilon", epsilon, above=0.0),
        delta=check_delta("delta", delta),
        plan_traffic=plan_traffic,
    )
