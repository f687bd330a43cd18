"""The array functions of the scrambler step: Algorithm 1 of Section 4.1 (S_d, S̄_d when capped).

:func:`dpcomm.protocol.roles.assign_batches` and :func:`~dpcomm.protocol.roles.scrambler_dummies`
are built on them. Sources are assigned to scramblers independently of the data
(:func:`contiguous_assignment`); each scrambler collects the R_σ outputs of its n sources, adds
d dummies and shuffles. Dummies are uniform over the T targets with replacement (S_d), or, when
capped (S̄_d, Algorithm 1 with B = True), drawn one at a time uniformly among the targets that
currently hold fewer than n messages (:func:`scrambler_dummy_counts`, from uniforms the caller
draws). The conventions are those of :class:`dpcomm.accounting.mechanisms.ScramblerMechanism`.

Everything is vectorized across scramblers; only the d dummy steps of S̄_d are a loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import balanced_batch_sizes
from dpcomm.protocol._arrays import IntArray, read_only
from dpcomm.protocol.randomness import uniform_integers
from dpcomm.validation import check_int


@dataclass(frozen=True, eq=False)
class ScramblerAssignment:
    """A data-independent assignment of S sources to scramblers (Section 4.1).

    Attributes:
        batch_size: n, the largest number of sources per scrambler allowed.
        scrambler_of_source: int64 scrambler index of each source.
        batch_sizes: int64 number of sources of each scrambler (balanced: they differ by at
            most one).
        source_order: int64 sources grouped by scrambler: scrambler k holds
            ``source_order[offsets[k]:offsets[k + 1]]``.
    """

    batch_size: int
    scrambler_of_source: IntArray
    batch_sizes: IntArray
    source_order: IntArray

    @property
    def num_sources(self) -> int:
        """S, the number of sources."""
        return int(self.scrambler_of_source.shape[0])

    @property
    def num_scramblers(self) -> int:
        """The number of scramblers, ⌈S/n⌉ for :func:`contiguous_assignment`."""
        return int(self.batch_sizes.shape[0])

    @property
    def offsets(self) -> IntArray:
        """int64 array of length num_scramblers + 1: where each batch starts in source_order."""
        return np.concatenate([[0], np.cumsum(self.batch_sizes)]).astype(np.int64)

    def members(self, scrambler_index: int) -> IntArray:
        """The sources assigned to scrambler ``scrambler_index``."""
        index = check_int(
            "scrambler_index", scrambler_index, minimum=0, maximum=self.num_scramblers - 1
        )
        offsets = self.offsets
        return self.source_order[offsets[index] : offsets[index + 1]]


def contiguous_assignment(num_sources: int, *, batch_size: int) -> ScramblerAssignment:
    """Consecutive sources in balanced batches (batch k: sources offsets[k] to offsets[k+1] − 1).

    Section 4.1 only asks that the assignment does not depend on the data; the observer sees
    it anyway (the source → scrambler edges), so its randomness adds no privacy. Consecutive
    batches let an engine cut the sources into partitions of whole scramblers without moving
    any row (the Dask engine), and need no draw. The batches are those of
    :func:`dpcomm.plan.costs.balanced_batch_sizes` (largest first).

    Args:
        num_sources: S (>= 1).
        batch_size: n (>= 1), the largest number of sources per scrambler.
    """
    count = check_int("num_sources", num_sources, minimum=1)
    size = check_int("batch_size", batch_size, minimum=1)
    sizes = np.array(balanced_batch_sizes(count, size), dtype=np.int64)
    mapping = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    order = np.arange(count, dtype=np.int64)
    for array in (order, mapping, sizes):
        read_only(array)
    return ScramblerAssignment(
        batch_size=size, scrambler_of_source=mapping, batch_sizes=sizes, source_order=order
    )


def scrambler_dummy_counts(
    received: npt.ArrayLike,
    batch_sizes: npt.ArrayLike,
    *,
    num_dummies: int,
    capped: bool,
    uniforms: npt.ArrayLike,
) -> IntArray:
    """The dummies each scrambler adds to each target (Algorithm 1), from uniforms.

    Args:
        received: (K, T) messages each scrambler received for each target.
        batch_sizes: (K,) the batch size n_k of each scrambler (the cap of S̄_d).
        num_dummies: d.
        capped: S̄_d (True) or S_d (False).
        uniforms: (K, d) uniforms; dummy j of scrambler k is drawn from ``uniforms[k, j]``.

    Returns:
        int64 (K, T) dummy counts.
    """
    current = np.asarray(received, dtype=np.int64)
    scramblers, size = current.shape
    draws = np.asarray(uniforms, dtype=np.float64)
    if draws.shape != (scramblers, num_dummies):
        raise InvalidParameterError(
            "uniforms", f"an array of shape ({scramblers}, {num_dummies})", draws.shape
        )
    dummy_counts = np.zeros((scramblers, size), dtype=np.int64)
    if num_dummies == 0 or scramblers == 0:
        return dummy_counts
    if capped:
        caps = np.asarray(batch_sizes, dtype=np.int64).reshape(-1)
        if caps.shape[0] != scramblers:
            raise InvalidParameterError("batch_sizes", f"{scramblers} batch sizes", caps.shape)
        limit = (size - 1) * int(caps.min())
        if num_dummies > limit:
            raise InvalidParameterError(
                "num_dummies",
                f"an integer in [0, {limit}] ((T − 1)·n with n = {int(caps.min())}, the "
                "smallest scrambler) for the capped scrambler",
                num_dummies,
            )
        return _capped_dummies(current, caps, num_dummies, draws)
    rows = np.repeat(np.arange(scramblers, dtype=np.int64), num_dummies)
    targets = uniform_integers(draws.reshape(-1), size)
    dummy_counts += np.bincount(rows * size + targets, minlength=scramblers * size).reshape(
        scramblers, size
    )
    return dummy_counts


def _capped_dummies(
    received: IntArray,
    batch_sizes: IntArray,
    num_dummies: int,
    uniforms: npt.NDArray[np.float64],
) -> IntArray:
    """The dummies of S̄_d: one step at a time, each uniform among targets below the cap n."""
    scramblers, size = received.shape
    current = received.copy()
    dummy_counts = np.zeros((scramblers, size), dtype=np.int64)
    caps = batch_sizes[:, None]
    rows = np.arange(scramblers)
    for step in range(num_dummies):
        open_targets = current < caps
        ranks = np.cumsum(open_targets, axis=1)
        # A uniform rank among the open targets; the open target holding that rank is drawn.
        draw = uniform_integers(uniforms[:, step], ranks[:, -1])
        chosen = np.argmax(ranks > draw[:, None], axis=1)
        current[rows, chosen] += 1
        dummy_counts[rows, chosen] += 1
    return dummy_counts
