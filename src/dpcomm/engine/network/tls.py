"""Mutually authenticated TLS 1.3 between nodes: SSL contexts and asyncio helpers.

Both sides require a certificate signed by the project CA (``verify_mode = CERT_REQUIRED``),
so every hop is a secure channel with two-way authentication as Section 2.3 of the paper
assumes. Host names are not checked (nodes are named by their certificate, not by DNS): the
caller reads the authenticated name with :func:`dpcomm.engine.network.pki.peer_identity`.
Expired certificates, certificates of another CA and missing client certificates are refused
by the handshake itself.

:func:`start_tls_server` accepts TCP connections, runs the TLS handshake per connection and
counts every refused handshake (reason ``'handshake'``) or unauthorized peer (reason
``'unauthorized'``) in a :class:`~dpcomm.engine.network.frames.DropCounters`, so a failed
handshake never reaches the handler and never stops the server.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping

from dpcomm.engine.network.frames import DropCounters, read_frame
from dpcomm.engine.network.pki import NodeCredentials, PeerIdentityError, PkiError, peer_identity
from dpcomm.engine.network.transport import (
    Address,
    Handler,
    HandshakeError,
    Link,
    LinkClosedError,
    Listener,
)
from dpcomm.errors import InvalidParameterError

LOGGER = logging.getLogger("dpcomm.network")

SSL_READ_BUFFER = 8 * 1024
"""Bytes of ciphertext asyncio reads per TLS connection at once. Its default, 256 KiB, is
allocated up front for every connection: 2.5 GB for a coordinator holding 10,000 registered
nodes, as much again on their side. A round's frames are a few hundred bytes (one TLS record
each); a longer record is simply read in more calls."""
asyncio.sslproto.SSLProtocol.max_size = SSL_READ_BUFFER
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
"""Seconds a peer has to complete the TLS handshake."""

ConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, str], Awaitable[None]]
"""A server's per-connection coroutine: reader, writer and the peer's authenticated node name."""


def _configure(context: ssl.SSLContext, credentials: NodeCredentials) -> ssl.SSLContext:
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.maximum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    try:
        context.load_cert_chain(certfile=credentials.cert_path, keyfile=credentials.key_path)
        context.load_verify_locations(cafile=credentials.ca_path)
    except (OSError, ssl.SSLError) as error:
        raise PkiError(f"cannot load the credentials of node {credentials.name!r}: {error}") from (
            error
        )
    return context


def server_context(credentials: NodeCredentials) -> ssl.SSLContext:
    """A TLS 1.3-only server context that requires a client certificate from the project CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.num_tickets = 0  # no session resumption: every connection authenticates afresh
    return _configure(context, credentials)


def client_context(credentials: NodeCredentials) -> ssl.SSLContext:
    """A TLS 1.3-only client context that presents the node's certificate and trusts the CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # identity is the certificate's node name (peer_identity)
    return _configure(context, credentials)


def writer_peer_identity(writer: asyncio.StreamWriter) -> str:
    """The authenticated node name of the peer of a TLS stream."""
    return peer_identity(writer.get_extra_info("ssl_object"))


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()


async def start_tls_server(
    handler: ConnectionHandler,
    *,
    host: str,
    port: int,
    credentials: NodeCredentials,
    counters: DropCounters | None = None,
    allowed_peers: Collection[str] | Callable[[str], bool] | None = None,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
    backlog: int = 100,
) -> asyncio.Server:
    """Serve mutually authenticated TLS 1.3 on ``host:port`` (port 0: any free port).

    Each connection is handed to ``handler(reader, writer, peer_name)`` after a successful
    handshake; the writer is closed when the handler returns. Refused handshakes are counted
    as ``'handshake'``, peers not in ``allowed_peers`` as ``'unauthorized'``, both logged on
    the ``dpcomm.network`` logger. Exceptions of the handler are logged, never propagated.
    """
    if not (isinstance(handshake_timeout, int | float) and handshake_timeout > 0):
        raise InvalidParameterError(
            "handshake_timeout", "a number of seconds > 0", handshake_timeout
        )
    context = server_context(credentials)
    drops = counters if counters is not None else DropCounters()

    def allowed(name: str) -> bool:
        if allowed_peers is None:
            return True
        if callable(allowed_peers):
            return bool(allowed_peers(name))
        return name in allowed_peers

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = writer.get_extra_info("peername")
        try:
            await writer.start_tls(context, ssl_handshake_timeout=handshake_timeout)
            name = writer_peer_identity(writer)
        except (OSError, TimeoutError, PeerIdentityError, asyncio.IncompleteReadError) as error:
            drops.add("handshake")
            LOGGER.warning(
                "%s: refused TLS handshake from %s: %s: %s",
                credentials.name,
                address,
                type(error).__name__,
                error,
            )
            await _close(writer)
            return
        if not allowed(name):
            drops.add("unauthorized")
            LOGGER.warning("%s: refused peer %r from %s", credentials.name, name, address)
            await _close(writer)
            return
        try:
            await handler(reader, writer, name)
        except asyncio.CancelledError:
            raise
        except Exception:
            LOGGER.exception("%s: handler failed for peer %r", credentials.name, name)
        finally:
            await _close(writer)

    return await asyncio.start_server(on_connection, host=host, port=port, backlog=backlog)


async def open_tls_connection(
    host: str,
    port: int,
    *,
    credentials: NodeCredentials,
    expected_peer: str | None = None,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """Connect with mutual TLS 1.3; return reader, writer and the server's node name.

    Raises :class:`HandshakeError` if the handshake fails or the server is not
    ``expected_peer``. With TLS 1.3 the server verifies the client's certificate after the
    client has finished its handshake: a refused client sees the connection closed (or an
    ``ssl.SSLError``) on its first read, not here.
    """
    try:
        reader, writer = await asyncio.open_connection(
            host,
            port,
            ssl=client_context(credentials),
            server_hostname=host,
            ssl_handshake_timeout=handshake_timeout,
        )
    except (OSError, TimeoutError) as error:
        raise HandshakeError(
            f"{credentials.name}: TLS connection to {host}:{port} failed: {error}"
        ) from error
    try:
        name = writer_peer_identity(writer)
    except PeerIdentityError as error:
        await _close(writer)
        raise HandshakeError(f"{credentials.name}: {error}") from error
    if expected_peer is not None and name != expected_peer:
        await _close(writer)
        raise HandshakeError(
            f"{credentials.name}: {host}:{port} is node {name!r}, expected {expected_peer!r}"
        )
    return reader, writer, name


class TlsLink:
    """A :class:`~dpcomm.engine.network.transport.Link` over one TLS connection."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, local: str, peer: str
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.local = local
        self.peer = peer

    def write(self, data: bytes) -> bool:
        """Queue ``data``; False if the link is closing."""
        transport = self.writer.transport
        if transport is None or transport.is_closing():
            return False
        self.writer.write(data)
        return True

    async def drain(self, *, timeout: float) -> None:
        """Wait until what was written is handed over."""
        try:
            await asyncio.wait_for(self.writer.drain(), timeout)
        except (OSError, ssl.SSLError, RuntimeError) as error:
            raise LinkClosedError(f"{self.local} -> {self.peer}: {error}") from error

    async def read(self, size: int) -> bytes:
        """Exactly ``size`` bytes (see :class:`Link`)."""
        try:
            return await read_frame(self.reader, frame_size=size)
        except ssl.SSLError as error:
            raise OSError(str(error)) from error

    def closing(self) -> bool:
        """True once the link is closing or closed."""
        transport = self.writer.transport
        return transport is None or transport.is_closing()

    async def close(self) -> None:
        """Close the link (never raises)."""
        self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), 2.0)


