"""The paper's two use cases run end to end: the run, its non-private baseline, one report.

[`run_aggregate`][] and [`run_kmeans`][] run a compiled program on an engine (in memory
unless given), run its non-private baseline where the engine says
([`Engine.baseline`][]: same plan, no countermeasure, not accounted), and build the report
once. They return an [`AggregateRun`][] or a [`KMeansRun`][]: what the front door
(``dpcomm.run_sql``, ``dpcomm.kmeans``) returns and what the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Unpack, cast

import numpy as np
import numpy.typing as npt

from dpcomm.engine.engines import Engine, MemoryEngine
from dpcomm.engine.run import Run, RunOptions
from dpcomm.errors import InvalidParameterError, warn
from dpcomm.pipeline.estimate import delivery_probabilities, released_estimate, unbiased_estimate
from dpcomm.pipeline.job import Guarantee, Job, Prepared, Workload, planned_guarantee, prepare
from dpcomm.pipeline.report import PrivacyReport, Report, run_report
from dpcomm.pipeline.utility import (
    AggregateUtility,
    KMeansUtility,
    ReleaseUtility,
    aggregate_utility,
    kmeans_utility,
    release_utility,
)
from dpcomm.plan.countermeasures import Countermeasures
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, evaluate
from dpcomm.queries.kmeans import KMeansProgram
from dpcomm.queries.program import QueryProgram
from dpcomm.release.compose import ReleaseComposition
from dpcomm.release.report import ReleaseReport, release_report

Row = dict[str, Any]


@dataclass(frozen=True, eq=False)
class AggregateRun:
    """An Aggregate run: its result, its report, the run and its non-private baseline.

    Attributes:
        program: the compiled query.
        rows: the result rows with their exact Python values (None for NULL, ``Decimal``,
            dates): what ``--json`` prints.
        run: the run (delivered tuples, traffic, guarantee).
        baseline: the same plan without countermeasures, not accounted.
        report: privacy, utility and efficiency (under a noisy release, the utility is the
            expected error from public quantities: [`ReleaseUtility`][]; the published values
            against the exact result are [`compare_with_exact`][]'s, never the report's).
        estimate_columns: the columns of an estimated result and their DuckDB types (None:
            the query's own, the values of the delivered tuples).

    ``result`` is the same rows as a pandas DataFrame: what DuckDB's ``.df()`` gives for them
    (DuckDB's column names; dates as ``datetime64``, DECIMAL as float, integers with NULLs as
    ``Int64``). An estimated result ([`with_unbiased_estimate`][]) names its columns
    ``count_star() (estimate)``, ``count_star() (se)``, ``count_star() (95% low)``, ...

    Examples:
        >>> import dpcomm
        >>> run = dpcomm.run_sql("SELECT A, COUNT(*) FROM t GROUP BY A", dpcomm.datasets.diabetes(),
        ...                      countermeasure=dpcomm.NoCountermeasure(), num_targets=3, seed=1)
        >>> isinstance(run, dpcomm.AggregateRun), run.rows[0], run.result.shape
        (True, {'A': 20, 'count_star()': 605}, (7, 2))
        >>> run.report.utility.tuples_used, run.to_dict()["report"]["privacy"]["epsilon"]
        ({'(A)': 10000}, 'inf')
    """

    program: AggregateProgram
    rows: list[Row]
    run: Run
    baseline: Run
    report: Report[AggregateUtility] | Report[ReleaseUtility]
    estimate_columns: tuple[tuple[str, str], ...] | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The result's column names, in order."""
        if self.estimate_columns is not None:
            return tuple(name for name, _ in self.estimate_columns)
        return self.program.query.result_names

    @property
    def raw_rows(self) -> list[Row]:
        """Under a noisy release, the result of the raw noisy values; else ``rows``' result.

        Published counts are clamped at 0 (and made consistent on request); the raw values
        are unbiased, for sums over many cells (post-processing of the same release).
        """
        if self.program.release is None:
            return self.program.result(self.run.state)
        return self.program.raw_result(self.run.state)

    @cached_property
    def result(self) -> Any:
        """The result rows as a pandas DataFrame (DuckDB's column names and types)."""
        from dpcomm.data.frames import result_frame

        query = self.program.query
        if self.estimate_columns is not None:
            names, types = zip(*self.estimate_columns, strict=True)
            return result_frame(self.rows, names, types)
        return result_frame(self.rows, query.result_names, query.result_types)

    def with_unbiased_estimate(self) -> AggregateRun:
        """The same run with its result estimated over every tuple (unbiased for COUNT, SUM).

        COUNT and SUM are divided by the delivery probability P, AVG is their ratio; each
        estimate has a standard error and a 95% interval beside it, and groups of the key
        domain (the baseline's) that received no tuple are estimated as 0
        ([`dpcomm.pipeline.estimate.unbiased_estimate`][]). The report says so
        (``report.estimate``, ``report.result_semantics``), and its utility is that of the
        estimates against the exact result. The privacy guarantee is unchanged
        (post-processing). Under a noisy release the estimates are of the released values,
        and their intervals cover the noise too
        ([`dpcomm.pipeline.estimate.released_estimate`][]); the utility stays the expected
        one (without the sampling's bias, which the estimates remove).
        """
        columns: tuple[tuple[str, str], ...]
        if self.program.release is not None:
            estimate = released_estimate(self.program, self.run)
            release = self.report.release
            if release is None:
                raise InvalidParameterError("run", "a run whose report has its release", None)
            released = self.program.core_result(self.run.state)  # drawn once, cached
            expected = _expected_utility(self.program, self.run, release, released, True)
            released_report = cast("Report[ReleaseUtility]", self.report)
            report: Report[AggregateUtility] | Report[ReleaseUtility] = replace(
                released_report, estimate=estimate.report, utility=expected
            )
        else:
            estimate = unbiased_estimate(self.program, self.run, self.baseline)
            utility = aggregate_utility(
                self.program,
                self.run,
                self.baseline,
                result_is_of_delivered_tuples=_delivered_flag(self.report.utility),
                results=estimate.per_set,
                column_names=estimate.error_names or estimate.report.columns,
            )
            measured = cast("Report[AggregateUtility]", self.report)
            report = replace(measured, estimate=estimate.report, utility=utility)
        columns = tuple(zip(estimate.columns, estimate.types, strict=True))
        return replace(self, rows=estimate.rows, report=report, estimate_columns=columns)

    def to_dict(self) -> dict[str, Any]:
        """``{"result": rows, "report": ...}``: the one JSON document of every run."""
        from dpcomm._json import json_ready

        return {"result": json_ready(self.rows), "report": self.report.to_dict()}

    def __repr__(self) -> str:
        columns = len(self.columns)
        return f"AggregateRun({len(self.rows):,} rows × {columns} columns; {self.report.summary()})"


@dataclass(frozen=True, eq=False)
class KMeansRun:
    """A K-means run: its centroids, its report, the run and its non-private baseline.

    Attributes:
        program: the K-means program (its points are the sources).
        run: the run.
        baseline: non-private K-means from the same start, not accounted.
        report: privacy, utility (the label scores when labels were given) and efficiency.
        input_rows: the input row of every source (rows dropped by ``drop_non_finite`` have
            none; None: source i is row i).
        columns: the coordinates' names (None: unnamed).
        scaling: the public (lo_j, hi_j) each column was mapped from onto [0, 1] before
            clustering (``kmeans(..., scale=True)``), or None. The run's state, the program's
            points and the release are on that scale; ``centroids`` are mapped back,
            lo_j + μ_j (hi_j − lo_j).

    ``centroids`` (also ``result``), ``assignments`` (every source's centroid) and the scores
    against the labels ``rand_index``, ``adjusted_rand_index``, ``normalized_mutual_info``
    (None without labels; the non-private run's in ``report.utility``) are read from it.

    Examples:
        >>> import numpy as np, dpcomm
        >>> points = np.vstack([np.zeros((20, 2)), np.ones((20, 2))])
        >>> run = dpcomm.kmeans(points, k=2, iterations=1, seed=1,
        ...                     countermeasure=dpcomm.NoCountermeasure())
        >>> isinstance(run, dpcomm.KMeansRun), run.rand_index, run.centroids.shape
        (True, None, (2, 2))
        >>> sorted(set(run.assignments.tolist()))
        [0, 1]
    """

    program: KMeansProgram
    run: Run
    baseline: Run
    report: Report[KMeansUtility]
    input_rows: npt.NDArray[np.int64] | None = None
    columns: tuple[str, ...] | None = None
    scaling: tuple[tuple[float, float], ...] | None = None

    @property
    def centroids(self) -> npt.NDArray[np.float64]:
        """The final centroids (K × dimension), in the columns' own units."""
        centroids = np.asarray(self.run.state.centroids, dtype=np.float64)
        if self.scaling is None:
            return centroids
        lows, highs = (
            np.asarray(side, dtype=np.float64) for side in zip(*self.scaling, strict=True)
        )
        return lows + centroids * (highs - lows)

    @property
    def result(self) -> npt.NDArray[np.float64]:
        """The final centroids."""
        return self.centroids

    @cached_property
    def assignments(self) -> npt.NDArray[np.int64]:
        """Every source's nearest final centroid."""
        points = cast("npt.NDArray[np.float64]", self.program.source_rows())  # float32 is read
        assigned = self.program.assign(self.run.state, points)
        return np.asarray(assigned, dtype=np.int64)

    @property
    def rand_index(self) -> float | None:
        """The Rand index of the final clusters against the labels (None: no labels)."""
        return self.report.utility.rand_index

    @property
    def rand_index_nonprivate(self) -> float | None:
        """Non-private K-means' Rand index from the same start (None: no labels)."""
        return self.report.utility.rand_index_nonprivate

    @property
    def adjusted_rand_index(self) -> float | None:
        """The adjusted Rand index of the final clusters against the labels (None: no labels)."""
        return self.report.utility.adjusted_rand_index

    @property
    def normalized_mutual_info(self) -> float | None:
        """The normalized mutual information of the clusters and the labels (None: no labels)."""
        return self.report.utility.normalized_mutual_info

    def to_dict(self) -> dict[str, Any]:
        """``{"result": {"centroids": ...}, "report": ...}``: the one JSON document of every run."""
        from dpcomm._json import json_ready

        result: dict[str, Any] = {"centroids": json_ready(self.centroids)}
        if self.columns is not None:
            result["columns"] = list(self.columns)
        return {"result": result, "report": self.report.to_dict()}

    def __repr__(self) -> str:
        k, dimension = self.centroids.shape
        rand = ""
        if self.rand_index is not None:
            rand = f", Rand index {self.rand_index:.4f}, adjusted {self.adjusted_rand_index:.4f}"
        return f"KMeansRun({k} centroids in dimension {dimension}{rand}; {self.report.summary()})"


def result_is_of_delivered_tuples(program: AggregateProgram, run: Run) -> bool:
    """Whether a result computed elsewhere is that of the tuples the run delivered.

    True at once for a result computed here (`Run.result_computed_here`); else the query
    is evaluated over the delivered tuples, and a difference (an output was lost) warns.
    """
    if run.result_computed_here:
        return True
    masks = [run.delivered[name] for name in program.flow_names]
    computed = program.without_release().result(run.state) if program.release else run.result
    differences = compare_results(computed, evaluate(program.query, program.source_rows(), masks))
    if differences:
        warn(
            f"the run's result differs from the result of the tuples it delivered "
            f"({len(differences)} differences, e.g. {differences[0]}): the utility "
            f"reported is that of the delivered tuples"
        )
    return not differences


def _delivered_flag(utility: AggregateUtility | ReleaseUtility) -> bool:
    """``result_is_of_delivered_tuples`` of a utility (True for a release's expected one)."""
    return utility.result_is_of_delivered_tuples if isinstance(utility, AggregateUtility) else True


def _expected_utility(
    program: AggregateProgram,
    run: Run,
    release: ReleaseReport,
    released: list[list[Row]],
    estimated: bool,
) -> ReleaseUtility:
    """A release's expected utility: S, P, the released rows' count and the noises only."""
    return release_utility(
        sources=program.num_sources,
        delivery_probability=delivery_probabilities(program, run),
        released={name: len(rows) for name, rows in zip(program.flow_names, released, strict=True)},
        noises=[(a.aggregate, a.standard_deviation, a.half_width_95) for a in release.aggregates],
        estimated=estimated,
    )


def aggregate_run(
    program: AggregateProgram,
    run: Run,
    baseline: Run,
    *,
    composition: ReleaseComposition | None = None,
) -> AggregateRun:
    """The [`AggregateRun`][] of ``run`` and its non-private ``baseline``, reported.

    Under a noisy release the noise is drawn once (the released rows are the result's and the
    report's), and nothing of the report compares them with the data: the utility is the
    expected one ([`ReleaseUtility`][]); [`compare_with_exact`][] is the separate call that
    does compare them. ``composition``: traffic and release composed, as prepared (else
    composed here from the run's guarantee).
    """
    if program.release is not None and run.privacy is not None:
        released = program.core_result(run.state)  # the rows the run released (drawn once)
        release = release_report(program, run.privacy, released, composition=composition)
        expected = _expected_utility(program, run, release, released, False)
        report: Report[AggregateUtility] | Report[ReleaseUtility] = replace(
            run_report(run, baseline, expected, sql=program.query.sql, released=True),
            release=release,
        )
        return AggregateRun(program, run.result, run, baseline, report)
    utility = aggregate_utility(
        program,
        run,
        baseline,
        result_is_of_delivered_tuples=result_is_of_delivered_tuples(program, run),
    )
    report = run_report(run, baseline, utility, sql=program.query.sql)
    return AggregateRun(program, run.result, run, baseline, report)


def planned_release(
    program: AggregateProgram, countermeasures: Countermeasures, *, delta: float
) -> tuple[Guarantee, ReleaseReport]:
    """What a run of ``program`` reports of its release before any noise is drawn.

    The guarantee of traffic and release (`dpcomm.pipeline.job.planned_guarantee`, every batch
    as planned) and the release's report over it (no keys selected yet), as a run gives them.
    """
    guarantee = planned_guarantee(program, countermeasures, delta=delta)
    return guarantee, release_report(program, guarantee.traffic, composition=guarantee.release)


def compare_with_exact(run: AggregateRun) -> AggregateUtility:
    """The published values of ``run`` against the exact result over every tuple.

    For whoever holds the data (benchmarks, tests): every aggregate's relative error
    against the non-private baseline's exact result, and the groups the run lost. The
    published values are the run's own (under a noisy release, the rows it released: the
    noise is not drawn again; estimates when the run has them). Under a release this reveals
    the data beyond the release: no report, ``--json`` or published output contains it.

    Examples:
        >>> import dpcomm
        >>> run = dpcomm.run_sql("SELECT A, COUNT(*) FROM t GROUP BY A", dpcomm.datasets.diabetes(),
        ...                      countermeasure=dpcomm.NoCountermeasure(), num_targets=3, seed=1,
        ...                      release=dpcomm.Laplace(1e9), keys={"A": [20, 30]})
        >>> dpcomm.compare_with_exact(run).mean_relative_error["COUNT(*)"] < 1e-6
        True
    """
    if not isinstance(run, AggregateRun):
        raise InvalidParameterError("run", "an AggregateRun (what dpcomm.run_sql returns)", run)
    program = run.program
    results = None
    column_names = None
    if run.report.estimate is not None:
        if program.release is not None:
            estimate = released_estimate(program, run.run)
        else:
            estimate = unbiased_estimate(program, run.run, run.baseline)
        results = estimate.per_set
        column_names = estimate.error_names or estimate.report.columns
    return aggregate_utility(
        program,
        run.run,
        run.baseline,
        result_is_of_delivered_tuples=result_is_of_delivered_tuples(program, run.run),
        results=results,
        column_names=column_names,
    )


def _executed(prepared: Prepared) -> tuple[Run, Run]:
    """The prepared run in its engine, and its non-private baseline (same plan, not accounted).

    The engine executes the prepared plan (it does not prepare it again); the run's
    guarantee is then checked against what the budget was charged.
    """
    job = prepared.job
    program = job.program
    run = job.engine.execute(
        program,
        job.countermeasures,
        delta=job.delta,
        seed=job.seed,
        progress=job.progress,
        target_epsilon=job.target_epsilon,
        prepared=prepared.plan,
    )
    if run.privacy is not None:
        prepared.guarantee.check_reported(prepared.charged, run.privacy)
    exact = (
        program.without_release()
        if isinstance(program, AggregateProgram | KMeansProgram)
        else program
    )
    return run, job.engine.baseline(exact, seed=job.seed)


def execute_aggregate(prepared: Prepared) -> AggregateRun:
    """Execute a prepared Aggregate job and report it (estimated, if the job asks)."""
    program = prepared.job.program
    if not isinstance(program, AggregateProgram):
        raise InvalidParameterError("job", "an Aggregate job", program)
    run, baseline = _executed(prepared)
    composition = None
    if program.release is not None and run.privacy is not None:
        composition = prepared.guarantee.composed_with(run.privacy)
    outcome = aggregate_run(program, run, baseline, composition=composition)
    return outcome.with_unbiased_estimate() if prepared.job.estimate == "unbiased" else outcome


def execute_kmeans(
    prepared: Prepared,
    *,
    test_points: npt.NDArray[np.float64] | None = None,
    test_labels: npt.NDArray[np.int64] | None = None,
) -> KMeansRun:
    """Execute a prepared K-means job and report it.

    With ``test_points`` and ``test_labels`` the report has both runs' scores on them. The
    privacy report's caveats say what the guarantee does not cover of the initial centroids
    ([`dpcomm.queries.kmeans.KMeansProgram.initialisation_caveat`][]). Under a noisy release
    the report has it (`dpcomm.release.kmeans.kmeans_release_report`), composed with the
    traffic the run reported, and its efficiency says nothing of the data; the label scores
    read the labelled points and are the analyst's evaluation, not part of the release.
    """
    program = prepared.job.program
    if not isinstance(program, KMeansProgram):
        raise InvalidParameterError("job", "a K-means job", program)
    run, baseline = _executed(prepared)
    utility = kmeans_utility(
        program, run, baseline, test_points=test_points, test_labels=test_labels
    )
    released = program.release is not None
    report = run_report(run, baseline, utility, released=released)
    if released and run.privacy is not None:
        from dpcomm.release.kmeans import kmeans_release_report

        composition = prepared.guarantee.composed_with(run.privacy)
        release = kmeans_release_report(program.release, run.privacy, composition)
        report = replace(report, release=release, privacy=_released_centroids(report.privacy))
    caveat = program.initialisation_caveat
    if caveat is not None:
        privacy = replace(report.privacy, caveats=(*report.privacy.caveats, caveat))
        report = replace(report, privacy=privacy)
    return KMeansRun(program, run, baseline, report)


def _released_centroids(privacy: PrivacyReport) -> PrivacyReport:
    """``privacy`` with the paper's caveat on routing by centroids replaced: they are released.

    Under a noisy release the centroids every iteration routes by are DP outputs composed into
    the guarantee (`dpcomm.release.kmeans`), no longer state treated as public.
    """
    from dpcomm.plan.privacy import STATE_CAVEAT

    stem = STATE_CAVEAT.split("{names}", 1)[1][:40]
    kept = tuple(c for c in privacy.caveats if stem not in c)
    note = (
        "every iteration routes by the previous iteration's noisy centroids, which are "
        "differentially private outputs composed into the guarantee with the traffic "
        "(see report.release)"
    )
    return replace(privacy, caveats=(*kept, note))


def _job(
    program: QueryProgram,
    countermeasure: Countermeasures,
    engine: Engine | None,
    options: RunOptions,
) -> Prepared:
    """The job of ``program`` with ``options`` (default engine: in memory), prepared."""
    from dpcomm.pipeline.charge import query_record

    delta = options["delta"]
    if delta is None:
        raise InvalidParameterError("delta", "the plan's δ (a run is accounted)", None)
    kind: Workload = "kmeans" if isinstance(program, KMeansProgram) else "aggregate"
    job = Job(
        program,
        countermeasure,
        delta,
        MemoryEngine() if engine is None else engine,
        kind,
        query_record(program),
        seed=options.get("seed"),
        progress=options.get("progress", False),
        target_epsilon=options.get("target_epsilon"),
    )
    return prepare(job)


def run_aggregate(
    program: AggregateProgram,
    countermeasure: Countermeasures,
    *,
    engine: Engine | None = None,
    **options: Unpack[RunOptions],
) -> AggregateRun:
    """Run an Aggregate query with ``countermeasure`` on every grouping set, and report.

    ``engine`` (default: in memory) runs it with ``options`` (``delta``, ``seed``, ...:
    [`RunOptions`][]): a [`Job`][dpcomm.pipeline.job.Job] prepared and executed.
    """
    return execute_aggregate(_job(program, countermeasure, engine, options))


def run_kmeans(
    program: KMeansProgram,
    countermeasure: Countermeasures,
    *,
    test_points: npt.NDArray[np.float64] | None = None,
    test_labels: npt.NDArray[np.int64] | None = None,
    engine: Engine | None = None,
    **options: Unpack[RunOptions],
) -> KMeansRun:
    """Run K-means with ``countermeasure`` in every iteration, and report.

    With ``test_points`` and ``test_labels`` the report has both runs' scores on them;
    ``engine`` and ``options`` as in [`run_aggregate`][] ([`execute_kmeans`][]).
    """
    prepared = _job(program, countermeasure, engine, options)
    return execute_kmeans(prepared, test_points=test_points, test_labels=test_labels)
