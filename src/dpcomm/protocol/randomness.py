"""One derivation of every random draw of a run, per (seed, round, role, flow, purpose, node).

Every engine draws a node's randomness from the same place, so that with the same seed the
simulator (all nodes of a role at once), the networked runtime (each node on its own) and any
later engine make the very same draws, and "same seed, same run" can be tested.

A *stream* names a purpose of one role in one flow (e.g. the sampling step R_σ of the sources of
grouping set (A)) and how many uniforms each node draws from it. Node i of a stream reads the
AES-256 keystream of the stream's key in counter mode, from block i·⌈per_node/2⌉ on (each
16-byte block gives two 64-bit words, each word one uniform in [0, 1) with 53 random bits), so
any node's draws are computed alone in microseconds and all nodes' at once in one call.

* With a seed (for reproducible tests and experiments only), the stream key is SHA-256 of the
  seed, the round, the role, the flow and the purpose: anyone who knows the seed can recompute
  every draw, so the privacy guarantee does not hold against them.
* Without a seed, every stream key is 32 bytes of fresh operating-system entropy, drawn anew
  for each [`Randomness`][] (one per node and round in a deployment): AES-CTR under a
  secret random key is a cryptographically secure generator.

The cipher is the ``cryptography`` package's (OpenSSL): nothing here is home-made crypto.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.model import ROLES as PLAN_ROLES, Role as PlanRole
from dpcomm.validation import check_int, check_seed

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Role = Literal["coordinator"] | PlanRole
#: Every role that draws: the plan's, and the coordinator of a deployed round.
ROLES: tuple[Role, ...] = ("coordinator", *PLAN_ROLES)
_DOMAIN = b"dpcomm/randomness/v1"
_BLOCK = 16
#: Node indices per keystream when the nodes asked for are scattered.
_WINDOW = 1 << 16


@dataclass(frozen=True)
class Stream:
    """The draws of one role for one purpose in one flow.

    Attributes:
        role: the role that draws (its nodes are numbered within the flow's group).
        flow: the flow (plan flow name) the draws serve.
        purpose: what the draws decide (``"sample"``, ``"flood"``, ``"dummies"``, ...).
        per_node: uniforms each node draws (a node may use fewer; never more).
    """

    role: Role
    flow: str
    purpose: str
    per_node: int

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidParameterError("role", f"one of {', '.join(ROLES)}", self.role)
        check_int("per_node", self.per_node, minimum=0)

    @property
    def blocks_per_node(self) -> int:
        """AES blocks per node: ⌈per_node/2⌉ (two 64-bit words per block)."""
        return -(-self.per_node // 2)


class Randomness:
    """Where every draw of one run (or of one node in one round) comes from.

    Args:
        seed: an integer in [0, 2^127 − 1] for a reproducible run, or None for fresh
            operating-system entropy (the default of every deployment).
        round: the round number (0 for a single run); seeded draws differ between rounds.
    """

    def __init__(self, seed: int | None = None, *, round: int = 0) -> None:
        self.seed = None if seed is None else check_seed(seed)
        self.round = check_int("round", round, minimum=0)
        self._keys: dict[tuple[str, str, str], bytes] = {}

    def _key(self, stream: Stream) -> bytes:
        name = (stream.role, stream.flow, stream.purpose)
        key = self._keys.get(name)
        if key is None:
            if self.seed is None:
                key = os.urandom(32)
            else:
                digest = hashlib.sha256(_DOMAIN)
                digest.update(self.seed.to_bytes(16, "big"))
                digest.update(struct.pack(">Q", self.round))
                for part in name:
                    encoded = part.encode("utf-8")
                    digest.update(struct.pack(">I", len(encoded)) + encoded)
                key = digest.digest()
            self._keys[name] = key
        return key

    def derive(self, *streams: Stream) -> None:
        """Fix the keys of ``streams`` now (a no-op for keys already derived).

        Without a seed a key is drawn on first use: an engine that sends copies of this object
        to other processes derives the keys first, so that every copy draws from one key per
        stream (the nodes of a stream then draw as they would in one process).
        """
        for stream in streams:
            self._key(stream)

    def _keystream(self, key: bytes, first_block: int, blocks: int) -> npt.NDArray[np.uint64]:
        encryptor = Cipher(
            algorithms.AES(key), modes.CTR(first_block.to_bytes(_BLOCK, "big"))
        ).encryptor()
        data = encryptor.update(bytes(blocks * _BLOCK)) + encryptor.finalize()
        return np.frombuffer(data, dtype="<u8")

    def words(self, stream: Stream, nodes: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """The 64-bit words of ``nodes`` (1-D node indices >= 0): shape (len(nodes), per_node)."""
        return self._words(stream, nodes, copy=True)

    def _words(self, stream: Stream, nodes: npt.ArrayLike, *, copy: bool) -> npt.NDArray[np.uint64]:
        """`words`; without ``copy``, possibly a read-only view of the keystream's bytes."""
        indices = np.asarray(nodes, dtype=np.int64).reshape(-1)
        width = stream.per_node
        if indices.size == 0 or width == 0:
            return np.zeros((indices.size, width), dtype=np.uint64)
        # Increasing nodes (a run's, a chunk's) have their least first and their largest last.
        increasing = bool(np.all(indices[1:] > indices[:-1]))
        if increasing:
            low, high = int(indices[0]), int(indices[-1])
        else:
            low, high = int(indices.min()), int(indices.max())
        if low < 0:
            raise InvalidParameterError("nodes", "node indices >= 0", low)
        key = self._key(stream)
        blocks = stream.blocks_per_node
        if high - low + 1 <= 2 * indices.size:
            # One keystream over the covering range, then the rows of the nodes asked for.
            data = self._keystream(key, low * blocks, (high - low + 1) * blocks)
            table = data.reshape(high - low + 1, 2 * blocks)[:, :width]
            if increasing and indices.size == high - low + 1:
                # low, low + 1, ..., high in order (all nodes of a run, or a run of them): the
                # table itself (copied once if asked to) rather than gathered row by row.
                return np.array(table) if copy else table
            return np.ascontiguousarray(table[indices - low])
        # Scattered nodes (a Dask partition's sources, spread by the scramblers' assignment):
        # one keystream per window of node indices that holds any, from its first node to its
        # last, so a window costs at most _WINDOW nodes' blocks and a lone node its own.
        order = np.argsort(indices, kind="stable")
        ordered = indices[order]
        cuts = np.flatnonzero(np.diff(ordered // _WINDOW)) + 1
        result = np.empty((indices.size, width), dtype=np.uint64)
        for positions in np.split(np.arange(indices.size), cuts):
            chunk = ordered[positions]
            first, last = int(chunk[0]), int(chunk[-1])
            data = self._keystream(key, first * blocks, (last - first + 1) * blocks)
            table = data.reshape(last - first + 1, 2 * blocks)[:, :width]
            result[order[positions]] = table[chunk - first]
        return result

    def uniforms(self, stream: Stream, nodes: npt.ArrayLike) -> FloatArray:
        """Uniforms in [0, 1) with 53 random bits: shape (len(nodes), per_node)."""
        # The top 53 bits of each word (a new array), then a double exactly, times 2^-53.
        shifted = np.right_shift(self._words(stream, nodes, copy=False), np.uint64(11))
        result: FloatArray = shifted.astype(np.float64)
        result *= 2.0**-53
        return result


def uniform_integers(uniforms: npt.ArrayLike, upper: int | npt.ArrayLike) -> IntArray:
    """⌊u · upper⌋ for uniforms u in [0, 1): uniform integers in [0, upper) (bias < 2^-50)."""
    values = np.floor(np.asarray(uniforms, dtype=np.float64) * np.asarray(upper)).astype(np.int64)
    result: IntArray = np.minimum(values, np.asarray(upper, dtype=np.int64) - 1)
    return result


def permutation_from(uniforms: npt.ArrayLike) -> IntArray:
    """A uniformly random permutation: the order that sorts i.i.d. uniforms (ties: index)."""
    result: IntArray = np.argsort(np.asarray(uniforms, dtype=np.float64), kind="stable").astype(
        np.int64
    )
    return result
