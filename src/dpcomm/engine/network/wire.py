"""The wire format of a round: fixed-length frames over a link, control blobs, counting.

A `Channel` is one link (`dpcomm.engine.network.transport`) between two named
nodes. It writes and reads frames of the round's single ``frame_size``, counts every frame and
byte it writes (per link), checks the round id and the replay cache of the receiving node on
every frame, and drops (and counts) malformed, stale and replayed frames. A DATA frame's body
starts with `DATA_HEADER`: the routed flow the message belongs to and the index of the
target (compute node) its sealed payload is for.

Control messages (plan, acknowledgements, commits, partial results) are *blobs*: a 1-byte
operation and a payload cut into as many fixed-length frames as needed, so that control and
data frames have the same length on the wire.

Resources a peer can make a channel hold are bounded (`ChannelLimits`): a blob may not
declare more bytes than the protocol sends for its operation (``oversized_blob``), its buffer
grows with the chunks that arrive (never to the declared size up front), and at most
``max_partial_blobs`` blobs are in reassembly at once per channel (``partial_blobs``); either
closes the channel. A peer past its quota of fresh frames in the node's replay cache
(`dpcomm.engine.network.frames.ReplayCache`, ``replay_quota``) has its channel closed
too; other peers' frames are still accepted.
"""

from __future__ import annotations

import asyncio
import struct
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from dpcomm.engine.network.frames import (
    HEADER_SIZE,
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
from dpcomm.engine.network.records import LinkRecord, MessageRecord, WireRecord
from dpcomm.engine.network.transport import Link, LinkClosedError
from dpcomm.errors import DpcommError, InvalidParameterError

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
    OPEN = 14
    WINDOW = 15


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
    Op.OPEN: FrameKind.CLOSE,
    Op.WINDOW: FrameKind.PLAN,
    Op.OUTPUT: FrameKind.RESULT,
}


class ChannelClosedError(DpcommError):
    """The peer closed the channel (or it broke) before the expected message arrived."""


DEFAULT_MAX_BLOB = 16 * 1024 * 1024
"""Largest blob a channel reassembles by default (16 MiB): plans, FINALIZE and OUTPUT blobs."""
SMALL_BLOB = 4096
"""Largest blob of the operations whose payload is empty or a few fields of JSON."""
HELLO_BLOB = 64 * 1024
"""Largest HELLO (a node's address and keys, as JSON)."""
DEFAULT_MAX_JUNK_FRAMES = 16
"""Junk frames (malformed, or of another round) a channel drops before it closes."""
DEFAULT_MAX_PARTIAL_BLOBS = 2
"""Blobs in reassembly at once per channel (an honest sender writes one blob at a time)."""

PROTOCOL_BLOB_LIMITS: Mapping[Op, int] = {
    **dict.fromkeys(
        (
            Op.ACK,
            Op.REJECT,
            Op.PREPARE,
            Op.PREPARED,
            Op.COMMITTED,
            Op.ABORTED,
            Op.DONE,
            Op.OPEN,
            Op.WINDOW,
        ),
        SMALL_BLOB,
    ),
    # A HELLO; a COMMIT with a scrambler's members as bits; a CLOSE with the round's summary.
    **dict.fromkeys((Op.HELLO, Op.COMMIT, Op.CLOSE), HELLO_BLOB),
}
"""Per operation, the largest blob the protocol sends (PLAN, FINALIZE and OUTPUT: ``max_blob``)."""


