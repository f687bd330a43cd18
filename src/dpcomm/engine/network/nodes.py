"""The nodes of a deployed round: each role's step of :mod:`dpcomm.protocol.roles`, over links.

A node program schedules the role steps for the one node it is, and moves messages between
nodes over a transport (:mod:`dpcomm.engine.network.transport`); the steps themselves, their
randomness and the query program's hooks are those the simulator calls for all nodes at once.
A coordinator, which never sees data, registers the nodes and makes the plan's decisions.

* **coordinator**: registers every node (its address; a compute node's public key), assigns the
  sources to scramblers (:func:`~dpcomm.protocol.roles.assign_batches`), sends each node its
  part of the plan, and decides which batches commit (:class:`~.commit.BatchCommit`); it
  finalizes each flow once every batch sender committed or was lost.
* **source**: routes its row with the program (:meth:`~dpcomm.protocol.roles.ProgramHooks.route`)
  under the state it knows, applies :func:`~dpcomm.protocol.roles.source_messages` once per
  (source, flow, round), seals its tuple (or a dummy) for the drawn target, and sends it to its
  scrambler (retrying the very same frame until acknowledged), or straight to the targets as one
  batch. Before an iteration it merges the centroids broadcast to it.
* **scrambler**: relays broadcasts to its sources, collects their frames until all arrived or
  the deadline, adds :func:`~dpcomm.protocol.roles.scrambler_dummies` sealed for their targets,
  shuffles (:func:`~dpcomm.protocol.roles.scrambler_shuffle`) and forwards the batch as one unit.
* **compute**: holds each sender's frames (:class:`~.commit.BatchIntake`), and on FINALIZE opens
  the committed ones, discards dummies, computes its output with the program's hook and sends it
  on: to the result node, or broadcast to the next iteration's sources (through its scramblers).
* **result**: merges the outputs (:meth:`~dpcomm.protocol.roles.ProgramHooks.merge`).

Compute nodes never learn which source sent a tuple when scramblers are used; payloads carry the
tuple only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcomm.engine.network.commit import BatchCommit, BatchIntake, batch_digest
from dpcomm.engine.network.faults import faulty
from dpcomm.engine.network.frames import ReplayCache
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.sealing import (
    SealError,
    TargetKeys,
    make_dummy,
    open_payload,
    seal_payload,
    sealed_size,
)
from dpcomm.engine.network.spec import DeploymentError, NodeConfig, RoundSpec
from dpcomm.engine.network.transport import Address, HandshakeError, Link, Transport
from dpcomm.engine.network.wire import (
    DATA_HEADER,
    Channel,
    ChannelClosedError,
    ChannelLimits,
    Op,
    WireStats,
    channel_limits_for,
    peer_frame_quota,
)
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.plan.transform import RoutedFlow, scrambler_group_name
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.codec import CodecError
from dpcomm.queries.program import QueryProgram

#: Concurrent link set-ups per process (keeps listen backlogs from overflowing).
CONNECT_CONCURRENCY = 64
LARGE_ROUND_SOURCES = 2_000
"""Above this many sources a round overlaps its stages on two cores: sources get their plans
(and connect to their scramblers) while the others register, and the coordinator runs in a
process of its own (docs/benchmarks.md: 10,000 sources in 85 s against 103 s; below, both
lengthen a 1,000-source start-up by about 0.8 s for no shorter round)."""
_OUTPUT_HEADER = struct.Struct(">HH")  # wire.OUTPUT_BLOB_HEADER bytes


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as error:
        raise DeploymentError(f"malformed control message: {error}") from error


# --------------------------------------------------------------------------- the plan's routes


def output_routes(spec: RoundSpec, flow: str) -> list[RoutedFlow]:
    """The routed flows that carry the outputs of data flow ``flow``'s targets onwards."""
    plan = spec.public_program.plan
    receiver = plan.flow(flow).receiver
    return [
        routed
        for routed in spec.transformed.flows
        if routed.kind in ("fixed", "broadcast", "broadcast_to_scramblers")
        and plan.flow(routed.origin).sender == receiver
    ]


def incoming_outputs(spec: RoundSpec, flow: str) -> list[tuple[str, RoutedFlow]]:
    """Before sending data flow ``flow``, the outputs its senders receive: (data flow, route)."""
    plan = spec.public_program.plan
    sender = plan.flow(flow).sender
    result = []
    for routed in spec.transformed.flows:
        if routed.kind not in ("broadcast", "broadcast_from_scramblers"):
            continue
        origin = plan.flow(routed.origin)
        if origin.receiver != sender:
            continue
        for data in spec.data_flows:
            if plan.flow(data).receiver == origin.sender:
                result.append((data, routed))
    return result


def stage_of(program: QueryProgram, flow: str) -> int:
    """The stage in which data flow ``flow`` is sent."""
    for stage in range(program.num_stages):
        if flow in program.stage_flows(stage):
            return stage
    raise DeploymentError(f"flow {flow!r} is in no stage")


# --------------------------------------------------------------------------- node context


