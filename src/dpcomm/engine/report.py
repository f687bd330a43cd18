"""Runs of the paper's two use cases with their reports: privacy, utility and efficiency.

Every engine's run gets the same report, one JSON shape: ``{"privacy", "utility", "efficiency"
(with the traffic of every flow), ...}``, a deployment adding its ``"wire"`` section. The
efficiency is measured against the same plan without countermeasures (the non-private baseline
of Section 2.5), always computed in memory.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpcomm.engine.memory import simulate
from dpcomm.engine.run import Run
from dpcomm.errors import DpcommWarning
from dpcomm.plan.countermeasures import Countermeasure, NoCountermeasure
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.queries.aggregate import AggregateProgram, AggregateState
from dpcomm.queries.groupby import compare_results, evaluate, evaluate_grouping_set
from dpcomm.queries.kmeans import KMeansProgram, KMeansState, rand_index
from dpcomm.queries.program import QueryProgram

Row = dict[str, Any]

SEEDED_NOTE = (
    "seeded run: every draw follows from the seed, so the guarantee does not hold against "
    "anyone who knows the seed (use no seed for a real deployment)"
)


class Engine(Protocol):
    """Something that runs a program with countermeasures (the memory or the network engine)."""

    name: str

    def execute(
        self,
        program: QueryProgram,
        countermeasures: Countermeasure | Mapping[str, Countermeasure],
        *,
        delta: float,
        seed: int | None = None,
        progress: bool = False,
        target_epsilon: float | None = None,
    ) -> Run:
        """Run ``program`` and return the :class:`~dpcomm.engine.run.Run`."""
        ...


class MemoryEngine:
    """The in-memory engine (the vectorized simulator): :func:`dpcomm.engine.memory.simulate`."""

    name = "memory"
    execute = staticmethod(simulate)


def number(value: float) -> float | str:
    """JSON has no infinity: ε = ∞ is written as the string "inf"."""
    return "inf" if math.isinf(value) else value


NO_COUNTERMEASURE_REASON = (
    "no countermeasure: every message goes to the target its data chooses, so the traffic "
    "tells neighbouring inputs apart; sampling σ > 0 (local flooding) or scramblers make it "
    "finite (`dpcomm plan` finds the cheapest configuration for a target ε)"
)


def _why_infinite(item: Any) -> str | None:
    """Why a cluster's ε is infinite and what would make it finite (None when finite)."""
    if not math.isinf(item.guarantee.epsilon) or not item.cluster.data_dependent:
        return None
    if isinstance(item.countermeasure, NoCountermeasure):
        return NO_COUNTERMEASURE_REASON
    from dpcomm.accounting.infinite import explain_infinite
    from dpcomm.accounting.mechanisms import LocalRandomizer, ScramblerMechanism

    for part in item.parts:
        mechanism = part.mechanism
        if math.isinf(part.guarantee.epsilon) and isinstance(
            mechanism, LocalRandomizer | ScramblerMechanism
        ):
            return explain_infinite(mechanism, delta=part.guarantee.delta).describe()
    return None


def privacy_report(privacy: PlanGuarantee) -> dict[str, Any]:
    """The plan's and every cluster's guarantee, JSON-ready."""
    clusters = []
    for item in privacy.clusters:
        cluster = item.cluster
        clusters.append(
            {
                "cluster": cluster.name,
                "data_dependent": cluster.data_dependent,
                "num_targets": cluster.num_targets,
                "num_senders": cluster.num_senders,
                "countermeasure": item.countermeasure.describe(),
                "epsilon": number(item.guarantee.epsilon),
                "delta": item.guarantee.delta,
                "method": item.guarantee.method,
                "why_infinite": _why_infinite(item),
                "parts": [
                    {
                        "batch_size": getattr(part.mechanism, "batch_size", None),
                        "instances": part.num_instances,
                        "epsilon": number(part.guarantee.epsilon),
                        "delta": part.guarantee.delta,
                        "method": part.guarantee.method,
                        "lower_bound": None
                        if part.lower_bound is None
                        else number(part.lower_bound),
                    }
                    for part in item.parts
                ],
            }
        )
    return {
        "epsilon": number(privacy.guarantee.epsilon),
        "delta": privacy.guarantee.delta,
        "method": privacy.guarantee.method,
        "epsilon_pld": None if privacy.pld_epsilon is None else number(privacy.pld_epsilon),
        "epsilon_basic": number(privacy.basic_epsilon),
        "epsilon_lower_bound": None if privacy.lower_bound is None else number(privacy.lower_bound),
        "delta_per_cluster": privacy.delta_per_cluster,
        "notes": list(privacy.notes),
        "worst_path": list(privacy.worst_path),
        "caveats": list(privacy.caveats),
        "clusters": clusters,
    }


