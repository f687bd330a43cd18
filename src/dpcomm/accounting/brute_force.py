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

#: Largest :func:`enumeration_cost` accepted (T = 5, n = 5, d = 4: about 3 s on 2 cores).
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
    """A count proportional to the work of :func:`exact_delta` for ``mechanism``."""
    size = mechanism.num_targets
    if isinstance(mechanism, LocalRandomizer):
        return size * math.comb(size, mechanism.num_dummies + 1)
    if isinstance(mechanism, GenericLocalRandomizer):
        return size * size
    n, d = mechanism.batch_size, mechanism.num_dummies
    inputs = math.comb(n - 1 + size - 1, size - 1) * size * (size - 1)
    states = math.comb(n + d + size - 1, size - 1)
    return inputs * states * size * (n + d)


def check_enumerable(mechanism: Mechanism, limit: int = ENUMERATION_LIMIT) -> None:
    """Raise InvalidParameterError unless ``mechanism`` is small enough to enumerate."""
    cost = enumeration_cost(mechanism)
    if cost > limit:
        raise InvalidParameterError(
            "mechanism", f"a tiny instance (enumeration cost <= {limit})", cost
        )


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


def _scrambler_distribution(
    mechanism: ScramblerMechanism | GenericScrambler, inputs: list[int]
) -> Distribution:
    size, n = mechanism.num_targets, mechanism.batch_size
    state: dict[tuple[int, ...], float] = {(0,) * size: 1.0}
    for target in inputs:
        row = _row(mechanism, target)
        moved: defaultdict[tuple[int, ...], float] = defaultdict(float)
        for counts, p in state.items():
            for j in range(size):
                if row[j] > 0:
                    key = (*counts[:j], counts[j] + 1, *counts[j + 1 :])
                    moved[key] += p * float(row[j])
        state = dict(moved)
    dummy = _dummy_distribution(mechanism)
    capped = isinstance(mechanism, ScramblerMechanism) and mechanism.capped
    for _ in range(mechanism.num_dummies):
        moved = defaultdict(float)
        for counts, p in state.items():
            if capped:
                open_targets = [j for j in range(size) if counts[j] < n]
                weights = {j: 1.0 / len(open_targets) for j in open_targets}
            else:
                weights = {j: float(dummy[j]) for j in range(size) if dummy[j] > 0}
            for j, w in weights.items():
                key = (*counts[:j], counts[j] + 1, *counts[j + 1 :])
                moved[key] += p * w
        state = dict(moved)
    return dict(state.items())


def _neighbouring_pairs(mechanism: Mechanism) -> list[tuple[Distribution, Distribution]]:
    check_enumerable(mechanism)
    size = mechanism.num_targets
    pairs = []
    if isinstance(mechanism, LocalRandomizer | GenericLocalRandomizer):
        cache = {t: output_distribution(mechanism, t) for t in range(size)}
        return [(cache[t], cache[u]) for t in range(size) for u in range(size) if t != u]
    n = mechanism.batch_size
    for others in itertools.combinations_with_replacement(range(size), n - 1):
        cache = {t: output_distribution(mechanism, (*others, t)) for t in range(size)}
        pairs += [(cache[t], cache[u]) for t in range(size) for u in range(size) if t != u]
    return pairs


def _pair_delta(first: Distribution, second: Distribution, epsilon: float) -> float:
    factor = math.exp(epsilon)
    return math.fsum(max(0.0, p - factor * second.get(o, 0.0)) for o, p in first.items())


def exact_delta_curve(mechanism: Mechanism, epsilons: Sequence[float]) -> FloatArray:
    """Exact δ(ε) for each ε: the largest hockey-stick divergence over neighbouring pairs."""
    pairs = _neighbouring_pairs(mechanism)
    return np.array([max(_pair_delta(p, q, eps) for p, q in pairs) for eps in epsilons])


def exact_delta(mechanism: Mechanism, epsilon: float) -> float:
    """Exact δ(ε) of ``mechanism`` (tiny instances only)."""
    return float(exact_delta_curve(mechanism, [epsilon])[0])


def exact_pure_epsilon(mechanism: Mechanism) -> float:
    """Exact pure ε: the largest |ln P(O)/P'(O)| over neighbouring pairs and outputs."""
    worst = 0.0
    for first, second in _neighbouring_pairs(mechanism):
        for output in set(first) | set(second):
            p, q = first.get(output, 0.0), second.get(output, 0.0)
            if (p > 0) != (q > 0):
                return math.inf
            if p > 0:
                worst = max(worst, abs(math.log(p / q)))
    return worst


def exact_epsilon_for_delta(mechanism: Mechanism, delta: float) -> float:
    """Smallest ε (to 1e-9, rounded up) with exact δ(ε) ≤ δ; inf if none."""
    pairs = _neighbouring_pairs(mechanism)

    def curve(eps: float) -> float:
        return max(_pair_delta(p, q, eps) for p, q in pairs)

    return epsilon_for_delta(curve, delta, upper=math.inf, tolerance=1e-9)