@dataclass
class NodeContext:
    """What a node shares with the other nodes of its process, and its own state."""

    config: NodeConfig
    transport: Transport
    stats: WireStats
    connect_slots: asyncio.Semaphore
    coordinator_address: Callable[[], Awaitable[Address]]
    on_listening: Callable[[str, Address], None] | None = None
    replay: ReplayCache = field(default_factory=ReplayCache)
    limits: ChannelLimits | None = None

    def __post_init__(self) -> None:
        self.replay.advance(self.spec.round_id)
        self.channel_limits = self.limits or channel_limits_for(self.spec, self.node.role)
        if self.replay.peer_quota is None:
            self.replay.peer_quota = peer_frame_quota(self.spec, self.channel_limits)
        self.loop = asyncio.get_running_loop()
        self.deadline = self.loop.time() + self.spec.round_seconds
        self.randomness = Randomness(self.spec.seed, round=self.spec.round_number)
        self.address: Address | None = None

    @property
    def name(self) -> str:
        """The node's name."""
        return self.config.name

    @property
    def node(self) -> NodeName:
        """The node's typed name."""
        return self.config.node

    @property
    def spec(self) -> RoundSpec:
        """The round's public parameters."""
        return self.config.round

    @property
    def program(self) -> QueryProgram:
        """The public program."""
        return self.spec.public_program

    def remaining(self) -> float:
        """Seconds left before the round's hard deadline (at least a few milliseconds)."""
        return max(0.005, self.deadline - self.loop.time())

    def channel(self, link: Link) -> Channel:
        """A channel over ``link``."""
        return Channel(
            link,
            frame_size=self.spec.frame_size,
            round_id=self.spec.round_id,
            stats=self.stats,
            replay=self.replay,
            limits=self.channel_limits,
        )

    async def connect(self, peer: str, address: Address, *, timeout: float = 10.0) -> Channel:
        """A channel to node ``peer`` at ``address``."""
        async with self.connect_slots:
            link = await self.transport.connect(
                self.name, peer, address, timeout=min(timeout, self.remaining())
            )
        return self.channel(link)

    async def serve(
        self, handler: Callable[[Channel], Awaitable[None]], allowed: Callable[[str], bool]
    ) -> Any:
        """Start this node's listener; remember and report its address."""

        async def on_link(link: Link) -> None:
            # A peer that hangs up or stalls ends its own link, nothing more: counted, not
            # logged (thousands of late sources must not print thousands of tracebacks).
            try:
                await handler(self.channel(link))
            except (ChannelClosedError, TimeoutError, DeploymentError, CodecError):
                self.stats.drops[self.name].add("link_ended")

        listener = await self.transport.listen(
            self.name,
            on_link,
            allowed=allowed,
            drops=self.stats.drops[self.name],
            host=self.config.listen_host,
            port=self.config.listen_port,
        )
        address = list(listener.address)
        if self.config.advertise_host is not None and len(address) == 2:
            address[0] = self.config.advertise_host
        self.address = address
        if self.on_listening is not None:
            self.on_listening(self.name, address)
        return listener

    async def register(self, hello: dict[str, Any]) -> tuple[Channel, dict[str, Any]]:
        """Connect to the coordinator, say HELLO, and wait for this node's part of the plan."""
        address = await asyncio.wait_for(self.coordinator_address(), self.remaining())
        last: Exception | None = None
        while self.remaining() > 0.01:
            try:
                channel = await self.connect(str(COORDINATOR), address)
                break
            except HandshakeError as error:
                last = error
                await asyncio.sleep(0.1)
        else:
            raise DeploymentError(f"{self.name}: cannot reach the coordinator: {last}")
        await channel.send_blob(Op.HELLO, _json(hello), timeout=self.remaining())
        try:
            plan = await channel.expect(Op.PLAN, timeout=self.remaining())
        except (ChannelClosedError, TimeoutError) as error:
            await channel.close()
            raise DeploymentError(f"{self.name}: no plan from the coordinator: {error}") from error
        return channel, _loads(plan.blob)

    async def wait_close(self, channel: Channel) -> None:
        """Wait for the coordinator's CLOSE (or the end of its channel, or the deadline)."""
        with contextlib.suppress(ChannelClosedError, TimeoutError):
            await channel.expect(Op.CLOSE, timeout=self.remaining())
        await channel.close()


def _key(text: str) -> bytes:
    return base64.b64decode(text)


# --------------------------------------------------------------------------- batches


async def forward_batch(
    context: NodeContext,
    flow: str,
    messages: list[tuple[int, bytes, str]],
    targets: list[list[Any]],
) -> bool:
    """Send a batch of data flow ``flow`` as one unit: DATA frames in order, then PREPAREs.

    ``messages`` are (target index, sealed payload, routed flow); ``targets[t]`` is
    ``[name, address]``. Returns True when every target acknowledged the whole batch
    (PREPARED). A target whose link fails is retried with the same frames (same message ids)
    until the deadline.
    """
    spec = context.spec
    ids = [os.urandom(16) for _ in messages]
    indices = [spec.routed_names.index(routed) for _, _, routed in messages]
    by_target: dict[int, list[int]] = {}
    for position, (target, _, routed) in enumerate(messages):
        by_target.setdefault(target, []).append(position)
        context.stats.message(routed, context.name, str(targets[target][0]))
    if not by_target:
        return True

    async def open_channel(target: int) -> Channel:
        name, address = targets[target][0], targets[target][1]
        return await context.connect(str(name), list(address))

    def write(channel: Channel, position: int) -> None:
        target, sealed, _ = messages[position]
        channel.write_data(indices[position], target, sealed, ids[position])

    def prepare(channel: Channel, target: int) -> None:
        positions = by_target[target]
        digest = batch_digest([ids[p] for p in positions])
        payload = {"flow": flow, "count": len(positions), "digest": digest.hex()}
        channel.write_blob(Op.PREPARE, _json(payload))

    order = sorted(by_target)
    channels: dict[int, Channel] = {}
    opened = await asyncio.gather(*(open_channel(t) for t in order), return_exceptions=True)
    for target, outcome in zip(order, opened, strict=True):
        if isinstance(outcome, Channel):
            channels[target] = outcome
    # Frames leave in the batch's (shuffled) order, across the target links.
    for position, (target, _, _) in enumerate(messages):
        if target in channels:
            write(channels[target], position)
    for target in order:
        if target in channels:
            prepare(channels[target], target)

    async def confirm(target: int) -> bool:
        channel = channels.get(target)
        while context.remaining() > 0.05:
            try:
                if channel is None:
                    channel = await open_channel(target)
                    for position in by_target[target]:
                        write(channel, position)
                    prepare(channel, target)
                await channel.drain(timeout=context.remaining())
                got = await channel.expect(Op.PREPARED, Op.REJECT, timeout=context.remaining())
                await channel.close()
                return got.op == Op.PREPARED
            except (ChannelClosedError, HandshakeError, TimeoutError):
                if channel is not None:
                    await channel.close()
                channel = None
                await asyncio.sleep(0.05)
        return False

    return all(await asyncio.gather(*(confirm(t) for t in order)))


