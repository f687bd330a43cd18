"""Mutually authenticated TLS 1.3 between nodes: SSL contexts and asyncio helpers.

Both sides require a certificate signed by the project CA (``verify_mode = CERT_REQUIRED``),
so every hop is a secure channel with two-way authentication as Section 2.3 of the paper
assumes. Host names are not checked (nodes are named by their certificate, not by DNS): the
caller reads the authenticated name with `dpcomm.engine.network.pki.peer_identity`.
Expired certificates, certificates of another CA and missing client certificates are refused
by the handshake itself.

`start_tls_server` accepts TCP connections, runs the TLS handshake per connection and
counts every refused handshake (reason ``'handshake'``) or unauthorized peer (reason
``'unauthorized'``) in a `dpcomm.engine.network.frames.DropCounters`, so a failed
handshake never reaches the handler and never stops the server.

Connections not yet authenticated are bounded per listener (`ConnectionLimits`,
enforced by a `ConnectionGate`): at most ``max_pending`` handshakes at once, new
connections admitted by a token bucket per remote address (``rate`` per second, ``burst`` at
once), each handshake given ``handshake_timeout`` seconds. A connection beyond them is aborted
before any TLS work and counted as an overload (``pending_cap``, ``connection_rate``); when the
listener is full, a newcomer from an address below its fair share takes the slot of the address
holding the most (``pending_share``), else the oldest handshake under way for more than a tenth
of the timeout is aborted to make room (``stalled`` past half the timeout, else
``pending_share``), so one client's idle sockets cannot keep honest nodes out.

Fairness within one address (devices behind one NAT share it, and so may a flooder): a
connection that sends nothing takes no handshake slot and no token (`TlsServer`: it waits,
without TLS state, for its first bytes, among ``max_idle`` at most; the kernel holds it
first where it has ``TCP_DEFER_ACCEPT``), a handshake that stalls gives its slot to a newcomer
after a tenth of the timeout (an honest handshake takes a round trip and about a millisecond
of CPU), and an authenticated handshake gives its token back (the fast path after the client
certificate: honest nodes never use up their own address's bucket, only failed handshakes
do).

Failed, stalled and timed-out handshakes, connections closed before their first byte and
unexpected names count as attacks (``handshake``, ``stalled``, ``handshake_timeout``,
``no_hello``, ``unauthorized``): an
honest node's handshake takes about a millisecond of CPU, and the caps keep the queue of
handshakes far shorter than the timeout. Refusals are logged at most once per ``log_interval``
(a summary of the counts since the last line), never once per connection.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import dataclasses
import fcntl
import logging
import math
import socket
import ssl
import struct
import termios
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from typing import Any

from dpcomm.engine.network.frames import DropCounters, read_frame
from dpcomm.engine.network.pki import NodeCredentials, PeerIdentityError, PkiError, peer_identity
from dpcomm.engine.network.transport import (
    Address,
    Endpoint,
    Handler,
    HandshakeError,
    Link,
    LinkClosedError,
    Listener,
)
from dpcomm.errors import InvalidParameterError

LOGGER = logging.getLogger("dpcomm.network")


class _ConnectionNotices(logging.Filter):
    """Drops asyncio's warnings about connections a round has already given up on.

    - A half-close is ignored under TLS: asyncio's stream protocol asks to keep a connection
      half-open when its peer stops writing, and asyncio says at warning level, once per
      connection, that TLS ignores the request. A peer hanging up is how every round ends.
    - Writes after a connection was lost: asyncio discards them and, from the fifth on, logs
      ``socket.send() raised exception.`` (or ``SSL connection is closed``) once per write. A
      node learns of the loss in the same loop turn through `TlsLink.drain` or `TlsLink.read`
      (`LinkClosedError`), and a failed round says so in one line; a loaded machine can fit
      dozens of discarded writes into that turn, one stderr line each.

    Nothing is lost without them: the data they concern was already discarded.
    """

    _NOTICES = (
        "returning true from eof_received() has no effect",
        "socket.send() raised exception.",
        "SSL connection is closed",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(notice in message for notice in self._NOTICES)


logging.getLogger("asyncio").addFilter(_ConnectionNotices())
#: A handshake that failed because the peer went away (reset, closed, end of stream).
_PEER_GONE = (
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    asyncio.IncompleteReadError,
    ssl.SSLEOFError,
)

SSL_READ_BUFFER = 8 * 1024
"""Bytes of ciphertext asyncio reads per TLS connection at once. Its default, 256 KiB, is
allocated up front for every connection: 2.5 GB for a coordinator holding 10,000 registered
nodes, as much again on their side. A round's frames are a few hundred bytes (one TLS record
each); a longer record is simply read in more calls."""
asyncio.sslproto.SSLProtocol.max_size = SSL_READ_BUFFER
DEFAULT_HANDSHAKE_TIMEOUT = 5.0
"""Seconds a peer has to complete the TLS handshake."""
DEFAULT_MAX_PENDING = 256
"""Handshakes under way at once per listener (each holds a socket and TLS state)."""
DEFAULT_BACKLOG = 4096
"""Connections the kernel queues for a listener before it drops new ones (its cap is
``net.core.somaxconn``): a flood from one address must not fill it between two turns of the
event loop, or honest nodes' connections are dropped with the flood's."""
DEFAULT_MAX_IDLE = 1024
"""Connections per listener accepted that have sent nothing yet (each holds one socket)."""
DEFAULT_CONNECTION_RATE = 2000.0
"""New connections admitted per second per listener (beyond the burst)."""
DEFAULT_CONNECTION_BURST = 256
"""New connections admitted at once per listener."""
DEFAULT_LINKS_PER_PEER = 16
"""Authenticated links at once per peer name and listener (an honest node opens one or two)."""
_EVICTABLE_AFTER = 0.1
"""The fraction of the handshake timeout after which a handshake under way may give its slot
to a newcomer when the listener is full (an honest handshake takes one round trip)."""
_SIOCOUTQ: int | None = getattr(termios, "TIOCOUTQ", None)
"""Linux's ioctl for a TCP socket's bytes not yet acknowledged (``SIOCOUTQ`` = ``TIOCOUTQ``)."""
_ACCEPT_PAUSE = 1.0
"""Seconds a listener stops accepting when accept fails (no descriptors left)."""
_ACCEPTS_PER_TURN = 4096
"""Connections a listener accepts at most per turn of the event loop."""
_MAX_BUCKETS = 4096
"""Addresses whose token buckets a listener remembers before it forgets the idle ones."""
DEFAULT_LOG_INTERVAL = 10.0
"""Seconds between two log lines about refused connections."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConnectionLimits:
    """What unauthenticated (and authenticated) connections may hold of one listener.

    Attributes:
        max_pending: TLS handshakes under way at once (`DEFAULT_MAX_PENDING`).
        max_idle: connections accepted that have sent nothing yet, at once
            (`DEFAULT_MAX_IDLE`; beyond, the oldest is closed: ``stalled``).
        rate: new connections admitted per second (`DEFAULT_CONNECTION_RATE`).
        burst: new connections admitted at once (`DEFAULT_CONNECTION_BURST`).
        handshake_timeout: seconds a peer has to complete its handshake
            (`DEFAULT_HANDSHAKE_TIMEOUT`); past a tenth of it, a handshake may be aborted
            to make room for a new connection when ``max_pending`` are under way (past half
            of it, that counts as ``stalled``, an attack).
        links_per_peer: authenticated links at once per peer name
            (`DEFAULT_LINKS_PER_PEER`; beyond: ``peer_links``, an attack).
        log_interval: seconds between two log lines about refusals
            (`DEFAULT_LOG_INTERVAL`).
    """

    max_pending: int = DEFAULT_MAX_PENDING
    max_idle: int = DEFAULT_MAX_IDLE
    rate: float = DEFAULT_CONNECTION_RATE
    burst: int = DEFAULT_CONNECTION_BURST
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    links_per_peer: int = DEFAULT_LINKS_PER_PEER
    log_interval: float = DEFAULT_LOG_INTERVAL

    def __post_init__(self) -> None:
        for name in ("max_pending", "max_idle", "burst", "links_per_peer"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(name, "an integer >= 1", value)
        for name in ("rate", "handshake_timeout", "log_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidParameterError(name, "a number > 0", value)


class _Pending:
    """One connection whose handshake is under way, and the address it came from."""

    def __init__(self, task: asyncio.Task[object] | None, since: float, address: str) -> None:
        self.task = task
        self.since = since
        self.address = address
        self.evicted = False


class ConnectionGate:
    """Admission of new connections to one listener (see `ConnectionLimits`).

    Counts refusals in ``drops`` and logs them at most once per ``log_interval``. ``peak`` is
    the most handshakes ever under way at once (never above ``max_pending``).
    """

    def __init__(
        self,
        limits: ConnectionLimits | None = None,
        *,
        drops: DropCounters | None = None,
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits if limits is not None else ConnectionLimits()
        self.drops = drops if drops is not None else DropCounters()
        self.name = name
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._pending: dict[int, _Pending] = {}
        self._by_address: dict[str, int] = {}
        self._links: dict[str, int] = {}
        self.peak = 0
        self._unlogged: dict[str, int] = {}
        self._logged_at: float | None = None

    @property
    def pending(self) -> int:
        """Handshakes under way."""
        return len(self._pending)

    def refuse(self, reason: str, detail: str = "", *, quiet: bool = False) -> None:
        """Count a refusal; log a summary if none was logged for ``log_interval``.

        Each refusal's ``detail`` goes to the debug level only; a ``quiet`` one (a peer that
        went away mid-handshake, as every node does when a round ends or fails) is counted in
        the round's drops and not summarized on standard error.
        """
        self.drops.add(reason)
        if detail:
            LOGGER.debug("%s: refused (%s): %s", self.name, reason, detail)
        if quiet:
            return
        self._unlogged[reason] = self._unlogged.get(reason, 0) + 1
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < self.limits.log_interval:
            return
        self._logged_at = now
        summary = ", ".join(f"{r} {n}" for r, n in sorted(self._unlogged.items()))
        self._unlogged.clear()
        LOGGER.warning(
            "%s: refused TLS handshakes or connections (%s)%s; next summary in %g s at the "
            "earliest",
            self.name,
            summary,
            f"; last: {detail}" if detail else "",
            self.limits.log_interval,
        )

    def admit(self, address: str = "") -> _Pending | None:
        """Admit the current task's handshake from ``address`` (None, counted, if refused).

        Each address has its own token bucket, so one flooding client cannot use up the
        others' admissions. When ``max_pending`` handshakes are under way, a newcomer from an
        address holding less than its fair share (``max_pending`` over the addresses with
        handshakes under way) takes the slot of the oldest handshake of the address holding
        the most (``pending_share``, or ``stalled`` if that one was past half the timeout);
        otherwise only the oldest handshake, once under way for a tenth of the timeout, makes
        room (a flood from the newcomer's own address cannot hold the slots longer). An
        evicted handshake's task is cancelled (its transport closed by asyncio).
        """
        now = self._clock()
        if not self._take_token(address, now):
            self.refuse("connection_rate")
            return None
        if len(self._pending) >= self.limits.max_pending:
            victim = self._victim(address, now)
            if victim is None:
                self.refuse("pending_cap")
                return None
            self._evict(victim, now)
        entry = _Pending(asyncio.current_task(), now, address)
        self._pending[id(entry)] = entry
        self._by_address[address] = self._by_address.get(address, 0) + 1
        self.peak = max(self.peak, len(self._pending))
        return entry

    def _take_token(self, address: str, now: float) -> bool:
        tokens, refilled = self._buckets.get(address, (float(self.limits.burst), now))
        tokens = min(float(self.limits.burst), tokens + (now - refilled) * self.limits.rate)
        if len(self._buckets) > _MAX_BUCKETS:  # forget the addresses whose bucket is full
            self._buckets = {
                a: (t, r)
                for a, (t, r) in self._buckets.items()
                if t + (now - r) * self.limits.rate < self.limits.burst
            }
        if tokens < 1.0:
            self._buckets[address] = (tokens, now)
            return False
        self._buckets[address] = (tokens - 1.0, now)
        return True

    def _victim(self, address: str, now: float) -> _Pending | None:
        """The handshake to evict for a newcomer from ``address`` (None: refuse it)."""
        addresses = len(self._by_address) + (address not in self._by_address)
        heaviest = max(self._by_address, key=self._by_address.__getitem__)
        fair = self.limits.max_pending / addresses
        if heaviest != address and self._by_address.get(address, 0) + 1 <= fair:
            return next(p for p in self._pending.values() if p.address == heaviest)
        oldest = next(iter(self._pending.values()))  # admitted first, so the oldest
        if now - oldest.since >= self.limits.handshake_timeout * _EVICTABLE_AFTER:
            return oldest
        return None

    def _evict(self, victim: _Pending, now: float) -> None:
        victim.evicted = True
        self.done(victim)
        if victim.task is not None:
            victim.task.cancel()
        age = now - victim.since
        if age >= self.limits.handshake_timeout / 2:
            self.refuse("stalled", f"handshake under way for {age:.1f} s")
        else:
            self.refuse("pending_share", f"{victim.address} holds more than its share")

    def authenticated(self, entry: _Pending) -> None:
        """The handshake of ``entry`` verified its client's certificate: its token goes back.

        Only connections that fail to authenticate use up their address's bucket, so honest
        nodes behind one address (a NAT) are never refused for their own number.
        """
        tokens, refilled = self._buckets.get(entry.address, (float(self.limits.burst), 0.0))
        self._buckets[entry.address] = (min(float(self.limits.burst), tokens + 1.0), refilled)

    def done(self, entry: _Pending) -> None:
        """The handshake of ``entry`` ended (either way)."""
        if self._pending.pop(id(entry), None) is None:
            return
        left = self._by_address[entry.address] - 1
        if left:
            self._by_address[entry.address] = left
        else:
            del self._by_address[entry.address]

    def link_opened(self, peer: str) -> bool:
        """Count an authenticated link of ``peer``; False (counted) if it has too many."""
        if self._links.get(peer, 0) >= self.limits.links_per_peer:
            self.refuse("peer_links", f"{peer!r} has {self.limits.links_per_peer} links")
            return False
        self._links[peer] = self._links.get(peer, 0) + 1
        return True

    def link_closed(self, peer: str) -> None:
        """An authenticated link of ``peer`` ended."""
        left = self._links.get(peer, 0) - 1
        if left > 0:
            self._links[peer] = left
        else:
            self._links.pop(peer, None)


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
        await asyncio.wait_for(writer.wait_closed(), 2.0)


def _is_allowed(allowed_peers: Collection[str] | Callable[[str], bool] | None, name: str) -> bool:
    """Whether peer ``name`` may connect (every peer when ``allowed_peers`` is None)."""
    if allowed_peers is None:
        return True
    if callable(allowed_peers):
        return bool(allowed_peers(name))
    return name in allowed_peers


async def _handshake(
    gate: ConnectionGate,
    entry: _Pending,
    sock: socket.socket,
    context: ssl.SSLContext,
    address: object,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str] | None:
    """The TLS handshake of an admitted connection: its streams and the peer's name.

    None if it failed (the socket closed, the refusal counted).
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    timeout = gate.limits.handshake_timeout
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            # asyncio's own timer is a backstop: ours tells a timeout from a failure.
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, sock, ssl=context, ssl_handshake_timeout=2 * timeout
            )
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        name = writer_peer_identity(writer)
        gate.authenticated(entry)
        return reader, writer, name
    except asyncio.CancelledError:
        if not entry.evicted:
            sock.close()
            raise
        # Evicted to make room (counted as stalled); asyncio closed the transport.
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        sock.close()
        return None
    except (OSError, TimeoutError, PeerIdentityError, asyncio.IncompleteReadError) as error:
        if not entry.evicted:  # an evicted handshake was counted as stalled
            reason = "handshake_timeout" if isinstance(error, TimeoutError) else "handshake"
            gone = isinstance(error, _PEER_GONE)
            gate.refuse(reason, f"{address}: {type(error).__name__}: {error}", quiet=gone)
        if writer is not None:
            writer.transport.abort()
        sock.close()
        return None
    finally:
        gate.done(entry)


class TlsServer:
    """A listening socket whose connections wait for their first bytes before TLS starts.

    A connection accepted holds no TLS state, no handshake slot and no token of its address
    until its peer sends something (an honest node's ClientHello follows its connection at
    once): ``max_idle`` such connections wait at once, each for ``handshake_timeout`` at most
    (then ``handshake_timeout``, an attack); when they are all taken, the oldest makes room
    (``stalled``). So a flood of connections that send nothing, even from the honest nodes'
    own address, never takes a slot an honest handshake needs. Then ``on_socket(sock,
    address)`` runs as a task of its own.
    """

    def __init__(
        self,
        listening: socket.socket,
        on_socket: Callable[[socket.socket, object], Coroutine[Any, Any, None]],
        gate: ConnectionGate,
        *,
        max_idle: int,
    ) -> None:
        self.sockets = [listening]
        self._on_socket = on_socket
        self._gate = gate
        self._max_idle = max_idle
        self._loop = asyncio.get_running_loop()
        self._idle: dict[int, tuple[socket.socket, asyncio.TimerHandle]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop.add_reader(listening.fileno(), self._accept, listening)
        self._closed = asyncio.Event()

    @property
    def idle(self) -> int:
        """Connections accepted that have sent nothing yet."""
        return len(self._idle)

    def _accept(self, listening: socket.socket) -> None:
        """Accept every connection the kernel queued.

        The kernel drops new connections while its queue is full, honest or not: the queue
        is emptied at each turn of the loop. A connection whose first bytes are already in
        (an honest node's ClientHello usually is) goes straight on, never into the idle pool
        that a flood fills.
        """
        for _ in range(_ACCEPTS_PER_TURN):
            try:
                sock, address = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of descriptors: pause accepting, as asyncio does
                self._gate.refuse("overflow", f"accept failed: {error}")
                self._loop.remove_reader(listening.fileno())
                self._loop.call_later(_ACCEPT_PAUSE, self._resume, listening)
                return
            sock.setblocking(False)
            if self._hand_on(sock, address):
                continue
            if len(self._idle) >= self._max_idle:
                self._drop(next(iter(self._idle)), "stalled", "the oldest idle connection")
            descriptor = sock.fileno()
            timer = self._loop.call_later(
                self._gate.limits.handshake_timeout,
                self._drop,
                descriptor,
                "handshake_timeout",
                f"{address} sent nothing",
            )
            self._idle[descriptor] = (sock, timer)
            self._loop.add_reader(descriptor, self._readable, descriptor, address)

    def _resume(self, listening: socket.socket) -> None:
        if listening.fileno() >= 0:
            self._loop.add_reader(listening.fileno(), self._accept, listening)

    def _hand_on(self, sock: socket.socket, address: object) -> bool:
        """Whether ``sock`` is done with waiting (False: nothing arrived yet).

        Done when its first bytes arrived (handed on) or its peer hung up (closed, counted).
        """
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:  # reset: the peer went away
            first = b""
        if not first:  # hung up without a byte: nothing to admit (counted, never logged)
            sock.close()
            self._gate.refuse("no_hello", f"{address} hung up without a byte", quiet=True)
            return True
        task = self._loop.create_task(self._on_socket(sock, address))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _drop(self, descriptor: int, reason: str, detail: str) -> None:
        sock, timer = self._idle.pop(descriptor)
        timer.cancel()
        self._loop.remove_reader(descriptor)
        sock.close()
        self._gate.refuse(reason, detail)

    def _readable(self, descriptor: int, address: object) -> None:
        sock, timer = self._idle[descriptor]
        # Stop watching before handing on (the TLS transport watches the socket next).
        self._loop.remove_reader(descriptor)
        if self._hand_on(sock, address):
            del self._idle[descriptor]
            timer.cancel()
        else:  # woken without data: wait again
            self._loop.add_reader(descriptor, self._readable, descriptor, address)

    def close(self) -> None:
        """Stop accepting; close the listening socket and the idle connections."""
        for descriptor in list(self._idle):
            sock, timer = self._idle.pop(descriptor)
            timer.cancel()
            self._loop.remove_reader(descriptor)
            sock.close()
        for listening in self.sockets:
            if listening.fileno() >= 0:
                self._loop.remove_reader(listening.fileno())
                listening.close()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Wait until `close` was called."""
        await self._closed.wait()


async def _listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking socket listening on the first address ``host`` resolves to."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    if not infos:
        raise OSError(f"cannot resolve {host!r}")
    family, kind, proto, _, address = infos[0]
    listening = socket.socket(family, kind, proto)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listening.bind(address)
        listening.listen(backlog)
        listening.setblocking(False)
    except OSError as error:
        listening.close()
        raise OSError(error.errno, f"cannot listen on {host}:{port}: {error.strerror}") from error
    return listening


async def start_tls_server(
    handler: ConnectionHandler,
    *,
    host: str,
    port: int,
    credentials: NodeCredentials,
    counters: DropCounters | None = None,
    allowed_peers: Collection[str] | Callable[[str], bool] | None = None,
    handshake_timeout: float | None = None,
    backlog: int = 100,
    limits: ConnectionLimits | None = None,
    gate: ConnectionGate | None = None,
) -> TlsServer:
    """Serve mutually authenticated TLS 1.3 on ``host:port`` (port 0: any free port).

    Each connection is handed to ``handler(reader, writer, peer_name)`` after a successful
    handshake; the writer is closed when the handler returns. Connections wait for their
    first bytes (`TlsServer`), then are admitted by ``gate`` (default: a `ConnectionGate` of
    ``limits`` counting in ``counters``, whose handshake timeout ``handshake_timeout``
    overrides; a given gate counts in its own). Refused handshakes are counted as
    ``'handshake'``, timed-out ones as ``'handshake_timeout'``, peers not in ``allowed_peers``
    as ``'unauthorized'``, all logged (at most once per interval) on the ``dpcomm.network``
    logger. Exceptions of the handler are logged, never propagated.
    """
    if handshake_timeout is not None and not (
        isinstance(handshake_timeout, int | float) and handshake_timeout > 0
    ):
        raise InvalidParameterError(
            "handshake_timeout", "a number of seconds > 0", handshake_timeout
        )
    context = server_context(credentials)
    drops = counters if counters is not None else DropCounters()
    if gate is None:
        limits = limits if limits is not None else ConnectionLimits()
        if handshake_timeout is not None:
            limits = dataclasses.replace(limits, handshake_timeout=float(handshake_timeout))
        gate = ConnectionGate(limits, drops=drops, name=credentials.name)
    admission = gate

    async def on_socket(sock: socket.socket, address: object) -> None:
        peer_host = address[0] if isinstance(address, tuple) and address else ""
        entry = admission.admit(str(peer_host))
        if entry is None:
            sock.close()
            return
        streams = await _handshake(admission, entry, sock, context, address)
        if streams is None:
            return
        reader, writer, name = streams
        if not _is_allowed(allowed_peers, name):
            admission.refuse("unauthorized", f"peer {name!r} from {address}")
            await _close(writer)
            return
        if not admission.link_opened(name):
            await _close(writer)
            return
        try:
            await handler(reader, writer, name)
        except asyncio.CancelledError:
            raise
        except Exception:
            LOGGER.exception("%s: handler failed for peer %r", credentials.name, name)
        finally:
            admission.link_closed(name)
            await _close(writer)

    listening = await _listening_socket(host, port, backlog)
    defer_accept(listening, gate.limits.handshake_timeout)
    return TlsServer(listening, on_socket, gate, max_idle=gate.limits.max_idle)


def defer_accept(listening: socket.socket, seconds: float) -> bool:
    """Accept a connection only once its first bytes arrived (Linux ``TCP_DEFER_ACCEPT``).

    The kernel then holds a client that connects and sends nothing (``seconds`` at most, then
    it is handed over as usual): it costs the listener nothing. False where the kernel has no
    such option.
    """
    option = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if option is None:
        return False
    with contextlib.suppress(OSError):
        listening.setsockopt(socket.IPPROTO_TCP, option, max(1, math.ceil(seconds)))
    return True


async def open_tls_connection(
    host: str,
    port: int,
    *,
    credentials: NodeCredentials,
    expected_peer: str | None = None,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """Connect with mutual TLS 1.3; return reader, writer and the server's node name.

    Raises `HandshakeError` if the handshake fails or the server is not
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


def _beneath_tls(transport: asyncio.BaseTransport) -> int:
    """Bytes asyncio's TLS layer handed to the socket transport beneath it, not yet sent.

    The TLS transport counts only what it has not handed on, and it hands on everything it
    holds (a whole blob, encrypted) as soon as the socket transport has room again: without
    these bytes a slow link would look stalled while they drain. Read through asyncio's
    private attributes (``_ssl_protocol._transport``); 0 where they are not.
    """
    protocol = getattr(transport, "_ssl_protocol", None)
    size = getattr(getattr(protocol, "_transport", None), "get_write_buffer_size", None)
    return int(size()) if callable(size) else 0


class TlsLink:
    """A `dpcomm.engine.network.transport.Link` over one TLS connection."""

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
        """Exactly ``size`` bytes (see `Link`)."""
        try:
            return await read_frame(self.reader, frame_size=size)
        except ssl.SSLError as error:
            raise OSError(str(error)) from error

    def closing(self) -> bool:
        """True once the link is closing or closed."""
        transport = self.writer.transport
        return transport is None or transport.is_closing()

    def unsent(self) -> int:
        """Bytes written that the peer has not acknowledged (see `Link`).

        asyncio's write buffers (its TLS layer's and the socket transport's beneath it), plus
        the kernel's unacknowledged bytes where it says (Linux ``SIOCOUTQ``).
        """
        transport = self.writer.transport
        if transport is None:
            return 0
        buffered = transport.get_write_buffer_size() + _beneath_tls(transport)
        raw = self.writer.get_extra_info("socket")
        if raw is None or _SIOCOUTQ is None:
            return buffered
        try:
            queued = fcntl.ioctl(raw.fileno(), _SIOCOUTQ, struct.pack("i", 0))
        except (OSError, ValueError):
            return buffered
        return buffered + int(struct.unpack("i", queued)[0])

    async def close(self) -> None:
        """Close the link (never raises)."""
        self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), 2.0)


class _TlsListener:
    def __init__(self, server: TlsServer, host: str) -> None:
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
    Every listener admits connections by its own `ConnectionGate` of ``limits``
    (`gates`, by node name), counting refusals in the node's drop counters.
    """

    def __init__(
        self,
        credentials: Mapping[str, NodeCredentials],
        *,
        advertise: Mapping[str, str] | None = None,
        backlog: int = DEFAULT_BACKLOG,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.credentials = dict(credentials)
        self.advertise = dict(advertise or {})
        self.backlog = backlog
        self.limits = limits if limits is not None else ConnectionLimits()
        self.gates: dict[str, ConnectionGate] = {}
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

    async def listen(self, endpoint: Endpoint, handler: Handler) -> Listener:
        """Start accepting links to ``endpoint`` (see `Transport`)."""
        name, host = endpoint.name, endpoint.host
        credentials = self.credentials[name]

        async def on_link(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
        ) -> None:
            await handler(TlsLink(reader, writer, local=name, peer=peer))

        gate = self.gates[name] = ConnectionGate(self.limits, drops=endpoint.drops, name=name)
        server = await start_tls_server(
            on_link,
            host=host,
            port=endpoint.port,
            credentials=credentials,
            counters=endpoint.drops,
            allowed_peers=endpoint.allowed,
            backlog=self.backlog,
            gate=gate,
        )
        return _TlsListener(server, self.advertise.get(name, host))

    async def connect(self, name: str, peer: str, address: Address, *, timeout: float) -> Link:
        """A link from node ``name`` to node ``peer`` (see `Transport`)."""
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
