"""One partition of a run: the role steps of a contiguous range of sources and their scramblers.

An engine that cannot hold every source at once (`dpcomm.engine.dask_engine`) cuts the
sources into partitions of consecutive rows whose edges never cross: the coordinator assigns
consecutive sources to each scrambler (`dpcomm.plan.routes.Routes.batches`), so a cut at
a batch boundary of every scrambled flow leaves each scrambler, with all of its
sources, in one partition. A partition *owns* its sources and those scramblers; every other
node (compute nodes, the result node) is *central*.

Per stage, `run_stage_part` makes, for the partition's nodes under their global indices,
the calls the in-memory engine makes for all nodes: the program's route, the source and
scrambler steps (`dpcomm.engine.steps.flow_steps`), then the targets' partial outputs
over the delivered tuples (`dpcomm.protocol.roles.ProgramHooks.target_partials`).
Nothing here depends on how many partitions there are: the draws of a node depend on its index
only.

What the observer sees is kept per partition and summed: every flow's messages, dummies, edges
and an order-free digest of its edges (`dpcomm.engine.traffic.FlowSummary`), and the
channels of every node (`partition_channels`): an owned node's peers are all in its
partition, and a central node's peers in different partitions are different nodes, so degrees
add up across partitions.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dpcomm.data.table import select_rows
from dpcomm.engine.steps import FlowSteps, flow_steps, record_data_flow
from dpcomm.engine.traffic import Efficiency, FlowSummary, TrafficLog, sorted_unique
from dpcomm.plan.countermeasures import Countermeasure
from dpcomm.plan.model import ROLES
from dpcomm.plan.routes import Ownership, Routes
from dpcomm.plan.transform import TransformedPlan, scrambler_group_name
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.program import IntArray, QueryProgram

# --------------------------------------------------------------------------- cuts


@dataclass(frozen=True)
class Partition:
    """A contiguous range of sources and the scramblers that batch them.

    Attributes:
        index: the partition's position (partitions are in source order).
        start: first source (row) index.
        stop: one past the last source.
        ownership: the nodes it owns (`dpcomm.plan.routes.Routes.ownership`).
    """

    index: int
    start: int
    stop: int
    ownership: Ownership = field(default_factory=Ownership)

    @property
    def size(self) -> int:
        """Number of sources."""
        return self.stop - self.start

    @property
    def sources(self) -> IntArray:
        """The global indices of the sources."""
        return np.arange(self.start, self.stop, dtype=np.int64)


def partition_cuts(routes: Routes, num_sources: int, partitions: int) -> list[Partition]:
    """About ``partitions`` ranges of sources, cut only where every scrambled flow's batch ends.

    Args:
        routes: the routes of the run (the scrambler batches of every scrambled flow).
        num_sources: S.
        partitions: how many partitions are wanted (fewer when there are fewer cut points).
    """
    count = max(1, min(int(partitions), num_sources))
    wanted = np.round(np.linspace(0, num_sources, count + 1)).astype(np.int64)
    candidates: IntArray | None = None
    for flow in routes.scrambled_flows:
        offsets = routes.batches(flow).offsets
        candidates = offsets if candidates is None else np.intersect1d(candidates, offsets)
    if candidates is not None:
        positions = np.clip(np.searchsorted(candidates, wanted), 0, len(candidates) - 1)
        below = np.clip(positions - 1, 0, len(candidates) - 1)
        wanted = np.where(
            np.abs(candidates[below] - wanted) <= np.abs(candidates[positions] - wanted),
            candidates[below],
            candidates[positions],
        )
    cuts = sorted({0, num_sources, *(int(c) for c in wanted)})
    if len(cuts) == 1:  # a table without rows: one partition of no source
        cuts = [0, 0]
    return [
        Partition(index, start, stop, routes.ownership(start, stop))
        for index, (start, stop) in enumerate(itertools.pairwise(cuts))
    ]


# --------------------------------------------------------------------------- one stage


@dataclass(frozen=True, eq=False)
class RunContext:
    """What every partition task of a run shares (shipped once to every worker).

    Attributes:
        program: the program without rows (its public description and hooks).
        transformed: the plan with its countermeasures.
        randomness: the run's streams (keys fixed before shipping).
        collect: also return the steps' arrays (for a small run whose traffic is kept whole).
    """

    program: QueryProgram
    transformed: TransformedPlan
    randomness: Randomness
    collect: bool = False

    @cached_property
    def routes(self) -> Routes:
        """Who talks to whom."""
        return Routes(self.transformed)

    def countermeasure(self, flow: str) -> Countermeasure:
        """The countermeasure ``flow`` runs."""
        return self.transformed.countermeasures[flow]


@dataclass(frozen=True, eq=False)
class FlowPart:
    """What one partition sends back of one data-dependent flow (small, except ``steps``).

    Attributes:
        flow: the flow.
        delivered: the partition's delivered mask, packed by ``numpy.packbits``.
        partials: each target's partial output over the partition's delivered tuples.
        traffic: the partition's part of each routed flow of ``flow``.
        steps: with ``collect``: the partition's steps of the flow; None otherwise.
    """

    flow: str
    delivered: Any
    partials: dict[int, Any]
    traffic: tuple[FlowSummary, ...]
    steps: FlowSteps | None = None


@dataclass(frozen=True, eq=False)
class Observed:
    """What a partition keeps of a data-dependent flow for counting channels at the end.

    Attributes:
        flow: the flow.
        sent: without scramblers, each source's (first) message target (small integers).
        flooding: under local flooding, the (S_p, d) flooding dummies' targets.
        scrambled: under scramblers, (K_p, T) messages each scrambler sent to each target.
    """

    flow: str
    sent: Any = None
    flooding: Any = None
    scrambled: Any = None

    @classmethod
    def of(cls, steps: FlowSteps, num_targets: int) -> Observed:
        """What to keep of ``steps``: the observer's view, in the smallest integer types."""
        if steps.received is not None and steps.dummies is not None:
            return cls(steps.flow, scrambled=steps.received + steps.dummies)
        flooding = steps.messages.flooding
        return cls(
            steps.flow,
            sent=_small(steps.messages.sent, num_targets),
            flooding=flooding if flooding.size else None,
        )

    def steps(self, routes: Routes, partition: Partition) -> FlowSteps:
        """Steps with the same traffic as those observed (every message counted as real)."""
        size = partition.size
        sent = np.zeros(size, dtype=np.int64) if self.sent is None else self.sent
        flooding = (
            np.zeros((size, 0), dtype=np.int64)
            if self.flooding is None
            else np.asarray(self.flooding, dtype=np.int64)
        )
        messages = roles.SourceMessages(
            sent=np.asarray(sent, dtype=np.int64),
            is_real=np.ones(size, dtype=bool),
            flooding=flooding,
        )
        if self.scrambled is None:
            return FlowSteps(self.flow, partition.sources, messages)
        counts = np.asarray(self.scrambled, dtype=np.int64)
        first, stop = partition.ownership.ranges[scrambler_group_name(self.flow)]
        scramblers = np.arange(first, stop, dtype=np.int64)
        return FlowSteps(
            self.flow, partition.sources, messages, scramblers, counts, np.zeros_like(counts)
        )


