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
from dpcomm.engine.estimate import released_estimate, unbiased_estimate
from dpcomm.engine.report import (
    KeySelectionReport,
    ReleasedAggregate,
    ReleaseReport,
    Report,
    run_report,
)
from dpcomm.engine.run import Run, RunOptions
from dpcomm.engine.utility import (
    AggregateUtility,
    KMeansUtility,
    aggregate_utility,
    kmeans_utility,
)
from dpcomm.errors import InvalidParameterError, warn
from dpcomm.plan.countermeasures import Countermeasures
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import compare_results, evaluate
from dpcomm.queries.kmeans import KMeansProgram
from dpcomm.queries.program import QueryProgram

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
        report: privacy, utility and efficiency.
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
    report: Report[AggregateUtility]
    estimate_columns: tuple[tuple[str, str], ...] | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The result's column names, in order."""
        if self.estimate_columns is not None:
            return tuple(name for name, _ in self.estimate_columns)
        return self.program.query.result_names

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
        ([`dpcomm.engine.estimate.unbiased_estimate`][]). The report says so
        (``report.estimate``, ``report.result_semantics``), and its utility is that of the
        estimates against the exact result. The privacy guarantee is unchanged
        (post-processing). Under a noisy release the estimates are of the released values,
        and their intervals cover the noise too
        ([`dpcomm.engine.estimate.released_estimate`][]).
        """
        if self.program.release is not None:
            estimate = released_estimate(self.program, self.run)
        else:
            estimate = unbiased_estimate(self.program, self.run, self.baseline)
        utility = aggregate_utility(
            self.program,
            self.run,
            self.baseline,
            result_is_of_delivered_tuples=self.report.utility.result_is_of_delivered_tuples,
            results=estimate.per_set,
            column_names=estimate.error_names or estimate.report.columns,
        )
        report = replace(self.report, estimate=estimate.report, utility=utility)
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

    @property
    def centroids(self) -> npt.NDArray[np.float64]:
        """The final centroids (K × dimension)."""
        return np.asarray(self.run.state.centroids, dtype=np.float64)

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

        return {
            "result": {"centroids": json_ready(self.centroids)},
            "report": self.report.to_dict(),
        }

    def __repr__(self) -> str:
        k, dimension = self.centroids.shape
        rand = ""
        if self.rand_index is not None:
            rand = f", Rand index {self.rand_index:.4f}, adjusted {self.adjusted_rand_index:.4f}"
        return f"KMeansRun({k} centroids in dimension {dimension}{rand}; {self.report.summary()})"


def _execute(
    program: QueryProgram,
    countermeasure: Countermeasures,
    engine: Engine | None,
    options: RunOptions,
) -> tuple[Run, Run]:
    """The run in ``engine`` (default: in memory) and its non-private baseline."""
    chosen: Engine = MemoryEngine() if engine is None else engine
    run = chosen.execute(program, countermeasure, **options)
    exact = program.without_release() if isinstance(program, AggregateProgram) else program
    return run, chosen.baseline(exact, seed=options.get("seed"))


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


def aggregate_run(program: AggregateProgram, run: Run, baseline: Run) -> AggregateRun:
    """The [`AggregateRun`][] of ``run`` and its non-private ``baseline``, reported."""
    utility = aggregate_utility(
        program,
        run,
        baseline,
        result_is_of_delivered_tuples=result_is_of_delivered_tuples(program, run),
    )
    report = run_report(run, baseline, utility, sql=program.query.sql)
    if program.release is not None and run.privacy is not None:
        released = program.core_result(run.state)  # the rows the run released (drawn once)
        report = replace(report, release=release_report(program, run.privacy, released))
    return AggregateRun(program, run.result, run, baseline, report)


def release_report(
    program: AggregateProgram,
    privacy: PlanGuarantee,
    released: list[list[Row]] | None = None,
) -> ReleaseReport:
    """The release's noise and its composition with the traffic's guarantee ``privacy``.

    ``released`` (each grouping set's released core rows) gives the keys a threshold
    selected; without it (before the run) the report has none.
    """
    from dpcomm.plan.privacy import compose_release

    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    both = compose_release(privacy, release.noises)
    return ReleaseReport(
        mechanism=release.mechanism.name,
        epsilon=release.epsilon,
        delta=release.delta,
        keys=_keys_described(program),
        composed_epsilon=both.composed_epsilon,
        composed_delta=both.delta,
        summed_epsilon=both.summed_epsilon,
        epsilon_total=both.epsilon,
        aggregates=_aggregates_report(program),
        key_selection=_key_selection_report(program, released),
    )


def published_release(program: AggregateProgram, state: Any) -> dict[str, Any]:
    """What the result node of a deployment publishes under a noisy release (JSON-ready).

    The released rows and the release's own guarantee (ε2, δ2, each aggregate's noise, the
    keys and their selection). The noise is drawn here, in the result node's process, once
    per state (`AggregateProgram.core_result`): the exact aggregates do not leave the node.
    Not the composition with the traffic: it depends on the batches the scramblers actually
    ran, which the coordinator knows (``dpcomm deploy configs`` prints the planned one).
    """
    from dataclasses import asdict

    from dpcomm._json import json_ready

    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    released = program.core_result(state)
    selection = _key_selection_report(program, released)
    published: dict[str, Any] = json_ready(
        {
            "rows": program.result(state),
            "release": {
                "mechanism": release.mechanism.name,
                "epsilon": release.epsilon,
                "delta": release.delta,
                "keys": _keys_described(program),
                "aggregates": [asdict(a) for a in _aggregates_report(program)],
                "key_selection": None if selection is None else asdict(selection),
            },
        }
    )
    return published


def _aggregates_report(program: AggregateProgram) -> tuple[ReleasedAggregate, ...]:
    """Every released aggregate's noise, described."""
    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    aggregates = []
    for noise in release.noises:
        described = _released_label(program, noise.output)
        if release.selection is not None and noise.output == release.selection.count_output:
            described += " (selects keys" + (
                ", added for it)" if release.selection.count_added else ")"
            )
        kind = release.mechanism.name + (" (discrete)" if noise.integer else "")
        aggregates.append(
            ReleasedAggregate(
                described,
                kind,
                noise.sensitivity.l1,
                noise.sensitivity.l2,
                noise.scale,
                noise.standard_deviation,
                noise.half_width_95,
                noise.epsilon,
                noise.total_delta,
            )
        )
    return tuple(aggregates)


