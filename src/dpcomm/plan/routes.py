"""Who talks to whom: every route of a plan with its countermeasures, in node ids.

The transformed plan (`dpcomm.plan.transform`) says which flows go on the wire; this
module says, once for every engine, which node sends to which:

* **data-independent flows** (`STATIC_KINDS`): a ``fixed`` flow sends sender i's message
  to receiver i mod R; a ``broadcast`` (also to a flow's scramblers) reaches every receiver; a
  broadcast's ``from scramblers`` part goes from each scrambler to each of its sources, one
  message per output relayed (Section 5.1: the K-means centroids go back through the
  scramblers). `Routes.edges` gives their edges, whole or for a partition of the sources
  (`Ownership`);
* **scrambler batches** (`Routes.batches`): the coordinator's data-independent
  assignment of consecutive sources to each scrambler (`costs.ConsecutiveBatches`);
* **outputs**: where the targets of a data flow send their outputs on
  (`Routes.output_routes`), and which outputs the senders of a data flow wait for before
  sending (`Routes.incoming_outputs`).

Where a data-dependent message goes depends on the data and the draws: the engines record it
from the role steps (`dpcomm.protocol.roles`), under the node ids given here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import ConsecutiveBatches
from dpcomm.plan.transform import RoutedFlow, TransformedPlan, scrambler_group_name

IntArray = npt.NDArray[np.int64]

#: The routed flows whose routes do not depend on the data.
STATIC_KINDS = ("fixed", "broadcast", "broadcast_to_scramblers", "broadcast_from_scramblers")


@dataclass(frozen=True, eq=False)
class Edges:
    """Messages per (sender, receiver) edge, in node ids of the routed plan."""

    senders: IntArray
    receivers: IntArray
    counts: IntArray

    def __len__(self) -> int:
        return int(self.senders.shape[0])


@dataclass(frozen=True)
class Ownership:
    """The nodes one partition of the sources owns, or the central view (no partition).

    A partition of consecutive sources owns them (in every logical group of theirs) and the
    scramblers that batch them; every other node (compute nodes, the result node) is central.

    Attributes:
        ranges: per routed group, the owned index range [first, stop) within the group.
        central: True for the view of the central nodes (the edges no partition records).
    """

    ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    central: bool = False


def _range(first: int, stop: int) -> IntArray:
    return np.arange(first, stop, dtype=np.int64)


class Routes:
    """The routes of ``transformed`` (the same object for every engine and node).

    Args:
        transformed: the plan with its countermeasures.
    """

    def __init__(self, transformed: TransformedPlan) -> None:
        self.transformed = transformed
        self.plan = transformed.plan
        self.routed = transformed.routed

    # ------------------------------------------------------------------ nodes and batches

    def node_ids(self, group: str, indices: npt.ArrayLike | None = None) -> IntArray:
        """Node ids of ``indices`` of routed group ``group`` (default: all of its nodes)."""
        offset = self.routed.node_id_offsets[group]
        if indices is None:
            return offset + _range(0, self.routed.group(group).count)
        return offset + np.asarray(indices, dtype=np.int64)

    def size(self, group: str) -> int:
        """The number of nodes of routed group ``group``."""
        return self.routed.group(group).count

    def batches(self, flow: str) -> ConsecutiveBatches:
        """The scrambler batches of plan flow ``flow`` (consecutive sources, largest first)."""
        sizes = self.transformed.batches.get(flow)
        if sizes is None:
            raise InvalidParameterError(
                "flow", f"a flow with scramblers ({', '.join(self.transformed.batches)})", flow
            )
        senders = self.plan.group(self.plan.flow(flow).sender).count
        return ConsecutiveBatches(senders, len(sizes))

    @cached_property
    def scrambled_flows(self) -> tuple[str, ...]:
        """The plan flows protected by scramblers, in plan order."""
        return tuple(self.transformed.batches)

    def num_targets(self, flow: str) -> int:
        """T, the potential receivers of data flow ``flow``."""
        return self.plan.group(self.plan.flow(flow).receiver).count

    @cached_property
    def static_flows(self) -> tuple[RoutedFlow, ...]:
        """The data-independent routed flows, in plan order."""
        return tuple(f for f in self.transformed.flows if f.kind in STATIC_KINDS)

    # ------------------------------------------------------------------ ownership

    @cached_property
    def owned_groups(self) -> frozenset[str]:
        """The routed groups partitions own: the sources' (every logical group) and scramblers."""
        holders = {g.physical_name for g in self.plan.groups if g.holds_data}
        owned = {g.name for g in self.routed.groups if g.physical_name in holders}
        owned |= {scrambler_group_name(flow) for flow in self.scrambled_flows}
        return frozenset(owned)

    def ownership(self, start: int, stop: int) -> Ownership:
        """What the partition of sources [start, stop) owns (cut at batch boundaries)."""
        scramblers = {scrambler_group_name(flow) for flow in self.scrambled_flows}
        ranges = dict.fromkeys(self.owned_groups - scramblers, (start, stop))
        for flow in self.scrambled_flows:
            batches = self.batches(flow)
            first = int(batches.batch_of([start])[0])
            last = int(batches.batch_of([stop - 1])[0]) + 1 if stop > start else first
            ranges[scrambler_group_name(flow)] = (first, last)
        return Ownership(ranges)

    # ------------------------------------------------------------------ static edges

    def receivers_of(self, flow: RoutedFlow, sender: int) -> IntArray:
        """The receivers (indices in their group) of one sender of a data-independent flow."""
        receivers = self.size(flow.receiver)
        if flow.kind == "fixed":
            return np.array([sender % receivers], dtype=np.int64)
        if flow.kind == "broadcast_from_scramblers":
            assert flow.via is not None
            members = self.batches(flow.via).members(sender)
            return _range(members.start, members.stop)
        if flow.kind in ("broadcast", "broadcast_to_scramblers"):
            return _range(0, receivers)
        raise InvalidParameterError("flow", "a data-independent routed flow", flow.name)

    def relayed_outputs(self, flow: RoutedFlow) -> int:
        """Messages per edge of ``flow``: the outputs a scrambler relays to each of its sources."""
        if flow.kind == "broadcast_from_scramblers":
            origin = self.plan.flow(flow.origin)
            return self.plan.group(origin.sender).count
        return 1

    def edges(self, flow: RoutedFlow, owner: Ownership | None = None) -> Edges:
        """The edges of data-independent ``flow``: all (no ``owner``), or those of ``owner``.

        A partition records the edges with an owned end (a scrambler and its sources are in
        the same partition); the central view the edges between central nodes; so each edge
        is recorded exactly once. A fixed or broadcast flow between two owned groups would
        cross partitions and is refused.
        """
        if flow.kind not in STATIC_KINDS:
            raise InvalidParameterError("flow", "a data-independent routed flow", flow.name)
        senders = (0, self.size(flow.sender))
        receivers = (0, self.size(flow.receiver))
        if owner is not None:
            sender_owned = flow.sender in self.owned_groups
            receiver_owned = flow.receiver in self.owned_groups
            if flow.kind == "broadcast_from_scramblers":
                if owner.central:
                    return self._no_edges()
                receivers = owner.ranges[flow.receiver]
            elif sender_owned and receiver_owned:
                raise InvalidParameterError(
                    f"flow {flow.name}",
                    "a data-independent flow with a central end (the partitioned engines)",
                    f"{flow.sender} -> {flow.receiver}",
                )
            elif owner.central != (not sender_owned and not receiver_owned):
                return self._no_edges()
            elif sender_owned:
                senders = owner.ranges[flow.sender]
            elif receiver_owned:
                receivers = owner.ranges[flow.receiver]
        return self._edges(flow, senders, receivers)

    def _no_edges(self) -> Edges:
        empty = np.zeros(0, dtype=np.int64)
        return Edges(empty, empty, empty)

    def _edges(
        self, flow: RoutedFlow, senders: tuple[int, int], receivers: tuple[int, int]
    ) -> Edges:
        """Edges of ``flow`` from the senders to the receivers in the given index ranges."""
        size = self.size(flow.receiver)
        if flow.kind == "fixed":
            index = _range(*senders)
            if receivers != (0, size):
                target = index % size
                index = index[(target >= receivers[0]) & (target < receivers[1])]
            send, receive = index, index % size
        elif flow.kind == "broadcast_from_scramblers":
            assert flow.via is not None
            receive = _range(*receivers)
            send = self.batches(flow.via).batch_of(receive)
        else:
            sent, received = _range(*senders), _range(*receivers)
            send, receive = np.repeat(sent, len(received)), np.tile(received, len(sent))
        return Edges(
            self.node_ids(flow.sender, send),
            self.node_ids(flow.receiver, receive),
            np.full(len(send), self.relayed_outputs(flow), dtype=np.int64),
        )

    # ------------------------------------------------------------------ outputs

    def output_routes(self, flow: str) -> tuple[RoutedFlow, ...]:
        """The routed flows that carry the outputs of data flow ``flow``'s targets onwards."""
        receiver = self.plan.flow(flow).receiver
        return tuple(
            routed
            for routed in self.transformed.flows
            if routed.kind in ("fixed", "broadcast", "broadcast_to_scramblers")
            and self.plan.flow(routed.origin).sender == receiver
        )

    def incoming_outputs(self, flow: str) -> tuple[tuple[str, RoutedFlow], ...]:
        """The outputs the senders of data flow ``flow`` get before sending it.

        Pairs (data flow whose targets' outputs they are, the routed flow that delivers them
        to the senders: a broadcast, or its part from the scramblers).
        """
        sender = self.plan.flow(flow).sender
        data_flows = [f.name for f in self.plan.flows if f.data_dependent]
        result = []
        for routed in self.transformed.flows:
            if routed.kind not in ("broadcast", "broadcast_from_scramblers"):
                continue
            origin = self.plan.flow(routed.origin)
            if origin.receiver != sender:
                continue
            for data in data_flows:
                if self.plan.flow(data).receiver == origin.sender:
                    result.append((data, routed))
        return tuple(result)

    def result_outputs(self) -> tuple[str, ...]:
        """The data flows whose targets' outputs go to the result node (a fixed flow)."""
        data_flows = [f.name for f in self.plan.flows if f.data_dependent]
        return tuple(
            flow for flow in data_flows if any(r.kind == "fixed" for r in self.output_routes(flow))
        )
