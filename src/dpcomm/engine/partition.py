"""One partition of a run: the role steps of a contiguous range of sources and their scramblers.

An engine that cannot hold every source at once (:mod:`dpcomm.engine.dask_engine`) cuts the
sources into partitions of consecutive rows whose edges never cross: the coordinator assigns
consecutive sources to each scrambler (:func:`dpcomm.protocol.scrambler.contiguous_assignment`),
so a cut at a batch boundary of every scrambled flow leaves each scrambler, with all of its
sources, in one partition. A partition *owns* its sources and those scramblers; every other
node (compute nodes, the result node) is *central*.

Per stage, :func:`run_stage_part` makes, for the partition's nodes under their global indices,
the calls the in-memory engine makes for all nodes (:class:`dpcomm.engine.memory.Simulation`):
the program's route, :func:`~dpcomm.protocol.roles.source_messages`, the scramblers' counts and
:func:`~dpcomm.protocol.roles.scrambler_dummies`, then the targets' partial outputs over the
delivered tuples (:meth:`~dpcomm.protocol.roles.ProgramHooks.target_partials`). Nothing here
depends on how many partitions there are: the draws of a node depend on its index only.

What the observer sees is kept per partition and summed: every flow's messages, dummies, edges
and an order-free digest of its edges (:class:`~dpcomm.engine.traffic.FlowSummary`), and the
channels of every node (:func:`partition_channels`): an owned node's peers are all in its
partition, and a central node's peers in different partitions are different nodes, so degrees
add up across partitions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcomm.engine.memory import FlowSteps, record_data_flow
from dpcomm.engine.run import ROLE_NAMES
from dpcomm.engine.traffic import Efficiency, FlowSummary, TrafficLog, sorted_unique
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, Scramblers
from dpcomm.plan.transform import (
    TransformedPlan,
    scrambler_group_name,
)
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.program import IntArray, QueryProgram

# --------------------------------------------------------------------------- batches and cuts


def batch_offset(batch: int, num_sources: int, num_batches: int) -> int:
    """First source of ``batch`` in balanced consecutive batches (largest first)."""
    base, extra = divmod(num_sources, num_batches)
    return batch * base + min(batch, extra)


def batch_of(sources: IntArray, num_sources: int, num_batches: int) -> IntArray:
    """The batch of each of ``sources`` (global indices) in balanced consecutive batches."""
    base, extra = divmod(num_sources, num_batches)
    large = extra * (base + 1)
    indices = np.asarray(sources, dtype=np.int64)
    result: IntArray = np.where(
        indices < large,
        indices // (base + 1),
        extra + (indices - large) // max(base, 1),
    ).astype(np.int64)
    return result


@dataclass(frozen=True)
class Partition:
    """A contiguous range of sources and, per scrambled flow, the range of their scramblers.

    Attributes:
        index: the partition's position (partitions are in source order).
        start: first source (row) index.
        stop: one past the last source.
        scramblers: per scrambled flow, the range [first, stop) of its scramblers here.
    """

    index: int
    start: int
    stop: int
    scramblers: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Number of sources."""
        return self.stop - self.start

    @property
    def sources(self) -> IntArray:
        """The global indices of the sources."""
        return np.arange(self.start, self.stop, dtype=np.int64)


def partition_cuts(
    num_sources: int, batches: Mapping[str, int], partitions: int
) -> list[Partition]:
    """About ``partitions`` ranges of sources, cut only where every scrambled flow's batch ends.

    Args:
        num_sources: S.
        batches: the number of scramblers K of every scrambled flow (balanced consecutive
            batches of the same S sources).
        partitions: how many partitions are wanted (fewer when there are fewer cut points).
    """
    count = max(1, min(int(partitions), num_sources))
    wanted = np.round(np.linspace(0, num_sources, count + 1)).astype(np.int64)
    if batches:
        candidates: IntArray | None = None
        for scramblers in batches.values():
            base, extra = divmod(num_sources, scramblers)
            ks = np.arange(scramblers + 1, dtype=np.int64)
            offsets = ks * base + np.minimum(ks, extra)
            candidates = offsets if candidates is None else np.intersect1d(candidates, offsets)
        assert candidates is not None
        positions = np.clip(np.searchsorted(candidates, wanted), 0, len(candidates) - 1)
        below = np.clip(positions - 1, 0, len(candidates) - 1)
        nearer = np.where(
            np.abs(candidates[below] - wanted) <= np.abs(candidates[positions] - wanted),
            candidates[below],
            candidates[positions],
        )
        wanted = nearer
    cuts = sorted({0, num_sources, *(int(c) for c in wanted)})
    result = []
    for index, (start, stop) in enumerate(itertools.pairwise(cuts)):
        ranges = {}
        for flow, scramblers in batches.items():
            first = int(batch_of(np.array([start]), num_sources, scramblers)[0])
            last = int(batch_of(np.array([stop - 1]), num_sources, scramblers)[0]) + 1
            ranges[flow] = (first, last)
        result.append(Partition(index, start, stop, ranges))
    return result


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

    @property
    def num_sources(self) -> int:
        """S."""
        return self.program.num_sources

    def countermeasure(self, flow: str) -> Countermeasure:
        """The countermeasure ``flow`` runs."""
        return self.transformed.countermeasures[flow]

    def num_targets(self, flow: str) -> int:
        """T, the receivers of ``flow``."""
        plan = self.transformed.plan
        return plan.group(plan.flow(flow).receiver).count

    def num_scramblers(self, flow: str) -> int:
        """K of a scrambled flow."""
        return len(self.transformed.batches[flow])