def traffic_report(run: Run) -> list[dict[str, Any]]:
    """Messages, dummies and edges of every routed flow."""
    return [
        {
            "flow": flow.flow,
            "messages": flow.messages,
            "dummies": flow.dummies,
            "edges": flow.edges,
        }
        for flow in run.traffic
    ]


def efficiency_report(run: Run, baseline: Run) -> dict[str, Any]:
    """Messages, bytes, channels and consents, beside the non-private baseline."""
    mine, base = run.efficiency, baseline.efficiency
    seconds = run.seconds
    return {
        "messages": mine.messages,
        "messages_nonprivate": base.messages,
        "message_overhead": mine.messages / base.messages if base.messages else math.nan,
        "dummy_messages": mine.dummy_messages,
        "bytes": mine.bytes,
        "bytes_nonprivate": base.bytes,
        "frame_bytes": mine.frame_bytes,
        "max_channels_per_node": mine.max_channels,
        "mean_channels_per_node": mine.mean_channels,
        "max_channels_per_node_nonprivate": base.max_channels,
        "mean_channels_per_node_nonprivate": base.mean_channels,
        "max_channels_by_role": mine.max_channels_by_role,
        "num_scramblers": run.transformed.num_scramblers(),
        "batch_sizes": {
            flow: sorted(set(sizes), reverse=True)
            for flow, sizes in run.transformed.batches.items()
        },
        "extra_consents": run.extra_consents(),
        "engine": run.engine,
        "seconds": seconds,
        "messages_per_second": mine.messages / seconds if seconds > 0 else math.nan,
        "traffic": traffic_report(run),
    }


def _keyed(rows: list[Row], key_columns: list[str]) -> dict[tuple[Any, ...], Row]:
    """Rows by their grouping key (numbered when a key repeats, e.g. unselected columns)."""
    seen: Counter[tuple[Any, ...]] = Counter()
    keyed = {}
    for row in rows:
        key = tuple(row[c] for c in key_columns)
        keyed[(*key, seen[key])] = row
        seen[key] += 1
    return keyed


