"""The networked runtime: the nodes of one deployed Aggregate round, over mutual TLS 1.3.

Roles (Section 2 and 4 of the paper, with a coordinator that never sees data):

* **coordinator**: registers every node (address; a compute node's public key), assigns
  sources to scramblers with :func:`dpcomm.protocol.assign_scramblers` (independently of the
  data), sends each node its part of the plan, decides which batches are committed, and tells
  the compute nodes (FINALIZE). It is the single commit point: a scrambler's batch counts iff
  the coordinator recorded its COMMIT, which it asks for only once every target holds the
  whole batch. A batch therefore reaches the targets whole or not at all, and at most once.
* **source**: computes its true target from its own row, applies R_σ once per (source, round)
  (:func:`dpcomm.protocol.randomize_targets`), seals the tuple (or a dummy when sampled out)
  for the drawn target and sends it to its scrambler, retrying the same frame until acked.
  Without scramblers it sends straight to the targets (plus d flooding dummies for R_σ^d).
* **scrambler**: collects its n frames (or until the collection deadline), adds d dummies
  sealed for targets drawn by :func:`dpcomm.protocol.scramble`, shuffles
  (:meth:`~dpcomm.protocol.ScrambleResult.shuffled_messages`) and forwards the batch as one
  unit: DATA frames, then PREPARE (count and digest of the message ids) to every target, then
  COMMIT to the coordinator once every target acknowledged.
* **compute**: opens every payload (dummies discarded), holds each sender's frames until the
  coordinator's FINALIZE names the committed senders, aggregates the real tuples with
  :func:`dpcomm.queries.groupby.evaluate_grouping_set` and sends its rows to the result node.
* **result**: unions the compute nodes' rows, in the order of
  :func:`dpcomm.queries.groupby.evaluate`.

Every node is an asyncio coroutine; many may share one process (:func:`run_node_group`), each
with its own certificate and connections.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcomm.engine.network.frames import ReplayCache
from dpcomm.engine.network.pki import NodeCredentials
from dpcomm.engine.network.runtime_spec import (
    COORDINATOR,
    RESULT,
    DeploymentError,
    NodeConfig,
    RoundSpec,
    compute_name,
    decode_tuple,
    encode_tuple,
    parse_name,
    rows_table,
    scrambler_name,
    source_name,
)
from dpcomm.engine.network.runtime_wire import (
    DATA_HEADER,
    Channel,
    ChannelClosedError,
    Connector,
    Op,
    WireStats,
)
from dpcomm.engine.network.sealing import (
    SealError,
    TargetKeys,
    make_dummy,
    open_payload,
    seal_payload,
    sealed_size,
)
from dpcomm.engine.network.tls import HandshakeError, start_tls_server
from dpcomm.protocol import (
    ScramblerAssignment,
    assign_scramblers,
    flood_targets,
    randomize_targets,
    scramble,
)
from dpcomm.queries.groupby import assign_compute_nodes, evaluate_grouping_set, group_ids
from dpcomm.queries.sql import BoundAggregate, bind_sql

#: Concurrent connection set-ups per process (keeps listen backlogs from overflowing).
CONNECT_CONCURRENCY = 64
_COUNT = struct.Struct(">I")
_ROLE_CODES = {"coordinator": 0, "source": 1, "scrambler": 2, "compute": 3}


def _rng(spec: RoundSpec, role: str, *numbers: int) -> np.random.Generator:
    """The generator of one node's draws: from the deployment's seed, or fresh entropy.

    With a seed, a node's draws depend on the seed and its name only, so that a deployment is
    reproducible like a simulation (the round id is random and not part of the key).
    """
    if spec.seed is None:
        return np.random.default_rng()
    key = (_ROLE_CODES[role], *numbers)
    return np.random.default_rng(np.random.SeedSequence(spec.seed, spawn_key=key))


def _digest(message_ids: list[bytes]) -> bytes:
    return hashlib.sha256(b"".join(sorted(message_ids))).digest()


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as error:
        raise DeploymentError(f"malformed control message: {error}") from error


def _key(value: str) -> bytes:
    return base64.b64decode(value)


@dataclass
class NodeContext:
    """What a node shares with the other nodes of its process."""

    config: NodeConfig
    credentials: NodeCredentials
    stats: WireStats
    connect_slots: asyncio.Semaphore
    on_listening: Callable[[str, int], None] | None = None
    local_coordinator: asyncio.Future[int] | None = None
    replay: ReplayCache = field(default_factory=ReplayCache)

    def __post_init__(self) -> None:
        self.replay.advance(self.config.round.round_id)
        self.connector = Connector(self.credentials, self.stats, self.replay)
        self.loop = asyncio.get_running_loop()
        self.deadline = self.loop.time() + self.config.round.round_seconds

    @property
    def name(self) -> str:
        """The node's name."""
        return self.config.name

    @property
    def spec(self) -> RoundSpec:
        """The round's public parameters."""
        return self.config.round

    def remaining(self) -> float:
        """Seconds left before the round's hard deadline (at least a few milliseconds)."""
        return max(0.005, self.deadline - self.loop.time())

    def channel(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> Channel:
        """A server-side channel to ``peer``."""
        return Channel(
            reader,
            writer,
            local=self.name,
            peer=peer,
            frame_size=self.spec.frame_size,
            round_id=self.spec.round_id,
            stats=self.stats,
            replay=self.replay,
        )

    async def connect(self, host: str, port: int, peer: str, *, timeout: float = 10.0) -> Channel:
        """A client channel to ``peer``."""
        async with self.connect_slots:
            return await self.connector.connect(
                host,
                port,
                peer=peer,
                frame_size=self.spec.frame_size,
                round_id=self.spec.round_id,
                timeout=min(timeout, self.remaining()),
            )

    async def serve(
        self, handler: Callable[..., Any], allowed: Callable[[str], bool]
    ) -> asyncio.Server:
        """Start this node's TLS server; report its port."""
        server = await start_tls_server(
            handler,
            host=self.config.listen_host,
            port=self.config.listen_port,
            credentials=self.credentials,
            counters=self.stats.drops[self.name],
            allowed_peers=allowed,
        )
        port = int(server.sockets[0].getsockname()[1])
        self.port = port
        if self.on_listening is not None:
            self.on_listening(self.name, port)
        return server

    @property
    def advertised(self) -> str:
        """The host other nodes connect to."""
        return self.config.advertise_host or self.config.listen_host

    async def register(self, hello: dict[str, Any]) -> tuple[Channel, dict[str, Any]]:
        """Connect to the coordinator, say HELLO, and wait for this node's plan."""
        config = self.config
        port = config.coordinator_port
        if port == 0 and self.local_coordinator is not None:
            # The coordinator runs in this process and has just chosen its port.
            port = await asyncio.wait_for(asyncio.shield(self.local_coordinator), self.remaining())
        last: Exception | None = None
        while self.remaining() > 0.01:
            try:
                channel = await self.connect(config.coordinator_host, port, COORDINATOR)
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


# --------------------------------------------------------------------------- coordinator


async def serve_registered_peer(
    context: NodeContext,
    channel: Channel,
    peer: str,
    *,
    registry: dict[str, dict[str, Any]],
    channels: dict[str, Channel],
    expected: int,
    registered: asyncio.Event,
    result_done: asyncio.Event,
    plan_for: Callable[[str], dict[str, Any]],
    accept_commit: Callable[[str], bool],
    after_commit: Callable[[str], None],
) -> None:
    """A coordinator's conversation with one node (Aggregate and K-means alike).

    HELLO registers the node (a second connection under a registered name is dropped and
    counted); once all ``expected`` nodes have registered it gets its PLAN; then each COMMIT
    is answered COMMITTED or ABORTED as ``accept_commit`` decides, and the result node's DONE
    sets ``result_done``.
    """
    hello = await channel.expect(Op.HELLO, timeout=context.remaining())
    if peer in registry:
        context.stats.drops[context.name].add("duplicate_node")
        return
    registry[peer] = _loads(hello.blob)
    channels[peer] = channel
    if len(registry) == expected:
        registered.set()
    await asyncio.wait_for(registered.wait(), context.remaining())
    await channel.send_blob(Op.PLAN, _json(plan_for(peer)), timeout=context.remaining())
    while True:
        got = await channel.expect(Op.COMMIT, Op.DONE, timeout=context.remaining())
        if got.op == Op.DONE:
            if peer == RESULT:
                result_done.set()
            continue
        accepted = accept_commit(peer)
        reply = Op.COMMITTED if accepted else Op.ABORTED
        await channel.send_blob(reply, timeout=context.remaining())
        after_commit(peer)


async def run_coordinator(context: NodeContext) -> dict[str, Any]:
    """Register the nodes, send the plans, decide the commits, finalize, close the round."""
    spec = context.spec
    expected = {name: role for name, role in spec.node_names() if name != COORDINATOR}
    registry: dict[str, dict[str, Any]] = {}
    channels: dict[str, Channel] = {}
    registered = asyncio.Event()
    decided = asyncio.Event()
    result_done = asyncio.Event()
    finalized = False
    committed: set[str] = set()
    lost: set[str] = set()
    aborted: set[str] = set()
    batch_senders = {n for n, r in expected.items() if r == "scrambler"}
    if any(flow.mode != "scrambler" for flow in spec.flows):
        batch_senders |= {n for n, r in expected.items() if r == "source"}
    rng = _rng(spec, "coordinator")
    assignments: dict[int, ScramblerAssignment] = {}
    for index, flow in enumerate(spec.flows):
        if flow.mode == "scrambler":
            assignment = assign_scramblers(spec.num_sources, batch_size=flow.batch_size, rng=rng)
            if assignment.num_scramblers != flow.num_scramblers:
                raise DeploymentError(f"flow {flow.name}: scrambler count mismatch")
            assignments[index] = assignment

    def check_decided() -> None:
        if batch_senders <= committed | lost:
            decided.set()

    def address(name: str) -> list[Any]:
        info = registry[name]
        return [name, info["host"], info["port"]]

    def targets(flow: int, *, with_address: bool) -> list[list[Any]]:
        listed = []
        for c in range(spec.flows[flow].num_targets):
            name = compute_name(flow, c)
            entry = address(name) if with_address else [name]
            listed.append([*entry, registry[name]["key"]])
        return listed

    def plan_for(name: str) -> dict[str, Any]:
        role, numbers = parse_name(name)
        if role == "source":
            flows = []
            for index, flow in enumerate(spec.flows):
                item: dict[str, Any] = {"mode": flow.mode}
                if flow.mode == "scrambler":
                    k = int(assignments[index].scrambler_of_source[numbers[0]])
                    item["scrambler"] = address(scrambler_name(index, k))
                    item["targets"] = targets(index, with_address=False)
                else:
                    item["targets"] = targets(index, with_address=True)
                flows.append(item)
            return {"flows": flows}
        if role == "scrambler":
            group, k = numbers
            members = assignments[group].members(k)
            return {
                "members": [int(m) for m in members],
                "targets": targets(group, with_address=True),
            }
        if role == "compute":
            return {"result": address(RESULT)}
        return {}

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        nonlocal finalized
        channel = context.channel(reader, writer, peer)

        def accept(name: str) -> bool:
            if name in batch_senders and not finalized and name not in lost:
                committed.add(name)
                return True
            aborted.add(name)
            return False

        try:
            await serve_registered_peer(
                context,
                channel,
                peer,
                registry=registry,
                channels=channels,
                expected=len(expected),
                registered=registered,
                result_done=result_done,
                plan_for=plan_for,
                accept_commit=accept,
                after_commit=lambda _: check_decided(),
            )
        except (ChannelClosedError, TimeoutError, DeploymentError):
            pass
        finally:
            channels.pop(peer, None)
            if peer in batch_senders and peer not in committed and not finalized:
                lost.add(peer)
                check_decided()

    server = await context.serve(handler, lambda name: name in expected)
    started = context.loop.time()
    try:
        try:
            await asyncio.wait_for(registered.wait(), context.remaining())
        except TimeoutError:
            missing = sorted(set(expected) - set(registry))
            raise DeploymentError(
                f"{len(missing)} nodes never registered: {', '.join(missing[:5])}"
            ) from None
        planned = context.loop.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(decided.wait(), max(0.01, context.remaining() - 2.0))
        finalized = True
        undecided = batch_senders - committed - lost
        lost |= undecided
        decision = _json({"committed": sorted(committed)})
        for name, channel in list(channels.items()):
            if expected.get(name) == "compute":
                # A compute node that hung up is told nothing; its batch simply is not counted.
                with contextlib.suppress(ChannelClosedError, TimeoutError, OSError, AttributeError):
                    await channel.send_blob(Op.FINALIZE, decision, timeout=context.remaining())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(result_done.wait(), context.remaining())
        finished = context.loop.time()
        for channel in list(channels.values()):
            # A peer may have hung up already (its transport is gone): nothing to tell it.
            with contextlib.suppress(ChannelClosedError, TimeoutError, OSError, AttributeError):
                await channel.send_blob(Op.CLOSE, timeout=1.0)
    finally:
        server.close()
    return {
        "role": "coordinator",
        "committed": sorted(committed),
        "lost": sorted(n for n in lost if expected.get(n) == "scrambler"),
        "lost_sources": sorted(n for n in lost if expected.get(n) == "source"),
        "aborted": sorted(aborted),
        "result_received": result_done.is_set(),
        "registration_seconds": planned - started,
        "round_seconds": finished - planned,
    }


# --------------------------------------------------------------------------- batches


async def forward_batch(
    context: NodeContext,
    messages: list[tuple[int, bytes]],
    targets: list[list[Any]],
    *,
    crash: bool = False,
    labels: list[int] | None = None,
) -> bool:
    """Send a batch as one unit: DATA frames in the given order, then PREPARE to each target.

    Returns True when every target acknowledged the whole batch (PREPARED). A target whose
    connection fails is retried with the same frames (same message ids) until the deadline.
    With ``crash`` the process dies half-way (fault injection). A DATA frame's header names
    the target's index within its flow, or ``labels[position]`` when labels are given.
    """
    ids = [os.urandom(16) for _ in messages]
    by_target: dict[int, list[int]] = {}
    for position, (target, _) in enumerate(messages):
        by_target.setdefault(target, []).append(position)
    if not by_target:
        return True

    async def open_channel(target: int) -> Channel:
        name, host, port = targets[target][:3]
        return await context.connect(host, int(port), name)

    def label(target: int, position: int) -> int:
        return header[target] if labels is None else labels[position]

    def write(channel: Channel, target: int, positions: list[int]) -> None:
        for position in positions:
            channel.write_data(label(target, position), messages[position][1], ids[position])
        digest = _digest([ids[p] for p in positions])
        channel.write_blob(Op.PREPARE, _COUNT.pack(len(positions)) + digest)

    # A DATA frame names the compute node's index within its flow.
    header = {t: parse_name(targets[t][0])[1][-1] for t in by_target}
    order = sorted(by_target)
    channels: dict[int, Channel] = {}
    results = await asyncio.gather(*(open_channel(t) for t in order), return_exceptions=True)
    for target, outcome in zip(order, results, strict=True):
        if isinstance(outcome, Channel):
            channels[target] = outcome
    if crash:
        half = order[: max(1, len(order) // 2)]
        for position, (target, _) in enumerate(messages):
            if target in channels and (target in half or position % 2 == 0):
                channels[target].write_data(
                    label(target, position), messages[position][1], ids[position]
                )
        for target in half:
            if target in channels:
                positions = by_target[target]
                digest = _digest([ids[p] for p in positions])
                channels[target].write_blob(Op.PREPARE, _COUNT.pack(len(positions)) + digest)
        for channel in channels.values():
            with contextlib.suppress(ChannelClosedError, TimeoutError):
                await channel.drain(timeout=2.0)
        await asyncio.sleep(0.3)
        os._exit(3)
    # Frames leave in the shuffled order, across the target connections.
    for position, (target, _) in enumerate(messages):
        if target in channels:
            channels[target].write_data(
                label(target, position), messages[position][1], ids[position]
            )
    for target in order:
        if target in channels:
            positions = by_target[target]
            digest = _digest([ids[p] for p in positions])
            channels[target].write_blob(Op.PREPARE, _COUNT.pack(len(positions)) + digest)

    async def confirm(target: int) -> bool:
        channel = channels.get(target)
        while context.remaining() > 0.05:
            try:
                if channel is None:
                    channel = await open_channel(target)
                    write(channel, target, by_target[target])
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

    confirmed = await asyncio.gather(*(confirm(t) for t in order))
    return all(confirmed)


async def commit(context: NodeContext, coordinator: Channel) -> bool:
    """Ask the coordinator to commit this node's batch; True if committed."""
    try:
        await coordinator.send_blob(Op.COMMIT, timeout=context.remaining())
        got = await coordinator.expect(Op.COMMITTED, Op.ABORTED, timeout=context.remaining())
    except (ChannelClosedError, TimeoutError):
        return False
    return got.op == Op.COMMITTED


# --------------------------------------------------------------------------- source


def true_target(spec: RoundSpec, flow: int, row: dict[str, Any]) -> int:
    """The compute node of the source's own key (the plan's public hash of the key)."""
    columns = spec.flows[flow].columns
    if not columns:
        return 0
    table = rows_table(spec, [row])
    nodes = assign_compute_nodes(table, columns, num_compute_nodes=spec.flows[flow].num_targets)
    return int(nodes[0])


async def _unauthenticated_attempt(context: NodeContext, host: str, port: int) -> None:
    """Fault injection: a TLS client without a certificate (the server must refuse it)."""
    insecure = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with contextlib.suppress(Exception):
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=insecure), 5.0
        )
        writer.write(os.urandom(context.spec.frame_size))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.read(1), 2.0)
        writer.close()


