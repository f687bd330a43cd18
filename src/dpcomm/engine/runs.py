"""Runs of the paper's two use cases with their reports: privacy, utility and efficiency.

Each run executes the program twice with the same seed: with the countermeasures, and without
(the non-private baseline the metrics of Section 2.5 compare against).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.engine.simulator import SimulationRun, extra_consents, simulate
from dpcomm.plan.countermeasures import Countermeasure, NoCountermeasure
from dpcomm.plan.privacy import PlanGuarantee
from dpcomm.queries.aggregate import AggregateProgram
from dpcomm.queries.groupby import evaluate_grouping_set
from dpcomm.queries.kmeans import KMeansProgram, KMeansState, rand_index

Row = dict[str, Any]


def _number(value: float) -> float | str:
    """JSON has no infinity: ε = ∞ is written as the string "inf"."""
    return "inf" if math.isinf(value) else value


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
                "epsilon": _number(item.guarantee.epsilon),
                "delta": item.guarantee.delta,
                "method": item.guarantee.method,
                "parts": [
                    {
                        "batch_size": getattr(part.mechanism, "batch_size", None),
                        "instances": part.num_instances,
                        "epsilon": _number(part.guarantee.epsilon),
                        "delta": part.guarantee.delta,
                        "method": part.guarantee.method,
                        "lower_bound": None
                        if part.lower_bound is None
                        else _number(part.lower_bound),
                    }
                    for part in item.parts
                ],
            }
        )
    return {
        "epsilon": _number(privacy.guarantee.epsilon),
        "delta": privacy.guarantee.delta,
        "method": privacy.guarantee.method,
        "delta_per_cluster": privacy.delta_per_cluster,
        "worst_path": list(privacy.worst_path),
        "caveats": list(privacy.caveats),
        "clusters": clusters,
    }


def efficiency_report(
    run: SimulationRun, baseline: SimulationRun, seconds: float
) -> dict[str, Any]:
    """Messages, bytes, channels and consents, beside the non-private baseline."""
    mine, base = run.efficiency, baseline.efficiency
    scramblers = sum(a.num_scramblers for a in run.layout.assignments.values())
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
        "num_scramblers": scramblers,
        "extra_consents": extra_consents(run),
        "simulated_seconds": seconds,
        "simulated_messages_per_second": mine.messages / seconds if seconds > 0 else math.nan,
        "traffic": [
            {
                "flow": flow.flow,
                "messages": flow.messages,
                "dummies": flow.dummies,
                "edges": int(flow.senders.size),
            }
            for flow in run.traffic
        ],
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


def aggregate_utility(program: AggregateProgram, run: SimulationRun) -> dict[str, Any]:
    """Tuples used per grouping set and the error of every aggregate against the full result.

    The relative error of a value is |private − exact| / |exact| (absolute when exact = 0);
    a group present in the exact result but absent from the private one is *missing*.
    """
    query = program.query
    masks = program.masks(run.state)
    everything = np.ones(program.table.num_rows, dtype=bool)
    group_names = [o.name for o in query.outputs if o.kind == "group"]
    value_names = [o.name for o in query.outputs if o.kind == "aggregate"]
    errors: dict[str, list[float]] = {name: [] for name in value_names}
    total_groups = missing = 0
    per_set = []
    for index, name in enumerate(program.flow_names):
        exact = _keyed(evaluate_grouping_set(query, program.table, index, everything), group_names)
        private = _keyed(
            evaluate_grouping_set(query, program.table, index, masks[index]), group_names
        )
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
        used = int(masks[index].sum())
        per_set.append(
            {
                "grouping_set": name,
                "tuples_used": used,
                "tuples_used_fraction": used / program.table.num_rows,
                "groups": len(exact),
                "groups_missing": set_missing,
            }
        )
    return {
        "sources": program.table.num_rows,
        "tuples_used": sum(p["tuples_used"] for p in per_set),
        "tuples_nonprivate": program.table.num_rows * len(per_set),
        "grouping_sets": per_set,
        "groups": total_groups,
        "groups_missing": missing,
        "mean_relative_error": {c: (float(np.mean(v)) if v else 0.0) for c, v in errors.items()},
        "max_relative_error": {c: (float(np.max(v)) if v else 0.0) for c, v in errors.items()},
    }


@dataclass(frozen=True, eq=False)
class AggregateRun:
    """An Aggregate run: the decentralized result, the simulations and the report."""

    program: AggregateProgram
    result: list[Row]
    run: SimulationRun
    baseline: SimulationRun
    report: dict[str, Any]


def run_aggregate(
    program: AggregateProgram,
    countermeasure: Countermeasure,
    *,
    delta: float,
    seed: int | None = 0,
    progress: bool = False,
) -> AggregateRun:
    """Run an Aggregate query with ``countermeasure`` on every grouping set, and report."""
    start = time.perf_counter()
    run = simulate(program, countermeasure, delta=delta, rng=seed, progress=progress)
    seconds = time.perf_counter() - start
    baseline = simulate(program, NoCountermeasure(), delta=delta, rng=seed)
    result = program.result(run.state)
    report = {
        "query": program.name,
        "sql": program.query.sql,
        "countermeasure": countermeasure.describe(),
        "seed": seed,
        "privacy": privacy_report(run.privacy),
        "utility": aggregate_utility(program, run),
        "efficiency": efficiency_report(run, baseline, seconds),
    }
    return AggregateRun(program, result, run, baseline, report)


@dataclass(frozen=True, eq=False)
class KMeansRun:
    """A K-means run: final centroids, Rand indices, the simulations and the report."""

    program: KMeansProgram
    rand_index: float
    rand_index_nonprivate: float
    run: SimulationRun
    baseline: SimulationRun
    report: dict[str, Any]


def run_kmeans(
    program: KMeansProgram,
    countermeasure: Countermeasure,
    *,
    test_points: npt.NDArray[np.float64],
    test_labels: npt.NDArray[np.int64],
    delta: float,
    seed: int | None = 0,
    progress: bool = False,
) -> KMeansRun:
    """Run K-means with ``countermeasure`` in every iteration; Rand index on the test set."""
    start = time.perf_counter()
    run = simulate(program, countermeasure, delta=delta, rng=seed, progress=progress)
    seconds = time.perf_counter() - start
    baseline = simulate(program, NoCountermeasure(), delta=delta, rng=seed)
    state: KMeansState = run.state
    base_state: KMeansState = baseline.state
    private_index = rand_index(test_labels, program.assign(state, test_points))
    nonprivate_index = rand_index(test_labels, program.assign(base_state, test_points))
    sources = len(program.points)
    report = {
        "query": program.name,
        "countermeasure": countermeasure.describe(),
        "seed": seed,
        "privacy": privacy_report(run.privacy),
        "utility": {
            "sources": sources,
            "test_points": len(test_points),
            "rand_index": private_index,
            "rand_index_nonprivate": nonprivate_index,
            "tuples_used_per_iteration": list(state.used_per_iteration),
            "tuples_used_fraction": float(np.mean(state.used_per_iteration)) / sources,
        },
        "efficiency": efficiency_report(run, baseline, seconds),
    }
    return KMeansRun(program, private_index, nonprivate_index, run, baseline, report)
