"""Denial of service by one peer (issue 11, item 3): each attack, on loopback, bounded in count.

Every test runs a listener of :class:`TlsTransport` (mutual TLS 1.3) whose handler reads frames
through a :class:`Channel`, as a node does, then shows that an honest peer is still served
while the attack ran, and that the attack was counted as one (not as an overload).
"""

import asyncio
import contextlib
import logging
import ssl
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network import (
    CertificateAuthority,
    DropCounters,
    Frame,
    FrameKind,
    HandshakeError,
    ReplayCache,
    TlsTransport,
    frame_size_for,
    issue_many,
    new_message_id,
    nodes,
    sealed_size,
)
from dpcomm.engine.network.deploy import node_configs
from dpcomm.engine.network.frames import ATTACK_REASONS, split_drops
from dpcomm.engine.network.nodes import run_nodes
from dpcomm.engine.network.records import ResultOutcome, ResultPlan
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.engine.network.tls import ConnectionLimits
from dpcomm.engine.network.transport import Endpoint
from dpcomm.engine.network.wire import (
    BLOB_HEADER,
    Channel,
    ChannelClosedError,
    ChannelLimits,
    Op,
    WireStats,
)
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram

HOST = "127.0.0.1"
SERVER = "scrambler-(A)-3"
ATTACKER = "source-17"
HONEST = "source-18"
FRAME_SIZE = frame_size_for(sealed_size(64) + 4)
ROUND = 7


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    authority = CertificateAuthority.create(root / "ca")
    return issue_many(authority, [SERVER, ATTACKER, HONEST], root / "nodes")


class Node:
    """A listener that reads blobs and data frames through channels and acknowledges blobs."""

    def __init__(self, pki, *, replay=None, limits=None, connections=None):
        self.transport = TlsTransport(pki, limits=connections)
        self.stats = WireStats()
        self.replay = replay if replay is not None else ReplayCache()
        self.replay.advance(ROUND)
        self.limits = limits
        self.blobs: dict[str, list[bytes]] = {}
        self.data: dict[str, int] = {}

    @property
    def drops(self) -> DropCounters:
        return self.stats.drops[SERVER]

    async def handle(self, link):
        channel = Channel(
            link,
            frame_size=FRAME_SIZE,
            round_id=ROUND,
            stats=self.stats,
            replay=self.replay,
            limits=self.limits,
        )
        with contextlib.suppress(ChannelClosedError, TimeoutError):
            while True:
                got = await channel.receive(timeout=10.0)
                if got.op is None:
                    self.data[link.peer] = self.data.get(link.peer, 0) + 1
                    continue
                self.blobs.setdefault(link.peer, []).append(got.blob)
                await channel.send_blob(Op.ACK, timeout=5.0)

    async def __aenter__(self):
        allowed = (ATTACKER, HONEST)
        endpoint = Endpoint(SERVER, lambda name: name in allowed, self.drops, HOST, 0)
        self.listener = await self.transport.listen(endpoint, self.handle)
        self.address = self.listener.address
        return self

    async def __aexit__(self, *exc):
        self.listener.close()

    async def channel(self, name, *, attempts=1):
        for attempt in range(attempts):
            try:
                link = await self.transport.connect(name, SERVER, self.address, timeout=5.0)
                break
            except HandshakeError:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.1)
        return Channel(
            link, frame_size=FRAME_SIZE, round_id=ROUND, stats=WireStats(), replay=ReplayCache()
        )


def blob_frame(op, blob_id, total, offset=0, chunk=b"x" * 64):
    return Frame(
        kind={Op.OUTPUT: FrameKind.RESULT, Op.ACK: FrameKind.ACK}.get(op, FrameKind.PLAN),
        round_id=ROUND,
        message_id=new_message_id(),
        body=BLOB_HEADER.pack(op, blob_id, total, offset) + chunk,
    )


async def honest_round_trip(node, payload=b"h" * 5000, *, attempts=50):
    """An honest peer's blob is reassembled and acknowledged."""
    channel = await node.channel(HONEST, attempts=attempts)
    try:
        await channel.send_blob(Op.OUTPUT, payload, timeout=5.0)
        got = await channel.expect(Op.ACK, timeout=5.0)
        assert got.op == Op.ACK
    finally:
        await channel.close()
    assert node.blobs[HONEST][-1] == payload


