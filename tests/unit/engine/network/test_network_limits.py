"""Bounded resources per peer: blob caps, partial blobs, replay quotas, the connection gate."""

import asyncio
import logging
from types import SimpleNamespace

import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network import batches
from dpcomm.engine.network.batches import while_progressing
from dpcomm.engine.network.frames import (
    ATTACK_REASONS,
    OVERLOAD_REASONS,
    DropCounters,
    Frame,
    FrameKind,
    ReplayCache,
    frame_size_for,
    new_message_id,
    split_drops,
)
from dpcomm.engine.network.node import Backoff
from dpcomm.engine.network.records import Peer
from dpcomm.engine.network.spec import RoundSpec
from dpcomm.engine.network.tls import ConnectionGate, ConnectionLimits
from dpcomm.engine.network.transport import MemoryLink
from dpcomm.engine.network.wire import (
    BLOB_HEADER,
    HELLO_BLOB,
    PROTOCOL_BLOB_LIMITS,
    SMALL_BLOB,
    Channel,
    ChannelClosedError,
    ChannelLimits,
    Op,
    WireStats,
)
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import Scramblers
from dpcomm.queries.aggregate import AggregateProgram

FRAME_SIZE = frame_size_for(256)
ROUND = 3

# ------------------------------------------------------------------------- replay quotas


def test_replay_quota_is_per_peer():
    cache = ReplayCache(capacity=100, peer_quota=10)
    cache.advance(ROUND)
    ids = [new_message_id() for _ in range(12)]
    assert [cache.admit(ROUND, i, "a") for i in ids[:10]] == ["fresh"] * 10
    assert cache.admit(ROUND, ids[10], "a") == "replay_quota"
    assert cache.held_by("a") == 10
    # Another peer is not affected; a replay is one whoever sends it.
    assert cache.admit(ROUND, ids[11], "b") == "fresh"
    assert cache.admit(ROUND, ids[0], "b") == "replay"
    assert cache.admit(ROUND, ids[0], "a") == "replay"
    # A new round forgets the old one's ids and quotas.
    cache.advance(ROUND + 1)
    assert cache.held_by("a") == 0
    assert cache.admit(ROUND + 1, new_message_id(), "a") == "fresh"


def test_without_quota_one_peer_fills_the_cache():
    cache = ReplayCache(capacity=20)
    cache.advance(ROUND)
    for _ in range(20):
        assert cache.admit(ROUND, new_message_id(), "a") == "fresh"
    assert cache.admit(ROUND, new_message_id(), "b") == "overflow"


@pytest.mark.parametrize("quota", [0, -1, True, 1.5])
def test_replay_quota_is_checked(quota):
    with pytest.raises(InvalidParameterError):
        ReplayCache(peer_quota=quota)


def test_reasons_are_attacks_or_overload():
    assert not ATTACK_REASONS & OVERLOAD_REASONS
    counters = DropCounters()
    for reason in ("handshake", "replay_quota", "pending_cap", "overflow", "replay"):
        counters.add(reason)
    assert counters.attacks() == {"handshake": 1, "replay_quota": 1}
    assert counters.overload() == {"overflow": 1, "pending_cap": 1}
    stats = WireStats()
    stats.drops["n"].add("oversized_blob")
    stats.drops["m"].add("connection_rate", 2)
    wire = split_drops(stats.record().drops)
    assert wire["attacks"] == {"n": {"oversized_blob": 1}}
    assert wire["overload"] == {"m": {"connection_rate": 2}}
    # The same split of a round report's merged counts.
    dropped = {"n": {"oversized_blob": 1, "replay": 2}, "m": {"connection_rate": 2}, "o": {}}
    assert split_drops(dropped) == wire


# ------------------------------------------------------------------------- blobs


def pair(limits=None, replay=None):
    forward: asyncio.Queue[bytes | None] = asyncio.Queue()
    backward: asyncio.Queue[bytes | None] = asyncio.Queue()
    sender = MemoryLink("peer", "node", backward, forward)
    receiver = MemoryLink("node", "peer", forward, backward)
    stats = WireStats()
    cache = replay if replay is not None else ReplayCache()
    cache.advance(ROUND)
    out = Channel(
        sender, frame_size=FRAME_SIZE, round_id=ROUND, stats=WireStats(), replay=ReplayCache()
    )
    into = Channel(
        receiver,
        frame_size=FRAME_SIZE,
        round_id=ROUND,
        stats=stats,
        replay=cache,
        limits=limits,
    )
    return out, into


