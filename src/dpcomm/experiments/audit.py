"""Statistical audit of the mechanisms: an empirical lower bound on ε against the accountant.

The audit runs a mechanism many times on two neighbouring inputs, selects candidate output
events on half of the runs and estimates their probabilities on the other half with
Clopper-Pearson intervals (Bonferroni over the events tried). Every event gives
ε_lb = ln((P₀[E]_lower − δ) / P₁[E]_upper); with probability at least the confidence, the
largest of them is below the mechanism's true ε. The audit PASSes when that lower bound is at
most the accountant's upper bound for the *declared* parameters (see docs/audit.md).

It also reports the view of the paper's Appendix D: per distinct output, the counts c₀, c₁ under
the two inputs and the log-ratio |ln(c₀/c₁)|, and the share of outputs never seen estimated by
capture-recapture (two batches; share of new outputs in the second).

Mechanisms are wrapped in :class:`AuditedMechanism`, which can inject the seeded faults the
audit must catch (:data:`FAULT_KINDS`): non-uniform dummies, no shuffle, a lower sampling rate
than declared, fewer dummies than declared. Each faulty variant claims the original guarantee.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism, account
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments._common import FloatArray, IntArray
from dpcomm.progress import with_progress
from dpcomm.protocol import ScramblerAssignment, flood_targets, randomize_targets, scramble
from dpcomm.validation import check_delta, check_int, check_probability, make_rng

Engine = Literal["fast", "protocol"]
Declared = LocalRandomizer | ScramblerMechanism

#: The seeded faults of issue #6, in the order the documentation lists them.
FAULT_KINDS: tuple[str, ...] = (
    "nonuniform-dummies",
    "no-shuffle",
    "lower-sampling",
    "fewer-dummies",
)

#: Runs simulated at once (memory stays O(chunk · T)).
CHUNK_RUNS = 1 << 16

#: Candidate events kept per direction after selection (so 2× this many are estimated).
EVENTS_PER_DIRECTION = 5


@dataclass(frozen=True, kw_only=True)
class AuditedMechanism:
    """A mechanism as run by the audit: the declared one, possibly with a fault injected.

    Attributes:
        declared: the mechanism whose guarantee is claimed (and accounted).
        actual_sampling_rate: σ actually used (None: the declared σ).
        actual_num_dummies: d actually used (None: the declared d).
        dummy_weights: weights of the targets the dummies are drawn from (None: uniform).
        shuffle: False emits messages in arrival order (the differing source first).
        fault: a label for reports ("none" or one of :data:`FAULT_KINDS`).
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

    def sample(
        self,
        differing_target: int,
        other_target: int,
        runs: int,
        *,
        rng: np.random.Generator,
        engine: Engine = "fast",
    ) -> Observations:
        """Run the mechanism ``runs`` times on one input; what the observer sees each time.

        The audited source (source 0) holds ``differing_target``; for a scrambler the n − 1
        other sources hold ``other_target``.
        """
        if isinstance(self.declared, LocalRandomizer):
            return self._sample_local(differing_target, runs, rng)
        return self._sample_scrambler(differing_target, other_target, runs, rng, engine)

    def _sample_local(self, target: int, runs: int, rng: np.random.Generator) -> Observations:
        size = self.declared.num_targets
        first = randomize_targets(
            np.full(runs, target, dtype=np.int64),
            num_targets=size,
            sampling_rate=self.sampling_rate,
            rng=rng,
        )
        dummies = self.num_dummies
        if self.dummy_weights is None:
            flooded = flood_targets(first.sent, num_targets=size, num_dummies=dummies, rng=rng)
        else:
            flooded = _weighted_distinct(first.sent, self.dummy_weights, dummies, rng)
        emitted = np.concatenate([first.sent[:, None], flooded], axis=1)
        counts = np.zeros((runs, size), dtype=np.int64)
        rows = np.repeat(np.arange(runs), dummies + 1)
        np.add.at(counts, (rows, emitted.ravel()), 1)
        if self.shuffle:
            # The d + 1 messages leave in a uniformly random order: the first is any of them.
            head = emitted[np.arange(runs), rng.integers(0, dummies + 1, size=runs)]
        else:
            head = first.sent
        return Observations(counts=counts, head=np.asarray(head, dtype=np.int64))

    def _sample_scrambler(
        self,
        target: int,
        other: int,
        runs: int,
        rng: np.random.Generator,
        engine: Engine,
    ) -> Observations:
        declared = self.declared
        assert isinstance(declared, ScramblerMechanism)
        size, batch = declared.num_targets, declared.batch_size
        sigma, dummies = self.sampling_rate, self.num_dummies
        if engine == "protocol":
            truth = np.full((runs, batch), other, dtype=np.int64)
            truth[:, 0] = target
            sent = randomize_targets(
                truth.ravel(), num_targets=size, sampling_rate=sigma, rng=rng
            ).sent
            first = sent[::batch]
            if self.dummy_weights is None:
                assignment = one_scrambler_per_run(runs, batch)
                counts = np.array(
                    scramble(
                        sent,
                        assignment,
                        num_targets=size,
                        num_dummies=dummies,
                        capped=declared.capped,
                        rng=rng,
                    ).counts
                )
            else:
                keys = np.repeat(np.arange(runs, dtype=np.int64), batch) * size + sent
                counts = np.bincount(keys, minlength=runs * size).reshape(runs, size)
                counts += _multinomial(np.full(runs, dummies), self.dummy_weights, rng)
        else:
            redraw = rng.random(runs) < sigma
            first = np.where(redraw, rng.integers(0, size, size=runs), target).astype(np.int64)
            moved = rng.binomial(batch - 1, sigma, size=runs).astype(np.int64)
            uniform = tuple([1.0] * size)
            if self.dummy_weights is None and not declared.capped:
                counts = _multinomial(moved + dummies, uniform, rng)
            else:
                counts = _multinomial(moved, uniform, rng)
            counts[:, other] += batch - 1 - moved
            counts[np.arange(runs), first] += 1
            if declared.capped:
                counts += _capped_dummies(counts, batch, dummies, rng)
            elif self.dummy_weights is not None:
                counts += _multinomial(np.full(runs, dummies), self.dummy_weights, rng)
        if self.shuffle:
            # Uniform shuffle: the first message out is a uniform pick among the n + d.
            picks = rng.integers(0, batch + dummies, size=runs)
            head = np.argmax(np.cumsum(counts, axis=1) > picks[:, None], axis=1)
        else:
            head = first
        return Observations(counts=counts.astype(np.int64), head=np.asarray(head, np.int64))


