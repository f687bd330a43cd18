"""The execution model of Section 2.2-2.4: nodes, execution plans, clusters and data paths.

Plans are described by *groups* of nodes with the same role and behaviour (all sources, the C
compute nodes of one grouping set, ...) and by *flows*: "every node of group X sends its k-th
message to one node of group Y". That keeps a plan of a million sources a handful of objects;
node identities are contiguous id ranges, one per physical group.

* A node that sends several data-dependent messages is not simple (Definition "Simple node");
  it is split into logical simple nodes, one per message order number, that share the physical
  node's identity and data (`ExecutionPlan.logical_groups`).
* A cluster (Definition "Cluster of nodes") is a set of simple logical nodes with the same
  potential targets and disjoint data (`ExecutionPlan.clusters`). A flow whose receiver
  does not depend on data (compute -> result, centroid broadcasts) is a perfectly private
  cluster.
* The data path of a data item (Theorem 2) is every cluster whose nodes may process data
  derived from it: all flows reachable from its node, through every logical node of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

from dpcomm.errors import InvalidParameterError

Role = Literal["source", "scrambler", "compute", "result"]
#: Every role of a plan's nodes, in the order reports list them.
ROLES: tuple[Role, ...] = get_args(Role)
Routing = Literal["data", "fixed", "broadcast"]
_ROUTINGS = ("data", "fixed", "broadcast")


@dataclass(frozen=True)
class NodeGroup:
    """A group of nodes with one role.

    Attributes:
        name: unique name in the plan (``"sources"``, ``"compute[A]"``, ...).
        role: source, scrambler, compute or result.
        count: number of nodes (>= 1; sources may be none: a table without rows).
        holds_data: True when each node holds one tuple of the dataset (source nodes).
        physical: name of the physical group whose nodes run this group's nodes (a logical
            group shares the identities and data of its physical group); None = itself.
    """

    name: str
    role: Role
    count: int
    holds_data: bool = False
    physical: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError("name", "a non-empty string", self.name)
        if self.role not in ROLES:
            raise InvalidParameterError("role", f"one of {', '.join(ROLES)}", self.role)
        least = 0 if self.role == "source" else 1  # a table without rows: no source
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < least:
            raise InvalidParameterError(
                f"count of group {self.name}", f"an integer >= {least}", self.count
            )

    @property
    def physical_name(self) -> str:
        """The physical group that runs these nodes."""
        return self.physical or self.name


@dataclass(frozen=True)
class Flow:
    """Every node of ``sender`` sends message number ``order`` to node(s) of ``receiver``.

    Attributes:
        name: unique name (``"A"`` for the grouping set on A, ``"iteration 3"``, ...).
        sender: name of the sending group.
        receiver: name of the receiving group.
        routing: ``data``: one message per sender to the receiver chosen by its data (the
            data-dependent communication the countermeasures protect); ``fixed``: one message
            per sender to a receiver chosen independently of the data; ``broadcast``: one
            message per sender to every receiver.
        order: the message's order number at the sender (the edge label of Definition 1).
        depends_on_state: the data-chosen receiver also depends on data the sender received
            from other nodes (K-means: the current centroids). Theorem 2 then bounds the
            leakage of the traffic *given* that received state (see docs/execution.md).
        message_bytes: payload size of one message of this flow (messages of a plan are
            padded to one frame size; dummies have the same size).
        messages_per_sender: messages each sender sends on this flow (1 but for scramblers,
            which forward n messages and add d dummies).
    """

    name: str
    sender: str
    receiver: str
    routing: Routing
    order: int = 1
    depends_on_state: bool = False
    message_bytes: int = 8
    messages_per_sender: int = 1

    def __post_init__(self) -> None:
        if self.messages_per_sender < 1:
            raise InvalidParameterError(
                "messages_per_sender", "an integer >= 1", self.messages_per_sender
            )
        if self.routing not in _ROUTINGS:
            raise InvalidParameterError("routing", f"one of {', '.join(_ROUTINGS)}", self.routing)
        if isinstance(self.order, bool) or not isinstance(self.order, int) or self.order < 1:
            raise InvalidParameterError("order", "an integer >= 1", self.order)
        if self.message_bytes < 1:
            raise InvalidParameterError("message_bytes", "an integer >= 1", self.message_bytes)

    @property
    def data_dependent(self) -> bool:
        """True when which node receives the message depends on the data."""
        return self.routing == "data"


@dataclass(frozen=True)
class LogicalGroup:
    """The simple logical nodes that send one flow's messages (Section 2.4).

    Attributes:
        name: ``"<group>#<order>"`` when the physical group is split, else the group name.
        group: the (possibly non-simple) group the logical nodes belong to.
        flow: the flow they send.
    """

    name: str
    group: NodeGroup
    flow: Flow


@dataclass(frozen=True)
class Cluster:
    """A cluster of nodes (Definition "Cluster of nodes").

    Attributes:
        name: the name of the flow(s) it sends (a cluster is identified by what it sends).
        members: the logical groups in the cluster (same potential targets, disjoint data).
        targets: name of the receiving group (the potential targets 𝒯).
        num_targets: T = the number of potential targets.
        data_dependent: False for clusters whose receivers do not depend on the data, which
            are perfectly private (ε = δ = 0).
        depends_on_state: see `Flow.depends_on_state`.
    """

    name: str
    members: tuple[LogicalGroup, ...]
    targets: str
    num_targets: int
    data_dependent: bool
    depends_on_state: bool

    @property
    def num_senders(self) -> int:
        """Number of simple nodes in the cluster."""
        return sum(m.group.count for m in self.members)


@dataclass(frozen=True)
class ExecutionPlan:
    """A set of node groups and the flows between them (Section 2.2, "Execution plans").

    The plan must be acyclic at the level of groups (iterations are unrolled onto fresh
    logical groups, as the paper's Remark on iterative computations prescribes).
    """

    groups: tuple[NodeGroup, ...]
    flows: tuple[Flow, ...]

    def __post_init__(self) -> None:
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise InvalidParameterError("groups", "unique group names", names)
        by_name = {g.name: g for g in self.groups}
        for group in self.groups:
            if group.physical is not None:
                physical = by_name.get(group.physical)
                if physical is None:
                    raise InvalidParameterError(
                        f"physical of group {group.name}",
                        f"one of {', '.join(names)}",
                        group.physical,
                    )
                if physical.count != group.count or physical.physical is not None:
                    raise InvalidParameterError(
                        f"physical of group {group.name}",
                        "a physical group with the same number of nodes",
                        group.physical,
                    )
        flow_names = [f.name for f in self.flows]
        if len(set(flow_names)) != len(flow_names):
            raise InvalidParameterError("flows", "unique flow names", flow_names)
        for flow in self.flows:
            for end in (flow.sender, flow.receiver):
                if end not in by_name:
                    raise InvalidParameterError(
                        f"flow {flow.name}", f"groups among {', '.join(names)}", end
                    )
        orders = [(f.sender, f.order) for f in self.flows]
        if len(set(orders)) != len(orders):
            raise InvalidParameterError(
                "flows", "one flow per (sender, order number)", sorted(orders)
            )
        self._check_acyclic()

    def _check_acyclic(self) -> None:
        """InvalidParameterError naming a group on a cycle, if the flows have one.

        A depth-first search with its own stack, not Python's: a K-means plan of I iterations
        is a path about 2I groups deep, far beyond the interpreter's recursion limit.
        """
        children: dict[str, list[str]] = {g.name: [] for g in self.groups}
        for flow in self.flows:
            if flow.receiver not in children[flow.sender]:
                children[flow.sender].append(flow.receiver)
        state: dict[str, int] = {}  # 1: on the path being searched, 2: searched
        for group in self.groups:
            if group.name in state:
                continue
            state[group.name] = 1
            path = [(group.name, iter(children[group.name]))]
            while path:
                name, pending = path[-1]
                child = next(pending, None)
                if child is None:
                    state[name] = 2
                    path.pop()
                elif state.get(child) == 1:
                    raise InvalidParameterError(
                        "flows", "an acyclic plan (unroll iterations)", f"a cycle through {child}"
                    )
                elif child not in state:
                    state[child] = 1
                    path.append((child, iter(children[child])))

    @cached_property
    def _groups_by_name(self) -> dict[str, NodeGroup]:
        return {group.name: group for group in reversed(self.groups)}  # the first of a name

    @cached_property
    def _data_dependent_sends(self) -> Counter[str]:
        return Counter(f.sender for f in self.flows if f.data_dependent)

    def group(self, name: str) -> NodeGroup:
        """The group called ``name``."""
        found = self._groups_by_name.get(name)
        if found is not None:
            return found
        raise InvalidParameterError(
            "group", f"one of {', '.join(g.name for g in self.groups)}", name
        )

    def flow(self, name: str) -> Flow:
        """The flow called ``name``."""
        for flow in self.flows:
            if flow.name == name:
                return flow
        raise InvalidParameterError("flow", f"one of {', '.join(f.name for f in self.flows)}", name)

    @cached_property
    def node_id_offsets(self) -> dict[str, int]:
        """First node id of each physical group; ids are unique and contiguous per group."""
        offsets: dict[str, int] = {}
        next_id = 0
        for group in self.groups:
            if group.physical is None:
                offsets[group.name] = next_id
                next_id += group.count
        for group in self.groups:
            if group.physical is not None:
                offsets[group.name] = offsets[group.physical]
        return offsets

    @property
    def num_nodes(self) -> int:
        """Number of physical nodes."""
        return sum(g.count for g in self.groups if g.physical is None)

    def node_ids(self, group: str) -> range:
        """The unique ids of the nodes of ``group`` (logical groups share their physical ids)."""
        start = self.node_id_offsets[group]
        return range(start, start + self.group(group).count)

    def is_simple(self, group: str) -> bool:
        """A group is simple when its nodes send at most one data-dependent message."""
        return self._data_dependent_sends[group] <= 1

    @cached_property
    def logical_groups(self) -> tuple[LogicalGroup, ...]:
        """Every flow's sender as simple logical nodes (non-simple groups split by order)."""
        result = []
        for flow in self.flows:
            group = self.group(flow.sender)
            name = group.name if self.is_simple(group.name) else f"{group.name}#{flow.order}"
            result.append(LogicalGroup(name, group, flow))
        return tuple(result)

    def _shares_data(self, first: NodeGroup, second: NodeGroup) -> bool:
        return first.physical_name == second.physical_name

    @cached_property
    def clusters(self) -> tuple[Cluster, ...]:
        """The clusters of the plan, found from the flows.

        Logical groups sending data-dependent messages to the same receiver group are merged
        when their data are disjoint (different physical groups); every other flow is its own
        cluster. Data-independent flows form perfectly private clusters.
        """
        clusters: list[list[LogicalGroup]] = []
        # The data-dependent clusters by their head's (receiver, depends_on_state), in order:
        # a flow is only ever merged into one of these (linear, not quadratic, in the flows).
        mergeable: dict[tuple[str, bool], list[list[LogicalGroup]]] = {}
        for logical in self.logical_groups:
            placed = False
            key = (logical.flow.receiver, logical.flow.depends_on_state)
            if logical.flow.data_dependent:
                for members in mergeable.get(key, ()):
                    if not any(self._shares_data(m.group, logical.group) for m in members):
                        members.append(logical)
                        placed = True
                        break
            if not placed:
                clusters.append([logical])
                if logical.flow.data_dependent:
                    mergeable.setdefault(key, []).append(clusters[-1])
        result = []
        for members in clusters:
            first = members[0].flow
            result.append(
                Cluster(
                    name="+".join(m.flow.name for m in members),
                    members=tuple(members),
                    targets=first.receiver,
                    num_targets=self.group(first.receiver).count,
                    data_dependent=first.data_dependent,
                    depends_on_state=first.depends_on_state,
                )
            )
        return tuple(result)

    def cluster(self, name: str) -> Cluster:
        """The cluster called ``name`` (or the cluster that sends flow ``name``)."""
        for cluster in self.clusters:
            if cluster.name == name or any(m.flow.name == name for m in cluster.members):
                return cluster
        raise InvalidParameterError(
            "cluster", f"one of {', '.join(c.name for c in self.clusters)}", name
        )

    def _reachable_groups(self, start: str) -> set[str]:
        """Groups whose nodes may process data derived from a node of ``start``."""
        by_physical: dict[str, list[str]] = {}
        for group in self.groups:
            by_physical.setdefault(group.physical_name, []).append(group.name)
        seen: set[str] = set()
        stack = [start]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            # A logical node shares its physical node's data: its siblings see the same data.
            stack.extend(by_physical[self.group(name).physical_name])
            stack.extend(f.receiver for f in self.flows if f.sender == name)
        return seen

    def data_path(self, holder: str) -> tuple[Cluster, ...]:
        """The clusters on the path of a data item held by a node of group ``holder``.

        Theorem 2: every cluster with a node that may process data derived from the item;
        within a cluster only one node does (disjoint data), so each cluster counts once.
        """
        reachable = self._reachable_groups(holder)
        return tuple(
            cluster
            for cluster in self.clusters
            if any(m.group.name in reachable for m in cluster.members)
        )

    @property
    def data_holders(self) -> tuple[NodeGroup, ...]:
        """Physical groups whose nodes hold tuples of the dataset."""
        return tuple(g for g in self.groups if g.holds_data and g.physical is None)

    def data_paths(self) -> dict[str, tuple[Cluster, ...]]:
        """The data path of an item of every data-holding group (none of a group of no node)."""
        return {g.name: self.data_path(g.name) for g in self.data_holders if g.count}
