"""A whole K-means deployment on this machine: I iterations over loopback mutual TLS.

:func:`deploy_local_kmeans` runs a :class:`~dpcomm.queries.kmeans.KMeansProgram` with the
runtime of :mod:`dpcomm.engine.network.runtime_kmeans`, in the processes of
:func:`dpcomm.engine.network.deploy.launch` (the same as an Aggregate round's), and reports
the final centroids, the Rand index on a test set beside the simulator's, the tuples used per
iteration, what was measured on the wire and the privacy report for the batches as run.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.engine.network.deploy import (
    DeploymentReport,
    LinkTraffic,
    _report,
    actual_batch_sizes,
    launch,
    since,
)
from dpcomm.engine.network.runtime_kmeans import kmeans_sizes
from dpcomm.engine.network.runtime_spec import (
    RESULT,
    FlowSpec,
    NodeConfig,
    RoundSpec,
)
from dpcomm.engine.runs import privacy_report, run_kmeans
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, Scramblers
from dpcomm.plan.privacy import account_plan, num_scramblers
from dpcomm.queries.kmeans import KMeansProgram, nearest_centroid, rand_index

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True, eq=False)
class KMeansDeploymentReport:
    """What a deployed K-means run produced and what was measured on the wire.

    Attributes:
        centroids: the final centroids (K x dimension), as computed by the result node.
        centroid_history: the centroids before iteration 1, after iteration 1, ..., I.
        rand_index: Rand index of the final centroids' assignment of the test set.
        rand_index_simulated: the simulator's Rand index with the same countermeasure and seed.
        rand_index_nonprivate: the simulator's non-private Rand index from the same start.
        tuples_used_per_iteration: real points averaged in each iteration (as run).
        tuples_used_simulated: the same in the simulator's run.
        counts: per iteration, the points each compute node averaged.
        deployment: the wire report (links, channels, delivered row ids per iteration,
            lost scramblers, drops, timings, privacy for the batches as run).
    """

    centroids: FloatArray
    centroid_history: tuple[FloatArray, ...]
    rand_index: float
    rand_index_simulated: float
    rand_index_nonprivate: float
    tuples_used_per_iteration: tuple[int, ...]
    tuples_used_simulated: tuple[int, ...]
    counts: tuple[tuple[int, ...], ...]
    deployment: DeploymentReport

    @property
    def privacy(self) -> dict[str, Any]:
        """The privacy report for the batches as run."""
        return self.deployment.privacy

    @property
    def links(self) -> tuple[LinkTraffic, ...]:
        """Frames and bytes per directed link."""
        return self.deployment.links

    @property
    def channels(self) -> dict[str, int]:
        """Distinct peers per node."""
        return self.deployment.channels

    @property
    def lost_scramblers(self) -> tuple[str, ...]:
        """Scramblers whose batch was lost."""
        return self.deployment.lost_scramblers

    @property
    def dropped(self) -> dict[str, dict[str, int]]:
        """Drops per node, by reason."""
        return self.deployment.dropped

    @property
    def errors(self) -> dict[str, str]:
        """Errors that stopped a node (empty in a clean run)."""
        return self.deployment.errors

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-link traffic)."""
        return {
            "rand_index": self.rand_index,
            "rand_index_simulated": self.rand_index_simulated,
            "rand_index_nonprivate": self.rand_index_nonprivate,
            "tuples_used_per_iteration": list(self.tuples_used_per_iteration),
            "tuples_used_simulated": list(self.tuples_used_simulated),
            "counts": [list(c) for c in self.counts],
            "privacy": self.privacy,
            "wire": self.deployment.wire_summary(),
            "simulated": self.deployment.simulated,
            "lost_scramblers": list(self.lost_scramblers),
            "left_out_sources": {k: list(v) for k, v in self.deployment.left_out_sources.items()},
            "dropped": self.dropped,
            "timings": self.deployment.timings,
            "errors": self.errors,
        }


def kmeans_round_spec(
    program: KMeansProgram,
    countermeasure: Scramblers,
    *,
    seed: int | None,
    round_id: int = 1,
    collect_seconds: float = 10.0,
    round_seconds: float = 120.0,
) -> RoundSpec:
    """The public parameters of a deployed K-means run: one scrambled flow per iteration."""
    sources = len(program.points)
    scramblers = num_scramblers(sources, countermeasure.batch_size)
    flows = tuple(
        FlowSpec(
            name=program.flow_name(i + 1),
            columns=(),
            carried=(),
            num_targets=program.num_centroids,
            mode="scrambler",
            sampling_rate=countermeasure.sampling_rate,
            batch_size=countermeasure.batch_size,
            num_dummies=countermeasure.num_dummies,
            capped=countermeasure.capped,
            num_scramblers=scramblers,
        )
        for i in range(program.num_iterations)
    )
    dimension = int(program.points.shape[1])
    payload, frame = kmeans_sizes(dimension)
    return RoundSpec(
        round_id=round_id,
        num_sources=sources,
        sql="",
        table_name="points",
        schema=(),
        flows=flows,
        payload_size=payload,
        frame_size=frame,
        seed=seed,
        collect_seconds=collect_seconds,
        round_seconds=round_seconds,
        kind="kmeans",
        dimension=dimension,
    )