def _small(values: IntArray, upper: int) -> Any:
    """``values`` (all < ``upper``) in the smallest unsigned integer type that holds them."""
    for kind in (np.uint8, np.uint16, np.uint32):
        if upper <= np.iinfo(kind).max + 1:
            return values.astype(kind)
    return values


def run_stage_part(
    context: RunContext, partition: Partition, rows: Any, state: Any, stage: int
) -> tuple[list[FlowPart], list[Observed]]:
    """Every data-dependent flow of ``stage`` for one partition (runs on a worker).

    Returns what goes back to the client (the flows' parts) and what stays with the partition
    until its channels are counted.
    """
    program, routes = context.program, context.routes
    parts, kept = [], []
    for name in program.stages[stage]:
        truth = np.asarray(program.route(state, name, rows), dtype=np.int64)
        steps = flow_steps(routes, context.randomness, name, truth, partition.sources)
        real = steps.real
        targets = routes.num_targets(name)
        tuples = select_rows(program.carried(name, rows), real)
        step = roles.TargetStep(state, stage, name, range(targets))
        partials = program.target_partials(step, tuples, truth[real])
        log = TrafficLog()
        record_data_flow(log, routes, steps)
        parts.append(
            FlowPart(
                name,
                np.packbits(real),
                partials,
                tuple(f.summary() for f in log.flows),
                steps if context.collect else None,
            )
        )
        kept.append(Observed.of(steps, targets))
    return parts, kept


# --------------------------------------------------------------------------- channels


@dataclass(frozen=True, eq=False)
class Channels:
    """A partition's part of the channel counts and of the data-independent traffic.

    Attributes:
        role_max: per role, the most channels of an owned node.
        role_active: per role, owned nodes with at least one channel.
        role_sum: per role, the channels of owned nodes, summed.
        central_ids: central node ids with a channel to an owned node of the partition.
        central_counts: their number of distinct owned peers here.
        traffic: the partition's part of the data-independent flows.
    """

    role_max: dict[str, int]
    role_active: dict[str, int]
    role_sum: dict[str, int]
    central_ids: IntArray
    central_counts: IntArray
    traffic: tuple[FlowSummary, ...]


def _static_traffic(routes: Routes, owner: Ownership) -> TrafficLog:
    """The data-independent flows' edges that ``owner`` records (each edge exactly once)."""
    log = TrafficLog()
    for flow in routes.static_flows:
        edges = routes.edges(flow, owner)
        log.add(flow.name, edges.senders, edges.receivers, edges.counts)
    return log


def _group_table(context: RunContext) -> tuple[IntArray, list[str], list[int]]:
    """Physical groups: first node id, name and role index, sorted by first id."""
    routed = context.transformed.routed
    offsets = routed.node_id_offsets
    physical = sorted(
        (offsets[g.name], g.name, ROLES.index(g.role)) for g in routed.groups if g.physical is None
    )
    return (
        np.array([p[0] for p in physical], dtype=np.int64),
        [p[1] for p in physical],
        [p[2] for p in physical],
    )