def chunk_frame(op, blob_id, total, offset, chunk, kind=FrameKind.PLAN):
    return Frame(
        kind=kind,
        round_id=ROUND,
        message_id=new_message_id(),
        body=BLOB_HEADER.pack(op, blob_id, total, offset) + chunk,
    )


def test_blobs_within_the_caps_are_reassembled():
    async def scenario():
        out, into = pair(ChannelLimits(max_blob=10_000))
        payload = bytes(range(256)) * 30
        out.write_blob(Op.PLAN, payload)
        out.write_blob(Op.ACK)
        got = await into.receive(timeout=1.0)
        assert (got.op, got.blob) == (Op.PLAN, payload)
        got = await into.receive(timeout=1.0)
        assert (got.op, got.blob) == (Op.ACK, b"")
        assert into.drops.total == 0

    asyncio.run(scenario())


def test_a_declared_size_over_the_cap_closes_the_channel_without_allocating():
    async def scenario():
        out, into = pair(ChannelLimits(max_blob=10_000))
        out.write_frame(chunk_frame(Op.PLAN, 1, 10_001, 0, b"x"))
        with pytest.raises(ChannelClosedError, match="at most 10000"):
            await into.receive(timeout=1.0)
        assert into.drops.as_dict() == {"oversized_blob": 1}
        # At the cap: accepted, but the buffer holds what arrived, not what was declared.
        out, into = pair(ChannelLimits(max_blob=10_000))
        out.write_frame(chunk_frame(Op.PLAN, 1, 10_000, 0, b"x" * 100))
        with pytest.raises(TimeoutError):
            await into.receive(timeout=0.05)
        assert [len(buffer) for _, _, buffer in into._partial.values()] == [100]

    asyncio.run(scenario())


@pytest.mark.parametrize("op", sorted(PROTOCOL_BLOB_LIMITS))
def test_small_operations_are_capped_by_the_protocol(op):
    async def scenario():
        out, into = pair()
        kind = {Op.ACK: FrameKind.ACK, Op.REJECT: FrameKind.ACK}.get(op)
        kinds = {
            Op.HELLO: FrameKind.PLAN,
            Op.WINDOW: FrameKind.PLAN,
            Op.PREPARED: FrameKind.ACK,
            Op.COMMITTED: FrameKind.ACK,
            Op.ABORTED: FrameKind.ACK,
        }
        kind = kind or kinds.get(op, FrameKind.CLOSE)
        out.write_frame(chunk_frame(op, 1, PROTOCOL_BLOB_LIMITS[op] + 1, 0, b"x", kind))
        with pytest.raises(ChannelClosedError):
            await into.receive(timeout=1.0)
        assert into.drops.as_dict() == {"oversized_blob": 1}

    asyncio.run(scenario())
    assert ChannelLimits().blob_limit(Op.ACK) == SMALL_BLOB
    assert ChannelLimits(max_blob=100).blob_limit(Op.HELLO) == 100


def test_too_many_partial_blobs_close_the_channel():
    async def scenario():
        out, into = pair(ChannelLimits(max_partial_blobs=2))
        for blob_id in (1, 2, 3):
            out.write_frame(chunk_frame(Op.PLAN, blob_id, 1000, 0, b"x" * 10))
        with pytest.raises(ChannelClosedError, match="more than 2 blobs"):
            await into.receive(timeout=1.0)
        assert into.drops.as_dict() == {"partial_blobs": 1}

    asyncio.run(scenario())


def test_chunks_out_of_order_are_malformed():
    async def scenario():
        out, into = pair()
        out.write_frame(chunk_frame(Op.PLAN, 1, 20, 10, b"x" * 10))  # no first chunk
        out.write_frame(chunk_frame(Op.PLAN, 2, 20, 0, b"x" * 10))
        out.write_frame(chunk_frame(Op.PLAN, 2, 20, 15, b"x" * 5))  # a gap: blob 2 dropped
        out.write_frame(chunk_frame(Op.PLAN, 3, 4, 0, b"abcd"))
        got = await into.receive(timeout=1.0)
        assert got.blob == b"abcd"
        assert into.drops.as_dict() == {"malformed_blob": 2}
        assert into._partial == {}

    asyncio.run(scenario())