async def _send_to_scrambler(
    context: NodeContext, flow: int, item: dict[str, Any], target: int, sealed: bytes
) -> str:
    """Send the source's frame to its scrambler until acknowledged; the outcome."""
    spec = context.spec
    faults = context.config.faults
    name, host, port = item["scrambler"]
    message_id = os.urandom(16)
    collect_end = context.loop.time() + spec.collect_seconds
    if faults.late:
        await asyncio.sleep(spec.collect_seconds + 0.5)
        collect_end = context.loop.time() + 1.0
    status = "failed"
    while context.loop.time() < collect_end:
        channel: Channel | None = None
        try:
            channel = await context.connect(host, int(port), name)
            sent = channel.write_data(target, sealed, message_id)
            await channel.drain(timeout=context.remaining())
            got = await channel.expect(
                Op.ACK, Op.REJECT, timeout=max(0.05, collect_end - context.loop.time())
            )
            status = "accepted" if got.op == Op.ACK else "rejected"
            if faults.replay:
                channel.write_raw(sent, data_frame=True)
            if faults.malformed:
                channel.write_raw(os.urandom(spec.frame_size))
            if faults.replay or faults.malformed:
                await channel.drain(timeout=context.remaining())
                with contextlib.suppress(ChannelClosedError, TimeoutError):
                    await channel.expect(Op.ACK, timeout=0.5)
            break
        except (HandshakeError, ChannelClosedError, TimeoutError):
            await asyncio.sleep(0.05)
        finally:
            if channel is not None:
                await channel.close()
    if faults.unauthenticated:
        await _unauthenticated_attempt(context, host, int(port))
    return status