def one_scrambler_per_run(runs: int, batch: int) -> ScramblerAssignment:
    """One scrambler per run, holding sources run·n … run·n + n − 1."""
    mapping = np.repeat(np.arange(runs, dtype=np.int64), batch)
    return ScramblerAssignment(
        batch_size=batch,
        scrambler_of_source=mapping,
        batch_sizes=np.full(runs, batch, dtype=np.int64),
        source_order=np.arange(runs * batch, dtype=np.int64),
    )


def _multinomial(
    trials: IntArray, weights: tuple[float, ...], rng: np.random.Generator
) -> IntArray:
    """Multinomial counts, one row per entry of ``trials``, by conditional binomials."""
    probabilities = np.asarray(weights, dtype=float)
    probabilities = probabilities / probabilities.sum()
    size = probabilities.shape[0]
    remaining = np.asarray(trials, dtype=np.int64).copy()
    counts = np.zeros((remaining.shape[0], size), dtype=np.int64)
    tail = np.concatenate([np.cumsum(probabilities[::-1])[::-1], [0.0]])
    for index in range(size - 1):
        share = probabilities[index] / tail[index] if tail[index] > 0 else 0.0
        drawn = rng.binomial(remaining, min(1.0, share))
        counts[:, index] = drawn
        remaining -= drawn
    counts[:, size - 1] = remaining
    return counts


def _capped_dummies(
    received: IntArray, cap: int, dummies: int, rng: np.random.Generator
) -> IntArray:
    """S̄_d: each dummy uniform among the targets holding fewer than n messages.

    Drawn in rounds by rejection: the pending dummies are drawn uniformly over all T targets;
    a draw onto a full target is rejected and redrawn in the next round. Given the counts u of
    a round, exactly min(u_x, n − current_x) of its draws onto x are accepted whatever their
    order, so each round is one multinomial; uniform-with-rejection is uniform among the open
    targets, as in Algorithm 1 with B = True.
    """
    current = received.copy()
    size = received.shape[1]
    pending = np.full(received.shape[0], dummies, dtype=np.int64)
    uniform = tuple([1.0] * size)
    while True:
        active = np.flatnonzero(pending > 0)
        if active.size == 0:
            break
        drawn = _multinomial(pending[active], uniform, rng)
        room = np.maximum(cap - current[active], 0)
        accepted = np.minimum(drawn, room)
        current[active] += accepted
        pending[active] -= accepted.sum(axis=1)
    added: IntArray = current - received
    return added