@dataclass(frozen=True, kw_only=True)
class ChannelLimits:
    """What one peer can make a channel hold while it reassembles blobs.

    Attributes:
        max_blob: the largest blob accepted (bytes), whatever its operation; set it from the
            round's spec for the node's role (e.g. the padded size of the OUTPUT blobs it
            receives). Default `DEFAULT_MAX_BLOB`.
        max_blob_by_op: tighter caps per operation (default `PROTOCOL_BLOB_LIMITS`).
        max_partial_blobs: blobs in reassembly at once (default
            `DEFAULT_MAX_PARTIAL_BLOBS`).
        max_junk_frames: malformed frames or blobs, or frames of another round, a channel
            drops before it closes (default `DEFAULT_MAX_JUNK_FRAMES`): TLS delivers an
            honest peer's frames intact, so junk comes from a misbehaving peer only.

    A channel holds at most ``max_partial_blobs`` buffers, each at most the bytes the peer
    actually sent for it and never more than its operation's cap.
    """

    max_blob: int = DEFAULT_MAX_BLOB
    max_blob_by_op: Mapping[Op, int] = field(default_factory=lambda: dict(PROTOCOL_BLOB_LIMITS))
    max_partial_blobs: int = DEFAULT_MAX_PARTIAL_BLOBS
    max_junk_frames: int = DEFAULT_MAX_JUNK_FRAMES

    def __post_init__(self) -> None:
        for name, value in (
            ("max_blob", self.max_blob),
            ("max_partial_blobs", self.max_partial_blobs),
            ("max_junk_frames", self.max_junk_frames),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(name, "an integer >= 1", value)

    def blob_limit(self, op: Op) -> int:
        """The largest blob of operation ``op`` accepted."""
        return min(self.max_blob, self.max_blob_by_op.get(op, self.max_blob))


BASE_BLOB = 1 << 20
"""The part of `channel_limits_for`'s blob cap that does not grow with the round."""
BLOB_BYTES_PER_NODE = 512
"""Per node of the round, bytes a blob may hold on top of twice the payload size."""


OUTPUT_BLOB_HEADER = 4
"""Bytes before a program's output in an OUTPUT blob: the data flow and the target index."""

CONTROL_FRAMES_PER_BLOB_CAP = 4
"""Blobs of the largest size one peer may send a node in a round, in `peer_frame_quota`."""


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

    def record(self) -> WireRecord:
        """What was measured, as a record for the launcher."""
        return WireRecord(
            sent=tuple(
                LinkRecord(s, r, c.frames, c.data_frames, c.bytes)
                for (s, r), c in self.sent.items()
            ),
            received=tuple(
                LinkRecord(s, r, c.frames, c.data_frames, c.bytes)
                for (s, r), c in self.received.items()
            ),
            frame_lengths=tuple(sorted(self.frame_lengths)),
            drops={name: d.as_dict() for name, d in self.drops.items() if d.total},
            messages=tuple(MessageRecord(f, s, r, n) for (f, s, r), n in self.messages.items()),
            dummies=dict(self.dummies),
        )


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
        limits: ChannelLimits | None = None,
    ) -> None:
        self.link = link
        self.local = link.local
        self.peer = link.peer
        self.frame_size = frame_size
        self.round_id = round_id
        self.stats = stats
        self.replay = replay
        self.limits = limits if limits is not None else ChannelLimits()
        self._partial: dict[int, tuple[Op, int, bytearray]] = {}
        self._blob_ids = 0
        self._junk_frames = 0

    @property
    def drops(self) -> DropCounters:
        """The drop counters of the local node."""
        return self.stats.drops[self.local]

    @property
    def blob_capacity(self) -> int:
        """Payload bytes per blob frame."""
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
            async with asyncio.timeout(timeout):
                await self.link.drain(timeout=timeout)
        except LinkClosedError as error:
            raise ChannelClosedError(str(error)) from error

    async def receive(self, *, timeout: float) -> Received:
        """The next fresh, well-formed frame or complete blob from the peer.

        Malformed frames, frames of another round, replayed frames and malformed blobs are
        dropped and counted under the local node. Raises ChannelClosedError when the stream
        ends or breaks, or after counting an attack by the peer (``oversized_blob``,
        ``partial_blobs``, ``replay_quota``, ``junk_quota``: see `ChannelLimits`);
        TimeoutError after
        ``timeout`` seconds.
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
                    self._junk(error.reason)
                    continue
                if frame.round_id != self.round_id:
                    self._junk("wrong_round")
                    continue
                verdict = self.replay.admit(frame.round_id, frame.message_id, self.peer)
                if verdict == "replay_quota":
                    self.drops.add(verdict)
                    raise ChannelClosedError(f"{self.peer}: past its quota of frames")
                if verdict != "fresh":
                    self.drops.add(verdict)
                    if verdict == "replay" and frame.kind == FrameKind.DATA:
                        # Handed back so that a retry can be acknowledged again (idempotent).
                        return Received(frame=frame, replayed=True)
                    continue
                if frame.kind == FrameKind.DATA:
                    counts.data_frames += 1
                    if len(frame.body) < DATA_HEADER.size:
                        self._junk("malformed_data")
                        continue
                    return Received(frame=frame)
                complete = self._assemble(frame)
                if complete is not None:
                    return complete

    def _junk(self, reason: str) -> None:
        """Count a junk frame; past ``max_junk_frames`` the channel closes (an attack)."""
        self.drops.add(reason)
        self._junk_frames += 1
        if self._junk_frames > self.limits.max_junk_frames:
            self.drops.add("junk_quota")
            raise ChannelClosedError(
                f"{self.peer}: more than {self.limits.max_junk_frames} junk frames"
            )

    def _assemble(self, frame: Frame) -> Received | None:
        if len(frame.body) < BLOB_HEADER.size:
            self._junk("malformed_blob")
            return None
        raw_op, blob_id, total, offset = BLOB_HEADER.unpack_from(frame.body)
        chunk = frame.body[BLOB_HEADER.size :]
        try:
            op = Op(raw_op)
        except ValueError:
            self._junk("malformed_blob")
            return None
        if _KIND_OF_OP[op] != frame.kind:
            self._junk("malformed_blob")
            return None
        if total > self.limits.blob_limit(op):
            self.drops.add("oversized_blob")
            raise ChannelClosedError(
                f"{self.peer}: a {op.name} blob of {total} bytes (at most "
                f"{self.limits.blob_limit(op)})"
            )
        known = self._partial.pop(blob_id, None)
        if known is None:
            if offset != 0:
                self._junk("malformed_blob")
                return None
            if len(self._partial) >= self.limits.max_partial_blobs:
                self.drops.add("partial_blobs")
                raise ChannelClosedError(
                    f"{self.peer}: more than {self.limits.max_partial_blobs} blobs at once"
                )
            # Grows with the chunks that arrive: never allocated to the declared size.
            known = (op, total, bytearray())
        stored_op, stored_total, buffer = known
        if (
            stored_op != op
            or stored_total != total
            or offset != len(buffer)
            or offset + len(chunk) > total
            or (total and not chunk)
        ):
            # Chunks of a blob arrive in order on one link: anything else is malformed.
            self._junk("malformed_blob")
            return None
        buffer += chunk
        if len(buffer) >= total:
            return Received(frame=frame, op=op, blob=bytes(buffer))
        self._partial[blob_id] = known
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