@dataclass(frozen=True, eq=False)
class FlowPart:
    """What one partition sends back of one data-dependent flow (small, except ``steps``).

    Attributes:
        flow: the flow.
        delivered: the partition's delivered mask, packed by ``numpy.packbits``.
        partials: each target's partial output over the partition's delivered tuples.
        traffic: the partition's part of each routed flow of ``flow``.
        steps: with ``collect``: the sources' messages, and under scramblers the (K_p, T)
            received and dummy counts; None otherwise.
    """

    flow: str
    delivered: Any
    partials: dict[int, Any]
    traffic: tuple[FlowSummary, ...]
    steps: Any = None


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


def _small(values: IntArray, upper: int) -> Any:
    """``values`` (all < ``upper``) in the smallest unsigned integer type that holds them."""
    for kind in (np.uint8, np.uint16, np.uint32):
        if upper <= np.iinfo(kind).max + 1:
            return values.astype(kind)
    return values


def take_rows(tuples: Any, rows: IntArray, total: int) -> Any:
    """Rows ``rows`` of a program's ``total`` tuples (a table, or an array of points)."""
    if len(rows) == total:
        return tuples
    if isinstance(tuples, np.ndarray):
        return tuples[rows]
    return tuples.take(rows)


def flow_steps_part(
    context: RunContext, partition: Partition, name: str, truth: IntArray
) -> tuple[roles.SourceMessages, IntArray | None, IntArray | None]:
    """The source and scrambler steps of ``name`` for the partition's nodes (global indices)."""
    chosen = context.countermeasure(name)
    targets = context.num_targets(name)
    messages = roles.source_messages(
        truth,
        countermeasure=chosen,
        num_targets=targets,
        randomness=context.randomness,
        flow=name,
        sources=partition.sources,
    )
    if not isinstance(chosen, Scramblers):
        return messages, None, None
    first, stop = partition.scramblers[name]
    total = context.num_scramblers(name)
    local = batch_of(partition.sources, context.num_sources, total) - first
    sizes = np.array(context.transformed.batches[name][first:stop], dtype=np.int64)
    keys = local * targets + messages.sent
    received = np.bincount(keys, minlength=(stop - first) * targets).reshape(-1, targets)
    dummies = roles.scrambler_dummies(
        received,
        sizes,
        countermeasure=chosen,
        randomness=context.randomness,
        flow=name,
        scramblers=np.arange(first, stop, dtype=np.int64),
    )
    return messages, received, dummies


def run_stage_part(
    context: RunContext, partition: Partition, rows: Any, state: Any, stage: int
) -> tuple[list[FlowPart], list[Observed]]:
    """Every data-dependent flow of ``stage`` for one partition (runs on a worker).

    Returns what goes back to the client (the flows' parts) and what stays with the partition
    until its channels are counted.
    """
    program = context.program
    parts, kept = [], []
    for name in program.stage_flows(stage):
        truth = np.asarray(program.route(state, name, rows), dtype=np.int64)
        messages, received, dummies = flow_steps_part(context, partition, name, truth)
        real = np.asarray(messages.is_real, dtype=bool)
        counted = np.flatnonzero(real)
        targets = context.num_targets(name)
        tuples = take_rows(program.carried(name, rows), counted, len(real))
        partials = program.target_partials(
            state, stage, name, tuples, truth[counted], range(targets)
        )
        log = TrafficLog()
        record_part(context, partition, name, log, messages, received, dummies)
        chosen = context.countermeasure(name)
        if isinstance(chosen, Scramblers):
            assert received is not None and dummies is not None
            observed = Observed(name, scrambled=received + dummies)
        else:
            flooding = messages.flooding if messages.flooding.size else None
            observed = Observed(name, sent=_small(messages.sent, targets), flooding=flooding)
        steps = (messages, received, dummies) if context.collect else None
        parts.append(
            FlowPart(
                name,
                np.packbits(real),
                partials,
                tuple(f.summary() for f in log.flows),
                steps,
            )
        )
        kept.append(observed)
    return parts, kept