async def run_source(context: NodeContext) -> dict[str, Any]:
    """One source: R_σ once per round, seal, send through its scrambler (or directly)."""
    spec = context.spec
    _, (index,) = parse_name(context.name)
    row = context.config.row or {}
    coordinator, plan = await context.register({"host": None, "port": 0})
    rng = _rng(spec, "source", index)
    outcome: dict[str, Any] = {"role": "source", "index": index, "flows": []}
    direct: list[tuple[int, bytes]] = []
    direct_targets: list[list[Any]] = []
    try:
        tasks = []
        for flow, item in enumerate(plan["flows"]):
            settings = spec.flows[flow]
            keys = [_key(t[-1]) for t in item["targets"]]
            truth = true_target(spec, flow, row)
            # R_σ, drawn once per (source, round): every retry resends this very frame.
            drawn = randomize_targets(
                np.array([truth], dtype=np.int64),
                num_targets=settings.num_targets,
                sampling_rate=settings.sampling_rate if settings.mode != "direct" else 0.0,
                rng=rng,
            )
            target = int(drawn.sent[0])
            if bool(drawn.is_real[0]):
                sealed = seal_payload(
                    keys[target],
                    encode_tuple(spec, flow, index, row),
                    payload_size=spec.payload_size,
                )
            else:
                sealed = make_dummy(keys[target], payload_size=spec.payload_size)
            outcome["flows"].append({"real": bool(drawn.is_real[0]), "status": "pending"})
            if item["mode"] == "scrambler":
                tasks.append((flow, _send_to_scrambler(context, flow, item, target, sealed)))
                continue
            batch = [(target, sealed)]
            if item["mode"] == "local" and settings.num_dummies:
                flooded = flood_targets(
                    drawn.sent,
                    num_targets=settings.num_targets,
                    num_dummies=settings.num_dummies,
                    rng=rng,
                )
                batch += [
                    (int(t), make_dummy(keys[int(t)], payload_size=spec.payload_size))
                    for t in flooded[0]
                ]
            order = rng.permutation(len(batch))
            # One batch per source across its direct flows; targets are per flow.
            offset = len(direct_targets)
            direct_targets += list(item["targets"])
            direct += [(offset + batch[i][0], batch[i][1]) for i in order]
            outcome["flows"][-1]["status"] = "direct"
        if tasks:
            statuses = await asyncio.gather(*(task for _, task in tasks))
            for (flow, _), status in zip(tasks, statuses, strict=True):
                outcome["flows"][flow]["status"] = status
        if direct_targets:
            prepared = await forward_batch(context, direct, direct_targets)
            done = prepared and await commit(context, coordinator)
            for item in outcome["flows"]:
                if item["status"] == "direct":
                    item["status"] = "accepted" if done else "failed"
    finally:
        await coordinator.close()
    return outcome