def test_a_peer_past_its_replay_quota_is_closed():
    async def scenario():
        out, into = pair(replay=ReplayCache(peer_quota=5))
        for _ in range(8):
            out.write_data(0, 0, b"x")
        for _ in range(5):
            assert (await into.receive(timeout=1.0)).op is None
        with pytest.raises(ChannelClosedError, match="quota"):
            await into.receive(timeout=1.0)
        assert into.drops.as_dict() == {"replay_quota": 1}

    asyncio.run(scenario())


def test_a_peer_sending_junk_frames_is_closed_and_counted_as_an_attack():
    async def scenario():
        out, into = pair(ChannelLimits(max_junk_frames=3))
        good = chunk_frame(Op.PLAN, 9, 4, 0, b"abcd")
        junk = [
            b"\x00" * FRAME_SIZE,  # not a frame
            Frame(kind=FrameKind.PLAN, round_id=ROUND + 1, message_id=new_message_id(), body=b""),
            chunk_frame(Op.PLAN, 1, 20, 10, b"x" * 10),  # a chunk without its start
        ]
        for frame in junk[1:]:
            out.write_frame(frame)
        out.link.write(junk[0])
        out.write_frame(good)  # within the quota: the honest blob still arrives
        assert (await into.receive(timeout=1.0)).blob == b"abcd"
        out.link.write(junk[0])  # the fourth junk frame closes the channel
        with pytest.raises(ChannelClosedError, match="junk"):
            await into.receive(timeout=1.0)
        assert into.drops["junk_quota"] == 1 and into.drops.attacks() == {"junk_quota": 1}

    asyncio.run(scenario())


# ------------------------------------------------------------------------- connection gate


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_gate_rate_limits_new_connections():
    async def scenario():
        clock = Clock()
        gate = ConnectionGate(
            ConnectionLimits(burst=3, rate=10.0, max_pending=100), clock=clock, name="n"
        )
        admitted = [gate.admit() for _ in range(5)]
        assert [a is not None for a in admitted] == [True] * 3 + [False] * 2
        clock.now += 0.15  # one token back (and a half)
        assert gate.admit() is not None
        assert gate.admit() is None
        assert gate.drops.as_dict() == {"connection_rate": 3}

    asyncio.run(scenario())


def test_gate_caps_pending_handshakes_and_evicts_stalled_ones():
    async def scenario():
        clock = Clock()
        limits = ConnectionLimits(max_pending=2, burst=100, handshake_timeout=1.0)
        gate = ConnectionGate(limits, clock=clock)
        release = asyncio.Event()

        async def handshake():
            entry = gate.admit()
            if entry is None:
                return "refused"
            try:
                await release.wait()
            except asyncio.CancelledError:
                return "evicted" if entry.evicted else "cancelled"
            finally:
                gate.done(entry)
            return "done"

        async def start():
            task = asyncio.ensure_future(handshake())
            await asyncio.sleep(0)
            return task

        first, second = await start(), await start()
        assert await (await start()) == "refused"  # full, nobody stalled yet
        clock.now += 0.6  # past half the timeout: the oldest is evicted for a newcomer
        third = await start()
        assert await first == "evicted"
        assert gate.pending == 2 and gate.peak == 2
        release.set()
        assert [await second, await third] == ["done", "done"]
        assert gate.pending == 0
        assert gate.drops.as_dict() == {"pending_cap": 1, "stalled": 1}

    asyncio.run(scenario())


def test_gate_gives_a_newcomer_address_its_share_of_a_full_listener():
    async def scenario():
        limits = ConnectionLimits(max_pending=4, burst=100, handshake_timeout=10.0)
        gate = ConnectionGate(limits, clock=Clock())
        release = asyncio.Event()

        async def handshake(address):
            entry = gate.admit(address)
            if entry is None:
                return "refused"
            try:
                await release.wait()
            except asyncio.CancelledError:
                return "evicted" if entry.evicted else "cancelled"
            finally:
                gate.done(entry)
            return "done"

        async def start(address):
            task = asyncio.ensure_future(handshake(address))
            await asyncio.sleep(0)
            return task

        flood = [await start("10.0.0.66") for _ in range(4)]  # one address fills the listener
        assert await (await start("10.0.0.66")) == "refused"  # nobody stalled yet
        honest = [await start("10.0.0.1"), await start("10.0.0.1")]  # the flood's oldest go
        assert await (await start("10.0.0.1")) == "refused"  # past its fair share of 4 / 2
        assert gate.pending == 4
        release.set()
        assert [await t for t in flood] == ["evicted", "evicted", "done", "done"]
        assert [await t for t in honest] == ["done", "done"]
        assert gate.pending == 0
        assert gate.drops.as_dict() == {"pending_cap": 2, "pending_share": 2}

    asyncio.run(scenario())