def record_part(
    context: RunContext,
    partition: Partition,
    name: str,
    log: TrafficLog,
    messages: roles.SourceMessages,
    received: IntArray | None,
    dummies: IntArray | None,
) -> None:
    """What the observer sees of one flow in one partition: the memory engine's edges, in part."""
    scrambled = isinstance(context.countermeasure(name), Scramblers)
    first, stop = partition.scramblers.get(name, (0, 0))
    record_data_flow(
        log,
        context.transformed,
        name,
        FlowSteps(messages, received, dummies),
        sources=partition.sources,
        scramblers=np.arange(first, stop, dtype=np.int64) if scrambled else None,
        scrambler_of_source=(
            batch_of(partition.sources, context.num_sources, context.num_scramblers(name))
            if scrambled
            else None
        ),
    )


# --------------------------------------------------------------------------- channels


@dataclass(frozen=True)
class Ownership:
    """Which node ids of the routed plan a partition owns, group by group.

    Attributes:
        ranges: per routed group name, the owned index range [first, stop) within the group
            (absent: a central group).
    """

    ranges: Mapping[str, tuple[int, int]]


def ownership(context: RunContext, partition: Partition | None) -> Ownership:
    """The groups a partition owns part of: the sources' and every scrambler group.

    With ``partition`` None: the central view (no owned range at all).
    """
    transformed = context.transformed
    routed = transformed.routed
    sources = {flow.sender for flow in transformed.plan.flows if flow.data_dependent}
    physical = {routed.group(name).physical_name for name in sources}
    ranges: dict[str, tuple[int, int]] = {}
    if partition is None:
        return Ownership(ranges)
    for group in routed.groups:
        if group.physical_name in physical:
            ranges[group.name] = (partition.start, partition.stop)
    for flow, (first, stop) in partition.scramblers.items():
        ranges[scrambler_group_name(flow)] = (first, stop)
    return Ownership(ranges)


def owned_groups(context: RunContext) -> set[str]:
    """Names of the routed groups partitions own (sources and scramblers)."""
    whole = Partition(0, 0, context.num_sources, dict.fromkeys(context.transformed.batches, (0, 1)))
    return set(ownership(context, whole).ranges)


def static_flows(
    context: RunContext, own: Ownership, owned: set[str]
) -> Iterator[tuple[str, IntArray, IntArray, IntArray]]:
    """The data-independent flows' edges a partition (or the client, ``own`` empty) records.

    The edges of :meth:`dpcomm.engine.memory.Simulation.send_fixed_flows` with an owned end
    (in the partition), or with none (on the client): each edge is counted exactly once.
    """
    transformed = context.transformed
    routed = transformed.routed
    offsets = routed.node_id_offsets
    central = not own.ranges
    for flow in transformed.flows:
        if flow.kind not in ("fixed", "broadcast", "broadcast_to_scramblers"):
            if flow.kind == "broadcast_from_scramblers" and not central:
                yield _from_scramblers(context, flow.name, flow.origin, flow.sender, own)
            continue
        senders_count = routed.group(flow.sender).count
        receivers_count = routed.group(flow.receiver).count
        sender_owned, receiver_owned = flow.sender in owned, flow.receiver in owned
        if sender_owned and receiver_owned:
            raise InvalidParameterError(
                f"flow {flow.name}",
                "a data-independent flow with a central end (the partitioned engines)",
                f"{flow.sender} -> {flow.receiver}",
            )
        if central != (not sender_owned and not receiver_owned):
            continue
        if flow.kind == "fixed":
            if sender_owned:
                first, stop = own.ranges[flow.sender]
                index = np.arange(first, stop, dtype=np.int64)
            else:
                index = np.arange(senders_count, dtype=np.int64)
                if receiver_owned:
                    first, stop = own.ranges[flow.receiver]
                    target = index % receivers_count
                    index = index[(target >= first) & (target < stop)]
            senders = offsets[flow.sender] + index
            receivers = offsets[flow.receiver] + index % receivers_count
        else:
            send = np.arange(senders_count, dtype=np.int64)
            receive = np.arange(receivers_count, dtype=np.int64)
            if sender_owned:
                send = np.arange(*own.ranges[flow.sender], dtype=np.int64)
            if receiver_owned:
                receive = np.arange(*own.ranges[flow.receiver], dtype=np.int64)
            senders = offsets[flow.sender] + np.repeat(send, len(receive))
            receivers = offsets[flow.receiver] + np.tile(receive, len(send))
        yield flow.name, senders, receivers, np.ones(len(senders), dtype=np.int64)


