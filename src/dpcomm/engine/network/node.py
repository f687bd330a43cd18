"""What every node of a deployed round shares: its context, registration, and output blobs.

A `NodeContext` is one node's view of the round: its config and the round's public spec
(with the routes every node derives from it, `dpcomm.plan.routes.Routes`), the
transport it talks over, the wire counters of its process, the deadline, and its randomness
(`dpcomm.protocol.randomness.Randomness`: the streams every engine draws from). Its
methods open channels, listen, and register with the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dpcomm.engine.network.frames import DropCounters, ReplayCache
from dpcomm.engine.network.names import COORDINATOR, NodeName
from dpcomm.engine.network.records import DeploymentError, Hello, Peer, decode, encode
from dpcomm.engine.network.spec import NodeConfig, RoundSpec
from dpcomm.engine.network.transport import Address, Endpoint, HandshakeError, Link, Transport
from dpcomm.engine.network.wire import (
    Channel,
    ChannelClosedError,
    ChannelLimits,
    Op,
    WireStats,
)
from dpcomm.protocol.randomness import Randomness
from dpcomm.queries.codec import CodecError
from dpcomm.queries.program import QueryProgram

Plan = TypeVar("Plan")

#: An OUTPUT blob starts with the data flow (its index among the round's) and the target.
#: Its size is the wire's OUTPUT_BLOB_HEADER (a test checks it).
OUTPUT_HEADER = struct.Struct(">HH")

#: The first pause between two attempts to reach a peer, and the longest (seconds).
FIRST_RETRY_PAUSE = 0.05
LONGEST_RETRY_PAUSE = 2.0

#: The coordinator's milestone: every node but the sources registered.
INFRASTRUCTURE_REGISTERED = "infrastructure_registered"

#: What ends one peer's link, not the node: counted, never logged (thousands of late sources
#: must not print thousands of tracebacks).
LINK_ERRORS = (ChannelClosedError, TimeoutError, DeploymentError, CodecError)


@dataclass
class NodeContext:
    """What a node shares with the other nodes of its process, and its own state.

    Besides its fields: the node's ``name`` and typed ``node`` name, the round's public
    parameters ``spec`` and its ``program``, the node's ``drops`` counters, its channel
    limits, its ``randomness`` (the streams every engine draws from) and the round's deadline.
    """

    config: NodeConfig
    transport: Transport
    stats: WireStats
    connect_slots: asyncio.Semaphore
    coordinator_address: Callable[[], Awaitable[Address]]
    on_listening: Callable[[str, Address], None] | None = None
    replay: ReplayCache = field(default_factory=ReplayCache)
    limits: ChannelLimits | None = None
    #: Called with the name of a milestone of the round (``INFRASTRUCTURE_REGISTERED``).
    on_event: Callable[[str], None] | None = None
    #: Link set-ups to the coordinator at once (default: ``connect_slots``). Apart from the
    #: others, so that a source with its plan reaches its scrambler while thousands of
    #: sources of its process still queue to register.
    registration_slots: asyncio.Semaphore | None = None

    def __post_init__(self) -> None:
        self.name: str = self.config.name
        self.node: NodeName = self.config.node
        self.spec: RoundSpec = self.config.round
        self.program: QueryProgram = self.spec.public_program
        self.drops: DropCounters = self.stats.drops[self.name]
        self.replay.advance(self.spec.round_id)
        self.channel_limits = self.limits or self.spec.channel_limits(self.node.role)
        if self.replay.peer_quota is None:
            self.replay.peer_quota = self.spec.peer_frame_quota(self.channel_limits)
        self.loop = asyncio.get_running_loop()
        self.deadline = self.loop.time() + self.spec.round_seconds
        self.randomness = Randomness(self.spec.seed, round=self.spec.round_number)
        self.address: Address | None = None
        #: Where the node is in the round (named in its error if it fails).
        self.phase = "registration"

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

    async def connect(self, peer: Peer, *, timeout: float = 10.0) -> Channel:
        """A channel to ``peer``."""
        if peer.address is None:
            raise DeploymentError(f"{self.name}: no address of {peer.name}")
        slots = self.connect_slots
        if peer.name == str(COORDINATOR) and self.registration_slots is not None:
            slots = self.registration_slots
        async with slots:
            link = await self.transport.connect(
                self.name, peer.name, list(peer.address), timeout=min(timeout, self.remaining())
            )
        return self.channel(link)

    async def connect_retrying(self, peer: Peer) -> Channel:
        """A channel to ``peer``, retried (`Backoff`) until it answers.

        DeploymentError once the peer stayed unreachable for the round's ``idle_seconds``.
        """
        backoff = Backoff(self)
        while True:
            try:
                return await self.connect(peer)
            except HandshakeError as error:
                if backoff.exhausted():
                    raise DeploymentError(
                        f"{self.name}: cannot reach {peer.name} for "
                        f"{backoff.elapsed():.0f} s: {error}"
                    ) from None
            await backoff.pause()

    async def serve(
        self, handler: Callable[[Channel], Awaitable[None]], allowed: Callable[[str], bool]
    ) -> Any:
        """Start this node's listener; remember and report its address.

        A peer that hangs up or stalls ends its own link, nothing more (`LINK_ERRORS`).
        """

        async def on_link(link: Link) -> None:
            try:
                await handler(self.channel(link))
            except LINK_ERRORS:
                self.drops.add("link_ended")

        endpoint = Endpoint(
            self.name, allowed, self.drops, self.config.listen_host, self.config.listen_port
        )
        listener = await self.transport.listen(endpoint, on_link)
        address = list(listener.address)
        if self.config.advertise_host is not None and len(address) == 2:
            address[0] = self.config.advertise_host
        self.address = address
        if self.on_listening is not None:
            self.on_listening(self.name, address)
        return listener

    async def register(self, hello: Hello, plan: type[Plan]) -> tuple[Channel, Plan]:
        """Connect to the coordinator, say HELLO, and wait for this node's part of the plan.

        A link the coordinator closes before it answers (its listener gave the handshake's slot
        to another connection after this side had finished its part: TLS 1.3 verifies the
        client's certificate last) is retried like a refused connection (`Backoff`); a
        HELLO the coordinator did register is refused on a second link, so retrying never
        registers a node twice.
        """
        async with asyncio.timeout(self.remaining()):
            address = await self.coordinator_address()
        coordinator = Peer(str(COORDINATOR), tuple(address))
        backoff = Backoff(self)
        while True:
            channel = await self.connect_retrying(coordinator)
            try:
                await channel.send_blob(Op.HELLO, encode(hello), timeout=self.remaining())
                got = await channel.expect(Op.PLAN, Op.REJECT, timeout=self.remaining())
                break
            except (ChannelClosedError, TimeoutError) as error:
                await channel.close()
                if isinstance(error, TimeoutError) or backoff.exhausted():
                    raise DeploymentError(
                        f"{self.name}: no plan from the coordinator: {error}"
                    ) from error
            await backoff.pause()
        if got.op == Op.REJECT:
            await channel.close()
            why = got.blob.decode(errors="replace")[:200]
            raise DeploymentError(f"{self.name}: the coordinator refused its registration: {why}")
        return channel, decode(got.blob, plan)

    def hello(self) -> Hello:
        """The HELLO of the node: where it listens, and the digest of the round it holds."""
        address = None if self.address is None else tuple(self.address)
        return Hello(address, round_digest=self.spec.digest)

    async def wait_close(self, channel: Channel) -> None:
        """Wait for the coordinator's CLOSE (or the end of its channel, or the deadline)."""
        with contextlib.suppress(ChannelClosedError, TimeoutError):
            await channel.expect(Op.CLOSE, timeout=self.remaining())
        await channel.close()


class Backoff:
    """Pauses between attempts to reach a peer: exponential, with full jitter.

    The n-th pause is drawn uniformly in [0, min(2^n · 50 ms, 2 s)], so that nodes refused at
    once (a listener's backlog full, a slow machine) do not all come back at once. The attempts
    end when nothing succeeded for the round's ``idle_seconds`` (T: the peer counts as gone) or
    at the round's deadline; `progress` restarts that clock. The jitter is timing only:
    no draw of the run depends on it.
    """

    def __init__(self, context: NodeContext) -> None:
        self.context = context
        self.ceiling = FIRST_RETRY_PAUSE
        self.since = context.loop.time()

    def elapsed(self) -> float:
        """Seconds since the last progress (or the first attempt)."""
        return self.context.loop.time() - self.since

    def exhausted(self) -> bool:
        """Whether to give up: no progress for ``idle_seconds``, or the deadline is near."""
        return self.context.remaining() <= 0.05 or self.elapsed() >= self.context.spec.idle_seconds

    def progress(self) -> None:
        """Something succeeded: the clock and the pauses start again."""
        self.ceiling = FIRST_RETRY_PAUSE
        self.since = self.context.loop.time()

    async def pause(self) -> None:
        """Wait before the next attempt."""
        await asyncio.sleep(min(random.uniform(0.0, self.ceiling), self.context.remaining()))
        self.ceiling = min(LONGEST_RETRY_PAUSE, 2.0 * self.ceiling)


def output_header(spec: RoundSpec, flow: str, target: int) -> bytes:
    """The header of an OUTPUT blob of ``target``'s output of data flow ``flow``."""
    return OUTPUT_HEADER.pack(spec.data_flows.index(flow), target)


def parse_output(spec: RoundSpec, blob: bytes) -> tuple[str, int, bytes]:
    """(data flow, target, encoded output) of an OUTPUT blob; DeploymentError if malformed."""
    if len(blob) < OUTPUT_HEADER.size:
        raise DeploymentError("an output blob without its header")
    index, target = OUTPUT_HEADER.unpack_from(blob)
    if index >= len(spec.data_flows):
        raise DeploymentError(f"an output of unknown flow {index}")
    return spec.data_flows[index], target, blob[OUTPUT_HEADER.size :]
