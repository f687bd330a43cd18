"""Exact output distributions by exhaustive enumeration, for tiny instances only.

This is the ground truth the tests hold every bound against, and the "enumeration" method of
the accountant when an instance is small enough. Outputs are what the observer sees: the set
of targets of R_σ^d (its d + 1 messages are sent in random order), or the count of messages
per target of a scrambler (its output is shuffled).

Neighbouring inputs differ in one source's target. For a scrambler only the multiset of the
other n − 1 targets matters (exchangeability); every multiset and every ordered pair (t, t')
is enumerated, so no symmetry argument is needed.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import cast

import numpy as np
import numpy.typing as npt

from dpcomm.accounting.mechanisms import (
    GenericLocalRandomizer,
    GenericScrambler,
    LocalRandomizer,
    Mechanism,
    ScramblerMechanism,
)
from dpcomm.accounting.search import epsilon_for_delta
from dpcomm.errors import InvalidParameterError

Distribution = dict[Hashable, float]
FloatArray = npt.NDArray[np.float64]

#: Largest `enumeration_cost` accepted (T = 5, n = 5, d = 4: about 3 s on 2 cores).
ENUMERATION_LIMIT = 50_000_000


def _row(mechanism: ScramblerMechanism | GenericScrambler, target: int) -> FloatArray:
    if isinstance(mechanism, GenericScrambler):
        generic_row: FloatArray = mechanism.randomizer.matrix[target]
        return generic_row
    row = np.full(mechanism.num_targets, mechanism.local_randomizer.other_probability)
    row[target] = mechanism.local_randomizer.truth_probability
    return row


def _dummy_distribution(mechanism: ScramblerMechanism | GenericScrambler) -> FloatArray:
    if isinstance(mechanism, GenericScrambler):
        return mechanism.randomizer.blanket
    return np.full(mechanism.num_targets, 1.0 / mechanism.num_targets)


def enumeration_cost(mechanism: Mechanism) -> int:
    """A count proportional to the work of `exact_delta` for ``mechanism``."""
    size = mechanism.num_targets
    if isinstance(mechanism, LocalRandomizer):
        return size * math.comb(size, mechanism.num_dummies + 1)
    if isinstance(mechanism, GenericLocalRandomizer):
        return size * size
    n, d = mechanism.batch_size, mechanism.num_dummies
    inputs = math.comb(n - 1 + size - 1, size - 1) * size * (size - 1)
    states = math.comb(n + d + size - 1, size - 1)
    return inputs * states * size * (n + d)


def _at_least(mechanism: Mechanism) -> int:
    """A lower bound on `enumeration_cost`, cheap for any size (no binomials)."""
    size = mechanism.num_targets
    if isinstance(mechanism, LocalRandomizer):
        return size * (size if mechanism.num_dummies <= size - 2 else 1)
    if isinstance(mechanism, GenericLocalRandomizer):
        return size * size
    return size * size * (size - 1) * (mechanism.batch_size + mechanism.num_dummies)


def check_enumerable(mechanism: Mechanism, limit: int = ENUMERATION_LIMIT) -> None:
    """Raise InvalidParameterError unless ``mechanism`` is small enough to enumerate."""
    allowed = f"a tiny instance (enumeration cost <= {limit})"
    if _at_least(mechanism) > limit:  # the binomials of the cost could take very long
        raise InvalidParameterError("mechanism", allowed, f"a cost above {limit}")
    cost = enumeration_cost(mechanism)
    if cost > limit:
        shown = cost if cost < 10**30 else f"about 2^{cost.bit_length() - 1}"
        raise InvalidParameterError("mechanism", allowed, shown)


def output_distribution(mechanism: Mechanism, inputs: int | Sequence[int]) -> Distribution:
    """The exact distribution of what the observer sees, for one input.

    ``inputs`` is a target for a local randomizer and a sequence of n targets for a scrambler.
    """
    if isinstance(mechanism, LocalRandomizer):
        return _local_distribution(mechanism, int(inputs))  # type: ignore[arg-type]
    if isinstance(mechanism, GenericLocalRandomizer):
        row = mechanism.matrix[int(inputs)]  # type: ignore[arg-type]
        return {j: float(p) for j, p in enumerate(row) if p > 0}
    assert not isinstance(inputs, int)
    return _scrambler_distribution(mechanism, list(inputs))


def _local_distribution(randomizer: LocalRandomizer, target: int) -> Distribution:
    size, dummies = randomizer.num_targets, randomizer.num_dummies
    result: defaultdict[Hashable, float] = defaultdict(float)
    subsets = math.comb(size - 1, dummies)
    for first in range(size):
        p_first = randomizer.truth_probability if first == target else randomizer.other_probability
        if p_first == 0.0:
            continue
        others = [j for j in range(size) if j != first]
        for extra in itertools.combinations(others, dummies):
            result[frozenset((first, *extra))] += p_first / subsets
    return dict(result)


def _add_message(state: Distribution, row: FloatArray) -> Distribution:
    """The distribution of the count vector after one more message drawn from ``row``."""
    moved: defaultdict[Hashable, float] = defaultdict(float)
    weights = [(j, float(w)) for j, w in enumerate(row.tolist()) if w > 0]
    for counts, p in cast("dict[tuple[int, ...], float]", state).items():
        for j, w in weights:
            moved[(*counts[:j], counts[j] + 1, *counts[j + 1 :])] += p * w
    return dict(moved)


def _real_distribution(
    mechanism: ScramblerMechanism | GenericScrambler, inputs: Sequence[int]
) -> Distribution:
    """Counts per target after the real (randomized) messages of ``inputs``."""
    state: Distribution = {(0,) * mechanism.num_targets: 1.0}
    for target in inputs:
        state = _add_message(state, _row(mechanism, target))
    return state


@lru_cache(maxsize=64)
def _final_outputs(
    mechanism: ScramblerMechanism | GenericScrambler,
) -> tuple[tuple[tuple[int, ...], ...], dict[tuple[int, ...], int]]:
    """Every count vector of n + d messages over T targets, and its index."""
    size, total = mechanism.num_targets, mechanism.batch_size + mechanism.num_dummies
    outputs = []
    for bars in itertools.combinations(range(total + size - 1), size - 1):
        edges = (-1, *bars, total + size - 1)
        outputs.append(tuple(edges[k + 1] - edges[k] - 1 for k in range(size)))
    return tuple(outputs), {output: k for k, output in enumerate(outputs)}


def _add_dummies(
    mechanism: ScramblerMechanism | GenericScrambler, state: dict[tuple[int, ...], float]
) -> dict[tuple[int, ...], float]:
    """The distribution of count vectors after the scrambler's d dummies, one at a time.

    Uncapped (S_d): each dummy goes to target j with the blanket's probability; capped (S̄_d):
    uniformly to a target that holds fewer than n messages (Algorithm 1).
    """
    size, n = mechanism.num_targets, mechanism.batch_size
    dummy = _dummy_distribution(mechanism)
    capped = isinstance(mechanism, ScramblerMechanism) and mechanism.capped
    for _ in range(mechanism.num_dummies):
        moved: defaultdict[tuple[int, ...], float] = defaultdict(float)
        for counts, p in state.items():
            if capped:
                open_targets = [j for j in range(size) if counts[j] < n]
                weights = {j: 1.0 / len(open_targets) for j in open_targets}
            else:
                weights = {j: float(dummy[j]) for j in range(size) if dummy[j] > 0}
            for j, w in weights.items():
                moved[(*counts[:j], counts[j] + 1, *counts[j + 1 :])] += p * w
        state = dict(moved)
    return state


def _dummy_expansion(
    mechanism: ScramblerMechanism | GenericScrambler, counts: tuple[int, ...]
) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Final outputs (as indices) and their probabilities after the d dummies.

    ``counts`` are the counts of the real messages. The dummies depend on the inputs only
    through these counts, so `_input_groups` computes the expansion once per count vector and
    shares it among every input. Uncapped, they do not depend on them at all: the dummies'
    own count vectors (`_dummy_offsets`, from no message) are shifted by ``counts``, which is
    what `_add_dummies` from ``counts`` computes, the same products in the same order.
    """
    index = _final_outputs(mechanism)[1]
    if isinstance(mechanism, ScramblerMechanism) and mechanism.capped:
        state = _add_dummies(mechanism, {counts: 1.0})
        positions = np.array([index[final] for final in state], dtype=np.intp)
        return positions, np.array(list(state.values()), dtype=np.float64)
    offsets, probabilities = _dummy_offsets(mechanism)
    positions = np.array(
        [index[tuple(c + o for c, o in zip(counts, offset, strict=True))] for offset in offsets],
        dtype=np.intp,
    )
    return positions, probabilities