async def request_commit(
    context: NodeContext, coordinator: Channel, flow: str, lock: asyncio.Lock
) -> bool:
    """Ask the coordinator to commit this node's batch of ``flow``; True if committed."""
    async with lock:
        try:
            await coordinator.send_blob(
                Op.COMMIT, _json({"flow": flow}), timeout=context.remaining()
            )
            got = await coordinator.expect(Op.COMMITTED, Op.ABORTED, timeout=context.remaining())
        except (ChannelClosedError, TimeoutError):
            return False
    return got.op == Op.COMMITTED


async def send_output(
    context: NodeContext, routed: str, header: bytes, data: bytes, receiver: list[Any]
) -> bool:
    """Send one output (an OUTPUT blob) to ``receiver`` (``[name, address]``) until acknowledged."""
    name, address = str(receiver[0]), list(receiver[1])
    context.stats.message(routed, context.name, name)
    while context.remaining() > 0.05:
        channel: Channel | None = None
        try:
            channel = await context.connect(name, address)
            await channel.send_blob(Op.OUTPUT, header + data, timeout=context.remaining())
            await channel.expect(Op.ACK, timeout=context.remaining())
            return True
        except (ChannelClosedError, HandshakeError, TimeoutError):
            await asyncio.sleep(0.05)
        finally:
            if channel is not None:
                await channel.close()
    return False


def _output_header(spec: RoundSpec, flow: str, target: int) -> bytes:
    return _OUTPUT_HEADER.pack(spec.data_flows.index(flow), target)


def _parse_output(spec: RoundSpec, blob: bytes) -> tuple[str, int, bytes]:
    if len(blob) < _OUTPUT_HEADER.size:
        raise DeploymentError("an output blob without its header")
    index, target = _OUTPUT_HEADER.unpack_from(blob)
    if index >= len(spec.data_flows):
        raise DeploymentError(f"an output of unknown flow {index}")
    return spec.data_flows[index], target, blob[_OUTPUT_HEADER.size :]


# --------------------------------------------------------------------------- coordinator