def aggregate_utility(
    program: AggregateProgram,
    masks: list[npt.NDArray[np.bool_]],
    *,
    exact_rows: list[list[Row]] | None = None,
    private_rows: list[list[Row]] | None = None,
    used: list[int] | None = None,
) -> dict[str, Any]:
    """Tuples used per grouping set and the error of every aggregate against the full result.

    The relative error of a value is |private − exact| / |exact| (absolute when exact = 0);
    a group present in the exact result but absent from the private one is *missing*.
    ``exact_rows`` and ``private_rows`` (per grouping set) are the results already computed
    by an engine whose rows are not in memory (its baseline's and its own); by default both
    are evaluated over the program's table. ``used``: the tuples delivered per grouping set
    (default: counted in ``masks``).
    """
    query = program.query
    group_names = [o.name for o in query.outputs if o.kind == "group"]
    value_names = [o.name for o in query.outputs if o.kind == "aggregate"]
    errors: dict[str, list[float]] = {name: [] for name in value_names}
    total_groups = missing = 0
    per_set = []
    for index, name in enumerate(program.flow_names):
        if exact_rows is None:
            everything = np.ones(program.num_sources, dtype=bool)
            exact_rows_here = evaluate_grouping_set(query, program.source_rows(), index, everything)
        else:
            exact_rows_here = exact_rows[index]
        if private_rows is None:
            private_rows_here = evaluate_grouping_set(
                query, program.source_rows(), index, masks[index]
            )
        else:
            private_rows_here = private_rows[index]
        exact = _keyed(exact_rows_here, group_names)
        private = _keyed(private_rows_here, group_names)
        set_missing = 0
        for key, row in exact.items():
            other = private.get(key)
            if other is None:
                set_missing += 1
                continue
            for column in value_names:
                truth, value = row[column], other[column]
                if truth is None or value is None:
                    if (truth is None) != (value is None):
                        errors[column].append(1.0)
                    continue
                scale = abs(float(truth)) or 1.0
                errors[column].append(abs(float(value) - float(truth)) / scale)
        total_groups += len(exact)
        missing += set_missing
        delivered = int(masks[index].sum()) if used is None else used[index]
        per_set.append(
            {
                "grouping_set": name,
                "tuples_used": delivered,
                "tuples_used_fraction": delivered / program.num_sources,
                "groups": len(exact),
                "groups_missing": set_missing,
            }
        )
    return {
        "sources": program.num_sources,
        "tuples_used": sum(p["tuples_used"] for p in per_set),
        "tuples_nonprivate": program.num_sources * len(per_set),
        "grouping_sets": per_set,
        "groups": total_groups,
        "groups_missing": missing,
        "mean_relative_error": {c: (float(np.mean(v)) if v else 0.0) for c, v in errors.items()},
        "max_relative_error": {c: (float(np.max(v)) if v else 0.0) for c, v in errors.items()},
    }


def base_report(run: Run, baseline: Run) -> dict[str, Any]:
    """The parts of a report every program shares (privacy, efficiency, the randomness)."""
    countermeasures = {
        c.name: run.transformed.requested[c.name].describe()
        for c in run.transformed.plan.clusters
        if c.data_dependent
    }
    described = sorted(set(countermeasures.values()))
    report: dict[str, Any] = {
        "query": run.program.name,
        "engine": run.engine,
        "countermeasure": described[0] if len(described) == 1 else countermeasures,
        "seed": run.seed,
        "randomness": SEEDED_NOTE if run.seed is not None else "fresh operating-system entropy",
        "privacy": privacy_report(run.privacy),
    }
    report["efficiency"] = efficiency_report(run, baseline)
    return report


@dataclass(frozen=True, eq=False)
class AggregateRun:
    """An Aggregate run: the decentralized result, the run, its baseline and the report."""

    program: AggregateProgram
    result: list[Row]
    run: Run
    baseline: Run
    report: dict[str, Any]


def _execute(
    program: QueryProgram,
    countermeasure: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float,
    seed: int | None,
    progress: bool,
    engine: Engine | None,
    target_epsilon: float | None,
) -> tuple[Run, Run]:
    """The run in ``engine`` (default: in memory) and its non-private baseline.

    The baseline runs in memory, or in ``engine`` itself when it says so (``runs_baseline``:
    the Dask engine, whose rows may not fit in memory).
    """
    chosen: Engine = MemoryEngine() if engine is None else engine
    run = chosen.execute(
        program,
        countermeasure,
        delta=delta,
        seed=seed,
        progress=progress,
        target_epsilon=target_epsilon,
    )
    if getattr(chosen, "runs_baseline", False):
        baseline = chosen.execute(program, NoCountermeasure(), delta=delta, seed=seed)
    else:
        baseline = simulate(program, NoCountermeasure(), delta=delta, seed=seed)
    return run, baseline


#: What the values of an Aggregate result are (said in every report).
RESULT_SEMANTICS = (
    "exact over the tuples that reached their compute node; not differentially private: the "
    "countermeasures hide the traffic pattern, not the values"
)