@lru_cache(maxsize=8)
def _dummy_offsets(
    mechanism: ScramblerMechanism | GenericScrambler,
) -> tuple[tuple[tuple[int, ...], ...], FloatArray]:
    """The uncapped dummies' count vectors and their probabilities (read-only)."""
    state = _add_dummies(mechanism, {(0,) * mechanism.num_targets: 1.0})
    probabilities = np.array(list(state.values()), dtype=np.float64)
    probabilities.setflags(write=False)
    return tuple(state), probabilities


def _with_dummies(
    mechanism: ScramblerMechanism | GenericScrambler,
    real: Distribution,
    expansions: dict[tuple[int, ...], tuple[npt.NDArray[np.intp], FloatArray]],
) -> FloatArray:
    """Probability of every final output (dense over `_final_outputs`).

    ``expansions`` holds the `_dummy_expansion` of each count vector met so far (filled here).
    Uncapped, every expansion has the dummies' own probabilities (`_dummy_offsets`): all the
    terms p · q are added at once by one ``bincount``, each output's in the order of ``real``
    (the order in which the count vectors' terms were added one vector at a time).
    """
    outputs = len(_final_outputs(mechanism)[0])
    vectors = cast("list[tuple[int, ...]]", list(real))
    for counts in vectors:
        if counts not in expansions:
            expansions[counts] = _dummy_expansion(mechanism, counts)
    if not (isinstance(mechanism, ScramblerMechanism) and mechanism.capped):
        shared = _dummy_offsets(mechanism)[1]
        terms = np.array(list(real.values()))[:, None] * shared[None, :]
        positions = np.stack([expansions[counts][0] for counts in vectors])
        summed: FloatArray = np.bincount(
            positions.ravel(), weights=terms.ravel(), minlength=outputs
        ).astype(np.float64, copy=False)
        return summed
    result = np.zeros(outputs)
    for counts, p in zip(vectors, real.values(), strict=True):
        positions, probabilities = expansions[counts]
        result[positions] += p * probabilities
    return result