async def wait_for(predicate, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


# ------------------------------------------------------------ 4. huge and many partial blobs


def test_declared_huge_blobs_cost_no_memory_and_honest_peer_is_served(pki):
    """20 frames declaring 64 MiB blobs (and blobs at the cap) from a certified peer."""

    async def scenario():
        limits = ChannelLimits(max_blob=1 << 20)
        async with Node(pki, limits=limits) as node:
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                for attack in range(20):
                    channel = await node.channel(ATTACKER)
                    # Over the cap: refused on its first frame.
                    channel.write_frame(blob_frame(Op.OUTPUT, 1, 64 << 20))
                    # At the cap, then more blobs at once than allowed.
                    for blob_id in range(2, 6):
                        channel.write_frame(blob_frame(Op.PLAN, blob_id, 1 << 20))
                    with contextlib.suppress(ChannelClosedError):
                        await channel.drain(timeout=5.0)
                    await wait_for(lambda a=attack: node.drops["oversized_blob"] == a + 1)
                    await channel.close()
                    # A second connection: blobs at the cap, more of them than allowed.
                    channel = await node.channel(ATTACKER)
                    for blob_id in range(2, 6):
                        channel.write_frame(blob_frame(Op.PLAN, blob_id, 1 << 20))
                    with contextlib.suppress(ChannelClosedError):
                        await channel.drain(timeout=5.0)
                    await wait_for(lambda a=attack: node.drops["partial_blobs"] == a + 1)
                    await channel.close()
                peak = tracemalloc.get_traced_memory()[1] - base
            finally:
                tracemalloc.stop()
            # 20 x 64 MiB declared (1.3 GB before): the peak is a few buffers and TLS records.
            assert peak < 4 << 20
            # Small control operations are capped by what the protocol sends.
            channel = await node.channel(ATTACKER)
            channel.write_frame(blob_frame(Op.ACK, 9, 1 << 16))
            await channel.drain(timeout=5.0)
            await wait_for(lambda: node.drops["oversized_blob"] == 21)
            await channel.close()
            await honest_round_trip(node)
            assert ATTACKER not in node.blobs
            attacks = node.drops.attacks()
            assert attacks == {"oversized_blob": 21, "partial_blobs": 20}
            assert node.drops.overload() == {}
            assert split_drops(node.stats.record().drops)["attacks"] == {SERVER: attacks}

    asyncio.run(scenario())


# ------------------------------------------------------------ 5. flooding the replay cache


def test_flooding_peer_exhausts_only_its_own_replay_quota(pki):
    """A certified peer floods fresh frames: past its quota only its own are dropped."""

    async def scenario():
        # Without quotas, 2,000 frames would fill this cache and every later frame overflow.
        replay = ReplayCache(capacity=1024, peer_quota=300)
        async with Node(pki, replay=replay) as node:
            attacker = await node.channel(ATTACKER)
            for _ in range(2000):
                attacker.write_data(0, 0, b"f" * 32)
            with contextlib.suppress(ChannelClosedError):
                await attacker.drain(timeout=10.0)
            await wait_for(lambda: node.drops["replay_quota"] >= 1)
            await attacker.close()
            # It reconnects: still past its quota, closed again on its first frame.
            attacker = await node.channel(ATTACKER)
            attacker.write_data(0, 0, b"f" * 32)
            with contextlib.suppress(ChannelClosedError):
                await attacker.drain(timeout=5.0)
            await wait_for(lambda: node.drops["replay_quota"] >= 2)
            await attacker.close()
            assert node.data[ATTACKER] == 300
            assert replay.held_by(ATTACKER) == 300
            honest = await node.channel(HONEST)
            for _ in range(250):
                honest.write_data(0, 0, b"h" * 32)
            await honest.drain(timeout=5.0)
            await honest.close()
            await wait_for(lambda: node.data.get(HONEST) == 250)
            await honest_round_trip(node)
            assert node.drops["overflow"] == 0
            assert set(node.drops.attacks()) == {"replay_quota"}
            assert node.drops.overload() == {}

    asyncio.run(scenario())


# ------------------------------------------------------------ 6. unauthenticated connections


async def failed_handshake(port, context):
    with contextlib.suppress(ssl.SSLError, ConnectionError, OSError):
        reader, writer = await asyncio.open_connection(HOST, port, ssl=context)
        with contextlib.suppress(ssl.SSLError, ConnectionError, OSError):
            await reader.read()
        writer.close()


def test_idle_and_failed_handshakes_are_capped_and_counted_as_attacks(pki, caplog):
    """300 idle TCP connections and failed handshakes: the cap holds, an honest peer gets in."""

    async def scenario():
        connections = ConnectionLimits(
            max_pending=32, max_idle=64, burst=64, rate=200.0, handshake_timeout=1.0
        )
        async with Node(pki, connections=connections) as node:
            port = node.address[1]
            gate = node.transport.gates[SERVER]
            idle = []
            for _ in range(300):
                with contextlib.suppress(OSError):
                    idle.append(await asyncio.open_connection(HOST, port))
            await honest_round_trip(node)
            # Sockets that send nothing take no handshake slot.
            assert gate.peak <= 1
            await wait_for(lambda: node.drops["handshake_timeout"] + node.drops["stalled"] >= 64)
            for _, writer in idle:
                writer.close()
            # Clients without a certificate fail their handshakes.
            anonymous = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            anonymous.check_hostname = False
            anonymous.load_verify_locations(pki[HONEST].ca_path)
            await asyncio.gather(*(failed_handshake(port, anonymous) for _ in range(5)))
            await wait_for(lambda: node.drops["handshake"] == 5)
            await wait_for(lambda: gate.pending == 0)
            attacks = node.drops.attacks()
            # Each idle socket was closed unadmitted: past the 64 that wait at once (stalled),
            # after the timeout (handshake_timeout), or when it hung up (no_hello).
            idled = sum(attacks.get(r, 0) for r in ("stalled", "handshake_timeout", "no_hello"))
            assert 300 - 5 <= idled <= 300
            assert attacks["handshake"] == 5
            assert node.drops.overload() == {}
            assert set(attacks) <= ATTACK_REASONS
            assert node.blobs[HONEST]

    with caplog.at_level(logging.WARNING, logger="dpcomm.network"):
        asyncio.run(scenario())
    # Hundreds of refusals, one summary line per interval.
    refusals = [r for r in caplog.records if "refused" in r.message]
    assert 1 <= len(refusals) <= 2


def test_a_flood_of_stalled_handshakes_from_one_address_does_not_keep_honest_peers_out(pki):
    """One client (127.0.0.2) holds every handshake slot with handshakes it never finishes;
    peers elsewhere (127.0.0.1) still get in at their first attempt, and the flood is counted."""

    async def scenario():
        connections = ConnectionLimits(max_pending=32, handshake_timeout=30.0)
        async with Node(pki, connections=connections) as node:
            port = node.address[1]
            gate = node.transport.gates[SERVER]
            stalled = []
            for _ in range(64):
                with contextlib.suppress(OSError):
                    reader, writer = await asyncio.open_connection(
                        HOST, port, local_addr=("127.0.0.2", 0)
                    )
                    writer.write(b"\x16")  # the first byte of a ClientHello, then nothing
                    stalled.append((reader, writer))
            await wait_for(lambda: gate.pending == 32)  # the flood holds every slot
            # No slot is stalled (the timeout is 30 s), yet ten peers get in, one attempt each.
            for _ in range(10):
                await honest_round_trip(node, attempts=1)
            for _, writer in stalled:
                writer.close()
            overload = node.drops.overload()
            assert overload.get("pending_share", 0) >= 1 and overload.get("pending_cap", 0) >= 1
            assert len(node.blobs[HONEST]) == 10

    asyncio.run(scenario())


def test_authenticated_links_per_peer_are_capped(pki):
    async def scenario():
        connections = ConnectionLimits(links_per_peer=3)
        async with Node(pki, connections=connections) as node:
            channels = [await node.channel(ATTACKER) for _ in range(6)]
            await wait_for(lambda: node.drops["peer_links"] == 3)
            await honest_round_trip(node)
            for channel in channels:
                await channel.close()
            assert node.drops.attacks() == {"peer_links": 3}

    asyncio.run(scenario())


def _round(
    tmp_path: Path,
    *,
    rows: int,
    num_targets: int,
    countermeasure: Scramblers,
    round_id: int,
    idle_seconds: float,
    round_seconds: float,
) -> tuple[RoundSpec, Any, Any]:
    """A COUNT by ``g1`` over synthetic rows: its round's spec (seed 5), nodes' configs and
    credentials."""
    program = AggregateProgram.from_sql(
        "SELECT g1, COUNT(*) FROM synthetic GROUP BY g1",
        synthetic_table(num_rows=rows, seed=3),
        num_targets=num_targets,
    )
    spec = RoundSpec.create(
        program,
        countermeasure,
        round_id=round_id,
        seed=5,
        idle_seconds=idle_seconds,
        round_seconds=round_seconds,
    )
    configs = node_configs(program, spec)
    authority = CertificateAuthority.create(tmp_path / "ca")
    return spec, configs, issue_many(authority, list(configs), tmp_path / "nodes")


# ------------------------------------------------------------ a round under attack


def test_a_round_completes_while_a_peer_attacks_the_coordinator(tmp_path):
    """300 idle sockets and 20 oversized blobs under a source's certificate: the round runs."""
    spec, configs, credentials = _round(
        tmp_path, rows=20, num_targets=3, idle_seconds=5, round_seconds=60,
        countermeasure=Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=2),
        round_id=11,
    )  # fmt: skip

    async def scenario():
        loop = asyncio.get_running_loop()
        coordinator = loop.create_future()
        attacked = asyncio.Event()
        idle = []
        attacks = []

        async def attack(address):
            for _ in range(300):
                with contextlib.suppress(OSError):
                    idle.append(await asyncio.open_connection(address[0], address[1]))
            # A certified source's identity, on separate links: oversized blobs.
            client = TlsTransport({"source-0": credentials["source-0"]})
            sent = 0
            while sent < 20 and loop.time() < deadline:
                try:
                    link = await client.connect("source-0", "coordinator", address, timeout=5.0)
                except HandshakeError:
                    await asyncio.sleep(0.1)  # refused at the door while the idle sockets hold it
                    continue
                channel = Channel(
                    link,
                    frame_size=spec.frame_size,
                    round_id=spec.round_id,
                    stats=WireStats(),
                    replay=ReplayCache(),
                )
                channel.write_frame(blob_frame_of(spec, Op.HELLO, 64 << 20))
                with contextlib.suppress(ChannelClosedError):
                    await channel.drain(timeout=5.0)
                    await channel.receive(timeout=5.0)  # the coordinator closes the link
                await channel.close()
                sent += 1
            attacked.set()

        def listening(name, address):
            if name == "coordinator" and not coordinator.done():
                coordinator.set_result(address)
                attacks.append(loop.create_task(attack(address)))

        async def coordinator_address():
            # The other nodes start once the idle sockets hold the coordinator's listener.
            await attacked.wait()
            return await asyncio.shield(coordinator)

        deadline = loop.time() + 50.0
        transport = TlsTransport(credentials)
        try:
            outcome = await run_nodes(
                list(configs.values()),
                transport,
                coordinator_address=coordinator_address,
                on_listening=listening,
            )
        finally:
            for _, writer in idle:
                writer.close()
            for task in attacks:
                task.cancel()
        return outcome, transport.gates["coordinator"]

    outcome, gate = asyncio.run(scenario())
    assert outcome.errors == {}
    assert outcome.result is not None and outcome.result.missing == ()
    assert gate.peak <= gate.limits.max_pending
    [wire] = outcome.wires
    attacks = split_drops(wire.drops)["attacks"]["coordinator"]
    assert attacks["oversized_blob"] == 20
    # The idle sockets held no handshake slot (the kernel or the listener held them until
    # their first byte, which never came): nothing was refused at the door.
    assert set(attacks) <= {"oversized_blob", "handshake_timeout", "no_hello", "stalled"}
    assert "coordinator" not in split_drops(wire.drops)["overload"]


