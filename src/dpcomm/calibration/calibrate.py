"""A calibration: the countermeasure of least network load that makes a plan (ε, δ)-DP.

[`calibrate`][] asks the planner ([`dpcomm.calibration.plan_countermeasures`][]) for the
countermeasure of least network load whose plan is (ε, δ)-DP under limits, for a query (its
shape read by [`dpcomm.calibration.query.query_shape`][]) or for sizes given by hand; the
[`Calibration`][] it returns records what it was made for and runs as it is:
``run_sql(sql, data, countermeasure=calibration)`` (``dpcomm.run_sql``).

**With a release.** With ``release="laplace"`` or ``"gaussian"`` (or the class
``dpcomm.Laplace`` or ``dpcomm.Gaussian``), ``bounds`` and ``keys`` as `dpcomm.run_sql` takes
them, the result is released with noise too, and (ε, δ) is the guarantee against an observer of
both traffic and release: it is split between the traffic (ε1, δ1) and the release (ε2, δ2) for
the least expected relative error of the released values, under the limits
([`dpcomm.calibration.split.split_budget`][]: the traffic's share on a grid of 5% steps, the
release's ε2 the largest whose composition with the traffic, as the run reports it, is at most
ε). The calibration carries the release (`Calibration.release`, ``bounds``, ``keys``,
`Calibration.split`) and ``run_sql(sql, data, countermeasure=calibration)`` releases with it.
Grouping sets without a key domain in ``keys`` need ``key_selection_delta`` (δ_sel), as in
`dpcomm.run_sql`: their keys are selected by a DP threshold whose δ_sel is set aside from δ
first (δ1 + δ2 = δ − δ_sel).

**A pure plan.** ``delta=0`` plans a pure ε-DP plan: local flooding (R_σ^d, pure by
Theorem 1), or scramblers without dummies whose ε is that of their sources' R_σ
(post-processing); scramblers that need dummies are infeasible at δ = 0
(`dpcomm.calibration.feasibility`). With a release, δ = 0 takes ``release="laplace"``; a
Gaussian release (δ2 > 0) or a DP key selection (δ_sel > 0) is refused, naming ``delta``. A
run of such a calibration reports, and a [`Budget`][dpcomm.Budget] is charged, δ = 0.

Examples:
    A calibration by hand, and one whose query releases its result with Laplace noise:

    >>> import dpcomm
    >>> plan = dpcomm.calibrate(sources=1000, num_targets=10, epsilon=1.0, delta=1e-4)
    >>> plan.epsilon <= 1.0, plan.sources_recruited >= 1000
    (True, True)
    >>> plan.countermeasure  # doctest: +ELLIPSIS
    Scramblers(sampling_rate=0.0, batch_size=1000, num_dummies=240, capped=False, ...)
    >>> list(plan.pareto.columns[:6])
    ['mechanism', 'sampling_rate', 'batch_size', 'num_dummies', 'capped', 'num_scramblers']
    >>> from dpcomm import datasets
    >>> people = datasets.synthetic(rows=500, seed=1)
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

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dpcomm.calibration.configuration import PlanCandidate
from dpcomm.calibration.query import program_shape, query_program, query_shape
from dpcomm.calibration.shape import PlanShape
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.validation import MAX_SOURCES, check_delta, check_flag, check_int, check_number

if TYPE_CHECKING:
    from dpcomm.calibration.planner import PlannerResult
    from dpcomm.calibration.request import Workload
    from dpcomm.calibration.split import BudgetSplit, ReleaseMechanism, ReleaseName
    from dpcomm.plan.model import ExecutionPlan


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
        bounds: the release's bounds (as given to [`calibrate`][]: by column for a query, one
            (lo, hi) per coordinate for K-means).
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
    bounds: Mapping[str, tuple[float, float]] | tuple[tuple[float, float], ...] | None = None
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

    from dpcomm.plan.codec import countermeasure_to_dict

    rows = []
    for candidate in result.pareto:
        configuration = candidate.configuration
        rows.append(
            {
                **countermeasure_to_dict(configuration.countermeasure),
                "num_scramblers": configuration.num_scramblers,
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
    bounds: Mapping[str, tuple[float, float]] | Sequence[tuple[float, float]] | None = None,
    keys: Mapping[str, Sequence[Any]] | None = None,
    key_selection_delta: float | None = None,
    progress: bool = False,
) -> Calibration:
    """The countermeasure of least network load whose plan is (ε, δ)-DP, under limits.

    From the query (the usual way): ``calibrate(sql, data, epsilon=..., delta=...)`` compiles
    ``sql`` over ``data`` as [`run_sql`][dpcomm.run_sql] does (``num_targets`` T compute nodes
    per grouping set, default 20) and reads the plan's shape ([`PlanShape`][]):
    S = the table's rows, G = its non-empty grouping sets. The empty grouping set ``()`` (of
    ``ROLLUP`` or ``CUBE``) is free: its one compute node hears every source whatever its
    data (ε = 0), so it is costed but not composed. With ``data`` the table is fixed:
    ``max_extra_consents`` defaults to 0 (no source recruited beyond its rows). K-means:
    ``calibrate(data=points, iterations=I, num_targets=K, ...)`` (S = the points), with
    ``release=`` and ``bounds=[(lo, hi), ...]`` (one per coordinate) for a released K-means.

    By hand (the keyword form): ``sources`` (S) tuples must be used, by an Aggregate query of
    ``grouping_sets`` (G, default 1, the non-empty grouping sets only) over ``num_targets``
    (T) compute nodes, or by K-means of ``iterations`` (I) with K = ``num_targets`` centroids.

    Limits: ``max_channels`` per node, ``max_extra_consents`` (S_t − S), ``min_utility``
    (expected tuples used / S, default 1), ``max_messages`` (the plan's network load, dummies
    included). Searches σ on a 0.01 grid, every number of scramblers and every d
    ([`dpcomm.calibration.plan_countermeasures`][], exact and valid accounting); raises
    [`DpcommError`][] naming the limit to relax when none is feasible. ``release=`` (with
    ``bounds``, ``keys``, ``key_selection_delta``) splits (ε, δ) with a noisy release of the
    result, and ``delta=0`` plans a pure ε-DP plan: see [`dpcomm.calibration.calibrate`][].

    Examples:
        >>> import dpcomm
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
    """  # noqa: E501
    progress = check_flag("progress", progress)
    wanted = _release_request(release, delta, bounds, keys, key_selection_delta)
    counts = _Counts(
        sources=sources, num_targets=num_targets, grouping_sets=grouping_sets, iterations=iterations
    )
    sized = (
        _by_hand(counts) if sql is None and data is None else _of_query(sql, data, counts, wanted)
    )
    plan_traffic = _traffic_planner(
        sized,
        max_channels=max_channels,
        max_extra_consents=max_extra_consents,
        min_utility=min_utility,
        max_messages=max_messages,
        progress=progress,
    )
    split = _split(wanted, sized, epsilon, delta, plan_traffic)
    result = plan_traffic(epsilon, delta) if split is None else split.traffic
    return _calibration(result, sized, split, wanted)


@dataclass(frozen=True, kw_only=True)
class _Release:
    """``release=`` of `calibrate` and its parameters, checked (``kind`` None: no release)."""

    kind: ReleaseName | None
    given: object
    bounds: Any
    keys: Mapping[str, Sequence[Any]] | None
    key_selection_delta: float | None
    delta: float


def _release_request(
    release: object,
    delta: float,
    bounds: Any,
    keys: Mapping[str, Sequence[Any]] | None,
    key_selection_delta: float | None,
) -> _Release:
    """The release asked for, checked against δ: parameters of a release only with one."""
    from dpcomm.calibration.split import release_kind

    kind = release_kind(release)
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
    return _Release(
        kind=kind,
        given=release,
        bounds=bounds,
        keys=keys,
        key_selection_delta=key_selection_delta,
        delta=delta,
    )


@dataclass(frozen=True, kw_only=True)
class _Counts:
    """The plan's counts as the call gives them (None: not given)."""

    sources: int | None
    num_targets: int | None
    grouping_sets: int | None
    iterations: int | None