def _scrambler_distribution(
    mechanism: ScramblerMechanism | GenericScrambler, inputs: list[int]
) -> Distribution:
    """One input's output distribution: the d dummies applied to the whole mixture.

    (For many inputs, `_input_groups` instead shares a per-count-vector expansion.)
    """
    real = _real_distribution(mechanism, inputs)
    counts: dict[tuple[int, ...], float] = {}
    for key, p in real.items():
        assert isinstance(key, tuple)
        counts[key] = p
    result: Distribution = {}
    for final, p in _add_dummies(mechanism, counts).items():
        result[final] = p
    return result


def _real_prefixes(
    inputs: tuple[int, ...],
    rows: Sequence[FloatArray],
    prefixes: dict[tuple[int, ...], Distribution],
) -> Distribution:
    """`_real_distribution` of ``inputs``, sharing its prefixes' (kept in ``prefixes``).

    Each message is added to the prefix before it, as `_real_distribution` adds them one after
    the other: the same sums in the same order. The groups' inputs come in lexicographic
    order, so consecutive groups share all but their last messages.
    """
    known = len(inputs)
    while inputs[:known] not in prefixes:
        known -= 1
    state = prefixes[inputs[:known]]
    for position in range(known, len(inputs)):
        state = _add_message(state, rows[inputs[position]])
        prefixes[inputs[: position + 1]] = state
    return state