# --------------------------------------------------------------------------- scrambler


async def receive_source_frames(
    context: NodeContext,
    channel: Channel,
    source: int,
    *,
    num_targets: int,
    received: dict[int, tuple[int, bytes, bytes]],
    intake: dict[str, bool],
    full: asyncio.Event,
    num_members: int,
) -> None:
    """A scrambler's intake of one source's DATA frame: ack it once, reject late or repeated.

    ``received`` maps each source to (target, sealed payload, message id); ``full`` is set when
    all ``num_members`` sources are in. A retried frame (same message id) is acked again.
    """
    drops = context.stats.drops[context.name]
    blob_size = sealed_size(context.spec.payload_size)
    while True:
        try:
            got = await channel.receive(timeout=context.remaining())
        except (ChannelClosedError, TimeoutError):
            return
        if got.op is not None:
            drops.add("unexpected")
            continue
        body = got.frame.body
        (target,) = DATA_HEADER.unpack_from(body)
        sealed = body[DATA_HEADER.size :]
        if target >= num_targets or len(sealed) != blob_size:
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
        if len(received) == num_members:
            full.set()


def build_batch(
    context: NodeContext,
    received: dict[int, tuple[int, bytes, bytes]],
    keys: list[bytes],
    *,
    num_dummies: int,
    capped: bool,
    rng: np.random.Generator,
) -> tuple[list[int], list[tuple[int, bytes]]]:
    """A scrambler's batch: its sources' frames plus d dummies, shuffled (A_σ^{k,d}).

    Returns the sorted sources received and the (target, sealed payload) messages in order.
    """
    spec = context.spec
    sources = sorted(received)
    if sources:
        sent = np.array([received[s][0] for s in sources], dtype=np.int64)
        assignment = ScramblerAssignment.from_scrambler_of_source(np.zeros(len(sources), int))
        result = scramble(
            sent,
            assignment,
            num_targets=len(keys),
            num_dummies=num_dummies,
            capped=capped,
            rng=rng,
        )
        out_targets, out_sources = result.shuffled_messages(0, rng=rng)
    else:
        counts = rng.multinomial(num_dummies, np.full(len(keys), 1.0 / len(keys)))
        out_targets = rng.permutation(np.repeat(np.arange(len(keys)), counts))
        out_sources = np.full(len(out_targets), -1, dtype=np.int64)
    batch = []
    for target, source in zip(out_targets.tolist(), out_sources.tolist(), strict=True):
        if source >= 0:
            batch.append((target, received[sources[source]][1]))
        else:
            batch.append((target, make_dummy(keys[target], payload_size=spec.payload_size)))
    return sources, batch