def json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it.

    Arrays become lists; NaN and ±∞ the strings "NaN", "inf" and "-inf" (null is SQL NULL
    only); DECIMAL values, dates and times their exact text.
    """
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, np.generic):
        return json_ready(value.item())
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def delivery_probabilities(program: AggregateProgram, run: Run) -> dict[str, float]:
    """P per grouping set: the probability that a real tuple is counted (1 − σ + σ/T under R_σ).

    Clusters without countermeasure, and single-target ones (which send straight), count
    every tuple.
    """
    from dpcomm.plan.costs import delivery_probability

    probabilities = {}
    for name in program.flow_names:
        chosen = run.transformed.countermeasures[name]
        targets = program.plan.group(program.plan.flow(name).receiver).count
        if isinstance(chosen, NoCountermeasure) or targets == 1:
            probabilities[name] = 1.0
        else:
            probabilities[name] = delivery_probability(
                sampling_rate=chosen.sampling_rate, num_targets=targets
            )
    return probabilities


def unbiased_estimate(program: AggregateProgram, run: Run) -> tuple[list[Row], dict[str, float]]:
    """The result with COUNT and SUM divided by their grouping set's P (unbiased estimates).

    Each real tuple is counted independently with probability P (R_σ at its source), so a
    group's delivered COUNT and SUM have expectation P times the full ones. AVG, MIN and MAX
    are left as they are (a ratio or an extreme of the delivered tuples). Returns the rows and
    P per grouping set.
    """
    probabilities = delivery_probabilities(program, run)
    scaled = estimated_columns(program)
    rows: list[Row] = []
    for name, flow_result in zip(program.flow_names, flow_rows(program, run.state), strict=True):
        factor = probabilities[name]
        for row in flow_result:
            rows.append(
                {
                    column: (
                        float(value) / factor if column in scaled and value is not None else value
                    )
                    for column, value in row.items()
                }
            )
    return rows, probabilities


def estimated_columns(program: AggregateProgram) -> set[str]:
    """The output columns an unbiased estimate scales (COUNT and SUM; floats once scaled)."""
    return {
        o.name
        for o in program.query.outputs
        if o.kind == "aggregate" and o.function in ("count", "count_star", "sum")
    }


def with_unbiased_estimate(outcome: AggregateRun) -> AggregateRun:
    """``outcome`` whose result is :func:`unbiased_estimate`'s, labelled in its report."""
    rows, probabilities = unbiased_estimate(outcome.program, outcome.run)
    shown = ", ".join(f"{name}: {p:.6g}" for name, p in probabilities.items())
    label = f"unbiased: COUNT and SUM divided by the delivery probability P ({shown})"
    return replace(outcome, result=rows, report={**outcome.report, "estimate": label})


def flow_rows(program: AggregateProgram, state: AggregateState) -> list[list[Row]]:
    """The result rows of every grouping set (in the result's order) from a final state."""
    rows = []
    for flow in program.flow_names:
        only = tuple(item for item in state.outputs if item[0][0] == flow)
        rows.append(program.result(AggregateState(only)))
    return rows


def aggregate_report(
    program: AggregateProgram, run: Run, baseline: Run, *, check_result: bool = False
) -> dict[str, Any]:
    """The report of an Aggregate run.

    The utility is measured on the tuples the run delivered. ``check_result`` (an engine that
    computes the result elsewhere, e.g. on the network) also checks that the result the run
    returned is the result of those tuples, and warns when it is not (an output was lost).
    """
    report = base_report(run, baseline)
    report["sql"] = program.query.sql
    report["result_semantics"] = RESULT_SEMANTICS
    if run.engine == "dask":
        # Computed from the delivered tuples on the workers, as in memory; the rows stay there.
        counts = run.tuples_used()
        report["utility"] = aggregate_utility(
            program,
            [],
            exact_rows=flow_rows(program, baseline.state),
            private_rows=flow_rows(program, run.state),
            used=[counts[name] for name in program.flow_names],
        )
        masks = []
    else:
        masks = [run.delivered[name] for name in program.flow_names]
        report["utility"] = aggregate_utility(program, masks)
    # In memory the result is computed from those very tuples; elsewhere it is checked.
    report["utility"]["result_is_of_delivered_tuples"] = True
    if check_result:
        differences = compare_results(
            run.result, evaluate(program.query, program.source_rows(), masks)
        )
        report["utility"]["result_is_of_delivered_tuples"] = not differences
        if differences:
            warnings.warn(
                f"the run's result differs from the result of the tuples it delivered "
                f"({len(differences)} differences, e.g. {differences[0]}): the utility "
                f"reported is that of the delivered tuples",
                DpcommWarning,
                stacklevel=3,
            )
    if run.details:
        report.update(run.details)
    return report


