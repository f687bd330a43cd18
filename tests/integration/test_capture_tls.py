"""A packet capture of mutually authenticated TLS traffic: every frame record has one length.

Frames of a deployment all have the same size, so every TLS 1.3 application-data record that
carries one has length frame_size + 17 (inner content type + AEAD tag): an observer of the
wire cannot tell a DATA frame from an ACK, nor a real message from a dummy.
"""

import asyncio

import pytest
from _capture import LoopbackSniffer

from dpcomm.engine.network import (
    CertificateAuthority,
    Frame,
    FrameKind,
    encode_frame,
    frame_size_for,
    issue_many,
    make_dummy,
    new_message_id,
    read_frame,
    seal_payload,
)
from dpcomm.engine.network.sealing import TargetKeys, sealed_size
from dpcomm.engine.network.tls import open_tls_connection, start_tls_server

pytestmark = pytest.mark.slow

PAYLOAD = 64
TLS_OVERHEAD = 17  # TLS 1.3: one byte of inner content type and a 16-byte AEAD tag


def capture_available() -> None:
    """Skip, saying why, where loopback cannot be captured (scapy missing, not root)."""
    import socket

    pytest.importorskip("scapy")
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
    except (PermissionError, AttributeError, OSError) as error:
        pytest.skip(f"packet capture needs a raw socket on lo (root on Linux): {error}")


def test_every_frame_record_has_the_same_length(tmp_path):
    capture_available()
    ca = CertificateAuthority.create(tmp_path / "ca")
    nodes = issue_many(ca, ["compute-0", "source-0", "source-1"], tmp_path / "nodes")
    keys = TargetKeys.generate()
    frame_size = frame_size_for(sealed_size(PAYLOAD))
    received: list[bytes] = []

    async def handler(reader, writer, peer):
        for _ in range(3):
            received.append(await read_frame(reader, frame_size=frame_size))
            ack = Frame(kind=FrameKind.ACK, round_id=1, message_id=new_message_id(), body=b"ok")
            writer.write(encode_frame(ack, frame_size=frame_size))
            await writer.drain()

    async def scenario():
        server = await start_tls_server(
            handler, host="127.0.0.1", port=0, credentials=nodes["compute-0"]
        )
        port = server.sockets[0].getsockname()[1]
        with LoopbackSniffer({port}) as sniffer:
            for index, source in enumerate(("source-0", "source-1")):
                reader, writer, _ = await open_tls_connection(
                    "127.0.0.1", port, credentials=nodes[source]
                )
                bodies = [
                    seal_payload(keys.public_key, b"tuple %d" % index, payload_size=PAYLOAD),
                    make_dummy(keys.public_key, payload_size=PAYLOAD),
                    seal_payload(keys.public_key, b"x" * 50, payload_size=PAYLOAD),
                ]
                for body in bodies:
                    frame = Frame(
                        kind=FrameKind.DATA, round_id=1, message_id=new_message_id(), body=body
                    )
                    writer.write(encode_frame(frame, frame_size=frame_size))
                    await writer.drain()
                    await read_frame(reader, frame_size=frame_size)
                writer.close()
                await writer.wait_closed()
            await asyncio.sleep(0.2)
        server.close()
        await server.wait_closed()
        return sniffer.capture(), port

    capture, port = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert len(received) == 6
    frame_record = frame_size + TLS_OVERHEAD
    directions = capture.records()
    assert len(directions) == 4  # two connections, both directions
    for (source_port, _), records in directions.items():
        lengths = [length for kind, length in records if kind == 23]
        first = lengths.index(frame_record)
        # Before the first frame: TLS 1.3 handshake messages (encrypted, type 23); after it:
        # frames only, plus at most a closing alert (19 bytes: 2 + 1 + 16).
        tail = lengths[first:]
        frames = [n for n in tail if n == frame_record]
        others = [n for n in tail if n != frame_record]
        assert len(frames) == 3, (source_port == port, lengths)
        assert all(n == 19 for n in others), lengths
