"""Statistical audit of the mechanisms: an empirical lower bound on ε against the accountant.

The audit runs a mechanism many times on two neighbouring inputs, selects candidate output
events on half of the runs and estimates their probabilities on the other half with
Clopper-Pearson intervals (Bonferroni over the events tried). Every event gives
ε_lb = ln((P₀[E]_lower − δ) / P₁[E]_upper); with probability at least the confidence, the
largest of them is below the mechanism's true ε. The audit PASSes when that lower bound is at
most the accountant's upper bound for the *declared* parameters (see docs/audit.md).

Every run goes through the role steps every engine runs (`dpcomm.protocol.roles`), with
the engines' randomness streams (`dpcomm.protocol.randomness.Randomness`) and scrambler
batches (`dpcomm.plan.costs.ConsecutiveBatches`): run r is node r of one flow (the
source of R_σ^d, or the scrambler of sources r·n … r·n + n − 1), so many runs are one call of
each step over many nodes, as the engines run a flow (`dpcomm.engine.steps.flow_steps`).

It also reports the view of the paper's Appendix D: per distinct output, the counts c₀, c₁ under
the two inputs and the log-ratio |ln(c₀/c₁)|, and the share of outputs never seen estimated by
capture-recapture (two batches; share of new outputs in the second).

Mechanisms are wrapped in `AuditedMechanism`, which can inject the seeded faults the
audit must catch (`FAULT_KINDS`) into that wiring: non-uniform dummies (a broken dummy
step), no shuffle (the order step skipped), a lower sampling rate or fewer dummies than
declared (the role steps given the wrong parameters). Each faulty variant claims the original
guarantee.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import stats

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.plan.costs import ConsecutiveBatches
from dpcomm.plan.countermeasures import LocalFlooding, Scramblers
from dpcomm.progress import with_progress
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness
from dpcomm.validation import check_delta, check_int, check_probability, make_rng

Declared = LocalRandomizer | ScramblerMechanism

#: The seeded faults, in the order the documentation lists them.
FAULT_KINDS: tuple[str, ...] = (
    "nonuniform-dummies",
    "no-shuffle",
    "lower-sampling",
    "fewer-dummies",
)

#: The flow name of the audited runs (part of every stream's key).
AUDIT_FLOW = "audit"

#: Runs simulated at once: at most CHUNK_RUNS runs and at most CHUNK_SOURCES sources. Small
#: chunks keep every array of a chunk small enough for the memory allocator to reuse the
#: previous chunk's memory: chunks of a million sources page-fault fresh memory at every chunk
#: (three times slower at 10⁶ runs of n = 100). The capped scrambler's dummy step is a loop of
#: d steps over the chunk's scramblers, which larger chunks (CHUNK_SOURCES_CAPPED) amortize.
CHUNK_RUNS = 1 << 14
CHUNK_SOURCES = 1 << 14
CHUNK_SOURCES_CAPPED = 1 << 17

#: Candidate events kept per direction after selection (so 2× this many are estimated).
EVENTS_PER_DIRECTION = 5


@dataclass(frozen=True, kw_only=True)
class AuditedMechanism:
    """A mechanism as run by the audit: the declared one, possibly with a fault injected.

    Attributes:
        declared: the mechanism whose guarantee is claimed (and accounted).
        actual_sampling_rate: σ actually given to the role steps (None: the declared σ).
        actual_num_dummies: d actually given to the role steps (None: the declared d).
        dummy_weights: weights of the targets a broken dummy step draws its dummies from, in
            place of the role's (None: the role's own step, uniform).
        shuffle: False skips the order step: messages leave in arrival order (the differing
            source first).
        fault: a label for reports ("none" or one of `FAULT_KINDS`).
    """

    declared: Declared
    actual_sampling_rate: float | None = None
    actual_num_dummies: int | None = None
    dummy_weights: tuple[float, ...] | None = None
    shuffle: bool = True
    fault: str = "none"

    def __post_init__(self) -> None:
        if not isinstance(self.declared, LocalRandomizer | ScramblerMechanism):
            raise InvalidParameterError(
                "declared", "a LocalRandomizer or a ScramblerMechanism", self.declared
            )
        if self.actual_sampling_rate is not None:
            check_probability("actual_sampling_rate", self.actual_sampling_rate)
        size = self.declared.num_targets
        if self.actual_num_dummies is not None:
            limit = size - 1 if isinstance(self.declared, LocalRandomizer) else None
            check_int("actual_num_dummies", self.actual_num_dummies, minimum=0, maximum=limit)
        if self.dummy_weights is not None:
            weights = np.asarray(self.dummy_weights, dtype=float)
            if weights.shape != (size,) or np.any(weights < 0) or weights.sum() <= 0:
                raise InvalidParameterError(
                    "dummy_weights", f"{size} non-negative weights, not all 0", self.dummy_weights
                )
            if isinstance(self.declared, ScramblerMechanism) and self.declared.capped:
                raise InvalidParameterError(
                    "dummy_weights", "None for the capped scrambler", self.dummy_weights
                )
            positive = int(np.count_nonzero(weights))
            if isinstance(self.declared, LocalRandomizer) and positive - 1 < self.num_dummies:
                raise InvalidParameterError(
                    "dummy_weights",
                    f"at least d + 1 = {self.num_dummies + 1} positive weights",
                    self.dummy_weights,
                )
        if self.fault != "none" and self.fault not in FAULT_KINDS:
            raise InvalidParameterError(
                "fault", f"'none' or one of {', '.join(FAULT_KINDS)}", self.fault
            )

    @property
    def kind(self) -> str:
        """``"local"`` or ``"scrambler"``."""
        return "local" if isinstance(self.declared, LocalRandomizer) else "scrambler"

    @property
    def sampling_rate(self) -> float:
        """σ actually used."""
        if self.actual_sampling_rate is None:
            return float(self.declared.sampling_rate)
        return float(self.actual_sampling_rate)

    @property
    def num_dummies(self) -> int:
        """The number of dummies d actually used."""
        if self.actual_num_dummies is None:
            return int(self.declared.num_dummies)
        return int(self.actual_num_dummies)

    @property
    def countermeasure(self) -> LocalFlooding | Scramblers:
        """The countermeasure the role steps are given (the actual σ and d, not the declared)."""
        declared = self.declared
        if isinstance(declared, LocalRandomizer):
            return LocalFlooding(sampling_rate=self.sampling_rate, num_dummies=self.num_dummies)
        return Scramblers(
            sampling_rate=self.sampling_rate,
            batch_size=declared.batch_size,
            num_dummies=self.num_dummies,
            capped=declared.capped,
        )

    def runs_per_chunk(self) -> int:
        """Runs simulated at once (`CHUNK_RUNS`, `CHUNK_SOURCES`)."""
        declared = self.declared
        if isinstance(declared, LocalRandomizer):
            return CHUNK_RUNS
        sources = CHUNK_SOURCES_CAPPED if declared.capped else CHUNK_SOURCES
        return max(1, sources // declared.batch_size)

    def sample(
        self,
        differing_target: int,
        other_target: int,
        runs: int,
        *,
        randomness: Randomness,
        first_run: int = 0,
    ) -> Observations:
        """Runs ``first_run`` … ``first_run + runs − 1`` on one input; what the observer sees.

        Run r draws as node r of the role steps (the source of R_σ^d, or the scrambler of
        sources r·n … r·n + n − 1 and those sources), so a run's outcome does not depend on
        which runs are simulated with it. The audited source (the run's first) holds
        ``differing_target``; for a scrambler the n − 1 other sources hold ``other_target``.
        """
        count = check_int("runs", runs, minimum=1)
        first = check_int("first_run", first_run, minimum=0)
        if isinstance(self.declared, LocalRandomizer):
            return self._sample_local(differing_target, count, first, randomness)
        return self._sample_scrambler(differing_target, other_target, count, first, randomness)

    def _sample_local(
        self, target: int, runs: int, first_run: int, randomness: Randomness
    ) -> Observations:
        size = self.declared.num_targets
        sources = np.arange(first_run, first_run + runs, dtype=np.int64)
        messages = self._source_step(np.full(runs, target, dtype=np.int64), randomness, sources)
        emitted = np.concatenate([messages.sent[:, None], messages.flooding], axis=1)
        rows = np.repeat(np.arange(runs, dtype=np.int64), emitted.shape[1])
        keys = rows * size + emitted.ravel()
        counts = np.bincount(keys, minlength=runs * size).reshape(runs, size)
        if self.shuffle:
            # The source sends its d + 1 messages in the order of source_send_order.
            leading = roles.source_first_sent(
                emitted.shape[1], randomness=randomness, flow=AUDIT_FLOW, sources=sources
            )
            head = emitted[np.arange(runs), leading]
        else:
            head = messages.sent
        return Observations(counts=counts.astype(np.int64), head=np.asarray(head, np.int64))

    def _sample_scrambler(
        self, target: int, other: int, runs: int, first_run: int, randomness: Randomness
    ) -> Observations:
        declared = self.declared
        assert isinstance(declared, ScramblerMechanism)
        countermeasure = self.countermeasure
        assert isinstance(countermeasure, Scramblers)
        batch = declared.batch_size
        truth = np.full((runs, batch), other, dtype=np.int64)
        truth[:, 0] = target
        steps = scrambler_runs(
            truth,
            countermeasure,
            num_targets=declared.num_targets,
            randomness=randomness,
            first_run=first_run,
            dummy_step=self._dummy_step(),
        )
        if self.shuffle:
            # The scrambler forwards its batch (its sources' messages in source order, then its
            # dummies by target) in the order of scrambler_shuffle.
            leading = roles.scrambler_first_forwarded(
                batch + self.num_dummies,
                largest_batch=batch,
                countermeasure=countermeasure,
                randomness=randomness,
                flow=AUDIT_FLOW,
                scramblers=steps.scramblers,
            )
            real = leading < batch
            head = np.empty(runs, dtype=np.int64)
            head[real] = steps.messages.sent.reshape(runs, batch)[real, leading[real]]
            dummy_index = leading[~real] - batch
            head[~real] = np.argmax(
                np.cumsum(steps.dummies[~real], axis=1) > dummy_index[:, None], axis=1
            )
        else:
            head = steps.messages.sent[::batch]
        return Observations(counts=steps.counts, head=head)

    def _source_step(
        self, true_targets: IntArray, randomness: Randomness, sources: IntArray
    ) -> roles.SourceMessages:
        """The sources' step: the role's, or with a broken flooding step (non-uniform dummies)."""
        countermeasure = self.countermeasure
        size = self.declared.num_targets
        weights = self.dummy_weights
        if weights is None or not isinstance(countermeasure, LocalFlooding):
            return roles.source_messages(
                true_targets,
                countermeasure=countermeasure,
                num_targets=size,
                randomness=randomness,
                flow=AUDIT_FLOW,
                sources=sources,
            )
        sampled = roles.source_messages(
            true_targets,
            countermeasure=LocalFlooding(sampling_rate=countermeasure.sampling_rate),
            num_targets=size,
            randomness=randomness,
            flow=AUDIT_FLOW,
            sources=sources,
        )
        uniforms = randomness.uniforms(roles.flood_stream(AUDIT_FLOW, size), sources)
        flooding = _weighted_distinct(sampled.sent, weights, self.num_dummies, uniforms)
        return roles.SourceMessages(sent=sampled.sent, is_real=sampled.is_real, flooding=flooding)

    def _dummy_step(self) -> DummyStep:
        """The scramblers' dummy step: the role's, or a broken one (non-uniform dummies)."""
        weights = self.dummy_weights
        if weights is None:
            return roles.scrambler_dummies
        cumulative = np.cumsum(weights) / np.sum(weights)

        def weighted_dummies(
            received: IntArray,
            batch_sizes: IntArray,
            *,
            countermeasure: Scramblers,
            randomness: Randomness,
            flow: str,
            scramblers: IntArray,
        ) -> IntArray:
            # The role's own draws, mapped to targets by ``weights`` instead of uniformly.
            dummies = countermeasure.num_dummies
            uniforms = randomness.uniforms(roles.dummies_stream(flow, dummies), scramblers)
            size = received.shape[1]
            drawn = np.searchsorted(cumulative, uniforms.ravel(), side="right")
            targets = np.minimum(drawn, size - 1)
            rows = np.repeat(np.arange(received.shape[0], dtype=np.int64), dummies)
            counts = np.bincount(rows * size + targets, minlength=received.size)
            return counts.reshape(received.shape).astype(np.int64)

        return weighted_dummies


#: A scrambler dummy step: the arguments of `dpcomm.protocol.roles.scrambler_dummies`.
DummyStep = Callable[..., IntArray]


@dataclass(frozen=True, eq=False)
class ScramblerRuns:
    """The source and scrambler steps of many runs, one scrambler per run.

    Attributes:
        messages: the sources' messages (`dpcomm.protocol.roles.source_messages`), run
            by run (the run's n sources in order).
        received: (runs, T) messages each run's scrambler received for each target.
        dummies: (runs, T) dummies each run's scrambler added (Algorithm 1).
        scramblers: (runs,) the scramblers' node indices (the runs' numbers).
    """

    messages: roles.SourceMessages
    received: IntArray
    dummies: IntArray
    scramblers: IntArray

    @property
    def counts(self) -> IntArray:
        """(runs, T) messages each scrambler forwards to each target: what the observer sees."""
        total: IntArray = (self.received + self.dummies).astype(np.int64)
        return total


def block_source_messages(
    true_targets: IntArray,
    countermeasure: Scramblers | LocalFlooding,
    *,
    first_run: int,
    num_targets: int,
    randomness: Randomness,
    flow: str,
) -> roles.SourceMessages:
    """The source step of runs ``first_run`` … of a flow, one block of sources per run.

    ``true_targets`` (runs, b) holds each run's true targets: run r is sources r·b … r·b + b − 1
    of the flow (`dpcomm.protocol.roles.source_messages`), as the engines number them.
    """
    runs, block = true_targets.shape
    sources = np.arange(first_run * block, (first_run + runs) * block, dtype=np.int64)
    return roles.source_messages(
        true_targets.ravel(),
        countermeasure=countermeasure,
        num_targets=num_targets,
        randomness=randomness,
        flow=flow,
        sources=sources,
    )


def scrambler_runs(
    true_targets: npt.ArrayLike,
    countermeasure: Scramblers,
    *,
    num_targets: int,
    randomness: Randomness,
    first_run: int = 0,
    flow: str = AUDIT_FLOW,
    dummy_step: DummyStep = roles.scrambler_dummies,
) -> ScramblerRuns:
    """Runs ``first_run`` … of the scrambler's flow, as the engines run a flow.

    ``true_targets`` (runs, n) holds the true targets of each run's n sources. Run r is
    scrambler r of one flow and its sources are sources r·n … r·n + n − 1: the source step
    (`dpcomm.protocol.roles.source_messages`), the coordinator's batches
    (`dpcomm.plan.costs.ConsecutiveBatches`: n consecutive sources each) and the
    scrambler step (``dummy_step``, `dpcomm.protocol.roles.scrambler_dummies` unless a
    fault replaces it) over all of them at once, each node drawing from its own streams of
    ``randomness``, as `dpcomm.engine.steps.flow_steps` runs them. A run's outcome does
    not depend on the runs simulated with it.
    """
    truth = np.asarray(true_targets, dtype=np.int64)
    if truth.ndim != 2 or truth.shape[1] != countermeasure.batch_size:
        raise InvalidParameterError(
            "true_targets", f"a (runs, {countermeasure.batch_size}) array", truth.shape
        )
    runs, batch = truth.shape
    first = check_int("first_run", first_run, minimum=0)
    messages = block_source_messages(
        truth,
        countermeasure,
        first_run=first,
        num_targets=num_targets,
        randomness=randomness,
        flow=flow,
    )
    # Batches of exactly n consecutive sources: the chunk's batch k is scrambler first + k of
    # the whole flow, which holds the batches of every run; batch k is row k of the sources
    # laid out (runs, n), so each row's counts are its received messages.
    batches = ConsecutiveBatches.of(runs * batch, batch)
    scramblers = first + np.arange(batches.num_batches, dtype=np.int64)
    keys = (
        messages.sent.reshape(runs, batch)
        + (np.arange(runs, dtype=np.int64) * num_targets)[:, None]
    )
    received = np.bincount(keys.ravel(), minlength=runs * num_targets).reshape(runs, num_targets)
    dummies = dummy_step(
        received,
        np.array(batches.sizes, dtype=np.int64),
        countermeasure=countermeasure,
        randomness=randomness,
        flow=flow,
        scramblers=scramblers,
    )
    return ScramblerRuns(
        messages=messages, received=received, dummies=dummies, scramblers=scramblers
    )


def _weighted_distinct(
    first: IntArray, weights: tuple[float, ...], dummies: int, uniforms: FloatArray
) -> IntArray:
    """The d distinct targets other than ``first``, by weight (a broken flooding step).

    ``uniforms`` (S, T − 1) are the flooding stream's draws, one per target other than the
    first (in target order); each becomes an exponential key scaled by its target's weight and
    the d smallest keys are drawn (weighted sampling without replacement).
    """
    runs = first.shape[0]
    size = len(weights)
    if dummies == 0:
        return np.zeros((runs, 0), dtype=np.int64)
    positions = np.arange(size - 1, dtype=np.int64)[None, :]
    others = positions + (positions >= first[:, None])
    scale = np.asarray(weights, dtype=float)[others]
    with np.errstate(divide="ignore"):
        keys = -np.log1p(-uniforms) / scale
    chosen = np.argpartition(keys, dummies - 1, axis=1)[:, :dummies]
    return np.take_along_axis(others, chosen, axis=1).astype(np.int64)


def seeded_fault(declared: Declared, kind: str) -> AuditedMechanism:
    """The faulty variant ``kind`` of ``declared``, which still claims its guarantee.

    * ``nonuniform-dummies``: dummies never go to the last target (an off-by-one draw in
      [0, T − 1) instead of [0, T));
    * ``no-shuffle``: messages leave in arrival order (the scrambler's first source first; for
      R_σ^d the first message first);
    * ``lower-sampling``: the actual σ is a quarter of the declared one;
    * ``fewer-dummies``: the actual d is a fifth of the declared one (rounded down).
    """
    if kind == "nonuniform-dummies":
        weights = tuple([1.0] * (declared.num_targets - 1) + [0.0])
        return AuditedMechanism(declared=declared, dummy_weights=weights, fault=kind)
    if kind == "no-shuffle":
        return AuditedMechanism(declared=declared, shuffle=False, fault=kind)
    if kind == "lower-sampling":
        return AuditedMechanism(
            declared=declared, actual_sampling_rate=declared.sampling_rate / 4, fault=kind
        )
    if kind == "fewer-dummies":
        return AuditedMechanism(
            declared=declared, actual_num_dummies=declared.num_dummies // 5, fault=kind
        )
    raise InvalidParameterError("fault", f"one of {', '.join(FAULT_KINDS)}", kind)


@dataclass(frozen=True, eq=False)
class Observations:
    """What an observer sees in each run.

    Attributes:
        counts: int64 (runs, T): messages received by each target (for R_σ^d, 0/1 per target).
        head: int64 (runs,): the target of the first message emitted (the order of emission is
            part of the observation; for a correct mechanism it is a uniform pick).
    """

    counts: IntArray
    head: IntArray


@dataclass(frozen=True)
class NeighbouringInputs:
    """The two inputs the audit compares.

    Attributes:
        target: t, the audited source's target in input 0.
        alternative: t', its target in input 1.
        others: t'', the target of the n − 1 other sources (scrambler only).
    """

    target: int
    alternative: int
    others: int

    def describe(self, kind: str) -> str:
        """One line for reports."""
        text = f"source 0 on target {self.target} (input 0) vs {self.alternative} (input 1)"
        if kind == "scrambler":
            text += f"; the n − 1 other sources on target {self.others}"
        return text


def neighbouring_inputs(num_targets: int) -> NeighbouringInputs:
    """The audit's inputs: t = 0, t' = T − 1, t'' = 1.

    t and t' are the boundary targets, where off-by-one faults show.
    The other sources sit on a third target, as in the accountant's certified lower bound
    (``ScramblerLowerBound``): the counts at t and t' then hold only the audited source's
    message, the others' redraws and the dummies. With T = 2 the others sit on t.
    """
    size = check_int("num_targets", num_targets, minimum=2)
    return NeighbouringInputs(target=0, alternative=size - 1, others=1 if size > 2 else 0)


@dataclass(frozen=True)
class EventEstimate:
    """One candidate event E and its Clopper-Pearson bounds on the estimation half.

    Attributes:
        direction: ``"0>1"`` when the event is likelier under input 0 (ratio P₀/P₁), else
            ``"1>0"``.
        categories: number of observation categories the event unites.
        count_high: occurrences under the likelier input (of ``runs`` estimation runs).
        count_low: occurrences under the other input.
        runs: estimation runs per input.
        high_lower: lower confidence bound on the likelier input's probability.
        low_upper: upper confidence bound on the other input's probability.
        epsilon: ln((high_lower − δ) / low_upper), 0 when high_lower <= δ.
    """

    direction: str
    categories: int
    count_high: int
    count_low: int
    runs: int
    high_lower: float
    low_upper: float
    epsilon: float


@dataclass(frozen=True)
class AppendixDView:
    """The empirical view of the paper's Appendix D over the full observations.

    Attributes:
        distinct_outputs: distinct outputs seen over both inputs.
        outputs_seen_under_both: of those, outputs seen at least once under each input.
        max_log_ratio: max |ln(c₀/c₁)| over outputs with c₀, c₁ >= ``min_count``.
        min_count: the count threshold of ``max_log_ratio``.
        mass_with_finite_ratio: share of runs whose output was seen under both inputs.
        new_share_draws: capture-recapture: share of the second batch's runs whose output was
            not seen in the first batch (an estimate of the probability mass never seen).
        new_share_distinct: share of the second batch's distinct outputs not in the first.
        top_outputs: up to 10 outputs of largest log-ratio among those with c₀, c₁ >=
            ``min_count``: (c₀, c₁, log-ratio), largest first.
    """

    distinct_outputs: int
    outputs_seen_under_both: int
    max_log_ratio: float
    min_count: int
    mass_with_finite_ratio: float
    new_share_draws: float
    new_share_distinct: float
    top_outputs: tuple[tuple[int, int, float], ...]


@dataclass(frozen=True)
class AuditReport:
    """The audit of one mechanism.

    Attributes:
        mechanism: the audited mechanism (declared parameters and injected fault).
        inputs: the neighbouring inputs.
        runs: runs per input (half select events, half estimate them).
        confidence: the confidence of the lower bound.
        delta: δ of the comparison.
        upper_bound: the accountant's ε for the declared mechanism at δ.
        upper_method: the method that gave it.
        lower_bound: the empirical lower bound on ε (holds with probability >= confidence).
        events_tried: events estimated (the Bonferroni factor).
        best_event: the event that gave the lower bound, or None if none beat 0.
        events: every estimated event.
        appendix_d: the Appendix D view.
        seconds: wall-clock time of the simulation and statistics.
    """

    mechanism: AuditedMechanism
    inputs: NeighbouringInputs
    runs: int
    confidence: float
    delta: float
    upper_bound: float
    upper_method: str
    lower_bound: float
    events_tried: int
    best_event: EventEstimate | None
    events: tuple[EventEstimate, ...]
    appendix_d: AppendixDView
    seconds: float = field(compare=False)

    @property
    def passed(self) -> bool:
        """PASS when the lower bound does not exceed the accountant's upper bound."""
        return self.lower_bound <= self.upper_bound + 1e-9

    @property
    def runs_per_second(self) -> float:
        """Mechanism runs (both inputs) per second of the whole audit."""
        return 2 * self.runs / self.seconds if self.seconds > 0 else math.inf


def _categories(
    observations: Observations, inputs: NeighbouringInputs, *, clip: int
) -> tuple[IntArray, int]:
    """Reduce each observation to a category (a post-processing, so bounds stay valid).

    Category = (min(c_t, clip), min(c_t', clip), class of the first emitted message: t, t' or
    another target). For R_σ^d, c_t and c_t' are 0/1 (clip = 1).
    """
    counts = observations.counts
    high = np.minimum(counts[:, inputs.target], clip)
    low = np.minimum(counts[:, inputs.alternative], clip)
    head = observations.head
    head_class = np.where(
        head == inputs.target, 0, np.where(head == inputs.alternative, 1, 2)
    ).astype(np.int64)
    codes = (high * (clip + 1) + low) * 3 + head_class
    return codes.astype(np.int64), (clip + 1) ** 2 * 3


def _hash_outputs(
    observations: Observations, coefficients: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each full observation (counts and first emitted target)."""
    counts = observations.counts.astype(np.uint64)
    with np.errstate(over="ignore"):
        hashed = counts @ coefficients[:-1]
        hashed = hashed + observations.head.astype(np.uint64) * coefficients[-1]
    return np.asarray(hashed, dtype=np.uint64)


def _clopper_pearson(
    successes: npt.ArrayLike, trials: int, alpha: float
) -> tuple[FloatArray, FloatArray]:
    """One-sided Clopper-Pearson bounds, each at level 1 − alpha: (lower, upper)."""
    k = np.asarray(successes, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(alpha, k, trials - k + 1), 0.0)
        upper = np.where(k < trials, stats.beta.ppf(1 - alpha, k + 1, trials - k), 1.0)
    return np.nan_to_num(lower, nan=0.0), np.nan_to_num(upper, nan=1.0)


def _epsilon_bound(high_lower: FloatArray, low_upper: FloatArray, delta: float) -> FloatArray:
    """ln((high_lower − δ) / low_upper), 0 where the numerator is not positive."""
    numerator = high_lower - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(numerator > 0, np.log(np.maximum(numerator, 1e-300) / low_upper), 0.0)
    return np.maximum(value, 0.0)


def _select_events(
    high: IntArray, low: IntArray, runs: int, alpha: float, delta: float, keep: int
) -> list[tuple[float, npt.NDArray[np.bool_]]]:
    """Candidate events for one direction, from the selection half, with their bounds there.

    Categories are ranked by their empirical likelihood ratio (the Neyman-Pearson order); each
    prefix of the ranking is an event. The ``keep`` prefixes with the best selection-half
    lower bound (computed at the same Bonferroni level as the estimation) are returned, each
    with that bound.
    """
    seen = np.flatnonzero(high > 0)
    if seen.size == 0:
        return []
    ratio = (high[seen] + 0.5) / (low[seen] + 0.5)
    order = seen[np.lexsort((-high[seen], -ratio))]
    cum_high = np.cumsum(high[order])
    cum_low = np.cumsum(low[order])
    high_lower, _ = _clopper_pearson(cum_high, runs, alpha)
    _, low_upper = _clopper_pearson(cum_low, runs, alpha)
    bounds = _epsilon_bound(high_lower, low_upper, delta)
    best = np.argsort(-bounds, kind="stable")[:keep]
    events = []
    for index in best:
        mask = np.zeros(high.shape[0], dtype=bool)
        mask[order[: index + 1]] = True
        events.append((float(bounds[index]), mask))
    return events


def _appendix_d(hashes0: npt.NDArray[np.uint64], hashes1: npt.NDArray[np.uint64]) -> AppendixDView:
    """Per-output counts and log-ratios, and capture-recapture on two batches (App. D)."""
    runs = hashes0.shape[0]
    values, inverse = np.unique(np.concatenate([hashes0, hashes1]), return_inverse=True)
    c0 = np.bincount(inverse[:runs], minlength=values.shape[0])
    c1 = np.bincount(inverse[runs:], minlength=values.shape[0])
    both = (c0 > 0) & (c1 > 0)
    mass = float((c0[both].sum() + c1[both].sum()) / (2 * runs))
    min_count = 10
    frequent = np.flatnonzero((c0 >= min_count) & (c1 >= min_count))
    ratios = np.abs(np.log(c0[frequent] / c1[frequent])) if frequent.size else np.zeros(0)
    top = np.argsort(-ratios, kind="stable")[:10]
    top_outputs = tuple((int(c0[frequent[i]]), int(c1[frequent[i]]), float(ratios[i])) for i in top)
    # Capture-recapture: batch 1 = first half of each input's runs, batch 2 = second half.
    half = runs // 2
    first = np.concatenate([inverse[:half], inverse[runs : runs + half]])
    second = np.concatenate([inverse[half:runs], inverse[runs + half :]])
    seen_first = np.zeros(values.shape[0], dtype=bool)
    seen_first[first] = True
    new_draws = float(np.mean(~seen_first[second])) if second.size else 0.0
    distinct_second = np.unique(second)
    new_distinct = float(np.mean(~seen_first[distinct_second])) if distinct_second.size else 0.0
    return AppendixDView(
        distinct_outputs=int(values.shape[0]),
        outputs_seen_under_both=int(both.sum()),
        max_log_ratio=float(ratios.max()) if ratios.size else 0.0,
        min_count=min_count,
        mass_with_finite_ratio=mass,
        new_share_draws=new_draws,
        new_share_distinct=new_distinct,
        top_outputs=top_outputs,
    )


#: One reduction of the runs to categories: each run's category under input 0, under input 1
#: (in run order, the same number of runs), and the number of categories.
Categorization = tuple[IntArray, IntArray, int]


def estimate_events(
    categorizations: Sequence[Categorization],
    *,
    confidence: float,
    delta: float,
) -> tuple[tuple[EventEstimate, ...], int]:
    """Candidate events selected on the first half of the runs, estimated on the second.

    Each categorization gives candidate events on the first half of the runs
    (`_select_events`); the `EVENTS_PER_DIRECTION` candidates of each direction
    with the best selection-half bounds, whichever categorization gave them, are estimated on
    the other half with one-sided Clopper-Pearson bounds, each at level
    (1 − ``confidence``)/(2m), m the number of events estimated (Bonferroni; choosing among
    candidates on the selection half costs nothing, the estimation half being independent of
    it): with probability at least ``confidence`` every event's ε_lb is at most the true ε
    at ``delta``. Returns the estimated events and m.
    """
    count = categorizations[0][0].shape[0]
    selection_runs = count // 2
    estimation_runs = count - selection_runs
    num_events = 2 * EVENTS_PER_DIRECTION
    alpha = (1.0 - confidence) / (2 * num_events)
    events: list[EventEstimate] = []
    for direction, (a, b) in (("0>1", (0, 1)), ("1>0", (1, 0))):
        candidates: list[tuple[float, int, npt.NDArray[np.bool_], IntArray, IntArray]] = []
        for number, (codes0, codes1, categories) in enumerate(categorizations):
            codes = (codes0, codes1)
            selected = [np.bincount(c[:selection_runs], minlength=categories) for c in codes]
            estimated = [np.bincount(c[selection_runs:], minlength=categories) for c in codes]
            for bound, mask in _select_events(
                selected[a], selected[b], selection_runs, alpha, delta, EVENTS_PER_DIRECTION
            ):
                candidates.append((bound, number, mask, estimated[a], estimated[b]))
        candidates.sort(key=lambda candidate: (-candidate[0], candidate[1]))
        for _, _, mask, high, low in candidates[:EVENTS_PER_DIRECTION]:
            hit_high = int(high[mask].sum())
            hit_low = int(low[mask].sum())
            high_lower, _ = _clopper_pearson([hit_high], estimation_runs, alpha)
            _, low_upper = _clopper_pearson([hit_low], estimation_runs, alpha)
            epsilon = float(_epsilon_bound(high_lower, low_upper, delta)[0])
            events.append(
                EventEstimate(
                    direction=direction,
                    categories=int(mask.sum()),
                    count_high=hit_high,
                    count_low=hit_low,
                    runs=estimation_runs,
                    high_lower=float(high_lower[0]),
                    low_upper=float(low_upper[0]),
                    epsilon=epsilon,
                )
            )
    return tuple(events), num_events


def _run_both_inputs(
    audited: AuditedMechanism,
    inputs: NeighbouringInputs,
    *,
    count: int,
    streams: tuple[Randomness, Randomness],
    coefficients: npt.NDArray[np.uint64],
    progress: bool,
) -> tuple[Categorization, tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]]:
    """``count`` runs under each neighbouring input, chunk by chunk: their categories and hashes.

    Input 0 draws from ``streams[0]``, input 1 from ``streams[1]``; a run's outputs are reduced
    to its category (`_categories`) and hashed with ``coefficients`` (`_hash_outputs`).
    """
    declared = audited.declared
    clip = (
        1 if isinstance(declared, LocalRandomizer) else declared.batch_size + declared.num_dummies
    )
    codes: list[list[IntArray]] = [[], []]
    hashes: list[list[npt.NDArray[np.uint64]]] = [[], []]
    step = audited.runs_per_chunk()
    chunks = [(s, min(count, s + step)) for s in range(0, count, step)]
    for low, high in with_progress(chunks, enabled=progress, description="audit", unit="chunk"):
        for side, target in enumerate((inputs.target, inputs.alternative)):
            seen = audited.sample(
                target, inputs.others, high - low, randomness=streams[side], first_run=low
            )
            code, categories = _categories(seen, inputs, clip=clip)
            codes[side].append(code)
            hashes[side].append(_hash_outputs(seen, coefficients))
    categorization = (np.concatenate(codes[0]), np.concatenate(codes[1]), categories)
    return categorization, (np.concatenate(hashes[0]), np.concatenate(hashes[1]))


def audit(
    mechanism: AuditedMechanism | Declared,
    *,
    runs: int = 1_000_000,
    confidence: float = 0.95,
    delta: float | None = None,
    rng: np.random.Generator | int | None = None,
    progress: bool = False,
) -> AuditReport:
    """Audit ``mechanism``: empirical lower bound on ε vs the accountant's upper bound.

    Args:
        mechanism: a declared mechanism (audited as implemented) or an
            `AuditedMechanism` (possibly with a seeded fault).
        runs: runs per neighbouring input (>= 100); half select events, half estimate them.
        confidence: probability that the reported lower bound is below the true ε, in (0, 1).
        delta: δ of the comparison; default 1e-4 for a scrambler, 0 (pure ε) for R_σ^d.
        rng: a numpy Generator, a seed, or None: the seed of the runs' randomness streams
            (`dpcomm.protocol.randomness.Randomness`, one round per input) and of the
            output hash.
        progress: show a progress bar over the chunks of runs.
    """
    audited = (
        mechanism
        if isinstance(mechanism, AuditedMechanism)
        else AuditedMechanism(declared=mechanism)
    )
    count = check_int("runs", runs, minimum=100)
    level = check_probability("confidence", confidence)
    if not 0.0 < level < 1.0:
        raise InvalidParameterError("confidence", "a number in (0, 1)", confidence)
    declared = audited.declared
    if delta is None:
        delta = 0.0 if isinstance(declared, LocalRandomizer) else 1e-4
    target_delta = check_delta("delta", delta)
    generator = make_rng(rng)
    seed = int(generator.integers(0, 1 << 62))
    # The two inputs' runs draw from two rounds of one seed: independent runs.
    streams = (Randomness(seed, round=0), Randomness(seed, round=1))
    start = time.perf_counter()
    report = account(declared, delta=target_delta, monte_carlo_samples=0)
    inputs = neighbouring_inputs(declared.num_targets)
    coefficients = generator.integers(
        1, np.iinfo(np.int64).max, size=declared.num_targets + 1, dtype=np.int64
    ).astype(np.uint64) | np.uint64(1)
    categorization, hashes = _run_both_inputs(
        audited, inputs, count=count, streams=streams, coefficients=coefficients, progress=progress
    )
    events, num_events = estimate_events([categorization], confidence=level, delta=target_delta)
    best = max(events, key=lambda e: e.epsilon, default=None)
    lower = best.epsilon if best is not None else 0.0
    view = _appendix_d(*hashes)
    return AuditReport(
        mechanism=audited,
        inputs=inputs,
        runs=count,
        confidence=level,
        delta=target_delta,
        upper_bound=float(report.guarantee.epsilon),
        upper_method=report.guarantee.method,
        lower_bound=lower,
        events_tried=num_events,
        best_event=best if best is not None and best.epsilon > 0 else None,
        events=events,
        appendix_d=view,
        seconds=time.perf_counter() - start,
    )