def _weighted_distinct(
    first: IntArray, weights: tuple[float, ...], dummies: int, rng: np.random.Generator
) -> IntArray:
    """Pick d distinct targets other than ``first``, without replacement, by weight (a fault)."""
    runs = first.shape[0]
    scale = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore"):
        keys = rng.exponential(size=(runs, scale.shape[0])) / scale
    keys[np.arange(runs), first] = np.inf
    if dummies == 0:
        return np.zeros((runs, 0), dtype=np.int64)
    chosen = np.argpartition(keys, dummies - 1, axis=1)[:, :dummies]
    return chosen.astype(np.int64)


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
        engine: how scrambler runs were simulated ("fast" or "protocol").
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
    engine: str
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
) -> list[npt.NDArray[np.bool_]]:
    """Candidate events for one direction, from the selection half.

    Categories are ranked by their empirical likelihood ratio (the Neyman-Pearson order); each
    prefix of the ranking is an event. The ``keep`` prefixes with the best selection-half
    lower bound (computed at the same Bonferroni level as the estimation) are returned.
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
        events.append(mask)
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


def audit(
    mechanism: AuditedMechanism | Declared,
    *,
    runs: int = 1_000_000,
    confidence: float = 0.95,
    delta: float | None = None,
    engine: Engine = "fast",
    rng: np.random.Generator | int | None = None,
    progress: bool = False,
) -> AuditReport:
    """Audit ``mechanism``: empirical lower bound on ε vs the accountant's upper bound.

    Args:
        mechanism: a declared mechanism (audited as implemented) or an
            :class:`AuditedMechanism` (possibly with a seeded fault).
        runs: runs per neighbouring input (>= 100); half select events, half estimate them.
        confidence: probability that the reported lower bound is below the true ε, in (0, 1).
        delta: δ of the comparison; default 1e-4 for a scrambler, 0 (pure ε) for R_σ^d.
        engine: scrambler runs are simulated by ``"fast"`` (sufficient statistics: the number
            of other sources that redraw, then conditional binomials; same distribution) or by
            ``"protocol"`` (the protocol layer's ``randomize_targets`` and ``scramble`` on one
            scrambler per run; about 20× slower at n = 100). R_σ^d always uses the protocol.
        rng: a numpy Generator, a seed, or None.
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
    if engine not in ("fast", "protocol"):
        raise InvalidParameterError("engine", "'fast' or 'protocol'", engine)
    declared = audited.declared
    if delta is None:
        delta = 0.0 if isinstance(declared, LocalRandomizer) else 1e-4
    target_delta = check_delta("delta", delta)
    generator = make_rng(rng)
    start = time.perf_counter()
    report = account(declared, delta=target_delta, monte_carlo_samples=0)
    inputs = neighbouring_inputs(declared.num_targets)
    clip = (
        1 if isinstance(declared, LocalRandomizer) else declared.batch_size + declared.num_dummies
    )
    coefficients = generator.integers(
        1, np.iinfo(np.int64).max, size=declared.num_targets + 1, dtype=np.int64
    ).astype(np.uint64) | np.uint64(1)
    codes: list[list[IntArray]] = [[], []]
    hashes: list[list[npt.NDArray[np.uint64]]] = [[], []]
    chunks = [(s, min(count, s + CHUNK_RUNS)) for s in range(0, count, CHUNK_RUNS)]
    for low, high in with_progress(chunks, enabled=progress, description="audit", unit="chunk"):
        for side, target in enumerate((inputs.target, inputs.alternative)):
            seen = audited.sample(target, inputs.others, high - low, rng=generator, engine=engine)
            code, categories = _categories(seen, inputs, clip=clip)
            codes[side].append(code)
            hashes[side].append(_hash_outputs(seen, coefficients))
    all_codes = [np.concatenate(parts) for parts in codes]
    selection_runs = count // 2
    estimation_runs = count - selection_runs
    num_events = 2 * EVENTS_PER_DIRECTION
    alpha = (1.0 - level) / (2 * num_events)
    selected = [np.bincount(c[:selection_runs], minlength=categories) for c in all_codes]
    estimated = [np.bincount(c[selection_runs:], minlength=categories) for c in all_codes]
    events: list[EventEstimate] = []
    for direction, (a, b) in (("0>1", (0, 1)), ("1>0", (1, 0))):
        masks = _select_events(
            selected[a], selected[b], selection_runs, alpha, target_delta, EVENTS_PER_DIRECTION
        )
        for mask in masks:
            hit_high = int(estimated[a][mask].sum())
            hit_low = int(estimated[b][mask].sum())
            high_lower, _ = _clopper_pearson([hit_high], estimation_runs, alpha)
            _, low_upper = _clopper_pearson([hit_low], estimation_runs, alpha)
            epsilon = float(_epsilon_bound(high_lower, low_upper, target_delta)[0])
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
    best = max(events, key=lambda e: e.epsilon, default=None)
    lower = best.epsilon if best is not None else 0.0
    view = _appendix_d(np.concatenate(hashes[0]), np.concatenate(hashes[1]))
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
        events=tuple(events),
        appendix_d=view,
        engine=engine if isinstance(declared, ScramblerMechanism) else "protocol",
        seconds=time.perf_counter() - start,
    )
