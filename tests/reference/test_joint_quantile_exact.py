"""The joint guarantee of traffic and a released quantile, against its exact δ(ε).

The release is OpenDP's quantile (exponential noise on the candidates' scores, pure ε2) per
released cell over the candidates lo, …, hi, calibrated to `quantile_distance` of the
countermeasure's `JointView` (2 values per grouping set where each tuple is independent, 3
under scramblers with sampling: one other source's tuple delivered in one world only). The
library's claim (`_joint_exact.quantile_claim`) is compared with the exact hockey-stick sum of
(traffic view, released quantiles) over every neighbouring pair, other sources on every key
(the destination's included). The release's law is exact (`quantile_law`, a finite sum): no
tail is dropped.
"""

from __future__ import annotations

import collections

import pytest
from _joint_exact import Instance, claim, quantile_worst_pairs

from dpcomm.release.quantile import (
    calibrate_quantile,
    candidate_grid,
    quantile_law,
    released_quantile,
)

DELTAS = (0.3, 0.1, 1e-2, 1e-3)
TOLERANCE = 1e-12

ONE_PER_NODE = (("a", 0, True), ("b", 1, True))
SHARED = (("a", 0, True), ("c", 0, True), ("b", 1, True))
TWO_OF_THREE = (("a", 0, True), ("b", 1, True))

INSTANCES = [
    # one-other (d = 3), with a dummy; values {0, 1} and {0, 1, 2}
    Instance(2, ONE_PER_NODE, "quantile", 0, 1, "scrambler", 0.3, 3, 1, 2.0),
    Instance(2, ONE_PER_NODE, "quantile", 0, 2, "scrambler", 0.5, 2, 0, 3.0),
    Instance(2, ONE_PER_NODE, "quantile", 0, 2, "scrambler", 0.5, 2, 0, 3.0, alpha=0.25),
    # one-other-shared-node (d = 3)
    Instance(2, SHARED, "quantile", 0, 1, "scrambler", 0.5, 2, 0, 3.0),
    # own-row (d = 2): the local randomizer
    Instance(3, TWO_OF_THREE, "quantile", 0, 1, "local", 0.3, 2, 1, 2.0),
]


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: i.label())
def test_quantile_claim_holds_on_every_pair(instance):
    for delta in DELTAS:
        epsilon, scale = claim(instance, delta)
        worst, pairs = quantile_worst_pairs(instance, [epsilon], scale)
        assert pairs > 0
        assert worst[0].delta <= delta + TOLERANCE, (delta, epsilon, worst[0])


def test_quantile_law_is_opendps():
    """The exact law used above is the law of OpenDP's draws (3,000 draws, 5 candidates)."""
    candidates = candidate_grid(0.0, 4.0, 5)
    noise = calibrate_quantile("m", 1.0, 0.5, candidates, 2)
    counts = [0, 1, 1, 0, 0, 2, 1, 0, 1]
    law = quantile_law(counts, 0.5, noise.scale)
    draws = collections.Counter(released_quantile(noise, counts) for _ in range(3_000))
    for value, probability in zip(candidates, law, strict=True):
        frequency = draws[value] / 3_000
        assert abs(frequency - probability) < 4.5 * (probability * (1 - probability) / 3_000) ** 0.5