async def run_scrambler(context: NodeContext) -> dict[str, Any]:
    """One scrambler: collect n frames, add d dummies, shuffle, forward as one batch, commit."""
    spec = context.spec
    _, (flow, index) = parse_name(context.name)
    settings = spec.flows[flow]
    plan_ready = asyncio.Event()
    full = asyncio.Event()
    members: set[int] = set()
    received: dict[int, tuple[int, bytes, bytes]] = {}
    intake = {"open": True}
    drops = context.stats.drops[context.name]

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(plan_ready.wait(), context.remaining())
        _, (source,) = parse_name(peer)
        if source not in members:
            drops.add("unauthorized")
            return
        channel = context.channel(reader, writer, peer)
        await receive_source_frames(
            context,
            channel,
            source,
            num_targets=settings.num_targets,
            received=received,
            intake=intake,
            full=full,
            num_members=len(members),
        )

    server = await context.serve(handler, lambda name: name.startswith("source-"))
    outcome: dict[str, Any] = {"role": "scrambler", "flow": flow, "index": index}
    try:
        coordinator, plan = await context.register(
            {"host": context.advertised, "port": context.port}
        )
        members.update(int(m) for m in plan["members"])
        targets = plan["targets"]
        keys = [_key(t[-1]) for t in targets]
        plan_ready.set()
        planned = context.loop.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(full.wait(), min(spec.collect_seconds, context.remaining()))
        intake["open"] = False
        collected = context.loop.time()
        sources, batch = build_batch(
            context,
            received,
            keys,
            num_dummies=settings.num_dummies,
            capped=settings.capped,
            rng=_rng(spec, "scrambler", flow, index),
        )
        prepared = await forward_batch(
            context, batch, targets, crash=context.config.faults.crash_mid_forward
        )
        committed = prepared and await commit(context, coordinator)
        outcome.update(
            collect_seconds=collected - planned,
            forward_seconds=context.loop.time() - collected,
            received=len(sources),
            members=len(members),
            forwarded=len(batch),
            dummies=len(batch) - len(sources),
            committed=committed,
        )
        await context.wait_close(coordinator)
    finally:
        server.close()
    return outcome