def blob_frame_of(spec, op, total):
    return Frame(
        kind=FrameKind.PLAN,
        round_id=spec.round_id,
        message_id=new_message_id(),
        body=BLOB_HEADER.pack(op, 1, total, 0) + b"x" * 16,
    )


# ------------------------------------------------------------ a flood from the sources' address

FLOODER = Path(__file__).with_name("flooder.py")


@pytest.mark.serial
def test_a_round_completes_while_its_sources_own_address_floods_the_coordinator(tmp_path):
    """2,000 connections/s from 127.0.0.1, the sources' own address (devices behind one NAT),
    that send nothing, and handshakes without a certificate: every source registers, and no
    connection is refused at the door (the flood holds no handshake slot and no token)."""
    _spec, configs, credentials = _round(
        tmp_path, rows=150, num_targets=3, idle_seconds=8, round_seconds=60,
        countermeasure=Scramblers(sampling_rate=0.2, batch_size=25, num_dummies=2),
        round_id=12,
    )  # fmt: skip
    flooders = []

    async def scenario():
        loop = asyncio.get_running_loop()
        coordinator = loop.create_future()

        def listening(name, address):
            if name == "coordinator" and not coordinator.done():
                coordinator.set_result(address)
                ca = credentials["coordinator"].ca_path
                command = [sys.executable, str(FLOODER), HOST, str(address[1]), "5", "2000", ca]
                flooders.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))

        async def coordinator_address():
            address = await asyncio.shield(coordinator)
            await asyncio.sleep(1.0)  # the flood is under way before anyone registers
            return address

        transport = TlsTransport(credentials)
        outcome = await run_nodes(
            list(configs.values()),
            transport,
            coordinator_address=coordinator_address,
            on_listening=listening,
        )
        return outcome, transport.gates["coordinator"]

    try:
        outcome, gate = asyncio.run(scenario())
    finally:
        for flooder in flooders:
            flooder.kill()
    [flooder] = flooders
    flood = flooder.communicate()[0]  # what the flooder opened (empty if killed before the end)
    assert outcome.errors == {}, flood
    assert outcome.coordinator is not None and outcome.coordinator.absent == (), flood
    assert outcome.result is not None and outcome.result.missing == ()
    [wire] = outcome.wires
    drops = split_drops(wire.drops)
    # Thousands of connections came and went (counted as attacks: hung up without a byte, sent
    # nothing in time, no certificate), none was refused at the door, and none took a slot.
    assert sum(drops["attacks"]["coordinator"].values()) >= 1000, flood
    assert "coordinator" not in drops["overload"], (drops["overload"], flood)
    assert gate.peak <= gate.limits.max_pending