def _input_groups(mechanism: Mechanism) -> tuple[FloatArray, ...]:
    """Output distributions as matrices, one per group of inputs that differ in one source.

    Row t of a group is the distribution when the differing source's input is t; every
    ordered pair of rows of a group is a pair of neighbouring inputs. Columns are the outputs
    any row of the group can produce. The matrices are read-only: the last few mechanisms'
    are kept (`_enumerated_groups`), since δ(ε), the pure ε and ε(δ) of one mechanism are
    often asked for in turn.
    """
    check_enumerable(mechanism)
    return _enumerated_groups(mechanism)


@lru_cache(maxsize=8)
def _enumerated_groups(mechanism: Mechanism) -> tuple[FloatArray, ...]:
    """`_input_groups` of a mechanism already checked to be enumerable."""
    size = mechanism.num_targets
    matrices: list[FloatArray] = []
    if not isinstance(mechanism, LocalRandomizer | GenericLocalRandomizer):
        rows = [_row(mechanism, t) for t in range(size)]
        expansions: dict[tuple[int, ...], tuple[npt.NDArray[np.intp], FloatArray]] = {}
        prefixes: dict[tuple[int, ...], Distribution] = {(): {(0,) * size: 1.0}}
        for others in itertools.combinations_with_replacement(
            range(size), mechanism.batch_size - 1
        ):
            base = _real_prefixes(others, rows, prefixes)
            dense = np.array(
                [
                    _with_dummies(mechanism, _add_message(base, rows[t]), expansions)
                    for t in range(size)
                ]
            )
            matrices.append(dense[:, dense.any(axis=0)])
    else:
        rows_of_group = [output_distribution(mechanism, t) for t in range(size)]
        keys = sorted({key for row in rows_of_group for key in row}, key=repr)
        index = {key: position for position, key in enumerate(keys)}
        matrix = np.zeros((len(rows_of_group), len(keys)))
        for position, row in enumerate(rows_of_group):
            for key, p in row.items():
                matrix[position, index[key]] = p
        matrices.append(matrix)
    for matrix in matrices:
        matrix.setflags(write=False)
    return tuple(matrices)


def _group_delta(matrix: FloatArray, epsilon: float) -> float:
    """The largest hockey-stick divergence between two distinct rows of ``matrix``."""
    factor = math.exp(epsilon)
    # gaps[t, s] = max(0, P_t − e^ε P_s), every ordered pair of rows at once (a row against
    # itself is no pair); each pair's sum over the outputs is the same reduction as row by row.
    gaps = np.maximum(0.0, matrix[:, None, :] - (factor * matrix)[None, :, :])
    sums = gaps.sum(axis=2)
    np.fill_diagonal(sums, 0.0)
    return max(0.0, float(sums.max()))


def exact_delta_curve(mechanism: Mechanism, epsilons: Sequence[float]) -> FloatArray:
    """Exact δ(ε) for each ε: the largest hockey-stick divergence over neighbouring pairs."""
    groups = _input_groups(mechanism)
    return np.array([max(_group_delta(m, eps) for m in groups) for eps in epsilons])


def exact_delta(mechanism: Mechanism, epsilon: float) -> float:
    """Exact δ(ε) of ``mechanism`` (tiny instances only)."""
    return float(exact_delta_curve(mechanism, [epsilon])[0])


def exact_pure_epsilon(mechanism: Mechanism) -> float:
    """Exact pure ε: the largest |ln P(O)/P'(O)| over neighbouring pairs and outputs."""
    worst = 0.0
    for matrix in _input_groups(mechanism):
        positive = matrix > 0
        if np.any(positive.any(axis=0) & ~positive.all(axis=0)):
            return math.inf
        logs = np.log(matrix)
        worst = max(worst, float((logs.max(axis=0) - logs.min(axis=0)).max()))
    return worst


def exact_epsilon_for_delta(mechanism: Mechanism, delta: float) -> float:
    """Smallest ε (to 1e-9, rounded up) with exact δ(ε) ≤ δ; inf if none."""
    groups = _input_groups(mechanism)

    def curve(eps: float) -> float:
        return max(_group_delta(m, eps) for m in groups)

    return epsilon_for_delta(curve, delta, upper=math.inf, tolerance=1e-9)