def _from_scramblers(
    context: RunContext, name: str, origin: str, group: str, own: Ownership
) -> tuple[str, IntArray, IntArray, IntArray]:
    """A broadcast's scramblers -> sources part: each source hears from its own scrambler."""
    transformed = context.transformed
    offsets = transformed.routed.node_id_offsets
    via = next(f for f in transformed.batches if scrambler_group_name(f) == group)
    receiver = transformed.flow(name).receiver
    sources = np.arange(*own.ranges[receiver], dtype=np.int64)
    batches = batch_of(sources, context.num_sources, context.num_scramblers(via))
    origin_senders = transformed.plan.group(transformed.plan.flow(origin).sender).count
    return (
        name,
        offsets[group] + batches,
        offsets[receiver] + sources,
        np.full(len(sources), origin_senders, dtype=np.int64),
    )


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


def _data_edges(
    context: RunContext, partition: Partition, observed: Observed, log: TrafficLog
) -> None:
    """The edges of one data-dependent flow of one partition, from what it kept."""
    name = observed.flow
    chosen = context.countermeasure(name)
    if isinstance(chosen, Scramblers):
        first, stop = partition.scramblers[name]
        targets = context.num_targets(name)
        counts = np.asarray(observed.scrambled, dtype=np.int64)
        zero = np.zeros((stop - first, targets), dtype=np.int64)
        record_part(
            context,
            partition,
            name,
            log,
            roles.SourceMessages(
                sent=np.zeros(partition.size, dtype=np.int64),
                is_real=np.ones(partition.size, dtype=bool),
                flooding=np.zeros((partition.size, 0), dtype=np.int64),
            ),
            counts,
            zero,
        )
        return
    sent = np.asarray(observed.sent, dtype=np.int64)
    flooding = (
        np.zeros((partition.size, 0), dtype=np.int64)
        if observed.flooding is None
        else np.asarray(observed.flooding, dtype=np.int64)
    )
    record_part(
        context,
        partition,
        name,
        log,
        roles.SourceMessages(
            sent=sent, is_real=np.ones(partition.size, dtype=bool), flooding=flooding
        ),
        None,
        None,
    )


def _group_table(context: RunContext) -> tuple[IntArray, list[str], list[int]]:
    """Physical groups: first node id, name and role index, sorted by first id."""
    routed = context.transformed.routed
    offsets = routed.node_id_offsets
    physical = sorted(
        (offsets[g.name], g.name, ROLE_NAMES.index(g.role))
        for g in routed.groups
        if g.physical is None
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
    owned = owned_groups(context)
    own = ownership(context, partition)
    log = TrafficLog()
    for item in observed:
        _data_edges(context, partition, item, log)
    statics = TrafficLog()
    for name, senders, receivers, counts in static_flows(context, own, owned):
        statics.add(name, senders, receivers, counts)
    flows = [*log.flows, *statics.flows]
    nodes, counts = _degrees(context, [(f.senders, f.receivers) for f in flows])
    starts, names, role_of = _group_table(context)
    group = np.searchsorted(starts, nodes, side="right") - 1
    routed = context.transformed.routed
    owned_physical = {routed.group(name).physical_name for name in own.ranges}
    owned_indices = [index for index, name in enumerate(names) if name in owned_physical]
    is_owned = np.isin(group, np.array(owned_indices, dtype=np.int64))
    role_max: dict[str, int] = {}
    role_active: dict[str, int] = {}
    role_sum: dict[str, int] = {}
    roles_of = np.array(role_of, dtype=np.int64)[group] if len(group) else group
    for index, role in enumerate(ROLE_NAMES):
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
    log = TrafficLog()
    for name, senders, receivers, counts in static_flows(
        context, ownership(context, None), owned_groups(context)
    ):
        log.add(name, senders, receivers, counts)
    nodes, counts = _degrees(context, [(f.senders, f.receivers) for f in log.flows])
    return nodes, counts, tuple(f.summary() for f in log.flows)


def reduce_efficiency(
    context: RunContext,
    parts: Sequence[Channels],
    traffic: Sequence[FlowSummary],
) -> Efficiency:
    """The run's :class:`~dpcomm.engine.traffic.Efficiency` from the partitions' channels.

    Equal to :func:`dpcomm.engine.run.run_efficiency` over the whole traffic: an owned node's
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
    for index, role in enumerate(ROLE_NAMES):
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