# --------------------------------------------------------------------------- compute


_BOUND: dict[tuple[str, str], BoundAggregate] = {}


def bound_query(spec: RoundSpec) -> BoundAggregate:
    """The round's query bound to its schema (cached per process)."""
    key = (spec.sql, repr(spec.schema))
    if key not in _BOUND:
        _BOUND[key] = bind_sql(spec.sql, rows_table(spec, []))
    return _BOUND[key]


def batch_receiver(
    context: NodeContext,
    index: int,
    keys: TargetKeys,
    pending: dict[str, dict[bytes, bytes | None]],
    prepared: set[str],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter, str], Any]:
    """A compute node's connection handler: open and hold each sender's frames until PREPARE.

    ``pending[sender]`` maps message ids to opened payloads (None for a dummy); a sender is
    added to ``prepared`` once its PREPARE matches the count and digest of what arrived.
    """
    spec = context.spec
    private = keys.nacl_private_key()
    drops = context.stats.drops[context.name]
    blob_size = sealed_size(spec.payload_size)

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        channel = context.channel(reader, writer, peer)
        held = pending.setdefault(peer, {})
        while True:
            try:
                got = await channel.receive(timeout=context.remaining())
            except (ChannelClosedError, TimeoutError):
                return
            if got.op is None:
                if got.replayed:
                    continue
                if peer in prepared:
                    drops.add("after_prepare")
                    continue
                body = got.frame.body
                (target,) = DATA_HEADER.unpack_from(body)
                sealed = body[DATA_HEADER.size :]
                if target != index or len(sealed) != blob_size:
                    drops.add("malformed_data")
                    continue
                try:
                    held[got.frame.message_id] = open_payload(
                        private, sealed, payload_size=spec.payload_size
                    )
                except SealError:
                    drops.add("seal")
                continue
            if got.op != Op.PREPARE or len(got.blob) != _COUNT.size + 32:
                drops.add("unexpected")
                continue
            (count,) = _COUNT.unpack_from(got.blob)
            if count == len(held) and got.blob[_COUNT.size :] == _digest(list(held)):
                prepared.add(peer)
                await channel.send_blob(Op.PREPARED, timeout=context.remaining())
            else:
                drops.add("batch_mismatch")
                await channel.send_blob(Op.REJECT, timeout=context.remaining())

    return handler


