"""What every node of a deployed round is told: the round's public parameters and its config.

A :class:`RoundSpec` is public (the plan is public, Section 2.1): the program's public
description (the query, or K and the initial centroids), the countermeasure of every data flow,
the payload and frame sizes and the deadlines. Every node rebuilds the same program and the same
transformed plan from it (:attr:`RoundSpec.transformed`), so node names, node ids, batch sizes
and routed flows are computed once, in :mod:`dpcomm.plan`. A :class:`NodeConfig` adds the node's
name, where the coordinator listens and, for a source, its own row.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from dpcomm.engine.network.frames import frame_size_for
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.sealing import payload_size_for, sealed_size
from dpcomm.engine.network.wire import BLOB_HEADER, DATA_HEADER, MIN_BODY_SIZE
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.plan.countermeasures import (
    Countermeasure,
    LocalFlooding,
    NoCountermeasure,
    Scramblers,
)
from dpcomm.plan.transform import TransformedPlan, scrambler_group_name, transform
from dpcomm.queries.program import QueryProgram, program_from_spec


class DeploymentError(DpcommError):
    """A deployed round could not run (a node missing, a process dead, a deadline passed)."""


def countermeasure_to_dict(countermeasure: Countermeasure) -> dict[str, Any]:
    """A countermeasure, JSON-ready."""
    if isinstance(countermeasure, NoCountermeasure):
        return {"mechanism": "none"}
    if isinstance(countermeasure, LocalFlooding):
        return {
            "mechanism": "local",
            "sampling_rate": countermeasure.sampling_rate,
            "num_dummies": countermeasure.num_dummies,
        }
    return {
        "mechanism": "scrambler",
        "sampling_rate": countermeasure.sampling_rate,
        "batch_size": countermeasure.batch_size,
        "num_dummies": countermeasure.num_dummies,
        "capped": countermeasure.capped,
    }


def countermeasure_from_dict(data: Mapping[str, Any]) -> Countermeasure:
    """Inverse of :func:`countermeasure_to_dict`."""
    mechanism = data.get("mechanism")
    if mechanism == "none":
        return NoCountermeasure()
    if mechanism == "local":
        return LocalFlooding(
            sampling_rate=float(data["sampling_rate"]), num_dummies=int(data["num_dummies"])
        )
    if mechanism == "scrambler":
        return Scramblers(
            sampling_rate=float(data["sampling_rate"]),
            batch_size=int(data["batch_size"]),
            num_dummies=int(data["num_dummies"]),
            capped=bool(data["capped"]),
        )
    raise InvalidParameterError("mechanism", "none, local or scrambler", mechanism)


@dataclass(frozen=True, kw_only=True)
class RoundSpec:
    """The public parameters of one deployed round.

    Attributes:
        round_id: the id every frame carries (random, so frames of another round are refused).
        round_number: the round's number in the randomness derivation (0 for a single run).
        seed: None (every node draws fresh operating-system entropy: the default), or a seed for
            a reproducible test round (whoever knows it can predict the traffic).
        program: the program's public description (:meth:`QueryProgram.to_spec`).
        countermeasures: the countermeasure of every data-dependent flow, by flow name.
        payload_size: padded plaintext size of every sealed payload.
        frame_size: the length of every frame on the wire.
        collect_seconds: how long a scrambler waits for its sources (per stage).
        round_seconds: hard deadline of the whole round.
    """

    round_id: int
    round_number: int = 0
    seed: int | None = None
    program: dict[str, Any]
    countermeasures: dict[str, dict[str, Any]]
    payload_size: int
    frame_size: int
    collect_seconds: float
    round_seconds: float

    @classmethod
    def create(
        cls,
        program: QueryProgram,
        countermeasures: Countermeasure | Mapping[str, Countermeasure],
        *,
        round_id: int,
        seed: int | None,
        collect_seconds: float,
        round_seconds: float,
        round_number: int = 0,
    ) -> RoundSpec:
        """The spec of a round of ``program`` (its public description) with ``countermeasures``."""
        transformed = transform(program.plan, countermeasures)
        payload = payload_size_for(program.tuple_size())
        body = max(DATA_HEADER.size + sealed_size(payload), MIN_BODY_SIZE, BLOB_HEADER.size + 16)
        return cls(
            round_id=round_id,
            round_number=round_number,
            seed=seed,
            program=program.to_spec(),
            countermeasures={
                name: countermeasure_to_dict(item)
                for name, item in transformed.countermeasures.items()
            },
            payload_size=payload,
            frame_size=frame_size_for(body),
            collect_seconds=float(collect_seconds),
            round_seconds=float(round_seconds),
        )

    # ------------------------------------------------------------------ derived, cached

    @cached_property
    def public_program(self) -> QueryProgram:
        """The program every node rebuilds from the public description."""
        return program_from_spec(self.program)

    @cached_property
    def transformed(self) -> TransformedPlan:
        """The plan with its countermeasures (the same on every node)."""
        chosen = {n: countermeasure_from_dict(c) for n, c in self.countermeasures.items()}
        return transform(self.public_program.plan, chosen)

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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass(frozen=True, kw_only=True)
class NodeFaults:
    """Faults a node injects, for tests and demonstrations (:mod:`dpcomm.engine.network.faults`).

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
class NodeConfig:
    """Everything one node needs to start.

    Attributes:
        name: the node's name (its certificate's common name).
        round: the round's public parameters.
        coordinator_host, coordinator_port: where the coordinator listens.
        listen_host, listen_port: where this node listens (port 0: any free port).
        advertise_host: the address other nodes reach it at (default ``listen_host``).
        row: a source's own row (:meth:`QueryProgram.encode_rows`, hexadecimal).
        faults: injected faults.
    """

    name: str
    round: RoundSpec
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

    def node_fields(self) -> dict[str, Any]:
        """The node's own fields as JSON values, without the round (shared by many nodes)."""
        data: dict[str, Any] = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("round", "faults")
        }
        data["faults"] = dataclasses.asdict(self.faults)
        return data

    @classmethod
    def from_fields(cls, data: Mapping[str, Any], round: RoundSpec) -> NodeConfig:
        """Inverse of :meth:`node_fields`, for a node of ``round``."""
        fields = dict(data)
        fields["faults"] = NodeFaults(**fields.get("faults", {}))
        return cls(**fields, round=round)

    def to_json(self) -> str:
        """The config as a JSON document."""
        return json.dumps({**self.node_fields(), "round": self.round.to_dict()}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> NodeConfig:
        """Inverse of :meth:`to_json`; DeploymentError if malformed."""
        try:
            data = json.loads(text)
            spec = RoundSpec.from_dict(data.pop("round"))
            return cls.from_fields(data, spec)
        except (ValueError, KeyError, TypeError) as error:
            raise DeploymentError(f"invalid node config: {error}") from error

    @classmethod
    def load(cls, path: str | Path) -> NodeConfig:
        """Read a config file written with :meth:`to_json`."""
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise DeploymentError(f"cannot read node config {path}: {error}") from error
        return cls.from_json(text)
