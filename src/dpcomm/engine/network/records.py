"""What the nodes of a round tell each other and their launcher: typed records, one codec.

Every control message (a node's HELLO, its part of the plan, PREPARE, COMMIT, FINALIZE), every
node's outcome, and what a worker process reports to its launcher is a frozen dataclass here.
`encode` and `decode` are the only way they become bytes and back (JSON, by
msgspec, which checks every field's type on the way in): a malformed message is a
`DeploymentError`, never a ``KeyError`` deep in a node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import msgspec

from dpcomm.errors import DpcommError

Record = TypeVar("Record")

#: Where a node listens: (host, port) over TCP, (name,) over the in-memory transport.
Address = tuple[str | int, ...]


class DeploymentError(DpcommError):
    """A deployed round could not run (a node missing, a process dead, a malformed message)."""


def encode(record: Any) -> bytes:
    """``record`` (a dataclass of this module, or of plain values) as JSON bytes."""
    return msgspec.json.encode(record)


def to_text(record: Any) -> str:
    """``record`` as indented JSON text (what ``dpcomm node run`` prints)."""
    return msgspec.json.format(encode(record), indent=2).decode()


def decode(data: bytes | str, kind: type[Record]) -> Record:
    """The record of type ``kind`` that ``data`` encodes; `DeploymentError` if not."""
    try:
        return msgspec.json.decode(data, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError) as error:
        raise DeploymentError(f"malformed {kind.__name__}: {error}") from error


# --------------------------------------------------------------------------- registration


@dataclass(frozen=True)
class Peer:
    """Another node as a node knows it: its name, where it listens, the key to seal for it.

    Attributes:
        name: the node's name (`dpcomm.engine.network.names.NodeName`).
        address: where it listens (None when the node never connects to it).
        key: a compute node's public sealing key (None for other roles).
    """

    name: str
    address: Address | None = None
    key: bytes | None = None


@dataclass(frozen=True)
class Hello:
    """What a node tells the coordinator when it registers (HELLO).

    Attributes:
        address: where it listens; key: a compute node's public sealing key.
        round_digest: the digest of the round's spec in its config (`RoundSpec.digest`).
    """

    address: Address | None = None
    key: bytes | None = None
    round_digest: bytes | None = None


@dataclass(frozen=True)
class SourceRoute:
    """How a source sends one data flow: sealed for ``targets``, through ``scrambler`` if any.

    Attributes:
        targets: the flow's targets in target order (keys; addresses when sent directly).
        scrambler: the scrambler its message goes to (None: straight to the targets).
    """

    targets: tuple[Peer, ...]
    scrambler: Peer | None = None


@dataclass(frozen=True)
class SourcePlan:
    """A source's part of the plan: a route per data flow."""

    flows: dict[str, SourceRoute]


@dataclass(frozen=True)
class ScramblerPlan:
    """A scrambler's part of the plan: its sources and its flow's targets (with keys)."""

    members: tuple[int, ...]
    targets: tuple[Peer, ...]


@dataclass(frozen=True)
class OutputRoute:
    """Where a compute node sends its output of a data flow over routed flow ``flow``."""

    flow: str
    receivers: tuple[Peer, ...]


