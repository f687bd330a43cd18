"""Benchmark: sealed messages per second through one scrambler (mutual TLS 1.3, loopback).

A source seals N payloads for a compute node (SealedBox, padded to one size) and sends them
as fixed-size frames to a scrambler over one TLS connection; the scrambler collects batches
of n, adds d dummies sealed for the target, shuffles each batch (the protocol layer's
permutation) and forwards it over TLS to the compute node, which opens every frame and
discards the dummies. The rate is frames forwarded by the scrambler per second, measured from
the first frame sent to the last frame opened (all three parties in one process, one core).

Usage: python benchmarks/bench_scrambler_throughput.py [--messages N] [--batch n] [--dummies d]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from dpcomm.engine.network import (
    CertificateAuthority,
    Frame,
    FrameKind,
    TargetKeys,
    decode_frame,
    encode_frame,
    frame_size_for,
    issue_many,
    make_dummy,
    new_message_id,
    open_payload,
    read_frame,
    seal_payload,
    sealed_size,
)
from dpcomm.engine.network.tls import open_tls_connection, start_tls_server

PAYLOAD = 64


async def run(messages: int, batch: int, dummies: int, directory: Path) -> dict[str, float]:
    ca = CertificateAuthority.create(directory / "ca")
    nodes = issue_many(ca, ["source-0", "scrambler-0", "compute-0"], directory / "nodes")
    keys = TargetKeys.generate()
    private = keys.nacl_private_key()
    frame_size = frame_size_for(sealed_size(PAYLOAD))
    expected = messages + dummies * (messages // batch)
    opened = {"real": 0, "dummy": 0}
    done = asyncio.Event()
    rng = np.random.default_rng(0)

    async def compute(reader, writer, peer):
        for _ in range(expected):
            frame = decode_frame(
                await read_frame(reader, frame_size=frame_size), frame_size=frame_size
            )
            content = open_payload(private, frame.body)
            opened["dummy" if content is None else "real"] += 1
        done.set()

    compute_server = await start_tls_server(
        compute, host="127.0.0.1", port=0, credentials=nodes["compute-0"]
    )
    compute_port = compute_server.sockets[0].getsockname()[1]

    async def scrambler(reader, writer, peer):
        _, out, _ = await open_tls_connection(
            "127.0.0.1", compute_port, credentials=nodes["scrambler-0"]
        )
        pending: list[bytes] = []
        for _ in range(messages):
            frame = decode_frame(
                await read_frame(reader, frame_size=frame_size), frame_size=frame_size
            )
            pending.append(frame.body)
            if len(pending) == batch:
                bodies = pending + [
                    make_dummy(keys.public_key, payload_size=PAYLOAD) for _ in range(dummies)
                ]
                for index in rng.permutation(len(bodies)):
                    forwarded = Frame(
                        kind=FrameKind.DATA,
                        round_id=1,
                        message_id=new_message_id(),
                        body=bodies[index],
                    )
                    out.write(encode_frame(forwarded, frame_size=frame_size))
                await out.drain()
                pending = []
        await done.wait()
        out.close()

    scrambler_server = await start_tls_server(
        scrambler, host="127.0.0.1", port=0, credentials=nodes["scrambler-0"]
    )
    scrambler_port = scrambler_server.sockets[0].getsockname()[1]
    _, source, _ = await open_tls_connection(
        "127.0.0.1", scrambler_port, credentials=nodes["source-0"]
    )
    start = time.perf_counter()
    for index in range(messages):
        sealed = seal_payload(keys.public_key, b"tuple %d" % index, payload_size=PAYLOAD)
        frame = Frame(kind=FrameKind.DATA, round_id=1, message_id=new_message_id(), body=sealed)
        source.write(encode_frame(frame, frame_size=frame_size))
        if index % 256 == 0:
            await source.drain()
    await source.drain()
    await asyncio.wait_for(done.wait(), 300)
    seconds = time.perf_counter() - start
    source.close()
    await source.wait_closed()
    await asyncio.sleep(0.2)  # let the handlers return and close their connections
    for server in (scrambler_server, compute_server):
        server.close()
        await server.wait_closed()
    return {
        "messages": messages,
        "batch_size": batch,
        "num_dummies": dummies,
        "frames_forwarded": expected,
        "real_opened": opened["real"],
        "dummies_opened": opened["dummy"],
        "frame_bytes": frame_size,
        "seconds": seconds,
        "forwarded_per_second": expected / seconds,
    }


def main() -> None:
    """Run the benchmark and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--dummies", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        result = asyncio.run(run(args.messages, args.batch, args.dummies, Path(directory)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