def kmeans_node_configs(program: KMeansProgram, spec: RoundSpec) -> dict[str, NodeConfig]:
    """Every node's config: sources carry their point, the result node the initial centroids."""
    configs: dict[str, NodeConfig] = {}
    for name, role in spec.node_names():
        row: dict[str, Any] | None = None
        if role == "source":
            row = {"point": program.points[int(name.split("-")[1])].tolist()}
        elif name == RESULT:
            row = {"centroids": program.initial_centroids.tolist()}
        configs[name] = NodeConfig(name=name, role=role, round=spec, row=row)
    return configs


def deploy_local_kmeans(
    program: KMeansProgram,
    countermeasure: Countermeasure,
    *,
    test_points: FloatArray,
    test_labels: npt.NDArray[np.int64],
    delta: float,
    seed: int | None = 0,
    workdir: str | Path | None = None,
    timeout: float = 180.0,
    collect_seconds: float = 10.0,
) -> KMeansDeploymentReport:
    """Run ``program`` as a real deployment on this machine (loopback TLS), all I iterations.

    Args:
        program: the K-means program (each point is one source).
        countermeasure: scramblers, applied in every iteration.
        test_points: the held-out points the Rand index is computed on.
        test_labels: their labels.
        delta: δ of each data-dependent cluster for the privacy report.
        seed: seed of every random draw (None: fresh entropy).
        workdir: where certificates go (default: a temporary directory, removed).
        timeout: hard deadline of the whole run in seconds.
        collect_seconds: how long a scrambler waits for its n points in an iteration.
    """
    if not isinstance(countermeasure, Scramblers):
        raise InvalidParameterError(
            "countermeasure", "scramblers (K-means deployments relay through them)", countermeasure
        )
    if not (isinstance(timeout, int | float) and timeout > 0):
        raise InvalidParameterError("timeout", "a number of seconds > 0", timeout)
    if not (isinstance(collect_seconds, int | float) and 0 < collect_seconds < timeout):
        raise InvalidParameterError(
            "collect_seconds", f"a number of seconds in (0, {timeout})", collect_seconds
        )
    simulated = run_kmeans(
        program,
        countermeasure,
        test_points=test_points,
        test_labels=test_labels,
        delta=delta,
        seed=seed,
    )
    started = time.perf_counter()
    spec = kmeans_round_spec(
        program,
        countermeasure,
        seed=seed,
        round_id=secrets.randbelow(1 << 62) + 1,
        collect_seconds=float(collect_seconds),
        round_seconds=float(timeout),
    )
    configs = kmeans_node_configs(program, spec)
    outcomes, errors, _, timings = launch(spec, configs, workdir=workdir, timeout=timeout)
    deployment = _report(
        program,
        spec,
        outcomes,
        errors,
        privacy=privacy_report(account_plan(program.plan, countermeasure, delta=delta)),
        simulation=simulated.run,
        timings=since(timings, started),
    )
    actual = actual_batch_sizes(spec, deployment.scramblers)
    as_run = account_plan(program.plan, countermeasure, delta=delta, batch_sizes=actual)
    deployment = replace(deployment, privacy=privacy_report(as_run))
    result: dict[str, Any] = {}
    for outcome in outcomes.values():
        result.update(
            {k: v for k, v in outcome["nodes"].items() if k == RESULT and v["role"] == "result"}
        )
    node = result.get(RESULT, {})
    history = tuple(np.asarray(c, dtype=np.float64) for c in node.get("history", []))
    centroids = (
        np.asarray(node["centroids"], dtype=np.float64)
        if "centroids" in node
        else program.initial_centroids.copy()
    )
    clusters = nearest_centroid(np.asarray(test_points, dtype=np.float64), centroids)
    return KMeansDeploymentReport(
        centroids=centroids,
        centroid_history=history,
        rand_index=rand_index(np.asarray(test_labels, dtype=np.int64), clusters),
        rand_index_simulated=simulated.rand_index,
        rand_index_nonprivate=simulated.rand_index_nonprivate,
        tuples_used_per_iteration=tuple(len(rows) for rows in deployment.delivered.values()),
        tuples_used_simulated=tuple(simulated.run.state.used_per_iteration),
        counts=tuple(tuple(int(c) for c in row) for row in node.get("counts", [])),
        deployment=deployment,
    )


__all__ = [
    "KMeansDeploymentReport",
    "deploy_local_kmeans",
    "kmeans_node_configs",
    "kmeans_round_spec",
]