async def send_partial(context: NodeContext, address: list[Any], partial: Any) -> bool:
    """Send a compute node's partial result (a RESULT blob) until acknowledged or the deadline."""
    name, host, port = address
    while context.remaining() > 0.05:
        channel: Channel | None = None
        try:
            channel = await context.connect(host, int(port), name)
            await channel.send_blob(Op.RESULT, _json(partial), timeout=context.remaining())
            await channel.expect(Op.ACK, timeout=context.remaining())
            return True
        except (ChannelClosedError, HandshakeError, TimeoutError):
            await asyncio.sleep(0.05)
        finally:
            if channel is not None:
                await channel.close()
    return False


async def run_compute(context: NodeContext) -> dict[str, Any]:
    """One compute node: hold batches, aggregate the committed real tuples, report the rows."""
    spec = context.spec
    _, (flow, index) = parse_name(context.name)
    keys = TargetKeys.generate()
    pending: dict[str, dict[bytes, bytes | None]] = {}
    prepared: set[str] = set()
    drops = context.stats.drops[context.name]
    handler = batch_receiver(context, index, keys, pending, prepared)

    def allowed(name: str) -> bool:
        return name.startswith((f"scrambler-{flow}-", "source-"))

    server = await context.serve(handler, allowed)
    try:
        coordinator, plan = await context.register(
            {
                "host": context.advertised,
                "port": context.port,
                "key": base64.b64encode(keys.public_key).decode(),
            }
        )
        try:
            final = await coordinator.expect(Op.FINALIZE, timeout=context.remaining())
            committed = set(_loads(final.blob)["committed"])
        except (ChannelClosedError, TimeoutError):
            committed = set()
            drops.add("no_finalize")
        rows: list[dict[str, Any]] = []
        row_ids: list[int] = []
        seen: set[int] = set()
        senders = sorted(committed & prepared)
        for sender in senders:
            for payload in pending[sender].values():
                if payload is None:
                    continue
                try:
                    row_index, tuple_flow, values = decode_tuple(spec, payload)
                except DeploymentError:
                    drops.add("malformed_tuple")
                    continue
                if tuple_flow != flow or row_index in seen:
                    drops.add("duplicate_tuple" if row_index in seen else "wrong_flow")
                    continue
                seen.add(row_index)
                row_ids.append(row_index)
                rows.append(values)
        table = rows_table(spec, rows)
        everything = np.ones(table.num_rows, dtype=bool)
        result = evaluate_grouping_set(bound_query(spec), table, flow, everything)
        columns = spec.flows[flow].columns
        if columns:
            _, key_table = group_ids(table, columns, everything)
            keys_out = (
                [
                    list(k)
                    for k in zip(*(_python(key_table.column(c)) for c in columns), strict=True)
                ]
                if key_table.num_rows
                else []
            )
        else:
            keys_out = [[] for _ in result]
        partial = {"flow": flow, "index": index, "rows": result, "keys": keys_out}
        sent = await send_partial(context, plan["result"], partial)
        await context.wait_close(coordinator)
    finally:
        server.close()
    return {
        "role": "compute",
        "flow": flow,
        "index": index,
        "delivered": sorted(row_ids),
        "batches": senders,
        "held_uncommitted": sorted(set(pending) - set(senders)),
        "result_sent": sent,
    }


def _python(column: Any) -> list[Any]:
    values: list[Any] = column.values.tolist()
    for position in np.flatnonzero(column.is_null).tolist():
        values[position] = None
    return values


# --------------------------------------------------------------------------- result


