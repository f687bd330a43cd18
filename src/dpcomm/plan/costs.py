"""The one cost model: batches, scramblers, recruited sources, messages per flow, channels.

Everything a planner, an engine or a figure needs to know about the *cost* of a plan with its
countermeasures is derived here, once, from the transformed plan (`dpcomm.plan.transform`):

* **balanced batches** (Section 4.1 assumes n divides S): S sources are cut into ⌈S/n⌉
  batches whose sizes differ by at most one, so the largest is ⌈S/⌈S/n⌉⌉ <= n and none is
  short (a short batch would need more dummies for the same ε);
* **sources needed** to keep the non-private utility (Sections 3.3 and 4.4);
* **messages per flow** (exact: the number of messages of a flow does not depend on the data
  or on the randomness, only which of them are dummies does);
* **channels per role**: an upper bound on the secure channels (distinct peers) of one node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from dpcomm.validation import check_int

__all__ = [
    "ConsecutiveBatches",
    "balanced_batch_sizes",
    "batch_size_counts",
    "delivery_probability",
    "num_scramblers",
    "sources_needed",
]


def num_scramblers(num_sources: int, batch_size: int) -> int:
    """⌈S/n⌉ scramblers for S sources and batches of at most n (one when n >= S)."""
    sources = check_int("num_sources", num_sources, minimum=1)
    size = check_int("batch_size", batch_size, minimum=1)
    return -(-sources // size)


def balanced_batch_sizes(num_sources: int, batch_size: int) -> tuple[int, ...]:
    """The sizes of the ⌈S/n⌉ batches, largest first; any two differ by at most one.

    With K = ⌈S/n⌉ batches, S mod K of them hold ⌈S/K⌉ sources and the others ⌊S/K⌋, so the
    largest holds ⌈S/K⌉ <= n sources and the smallest ⌊S/K⌋ >= n − ... (never a short
    remainder: e.g. S = 5,000, n = 156 gives 33 batches of 151 or 152, not 32 of 156 and one
    of 8). Every batch is accounted at its own size (`dpcomm.plan.account_cluster`).
    """
    return ConsecutiveBatches.of(num_sources, batch_size).sizes


@dataclass(frozen=True)
class ConsecutiveBatches:
    """S sources cut into K balanced batches of consecutive sources, largest first.

    The coordinator's data-independent assignment (Section 4.1 only asks that it does not
    depend on the data): batch k holds sources ``first(k)`` to ``first(k + 1) − 1``, with the
    sizes of `balanced_batch_sizes`. Consecutive batches let an engine cut the sources
    into partitions of whole scramblers without moving a row.

    Attributes:
        num_sources: S.
        num_batches: K (the number of scramblers), 1 <= K <= S.
    """

    num_sources: int
    num_batches: int

    def __post_init__(self) -> None:
        check_int("num_sources", self.num_sources, minimum=1)
        check_int("num_batches", self.num_batches, minimum=1, maximum=self.num_sources)

    @classmethod
    def of(cls, num_sources: int, batch_size: int) -> ConsecutiveBatches:
        """The ⌈S/n⌉ balanced batches of at most n = ``batch_size`` sources."""
        return cls(num_sources, num_scramblers(num_sources, batch_size))

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """Sources per batch, largest first (they differ by at most one)."""
        base, extra = divmod(self.num_sources, self.num_batches)
        return (base + 1,) * extra + (base,) * (self.num_batches - extra)

    def first(self, batch: int) -> int:
        """The first source of ``batch`` (``first(K)`` is S)."""
        base, extra = divmod(self.num_sources, self.num_batches)
        return batch * base + min(batch, extra)

    @cached_property
    def offsets(self) -> npt.NDArray[np.int64]:
        """int64 ``first(k)`` for k = 0..K: where every batch starts, and S."""
        base, extra = divmod(self.num_sources, self.num_batches)
        batches = np.arange(self.num_batches + 1, dtype=np.int64)
        offsets: npt.NDArray[np.int64] = batches * base + np.minimum(batches, extra)
        return offsets

    def members(self, batch: int) -> range:
        """The sources of ``batch``."""
        return range(self.first(batch), self.first(batch + 1))

    def batch_of(self, sources: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The batch of each of ``sources`` (global source indices)."""
        base, extra = divmod(self.num_sources, self.num_batches)
        large = extra * (base + 1)
        indices = np.asarray(sources, dtype=np.int64)
        if extra == 0:  # batches of one size: a division (np.where computes both sides)
            equal: npt.NDArray[np.int64] = indices // base
            return equal
        result: npt.NDArray[np.int64] = np.where(
            indices < large,
            indices // (base + 1),
            extra + (indices - large) // max(base, 1),
        ).astype(np.int64)
        return result


def batch_size_counts(num_sources: int, batch_size: int) -> dict[int, int]:
    """Batch size -> number of scramblers of that size, for `balanced_batch_sizes`."""
    counts: dict[int, int] = {}
    for size in balanced_batch_sizes(num_sources, batch_size):
        counts[size] = counts.get(size, 0) + 1
    return counts


def delivery_probability(*, sampling_rate: float, num_targets: int) -> float:
    """P = 1 − σ + σ/T: the probability that a real tuple reaches its true target under R_σ.

    With probability σ the target is redrawn uniformly from all T targets, its own included
    (Section 3.1 and its footnote); a single target always gets it.
    """
    if num_targets <= 1:
        return 1.0
    return 1.0 - sampling_rate + sampling_rate / num_targets


def sources_needed(*, tuples: int, sampling_rate: float, num_targets: int) -> int:
    """S_t = ⌈S/p⌉ sources deliver S tuples in expectation (Sections 3.3 and 4.4).

    The paper writes S_t = S/(1 − σ); a tuple whose redrawn target is its own also gets
    through, so ⌈S/(1 − σ + σ/T)⌉ suffices (the −1e-9 absorbs rounding of exact quotients).
    """
    keep = delivery_probability(sampling_rate=sampling_rate, num_targets=num_targets)
    return math.ceil(tuples / keep - 1e-9)


@dataclass(frozen=True)
class PeerBound:
    """How many distinct peers of one group a node of another group may have over one flow.

    Attributes:
        group: the peer's physical group.
        peers: the bound for one node.
        membership: flows whose peers are fixed by the same assignment (a scrambler and its
            sources) share a membership key and count once; None counts every flow.
    """

    group: str
    peers: int
    membership: str | None = None


def channel_bound(
    bounds: Mapping[str, list[PeerBound]], group_sizes: Mapping[str, int], group: str
) -> int:
    """Upper bound on the distinct peers of one node of physical ``group``.

    Peers of one node in a peer group Q number at most |Q| and at most the sum over the flows
    between the two groups of the flow's per-node bound, where flows fixed by the same
    assignment (same membership key) reach the same peers and count once.
    """
    by_peer: dict[str, dict[str | None, list[int]]] = {}
    for bound in bounds.get(group, []):
        by_peer.setdefault(bound.group, {}).setdefault(bound.membership, []).append(bound.peers)
    total = 0
    for peer, memberships in by_peer.items():
        reach = 0
        for key, values in memberships.items():
            reach += sum(values) if key is None else max(values)
        total += min(group_sizes[peer], reach)
    return total
