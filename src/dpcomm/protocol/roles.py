"""The steps of every role, written once: every engine calls them (Sections 2-5 of the paper).

A role step is a function over arrays: the simulator calls it for all nodes of a role at once,
the networked runtime for the nodes it hosts (often one), and any later engine for whatever it
schedules. Its randomness comes from [`Randomness`][], one stream
per (role, flow, purpose), so that a node draws the same values whichever engine runs it.

* **source** ([`source_messages`][]): its true target comes from the query program
  ([`ProgramHooks.route`][]); then nothing (no countermeasure), R_σ (sampling), or R_σ^d
  (sampling then d flooding dummies). Under scramblers the message goes to the source's
  scrambler, which the coordinator assigned (consecutive batches of the plan's routes,
  `dpcomm.plan.routes.Routes.batches`).
* **scrambler** ([`scrambler_dummies`][], [`scrambler_shuffle`][]): Algorithm 1, d dummies
  (capped or not) and a uniformly random order of its batch. [`source_first_sent`][] and
  [`scrambler_first_forwarded`][] give the first message of the orders of many nodes at
  once (what an observer of the order sees first), without sorting.
* **target** (compute node): discards dummies, and computes its output from the real tuples of
  the batches that committed ([`target_outputs`][]). The output can also be
  computed in parts: partial outputs of disjoint subsets of the tuples
  ([`ProgramHooks.target_partials`][]), combined into exactly the same output
  ([`ProgramHooks.combine_partials`][]) whatever the split, for an engine that processes the
  sources' rows by partition.
* **result**, and every node that needs the program's state (K-means sources):
  [`ProgramHooks.merge`][] of the targets' outputs.
* **coordinator**: assigns sources to scramblers independently of the data (the plan's
  consecutive batches, `dpcomm.plan.costs.ConsecutiveBatches`); which batches commit is
  the networked runtime's affair.

A query program supplies the hooks of [`ProgramHooks`][]; the roles know nothing of SQL or of
centroids, the programs nothing of countermeasures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.plan.countermeasures import Countermeasure, LocalFlooding, NoCountermeasure, Scramblers
from dpcomm.plan.model import ExecutionPlan
from dpcomm.protocol._arrays import BoolArray, IntArray, as_index_array, read_only
from dpcomm.protocol.randomness import Randomness, Stream, permutation_from
from dpcomm.protocol.scrambler import scrambler_dummy_counts
from dpcomm.protocol.source import flood_in_chunks, sample_targets
from dpcomm.validation import check_int


@dataclass(frozen=True)
class TargetStep:
    """One target step: a stage's data flow, the state before it, the targets computing.

    Attributes:
        state: what every node knew before the stage; a target may only read the parts it
            produced itself or that are public.
        stage: the stage (0-based).
        flow: the data-dependent flow whose tuples the targets received.
        targets: the targets computing (their indices among the flow's T targets).
    """

    state: Any
    stage: int
    flow: str
    targets: Sequence[int]


class ProgramHooks(Protocol):
    """What a query program supplies to the roles: ten members (Aggregate and K-means).

    ``rows`` are the data of source nodes (one row per source), ``tuples`` what a source sends
    in one flow, ``state`` what every node knows before a stage (public, or derived from the
    previous stage's outputs), an *output* what a target (compute node) sends on after a stage.
    A target's output is computed in parts: partial outputs of disjoint subsets of its tuples
    ([`target_partials`][]), combined into exactly the same output whatever the split
    ([`combine_partials`][]), so that an engine may process the sources' rows by partition;
    [`target_outputs`][] is the combination of one part.
    """

    @property
    def plan(self) -> ExecutionPlan:
        """The execution plan (without countermeasure nodes)."""
        ...

    @property
    def name(self) -> str:
        """A short description for reports."""
        ...

    @property
    def stages(self) -> tuple[tuple[str, ...], ...]:
        """The data-dependent flows sent in each stage (one stage for Aggregate, I for K-means)."""
        ...

    def initial_state(self) -> Any:
        """The public state before the first stage."""
        ...

    def route(self, state: Any, flow: str, rows: Any) -> IntArray:
        """Source step: the target index each of ``rows`` chooses for ``flow`` (its data's)."""
        ...

    def carried(self, flow: str, rows: Any) -> Any:
        """Source step: the tuples ``rows`` send in ``flow`` (what a real message carries)."""
        ...

    def target_partials(
        self, step: TargetStep, tuples: Any, tuple_targets: IntArray
    ) -> dict[int, Any]:
        """Target step, in parts: a partial output of each of ``step.targets`` from some tuples.

        ``tuples`` is any subset of the real tuples (possibly empty), ``tuple_targets[i]`` the
        target that received row i; every one of the step's targets gets a partial. Partials
        are picklable: an engine that splits the tuples computes the partials where they are.
        """
        ...

    def combine_partials(
        self, step: TargetStep, partials: Sequence[Mapping[int, Any]]
    ) -> dict[int, Any]:
        """The output of each of ``step.targets`` from its partials over disjoint subsets of tuples.

        The same (``==``) whatever the split and the order of ``partials``: a target missing
        from every partial, or partials of empty subsets, give the output of a target that
        received no tuple.
        """
        ...

    def merge(self, state: Any, stage: int, outputs: Mapping[tuple[str, int], Any]) -> Any:
        """Result step: the state after ``stage`` from the targets' outputs, by (flow, target).

        Parts of the state without an output keep their value (a node merges what it has).
        """
        ...

    def result(self, state: Any) -> Any:
        """The final result from the state after the last stage."""
        ...


def target_outputs(
    program: ProgramHooks, step: TargetStep, tuples: Any, tuple_targets: IntArray
) -> dict[int, Any]:
    """Target step: the output of each of ``step.targets`` from every real tuple it received.

    The combination of the one partial of all the tuples
    ([`ProgramHooks.target_partials`][], [`ProgramHooks.combine_partials`][]).
    """
    return program.combine_partials(step, [program.target_partials(step, tuples, tuple_targets)])


def sample_stream(flow: str) -> Stream:
    """R_σ of the sources of ``flow``: two uniforms per source."""
    return Stream("source", flow, "sample", 2)


def flood_stream(flow: str, num_targets: int) -> Stream:
    """The flooding dummies of R_σ^d: T − 1 uniforms per source."""
    return Stream("source", flow, "flood", num_targets - 1)


def send_order_stream(flow: str, num_messages: int) -> Stream:
    """The order in which a source sends its d + 1 messages of R_σ^d."""
    return Stream("source", flow, "order", num_messages)


def dummies_stream(flow: str, num_dummies: int) -> Stream:
    """The d dummies of each scrambler of ``flow``."""
    return Stream("scrambler", flow, "dummies", num_dummies)


def shuffle_stream(flow: str, largest_batch: int, num_dummies: int) -> Stream:
    """The shuffle of each scrambler's n_k + d messages (n_k <= the largest batch)."""
    return Stream("scrambler", flow, "shuffle", largest_batch + num_dummies)


@dataclass(frozen=True, eq=False)
class SourceMessages:
    """What sources send in one flow (Section 3.1, and Section 4.1 before the scrambler).

    Attributes:
        sent: int64 target of each source's message (after R_σ).
        is_real: True where the message carries the source's tuple (its target is the true
            one), False for a dummy.
        flooding: int64 (S, d) targets of the flooding dummies of R_σ^d (d = 0 otherwise).
    """

    sent: IntArray
    is_real: BoolArray
    flooding: IntArray

    @property
    def num_dummies(self) -> int:
        """Dummies sent: sampled-out first messages and flooding dummies."""
        return int((~self.is_real).sum()) + int(self.flooding.size)


def source_messages(
    true_targets: npt.ArrayLike,
    *,
    countermeasure: Countermeasure,
    num_targets: int,
    randomness: Randomness,
    flow: str,
    sources: npt.ArrayLike,
) -> SourceMessages:
    """The source step of ``flow`` for ``sources`` (their indices in the flow's sender group).

    No countermeasure: the message goes to the true target. Local flooding: R_σ^d (Section
    3.1). Scramblers: R_σ, the message then goes to the source's scrambler (Section 4.1).
    """
    size = check_int("num_targets", num_targets, minimum=1)
    truth = as_index_array("true_targets", true_targets, upper=size)
    nodes = np.asarray(sources, dtype=np.int64).reshape(-1)
    if nodes.shape != truth.shape:
        raise InvalidParameterError(
            "sources", f"one index per true target ({truth.shape[0]})", nodes.shape[0]
        )
    if isinstance(countermeasure, NoCountermeasure):
        real = np.ones(truth.shape[0], dtype=bool)
        read_only(real)
        empty = np.zeros((truth.shape[0], 0), dtype=np.int64)
        return SourceMessages(sent=truth, is_real=real, flooding=empty)
    sampled = sample_targets(
        truth,
        num_targets=size,
        sampling_rate=countermeasure.sampling_rate,
        uniforms=randomness.uniforms(sample_stream(flow), nodes),
    )
    dummies = countermeasure.num_dummies if isinstance(countermeasure, LocalFlooding) else 0
    flooding = np.empty((truth.shape[0], dummies), dtype=np.int64)
    if dummies:
        stream = flood_stream(flow, size)
        flood_in_chunks(
            sampled.sent,
            flooding,
            num_targets=size,
            uniforms=lambda start, stop: randomness.uniforms(stream, nodes[start:stop]),
        )
    read_only(flooding)
    return SourceMessages(sent=sampled.sent, is_real=sampled.is_real, flooding=flooding)


def source_send_order(
    num_messages: int, *, randomness: Randomness, flow: str, source: int
) -> IntArray:
    """The order in which one source sends its messages of one flow (its d + 1 under R_σ^d).

    The observer sees the set of targets; sending in a random order keeps the first message
    (the one that may be real) from being singled out by its position.
    """
    count = check_int("num_messages", num_messages, minimum=1)
    draws = randomness.uniforms(send_order_stream(flow, count), [source])[0]
    return permutation_from(draws)


def source_first_sent(
    num_messages: int, *, randomness: Randomness, flow: str, sources: npt.ArrayLike
) -> IntArray:
    """Which of its messages each of ``sources`` sends first: ``source_send_order(...)[0]``.

    The order sorts the source's draws (ties by position), so its first message is the one of
    the smallest draw: no sort is needed. This is what an observer of the order of sending
    sees first, for many sources at once (the statistical audit runs it over many runs).
    """
    count = check_int("num_messages", num_messages, minimum=1)
    draws = randomness.uniforms(send_order_stream(flow, count), sources)
    first: IntArray = np.argmin(draws, axis=1).astype(np.int64)
    return first


def scrambler_dummies(
    received: npt.ArrayLike,
    batch_sizes: npt.ArrayLike,
    *,
    countermeasure: Scramblers,
    randomness: Randomness,
    flow: str,
    scramblers: npt.ArrayLike,
) -> IntArray:
    """The scrambler step: the dummies each of ``scramblers`` adds to each target.

    Args:
        received: (K, T) messages each scrambler received for each target.
        batch_sizes: (K,) messages each scrambler batched (the cap of S̄_d).
        countermeasure: the scramblers' d and whether they are capped.
        randomness: where the draws come from.
        flow: the flow the scramblers serve.
        scramblers: (K,) the scramblers' indices in their group.

    Returns:
        int64 (K, T) dummy counts (Algorithm 1).
    """
    nodes = np.asarray(scramblers, dtype=np.int64).reshape(-1)
    counts = np.asarray(received, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[0] != nodes.shape[0]:
        raise InvalidParameterError(
            "received", f"a ({nodes.shape[0]}, T) array of counts", counts.shape
        )
    dummies = countermeasure.num_dummies
    uniforms = randomness.uniforms(dummies_stream(flow, dummies), nodes)
    return scrambler_dummy_counts(
        counts, batch_sizes, num_dummies=dummies, capped=countermeasure.capped, uniforms=uniforms
    )


def scrambler_shuffle(
    num_messages: int,
    *,
    largest_batch: int,
    countermeasure: Scramblers,
    randomness: Randomness,
    flow: str,
    scrambler: int,
) -> IntArray:
    """The order in which one scrambler forwards its n_k + d messages (a uniform permutation)."""
    count = check_int("num_messages", num_messages, minimum=0)
    draws = _shuffle_draws(count, largest_batch, countermeasure, randomness, flow, [scrambler])
    return permutation_from(draws[0])


def scrambler_first_forwarded(
    num_messages: int,
    *,
    largest_batch: int,
    countermeasure: Scramblers,
    randomness: Randomness,
    flow: str,
    scramblers: npt.ArrayLike,
) -> IntArray:
    """Which of its messages each of ``scramblers`` forwards first: ``scrambler_shuffle(...)[0]``.

    Every one of ``scramblers`` forwards ``num_messages`` messages. The shuffle sorts the
    scrambler's draws (ties by position), so its first message is the one of the smallest
    draw: no sort is needed. This is what an observer of the order of forwarding sees first,
    for many scramblers at once (the statistical audit runs it over many runs).
    """
    count = check_int("num_messages", num_messages, minimum=1)
    draws = _shuffle_draws(count, largest_batch, countermeasure, randomness, flow, scramblers)
    first: IntArray = np.argmin(draws, axis=1).astype(np.int64)
    return first


def _shuffle_draws(
    count: int,
    largest_batch: int,
    countermeasure: Scramblers,
    randomness: Randomness,
    flow: str,
    scramblers: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """The draws that order the first ``count`` messages of each of ``scramblers``."""
    stream = shuffle_stream(flow, largest_batch, countermeasure.num_dummies)
    if count > stream.per_node:
        raise InvalidParameterError("num_messages", f"at most n + d = {stream.per_node}", count)
    return randomness.uniforms(stream, scramblers)[:, :count]


def delivered(is_real: npt.ArrayLike, committed: npt.ArrayLike) -> BoolArray:
    """The target step's filter: a tuple counts iff its message is real and its batch committed.

    Targets decrypt every message and discard dummies; a batch that did not commit (its
    scrambler died, or it missed the deadline) is discarded whole (the networked runtime's
    two-phase commit), so a tuple is counted at most once and never half a batch.
    """
    real = np.asarray(is_real, dtype=bool)
    result: BoolArray = real & np.asarray(committed, dtype=bool)
    return result