@dataclass(frozen=True, kw_only=True)
class _Sized:
    """What the planner is asked for, but (ε, δ) and the limits: read from a query or given.

    ``shape`` is the query's (None by hand): its table is fixed. ``program`` is the query's
    program bound with a placeholder release (None without a release); ``release_shape``
    what a released K-means publishes (None otherwise).
    """

    num_sources: int
    num_targets: int
    grouping_sets: int | None
    iterations: int | None
    free_grouping_sets: int = 0
    shape: PlanShape | None = None
    program: Any = None
    release_shape: Any = None


def _of_query(sql: str | None, data: Any, counts: _Counts, wanted: _Release) -> _Sized:
    """The sizes of the plan ``sql`` over ``data`` compiles to (or of K-means' points)."""
    from dpcomm.calibration.split import release_placeholder

    for name, value in (("sources", counts.sources), ("grouping_sets", counts.grouping_sets)):
        if value is not None:
            raise InvalidParameterError(name, "None with data= (read from the data)", value)
    program: Any = None
    if wanted.kind is not None and sql is not None:
        if counts.iterations is not None:
            raise InvalidParameterError(
                "iterations", "None with sql= (an Aggregate query)", counts.iterations
            )
        program = query_program(
            sql,
            data,
            num_targets=counts.num_targets,
            release=release_placeholder(wanted.kind, wanted.delta),
            bounds=wanted.bounds,
            keys=wanted.keys,
            key_selection_delta=wanted.key_selection_delta,
        )
        shape = program_shape(program, sql)
    else:
        shape = query_shape(sql, data, num_targets=counts.num_targets, iterations=counts.iterations)
    released = None
    if wanted.kind is not None and shape.workload == "kmeans":
        from dpcomm.calibration.split import kmeans_release_shape

        released = kmeans_release_shape(
            num_rows=shape.num_sources,
            num_centroids=shape.num_targets,
            num_iterations=len(shape.clusters),
            bounds=wanted.bounds,
        )
    return _Sized(
        num_sources=shape.num_sources,
        num_targets=shape.num_targets,
        grouping_sets=shape.num_clusters if shape.workload == "aggregate" else None,
        iterations=counts.iterations,
        free_grouping_sets=len(shape.free_clusters),
        shape=shape,
        program=program,
        release_shape=released,
    )