def _degrees(
    context: RunContext, edges: Sequence[tuple[IntArray, IntArray]]
) -> tuple[IntArray, IntArray]:
    """Distinct peers per node over ``edges``: (node ids, channel counts)."""
    if not edges:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    size = np.int64(context.transformed.routed.num_nodes)
    low = np.concatenate([np.minimum(s, r) for s, r in edges])
    high = np.concatenate([np.maximum(s, r) for s, r in edges])
    distinct = low != high
    codes = sorted_unique(low[distinct] * size + high[distinct])
    first, second = np.divmod(codes, size)
    nodes = sorted_unique(np.concatenate([first, second]))
    counts = np.bincount(np.searchsorted(nodes, first), minlength=len(nodes)) + np.bincount(
        np.searchsorted(nodes, second), minlength=len(nodes)
    )
    return nodes, counts.astype(np.int64)


def partition_channels(
    context: RunContext, partition: Partition, observed: Sequence[Observed]
) -> Channels:
    """The channels of a partition's nodes over the whole run, and its static traffic."""
    routes = context.routes
    log = TrafficLog()
    for item in observed:
        record_data_flow(log, routes, item.steps(routes, partition))
    statics = _static_traffic(routes, partition.ownership)
    flows = [*log.flows, *statics.flows]
    nodes, counts = _degrees(context, [(f.senders, f.receivers) for f in flows])
    starts, names, role_of = _group_table(context)
    group = np.searchsorted(starts, nodes, side="right") - 1
    routed = context.transformed.routed
    owned_physical = {routed.group(name).physical_name for name in partition.ownership.ranges}
    owned_indices = [index for index, name in enumerate(names) if name in owned_physical]
    is_owned = np.isin(group, np.array(owned_indices, dtype=np.int64))
    role_max: dict[str, int] = {}
    role_active: dict[str, int] = {}
    role_sum: dict[str, int] = {}
    roles_of = np.array(role_of, dtype=np.int64)[group] if len(group) else group
    for index, role in enumerate(ROLES):
        selected = counts[is_owned & (roles_of == index)]
        if selected.size:
            role_max[role] = int(selected.max())
            role_active[role] = int((selected > 0).sum())
            role_sum[role] = int(selected.sum())
    return Channels(
        role_max,
        role_active,
        role_sum,
        nodes[~is_owned],
        counts[~is_owned],
        tuple(f.summary() for f in statics.flows),
    )


def central_channels(context: RunContext) -> tuple[IntArray, IntArray, tuple[FlowSummary, ...]]:
    """The client's part: data-independent edges between central nodes (node ids, counts)."""
    log = _static_traffic(context.routes, Ownership(central=True))
    nodes, counts = _degrees(context, [(f.senders, f.receivers) for f in log.flows])
    return nodes, counts, tuple(f.summary() for f in log.flows)


def reduce_efficiency(
    context: RunContext,
    parts: Sequence[Channels],
    traffic: Sequence[FlowSummary],
) -> Efficiency:
    """The run's `dpcomm.engine.traffic.Efficiency` from the partitions' channels.

    Equal to `dpcomm.engine.run.run_efficiency` over the whole traffic: an owned node's
    channels are all in its partition; a central node's are the sum of its partitions' (their
    owned peers differ) and of its channels to other central nodes (counted on the client).
    """
    central_nodes, central_counts, _ = central_channels(context)
    ids = np.concatenate([central_nodes, *(p.central_ids for p in parts)])
    counts = np.concatenate([central_counts, *(p.central_counts for p in parts)])
    nodes = sorted_unique(ids)
    degrees = np.bincount(np.searchsorted(nodes, ids), weights=counts, minlength=len(nodes))
    degrees = degrees.astype(np.int64)
    starts, _, role_of = _group_table(context)
    group = np.searchsorted(starts, nodes, side="right") - 1
    roles_of = np.array(role_of, dtype=np.int64)[group] if len(group) else group
    present = set(role_of)
    by_role: dict[str, int] = {}
    active = int((degrees > 0).sum())
    total = int(degrees.sum())
    for index, role in enumerate(ROLES):
        if index not in present:
            continue
        values = [int(degrees[roles_of == index].max())] if (roles_of == index).any() else []
        values += [p.role_max[role] for p in parts if role in p.role_max]
        by_role[role] = max(values, default=0)
        active += sum(p.role_active.get(role, 0) for p in parts)
        total += sum(p.role_sum.get(role, 0) for p in parts)
    frame = max((flow.message_bytes for flow in context.transformed.plan.flows), default=1)
    messages = sum(f.messages for f in traffic)
    return Efficiency(
        messages=messages,
        dummy_messages=sum(f.dummies for f in traffic),
        bytes=messages * frame,
        frame_bytes=frame,
        max_channels=max(by_role.values(), default=0),
        mean_channels=total / active if active else 0.0,
        max_channels_by_role=by_role,
        num_nodes=active,
    )
