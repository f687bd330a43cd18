"""The versioned, fixed-length wire frame, the replay cache and the drop counters.

Every frame of a deployment has the same total length (``frame_size``), so the TLS records an
observer sees all have the same length whatever a frame carries (Section 2.3: the adversary
"cannot distinguish between a true message and a random message of the same size"). Layout,
big-endian (`HEADER_SIZE` = 32 bytes of header)::

    magic   2 bytes  b"DC"
    version 1 byte   FRAME_VERSION
    kind    1 byte   FrameKind
    round   8 bytes  uint64 round id
    msg id 16 bytes  random message id
    length  4 bytes  uint32 body length
    body    length bytes, then zero padding up to frame_size

`decode_frame` rejects anything else with a `FrameError` whose ``reason`` is one of
`FRAME_ERROR_REASONS`; it never raises anything else on bytes input.
"""

from __future__ import annotations

import asyncio
import os
import re
import struct
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from dpcomm.errors import DpcommError, InvalidParameterError

MAGIC = b"DC"
FRAME_VERSION = 1
MESSAGE_ID_SIZE = 16
_HEADER = struct.Struct(">2sBBQ16sI")
HEADER_SIZE = _HEADER.size
"""Bytes of the header before the body (32)."""
MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Largest frame_size a deployment may use (16 MiB), so a peer cannot make a node buffer more."""
_MAX_ROUND_ID = 2**64 - 1

FRAME_ERROR_REASONS = ("truncated", "oversized", "magic", "version", "kind", "length", "padding")
"""Why `decode_frame` or `read_frame` dropped a frame."""


class FrameKind(IntEnum):
    """What a frame carries."""

    PLAN = 1
    DATA = 2
    ACK = 3
    CENTROIDS = 4
    CLOSE = 5
    RESULT = 6


class FrameError(DpcommError):
    """A malformed frame; ``reason`` is one of `FRAME_ERROR_REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in FRAME_ERROR_REASONS:
            raise InvalidParameterError("reason", f"one of {FRAME_ERROR_REASONS}", reason)
        self.reason = reason
        super().__init__(f"malformed frame ({reason})" + (f": {detail}" if detail else ""))


class StreamClosedError(DpcommError, EOFError):
    """The peer closed the stream cleanly between two frames (not a malformed frame)."""


def new_message_id() -> bytes:
    """A fresh random message id (16 bytes from the operating system's CSPRNG)."""
    return os.urandom(MESSAGE_ID_SIZE)


def _check_frame_size(frame_size: int) -> int:
    if (
        isinstance(frame_size, bool)
        or not isinstance(frame_size, int)
        or not HEADER_SIZE <= frame_size <= MAX_FRAME_SIZE
    ):
        raise InvalidParameterError(
            "frame_size", f"an integer in [{HEADER_SIZE}, {MAX_FRAME_SIZE}]", frame_size
        )
    return frame_size


def frame_size_for(body_size: int) -> int:
    """The frame size that holds a body of ``body_size`` bytes (header + body)."""
    if isinstance(body_size, bool) or not isinstance(body_size, int) or body_size < 0:
        raise InvalidParameterError("body_size", "an integer >= 0", body_size)
    return _check_frame_size(HEADER_SIZE + body_size)


@dataclass(frozen=True, kw_only=True)
class Frame:
    """One decoded frame: kind, round id, 16-byte message id and body (without padding)."""

    kind: FrameKind
    round_id: int
    message_id: bytes
    body: bytes = b""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FrameKind):
            try:
                object.__setattr__(self, "kind", FrameKind(self.kind))
            except ValueError as error:
                raise InvalidParameterError(
                    "kind", f"one of {[k.name for k in FrameKind]}", self.kind
                ) from error
        if (
            isinstance(self.round_id, bool)
            or not isinstance(self.round_id, int)
            or not 0 <= self.round_id <= _MAX_ROUND_ID
        ):
            raise InvalidParameterError("round_id", "an integer in [0, 2^64 - 1]", self.round_id)
        if not isinstance(self.message_id, bytes) or len(self.message_id) != MESSAGE_ID_SIZE:
            raise InvalidParameterError("message_id", "16 bytes", self.message_id)
        if not isinstance(self.body, bytes):
            raise InvalidParameterError("body", "bytes", type(self.body).__name__)

    @classmethod
    def new(cls, kind: FrameKind, *, round_id: int, body: bytes = b"") -> Frame:
        """A frame with a fresh random message id."""
        return cls(kind=kind, round_id=round_id, message_id=new_message_id(), body=body)


def encode_frame(frame: Frame, *, frame_size: int) -> bytes:
    """The ``frame_size`` bytes of ``frame`` on the wire (body zero-padded)."""
    _check_frame_size(frame_size)
    capacity = frame_size - HEADER_SIZE
    if len(frame.body) > capacity:
        raise InvalidParameterError(
            "frame.body", f"at most {capacity} bytes for frame_size {frame_size}", len(frame.body)
        )
    header = _HEADER.pack(
        MAGIC, FRAME_VERSION, int(frame.kind), frame.round_id, frame.message_id, len(frame.body)
    )
    return header + frame.body + bytes(capacity - len(frame.body))


_KINDS = frozenset(int(kind) for kind in FrameKind)


def decode_frame(data: bytes, *, frame_size: int) -> Frame:
    """Parse one frame of exactly ``frame_size`` bytes; raise `FrameError` if malformed."""
    _check_frame_size(frame_size)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise FrameError("length", f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < frame_size:
        raise FrameError("truncated", f"{len(data)} of {frame_size} bytes")
    if len(data) > frame_size:
        raise FrameError("oversized", f"{len(data)} > {frame_size} bytes")
    magic, version, kind, round_id, message_id, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise FrameError("magic")
    if version != FRAME_VERSION:
        raise FrameError("version", f"version {version}, expected {FRAME_VERSION}")
    if kind not in _KINDS:
        raise FrameError("kind", f"kind {kind}")
    end = HEADER_SIZE + length
    if end > frame_size:
        raise FrameError("length", f"body length {length} > {frame_size - HEADER_SIZE}")
    if data.count(0, end) != frame_size - end:
        raise FrameError("padding", "non-zero bytes after the body")
    return Frame(
        kind=FrameKind(kind), round_id=round_id, message_id=message_id, body=data[HEADER_SIZE:end]
    )


async def read_frame(reader: asyncio.StreamReader, *, frame_size: int) -> bytes:
    """Read exactly one frame's ``frame_size`` bytes from ``reader``.

    Raises `StreamClosedError` if the stream ends cleanly before the frame's first byte
    and ``FrameError('truncated')`` if it ends in the middle of a frame.
    """
    _check_frame_size(frame_size)
    try:
        return await reader.readexactly(frame_size)
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            raise StreamClosedError("the peer closed the stream") from None
        raise FrameError(
            "truncated", f"stream ended after {len(error.partial)} of {frame_size} bytes"
        ) from None


ReplayVerdict = Literal["fresh", "replay", "stale", "overflow", "replay_quota"]

DEFAULT_REPLAY_CAPACITY = 1 << 20
"""Ids a node's replay cache holds at most (its memory bound, about 100 MB when full)."""


class ReplayCache:
    """Remembers (round id, message id) pairs to reject replayed frames.

    ``window`` rounds are accepted: after `advance` to round r, frames of rounds older
    than ``r - window + 1`` are rejected as stale and their ids forgotten. At most ``capacity``
    ids are kept; to stay safe when full, the oldest rounds are forgotten *and* become stale
    (never is a replay accepted), and if the current rounds alone fill it, new ids are refused
    (``'overflow'``, an overload: the node as a whole is out of room).

    Ids are accounted per authenticated peer (the ``peer`` of `admit`): a peer may have
    at most ``peer_quota`` ids in the accepted rounds; beyond it, its new frames are refused
    (``'replay_quota'``, an attack: no honest peer sends more than the round plans) and only
    its own. An id is a replay whichever peer sent it first. With ``capacity`` at least the
    number of peers times ``peer_quota``, no peer's frames can crowd out another's; with fewer,
    it takes ``capacity / peer_quota`` peers colluding to fill the cache. ``peer_quota=None``:
    no quota per peer (the cache is shared first come, first served).
    """

    def __init__(
        self,
        *,
        capacity: int = DEFAULT_REPLAY_CAPACITY,
        window: int = 1,
        peer_quota: int | None = None,
    ) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InvalidParameterError("capacity", "an integer >= 1", capacity)
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidParameterError("window", "an integer >= 1", window)
        if peer_quota is not None and (
            isinstance(peer_quota, bool) or not isinstance(peer_quota, int) or peer_quota < 1
        ):
            raise InvalidParameterError("peer_quota", "an integer >= 1 or None", peer_quota)
        self.capacity = capacity
        self.window = window
        self.peer_quota = peer_quota
        self._floor = 0
        self._current: int | None = None
        self._seen: OrderedDict[int, set[bytes]] = OrderedDict()
        self._per_peer: dict[int, dict[str, int]] = {}
        self._size = 0

    @property
    def current_round(self) -> int | None:
        """The latest round passed to `advance` (None before the first)."""
        return self._current

    @property
    def oldest_round(self) -> int:
        """The oldest round id still accepted."""
        return self._floor

    def __len__(self) -> int:
        return self._size

    def held_by(self, peer: str) -> int:
        """Ids of ``peer`` held (over the accepted rounds)."""
        return sum(counts.get(peer, 0) for counts in self._per_peer.values())

    def advance(self, round_id: int) -> None:
        """Make ``round_id`` the current round (never moves backwards); forget stale rounds."""
        if isinstance(round_id, bool) or not isinstance(round_id, int) or round_id < 0:
            raise InvalidParameterError("round_id", "an integer >= 0", round_id)
        if self._current is not None and round_id <= self._current:
            return
        self._current = round_id
        self._raise_floor(max(self._floor, round_id - self.window + 1))

    def _raise_floor(self, floor: int) -> None:
        self._floor = floor
        for old in [r for r in self._seen if r < floor]:
            self._size -= len(self._seen.pop(old))
            self._per_peer.pop(old, None)

    def admit(self, round_id: int, message_id: bytes, peer: str | None = None) -> ReplayVerdict:
        """Record the pair (sent by ``peer``) and say ``'fresh'``, or say why it is rejected."""
        if round_id < self._floor:
            return "stale"
        ids = self._seen.get(round_id)
        if ids is not None and message_id in ids:
            return "replay"
        if (
            peer is not None
            and self.peer_quota is not None
            and self.held_by(peer) >= self.peer_quota
        ):
            return "replay_quota"
        if self._size >= self.capacity:
            older = sorted(r for r in self._seen if r < round_id)
            if not older:
                return "overflow"
            self._raise_floor(older[0] + 1)
            if round_id < self._floor:  # pragma: no cover - older[0] < round_id
                return "stale"
            ids = self._seen.get(round_id)
        if ids is None:
            ids = self._seen[round_id] = set()
        ids.add(message_id)
        if peer is not None:
            counts = self._per_peer.setdefault(round_id, {})
            counts[peer] = counts.get(peer, 0) + 1
        self._size += 1
        return "fresh"


_REASON = re.compile(r"[a-z][a-z0-9_]*")

ATTACK_REASONS = frozenset(
    {
        "handshake",
        "no_hello",
        "handshake_timeout",
        "stalled",
        "unauthorized",
        "peer_links",
        "oversized_blob",
        "partial_blobs",
        "replay_quota",
        "malformed_tuple",
        "repeated_ciphertext",
        "unrouted_data",
        "round_mismatch",
        "oversized_batch",
        "junk_quota",
    }
)
"""Drop reasons that only a misbehaving peer causes: a failed, timed-out or stalled TLS handshake, a
connection closed before its first byte, a name a node does not expect, too many links under one
name, a blob larger than the protocol sends, too many blobs in reassembly at once, more frames than
the round plans for one peer, a sealed tuple that does not decode, one ciphertext relayed twice,
data from a peer the plan does not route it from, a HELLO for another round's spec, a batch larger
than the plan's largest, more junk frames than a channel drops."""

OVERLOAD_REASONS = frozenset({"pending_cap", "pending_share", "connection_rate", "overflow"})
"""Drop reasons of a node out of room, whoever caused it: connections refused because too many
handshakes are under way or arrive too fast, a handshake evicted because its address held more
than its share of the listener, a full replay cache."""


def split_drops(drops: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, dict[str, int]]]:
    """Per-node drop counts split into ``{"attacks": ..., "overload": ...}``.

    ``drops`` is ``{node: {reason: count}}`` (a round report's ``dropped``); the split keeps
    the reasons of `ATTACK_REASONS` and `OVERLOAD_REASONS` (nodes without any left
    out).
    """
    split: dict[str, dict[str, dict[str, int]]] = {"attacks": {}, "overload": {}}
    for key, reasons in (("attacks", ATTACK_REASONS), ("overload", OVERLOAD_REASONS)):
        for node, counts in sorted(drops.items()):
            kept = {r: n for r, n in sorted(counts.items()) if r in reasons and n}
            if kept:
                split[key][node] = kept
    return split


class DropCounters:
    """How many frames or connections a node dropped, per reason (e.g. ``'replay'``)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, reason: str, count: int = 1) -> None:
        """Count ``count`` drops for ``reason`` (a lower-case identifier)."""
        if not isinstance(reason, str) or _REASON.fullmatch(reason) is None:
            raise InvalidParameterError("reason", "a lower-case identifier", reason)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidParameterError("count", "an integer >= 0", count)
        self._counts[reason] = self._counts.get(reason, 0) + count

    def count_error(self, error: FrameError) -> None:
        """Count a `FrameError` under its reason."""
        self.add(error.reason)

    def __getitem__(self, reason: str) -> int:
        return self._counts.get(reason, 0)

    @property
    def total(self) -> int:
        """Drops over all reasons."""
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        """A copy of the counts, sorted by reason."""
        return dict(sorted(self._counts.items()))

    def attacks(self) -> dict[str, int]:
        """The counts of `ATTACK_REASONS` (a misbehaving peer), sorted by reason."""
        return {r: n for r, n in self.as_dict().items() if r in ATTACK_REASONS and n}

    def overload(self) -> dict[str, int]:
        """The counts of `OVERLOAD_REASONS` (a node out of room), sorted by reason."""
        return {r: n for r, n in self.as_dict().items() if r in OVERLOAD_REASONS and n}

    def __repr__(self) -> str:
        return f"DropCounters({self.as_dict()})"
