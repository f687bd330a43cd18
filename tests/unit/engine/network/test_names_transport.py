"""Typed node names, and the in-memory transport's links (no sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dpcomm.engine.network.frames import DropCounters, FrameError, StreamClosedError
from dpcomm.engine.network.names import COORDINATOR, RESULT, NodeName
from dpcomm.engine.network.transport import (
    Endpoint,
    HandshakeError,
    LinkClosedError,
    MemoryLink,
    MemoryTransport,
)
from dpcomm.errors import InvalidParameterError
from dpcomm.protocol.randomness import ROLES

# --------------------------------------------------------------------------- names

CANONICAL = [
    (NodeName("coordinator"), "coordinator"),
    (NodeName("result"), "result"),
    (NodeName.source(0), "source-0"),
    (NodeName.source(12_345), "source-12345"),
    (NodeName.scrambler(0, 0), "scrambler-0-0"),
    (NodeName.scrambler(3, 17), "scrambler-3-17"),
    (NodeName.compute(0, 4), "compute-0-4"),
    (NodeName.compute(2, 0), "compute-2-0"),
]


@pytest.mark.parametrize(("name", "text"), CANONICAL, ids=[t for _, t in CANONICAL])
def test_names_print_and_parse_back(name, text):
    assert str(name) == text
    assert NodeName.parse(text) == name
    assert NodeName.parse(str(name)) == name


def test_every_role_has_a_round_trip():
    assert {name.role for name, _ in CANONICAL} == set(ROLES)
    assert NodeName.parse("coordinator") == COORDINATOR
    assert NodeName.parse("result") == RESULT


def test_names_sort_and_hash_as_values():
    names = [NodeName.parse(text) for _, text in CANONICAL]
    assert len(set(names)) == len(names)
    assert sorted(names) == sorted(names, key=lambda n: (n.role, n.group, n.index))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "source",
        "source-",
        "source--1",
        "source-1-2",
        "source-x",
        "scrambler-1",
        "scrambler-1-2-3",
        "compute-a-1",
        "Coordinator",
        "coordinator-0",
        "result ",
        " source-1",
        "source-1\n",
        "attacker-0-0",
        "compute_0_1",
    ],
)
def test_invalid_names_are_rejected(text):
    with pytest.raises(InvalidParameterError, match="node name"):
        NodeName.parse(text)


@pytest.mark.parametrize("value", [None, 3, b"source-1"])
def test_parse_rejects_non_strings(value):
    with pytest.raises(InvalidParameterError, match="node name"):
        NodeName.parse(value)


@pytest.mark.parametrize(
    ("role", "group", "index"),
    [
        ("attacker", 0, 0),
        ("source", -1, 0),
        ("source", 0, -1),
        ("compute", True, 0),
        ("scrambler", 0, 1.0),
        ("scrambler", "0", 1),
    ],
)
def test_invalid_name_parts_are_rejected(role, group, index):
    with pytest.raises(InvalidParameterError):
        NodeName(role, group, index)


# --------------------------------------------------------------------------- memory transport

Handler = Callable[[Any], Awaitable[None]]


async def pair(
    server_name: str = "compute-0-0",
    client_name: str = "source-1",
    handler: Handler | None = None,
    allowed: Callable[[str], bool] = lambda name: True,
) -> tuple[MemoryTransport, MemoryLink, asyncio.Future[Any], DropCounters]:
    """A listener and one link to it; the future resolves to the server's end of the link."""
    transport = MemoryTransport()
    drops = DropCounters()
    served: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    release = asyncio.Event()

    async def keep(link: Any) -> None:
        served.set_result(link)
        await release.wait()

    listener = await transport.listen(Endpoint(server_name, allowed, drops), handler or keep)
    assert listener.address == [server_name]
    client = await transport.connect(client_name, server_name, listener.address, timeout=1.0)
    assert isinstance(client, MemoryLink)
    return transport, client, served, drops


def test_a_listener_gets_a_link_with_the_right_peer_names():
    async def scenario() -> None:
        transport, client, served, _ = await pair()
        server = await asyncio.wait_for(served, 1.0)
        assert (client.local, client.peer) == ("source-1", "compute-0-0")
        assert (server.local, server.peer) == ("compute-0-0", "source-1")
        await transport.shutdown()

    asyncio.run(scenario())


def test_bytes_arrive_in_order_and_reads_take_exact_sizes_across_chunks():
    async def scenario() -> None:
        transport, client, served, _ = await pair()
        server = await asyncio.wait_for(served, 1.0)
        for chunk in (b"ab", b"cdef", b"g", b"hijklmnop"):
            assert client.write(chunk) is True
        await client.drain(timeout=1.0)
        assert await server.read(3) == b"abc"
        assert await server.read(4) == b"defg"
        assert await server.read(1) == b"h"
        assert await server.read(0) == b""
        assert await server.read(8) == b"ijklmnop"
        # The other direction is independent.
        server.write(b"pong")
        assert await client.read(2) == b"po"
        assert await client.read(2) == b"ng"
        # A read waits for the bytes it needs.
        pending = asyncio.ensure_future(server.read(5))
        await asyncio.sleep(0)
        assert not pending.done()
        client.write(b"12")
        client.write(b"345")
        assert await asyncio.wait_for(pending, 1.0) == b"12345"
        await transport.shutdown()

    asyncio.run(scenario())


