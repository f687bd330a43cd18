"""What the observer sees: the communication graph as per-edge message counts (Section 2).

Contents are hidden by secure channels, so the observable output of a run is, for each pair
(sender, receiver), how many messages went over it. This module turns lists of sends into that
sparse graph and derives the per-node load of Section 2.4 (secure channels per node).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.protocol._arrays import IntArray, as_index_array, read_only
from dpcomm.validation import check_int

#: Largest num_senders · num_receivers: edges are keyed by sender · num_receivers + receiver.
MAX_EDGE_KEYS = 1 << 62


@dataclass(frozen=True, eq=False)
class EdgeCounts:
    """The observed communication graph: one row per edge that carried at least one message.

    Rows are sorted by (sender, receiver) and every count is >= 1.

    Attributes:
        senders: int64 sender index of each edge.
        receivers: int64 receiver index of each edge.
        counts: int64 number of messages over each edge.
        num_senders: number of sender nodes (indices lie in [0, num_senders)).
        num_receivers: number of receiver nodes.
    """

    senders: IntArray
    receivers: IntArray
    counts: IntArray
    num_senders: int
    num_receivers: int

    def __len__(self) -> int:
        return int(self.counts.shape[0])

    @property
    def total_messages(self) -> int:
        """Total number of messages observed."""
        return int(self.counts.sum())

    def channels_per_sender(self) -> IntArray:
        """Secure channels opened by each sender: its number of distinct receivers."""
        return np.bincount(self.senders, minlength=self.num_senders).astype(np.int64)

    def channels_per_receiver(self) -> IntArray:
        """Secure channels accepted by each receiver: its number of distinct senders."""
        return np.bincount(self.receivers, minlength=self.num_receivers).astype(np.int64)

    def messages_per_sender(self) -> IntArray:
        """Messages sent by each sender."""
        return np.bincount(self.senders, weights=self.counts, minlength=self.num_senders).astype(
            np.int64
        )

    def messages_per_receiver(self) -> IntArray:
        """Messages received by each receiver."""
        return np.bincount(
            self.receivers, weights=self.counts, minlength=self.num_receivers
        ).astype(np.int64)

    def to_dense(self) -> IntArray:
        """The (num_senders, num_receivers) matrix of counts (for small graphs only)."""
        dense = np.zeros((self.num_senders, self.num_receivers), dtype=np.int64)
        dense[self.senders, self.receivers] = self.counts
        return dense

    @classmethod
    def from_dense(cls, matrix: npt.ArrayLike) -> EdgeCounts:
        """The edges of a dense non-negative integer matrix of counts (e.g. scrambler counts)."""
        dense = np.asarray(matrix)
        if dense.ndim != 2 or dense.dtype.kind not in "iu" or (dense.size and dense.min() < 0):
            raise InvalidParameterError(
                "matrix", "a 2-D array of non-negative integers", f"{dense.dtype} {dense.shape}"
            )
        senders, receivers = np.nonzero(dense)
        counts = dense[senders, receivers].astype(np.int64)
        return _frozen(senders, receivers, counts, dense.shape[0], dense.shape[1])


def _frozen(
    senders: npt.NDArray[np.integer],
    receivers: npt.NDArray[np.integer],
    counts: npt.NDArray[np.integer],
    num_senders: int,
    num_receivers: int,
) -> EdgeCounts:
    arrays = [np.array(a, dtype=np.int64) for a in (senders, receivers, counts)]
    for array in arrays:
        read_only(array)
    return EdgeCounts(
        senders=arrays[0],
        receivers=arrays[1],
        counts=arrays[2],
        num_senders=num_senders,
        num_receivers=num_receivers,
    )


def edge_counts(
    senders: npt.ArrayLike,
    receivers: npt.ArrayLike,
    *,
    num_senders: int,
    num_receivers: int,
) -> EdgeCounts:
    """Count the messages over each (sender, receiver) edge (the observed graph, Section 2).

    Args:
        senders: sender index of each message (1-D integers in [0, num_senders)).
        receivers: receiver index of each message (same length, in [0, num_receivers)).
        num_senders: number of sender nodes (>= 0).
        num_receivers: number of receiver nodes (>= 0).
    """
    senders_count = check_int("num_senders", num_senders, minimum=0)
    receivers_count = check_int("num_receivers", num_receivers, minimum=0)
    if senders_count * receivers_count > MAX_EDGE_KEYS:
        raise InvalidParameterError(
            "num_senders", "num_senders · num_receivers <= 2**62", senders_count
        )
    sources = as_index_array("senders", senders, upper=senders_count)
    sinks = as_index_array("receivers", receivers, upper=receivers_count)
    if sources.shape != sinks.shape:
        raise InvalidParameterError(
            "receivers", f"an array of length {sources.shape[0]} like senders", sinks.shape[0]
        )
    keys, counts = np.unique(sources * receivers_count + sinks, return_counts=True)
    if receivers_count == 0:
        return _frozen(keys, keys, counts, senders_count, receivers_count)
    return _frozen(
        keys // receivers_count, keys % receivers_count, counts, senders_count, receivers_count
    )