class _TlsListener:
    def __init__(self, server: asyncio.Server, host: str) -> None:
        self._server = server
        self._host = host

    @property
    def address(self) -> Address:
        """Where other nodes connect to it."""
        return [self._host, int(self._server.sockets[0].getsockname()[1])]

    def close(self) -> None:
        """Stop accepting links."""
        self._server.close()


class TlsTransport:
    """Mutually authenticated TLS 1.3 over TCP for the nodes whose credentials it holds.

    ``advertise`` is the host other nodes reach a listener at (default: the host it binds).
    """

    def __init__(
        self,
        credentials: Mapping[str, NodeCredentials],
        *,
        advertise: Mapping[str, str] | None = None,
        backlog: int = 1024,
    ) -> None:
        self.credentials = dict(credentials)
        self.advertise = dict(advertise or {})
        self.backlog = backlog
        self._clients: dict[str, ssl.SSLContext] = {}

    def prepare(self) -> None:
        """Load the nodes' client contexts ahead of their first links (safe in a thread).

        Loading goes from the last node to the first and stops at a context already loaded:
        run in a worker thread (OpenSSL releases the GIL while it reads keys), it meets the
        event loop's nodes, which load their own contexts from the first one on, halfway.
        """
        for name in reversed(list(self.credentials)):
            if name in self._clients:
                return
            self._client(name)

    def _client(self, name: str) -> ssl.SSLContext:
        context = self._clients.get(name)
        if context is None:
            context = self._clients[name] = client_context(self.credentials[name])
        return context

    async def listen(
        self,
        name: str,
        handler: Handler,
        *,
        allowed: Callable[[str], bool],
        drops: DropCounters,
        host: str,
        port: int,
    ) -> Listener:
        """Start accepting links to node ``name`` (see :class:`Transport`)."""
        credentials = self.credentials[name]

        async def on_link(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
        ) -> None:
            await handler(TlsLink(reader, writer, local=name, peer=peer))

        server = await start_tls_server(
            on_link,
            host=host,
            port=port,
            credentials=credentials,
            counters=drops,
            allowed_peers=allowed,
            backlog=self.backlog,
        )
        return _TlsListener(server, self.advertise.get(name, host))

    async def connect(self, name: str, peer: str, address: Address, *, timeout: float) -> Link:
        """A link from node ``name`` to node ``peer`` (see :class:`Transport`)."""
        context = self._client(name)
        host, port = str(address[0]), int(address[1])
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=context, server_hostname=host, ssl_handshake_timeout=timeout
                ),
                timeout,
            )
        except (OSError, TimeoutError, ssl.SSLError) as error:
            raise HandshakeError(f"{name}: connection to {peer} failed: {error}") from error
        try:
            identity = writer_peer_identity(writer)
        except PeerIdentityError as error:
            writer.close()
            raise HandshakeError(f"{name}: {error}") from error
        if identity != peer:
            writer.close()
            raise HandshakeError(f"{name}: {host}:{port} is {identity!r}, expected {peer!r}")
        return TlsLink(reader, writer, local=name, peer=peer)