async def run_coordinator(context: NodeContext) -> dict[str, Any]:
    """Register the nodes, send the plans, decide the commits, finalize every flow, close."""
    spec = context.spec
    program = context.program
    expected = {str(n): n for n in spec.node_names() if n != COORDINATOR}
    sources = program.num_sources
    registry: dict[str, dict[str, Any]] = {}
    channels: dict[str, Channel] = {}
    registered = asyncio.Event()
    infrastructure = {name for name, node in expected.items() if node.role != "source"}
    large = sources > LARGE_ROUND_SOURCES
    infrastructure_ready = asyncio.Event()
    result_done = asyncio.Event()
    changed = asyncio.Event()
    commits: dict[str, BatchCommit] = {}
    assignments = {}
    for flow in spec.data_flows:
        chosen = spec.countermeasure(flow)
        if isinstance(chosen, Scramblers):
            senders = {str(n) for n in spec.scramblers(flow)}
            assignments[flow] = roles.assign_batches(sources, batch_size=chosen.batch_size)
        else:
            senders = {str(NodeName.source(i)) for i in range(sources)}
        commits[flow] = BatchCommit(frozenset(senders))

    def address(name: str) -> list[Any]:
        return [name, registry[name]["address"]]

    def keyed(name: str) -> list[Any]:
        return [name, registry[name]["address"], registry[name]["key"]]

    def plan_for(node: NodeName) -> dict[str, Any]:
        if node.role == "source":
            flows = {}
            for flow in spec.data_flows:
                receivers = [str(n) for n in spec.receivers(flow)]
                item: dict[str, Any]
                if flow in assignments:
                    # Through a scrambler: the targets' keys only, to seal for them.
                    k = int(assignments[flow].scrambler_of_source[node.index])
                    item = {
                        "targets": [[n, None, registry[n]["key"]] for n in receivers],
                        "scrambler": address(str(spec.scramblers(flow)[k])),
                    }
                else:
                    item = {"targets": [keyed(n) for n in receivers]}
                flows[flow] = item
            return {"flows": flows}
        if node.role == "scrambler":
            flow = spec.data_flows[node.group]
            members = assignments[flow].members(node.index)
            return {
                "members": [int(m) for m in members],
                "targets": [keyed(str(n)) for n in spec.receivers(flow)],
            }
        if node.role == "compute":
            routes: dict[str, dict[str, list[Any]]] = {}
            for flow in spec.data_flows:
                if spec.compute_group_of(flow) != node.group:
                    continue
                routes[flow] = {}
                for routed in output_routes(spec, flow):
                    if routed.kind == "fixed":
                        receivers = [str(RESULT)]
                    elif routed.kind == "broadcast_to_scramblers":
                        via = next(
                            f
                            for f in spec.transformed.batches
                            if scrambler_group_name(f) == routed.receiver
                        )
                        receivers = [str(n) for n in spec.scramblers(via)]
                    else:
                        receivers = [str(NodeName.source(i)) for i in range(sources)]
                    routes[flow][routed.name] = [address(n) for n in receivers]
            return {"routes": routes}
        return {}

    def lose(peer: str) -> None:
        for commit in commits.values():
            commit.lose(peer)
        changed.set()

    async def handler(channel: Channel) -> None:
        peer = channel.peer
        try:
            hello = await channel.expect(Op.HELLO, timeout=context.remaining())
            if peer in registry:
                context.stats.drops[context.name].add("duplicate_node")
                return
            registry[peer] = _loads(hello.blob)
            channels[peer] = channel
            if len(registry) == len(expected):
                registered.set()
            if not infrastructure_ready.is_set() and infrastructure <= registry.keys():
                infrastructure_ready.set()
            # A source's plan names only infrastructure nodes: in a large round it goes out as
            # soon as they have registered, so that sources connect to their scramblers (and
            # wait there) while the others still register. The rest wait for every node.
            early = large and expected[peer].role == "source"
            ready = infrastructure_ready if early else registered
            await asyncio.wait_for(ready.wait(), context.remaining())
            plan = plan_for(expected[peer])
            await channel.send_blob(Op.PLAN, _json(plan), timeout=context.remaining())
            while True:
                got = await channel.expect(Op.COMMIT, Op.DONE, timeout=context.remaining())
                if got.op == Op.DONE:
                    if peer == str(RESULT):
                        result_done.set()
                    continue
                flow = str(_loads(got.blob).get("flow"))
                accepted = flow in commits and commits[flow].request(peer)
                reply = Op.COMMITTED if accepted else Op.ABORTED
                await channel.send_blob(reply, timeout=context.remaining())
                changed.set()
        except (ChannelClosedError, TimeoutError, DeploymentError):
            pass
        finally:
            # Only the registered node's own channel ending loses it: a second connection
            # under its name (refused above) must not abort the real node's batch.
            if channels.get(peer) is channel:
                channels.pop(peer, None)
                lose(peer)

    listener = await context.serve(handler, lambda name: name in expected)
    started = context.loop.time()
    finalized: dict[str, list[str]] = {}
    try:
        try:
            await asyncio.wait_for(registered.wait(), context.remaining())
        except TimeoutError:
            missing = sorted(set(expected) - set(registry))
            raise DeploymentError(
                f"{len(missing)} nodes never registered: {', '.join(missing[:5])}"
            ) from None
        planned = context.loop.time()
        planned_at = time.time()  # wall clock: comparable with the launcher's on one machine
        for stage in range(program.num_stages):
            stage_start = context.loop.time()
            limit = min(context.deadline - 2.0, stage_start + 2 * spec.collect_seconds + 10.0)
            for flow in program.stage_flows(stage):
                commit = commits[flow]
                while not commit.decided and context.loop.time() < limit:
                    changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            changed.wait(), max(0.01, limit - context.loop.time())
                        )
                committed = sorted(commit.finalize())
                finalized[flow] = committed
                decision = _json({"flow": flow, "committed": committed})
                for receiver in spec.receivers(flow):
                    channel = channels.get(str(receiver))
                    if channel is None:
                        continue  # a compute node that hung up: its batch is simply not counted
                    with contextlib.suppress(ChannelClosedError, TimeoutError, OSError):
                        await channel.send_blob(Op.FINALIZE, decision, timeout=context.remaining())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(result_done.wait(), context.remaining())
        finished = context.loop.time()
        for channel in list(channels.values()):
            with contextlib.suppress(ChannelClosedError, TimeoutError, OSError):
                await channel.send_blob(Op.CLOSE, timeout=1.0)
    finally:
        listener.close()
    return {
        "role": "coordinator",
        "committed": finalized,
        "lost": {flow: sorted(c.lost) for flow, c in commits.items()},
        "refused": {flow: sorted(c.refused) for flow, c in commits.items() if c.refused},
        "result_received": result_done.is_set(),
        "registration_seconds": planned - started,
        "planned_at": planned_at,
        "round_seconds": finished - planned,
    }


# --------------------------------------------------------------------------- source