def _released_label(program: AggregateProgram, name: str) -> str:
    """``COUNT(*)``, ``SUM(body_mass_g clamped to [2500, 6500])``: a released core column."""
    output = next(o for o in program.query.outputs if o.name == name)
    clamps = {name: (column, low, high) for name, column, low, high in program.query.clamps}
    if output.function == "count_star":
        return "COUNT(*)"
    if output.column in clamps:
        column, low, high = clamps[output.column]
        function = "SUM" if output.function == "sum" else "COUNT"
        return f"{function}({column} clamped to [{low:g}, {high:g}])"
    return f"{(output.function or '').upper()}({output.column})"


def _keys_described(program: AggregateProgram) -> str:
    """How each grouping set's released keys were chosen, in a few words."""
    release = program.release
    if release is None:
        raise InvalidParameterError("program", "a program with a noisy release", None)
    selected = set() if release.selection is None else set(release.selection.grouping_sets)
    domains = dict(release.domains)
    public = [
        " × ".join(str(len(domains[c])) for c in columns) if columns else "1"
        for index, columns in enumerate(program.query.grouping_sets)
        if index not in selected
    ]
    parts = []
    if public:
        parts.append(
            f"public key domain ({' + '.join(public)} keys: every key released, absent ones too)"
        )
    if selected:
        threshold = release.selection.threshold if release.selection else 0
        sets = ", ".join(program.flow_names[i] for i in sorted(selected))
        parts.append(f"keys of {sets} selected by a noisy-count threshold τ = {threshold}")
    return "; ".join(parts)


def _key_selection_report(
    program: AggregateProgram, released: list[list[Row]] | None
) -> KeySelectionReport | None:
    """The key selection's threshold and δ, and the keys it released (None: no selection)."""
    release = program.release
    selection = None if release is None else release.selection
    if release is None or selection is None:
        return None
    counted = _released_label(program, selection.count_output)
    keys = None
    if released is not None:
        keys = {
            program.flow_names[index]: tuple(
                tuple(row[c] for c in program.query.grouping_sets[index]) for row in released[index]
            )
            for index in selection.grouping_sets
        }
    gaussian = release.mechanism.name == "gaussian"
    return KeySelectionReport(
        mechanism="make_gaussian_threshold" if gaussian else "make_laplace_threshold",
        count=counted + (" (added)" if selection.count_added else ""),
        threshold=selection.threshold,
        delta=selection.delta,
        opendp_delta=selection.accounted_delta,
        changed_keys=selection.distances.l0,
        grouping_sets=tuple(program.flow_names[i] for i in selection.grouping_sets),
        selected_keys=keys,
    )


def run_aggregate(
    program: AggregateProgram,
    countermeasure: Countermeasures,
    *,
    engine: Engine | None = None,
    **options: Unpack[RunOptions],
) -> AggregateRun:
    """Run an Aggregate query with ``countermeasure`` on every grouping set, and report.

    ``engine`` (default: in memory) runs it with ``options`` (``delta``, ``seed``, ...:
    [`RunOptions`][]).
    """
    run, baseline = _execute(program, countermeasure, engine, options)
    return aggregate_run(program, run, baseline)


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
    ``engine`` and ``options`` as in [`run_aggregate`][]. The privacy report's caveats say
    what the guarantee does not cover of the initial centroids
    ([`dpcomm.queries.kmeans.KMeansProgram.initialisation_caveat`][]).
    """
    run, baseline = _execute(program, countermeasure, engine, options)
    utility = kmeans_utility(
        program, run, baseline, test_points=test_points, test_labels=test_labels
    )
    report = run_report(run, baseline, utility)
    caveat = program.initialisation_caveat
    if caveat is not None:
        privacy = replace(report.privacy, caveats=(*report.privacy.caveats, caveat))
        report = replace(report, privacy=privacy)
    return KMeansRun(program, run, baseline, report)