# ------------------------------------------------------------ a receiver that takes nothing


def test_an_output_its_receiver_never_takes_is_given_up_after_the_idle_time(tmp_path, monkeypatch):
    """A result node that accepts the compute nodes' links and reads nothing: each compute node
    gives up after T without progress (not at the round's deadline) and says why in one line."""
    _spec, configs, credentials = _round(
        tmp_path, rows=12, num_targets=2, idle_seconds=1, round_seconds=120,
        countermeasure=Scramblers(sampling_rate=0.0, batch_size=6, num_dummies=1),
        round_id=13,
    )  # fmt: skip

    async def silent_result(context):
        closed = asyncio.Event()

        async def hold(channel):  # takes the link, reads nothing
            await closed.wait()

        listener = await context.serve(hold, lambda name: name.startswith("compute-"))
        try:
            coordinator, _ = await context.register(context.hello(), ResultPlan)
            await context.wait_close(coordinator)
        finally:
            closed.set()
            listener.close()
        return ResultOutcome(outputs=(), missing=())

    monkeypatch.setitem(nodes.RUNNERS, "result", silent_result)

    async def scenario():
        loop = asyncio.get_running_loop()
        coordinator = loop.create_future()

        def listening(name, address):
            if name == "coordinator" and not coordinator.done():
                coordinator.set_result(address)

        started = loop.time()
        outcome = await run_nodes(
            list(configs.values()),
            TlsTransport(credentials),
            coordinator_address=lambda: asyncio.shield(coordinator),
            on_listening=listening,
        )
        return outcome, loop.time() - started

    outcome, seconds = asyncio.run(scenario())
    assert seconds < 60, seconds  # T = 2 s of no progress, not the round's 120 s
    reasons = [why for c in outcome.computes for f in c.flows.values() for why in f.undelivered]
    assert len(reasons) == 2, reasons
    for why in reasons:
        assert "\n" not in why and why.startswith("gave up on its output to result")
        assert "without progress" in why and "result took nothing for" in why