async def run_source(context: NodeContext) -> dict[str, Any]:
    """One source: route, R_σ (and flooding) once per flow, seal, send; merge broadcasts."""
    spec = context.spec
    program = context.program
    index = context.node.index
    assert context.config.row is not None
    rows = program.decode_rows([context.config.row])
    inbox: dict[tuple[str, int], Any] = {}
    arrived = asyncio.Event()
    direct_broadcast = any(
        routed.kind == "broadcast"
        for flow in spec.data_flows
        for _, routed in incoming_outputs(spec, flow)
    )

    def accept(data: bytes) -> None:
        flow, target, encoded = _parse_output(spec, data)
        inbox[(flow, target)] = program.decode_output(flow, encoded)
        arrived.set()

    async def handler(channel: Channel) -> None:
        with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError, CodecError):
            got = await channel.expect(Op.OUTPUT, timeout=context.remaining())
            accept(got.blob)
            await channel.send_blob(Op.ACK, timeout=context.remaining())

    listener = None
    if direct_broadcast:
        listener = await context.serve(handler, lambda name: name.startswith("compute-"))
    coordinator: Channel | None = None
    lock = asyncio.Lock()
    outcome: dict[str, Any] = {"role": "source", "index": index, "flows": {}}
    state = program.initial_state()
    try:
        coordinator, plan = await context.register({"address": context.address})
        if all("scrambler" in item for item in plan["flows"].values()):
            # Its scramblers commit for it: the coordinator has nothing more to tell it, and
            # an idle TLS channel per source would only hold memory on both ends.
            await coordinator.close()
            coordinator = None
        for stage in range(program.num_stages):
            flows = program.stage_flows(stage)
            scramblers: dict[str, Channel] = {}
            for flow in flows:
                item = plan["flows"][flow]
                if "scrambler" in item:
                    scramblers[flow] = await _open_scrambler(context, item["scrambler"])
            needed = {
                (data, target)
                for flow in flows
                for data, _ in incoming_outputs(spec, flow)
                for target in range(len(spec.receivers(data)))
            }
            if needed:
                await _gather_outputs(context, needed, inbox, arrived, scramblers, accept)
                state = program.merge(state, stage - 1, {key: inbox[key] for key in needed})
            results = await asyncio.gather(
                *(
                    _send_flow(
                        context,
                        flow,
                        plan["flows"][flow],
                        rows,
                        state,
                        scramblers.get(flow),
                        coordinator,
                        lock,
                    )
                    for flow in flows
                )
            )
            for flow, result in zip(flows, results, strict=True):
                outcome["flows"][flow] = result
            for channel in scramblers.values():
                await channel.close()
    finally:
        if listener is not None:
            listener.close()
        if coordinator is not None:
            await coordinator.close()
    return outcome


async def _open_scrambler(context: NodeContext, item: list[Any]) -> Channel:
    """A channel to the source's scrambler (retried until the deadline)."""
    last: Exception | None = None
    while context.remaining() > 0.05:
        try:
            return await context.connect(str(item[0]), list(item[1]))
        except HandshakeError as error:
            last = error
            await asyncio.sleep(0.05)
    raise DeploymentError(f"{context.name}: cannot reach {item[0]}: {last}")


async def _gather_outputs(
    context: NodeContext,
    needed: set[tuple[str, int]],
    inbox: dict[tuple[str, int], Any],
    arrived: asyncio.Event,
    scramblers: dict[str, Channel],
    accept: Callable[[bytes], None],
) -> None:
    """Wait for the broadcast outputs ``needed`` (relayed by scramblers, or sent directly)."""

    async def relayed(channel: Channel) -> None:
        while not needed <= set(inbox):
            got = await channel.expect(Op.OUTPUT, timeout=context.remaining())
            accept(got.blob)

    if scramblers:
        await asyncio.wait_for(
            asyncio.gather(*(relayed(c) for c in scramblers.values())), context.remaining()
        )
    while not needed <= set(inbox):
        arrived.clear()
        await asyncio.wait_for(arrived.wait(), context.remaining())


async def _send_flow(
    context: NodeContext,
    flow: str,
    item: dict[str, Any],
    rows: Any,
    state: Any,
    scrambler: Channel | None,
    coordinator: Channel | None,
    lock: asyncio.Lock,
) -> dict[str, Any]:
    """The source step of one flow, and its sending.

    ``coordinator`` is None when all of the source's flows go through scramblers.
    """
    spec = context.spec
    program = context.program
    targets = item["targets"]
    chosen = spec.countermeasure(flow)
    truth = np.asarray(program.route(state, flow, rows), dtype=np.int64)
    messages = roles.source_messages(
        truth,
        countermeasure=chosen,
        num_targets=len(targets),
        randomness=context.randomness,
        flow=flow,
        sources=[context.node.index],
    )
    sent = int(messages.sent[0])
    real = bool(messages.is_real[0])
    keys = [_key(t[2]) for t in targets]
    payload_size = spec.payload_size
    if real:
        content = program.tuple_codec(flow).encode(program.carried(flow, rows))[0]
        first = seal_payload(keys[sent], content, payload_size=payload_size)
    else:
        first = make_dummy(keys[sent], payload_size=payload_size)
    result: dict[str, Any] = {"real": real, "target": sent, "status": "failed"}
    routed = spec.transformed.routed_from(flow)
    if scrambler is not None:
        name = routed[0].name  # "<flow> (to scramblers)"
        result["scrambler"] = str(item["scrambler"][0])
        if not real:
            context.stats.dummy(name)
        result["status"] = await _send_to_scrambler(
            context, scrambler, item["scrambler"], name, sent, first
        )
        return result
    # The first message is routed flow <flow>, the flooding dummies <flow> (flooding).
    batch = [(sent, first, routed[0].name)]
    if isinstance(chosen, LocalFlooding) and chosen.num_dummies:
        batch += [
            (int(t), make_dummy(keys[int(t)], payload_size=payload_size), routed[-1].name)
            for t in messages.flooding[0]
        ]
    order = roles.source_send_order(
        len(batch), randomness=context.randomness, flow=flow, source=context.node.index
    )
    addresses = [[t[0], t[1]] for t in targets]
    prepared = await forward_batch(context, flow, [batch[i] for i in order.tolist()], addresses)
    if coordinator is None:
        raise DeploymentError(f"{context.name}: flow {flow} has no coordinator channel")
    committed = prepared and await request_commit(context, coordinator, flow, lock)
    result["status"] = "committed" if committed else "failed"
    return result