def test_gate_rate_limits_each_address_on_its_own():
    async def scenario():
        limits = ConnectionLimits(burst=2, rate=1.0, max_pending=100)
        gate = ConnectionGate(limits, clock=Clock())
        assert [gate.admit("a") is not None for _ in range(3)] == [True, True, False]
        assert gate.admit("b") is not None  # another address keeps its own tokens
        assert gate.drops.as_dict() == {"connection_rate": 1}

    asyncio.run(scenario())


def test_gate_caps_links_per_peer():
    gate = ConnectionGate(ConnectionLimits(links_per_peer=2))
    assert gate.link_opened("a") and gate.link_opened("a")
    assert not gate.link_opened("a")
    assert gate.link_opened("b")
    gate.link_closed("a")
    assert gate.link_opened("a")
    assert gate.drops.as_dict() == {"peer_links": 1}


def test_gate_logs_one_summary_per_interval(caplog):
    clock = Clock()
    gate = ConnectionGate(ConnectionLimits(log_interval=10.0), clock=clock, name="n")
    with caplog.at_level(logging.WARNING, logger="dpcomm.network"):
        for _ in range(100):
            gate.refuse("handshake", "bad certificate")
        clock.now += 10.0
        gate.refuse("pending_cap")
    assert len(caplog.records) == 2
    assert "handshake 1" in caplog.records[0].message
    assert "handshake 99, pending_cap 1" in caplog.records[1].message


@pytest.mark.parametrize(
    "options", [{"max_pending": 0}, {"rate": 0}, {"burst": True}, {"handshake_timeout": -1}]
)
def test_connection_limits_are_checked(options):
    with pytest.raises(InvalidParameterError):
        ConnectionLimits(**options)


def test_channel_limits_grow_with_the_round_and_the_coordinator_takes_no_large_blob():
    def spec_of(rows):
        program = AggregateProgram.from_sql(
            "SELECT g1, COUNT(*) FROM synthetic GROUP BY g1",
            synthetic_table(num_rows=rows, seed=3),
            num_targets=3,
        )
        countermeasure = Scramblers(sampling_rate=0.2, batch_size=10, num_dummies=2)
        return RoundSpec.create(
            program,
            countermeasure,
            round_id=1,
            seed=None,
            idle_seconds=5,
            round_seconds=30,
        )

    small, large = spec_of(20), spec_of(400)
    assert 1 << 20 < small.channel_limits().max_blob < large.channel_limits().max_blob
    coordinator = large.channel_limits("coordinator")
    assert coordinator.max_blob == HELLO_BLOB
    assert coordinator.blob_limit(Op.OUTPUT) == HELLO_BLOB
    assert large.peer_frame_quota(coordinator) < large.peer_frame_quota()
    assert small.peer_frame_quota() >= 2 * small.transformed.messages


def test_output_blobs_fit_their_cap_whatever_the_round():
    from dpcomm.data import synthetic_table
    from dpcomm.engine.network.node import OUTPUT_HEADER
    from dpcomm.engine.network.spec import RoundSpec
    from dpcomm.engine.network.wire import OUTPUT_BLOB_HEADER
    from dpcomm.plan import NoCountermeasure
    from dpcomm.queries.aggregate import AggregateProgram

    assert OUTPUT_HEADER.size == OUTPUT_BLOB_HEADER
    table = synthetic_table(num_rows=50_000, seed=0)
    sql = "SELECT g1, g2, COUNT(*), SUM(m1), AVG(m2) FROM t GROUP BY g1, g2"
    program = AggregateProgram.from_sql(sql, table, num_targets=2)
    spec = RoundSpec.create(
        program,
        NoCountermeasure(),
        round_id=1,
        seed=None,
        idle_seconds=10.0,
        round_seconds=60.0,
    )
    largest = max(program.codec.outputs(flow).size for flow in program.flow_names)
    assert spec.channel_limits("result").max_blob >= largest + OUTPUT_BLOB_HEADER


