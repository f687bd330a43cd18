"""Mutual TLS 1.3 over real sockets on 127.0.0.1: who is accepted, who is refused, and frames.

No mocks: a real CA, real certificates, real handshakes with asyncio streams.
"""

import asyncio
import contextlib
import datetime as dt
import logging
import ssl

import pytest

from dpcomm.engine.network import (
    CertificateAuthority,
    DropCounters,
    Frame,
    FrameError,
    FrameKind,
    HandshakeError,
    NodeCredentials,
    ReplayCache,
    StreamClosedError,
    TargetKeys,
    client_context,
    decode_frame,
    encode_frame,
    frame_size_for,
    issue_many,
    make_dummy,
    open_payload,
    open_tls_connection,
    peer_identity,
    read_frame,
    seal_payload,
    sealed_size,
    server_context,
    start_tls_server,
)

HOST = "127.0.0.1"
PAYLOAD_SIZE = 64
FRAME_SIZE = frame_size_for(sealed_size(PAYLOAD_SIZE))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    authority = CertificateAuthority.create(root / "ca")
    nodes = issue_many(
        authority, ["scrambler-(A)-3", "source-17", "source-18", "compute-(A)-5"], root / "nodes"
    )
    now = dt.datetime.now(dt.UTC)
    nodes["expired"] = authority.issue(
        "source-99",
        root / "expired",
        not_before=now - dt.timedelta(days=30),
        not_after=now - dt.timedelta(days=1),
    )
    nodes["future"] = authority.issue(
        "source-98",
        root / "future",
        not_before=now + dt.timedelta(days=1),
        not_after=now + dt.timedelta(days=30),
    )
    rogue = CertificateAuthority.create(root / "rogue-ca").issue("source-17", root / "rogue")
    # a rogue source that trusts the project CA but presents a certificate of another CA
    nodes["rogue"] = NodeCredentials(
        name="source-17",
        cert_path=rogue.cert_path,
        key_path=rogue.key_path,
        ca_path=nodes["source-17"].ca_path,
    )
    nodes["rogue-server"] = rogue
    return nodes