async def _send_to_scrambler(
    context: NodeContext, channel: Channel, item: list[Any], routed: str, target: int, sealed: bytes
) -> str:
    """Send the source's frame to its scrambler until acknowledged; the outcome."""
    spec = context.spec
    flow_index = spec.routed_names.index(routed)
    message_id = os.urandom(16)
    context.stats.message(routed, context.name, str(item[0]))
    collect_end = context.loop.time() + spec.collect_seconds
    current: Channel | None = channel
    while context.remaining() > 0.05 and context.loop.time() < collect_end + 1.0:
        try:
            if current is None:
                current = await context.connect(str(item[0]), list(item[1]))
            current.write_data(flow_index, target, sealed, message_id)
            await current.drain(timeout=context.remaining())
            got = await current.expect(Op.ACK, Op.REJECT, timeout=context.remaining())
            return "accepted" if got.op == Op.ACK else "rejected"
        except (HandshakeError, ChannelClosedError, TimeoutError):
            if current is not None and current is not channel:
                await current.close()
            current = None
            await asyncio.sleep(0.05)
    return "failed"


# --------------------------------------------------------------------------- scrambler


async def run_scrambler(context: NodeContext) -> dict[str, Any]:
    """One scrambler: relay broadcasts, collect its batch, add dummies, shuffle, forward, commit."""
    spec = context.spec
    flow = spec.data_flows[context.node.group]
    index = context.node.index
    chosen = spec.countermeasure(flow)
    assert isinstance(chosen, Scramblers)
    routed = spec.transformed.routed_from(flow)
    to_scramblers, scrambled = routed[0].name, routed[1].name
    routed_index = spec.routed_names.index(to_scramblers)
    relays_in = incoming_outputs(spec, flow)
    relay_names = {data: r.name for data, r in relays_in}
    expected_relays = {
        (data, target) for data, _ in relays_in for target in range(len(spec.receivers(data)))
    }
    num_targets = len(spec.receivers(flow))
    blob_size = sealed_size(spec.payload_size)
    drops = context.stats.drops[context.name]
    plan_ready = asyncio.Event()
    relays_done = asyncio.Event()
    full = asyncio.Event()
    members: set[int] = set()
    member_channels: dict[int, Channel] = {}
    relays: dict[tuple[str, int], bytes] = {}
    received: dict[int, tuple[int, bytes, bytes]] = {}
    intake = {"open": True}
    if not expected_relays:
        relays_done.set()

    def push(source: int, channel: Channel, key: tuple[str, int]) -> None:
        context.stats.message(relay_names[key[0]], context.name, str(NodeName.source(source)))
        channel.write_blob(Op.OUTPUT, relays[key])

    async def from_compute(channel: Channel) -> None:
        got = await channel.expect(Op.OUTPUT, timeout=context.remaining())
        data_flow, target, _ = _parse_output(spec, got.blob)
        key = (data_flow, target)
        if key not in expected_relays or key in relays:
            drops.add("unexpected")
            return
        # Stored and pushed to the members connected so far with no await in between: a
        # member that connects later gets every stored relay once, on connecting.
        relays[key] = got.blob
        for source, member in list(member_channels.items()):
            push(source, member, key)
        if expected_relays <= set(relays):
            relays_done.set()
        await channel.send_blob(Op.ACK, timeout=context.remaining())

    async def from_source(channel: Channel, source: int) -> None:
        member_channels[source] = channel
        for key in sorted(relays):
            push(source, channel, key)
        while True:
            got = await channel.receive(timeout=context.remaining())
            if got.op is not None:
                drops.add("unexpected")
                continue
            body = got.frame.body
            flow_at, target = DATA_HEADER.unpack_from(body)
            sealed = body[DATA_HEADER.size :]
            if flow_at != routed_index or target >= num_targets or len(sealed) != blob_size:
                drops.add("malformed_data")
                continue
            known = received.get(source)
            if got.replayed:
                if known is not None and known[2] == got.frame.message_id:
                    await channel.send_blob(Op.ACK, timeout=context.remaining())
                continue
            if not intake["open"]:
                drops.add("late")
                await channel.send_blob(Op.REJECT, timeout=context.remaining())
                continue
            if known is not None:
                drops.add("duplicate_source")
                await channel.send_blob(Op.REJECT, timeout=context.remaining())
                continue
            received[source] = (target, sealed, got.frame.message_id)
            await channel.send_blob(Op.ACK, timeout=context.remaining())
            if len(received) == len(members):
                full.set()

    async def handler(channel: Channel) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(plan_ready.wait(), context.remaining())
        peer = NodeName.parse(channel.peer)
        with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError):
            if peer.role == "compute":
                await from_compute(channel)
            elif peer.role == "source" and peer.index in members:
                try:
                    await from_source(channel, peer.index)
                finally:
                    if member_channels.get(peer.index) is channel:
                        member_channels.pop(peer.index, None)
            else:
                drops.add("unauthorized")

    listener = await context.serve(handler, lambda name: name.startswith(("source-", "compute-")))
    outcome: dict[str, Any] = {"role": "scrambler", "flow": flow, "index": index}
    coordinator: Channel | None = None
    try:
        coordinator, plan = await context.register({"address": context.address})
        members.update(int(m) for m in plan["members"])
        targets = plan["targets"]
        keys = [_key(t[2]) for t in targets]
        plan_ready.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(relays_done.wait(), context.remaining())
        opened = context.loop.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(full.wait(), min(spec.collect_seconds, context.remaining()))
        intake["open"] = False
        collected = context.loop.time()
        batched = sorted(received)
        counts = np.zeros((1, num_targets), dtype=np.int64)
        for source in batched:
            counts[0, received[source][0]] += 1
        dummies = roles.scrambler_dummies(
            counts,
            [len(batched)],
            countermeasure=chosen,
            randomness=context.randomness,
            flow=flow,
            scramblers=[index],
        )[0]
        payload_size = spec.payload_size
        messages = [(received[s][0], received[s][1]) for s in batched]
        for target in range(num_targets):
            messages += [
                (target, make_dummy(keys[target], payload_size=payload_size))
                for _ in range(int(dummies[target]))
            ]
        order = roles.scrambler_shuffle(
            len(messages),
            largest_batch=max(spec.transformed.batches[flow]),
            countermeasure=chosen,
            randomness=context.randomness,
            flow=flow,
            scrambler=index,
        )
        addresses = [[t[0], t[1]] for t in targets]
        prepared = await forward_batch(
            context, flow, [(*messages[i], scrambled) for i in order.tolist()], addresses
        )
        committed = prepared and await request_commit(context, coordinator, flow, asyncio.Lock())
        outcome.update(
            batched=batched,
            members=len(members),
            dummies=int(dummies.sum()),
            committed=committed,
            collect_seconds=collected - opened,
            forward_seconds=context.loop.time() - collected,
        )
        await context.wait_close(coordinator)
    finally:
        listener.close()
        if coordinator is not None:
            await coordinator.close()  # on an error too: the coordinator then counts it lost
    return outcome