@dataclass(frozen=True)
class ComputePlan:
    """A compute node's part of the plan: per data flow it receives, where its output goes."""

    outputs: dict[str, tuple[OutputRoute, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultPlan:
    """The result node's part of the plan (nothing: it only listens)."""


# --------------------------------------------------------------------------- the commit


@dataclass(frozen=True)
class Prepare:
    """PREPARE: the batch sender's frames of ``flow`` held by a target, and their digest."""

    flow: str
    count: int
    digest: bytes


@dataclass(frozen=True)
class Commit:
    """COMMIT: a batch sender asks the coordinator to commit its batch of ``flow``.

    ``abandon``: the batch could not be prepared at every target (a target refused or stayed
    unreachable): the coordinator counts it lost at once instead of waiting for it.
    ``batched``: which of a scrambler's planned members (`dpcomm.plan.routes.Routes.batches`,
    in plan order) its batch carries, one bit each, first member in the lowest bit of the first
    byte (None: a source's own batch), so that the coordinator knows which sources a committed
    batch left out in a blob of n / 8 bytes.
    """

    flow: str
    abandon: bool = False
    batched: bytes | None = None


@dataclass(frozen=True)
class Finalize:
    """FINALIZE: the coordinator's decision for ``flow``: the batch senders that committed."""

    flow: str
    committed: tuple[str, ...]


# --------------------------------------------------------------------------- outcomes

SendStatus = Literal["accepted", "rejected", "committed", "failed"]


@dataclass(frozen=True)
class SourceFlowOutcome:
    """What a source did in one data flow.

    Attributes:
        real: its message carried its tuple (else R_σ sent a dummy).
        target: the target its message was sealed for.
        status: its scrambler acknowledged (``accepted``) or refused (``rejected``) the message,
            or its direct batch ``committed``, or the sending ``failed``.
        scrambler: the scrambler it sent to (None when sent directly).
    """

    real: bool
    target: int
    status: SendStatus
    scrambler: str | None = None


@dataclass(frozen=True)
class SourceOutcome:
    """A source's outcome: what it did in every data flow."""

    name: str
    index: int
    flows: dict[str, SourceFlowOutcome]


@dataclass(frozen=True)
class ScramblerOutcome:
    """A scrambler's outcome.

    Attributes:
        name: the scrambler's name.
        flow: its data flow.
        index: its index among the flow's scramblers.
        batched: the sources whose messages it batched (its m <= n).
        members: the sources assigned to it.
        dummies: the dummies it added.
        committed: its batch committed.
        collect_seconds: how long it collected; forward_seconds: how long it forwarded.
    """

    name: str
    flow: str
    index: int
    batched: tuple[int, ...]
    members: int
    dummies: int
    committed: bool
    collect_seconds: float
    forward_seconds: float


@dataclass(frozen=True)
class ComputeFlowOutcome:
    """What a compute node did with one data flow.

    Attributes:
        tuples: real tuples counted (committed batches only).
        dummies: dummies opened (every batch held).
        discarded: batch senders whose frames it held but did not count.
        outputs_sent: outputs acknowledged by their receivers, of ``outputs`` sent.
        undelivered: why each output given up was given up, one line each.
    """

    tuples: int
    dummies: int
    discarded: tuple[str, ...]
    outputs_sent: int
    outputs: int
    undelivered: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComputeOutcome:
    """A compute node's outcome, per data flow it received."""

    name: str
    group: int
    index: int
    flows: dict[str, ComputeFlowOutcome]


@dataclass(frozen=True)
class Output:
    """A target's output of a data flow, encoded by the program (its public size)."""

    flow: str
    target: int
    data: bytes


@dataclass(frozen=True)
class RoundSummary:
    """What the coordinator tells the result node with its CLOSE: what the round lost.

    Attributes:
        sources: the round's sources.
        left_out: per data flow, how many sources no committed batch carries (never
            registered, refused by their scrambler, or in a batch lost or refused).
        max_left_out: the fraction of the sources the round tolerates left out.
        failures: why the round failed, one line each (none: it did not).
    """

    sources: int
    left_out: dict[str, int]
    max_left_out: float
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResultOutcome:
    """The result node's outcome: the outputs it merged, those it never got, the round's summary.

    ``summary`` is None when the coordinator's CLOSE never came (the round then counts failed).
    """

    outputs: tuple[Output, ...]
    missing: tuple[tuple[str, int], ...]
    summary: RoundSummary | None = None

    @property
    def failures(self) -> tuple[str, ...]:
        """Why the published result is incomplete, one line each (none: it is whole)."""
        found = []
        if self.missing:
            flow, target = self.missing[0]
            found.append(
                f"{len(self.missing)} output(s) never arrived (first: flow {flow}, target {target})"
            )
        if self.summary is None:
            found.append("no summary from the coordinator: what the round lost is unknown")
        else:
            found += self.summary.failures
        return tuple(found)


@dataclass(frozen=True)
class CoordinatorOutcome:
    """The coordinator's outcome.

    Attributes:
        committed: per data flow, the batch senders that committed (sorted).
        lost: per data flow, those that hung up or were undecided at FINALIZE.
        refused: per data flow, COMMITs refused (too late, or not a batch sender).
        result_received: the result node said it was done.
        registration_seconds: from listening to the end of registration.
        planned_at: wall-clock time (``time.time()``) when the plans went out.
        round_seconds: from the plans to the end of the round.
        absent: the nodes that never registered (sources, left out).
        summary: what the round lost, and why it failed (`RoundSummary`).
    """

    committed: dict[str, tuple[str, ...]]
    lost: dict[str, tuple[str, ...]]
    refused: dict[str, tuple[str, ...]]
    result_received: bool
    registration_seconds: float
    planned_at: float
    round_seconds: float
    absent: tuple[str, ...] = ()
    summary: RoundSummary | None = None


# --------------------------------------------------------------------------- the wire


@dataclass(frozen=True)
class LinkRecord:
    """Frames, data frames and bytes on one directed link, as one side counted them."""

    sender: str
    receiver: str
    frames: int
    data_frames: int
    bytes: int


@dataclass(frozen=True)
class MessageRecord:
    """Messages of routed flow ``flow`` from ``sender`` to ``receiver`` (resends once)."""

    flow: str
    sender: str
    receiver: str
    count: int


@dataclass(frozen=True)
class WireRecord:
    """What one process measured on the wire.

    Attributes:
        sent: links as their senders counted them; received: as their receivers did.
        frame_lengths: every distinct frame length written or read.
        drops: per node, frames and connections dropped, by reason.
        messages: the plan's messages per routed flow and edge.
        dummies: per routed flow, the dummies counted by whoever could tell.
    """

    sent: tuple[LinkRecord, ...] = ()
    received: tuple[LinkRecord, ...] = ()
    frame_lengths: tuple[int, ...] = ()
    drops: dict[str, dict[str, int]] = field(default_factory=dict)
    messages: tuple[MessageRecord, ...] = ()
    dummies: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupOutcome:
    """What the nodes of one process (or of a whole round) did, and their wire.

    Attributes:
        coordinator, result: those nodes' outcomes, if they ran here and finished.
        sources, scramblers, computes: the outcomes of the nodes of each role that finished.
        errors: per node that failed, its error in one line.
        wires: what each process measured on the wire.
    """

    coordinator: CoordinatorOutcome | None = None
    result: ResultOutcome | None = None
    sources: tuple[SourceOutcome, ...] = ()
    scramblers: tuple[ScramblerOutcome, ...] = ()
    computes: tuple[ComputeOutcome, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)
    wires: tuple[WireRecord, ...] = ()

    def __add__(self, other: GroupOutcome) -> GroupOutcome:
        """The outcomes of both groups (the nodes of one round run in several processes)."""
        return GroupOutcome(
            coordinator=self.coordinator or other.coordinator,
            result=self.result or other.result,
            sources=self.sources + other.sources,
            scramblers=self.scramblers + other.scramblers,
            computes=self.computes + other.computes,
            errors={**self.errors, **other.errors},
            wires=self.wires + other.wires,
        )

    def undelivered(self) -> tuple[str, ...]:
        """Why each output given up by a compute node was, one line each.

        Each line names the compute node and the data flow (``compute-0-1: flow F: gave up ...``).
        """
        return tuple(
            f"{compute.name}: flow {flow}: {why}"
            for compute in self.computes
            for flow, done in compute.flows.items()
            for why in done.undelivered
        )


@dataclass(frozen=True)
class WorkerReport:
    """One line a worker process writes to its launcher: its port, its outcome or its error."""

    port: int | None = None
    outcome: GroupOutcome | None = None
    error: str | None = None
    infrastructure: bool = False