def run_aggregate(
    program: AggregateProgram,
    countermeasure: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float,
    seed: int | None = None,
    progress: bool = False,
    engine: Engine | None = None,
    target_epsilon: float | None = None,
) -> AggregateRun:
    """Run an Aggregate query with ``countermeasure`` on every grouping set, and report."""
    run, baseline = _execute(
        program,
        countermeasure,
        delta=delta,
        seed=seed,
        progress=progress,
        engine=engine,
        target_epsilon=target_epsilon,
    )
    elsewhere = engine is not None and engine.name not in ("memory", "dask")
    report = aggregate_report(program, run, baseline, check_result=elsewhere)
    return AggregateRun(program, run.result, run, baseline, report)


@dataclass(frozen=True, eq=False)
class KMeansRun:
    """A K-means run: final centroids, Rand indices, the run, its baseline and the report."""

    program: KMeansProgram
    centroids: npt.NDArray[np.float64]
    rand_index: float
    rand_index_nonprivate: float
    run: Run
    baseline: Run
    report: dict[str, Any]

    @property
    def result(self) -> npt.NDArray[np.float64]:
        """The final centroids."""
        return self.centroids


def kmeans_report(
    program: KMeansProgram,
    run: Run,
    baseline: Run,
    *,
    test_points: npt.NDArray[np.float64],
    test_labels: npt.NDArray[np.int64],
) -> tuple[dict[str, Any], float, float]:
    """The report of a K-means run, its Rand index and the baseline's."""
    state: KMeansState = run.state
    base_state: KMeansState = baseline.state
    private_index = rand_index(test_labels, program.assign(state, test_points))
    nonprivate_index = rand_index(test_labels, program.assign(base_state, test_points))
    sources = program.num_sources
    used = [run.tuples_used()[program.flow_name(i + 1)] for i in range(program.num_iterations)]
    report = base_report(run, baseline)
    report["utility"] = {
        "sources": sources,
        "test_points": len(test_points),
        "rand_index": private_index,
        "rand_index_nonprivate": nonprivate_index,
        "tuples_used_per_iteration": used,
        "tuples_used_fraction": float(np.mean(used)) / sources,
    }
    if run.details:
        report.update(run.details)
    return report, private_index, nonprivate_index


def run_kmeans(
    program: KMeansProgram,
    countermeasure: Countermeasure | Mapping[str, Countermeasure],
    *,
    test_points: npt.NDArray[np.float64],
    test_labels: npt.NDArray[np.int64],
    delta: float,
    seed: int | None = None,
    progress: bool = False,
    engine: Engine | None = None,
    target_epsilon: float | None = None,
) -> KMeansRun:
    """Run K-means with ``countermeasure`` in every iteration; Rand index on the test set."""
    run, baseline = _execute(
        program,
        countermeasure,
        delta=delta,
        seed=seed,
        progress=progress,
        engine=engine,
        target_epsilon=target_epsilon,
    )
    report, private_index, nonprivate_index = kmeans_report(
        program, run, baseline, test_points=test_points, test_labels=test_labels
    )
    return KMeansRun(
        program, run.state.centroids, private_index, nonprivate_index, run, baseline, report
    )
