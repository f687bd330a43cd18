"""What a deployment adds to its run's report: the wire as measured, and how the round went.

[`wire_report`][] turns the frames and bytes every node counted into a [`WireReport`][]
(per link, channels per node, drops, timings); [`DeploymentDetails`][] is the run's
``details`` (the wire, lost scramblers, left-out sources, missing outputs, node errors), with
[`round_failures`][] saying why a round failed. Values stay as measured until ``to_dict()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm._json import json_ready
from dpcomm.engine.network.frames import split_drops
from dpcomm.engine.network.names import COORDINATOR, NodeName


@dataclass(frozen=True)
class LinkReport:
    """One directed link: what its sender wrote and its receiver read.

    Attributes:
        sender: the sending node's name.
        receiver: the receiving node's name.
        frames: frames the sender wrote (data and control).
        data_frames: sealed data frames among them (the plan's messages).
        bytes: TLS application bytes written.
        frames_received: frames the receiver read.
    """

    sender: str
    receiver: str
    frames: int
    data_frames: int
    bytes: int
    frames_received: int


@dataclass(frozen=True)
class WireReport:
    """What was measured on the wire of a round.

    Attributes:
        frame_size: the one length of every frame (bytes).
        frame_lengths_observed: every frame length seen (one value: ``frame_size``).
        frames: frames written, data and control.
        data_frames: sealed data frames.
        control_frames: ``frames - data_frames``.
        bytes: TLS application bytes written.
        links: every link that carried a frame, sorted by (sender, receiver).
        channels: distinct peers of every node, the coordinator's control channels included.
        max_channels_per_node: the most channels of one node, control channels included.
        max_data_channels_per_node: the most data channels (without the coordinator's).
        mean_data_channels_per_node: their mean over the nodes that have any.
        max_data_channels_by_role: the most data channels of one node, per role.
        dropped: frames or connections dropped, per node and reason.
        attacks: the drops only a misbehaving peer causes, per node and reason.
        overload: the drops of a node out of room, per node and reason.
        dropped_total: every drop.
        timings: seconds of the round's phases (``wall_seconds``, ``round_seconds``, ...).
    """

    frame_size: int
    frame_lengths_observed: tuple[int, ...]
    frames: int
    data_frames: int
    control_frames: int
    bytes: int
    links: tuple[LinkReport, ...]
    channels: Mapping[str, int]
    max_channels_per_node: int
    max_data_channels_per_node: int
    mean_data_channels_per_node: float
    max_data_channels_by_role: Mapping[str, int]
    dropped: Mapping[str, Mapping[str, int]]
    attacks: Mapping[str, Mapping[str, int]]
    overload: Mapping[str, Mapping[str, int]]
    dropped_total: int
    timings: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        """The wire as JSON (the report's ``wire``)."""
        document: dict[str, Any] = json_ready(asdict(self))
        return document


@dataclass(frozen=True)
class DeploymentDetails:
    """What a deployment adds to its run (``Run.details``) and to the run's report.

    Attributes:
        wire: what was measured on the wire.
        lost_scramblers: scramblers whose batch did not commit (they died or were cut off).
        left_out_sources: per data flow, the sources whose tuple was not counted because
            they were late, unreachable, or behind a lost scrambler (flows with none omitted).
        missing_outputs: (flow, target) of every output the result node lacks; ``("*", -1)``
            when the result node itself did not report.
        errors: the error of every node that failed, by node name.
        failures: why the round failed ([`round_failures`][]); empty when it did not.
    """

    wire: WireReport
    lost_scramblers: tuple[str, ...]
    left_out_sources: Mapping[str, tuple[int, ...]]
    missing_outputs: tuple[tuple[str, int], ...]
    errors: Mapping[str, str]
    failures: tuple[str, ...]

    def released(self) -> DeploymentDetails:
        """The details without the round's timings (they may depend on the data).

        Under a noisy release every printed value is a function of the released rows and of
        what the observer sees of the traffic (frames, bytes, links, channels).
        """
        return replace(self, wire=replace(self.wire, timings={}))

    def to_dict(self) -> dict[str, Any]:
        """The details as JSON, merged into the run's report.

        Keys: ``wire``, ``lost_scramblers``, ``left_out_sources``, ``missing_outputs``,
        ``errors``, ``failures``.
        """
        document: dict[str, Any] = json_ready(
            {
                "wire": asdict(self.wire),
                "lost_scramblers": self.lost_scramblers,
                "left_out_sources": self.left_out_sources,
                "missing_outputs": self.missing_outputs,
                "errors": self.errors,
                "failures": self.failures,
            }
        )
        return document


def _peers(links: tuple[LinkReport, ...], *, control: bool) -> dict[str, int]:
    peers: dict[str, set[str]] = {}
    for link in links:
        if not control and str(COORDINATOR) in (link.sender, link.receiver):
            continue
        peers.setdefault(link.sender, set()).add(link.receiver)
        peers.setdefault(link.receiver, set()).add(link.sender)
    return {node: len(others) for node, others in sorted(peers.items())}


def wire_report(
    frame_size: int, merged: Mapping[str, Any], timings: Mapping[str, float]
) -> WireReport:
    """What was measured on the wire: frames and bytes per link, channels, drops, timings.

    ``merged`` holds every node's counters summed: ``sent`` and ``received`` per (sender,
    receiver) link (``[frames, data frames, bytes]`` and frames), the frame ``lengths`` seen
    and the ``drops`` per node and reason.
    """
    keys = set(merged["sent"]) | set(merged["received"])
    links = []
    for sender, receiver in sorted(keys):
        frames, data, size = merged["sent"].get((sender, receiver), [0, 0, 0])
        links.append(
            LinkReport(
                sender=sender,
                receiver=receiver,
                frames=frames,
                data_frames=data,
                bytes=size,
                frames_received=merged["received"].get((sender, receiver), 0),
            )
        )
    all_links = tuple(links)
    channels = _peers(all_links, control=True)
    data_channels = _peers(all_links, control=False)
    by_role: dict[str, int] = {}
    for node, count in data_channels.items():
        role = NodeName.parse(node).role
        by_role[role] = max(by_role.get(role, 0), count)
    data = [c for c in data_channels.values() if c]
    frames = sum(link.frames for link in links)
    data_frames = sum(link.data_frames for link in links)
    drops: Mapping[str, Mapping[str, int]] = merged["drops"]
    split = split_drops(drops)
    return WireReport(
        frame_size=frame_size,
        frame_lengths_observed=tuple(sorted(merged["lengths"])),
        frames=frames,
        data_frames=data_frames,
        control_frames=frames - data_frames,
        bytes=sum(link.bytes for link in links),
        links=all_links,
        channels=channels,
        max_channels_per_node=max(channels.values(), default=0),
        max_data_channels_per_node=max(data, default=0),
        mean_data_channels_per_node=float(np.mean(data)) if data else 0.0,
        max_data_channels_by_role=by_role,
        dropped=drops,
        attacks=split["attacks"],
        overload=split["overload"],
        dropped_total=sum(sum(c.values()) for c in drops.values()),
        timings=dict(timings),
    )


def round_failures(
    *,
    num_sources: int,
    left_out_sources: Mapping[str, tuple[int, ...]],
    missing_outputs: tuple[tuple[str, int], ...],
    errors: Mapping[str, str],
    delivered: Mapping[str, npt.NDArray[np.bool_]],
    max_left_out: float,
    undelivered: Sequence[str] = (),
) -> tuple[str, ...]:
    """Why a round failed, one phrase per reason (empty: it did not).

    A round fails when it aggregated no tuple at all (of a table with rows), when more than
    ``max_left_out`` (a fraction of S) of the sources were left out (absent at registration,
    late, unreachable, or behind a dead scrambler), when the result node lacks an output, when
    a compute node gave up on an output (``undelivered``: why, one line each, the first one
    quoted), or when a node other than a source failed (a failed source is a source left
    out). Node errors start with the phase the node was in
    (`dpcomm.engine.network.node.NodeContext.phase`). The phrases name the
    `dpcomm.engine.network.deploy.NetworkEngine` parameters to change.
    """
    failures = []
    left = set().union(*(set(rows) for rows in left_out_sources.values()))
    if len(left) > max_left_out * num_sources:
        failures.append(
            f"{len(left):,} of {num_sources:,} sources were left out, more than "
            f"max_left_out {max_left_out:g} allows (raise idle_seconds or timeout)"
        )
    if num_sources and delivered and not any(bool(np.any(mask)) for mask in delivered.values()):
        failures.append("the round aggregated no tuple")
    if missing_outputs:
        what = (
            "no result node"
            if missing_outputs[0][1] < 0
            else f"{len(missing_outputs):,} outputs missing"
        )
        failures.append(f"the result is incomplete ({what})")
    if undelivered:
        first = " ".join(undelivered[0].split())[:300]
        failures.append(f"{len(undelivered):,} outputs given up (first: {first})")
    failed = {name: message for name, message in errors.items() if not name.startswith("source-")}
    if failed:
        name, message = next(iter(sorted(failed.items())))
        first = " ".join(str(message).split())[:300]  # one line, whatever the error said
        failures.append(f"{len(failed):,} nodes failed (first: {name}: {first})")
    return tuple(failures)


__all__ = ["DeploymentDetails", "LinkReport", "WireReport", "round_failures", "wire_report"]
