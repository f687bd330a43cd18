"""Faults injected into a deployed round, as wrappers around a node's transport and links.

The node programs never test for a fault: a faulty node runs the same program over a transport
that misbehaves (`faulty`):

* **late**: the source's links (except to the coordinator) open only after the collection
  deadline, so its scrambler refuses its frame and it is left out;
* **replay**: every DATA frame the source writes is written a second time, byte for byte;
* **malformed**: every DATA frame is followed by a frame of random bytes;
* **unauthenticated**: before its first link to a peer, the source also tries a TLS connection
  without a certificate to the same address (refused by the handshake);
* **crash_after_frames**: after writing that many DATA frames the node dies (the process exits;
  in memory its links are closed and its coroutine stops), mid-batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Callable

from dpcomm.engine.network.frames import HEADER_SIZE, FrameKind
from dpcomm.engine.network.names import COORDINATOR
from dpcomm.engine.network.spec import NodeFaults
from dpcomm.engine.network.transport import (
    Address,
    Endpoint,
    Handler,
    Link,
    Listener,
    Transport,
)
from dpcomm.engine.network.wire import WireStats
from dpcomm.errors import DpcommError

_KIND_OFFSET = 3


class NodeCrashedError(DpcommError):
    """A node stopped by an injected crash (in-memory rounds)."""


def _is_data_frame(data: bytes) -> bool:
    return len(data) >= HEADER_SIZE and data[_KIND_OFFSET] == FrameKind.DATA


class FaultyLink:
    """A link that replays, garbles or crashes, counting what it adds to the wire."""

    def __init__(self, inner: Link, faults: NodeFaults, owner: FaultyTransport) -> None:
        self.inner = inner
        self.local = inner.local
        self.peer = inner.peer
        self.faults = faults
        self.owner = owner

    def write(self, data: bytes) -> bool:
        """Queue ``data``; False if the link is closing."""
        written = self.inner.write(data)
        if not written or not _is_data_frame(data):
            return written
        if self.faults.replay:
            self._extra(data)
        if self.faults.malformed:
            self._extra(os.urandom(len(data)))
        self.owner.data_frames += 1
        limit = self.faults.crash_after_frames
        if limit is not None and self.owner.data_frames >= limit:
            self.owner.crash()
        return written

    def _extra(self, data: bytes) -> None:
        if self.inner.write(data):
            counts = self.owner.stats.sent[(self.local, self.peer)]
            counts.frames += 1
            counts.bytes += len(data)

    async def drain(self, *, timeout: float) -> None:
        """Wait until what was written is handed over."""
        await self.inner.drain(timeout=timeout)

    async def read(self, size: int) -> bytes:
        """Exactly ``size`` bytes (see `Link`)."""
        return await self.inner.read(size)

    def closing(self) -> bool:
        """True once the link is closing or closed."""
        return self.inner.closing()

    def unsent(self) -> int:
        """Bytes written that the peer has not received yet (see `Link`)."""
        return self.inner.unsent()

    async def close(self) -> None:
        """Close the link (never raises)."""
        await self.inner.close()


class FaultyTransport:
    """A node's transport with its injected faults."""

    def __init__(
        self,
        inner: Transport,
        faults: NodeFaults,
        *,
        stats: WireStats,
        idle_seconds: float,
        crash: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self.faults = faults
        self.stats = stats
        self.idle_seconds = idle_seconds
        self.data_frames = 0
        self._crash = crash
        self._links: list[Link] = []
        self._delayed = False
        self._probed: set[str] = set()

    def crash(self) -> None:
        """Die now: exit the process, or (in memory) close every link and stop the node."""
        if self._crash is not None:
            self._crash()
        for link in self._links:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().create_task(link.close())
        raise NodeCrashedError("injected crash")

    async def listen(self, endpoint: Endpoint, handler: Handler) -> Listener:
        """Start accepting links to ``endpoint`` (see `Transport`)."""

        async def wrapped(link: Link) -> None:
            await handler(self._wrap(link))

        return await self.inner.listen(endpoint, wrapped)

    async def connect(self, name: str, peer: str, address: Address, *, timeout: float) -> Link:
        """A link from node ``name`` to node ``peer`` (see `Transport`)."""
        if peer != str(COORDINATOR):
            if self.faults.late and not self._delayed:
                self._delayed = True
                # Past its scrambler's window: T after the last of the others arrived.
                await asyncio.sleep(2 * self.idle_seconds + 1.0)
            if self.faults.unauthenticated and peer not in self._probed and len(address) == 2:
                self._probed.add(peer)
                await _unauthenticated_attempt(str(address[0]), int(address[1]))
        return self._wrap(await self.inner.connect(name, peer, address, timeout=timeout))

    def _wrap(self, link: Link) -> Link:
        self._links.append(link)
        if (
            self.faults.replay
            or self.faults.malformed
            or self.faults.crash_after_frames is not None
        ):
            return FaultyLink(link, self.faults, self)
        return link


async def _unauthenticated_attempt(host: str, port: int) -> None:
    """A TLS client without a certificate (the server must refuse it)."""
    insecure = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with contextlib.suppress(Exception):
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=insecure), 5.0
        )
        writer.write(os.urandom(64))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.read(1), 2.0)
        writer.close()


def faulty(
    transport: Transport,
    faults: NodeFaults,
    *,
    stats: WireStats,
    idle_seconds: float,
    crash: Callable[[], None] | None = None,
) -> Transport:
    """``transport`` as a node with ``faults`` uses it (unchanged without faults)."""
    if not faults.any:
        return transport
    return FaultyTransport(transport, faults, stats=stats, idle_seconds=idle_seconds, crash=crash)


def exit_process() -> None:
    """The crash of a node in its own process: exit at once, without cleanup."""
    os._exit(3)
