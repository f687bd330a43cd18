"""The exhaustive enumeration of one mechanism is computed once for δ(ε), the pure ε and ε(δ).

The matrices are kept (read-only) for the last few mechanisms; they are what a row-by-row
enumeration of every neighbouring pair gives (`output_distribution`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcomm.accounting import ScramblerMechanism, brute_force as bf

MECHANISM = {"num_targets": 3, "sampling_rate": 0.4, "batch_size": 3, "num_dummies": 2}


def _pairwise_delta(mechanism: ScramblerMechanism, epsilon: float) -> float:
    """δ(ε) from every neighbouring pair of inputs, each output distribution on its own."""
    worst = 0.0
    size = mechanism.num_targets
    for others in itertools.product(range(size), repeat=mechanism.batch_size - 1):
        rows = [bf.output_distribution(mechanism, [t, *others]) for t in range(size)]
        for p, q in itertools.permutations(rows, 2):
            gap = sum(max(0.0, v - math.exp(epsilon) * q.get(o, 0.0)) for o, v in p.items())
            worst = max(worst, gap)
    return worst


@pytest.mark.parametrize("capped", [False, True])
def test_the_enumeration_is_shared_and_read_only(capped: bool) -> None:
    first = bf._input_groups(ScramblerMechanism(**MECHANISM, capped=capped))
    again = bf._input_groups(ScramblerMechanism(**MECHANISM, capped=capped))
    assert again is first  # an equal mechanism: the same matrices, not an enumeration anew
    assert all(not matrix.flags.writeable for matrix in first)
    with pytest.raises(ValueError):
        first[0][0, 0] = 1.0


@pytest.mark.parametrize("capped", [False, True])
def test_the_shared_enumeration_is_every_pair_enumerated_alone(capped: bool) -> None:
    mechanism = ScramblerMechanism(**MECHANISM, capped=capped)
    epsilons = [0.0, 0.3, 1.0]
    curve = bf.exact_delta_curve(mechanism, epsilons)
    expected = [_pairwise_delta(mechanism, eps) for eps in epsilons]
    np.testing.assert_allclose(curve, expected, rtol=1e-12, atol=1e-15)
    assert curve[0] > 0.0
