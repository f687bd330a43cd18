"""What every node of a deployed round is told: the round's public parameters and its config.

A `RoundSpec` is public (the plan is public, Section 2.1): the program's public
description (the query, or K and the initial centroids), the countermeasure of every data flow,
the payload and frame sizes and the deadlines. Every node rebuilds the same program and the same
transformed plan from it (`RoundSpec.transformed`), so node names, node ids, batch sizes
and routed flows are computed once, in `dpcomm.plan`. A `NodeConfig` adds the node's
name, where the coordinator listens and, for a source, its own row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from dpcomm.engine.network.frames import HEADER_SIZE, frame_size_for
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.records import DeploymentError, decode, encode
from dpcomm.engine.network.sealing import payload_size_for, sealed_size
from dpcomm.engine.network.wire import (
    BASE_BLOB,
    BLOB_BYTES_PER_NODE,
    BLOB_HEADER,
    CONTROL_FRAMES_PER_BLOB_CAP,
    DATA_HEADER,
    DEFAULT_MAX_BLOB,
    HELLO_BLOB,
    MIN_BODY_SIZE,
    OUTPUT_BLOB_HEADER,
    ChannelLimits,
)
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.codec import countermeasure_from_dict, countermeasure_to_dict
from dpcomm.plan.countermeasures import Countermeasure, CountermeasureName
from dpcomm.plan.routes import Routes
from dpcomm.plan.transform import TransformedPlan, scrambler_group_name, transform
from dpcomm.queries.program import (
    QueryProgram,
    largest_tuple,
    program_from_spec,
    public_program,
)

__all__ = [
    "CountermeasureSpec",
    "DeploymentError",
    "NodeConfig",
    "NodeFaults",
    "NodeSettings",
    "RoundSpec",
]


@dataclass(frozen=True)
class CountermeasureSpec:
    """A countermeasure as a round's spec carries it: its dict form (`dpcomm.plan.codec`).

    A typed record, so that a malformed spec is refused as it is decoded; its fields are the
    keys of `dpcomm.plan.codec.COUNTERMEASURE_KEYS`, in their order.
    """

    mechanism: CountermeasureName
    sampling_rate: float = 0.0
    batch_size: int | None = None
    num_dummies: int = 0
    capped: bool = False

    @classmethod
    def of(cls, countermeasure: Countermeasure) -> CountermeasureSpec:
        """The spec of ``countermeasure`` (its dict form, `dpcomm.plan.codec`)."""
        return cls(**countermeasure_to_dict(countermeasure))

    def countermeasure(self) -> Countermeasure:
        """The countermeasure this spec describes (checked as any dict form is)."""
        return countermeasure_from_dict(dataclasses.asdict(self))


@dataclass(frozen=True, kw_only=True)
class RoundSpec:
    """The public parameters of one deployed round.

    Attributes:
        round_id: the id every frame carries (random, so frames of another round are refused).
        round_number: the round's number in the randomness derivation (0 for a single run).
        seed: None (every node draws fresh operating-system entropy: the default), or a seed for
            a reproducible test round (whoever knows it can predict the traffic).
        program: the program's public description (`QueryProgram.to_spec`).
        countermeasures: the countermeasure of every data-dependent flow, by flow name.
        payload_size: padded plaintext size of every sealed payload.
        frame_size: the length of every frame on the wire.
        idle_seconds: how long a scrambler waits for its sources (per stage).
        round_seconds: the cap on the whole round.
        max_left_out: the fraction of the sources that may be absent (never registered)
            before the coordinator reports the round failed (its node exits non-zero).
    """

    round_id: int
    round_number: int = 0
    seed: int | None = None
    program: dict[str, Any]
    countermeasures: dict[str, CountermeasureSpec]
    payload_size: int
    frame_size: int
    idle_seconds: float
    round_seconds: float
    max_left_out: float = 0.0

    @classmethod
    def create(
        cls,
        program: QueryProgram,
        countermeasures: Countermeasure | Mapping[str, Countermeasure],
        *,
        seed: int | None,
        idle_seconds: float,
        round_seconds: float,
        max_left_out: float = 0.0,
        round_id: int | None = None,
        round_number: int = 0,
        transformed: TransformedPlan | None = None,
    ) -> RoundSpec:
        """The spec of a round of ``program`` with ``countermeasures``.

        Made from the program's public description alone (`public_program`: without its rows),
        so that nothing in the spec, the payload's size included, depends on the data.
        ``round_id`` (default: drawn at random) is what every frame of the round carries.
        ``transformed``: the plan already transformed with ``countermeasures`` (the driver's
        prepared one), kept as the spec's `transformed` instead of transforming it again.
        """
        program = public_program(program)
        if round_id is None:
            round_id = secrets.randbelow(1 << 62) + 1
        if transformed is None:
            transformed = transform(program.plan, countermeasures)
        program.check_countermeasures(transformed.countermeasures)
        payload = payload_size_for(largest_tuple(program))
        body = max(DATA_HEADER.size + sealed_size(payload), MIN_BODY_SIZE, BLOB_HEADER.size + 16)
        spec = cls(
            round_id=round_id,
            round_number=round_number,
            seed=seed,
            program=program.to_spec(),
            countermeasures={
                name: CountermeasureSpec.of(item)
                for name, item in transformed.countermeasures.items()
            },
            payload_size=payload,
            frame_size=frame_size_for(body),
            idle_seconds=float(idle_seconds),
            round_seconds=float(round_seconds),
            max_left_out=float(max_left_out),
        )
        spec.__dict__["transformed"] = transformed  # the cached property, computed once
        return spec

    # ------------------------------------------------------------------ derived, cached

    @cached_property
    def digest(self) -> bytes:
        """SHA-256 of the round's public parameters (its JSON, keys sorted).

        Every node's HELLO carries it and the coordinator refuses a node whose digest differs
        from its own (the countermeasures, the release, the program, the limits): the nodes of
        a round run the very round the coordinator charged, or no data moves.
        """
        return hashlib.sha256(msgspec.json.encode(self, order="sorted")).digest()

    @cached_property
    def public_program(self) -> QueryProgram:
        """The program every node rebuilds from the public description."""
        return program_from_spec(self.program)

    @cached_property
    def transformed(self) -> TransformedPlan:
        """The plan with its countermeasures (the same on every node)."""
        chosen = {n: c.countermeasure() for n, c in self.countermeasures.items()}
        program = self.public_program
        program.check_countermeasures(chosen)  # every node: a config's release fits its traffic
        return transform(program.plan, chosen)

    @cached_property
    def routes(self) -> Routes:
        """Who talks to whom (the same on every node)."""
        return Routes(self.transformed)

    @cached_property
    def data_flows(self) -> tuple[str, ...]:
        """The data-dependent flows, in plan order (a scrambler's group is its index here)."""
        return tuple(f.name for f in self.public_program.plan.flows if f.data_dependent)

    @cached_property
    def compute_groups(self) -> tuple[str, ...]:
        """The physical groups of compute nodes, in plan order."""
        return tuple(
            g.name
            for g in self.public_program.plan.groups
            if g.role == "compute" and g.physical is None
        )

    @cached_property
    def routed_names(self) -> tuple[str, ...]:
        """The routed flows; a DATA frame names its flow by its index here."""
        return tuple(f.name for f in self.transformed.flows)

    def countermeasure(self, flow: str) -> Countermeasure:
        """The countermeasure data flow ``flow`` runs."""
        return self.transformed.countermeasures[flow]

    def compute_group_of(self, flow: str) -> int:
        """The compute group receiving data flow ``flow``."""
        plan = self.public_program.plan
        physical = plan.group(plan.flow(flow).receiver).physical_name
        return self.compute_groups.index(physical)

    @cached_property
    def _receivers(self) -> dict[str, tuple[NodeName, ...]]:
        plan = self.public_program.plan
        receivers = {}
        for flow in self.data_flows:
            count = plan.group(plan.flow(flow).receiver).count
            group = self.compute_group_of(flow)
            receivers[flow] = tuple(NodeName.compute(group, k) for k in range(count))
        return receivers

    @cached_property
    def _scramblers(self) -> dict[str, tuple[NodeName, ...]]:
        return {
            flow: tuple(
                NodeName.scrambler(index, k) for k in range(self.transformed.num_scramblers(flow))
            )
            for index, flow in enumerate(self.data_flows)
        }

    def receivers(self, flow: str) -> list[NodeName]:
        """The compute nodes that data flow ``flow`` targets (target index = position)."""
        return list(self._receivers[flow])

    def scramblers(self, flow: str) -> list[NodeName]:
        """The scramblers of data flow ``flow`` (none without scramblers)."""
        return list(self._scramblers[flow])

    def node_names(self) -> list[NodeName]:
        """Every node of the round."""
        plan = self.public_program.plan
        names = [COORDINATOR, RESULT]
        for index, group in enumerate(self.compute_groups):
            names += [NodeName.compute(index, k) for k in range(plan.group(group).count)]
        for flow in self.data_flows:
            names += self.scramblers(flow)
        holders = plan.data_holders
        count = holders[0].count if holders else 0
        names += [NodeName.source(i) for i in range(count)]
        return names

    def node_id(self, name: NodeName) -> int:
        """The node's id in the transformed plan (the simulator's numbering)."""
        routed = self.transformed.routed
        if name.role == "source":
            group = self.public_program.plan.data_holders[0].name
        elif name.role == "scrambler":
            group = scrambler_group_name(self.data_flows[name.group])
        elif name.role == "compute":
            group = self.compute_groups[name.group]
        elif name.role == "result":
            group = next(g.name for g in routed.groups if g.role == "result")
        else:
            raise InvalidParameterError("node", "a node of the plan", str(name))
        return routed.node_id_offsets[group] + name.index

    def name_of(self, group: str, index: int) -> NodeName:
        """The name of node ``index`` of routed group ``group``."""
        node = self.transformed.routed.group(group)
        if node.role == "source":
            return NodeName.source(index)
        if node.role == "result":
            return RESULT
        if node.role == "compute":
            return NodeName.compute(self.compute_groups.index(node.physical_name), index)
        flow = next(f for f in self.data_flows if scrambler_group_name(f) == group)
        return NodeName.scrambler(self.data_flows.index(flow), index)

    def channel_limits(self, role: str | None = None) -> ChannelLimits:
        """The channel limits of a node of this round (of role ``role`` if given).

        The largest blob the protocol sends grows with the round: a plan lists the addresses
        of the nodes it routes to (once per broadcast flow), an output holds at most a row per
        tuple, each row at most an encoded tuple and its aggregates. Capped at ``BASE_BLOB``
        plus, per node of the round, twice the payload size and ``BLOB_BYTES_PER_NODE`` bytes
        (and never above ``DEFAULT_MAX_BLOB``); the other operations keep the protocol's own
        limits. The coordinator receives no plan, FINALIZE or output: its largest blob is a
        HELLO. An output blob's size is the program's public one, accepted at any size.
        """
        if role == "coordinator":
            return ChannelLimits(max_blob=HELLO_BLOB)
        nodes = sum(group.count for group in self.transformed.routed.groups)
        per_node = 2 * self.payload_size + BLOB_BYTES_PER_NODE
        program = self.public_program
        # An output has one public size (the program pads it): it always fits, whatever the cap.
        largest = max(program.codec.outputs(flow).size for flow in self.data_flows)
        output = largest + OUTPUT_BLOB_HEADER
        plan = min(DEFAULT_MAX_BLOB, BASE_BLOB + nodes * per_node)
        return ChannelLimits(max_blob=max(plan, output))

    def peer_frame_quota(self, limits: ChannelLimits | None = None) -> int:
        """Fresh frames one peer may send a node in this round (its replay quota).

        A loose but sound bound: twice every message the round plans (dummies included;
        resent frames keep their ids and are not fresh), plus ``CONTROL_FRAMES_PER_BLOB_CAP``
        blobs of the largest size ``limits`` accept, cut into the round's frames.
        """
        limits = limits or ChannelLimits()
        capacity = self.frame_size - HEADER_SIZE - BLOB_HEADER.size
        blob_frames = -(-limits.max_blob // max(1, capacity))
        return 2 * self.transformed.messages + CONTROL_FRAMES_PER_BLOB_CAP * blob_frames


@dataclass(frozen=True, kw_only=True)
class NodeFaults:
    """Faults a node injects, for tests and demonstrations (`dpcomm.engine.network.faults`).

    Attributes:
        late: a source sends only after the collection deadline (it is left out).
        replay: a source sends each data frame twice, byte for byte.
        malformed: a source sends a frame of random bytes after each data frame.
        unauthenticated: a source also tries a TLS connection without a certificate.
        crash_after_frames: a scrambler dies after writing this many data frames.
    """

    late: bool = False
    replay: bool = False
    malformed: bool = False
    unauthenticated: bool = False
    crash_after_frames: int | None = None

    @property
    def any(self) -> bool:
        """True when some fault is set."""
        return self != NodeFaults()


@dataclass(frozen=True, kw_only=True)
class NodeSettings:
    """One node's own settings (a config without the round, which many nodes share).

    Attributes:
        name: the node's name (its certificate's common name).
        coordinator_host, coordinator_port: where the coordinator listens.
        listen_host, listen_port: where this node listens (port 0: any free port).
        advertise_host: the address other nodes reach it at (default ``listen_host``).
        row: a source's own row (its program's row codec, hexadecimal).
        faults: injected faults.
    """

    name: str
    coordinator_host: str = "127.0.0.1"
    coordinator_port: int = 0
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    advertise_host: str | None = None
    row: str | None = None
    faults: NodeFaults = field(default_factory=NodeFaults)

    def __post_init__(self) -> None:
        node = NodeName.parse(self.name)
        if node.role == "source" and self.row is None:
            raise InvalidParameterError("row", f"the row of {self.name}", None)

    @property
    def node(self) -> NodeName:
        """The typed name."""
        return NodeName.parse(self.name)

    @property
    def role(self) -> str:
        """The node's role."""
        return self.node.role


@dataclass(frozen=True, kw_only=True)
class NodeConfig(NodeSettings):
    """Everything one node needs to start: its settings and the round's public parameters."""

    round: RoundSpec

    @property
    def settings(self) -> NodeSettings:
        """The node's own settings, without the round."""
        return NodeSettings(**_settings_values(self))

    @classmethod
    def of(cls, settings: NodeSettings, round: RoundSpec) -> NodeConfig:
        """The config of a node of ``round`` with ``settings``."""
        return cls(**_settings_values(settings), round=round)

    def to_json(self) -> str:
        """The config as a JSON document."""
        return encode(self).decode()

    @classmethod
    def from_json(cls, text: str) -> NodeConfig:
        """Inverse of `to_json`; DeploymentError if malformed."""
        try:
            return decode(text, cls)
        except InvalidParameterError as error:
            raise DeploymentError(f"invalid node config: {error}") from error

    @classmethod
    def load(cls, path: str | Path) -> NodeConfig:
        """Read a config file written with `to_json`."""
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise DeploymentError(f"cannot read node config {path}: {error}") from error
        return cls.from_json(text)


def _settings_values(settings: NodeSettings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(NodeSettings)}