def test_gate_gives_a_slot_held_by_the_newcomers_own_address_after_a_tenth_of_the_timeout():
    """Devices behind one NAT share their address with a flood: a handshake under way for a
    tenth of the timeout makes room for a newcomer from the same address."""

    async def scenario():
        clock = Clock()
        limits = ConnectionLimits(max_pending=2, burst=100, handshake_timeout=10.0)
        gate = ConnectionGate(limits, clock=clock)
        flood = [gate.admit("10.0.0.1"), gate.admit("10.0.0.1")]
        for entry in flood:
            entry.task = None  # admitted by this task: an eviction must not cancel it
        assert gate.admit("10.0.0.1") is None  # full, and nobody under way for 1 s
        clock.now += 1.0
        assert gate.admit("10.0.0.1") is not None  # the oldest made room
        assert flood[0].evicted and not flood[1].evicted
        assert gate.drops.as_dict() == {"pending_cap": 1, "pending_share": 1}

    asyncio.run(scenario())


def test_gate_gives_an_authenticated_handshake_its_token_back():
    async def scenario():
        gate = ConnectionGate(ConnectionLimits(burst=2, rate=0.001), clock=Clock())
        for _ in range(5):  # honest nodes behind one address never use up its bucket
            entry = gate.admit("10.0.0.1")
            assert entry is not None
            gate.authenticated(entry)
            gate.done(entry)
        failed = [gate.admit("10.0.0.1") for _ in range(3)]  # failed handshakes do
        assert [entry is not None for entry in failed] == [True, True, False]

    asyncio.run(scenario())


# ------------------------------------------------------------------------- progress


class SlowLink:
    """A link whose unsent bytes fall by ``step`` per look (0: stalled)."""

    peer = "result"

    def __init__(self, unsent, step):
        self.left = unsent
        self.step = step

    def unsent(self):
        self.left = max(0, self.left - self.step)
        return self.left


def progress_context(idle_seconds):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30.0
    return SimpleNamespace(
        loop=loop,
        spec=SimpleNamespace(idle_seconds=idle_seconds),
        remaining=lambda: max(0.005, deadline - loop.time()),
    )


def test_a_slow_transfer_goes_on_while_bytes_move_and_stops_when_they_do_not(monkeypatch):
    monkeypatch.setattr(batches, "PROGRESS_CHECK_SECONDS", 0.02)

    async def scenario():
        context = progress_context(idle_seconds=0.2)
        # 0.5 s of transfer (more than T = 0.2 s) that keeps moving: it completes.
        moving = SimpleNamespace(link=SlowLink(10**6, 1000), peer="result")
        step = asyncio.sleep(0.5, result="acknowledged")
        backoff = Backoff(context)
        assert await while_progressing(context, moving, step, backoff) == "acknowledged"
        # A link that moves nothing is given up after T, saying how much was left.
        stalled = SimpleNamespace(link=SlowLink(5000, 0), peer="result")
        backoff = Backoff(context)
        started = context.loop.time()
        with pytest.raises(TimeoutError, match="took nothing for 0 s, 5,000 bytes still unsent"):
            await while_progressing(context, stalled, asyncio.sleep(5.0), backoff)
        assert 0.2 <= context.loop.time() - started < 1.0

    asyncio.run(scenario())


def test_an_output_nobody_takes_is_given_up_after_the_idle_time_saying_why(monkeypatch):
    monkeypatch.setattr(batches, "PROGRESS_CHECK_SECONDS", 0.02)

    async def scenario():
        context = progress_context(idle_seconds=0.2)
        out, _ = pair()  # the receiver reads nothing and never acknowledges
        stats = WireStats()

        async def connect(receiver):
            return out

        context.connect = connect
        context.stats = stats
        context.drops = stats.drops["compute-0-0"]
        context.name = "compute-0-0"
        why = await batches.send_output(context, "(g1)", b"o" * 100, Peer("result", None))
        assert why is not None and "\n" not in why
        assert why.startswith("gave up on its output to result (100 bytes) after 0 s")
        assert "without progress" in why
        assert context.drops.as_dict() == {"output_given_up": 1}

    asyncio.run(scenario())
