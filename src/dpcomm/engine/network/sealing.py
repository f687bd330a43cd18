"""Payloads sealed end to end for their target (PyNaCl ``SealedBox``), real and dummy alike.

A scrambler forwards sealed blobs it cannot open: it sees neither the contents nor whether a
message is a dummy. Every plaintext is padded to the same ``payload_size`` before sealing::

    kind    1 byte   REAL (1) or DUMMY (2)
    length  4 bytes  uint32, big-endian
    content length bytes, then zero padding up to payload_size

so every sealed blob is ``payload_size + SEAL_OVERHEAD`` bytes. A dummy is built the same way
with random content; the target opens it and `open_payload` returns None. Only PyNaCl
primitives are used (X25519 + XSalsa20-Poly1305 with an ephemeral sender key).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from enum import IntEnum

import nacl.bindings
import nacl.exceptions
import nacl.public

from dpcomm.errors import DpcommError, InvalidParameterError

SEAL_OVERHEAD: int = nacl.bindings.crypto_box_SEALBYTES
"""Bytes a SealedBox adds: an ephemeral X25519 public key (32) and a Poly1305 tag (16)."""
_PLAIN_HEADER = struct.Struct(">BI")
PAYLOAD_HEADER_SIZE = _PLAIN_HEADER.size
"""Bytes of kind and length before the content (5)."""
KEY_SIZE = 32


class PayloadKind(IntEnum):
    """Whether a sealed payload carries data or is a dummy."""

    REAL = 1
    DUMMY = 2


class SealError(DpcommError):
    """A sealed blob cannot be opened with this key or its plaintext is malformed."""


def _check_payload_size(payload_size: int) -> int:
    if (
        isinstance(payload_size, bool)
        or not isinstance(payload_size, int)
        or not PAYLOAD_HEADER_SIZE <= payload_size <= 2**32 - 1
    ):
        raise InvalidParameterError(
            "payload_size", f"an integer >= {PAYLOAD_HEADER_SIZE}", payload_size
        )
    return payload_size


def max_content_size(payload_size: int) -> int:
    """The longest payload `seal_payload` accepts for ``payload_size`` (minus 5 bytes)."""
    return _check_payload_size(payload_size) - PAYLOAD_HEADER_SIZE


def sealed_size(payload_size: int) -> int:
    """The length of every sealed blob for ``payload_size``: ``payload_size + 48``."""
    return _check_payload_size(payload_size) + SEAL_OVERHEAD


def payload_size_for(content_size: int) -> int:
    """The ``payload_size`` that fits a payload of ``content_size`` bytes."""
    if isinstance(content_size, bool) or not isinstance(content_size, int) or content_size < 0:
        raise InvalidParameterError("content_size", "an integer >= 0", content_size)
    return content_size + PAYLOAD_HEADER_SIZE


@dataclass(frozen=True, kw_only=True)
class TargetKeys:
    """A target's X25519 key pair; sources seal to `public_key`, the target opens."""

    private_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.private_key, bytes) or len(self.private_key) != KEY_SIZE:
            raise InvalidParameterError("private_key", "32 bytes", "<redacted>")

    @classmethod
    def generate(cls) -> TargetKeys:
        """A fresh key pair."""
        return cls(private_key=bytes(nacl.public.PrivateKey.generate()))

    @property
    def public_key(self) -> bytes:
        """The 32-byte public key sources seal to."""
        return bytes(nacl.public.PrivateKey(self.private_key).public_key)

    def nacl_private_key(self) -> nacl.public.PrivateKey:
        """The PyNaCl private key object."""
        return nacl.public.PrivateKey(self.private_key)


def _public_key(public_key_bytes: bytes) -> nacl.public.PublicKey:
    if not isinstance(public_key_bytes, bytes) or len(public_key_bytes) != KEY_SIZE:
        raise InvalidParameterError("public_key_bytes", "32 bytes", public_key_bytes)
    return nacl.public.PublicKey(public_key_bytes)


def _seal(public_key_bytes: bytes, plaintext: bytes) -> bytes:
    return bytes(nacl.public.SealedBox(_public_key(public_key_bytes)).encrypt(plaintext))


def seal_payload(public_key_bytes: bytes, payload: bytes, *, payload_size: int) -> bytes:
    """Pad ``payload`` to ``payload_size`` (kind REAL, length, zeros) and seal it for the key.

    Raises InvalidParameterError if the payload is longer than ``payload_size - 5``.
    """
    capacity = max_content_size(payload_size)
    if not isinstance(payload, bytes):
        raise InvalidParameterError("payload", "bytes", type(payload).__name__)
    if len(payload) > capacity:
        raise InvalidParameterError(
            "payload", f"at most {capacity} bytes for payload_size {payload_size}", len(payload)
        )
    plaintext = (
        _PLAIN_HEADER.pack(PayloadKind.REAL, len(payload))
        + payload
        + bytes(capacity - len(payload))
    )
    return _seal(public_key_bytes, plaintext)


def make_dummy(public_key_bytes: bytes, *, payload_size: int) -> bytes:
    """A sealed dummy for the key: kind DUMMY and random content filling ``payload_size``."""
    capacity = max_content_size(payload_size)
    plaintext = _PLAIN_HEADER.pack(PayloadKind.DUMMY, capacity) + os.urandom(capacity)
    return _seal(public_key_bytes, plaintext)


def open_payload(
    private_key: TargetKeys | nacl.public.PrivateKey | bytes,
    sealed: bytes,
    *,
    payload_size: int | None = None,
) -> bytes | None:
    """Open a sealed blob: the payload, or None for a dummy.

    Raises `SealError` if the blob was not sealed for this key, was altered, or its
    plaintext is malformed (unknown kind, length beyond the padding, non-zero padding, or a
    size other than ``payload_size`` when given).
    """
    if isinstance(private_key, TargetKeys):
        key = private_key.nacl_private_key()
    elif isinstance(private_key, nacl.public.PrivateKey):
        key = private_key
    elif isinstance(private_key, bytes) and len(private_key) == KEY_SIZE:
        key = nacl.public.PrivateKey(private_key)
    else:
        raise InvalidParameterError("private_key", "TargetKeys, PrivateKey or 32 bytes", "<key>")
    if not isinstance(sealed, bytes | bytearray | memoryview):
        raise SealError(f"sealed blob must be bytes, got {type(sealed).__name__}")
    sealed = bytes(sealed)
    if payload_size is not None and len(sealed) != sealed_size(payload_size):
        raise SealError(f"sealed blob is {len(sealed)} bytes, not {sealed_size(payload_size)}")
    if len(sealed) < SEAL_OVERHEAD + PAYLOAD_HEADER_SIZE:
        raise SealError(f"sealed blob too short ({len(sealed)} bytes)")
    try:
        plaintext = nacl.public.SealedBox(key).decrypt(sealed)
    except nacl.exceptions.CryptoError as error:
        raise SealError("sealed blob cannot be opened with this key") from error
    kind, length = _PLAIN_HEADER.unpack_from(plaintext)
    end = PAYLOAD_HEADER_SIZE + length
    if end > len(plaintext):
        raise SealError(f"payload length {length} exceeds the padded size")
    if kind == PayloadKind.DUMMY:
        return None
    if kind != PayloadKind.REAL:
        raise SealError(f"unknown payload kind {kind}")
    if plaintext.count(0, end) != len(plaintext) - end:
        raise SealError("non-zero padding after the payload")
    return plaintext[PAYLOAD_HEADER_SIZE:end]
