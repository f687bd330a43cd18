"""The communication graph an observer sees, as arrays, and the efficiency metrics of Section 2.5.

Edges are recorded per flow as (sender id, receiver id, number of messages), node ids being
those of the (countermeasure-transformed) plan. Message contents are hidden; every message of
a run travels in a frame of the same size (the largest payload of the plan), so bytes are
messages times the frame size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class FlowTraffic:
    """The messages of one flow (one order number at the senders).

    Attributes:
        flow: the flow's name (for scramblers: ``"<flow> (to scramblers)"`` and
            ``"<flow> (scrambled)"``).
        senders: sender node id per edge.
        receivers: receiver node id per edge.
        counts: number of messages on the edge (>= 1).
        dummies: how many of these messages are dummies.
    """

    flow: str
    senders: IntArray
    receivers: IntArray
    counts: IntArray
    dummies: int = 0

    @property
    def messages(self) -> int:
        """Number of messages."""
        return int(self.counts.sum())

    @property
    def edges(self) -> int:
        """Number of (sender, receiver) entries with at least one message."""
        return int(self.senders.size)

    def summary(self) -> FlowSummary:
        """What an engine that keeps no edge list reports of this flow."""
        return FlowSummary(
            self.flow,
            self.messages,
            self.dummies,
            self.edges,
            edge_digest(self.senders, self.receivers, self.counts),
        )


@dataclass(frozen=True)
class FlowSummary:
    """The messages of one flow without its edge list (an engine over many machines).

    Partitions of a flow add up: messages, dummies, edges and the digest are sums.

    Attributes:
        flow: the flow's name.
        messages: number of messages.
        dummies: how many of them are dummies.
        edges: number of (sender, receiver) entries (as `FlowTraffic` records them).
        digest: `edge_digest` of the entries: equal for the same entries in any order.
    """

    flow: str
    messages: int
    dummies: int
    edges: int
    digest: int

    def summary(self) -> FlowSummary:
        """Itself."""
        return self

    def __add__(self, other: FlowSummary) -> FlowSummary:
        """The summary of two disjoint parts of the same flow."""
        return FlowSummary(
            self.flow,
            self.messages + other.messages,
            self.dummies + other.dummies,
            self.edges + other.edges,
            (self.digest + other.digest) % _DIGEST_MODULUS,
        )


_DIGEST_MODULUS = 1 << 64


def edge_digest(senders: IntArray, receivers: IntArray, counts: IntArray) -> int:
    """An order-free fingerprint of (sender, receiver, count) entries: a sum of 64-bit hashes.

    Each entry is mixed by SplitMix64's finalizer and the hashes are added modulo 2^64, so the
    digest of a flow is the sum of its partitions' digests. Equal entries give equal digests;
    different ones collide with probability about 2^-64 (a check, not a security claim).
    """
    with np.errstate(over="ignore"):
        mixed = (
            np.asarray(senders, dtype=np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            + np.asarray(receivers, dtype=np.int64).astype(np.uint64)
            * np.uint64(0xC2B2AE3D27D4EB4F)
            + np.asarray(counts, dtype=np.int64).astype(np.uint64) * np.uint64(0x165667B19E3779F9)
        )
        mixed ^= mixed >> np.uint64(30)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
        mixed ^= mixed >> np.uint64(27)
        mixed *= np.uint64(0x94D049BB133111EB)
        mixed ^= mixed >> np.uint64(31)
        return int(mixed.sum(dtype=np.uint64)) % _DIGEST_MODULUS


@dataclass
class TrafficLog:
    """Accumulates the flows of a run (engine-internal, mutable while the run goes on)."""

    flows: list[FlowTraffic] = field(default_factory=list)

    def add(
        self,
        flow: str,
        senders: IntArray,
        receivers: IntArray,
        counts: IntArray | None = None,
        *,
        dummies: int = 0,
    ) -> None:
        """Record edges (one message each unless ``counts`` is given); empty edges dropped."""
        senders = np.asarray(senders, dtype=np.int64)
        receivers = np.broadcast_to(np.asarray(receivers, dtype=np.int64), senders.shape)
        if counts is None:
            counts = np.ones(senders.shape, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        keep = counts > 0
        if not keep.all():
            senders, receivers, counts = senders[keep], receivers[keep], counts[keep]
        self.flows.append(FlowTraffic(flow, senders.copy(), np.array(receivers), counts, dummies))


@dataclass(frozen=True)
class Efficiency:
    """Efficiency of a run (Section 2.5).

    Attributes:
        messages: all messages sent, dummies included.
        dummy_messages: messages that carry no real tuple.
        bytes: messages times the frame size.
        frame_bytes: the size every message is padded to.
        max_channels: the largest number of secure channels (distinct peers) of one node.
        mean_channels: the mean number of channels over the nodes that have any.
        max_channels_by_role: the largest number of channels per role.
        num_nodes: nodes with at least one channel.
    """

    messages: int
    dummy_messages: int
    bytes: int
    frame_bytes: int
    max_channels: int
    mean_channels: float
    max_channels_by_role: dict[str, int]
    num_nodes: int


def sorted_unique(values: IntArray) -> IntArray:
    """Distinct values, sorted.

    A sort and a diff: numpy's hash-based unique is about 20 times slower on millions of
    int64 codes.
    """
    ordered = np.sort(values, kind="stable")
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def channel_degrees(flows: list[FlowTraffic], num_nodes: int) -> IntArray:
    """Number of distinct peers of every node (a secure channel serves both directions)."""
    if not flows:
        return np.zeros(num_nodes, dtype=np.int64)
    low = np.concatenate([np.minimum(f.senders, f.receivers) for f in flows])
    high = np.concatenate([np.maximum(f.senders, f.receivers) for f in flows])
    distinct = low != high
    codes = sorted_unique(low[distinct] * np.int64(num_nodes) + high[distinct])
    first, second = np.divmod(codes, np.int64(num_nodes))
    return np.bincount(first, minlength=num_nodes) + np.bincount(second, minlength=num_nodes)


def efficiency(
    flows: list[FlowTraffic],
    *,
    num_nodes: int,
    frame_bytes: int,
    roles: IntArray,
    role_names: tuple[str, ...],
) -> Efficiency:
    """The efficiency metrics of a run's traffic.

    Args:
        flows: the run's traffic.
        num_nodes: number of physical node ids.
        frame_bytes: the common frame size.
        roles: role index (into ``role_names``) of every node id.
        role_names: the role names.
    """
    messages = sum(f.messages for f in flows)
    dummies = sum(f.dummies for f in flows)
    degrees = channel_degrees(flows, num_nodes)
    active = degrees > 0
    by_role = {}
    for index, role in enumerate(role_names):
        selected = degrees[roles == index]
        if selected.size:
            by_role[role] = int(selected.max())
    return Efficiency(
        messages=messages,
        dummy_messages=dummies,
        bytes=messages * frame_bytes,
        frame_bytes=frame_bytes,
        max_channels=int(degrees.max()) if degrees.size else 0,
        mean_channels=float(degrees[active].mean()) if active.any() else 0.0,
        max_channels_by_role=by_role,
        num_nodes=int(active.sum()),
    )
