"""What a scrambler node does: Algorithm 1 of Section 4.1 (S_d, and S̄_d when capped).

Sources are assigned to scramblers independently of the data; each scrambler collects the
R_σ outputs of its n sources, adds d dummies and shuffles. Dummies are uniform over the T
targets with replacement (S_d), or, when capped (S̄_d, Algorithm 1 with B = True), drawn one
at a time uniformly among the targets that currently hold fewer than n messages. The
conventions are those of :class:`dpcomm.accounting.mechanisms.ScramblerMechanism`.

Everything is vectorized across scramblers; only the d dummy steps of S̄_d are a loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.costs import balanced_batch_sizes
from dpcomm.protocol._arrays import IntArray, as_index_array, read_only
from dpcomm.protocol.observation import EdgeCounts
from dpcomm.protocol.randomness import permutation_from, uniform_integers
from dpcomm.validation import check_int, make_rng


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
        """The number of scramblers, ⌈S/n⌉ for :func:`assign_scramblers`."""
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

    @classmethod
    def from_scrambler_of_source(cls, scrambler_of_source: npt.ArrayLike) -> ScramblerAssignment:
        """Rebuild an assignment from the scrambler index of each source.

        For an assignment received over the network, or fixed by a test. Every scrambler in
        [0, max] must have at least one source; ``batch_size`` is the largest batch.
        """
        labels = np.asarray(scrambler_of_source)
        upper = int(labels.max()) + 1 if labels.size and labels.dtype.kind in "iu" else 1
        mapping = as_index_array("scrambler_of_source", labels, upper=max(upper, 1))
        if mapping.shape[0] == 0:
            raise InvalidParameterError("scrambler_of_source", "at least one source", 0)
        sizes = np.bincount(mapping, minlength=upper).astype(np.int64)
        if np.any(sizes == 0):
            raise InvalidParameterError(
                "scrambler_of_source",
                "every scrambler index in [0, max] used at least once",
                f"unused scrambler {int(np.argmin(sizes))}",
            )
        order = np.argsort(mapping, kind="stable").astype(np.int64)
        mapping = mapping.copy()
        for array in (mapping, sizes, order):
            read_only(array)
        return cls(
            batch_size=int(sizes.max()),
            scrambler_of_source=mapping,
            batch_sizes=sizes,
            source_order=order,
        )


def assignment_from_uniforms(
    num_sources: int, *, batch_size: int, uniforms: npt.ArrayLike
) -> ScramblerAssignment:
    """Assign S sources to ⌈S/n⌉ scramblers with balanced batches, independently of the data.

    The sources sorted by their uniforms form a uniformly random permutation, cut into the
    consecutive batches of :func:`dpcomm.plan.costs.balanced_batch_sizes` (sizes differ by at
    most one, the largest is at most n). Section 4.1 only asks that the assignment does not
    depend on the data.

    Args:
        num_sources: S (>= 1).
        batch_size: n (>= 1), the largest number of sources per scrambler.
        uniforms: S independent uniforms in [0, 1).
    """
    count = check_int("num_sources", num_sources, minimum=1)
    size = check_int("batch_size", batch_size, minimum=1)
    keys = np.asarray(uniforms, dtype=np.float64).reshape(-1)
    if keys.shape[0] != count:
        raise InvalidParameterError("uniforms", f"{count} uniforms (one per source)", keys.shape)
    order = permutation_from(keys)
    sizes = np.array(balanced_batch_sizes(count, size), dtype=np.int64)
    mapping = np.empty(count, dtype=np.int64)
    mapping[order] = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    for array in (order, mapping, sizes):
        read_only(array)
    return ScramblerAssignment(
        batch_size=size, scrambler_of_source=mapping, batch_sizes=sizes, source_order=order
    )


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


def assign_scramblers(
    num_sources: int,
    *,
    batch_size: int,
    rng: np.random.Generator | int | None = None,
) -> ScramblerAssignment:
    """:func:`assignment_from_uniforms` with S uniforms drawn from ``rng``.

    Args:
        num_sources: S (>= 1).
        batch_size: n (>= 1), the largest number of sources per scrambler.
        rng: a numpy Generator, a seed, or None.
    """
    count = check_int("num_sources", num_sources, minimum=1)
    return assignment_from_uniforms(
        count, batch_size=batch_size, uniforms=make_rng(rng).random(count)
    )


@dataclass(frozen=True, eq=False)
class ScrambleResult:
    """The output of every scrambler (Algorithm 1), as the observer sees it and beyond.

    Attributes:
        counts: int64 (num_scramblers, T): messages each scrambler sends to each target (real
            or sampled messages plus dummies), which is what the observer sees.
        dummy_counts: int64 (num_scramblers, T): the scrambler's own dummies among them.
        sent_targets: int64 target t' of each source's message (the scramblers' inputs).
        assignment: the assignment of sources to scramblers.
    """

    counts: IntArray
    dummy_counts: IntArray
    sent_targets: IntArray
    assignment: ScramblerAssignment

    @property
    def num_targets(self) -> int:
        """T."""
        return int(self.counts.shape[1])

    @property
    def input_counts(self) -> IntArray:
        """int64 (num_scramblers, T): the sources' messages received by each scrambler."""
        result: IntArray = self.counts - self.dummy_counts
        return result

    def edges(self) -> EdgeCounts:
        """The observed scrambler → target traffic as (scrambler, target, count) triples."""
        return EdgeCounts.from_dense(self.counts)

    def shuffled_messages(
        self, scrambler_index: int, rng: np.random.Generator | int | None = None
    ) -> tuple[IntArray, IntArray]:
        """The shuffled output list of one scrambler (last line of Algorithm 1).

        Returns:
            ``(targets, sources)`` in a uniformly random order: the target of each message
            and the source it came from, or −1 for a scrambler dummy.
        """
        members = self.assignment.members(scrambler_index)
        dummies = self.dummy_counts[scrambler_index]
        targets = np.concatenate(
            [self.sent_targets[members], np.repeat(np.arange(self.num_targets), dummies)]
        ).astype(np.int64)
        sources = np.concatenate([members, np.full(int(dummies.sum()), -1, dtype=np.int64)]).astype(
            np.int64
        )
        permutation = permutation_from(make_rng(rng).random(targets.shape[0]))
        return targets[permutation], sources[permutation]


def scramble_with(
    sent_targets: npt.ArrayLike,
    assignment: ScramblerAssignment,
    *,
    num_targets: int,
    num_dummies: int,
    capped: bool = False,
    uniforms: npt.ArrayLike,
) -> ScrambleResult:
    """Algorithm 1 (S_d, or S̄_d when ``capped``) at every scrambler at once, from uniforms.

    Dummy j of scrambler k is drawn from ``uniforms[k, j]``: uniformly among the T targets
    (S_d), or uniformly among the targets that hold fewer than n_k messages so far (S̄_d, n_k
    the scrambler's batch size), one dummy after the other.

    Args:
        sent_targets: target t' of each source's message after R_σ (1-D, one per source of
            ``assignment``, integers in [0, T)).
        assignment: the data-independent assignment of sources to scramblers.
        num_targets: T (>= 1).
        num_dummies: d (>= 0) dummies added by each scrambler; when capped, at most (T − 1)·n
            for the smallest scrambler's n so that the cap can always be met.
        capped: False for S_d, True for S̄_d.
        uniforms: (num_scramblers, d) independent uniforms in [0, 1).
    """
    size = check_int("num_targets", num_targets, minimum=1)
    dummies = check_int("num_dummies", num_dummies, minimum=0)
    if not isinstance(capped, bool):
        raise InvalidParameterError("capped", "True or False", capped)
    if not isinstance(assignment, ScramblerAssignment):
        raise InvalidParameterError(
            "assignment", "a ScramblerAssignment", type(assignment).__name__
        )
    sent = as_index_array("sent_targets", sent_targets, upper=size)
    if sent.shape[0] != assignment.num_sources:
        raise InvalidParameterError(
            "sent_targets",
            f"one target per assigned source ({assignment.num_sources})",
            f"{sent.shape[0]} targets",
        )
    sent = sent.copy()
    scramblers = assignment.num_scramblers
    draws = np.asarray(uniforms, dtype=np.float64)
    if draws.shape != (scramblers, dummies):
        raise InvalidParameterError(
            "uniforms", f"an array of shape ({scramblers}, {dummies})", draws.shape
        )
    batch_sizes = assignment.batch_sizes
    keys = assignment.scrambler_of_source * size + sent
    received = np.bincount(keys, minlength=scramblers * size).reshape(scramblers, size)
    dummy_counts = scrambler_dummy_counts(
        received, batch_sizes, num_dummies=dummies, capped=capped, uniforms=draws
    )
    counts = (received + dummy_counts).astype(np.int64)
    for array in (counts, dummy_counts, sent):
        read_only(array)
    return ScrambleResult(
        counts=counts, dummy_counts=dummy_counts, sent_targets=sent, assignment=assignment
    )


def scramble(
    sent_targets: npt.ArrayLike,
    assignment: ScramblerAssignment,
    *,
    num_targets: int,
    num_dummies: int,
    capped: bool = False,
    rng: np.random.Generator | int | None = None,
) -> ScrambleResult:
    """Run Algorithm 1 (S_d, or S̄_d when ``capped``) at every scrambler at once (Section 4.1).

    :func:`scramble_with` with d uniforms per scrambler drawn from ``rng``.

    Args:
        sent_targets: target t' of each source's message after R_σ (1-D, one per source of
            ``assignment``, integers in [0, T)).
        assignment: the data-independent assignment of sources to scramblers.
        num_targets: T (>= 1).
        num_dummies: d (>= 0) dummies added by each scrambler; when capped, at most (T − 1)·n
            for the smallest scrambler's n so that the cap can always be met.
        capped: False for S_d (dummies uniform with replacement), True for S̄_d (each dummy
            uniform among the targets holding fewer than n messages, n the scrambler's size).
        rng: a numpy Generator, a seed, or None.
    """
    dummies = check_int("num_dummies", num_dummies, minimum=0)
    if not isinstance(assignment, ScramblerAssignment):
        raise InvalidParameterError(
            "assignment", "a ScramblerAssignment", type(assignment).__name__
        )
    uniforms = make_rng(rng).random((assignment.num_scramblers, dummies))
    return scramble_with(
        sent_targets,
        assignment,
        num_targets=num_targets,
        num_dummies=dummies,
        capped=capped,
        uniforms=uniforms,
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
