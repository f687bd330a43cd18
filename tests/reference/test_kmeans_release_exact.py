"""K-means's release against the exact δ(ε) of the joint mechanism, on tiny instances.

One iteration of a released K-means publishes, per cluster, a centred SUM of the clamped
coordinates and a COUNT, over the points the traffic delivered: a release per cluster key,
one key per compute node (`dpcomm.release.kmeans`). The noise K-means calibrates (Laplace,
I = 1, one coordinate in [0, 2]: ε2 split between the sum and the count) is run through the
exact joint law of `_joint_exact` for each released vector, over every neighbouring pair;
and a seeded fault, the same release bound as if each point were delivered independently
(``own-row``) under scramblers with sampling, exceeds its claimed δ on one pair.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from _joint_exact import Instance, claim, worst_pairs
from test_joint_release_exact import DELTAS, ONE_PER_NODE, TOLERANCE, _pair_delta

from dpcomm.release.kmeans import bind_kmeans_release
from dpcomm.release.mechanisms import Laplace

#: ε2 of the K-means release: 2 vectors (the centred sum, the count), split by K-means.
EPSILON2 = 6.0


def _kmeans_noise(
    function: str, *, shared_blanket: bool, epsilon2: float = EPSILON2
) -> tuple[float, float]:
    """(ε_v, scale) K-means calibrates for its ``function`` vector (``sum`` or ``count``)."""
    noises = bind_kmeans_release(
        Laplace(epsilon2),
        [(0.0, 2.0)],
        dimension=1,
        num_iterations=1,
        shared_blanket=shared_blanket,
    ).iteration_noises(1)
    noise = noises[0 if function == "sum" else 1]
    return noise.epsilon, noise.scale


def _instance(mechanism: str, function: str, sigma: float, batch: int, dummies: int) -> Instance:
    """The exact check's instance of that vector, at the share of ε2 K-means gives it."""
    shared = mechanism == "scrambler" and sigma > 0.0
    share, _ = _kmeans_noise(function, shared_blanket=shared)
    return Instance(
        2, ONE_PER_NODE, function, 0, 2 if function == "sum" else 1, mechanism, sigma, batch,
        dummies, share, centred=function == "sum",
    )  # fmt: skip


CASES = [
    _instance("scrambler", "sum", 0.3, 3, 1),
    _instance("scrambler", "count", 0.3, 3, 1),
    _instance("scrambler", "sum", 0.0, 3, 4),
    _instance("local", "sum", 0.3, 2, 1),
    _instance("local", "count", 0.3, 2, 0),
]


@pytest.mark.parametrize("instance", CASES, ids=lambda i: i.label())
def test_kmeans_noise_holds_on_every_pair(instance: Instance) -> None:
    """K-means's scale is the joint view's; the exact δ at the claimed ε is at most δ."""
    shared = instance.mechanism == "scrambler" and instance.sigma > 0.0
    _, scale = _kmeans_noise(instance.function, shared_blanket=shared)
    claims = [claim(instance, delta) for delta in DELTAS]
    assert all(math.isclose(s, scale) for _, s in claims)
    finite = [(eps, delta) for (eps, _), delta in zip(claims, DELTAS, strict=True)]
    finite = [(eps, delta) for eps, delta in finite if math.isfinite(eps)]
    worst, _ = worst_pairs(instance, [eps for eps, _ in finite], scale)
    for entry, (eps, delta) in zip(worst, finite, strict=True):
        assert entry.delta <= delta + TOLERANCE, (instance.label(), eps, delta, entry)


def test_seeded_fault_own_row_kmeans_release_under_scramblers_fails() -> None:
    """Bound without the shared blanket (hi − lo instead of 1.5 (hi − lo)), it leaks.

    ε2 = 5 gives the sum about 3 (the centred sum's power case of the SQL release).
    """
    delta = 1e-3
    share, faulty = _kmeans_noise("sum", shared_blanket=False, epsilon2=5.0)
    instance = dataclasses.replace(_instance("scrambler", "sum", 0.1, 300, 0), epsilon2=share)
    eps, scale = claim(instance, delta, "own-row")
    assert math.isclose(scale, faulty)
    value, _ = _pair_delta(instance, (1, 1), (0, 1), (1, -1), eps, faulty)
    assert value > 2.0 * delta, (eps, value)
    share, right = _kmeans_noise("sum", shared_blanket=True, epsilon2=5.0)
    instance = dataclasses.replace(instance, epsilon2=share)
    eps, scale = claim(instance, delta)
    assert math.isclose(scale, right)
    value, left_out = _pair_delta(instance, (1, 1), (0, 1), (1, -1), eps, right)
    assert value + left_out <= delta + TOLERANCE, (eps, value)
