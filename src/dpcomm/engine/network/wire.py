"""The wire format of a round: fixed-length frames over a link, control blobs, counting.

A :class:`Channel` is one link (:mod:`dpcomm.engine.network.transport`) between two named
nodes. It writes and reads frames of the round's single ``frame_size``, counts every frame and
byte it writes (per link), checks the round id and the replay cache of the receiving node on
every frame, and drops (and counts) malformed, stale and replayed frames. A DATA frame's body
starts with :data:`DATA_HEADER`: the routed flow the message belongs to and the index of the
target (compute node) its sealed payload is for.

Control messages (plan, acknowledgements, commits, partial results) are *blobs*: a 1-byte
operation and a payload cut into as many fixed-length frames as needed, so that control and
data frames have the same length on the wire.
"""

from __future__ import annotations

import asyncio
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from enum import IntEnum

from dpcomm.engine.network.frames import (
    DropCounters,
    Frame,
    FrameError,
    FrameKind,
    ReplayCache,
    StreamClosedError,
    decode_frame,
    encode_frame,
    new_message_id,
)
from dpcomm.engine.network.transport import Link, LinkClosedError
from dpcomm.errors import DpcommError

#: Blob chunk header: operation, blob id, total length, offset of the chunk.
BLOB_HEADER = struct.Struct(">BIII")
#: Data frame header: the routed flow (index in the round's routed flows) and the index of the
#: target compute node the sealed payload is for.
DATA_HEADER = struct.Struct(">HH")
#: Smallest frame body, so that control blobs need few frames.
MIN_BODY_SIZE = 256


class Op(IntEnum):
    """What a control blob carries (first byte of every blob frame's body)."""

    HELLO = 1
    PLAN = 2
    ACK = 3
    REJECT = 4
    PREPARE = 5
    PREPARED = 6
    COMMIT = 7
    COMMITTED = 8
    ABORTED = 9
    FINALIZE = 10
    OUTPUT = 11
    DONE = 12
    CLOSE = 13


_KIND_OF_OP = {
    Op.HELLO: FrameKind.PLAN,
    Op.PLAN: FrameKind.PLAN,
    Op.FINALIZE: FrameKind.PLAN,
    Op.ACK: FrameKind.ACK,
    Op.REJECT: FrameKind.ACK,
    Op.PREPARED: FrameKind.ACK,
    Op.COMMITTED: FrameKind.ACK,
    Op.ABORTED: FrameKind.ACK,
    Op.PREPARE: FrameKind.CLOSE,
    Op.COMMIT: FrameKind.CLOSE,
    Op.DONE: FrameKind.CLOSE,
    Op.CLOSE: FrameKind.CLOSE,
    Op.OUTPUT: FrameKind.RESULT,
}


class ChannelClosedError(DpcommError):
    """The peer closed the channel (or it broke) before the expected message arrived."""


@dataclass
class LinkCounts:
    """Frames and bytes on one directed link (sender -> receiver), counted by one side."""

    frames: int = 0
    data_frames: int = 0
    bytes: int = 0


@dataclass
class WireStats:
    """Everything one process measured on the wire (mutable while the round runs).

    Attributes:
        sent: per (sender, receiver), the frames, data frames and bytes written.
        received: per (sender, receiver), the frames read (well-formed or not).
        frame_lengths: every distinct length of a frame written or read.
        drops: per node, frames and connections dropped, by reason.
    """

    sent: dict[tuple[str, str], LinkCounts] = field(default_factory=lambda: defaultdict(LinkCounts))
    received: dict[tuple[str, str], LinkCounts] = field(
        default_factory=lambda: defaultdict(LinkCounts)
    )
    frame_lengths: set[int] = field(default_factory=set)
    drops: dict[str, DropCounters] = field(default_factory=lambda: defaultdict(DropCounters))
    messages: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    dummies: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def message(self, flow: str, sender: str, receiver: str) -> None:
        """Count one message of routed flow ``flow`` (a DATA frame or an output blob).

        A message resent after a broken link is counted once: these are the plan's messages,
        the frames on the wire are counted per link.
        """
        self.messages[(flow, sender, receiver)] += 1

    def dummy(self, flow: str, count: int = 1) -> None:
        """Count dummies of routed flow ``flow``.

        Counted by whoever can tell: the target that opens it, or the sender of a dummy that
        only its target can open.
        """
        self.dummies[flow] += count

    def as_dict(self) -> dict[str, object]:
        """JSON-ready copy (links as lists)."""
        return {
            "sent": [[s, r, c.frames, c.data_frames, c.bytes] for (s, r), c in self.sent.items()],
            "received": [
                [s, r, c.frames, c.data_frames, c.bytes] for (s, r), c in self.received.items()
            ],
            "frame_lengths": sorted(self.frame_lengths),
            "drops": {name: d.as_dict() for name, d in self.drops.items() if d.total},
            "messages": [[f, s, r, n] for (f, s, r), n in self.messages.items()],
            "dummies": dict(self.dummies),
        }