def test_an_empty_write_does_not_end_the_stream():
    async def scenario() -> None:
        transport, client, served, _ = await pair()
        server = await asyncio.wait_for(served, 1.0)
        client.write(b"ab")
        client.write(b"")
        client.write(b"cd")
        try:
            assert await asyncio.wait_for(server.read(4), 1.0) == b"abcd"
        finally:
            await transport.shutdown()

    asyncio.run(scenario())


def test_clean_close_gives_stream_closed_and_a_cut_frame_truncated():
    async def scenario() -> None:
        transport, client, served, _ = await pair()
        server = await asyncio.wait_for(served, 1.0)
        client.write(b"xy")
        await client.close()
        assert client.closing()
        assert client.write(b"more") is False
        with pytest.raises(LinkClosedError):
            await client.drain(timeout=1.0)
        assert await server.read(2) == b"xy"
        with pytest.raises(StreamClosedError):
            await server.read(1)

        transport2, client2, served2, _ = await pair()
        server2 = await asyncio.wait_for(served2, 1.0)
        client2.write(b"abc")
        await client2.close()
        with pytest.raises(FrameError) as error:
            await server2.read(5)
        assert error.value.reason == "truncated"
        await transport.shutdown()
        await transport2.shutdown()

    asyncio.run(scenario())


def test_closing_ones_own_end_wakes_a_pending_read():
    async def scenario() -> None:
        transport, client, served, _ = await pair()
        await asyncio.wait_for(served, 1.0)
        pending = asyncio.ensure_future(client.read(4))
        await asyncio.sleep(0)
        await client.close()
        with pytest.raises(StreamClosedError):
            await asyncio.wait_for(pending, 1.0)
        await transport.shutdown()

    asyncio.run(scenario())


def test_the_server_end_is_closed_when_its_handler_returns():
    async def scenario() -> None:
        async def answer_once(link: Any) -> None:
            link.write(b"hello")

        transport, client, _, _ = await pair(handler=answer_once)
        assert await asyncio.wait_for(client.read(5), 1.0) == b"hello"
        with pytest.raises(StreamClosedError):
            await asyncio.wait_for(client.read(1), 1.0)
        await transport.shutdown()

    asyncio.run(scenario())


def test_an_unauthorized_peer_is_refused_and_counted():
    async def scenario() -> None:
        transport = MemoryTransport()
        drops = DropCounters()
        calls: list[str] = []

        async def handler(link: Any) -> None:
            calls.append(link.peer)

        def only_sources(name: str) -> bool:
            return name.startswith("source-")

        listener = await transport.listen(Endpoint("compute-0-0", only_sources, drops), handler)
        for intruder in ("scrambler-0-0", "compute-1-0"):
            with pytest.raises(HandshakeError, match="refused"):
                await transport.connect(intruder, "compute-0-0", listener.address, timeout=1.0)
        assert drops["unauthorized"] == 2
        assert drops.total == 2
        link = await transport.connect("source-4", "compute-0-0", listener.address, timeout=1.0)
        await asyncio.sleep(0)
        assert calls == ["source-4"]
        assert drops.total == 2
        await link.close()
        await transport.shutdown()

    asyncio.run(scenario())


def test_connecting_to_a_missing_or_mismatched_node_fails():
    async def scenario() -> None:
        transport = MemoryTransport()
        drops = DropCounters()

        async def handler(link: Any) -> None:
            return None

        def everyone(name: str) -> bool:
            return True

        listener = await transport.listen(Endpoint("compute-0-0", everyone, drops), handler)
        await transport.listen(Endpoint("compute-0-1", everyone, drops), handler)
        with pytest.raises(HandshakeError):
            await transport.connect("source-1", "result", ["result"], timeout=1.0)
        # The address of one node with the name of another: not the expected peer.
        with pytest.raises(HandshakeError):
            await transport.connect("source-1", "compute-0-1", listener.address, timeout=1.0)
        listener.close()
        with pytest.raises(HandshakeError):
            await transport.connect("source-1", "compute-0-0", ["compute-0-0"], timeout=1.0)
        assert drops.total == 0
        await transport.shutdown()

    asyncio.run(scenario())


def test_shutdown_cancels_handlers_still_running():
    async def scenario() -> None:
        started = asyncio.Event()
        cancelled: list[bool] = []

        async def forever(link: Any) -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        transport, client, _, _ = await pair(handler=forever)
        await asyncio.wait_for(started.wait(), 1.0)
        await transport.shutdown()
        assert cancelled == [True]
        # The server end was closed on the way out: the client sees the end of the stream.
        with pytest.raises(StreamClosedError):
            await asyncio.wait_for(client.read(1), 1.0)

    asyncio.run(scenario())


def test_the_event_loop_ends_without_formatting_the_round_outcome() -> None:
    """asyncio.run formats its main task (result included) when it puts SIGINT's handler
    back; a round's outcome is the loop's, not the task's result, so it is never formatted."""
    import signal

    from dpcomm.engine.network.launcher import _run_loop

    formatted: list[str] = []

    class Outcome:
        def __repr__(self) -> str:
            formatted.append("outcome")
            return "Outcome()"

    async def group() -> Any:
        await asyncio.sleep(0)
        return Outcome()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # what asyncio.run replaces
    try:
        outcome = _run_loop(group())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(outcome, Outcome)
    assert formatted == []