# --------------------------------------------------------------------------- compute


async def run_compute(context: NodeContext) -> dict[str, Any]:
    """One compute node: hold batches, compute its outputs from the committed real tuples."""
    spec = context.spec
    program = context.program
    group, index = context.node.group, context.node.index
    mine = [f for f in spec.data_flows if spec.compute_group_of(f) == group]
    keys = TargetKeys.generate()
    private = keys.nacl_private_key()
    blob_size = sealed_size(spec.payload_size)
    drops = context.stats.drops[context.name]
    intakes: dict[str, BatchIntake[tuple[str, bytes]]] = {f: BatchIntake() for f in mine}

    async def handler(channel: Channel) -> None:
        peer = channel.peer
        while True:
            try:
                got = await channel.receive(timeout=context.remaining())
            except (ChannelClosedError, TimeoutError):
                return
            if got.op is None:
                if got.replayed:
                    continue
                body = got.frame.body
                flow_at, target = DATA_HEADER.unpack_from(body)
                sealed = body[DATA_HEADER.size :]
                if flow_at >= len(spec.routed_names) or target != index or len(sealed) != blob_size:
                    drops.add("malformed_data")
                    continue
                routed = spec.transformed.flows[flow_at]
                if routed.origin not in intakes:
                    drops.add("malformed_data")
                    continue
                verdict = intakes[routed.origin].hold(
                    peer, got.frame.message_id, (routed.name, sealed)
                )
                if verdict != "held":
                    drops.add(verdict)
                continue
            if got.op != Op.PREPARE:
                drops.add("unexpected")
                continue
            try:
                request = _loads(got.blob)
                flow, count, digest = (
                    str(request["flow"]),
                    int(request["count"]),
                    bytes.fromhex(request["digest"]),
                )
            except (DeploymentError, KeyError, TypeError, ValueError):
                drops.add("unexpected")
                continue
            if flow in intakes and intakes[flow].prepare(peer, count, digest):
                await channel.send_blob(Op.PREPARED, timeout=context.remaining())
            else:
                drops.add("batch_mismatch")
                await channel.send_blob(Op.REJECT, timeout=context.remaining())

    listener = await context.serve(handler, lambda name: name.startswith(("scrambler-", "source-")))
    outcome: dict[str, Any] = {"role": "compute", "group": group, "index": index, "flows": {}}
    coordinator: Channel | None = None
    reader: asyncio.Future[None] | None = None
    try:
        coordinator, plan = await context.register(
            {"address": context.address, "key": base64.b64encode(keys.public_key).decode()}
        )
        finalized: dict[str, set[str]] = {}
        decided = asyncio.Event()

        async def read_finalize() -> None:
            with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError):
                while len(finalized) < len(mine):
                    got = await coordinator.expect(Op.FINALIZE, timeout=context.remaining())
                    decision = _loads(got.blob)
                    finalized[str(decision["flow"])] = set(decision["committed"])
                    decided.set()

        reader = asyncio.ensure_future(read_finalize())
        state = program.initial_state()
        for stage in range(program.num_stages):
            for flow in program.stage_flows(stage):
                if flow not in mine:
                    continue
                while flow not in finalized and not reader.done():
                    decided.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(decided.wait(), context.remaining())
                    if context.remaining() <= 0.01:
                        break
                committed = finalized.get(flow, set())
                if flow not in finalized:
                    drops.add("no_finalize")
                payloads: list[bytes] = []
                dummies = 0
                counted = set(committed)
                for sender, frames in intakes[flow].held.items():
                    for routed_name, sealed in frames.values():
                        try:
                            content = open_payload(private, sealed, payload_size=spec.payload_size)
                        except SealError:
                            drops.add("seal")
                            continue
                        if content is None:
                            context.stats.dummy(routed_name)
                            dummies += 1
                        elif sender in counted and sender in intakes[flow].prepared:
                            payloads.append(content)
                try:
                    tuples = program.tuple_codec(flow).decode(payloads)
                except CodecError:
                    drops.add("malformed_tuple")
                    tuples = program.tuple_codec(flow).decode([])
                produced = program.target_outputs(
                    state,
                    stage,
                    flow,
                    tuples,
                    np.full(len(payloads), index, dtype=np.int64),
                    [index],
                )
                output = produced[index]
                state = program.merge(state, stage, {(flow, index): output})
                data = program.encode_output(flow, output)
                header = _output_header(spec, flow, index)
                routes = plan["routes"].get(flow, {})
                sends = [
                    send_output(context, routed_name, header, data, receiver)
                    for routed_name, receivers in routes.items()
                    for receiver in receivers
                ]
                delivered = await asyncio.gather(*sends)
                outcome["flows"][flow] = {
                    "tuples": len(payloads),
                    "dummies": dummies,
                    "discarded": intakes[flow].discarded(committed),
                    "outputs_sent": int(sum(delivered)),
                    "outputs": len(sends),
                }
        reader.cancel()
        await context.wait_close(coordinator)
    finally:
        listener.close()
        if reader is not None:
            reader.cancel()
        if coordinator is not None:
            await coordinator.close()
    return outcome