async def wait_for(predicate, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


async def close(writer):
    writer.close()
    with contextlib.suppress(ssl.SSLError, ConnectionError):
        await writer.wait_closed()


class EchoServer:
    """A scrambler-like server that records its peers and answers b"ok"."""

    def __init__(self, credentials, **options):
        self.credentials = credentials
        self.options = options
        self.counters = DropCounters()
        self.peers = []
        self.versions = []

    async def handle(self, reader, writer, name):
        self.peers.append(name)
        self.versions.append(writer.get_extra_info("ssl_object").version())
        assert peer_identity(writer.get_extra_info("ssl_object")) == name
        writer.write(b"ok")
        await writer.drain()

    async def __aenter__(self):
        self.server = await start_tls_server(
            self.handle,
            host=HOST,
            port=0,
            credentials=self.credentials,
            counters=self.counters,
            **self.options,
        )
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()


async def refused_client_read(port, context):
    """Connect with a raw context; return what the client reads (b"" or the SSL error)."""
    try:
        reader, writer = await asyncio.open_connection(HOST, port, ssl=context)
    except (ssl.SSLError, ConnectionError) as error:
        return error
    try:
        return await reader.read()
    except (ssl.SSLError, ConnectionError) as error:
        return error
    finally:
        await close(writer)


def test_valid_client_is_accepted_with_its_identity(pki):
    async def scenario():
        async with EchoServer(pki["scrambler-(A)-3"]) as server:
            reader, writer, name = await open_tls_connection(
                HOST, server.port, credentials=pki["source-17"], expected_peer="scrambler-(A)-3"
            )
            assert name == "scrambler-(A)-3"
            assert writer.get_extra_info("ssl_object").version() == "TLSv1.3"
            assert await reader.read() == b"ok"
            await close(writer)
            assert server.peers == ["source-17"]
            assert server.versions == ["TLSv1.3"]
            assert server.counters.total == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("client", ["none", "rogue", "expired", "future"])
def test_server_refuses_and_counts(pki, caplog, client):
    async def scenario():
        async with EchoServer(pki["scrambler-(A)-3"]) as server:
            if client == "none":
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.load_verify_locations(pki["source-17"].ca_path)
            else:
                context = client_context(pki[client])
            answer = await refused_client_read(server.port, context)
            assert answer != b"ok"
            await wait_for(lambda: server.counters["handshake"] == 1)
            # the server survived: a valid client still gets through
            reader, writer, _ = await open_tls_connection(
                HOST, server.port, credentials=pki["source-18"]
            )
            assert await reader.read() == b"ok"
            await close(writer)
            assert server.peers == ["source-18"]
            assert server.counters.as_dict() == {"handshake": 1}

    with caplog.at_level(logging.WARNING, logger="dpcomm.network"):
        asyncio.run(scenario())
    assert any("refused TLS handshake" in record.message for record in caplog.records)


def test_expected_reasons_are_logged(pki, caplog):
    async def scenario():
        async with EchoServer(pki["scrambler-(A)-3"]) as server:
            await refused_client_read(server.port, client_context(pki["expired"]))
            await refused_client_read(server.port, client_context(pki["rogue"]))
            await wait_for(lambda: server.counters["handshake"] == 2)

    # One summary per interval at WARNING; every refusal's reason at DEBUG.
    with caplog.at_level(logging.DEBUG, logger="dpcomm.network"):
        asyncio.run(scenario())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = "\n".join(record.message for record in caplog.records)
    assert "certificate has expired" in text
    assert "CERTIFICATE_VERIFY_FAILED" in text


def test_client_refuses_a_server_of_another_ca(pki):
    async def scenario():
        async with EchoServer(pki["rogue-server"]) as server:
            with pytest.raises(HandshakeError, match="certificate verify failed"):
                await open_tls_connection(HOST, server.port, credentials=pki["source-17"])
            await wait_for(lambda: server.counters["handshake"] == 1)
            assert server.peers == []

    asyncio.run(scenario())


def test_client_checks_the_server_name(pki):
    async def scenario():
        async with EchoServer(pki["compute-(A)-5"]) as server:
            with pytest.raises(HandshakeError, match="expected 'scrambler-"):
                await open_tls_connection(
                    HOST, server.port, credentials=pki["source-17"], expected_peer="scrambler-(A)-3"
                )

    asyncio.run(scenario())


def test_tls12_client_is_refused(pki):
    async def scenario():
        async with EchoServer(pki["scrambler-(A)-3"]) as server:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.maximum_version = ssl.TLSVersion.TLSv1_2
            context.load_verify_locations(pki["source-17"].ca_path)
            context.load_cert_chain(pki["source-17"].cert_path, pki["source-17"].key_path)
            answer = await refused_client_read(server.port, context)
            assert isinstance(answer, ssl.SSLError | ConnectionError)
            await wait_for(lambda: server.counters["handshake"] == 1)

    asyncio.run(scenario())


def test_plain_tcp_garbage_and_silence_are_refused(pki):
    async def scenario():
        async with EchoServer(pki["scrambler-(A)-3"], handshake_timeout=0.5) as server:
            _, writer = await asyncio.open_connection(HOST, server.port)
            writer.write(b"GET / HTTP/1.0\r\n\r\n" * 10)
            await writer.drain()
            await wait_for(lambda: server.counters["handshake"] == 1)
            await close(writer)
            _, silent = await asyncio.open_connection(HOST, server.port)
            await wait_for(lambda: server.counters["handshake_timeout"] == 1)
            await close(silent)
            reader, writer, _ = await open_tls_connection(
                HOST, server.port, credentials=pki["source-17"]
            )
            assert await reader.read() == b"ok"
            await close(writer)

    asyncio.run(scenario())


def test_unauthorized_peer_is_refused_and_counted(pki):
    async def scenario():
        allowed = {"source-17"}
        async with EchoServer(pki["scrambler-(A)-3"], allowed_peers=allowed) as server:
            reader, writer, _ = await open_tls_connection(
                HOST, server.port, credentials=pki["compute-(A)-5"]
            )
            assert await reader.read() == b""
            await close(writer)
            await wait_for(lambda: server.counters["unauthorized"] == 1)
            reader, writer, _ = await open_tls_connection(
                HOST, server.port, credentials=pki["source-17"]
            )
            assert await reader.read() == b"ok"
            await close(writer)
            assert server.peers == ["source-17"]

    asyncio.run(scenario())


def test_contexts_negotiate_tls13_on_plain_asyncio(pki):
    """server_context/client_context work without the helpers, with peer_identity both ways."""

    async def scenario():
        seen = []

        async def handle(reader, writer):
            seen.append(peer_identity(writer.get_extra_info("ssl_object")))
            writer.write(writer.get_extra_info("ssl_object").version().encode())
            await writer.drain()
            await close(writer)

        server = await asyncio.start_server(
            handle, HOST, 0, ssl=server_context(pki["compute-(A)-5"])
        )
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(
            HOST, port, ssl=client_context(pki["scrambler-(A)-3"])
        )
        assert peer_identity(writer.get_extra_info("ssl_object")) == "compute-(A)-5"
        assert await reader.read() == b"TLSv1.3"
        await close(writer)
        server.close()
        await server.wait_closed()
        assert seen == ["scrambler-(A)-3"]

    asyncio.run(scenario())


class TargetServer:
    """A compute-node-like receiver: reads fixed-size frames, rejects replays, opens payloads."""

    def __init__(self, credentials, keys):
        self.credentials = credentials
        self.keys = keys
        self.counters = DropCounters()
        self.replay = ReplayCache(window=1)
        self.payloads = []
        self.dummies = 0

    async def handle(self, reader, writer, name):
        while True:
            try:
                data = await read_frame(reader, frame_size=FRAME_SIZE)
                frame = decode_frame(data, frame_size=FRAME_SIZE)
            except StreamClosedError:
                return
            except FrameError as error:
                self.counters.count_error(error)
                return
            if frame.kind is FrameKind.CLOSE:
                self.replay.advance(frame.round_id + 1)
                continue
            verdict = self.replay.admit(frame.round_id, frame.message_id)
            if verdict != "fresh":
                self.counters.add(verdict)
                continue
            payload = open_payload(self.keys, frame.body, payload_size=PAYLOAD_SIZE)
            if payload is None:
                self.dummies += 1
            else:
                self.payloads.append((frame.round_id, payload))


def test_frames_over_tls_replays_rejected_and_counted(pki):
    keys = TargetKeys.generate()

    async def scenario():
        target = TargetServer(pki["compute-(A)-5"], keys)
        server = await start_tls_server(
            target.handle,
            host=HOST,
            port=0,
            credentials=target.credentials,
            counters=target.counters,
        )
        port = server.sockets[0].getsockname()[1]
        _, writer, _ = await open_tls_connection(
            HOST, port, credentials=pki["scrambler-(A)-3"], expected_peer="compute-(A)-5"
        )
        frames = [
            Frame.new(
                FrameKind.DATA,
                round_id=0,
                body=seal_payload(keys.public_key, b"x" * size, payload_size=PAYLOAD_SIZE),
            )
            for size in (0, 10, 59)
        ]
        frames.append(
            Frame.new(
                FrameKind.DATA,
                round_id=0,
                body=make_dummy(keys.public_key, payload_size=PAYLOAD_SIZE),
            )
        )
        wire = [encode_frame(frame, frame_size=FRAME_SIZE) for frame in frames]
        assert {len(data) for data in wire} == {FRAME_SIZE}
        for data in wire:
            writer.write(data)
        writer.write(wire[1])  # replay within the round
        writer.write(encode_frame(Frame.new(FrameKind.CLOSE, round_id=0), frame_size=FRAME_SIZE))
        writer.write(wire[2])  # replay of an old round
        old = Frame.new(
            FrameKind.DATA,
            round_id=0,
            body=seal_payload(keys.public_key, b"late", payload_size=PAYLOAD_SIZE),
        )
        writer.write(encode_frame(old, frame_size=FRAME_SIZE))  # fresh id, old round
        new = Frame.new(
            FrameKind.DATA,
            round_id=1,
            body=seal_payload(keys.public_key, b"round 1", payload_size=PAYLOAD_SIZE),
        )
        writer.write(encode_frame(new, frame_size=FRAME_SIZE))
        writer.write(wire[0][:-5])  # truncated at the end of the stream
        await writer.drain()
        await close(writer)  # the stream ends in the middle of a frame
        await wait_for(lambda: target.counters["truncated"] == 1)
        server.close()
        await server.wait_closed()
        assert sorted(target.payloads) == [
            (0, b""),
            (0, b"x" * 10),
            (0, b"x" * 59),
            (1, b"round 1"),
        ]
        assert target.dummies == 1
        assert target.counters.as_dict() == {"replay": 1, "stale": 2, "truncated": 1}

    asyncio.run(scenario())
