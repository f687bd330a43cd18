"""How nodes reach each other: a transport of authenticated links carrying fixed-size frames.

The node programs (`dpcomm.engine.network.nodes`) only see `Link` objects: a
bidirectional byte stream between two named nodes whose identities the transport vouches for.
Two transports implement it:

* `dpcomm.engine.network.tls.TlsTransport`: mutually authenticated TLS 1.3 over TCP, the
  identity being the certificate's name (a real deployment);
* `MemoryTransport`: queues between coroutines of one event loop (the engine contract
  test runs a whole round in seconds, without sockets; identities are given by construction).

Faults (`dpcomm.engine.network.faults`) wrap a transport or its links; the node programs do
not know about them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dpcomm.engine.network.frames import DropCounters, FrameError, StreamClosedError
from dpcomm.errors import DpcommError

Address = list[Any]
"""Where a node listens, JSON-ready: ``[host, port]`` over TCP, ``[name]`` in memory."""


class HandshakeError(DpcommError):
    """A link could not be established, or the peer is not the expected node."""


class LinkClosedError(DpcommError):
    """The link broke or was closed while writing."""


class Link(Protocol):
    """An authenticated, ordered, bidirectional byte stream between two nodes."""

    local: str
    peer: str

    def write(self, data: bytes) -> bool:
        """Queue ``data``; False (nothing written) if the link is closing."""
        ...

    async def drain(self, *, timeout: float) -> None:
        """Wait until what was written is handed over; LinkClosedError if the link broke."""
        ...

    async def read(self, size: int) -> bytes:
        """Exactly ``size`` bytes.

        Raises StreamClosedError at a clean end, FrameError('truncated') if the stream ends
        within them.
        """
        ...

    def closing(self) -> bool:
        """True once the link is closing or closed."""
        ...

    def unsent(self) -> int:
        """Bytes written that the peer has not received yet, as far as this side can tell.

        A sender that sees it fall is making progress, however slow the link.
        """
        ...

    async def close(self) -> None:
        """Close the link (never raises)."""
        ...


Handler = Callable[[Link], Awaitable[None]]


class Listener(Protocol):
    """A node's listening endpoint."""

    @property
    def address(self) -> Address:
        """Where other nodes connect to it."""
        ...

    def close(self) -> None:
        """Stop accepting links."""
        ...


@dataclass(frozen=True)
class Endpoint:
    """Where and for whom a node listens.

    Attributes:
        name: the listening node's name.
        allowed: which peers (by name) may link to it.
        drops: its drop counters (refused and broken links are counted there).
        host, port: where it listens over TCP (port 0: any free port; unused in memory).
    """

    name: str
    allowed: Callable[[str], bool]
    drops: DropCounters
    host: str = ""
    port: int = 0


class Transport(Protocol):
    """Creates listeners and links for the nodes of one process (or event loop)."""

    async def listen(self, endpoint: Endpoint, handler: Handler) -> Listener:
        """Start accepting links to ``endpoint``; each goes to ``handler`` (closed after it)."""
        ...

    async def connect(self, name: str, peer: str, address: Address, *, timeout: float) -> Link:
        """A link from node ``name`` to node ``peer`` at ``address`` (HandshakeError if not)."""
        ...


# --------------------------------------------------------------------------- in memory


class MemoryLink:
    """One end of an in-memory link: queues of written chunks in each direction."""

    def __init__(
        self,
        local: str,
        peer: str,
        incoming: asyncio.Queue[bytes | None],
        outgoing: asyncio.Queue[bytes | None],
    ) -> None:
        self.local = local
        self.peer = peer
        self._incoming = incoming
        self._outgoing = outgoing
        self._buffer = bytearray()
        self._ended = False
        self._closed = False

    def write(self, data: bytes) -> bool:
        """Queue ``data``; False if the link is closing."""
        if self._closed:
            return False
        if data:
            self._outgoing.put_nowait(bytes(data))
        return True

    async def drain(self, *, timeout: float) -> None:
        """Wait until what was written is handed over."""
        if self._closed:
            raise LinkClosedError(f"{self.local} -> {self.peer}: link closed")
        await asyncio.sleep(0)

    async def read(self, size: int) -> bytes:
        """Exactly ``size`` bytes (see `Link`)."""
        while len(self._buffer) < size and not self._ended:
            chunk = await self._incoming.get()
            if chunk is None:  # the end of the stream
                self._ended = True
                break
            self._buffer += chunk
        if len(self._buffer) < size:
            partial = len(self._buffer)
            self._buffer.clear()
            if partial == 0:
                raise StreamClosedError("the peer closed the stream")
            raise FrameError("truncated", f"stream ended after {partial} of {size} bytes")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def closing(self) -> bool:
        """True once the link is closing or closed."""
        return self._closed

    def unsent(self) -> int:
        """Bytes written and not yet read by the peer (see `Link`)."""
        return 0  # a write is in the peer's queue at once

    async def close(self) -> None:
        """Close the link (never raises)."""
        if not self._closed:
            self._closed = True
            self._outgoing.put_nowait(None)
            self._incoming.put_nowait(None)


class _MemoryListener:
    def __init__(self, transport: MemoryTransport, name: str) -> None:
        self._transport = transport
        self._name = name

    @property
    def address(self) -> Address:
        """Where other nodes connect to it."""
        return [self._name]

    def close(self) -> None:
        """Stop accepting links."""
        self._transport._listeners.pop(self._name, None)


class MemoryTransport:
    """Links between the coroutines of one event loop; a node's address is its name.

    Identities are vouched for by construction (whoever calls `connect` with a name is
    that node), so this transport is for tests and the engine contract, never for a deployment.
    """

    def __init__(self) -> None:
        self._listeners: dict[str, tuple[Handler, Callable[[str], bool], DropCounters]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def listen(self, endpoint: Endpoint, handler: Handler) -> Listener:
        """Start accepting links to ``endpoint`` (see `Transport`)."""
        self._listeners[endpoint.name] = (handler, endpoint.allowed, endpoint.drops)
        return _MemoryListener(self, endpoint.name)

    async def connect(self, name: str, peer: str, address: Address, *, timeout: float) -> Link:
        """A link from node ``name`` to node ``peer`` (see `Transport`)."""
        target = str(address[0]) if address else peer
        entry = self._listeners.get(target)
        if entry is None or target != peer:
            raise HandshakeError(f"{name}: no node {peer!r} listening at {address}")
        handler, allowed, drops = entry
        if not allowed(name):
            drops.add("unauthorized")
            raise HandshakeError(f"{name}: refused by {peer}")
        forward: asyncio.Queue[bytes | None] = asyncio.Queue()
        backward: asyncio.Queue[bytes | None] = asyncio.Queue()
        client = MemoryLink(name, peer, backward, forward)
        server = MemoryLink(peer, name, forward, backward)

        async def serve() -> None:
            try:
                await handler(server)
            finally:
                await server.close()

        task = asyncio.get_running_loop().create_task(serve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return client

    async def shutdown(self) -> None:
        """Cancel the handlers still running (end of a round)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
