"""The vectorized simulator: runs a query program with countermeasures over arrays.

No Python object is created per node or per message: each data-dependent flow is one call to
the protocol layer over all its senders. The run records what the observer sees (messages per
sender -> receiver edge, node ids of the countermeasure-transformed plan), which tuples reached
their compute nodes, and the program's final state. A run is reproducible from its seed.

Clusters with a single potential target (an empty grouping set, K = 1) send straight to it: any
countermeasure would cost utility or traffic for no privacy (their pattern is data-independent).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.accounting.montecarlo import make_rng
from dpcomm.engine.traffic import Efficiency, FlowTraffic, TrafficLog, efficiency
from dpcomm.errors import DpcommWarning, InvalidParameterError
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
    sources_needed,
)
from dpcomm.plan.model import ExecutionPlan, Flow
from dpcomm.plan.privacy import PlanGuarantee, account_plan
from dpcomm.plan.transform import scrambler_group_name, with_countermeasure_nodes
from dpcomm.protocol import (
    ScramblerAssignment,
    assign_scramblers,
    flood_targets,
    randomize_targets,
    scramble,
)
from dpcomm.queries.program import BoolArray, IntArray, QueryProgram

ROLE_NAMES: tuple[str, ...] = ("source", "scrambler", "compute", "result")


@dataclass(frozen=True)
class NodeLayout:
    """Node ids of the plan with its countermeasure nodes (:func:`with_countermeasure_nodes`).

    Attributes:
        plan: the transformed plan (the program's plan plus a scrambler group per scrambled
            flow).
        offsets: first id of every group (logical groups share their physical ids).
        scrambler_offsets: first id of the scramblers of every scrambled flow.
        assignments: the data-independent assignment of senders to scramblers, per flow.
        roles: role index (into :data:`ROLE_NAMES`) of every node id.
    """

    plan: ExecutionPlan
    offsets: dict[str, int]
    scrambler_offsets: dict[str, int]
    assignments: dict[str, ScramblerAssignment]
    roles: npt.NDArray[np.int64]

    @property
    def num_nodes(self) -> int:
        """Number of node ids."""
        return len(self.roles)


@dataclass(frozen=True, eq=False)
class SimulationRun:
    """What a simulated run produced.

    Attributes:
        program: the program that ran.
        countermeasures: the countermeasure of every cluster, by cluster name.
        privacy: the plan's guarantee (Theorem 2) for these countermeasures.
        state: the program's final state.
        delivered: per data-dependent flow, which senders' real tuples reached their target.
        traffic: every flow's messages, as the observer sees them.
        layout: node ids of the transformed plan.
        efficiency: messages, bytes and channels.
        seed: the seed the run was drawn from (None if a generator was passed).
    """

    program: QueryProgram
    countermeasures: dict[str, Countermeasure]
    privacy: PlanGuarantee
    state: Any
    delivered: dict[str, BoolArray]
    traffic: tuple[FlowTraffic, ...]
    layout: NodeLayout
    efficiency: Efficiency
    seed: int | None

    def tuples_used(self) -> dict[str, int]:
        """Real tuples that reached their compute node, per data-dependent flow."""
        return {name: int(mask.sum()) for name, mask in self.delivered.items()}


def _flow_countermeasures(
    plan: ExecutionPlan, privacy: PlanGuarantee
) -> tuple[dict[str, Countermeasure], dict[str, Countermeasure]]:
    by_cluster: dict[str, Countermeasure] = {}
    by_flow: dict[str, Countermeasure] = {}
    for item in privacy.clusters:
        chosen = item.countermeasure
        if item.cluster.num_targets == 1 or not item.cluster.data_dependent:
            chosen = NoCountermeasure()
        by_cluster[item.cluster.name] = chosen
        for member in item.cluster.members:
            by_flow[member.flow.name] = chosen
    return by_cluster, by_flow


def _layout(
    plan: ExecutionPlan, by_flow: Mapping[str, Countermeasure], rng: np.random.Generator
) -> NodeLayout:
    transformed = with_countermeasure_nodes(plan, by_flow)
    roles = [
        np.full(group.count, ROLE_NAMES.index(group.role), dtype=np.int64)
        for group in transformed.groups
        if group.physical is None
    ]
    scrambler_offsets: dict[str, int] = {}
    assignments: dict[str, ScramblerAssignment] = {}
    for flow in plan.flows:
        group = scrambler_group_name(flow.name)
        if group not in transformed.node_id_offsets:
            continue
        chosen = by_flow[flow.name]
        assert isinstance(chosen, Scramblers)
        senders = plan.group(flow.sender).count
        assignment = assign_scramblers(senders, batch_size=chosen.batch_size, rng=rng)
        assert assignment.num_scramblers == transformed.group(group).count
        assignments[flow.name] = assignment
        scrambler_offsets[flow.name] = transformed.node_id_offsets[group]
    return NodeLayout(
        transformed,
        dict(transformed.node_id_offsets),
        scrambler_offsets,
        assignments,
        np.concatenate(roles),
    )


def _send_data_flow(
    flow: Flow,
    true_targets: IntArray,
    countermeasure: Countermeasure,
    plan: ExecutionPlan,
    layout: NodeLayout,
    log: TrafficLog,
    rng: np.random.Generator,
) -> BoolArray:
    """Send one data-dependent flow under its countermeasure; return the delivered mask."""
    num_targets = plan.group(flow.receiver).count
    senders = layout.offsets[flow.sender] + np.arange(len(true_targets), dtype=np.int64)
    receiver_offset = layout.offsets[flow.receiver]
    if isinstance(countermeasure, NoCountermeasure):
        log.add(flow.name, senders, receiver_offset + true_targets)
        return np.ones(len(true_targets), dtype=bool)
    randomized = randomize_targets(
        true_targets,
        num_targets=num_targets,
        sampling_rate=countermeasure.sampling_rate,
        rng=rng,
    )
    sampled_out = int((~randomized.is_real).sum())
    if isinstance(countermeasure, LocalFlooding):
        log.add(flow.name, senders, receiver_offset + randomized.sent, dummies=sampled_out)
        if countermeasure.num_dummies:
            flooded = flood_targets(
                randomized.sent,
                num_targets=num_targets,
                num_dummies=countermeasure.num_dummies,
                rng=rng,
            )
            log.add(
                f"{flow.name} (flooding)",
                np.repeat(senders, countermeasure.num_dummies),
                receiver_offset + flooded.ravel(),
                dummies=flooded.size,
            )
        return np.asarray(randomized.is_real, dtype=bool)
    assert isinstance(countermeasure, Scramblers)
    assignment = layout.assignments[flow.name]
    scrambler_offset = layout.scrambler_offsets[flow.name]
    log.add(
        f"{flow.name} (to scramblers)",
        senders,
        scrambler_offset + assignment.scrambler_of_source,
        dummies=sampled_out,
    )
    result = scramble(
        randomized.sent,
        assignment,
        num_targets=num_targets,
        num_dummies=countermeasure.num_dummies,
        capped=countermeasure.capped,
        rng=rng,
    )
    scramblers = scrambler_offset + np.arange(assignment.num_scramblers, dtype=np.int64)
    log.add(
        f"{flow.name} (scrambled)",
        np.repeat(scramblers, num_targets),
        np.tile(receiver_offset + np.arange(num_targets, dtype=np.int64), len(scramblers)),
        np.asarray(result.counts, dtype=np.int64).ravel(),
        dummies=int(np.asarray(result.dummy_counts).sum()) + sampled_out,
    )
    return np.asarray(randomized.is_real, dtype=bool)


def _send_fixed_flows(plan: ExecutionPlan, layout: NodeLayout, log: TrafficLog) -> None:
    """The data-independent flows: fixed (one message each) and broadcasts.

    A broadcast into senders of a scrambled flow goes through that flow's scramblers, as the
    paper routes K-means centroids back: each sender of the broadcast sends one message to
    every scrambler, which forwards it to each of its sources.
    """
    scrambled_by_sender = {
        flow.sender: flow.name for flow in plan.flows if flow.name in layout.assignments
    }
    for flow in plan.flows:
        if flow.data_dependent:
            continue
        sender_group = plan.group(flow.sender)
        receiver_group = plan.group(flow.receiver)
        senders = layout.offsets[flow.sender] + np.arange(sender_group.count, dtype=np.int64)
        receiver_offset = layout.offsets[flow.receiver]
        if flow.routing == "fixed":
            targets = np.arange(sender_group.count, dtype=np.int64) % receiver_group.count
            log.add(flow.name, senders, receiver_offset + targets)
            continue
        via = scrambled_by_sender.get(flow.receiver)
        if via is None:
            receivers = receiver_offset + np.arange(receiver_group.count, dtype=np.int64)
            log.add(
                flow.name,
                np.repeat(senders, receiver_group.count),
                np.tile(receivers, sender_group.count),
            )
            continue
        assignment = layout.assignments[via]
        scramblers = layout.scrambler_offsets[via] + np.arange(
            assignment.num_scramblers, dtype=np.int64
        )
        log.add(
            f"{flow.name} (to scramblers)",
            np.repeat(senders, len(scramblers)),
            np.tile(scramblers, sender_group.count),
        )
        log.add(
            f"{flow.name} (from scramblers)",
            layout.scrambler_offsets[via] + assignment.scrambler_of_source,
            receiver_offset + np.arange(receiver_group.count, dtype=np.int64),
            np.full(receiver_group.count, sender_group.count, dtype=np.int64),
        )


def _warn_outcomes(
    plan: ExecutionPlan, by_cluster: Mapping[str, Countermeasure], privacy: PlanGuarantee
) -> None:
    """Warn about documented outcomes that are easy to miss (σ = 1, n larger than S)."""
    for item in privacy.clusters:
        cluster = item.cluster
        chosen = by_cluster[cluster.name]
        if not cluster.data_dependent or isinstance(chosen, NoCountermeasure):
            continue
        if chosen.sampling_rate == 1.0:
            warnings.warn(
                f"sampling_rate σ = 1 in cluster {cluster.name}: every destination is drawn "
                f"independently of the data, so only tuples whose random target is their own "
                f"(1/T = 1/{cluster.num_targets} on average) are used",
                DpcommWarning,
                stacklevel=3,
            )
        if isinstance(chosen, Scramblers) and chosen.batch_size > cluster.num_senders:
            warnings.warn(
                f"batch_size n = {chosen.batch_size} exceeds the {cluster.num_senders} senders "
                f"of cluster {cluster.name}: a single scrambler takes them all and is "
                f"accounted with n = {cluster.num_senders}",
                DpcommWarning,
                stacklevel=3,
            )


def _stages(program: QueryProgram, progress: bool) -> Iterator[int]:
    stages = range(program.num_stages)
    if not progress:
        yield from stages
        return
    from tqdm import tqdm

    yield from tqdm(stages, desc=program.name, unit="stage", leave=False)


def simulate(
    program: QueryProgram,
    countermeasures: Countermeasure | Mapping[str, Countermeasure],
    *,
    delta: float,
    rng: np.random.Generator | int | None = None,
    progress: bool = False,
) -> SimulationRun:
    """Run ``program`` with ``countermeasures`` in the simulator.

    Args:
        program: a compiled query.
        countermeasures: one countermeasure for every data-dependent cluster, or one per
            cluster (or flow) name.
        delta: δ of each data-dependent cluster for the privacy report.
        rng: seed or generator; the same seed gives the same run.
        progress: show a progress bar over the stages.
    """
    seed = rng if isinstance(rng, int) else None
    generator = make_rng(rng)
    plan = program.plan
    privacy = account_plan(plan, countermeasures, delta=delta)
    by_cluster, by_flow = _flow_countermeasures(plan, privacy)
    _warn_outcomes(plan, by_cluster, privacy)
    layout = _layout(plan, by_flow, generator)
    log = TrafficLog()
    state = program.initial_state()
    delivered: dict[str, BoolArray] = {}
    for stage in _stages(program, progress):
        stage_delivered: dict[str, BoolArray] = {}
        for name in program.stage_flows(stage):
            flow = plan.flow(name)
            if not flow.data_dependent:
                raise InvalidParameterError("stage flow", "a data-dependent flow", name)
            targets = np.asarray(program.true_targets(state, name), dtype=np.int64)
            stage_delivered[name] = _send_data_flow(
                flow, targets, by_flow[name], plan, layout, log, generator
            )
        delivered.update(stage_delivered)
        state = program.compute(state, stage, stage_delivered)
    _send_fixed_flows(plan, layout, log)
    frame = max((flow.message_bytes for flow in plan.flows), default=1)
    metrics = efficiency(
        log.flows,
        num_nodes=layout.num_nodes,
        frame_bytes=frame,
        roles=layout.roles,
        role_names=ROLE_NAMES,
    )
    return SimulationRun(
        program=program,
        countermeasures=by_cluster,
        privacy=privacy,
        state=state,
        delivered=delivered,
        traffic=tuple(log.flows),
        layout=layout,
        efficiency=metrics,
        seed=seed,
    )


def extra_consents(run: SimulationRun) -> int:
    """Additional sources S_t − S needed to keep the non-private utility (Sections 3.3, 4.4).

    The paper writes S_t = S/(1 − σ); a tuple also gets through when the redrawn target is
    its own, so S_t = ⌈S/(1 − σ + σ/T)⌉ suffices in expectation. The worst data-dependent
    cluster counts (the same sources serve every cluster).
    """
    worst = 0
    for item in run.privacy.clusters:
        cluster = item.cluster
        if not cluster.data_dependent:
            continue
        chosen = run.countermeasures[cluster.name]
        senders = cluster.num_senders
        needed = sources_needed(
            tuples=senders, sampling_rate=chosen.sampling_rate, num_targets=cluster.num_targets
        )
        worst = max(worst, needed - senders)
    return worst