# --------------------------------------------------------------------------- result


async def run_result(context: NodeContext) -> dict[str, Any]:
    """The result node: collect the outputs of the last compute nodes; report them."""
    spec = context.spec
    expected = set()
    for flow in spec.data_flows:
        if any(r.kind == "fixed" for r in output_routes(spec, flow)):
            expected |= {(flow, target) for target in range(len(spec.receivers(flow)))}
    outputs: dict[tuple[str, int], str] = {}
    complete = asyncio.Event()
    if not expected:
        complete.set()

    async def handler(channel: Channel) -> None:
        with contextlib.suppress(ChannelClosedError, TimeoutError, DeploymentError):
            got = await channel.expect(Op.OUTPUT, timeout=context.remaining())
            flow, target, data = _parse_output(spec, got.blob)
            if (flow, target) in expected and (flow, target) not in outputs:
                outputs[(flow, target)] = data.hex()
            await channel.send_blob(Op.ACK, timeout=context.remaining())
            if expected <= set(outputs):
                complete.set()

    listener = await context.serve(handler, lambda name: name.startswith("compute-"))
    coordinator: Channel | None = None
    try:
        coordinator, _ = await context.register({"address": context.address})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(complete.wait(), max(0.01, context.remaining() - 1.0))
        with contextlib.suppress(ChannelClosedError, TimeoutError):
            await coordinator.send_blob(Op.DONE, timeout=context.remaining())
        await context.wait_close(coordinator)
    finally:
        listener.close()
        if coordinator is not None:
            await coordinator.close()
    return {
        "role": "result",
        "outputs": [[flow, target, data] for (flow, target), data in sorted(outputs.items())],
        "missing": [[flow, target] for flow, target in sorted(expected - set(outputs))],
    }


# --------------------------------------------------------------------------- a group of nodes

RUNNERS: dict[str, Callable[[NodeContext], Awaitable[dict[str, Any]]]] = {
    "coordinator": run_coordinator,
    "source": run_source,
    "scrambler": run_scrambler,
    "compute": run_compute,
    "result": run_result,
}


async def run_nodes(
    configs: list[NodeConfig],
    transport: Transport,
    *,
    coordinator_address: Callable[[], Awaitable[Address]],
    on_listening: Callable[[str, Address], None] | None = None,
    crash: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the nodes ``configs`` concurrently in this event loop; their outcomes and the wire.

    Every node uses ``transport``, wrapped with its injected faults (:func:`.faults.faulty`;
    ``crash`` is how a crashing node dies). Returns ``{"nodes": {name: outcome},
    "errors": {name: message}, "wire": ...}``.
    """
    stats = WireStats()
    slots = asyncio.Semaphore(CONNECT_CONCURRENCY)
    contexts = [
        NodeContext(
            config,
            faulty(
                transport,
                config.faults,
                stats=stats,
                collect_seconds=config.round.collect_seconds,
                crash=crash,
            ),
            stats,
            slots,
            coordinator_address,
            on_listening,
        )
        for config in configs
    ]
    results = await asyncio.gather(
        *(RUNNERS[c.node.role](c) for c in contexts), return_exceptions=True
    )
    await _settle(asyncio.get_running_loop())
    outcomes: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for context, result in zip(contexts, results, strict=True):
        if isinstance(result, BaseException):
            errors[context.name] = f"{type(result).__name__}: {result}"
        else:
            outcomes[context.name] = result
    return {"nodes": outcomes, "errors": errors, "wire": stats.as_dict()}


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """Let link handlers finish, then cancel the rest quietly."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    if pending:
        await asyncio.wait(pending, timeout=2.0)
    default = loop.get_exception_handler()

    def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError):
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet)
