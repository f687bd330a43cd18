"""The capped lower bound's anti-diagonal dynamic programme equals the full (a, b) table's."""

import math

import numpy as np
import pytest

from dpcomm.accounting import ScramblerMechanism
from dpcomm.accounting.lower_bound import (
    CappedLowerBound,
    capped_two_target_outputs,
)


def _full_table(messages, *, num_targets, batch_size, num_dummies):
    """The former O((n + d) n²) programme over the whole (n + 1) x (n + 1) table of (a, b)."""
    n = batch_size
    state = np.zeros((n + 1, n + 1))
    state[0, 0] = 1.0
    log_scale = 0.0

    def rescale(values):
        peak = float(values.max())
        return (values, 0.0) if peak <= 0.0 else (values / peak, math.log(peak))

    for to_u, to_v in messages:
        moved = np.zeros_like(state)
        moved[1:, :] += to_u * state[:-1, :]
        moved[:, 1:] += to_v * state[:, :-1]
        state, shift = rescale(moved)
        log_scale += shift
    a = np.arange(n + 1)[:, None]
    b = np.arange(n + 1)[None, :]
    allowed = num_targets - (a >= n).astype(float) - (b >= n).astype(float)
    safe = np.maximum(allowed, 1.0)
    step_u = np.where(a < n, 1.0 / safe, 0.0)
    step_v = np.where(b < n, 1.0 / safe, 0.0)
    for _ in range(num_dummies):
        moved = np.zeros_like(state)
        moved[1:, :] += (step_u * state)[:-1, :]
        moved[:, 1:] += (step_v * state)[:, :-1]
        state, shift = rescale(moved)
        log_scale += shift
    return state[(a + b) == n + num_dummies], log_scale


@pytest.mark.parametrize(
    ("size", "n", "d"), [(2, 1, 0), (2, 3, 2), (3, 4, 1), (3, 2, 4), (5, 6, 6), (20, 7, 13)]
)
def test_anti_diagonal_equals_the_full_table(size, n, d):
    truth, other = 0.7, 0.1
    families = [
        ((truth, other), (truth, other), (other, truth)),
        ((other, truth), (truth, other), (other, other)),
    ]
    scaled, log_scale = capped_two_target_outputs(
        families, num_targets=size, batch_size=n, num_dummies=d
    )
    for index, (others, first, second) in enumerate(families):
        for row, last in ((2 * index, first), (2 * index + 1, second)):
            expected, expected_log = _full_table(
                [others] * (n - 1) + [last], num_targets=size, batch_size=n, num_dummies=d
            )
            assert scaled[row] * math.exp(log_scale[row]) == pytest.approx(
                expected * math.exp(expected_log), rel=1e-12, abs=0.0
            )


def test_capped_lower_bound_is_computed_at_the_papers_sizes():
    """n = 700, d = 50 (beyond the former O((n + d) n²) limit) gives a positive lower bound."""
    mechanism = ScramblerMechanism(
        num_targets=2, sampling_rate=0.2, batch_size=700, num_dummies=50, capped=True
    )
    lower = CappedLowerBound(mechanism)
    assert lower.evaluated
    assert 0.0 < lower.pure_epsilon() <= math.log(1.0 + 0.8 * 2 / 0.2)
