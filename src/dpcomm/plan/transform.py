"""The plan with its countermeasures applied: scrambler nodes added, every flow as it is routed.

Section 4: a data-dependent flow protected by scramblers becomes two flows: every source sends
its (sampled) message to the scrambler it is assigned to, independently of its data, and every
scrambler forwards its batch plus d dummies, shuffled, to the targets. Local sampling and
flooding (Section 3) add no node but d messages per source. A broadcast into the senders of a
scrambled flow goes through that flow's scramblers, as the paper routes K-means centroids back
(Section 5.1): each sender sends one message to every scrambler, which forwards it to each of
its sources.

`transform` is the one place that says which flows a plan with countermeasures sends,
between which groups, and how many messages each carries; the engines log their traffic under
these names and `dpcomm.plan.costs` derives every cost from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import (
    PeerBound,
    balanced_batch_sizes,
    channel_bound,
    sources_needed,
)
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.plan.model import ExecutionPlan, Flow, NodeGroup

RoutedKind = Literal[
    "direct",
    "sample",
    "flood",
    "to_scramblers",
    "scrambled",
    "fixed",
    "broadcast",
    "broadcast_to_scramblers",
    "broadcast_from_scramblers",
]


def scrambler_group_name(flow: str) -> str:
    """Name of the group of scramblers of ``flow``."""
    return f"scramblers[{flow}]"


def to_scramblers_flow_name(flow: str) -> str:
    """Name of the sources -> scramblers flow that replaces ``flow``."""
    return f"{flow} (to scramblers)"


def scrambled_flow_name(flow: str) -> str:
    """Name of the scramblers -> targets flow that replaces ``flow``."""
    return f"{flow} (scrambled)"


def flooding_flow_name(flow: str) -> str:
    """Name of the flooding dummies of ``flow`` under local sampling + flooding."""
    return f"{flow} (flooding)"


def from_scramblers_flow_name(flow: str) -> str:
    """Name of the scramblers -> sources part of a broadcast routed through scramblers."""
    return f"{flow} (from scramblers)"


@dataclass(frozen=True)
class RoutedFlow:
    """One flow as it goes on the wire.

    Attributes:
        name: the name engines log its traffic under.
        origin: the plan flow it implements.
        kind: how it is routed (see `RoutedKind`).
        sender: name of the sending group (a scrambler group for ``scrambled`` flows).
        receiver: name of the receiving group.
        messages: the number of messages it carries (exact: it depends neither on the data
            nor on the randomness, only which of them are dummies does).
        via: the plan flow whose scramblers this flow goes to or comes from (the ``origin``
            for ``to_scramblers`` and ``scrambled``; the scrambled flow of the receivers for a
            broadcast routed through scramblers); None for a flow without scramblers.
    """

    name: str
    origin: str
    kind: RoutedKind
    sender: str
    receiver: str
    messages: int
    via: str | None = None


def resolve_countermeasures(
    plan: ExecutionPlan, countermeasures: Countermeasure | Mapping[str, Countermeasure]
) -> dict[str, Countermeasure]:
    """The countermeasure asked for every cluster of ``plan``, by cluster name.

    ``countermeasures`` is one countermeasure for every data-dependent cluster, or a mapping
    from cluster (or flow) name to countermeasure; clusters not named get none.
    """
    names = {c.name for c in plan.clusters} | {f.name for f in plan.flows}
    if isinstance(countermeasures, Mapping):
        unknown = sorted(set(countermeasures) - names)
        if unknown:
            raise InvalidParameterError(
                "countermeasures", f"cluster names among {', '.join(sorted(names))}", unknown
            )
    chosen: dict[str, Countermeasure] = {}
    for cluster in plan.clusters:
        if not isinstance(countermeasures, Mapping):
            item = countermeasures if cluster.data_dependent else NoCountermeasure()
        elif cluster.name in countermeasures:
            item = countermeasures[cluster.name]
        else:
            item = next(
                (
                    countermeasures[m.flow.name]
                    for m in cluster.members
                    if m.flow.name in countermeasures
                ),
                NoCountermeasure(),
            )
        chosen[cluster.name] = item
    return chosen


@dataclass(frozen=True, eq=False)
class TransformedPlan:
    """A plan with its countermeasures: the routed flows, the scrambler groups, the costs.

    Attributes:
        plan: the plan without countermeasure nodes.
        requested: the countermeasure asked for every cluster, by cluster name.
        countermeasures: the countermeasure each data-dependent flow runs, by flow name; a
            cluster with a single potential target, a data-independent one, or one without
            sender (a table without rows) runs none (its pattern does not depend on the data:
            a countermeasure would cost for nothing).
        batches: for every flow protected by scramblers, the balanced batch sizes of its
            scramblers (`dpcomm.plan.costs.balanced_batch_sizes`), scrambler k first.
        routed: the plan's groups plus one group of scramblers per scrambled flow (node ids
            of every engine are those of this plan).
        flows: every flow as routed, in plan order.
    """

    plan: ExecutionPlan
    requested: dict[str, Countermeasure]
    countermeasures: dict[str, Countermeasure]
    batches: dict[str, tuple[int, ...]]
    routed: ExecutionPlan
    flows: tuple[RoutedFlow, ...]

    def flow(self, name: str) -> RoutedFlow:
        """The routed flow called ``name``."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise InvalidParameterError("flow", f"one of {', '.join(f.name for f in self.flows)}", name)

    def routed_from(self, origin: str) -> tuple[RoutedFlow, ...]:
        """The routed flows that implement plan flow ``origin``."""
        return tuple(f for f in self.flows if f.origin == origin)

    @property
    def messages(self) -> int:
        """Every message of the plan, dummies included."""
        return sum(f.messages for f in self.flows)

    def num_scramblers(self, flow: str | None = None) -> int:
        """Scramblers of ``flow`` (a plan flow), or of every scrambled flow."""
        if flow is not None:
            return len(self.batches.get(flow, ()))
        return sum(len(sizes) for sizes in self.batches.values())

    def sources_needed(self, tuples: int | None = None) -> int:
        """Sources S_t that deliver ``tuples`` (default: every sender) on every cluster.

        The worst data-dependent flow counts: the same sources serve every cluster
        (Sections 3.3 and 4.4).
        """
        worst = 0
        for name, chosen in self.countermeasures.items():
            flow = self.plan.flow(name)
            senders = self.plan.group(flow.sender).count
            wanted = senders if tuples is None else tuples
            needed = sources_needed(
                tuples=wanted,
                sampling_rate=chosen.sampling_rate,
                num_targets=self.plan.group(flow.receiver).count,
            )
            worst = max(worst, needed)
        return worst

    @cached_property
    def _peer_bounds(self) -> dict[str, list[PeerBound]]:
        """Per physical group, the per-node peer bounds of every flow it takes part in."""
        routed = self.routed
        bounds: dict[str, list[PeerBound]] = {}

        def physical(name: str) -> str:
            return routed.group(name).physical_name

        def add(group: str, peer: str, peers: int, membership: str | None = None) -> None:
            bounds.setdefault(physical(group), []).append(
                PeerBound(physical(peer), peers, membership)
            )

        for flow in self.flows:
            senders = routed.group(flow.sender).count
            receivers = routed.group(flow.receiver).count
            per_sender = flow.messages // senders
            if flow.kind in ("direct", "sample", "flood"):
                add(flow.sender, flow.receiver, min(receivers, per_sender))
                add(flow.receiver, flow.sender, senders)
            elif flow.kind in ("to_scramblers", "broadcast_from_scramblers"):
                assert flow.via is not None
                largest = max(self.batches[flow.via])
                membership = scrambler_group_name(flow.via)
                scrambler = flow.receiver if flow.kind == "to_scramblers" else flow.sender
                source = flow.sender if flow.kind == "to_scramblers" else flow.receiver
                add(source, scrambler, 1, membership)
                add(scrambler, source, largest, membership)
            elif flow.kind == "scrambled":
                add(flow.sender, flow.receiver, min(receivers, -(-flow.messages // senders)))
                add(flow.receiver, flow.sender, senders)
            elif flow.kind == "fixed":
                add(flow.sender, flow.receiver, 1)
                add(flow.receiver, flow.sender, -(-senders // receivers))
            else:  # broadcast and broadcast_to_scramblers: every sender reaches every receiver
                add(flow.sender, flow.receiver, receivers)
                add(flow.receiver, flow.sender, senders)
        return bounds

    def channels_by_role(self) -> dict[str, int]:
        """Upper bound on the secure channels (distinct peers) of one node, per role.

        Derived from the routed flows: a node's peers in another group are at most that
        group's size and at most the sum of the flow bounds between the two groups (a source
        and its scrambler count once whatever they exchange). The bound is reached when every
        scrambler (or source) reaches every target, which holds with high probability once the
        messages it sends are a few times T.
        """
        routed = self.routed
        sizes = {g.name: g.count for g in routed.groups if g.physical is None}
        result: dict[str, int] = {}
        for group in routed.groups:
            if group.physical is not None:
                continue
            bound = channel_bound(self._peer_bounds, sizes, group.name)
            result[group.role] = max(result.get(group.role, 0), bound)
        return result

    def max_channels(self) -> int:
        """The largest of `channels_by_role`."""
        return max(self.channels_by_role().values(), default=0)


def _effective(
    plan: ExecutionPlan, requested: Mapping[str, Countermeasure]
) -> dict[str, Countermeasure]:
    chosen: dict[str, Countermeasure] = {}
    for cluster in plan.clusters:
        item = requested[cluster.name]
        if cluster.num_targets == 1 or not cluster.data_dependent or not cluster.num_senders:
            item = NoCountermeasure()
        for member in cluster.members:
            if member.flow.data_dependent:
                chosen[member.flow.name] = item
    return chosen


def _scrambler_batches(
    plan: ExecutionPlan, chosen: Mapping[str, Countermeasure]
) -> dict[str, tuple[int, ...]]:
    """Balanced batches per flow routed through scramblers; too many dummies are refused.

    Local flooding allows at most T − 1 dummies; a capped scrambler at most (T − 1)·n.
    """
    batches: dict[str, tuple[int, ...]] = {}
    for flow in plan.flows:
        if not flow.data_dependent:
            continue
        item = chosen[flow.name]
        senders = plan.group(flow.sender).count
        if isinstance(item, LocalFlooding):
            targets = plan.group(flow.receiver).count
            if item.num_dummies > targets - 1:
                raise InvalidParameterError(
                    "num_dummies",
                    f"at most T − 1 = {targets - 1} flooding dummies for flow {flow.name}",
                    item.num_dummies,
                )
        if isinstance(item, Scramblers):
            sizes = balanced_batch_sizes(senders, item.batch_size)
            targets = plan.group(flow.receiver).count
            if item.capped and item.num_dummies > (targets - 1) * min(sizes):
                raise InvalidParameterError(
                    "num_dummies",
                    f"at most (T − 1)·n = {(targets - 1) * min(sizes)} for a capped scrambler "
                    f"of n = {min(sizes)} sources in flow {flow.name}",
                    item.num_dummies,
                )
            batches[flow.name] = sizes
    return batches


def _scrambler_routes(
    flow: Flow, item: Scramblers, senders: int, sizes: tuple[int, ...]
) -> tuple[list[RoutedFlow], list[Flow]]:
    """A data flow through scramblers: S to the scramblers, S + K·d from the K scramblers."""
    group = scrambler_group_name(flow.name)
    routes = [
        RoutedFlow(
            to_scramblers_flow_name(flow.name),
            flow.name,
            "to_scramblers",
            flow.sender,
            group,
            senders,
            via=flow.name,
        ),
        RoutedFlow(
            scrambled_flow_name(flow.name),
            flow.name,
            "scrambled",
            group,
            flow.receiver,
            senders + len(sizes) * item.num_dummies,
            via=flow.name,
        ),
    ]
    routed = [
        Flow(
            to_scramblers_flow_name(flow.name),
            flow.sender,
            group,
            "fixed",
            order=flow.order,
            message_bytes=flow.message_bytes,
        ),
        Flow(
            scrambled_flow_name(flow.name),
            group,
            flow.receiver,
            "data",
            depends_on_state=flow.depends_on_state,
            message_bytes=flow.message_bytes,
            messages_per_sender=max(sizes) + item.num_dummies,
        ),
    ]
    return routes, routed


def _data_routes(
    flow: Flow, item: Countermeasure, senders: int, batches: Mapping[str, tuple[int, ...]]
) -> tuple[list[RoutedFlow], list[Flow]]:
    """A data-dependent flow's routes: direct S; local S first messages and S·d dummies."""
    if isinstance(item, Scramblers):
        return _scrambler_routes(flow, item, senders, batches[flow.name])
    kind: RoutedKind = "direct" if isinstance(item, NoCountermeasure) else "sample"
    routes = [RoutedFlow(flow.name, flow.name, kind, flow.sender, flow.receiver, senders)]
    if isinstance(item, LocalFlooding) and item.num_dummies:
        routes.append(
            RoutedFlow(
                flooding_flow_name(flow.name),
                flow.name,
                "flood",
                flow.sender,
                flow.receiver,
                senders * item.num_dummies,
            )
        )
    return routes, [flow]


def _independent_routes(
    flow: Flow, senders: int, receivers: int, via: str | None, scramblers: int
) -> list[RoutedFlow]:
    """A data-independent flow's routes: fixed one per sender; a broadcast one per pair.

    A broadcast to sources routed through ``via``'s ``scramblers`` scramblers is one message
    per (sender, scrambler) plus one per (sender, source).
    """
    if flow.routing == "fixed":
        return [RoutedFlow(flow.name, flow.name, "fixed", flow.sender, flow.receiver, senders)]
    if via is None:
        return [
            RoutedFlow(
                flow.name, flow.name, "broadcast", flow.sender, flow.receiver, senders * receivers
            )
        ]
    group = scrambler_group_name(via)
    return [
        RoutedFlow(
            to_scramblers_flow_name(flow.name),
            flow.name,
            "broadcast_to_scramblers",
            flow.sender,
            group,
            senders * scramblers,
            via=via,
        ),
        RoutedFlow(
            from_scramblers_flow_name(flow.name),
            flow.name,
            "broadcast_from_scramblers",
            group,
            flow.receiver,
            senders * receivers,
            via=via,
        ),
    ]


def transform(
    plan: ExecutionPlan, countermeasures: Countermeasure | Mapping[str, Countermeasure]
) -> TransformedPlan:
    """``plan`` with ``countermeasures`` applied (see `resolve_countermeasures`).

    Scramblers of a flow with S senders and batch size n: ⌈S/n⌉ scramblers with balanced
    batches. Messages per routed flow (Sections 3.3, 4.4 and 5.1): direct S; local S first
    messages and S·d flooding dummies; scramblers S to the scramblers and S + K·d from the K
    scramblers; fixed one per sender; a broadcast one per (sender, receiver), or one per
    (sender, scrambler) plus one per (sender, source) when routed through scramblers.
    """
    requested = resolve_countermeasures(plan, countermeasures)
    chosen = _effective(plan, requested)
    batches = _scrambler_batches(plan, chosen)
    groups: list[NodeGroup] = list(plan.groups)
    for name, sizes in batches.items():
        groups.append(NodeGroup(scrambler_group_name(name), "scrambler", len(sizes)))
    scrambled_by_sender = {plan.flow(name).sender: name for name in batches}
    routed_flows: list[Flow] = []
    flows: list[RoutedFlow] = []
    for flow in plan.flows:
        senders = plan.group(flow.sender).count
        if flow.data_dependent:
            routes, routed = _data_routes(flow, chosen[flow.name], senders, batches)
            flows.extend(routes)
            routed_flows.extend(routed)
            continue
        routed_flows.append(flow)
        via = scrambled_by_sender.get(flow.receiver)
        receivers = plan.group(flow.receiver).count
        scramblers = 0 if via is None else len(batches[via])
        flows.extend(_independent_routes(flow, senders, receivers, via, scramblers))
    routed_plan = ExecutionPlan(tuple(groups), tuple(routed_flows))
    return TransformedPlan(plan, requested, chosen, batches, routed_plan, tuple(flows))


def with_countermeasure_nodes(
    plan: ExecutionPlan, countermeasures: Mapping[str, Countermeasure]
) -> ExecutionPlan:
    """The plan with a group of scramblers for every flow protected by scramblers.

    Args:
        plan: the plan without countermeasure nodes.
        countermeasures: the countermeasure of every data-dependent flow, by flow name
            (flows not named keep their direct route).

    A flow with a single potential target keeps its direct route: its pattern is already
    data-independent.
    """
    return transform(plan, countermeasures).routed