@dataclass(frozen=True, kw_only=True)
class Received:
    """One well-formed, fresh frame read from a channel (a data frame or a complete blob)."""

    frame: Frame
    op: Op | None = None
    blob: bytes = b""
    replayed: bool = False


class Channel:
    """One link from node ``local`` to node ``peer`` carrying fixed-length frames."""

    def __init__(
        self,
        link: Link,
        *,
        frame_size: int,
        round_id: int,
        stats: WireStats,
        replay: ReplayCache,
    ) -> None:
        self.link = link
        self.local = link.local
        self.peer = link.peer
        self.frame_size = frame_size
        self.round_id = round_id
        self.stats = stats
        self.replay = replay
        self._partial: dict[int, tuple[Op, bytearray, int]] = {}
        self._blob_ids = 0

    @property
    def drops(self) -> DropCounters:
        """The drop counters of the local node."""
        return self.stats.drops[self.local]

    @property
    def blob_capacity(self) -> int:
        """Payload bytes per blob frame."""
        from dpcomm.engine.network.frames import HEADER_SIZE

        return self.frame_size - HEADER_SIZE - BLOB_HEADER.size

    def write_raw(self, data: bytes, *, data_frame: bool = False) -> None:
        """Write bytes that should be one frame (counted as one, whatever they hold).

        Nothing is written, nor counted, once the connection is closing (the peer hung up):
        asyncio would discard the bytes, and the counts are those of the wire.
        """
        if not self.link.write(data):
            return
        counts = self.stats.sent[(self.local, self.peer)]
        counts.frames += 1
        counts.bytes += len(data)
        if data_frame:
            counts.data_frames += 1
        self.stats.frame_lengths.add(len(data))

    def write_frame(self, frame: Frame) -> bytes:
        """Encode and write ``frame`` (no drain); return the bytes written."""
        data = encode_frame(frame, frame_size=self.frame_size)
        self.write_raw(data, data_frame=frame.kind == FrameKind.DATA)
        return data

    def write_data(
        self, flow: int, target: int, sealed: bytes, message_id: bytes | None = None
    ) -> bytes:
        """Write one DATA frame of routed flow ``flow`` carrying ``sealed`` for ``target``."""
        frame = Frame(
            kind=FrameKind.DATA,
            round_id=self.round_id,
            message_id=message_id if message_id is not None else new_message_id(),
            body=DATA_HEADER.pack(flow, target) + sealed,
        )
        return self.write_frame(frame)

    def write_blob(self, op: Op, payload: bytes = b"") -> None:
        """Write a control blob as consecutive frames (no drain)."""
        self._blob_ids += 1
        capacity = self.blob_capacity
        offsets = range(0, max(len(payload), 1), capacity)
        for offset in offsets:
            body = (
                BLOB_HEADER.pack(op, self._blob_ids, len(payload), offset)
                + payload[offset : offset + capacity]
            )
            self.write_frame(
                Frame(
                    kind=_KIND_OF_OP[op],
                    round_id=self.round_id,
                    message_id=new_message_id(),
                    body=body,
                )
            )

    async def send_blob(self, op: Op, payload: bytes = b"", *, timeout: float) -> None:
        """Write a blob and wait until it is handed to the operating system."""
        self.write_blob(op, payload)
        await self.drain(timeout=timeout)

    async def drain(self, *, timeout: float) -> None:
        """Wait for the write buffer to drain; ChannelClosedError if the link broke."""
        try:
            await asyncio.wait_for(self.link.drain(timeout=timeout), timeout)
        except LinkClosedError as error:
            raise ChannelClosedError(str(error)) from error

    async def receive(self, *, timeout: float) -> Received:
        """The next fresh, well-formed frame or complete blob from the peer.

        Malformed frames, frames of another round, replayed frames and malformed blobs are
        dropped and counted under the local node. Raises ChannelClosedError when the stream
        ends or breaks, TimeoutError after ``timeout`` seconds.
        """
        async with asyncio.timeout(timeout):
            while True:
                try:
                    data = await self.link.read(self.frame_size)
                except StreamClosedError as error:
                    raise ChannelClosedError(f"{self.peer} closed the channel") from error
                except FrameError as error:
                    self.drops.count_error(error)
                    raise ChannelClosedError(f"{self.peer}: {error}") from error
                except OSError as error:
                    raise ChannelClosedError(f"{self.peer}: {error}") from error
                counts = self.stats.received[(self.peer, self.local)]
                counts.frames += 1
                counts.bytes += len(data)
                self.stats.frame_lengths.add(len(data))
                try:
                    frame = decode_frame(data, frame_size=self.frame_size)
                except FrameError as error:
                    self.drops.count_error(error)
                    continue
                if frame.round_id != self.round_id:
                    self.drops.add("wrong_round")
                    continue
                verdict = self.replay.admit(frame.round_id, frame.message_id)
                if verdict != "fresh":
                    self.drops.add(verdict)
                    if verdict == "replay" and frame.kind == FrameKind.DATA:
                        # Handed back so that a retry can be acknowledged again (idempotent).
                        return Received(frame=frame, replayed=True)
                    continue
                if frame.kind == FrameKind.DATA:
                    counts.data_frames += 1
                    if len(frame.body) < DATA_HEADER.size:
                        self.drops.add("malformed_data")
                        continue
                    return Received(frame=frame)
                complete = self._assemble(frame)
                if complete is not None:
                    return complete

    def _assemble(self, frame: Frame) -> Received | None:
        if len(frame.body) < BLOB_HEADER.size:
            self.drops.add("malformed_blob")
            return None
        raw_op, blob_id, total, offset = BLOB_HEADER.unpack_from(frame.body)
        chunk = frame.body[BLOB_HEADER.size :]
        try:
            op = Op(raw_op)
        except ValueError:
            self.drops.add("malformed_blob")
            return None
        if total > 1 << 26 or offset + len(chunk) > total or (total and not chunk):
            self.drops.add("malformed_blob")
            self._partial.pop(blob_id, None)
            return None
        if op.value not in _KIND_OF_OP or _KIND_OF_OP[op] != frame.kind:
            self.drops.add("malformed_blob")
            return None
        known = self._partial.get(blob_id)
        if known is None:
            known = (op, bytearray(total), 0)
        stored_op, buffer, filled = known
        if stored_op != op or len(buffer) != total:
            self.drops.add("malformed_blob")
            self._partial.pop(blob_id, None)
            return None
        buffer[offset : offset + len(chunk)] = chunk
        filled += len(chunk)
        if filled >= total:
            self._partial.pop(blob_id, None)
            return Received(frame=frame, op=op, blob=bytes(buffer))
        self._partial[blob_id] = (op, buffer, filled)
        return None

    async def expect(self, *ops: Op, timeout: float) -> Received:
        """The next blob, which must be one of ``ops`` (others are dropped and counted)."""
        async with asyncio.timeout(timeout):
            while True:
                got = await self.receive(timeout=timeout)
                if got.op in ops:
                    return got
                self.drops.add("unexpected")

    async def close(self) -> None:
        """Close the link (never raises)."""
        await self.link.close()