def _sort_key(key: list[Any]) -> tuple[Any, ...]:
    return tuple((value is None, 0 if value is None else value) for value in key)


async def run_result(context: NodeContext) -> dict[str, Any]:
    """The result node: collect every compute node's rows and assemble the result."""
    spec = context.spec
    expected = {
        compute_name(f, c) for f, flow in enumerate(spec.flows) for c in range(flow.num_targets)
    }
    partials: dict[str, dict[str, Any]] = {}
    complete = asyncio.Event()

    async def handler(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        channel = context.channel(reader, writer, peer)
        try:
            got = await channel.expect(Op.RESULT, timeout=context.remaining())
        except (ChannelClosedError, TimeoutError):
            return
        if peer not in partials:
            partials[peer] = _loads(got.blob)
        await channel.send_blob(Op.ACK, timeout=context.remaining())
        if set(partials) >= expected:
            complete.set()

    server = await context.serve(handler, lambda name: name in expected)
    try:
        coordinator, _ = await context.register({"host": context.advertised, "port": context.port})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(complete.wait(), max(0.01, context.remaining() - 1.0))
        rows: list[dict[str, Any]] = []
        for f, flow in enumerate(spec.flows):
            keyed = []
            for c in range(flow.num_targets):
                partial = partials.get(compute_name(f, c))
                if partial is None:
                    continue
                keyed += list(zip(partial["keys"], partial["rows"], strict=True))
            keyed.sort(key=lambda item: _sort_key(item[0]))
            rows += [row for _, row in keyed]
        with contextlib.suppress(ChannelClosedError, TimeoutError):
            await coordinator.send_blob(Op.DONE, timeout=context.remaining())
        await context.wait_close(coordinator)
    finally:
        server.close()
    return {
        "role": "result",
        "result": rows,
        "missing_partials": sorted(expected - set(partials)),
    }


# --------------------------------------------------------------------------- processes

_RUNNERS = {
    "coordinator": run_coordinator,
    "source": run_source,
    "scrambler": run_scrambler,
    "compute": run_compute,
    "result": run_result,
}


async def run_nodes(
    configs: list[NodeConfig],
    credentials: dict[str, NodeCredentials],
    *,
    on_listening: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Run the nodes ``configs`` concurrently in this event loop; their outcomes and the wire.

    Returns ``{"nodes": {name: outcome}, "errors": {name: message}, "wire": ...}``.
    """
    stats = WireStats()
    slots = asyncio.Semaphore(CONNECT_CONCURRENCY)
    loop = asyncio.get_running_loop()
    coordinator_port: asyncio.Future[int] | None = None
    if any(config.role == "coordinator" for config in configs):
        coordinator_port = loop.create_future()

    def listening(name: str, port: int) -> None:
        if name == COORDINATOR and coordinator_port is not None and not coordinator_port.done():
            coordinator_port.set_result(port)
        if on_listening is not None:
            on_listening(name, port)

    contexts = [
        NodeContext(config, credentials[config.name], stats, slots, listening, coordinator_port)
        for config in configs
    ]
    runners: dict[str, Callable[[NodeContext], Any]] = dict(_RUNNERS)
    if any(config.round.kind == "kmeans" for config in configs):
        from dpcomm.engine.network.runtime_kmeans import KMEANS_RUNNERS

        runners = dict(KMEANS_RUNNERS)
    results = await asyncio.gather(
        *(runners[c.config.role](c) for c in contexts), return_exceptions=True
    )
    await _settle(loop)
    outcomes: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for context, result in zip(contexts, results, strict=True):
        if isinstance(result, BaseException):
            errors[context.name] = f"{type(result).__name__}: {result}"
        else:
            outcomes[context.name] = result
    return {"nodes": outcomes, "errors": errors, "wire": stats.as_dict()}


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """Let connection handlers finish, then cancel the rest quietly."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    if pending:
        await asyncio.wait(pending, timeout=2.0)
    # Cancelled server-side handlers make asyncio's stream callback log a CancelledError.
    default = loop.get_exception_handler()

    def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError):
            return
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet)


def run_node_group(
    configs: list[NodeConfig],
    credentials: dict[str, NodeCredentials],
    *,
    on_listening: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """:func:`run_nodes` in a fresh event loop (one call per OS process)."""
    return asyncio.run(run_nodes(configs, credentials, on_listening=on_listening))


__all__ = [
    "NodeContext",
    "batch_receiver",
    "bound_query",
    "build_batch",
    "commit",
    "forward_batch",
    "receive_source_frames",
    "run_compute",
    "run_coordinator",
    "run_node_group",
    "run_nodes",
    "run_result",
    "run_scrambler",
    "run_source",
    "send_partial",
    "source_name",
    "true_target",
]
