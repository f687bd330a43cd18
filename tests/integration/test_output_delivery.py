"""A compute node's output over a slow link, between real nodes over mutual TLS on loopback.

The link is a TCP relay in the test's event loop: it carries the compute node's bytes at a
fixed rate (the receiving end's window kept small, so that the sender sees its bytes leave as
the relay takes them) and can cut a connection mid-transfer. Delivery ends on progress: a
transfer that outlasts the round's ``idle_seconds`` (T) while its bytes move is never given up
for its length, and its clock of T restarts with every byte the link takes.
"""

import asyncio
import contextlib
import socket
import struct

from dpcomm.data import synthetic_table
from dpcomm.engine.network import CertificateAuthority, TlsTransport, issue_many
from dpcomm.engine.network.batches import send_output
from dpcomm.engine.network.deploy import node_configs
from dpcomm.engine.network.frames import DropCounters
from dpcomm.engine.network.node import NodeContext, output_header
from dpcomm.engine.network.records import Peer
from dpcomm.engine.network.result import Result
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.engine.network.transport import Endpoint
from dpcomm.engine.network.wire import WireStats
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram

HOST = "127.0.0.1"
IDLE_SECONDS = 2.0
#: The slow link: 64 KB/s, 3 s (1.5 T) for the first connection's 192 KB, then cut.
RATE = 64_000
CUT_AFTER = 192_000
OUTPUT_BYTES = 320_000


class PacedRelay:
    """A TCP relay to ``upstream`` (the slow link).

    On the first connection the sender's bytes go through at ``rate`` bytes per second (never
    faster, however the loop is scheduled), and once ``cut_after`` of them went through both
    ends are reset (a link that broke); later connections are not slowed. The relay's socket
    buffers are small, so that the sender's kernel holds what the relay has not taken yet.
    """

    def __init__(self, upstream: tuple[str, int], *, rate: float, cut_after: int) -> None:
        self.upstream = upstream
        self.rate = rate
        self.cut_after = cut_after
        self.forwarded: list[int] = []  # the sender's bytes carried, per connection
        self.cut = 0

    async def start(self) -> tuple[asyncio.Server, int]:
        listening = socket.socket()
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1400)
        listening.bind((HOST, 0))
        listening.listen(8)
        server = await asyncio.start_server(self.serve, sock=listening, limit=4096)
        return server, listening.getsockname()[1]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(self.forwarded)
        self.forwarded.append(0)
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        back = asyncio.ensure_future(_pump(up_reader, writer))
        try:
            with contextlib.suppress(OSError):
                await self.carry(index, reader, writer, up_writer)
        finally:
            back.cancel()
            writer.close()
            up_writer.close()

    async def carry(
        self,
        index: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """The sender's bytes on to the receiver: paced, then cut, on the first connection."""
        paced = index == 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        while data := await reader.read(4096 if paced else 1 << 16):
            up_writer.write(data)
            await up_writer.drain()
            self.forwarded[index] += len(data)
            if not paced:
                continue
            if self.forwarded[index] >= self.cut_after:
                self.cut += 1
                _reset(writer)
                _reset(up_writer)
                return
            due = started + self.forwarded[index] / self.rate
            await asyncio.sleep(max(0.0, due - loop.time()))


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a reset (SO_LINGER 0), as a broken link does."""
    raw = writer.get_extra_info("socket")
    if raw is not None:
        with contextlib.suppress(OSError):
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _round(tmp_path):
    program = AggregateProgram.from_sql(
        "SELECT g1, COUNT(*) FROM synthetic GROUP BY g1",
        synthetic_table(num_rows=8, seed=3),
        num_targets=1,
    )
    countermeasure = Scramblers(sampling_rate=0.0, batch_size=4, num_dummies=1)
    spec = RoundSpec.create(
        program, countermeasure, seed=5, idle_seconds=IDLE_SECONDS, round_seconds=60
    )
    configs = node_configs(program, spec)
    compute = next(name for name in configs if name.startswith("compute-"))
    authority = CertificateAuthority.create(tmp_path / "ca")
    credentials = issue_many(authority, [compute, "result"], tmp_path / "nodes")
    return spec, configs[compute], configs["result"], credentials


def test_a_slow_output_whose_link_breaks_after_the_idle_time_is_sent_again(tmp_path):
    """The first link carries 192 KB of a 320 KB output at 64 KB/s, 3 s (1.5 T), then breaks:
    the bytes it took were progress, so the compute node opens a second link and delivers,
    where it used to give the output up at once (more than T since its first attempt)."""
    spec, compute_config, result_config, credentials = _round(tmp_path)
    flow = spec.routes.result_outputs()[0]
    data = bytes(range(256)) * (OUTPUT_BYTES // 256)
    blob = output_header(spec, flow, 0) + data

    async def scenario():
        transport = TlsTransport(credentials)
        stats = WireStats()

        def context(config):
            return NodeContext(config, transport, stats, asyncio.Semaphore(4), _no_coordinator)

        result_context, compute_context = context(result_config), context(compute_config)
        result = Result(result_context)
        listener = await result_context.serve(result.handle, lambda n: n.startswith("compute-"))
        relay = PacedRelay(tuple(listener.address), rate=RATE, cut_after=CUT_AFTER)
        server, port = await relay.start()
        try:
            receiver = Peer("result", (HOST, port))
            why = await send_output(compute_context, flow, blob, receiver)
        finally:
            server.close()
            listener.close()
        return why, relay, result, compute_context.drops.as_dict()

    why, relay, result, drops = asyncio.run(scenario())
    assert why is None, why
    assert relay.cut == 1 and relay.forwarded[0] >= CUT_AFTER  # the slow link broke once
    assert len(relay.forwarded) == 2 and relay.forwarded[1] >= len(blob)
    assert result.outputs == {(flow, 0): data}
    assert "output_given_up" not in drops


async def _no_coordinator():
    raise AssertionError("the nodes of this test never register")


def test_unsent_counts_what_asyncio_handed_to_the_socket_but_the_kernel_did_not_take(tmp_path):
    """A link's unsent bytes are every byte written that the peer's side has not taken: asyncio's
    TLS layer hands a whole blob to the socket transport beneath it once that one has room, and
    those bytes still wait for the link (else a slow transfer looks stalled while they drain).
    The sender's kernel buffer is kept small (SO_SNDBUF), as over a slow link; the peer reads
    256 KB of the 2 MB written, then nothing."""
    written, taken = 2_000_000, 256_000
    # What the peer's side can hold without its application reading: its kernel buffer (kept
    # small too), asyncio's TLS and stream buffers; far less than this.
    peer_side = 1_000_000
    authority = CertificateAuthority.create(tmp_path / "ca")
    credentials = issue_many(authority, ["compute-0-0", "result"], tmp_path / "nodes")

    async def scenario():
        transport = TlsTransport(credentials)
        took = asyncio.Event()
        done = asyncio.Event()

        async def peer(link):
            link.writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024
            )
            read = 0
            while read < taken:
                read += len(await link.reader.read(taken - read))
            took.set()
            await done.wait()

        endpoint = Endpoint("result", lambda name: True, DropCounters(), HOST, 0)
        listener = await transport.listen(endpoint, peer)
        link = await transport.connect("compute-0-0", "result", listener.address, timeout=10.0)
        link.writer.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024
        )
        frame = bytes(range(250))
        for _ in range(written // len(frame)):
            link.write(frame)
        await took.wait()
        unsent = link.unsent()
        done.set()
        await link.close()
        listener.close()
        return unsent

    unsent = asyncio.run(scenario())
    assert unsent >= written - taken - peer_side, unsent
