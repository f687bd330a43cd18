"""The two-phase batch commit of a round, as pure state machines (no sockets, no clocks).

A batch (a scrambler's n_k + d messages, or a source's d + 1 messages sent straight to the
targets) must reach the targets whole or not at all, and at most once, or the traffic would no
longer be that of the mechanism the accountant analysed:

1. the batch sender writes its DATA frames to every target, then PREPARE (how many frames
   and a digest of their message ids) to each; a target answers PREPARED when what it holds from
   that sender matches (`BatchIntake`);
2. once every target is prepared the sender asks the coordinator to COMMIT; the coordinator is
   the single commit point (`BatchCommit`): a batch counts iff the coordinator recorded its
   commit before finalizing the flow;
3. the coordinator's FINALIZE names the committed senders; a target opens and counts only their
   frames, and discards the rest (a scrambler that died mid-forward loses its batch whole).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from dpcomm.errors import InvalidParameterError

Item = TypeVar("Item")
HoldVerdict = Literal["held", "after_prepare", "duplicate"]


def batch_digest(message_ids: Iterable[bytes]) -> bytes:
    """The digest a PREPARE carries: SHA-256 of the sorted message ids of the frames sent."""
    return hashlib.sha256(b"".join(sorted(message_ids))).digest()


@dataclass
class BatchCommit:
    """The coordinator's decision for the batches of one flow.

    Attributes:
        senders: the batch senders expected (scramblers, or sources sending directly).
        committed: senders whose COMMIT was accepted.
        lost: senders that hung up (or were undecided at FINALIZE) without committing.
        refused: senders whose COMMIT came too late, or that are not batch senders.
        finalized: True once FINALIZE was decided; no commit is accepted after it.
    """

    senders: frozenset[str]
    committed: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    finalized: bool = False

    def request(self, sender: str) -> bool:
        """A COMMIT from ``sender``: True (COMMITTED) or False (ABORTED)."""
        if sender in self.committed:
            return True
        if sender in self.senders and not self.finalized and sender not in self.lost:
            self.committed.add(sender)
            return True
        self.refused.add(sender)
        return False

    def lose(self, sender: str) -> None:
        """``sender`` hung up: unless committed, its batch is lost."""
        if sender in self.senders and sender not in self.committed and not self.finalized:
            self.lost.add(sender)

    @property
    def decided(self) -> bool:
        """True when every sender committed or was lost."""
        return self.senders <= (self.committed | self.lost)

    def finalize(self) -> frozenset[str]:
        """Decide: the committed senders; the undecided ones are lost."""
        if not self.finalized:
            self.finalized = True
            self.lost |= self.senders - self.committed
        return frozenset(self.committed)


@dataclass
class BatchIntake(Generic[Item]):
    """A target's frames, held per sender until its PREPARE matches and the flow is finalized.

    ``Item`` is whatever the target keeps per frame (the sealed payload).
    """

    held: dict[str, dict[bytes, Item]] = field(default_factory=dict)
    prepared: set[str] = field(default_factory=set)

    def hold(self, sender: str, message_id: bytes, item: Item) -> HoldVerdict:
        """Keep a DATA frame of ``sender`` (a retried frame, same id, is kept once)."""
        if sender in self.prepared:
            return "after_prepare"
        frames = self.held.setdefault(sender, {})
        if message_id in frames:
            return "duplicate"
        frames[message_id] = item
        return "held"

    def prepare(self, sender: str, count: int, digest: bytes) -> bool:
        """A PREPARE from ``sender``: True (PREPARED) iff it names exactly the frames held."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidParameterError("count", "an integer >= 0", count)
        frames = self.held.get(sender, {})
        if count == len(frames) and digest == batch_digest(frames):
            self.prepared.add(sender)
            return True
        return False

    def release(self, committed: Iterable[str]) -> list[tuple[str, Item]]:
        """The frames of the senders that prepared and committed, by sender (sorted)."""
        chosen = sorted(set(committed) & self.prepared)
        return [(sender, item) for sender in chosen for item in self.held.get(sender, {}).values()]

    def discarded(self, committed: Iterable[str]) -> list[str]:
        """Senders whose frames are held but not counted (not prepared, or not committed)."""
        kept = set(committed) & self.prepared
        return sorted(sender for sender in self.held if sender not in kept)