def _by_hand(counts: _Counts) -> _Sized:
    """The sizes given by hand: S and T, G (default 1) or I."""
    if counts.sources is None:
        raise InvalidParameterError("sources", "S, the tuples used (or sql= and data=)", None)
    if counts.num_targets is None:
        raise InvalidParameterError("num_targets", "T, the targets per cluster", None)
    sources = check_int("sources", counts.sources, minimum=1, maximum=MAX_SOURCES)
    grouping_sets = counts.grouping_sets
    if grouping_sets is None and counts.iterations is None:
        grouping_sets = 1
    return _Sized(
        num_sources=sources,
        num_targets=counts.num_targets,
        grouping_sets=grouping_sets,
        iterations=counts.iterations,
    )


def _traffic_planner(
    sized: _Sized,
    *,
    max_channels: int | None,
    max_extra_consents: int | None,
    min_utility: float | None,
    max_messages: int | None,
    progress: bool,
) -> Callable[[float, float], PlannerResult]:
    """The traffic-only plan at (ε, δ), under the limits: `plan_countermeasures`.

    From a query the table is fixed: ``max_extra_consents`` defaults to 0.
    """
    from dpcomm.calibration import plan_countermeasures

    if sized.shape is not None and max_extra_consents is None:
        max_extra_consents = 0

    def plan_traffic(epsilon: float, delta: float) -> PlannerResult:
        return plan_countermeasures(
            num_sources=sized.num_sources,
            num_targets=sized.num_targets,
            epsilon=epsilon,
            delta=delta,
            grouping_sets=sized.grouping_sets,
            iterations=sized.iterations,
            free_grouping_sets=sized.free_grouping_sets,
            max_channels=max_channels,
            max_extra_consents=max_extra_consents,
            min_utility=1.0 if min_utility is None else min_utility,
            max_messages=max_messages,
            progress=progress,
        )

    return plan_traffic


def _split(
    wanted: _Release,
    sized: _Sized,
    epsilon: float,
    delta: float,
    plan_traffic: Callable[[float, float], PlannerResult],
) -> BudgetSplit | None:
    """With a release, (ε, δ) split between the traffic and the release; None without."""
    from dpcomm.calibration.split import split_budget, split_release

    if wanted.kind is None:
        return None
    if sized.release_shape is not None:  # K-means
        return split_budget(
            shape=sized.release_shape,
            release=wanted.kind,
            epsilon=check_number("epsilon", epsilon, above=0.0),
            delta=check_delta("delta", delta),
            plan_traffic=plan_traffic,
        )
    if sized.program is None:
        raise InvalidParameterError(
            "release",
            "None without sql= and data= (a release is calibrated from the query's aggregates)",
            wanted.given,
        )
    return split_release(wanted.kind, sized.program, epsilon, delta, plan_traffic)


def _copied_bounds(bounds: Any) -> Any:
    """A calibration's own copy of ``bounds``: by column (a query's) or per coordinate."""
    if isinstance(bounds, Mapping):
        return dict(bounds)
    return tuple((float(low), float(high)) for low, high in bounds)


def _calibration(
    result: PlannerResult, sized: _Sized, split: BudgetSplit | None, wanted: _Release
) -> Calibration:
    """The `Calibration` of the planner's answer: its shape (S_t sources) and its release."""
    from dpcomm.calibration.costs import request_plan

    request = result.request
    if request is None:
        raise DpcommError("the planner answered without its request")  # never: it sets it
    if sized.shape is None:
        planned = request_plan(
            workload=request.workload,
            num_sources=result.num_sources,
            num_targets=request.num_targets,
            num_clusters=request.num_clusters,
        )
        shape = PlanShape.of_plan(planned, workload=request.workload)
    else:
        shape = replace(sized.shape, num_sources=result.num_sources)  # S_t: the rows a run needs
    bounds, keys = wanted.bounds, wanted.keys
    return Calibration(
        **result.candidate_fields(),
        shape=shape,
        pareto=_pareto_frame(result),
        details=result,
        release=None if split is None else split.release,
        bounds=None if split is None or bounds is None else _copied_bounds(bounds),
        keys=None if split is None or keys is None else {k: list(v) for k, v in keys.items()},
        key_selection_delta=None if split is None else wanted.key_selection_delta,
        split=split,
    )
